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

/// tdmrep.json is slow (1.5 s). Instance 0 starts the fleet's fetch under its lease; meanwhile
/// instance 1 purges the site (then everything). The fetch's pre-purge answer still answers the
/// request that waited for it, but it is not stored in Redis, so instance 1 fetches the file
/// again, and instance 0 did not keep it either. (tdmrep.json had a lease loop of its own whose
/// store ignored the lease and stamped the purge generation at store time: the pre-purge record
/// was stored and used by the whole fleet. It now goes through robots.txt's loop and store.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_wins_over_a_tdmrep_json_fetch_in_flight() {
    let Some(redis) = Redis::start().await else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("robots-proxy.toml");
    let usage = "[usage]\ntrain_ai = \"enforce\"\n\n[[usage.crawlers]]\ntoken = \"AcmeTrainer\"\n\
                 purposes = [\"train-ai\"]\n";
    std::fs::write(&file, usage).unwrap();
    let config = file.to_string_lossy().into_owned();
    let f = fleet(2, &redis, "tdmrep-purge", &[("ROBOTS_PROXY_CONFIG", &config)]);
    super::until_fleet_up(&f, 1).await;
    let admin = crate::proxy::support::reqwest_builder().no_proxy().build().unwrap();
    for everything in [false, true] {
        let origin = TimedOrigin::start(ROBOTS, Duration::ZERO).await;
        origin.set_tdmrep_delay(Duration::from_millis(1500));
        let first = client(f.instances[0].proxy_addr);
        let url = origin.url("/reserved/a");
        let in_flight = tokio::spawn(async move {
            first.get(url).header("user-agent", "AcmeTrainer/1.0").send().await.unwrap().status()
        });
        origin.until_arrived(FILE).await;
        let purge = if everything {
            format!("{}/cache/purge-all", f.instances[1].admin())
        } else {
            format!("{}/cache/purge?authority={}", f.instances[1].admin(), origin.url(""))
        };
        let resp = admin.post(purge).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{:?}", resp.text().await);
        assert_eq!(in_flight.await.unwrap(), 403, "the waiting request has the fetch's answer");
        let key = format!("test-tdmrep-purge:tdmrep:http://{}", origin.addr);
        let records = redis.keys(&key);
        assert!(records.is_empty(), "the pre-purge result was stored ({everything}): {records:?}");
        origin.set_tdmrep_delay(Duration::ZERO);
        assert_eq!(get_as(&f, 1, &origin.url("/reserved/b")).await, 403);
        assert_eq!(
            origin.hits(FILE),
            2,
            "instance 1 used the pre-purge result (all: {everything})"
        );
        assert_eq!(get_as(&f, 0, &origin.url("/reserved/c")).await, 403);
        assert_eq!(
            origin.hits(FILE),
            2,
            "instance 0 took the fleet's new record (all: {everything})"
        );
    }
    drop(redis);
}
