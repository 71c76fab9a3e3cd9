//! A site's share: starts and concurrency slots that one `RESERVE` took for this instance's
//! next requests, where the pace is finer than the timer, so that most requests of a busy site
//! need no call to Redis (issue 40, Speed).
//!
//! Where a site's rate is finer than the timer's tick (`pacing::TICK`) and its request needs
//! no Crawl-delay, a start less than a tick ahead goes at once in its reserved place (the
//! schedule's rule, and `RESERVE`'s). So a `RESERVE` that lets its request go may reserve, in
//! the same call, the next places of the rate that also fall within that tick, and slots for
//! them when the site has a concurrency limit ([`super::scripts::RESERVE`], `want` and
//! `slots_wanted`): the request that made the call goes, and the next requests of this
//! instance take a start and a slot each from the share, with no call of their own. A slot
//! whose request ended goes back to the share's pool rather than to Redis, while the fleet had
//! room at its last call ([`ROOMY`]), and serves the next request. What that keeps and what it
//! gives up:
//!
//! * **The rate, over any span, as before:** every start is reserved in Redis one spacing
//!   after the last, on Redis's clock, whoever uses it; a start goes at most a tick early (as
//!   any start finer than the tick does) and at most a tick after its own place
//!   ([`SHARE_LIFE`]: the n-th start of a share lives until a tick after the answer plus n
//!   spacings), so a tick each way is still the only slack.
//! * **The concurrency of the fleet, exactly:** every slot of the pool is held in Redis, in use
//!   or not; a share never takes more than half of the slots still free, and none while a
//!   request of the fleet waits for one (`slotq`); a slot goes back to the pool only within
//!   [`ROOMY`] of a call that found at most half the limit held and nobody waiting, and leaves
//!   it for Redis after [`ROOMY`] unused. So a request of another instance waits behind slots
//!   this one keeps for at most twice [`ROOMY`], and only when the site filled from half to
//!   full within it.
//! * **What a share loses:** a start nobody here used within its life is not given back (a
//!   later start may have been reserved after it): the site's pace forgoes at most a tick of
//!   its rate per share left unused. How many starts a share asks for follows this instance's
//!   demand: half as many again when it runs low within their life (then a refill goes ahead
//!   of need, off any request's path), twice as many when it ran out, as many fewer as went
//!   unused ([`MOST`] at most, and never more than fit in a tick of the rate).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use robots_proxy_authority::Authority;
use robots_proxy_pace::TICK;

/// The most starts one share asks for.
pub(super) const MOST: u32 = 64;

/// How many refills a request waits for before it makes its own call (asking for no places).
pub(super) const MOST_LOOKS: u32 = 3;

/// How long a start of a share may be used after its place: a tick. Its place is taken as
/// the answer that brought it plus as many spacings as starts before it in the share (the
/// places lie one spacing apart from Redis's clock at the call on, which is before the
/// answer): never later than the place is, so a start is never used more than a tick after
/// it, and the last starts of a large share live as long as the first.
pub(super) const SHARE_LIFE: Duration = TICK;

/// How long after a call that found room (at most half the site's limit held, nobody waiting
/// for a slot) a slot whose request ended may go back to the pool instead of to Redis, and
/// how long a slot waits in the pool for a request.
pub(super) const ROOMY: Duration = Duration::from_millis(10);

/// A slot of the pool: its member (its name in Redis), when it was taken or last renewed in
/// Redis, and until when it may wait for a request ([`ROOMY`] after it came to the pool).
pub(super) struct Pooled {
    pub(super) member: String,
    pub(super) renewed: Instant,
    until: Instant,
}

/// One site's share, for one set of parameters (a reload that changes the rate or the limit
/// leaves the old share to expire).
#[derive(Default)]
pub(super) struct Share {
    interval: u64,
    slots: usize,
    /// Until when each start may be used.
    starts: VecDeque<Instant>,
    /// Slots held in Redis that no request uses.
    pool: VecDeque<Pooled>,
    /// How many starts the next `RESERVE` asks for.
    want: u32,
    /// When the last places arrived.
    last: Option<Instant>,
    /// Whether a request's `RESERVE` asking for places is under way.
    refilling: bool,
    /// The requests waiting for it.
    waiting: u32,
    /// How many waited for the last refill: the next asks for at least as many.
    seen: u32,
    /// Until when a slot whose request ended may go back to the pool ([`ROOMY`]).
    roomy_until: Option<Instant>,
    /// Whether a task gives back the pool's slots that outlive their life.
    swept: bool,
    /// The share's slots in use by requests: most come back to the pool soon.
    lent: u32,
}

impl Share {
    /// Takes out the starts and pooled slots past their life (the slots to give back) and
    /// adjusts `want` by the starts unused.
    fn expire(&mut self, now: Instant) -> Vec<String> {
        let mut unused = 0u32;
        while self.starts.front().is_some_and(|until| *until <= now) {
            self.starts.pop_front();
            unused = unused.saturating_add(1);
        }
        self.want = self.want.saturating_sub(unused);
        let mut gone = Vec::new();
        while self.pool.front().is_some_and(|p| p.until <= now) {
            if let Some(p) = self.pool.pop_front() {
                gone.push(p.member);
            }
        }
        gone
    }

    /// Whether a request finds what it needs: a start (with a rate) and a slot (with a limit).
    fn has_place(&self) -> bool {
        (self.interval == 0 || !self.starts.is_empty())
            && (self.slots == 0 || !self.pool.is_empty())
    }

    /// How many requests the share has places for.
    fn places(&self) -> usize {
        match (self.interval > 0, self.slots > 0) {
            (true, true) => self.starts.len().min(self.pool.len()),
            (true, false) => self.starts.len(),
            _ => self.pool.len(),
        }
    }

    /// What a refill asks for: `want` starts, and slots for those the pool cannot serve,
    /// counting half the slots in use as coming back soon (asking for all of them again made
    /// the pool outgrow the load, and the surplus went back to Redis 10 ms later).
    fn ask(&self) -> Ask {
        let slots = if self.slots > 0 {
            let pooled = u32::try_from(self.pool.len()).unwrap_or(u32::MAX);
            self.want.saturating_sub(pooled.saturating_add(self.lent / 2))
        } else {
            0
        };
        Ask { starts: self.want, slots }
    }
}

/// What a refill asks `RESERVE` for, beside its own request's start and slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Ask {
    pub(super) starts: u32,
    pub(super) slots: u32,
}

/// A site's slots key and pace key in Redis, made once for its share (not per request), and
/// shared by the slots held under them ([`super::slots`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct SiteKeys {
    pub(super) slots: Arc<str>,
    pub(super) pace: Arc<str>,
}

/// A site's share and the notice that a refill ended.
pub(super) struct Site {
    pub(super) keys: SiteKeys,
    share: Mutex<Share>,
    /// Bumped each time a refill ends (with places or not).
    refilled: watch::Sender<u64>,
}

/// What a request finds in its site's share. Each carries the members of pooled slots that
/// outlived their life, to be given back to Redis.
pub(super) enum Taken {
    /// A place: its slot from the pool (with a limit); `ahead`, when the share runs low and no
    /// refill is under way: a refill to make off the request's path, so that the next requests
    /// find places still.
    Place { slot: Option<Pooled>, ahead: Option<(Ask, Refill)>, expired: Vec<String> },
    /// None left, and another request's `RESERVE` is bringing more: wait for it, then look
    /// again.
    Wait { refilled: watch::Receiver<u64>, expired: Vec<String> },
    /// None: this request's `RESERVE` asks for `ask`, and the others wait for it until
    /// `refill` is dropped or given to [`Shares::put`].
    Refill { ask: Ask, refill: Refill, expired: Vec<String> },
    /// None, and this request asks for none (it waited for [`MOST_LOOKS`] refills already, and
    /// another is under way).
    Alone { expired: Vec<String> },
}

impl Taken {
    pub(super) fn expired(&mut self) -> Vec<String> {
        match self {
            Taken::Place { expired, .. }
            | Taken::Wait { expired, .. }
            | Taken::Refill { expired, .. }
            | Taken::Alone { expired } => std::mem::take(expired),
        }
    }
}

/// A refill under way: when dropped (answered or not, or its request dropped), the requests
/// waiting for it look again.
pub(super) struct Refill(Arc<Site>);

impl Drop for Refill {
    fn drop(&mut self) {
        robots_proxy_sync::lock(&self.0.share).refilling = false;
        self.0.refilled.send_modify(|n| *n = n.wrapping_add(1));
    }
}

/// What a refill brought: `starts` more starts, `slots` more slots (their members), taken when
/// Redis's answer came (`received`); `room`: the site had room then ([`ROOMY`]).
pub(super) struct Brought {
    pub(super) starts: u32,
    pub(super) slots: Vec<String>,
    pub(super) received: Instant,
    pub(super) room: bool,
}

/// Every site's share, by authority.
pub(super) struct Shares {
    sites: moka::sync::Cache<Authority, Arc<Site>>,
}

impl Shares {
    pub(super) fn new() -> Self {
        Shares {
            sites: moka::sync::Cache::builder()
                .max_capacity(robots_proxy_pace::MAX_SITES)
                .time_to_idle(Duration::from_secs(10))
                .build(),
        }
    }

    /// The share of `authority`, made with its keys (`keys`) when it has none.
    pub(super) fn of(&self, authority: &Authority, keys: impl FnOnce() -> SiteKeys) -> Arc<Site> {
        self.sites.get_with_by_ref(authority, || {
            Arc::new(Site {
                keys: keys(),
                share: Mutex::new(Share { want: 1, ..Share::default() }),
                refilled: watch::channel(0).0,
            })
        })
    }
}

impl Site {
    /// A place of this share (taken with these parameters), if one is left within its life;
    /// otherwise whether to wait for a refill under way, or to refill. `looked`: how many
    /// refills the request waited for already (after [`MOST_LOOKS`], it waits no more). A
    /// refill asks for twice as many starts as the last when those ran out within their life,
    /// as many fewer as went unused, and at least as many as waited for the last; one goes
    /// ahead, asking for half as many again, when fewer than half are left.
    pub(super) fn take(self: &Arc<Self>, (interval, slots): (u64, usize), looked: u32) -> Taken {
        let now = Instant::now();
        let site = self;
        let mut share = robots_proxy_sync::lock(&site.share);
        let mut expired = share.expire(now);
        if share.interval != interval || share.slots != slots {
            share.starts.clear();
            expired.extend(share.pool.drain(..).map(|p| p.member));
            share.interval = interval;
            share.slots = slots;
        }
        if looked > 0 {
            share.waiting = share.waiting.saturating_sub(1);
        }
        if share.has_place() {
            if interval > 0 {
                share.starts.pop_front();
            }
            let slot = if slots > 0 { share.pool.pop_front() } else { None };
            share.lent = share.lent.saturating_add(u32::from(slot.is_some()));
            let left = u32::try_from(share.places()).unwrap_or(u32::MAX);
            let mut ahead = None;
            if !share.refilling && share.want >= 2 && left.saturating_mul(2) < share.want {
                // Running low within their life: demand keeps up with the share, which grows.
                share.want = share.want.saturating_add(share.want / 2).max(share.seen).min(MOST);
                share.refilling = true;
                ahead = Some((share.ask(), Refill(site.clone())));
            }
            return Taken::Place { slot, ahead, expired };
        }
        if share.refilling {
            if looked >= MOST_LOOKS {
                return Taken::Alone { expired };
            }
            share.waiting = share.waiting.saturating_add(1);
            return Taken::Wait { refilled: site.refilled.subscribe(), expired };
        }
        // Ran out: within their life, demand is ahead of the share; after, it kept pace.
        let lately = share.last.is_some_and(|l| now.saturating_duration_since(l) < SHARE_LIFE * 2);
        if expired.is_empty() && lately {
            share.want = share.want.saturating_mul(2);
        }
        share.want = share.want.max(share.seen).clamp(1, MOST);
        share.refilling = true;
        let ask = share.ask();
        drop(share);
        Taken::Refill { ask, refill: Refill(site.clone()), expired }
    }
}

impl Shares {
    /// What the `RESERVE` of `refill` brought; then the requests waiting for it look. Returns
    /// the site when its pool needs a task to give back the slots that outlive their life
    /// ([`sweep`]).
    pub(super) fn put(&self, refill: Refill, brought: Brought) -> Option<Weak<Site>> {
        let site = Arc::downgrade(&refill.0);
        let sweep = {
            let mut share = robots_proxy_sync::lock(&refill.0.share);
            share.last = Some(Instant::now());
            share.seen = share.waiting;
            if share.interval > 0 {
                let (first, step) =
                    (brought.received + SHARE_LIFE, Duration::from_micros(share.interval));
                share.starts.extend((0..brought.starts).map(|n| first + step * n));
                // The earliest to lapse is taken first, and `expire` looks at the front only.
                share.starts.make_contiguous().sort_unstable();
            }
            // Slots wait for a request as long as the fleet has room, a start's life if not.
            let (renewed, until) = (brought.received, brought.received + ROOMY);
            let until = if brought.room { until } else { brought.received + SHARE_LIFE };
            share.pool.extend(brought.slots.into_iter().map(|member| Pooled {
                member,
                renewed,
                until,
            }));
            share.roomy_until = brought.room.then(|| brought.received + ROOMY);
            share.needs_sweep()
        };
        drop(refill);
        sweep.then_some(site)
    }
}

impl Share {
    /// Whether the pool holds slots and no task gives back those that outlive their life; if
    /// so, the caller starts one ([`sweep`]).
    fn needs_sweep(&mut self) -> bool {
        if self.pool.is_empty() || self.swept {
            return false;
        }
        self.swept = true;
        true
    }
}

/// A slot whose request ended, back to the pool of `site` if the fleet had room lately and its
/// lease has more than half to run (`fresh`: renewed after it). `Err` gives it back to the
/// caller, for Redis; `Ok(true)`: pooled, and the pool needs a task to sweep it ([`sweep`]).
pub(super) fn pool(
    site: &Weak<Site>,
    member: String,
    renewed: Instant,
    fresh: Instant,
) -> Result<bool, String> {
    let Some(site) = site.upgrade() else { return Err(member) };
    let now = Instant::now();
    let mut share = robots_proxy_sync::lock(&site.share);
    share.lent = share.lent.saturating_sub(1);
    if share.slots == 0 || renewed < fresh || share.roomy_until.is_none_or(|until| now >= until) {
        return Err(member);
    }
    share.pool.push_back(Pooled { member, renewed, until: now + ROOMY });
    Ok(share.needs_sweep())
}

/// The names of the `n` slots a `RESERVE` of `member` took beside its own, as
/// [`super::scripts::RESERVE`] names them (`<member>/1`, `<member>/2`, ...).
pub(super) fn members(member: &str, n: u32) -> impl Iterator<Item = String> + '_ {
    (1..=n).map(move |i| format!("{member}/{i}"))
}

/// Waits until the refill `refilled` watches ends, or `most`.
pub(super) async fn refilled(mut refilled: watch::Receiver<u64>, most: Duration) {
    let _ = tokio::time::timeout(most, refilled.changed()).await;
}

/// Every half of [`ROOMY`], the slots of `site`'s pool past their life, taken out (to give
/// back to Redis), and whether the pool is empty (or the site gone): then the task ends.
pub(super) async fn sweep(site: &Weak<Site>) -> (Vec<String>, bool) {
    tokio::time::sleep(ROOMY / 2).await;
    let Some(site) = site.upgrade() else { return (Vec::new(), true) };
    let mut share = robots_proxy_sync::lock(&site.share);
    let gone = share.expire(Instant::now());
    let done = share.pool.is_empty();
    if done {
        share.swept = false;
    }
    (gone, done)
}

impl Shares {
    /// Empties every share (the store lost its state, or was out of reach): its starts may no
    /// longer be in Redis's pace, and its pooled slots not in Redis's count (the slots in use
    /// are put back with the instance's others). Returns each site's slots key, pace key and
    /// pooled slots, to give back to Redis (they may still be there).
    pub(super) fn empty_all(&self) -> Vec<(SiteKeys, Vec<String>)> {
        let mut pooled = Vec::new();
        for (_, site) in self.sites.iter() {
            let mut share = robots_proxy_sync::lock(&site.share);
            share.starts.clear();
            let members: Vec<String> = share.pool.drain(..).map(|p| p.member).collect();
            if !members.is_empty() {
                pooled.push((site.keys.clone(), members));
            }
        }
        pooled
    }

    /// The share of `authority`, for a slot (just taken in Redis, not from the pool) that may
    /// go back to its pool when its request ends: counted as lent until then.
    pub(super) fn lend(&self, authority: &Authority) -> Option<Arc<Site>> {
        let site = self.sites.get(authority)?;
        let mut share = robots_proxy_sync::lock(&site.share);
        share.lent = share.lent.saturating_add(1);
        drop(share);
        Some(site)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brought(starts: u32, slots: usize, room: bool) -> Brought {
        let slots = (0..slots).map(|i| format!("m/{i}")).collect();
        Brought { starts, slots, received: Instant::now(), room }
    }

    const P: (u64, usize) = (10, 100);

    fn site() -> Authority {
        Authority::new(robots_proxy_authority::Scheme::Http, "site.example", 80)
            .expect("an authority")
    }

    fn keys() -> SiteKeys {
        SiteKeys { slots: "s".into(), pace: "p".into() }
    }

    fn take(shares: &Shares, params: (u64, usize), looked: u32) -> Taken {
        shares.of(&site(), keys).take(params, looked)
    }

    fn refill(shares: &Shares, params: (u64, usize)) -> (Ask, Refill, Vec<String>) {
        match take(shares, params, 0) {
            Taken::Refill { ask, refill, expired } => (ask, refill, expired),
            _ => panic!("expected to refill"),
        }
    }

    fn slot_of(taken: Taken) -> String {
        match taken {
            Taken::Place { slot: Some(slot), expired, .. } => {
                assert!(expired.is_empty());
                slot.member
            }
            _ => panic!("no place"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn places_go_in_order_within_their_life_and_the_next_ask_follows_demand() {
        let shares = Shares::new();
        let (ask, r, expired) = refill(&shares, P);
        assert_eq!(
            (ask, expired.len()),
            (Ask { starts: 1, slots: 1 }, 0),
            "a new site asks for one"
        );
        // While it is under way, the next request waits for it, and finds its place after.
        let Taken::Wait { refilled: notice, .. } = take(&shares, P, 0) else {
            panic!("a second refill started beside the first")
        };
        assert!(shares.put(r, brought(2, 2, true)).is_some(), "a pool with no task to sweep it");
        refilled(notice, Duration::from_secs(1)).await;
        assert_eq!(slot_of(take(&shares, P, 1)), "m/0");
        assert_eq!(slot_of(take(&shares, P, 0)), "m/1");
        // Ran out within their life: the next share asks for twice as many starts, and slots
        // for them less half of the two in use (they come back to the pool soon).
        let (ask, r, _) = refill(&shares, P);
        assert_eq!(ask, Ask { starts: 2, slots: 1 });
        // One that waited for as many refills as it may goes alone.
        assert!(matches!(take(&shares, P, 1), Taken::Wait { .. }));
        assert!(matches!(take(&shares, P, MOST_LOOKS), Taken::Alone { .. }));
        assert!(shares.put(r, brought(2, 2, true)).is_none(), "a second task to sweep the pool");
        let _ = slot_of(take(&shares, P, 0));
        tokio::time::advance(ROOMY).await;
        // A start went unused: the next asks for one fewer; its slot goes back to Redis.
        let (ask, r, expired) = refill(&shares, P);
        assert_eq!(expired, vec!["m/1".to_owned()]);
        assert_eq!(ask.starts, 1);
        // A refill that brought nothing (or whose request was dropped) still wakes its waiters.
        let Taken::Wait { refilled: notice, .. } = take(&shares, P, 0) else { panic!() };
        drop(r);
        tokio::time::timeout(Duration::from_millis(1), refilled(notice, Duration::from_secs(60)))
            .await
            .expect("the waiter was woken");
    }

    #[tokio::test(start_paused = true)]
    async fn a_slot_whose_request_ended_serves_the_next_only_while_the_fleet_had_room() {
        let shares = Shares::new();
        let (_, r, _) = refill(&shares, P);
        let site = shares.put(r, brought(4, 1, true)).expect("a sweep");
        let renewed = Instant::now();
        let member = slot_of(take(&shares, P, 0));
        // The pool is empty and three starts are left: the slot of an ended request serves.
        assert!(matches!(take(&shares, P, 0), Taken::Refill { .. }));
        assert_eq!(pool(&site, member, renewed, renewed), Ok(false), "the sweep runs already");
        assert_eq!(slot_of(take(&shares, P, 0)), "m/0");
        // Not once its lease is older than half; not once the room has passed.
        assert_eq!(pool(&site, "old".into(), renewed, renewed + SHARE_LIFE), Err("old".into()));
        tokio::time::advance(ROOMY).await;
        assert_eq!(pool(&site, "late".into(), renewed, renewed), Err("late".into()));
        // Nor after a refill that found the site half full.
        let (_, r, _) = refill(&shares, P);
        shares.put(r, brought(1, 0, false));
        assert_eq!(pool(&site, "full".into(), renewed, renewed), Err("full".into()));
        // The sweep gives back what outlives its life, and ends with the pool.
        let (_, r, _) = refill(&shares, P);
        shares.put(r, brought(0, 2, true));
        assert_eq!(sweep(&site).await, (Vec::new(), false), "within their life");
        assert_eq!(sweep(&site).await, (vec!["m/0".to_owned(), "m/1".to_owned()], true));
    }

    #[tokio::test(start_paused = true)]
    async fn each_start_lives_a_tick_past_its_own_place_and_the_earliest_goes_first() {
        // Starts a millisecond apart: the n-th lives until a tick and n spacings after the
        // answer that brought it.
        let params = (1000, 0);
        let ms = Duration::from_millis(1);
        let shares = Shares::new();
        let (_, r, _) = refill(&shares, params);
        let t0 = Instant::now();
        shares.put(r, brought(5, 0, true));
        let site = shares.of(&site(), keys);
        let starts = |site: &Arc<Site>| -> Vec<Instant> {
            robots_proxy_sync::lock(&site.share).starts.iter().copied().collect()
        };
        assert_eq!(starts(&site), (0..5).map(|n| t0 + SHARE_LIFE + ms * n).collect::<Vec<_>>());
        tokio::time::advance(SHARE_LIFE + ms + ms / 2).await;
        assert!(matches!(site.take(params, 0), Taken::Place { .. }));
        // Two had lapsed (their places were 0 and 1 ms after the answer), one was taken.
        assert_eq!(starts(&site), vec![t0 + SHARE_LIFE + ms * 3, t0 + SHARE_LIFE + ms * 4]);
        // A start of a later refill that lapses before them is taken first.
        let t1 = Instant::now();
        shares.put(Refill(site.clone()), brought(1, 0, true));
        assert_eq!(
            starts(&site),
            vec![t1 + SHARE_LIFE, t0 + SHARE_LIFE + ms * 3, t0 + SHARE_LIFE + ms * 4]
        );
        tokio::time::advance(SHARE_LIFE + ms * 2).await;
        assert!(matches!(site.take(params, 0), Taken::Refill { .. }), "a start past its life");
    }

    #[tokio::test(start_paused = true)]
    async fn a_lost_store_empties_every_share() {
        let shares = Shares::new();
        let (_, r, _) = refill(&shares, P);
        shares.put(r, brought(3, 2, true));
        assert_eq!(shares.empty_all(), vec![(keys(), vec!["m/0".into(), "m/1".into()])]);
        assert!(matches!(take(&shares, P, 0), Taken::Refill { .. }), "a start was left");
        assert!(shares.empty_all().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn other_parameters_leave_the_old_share_and_the_ask_is_bounded() {
        let shares = Shares::new();
        let (_, r, _) = refill(&shares, P);
        shares.put(r, brought(3, 3, true));
        let (_, r, expired) = refill(&shares, (20, 100));
        assert_eq!(expired.len(), 3, "slots taken with another rate were used");
        shares.put(r, brought(0, 0, true));
        for _ in 0..20 {
            let (ask, r, _) = refill(&shares, (20, 0));
            assert!(ask.starts <= MOST);
            assert_eq!(ask.slots, 0, "slots asked for a site with no limit");
            shares.put(r, brought(0, 0, true));
        }
        let (ask, _r, _) = refill(&shares, (20, 0));
        assert_eq!(ask.starts, MOST);
    }

    #[tokio::test(start_paused = true)]
    async fn a_share_running_low_is_refilled_ahead_once_at_a_time() {
        let shares = Shares::new();
        let (_, r, _) = refill(&shares, P);
        shares.put(r, brought(0, 0, true));
        // As if the shares before had been used up: the ask has grown to 8.
        robots_proxy_sync::lock(&shares.sites.get(&site()).unwrap().share).want = 8;
        let (ask, r, _) = refill(&shares, P);
        shares.put(r, brought(ask.starts, ask.slots as usize, true));
        let mut aheads = Vec::new();
        let mut refills = Vec::new();
        for taken in 0..ask.starts {
            let Taken::Place { ahead, .. } = take(&shares, P, 0) else { panic!("{taken}") };
            if let Some((asked, refill)) = ahead {
                aheads.push((taken, asked.starts));
                refills.push(refill);
            }
        }
        // Once fewer than half were left, one refill ahead, asking for half as many again.
        assert_eq!(aheads, vec![(ask.starts / 2, ask.starts + ask.starts / 2)], "{ask:?}");
        assert!(matches!(take(&shares, P, 0), Taken::Wait { .. }), "a second refill began");
        drop(refills);
        assert!(matches!(take(&shares, P, 1), Taken::Refill { .. }));
    }
}
