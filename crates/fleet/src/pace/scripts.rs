//! The server-side scripts of the fleet's pace. Every time is in microseconds of Redis's own
//! clock (`TIME`).
//!
//! The hash `pace:<authority>` keeps, per spacing, the two instants of the in-process
//! schedule (`pacing::schedule`): `rate` / `lane:<line>`, the earliest start still free to
//! reserve, and `last:rate` / `last:lane:<line>`, the last actual start. The queue key holds
//! the requests of one group admitted and not yet started (score: when the member lapses by
//! itself if its instance died): `queue:<authority>#<line>` for a Crawl-delay lane,
//! `queue:<authority>` for the requests with no Crawl-delay; each group has its own, as in
//! the schedule, and `queue_limit` bounds each. `slots:<authority>` holds the connection slots
//! held (score: when the lease ends); `slotq:<authority>` the requests waiting for one, first
//! come first served (score: Redis's clock when they first found none); `slot-waiters` in the
//! hash says until when a request may wait for one of them (RELEASE announces slots given back
//! only until then).

/// KEYS: pace, queue (of the request's group), slots, the member's give-back mark
/// ([`GIVE_BACK`]), the slot queue. ARGV: interval, lane line, delay, max_wait, queue_limit,
/// member, keep (ms), most slots (0: no limit), slot lease, queue member's lapse after max_wait,
/// the instance's own next starts of the rate and of the lane (floors, `ledger`: 0 for none),
/// the timer's tick (`pacing::TICK`), how many more starts and slots the instance asks for
/// (its share, [`super::share`]: 0 for none).
///
/// `Schedule::reserve`: `start = max(now, rate, lane)`; refuses a wait past `max_wait`, and a
/// request that would wait (for its start, or for a slot: none free now, or requests of the
/// fleet already wait for one in the slot queue, first come first served) when `queue_limit`
/// of its group wait already. A request that need not wait starts at once: it takes its slot and is
/// recorded as begun (`go`), in this one call. Any other joins the queue (`wait`).
/// Returns `{verdict, wait, bound, waiting, now, starts, slots, room}` (`waiting` is 0 for
/// `go`; `now`, Redis's clock); `gone`, changing nothing, when the instance already gave the
/// member back (the call timed out there).
///
/// A request that goes, with no Crawl-delay, at a rate finer than the tick (or with a
/// concurrency limit and no rate) also reserves more for the instance's next requests (its
/// share, [`super::share`]): up to `want` more starts, the next places of the rate that fall
/// within a tick of now, and up to `slots_wanted` more slots (`<member>/1`, `<member>/2`, ...),
/// at most half of those still free; no more starts than can have a slot (those of the
/// instance's pool, `want - slots_wanted`, and those taken now). `starts` and `slots` say how
/// many it took; `room` is 1 when at most half the limit is held after it (the instance may
/// keep slots whose requests ended for its next, [`super::share::ROOMY`]).
///
/// A rate finer than the timer (`interval` under `tick`) that puts the start less than a tick
/// ahead does not make the request wait (`pacing::TICK`): it goes at once in the place it
/// reserved (`last:rate` is that place, so the next request is spaced from it).
///
/// A spacing's next start is the larger of the pace's and the instance's floor: a pace that
/// Redis lost (a restart without persistence, a failover) is never earlier than what the
/// instance asking knows (review-fleet N3).
///
/// What only a request that may wait needs is done only for one: the lapsed slots (of a holder
/// that died) are pruned only when the slots look full, and the queue is pruned and counted
/// only when the request would join it. A site whose limits do not bind costs Redis a few
/// commands per request.
pub(super) const RESERVE: &str = r"
if redis.call('EXISTS', KEYS[4]) == 1 then return {'gone', 0, '', 0, 0, 0, 0, 0} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local lane = 'lane:' .. ARGV[2]
local delay = tonumber(ARGV[3])
local max_wait = tonumber(ARGV[4])
local queue_limit = tonumber(ARGV[5])
local member = ARGV[6]
local keep_ms = tonumber(ARGV[7])
local slots = tonumber(ARGV[8])
local lease = tonumber(ARGV[9])
local lapse = tonumber(ARGV[10])
local start = now
local bound = ''
if interval > 0 then
  local n = math.max(tonumber(redis.call('HGET', KEYS[1], 'rate') or '0'), tonumber(ARGV[11]))
  if n > start then start = n; bound = 'rate' end
end
if delay > 0 then
  local n = math.max(tonumber(redis.call('HGET', KEYS[1], lane) or '0'), tonumber(ARGV[12]))
  if n > start or (n == start and bound ~= '') then start = n; bound = 'crawl_delay' end
end
local wait = start - now
if bound ~= '' and wait > max_wait then return {'too_long', wait, bound, 0, now, 0, 0, 0} end
local tick = tonumber(ARGV[13])
if bound == 'rate' and interval < tick and wait < tick then bound = ''; wait = 0 end
local free = true
if slots > 0 then
  free = redis.call('ZCARD', KEYS[3]) < slots
  if not free then
    redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
    free = redis.call('ZCARD', KEYS[3]) < slots
  end
  if free and redis.call('EXISTS', KEYS[5]) == 1 then
    redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now - max_wait - lapse)
    free = redis.call('ZCARD', KEYS[5]) == 0
  end
end
local waiting = 0
if bound ~= '' or not free then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  waiting = redis.call('ZCARD', KEYS[2])
  if waiting >= queue_limit then return {'queue_full', wait, bound, waiting, now, 0, 0, 0} end
end
local go = bound == '' and free
local extra, more, room = 0, 0, 0
if go and delay == 0 and interval < tick and (interval > 0 or slots > 0) then
  if interval > 0 then
    extra = math.min(tonumber(ARGV[14]), math.floor((now + tick - 1 - start) / interval))
  end
  if slots > 0 then
    local held = redis.call('ZCARD', KEYS[3])
    more = math.max(0, math.min(tonumber(ARGV[15]), math.floor((slots - held - 1) / 2)))
    if (held + 1 + more) * 2 <= slots then room = 1 end
    if interval > 0 then
      extra = math.min(extra, more + tonumber(ARGV[14]) - tonumber(ARGV[15]))
    end
  end
  extra = math.max(0, extra)
end
if interval > 0 then redis.call('HSET', KEYS[1], 'rate', start + (extra + 1) * interval) end
if delay > 0 then redis.call('HSET', KEYS[1], lane, start + delay) end
redis.call('PEXPIRE', KEYS[1], keep_ms)
if go then
  if interval > 0 then redis.call('HSET', KEYS[1], 'last:rate', start + extra * interval) end
  if delay > 0 then redis.call('HSET', KEYS[1], 'last:' .. lane, start) end
  if slots > 0 then
    local add = {now + lease, member}
    for i = 1, more do
      add[#add + 1] = now + lease
      add[#add + 1] = member .. '/' .. i
    end
    redis.call('ZADD', KEYS[3], unpack(add))
    local ttl = math.floor(lease / 1000) + 1000
    if redis.call('PTTL', KEYS[3]) < ttl then redis.call('PEXPIRE', KEYS[3], ttl) end
  end
  return {'go', 0, '', waiting, now, extra, more, room}
end
redis.call('ZADD', KEYS[2], now + max_wait + lapse, member)
redis.call('PEXPIRE', KEYS[2], keep_ms)
return {'wait', wait, bound, waiting, now, 0, 0, 0}
";

/// KEYS: pace, queue (of the request's group), slots, the member's give-back mark, the slot
/// queue. ARGV: interval, lane line, delay, time left before the request's deadline, member,
/// keep (ms), most slots (0: no limit), slot lease, how long a slot-queue entry lives (us:
/// max_wait and the queue lapse), the timer's tick (`pacing::TICK`).
///
/// `Schedule::begin`, for a request of the queue whose reserved start has come: takes a slot
/// when one is free and it is the request's turn (`busy` otherwise). The slot queue holds the
/// requests of the fleet that found no slot, scored by Redis's clock when they first did
/// (members of one microsecond in their name's order): first come, first served, and a
/// request that arrives while it is not empty waits behind them (review-fleet N4). An entry
/// leaves when its request takes a slot, is refused, gives up or is given back, and lapses
/// by itself `max_wait` and the queue lapse after it joined (an instance that died). Then
/// spaces the actual start from the last actual starts,
/// `start = max(now, last:rate + interval, last:lane + delay)`; refuses it (`too_long`, and
/// the request leaves the queue) when that is past its deadline. A request that finds no slot
/// free is marked in the pace (`slot-waiters`: until its deadline), so that slots given back
/// are announced (RELEASE). Otherwise records the start
/// and returns `{'ok', start - now, bound, now}` (`now`: Redis's clock; the wait is 0 when only
/// a rate finer than the timer puts the start less than a tick ahead, as in RESERVE); the
/// request stays in the queue until `start`.
pub(super) const BEGIN: &str = r"
if redis.call('EXISTS', KEYS[4]) == 1 then return {'gone', 0, '', 0} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local lane = 'lane:' .. ARGV[2]
local delay = tonumber(ARGV[3])
local remaining = tonumber(ARGV[4])
local member = ARGV[5]
local keep_ms = tonumber(ARGV[6])
local slots = tonumber(ARGV[7])
local lease = tonumber(ARGV[8])
local forget = tonumber(ARGV[9])
local tick = tonumber(ARGV[10])
if slots > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
  local turn = true
  if redis.call('EXISTS', KEYS[5]) == 1 then
    redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now - forget)
    local head = redis.call('ZRANGE', KEYS[5], 0, 0)[1]
    turn = (head == nil) or (head == member)
  end
  if not turn or redis.call('ZCARD', KEYS[3]) >= slots then
    redis.call('ZADD', KEYS[5], 'NX', now, member)
    redis.call('PEXPIRE', KEYS[5], keep_ms)
    local waits = now + remaining
    if waits > tonumber(redis.call('HGET', KEYS[1], 'slot-waiters') or '0') then
      redis.call('HSET', KEYS[1], 'slot-waiters', waits)
      redis.call('PEXPIRE', KEYS[1], keep_ms)
    end
    return {'busy', 0, '', now}
  end
end
local start = now
local bound = ''
if interval > 0 then
  local l = redis.call('HGET', KEYS[1], 'last:rate')
  if l and tonumber(l) + interval > start then start = tonumber(l) + interval; bound = 'rate' end
end
if delay > 0 then
  local l = redis.call('HGET', KEYS[1], 'last:' .. lane)
  if l and tonumber(l) + delay > start then start = tonumber(l) + delay; bound = 'crawl_delay' end
end
if slots > 0 then redis.call('ZREM', KEYS[5], member) end
if bound ~= '' and start - now > remaining then
  redis.call('ZREM', KEYS[2], member)
  return {'too_long', start - now, bound, now}
end
if interval > 0 then
  redis.call('HSET', KEYS[1], 'last:rate', start)
  local n = tonumber(redis.call('HGET', KEYS[1], 'rate') or '0')
  if n < start + interval then redis.call('HSET', KEYS[1], 'rate', start + interval) end
end
if delay > 0 then
  redis.call('HSET', KEYS[1], 'last:' .. lane, start)
  local n = tonumber(redis.call('HGET', KEYS[1], lane) or '0')
  if n < start + delay then redis.call('HSET', KEYS[1], lane, start + delay) end
end
redis.call('PEXPIRE', KEYS[1], keep_ms)
if slots > 0 then
  redis.call('ZADD', KEYS[3], start + lease, member)
  local ttl = math.floor((start - now + lease) / 1000) + 1000
  if redis.call('PTTL', KEYS[3]) < ttl then redis.call('PEXPIRE', KEYS[3], ttl) end
end
redis.call('ZADD', KEYS[2], 'XX', start, member)
local wait = start - now
if bound == 'rate' and interval < tick and wait < tick then wait = 0 end
return {'ok', wait, bound, now}
";

/// KEYS: slots, pace. ARGV: channel, then the members given back (one or more). Gives the
/// slots back and, while a request waits for one of the authority's slots anywhere in the fleet
/// (`slot-waiters` in the pace, set by BEGIN: until the last such waiter's deadline), tells the
/// waiters of every instance, once per slot (the message is the slots key).
pub(super) const RELEASE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
redis.call('ZREM', KEYS[1], unpack(ARGV, 2))
if tonumber(redis.call('HGET', KEYS[2], 'slot-waiters') or '0') > now then
  for _ = 2, #ARGV do redis.call('PUBLISH', ARGV[1], KEYS[1]) end
end
return 1
";

/// KEYS: slots. ARGV: member, lease. Extends a slot still held (its request is still in
/// flight) to a lease from now; a slot that already lapsed is not taken again.
pub(super) const RENEW: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local lease = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], 'XX', now + lease, ARGV[1])
local ttl = math.floor(lease / 1000) + 1000
if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
return 1
";

/// KEYS: slots, queue, the member's give-back mark, the slot queue. ARGV: member, how long the
/// mark lasts (ms: the slot lease), how many places of a share it asked for (their slots go
/// too). What a RESERVE or BEGIN that timed out on the instance may
/// still have taken in Redis (it was sent, and runs when Redis gets to it): the member's slot,
/// queue place and slot-queue place are given back, and the mark makes a RESERVE or BEGIN of
/// that member that runs only later take nothing (`gone`). The mark lapses with the lease: no call of that member can
/// come after.
pub(super) const GIVE_BACK: &str = r"
redis.call('SET', KEYS[3], '1', 'PX', ARGV[2])
redis.call('ZREM', KEYS[1], ARGV[1])
for i = 1, tonumber(ARGV[3]) do redis.call('ZREM', KEYS[1], ARGV[1] .. '/' .. i) end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
return 1
";
