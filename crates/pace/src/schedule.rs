//! The scheduling core of pacing: when may the next request to one authority start?
//!
//! Pure bookkeeping, no I/O and no clock of its own: every call takes `now`, so the rules can
//! be tested with instants made up by the test, without sleeping. The async layer in
//! [`super`] asks this core, sleeps as told, and reports back.
//!
//! # Model
//!
//! One [`Schedule`] per authority holds:
//!
//! * a **rate spacing** (`1 / rps`), shared by every request to the authority;
//! * one **lane** per robots.txt `Crawl-delay` line in use: requests whose applicable
//!   Crawl-delay comes from the same line (the same group) are spaced by that delay, whatever
//!   their product tokens; other requests do not wait for them;
//! * one **queue** per group: the requests admitted and not yet started, `queue_limit` at
//!   most in each. A request waits in the queue of its Crawl-delay lane (its robots.txt group)
//!   or, with no Crawl-delay, in the site's queue, shared by every request without one;
//!   whatever holds it back (its delay, the rate or a free connection). So one group's
//!   backlog never gets another group's requests refused: each group may queue as many.
//!
//! Each spacing keeps two instants. `next` is the earliest start still free to *reserve*: a
//! request arriving at `now` is given `max(now, rate.next, lane.next)` and moves both `next`s
//! on by their spacing, so requests that arrive together are handed successive slots and the
//! wait is known on arrival (a wait longer than `max_wait` is refused at once, not after
//! waiting). `last` is the last *actual* start: when a request finally starts (after waiting
//! for its slot and, with a concurrency limit, for a free connection) [`Schedule::begin`]
//! spaces it from `last` too, so requests that bunch up behind a concurrency limit or a late
//! timer still start at least one spacing apart.

use std::time::Duration;

use tokio::time::Instant;

/// The longest spacing or wait the core deals in. Configuration is validated to stay below
/// it; the core clamps as well, so that instant arithmetic can never overflow.
pub(crate) const MAX_SPACING: Duration = Duration::from_secs(24 * 3600);

/// The pace of one authority, resolved from `[pacing]` and its per-site overrides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Least time between two request starts to the authority (`1 / rps`); `None`: no rate
    /// limit.
    pub interval: Option<Duration>,
    /// Most requests to the authority in flight at once; `None`: no limit. Enforced by the
    /// async layer (a semaphore); the core only needs to know whether one is free.
    pub concurrency: Option<usize>,
    /// Most requests waiting in each queue of the authority at once (one per Crawl-delay
    /// lane, one for the requests with no Crawl-delay).
    pub queue_limit: usize,
    /// Longest a request may wait before it starts.
    pub max_wait: Duration,
}

impl Limits {
    /// Limits with every duration clamped to [`MAX_SPACING`] and a zero interval treated as
    /// none.
    pub(crate) fn new(
        interval: Option<Duration>,
        concurrency: Option<usize>,
        queue_limit: usize,
        max_wait: Duration,
    ) -> Self {
        Limits {
            interval: interval.filter(|i| !i.is_zero()).map(|i| i.min(MAX_SPACING)),
            concurrency: concurrency.filter(|&c| c > 0),
            queue_limit,
            max_wait: max_wait.min(MAX_SPACING),
        }
    }

    /// Whether the authority has no rate and no concurrency limit: only Crawl-delay lanes can
    /// make its requests wait.
    pub(crate) fn is_unlimited(&self) -> bool {
        self.interval.is_none() && self.concurrency.is_none()
    }
}

/// The Crawl-delay lane a request belongs to: the robots.txt line its delay comes from, and
/// the delay (already capped by `pacing.max_crawl_delay`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lane {
    /// The 1-based line of the `crawl-delay` in robots.txt: one per group, so it names the
    /// group whose delay applies.
    pub line: u32,
    /// The spacing of the lane; never zero (a zero delay is no lane).
    pub delay: Duration,
}

impl Lane {
    /// The lane for a delay from `line`, capped at `max`; `None` when the delay is zero.
    pub(crate) fn new(line: u32, delay: Duration, max: Duration) -> Option<Lane> {
        let delay = delay.min(max).min(MAX_SPACING);
        (!delay.is_zero()).then_some(Lane { line, delay })
    }
}

/// What held a request back: the part of the pace that set its start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// The Crawl-delay of its lane.
    CrawlDelay,
    /// The authority's rate.
    Rate,
    /// The authority's concurrency limit.
    Concurrency,
}

/// Why the core will not let a request wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The request would start only after `wait`, more than `max_wait`.
    TooLong {
        /// The wait it would have needed.
        wait: Duration,
        /// What set that wait.
        bound: Bound,
    },
    /// The request would have to wait, and `queue_limit` requests already do.
    QueueFull {
        /// Requests waiting.
        waiting: usize,
        /// The wait it would have needed (zero when only a free connection was missing).
        wait: Duration,
        /// What made it wait.
        bound: Bound,
    },
}

/// A reserved start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot {
    /// When the request may start, at the earliest.
    pub start: Instant,
    /// What set `start`, when it is later than the arrival.
    pub bound: Option<Bound>,
}

/// One spacing: the earliest start still free to reserve, and the last actual start.
#[derive(Debug, Clone, Copy, Default)]
struct Spacing {
    next: Option<Instant>,
    last: Option<Instant>,
}

impl Spacing {
    /// The earliest start a new reservation may get.
    fn reservable(&self) -> Option<Instant> {
        self.next
    }

    /// The earliest actual start, `gap` after the last one.
    fn startable(&self, gap: Duration) -> Option<Instant> {
        self.last.map(|last| later(last, gap))
    }

    fn reserve(&mut self, start: Instant, gap: Duration) {
        self.next = Some(later(start, gap));
    }

    fn begin(&mut self, start: Instant, gap: Duration) {
        self.last = Some(start);
        let after = later(start, gap);
        self.next = Some(self.next.map_or(after, |n| n.max(after)));
    }
}

/// The timer's resolution: tokio sleeps in whole milliseconds (a sleep of 5 µs lasts until the
/// next tick, up to a millisecond or more). A rate whose interval is shorter (more than 1,000
/// requests a second) cannot be spaced by sleeping: at `default_rps` 100,000 most requests
/// slept about a millisecond each for a spacing of 10 µs, and the rate that was meant never to
/// bind held a crawl to a fraction of it. So, for such a rate only, a start the rate puts less
/// than a tick ahead goes at once ([`goes_at`]); its place in the pace is still taken (the next
/// start is one interval after it), so over any span the site gets at most the rate, and one
/// tick's worth more. Crawl-delay, and rates of 1,000 a second or less, are spaced exactly.
pub const TICK: Duration = Duration::from_millis(1);

/// When a request whose start is `start` (set by `bound`) may go, at `now`: at `start`, or at
/// once when only a rate faster than the timer ([`TICK`]) puts it less than a tick ahead.
pub fn goes_at(start: Instant, now: Instant, bound: Option<Bound>, interval: Duration) -> Instant {
    let within_tick = start.saturating_duration_since(now) < TICK;
    if bound == Some(Bound::Rate) && interval < TICK && within_tick {
        now.min(start)
    } else {
        start
    }
}

/// The most a request admitted on arrival may start past its deadline (`arrival + max_wait`)
/// at [`Schedule::begin`], for one spacing at most.
pub const BEGIN_GRACE: Duration = Duration::from_millis(250);

/// The latest start [`Schedule::begin`] (and the fleet's `BEGIN`) accepts for a request whose
/// deadline is `deadline`, spaced by `spacing` (the larger of its rate interval and
/// Crawl-delay), when it did or did not wait for a connection (`waited_for_connection`).
///
/// A request's start is reserved on arrival within `max_wait` (else it is refused at once). The
/// spaced start computed when that reservation comes is later by the lateness of the starts
/// before it (a timer tick, a round trip to Redis), accumulated along the queue; refusing it
/// then wastes the start it reserved and makes it wait `max_wait` for a 429 (review-fleet N6:
/// `Crawl-delay: 0.5` gave 1.43 requests a second instead of 2). So such a request may start up
/// to one spacing, at most [`BEGIN_GRACE`], past its deadline. A request that waited for a
/// connection (the concurrency limit) is held to its deadline exactly: that wait is not known
/// on arrival.
pub fn begin_deadline(
    deadline: Instant,
    spacing: Duration,
    waited_for_connection: bool,
) -> Instant {
    if waited_for_connection {
        deadline
    } else {
        later(deadline, spacing.min(BEGIN_GRACE))
    }
}

/// `t + d`. The durations are clamped to [`MAX_SPACING`], so this cannot overflow in practice;
/// should it ever, the spacing is lost for that once rather than the proxy panicking.
fn later(t: Instant, d: Duration) -> Instant {
    t.checked_add(d).unwrap_or(t)
}

/// A Crawl-delay lane in use: its spacing and its queue.
#[derive(Debug, Clone, Copy)]
struct LaneState {
    line: u32,
    spacing: Spacing,
    /// Requests of the lane admitted and not yet started.
    waiting: usize,
}

/// The pacing state of one authority.
#[derive(Debug, Default)]
pub(crate) struct Schedule {
    rate: Spacing,
    /// Crawl-delay lanes in use: a handful at most (one per group of the robots.txt).
    lanes: Vec<LaneState>,
    /// Requests with no Crawl-delay admitted and not yet started: the site's own queue.
    waiting: usize,
}

impl Schedule {
    /// A schedule with this one's spacing (next and last starts, site and lanes) and empty
    /// queues: for a site whose limits changed, while the requests already waiting leave the
    /// queues of the schedule they joined.
    pub(crate) fn spacing_only(&self) -> Schedule {
        let lanes = self.lanes.iter().map(|l| LaneState { waiting: 0, ..*l }).collect();
        Schedule { rate: self.rate, lanes, waiting: 0 }
    }

    /// Requests admitted and not yet started, every queue together: the site's queue depth.
    pub(crate) fn waiting(&self) -> usize {
        self.lanes.iter().fold(self.waiting, |n, l| n.saturating_add(l.waiting))
    }

    /// Requests waiting in the queue a request of `lane` joins.
    fn queued(&self, lane: Option<Lane>) -> usize {
        match lane {
            None => self.waiting,
            Some(lane) => self.lanes.iter().find(|l| l.line == lane.line).map_or(0, |l| l.waiting),
        }
    }

    /// The queue a request of `lane` joins.
    fn queue_mut(&mut self, lane: Option<Lane>) -> &mut usize {
        match lane {
            None => &mut self.waiting,
            Some(lane) => &mut self.lane_mut(lane.line).waiting,
        }
    }

    /// Reserves a start for a request arriving at `now` in `lane` (if it has a Crawl-delay),
    /// or refuses it. `connection_free` tells whether the concurrency limit has room right now.
    /// A request that would wait is refused when its own queue (its lane's, or with no lane
    /// the site's) holds `queue_limit` already; other queues do not count.
    ///
    /// On success the request counts as waiting in its queue until [`Schedule::leave`] is
    /// called with the same lane, whether it had to wait or not; a refused request reserves
    /// nothing.
    pub(crate) fn reserve(
        &mut self,
        now: Instant,
        lane: Option<Lane>,
        limits: &Limits,
        connection_free: bool,
    ) -> Result<Slot, Refusal> {
        self.prune(now);
        let mut start = now;
        let mut bound = None;
        if limits.interval.is_some() {
            if let Some(next) = self.rate.reservable().filter(|&n| n > start) {
                start = next;
                bound = Some(Bound::Rate);
            }
        }
        if let Some(lane) = lane {
            if let Some(next) = self.lane(lane.line).and_then(Spacing::reservable) {
                if next > start || (next == start && bound.is_some()) {
                    start = next;
                    bound = Some(Bound::CrawlDelay);
                }
            }
        }
        let wait = start - now;
        if let Some(bound) = bound.filter(|_| wait > limits.max_wait) {
            return Err(Refusal::TooLong { wait, bound });
        }
        // The start reserved is `start` (the pace moves on from it); the request goes at
        // `goes`, at once when only a rate faster than the timer holds it back ([`TICK`]).
        let goes = goes_at(start, now, bound, limits.interval.unwrap_or_default());
        let bound = bound.filter(|_| goes > now);
        let must_wait = bound.is_some() || !connection_free;
        let queued = self.queued(lane);
        if must_wait && queued >= limits.queue_limit {
            let bound = bound.unwrap_or(Bound::Concurrency);
            return Err(Refusal::QueueFull { waiting: queued, wait, bound });
        }
        if let Some(interval) = limits.interval {
            self.rate.reserve(start, interval);
        }
        if let Some(lane) = lane {
            self.lane_mut(lane.line).spacing.reserve(start, lane.delay);
        }
        let queue = self.queue_mut(lane);
        *queue = queue.saturating_add(1);
        Ok(Slot { start: goes, bound })
    }

    /// The request that reserved a slot may start at `now` (its slot has come and, with a
    /// concurrency limit, it holds a connection): the instant it may actually start, spaced
    /// from the last actual starts, which is recorded as its start. When that instant is
    /// after `deadline`, nothing is recorded and the error is that instant and what set it.
    pub(crate) fn begin(
        &mut self,
        now: Instant,
        lane: Option<Lane>,
        limits: &Limits,
        deadline: Instant,
    ) -> Result<Instant, (Instant, Bound)> {
        let mut start = now;
        let mut bound = None;
        if let Some(interval) = limits.interval {
            if let Some(next) = self.rate.startable(interval).filter(|&s| s > start) {
                start = next;
                bound = Some(Bound::Rate);
            }
        }
        if let Some(lane) = lane {
            let startable = self.lane(lane.line).and_then(|s| s.startable(lane.delay));
            if let Some(next) = startable.filter(|&s| s > start) {
                start = next;
                bound = Some(Bound::CrawlDelay);
            }
        }
        if let Some(bound) = bound.filter(|_| start > deadline) {
            return Err((start, bound));
        }
        if let Some(interval) = limits.interval {
            self.rate.begin(start, interval);
        }
        if let Some(lane) = lane {
            self.lane_mut(lane.line).spacing.begin(start, lane.delay);
        }
        // Recorded at `start`; goes at once when only a rate faster than the timer holds it.
        Ok(goes_at(start, now, bound, limits.interval.unwrap_or_default()))
    }

    /// A request admitted by [`Schedule::reserve`] in `lane` has started, given up or been
    /// refused later: it no longer waits in its queue.
    pub(crate) fn leave(&mut self, lane: Option<Lane>) {
        let queue = self.queue_mut(lane);
        *queue = queue.saturating_sub(1);
    }

    fn lane(&self, line: u32) -> Option<&Spacing> {
        self.lanes.iter().find(|l| l.line == line).map(|l| &l.spacing)
    }

    fn lane_mut(&mut self, line: u32) -> &mut LaneState {
        let index = match self.lanes.iter().position(|l| l.line == line) {
            Some(i) => i,
            None => {
                self.lanes.push(LaneState { line, spacing: Spacing::default(), waiting: 0 });
                self.lanes.len() - 1
            }
        };
        &mut self.lanes[index]
    }

    /// Drops lanes that no longer constrain anything and have nobody waiting, so a robots.txt
    /// that changes its lines over time does not grow the list.
    fn prune(&mut self, now: Instant) {
        self.lanes.retain(|l| l.waiting > 0 || l.spacing.next.is_some_and(|n| n > now));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn limits(interval_ms: u64, queue_limit: usize, max_wait_ms: u64) -> Limits {
        Limits::new(
            Some(MS * interval_ms as u32),
            None,
            queue_limit,
            Duration::from_millis(max_wait_ms),
        )
    }

    fn lane(line: u32, delay_ms: u64) -> Option<Lane> {
        Lane::new(line, Duration::from_millis(delay_ms), Duration::from_secs(60))
    }

    /// Reserves and starts at once (begin at the slot), as a request that waits its turn does.
    fn run(s: &mut Schedule, now: Instant, lane: Option<Lane>, l: &Limits) -> Instant {
        let slot = s.reserve(now, lane, l, true).expect("admitted");
        let start = s.begin(slot.start, lane, l, slot.start + l.max_wait).expect("starts");
        s.leave(lane);
        start
    }

    #[test]
    fn no_limits_never_wait() {
        let t0 = Instant::now();
        let l = Limits::new(None, None, 0, Duration::from_secs(1));
        let mut s = Schedule::default();
        for _ in 0..5 {
            assert_eq!(run(&mut s, t0, None, &l), t0);
        }
        assert!(l.is_unlimited());
        assert_eq!(s.waiting(), 0);
    }

    #[test]
    fn a_lane_spaces_its_requests_by_the_delay() {
        let t0 = Instant::now();
        let l = Limits::new(None, None, 100, Duration::from_secs(30));
        let slow = lane(2, 200);
        let mut s = Schedule::default();
        let starts: Vec<_> = (0..10).map(|_| run(&mut s, t0, slow, &l)).collect();
        for (i, start) in starts.iter().enumerate() {
            assert_eq!(*start - t0, MS * 200 * i as u32, "request {i}");
        }
        // The whole series spans 9 delays.
        assert_eq!(starts[9] - starts[0], Duration::from_millis(1800));
    }

    #[test]
    fn other_lanes_and_no_lane_do_not_wait_for_a_lane() {
        let t0 = Instant::now();
        let l = Limits::new(None, None, 100, Duration::from_secs(30));
        let mut s = Schedule::default();
        assert_eq!(run(&mut s, t0, lane(2, 1000), &l), t0);
        assert_eq!(run(&mut s, t0, lane(2, 1000), &l), t0 + Duration::from_secs(1));
        // Another group's delay, and a request with no delay at all, start at once.
        assert_eq!(run(&mut s, t0, lane(7, 500), &l), t0);
        for _ in 0..5 {
            assert_eq!(run(&mut s, t0, None, &l), t0);
        }
    }

    #[test]
    fn the_rate_applies_to_every_request_together() {
        let t0 = Instant::now();
        let l = limits(100, 100, 30_000);
        let mut s = Schedule::default();
        assert_eq!(run(&mut s, t0, None, &l), t0);
        assert_eq!(run(&mut s, t0, lane(3, 10), &l), t0 + MS * 100);
        assert_eq!(run(&mut s, t0, None, &l), t0 + MS * 200);
        // Later arrivals past the reservations start when they arrive.
        assert_eq!(run(&mut s, t0 + MS * 1000, None, &l), t0 + MS * 1000);
    }

    /// A rate finer than the timer ([`TICK`]): starts less than a tick ahead go at once, and
    /// still take their places, so the next tick's requests start where the pace says.
    #[test]
    fn a_rate_finer_than_the_timer_goes_within_a_tick_and_keeps_its_places() {
        let t0 = Instant::now();
        let interval = Duration::from_micros(100);
        let l = Limits::new(Some(interval), None, 1000, Duration::from_secs(30));
        let mut s = Schedule::default();
        let starts: Vec<_> = (0..25).map(|_| run(&mut s, t0, None, &l)).collect();
        for (i, start) in starts.iter().enumerate() {
            let place = interval * i as u32;
            let expected = if place < TICK { t0 } else { t0 + place };
            assert_eq!(*start, expected, "request {i}");
        }
        // Reserved on arrival less than a tick ahead: no wait, not named as held by the rate.
        let mut s = Schedule::default();
        let first = s.reserve(t0, None, &l, true).unwrap();
        let second = s.reserve(t0 + interval / 2, None, &l, true).unwrap();
        assert_eq!((first.start, first.bound), (t0, None));
        assert_eq!((second.start, second.bound), (t0 + interval / 2, None));
        // Nine more take the places up to a tick ahead (the last of them, a whole tick ahead,
        // waits); the next waits for its place, held by the rate.
        for _ in 0..9 {
            s.reserve(t0, None, &l, true).unwrap();
        }
        let held = s.reserve(t0, None, &l, true).unwrap();
        assert_eq!((held.start, held.bound), (t0 + TICK + interval, Some(Bound::Rate)));
    }

    /// A rate of 1,000 a second (and any slower one), and every Crawl-delay, are spaced exactly:
    /// the timer can sleep them.
    #[test]
    fn rates_the_timer_can_space_and_crawl_delays_never_go_early() {
        let t0 = Instant::now();
        let l = Limits::new(Some(TICK), None, 100, Duration::from_secs(30));
        let mut s = Schedule::default();
        assert_eq!(run(&mut s, t0, None, &l), t0);
        assert_eq!(run(&mut s, t0, None, &l), t0 + TICK);
        let slot = s.reserve(t0 + TICK + TICK / 2, None, &l, true).unwrap();
        assert_eq!((slot.start, slot.bound), (t0 + TICK * 2, Some(Bound::Rate)));
        let none = Limits::new(None, None, 100, Duration::from_secs(30));
        let fine = Lane::new(4, Duration::from_micros(100), Duration::from_secs(60));
        let mut s = Schedule::default();
        assert_eq!(run(&mut s, t0, fine, &none), t0);
        if fine.is_some() {
            let slot = s.reserve(t0, fine, &none, true).unwrap();
            assert_eq!(slot.bound, Some(Bound::CrawlDelay));
            assert!(slot.start > t0, "{slot:?}");
        }
    }

    #[test]
    fn the_later_of_rate_and_lane_wins_and_is_named() {
        let t0 = Instant::now();
        let l = limits(100, 100, 30_000);
        let mut s = Schedule::default();
        run(&mut s, t0, lane(2, 500), &l);
        let slot = s.reserve(t0, lane(2, 500), &l, true).unwrap();
        assert_eq!(slot, Slot { start: t0 + MS * 500, bound: Some(Bound::CrawlDelay) });
        let slot = s.reserve(t0, None, &l, true).unwrap();
        // The rate's next slot is after the lane's reservation: 600 ms.
        assert_eq!(slot, Slot { start: t0 + MS * 600, bound: Some(Bound::Rate) });
    }

    #[test]
    fn a_wait_beyond_max_wait_is_refused_and_reserves_nothing() {
        let t0 = Instant::now();
        let l = limits(1000, 100, 1500);
        let mut s = Schedule::default();
        run(&mut s, t0, None, &l); // 0 s
        assert_eq!(s.reserve(t0, None, &l, true).unwrap().start, t0 + MS * 1000);
        let refusal = s.reserve(t0, None, &l, true).unwrap_err();
        assert_eq!(refusal, Refusal::TooLong { wait: MS * 2000, bound: Bound::Rate });
        // Refusing reserved nothing: the same wait is asked for again.
        assert_eq!(s.reserve(t0, None, &l, true).unwrap_err(), refusal);
        assert_eq!(s.waiting(), 1);
    }

    #[test]
    fn a_full_queue_refuses_only_requests_that_would_wait() {
        let t0 = Instant::now();
        let l = limits(100, 2, 30_000);
        let mut s = Schedule::default();
        let first = s.reserve(t0, None, &l, true).unwrap();
        assert_eq!(first.bound, None);
        s.begin(t0, None, &l, t0).unwrap();
        s.leave(None);
        s.reserve(t0, None, &l, true).unwrap();
        s.reserve(t0, None, &l, true).unwrap();
        assert_eq!(s.waiting(), 2);
        let refusal = s.reserve(t0, None, &l, true).unwrap_err();
        assert_eq!(refusal, Refusal::QueueFull { waiting: 2, wait: MS * 300, bound: Bound::Rate });
        // Once one has left, there is room again.
        s.leave(None);
        assert_eq!(s.reserve(t0, None, &l, true).unwrap().start, t0 + MS * 300);
        // A request that would not wait is never refused for the queue.
        let later = t0 + Duration::from_secs(10);
        assert_eq!(s.reserve(later, None, &l, true).unwrap().start, later);
    }

    /// The review's case (issue 28 §1): `*` (Crawl-delay 0.5 s, line 2) fills its queue; a
    /// `slowbot` request (its own group, Crawl-delay 2 s, line 9, nobody waiting) still gets
    /// its turn, and so does a request with no Crawl-delay that waits for a connection.
    #[test]
    fn a_full_queue_of_one_group_refuses_no_other_group() {
        let t0 = Instant::now();
        let l = Limits::new(None, Some(1), 3, Duration::from_secs(3));
        let (any, slow) = (lane(2, 500), lane(9, 2000));
        let mut s = Schedule::default();
        assert_eq!(run(&mut s, t0, slow, &l), t0);
        assert_eq!(run(&mut s, t0, any, &l), t0);
        for i in 1..=3u32 {
            assert_eq!(s.reserve(t0, any, &l, true).unwrap().start, t0 + MS * 500 * i);
        }
        assert_eq!(s.waiting(), 3);
        // The `*` group's queue is full: its next request is refused ...
        let refusal = s.reserve(t0, any, &l, true).unwrap_err();
        let full = Refusal::QueueFull { waiting: 3, wait: MS * 2000, bound: Bound::CrawlDelay };
        assert_eq!(refusal, full);
        // ... but slowbot's group has nobody waiting: it waits for its own delay.
        let at = t0 + MS * 200;
        let slot = s.reserve(at, slow, &l, true).expect("slowbot refused for another's queue");
        assert_eq!(slot, Slot { start: t0 + MS * 2000, bound: Some(Bound::CrawlDelay) });
        // A request with no Crawl-delay, waiting only for a connection, has a queue of its own.
        let slot = s.reserve(at, None, &l, false).expect("refused for another's queue");
        assert_eq!(slot, Slot { start: at, bound: None });
        // The depth of the site is every group's together.
        assert_eq!(s.waiting(), 5);
    }

    #[test]
    fn leaving_frees_a_place_in_its_own_queue_only() {
        let t0 = Instant::now();
        let l = Limits::new(None, Some(1), 1, Duration::from_secs(30));
        let slow = lane(9, 100);
        let mut s = Schedule::default();
        // One request of the lane and one with no delay wait for the connection.
        s.reserve(t0, slow, &l, false).unwrap();
        s.reserve(t0, None, &l, false).unwrap();
        let full = |r| matches!(r, Err(Refusal::QueueFull { waiting: 1, .. }));
        assert!(full(s.reserve(t0, slow, &l, false)));
        assert!(full(s.reserve(t0, None, &l, false)));
        // Long past its delay, the lane's request still waits: its queue is kept.
        let later = t0 + Duration::from_secs(10);
        assert!(full(s.reserve(later, slow, &l, false)), "the lane was dropped with its queue");
        s.leave(None);
        assert_eq!(s.waiting(), 1);
        assert!(full(s.reserve(later, slow, &l, false)));
        assert!(s.reserve(later, None, &l, false).is_ok());
        s.leave(slow);
        assert!(s.reserve(later, slow, &l, false).is_ok());
        assert_eq!(s.waiting(), 2);
    }

    #[test]
    fn queue_limit_zero_admits_only_requests_that_start_at_once() {
        let t0 = Instant::now();
        let l = limits(100, 0, 30_000);
        let mut s = Schedule::default();
        assert_eq!(run(&mut s, t0, None, &l), t0);
        assert!(matches!(s.reserve(t0, None, &l, true), Err(Refusal::QueueFull { .. })));
        assert_eq!(run(&mut s, t0 + MS * 100, None, &l), t0 + MS * 100);
    }

    #[test]
    fn a_busy_connection_limit_counts_as_waiting() {
        let t0 = Instant::now();
        let l = Limits::new(None, Some(1), 1, Duration::from_secs(5));
        let mut s = Schedule::default();
        assert_eq!(s.reserve(t0, None, &l, false).unwrap(), Slot { start: t0, bound: None });
        let refusal = s.reserve(t0, None, &l, false).unwrap_err();
        assert_eq!(
            refusal,
            Refusal::QueueFull { waiting: 1, wait: Duration::ZERO, bound: Bound::Concurrency }
        );
        // With a free connection it would not wait, so the queue does not matter.
        assert!(s.reserve(t0, None, &l, true).is_ok());
    }

    #[test]
    fn begin_spaces_requests_that_bunched_up() {
        // Two requests reserved 100 ms apart but both held back (by a concurrency limit) until
        // 1 s: the second still starts 100 ms after the first.
        let t0 = Instant::now();
        let l = limits(100, 10, 30_000);
        let mut s = Schedule::default();
        let a = s.reserve(t0, lane(2, 300), &l, true).unwrap();
        let b = s.reserve(t0, lane(2, 300), &l, true).unwrap();
        assert_eq!((a.start, b.start), (t0, t0 + MS * 300));
        let late = t0 + Duration::from_secs(1);
        let deadline = t0 + Duration::from_secs(30);
        assert_eq!(s.begin(late, lane(2, 300), &l, deadline), Ok(late));
        assert_eq!(s.begin(late, lane(2, 300), &l, deadline), Ok(late + MS * 300));
        // New reservations come after the actual starts.
        let c = s.reserve(late, None, &l, true).unwrap();
        assert_eq!(c.start, late + MS * 400);
    }

    #[test]
    fn a_start_reserved_on_arrival_may_come_late_by_one_spacing_at_most() {
        // Review-fleet N6: reserved 500 ms before its deadline, but the start before it ran
        // 40 ms late: it still starts (40 ms past the deadline) instead of being refused.
        let t0 = Instant::now();
        let l = limits(0, 10, 3_000);
        let mut s = Schedule::default();
        let deadline = t0 + MS * 3000;
        assert_eq!(s.begin(t0 + MS * 2540, lane(2, 500), &l, deadline), Ok(t0 + MS * 2540));
        let spacing = Duration::from_millis(500);
        let latest = begin_deadline(deadline, spacing, false);
        assert_eq!(latest, deadline + BEGIN_GRACE);
        assert_eq!(s.begin(t0 + MS * 2990, lane(2, 500), &l, latest), Ok(t0 + MS * 3040));
        // Held to the deadline after a wait for a connection, and never more than one spacing.
        assert_eq!(begin_deadline(deadline, spacing, true), deadline);
        assert_eq!(begin_deadline(deadline, MS * 100, false), deadline + MS * 100);
    }

    #[test]
    fn begin_past_the_deadline_records_nothing() {
        let t0 = Instant::now();
        let l = limits(1000, 10, 30_000);
        let mut s = Schedule::default();
        assert_eq!(s.begin(t0, None, &l, t0), Ok(t0));
        // The next may start at 1 s; a deadline of 0.5 s refuses it, and records nothing.
        assert_eq!(
            s.begin(t0 + MS * 10, None, &l, t0 + MS * 500),
            Err((t0 + MS * 1000, Bound::Rate))
        );
        assert_eq!(s.begin(t0 + MS * 10, None, &l, t0 + MS * 2000), Ok(t0 + MS * 1000));
    }

    #[test]
    fn crawl_delay_is_capped_and_zero_is_no_lane() {
        let cap = Duration::from_secs(2);
        assert_eq!(Lane::new(4, Duration::from_secs(3600), cap).unwrap().delay, cap);
        assert_eq!(Lane::new(4, Duration::ZERO, cap), None);
        assert_eq!(Lane::new(4, Duration::MAX, Duration::MAX).unwrap().delay, MAX_SPACING);
        let l = Limits::new(Some(Duration::ZERO), Some(0), 1, Duration::MAX);
        assert!(l.is_unlimited());
        assert_eq!(l.max_wait, MAX_SPACING);
    }

    #[test]
    fn idle_lanes_are_dropped() {
        let t0 = Instant::now();
        let l = limits(100, 10, 30_000);
        let mut s = Schedule::default();
        for line in 1..=20 {
            run(&mut s, t0, lane(line, 50), &l);
        }
        assert_eq!(s.lanes.len(), 20);
        let much_later = t0 + Duration::from_secs(60);
        run(&mut s, much_later, lane(1, 50), &l);
        assert_eq!(s.lanes.len(), 1);
    }
}
