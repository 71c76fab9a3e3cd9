//! The case-folded reading: patterns and paths compared with ASCII letters folded to lower case,
//! for origins that serve `/PRIVATE/x` as `/private/x` (IIS on NTFS, ASP.NET routing, Express
//! by default). Whether an origin does is the proxy's knowledge, not the file's: the engine only
//! offers the comparison ([`RobotsTxt::decide_folded`]) and keeps what the fetcher learnt from
//! the robots.txt response ([`RobotsTxt::with_case_insensitive_origin`]).
//!
//! Only case is folded. IIS, through the Win32 path rules, also strips trailing dots and spaces
//! from path segments and resolves 8.3 short names (`/PRIVAT~1/x`); the first is documented for
//! Win32 file paths but not, that we could confirm, for IIS's URLs, and the second depends on
//! the origin's file system (a short name is assigned when a file is created, `~1`, `~2`, … in
//! creation order), which no proxy can compute. Neither is read here.

use std::sync::OnceLock;

use super::index::PrefixIndex;
use super::ProductToken;
use super::{canonical_path, is_robots_txt, Decision, Reason, RobotsTxt, Rule, RuleKind, Verdict};

/// The folded indexes of a file, one per rule set, built on first use: most origins never need
/// them.
#[derive(Debug, Default)]
pub(super) struct Folded {
    indexes: OnceLock<Vec<PrefixIndex>>,
}

impl Folded {
    fn indexes(&self, robots: &RobotsTxt) -> &[PrefixIndex] {
        self.indexes.get_or_init(|| {
            // Folded from the patterns read decoded when the file has such patterns: an origin
            // that folds case also decodes the path.
            let base =
                if robots.decoded_rules.is_empty() { &robots.rules } else { &robots.decoded_rules };
            let rules: Vec<Rule> = base
                .iter()
                .map(|r| Rule { pattern: fold_case(&r.pattern).into(), ..r.clone() })
                .collect();
            robots
                .rule_sets
                .iter()
                .map(|set| {
                    let ids = set
                        .groups
                        .iter()
                        .flat_map(|&g| robots.groups[g as usize].rules.clone())
                        .collect();
                    PrefixIndex::build(&rules, ids)
                })
                .collect()
        })
    }
}

/// `canonical` (a pattern or path in canonical form) with ASCII letters in lower case, except
/// the hex digits of a `%XX`, which the canonical form writes in upper case.
pub fn fold_case(canonical: &str) -> String {
    let mut out = String::with_capacity(canonical.len());
    let mut hex_left = 0u8;
    for c in canonical.chars() {
        if hex_left > 0 {
            hex_left -= 1;
            out.push(c);
        } else if c == '%' {
            hex_left = 2;
            out.push(c);
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

impl RobotsTxt {
    /// Marks this file as served by an origin that reads paths case-insensitively (its
    /// response said `Server: Microsoft-IIS…`, `X-Powered-By: ASP.NET` or `Express`), so a
    /// proxy can decide the case-folded reading for it.
    pub fn with_case_insensitive_origin(mut self, yes: bool) -> Self {
        self.case_insensitive_origin = yes;
        self
    }

    /// Whether [`RobotsTxt::with_case_insensitive_origin`] marked the file.
    pub fn case_insensitive_origin(&self) -> bool {
        self.case_insensitive_origin
    }

    /// [`RobotsTxt::decide_decoded`] with ASCII letters folded on both sides: what an origin
    /// that serves `/PRIVATE/x` as `/private/x` holds against `Disallow: /private/`. The
    /// deciding rule is reported as written.
    pub fn decide_folded(&self, token: Option<&ProductToken>, path: &str) -> Decision<'_> {
        let (rule_set, name) = self.lookup(token);
        let path = fold_case(&canonical_path(path));
        let decision = |verdict, reason| Decision { verdict, reason, robots: self, rule_set, name };
        if is_robots_txt(path.as_bytes()) {
            return decision(Verdict::Allow, Reason::RobotsTxt);
        }
        let Some(set) = rule_set else {
            return decision(Verdict::Allow, Reason::NoGroupApplies);
        };
        let index = &self.folded.indexes(self)[set as usize];
        match index.longest_match(path.as_bytes()) {
            Some(best) => {
                let rule = &self.rules[best.rule as usize];
                let verdict = match rule.kind {
                    RuleKind::Allow => Verdict::Allow,
                    RuleKind::Disallow => Verdict::Disallow,
                };
                decision(verdict, Reason::Rule(rule))
            }
            None => decision(Verdict::Allow, Reason::NoRuleMatched),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_letters_not_hex() {
        assert_eq!(fold_case("/PRIVATE/%C3%A9x/%2F"), "/private/%C3%A9x/%2F");
    }

    #[test]
    fn folded_decisions() {
        let robots = RobotsTxt::parse(b"User-agent: *\nDisallow: /Private/\nAllow: /private/OK\n");
        assert!(robots.decide(None, "/PRIVATE/x").is_allowed());
        assert!(!robots.decide_folded(None, "/PRIVATE/x").is_allowed());
        assert!(!robots.decide_folded(None, "/private/x").is_allowed());
        assert!(robots.decide_folded(None, "/PRIVATE/ok").is_allowed());
        let d = robots.decide_folded(None, "/pRiVaTe/x");
        assert_eq!(d.rule().map(|r| (r.pattern(), r.line())), Some(("/Private/", 2)));
        assert!(robots.decide_folded(None, "/ROBOTS.TXT").is_allowed());
    }
}
