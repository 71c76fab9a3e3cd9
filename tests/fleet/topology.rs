//! A fleet on a Redis that fails over (`fleet.topology`, issue 40 item 2): two proxy instances
//! on a real 3-primary Redis Cluster, and on a primary watched by a sentinel; a primary is
//! killed (SIGKILL) under a bounded load. Nothing disallowed reaches the origin, every refusal
//! is audited exactly once across the instances' logs, Crawl-delay keeps its spacing within
//! one Crawl-delay, and the only 5xx is the 503 `fleet.on_redis_error = "refuse"` documents.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::stores::{Cluster, Sentinels, SERVICE};
use super::support::{client, fleet_at, have_redis, Fleet, TimedOrigin};
use super::until_fleet_up;

/// Crawl-delay of the origin, in seconds.
const DELAY: f64 = 0.3;
const ROBOTS: &str = "User-agent: *\nDisallow: /private\nCrawl-delay: 0.3\n";

/// Requests each instance's client sends before the failure, one after another.
const BEFORE: usize = 4;

/// Allowed requests each client gets forwarded after the failure before it stops: the load
/// goes on through the failover and past it (bounded: [`MOST`] requests, [`LONGEST`]).
const AFTER: usize = 4;
const MOST: usize = 200;
const LONGEST: Duration = Duration::from_secs(60);

/// What one request got.
struct Answer {
    path: String,
    status: u16,
    body: String,
    /// Whether it was sent after the failure.
    after: bool,
}

/// Sends requests through every instance at once (one client each, one request after
/// another, allowed and disallowed in turn); once every client has had [`BEFORE`] answers,
/// calls `fail`; each client goes on until [`AFTER`] of its allowed requests have been
/// forwarded after it (or the bounds). Returns every answer.
async fn load_with_failover(f: &Fleet, origin: &TimedOrigin, fail: impl FnOnce()) -> Vec<Answer> {
    let done = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let tasks: Vec<_> = f
        .instances
        .iter()
        .enumerate()
        .map(|(i, proxy)| {
            let (client, done, failed) = (client(proxy.proxy_addr), done.clone(), failed.clone());
            let base = origin.url("");
            tokio::spawn(async move {
                let mut answers = Vec::new();
                let started = std::time::Instant::now();
                let mut forwarded_after = 0;
                for n in 0..MOST {
                    let path = match n % 2 {
                        0 => format!("/ok/{i}-{n}"),
                        _ => format!("/private/{i}-{n}"),
                    };
                    let after = failed.load(Ordering::SeqCst);
                    let resp = client.get(format!("{base}{path}")).send().await;
                    let resp = resp.unwrap_or_else(|e| panic!("{path} through {i}: {e}"));
                    let status = resp.status().as_u16();
                    let body = resp.text().await.unwrap_or_default();
                    forwarded_after += usize::from(after && status == 200);
                    answers.push(Answer { path, status, body, after });
                    done.fetch_add(1, Ordering::SeqCst);
                    if status == 503 {
                        // As a crawler would: later.
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                    if forwarded_after >= AFTER || started.elapsed() > LONGEST {
                        break;
                    }
                }
                answers
            })
        })
        .collect();
    let before = BEFORE * f.instances.len();
    for _ in 0..3000 {
        if done.load(Ordering::SeqCst) >= before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    fail();
    failed.store(true, Ordering::SeqCst);
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap());
    }
    all
}

/// The audit records of every instance, as `(action, url.path)`.
fn audited(f: &Fleet) -> Vec<(String, String)> {
    (0..f.instances.len())
        .flat_map(|i| {
            let text =
                std::fs::read_to_string(f.state_dir(i).join("audit.jsonl")).unwrap_or_default();
            text.lines()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .map(|r| {
                    let action = r["event.action"].as_str().unwrap_or_default().to_owned();
                    (action, r["url.path"].as_str().unwrap_or_default().to_owned())
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// What every failover test asserts of the answers, the origin and the audit logs.
async fn assert_held(f: &Fleet, origin: &TimedOrigin, answers: &[Answer]) {
    // Nothing disallowed was forwarded.
    assert_eq!(
        origin.paths("/private"),
        Vec::<String>::new(),
        "disallowed paths reached the origin"
    );
    // No 5xx but the documented 503 of `refuse`, which says why.
    for a in answers {
        assert!(
            matches!(a.status, 200 | 403 | 503),
            "{} answered {}: {}",
            a.path,
            a.status,
            a.body
        );
        if a.status == 503 {
            assert!(a.body.contains("fleet's shared"), "{}: 503 {}", a.path, a.body);
        }
        if a.path.starts_with("/private") {
            assert_ne!(a.status, 200, "{} allowed", a.path);
        }
    }
    let blocked = answers.iter().filter(|a| a.status == 403).count();
    assert!(blocked >= BEFORE, "{blocked} blocks answered");
    // The load went on through the failover, and the fleet served it again under load.
    let after = answers.iter().filter(|a| a.after && a.status == 200).count();
    assert!(after >= AFTER * f.instances.len(), "{after} forwarded after the failure");
    // Every refusal audited exactly once across the fleet (the writer flushes within a few
    // seconds).
    let refused: Vec<&Answer> = answers.iter().filter(|a| a.status != 200).collect();
    let mut records = Vec::new();
    for _ in 0..250 {
        records = audited(f);
        let blocks = records.iter().filter(|(a, _)| a == "robots_disallow").count();
        let unavailable = records.iter().filter(|(a, _)| a == "fleet_unavailable").count();
        if blocks + unavailable >= refused.len() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for a in &refused {
        let action = if a.status == 403 { "robots_disallow" } else { "fleet_unavailable" };
        let n = records.iter().filter(|(act, p)| act == action && *p == a.path).count();
        assert_eq!(n, 1, "{} ({}) audited {n} times as {action}", a.path, a.status);
    }
    let refusals =
        records.iter().filter(|(a, _)| a == "robots_disallow" || a == "fleet_unavailable");
    assert_eq!(refusals.count(), refused.len(), "refusal records without a refused answer");
    // Crawl-delay held for the fleet: the starts at the origin fell short of the spacing by
    // at most one Crawl-delay in all (the last reservations a failover may lose).
    let starts = origin.arrivals("/ok/");
    let shortfall: f64 =
        starts.windows(2).map(|w| (DELAY - w[1].duration_since(w[0]).as_secs_f64()).max(0.0)).sum();
    assert!(
        shortfall <= DELAY * 1.05,
        "the starts fell {shortfall:.3}s short of Crawl-delay in all"
    );
    let statuses: Vec<u16> = answers.iter().map(|a| a.status).collect();
    eprintln!(
        "{} answers {statuses:?}; {} forwarded; shortfall {shortfall:.3}s",
        answers.len(),
        starts.len()
    );
}

/// After the failover: the fleet is back, and serves through every instance again.
async fn assert_back(f: &Fleet, origin: &TimedOrigin) {
    until_fleet_up(f, 1).await;
    for (i, proxy) in f.instances.iter().enumerate() {
        let ok = client(proxy.proxy_addr).get(origin.url(&format!("/after/{i}"))).send().await;
        assert_eq!(ok.unwrap().status(), 200, "instance {i} after the failover");
        let blocked = client(proxy.proxy_addr).get(origin.url(&format!("/private/after-{i}")));
        assert_eq!(blocked.send().await.unwrap().status(), 403, "instance {i} after the failover");
    }
}

fn env(topology: &str) -> Vec<(&str, &str)> {
    vec![
        ("ROBOTS_PROXY_FLEET__TOPOLOGY", topology),
        ("ROBOTS_PROXY_FLEET__ON_REDIS_ERROR", "refuse"),
        ("ROBOTS_PROXY_PACING__ENABLED", "true"),
        ("ROBOTS_PROXY_PACING__MAX_WAIT", "10s"),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_primary_killed_under_load_loses_no_block_and_no_spacing() {
    if !have_redis() {
        crate::skip::missing("redis-server", "apt-get install redis-server");
        return;
    }
    let mut cluster = tokio::task::spawn_blocking(Cluster::start).await.unwrap();
    let origin = TimedOrigin::start(ROBOTS, Duration::ZERO).await;
    // Every node listed, as `fleet.redis = [...]` (a comma-separated list in the environment).
    let urls = cluster.urls().join(",");
    let f = fleet_at(&[urls.clone(), urls], "cluster", &env("cluster"));
    until_fleet_up(&f, 1).await;
    // The primary that holds the site's pace (and so its queue, slots and record: one slot).
    let pace = format!("test-cluster:pace:{{http://{}}}", origin.addr);
    let victim = cluster.primary_of(&pace);
    let answers = load_with_failover(&f, &origin, || cluster.kill(victim)).await;
    assert_held(&f, &origin, &answers).await;
    cluster.until_ok(Duration::from_secs(30));
    assert_ne!(cluster.primary_of(&pace), victim, "the replica was promoted");
    assert_back(&f, &origin).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_primary_killed_under_load_loses_no_block_and_no_spacing() {
    if !have_redis() {
        crate::skip::missing("redis-server", "apt-get install redis-server");
        return;
    }
    let mut set = tokio::task::spawn_blocking(Sentinels::start).await.unwrap();
    let origin = TimedOrigin::start(ROBOTS, Duration::ZERO).await;
    // A sentinel that is not there first: the instances ask the next.
    let gone = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let urls = format!("redis://127.0.0.1:{gone},{}", set.sentinel_url());
    let mut env = env("sentinel");
    env.push(("ROBOTS_PROXY_FLEET__SENTINEL_SERVICE", SERVICE));
    let f = fleet_at(&[urls.clone(), urls], "sentinel", &env);
    until_fleet_up(&f, 1).await;
    let answers = load_with_failover(&f, &origin, || set.kill_primary()).await;
    assert_held(&f, &origin, &answers).await;
    set.until_promoted(Duration::from_secs(30));
    assert_back(&f, &origin).await;
}
