//! Fuzz target: URL and path normalisation, what the proxy checks and forwards
//! (`normalize_request_path`), the canonical percent-encoding (`normalize`), and the authority
//! of a request-target (`Authority`), all fed untrusted request-targets.
//!
//! Besides "never panics", it checks the guarantees the proxy relies on: the checked path starts
//! with `/`, is ASCII, has no fragment, no dot-segments and no `//`, and normalising it again
//! changes nothing (so what was checked is what is sent).
#![no_main]

use libfuzzer_sys::fuzz_target;
use robots_proxy::authority::{Authority, Scheme};
use robots_proxy::robots::normalize::{normalize, normalize_request_path};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);

    let checked = normalize_request_path(&text);
    assert!(checked.starts_with('/'), "{text:?} -> {checked:?}");
    assert!(checked.is_ascii(), "{text:?} -> {checked:?}");
    assert!(!checked.contains('#'), "{text:?} -> {checked:?}");
    let path = checked.split('?').next().unwrap_or_default();
    assert!(!path.contains("//"), "{text:?} -> {checked:?}");
    assert!(!path.split('/').any(|s| s == "." || s == ".."), "{text:?} -> {checked:?}");
    assert_eq!(normalize_request_path(&checked), checked, "{text:?}");

    let canonical = normalize(data);
    assert!(canonical.is_ascii());
    assert_eq!(normalize(canonical.as_bytes()), canonical, "{text:?}");

    for scheme in [Scheme::Http, Scheme::Https] {
        if let Ok(authority) = Authority::from_host_port(scheme, &text) {
            let shown = authority.to_string();
            assert!(shown.is_ascii(), "{shown:?}");
            let _ = authority.robots_url();
            let _ = authority.host_header();
        }
    }
    if let Ok(uri) = text.parse::<http::Uri>() {
        let _ = Authority::from_uri(&uri);
    }
});
