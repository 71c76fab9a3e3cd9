//! Fuzz target: URL and request-path normalisation, and authorities of absolute URIs.
//!
//! The proxy checks and forwards `normalize_request_path(target)`, so it must: never panic,
//! start with `/`, be ASCII, hold no dot-segments and no `//` in its path part, and be a fixed
//! point (normalising it again changes nothing: what was checked is what is sent).
#![no_main]

use libfuzzer_sys::fuzz_target;
use robots_proxy::authority::Authority;
use robots_proxy::robots::normalize::normalize_request_path;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let out = normalize_request_path(&text);
    assert!(out.starts_with('/'), "{out:?}");
    assert!(out.is_ascii(), "{out:?}");
    let path = out.split('?').next().unwrap_or("");
    assert!(!path.contains("//"), "{out:?}");
    for seg in path.split('/') {
        assert!(seg != "." && seg != "..", "{out:?}");
    }
    assert!(!out.contains('#'), "{out:?}");
    assert_eq!(normalize_request_path(&out), out, "not a fixed point");

    // The authority of an absolute-form target: never panics; a parsed authority prints to a
    // URL whose authority parses back to the same.
    if let Ok(uri) = format!("http://{text}").parse::<http::Uri>() {
        if let Ok(a) = Authority::from_uri(&uri) {
            let again: http::Uri = format!("{a}/").parse().expect("authority prints as a URI");
            assert_eq!(Authority::from_uri(&again).ok(), Some(a));
        }
    }
});
