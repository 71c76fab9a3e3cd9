//! A site's share: starts (and their slots) that one `RESERVE` took for this instance's next
//! requests, where the pace is finer than the timer, so that most requests of a busy site
//! need no call to Redis (issue 40, Speed).
//!
//! Where a site's rate is finer than the timer's tick (`pacing::TICK`) and its request needs
//! no Crawl-delay, a start less than a tick ahead goes at once in its reserved place (the
//! schedule's rule, and `RESERVE`'s). So a `RESERVE` that lets its request go may reserve, in
//! the same call, the next places of the rate that also fall within that tick, each with a
//! concurrency slot when the site has a limit ([`super::scripts::RESERVE`], its `want`): the
//! request that made the call goes, and the next requests of this instance take one of those
//! places each, with no call of their own. What that keeps and what it gives up:
//!
//! * **The rate, over any span, as before:** every place is reserved in Redis one spacing
//!   after the last, on Redis's clock, whoever uses it; a place goes at most a tick early (as
//!   any start finer than the tick does) and at most a tick late ([`SHARE_LIFE`]), so a tick
//!   is still the only slack, as it was.
//! * **The concurrency of the fleet, exactly:** each place comes with its slot, held in Redis
//!   from the call on; a share never takes more than half of the slots still free, and none
//!   while a request of the fleet waits for one (`slotq`), so no instance's request waits
//!   behind slots another instance holds unused.
//! * **What a share loses:** a place nobody here used within its life is not given back (a
//!   later place may have been reserved after it): the site's pace forgoes at most a tick of
//!   its rate per share left unused. Its slot is given back ([`Shares::expire`], one task per
//!   share). How many places a share asks for follows this instance's demand: twice as many
//!   when the last share was used up within its life, as many fewer as went unused
//!   otherwise ([`MOST`] at most, and never more than fit in a tick of the rate).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::pacing::TICK;

/// The most places one share asks for.
pub(super) const MOST: u32 = 64;

/// How many refills a request waits for before it makes its own call (asking for no places).
pub(super) const MOST_LOOKS: u32 = 3;

/// How long a place of a share may be used after the answer that brought it: a tick (all its
/// places were within a tick of Redis's clock when it was reserved).
pub(super) const SHARE_LIFE: Duration = TICK;

/// One place of a share: its member (its slot's name in Redis) and until when it may be used.
struct Place {
    member: String,
    until: Instant,
}

/// One site's share, for one set of parameters (a reload that changes the rate or the limit
/// leaves the old places to expire).
#[derive(Default)]
pub(super) struct Share {
    interval: u64,
    slots: usize,
    places: VecDeque<Place>,
    /// How many places the next `RESERVE` asks for.
    want: u32,
    /// When the last places arrived.
    last: Option<Instant>,
    /// Whether a request's `RESERVE` asking for places is under way.
    refilling: bool,
    /// The requests waiting for it.
    waiting: u32,
    /// How many waited for the last refill: the next asks for at least as many.
    seen: u32,
}

impl Share {
    /// Takes out the places past their life (their slots to give back) and adjusts `want`.
    fn expire(&mut self, now: Instant) -> Vec<String> {
        let mut gone = Vec::new();
        while self.places.front().is_some_and(|p| p.until <= now) {
            if let Some(p) = self.places.pop_front() {
                gone.push(p.member);
            }
        }
        let unused = u32::try_from(gone.len()).unwrap_or(u32::MAX);
        self.want = self.want.saturating_sub(unused);
        gone
    }
}

/// A site's share and the notice that a refill ended.
pub(super) struct Site {
    share: Mutex<Share>,
    /// Bumped each time a refill ends (with places or not).
    refilled: watch::Sender<u64>,
}

/// What a request finds in its site's share. Each carries the members of places that passed
/// their life unused, whose slots are to be given back.
pub(super) enum Taken {
    /// A place: its member; `ahead`, when the share runs low and no refill is under way: a
    /// refill to make off the request's path (how many places to ask for, with the call's
    /// own), so that the next requests find places still.
    Place { member: String, ahead: Option<(u32, Refill)>, expired: Vec<String> },
    /// None left, and another request's `RESERVE` is bringing more: wait for it, then look
    /// again.
    Wait { refilled: watch::Receiver<u64>, expired: Vec<String> },
    /// None: this request's `RESERVE` asks for `want` places, and the others wait for it until
    /// `refill` is dropped or given to [`Shares::put`].
    Refill { want: u32, refill: Refill, expired: Vec<String> },
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
        crate::sync::lock(&self.0.share).refilling = false;
        self.0.refilled.send_modify(|n| *n = n.wrapping_add(1));
    }
}

/// Every site's share, by pace key.
pub(super) struct Shares {
    sites: moka::sync::Cache<String, Arc<Site>>,
}

impl Shares {
    pub(super) fn new() -> Self {
        Shares {
            sites: moka::sync::Cache::builder()
                .max_capacity(crate::pacing::MAX_SITES)
                .time_to_idle(Duration::from_secs(10))
                .build(),
        }
    }

    /// A place of the share of `pace` (taken with these parameters), if one is left within its
    /// life; otherwise whether to wait for a refill under way, or to refill. `looked`: how
    /// many refills the request waited for already (after [`MOST_LOOKS`], it waits no more). A refill asks for
    /// twice as many as the last when those were used up within their life, as many fewer
    /// as went unused otherwise, and at least as many as waited for the last.
    pub(super) fn take(&self, pace: &str, (interval, slots): (u64, usize), looked: u32) -> Taken {
        let now = Instant::now();
        let site = self.sites.get_with_by_ref(pace, || {
            Arc::new(Site {
                share: Mutex::new(Share { want: 1, interval, slots, ..Share::default() }),
                refilled: watch::channel(0).0,
            })
        });
        let mut share = crate::sync::lock(&site.share);
        let mut expired = share.expire(now);
        if share.interval != interval || share.slots != slots {
            expired.extend(share.places.drain(..).map(|p| p.member));
            share.interval = interval;
            share.slots = slots;
        }
        if looked > 0 {
            share.waiting = share.waiting.saturating_sub(1);
        }
        if let Some(place) = share.places.pop_front() {
            let left = u32::try_from(share.places.len()).unwrap_or(u32::MAX);
            let mut ahead = None;
            if !share.refilling && share.want >= 2 && left.saturating_mul(2) < share.want {
                // Running low within their life: demand keeps up with the share, which grows.
                share.want = share.want.saturating_add(share.want / 2).max(share.seen).min(MOST);
                share.refilling = true;
                ahead = Some((share.want, Refill(site.clone())));
            }
            return Taken::Place { member: place.member, ahead, expired };
        }
        if share.refilling {
            if looked >= MOST_LOOKS {
                return Taken::Alone { expired };
            }
            share.waiting = share.waiting.saturating_add(1);
            return Taken::Wait { refilled: site.refilled.subscribe(), expired };
        }
        // Used up: within its life, demand is ahead of the share; after, it kept pace.
        let lately = share.last.is_some_and(|l| now.saturating_duration_since(l) < SHARE_LIFE * 2);
        if expired.is_empty() && lately {
            share.want = share.want.saturating_mul(2);
        }
        share.want = share.want.max(share.seen).clamp(1, MOST);
        share.refilling = true;
        let want = share.want;
        drop(share);
        Taken::Refill { want, refill: Refill(site), expired }
    }

    /// The places the `RESERVE` of `refill` brought (`members`, each a start and its slot),
    /// usable until `until`; then the requests waiting for them look. Returns the site, for
    /// the task that gives back what is left at `until`.
    pub(super) fn put(&self, refill: Refill, members: Vec<String>, until: Instant) -> Weak<Site> {
        let site = Arc::downgrade(&refill.0);
        {
            let mut share = crate::sync::lock(&refill.0.share);
            share.last = Some(Instant::now());
            share.seen = share.waiting;
            share.places.extend(members.into_iter().map(|member| Place { member, until }));
        }
        drop(refill);
        site
    }
}

/// Waits until the refill `refilled` watches ends, or `most`.
pub(super) async fn refilled(mut refilled: watch::Receiver<u64>, most: Duration) {
    let _ = tokio::time::timeout(most, refilled.changed()).await;
}

/// The places of the share of `site` past their life, taken out: their slots are to be given
/// back.
pub(super) fn expired(site: &Weak<Site>) -> Vec<String> {
    let Some(site) = site.upgrade() else { return Vec::new() };
    let mut share = crate::sync::lock(&site.share);
    share.expire(Instant::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("m/{i}")).collect()
    }

    const P: (u64, usize) = (10, 100);

    fn refill(shares: &Shares, params: (u64, usize)) -> (u32, Refill, Vec<String>) {
        match shares.take("p", params, 0) {
            Taken::Refill { want, refill, expired } => (want, refill, expired),
            _ => panic!("expected to refill"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn places_go_in_order_within_their_life_and_the_next_ask_follows_demand() {
        let shares = Shares::new();
        let (want, r, expired) = refill(&shares, P);
        assert_eq!((want, expired.len()), (1, 0), "a site with no share asks for one");
        // While it is under way, the next request waits for it, and finds its place after.
        let Taken::Wait { refilled: notice, .. } = shares.take("p", P, 0) else {
            panic!("a second refill started beside the first")
        };
        shares.put(r, members(2), Instant::now() + SHARE_LIFE);
        refilled(notice, Duration::from_secs(1)).await;
        for want in ["m/0", "m/1"] {
            match shares.take("p", P, 1) {
                Taken::Place { member, expired, .. } => {
                    assert_eq!((&*member, expired.len()), (want, 0));
                }
                _ => panic!("a place was left"),
            }
        }
        // Used up within its life: the next share asks for twice as many.
        let (want, r, _) = refill(&shares, P);
        assert_eq!(want, 2);
        // One that waited for as many refills as it may goes alone.
        assert!(matches!(shares.take("p", P, 1), Taken::Wait { .. }));
        assert!(matches!(shares.take("p", P, MOST_LOOKS), Taken::Alone { .. }));
        shares.put(r, members(2), Instant::now() + SHARE_LIFE);
        let Taken::Place { .. } = shares.take("p", P, 0) else { panic!() };
        tokio::time::advance(SHARE_LIFE * 3).await;
        // One place went unused: given back, and the next share asks for one fewer.
        let (want, r, expired) = refill(&shares, P);
        assert_eq!(expired, vec!["m/1".to_owned()]);
        assert_eq!(want, 1);
        // A refill that brought nothing (or whose request was dropped) still wakes its waiters.
        let Taken::Wait { refilled: notice, .. } = shares.take("p", P, 0) else { panic!() };
        drop(r);
        tokio::time::timeout(Duration::from_millis(1), refilled(notice, Duration::from_secs(60)))
            .await
            .expect("the waiter was woken");
    }

    #[tokio::test(start_paused = true)]
    async fn other_parameters_leave_the_old_places_and_the_ask_is_bounded() {
        let shares = Shares::new();
        let (_, r, _) = refill(&shares, P);
        let site = shares.put(r, members(3), Instant::now() + SHARE_LIFE);
        let (_, r, expired) = refill(&shares, (20, 100));
        assert_eq!(expired.len(), 3, "places taken with another rate were used");
        shares.put(r, Vec::new(), Instant::now() + SHARE_LIFE);
        for _ in 0..20 {
            let (want, r, _) = refill(&shares, (20, 100));
            assert!(want <= MOST);
            shares.put(r, Vec::new(), Instant::now() + SHARE_LIFE);
        }
        let (want, r, _) = refill(&shares, (20, 100));
        assert_eq!(want, MOST);
        shares.put(r, members(1), Instant::now() + SHARE_LIFE);
        assert!(expired_now(&site).is_empty(), "within its life nothing is given back");
        tokio::time::advance(SHARE_LIFE).await;
        assert_eq!(expired_now(&site), vec!["m/0".to_owned()]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_share_running_low_is_refilled_ahead_once_at_a_time() {
        let shares = Shares::new();
        let (_, r, _) = refill(&shares, P);
        shares.put(r, Vec::new(), Instant::now() + SHARE_LIFE);
        // As if the shares before had been used up: the ask has grown to 8.
        crate::sync::lock(&shares.sites.get("p").unwrap().share).want = 8;
        let (want, r, _) = refill(&shares, P);
        shares.put(r, members(want as usize), Instant::now() + SHARE_LIFE);
        let mut aheads = Vec::new();
        let mut refills = Vec::new();
        for taken in 0..want {
            let Taken::Place { ahead, .. } = shares.take("p", P, 0) else { panic!("{taken}") };
            if let Some((asked, refill)) = ahead {
                aheads.push((taken, asked));
                refills.push(refill);
            }
        }
        // Once fewer than half were left, one refill ahead, asking for half as many again.
        assert_eq!(aheads, vec![(want / 2, want + want / 2)], "want {want}");
        assert!(matches!(shares.take("p", P, 0), Taken::Wait { .. }), "a second refill began");
        drop(refills);
        assert!(matches!(shares.take("p", P, 1), Taken::Refill { .. }));
    }

    fn expired_now(site: &Weak<Site>) -> Vec<String> {
        expired(site)
    }
}
