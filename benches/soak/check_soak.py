#!/usr/bin/env python3
"""Checks a soak run directory (benches/soak/soak.sh, fleet_soak.sh) and prints PASS/FAIL lines.

Reads loadgen.json (the load client's summary), blocked-ids.txt (the id=C-S query of every
request answered 403), audit.jsonl (the proxy's audit log, after it stopped), metrics.txt (the
proxy's /metrics, scraped once the audit writer was idle), rss.tsv (samples of the proxy) and
fault.log (robots.txt requests the fault server saw). Exit status: the number of failed checks
(at most 100). Standard library only.

With --instances a,b,c (the fleet soak), each instance's files are in the subdirectory of its
name, and the checks are made across them: the load clients' counts added up, every 403 in the
audit logs of all instances exactly once, the counters of all instances added up, the RSS of
each instance flat. --fleet also checks the Redis restart (events.tsv, fleet.tsv; see
check_fleet).
"""

import argparse
import collections
import json
import os
import re
import statistics
import sys

failures = 0


def check(ok, text):
    global failures
    print(("PASS  " if ok else "FAIL  ") + text)
    if not ok:
        failures += 1
    return ok


def info(text):
    print("INFO  " + text)


def read_metrics(path):
    """{(name, frozenset(labels)): value} from a Prometheus/OpenMetrics text scrape."""
    out = {}
    if not os.path.exists(path):
        return out
    pat = re.compile(r'^([a-zA-Z_:][\w:]*)(?:\{([^}]*)\})?\s+(\S+)')
    for line in open(path, encoding="utf-8", errors="replace"):
        m = pat.match(line)
        if not m:
            continue
        labels = frozenset(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        try:
            out[(m.group(1), labels)] = float(m.group(3))
        except ValueError:
            pass
    return out


def metric(metrics, name, **labels):
    return metrics.get((name, frozenset(labels.items())))


def add_counts(into, counts):
    for k, v in counts.items():
        into[k] = into.get(k, 0) + v


def merge_loadgen(summaries):
    """One summary of several load clients' (one per instance): counts added up, latency
    percentiles the worst instance's."""
    if len(summaries) == 1:
        return summaries[0]
    out = {"requests": 0, "responses": 0, "errors_total": 0, "connects": 0, "reconnects": 0,
           "rps": 0.0, "elapsed_s": 0.0, "duration_s": 0.0, "accounted": True,
           "disallow_fraction": summaries[0]["disallow_fraction"], "statuses": {},
           "allowed_path": {}, "disallowed_path": {}, "errors": {}, "connect_errors": {},
           "body_errors": {}, "per_origin": {}, "latency_ms": {}}
    for lg in summaries:
        for k in ("requests", "responses", "errors_total", "connects", "reconnects", "rps"):
            out[k] += lg[k]
        out["elapsed_s"] = max(out["elapsed_s"], lg["elapsed_s"])
        out["duration_s"] = max(out["duration_s"], lg["duration_s"])
        out["accounted"] = out["accounted"] and lg["accounted"]
        for k in ("statuses", "allowed_path", "disallowed_path", "errors", "connect_errors",
                  "body_errors"):
            add_counts(out[k], lg[k])
        for origin, po in lg["per_origin"].items():
            mine = out["per_origin"].setdefault(
                origin, {"allowed_path": {}, "disallowed_path": {}, "errors": 0})
            add_counts(mine["allowed_path"], po["allowed_path"])
            add_counts(mine["disallowed_path"], po["disallowed_path"])
            mine["errors"] += po.get("errors", 0)
        for k, v in lg["latency_ms"].items():
            out["latency_ms"][k] = max(out["latency_ms"].get(k, 0), v)
    return out


def table(title, counts):
    items = ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())) or "none"
    print(f"      {title:<22} {items}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", required=True)
    ap.add_argument("--duration", type=float, required=True)
    ap.add_argument("--warmup", type=float, required=True)
    ap.add_argument("--rss-tol-kib", type=float, default=8192)
    ap.add_argument("--rss-tol-pct", type=float, default=10)
    ap.add_argument("--fault-origins", default="")
    ap.add_argument("--instances", default="",
                    help="the fleet soak's instances, comma-separated: their files are in "
                         "subdirectories of these names")
    ap.add_argument("--fleet", action="store_true",
                    help="also check the fleet's Redis restart (events.tsv, fleet.tsv)")
    ap.add_argument("--allowed-503", type=int, default=0,
                    help="503 answers allowed (fleet.on_redis_error = refuse: each must be "
                         "audited as fleet_unavailable)")
    ap.add_argument("--rejoin-within", type=float, default=30,
                    help="seconds after Redis is back within which every instance must be up")
    args = ap.parse_args()
    run = args.run
    faulty = {o for o in args.fault_origins.split(",") if o}
    names = [n for n in args.instances.split(",") if n]
    dirs = [os.path.join(run, n) for n in names] or [run]

    # --- the load client's view
    try:
        lg = merge_loadgen([json.load(open(os.path.join(d, "loadgen.json"))) for d in dirs])
    except (OSError, ValueError, KeyError) as e:
        check(False, f"loadgen summary readable ({e})")
        return
    statuses = {int(k): v for k, v in lg["statuses"].items()}
    print()
    print(f"      requests {lg['requests']}, responses {lg['responses']}, "
          f"errors {lg['errors_total']}, {lg['rps']:.0f} responses/s over {lg['elapsed_s']:.1f} s "
          f"(issuing for {lg['duration_s']:.0f} s), connects {lg['connects']}, "
          f"reconnects {lg['reconnects']}")
    table("status", lg["statuses"])
    table("allowed path", lg["allowed_path"])
    table("disallowed path", lg["disallowed_path"])
    if lg["errors"] or lg["connect_errors"] or lg["body_errors"]:
        table("transport errors", lg["errors"])
        table("connect errors", lg["connect_errors"])
        table("body errors", lg["body_errors"])
    lat = lg["latency_ms"]
    print(f"      latency ms             p50 {lat['p50']}, p90 {lat['p90']}, p99 {lat['p99']}, "
          f"p99.9 {lat['p999']}, max {lat['max']}")
    for origin in sorted(faulty):
        po = lg["per_origin"].get(origin, {})
        print(f"      fault origin {origin}: allowed {po.get('allowed_path')}, "
              f"disallowed {po.get('disallowed_path')}")
    disallowed_sent = sum(lg["disallowed_path"].values())
    if lg["responses"]:
        info(f"{disallowed_sent / lg['responses']:.1%} of the answered requests went to a "
             f"disallowed path (asked for {lg['disallow_fraction']:.0%})")
    print()

    check(lg["accounted"] and lg["requests"] == lg["responses"] + lg["errors_total"],
          f"every request accounted for: {lg['requests']} = {lg['responses']} responses + "
          f"{lg['errors_total']} errors")
    transport = lg["errors_total"] + sum(lg["connect_errors"].values()) \
        + sum(lg["body_errors"].values())
    check(transport == 0, f"no transport errors (errors {lg['errors']}, connect "
          f"{lg['connect_errors']}, body {lg['body_errors']})")
    server_errors = {s: n for s, n in statuses.items() if s >= 500}
    if args.allowed_503:
        others = {s: n for s, n in server_errors.items() if s != 503}
        check(not others and server_errors.get(503, 0) <= args.allowed_503,
              f"no 5xx but the 503s of fleet.on_redis_error = refuse ({server_errors or 'none'}, "
              f"at most {args.allowed_503} 503s: the fleet_unavailable records)")
    else:
        check(not server_errors, f"no 5xx answers ({server_errors or 'none'})")
    wrong = {}
    for origin, po in lg["per_origin"].items():
        if origin in faulty:
            fine = ("200", "403", "503") if args.allowed_503 else ("200", "403")
            bad = {f"{kind}:{s}": n for kind in ("allowed_path", "disallowed_path")
                   for s, n in po[kind].items() if s not in fine}
        elif args.allowed_503:
            bad = {f"allowed:{s}": n for s, n in po["allowed_path"].items()
                   if s not in ("200", "503")}
            bad.update({f"disallowed:{s}": n for s, n in po["disallowed_path"].items()
                        if s not in ("403", "503")})
        else:
            bad = {f"allowed:{s}": n for s, n in po["allowed_path"].items() if s != "200"}
            bad.update({f"disallowed:{s}": n for s, n in po["disallowed_path"].items()
                        if s != "403"})
        if bad:
            wrong[origin] = bad
    check(not wrong, "origins without faults: allowed paths 200 and disallowed paths 403 only; "
          f"fault origins: 200 or 403 only ({wrong or 'so'})")

    # --- the audit log against the 403s the client saw
    blocked_ids = collections.Counter()
    for d in dirs:
        ids_path = os.path.join(d, "blocked-ids.txt")
        if os.path.exists(ids_path):
            for line in open(ids_path):
                blocked_ids[line.strip()] += 1
    client_403 = statuses.get(403, 0)
    audit_lines = 0
    torn = 0
    audit_ids = collections.Counter()
    actions = collections.Counter()
    audited_403 = 0
    audited_503 = 0
    # robots_version records (docs/audit.md) precede the first record naming a robots.txt
    # version in each file; they are not requests' records and robots-proxy does not count them
    # in audit_records_written_total.
    versions = 0
    # proxy_stop records are written at shutdown, after /metrics was read for the last time.
    stops = 0
    refused_at = []
    audit_bytes = 0
    per_log = {}
    for d in dirs:
        audit_path = os.path.join(d, "audit.jsonl")
        if not os.path.exists(audit_path):
            continue
        audit_bytes += os.path.getsize(audit_path)
        n = 0
        for line in open(audit_path, encoding="utf-8", errors="replace"):
            audit_lines += 1
            n += 1
            try:
                rec = json.loads(line)
            except ValueError:
                torn += 1
                continue
            actions[(rec.get("event.action"), rec.get("robots.state"),
                     rec.get("http.response.status_code"))] += 1
            if rec.get("event.action") == "robots_version":
                versions += 1
            elif rec.get("event.action") == "proxy_stop":
                stops += 1
            if rec.get("http.response.status_code") == 403:
                audited_403 += 1
                audit_ids[rec.get("url.query", "")] += 1
            elif rec.get("http.response.status_code") == 503 \
                    and rec.get("event.action") == "fleet_unavailable":
                audited_503 += 1
                refused_at.append(rec.get("@timestamp", ""))
        per_log[os.path.basename(d)] = n
    print()
    print(f"      audit log{'s' if len(dirs) > 1 else ''}: {audit_lines} records "
          f"({audit_bytes} bytes)" + (f", per instance {per_log}" if len(dirs) > 1 else ""))
    for (action, state, status), n in sorted(actions.items(), key=lambda kv: -kv[1]):
        print(f"      {n:>10}  {action} (robots.state {state}, status {status})")
    check(torn == 0, f"every audit line parses ({torn} do not)")
    check(len(blocked_ids) == client_403 and sum(blocked_ids.values()) == client_403,
          f"loadgen recorded an id for each of its {client_403} 403 answers")
    dup = {k: n for k, n in audit_ids.items() if n > 1}
    missing = set(blocked_ids) - set(audit_ids)
    extra = set(audit_ids) - set(blocked_ids)
    check(audited_403 == client_403 and not dup and not missing and not extra,
          f"every 403 audited exactly once: client 403s {client_403}, audit 403 records "
          f"{audited_403}, duplicated {len(dup)}, missing {len(missing)}, extra {len(extra)}"
          + (f" (e.g. missing {sorted(missing)[:3]}, duplicated {list(dup)[:3]}, "
             f"extra {sorted(extra)[:3]})" if dup or missing or extra else ""))
    if args.allowed_503:
        check(statuses.get(503, 0) == audited_503,
              f"every 503 audited as fleet_unavailable: client 503s {statuses.get(503, 0)}, "
              f"audit records {audited_503}")
        if args.fleet:
            check_outage_only(args, run, refused_at)

    metrics = {}
    for d in dirs:
        for key, value in read_metrics(os.path.join(d, "metrics.txt")).items():
            metrics[key] = metrics.get(key, 0) + value
    scraped = all(os.path.exists(os.path.join(d, "metrics.txt")) for d in dirs)
    if metrics and scraped:
        disallow = metric(metrics, "robots_proxy_requests_total", decision="disallow",
                          scheme="http") or 0
        refuse = metric(metrics, "robots_proxy_requests_total", decision="refuse",
                        scheme="http") or 0
        written = metric(metrics, "robots_proxy_audit_records_written_total") or 0
        lost = metric(metrics, "robots_proxy_audit_records_failed_total") or 0
        check(disallow + refuse == client_403,
              f"proxy's counters: disallow {disallow:.0f} + refuse {refuse:.0f} = client 403s "
              f"{client_403}")
        check(written == audit_lines - versions - stops and lost == 0,
              f"audit_records_written_total {written:.0f} = audit lines {audit_lines} less "
              f"{versions} robots_version records and {stops} proxy_stop records written "
              f"after the last scrape, records lost {lost:.0f}")
        fetches = {dict(labels).get("outcome"): int(v) for (name, labels), v in metrics.items()
                   if name == "robots_proxy_robots_fetches_total" and v}
        info(f"robots.txt fetches by outcome: {fetches}")
        errs = {dict(labels).get("kind"): int(v) for (name, labels), v in metrics.items()
                if name == "robots_proxy_upstream_errors_total" and v}
        if errs:
            info(f"upstream errors: {errs}")
    else:
        check(False, "the proxy's /metrics was scraped after the load")

    faults = collections.Counter()
    fault_log = os.path.join(run, "fault.log")
    if os.path.exists(fault_log):
        for line in open(fault_log):
            parts = line.split()
            if len(parts) == 3:
                faults[parts[2]] += 1
    info(f"robots.txt requests the fault server saw, by phase: {dict(faults)}")

    # --- the proxy's log
    levels = collections.Counter()
    panics = []
    messages = collections.Counter()
    for d in dirs:
        proxy_log = os.path.join(d, "proxy.log")
        if not os.path.exists(proxy_log):
            continue
        for line in open(proxy_log, encoding="utf-8", errors="replace"):
            if "panicked" in line:
                panics.append(line.strip())
            m = re.search(r"\b(ERROR|WARN)\b\s+(\S+)\s*:?\s*(.*)", line)
            if m:
                levels[m.group(1)] += 1
                messages[re.sub(r"\d+", "N", m.group(3))[:110]] += 1
    check(not panics, f"no panic in the proxy's log{': ' + panics[0] if panics else ''}")
    info(f"proxy log: {dict(levels) or 'no'} warnings/errors")
    for msg, n in messages.most_common(5):
        print(f"      {n:>8}  {msg}")

    # With a Redis restart, memory is compared within each half (before it, and once the
    # instances have settled after it): a leak grows within a phase; what the outage itself
    # costs (a larger pool of threads, say) is a step, printed on its own.
    events = read_events(run) if args.fleet else {}
    outage = (events["redis_stopped"], events["redis_started"]) \
        if "redis_stopped" in events and "redis_started" in events else None
    for d in dirs:
        check_rss(args, d, f" of {os.path.basename(d)}" if len(dirs) > 1 else "", outage)
    if args.fleet:
        check_fleet(args, run, names)


def check_rss(args, d, whose, outage=None):
    samples = []
    rss_path = os.path.join(d, "rss.tsv")
    if os.path.exists(rss_path):
        for line in open(rss_path):
            parts = line.split()
            if line.startswith("#") or len(parts) < 4 or not parts[1].isdigit():
                continue
            samples.append((float(parts[0]), int(parts[1]), int(parts[2]), int(parts[3]),
                            parts[4] if len(parts) > 4 else "?",
                            parts[5] if len(parts) > 5 else "?"))
    print()
    print(f"      proxy{whose} samples (seconds: RSS MiB / fds / threads / client connections / "
          "upstream connections):")
    line = []
    for t, rss, fds, threads, open_conns, upstream in samples:
        line.append(f"{t:.0f}s: {rss / 1024:.1f}/{fds}/{threads}/{open_conns}/{upstream}")
    for i in range(0, len(line), 5):
        print("        " + "  ".join(line[i:i + 5]))
    if outage is not None:
        stopped, started = outage
        w = min(60.0, (stopped - args.warmup) / 2)
        before = flat(args, samples, (args.warmup, args.warmup + w), (stopped - w, stopped),
                      f"RSS{whose} flat before the Redis restart")
        settle = min(60.0, (args.duration - started) / 4)
        w = min(60.0, (args.duration - started - settle) / 2)
        after = flat(args, samples, (started + settle, started + settle + w),
                     (args.duration - w, args.duration),
                     f"RSS{whose} flat after the Redis restart (from {settle:.0f} s after it)")
        if before is not None and after is not None:
            info(f"RSS{whose} step across the Redis restart: {before / 1024:.1f} MiB before, "
                 f"{after / 1024:.1f} MiB after ({(after - before) / 1024:+.1f} MiB); threads "
                 f"{max((x[3] for x in samples if x[0] < stopped), default='?')} before, "
                 f"{max((x[3] for x in samples if x[0] > started), default='?')} after")
        return
    window = min(60.0, (args.duration - args.warmup) / 2)
    early_s = [s for s in samples if args.warmup <= s[0] <= args.warmup + window]
    late_s = [s for s in samples if args.duration - window <= s[0] <= args.duration]
    if early_s and late_s:
        e = statistics.median(s[1] for s in early_s)
        l = statistics.median(s[1] for s in late_s)
        tol = max(args.rss_tol_kib, e * args.rss_tol_pct / 100)
        check(l - e <= tol,
              f"RSS{whose} flat after warm-up: median {e / 1024:.1f} MiB in "
              f"[{args.warmup:.0f}s, {args.warmup + window:.0f}s] ({len(early_s)} samples), "
              f"{l / 1024:.1f} MiB in [{args.duration - window:.0f}s, {args.duration:.0f}s] "
              f"({len(late_s)}), growth {(l - e) / 1024:+.1f} MiB, allowed "
              f"{tol / 1024:.1f} MiB (max of {args.rss_tol_kib / 1024:.0f} MiB and "
              f"{args.rss_tol_pct:.0f}%)")
        info(f"open file descriptors: median {statistics.median(s[2] for s in early_s):.0f} "
             f"after warm-up, {statistics.median(s[2] for s in late_s):.0f} at the end")
    else:
        check(False, f"enough RSS samples{whose} for the memory check ({len(samples)} samples)")


def flat(args, samples, early, late, what):
    """Checks that the median RSS of the samples in `late` (a time range) is at most the
    tolerance above that of `early`; returns the late median (KiB), None without samples."""
    e_s = [x[1] for x in samples if early[0] <= x[0] <= early[1]]
    l_s = [x[1] for x in samples if late[0] <= x[0] <= late[1]]
    if not e_s or not l_s:
        check(False, f"{what}: enough samples ({len(e_s)} in [{early[0]:.0f}s, {early[1]:.0f}s], "
              f"{len(l_s)} in [{late[0]:.0f}s, {late[1]:.0f}s])")
        return None
    e, l = statistics.median(e_s), statistics.median(l_s)
    tol = max(args.rss_tol_kib, e * args.rss_tol_pct / 100)
    check(l - e <= tol,
          f"{what}: median {e / 1024:.1f} MiB in [{early[0]:.0f}s, {early[1]:.0f}s] "
          f"({len(e_s)} samples), {l / 1024:.1f} MiB in [{late[0]:.0f}s, {late[1]:.0f}s] "
          f"({len(l_s)}), growth {(l - e) / 1024:+.1f} MiB, allowed {tol / 1024:.1f} MiB")
    return l


def read_events(run):
    """events.tsv: `seconds event` lines on the soak's clock; `t0_epoch` is that clock's zero
    as a Unix time."""
    events = {}
    path = os.path.join(run, "events.tsv")
    if os.path.exists(path):
        for line in open(path):
            parts = line.split()
            if len(parts) == 2:
                events[parts[1]] = float(parts[0])
    return events


def check_outage_only(args, run, stamps):
    """fleet.on_redis_error = refuse: the fleet_unavailable records (the 503s) all fall
    between Redis stopping and --rejoin-within seconds after it is back."""
    import datetime
    events = read_events(run)
    if not all(k in events for k in ("t0_epoch", "redis_stopped", "redis_started")):
        check(False, f"the outage's times are in events.tsv ({events})")
        return
    t0 = events["t0_epoch"]
    lo, hi = events["redis_stopped"] - 1, events["redis_started"] + args.rejoin_within
    outside = []
    for stamp in stamps:
        try:
            at = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() - t0
        except ValueError:
            outside.append(stamp)
            continue
        if not lo <= at <= hi:
            outside.append(f"{at:.1f}s")
    check(not outside, f"the 503s all came while Redis was away: {len(stamps)} between "
          f"{lo:.1f}s and {hi:.1f}s, {len(outside)} outside" +
          (f" (e.g. {outside[:3]})" if outside else ""))


def check_fleet(args, run, names):
    """The Redis restart: events.tsv has `seconds event` lines (redis_stopped, redis_started,
    on the soak's clock), fleet.tsv `seconds instance fleet_up instances_seen` lines, polled
    from each instance's /metrics and /api/summary. Every instance must have seen Redis go
    (fleet_up 0), and be up again, seeing every instance of the fleet, within
    --rejoin-within seconds of Redis being back."""
    events = read_events(run)
    if not check("redis_stopped" in events and "redis_started" in events,
                 f"Redis was stopped and started again halfway ({events})"):
        return
    stopped, started = events["redis_stopped"], events["redis_started"]
    polls = collections.defaultdict(list)
    path = os.path.join(run, "fleet.tsv")
    if os.path.exists(path):
        for line in open(path):
            parts = line.split()
            if len(parts) == 4 and not line.startswith("#"):
                polls[parts[1]].append((float(parts[0]), parts[2], parts[3]))
    print()
    print(f"      Redis stopped at {stopped:.1f}s, started at {started:.1f}s")
    for name in names:
        seen = polls.get(name, [])
        down = [t for t, up, _ in seen if stopped <= t and up == "0"]
        # A failover can take an instance out for less than one poll: its log says it went.
        log_path = os.path.join(run, name, "proxy.log")
        logged = os.path.exists(log_path) and any(
            "fleet: Redis is out of reach" in line
            for line in open(log_path, encoding="utf-8", errors="replace"))
        back = [t for t, up, n in seen
                if t >= started and up == "1" and n.isdigit() and int(n) >= len(names)]
        before = [t for t, up, n in seen if t < stopped and up == "1"]
        check(bool(before), f"{name}: in the fleet before the restart ({len(before)} polls)")
        check(bool(down) or logged, f"{name}: saw Redis go (fleet_up 0 at "
              f"{down[0] if down else '-'}s" + (", and logged it" if logged else "") + ")")
        rejoin = back[0] - started if back else None
        check(rejoin is not None and rejoin <= args.rejoin_within,
              f"{name}: rejoined the fleet (fleet_up 1, {len(names)} instances seen) "
              + (f"{rejoin:.1f} s after Redis was back" if rejoin is not None else "never")
              + f" (at most {args.rejoin_within:.0f} s)")
        late = [t for t, up, _ in seen if back and t > back[0] and up != "1"]
        check(not late, f"{name}: stayed in the fleet after rejoining "
              f"({len(late)} polls out of it)")

if __name__ == "__main__":
    main()
    sys.exit(min(failures, 100))
