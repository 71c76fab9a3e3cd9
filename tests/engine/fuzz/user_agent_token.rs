//! Invariants of the fuzz target `user_agent_token` (`fuzz/fuzz_targets/user_agent_token.rs` calls
//! [`check`], and `tests/engine/fuzz/mod.rs` runs it on a corpus as an ordinary test): the product
//! token finder (`ProductToken::from_user_agent`), which reads every request's User-Agent header,
//! untrusted.
//!
//! Besides "never panics", it checks that a token it finds is one: a valid product token
//! (RFC 9309 §2.2.1's letters, `_` and `-`, and the digits, `.` and single spaces real
//! crawlers' names hold: `docs/engine.md`), written as it appears in the header, and taken as it
//! is when given back as an `--agent`.

use robots_proxy::robots::ProductToken;

/// Panics when `data` breaks one of the invariants above.
pub fn check(data: &[u8]) {
    let user_agent = String::from_utf8_lossy(data);
    if let Some(token) = ProductToken::from_user_agent(&user_agent) {
        let again = ProductToken::new(token.as_str()).expect("a found token is a valid token");
        assert_eq!(again.as_str(), token.as_str());
        assert_eq!(token.lowercase(), token.as_str().to_ascii_lowercase());
        assert!(user_agent.contains(token.as_str()), "{token:?} is not in {user_agent:?}");
        let direct = ProductToken::from_token_or_user_agent(token.as_str()).expect("a token");
        assert_eq!(direct.as_str(), token.as_str());
    }
    if let Some(token) = ProductToken::from_token_or_user_agent(&user_agent) {
        assert!(!token.as_str().is_empty());
        assert!(ProductToken::new(token.as_str()).is_ok());
    }
}
