//! Compressed and UTF-16 robots.txt bodies at the cache level: decoded, capped after
//! decoding, and "unreachable" (the earlier copy kept) when they cannot be decoded.

use std::io::Write;
use std::time::Duration;

use flate2::write::GzEncoder;
use flate2::Compression;
use robots_proxy::cache::{FetchOutcome, RobotsRules, RobotsState};
use robots_proxy::robots::MIN_SIZE_LIMIT;

use super::support::{allowed, cache, settings, Origin, Reply};

const RULES: &str = "User-agent: *\nDisallow: /private\n";

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

#[tokio::test]
async fn gzip_body_is_parsed_and_capped_after_decoding() {
    // The rules, then 4 MiB of comment lines: the cap counts decoded bytes.
    let mut file = RULES.as_bytes().to_vec();
    file.extend(b"# padding padding padding\n".repeat((4 << 20) / 26));
    let origin =
        Origin::with_robots(Reply::ok(gzip(&file)).header("Content-Encoding", "gzip")).await;
    let (cache, _clock) = cache();
    let snapshot = cache.get(&origin.authority()).await;
    assert_eq!(snapshot.state, RobotsState::Fresh, "{snapshot:?}");
    assert!(!allowed(&snapshot, "/private/x"));
    assert!(allowed(&snapshot, "/public"));
    let RobotsRules::Parsed(robots) = &snapshot.rules else { panic!("{snapshot:?}") };
    // Parsed up to the cap, the line it cut dropped, and the rest noted as ignored.
    assert!(robots.parsed_bytes() <= MIN_SIZE_LIMIT, "{}", robots.parsed_bytes());
    assert!(robots.parsed_bytes() > MIN_SIZE_LIMIT - 30, "{}", robots.parsed_bytes());
    assert!(robots.ignored_bytes() > 0);
}

#[tokio::test]
async fn undecodable_body_keeps_the_earlier_copy() {
    let origin = Origin::with_robots(Reply::ok(RULES)).await;
    let (cache, clock) = cache();
    assert_eq!(cache.get(&origin.authority()).await.state, RobotsState::Fresh);
    origin.route("/robots.txt", Reply::ok(RULES).header("Content-Encoding", "zstd"));
    clock.advance(settings().max_age + Duration::from_secs(1));
    let snapshot = cache.get(&origin.authority()).await;
    assert_eq!(snapshot.state, RobotsState::Stale, "{snapshot:?}");
    assert!(!allowed(&snapshot, "/private/x"));
    assert!(allowed(&snapshot, "/public"));
    let FetchOutcome::Network(why) = &snapshot.last_outcome else { panic!("{snapshot:?}") };
    assert!(why.contains("zstd"), "{why}");
    assert_eq!(snapshot.failures, 1);
}

#[tokio::test]
async fn utf16_body_with_a_bom_is_transcoded() {
    let mut body = vec![0xfe, 0xff];
    RULES.encode_utf16().for_each(|u| body.extend(u.to_be_bytes()));
    let origin = Origin::with_robots(Reply::ok(body)).await;
    let (cache, _clock) = cache();
    let snapshot = cache.get(&origin.authority()).await;
    assert!(!allowed(&snapshot, "/private/x"), "{snapshot:?}");
    assert!(allowed(&snapshot, "/public"));
}
