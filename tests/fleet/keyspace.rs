//! The status page's view and purge-all whatever else Redis holds: neither walks the keyspace,
//! so a Redis with a million and a half keys of other kinds (or of the fleet's own records)
//! leaves them correct and the link up. A purge-all that Redis refuses is answered as partial,
//! and the other instances are told all the same.

use std::time::Duration;

use super::support::{fleet, Redis, TimedOrigin};
use super::{get, metrics, summary, until_fleet_up, ROBOTS};

fn admin() -> reqwest::Client {
    crate::proxy::support::reqwest_builder().no_proxy().build().unwrap()
}

/// `robots_proxy_fleet_up` as instance `proxy` says it.
async fn fleet_up(proxy: &crate::ops::support::ProxyProcess) -> String {
    let text = metrics(proxy).await;
    text.lines().find(|l| l.starts_with("robots_proxy_fleet_up ")).unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_million_and_a_half_keys_purge_all_and_the_view_work_and_the_link_stays_up() {
    let Some(redis) = Redis::start().await else { return };
    let origin = TimedOrigin::start(ROBOTS, Duration::ZERO).await;
    let other = TimedOrigin::start(ROBOTS, Duration::ZERO).await;
    // Keys of other kinds, before the instances start (Redis is busy while it makes them).
    let mut c = redis.connection();
    redis::cmd("DEBUG")
        .arg("POPULATE")
        .arg(1_500_000)
        .arg("elsewhere")
        .query::<()>(&mut c)
        .unwrap();
    // `refuse`: had the link been taken down, the next request would be answered 503.
    let f = fleet(2, &redis, "keyspace", &[("ROBOTS_PROXY_FLEET__ON_REDIS_ERROR", "refuse")]);
    until_fleet_up(&f, 1).await;
    assert_eq!(get(&f, 0, &origin.url("/a")).await, 200);
    assert_eq!(get(&f, 1, &origin.url("/a")).await, 200);
    assert_eq!(origin.hits("/robots.txt"), 1);
    // The site forbids /b from now on; purge-all on instance 0 must reach instance 1's copy
    // and the shared record.
    origin.set_robots("User-agent: *\nDisallow: /b\n");
    let resp = admin().post(format!("{}/cache/purge-all", f.instances[0].admin())).send().await;
    let resp = resp.unwrap();
    let status = resp.status();
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!((status.as_u16(), &body["purged_all"]), (200, &true.into()), "{body}");
    // Pub/sub reaches instance 1 well within a second.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let log = || format!("{}\n{}", f.instances[0].stderr(), f.instances[1].stderr());
    assert_eq!(get(&f, 1, &origin.url("/b")).await, 403, "answered purged, not purged:\n{}", log());
    assert_eq!(get(&f, 0, &origin.url("/b")).await, 403);
    assert_eq!(origin.hits("/robots.txt"), 2, "one fetch after the purge for the fleet");
    // The status page polls the view every 2 s; each poll lists both instances, and the link
    // stays up: the next request through instance 0 to a site never seen is served.
    for i in 0..3 {
        let s = summary(&f.instances[0]).await;
        let names: Vec<&str> = s["fleet"]["instances"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["instance-0", "instance-1"], "{s}\n{}", log());
        assert_eq!(get(&f, 0, &other.url(&format!("/c/{i}"))).await, 200, "{}", log());
        assert_eq!(fleet_up(&f.instances[0]).await, "robots_proxy_fleet_up 1");
    }
    assert!(!log().contains("out of reach"), "the link was taken down:\n{}", log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_all_redis_refuses_is_answered_partial_and_still_told_to_every_instance() {
    let Some(redis) = Redis::start().await else { return };
    let origin = TimedOrigin::start(ROBOTS, Duration::ZERO).await;
    let f = fleet(2, &redis, "partial", &[]);
    until_fleet_up(&f, 1).await;
    assert_eq!(get(&f, 0, &origin.url("/a")).await, 200);
    assert_eq!(get(&f, 1, &origin.url("/a")).await, 200);
    // Redis refuses to purge: the purge generation is a key of the wrong type.
    let mut c = redis.connection();
    redis::cmd("HSET")
        .arg("test-partial:purge-generation")
        .arg("not")
        .arg("a counter")
        .query::<()>(&mut c)
        .unwrap();
    let mut listener = redis.connection();
    let mut pubsub = listener.as_pubsub();
    pubsub.subscribe("test-partial:purge").unwrap();
    pubsub.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let resp = admin().post(format!("{}/cache/purge-all", f.instances[0].admin())).send().await;
    let resp = resp.unwrap();
    assert_eq!(resp.status(), 503);
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["purged_all"], false, "{body}");
    assert_eq!(body["partial"], true, "{body}");
    let error = body["error"].as_str().unwrap();
    assert!(error.contains("not purged") && error.contains("WRONGTYPE"), "{error}");
    assert!(!error.contains("127.0.0.1"), "{error}");
    // The other instances were told to drop their copies all the same.
    let message = pubsub.get_message().expect("the purge was published");
    assert_eq!(message.get_payload::<String>().unwrap(), "*");
    // A refused command is not an outage.
    assert_eq!(fleet_up(&f.instances[0]).await, "robots_proxy_fleet_up 1");
    assert_eq!(get(&f, 0, &origin.url("/b")).await, 200);
}
