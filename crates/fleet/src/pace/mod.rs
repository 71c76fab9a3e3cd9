//! The pace in Redis: [`RedisPace`] is the [`PaceStore`] of a fleet.
//!
//! The fleet paces exactly as one instance does (`pacing::schedule`), with the schedule kept
//! in Redis and changed only by server-side scripts ([`scripts`]), atomically and on Redis's
//! own clock (`TIME`), so the instances' clocks never decide a pace:
//!
//! * on arrival, `RESERVE` gives the request `max(now, rate.next, lane.next)` and moves each
//!   spacing on, or refuses it (`max_wait`, `queue_limit`). A request that need not wait
//!   takes its slot and starts in that same call (one round trip);
//! * any other request is in the fleet's queue of its group (`queue_limit` counts it, whether
//!   it waits for its start or for a slot): each Crawl-delay lane has one, and the requests
//!   with no Crawl-delay share one, as in the schedule, so one group's backlog never gets
//!   another's requests refused. Once its reserved start has come, `BEGIN` takes a
//!   concurrency slot and spaces the actual start from the last actual starts, as
//!   `Schedule::begin` does: requests that bunched up behind the concurrency limit still
//!   start one spacing apart;
//! * a request waiting for a slot sleeps until a slot is given back anywhere in the fleet
//!   (pub/sub on `slot-freed`), looking again by itself only at growing intervals; slots go
//!   first come, first served across the fleet: the requests that found none are queued in
//!   Redis (`slotq:<authority>`, by Redis's clock) and a slot goes to the first of them, while
//!   a request that arrives then queues behind them (review-fleet N4);
//! * a request dropped while it waits (its client hung up) leaves the queue at once; a
//!   slot is given back when the response headers arrive, off the request's path and in
//!   batches, and announced only while a request waits for one (`slots`). What an instance
//!   that died held lapses by itself: its queue entries after their deadline, its slots when
//!   their lease ([`slot_lease`]) ends.
//!
//! # Cost
//!
//! A request that need not wait costs one round trip on its path (`RESERVE`, by `EVALSHA`
//! on the instance's one multiplexed connection, which sends concurrent calls together) and
//! a share of one call off it (its slot given back, with the others of the moment). Measured
//! with `benches/soak/fleet_pace.sh` (a site whose limits never bind, 32 connections) and
//! `INFO commandstats`, on 2 shared cores (2026-11-26): before this round, 2 script calls per
//! request (RESERVE ~14 us of Redis time, RELEASE ~2.4 us plus a PUBLISH delivered to every
//! instance), one task spawned to renew the slot and one to give it back; about 12 us more of
//! the instance's CPU per request than one instance alone, and 22 us of Redis's. Now: 1.06-1.13
//! script calls per request (slots go back some 16 to a call), no PUBLISH while nobody waits,
//! no task per request; 33-36 us of the instance's CPU per request (40 before, 28-30 alone)
//! and 17-20 us of Redis's. Fleet against one instance alone, three runs of 5-7 rounds:
//! 0.83, 0.74, 0.77 before; 1.18, 0.93, 1.16 after (the shared machine's noise is large: a
//! round's own ratio ranged 0.6-1.6). On 2026-11-29 the same bench gave 0.18: the N8 margin
//! (half the round trip to Redis, [`with_margin`]) was added whole to `default_rps` 100,000's
//! 10 us spacing, one request per round trip; with the margin capped at a quarter of the
//! spacing, 0.58 (12,663 against 21,950 requests/s, medians of 5 interleaved rounds, a build
//! running beside it): short of the 0.9 of issue 40. Explained on 2026-11-29: the lone
//! instance was itself slowed by tokio's timer (a start 10 us ahead slept until the next
//! millisecond tick), and the fleet too, with a second call (BEGIN) for each request that
//! waited. With `pacing::TICK` (a rate finer than the timer does not sleep for a start less than
//! a tick ahead; RESERVE and BEGIN apply it too), one instance went from 18,900 to 38,100
//! requests/s and the fleet from 16,800 to 21,700 (3 interleaved rounds): 0.57, the real cost
//! of one script call per request on 2 shared cores. Since then, where the pace is finer
//! than the tick, the instance keeps a **share** of the site's pace ([`share`]): a `RESERVE`
//! that lets its request go also reserves the next starts of the rate within that tick, and
//! slots for them while at most half the limit is held, and the instance's next requests take
//! them with no call of their own; a slot whose request ended serves the next request while
//! the fleet had room lately, instead of a `RELEASE` and a new slot. The rate still holds over
//! any span (each start is reserved one spacing after the last, on Redis's clock; a start goes
//! at most a tick early and a tick after its place and the way back from Redis late), and the
//! fleet's concurrency exactly (every slot of a share is held in Redis). Release builds: 0.020
//! script calls per request instead of 1.08, 1.3 to 1.6 us of Redis's CPU per request instead
//! of 17.0, 23.8 to 27.0 us of the instance's (42.5 before; 21.2 to 22.4 alone); the fleet did
//! 0.89x to 0.94x the lone instance's requests in four runs (0.54x before): see `docs/fleet.md`.
//!
//! Keys (after `fleet.key_prefix`; on a cluster the authority is each key's hash tag,
//! [`super::keys`]): `pace:<authority>` (hash, see [`scripts`]),
//! `queue:<authority>` (requests with no Crawl-delay), `queue:<authority>#<line>` (one per
//! Crawl-delay lane), `slots:<authority>` and `slotq:<authority>` (sorted sets);
//! `gone:<authority>|<member>`, the mark a
//! give-back leaves after a call that timed out here ([`scripts::GIVE_BACK`], one lease);
//! channel `slot-freed`.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use redis::Script;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::Fleet;
use robots_proxy_authority::Authority;
use robots_proxy_pace::{
    begin_deadline, Admission, Bound, ForgetWhenIdle, Held, IdleWindow, Lane, LocalPace, PaceAsk,
    PaceFuture, PaceStore, Refusal,
};

mod ledger;
mod refill;
mod scripts;
mod share;
mod slots;

/// Added to `upstream.response_timeout` to make the lease of a concurrency slot
/// ([`slot_lease`]): the slot is held from the start of the request until its response
/// headers arrive, which includes connecting and, with signing, signing.
pub const SLOT_LEASE_MARGIN: Duration = Duration::from_secs(10);

/// How long a concurrency slot lasts unless given back: `response_timeout` +
/// [`SLOT_LEASE_MARGIN`], renewed every half lease while its request is in flight. An instance
/// that dies holding one frees it at most this long after.
pub fn slot_lease(response_timeout: Duration) -> Duration {
    response_timeout.saturating_add(SLOT_LEASE_MARGIN)
}

/// Added to every spacing the fleet reserves, at most: a start is reserved on Redis's clock
/// and waited for on the instance's, after a round trip, so two instances' requests could
/// otherwise reach the origin up to a round trip (and the jitter of forwarding) less than the
/// spacing apart. A fiftieth of the spacing when that is less (20 ms on a 1 s Crawl-delay,
/// 20 µs at 1,000 rps).
pub(crate) const SPACING_MARGIN: Duration = Duration::from_millis(20);

/// `spacing` with its margins: [`SPACING_MARGIN`], and half of this instance's last measured
/// round trip to Redis (`one_way`). A start is reserved on Redis's clock and the request leaves
/// once the answer has come back, later by the way back from Redis; without the second margin
/// the next instance, nearer Redis, could start short of the spacing by that much (review-fleet
/// N8: `Crawl-delay: 1` was 0.92 s at the origin with a 0.2 s round trip).
///
/// The second margin is at most a quarter of the spacing ([`ONE_WAY_SHARE`]): a Crawl-delay or
/// a modest rate gets all of it, while a rate of thousands a second, whose spacing is less
/// than the way back from Redis, is not cut to one request per round trip (`default_rps`
/// 100,000 gave 3,300 requests/s with a 0.6 ms round trip). There, one gap at the origin may
/// be short by the difference of two instances' ways back, never the rate over any longer
/// time: each start is still reserved one spacing after the last, on Redis's clock.
fn with_margin(spacing: Duration, one_way: Duration) -> Duration {
    if spacing.is_zero() {
        return spacing;
    }
    spacing + (spacing / 50).min(SPACING_MARGIN) + one_way.min(spacing / ONE_WAY_SHARE)
}

/// The way back from Redis added to a spacing is at most this share of it ([`with_margin`]).
const ONE_WAY_SHARE: u32 = 4;

/// A request waiting for a slot held elsewhere is woken when one is given back anywhere in
/// the fleet (pub/sub); it also looks again on its own after this, doubling each time up to
/// [`SLOT_RETRY_CAP`], in case the notice was missed (a slot whose holder died frees itself
/// without one). So a waiter costs Redis a few calls, however long it waits.
const SLOT_RETRY_FIRST: Duration = Duration::from_millis(100);

/// The longest a slot waiter goes without looking again by itself.
const SLOT_RETRY_CAP: Duration = Duration::from_secs(2);

/// How long after its deadline (arrival + `max_wait`) a queued request of an instance that
/// died leaves the fleet's queue by itself.
const QUEUE_LAPSE: Duration = Duration::from_secs(1);

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// What this instance keeps about an authority: its requests waiting (the queue-depth gauge),
/// and the notice that a slot came free.
#[derive(Default)]
struct Here {
    waiting: AtomicUsize,
    freed: Notify,
}

/// Local waiters by slots key, for the subscriber to wake.
type Notices = moka::sync::Cache<String, Arc<Here>>;

/// The fleet's pace, with this instance's own as the fallback while Redis is out of reach
/// (`fleet.on_redis_error = "local"`).
pub struct RedisPace {
    fleet: Arc<Fleet>,
    local: LocalPace,
    reserve: Arc<Script>,
    begin: Script,
    /// [`scripts::GIVE_BACK`], shared with the give-back tasks.
    give_back: Arc<Script>,
    /// The slots this instance's requests hold: given back and renewed off their path.
    slots: Arc<slots::Slots>,
    /// How long an authority's pace is kept after its last request (`pacing::idle_after`):
    /// here, and in Redis from each site's next request on.
    keep: Arc<IdleWindow>,
    /// How long a slot lasts unless given back ([`slot_lease`]).
    lease: Duration,
    next_id: AtomicU64,
    /// This instance's requests waiting, and slot notices, per authority.
    here: moka::sync::Cache<Authority, Arc<Here>>,
    /// The same, by slots key.
    notices: Arc<Notices>,
    /// The starts this instance reserved and made, put back when the store lost them.
    ledger: Arc<ledger::Ledger>,
    /// Places of each site's pace reserved for this instance's next requests ([`share`]).
    shares: Arc<share::Shares>,
}

/// What [`scripts::BEGIN`] said.
enum Begun {
    /// Started (after sleeping `wait`), holding its slot if there is a limit; the script ran
    /// at `now` on Redis's clock.
    Started { wait: Duration, now: u64 },
    /// No slot free.
    Busy,
    /// The spaced start would come past the deadline: refused, out of the queue.
    TooLong { wait: Duration, bound: Bound },
}

impl RedisPace {
    /// The pace in the Redis of `fleet`; `keep` is how long an idle authority's pace is kept
    /// (here and in Redis), `lease` how long a concurrency slot lasts if its holder dies (see
    /// [`slot_lease`]). Must be called inside a tokio runtime: it subscribes to the fleet's
    /// notices of slots given back.
    pub fn new(fleet: Arc<Fleet>, keep: Duration, lease: Duration) -> Self {
        let window = IdleWindow::new(keep);
        let notices: Arc<Notices> = Arc::new(
            moka::sync::Cache::builder()
                .max_capacity(robots_proxy_pace::MAX_SITES)
                .eviction_policy(moka::policy::EvictionPolicy::lru())
                .expire_after(ForgetWhenIdle(window.clone()))
                .build(),
        );
        let channel = fleet.keys.channel("slot-freed");
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(follow_slots(fleet.clone(), channel.clone(), Arc::downgrade(&notices)));
        }
        let slots = slots::Slots::new(fleet.clone(), lease.max(Duration::from_secs(1)), channel);
        let ledger = Arc::new(ledger::Ledger::new(window.clone()));
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let (ledger, slots) = (Arc::downgrade(&ledger), Arc::downgrade(&slots));
            runtime.spawn(ledger::restore_on_loss(fleet.clone(), ledger, slots, window.clone()));
        }
        let shares = Arc::new(share::Shares::new());
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let (held, shared) = (Arc::downgrade(&slots), Arc::downgrade(&shares));
            runtime.spawn(refill::empty_shares_on_loss(fleet.clone(), shared, held));
        }
        RedisPace {
            fleet,
            local: LocalPace::new(keep),
            reserve: Arc::new(Script::new(scripts::RESERVE)),
            begin: Script::new(scripts::BEGIN),
            give_back: Arc::new(Script::new(scripts::GIVE_BACK)),
            slots,
            keep: window.clone(),
            lease: lease.max(Duration::from_secs(1)),
            next_id: AtomicU64::new(0),
            here: moka::sync::Cache::builder()
                .max_capacity(robots_proxy_pace::MAX_SITES)
                .eviction_policy(moka::policy::EvictionPolicy::lru())
                .expire_after(ForgetWhenIdle(window))
                .build(),
            notices,
            ledger,
            shares,
        }
    }

    fn unique(&self) -> String {
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        format!("{}#{}#{n}", self.fleet.instance(), self.fleet.nonce())
    }

    /// This instance's answer while Redis is out of reach. What it admits is remembered for
    /// when the store is back ([`ledger`]): its start, and its slot, put into Redis then.
    async fn without_fleet(
        &self,
        ask: PaceAsk<'_>,
        keys: &Keys,
        spacing: &Spacing,
    ) -> Result<Admission, Held> {
        if self.fleet.refuses_when_down() {
            return Err(Held::Unavailable);
        }
        let mut admission = self.local.admit(ask).await?;
        self.ledger.started_alone(&keys.pace, spacing);
        if let Some(local) = admission.slot.take() {
            let member = self.unique();
            let shared = self.slots.hold_alone(keys.site(), &member);
            admission.slot = Some(Box::new((local, shared)));
        }
        Ok(admission)
    }

    /// After a RESERVE or BEGIN of `member` failed here (timed out, most often: it may still
    /// run in Redis), gives back whatever it took or will take there, in the background until
    /// done or the lease has run out ([`scripts::GIVE_BACK`]): a slot nobody here holds would
    /// otherwise block the site fleet-wide for a whole lease (review-fleet N1).
    fn forget(&self, keys: &Keys, member: &str, shared: u32) {
        let how = (self.fleet.clone(), self.give_back.clone(), self.lease);
        forget(how, keys, member, shared);
    }

    fn slot(&self, keys: &Keys, member: &str) -> Box<dyn Send + Sync> {
        Box::new(self.slots.hold(keys.site(), member))
    }

    async fn admit_shared(
        &self,
        ask: PaceAsk<'_>,
        prelude: refill::Prelude,
    ) -> Result<Admission, Held> {
        let PaceAsk { authority, lane, limits } = ask;
        let arrival = prelude.arrival;
        let deadline = arrival.checked_add(limits.max_wait).unwrap_or(arrival);
        let site = &self.fleet.keys;
        // What the share said, once its refills were waited for ([`RedisPace::wait_for_share`]):
        // refill, or go alone.
        let refill::Prelude { pace, slots_key, spacing, slots, one_way, taken, .. } = prelude;
        let (asked, mut refill) = match taken {
            Some((_, share::Taken::Refill { ask, refill, .. })) => (ask, Some(refill)),
            _ => (share::Ask { starts: 0, slots: 0 }, None),
        };
        let member = self.unique();
        let keys = Keys::new(site, authority, lane, (pace, slots_key), &member);
        let args = ReserveArgs {
            waits: (micros(limits.max_wait), limits.queue_limit),
            keep: millis(self.keep.get()).max(1000),
            slots,
            lease: micros(self.lease),
            floors: self.ledger.floors(&keys.pace, &spacing),
            ask: asked,
        };
        let invocation = args.invocation(&self.reserve, &keys, &spacing, &member);
        let reserved: Result<Reserved, _> =
            self.fleet.call(|mut c| async move { invocation.invoke_async(&mut c).await }).await;
        let (verdict, wait, bound, waiting, now, extra, more, room) = match reserved {
            Ok(r) => r,
            Err(_) => {
                drop(refill);
                self.forget(&keys, &member, asked.slots);
                return self.without_fleet(ask, &keys, &spacing).await;
            }
        };
        let received = Instant::now();
        self.ledger.measured(now, received, one_way);
        match verdict.as_str() {
            "go" => {
                let last = now.saturating_add(u64::from(extra).saturating_mul(spacing.interval));
                self.ledger.wrote(&keys.pace, &spacing, last, true);
                if let Some(refill) = refill.take() {
                    let slots = share::members(&member, more).collect();
                    let brought =
                        share::Brought { starts: extra, slots, received, room: room == 1 };
                    self.keep_share(refill, brought);
                }
            }
            "wait" => self.ledger.wrote(&keys.pace, &spacing, now.saturating_add(wait), false),
            _ => {}
        }
        // The requests waiting for this call's places look now, whatever it brought.
        drop(refill);
        let wait = Duration::from_micros(wait);
        let bound = match bound.as_str() {
            "rate" => Some(Bound::Rate),
            "crawl_delay" => Some(Bound::CrawlDelay),
            _ => None,
        };
        match verdict.as_str() {
            "go" => {
                let shared = slots > 0 && spacing.shares(slots);
                let site = shared.then(|| self.shares.lend(authority)).flatten();
                let slot = match site {
                    Some(site) => {
                        Some(Box::new(self.slots.hold_in(&site, (member, received))) as _)
                    }
                    _ => (slots > 0).then(|| self.slot(&keys, &member)),
                };
                return Ok(Admission { waited: false, slot });
            }
            "wait" => {}
            // Given back already (cannot happen to a new member): as if out of reach.
            "gone" => return self.without_fleet(ask, &keys, &spacing).await,
            "too_long" => {
                let bound = bound.unwrap_or(Bound::Rate);
                return Err(Held::Refused(Refusal::TooLong { wait, bound }));
            }
            _ => {
                let bound = bound.unwrap_or(Bound::Concurrency);
                let waiting = usize::try_from(waiting).unwrap_or(usize::MAX);
                return Err(Held::Refused(Refusal::QueueFull { waiting, wait, bound }));
            }
        }
        // In the fleet's queue until it starts; out of it if dropped before.
        let mut queued = Queued {
            fleet: self.fleet.clone(),
            key: Some((keys.queue.clone(), keys.slotq.clone())),
            member: member.clone(),
            lapses: deadline + QUEUE_LAPSE,
        };
        let here = self.here.get_with_by_ref(authority, || Arc::new(Here::default()));
        // Found by the subscriber under the slots key (kept as long as it is in use).
        let noticed = self.notices.get_with_by_ref(&keys.slots, || here.clone());
        if !Arc::ptr_eq(&noticed, &here) {
            self.notices.insert(keys.slots.clone(), here.clone());
        }
        here.waiting.fetch_add(1, Ordering::Relaxed);
        let _counted = Counted(here.clone());
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        let mut retry = SLOT_RETRY_FIRST;
        // The larger spacing, and whether it waited for a slot: how late past its deadline it
        // may still start (`pacing::begin_deadline`, review-fleet N6).
        let widest =
            limits.interval.unwrap_or_default().max(lane.map_or(Duration::ZERO, |l| l.delay));
        let mut waited_for_slot = false;
        loop {
            let freed = here.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            let latest = begin_deadline(deadline, widest, waited_for_slot);
            let left = latest.saturating_duration_since(Instant::now());
            let forget = limits.max_wait.saturating_add(QUEUE_LAPSE);
            match self.start(&keys, &member, &spacing, (left, forget), slots).await {
                Ok(Begun::Started { wait: until_start, now }) => {
                    let start = now.saturating_add(micros(until_start));
                    self.ledger.wrote(&keys.pace, &spacing, start, true);
                    let slot = (slots > 0).then(|| self.slot(&keys, &member));
                    if !until_start.is_zero() {
                        tokio::time::sleep(until_start).await;
                    }
                    // Its queue entry lapses at its start, which has come.
                    queued.key = None;
                    return Ok(Admission { waited: true, slot });
                }
                Ok(Begun::TooLong { wait: more, bound }) => {
                    queued.key = None;
                    let wait = arrival.elapsed() + more;
                    return Err(Held::Refused(Refusal::TooLong { wait, bound }));
                }
                Ok(Begun::Busy) => waited_for_slot = true,
                // Out of reach while waiting: as if it had been from the start, and what the
                // call may still take in Redis is given back.
                Err(()) => {
                    queued.key = None;
                    self.forget(&keys, &member, 0);
                    return self.without_fleet(ask, &keys, &spacing).await;
                }
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(Held::NoConnection);
            }
            tokio::select! {
                () = &mut freed => {}
                () = tokio::time::sleep_until(now.checked_add(retry).unwrap_or(deadline).min(deadline)) => {}
            }
            if Instant::now() >= deadline {
                return Err(Held::NoConnection);
            }
            retry = (retry * 2).min(SLOT_RETRY_CAP);
        }
    }

    /// Runs [`scripts::BEGIN`] for a queued request.
    async fn start(
        &self,
        keys: &Keys,
        member: &str,
        spacing: &Spacing,
        (left, forget): (Duration, Duration),
        slots: usize,
    ) -> Result<Begun, ()> {
        let mut invocation = spacing.invocation(&self.begin, keys);
        invocation
            .arg(micros(left))
            .arg(member)
            .arg(millis(self.keep.get()).max(1000))
            .arg(slots)
            .arg(micros(self.lease))
            .arg(micros(forget))
            .arg(micros(robots_proxy_pace::TICK));
        let begun: (String, u64, String, u64) = self
            .fleet
            .call(|mut c| async move { invocation.invoke_async(&mut c).await })
            .await
            .map_err(|_| ())?;
        let wait = Duration::from_micros(begun.1);
        Ok(match (begun.0.as_str(), begun.2.as_str()) {
            ("ok", _) => Begun::Started { wait, now: begun.3 },
            ("busy", _) => Begun::Busy,
            // Given back here already: this call is not this request's.
            ("gone", _) => return Err(()),
            (_, "crawl_delay") => Begun::TooLong { wait, bound: Bound::CrawlDelay },
            _ => Begun::TooLong { wait, bound: Bound::Rate },
        })
    }
}

/// What [`scripts::RESERVE`] takes after the keys, the spacings and the member: `max_wait`
/// and `queue_limit`, how long the pace is kept (ms), the site's limit, the slot lease, the
/// instance's floors (`ledger`) and what it asks for its share.
struct ReserveArgs {
    waits: (u64, usize),
    keep: u64,
    slots: usize,
    lease: u64,
    floors: (u64, u64),
    ask: share::Ask,
}

impl ReserveArgs {
    /// The invocation of `script` (RESERVE) for `member`.
    fn invocation<'a>(
        &self,
        script: &'a Script,
        keys: &Keys,
        spacing: &Spacing,
        member: &str,
    ) -> redis::ScriptInvocation<'a> {
        let mut invocation = spacing.invocation(script, keys);
        invocation
            .arg(self.waits.0)
            .arg(self.waits.1)
            .arg(member)
            .arg(self.keep)
            .arg(self.slots)
            .arg(self.lease)
            .arg(micros(QUEUE_LAPSE))
            .arg(self.floors.0)
            .arg(self.floors.1)
            .arg(micros(robots_proxy_pace::TICK))
            .arg(self.ask.starts)
            .arg(self.ask.slots);
        invocation
    }
}

/// What [`scripts::RESERVE`] answers: verdict, wait, bound, waiting, Redis's clock, and the
/// starts, slots and room of a share.
type Reserved = (String, u64, String, u64, u64, u32, u32, u32);

/// The keys of one authority, with the queue of the request's group.
struct Keys {
    pace: String,
    queue: String,
    slots: String,
    /// The request's give-back mark ([`scripts::GIVE_BACK`]).
    gone: String,
    /// The requests waiting for a slot, first come first served ([`scripts::BEGIN`]).
    slotq: String,
}

impl Keys {
    /// The site's slots key and pace key, for a slot held under them.
    fn site(&self) -> share::SiteKeys {
        share::SiteKeys { slots: self.slots.as_str().into(), pace: self.pace.as_str().into() }
    }

    /// The keys of `authority` for a request of `lane` (its site's `pace` and `slots` keys
    /// made already) and its `member`.
    fn new(
        site: &super::keys::Keyspace,
        authority: &Authority,
        lane: Option<Lane>,
        (pace, slots): (String, String),
        member: &str,
    ) -> Keys {
        Keys {
            pace,
            queue: site.site("queue", authority, &lane_suffix(lane)),
            slots,
            gone: site.site("gone", authority, &format!("|{member}")),
            slotq: site.site("slotq", authority, ""),
        }
    }
}

/// What follows `queue:<authority>` in the queue a request of `lane` joins, as in the
/// schedule: each Crawl-delay lane (robots.txt group) has its own, `queue:<authority>#<line>`,
/// and requests with no Crawl-delay share `queue:<authority>`. (`#` is never part of an
/// authority.)
fn lane_suffix(lane: Option<Lane>) -> String {
    match lane {
        Some(lane) => format!("#{}", lane.line),
        None => String::new(),
    }
}

/// The spacings of one request, as the scripts take them (microseconds, margins added).
#[derive(Clone, Copy)]
struct Spacing {
    interval: u64,
    line: u32,
    delay: u64,
}

impl Spacing {
    /// Whether a request of these spacings (and `slots`, its site's concurrency limit) may take
    /// a place of this instance's share ([`share`]): no Crawl-delay, and a rate finer than the
    /// timer's tick, or a concurrency limit and no rate.
    fn shares(&self, slots: usize) -> bool {
        self.delay == 0
            && self.interval < micros(robots_proxy_pace::TICK)
            && (self.interval > 0 || slots > 0)
    }

    /// An invocation of `script` (RESERVE or BEGIN) with what both take first: the
    /// authority's keys, then the spacings.
    fn invocation<'a>(&self, script: &'a Script, keys: &Keys) -> redis::ScriptInvocation<'a> {
        let mut invocation = script.prepare_invoke();
        invocation
            .key(&keys.pace)
            .key(&keys.queue)
            .key(&keys.slots)
            .key(&keys.gone)
            .key(&keys.slotq)
            .arg(self.interval)
            .arg(self.line)
            .arg(self.delay);
        invocation
    }
}

/// Follows the notices of slots given back anywhere in the fleet and wakes one local waiter
/// of that authority each; ends when the pace is dropped. After a gap in the subscription
/// every waiter looks again (notices may have been missed).
async fn follow_slots(fleet: Arc<Fleet>, channel: String, notices: Weak<Notices>) {
    loop {
        let Ok(mut subscription) = fleet.follow(&channel).await else {
            if notices.strong_count() == 0 {
                return;
            }
            tokio::time::sleep(super::HEARTBEAT).await;
            continue;
        };
        // Notices may have been missed while unsubscribed: every waiter looks again.
        let Some(all) = notices.upgrade() else { return };
        for (_, here) in all.iter() {
            here.freed.notify_waiters();
        }
        drop(all);
        // A subscription that went silent (a half-open connection) is noticed by its PING,
        // as the purge subscription's is, and made again.
        while let super::Heard::Message(message) = subscription.next().await {
            let Some(all) = notices.upgrade() else { return };
            let Ok(key) = message.get_payload::<String>() else { continue };
            // Every waiter here looks: the one whose turn it is (first come, first served
            // across the fleet, [`scripts::BEGIN`]) may be any of them.
            if let Some(here) = all.get(&key) {
                here.freed.notify_waiters();
            }
        }
        tracing::debug!(channel = %channel, "fleet: the slot-notice subscription was lost");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One of this instance's requests waiting for its authority, counted until dropped.
struct Counted(Arc<Here>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A request in the fleet's queue: taken out of it when dropped before it starts (its client
/// hung up), so the place is given back at once, as the in-process pacer does.
struct Queued {
    fleet: Arc<Fleet>,
    /// The queue and the slot queue; `None` once the request left them another way.
    key: Option<(String, String)>,
    member: String,
    /// When the entry lapses by itself: no use trying after.
    lapses: Instant,
}

impl Drop for Queued {
    fn drop(&mut self) {
        let Some((queue, slotq)) = self.key.take() else { return };
        let member = std::mem::take(&mut self.member);
        give_back(self.fleet.clone(), self.lapses, move |mut c| {
            let mut pipe = redis::pipe();
            pipe.cmd("ZREM").arg(&queue).arg(&member).ignore();
            pipe.cmd("ZREM").arg(&slotq).arg(&member).ignore();
            Box::pin(async move { pipe.query_async::<()>(&mut c).await })
        });
    }
}

/// [`RedisPace::forget`], for a task that holds no `RedisPace`: the fleet, the
/// [`scripts::GIVE_BACK`] script and the slot lease.
fn forget(
    (fleet, script, lease): (Arc<Fleet>, Arc<Script>, Duration),
    keys: &Keys,
    member: &str,
    shared: u32,
) {
    let keys =
        Arc::new((keys.slots.clone(), keys.queue.clone(), keys.gone.clone(), keys.slotq.clone()));
    let member = Arc::new(member.to_owned());
    let lease_ms = millis(lease);
    give_back(fleet, Instant::now() + lease, move |mut c| {
        let (script, keys, member) = (script.clone(), keys.clone(), member.clone());
        Box::pin(async move {
            let mut invocation = script.prepare_invoke();
            invocation.key(&keys.0).key(&keys.1).key(&keys.2).key(&keys.3);
            invocation.arg(&*member).arg(lease_ms).arg(shared);
            invocation.invoke_async::<()>(&mut c).await
        })
    });
}

/// The first pause before giving something back again, doubled each time up to a second.
const GIVE_BACK_RETRY: Duration = Duration::from_millis(100);

/// One try at giving something back to Redis.
pub(super) type Try =
    std::pin::Pin<Box<dyn std::future::Future<Output = redis::RedisResult<()>> + Send>>;

/// Sends what `make` makes to Redis, in the background, until it is done or `lapses` comes
/// (then what it gives back has lapsed by itself). While Redis is out of reach, every try
/// fails at once, and it goes through once the heartbeat finds Redis back: a slot given back
/// during an outage is not held until its lease ends.
pub(super) fn give_back(
    fleet: Arc<Fleet>,
    lapses: Instant,
    make: impl Fn(super::Conn) -> Try + Send + Sync + 'static,
) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
    runtime.spawn(async move {
        let mut pause = GIVE_BACK_RETRY;
        loop {
            if fleet.call(&make).await.is_ok() {
                return;
            }
            let next = Instant::now() + pause;
            if next >= lapses {
                return;
            }
            tokio::time::sleep_until(next).await;
            pause = (pause * 2).min(super::HEARTBEAT);
        }
    });
}

impl PaceStore for RedisPace {
    fn admit<'a>(&'a self, ask: PaceAsk<'a>) -> PaceFuture<'a, Result<Admission, Held>> {
        match self.prelude(&ask) {
            refill::Began::Admitted(admission) => Box::pin(std::future::ready(Ok(admission))),
            refill::Began::Next(prelude) if prelude.waits() => {
                Box::pin(self.wait_for_share(ask, prelude))
            }
            refill::Began::Next(prelude) => Box::pin(self.admit_shared(ask, prelude)),
        }
    }

    fn queue_depth(&self, authority: &Authority) -> usize {
        let here = self.here.get(authority).map_or(0, |h| h.waiting.load(Ordering::Relaxed));
        here + self.local.queue_depth(authority)
    }

    fn queue_depths(&self) -> Vec<(Authority, usize)> {
        let mut depths: Vec<(Authority, usize)> = self
            .here
            .iter()
            .map(|(a, h)| (a.as_ref().clone(), h.waiting.load(Ordering::Relaxed)))
            .filter(|(_, n)| *n > 0)
            .collect();
        for (a, n) in self.local.queue_depths() {
            match depths.iter_mut().find(|(b, _)| *b == a) {
                Some((_, m)) => *m += n,
                None => depths.push((a, n)),
            }
        }
        depths
    }

    fn sites(&self) -> u64 {
        self.here.entry_count() + self.local.sites()
    }

    /// Here at once; in Redis, each site's pace takes the new window at its next request (the
    /// fleet never walks Redis's keyspace), so a site quiet since before a reload that
    /// lengthened the window keeps the old one until then.
    fn set_idle_window(&self, window: Duration) {
        self.keep.set(window);
        self.local.set_idle_window(window);
    }
}
