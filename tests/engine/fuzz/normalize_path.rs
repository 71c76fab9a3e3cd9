//! Invariants of the fuzz target `normalize_path` (`fuzz/fuzz_targets/normalize_path.rs` calls
//! [`check`], and `tests/engine/fuzz/mod.rs` runs it on a corpus as an ordinary test): the
//! canonical percent-encoding (`normalize`) and the authority of a request-target (`Authority`),
//! fed untrusted request-targets. (What the proxy forwards and decides on is the `readings`
//! target's.)
//!
//! Besides "never panics", it checks that the canonical form is ASCII and a fixed point.

use robots_proxy::authority::{Authority, Scheme};
use robots_proxy::robots::normalize::normalize;

/// Panics when `data` breaks one of the invariants above.
pub fn check(data: &[u8]) {
    let text = String::from_utf8_lossy(data);

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
}
