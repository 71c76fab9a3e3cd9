//! What this instance knows of the fleet's pace, so that a store that lost it gets it back
//! (review-fleet N3): the starts it reserved and made, per authority, on Redis's clock.
//!
//! Redis holds the pace in memory; a restart without persistence, or a failover that lost the
//! primary's last writes, leaves a site's pace empty, and its next request would start at once
//! however recently the last one started. Each instance keeps, per site it paced within the
//! idle window, the latest of what it wrote into the site's pace hash (the next start free
//! and the last actual start, per spacing: `rate`, `last:rate`, `lane:<line>`,
//! `last:lane:<line>`, as [`super::scripts`] name them). With it:
//!
//! * every `RESERVE` of this instance carries its own next starts as floors: the fleet's pace
//!   is never earlier than what this instance knows, lost or not;
//! * when the heartbeat finds the store lost (a new epoch, [`crate::view`]) or back
//!   after being out of reach, every instance writes back what it knows
//!   ([`RESTORE_PACE`], the larger value of each field wins) and the slots it holds
//!   ([`super::slots`]): the fleet's pace is whole again within one heartbeat.
//!
//! Requests admitted by this instance's own pace while Redis was out of reach
//! (`fleet.on_redis_error = "local"`) are recorded too, their starts moved onto Redis's clock by
//! the offset measured at the last call: the fleet's first requests after the outage are spaced
//! from them.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use redis::Script;
use tokio::time::Instant;

use super::slots::Slots;
use super::Spacing;
use crate::Fleet;
use robots_proxy_pace::{ForgetWhenIdle, IdleWindow, MAX_SITES};

/// KEYS: the pace. ARGV: how long the pace is kept (ms), then pairs of a field and its value
/// (microseconds of Redis's clock). Each field takes the value when it is larger than the one
/// Redis holds (or Redis holds none): what another instance wrote since is never moved back.
pub(super) const RESTORE_PACE: &str = r"
local changed = false
for i = 2, #ARGV, 2 do
  local v = tonumber(ARGV[i + 1])
  local n = tonumber(redis.call('HGET', KEYS[1], ARGV[i]) or '0')
  if v > n then redis.call('HSET', KEYS[1], ARGV[i], v); changed = true end
end
local keep = tonumber(ARGV[1])
if changed and redis.call('PTTL', KEYS[1]) < keep then redis.call('PEXPIRE', KEYS[1], keep) end
return 1
";

/// The next start free and the last actual start of one spacing (microseconds, Redis's clock;
/// 0: none).
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
struct Starts {
    next: u64,
    last: u64,
}

impl Starts {
    fn raise(&mut self, next: u64, last: u64) {
        self.next = self.next.max(next);
        self.last = self.last.max(last);
    }
}

/// What this instance wrote into one site's pace.
#[derive(Default, Debug)]
struct Written {
    rate: Starts,
    /// Per Crawl-delay lane (its robots.txt line).
    lanes: Vec<(u32, Starts)>,
}

impl Written {
    fn lane(&mut self, line: u32) -> &mut Starts {
        let at = match self.lanes.iter().position(|(l, _)| *l == line) {
            Some(at) => at,
            None => {
                self.lanes.push((line, Starts::default()));
                self.lanes.len() - 1
            }
        };
        &mut self.lanes[at].1
    }

    /// The fields of the pace hash and their values, as [`RESTORE_PACE`] takes them.
    fn fields(&self) -> Vec<(String, u64)> {
        let mut fields = Vec::new();
        let mut push = |name: String, value: u64| {
            if value > 0 {
                fields.push((name, value));
            }
        };
        push("rate".to_owned(), self.rate.next);
        push("last:rate".to_owned(), self.rate.last);
        for (line, starts) in &self.lanes {
            push(format!("lane:{line}"), starts.next);
            push(format!("last:lane:{line}"), starts.last);
        }
        fields
    }
}

/// What this instance knows of the pace of the sites it paced lately; see the
/// [module documentation](self).
pub(super) struct Ledger {
    /// By pace key; forgotten with the site's pace (the idle window).
    sites: moka::sync::Cache<String, Arc<Mutex<Written>>>,
    /// Redis's clock less this instance's ([`Ledger::local_micros`]), from the last call.
    offset: AtomicI64,
    /// Whether `offset` was measured.
    measured: AtomicBool,
    base: Instant,
}

impl Ledger {
    pub(super) fn new(window: Arc<IdleWindow>) -> Ledger {
        Ledger {
            sites: moka::sync::Cache::builder()
                .max_capacity(MAX_SITES)
                .eviction_policy(moka::policy::EvictionPolicy::lru())
                .expire_after(ForgetWhenIdle(window))
                .build(),
            offset: AtomicI64::new(0),
            measured: AtomicBool::new(false),
            base: Instant::now(),
        }
    }

    fn local_micros(&self, at: Instant) -> i64 {
        i64::try_from(at.saturating_duration_since(self.base).as_micros()).unwrap_or(i64::MAX)
    }

    /// A script ran at `redis_now` on Redis's clock, and its answer came back here at
    /// `received`, half a round trip (`one_way`) later.
    pub(super) fn measured(&self, redis_now: u64, received: Instant, one_way: std::time::Duration) {
        let ran = received.checked_sub(one_way).unwrap_or(received);
        let redis = i64::try_from(redis_now).unwrap_or(i64::MAX);
        self.offset.store(redis.saturating_sub(self.local_micros(ran)), Ordering::Relaxed);
        self.measured.store(true, Ordering::Relaxed);
    }

    /// `at` on Redis's clock, if the offset was ever measured.
    fn on_redis_clock(&self, at: Instant) -> Option<u64> {
        if !self.measured.load(Ordering::Relaxed) {
            return None;
        }
        let micros = self.local_micros(at).saturating_add(self.offset.load(Ordering::Relaxed));
        u64::try_from(micros).ok()
    }

    fn site(&self, pace: &str) -> Arc<Mutex<Written>> {
        self.sites.get_with_by_ref(pace, || Arc::new(Mutex::new(Written::default())))
    }

    /// This instance's own next starts of the site's spacings (`rate`, the lane's): the floors
    /// its `RESERVE` carries (0 where it knows none).
    pub(super) fn floors(&self, pace: &str, spacings: &Spacing) -> (u64, u64) {
        let Some(site) = self.sites.get(pace) else { return (0, 0) };
        let written = robots_proxy_sync::lock(&site);
        let lane = if spacings.delay > 0 {
            written.lanes.iter().find(|(l, _)| *l == spacings.line).map_or(0, |(_, s)| s.next)
        } else {
            0
        };
        let rate = if spacings.interval > 0 { written.rate.next } else { 0 };
        (rate, lane)
    }

    /// A request of the site was given `start` (Redis's clock): its spacings' next starts move
    /// on from it; `started` when it is the actual start (the request goes now, or `BEGIN`
    /// spaced it), not only a reservation.
    pub(super) fn wrote(&self, pace: &str, spacings: &Spacing, start: u64, started: bool) {
        if spacings.interval == 0 && spacings.delay == 0 {
            return;
        }
        let site = self.site(pace);
        let mut written = robots_proxy_sync::lock(&site);
        let last = if started { start } else { 0 };
        if spacings.interval > 0 {
            written.rate.raise(start.saturating_add(spacings.interval), last);
        }
        if spacings.delay > 0 {
            written.lane(spacings.line).raise(start.saturating_add(spacings.delay), last);
        }
    }

    /// A request of the site started now, admitted by this instance's own pace (Redis out of
    /// reach).
    pub(super) fn started_alone(&self, pace: &str, spacings: &Spacing) {
        if let Some(now) = self.on_redis_clock(Instant::now()) {
            self.wrote(pace, spacings, now, true);
        }
    }

    /// Every site's pace key and the fields to put back.
    pub(super) fn all(&self) -> Vec<(String, Vec<(String, u64)>)> {
        self.sites
            .iter()
            .map(|(key, site)| (key.as_ref().clone(), robots_proxy_sync::lock(&site).fields()))
            .filter(|(_, fields)| !fields.is_empty())
            .collect()
    }
}

/// How many sites' paces are put back at once (concurrent calls on the one multiplexed
/// connection).
const AT_ONCE: usize = 64;

/// Each time the heartbeat finds the store lost or back ([`Fleet::losses`]), puts back what this
/// instance knows: every site's starts ([`RESTORE_PACE`]) and the slots it holds
/// ([`Slots::restore`]). Ends when the pace is dropped.
pub(super) async fn restore_on_loss(
    fleet: Arc<Fleet>,
    ledger: Weak<Ledger>,
    slots: Weak<Slots>,
    window: Arc<IdleWindow>,
) {
    let mut losses = fleet.losses();
    let script = Arc::new(Script::new(RESTORE_PACE));
    while losses.changed().await.is_ok() {
        let (Some(ledger), Some(slots)) = (ledger.upgrade(), slots.upgrade()) else { return };
        let keep = super::millis(window.get()).max(1000);
        let mut sites = 0;
        let mut whole = true;
        let mut all = ledger.all().into_iter().peekable();
        while all.peek().is_some() {
            let mut calls = tokio::task::JoinSet::new();
            for (pace, fields) in all.by_ref().take(AT_ONCE) {
                let (fleet, script) = (fleet.clone(), script.clone());
                calls.spawn(async move {
                    let mut invocation = script.prepare_invoke();
                    invocation.key(&pace).arg(keep);
                    for (field, value) in &fields {
                        invocation.arg(field).arg(*value);
                    }
                    fleet
                        .call(|mut c| async move { invocation.invoke_async::<()>(&mut c).await })
                        .await
                        .is_ok()
                });
            }
            while let Some(done) = calls.join_next().await {
                match done {
                    Ok(true) => sites += 1,
                    _ => whole = false,
                }
            }
        }
        let held = slots.restore(&fleet).await;
        whole &= held.is_ok();
        fleet.restored(whole);
        tracing::info!(
            instance = %fleet.instance(), sites, slots = held.unwrap_or(0), whole,
            "fleet: put back into Redis the pace this instance knows (its starts and the slots it holds)"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn ledger() -> Ledger {
        Ledger::new(IdleWindow::new(Duration::from_secs(600)))
    }

    #[test]
    fn the_larger_start_wins_and_a_reservation_is_not_a_start() {
        let l = ledger();
        let s = &Spacing { interval: 100, line: 3, delay: 1_000 };
        l.wrote("p", s, 5_000, true);
        l.wrote("p", s, 4_000, true);
        l.wrote("p", s, 9_000, false);
        let fields = l.all();
        assert_eq!(fields.len(), 1);
        let mut got = fields[0].1.clone();
        got.sort();
        let mut want = vec![
            ("rate".to_owned(), 9_100),
            ("last:rate".to_owned(), 5_000),
            ("lane:3".to_owned(), 10_000),
            ("last:lane:3".to_owned(), 5_000),
        ];
        want.sort();
        assert_eq!(got, want);
        assert_eq!(l.floors("p", s), (9_100, 10_000));
        assert_eq!(l.floors("p", &Spacing { interval: 0, line: 4, delay: 7 }), (0, 0));
        assert_eq!(l.floors("q", s), (0, 0));
    }

    #[test]
    fn a_local_start_needs_the_offset_and_lands_on_redis_s_clock() {
        let l = ledger();
        let s = &Spacing { interval: 0, line: 1, delay: 2_000_000 };
        l.started_alone("p", s);
        assert!(l.all().is_empty(), "no offset measured: nothing recorded");
        let now = Instant::now();
        l.measured(1_800_000_000_000_000, now, Duration::ZERO);
        l.started_alone("p", s);
        let fields = l.all();
        let last = fields[0].1.iter().find(|(f, _)| f == "last:lane:1").unwrap().1;
        assert!((1_800_000_000_000_000..1_800_000_010_000_000).contains(&last), "{last}");
    }
}
