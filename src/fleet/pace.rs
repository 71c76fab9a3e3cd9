//! The pace in Redis: [`RedisPace`] is the [`PaceStore`] of a fleet.
//!
//! Each request's start is reserved by one server-side script, atomically and on Redis's own
//! clock (`TIME`), so the instances' clocks never decide a pace: the script takes
//! `max(now, rate.next, lane.next)` for the request and moves each spacing on, exactly as the
//! in-process schedule does (see `pacing::schedule`). The queue is the set of reservations
//! whose start has not come yet, so `queue_limit` holds for the fleet, and a reservation of a
//! dead instance leaves it when its start passes. Concurrency slots are leases in a sorted set
//! (score: when the lease ends), taken by another script and given back when the response
//! headers arrive, or expiring on their own if the instance that held one dies.
//!
//! Keys (after `fleet.key_prefix`): `pace:<authority>` (hash: `rate`, `lane:<line>`, in
//! microseconds of Redis time), `queue:<authority>` and `slots:<authority>` (sorted sets).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::Script;
use tokio::time::Instant;

use super::Fleet;
use crate::authority::Authority;
use crate::pacing::{Admission, Bound, Held, LocalPace, PaceAsk, PaceFuture, PaceStore, Refusal};

/// How long a concurrency slot lasts unless given back: longer than any response takes to
/// start (`upstream.response_timeout`); an instance that dies holding one frees it then.
pub const SLOT_LEASE: Duration = Duration::from_secs(120);

/// Added to every spacing the fleet reserves, at most: a start is reserved on Redis's clock
/// and waited for on the instance's, after a round trip, so two instances' requests could
/// otherwise reach the origin up to a round trip (and the jitter of forwarding) less than the
/// spacing apart. A fiftieth of the spacing when that is less (20 ms on a 1 s Crawl-delay,
/// 20 µs at 1,000 rps).
pub const SPACING_MARGIN: Duration = Duration::from_millis(20);

/// `spacing` with its margin.
fn with_margin(spacing: Duration) -> Duration {
    spacing + (spacing / 50).min(SPACING_MARGIN)
}

/// How often a request waiting for a slot held by another instance looks again.
const SLOT_POLL: Duration = Duration::from_millis(20);

const RESERVE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local lane = 'lane:' .. ARGV[2]
local delay = tonumber(ARGV[3])
local max_wait = tonumber(ARGV[4])
local queue_limit = tonumber(ARGV[5])
local keep_ms = tonumber(ARGV[7])
local start = now
local bound = ''
if interval > 0 then
  local n = tonumber(redis.call('HGET', KEYS[1], 'rate') or '0')
  if n > start then start = n; bound = 'rate' end
end
if delay > 0 then
  local n = tonumber(redis.call('HGET', KEYS[1], lane) or '0')
  if n > start or (n == start and bound ~= '') then start = n; bound = 'crawl_delay' end
end
local wait = start - now
if bound ~= '' and wait > max_wait then return {'too_long', wait, bound, 0} end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local waiting = redis.call('ZCARD', KEYS[2])
if bound ~= '' and waiting >= queue_limit then
  return {'queue_full', wait, bound, waiting}
end
if interval > 0 then redis.call('HSET', KEYS[1], 'rate', start + interval) end
if delay > 0 then redis.call('HSET', KEYS[1], lane, start + delay) end
if bound ~= '' then redis.call('ZADD', KEYS[2], start, ARGV[6]) end
redis.call('PEXPIRE', KEYS[1], keep_ms)
redis.call('PEXPIRE', KEYS[2], keep_ms)
return {'ok', wait, bound, waiting}
";

const TAKE_SLOT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[2])
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]))
  return 1
end
return 0
";

/// The fleet's pace, with this instance's own as the fallback while Redis is out of reach
/// (`fleet.on_redis_error = "local"`).
pub struct RedisPace {
    fleet: Arc<Fleet>,
    local: LocalPace,
    reserve: Script,
    take_slot: Script,
    /// How long Redis keeps an authority's pace after its last request (`pacing::idle_after`).
    keep: Duration,
    next_id: AtomicU64,
    /// Requests of this instance waiting, per authority, for the queue-depth gauge.
    waiting: moka::sync::Cache<Authority, Arc<AtomicUsize>>,
}

impl RedisPace {
    /// The pace in the Redis of `fleet`; `keep` is how long an idle authority's pace is kept
    /// (here and in Redis).
    pub fn new(fleet: Arc<Fleet>, keep: Duration) -> Self {
        RedisPace {
            fleet,
            local: LocalPace::new(keep),
            reserve: Script::new(RESERVE),
            take_slot: Script::new(TAKE_SLOT),
            keep,
            next_id: AtomicU64::new(0),
            waiting: moka::sync::Cache::builder()
                .max_capacity(crate::pacing::MAX_SITES)
                .time_to_idle(keep)
                .build(),
        }
    }

    fn unique(&self) -> String {
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        format!("{}#{n}", self.fleet.instance())
    }

    /// This instance's answer while Redis is out of reach.
    async fn without_fleet(&self, ask: PaceAsk<'_>) -> Result<Admission, Held> {
        if self.fleet.refuses_when_down() {
            return Err(Held::Unavailable);
        }
        self.local.admit(ask).await
    }

    async fn admit_shared(&self, ask: PaceAsk<'_>) -> Result<Admission, Held> {
        let PaceAsk { authority, lane, limits } = ask;
        let arrival = Instant::now();
        let deadline = arrival.checked_add(limits.max_wait).unwrap_or(arrival);
        let micros = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        let keys = [
            self.fleet.key(&format!("pace:{authority}")),
            self.fleet.key(&format!("queue:{authority}")),
        ];
        let mut invocation = self.reserve.prepare_invoke();
        invocation
            .key(&keys[0])
            .key(&keys[1])
            .arg(limits.interval.map_or(0, |i| micros(with_margin(i))))
            .arg(lane.map_or(0, |l| l.line))
            .arg(lane.map_or(0, |l| micros(with_margin(l.delay))))
            .arg(micros(limits.max_wait))
            .arg(limits.queue_limit)
            .arg(self.unique())
            .arg(u64::try_from(self.keep.as_millis()).unwrap_or(u64::MAX).max(1000));
        let reserved: Result<(String, u64, String, u64), _> =
            self.fleet.call(|mut c| async move { invocation.invoke_async(&mut c).await }).await;
        let (verdict, wait, bound, waiting) = match reserved {
            Ok(r) => r,
            Err(_) => return self.without_fleet(ask).await,
        };
        let wait = Duration::from_micros(wait);
        let bound = match bound.as_str() {
            "rate" => Some(Bound::Rate),
            "crawl_delay" => Some(Bound::CrawlDelay),
            _ => None,
        };
        match verdict.as_str() {
            "ok" => {}
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
        let counter = self.waiting.get_with_by_ref(authority, || Arc::new(AtomicUsize::new(0)));
        counter.fetch_add(1, Ordering::Relaxed);
        let _queued = Queued(counter);
        let mut waited = false;
        if !wait.is_zero() {
            waited = true;
            tokio::time::sleep(wait).await;
        }
        let Some(max) = limits.concurrency else { return Ok(Admission { waited, slot: None }) };
        let slots = self.fleet.key(&format!("slots:{authority}"));
        let lease_ms = u64::try_from(SLOT_LEASE.as_millis()).unwrap_or(u64::MAX);
        loop {
            let member = self.unique();
            let mut invocation = self.take_slot.prepare_invoke();
            invocation.key(&slots).arg(max).arg(&member).arg(lease_ms);
            let taken: Result<u8, _> =
                self.fleet.call(|mut c| async move { invocation.invoke_async(&mut c).await }).await;
            match taken {
                Ok(1) => {
                    let slot = Slot { fleet: self.fleet.clone(), key: slots, member };
                    return Ok(Admission { waited, slot: Some(Box::new(slot)) });
                }
                Ok(_) => {}
                // Out of reach while waiting: as if it had been from the start.
                Err(_) if self.fleet.refuses_when_down() => return Err(Held::Unavailable),
                Err(_) => return Ok(Admission { waited, slot: None }),
            }
            waited = true;
            if Instant::now() + SLOT_POLL > deadline {
                return Err(Held::NoConnection);
            }
            tokio::time::sleep(SLOT_POLL).await;
        }
    }
}

/// One of this instance's requests waiting for its authority, until dropped.
struct Queued(Arc<AtomicUsize>);

impl Drop for Queued {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A concurrency slot held in Redis: given back when dropped.
struct Slot {
    fleet: Arc<Fleet>,
    key: String,
    member: String,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let fleet = self.fleet.clone();
        let key = std::mem::take(&mut self.key);
        let member = std::mem::take(&mut self.member);
        runtime.spawn(async move {
            // Not given back (Redis out of reach): the lease ends by itself.
            let _ = fleet
                .call(|mut c| async move {
                    redis::cmd("ZREM").arg(key).arg(member).query_async::<()>(&mut c).await
                })
                .await;
        });
    }
}

impl PaceStore for RedisPace {
    fn admit<'a>(&'a self, ask: PaceAsk<'a>) -> PaceFuture<'a, Result<Admission, Held>> {
        Box::pin(self.admit_shared(ask))
    }

    fn queue_depth(&self, authority: &Authority) -> usize {
        let here = self.waiting.get(authority).map_or(0, |n| n.load(Ordering::Relaxed));
        here + self.local.queue_depth(authority)
    }

    fn queue_depths(&self) -> Vec<(Authority, usize)> {
        let mut depths: Vec<(Authority, usize)> = self
            .waiting
            .iter()
            .map(|(a, n)| (a.as_ref().clone(), n.load(Ordering::Relaxed)))
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
        self.waiting.entry_count() + self.local.sites()
    }
}
