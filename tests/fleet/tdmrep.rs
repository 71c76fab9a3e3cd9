//! `/.well-known/tdmrep.json` in a fleet: fetched once by one instance, stored in Redis, and
//! used by the others without a fetch of their own, also when they ask at the same moment.

use std::time::Duration;

use super::support::{client, fleet, Redis, TimedOrigin};
use super::ROBOTS;

const FILE: &str = "/.well-known/tdmrep.json";

async fn get_as(f: &super::support::Fleet, i: usize, url: &str) -> u16 {
    let resp = client(f.instances[i].proxy_addr)
        .get(url)
        .header("user-agent", "AcmeTrainer/1.0")
        .send()
        .await
        .unwrap();
    resp.status().as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_instance_fetches_tdmrep_json_and_the_other_uses_the_shared_copy() {
    let Some(redis) = Redis::start().await else { return };
    let origin = TimedOrigin::start(ROBOTS, Duration::ZERO).await;
    // `usage.crawlers` is a list of tables: in a file.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("robots-proxy.toml");
    let usage = "[usage]\ntrain_ai = \"enforce\"\n\n[[usage.crawlers]]\ntoken = \"AcmeTrainer\"\n\
                 purposes = [\"train-ai\"]\n";
    std::fs::write(&file, usage).unwrap();
    let config = file.to_string_lossy().into_owned();
    let f = fleet(2, &redis, "tdmrep", &[("ROBOTS_PROXY_CONFIG", &config)]);
    // Instance 0 fetches the file: the reservation withholds the response.
    assert_eq!(get_as(&f, 0, &origin.url("/reserved/a")).await, 403);
    assert_eq!(origin.hits(FILE), 1);
    assert_eq!(redis.keys("test-tdmrep:tdmrep:*").len(), 1, "stored for the fleet");
    // Instance 1 decides from the fleet's copy, with no fetch of its own.
    assert_eq!(get_as(&f, 1, &origin.url("/reserved/b")).await, 403);
    assert_eq!(get_as(&f, 1, &origin.url("/free/c")).await, 200);
    assert_eq!(origin.hits(FILE), 1, "one fetch for the fleet");
    drop(redis);
}

/// Instances that miss at the same moment: one takes the fetch lease and fetches, the other
/// waits for its record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_asking_at_once_share_one_tdmrep_json_fetch() {
    let Some(redis) = Redis::start().await else { return };
    let origin = TimedOrigin::start(ROBOTS, Duration::ZERO).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("robots-proxy.toml");
    let usage = "[usage]\ntrain_ai = \"enforce\"\n\n[[usage.crawlers]]\ntoken = \"AcmeTrainer\"\n\
                 purposes = [\"train-ai\"]\n";
    std::fs::write(&file, usage).unwrap();
    let config = file.to_string_lossy().into_owned();
    let f = fleet(2, &redis, "tdmrep-once", &[("ROBOTS_PROXY_CONFIG", &config)]);
    // robots.txt first (a crawler without purposes causes no tdmrep.json fetch), so that the
    // requests below meet at tdmrep.json.
    for i in 0..2 {
        let resp = client(f.instances[i].proxy_addr)
            .get(origin.url("/free/warm"))
            .header("user-agent", "OtherBot/1.0")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
    }
    assert_eq!(origin.hits(FILE), 0);
    let (url_a, url_b) = (origin.url("/reserved/a"), origin.url("/reserved/b"));
    let (a, b) = tokio::join!(get_as(&f, 0, &url_a), get_as(&f, 1, &url_b));
    assert_eq!((a, b), (403, 403));
    assert_eq!(origin.hits(FILE), 1, "one fetch for the fleet");
    drop(redis);
}
