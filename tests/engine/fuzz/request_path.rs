//! Invariants of the fuzz target `request_path` (`fuzz/fuzz_targets/request_path.rs` calls
//! [`check`], and `tests/engine/fuzz/mod.rs` runs it on a corpus as an ordinary test): request-
//! targets as the proxy receives them: the readings it decides on, and the authority of an absolute
//! URI.
//!
//! Every reading but the path as sent must start with `/`, be ASCII in its path, and hold no
//! dot-segment and no `//` there; reading what is forwarded again changes nothing.

use robots_proxy::authority::Authority;
use robots_proxy::policy::Readings;

/// Panics when `data` breaks one of the invariants above.
pub fn check(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let readings = Readings::of(&text);
    let out = readings.as_sent();
    assert!(out.starts_with('/') && !out.contains('#'), "{out:?}");
    for (_, read) in readings.iter().skip(1) {
        let path = read.split('?').next().unwrap_or("");
        assert!(path.starts_with('/') && path.is_ascii(), "{read:?}");
        assert!(!path.contains("//"), "{read:?}");
        assert!(path.split('/').all(|seg| seg != "." && seg != ".."), "{read:?}");
    }
    assert_eq!(Readings::of(out), readings, "not a fixed point");

    // The authority of an absolute-form target: never panics; a parsed authority prints to a
    // URL whose authority parses back to the same.
    if let Ok(uri) = format!("http://{text}").parse::<http::Uri>() {
        if let Ok(a) = Authority::from_uri(&uri) {
            let again: http::Uri = format!("{a}/").parse().expect("authority prints as a URI");
            assert_eq!(Authority::from_uri(&again).ok(), Some(a));
        }
    }
}
