//! Today's engine on a past version: every reading of the path the proxy decides on, the
//! token's group, the most restrictive reading wins: the proxy's one decision
//! ([`crate::policy::decide`]) and its one explanation.

use serde::Serialize;

use crate::policy::{decide, Claim, Explanation, Question, Readings, Rules, View};
use crate::robots::{ProductToken, RobotsTxt};

use super::history::InForce;

/// How many lines before and after the deciding rule are shown.
pub(super) const CONTEXT_LINES: u32 = 3;

/// The decision on one reading.
#[derive(Debug, Clone, Serialize)]
pub(super) struct ReadingDecision {
    /// `as-sent`, `decoded`, …
    pub(super) reading: &'static str,
    /// What the reading does.
    pub(super) description: &'static str,
    /// The path and query as that reading reads it.
    pub(super) path: String,
    /// The verdict.
    pub(super) allowed: bool,
    /// Why, in a sentence.
    pub(super) reason: String,
    /// The deciding rule as written (`disallow: /private`).
    pub(super) rule: Option<String>,
    /// Its line.
    pub(super) line: Option<u32>,
    /// The group that decided (`examplebot (line 1)`).
    pub(super) group: Option<String>,
}

/// One line of robots.txt around the deciding rule.
#[derive(Debug, Clone, Serialize)]
pub(super) struct ContextLine {
    /// Its number, from 1.
    pub(super) line: u32,
    /// Its text (bytes that are not UTF-8 shown as U+FFFD).
    pub(super) text: String,
    /// Whether it is the deciding rule.
    pub(super) rule: bool,
}

/// The replayed decision.
#[derive(Debug, Clone)]
pub(super) struct Replay {
    /// The deciding reading: the first disallowed one, or the path as sent.
    pub(super) decision: ReadingDecision,
    /// Every reading decided on.
    pub(super) readings: Vec<ReadingDecision>,
    /// The lines around the deciding rule.
    pub(super) context: Vec<ContextLine>,
}

/// Decides `path` (as sent, with every reading of it) for `token` under `what`; `body` is the
/// version's bytes when `what` is a file. `fold_case`: whether the origin gets the case-folded
/// reading.
pub(super) fn replay(
    what: &InForce,
    body: Option<&[u8]>,
    token: Option<&ProductToken>,
    path: &str,
    fold_case: bool,
) -> Replay {
    let readings = Readings::of(path);
    let parsed;
    let rules = match (what, body) {
        (InForce::File(_), Some(body)) => {
            parsed = RobotsTxt::parse(body);
            Rules::Parsed(&parsed)
        }
        (InForce::DisallowAll, _) => Rules::DisallowAll,
        _ => Rules::AllowAll,
    };
    // The proxy's one decision, on a view of the version alone (no exception is asked: the
    // evidence report names the exceptions in force separately).
    let question = Question {
        claim: Claim::asserted(token, None),
        readings: &readings,
        now: std::time::SystemTime::UNIX_EPOCH,
    };
    let decided = decide(View::offline(rules, fold_case), question);
    let decision = reading_decision(decided.explain());
    if !matches!(rules, Rules::Parsed(_)) {
        // No file: its consequence decides every path alike.
        return Replay {
            decision: decision.clone(),
            readings: vec![decision],
            context: Vec::new(),
        };
    }
    let each = decided.each().into_iter().map(reading_decision).collect();
    let context =
        decision.line.map_or_else(Vec::new, |line| context(body.unwrap_or_default(), line));
    Replay { decision, readings: each, context }
}

fn reading_decision(e: Explanation) -> ReadingDecision {
    ReadingDecision {
        reading: e.reading.name(),
        description: e.reading.description(),
        allowed: e.is_allowed(),
        path: e.read_path,
        reason: e.reason,
        rule: e.rule,
        line: e.line,
        group: e.group,
    }
}

/// The lines of `body` from [`CONTEXT_LINES`] before `line` to as many after it. Lines end at
/// LF, CR LF or CR, as the parser reads them.
fn context(body: &[u8], line: u32) -> Vec<ContextLine> {
    let text = String::from_utf8_lossy(body);
    let first = line.saturating_sub(CONTEXT_LINES).max(1);
    let last = line.saturating_add(CONTEXT_LINES);
    split_lines(&text)
        .enumerate()
        .map(|(i, t)| (u32::try_from(i + 1).unwrap_or(u32::MAX), t))
        .filter(|(n, _)| (first..=last).contains(n))
        .map(|(n, t)| ContextLine { line: n, text: t.to_owned(), rule: n == line })
        .collect()
}

/// Splits at LF, CR LF and a lone CR.
fn split_lines(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = Some(text);
    std::iter::from_fn(move || {
        let r = rest?;
        match r.find(['\n', '\r']) {
            Some(i) => {
                let skip = if r[i..].starts_with("\r\n") { 2 } else { 1 };
                rest = Some(&r[i + skip..]).filter(|s| !s.is_empty());
                Some(&r[..i])
            }
            None => {
                rest = None;
                Some(r)
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_most_restrictive_reading_decides_and_the_rule_is_shown_in_context() {
        let body =
            b"# top\nUser-agent: ExampleBot\nDisallow: /private\n\nUser-agent: *\nAllow: /\n";
        let token = ProductToken::new("ExampleBot").unwrap();
        let what = InForce::File("x".to_owned());
        let r = replay(&what, Some(body), Some(&token), "/public/..%2fprivate/x", false);
        assert!(!r.decision.allowed);
        assert_eq!(r.decision.reading, "decoded");
        assert_eq!(r.decision.line, Some(3));
        assert_eq!(r.decision.rule.as_deref(), Some("disallow: /private"));
        assert_eq!(r.decision.group.as_deref(), Some("ExampleBot (line 2)"));
        assert_eq!(r.readings.len(), 2);
        let lines: Vec<_> = r.context.iter().map(|c| (c.line, c.rule)).collect();
        assert_eq!(lines, [(1, false), (2, false), (3, true), (4, false), (5, false), (6, false)]);
        let other = replay(&what, Some(body), None, "/private/x", false);
        assert!(other.decision.allowed, "the `*` group allows it");
    }

    #[test]
    fn no_file_decides_by_its_consequence() {
        assert!(!replay(&InForce::DisallowAll, None, None, "/x", false).decision.allowed);
        assert!(replay(&InForce::AllowAll, None, None, "/x", false).decision.allowed);
    }

    #[test]
    fn lines_split_as_the_parser_reads_them() {
        let got: Vec<_> = split_lines("a\r\nb\rc\nd").collect();
        assert_eq!(got, ["a", "b", "c", "d"]);
    }
}
