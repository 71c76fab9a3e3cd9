//! `/.well-known/tdmrep.json` in a fleet: fetched once by one instance, stored in Redis, and
//! used by the others without a fetch of their own.

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
