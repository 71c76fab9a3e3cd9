//! Invariants of the fuzz target `parse_decide` (`fuzz/fuzz_targets/parse_decide.rs` calls
//! [`check`], and `tests/engine/fuzz/mod.rs` runs it on a corpus as an ordinary test): parse any
//! bytes as robots.txt, then decide paths taken from the input itself.
//!
//! Besides "never panics", it checks invariants that tie the fast path (the prefix index behind
//! `decide`) to the slow one (`matching_rules`, every rule tried):
//!
//! * the deciding rule matches the path;
//! * it is the first of the matching rules (longest, allow first on a tie), or no rule matches;
//! * normalisation is idempotent on the path.

use robots_proxy::policy::Readings;
use robots_proxy::robots::normalize::normalize;
use robots_proxy::robots::{ProductToken, Reason, RobotsTxt};

/// Panics when `data` breaks one of the invariants above.
pub fn check(data: &[u8]) {
    let robots = RobotsTxt::parse(data);

    let mut tokens: Vec<Option<ProductToken>> = vec![None, ProductToken::new("FooBot").ok()];
    for g in robots.groups().iter().take(2) {
        if let Some(ua) = g.user_agents().first() {
            tokens.push(ProductToken::from_token_or_user_agent(ua.value()));
        }
    }

    // Paths: fixed ones, each rule's pattern with wildcards filled in, and the input's tail.
    let mut paths: Vec<String> = vec!["/".into(), "/robots.txt".into(), "/a/b?c=d".into()];
    for g in robots.groups().iter().take(4) {
        for r in robots.rules_of(g).iter().take(8) {
            let p = r.pattern().trim_end_matches('$').replace('*', "x");
            paths.push(p.clone());
            paths.push(format!("{p}/tail?q"));
        }
    }
    let tail = &data[data.len().saturating_sub(24)..];
    paths.push(String::from_utf8_lossy(tail).into_owned());

    for path in &paths {
        let once = normalize(path.as_bytes());
        assert_eq!(normalize(once.as_bytes()), once);
        let readings = Readings::of(path);
        assert_eq!(Readings::of(readings.as_sent()), readings);
        for t in &tokens {
            let d = robots.decide(t.as_ref(), path);
            let all = robots.matching_rules(t.as_ref(), path);
            match d.reason() {
                Reason::Rule(rule) => {
                    assert!(rule.matches(path), "{rule} should match {path:?}");
                    let first = all.first().expect("the deciding rule is among the matches");
                    assert_eq!(first.pattern().len(), rule.pattern().len(), "{path:?}");
                    assert_eq!(first.kind(), rule.kind(), "{path:?}");
                }
                Reason::NoRuleMatched => assert!(all.is_empty(), "{path:?}: {all:?}"),
                Reason::RobotsTxt | Reason::NoGroupApplies | Reason::OverBudget => {}
            }
            let _ = robots.disallows_everything(t.as_ref());
            let _ = robots.crawl_delay(t.as_ref());
        }
    }
}
