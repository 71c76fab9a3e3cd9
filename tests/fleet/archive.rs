//! Each instance of a fleet archives what it decided with (issue 19, item 7): a robots.txt one
//! instance fetched and the other took from Redis is in both archives, under the same digest,
//! with the same fetch time.

use std::time::Duration;

use robots_proxy::archive::{ArchiveReader, Window};

use super::support::{fleet, Redis, TimedOrigin};
use super::{get, until_fleet_up};

/// The windows instance `i` has archived for `authority`, once there are any (at most 10 s).
async fn archived(f: &super::support::Fleet, i: usize, authority: &str) -> Vec<Window> {
    for _ in 0..500 {
        let windows = ArchiveReader::open(f.state_dir(i)).map(|r| r.windows(authority));
        match windows {
            Ok(windows) if !windows.is_empty() => return windows,
            _ => {}
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("instance {i} archived nothing for {authority}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_archive_the_same_digest() {
    let Some(redis) = Redis::start().await else { return };
    let f = fleet(2, &redis, "archive", &[]);
    until_fleet_up(&f, 1).await;
    const BODY: &str = "# archived by both\nUser-agent: *\nDisallow: /private\n";
    let origin = TimedOrigin::start(BODY, Duration::ZERO).await;
    assert_eq!(get(&f, 0, &origin.url("/private/a")).await, 403);
    assert_eq!(get(&f, 1, &origin.url("/private/b")).await, 403);
    assert_eq!(origin.hits("/robots.txt"), 1, "instance 1 used the shared record");

    let digest = ring::digest::digest(&ring::digest::SHA256, BODY.as_bytes());
    let want: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    let authority = format!("http://{}", origin.addr);
    let (first, second) = (archived(&f, 0, &authority).await, archived(&f, 1, &authority).await);
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(first, second, "one window, the same on both instances");
    assert_eq!(first[0].sha256.as_deref(), Some(want.as_str()));
    for i in 0..2 {
        let reader = ArchiveReader::open(f.state_dir(i)).unwrap();
        assert_eq!(reader.body(&want).as_deref(), Some(BODY.as_bytes()), "instance {i}");
    }
}
