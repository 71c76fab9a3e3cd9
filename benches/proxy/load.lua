-- wrk script of benches/proxy/run.sh: absolute-form requests through a forward proxy.
--
-- wrk has no proxy mode: it is pointed at the proxy, and every request line carries the full
-- URL (`GET http://127.0.0.1:18170/index.html HTTP/1.1`) with `Host` set to its authority.
--
-- Environment:
--   BENCH_AUTHORITIES  comma-separated authorities, taken in turn (single, many, deny)
--   BENCH_WIDE=N       instead: N authorities 127.0.X.Y:BENCH_WIDE_PORT (X = 1.., Y = 1..250)
--   BENCH_PATH         the path requested (default /index.html)
--   BENCH_UA           the User-Agent (default benchbot/1.0)
--   BENCH_STOP_AFTER=N stop the thread after N responses (first contact: each authority once)
-- At the end one machine-readable line: RESULT key=value ...

local path = os.getenv("BENCH_PATH") or "/index.html"
local ua = os.getenv("BENCH_UA") or "benchbot/1.0"
local wide = tonumber(os.getenv("BENCH_WIDE") or "0") or 0
local wide_port = os.getenv("BENCH_WIDE_PORT") or "18180"
local stop_after = tonumber(os.getenv("BENCH_STOP_AFTER") or "0") or 0

local authorities = {}
if wide > 0 then
  for i = 0, wide - 1 do
    authorities[#authorities + 1] =
      string.format("127.0.%d.%d:%s", math.floor(i / 250) + 1, i % 250 + 1, wide_port)
  end
else
  for a in string.gmatch(os.getenv("BENCH_AUTHORITIES") or "127.0.0.1:18170", "[^,]+") do
    authorities[#authorities + 1] = a
  end
end

-- Wall-clock nanoseconds (LuaJIT's FFI): wrk's own duration is the -d it was given, even when
-- a thread stops early, so first contact times itself from its first request to its last answer.
local ffi = require("ffi")
ffi.cdef [[
  typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
  int clock_gettime(int clock, bench_timespec *ts);
]]
local ts = ffi.new("bench_timespec")
local function now_us()
  ffi.C.clock_gettime(1, ts) -- CLOCK_MONOTONIC
  return tonumber(ts.tv_sec) * 1000000 + math.floor(tonumber(ts.tv_nsec) / 1000)
end
started_us = 0
finished_us = 0

local threads = {}
setup = function(thread)
  table.insert(threads, thread)
end

local prepared = {}
for i, a in ipairs(authorities) do
  prepared[i] = wrk.format("GET", "http://" .. a .. path, { ["Host"] = a, ["User-Agent"] = ua })
end
local count = #prepared
local next_index = 0

request = function()
  if started_us == 0 then
    started_us = now_us()
  end
  next_index = next_index % count + 1
  return prepared[next_index]
end

if stop_after > 0 then
  local answered = 0
  response = function(status, headers, body)
    answered = answered + 1
    if answered >= stop_after then
      finished_us = now_us()
      wrk.thread:stop()
    end
  end
end

done = function(summary, latency, requests)
  local e = summary.errors
  local duration = summary.duration
  if stop_after > 0 then
    -- From the first request of any thread to the last thread's last answer.
    local first, last = nil, 0
    for _, thread in ipairs(threads) do
      local s, f = thread:get("started_us"), thread:get("finished_us")
      if s > 0 and (first == nil or s < first) then first = s end
      if f > last then last = f end
    end
    if first ~= nil and last > first then duration = last - first end
  end
  io.write(string.format(
    "RESULT requests=%d duration_us=%d p50_us=%d p99_us=%d errors=%d non2xx=%d\n",
    summary.requests, duration, latency:percentile(50), latency:percentile(99),
    e.connect + e.read + e.write + e.timeout, e.status))
end
