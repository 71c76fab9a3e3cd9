//! The case-folded reading: patterns and paths compared with letters folded to lower case,
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

/// `canonical` (a pattern or path in canonical form) with its letters in lower case, except
/// the hex digits of a `%XX`, which the canonical form writes in upper case. A non-ASCII letter
/// (percent-encoded UTF-8 in the canonical form, `%C3%89` for `É`) is folded too, as NTFS and
/// ASP.NET fold it (review-core N9): its escapes are decoded, the character lower-cased
/// (Unicode's mapping) and written back as upper-case escapes, so `/%C3%89T%C3%89/` folds to
/// `/%C3%A9t%C3%A9/`. Escapes that are not one whole UTF-8 character stay as they are.
pub fn fold_case(canonical: &str) -> String {
    let bytes = canonical.as_bytes();
    let mut out = String::with_capacity(canonical.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            if let Some((c, used)) = escaped_char(&bytes[i..]) {
                for lower in c.to_lowercase() {
                    if lower.is_ascii() {
                        out.push(lower);
                    } else {
                        let mut buf = [0u8; 4];
                        for b in lower.encode_utf8(&mut buf).bytes() {
                            out.push('%');
                            out.push(char::from(HEX[usize::from(b >> 4)]));
                            out.push(char::from(HEX[usize::from(b & 0x0f)]));
                        }
                    }
                }
                i += used;
                continue;
            }
            // A `%XX` that is not a whole character: copied, hex digits as they are.
            let end = (i + 3).min(bytes.len());
            out.push_str(&canonical[i..end]);
            i = end;
            continue;
        }
        // Canonical forms are ASCII; anything else is folded as a character all the same.
        let c = canonical[i..].chars().next().unwrap_or_default();
        out.extend(c.to_lowercase());
        i += c.len_utf8().max(1);
    }
    out
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// The non-ASCII character that the `%XX` escapes at the start of `input` spell in UTF-8, and
/// how many bytes of `input` they take; `None` when they do not spell one whole character.
fn escaped_char(input: &[u8]) -> Option<(char, usize)> {
    let byte_at = |k: usize| -> Option<u8> {
        let at = input.get(3 * k..3 * k + 3)?;
        if at[0] != b'%' {
            return None;
        }
        let hex = |h: u8| (h as char).to_digit(16).map(|d| d as u8);
        Some(hex(at[1])? << 4 | hex(at[2])?)
    };
    let lead = byte_at(0)?;
    let len = match lead {
        0xC2..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF4 => 4,
        _ => return None,
    };
    let mut buf = [0u8; 4];
    for (k, slot) in buf.iter_mut().enumerate().take(len) {
        *slot = byte_at(k)?;
    }
    let c = std::str::from_utf8(&buf[..len]).ok()?.chars().next()?;
    Some((c, 3 * len))
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
            Some(best) if best.assumed => decision(Verdict::Disallow, Reason::OverBudget),
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
        // Non-ASCII letters fold too (review-core N9): `É` to `é`, `Ω` to `ω`.
        assert_eq!(fold_case("/%C3%89T%C3%89/"), "/%C3%A9t%C3%A9/");
        assert_eq!(fold_case("/CAF%C3%89"), "/caf%C3%A9");
        assert_eq!(fold_case("/%CE%A9"), "/%CF%89");
        // Escapes that are not one whole character stay as they are.
        assert_eq!(fold_case("/%C3/%FF%41/%E2%82"), "/%C3/%FF%41/%E2%82");
        assert_eq!(fold_case("/%c3%89"), "/%C3%A9");
    }

    #[test]
    fn non_ascii_letters_are_folded_on_both_sides() {
        let robots =
            RobotsTxt::parse("User-agent: *\nDisallow: /café/\nDisallow: /été/\n".as_bytes());
        for path in ["/caf%C3%A9/x", "/CAF%C3%89/x", "/%C3%89T%C3%89/x", "/%C3%A9t%C3%A9/x"] {
            assert!(!robots.decide_folded(None, path).is_allowed(), "{path}");
        }
        assert!(robots.decide_folded(None, "/cafe/x").is_allowed());
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

    /// An escape that is not a whole character is copied as three octets, and the letters after
    /// it are folded (a survivor of the engine's mutation run: `*` there copied too much).
    #[test]
    fn a_partial_escape_is_copied_whole_and_what_follows_folded() {
        assert_eq!(fold_case("/%FFAB"), "/%FFab");
        assert_eq!(fold_case("/xY%C3Z"), "/xy%C3z");
        assert_eq!(fold_case("/%F"), "/%F");
    }

    /// A three-octet character folds too (`Ａ`, U+FF21, to `ａ`, U+FF41).
    #[test]
    fn three_octet_letters_fold() {
        assert_eq!(fold_case("/%EF%BC%A1"), "/%EF%BD%81");
        // And four-octet ones (`𐐀`, U+10400, to `𐐨`, U+10428).
        assert_eq!(fold_case("/%F0%90%90%80"), "/%F0%90%90%A8");
    }
}
