//! Purges reach every instance and win over fetches in flight (issue 24 §6, §7): a purge
//! subscription that went silent is noticed and made again, and a result fetched before a
//! purge is neither shared nor kept.

use std::time::{Duration, Instant};

use robots_proxy::authority::{Authority, Scheme};
use robots_proxy::cache::{FileKind, Shared};
use robots_proxy::fleet::robots::SharedRedis;

use super::scripts::link;
use super::support::{fleet, fleet_at, Redis, Relay, TimedOrigin};
use super::{get, metrics, until_fleet_up};

/// Purges `origin`'s robots.txt through the admin of `proxy`.
async fn purge(proxy: &crate::ops::support::ProxyProcess, origin: &TimedOrigin) {
    let url = format!("{}/cache/purge?authority={}", proxy.admin(), origin.url(""));
    let admin = crate::proxy::support::reqwest_builder().no_proxy().build().unwrap();
    let resp = admin.post(url).send().await.unwrap();
    assert_eq!(resp.status(), 200, "{:?}", resp.text().await);
}

/// The local ports of the subscribed (pub/sub) clients of `redis`.
fn subscribers(redis: &Redis) -> Vec<u16> {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .arg("TYPE")
        .arg("pubsub")
        .query(&mut redis.connection())
        .unwrap();
    list.lines()
        .filter_map(|l| l.split(' ').find_map(|f| f.strip_prefix("addr=")))
        .filter_map(|addr| addr.rsplit(':').next()?.parse().ok())
        .collect()
}

/// Instance 0 reaches Redis through a relay that silences its purge subscription (a
/// half-open connection: no FIN, no RST), while its other connections and `fleet_up` stay as
/// they were. Without a liveness check it never saw a purge again; now its PING goes
/// unanswered within `fleet.timeout`, it subscribes again and drops its copies, and a later
/// purge reaches it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_subscription_that_went_silent_is_noticed_and_made_again() {
    let Some(redis) = Redis::start().await else { return };
    let origin = TimedOrigin::start("User-agent: *\nDisallow: /private\n", Duration::ZERO).await;
    let relay = Relay::start(redis.port).await;
    let f = fleet_at(&[relay.url(), redis.url()], "silent", &[]);
    until_fleet_up(&f, 1).await;
    assert_eq!(get(&f, 0, &origin.url("/b")).await, 200);
    assert_eq!(get(&f, 1, &origin.url("/b")).await, 200);
    // Instance 0's subscriptions are the relayed ones.
    let mut silenced = 0;
    for _ in 0..100 {
        silenced = subscribers(&redis).into_iter().filter(|port| relay.silence(*port)).count();
        if silenced > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(silenced > 0, "instance 0 never subscribed");
    let silenced_at = Instant::now();
    origin.set_robots("User-agent: *\nDisallow: /b\n");
    purge(&f.instances[1], &origin).await;
    // Still up: the heartbeat's connection is another one.
    let text = metrics(&f.instances[0]).await;
    assert!(text.lines().any(|l| l == "robots_proxy_fleet_up 1"), "{text}");
    // Within a PING's interval and fleet.timeout (1.5 s), and a resubscription, instance 0
    // drops its copy: robots.txt is fetched again and /b is refused.
    let mut status = 0;
    for _ in 0..50 {
        status = get(&f, 0, &origin.url("/b")).await;
        if status == 403 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let noticed = silenced_at.elapsed();
    assert_eq!(status, 403, "instance 0 never noticed its purge subscription went silent");
    assert!(noticed < Duration::from_secs(5), "noticed only after {noticed:?}");
    let text = metrics(&f.instances[0]).await;
    assert!(text.lines().any(|l| l == "robots_proxy_fleet_purge_gaps_total 1"), "{text}");
    assert!(text.lines().any(|l| l == "robots_proxy_fleet_up 1"), "{text}");
    let log = f.instances[0].stderr();
    assert!(log.contains("the purge subscription was lost"), "{log}");
    assert!(log.contains("went unanswered within fleet.timeout"), "{log}");
    // A later purge reaches it through the new subscription.
    origin.set_robots("User-agent: *\nDisallow: /c\n");
    purge(&f.instances[1], &origin).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(get(&f, 0, &origin.url("/c")).await, 403, "the later purge never reached it");
    assert_eq!(get(&f, 0, &origin.url("/b")).await, 200);
}

/// robots.txt is slow (1.5 s). Instance 0 starts the fleet's fetch; meanwhile the site changes
/// its robots.txt and instance 1 purges it (then everything). The fetch's pre-purge answer
/// still answers the request that waited for it, but it is neither stored in Redis (it was,
/// for up to 24 h, and every instance used it) nor kept by instance 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_wins_over_a_fetch_in_flight() {
    let Some(redis) = Redis::start().await else { return };
    let f = fleet(2, &redis, "purge-in-flight", &[]);
    until_fleet_up(&f, 1).await;
    for everything in [false, true] {
        let allow_all = "User-agent: *\nDisallow:\n";
        let origin = TimedOrigin::start(allow_all, Duration::from_millis(1500)).await;
        let first = super::support::client(f.instances[0].proxy_addr);
        let url = origin.url("/a");
        let in_flight = tokio::spawn(async move { first.get(url).send().await.unwrap().status() });
        origin.until_arrived("/robots.txt").await;
        origin.set_robots("User-agent: *\nDisallow: /b\n");
        if everything {
            let url = format!("{}/cache/purge-all", f.instances[1].admin());
            let admin = crate::proxy::support::reqwest_builder().no_proxy().build().unwrap();
            let resp = admin.post(url).send().await.unwrap();
            assert_eq!(resp.status(), 200, "{:?}", resp.text().await);
        } else {
            purge(&f.instances[1], &origin).await;
        }
        assert_eq!(in_flight.await.unwrap(), 200);
        let records = redis.keys(&format!("test-purge-in-flight:robots:http://{}", origin.addr));
        assert!(records.is_empty(), "the pre-purge result was stored ({everything}): {records:?}");
        let status = get(&f, 1, &origin.url("/b")).await;
        assert_eq!(status, 403, "instance 1 used the pre-purge result (all: {everything})");
        let status = get(&f, 0, &origin.url("/b")).await;
        assert_eq!(status, 403, "instance 0 kept the pre-purge result (all: {everything})");
        assert_eq!(origin.hits("/robots.txt"), 2, "one fetch before the purge, one after");
        assert_eq!(origin.hits("/b"), 0);
    }
}

fn site() -> Authority {
    Authority::new(Scheme::Http, "purged.example", 80).unwrap()
}

/// At the store's own level: a purge of the authority, or of everything, between taking the
/// lease and storing makes the store refuse (`false`), stores nothing, and frees the lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_after_a_purge_stores_nothing() {
    let Some(redis) = Redis::start().await else { return };
    let fetcher = SharedRedis::new(link(&redis, "store-purged", "fetcher"));
    let admin = SharedRedis::new(link(&redis, "store-purged", "admin"));
    let a = site();
    let ttl = Duration::from_secs(30);
    for everything in [false, true] {
        assert!(fetcher.lease(FileKind::Robots, &a, ttl).await.unwrap());
        admin.purge((!everything).then_some(&a)).await.unwrap();
        let stored = fetcher.store(FileKind::Robots, &a, b"pre-purge".to_vec(), ttl).await.unwrap();
        assert!(!stored, "stored after a purge (of everything: {everything})");
        assert_eq!(fetcher.load(FileKind::Robots, &a).await.unwrap(), None);
        // The lease is free: the next fetch can start at once.
        assert!(admin.lease(FileKind::Robots, &a, ttl).await.unwrap());
        admin.release(FileKind::Robots, &a).await.unwrap();
    }
    // Without a purge, the store stores.
    assert!(fetcher.lease(FileKind::Robots, &a, ttl).await.unwrap());
    assert!(fetcher.store(FileKind::Robots, &a, b"record".to_vec(), ttl).await.unwrap());
    assert_eq!(fetcher.load(FileKind::Robots, &a).await.unwrap().as_deref(), Some(&b"record"[..]));
}

/// Review-fleet N10: with loopback re-opened (`access.allow_destinations`, as the harness
/// does), a proxy client purged every instance's copies through a peer: `POST
/// /cache/purge-all` to instance 1's admin listener, through instance 0, answered 200. Each
/// instance now announces its admin listener, and every instance refuses the fleet's admin
/// listeners as destinations: 403, audited, and nothing purged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_s_admin_listener_is_not_a_destination() {
    let Some(redis) = Redis::start().await else { return };
    let origin = TimedOrigin::start("User-agent: *\nDisallow: /private\n", Duration::ZERO).await;
    let f = fleet(2, &redis, "peer-admin", &[]);
    until_fleet_up(&f, 1).await;
    assert_eq!(get(&f, 0, &origin.url("/a")).await, 200);
    assert_eq!(get(&f, 1, &origin.url("/b")).await, 200);
    let fetches = origin.hits("/robots.txt");
    let peer = f.instances[1].admin_addr.port();
    let through = super::support::client(f.instances[0].proxy_addr);
    let summary = format!("http://127.0.0.1:{peer}/api/summary");
    // Within the view's refresh (2 s) after the peer announced itself.
    let mut status = 0;
    let began = Instant::now();
    while began.elapsed() < Duration::from_secs(8) {
        status = through.get(&summary).send().await.unwrap().status().as_u16();
        if status == 403 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(status, 403, "instance 1's admin reached through instance 0");
    let resp = through.get(&summary).send().await.unwrap();
    let proxy_status = resp.headers()["proxy-status"].to_str().unwrap().to_owned();
    assert!(proxy_status.contains("destination_ip_prohibited"), "{proxy_status}");
    let purge = through.post(format!("http://127.0.0.1:{peer}/cache/purge-all")).send();
    assert_eq!(purge.await.unwrap().status().as_u16(), 403);
    // Nothing was purged: both instances still decide from their copies.
    assert_eq!(get(&f, 0, &origin.url("/c")).await, 200);
    assert_eq!(get(&f, 1, &origin.url("/d")).await, 200);
    assert_eq!(origin.hits("/robots.txt"), fetches);
    // Instance 0's own admin stays refused too, and the peer's admin answers its own clients.
    let own = format!("http://127.0.0.1:{}/healthz", f.instances[0].admin_addr.port());
    assert_eq!(through.get(&own).send().await.unwrap().status().as_u16(), 403);
    let direct = crate::proxy::support::reqwest_builder().no_proxy().build().unwrap();
    assert_eq!(direct.get(&summary).send().await.unwrap().status().as_u16(), 200);
    let audit = std::fs::read_to_string(f.state_dir(0).join("audit.jsonl")).unwrap_or_default();
    assert!(audit.contains("destination_prohibited"), "{audit}");
}
