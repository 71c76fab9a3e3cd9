//! A fleet: three proxy processes sharing one real redis-server (started per test on a free
//! loopback port, stopped by PID), between real origins and real clients.

mod archive;
mod keyspace;
mod leases;
mod memory;
mod pacing;
mod purges;
mod refresh_ahead;
mod restore;
mod scripts;
mod sealing;
mod secrets;
mod semantic_errors;
mod shares;
mod slots;
mod stores;
pub(crate) mod support;
mod tdmrep;
mod topology;
mod version;
mod versions;

use std::time::{Duration, Instant};

use support::{client, fleet, Redis, TimedOrigin};

const ROBOTS: &str = "User-agent: *\nDisallow: /private\n";

/// What forwarding on a loaded test machine may add to one arrival at the origin. A start is
/// reserved on Redis's clock and the request leaves when its task next runs: one late arrival
/// shortens the next gap by that much (975 ms seen for a 1 s Crawl-delay and its 20 ms margin
/// on a loaded CI machine, 222 ms for 250 ms). The faults these tests catch are larger: two
/// arrivals together, or a gap short by a round trip to Redis.
const JITTER: Duration = Duration::from_millis(60);

/// Holds `arrivals` (at the origin, in order) to the grid of `step` from the first: the n-th
/// at least n × `step` after it, less [`JITTER`], and no two closer than `step` less twice
/// that (review-tests F6).
fn paced(arrivals: &[Instant], step: Duration, what: &str) {
    for (n, at) in arrivals.iter().enumerate() {
        let since = *at - arrivals[0];
        let due = (step * n as u32).saturating_sub(JITTER);
        assert!(since >= due, "{what}: request {n} {since:?} after the first: {arrivals:?}");
    }
    for pair in arrivals.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(gap >= step.saturating_sub(JITTER * 2), "{what}: two {gap:?} apart: {arrivals:?}");
    }
}

/// GETs `url` through the instance `i % n`, returning the status.
async fn get(f: &support::Fleet, i: usize, url: &str) -> u16 {
    let proxy = &f.instances[i % f.instances.len()];
    match client(proxy.proxy_addr).get(url).send().await {
        Ok(resp) => resp.status().as_u16(),
        Err(e) => panic!("GET {url} through instance {i}: {e}"),
    }
}

/// GETs every URL at once, the i-th through instance `i % n`: the statuses, in order. Every
/// client is built first; then the requests are released together (a barrier).
async fn all_at_once(f: &support::Fleet, urls: impl Iterator<Item = String>) -> Vec<u16> {
    let proxies: Vec<_> = f.instances.iter().map(|p| p.proxy_addr).collect();
    at_once(&proxies, urls).await
}

/// [`all_at_once`] through the proxies at `proxies` (the i-th request through `i % n`).
async fn at_once(proxies: &[std::net::SocketAddr], urls: impl Iterator<Item = String>) -> Vec<u16> {
    let requests: Vec<_> =
        urls.enumerate().map(|(i, url)| client(proxies[i % proxies.len()]).get(url)).collect();
    let go = std::sync::Arc::new(tokio::sync::Barrier::new(requests.len()));
    let tasks: Vec<_> = requests
        .into_iter()
        .map(|req| {
            let go = go.clone();
            tokio::spawn(async move {
                go.wait().await;
                req.send().await.map(|r| r.status().as_u16())
            })
        })
        .collect();
    let mut statuses = Vec::new();
    for t in tasks {
        statuses.push(t.await.unwrap().unwrap());
    }
    statuses
}

/// The admin JSON of an instance.
async fn summary(proxy: &crate::ops::support::ProxyProcess) -> serde_json::Value {
    let url = format!("{}/api/summary", proxy.admin());
    let client = crate::proxy::support::reqwest_builder().no_proxy().build().unwrap();
    client.get(url).send().await.unwrap().json().await.unwrap()
}

async fn metrics(proxy: &crate::ops::support::ProxyProcess) -> String {
    let url = format!("{}/metrics", proxy.admin());
    let client = crate::proxy::support::reqwest_builder().no_proxy().build().unwrap();
    client.get(url).send().await.unwrap().text().await.unwrap()
}

/// Waits (up to 10 s) until every instance says `robots_proxy_fleet_up {up}`.
async fn until_fleet_up(f: &support::Fleet, up: u8) {
    for _ in 0..200 {
        let mut all = true;
        for proxy in &f.instances {
            let want = format!("robots_proxy_fleet_up {up}");
            all &= metrics(proxy).await.lines().any(|l| l == want);
        }
        if all {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the fleet never said robots_proxy_fleet_up {up}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_hundred_first_requests_over_three_instances_make_one_robots_fetch() {
    let Some(redis) = Redis::start().await else { return };
    let origin = TimedOrigin::start(ROBOTS, Duration::from_millis(200)).await;
    let f = fleet(3, &redis, "one-fetch", &[]);
    let urls = (0..300).map(|i| origin.url(&format!("/page/{i}")));
    for status in all_at_once(&f, urls).await {
        assert_eq!(status, 200);
    }
    assert_eq!(origin.hits("/robots.txt"), 1, "one robots.txt fetch for the whole fleet");
    // Disallowed on every instance, from the one shared copy.
    for i in 0..3 {
        assert_eq!(get(&f, i, &origin.url("/private/x")).await, 403);
    }
    assert_eq!(origin.hits("/robots.txt"), 1);
    // Each instance's audit records name it.
    for i in 0..3 {
        let path = f.state_dir(i).join("audit.jsonl");
        let mut text = String::new();
        for _ in 0..200 {
            text = std::fs::read_to_string(&path).unwrap_or_default();
            if !text.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        let record: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(record["service.node.name"], format!("instance-{i}"), "{record}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crawl_delay_spaces_the_requests_of_the_whole_fleet() {
    let Some(redis) = Redis::start().await else { return };
    let robots = "User-agent: *\nCrawl-delay: 1\nDisallow: /private\n";
    let origin = TimedOrigin::start(robots, Duration::ZERO).await;
    let f = fleet(3, &redis, "crawl-delay", &[("ROBOTS_PROXY_PACING__ENABLED", "true")]);
    // robots.txt first, so every request below is paced by the same shared copy.
    assert_eq!(get(&f, 0, &origin.url("/warm")).await, 200);
    let started = Instant::now();
    let urls = (0..6).map(|i| origin.url(&format!("/p/{i}")));
    for status in all_at_once(&f, urls).await {
        assert_eq!(status, 200);
    }
    let arrivals = origin.content_arrivals();
    assert_eq!(arrivals.len(), 7);
    paced(&arrivals, Duration::from_millis(1020), "Crawl-delay: 1");
    // Not over-waited either: 1 s and its 20 ms margin each, with forwarding's jitter.
    let span = arrivals[6] - arrivals[0];
    assert!(span <= Duration::from_millis(6 * 1020 + 1000), "7 requests in {span:?}");
    assert!(started.elapsed() >= Duration::from_secs(5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_rps_holds_for_the_fleet() {
    let Some(redis) = Redis::start().await else { return };
    let origin = TimedOrigin::start(ROBOTS, Duration::ZERO).await;
    let env = [("ROBOTS_PROXY_PACING__ENABLED", "true"), ("ROBOTS_PROXY_PACING__DEFAULT_RPS", "4")];
    let f = fleet(3, &redis, "rps", &env);
    let urls = (0..9).map(|i| origin.url(&format!("/p/{i}")));
    for status in all_at_once(&f, urls).await {
        assert_eq!(status, 200);
    }
    let arrivals = origin.content_arrivals();
    assert_eq!(arrivals.len(), 9);
    paced(&arrivals, Duration::from_millis(250), "4 rps");
    let span = arrivals[8] - arrivals[0];
    assert!(span >= Duration::from_millis(2000), "9 requests at 4 rps in {span:?}");
    // Not over-waited either: 250 ms and its 5 ms margin each, with forwarding's jitter.
    assert!(span <= Duration::from_millis(8 * 255 + 500), "9 requests at 4 rps in {span:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_concurrency_of_one_holds_for_the_fleet() {
    let Some(redis) = Redis::start().await else { return };
    let origin = TimedOrigin::start(ROBOTS, Duration::ZERO).await;
    let env = [
        ("ROBOTS_PROXY_PACING__ENABLED", "true"),
        ("ROBOTS_PROXY_PACING__DEFAULT_CONCURRENCY", "1"),
    ];
    let f = fleet(3, &redis, "concurrency", &env);
    assert_eq!(get(&f, 0, &origin.url("/warm")).await, 200);
    let urls = (0..6).map(|_| origin.url("/hold"));
    for status in all_at_once(&f, urls).await {
        assert_eq!(status, 200);
    }
    assert_eq!(origin.hits("/hold"), 6);
    assert_eq!(origin.most_in_flight(), 1, "more than one request in flight to the site");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_past_max_wait_on_another_instance_is_429() {
    let Some(redis) = Redis::start().await else { return };
    let robots = "User-agent: *\nCrawl-delay: 30\nDisallow: /private\n";
    let origin = TimedOrigin::start(robots, Duration::ZERO).await;
    let env = [("ROBOTS_PROXY_PACING__ENABLED", "true"), ("ROBOTS_PROXY_PACING__MAX_WAIT", "2s")];
    let f = fleet(3, &redis, "max-wait", &env);
    assert_eq!(get(&f, 0, &origin.url("/first")).await, 200);
    let resp = client(f.instances[1].proxy_addr).get(origin.url("/second")).send().await.unwrap();
    assert_eq!(resp.status(), 429);
    let retry: u64 = resp.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((29..=31).contains(&retry), "Retry-After {retry}");
    assert_eq!(get(&f, 2, &origin.url("/third")).await, 429);
    assert_eq!(origin.hits("/second") + origin.hits("/third"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_on_one_instance_makes_another_fetch_again() {
    let Some(redis) = Redis::start().await else { return };
    let origin = TimedOrigin::start(ROBOTS, Duration::ZERO).await;
    let f = fleet(3, &redis, "purge", &[]);
    until_fleet_up(&f, 1).await;
    assert_eq!(get(&f, 1, &origin.url("/a")).await, 200);
    assert_eq!(get(&f, 2, &origin.url("/a")).await, 200);
    assert_eq!(origin.hits("/robots.txt"), 1);
    let purge = format!("{}/cache/purge?authority={}", f.instances[0].admin(), origin.url(""));
    let admin = crate::proxy::support::reqwest_builder().no_proxy().build().unwrap();
    // The site changes its robots.txt, then the purge: every instance must drop its copy, or the
    // one that kept it would still allow /b.
    origin.set_robots("User-agent: *\nDisallow: /b\n");
    let resp = admin.post(purge).send().await.unwrap();
    assert_eq!(resp.status(), 200, "{:?}", resp.text().await);
    // Pub/sub reaches the others well within a second.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(get(&f, 1, &origin.url("/b")).await, 403, "instance 1 kept its purged copy");
    assert_eq!(origin.hits("/robots.txt"), 2, "instance 1 fetched robots.txt again");
    assert_eq!(get(&f, 2, &origin.url("/b")).await, 403, "the purge never reached instance 2");
    assert_eq!(origin.hits("/robots.txt"), 2, "instance 2 used the fleet's new copy");
    assert_eq!(origin.hits("/b"), 0);
    // Every instance lists the three.
    let s = summary(&f.instances[2]).await;
    let names: Vec<&str> = s["fleet"]["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["instance-0", "instance-1", "instance-2"], "{s}");
    assert_eq!(s["fleet"]["instance"], "instance-2");
    assert_eq!(s["fleet"]["up"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_stopped_local_keeps_serving_and_rejoins() {
    let Some(mut redis) = Redis::start().await else { return };
    let origin = TimedOrigin::start(ROBOTS, Duration::ZERO).await;
    let f = fleet(2, &redis, "local", &[("ROBOTS_PROXY_PACING__ENABLED", "true")]);
    until_fleet_up(&f, 1).await;
    assert_eq!(get(&f, 0, &origin.url("/a")).await, 200);
    // Load on both instances while Redis stops: each loader keeps going until it has sent ten
    // requests after the stop (at most 500 in all), so requests are in flight when Redis goes.
    let stopped = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut load = Vec::new();
    for t in 0..4 {
        let c = client(f.instances[t % 2].proxy_addr);
        let base = origin.url(&format!("/load/{t}/"));
        let stopped = stopped.clone();
        load.push(tokio::spawn(async move {
            let (mut statuses, mut after) = (Vec::new(), 0);
            for n in 0..500 {
                if stopped.load(std::sync::atomic::Ordering::SeqCst) {
                    after += 1;
                    if after > 10 {
                        break;
                    }
                }
                let r = c.get(format!("{base}{n}")).send().await;
                statuses.push(r.map(|r| r.status().as_u16()).unwrap_or(0));
            }
            statuses
        }));
    }
    // Every loader is demonstrably under way (two requests each at the origin) ...
    let under_way =
        |origin: &TimedOrigin| (0..4).all(|t| origin.arrivals(&format!("/load/{t}/")).len() >= 2);
    for _ in 0..500 {
        if under_way(&origin) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(under_way(&origin), "the load never started");
    // ... when Redis stops.
    let stopped_at = Instant::now();
    redis.stop();
    stopped.store(true, std::sync::atomic::Ordering::SeqCst);
    for task in load {
        let statuses = task.await.unwrap();
        assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    }
    let after_stop = origin.arrivals("/load/").into_iter().filter(|t| *t > stopped_at).count();
    assert!(after_stop >= 4 * 10, "only {after_stop} load requests came after the stop");
    for i in 0..20 {
        let url = origin.url(&format!("/during/{i}"));
        let started = Instant::now();
        assert_eq!(get(&f, i, &url).await, 200);
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "a request hung {:?}",
            started.elapsed()
        );
        assert_eq!(get(&f, i, &origin.url("/private/x")).await, 403);
    }
    until_fleet_up(&f, 0).await;
    for proxy in &f.instances {
        let log = proxy.stderr();
        assert_eq!(log.matches("Redis is out of reach").count(), 1, "logged once:\n{log}");
    }
    redis.restart().await;
    until_fleet_up(&f, 1).await;
    assert_eq!(get(&f, 1, &origin.url("/after")).await, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_stopped_refuse_answers_503_and_recovers() {
    let Some(mut redis) = Redis::start().await else { return };
    let origin = TimedOrigin::start(ROBOTS, Duration::ZERO).await;
    let env = [
        ("ROBOTS_PROXY_FLEET__ON_REDIS_ERROR", "refuse"),
        ("ROBOTS_PROXY_PACING__ENABLED", "true"),
    ];
    let f = fleet(2, &redis, "refuse", &env);
    until_fleet_up(&f, 1).await;
    assert_eq!(get(&f, 0, &origin.url("/a")).await, 200);
    redis.stop();
    // A new site needs the shared robots.txt; a known one the shared pace.
    let other = TimedOrigin::start(ROBOTS, Duration::ZERO).await;
    for i in 0..6 {
        let resp = client(f.instances[i % 2].proxy_addr).get(other.url("/x")).send().await.unwrap();
        assert_eq!(resp.status(), 503);
        let status = resp.headers()["proxy-status"].to_str().unwrap().to_owned();
        assert!(status.contains("proxy_internal_error"), "{status}");
        assert!(resp.text().await.unwrap().contains("fleet"));
    }
    assert_eq!(other.hits("/robots.txt"), 0);
    let resp = client(f.instances[1].proxy_addr).get(origin.url("/b")).send().await.unwrap();
    assert_eq!(resp.status(), 503);
    // Each 503 is counted once, as `unavailable` (not as a 429 for pace), and audited.
    for (instance, answered) in [(0, 3), (1, 4)] {
        let text = metrics(&f.instances[instance]).await;
        let count = |decision: &str| -> u64 {
            text.lines()
                .filter(|l| l.starts_with("robots_proxy_requests_total{"))
                .filter(|l| l.contains(&format!("decision=\"{decision}\"")))
                .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
                .sum()
        };
        assert_eq!(count("unavailable"), answered, "instance {instance}:\n{text}");
        assert_eq!(count("throttle"), 0, "instance {instance}:\n{text}");
        assert!(text.lines().any(|l| l == "robots_proxy_pacing_refused_total 0"), "{text}");
    }
    redis.restart().await;
    until_fleet_up(&f, 1).await;
    let resp = client(f.instances[1].proxy_addr).get(other.url("/y")).send().await.unwrap();
    let m = metrics(&f.instances[1]).await;
    let m: Vec<&str> = m.lines().filter(|l| l.contains("fleet")).collect();
    assert_eq!(
        resp.status(),
        200,
        "{}\n{}\n{m:?}",
        resp.text().await.unwrap(),
        f.instances[1].stderr()
    );
    assert_eq!(get(&f, 0, &origin.url("/c")).await, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_killed_holding_the_fetch_lease_delays_the_others_only_until_it_expires() {
    let Some(redis) = Redis::start().await else { return };
    // robots.txt takes 1.5 s; the lease lasts fetch_timeout (2 s) + 2 s.
    let origin = TimedOrigin::start(ROBOTS, Duration::from_millis(1500)).await;
    let env = [
        ("ROBOTS_PROXY_ROBOTS__FETCH_TIMEOUT", "2s"),
        ("ROBOTS_PROXY_ROBOTS__CONNECT_TIMEOUT", "1s"),
    ];
    let mut f = fleet(2, &redis, "lease", &env);
    until_fleet_up(&f, 1).await;
    let first = client(f.instances[0].proxy_addr);
    let url = origin.url("/a");
    // Before instance 0 can take the lease: the lease ends no sooner than 4 s after this.
    let sent = Instant::now();
    let doomed = tokio::spawn(async move { first.get(url).send().await });
    // Instance 0 has the lease and is fetching: kill it.
    for _ in 0..100 {
        if origin.hits("/robots.txt") == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(origin.hits("/robots.txt"), 1);
    let killed = f.instances.remove(0);
    drop(killed);
    assert!(doomed.await.unwrap().is_err());
    let started = Instant::now();
    assert_eq!(get(&f, 0, &origin.url("/b")).await, 200);
    let waited = started.elapsed();
    assert_eq!(origin.hits("/robots.txt"), 2, "the survivor fetched once the lease expired");
    // The lease (4 s) runs from just before robots.txt was asked for, then the survivor's own
    // fetch takes 1.5 s: about 5.4 s. Without the lease's slack it would be 3.4 s, without any
    // wait 1.5 s; twice the lease, 9.5 s.
    // The lower bound is held from `sent`, before the lease was taken (the lease, then the
    // survivor's 1.5 s fetch: 5.5 s, less 100 ms for the two clocks), so a late `started` on
    // a loaded machine cannot fail it; the upper side keeps a wide margin below twice the
    // lease (review-tests F6).
    let since_sent = sent.elapsed();
    assert!(
        since_sent >= Duration::from_millis(5400),
        "did not wait for the lease: {since_sent:?}"
    );
    assert!(waited <= Duration::from_millis(8000), "waited past the lease: {waited:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_that_stalls_is_bounded_by_fleet_timeout() {
    let Some(redis) = Redis::start().await else { return };
    let origin = TimedOrigin::start(ROBOTS, Duration::ZERO).await;
    let env = [("ROBOTS_PROXY_FLEET__TIMEOUT", "300ms"), ("ROBOTS_PROXY_PACING__ENABLED", "true")];
    let f = fleet(1, &redis, "stall", &env);
    until_fleet_up(&f, 1).await;
    assert_eq!(get(&f, 0, &origin.url("/a")).await, 200);
    let paused = redis.pause(Duration::from_secs(3));
    // Synchronised on the stall itself: a PING of the test's own goes unanswered.
    let mut stalled = false;
    for _ in 0..50 {
        use std::io::{Read, Write};
        let mut probe = std::net::TcpStream::connect(("127.0.0.1", redis.port)).unwrap();
        probe.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
        probe.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
        if probe.read(&mut [0u8; 16]).is_err() {
            stalled = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(stalled, "Redis never stalled");
    // A new site needs robots.txt: Redis does not answer, the instance fetches it itself.
    let other = TimedOrigin::start(ROBOTS, Duration::ZERO).await;
    let started = Instant::now();
    assert_eq!(get(&f, 0, &other.url("/x")).await, 200);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "waited {:?} for a stalled Redis",
        started.elapsed()
    );
    assert_eq!(other.hits("/robots.txt"), 1);
    // The instance saw the stall while the request was in flight: the link went down.
    let text = metrics(&f.instances[0]).await;
    assert!(text.lines().any(|l| l == "robots_proxy_fleet_up 0"), "{text}");
    paused.join().expect("Redis answered again after its pause");
    until_fleet_up(&f, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_starts_without_redis_and_joins_when_it_comes() {
    let Some(mut redis) = Redis::start().await else { return };
    redis.stop();
    let origin = TimedOrigin::start(ROBOTS, Duration::ZERO).await;
    let f = fleet(1, &redis, "late", &[]);
    // Serves on its own meanwhile.
    assert_eq!(get(&f, 0, &origin.url("/a")).await, 200);
    assert_eq!(get(&f, 0, &origin.url("/private/a")).await, 403);
    assert_eq!(origin.hits("/robots.txt"), 1);
    until_fleet_up(&f, 0).await;
    redis.restart().await;
    until_fleet_up(&f, 1).await;
    // Joined: its own copy is dropped and robots.txt is fetched once more, for the fleet.
    let mut fetched_again = false;
    for _ in 0..100 {
        assert_eq!(get(&f, 0, &origin.url("/b")).await, 200);
        if origin.hits("/robots.txt") == 2 {
            fetched_again = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(fetched_again, "the copy fetched alone was kept after joining");
    let s = summary(&f.instances[0]).await;
    assert_eq!(s["fleet"]["up"], true, "{s}");
}

/// A `key_prefix` with glob characters (`test-glob*:`) purges only its own fleet's records:
/// another fleet's key that the pattern `test-glob*:robots:*` would match survives, and its
/// own record is no longer used (robots.txt is fetched again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purge_all_with_a_glob_in_the_prefix_touches_no_other_fleet() {
    let Some(redis) = Redis::start().await else { return };
    let origin = TimedOrigin::start(ROBOTS, Duration::ZERO).await;
    let f = fleet(1, &redis, "glob*", &[]);
    until_fleet_up(&f, 1).await;
    assert_eq!(get(&f, 0, &origin.url("/a")).await, 200);
    let mut c = redis.connection();
    let other = "test-globX:robots:http://other.example";
    redis::cmd("SET").arg(other).arg("another fleet's record").query::<()>(&mut c).unwrap();
    let purge = format!("{}/cache/purge-all", f.instances[0].admin());
    let admin = crate::proxy::support::reqwest_builder().no_proxy().build().unwrap();
    let resp = admin.post(purge).send().await.unwrap();
    assert_eq!(resp.status(), 200, "{:?}", resp.text().await);
    let exists: u32 = redis::cmd("EXISTS").arg(other).query(&mut c).unwrap();
    assert_eq!(exists, 1, "purge-all deleted another fleet's key");
    assert_eq!(get(&f, 0, &origin.url("/b")).await, 200);
    assert_eq!(origin.hits("/robots.txt"), 2, "our own record is purged");
}
