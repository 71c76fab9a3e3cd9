//! Invariants of the fuzz target `user_agent` (`fuzz/fuzz_targets/user_agent.rs` calls [`check`],
//! and `tests/engine/fuzz/mod.rs` runs it on a corpus as an ordinary test): the product-token
//! finder on arbitrary User-Agent strings.
//!
//! Never panics; a token found is made of letters, digits, `_`, `-`, `.` and single spaces
//! between words, appears in the input, and is found again when given on its own.

use robots_proxy::robots::ProductToken;

/// Panics when `data` breaks one of the invariants above.
pub fn check(data: &[u8]) {
    let ua = String::from_utf8_lossy(data);
    if let Some(token) = ProductToken::from_user_agent(&ua) {
        let t = token.as_str();
        assert!(!t.is_empty());
        assert!(
            t.split(' ').all(|w| !w.is_empty()
                && w.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))),
            "{t:?}"
        );
        assert!(ua.contains(t), "{t:?} not in {ua:?}");
        assert_eq!(
            ProductToken::from_token_or_user_agent(t).map(|x| x.lowercase().to_owned()),
            Some(token.lowercase().to_owned())
        );
    }
    let _ = ProductToken::from_token_or_user_agent(&ua);
}
