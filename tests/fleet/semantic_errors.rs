//! A key of the wrong type, a script error or an out-of-memory answer concern one key: Redis
//! answered, so the link is up. Only I/O and timeouts take the fleet link down for every site.

use std::io::{Read, Write};
use std::time::Duration;

use super::support::{client, fleet, Redis, TimedOrigin};

const ROBOTS: &str = "User-agent: *\nDisallow: /private\n";

/// Sends one command to the redis-server on `port` and gives its reply, raw.
fn redis_command(port: u16, args: &[&str]) -> String {
    let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut cmd = format!("*{}\r\n", args.len());
    for a in args {
        cmd.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    c.write_all(cmd.as_bytes()).unwrap();
    let mut reply = [0u8; 512];
    let n = c.read(&mut reply).unwrap();
    String::from_utf8_lossy(&reply[..n]).into_owned()
}

async fn fleet_up(proxy: &crate::ops::support::ProxyProcess) -> String {
    let url = format!("{}/metrics", proxy.admin());
    let c = crate::proxy::support::reqwest_builder().no_proxy().build().unwrap();
    let text = c.get(url).send().await.unwrap().text().await.unwrap();
    text.lines().find(|l| l.starts_with("robots_proxy_fleet_up ")).unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_of_the_wrong_type_for_one_site_leaves_the_link_up_for_the_others() {
    let Some(redis) = Redis::start().await else { return };
    let poisoned = TimedOrigin::start(ROBOTS, Duration::ZERO).await;
    let other = TimedOrigin::start(ROBOTS, Duration::ZERO).await;
    let env = [
        ("ROBOTS_PROXY_FLEET__ON_REDIS_ERROR", "refuse"),
        ("ROBOTS_PROXY_PACING__ENABLED", "true"),
        // Every request reserves its start on Redis.
        ("ROBOTS_PROXY_PACING__DEFAULT_RPS", "100"),
    ];
    let f = fleet(1, &redis, "wrongtype", &env);
    let proxy = &f.instances[0];
    for _ in 0..200 {
        if fleet_up(proxy).await == "robots_proxy_fleet_up 1" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let c = client(proxy.proxy_addr);
    assert_eq!(c.get(poisoned.url("/warm")).send().await.unwrap().status(), 200);
    // The pace hash and the queue sorted set of one site become strings.
    let site = format!("http://{}", poisoned.addr);
    for kind in ["pace", "queue"] {
        let key = format!("test-wrongtype:{kind}:{site}");
        assert_eq!(redis_command(redis.port, &["SET", &key, "not a hash"]), "+OK\r\n");
    }
    // That site cannot be paced by the fleet (refuse: 503)...
    let resp = c.get(poisoned.url("/x")).send().await.unwrap();
    assert_eq!(resp.status(), 503, "{:?}", resp.text().await);
    // ...and every other site is served, robots.txt and pace shared, the link up.
    for i in 0..3 {
        let resp = c.get(other.url(&format!("/y/{i}"))).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{:?}\n{}", resp.text().await, proxy.stderr());
        assert_eq!(fleet_up(proxy).await, "robots_proxy_fleet_up 1");
    }
    assert_eq!(other.hits("/robots.txt"), 1);
    let log = proxy.stderr();
    assert!(!log.contains("out of reach"), "the link was taken down:\n{log}");
    assert!(log.contains("WRONGTYPE"), "the error is logged:\n{log}");
}

/// Redis out of memory (`maxmemory` reached, `noeviction`): every write is refused with `OOM`,
/// yet Redis answers. The link stays up; with `local`, requests go on with this instance's own
/// robots.txt fetch and pace, and the refusals are logged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_out_of_memory_fails_the_writes_but_leaves_the_link_up() {
    let Some(redis) = Redis::start().await else { return };
    let origin = TimedOrigin::start(ROBOTS, Duration::ZERO).await;
    let env =
        [("ROBOTS_PROXY_PACING__ENABLED", "true"), ("ROBOTS_PROXY_PACING__DEFAULT_RPS", "100")];
    let f = fleet(1, &redis, "oom", &env);
    let proxy = &f.instances[0];
    for _ in 0..200 {
        if fleet_up(proxy).await == "robots_proxy_fleet_up 1" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(fleet_up(proxy).await, "robots_proxy_fleet_up 1");
    for (name, value) in [("maxmemory-policy", "noeviction"), ("maxmemory", "1")] {
        assert_eq!(redis_command(redis.port, &["CONFIG", "SET", name, value]), "+OK\r\n");
    }
    let c = client(proxy.proxy_addr);
    for i in 0..3 {
        let resp = c.get(origin.url(&format!("/y/{i}"))).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{:?}\n{}", resp.text().await, proxy.stderr());
        assert_eq!(fleet_up(proxy).await, "robots_proxy_fleet_up 1", "{}", proxy.stderr());
    }
    let log = proxy.stderr();
    assert!(!log.contains("out of reach"), "the link was taken down:\n{log}");
    assert!(log.contains("OOM"), "the refusals are logged:\n{log}");
}

/// Review-fleet N2: with a round trip of 0.3 s and `fleet.timeout` 0.8 s, every call fits, but
/// the heartbeat made two round trips (a PING, then the announcement), four on a new
/// connection (its set-up and the version check too), in one timeout, so the instance was out
/// of reach for good. The heartbeat is one round trip now, and a call on a new connection has
/// a timeout per round trip: the instance comes up and stays up, and its view lists it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_whose_round_trip_fits_fleet_timeout_stays_up() {
    let Some(redis) = Redis::start().await else { return };
    let far = super::support::Relay::start_delayed(redis.port, Duration::from_millis(150)).await;
    let f =
        super::support::fleet_at(&[far.url()], "far", &[("ROBOTS_PROXY_FLEET__TIMEOUT", "800ms")]);
    let mut up = String::new();
    for _ in 0..100 {
        up = fleet_up(&f.instances[0]).await;
        if up == "robots_proxy_fleet_up 1" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(up, "robots_proxy_fleet_up 1", "never came up over a 0.3 s round trip");
    // And stays up: sampled for 4 s (four heartbeats). A loaded test machine may delay one
    // heartbeat past its timeout; the link then comes back at the next one.
    let mut up_samples = 0;
    for _ in 0..8 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        up_samples += usize::from(fleet_up(&f.instances[0]).await == "robots_proxy_fleet_up 1");
    }
    assert!(up_samples >= 6, "up in {up_samples} of 8 samples");
    let summary = super::summary(&f.instances[0]).await;
    assert!(summary.to_string().contains("instance-0"), "{summary}");
}
