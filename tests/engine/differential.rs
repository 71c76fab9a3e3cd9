//! Differential test against two crates.io implementations: `texting_robots` 0.2 and `robotstxt`
//! 0.3 (a port of an old revision of Google's C++ parser). Neither is the truth: the spec README
//! decides, then Google's behaviour.
//!
//! Every disagreement must be explained by a known, named difference. A difference is
//! *explained* only when it is demonstrated, not merely suspected:
//!
//! * a [`Fix::Rewrite`] rewrites the case (robots.txt body and/or URL) so that the known cause is
//!   gone while the meaning for robots-proxy stays the same; if both engines agree on the
//!   rewritten case, the cause was that difference;
//! * a [`Fix::Judge`] checks a precise condition on the case (for example that the other
//!   engine's own pattern matcher contradicts a reference matcher on a pattern of the file).
//!
//! Each explanation used is counted and printed (`cargo test --test main engine::differential --
//! --nocapture`); any disagreement left unexplained fails the test and is listed.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};

use robots_proxy::robots::normalize::{normalize_path_for_matching_into, normalize_pattern};
use robots_proxy::robots::{ProductToken, RobotsTxt, MIN_SIZE_LIMIT};

use super::util::{fixtures, glob_matches, token, Rng};

/// One question asked of all three engines.
#[derive(Clone, Debug)]
struct Case {
    body: Vec<u8>,
    /// A product token.
    agent: String,
    /// An absolute URL as the `url` crate serialises it (so already percent-encoded the way a
    /// crawler sends it).
    url: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Other {
    TextingRobots,
    Robotstxt,
}

/// What an engine answered: a verdict or a failure.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Answer {
    Allowed(bool),
    Failed(String),
}

fn url_path(url: &str) -> String {
    let parsed = url::Url::parse(url).expect("test URLs are absolute");
    match parsed.query() {
        Some(q) => format!("{}?{q}", parsed.path()),
        None => parsed.path().to_owned(),
    }
}

/// The decision `robots-proxy check` gives: the URL's path as written (check::path_of_url),
/// matched by the engine.
fn ours(case: &Case) -> bool {
    let robots = RobotsTxt::parse(&case.body);
    let path = robots_proxy::check::path_of_url(&case.url).expect("test URLs are absolute");
    robots.decide(Some(&token(&case.agent)), &path).is_allowed()
}

fn other(engine: Other, case: &Case) -> Answer {
    match engine {
        Other::TextingRobots => match texting_robots::Robot::new(&case.agent, &case.body) {
            Ok(robot) => Answer::Allowed(robot.allowed(&case.url)),
            Err(e) => Answer::Failed(format!("texting_robots: {e:#}")),
        },
        Other::Robotstxt => {
            let body = String::from_utf8_lossy(&case.body).into_owned();
            let run = || {
                robotstxt::DefaultMatcher::default().one_agent_allowed_by_robots(
                    &body,
                    &case.agent,
                    &case.url,
                )
            };
            match catch_unwind(AssertUnwindSafe(run)) {
                Ok(allowed) => Answer::Allowed(allowed),
                Err(_) => Answer::Failed("robotstxt panicked".to_owned()),
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Rewriting robots.txt bodies line by line
// ---------------------------------------------------------------------------------------------

/// Splits a body into (line, terminator) pairs; CRLF, CR or LF end a line.
fn split_lines(body: &[u8]) -> Vec<(&[u8], &[u8])> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < body.len() {
        if body[i] == b'\r' || body[i] == b'\n' {
            let end =
                if body[i] == b'\r' && body.get(i + 1) == Some(&b'\n') { i + 2 } else { i + 1 };
            out.push((&body[start..i], &body[i..end]));
            start = end;
            i = end;
        } else {
            i += 1;
        }
    }
    if start < body.len() {
        out.push((&body[start..], &b""[..]));
    }
    out
}

/// Rewrites the lines for which `f` returns a replacement; `None` if no line changed.
fn map_lines(body: &[u8], mut f: impl FnMut(&[u8]) -> Option<Vec<u8>>) -> Option<Vec<u8>> {
    let mut changed = false;
    let mut out = Vec::with_capacity(body.len());
    for (line, end) in split_lines(body) {
        match f(line) {
            Some(new) if new != line => {
                changed = true;
                out.extend_from_slice(&new);
            }
            _ => out.extend_from_slice(line),
        }
        out.extend_from_slice(end);
    }
    changed.then_some(out)
}

/// The kinds of line that matter for grouping, recognised the way Google's parser does (prefix
/// of the key, case-insensitive, common misspellings).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Key {
    UserAgent,
    Allow,
    Disallow,
    CrawlDelay,
    /// `Content-Usage` / `Content-Signal`: group rules for robots-proxy (AI usage preferences).
    Usage,
    Other,
}

/// Splits a line into (key kind, value) the way Google's parser does; `None` for a line that is
/// blank or a comment.
fn key_value(line: &[u8]) -> Option<(Key, &[u8], usize)> {
    // A (partial) BOM can only start the first line; it is not part of the key.
    let bom = line.iter().zip(b"\xEF\xBB\xBF").take_while(|(a, b)| a == b).count();
    let text = &line[bom..];
    let text = match text.iter().position(|&b| b == b'#') {
        Some(h) => &text[..h],
        None => text,
    };
    let text = text.trim_ascii();
    if text.is_empty() {
        return None;
    }
    let (key, value) = match text.iter().position(|&b| b == b':') {
        Some(c) => (text[..c].trim_ascii(), text[c + 1..].trim_ascii()),
        None => {
            let sp = text.iter().position(|&b| b == b' ' || b == b'\t')?;
            (&text[..sp], text[sp..].trim_ascii())
        }
    };
    let k = key.to_ascii_lowercase();
    let starts = |names: &[&str]| names.iter().any(|n| k.starts_with(n.as_bytes()));
    let kind = if starts(&["user-agent", "useragent", "user agent"]) {
        Key::UserAgent
    } else if starts(&["allow"]) {
        Key::Allow
    } else if starts(&["disallow", "dissallow", "dissalow", "disalow", "diasllow", "disallaw"]) {
        Key::Disallow
    } else if starts(&["crawl-delay", "crawl delay", "crawldelay"]) {
        Key::CrawlDelay
    } else if starts(&["content-usage", "content-signal"]) {
        Key::Usage
    } else {
        Key::Other
    };
    let value_at = value.as_ptr() as usize - line.as_ptr() as usize;
    Some((kind, value, value_at))
}

/// Replaces the value of a rule line, keeping its key.
fn with_value(line: &[u8], value_at: usize, value_len: usize, new: &[u8]) -> Vec<u8> {
    [&line[..value_at], new, &line[value_at + value_len..]].concat()
}

fn is_rule(k: Key) -> bool {
    matches!(k, Key::Allow | Key::Disallow)
}

/// A rule that matches no path the tests generate: stands in for a rule that must go without
/// changing the grouping (a rule line stays a rule line).
const NEVER: &[u8] = b"Disallow: /~never~";

// ---------------------------------------------------------------------------------------------
// The known differences
// ---------------------------------------------------------------------------------------------

enum Fix {
    /// Rewrites the case; `None` when the cause is absent.
    Rewrite(fn(&Case) -> Option<Case>),
    /// True when the cause is demonstrably present.
    Judge(fn(&Case) -> bool),
}

struct Known {
    engine: Other,
    name: &'static str,
    why: &'static str,
    fix: Fix,
}

const KNOWN: &[Known] = &[
    Known {
        engine: Other::Robotstxt,
        name: "bom-not-skipped",
        why:
            "robotstxt 0.3 compares chars with the BOM bytes, so a leading (partial) BOM is never \
              skipped and spoils the first line; RFC 9309 and Google skip it",
        fix: Fix::Rewrite(fix_bom),
    },
    Known {
        engine: Other::Robotstxt,
        name: "other-lines-end-a-group",
        why: "robotstxt 0.3 (an old revision of Google's parser) ends a group at sitemap, \
              crawl-delay and unknown lines; spec README and Google today: they do not",
        fix: Fix::Rewrite(fix_other_lines),
    },
    Known {
        engine: Other::Robotstxt,
        name: "wildcard-positions",
        why: "robotstxt 0.3's matcher loses positions when several could match \
              (`/*ab` vs `/aab`): the engines agree once the wildcard rules on which its own \
              matcher contradicts the reference matcher for this URL are taken out",
        fix: Fix::Rewrite(fix_wildcard_bug),
    },
    Known {
        engine: Other::Robotstxt,
        name: "non-utf8-body",
        why: "robotstxt takes &str: invalid UTF-8 bytes become U+FFFD (%EF%BF%BD) before \
              matching; we percent-encode the raw octets",
        fix: Fix::Rewrite(fix_non_utf8),
    },
    Known {
        engine: Other::Robotstxt,
        name: "unicode-whitespace-trimmed",
        why: "robotstxt trims values with str::trim (Unicode whitespace such as U+00A0); Google \
              and we trim ASCII whitespace only",
        fix: Fix::Rewrite(fix_unicode_space),
    },
    Known {
        engine: Other::Robotstxt,
        name: "panics",
        why: "robotstxt 0.3 can panic (long lines with multi-byte UTF-8); caught with catch_unwind",
        fix: Fix::Judge(judge_robotstxt_panics),
    },
    Known {
        engine: Other::Robotstxt,
        name: "robots-txt-always-allowed",
        why: "Google's library leaves `/robots.txt` to its caller; RFC 9309 §2.2.2: it is \
              implicitly allowed, and we say so",
        fix: Fix::Judge(judge_robots_txt_path),
    },
    Known {
        engine: Other::TextingRobots,
        name: "user-agent-value-not-token",
        why: "texting_robots compares the whole user-agent value (`FooBot/1.0`, `Foo Bar`, \
              `* x`); Google and the spec README compare its product token",
        fix: Fix::Rewrite(fix_user_agent_values),
    },
    Known {
        engine: Other::TextingRobots,
        name: "empty-disallow-is-allow-all",
        why: "texting_robots reads an empty `Disallow:` as `Allow: /`; spec README: ignored",
        fix: Fix::Rewrite(fix_empty_disallow),
    },
    Known {
        engine: Other::TextingRobots,
        name: "crawl-delay-ends-user-agent-list",
        why: "texting_robots ends a run of user-agent lines at a crawl-delay line; spec README: \
              crawl-delay does not end a group",
        fix: Fix::Rewrite(fix_crawl_delay),
    },
    Known {
        engine: Other::TextingRobots,
        name: "dollar-mid-pattern",
        why: "texting_robots makes every `$` a regex end anchor; Google and we: `$` is literal \
              except at the end of a pattern",
        fix: Fix::Rewrite(fix_mid_dollar),
    },
    Known {
        engine: Other::TextingRobots,
        name: "no-index-html-rule",
        why: "texting_robots lacks Google's rule that allowing `/d/index.html` allows `/d/`",
        fix: Fix::Rewrite(fix_index_html),
    },
    Known {
        engine: Other::TextingRobots,
        name: "rules-without-user-agent",
        why: "texting_robots applies the rules of a file with no user-agent line to everyone; \
              RFC 9309 and the spec README ignore rules outside groups",
        fix: Fix::Judge(judge_no_groups),
    },
    Known {
        engine: Other::TextingRobots,
        name: "rejected-file",
        why: "texting_robots refuses some files outright (a pattern beyond its regex size limit)",
        fix: Fix::Judge(judge_texting_fails),
    },
    Known {
        engine: Other::TextingRobots,
        name: "percent-encoding",
        why: "robots-proxy compares in canonical form (spec README): %XX of unreserved characters \
              decoded, hex upper-cased, a lone % read as %25, other octets encoded, a URL's `*` \
              and `$` compared as %2A and %24 (RFC 9309 §2.2.3); texting_robots compares \
              escapes as written",
        fix: Fix::Rewrite(fix_percent_encoding),
    },
    Known {
        engine: Other::Robotstxt,
        name: "percent-encoding",
        why: "robots-proxy compares in canonical form (spec README): %XX of unreserved characters \
              decoded, hex upper-cased in URLs too, a lone % read as %25 (robotstxt drops it and \
              the next two characters), other octets such as `{` or `|` encoded, a URL's `*` \
              and `$` compared as %2A and %24 (RFC 9309 §2.2.3); Google compares escapes as \
              written",
        fix: Fix::Rewrite(fix_percent_encoding),
    },
    Known {
        engine: Other::TextingRobots,
        name: "size-limit",
        why: "robots-proxy reads the first 500 KiB only (RFC 9309 §2.5); the crates read all",
        fix: Fix::Rewrite(fix_size_limit),
    },
    Known {
        engine: Other::Robotstxt,
        name: "size-limit",
        why: "robots-proxy reads the first 500 KiB only (RFC 9309 §2.5); the crates read all",
        fix: Fix::Rewrite(fix_size_limit),
    },
];

fn with_body(case: &Case, body: Option<Vec<u8>>) -> Option<Case> {
    body.map(|body| Case { body, ..case.clone() })
}

fn fix_bom(case: &Case) -> Option<Case> {
    let n = case.body.iter().zip(b"\xEF\xBB\xBF").take_while(|(a, b)| a == b).count();
    (n > 0).then(|| Case { body: case.body[n..].to_vec(), ..case.clone() })
}

fn fix_other_lines(case: &Case) -> Option<Case> {
    with_body(
        case,
        map_lines(&case.body, |line| match key_value(line) {
            Some((Key::UserAgent | Key::Allow | Key::Disallow | Key::Usage, _, _)) | None => None,
            Some(_) => Some(Vec::new()),
        }),
    )
}

fn fix_crawl_delay(case: &Case) -> Option<Case> {
    with_body(
        case,
        map_lines(&case.body, |line| match key_value(line) {
            Some((Key::CrawlDelay, _, _)) => Some(Vec::new()),
            _ => None,
        }),
    )
}

fn fix_non_utf8(case: &Case) -> Option<Case> {
    match std::str::from_utf8(&case.body) {
        Ok(_) => None,
        Err(_) => Some(Case {
            body: String::from_utf8_lossy(&case.body).into_owned().into_bytes(),
            ..case.clone()
        }),
    }
}

fn fix_unicode_space(case: &Case) -> Option<Case> {
    let text = String::from_utf8_lossy(&case.body);
    let cleaned: String = text.chars().filter(|c| c.is_ascii() || !c.is_whitespace()).collect();
    (cleaned.len() != text.len()).then(|| Case { body: cleaned.into_bytes(), ..case.clone() })
}

fn fix_user_agent_values(case: &Case) -> Option<Case> {
    with_body(
        case,
        map_lines(&case.body, |line| {
            let (Key::UserAgent, value, at) = key_value(line)? else { return None };
            let new: Vec<u8> = if value.first() == Some(&b'*') {
                b"*".to_vec()
            } else {
                value
                    .iter()
                    .copied()
                    .take_while(|b| b.is_ascii_alphabetic() || *b == b'_' || *b == b'-')
                    .collect()
            };
            Some(with_value(line, at, value.len(), &new))
        }),
    )
}

fn fix_empty_disallow(case: &Case) -> Option<Case> {
    with_body(
        case,
        map_lines(&case.body, |line| match key_value(line) {
            Some((Key::Disallow, b"", _)) => Some(NEVER.to_vec()),
            _ => None,
        }),
    )
}

fn fix_mid_dollar(case: &Case) -> Option<Case> {
    with_body(
        case,
        map_lines(&case.body, |line| match key_value(line) {
            Some((k, v, _))
                if is_rule(k) && v.split_last().is_some_and(|(_, r)| r.contains(&b'$')) =>
            {
                Some(NEVER.to_vec())
            }
            _ => None,
        }),
    )
}

fn fix_index_html(case: &Case) -> Option<Case> {
    with_body(
        case,
        map_lines(&case.body, |line| {
            let (Key::Allow, v, _) = key_value(line)? else { return None };
            let slash = v.iter().rposition(|&b| b == b'/')?;
            if !v[slash..].starts_with(b"/index.htm") {
                return None;
            }
            // Keep the line and add the directory rule on a line of its own.
            Some([line, b"\nAllow: ", &v[..=slash], b"$"].concat())
        }),
    )
}

fn fix_percent_encoding(case: &Case) -> Option<Case> {
    let body = map_lines(&case.body, |line| match key_value(line) {
        Some((k, v, at)) if is_rule(k) && !v.is_empty() => {
            Some(with_value(line, at, v.len(), normalize_pattern(v).as_bytes()))
        }
        _ => None,
    });
    let path = url_path(&case.url);
    let mut canonical = Vec::new();
    normalize_path_for_matching_into(path.as_bytes(), &mut canonical);
    let canonical = String::from_utf8(canonical).expect("canonical form is ASCII");
    let url =
        if canonical != path { Some(format!("https://example.com{canonical}")) } else { None };
    if body.is_none() && url.is_none() {
        return None;
    }
    Some(Case {
        body: body.unwrap_or_else(|| case.body.clone()),
        url: url.unwrap_or_else(|| case.url.clone()),
        agent: case.agent.clone(),
    })
}

fn fix_size_limit(case: &Case) -> Option<Case> {
    if case.body.len() <= MIN_SIZE_LIMIT {
        return None;
    }
    let parsed = RobotsTxt::parse(&case.body).parsed_bytes();
    Some(Case { body: case.body[..parsed].to_vec(), ..case.clone() })
}

/// Replaces (with [`NEVER`]) every wildcard rule on which robotstxt's own pattern matcher
/// contradicts the reference matcher for this URL.
fn fix_wildcard_bug(case: &Case) -> Option<Case> {
    use robotstxt::matcher::{LongestMatchRobotsMatchStrategy, RobotsMatchStrategy};
    let path = robotstxt::get_path_params_query(&case.url).into_owned();
    with_body(
        case,
        map_lines(&case.body, |line| match key_value(line) {
            Some((k, v, _)) if is_rule(k) && v.contains(&b'*') => {
                let pattern = robotstxt::parser::escape_pattern(&String::from_utf8_lossy(v));
                let theirs =
                    catch_unwind(|| LongestMatchRobotsMatchStrategy::matches(&path, &pattern));
                let wrong =
                    theirs.map_or(true, |m| m != glob_matches(pattern.as_bytes(), path.as_bytes()));
                wrong.then(|| NEVER.to_vec())
            }
            _ => None,
        }),
    )
}

fn judge_robots_txt_path(case: &Case) -> bool {
    url_path(&case.url).split('?').next() == Some("/robots.txt")
}

fn judge_robotstxt_panics(case: &Case) -> bool {
    matches!(other(Other::Robotstxt, case), Answer::Failed(_))
}

fn judge_texting_fails(case: &Case) -> bool {
    matches!(other(Other::TextingRobots, case), Answer::Failed(_))
}

fn judge_no_groups(case: &Case) -> bool {
    RobotsTxt::parse(&case.body).groups().is_empty()
}

/// How a disagreement was explained: the names of the known differences that account for it.
fn explain(engine: Other, case: &Case) -> Option<Vec<&'static str>> {
    let known: Vec<&Known> = KNOWN.iter().filter(|k| k.engine == engine).collect();
    let agree = |c: &Case| other(engine, c) == Answer::Allowed(ours(c));
    // Judges first: they look at the case as it is.
    for k in &known {
        if let Fix::Judge(judge) = k.fix {
            if judge(case) {
                return Some(vec![k.name]);
            }
        }
    }
    // One rewrite at a time.
    for k in &known {
        if let Fix::Rewrite(fix) = k.fix {
            if let Some(fixed) = fix(case) {
                if agree(&fixed) {
                    return Some(vec![k.name]);
                }
            }
        }
    }
    // All applicable rewrites together, to a fixed point (one rewrite can uncover another
    // cause: a URL put in canonical form can expose robotstxt's wildcard bug), then the judges
    // on the result.
    let mut fixed = case.clone();
    let mut names = Vec::new();
    for _round in 0..3 {
        let mut changed = false;
        for k in &known {
            if let Fix::Rewrite(fix) = k.fix {
                if let Some(f) = fix(&fixed) {
                    fixed = f;
                    changed = true;
                    if !names.contains(&k.name) {
                        names.push(k.name);
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }
    if names.is_empty() {
        return None;
    }
    if agree(&fixed) {
        return Some(names);
    }
    for k in &known {
        if let Fix::Judge(judge) = k.fix {
            if judge(&fixed) {
                names.push(k.name);
                return Some(names);
            }
        }
    }
    None
}

#[derive(Default)]
struct Tally {
    cases: usize,
    agreed: BTreeMap<Other, usize>,
    explained: BTreeMap<(Other, String), usize>,
    unexplained: Vec<String>,
}

impl Tally {
    fn run(&mut self, case: &Case, label: &str) {
        let texting = other(Other::TextingRobots, case);
        self.run_with(case, label, ours(case), texting);
    }

    /// `run` with our answer and texting_robots' computed by the caller, which can compile a
    /// file once for many URLs.
    fn run_with(&mut self, case: &Case, label: &str, mine: bool, texting: Answer) {
        self.cases += 1;
        for engine in [Other::TextingRobots, Other::Robotstxt] {
            let theirs = match engine {
                Other::TextingRobots => texting.clone(),
                Other::Robotstxt => other(engine, case),
            };
            if theirs == Answer::Allowed(mine) {
                *self.agreed.entry(engine).or_default() += 1;
                continue;
            }
            match explain(engine, case) {
                Some(names) => {
                    *self.explained.entry((engine, names.join(" + "))).or_default() += 1;
                }
                None => {
                    if self.unexplained.len() < 20 {
                        self.unexplained.push(format!(
                            "{label}: {engine:?} says {theirs:?}, we say allowed={mine}; agent {} \
                             url {}\n{}",
                            case.agent,
                            case.url,
                            String::from_utf8_lossy(&case.body[..case.body.len().min(600)])
                        ));
                    } else {
                        self.unexplained.push(String::new());
                    }
                }
            }
        }
    }

    fn report(&self, what: &str) {
        println!("differential ({what}): {} cases", self.cases);
        for (engine, n) in &self.agreed {
            println!("  {engine:?} agrees: {n}");
        }
        for ((engine, names), n) in &self.explained {
            println!("  {engine:?} differs, explained by {names}: {n}");
        }
        for k in KNOWN {
            if self.explained.keys().any(|(e, n)| *e == k.engine && n.contains(k.name)) {
                println!("    {:?} {}: {}", k.engine, k.name, k.why);
            }
        }
        assert!(
            self.unexplained.is_empty(),
            "{} unexplained disagreements:\n{}",
            self.unexplained.len(),
            self.unexplained
                .iter()
                .filter(|s| !s.is_empty())
                .cloned()
                .collect::<Vec<_>>()
                .join("\n---\n")
        );
        // Most cases must agree, or the test compares nothing.
        for engine in [Other::TextingRobots, Other::Robotstxt] {
            let agreed = self.agreed.get(&engine).copied().unwrap_or(0);
            assert!(
                agreed * 10 >= self.cases * 7,
                "{engine:?} agrees on only {agreed}/{}",
                self.cases
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Generated cases
// ---------------------------------------------------------------------------------------------

const AGENT_VALUES: &[&str] =
    &["*", "FooBot", "foobot", "FooBot/1.0", "Foo Bar", "BarBot", "* ", "*bot", "barbot*"];
const AGENTS: &[&str] = &["FooBot", "BarBot", "Foo", "QuxBot"];
const PIECES: &[&str] = &[
    "/",
    "/a",
    "b",
    "ab",
    "/fish",
    ".php",
    "?q=",
    "&x",
    "-",
    "~",
    "%41",
    "%61",
    "%2F",
    "%2f",
    "%e3%83%84",
    "%zz",
    "é",
    "index.html",
    "{",
    "|",
    "%7E",
];

fn gen_piece_string(rng: &mut Rng, max: usize) -> String {
    (0..rng.below(max + 1)).map(|_| *rng.pick(PIECES)).collect()
}

fn gen_pattern(rng: &mut Rng) -> String {
    let mut p = String::from(if rng.chance(1, 12) { "*" } else { "/" });
    for _ in 0..rng.below(4) {
        p.push_str(&gen_piece_string(rng, 2));
        if rng.chance(1, 3) {
            p.push('*');
        }
    }
    if rng.chance(1, 30) {
        p.push('$');
        p.push_str(&gen_piece_string(rng, 1));
    }
    if rng.chance(1, 5) {
        p.push('$');
    }
    p
}

fn gen_body(rng: &mut Rng) -> Vec<u8> {
    let ends: &[&str] = &["\n", "\r\n", "\r"];
    let file_end = *rng.pick(ends);
    let mixed = rng.chance(1, 8);
    let mut lines: Vec<String> = Vec::new();
    if rng.chance(1, 10) {
        lines.push("Disallow: /early".into());
    }
    if rng.chance(1, 10) {
        lines.push("# a comment".into());
    }
    for _ in 0..1 + rng.below(3) {
        for _ in 0..1 + rng.below(2) {
            let key = *rng.pick(&["User-agent", "user-agent", "User-Agent", "useragent"]);
            lines.push(format!("{key}: {}", rng.pick(AGENT_VALUES)));
            if rng.chance(1, 15) {
                lines.push(
                    rng.pick(&["Crawl-delay: 5", "Sitemap: https://e.test/s.xml", "Foo: bar"])
                        .to_string(),
                );
            }
        }
        for _ in 0..rng.below(6) {
            let key =
                *rng.pick(&["Allow", "Disallow", "Disallow", "disallow", "DISALLOW", "Disalow"]);
            let value = if rng.chance(1, 12) { String::new() } else { gen_pattern(rng) };
            let sep = *rng.pick(&[": ", ":", " : ", ": "]);
            let comment = if rng.chance(1, 10) { " # note" } else { "" };
            lines.push(format!("{key}{sep}{value}{comment}"));
            if rng.chance(1, 20) {
                lines.push(
                    rng.pick(&[
                        "Crawl-delay: 1",
                        "Sitemap: https://e.test/s.xml",
                        "Noindex: /x",
                        "",
                    ])
                    .to_string(),
                );
            }
        }
        if rng.chance(1, 3) {
            lines.push(String::new());
        }
    }
    let mut body = Vec::new();
    if rng.chance(1, 20) {
        body.extend_from_slice(b"\xEF\xBB\xBF");
    }
    for l in lines {
        body.extend_from_slice(l.as_bytes());
        body.extend_from_slice(if mixed { rng.pick(ends) } else { file_end }.as_bytes());
    }
    body
}

fn gen_url(rng: &mut Rng) -> String {
    let mut path = gen_piece_string(rng, 6);
    if rng.chance(1, 10) {
        const OPERATORS: &[&str] = &["*", "$", "%2A", "%24", "$b"];
        path.push_str(OPERATORS[rng.below(OPERATORS.len())]);
    }
    let raw = format!("https://example.com/{path}");
    url::Url::parse(&raw).map(|u| u.to_string()).unwrap_or_else(|_| "https://example.com/".into())
}

#[test]
fn generated_cases() {
    let mut rng = Rng::new(9309);
    let mut tally = Tally::default();
    for i in 0..1500 {
        let body = gen_body(&mut rng);
        for _ in 0..4 {
            let case = Case {
                body: body.clone(),
                agent: rng.pick(AGENTS).to_string(),
                url: gen_url(&mut rng),
            };
            tally.run(&case, &format!("generated #{i}"));
        }
    }
    tally.report("generated");
}

// ---------------------------------------------------------------------------------------------
// Real files
// ---------------------------------------------------------------------------------------------

/// URLs worth asking about a real file: each rule's own path (wildcards filled in, anchors
/// dropped), with a few variations, plus generic ones.
fn urls_for(robots: &RobotsTxt, limit: usize, rng: &mut Rng) -> Vec<String> {
    let mut paths: Vec<String> = [
        "/",
        "/index.html",
        "/search?q=a",
        "/admin/",
        "/wp-admin/admin-ajax.php",
        "/a/b/c.php",
        "/robots.txt",
        "/%7Euser/",
        "/caf%C3%A9",
        "/?s=1",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut from_rules = Vec::new();
    for g in robots.groups() {
        for r in robots.rules_of(g) {
            let p = r.pattern().trim_end_matches('$').replace('*', "x");
            let p = if p.starts_with('/') { p } else { format!("/{p}") };
            from_rules.push(p.clone());
            from_rules.push(format!("{p}sub/page.html?x=1"));
            if p.len() > 2 {
                from_rules.push(p[..p.len() - 1].to_owned());
            }
        }
    }
    while paths.len() < limit && !from_rules.is_empty() {
        let i = rng.below(from_rules.len());
        paths.push(from_rules.swap_remove(i));
    }
    paths
        .into_iter()
        .filter_map(|p| url::Url::parse(&format!("https://example.com{p}")).ok())
        .map(|u| u.to_string())
        .collect()
}

fn agents_for(robots: &RobotsTxt, limit: usize) -> Vec<String> {
    let mut out = vec!["QuxBot".to_owned()];
    for g in robots.groups() {
        for ua in g.user_agents() {
            let name: String = ua
                .value()
                .chars()
                .take_while(|c| c.is_ascii_alphabetic() || *c == '_' || *c == '-')
                .collect();
            if ProductToken::new(&name).is_ok() && !out.contains(&name) && out.len() < limit {
                out.push(name);
            }
        }
    }
    out
}

fn run_files(files: Vec<(String, Vec<u8>)>, what: &str) {
    let mut rng = Rng::new(42);
    let mut tally = Tally::default();
    for (name, body) in files {
        let robots = RobotsTxt::parse(&body);
        // robotstxt re-parses the whole file for every question: fewer questions for big files.
        let (n_urls, n_agents) = if body.len() > 20_000 { (12, 2) } else { (40, 4) };
        let urls = urls_for(&robots, n_urls, &mut rng);
        for agent in agents_for(&robots, n_agents) {
            let texting = texting_robots::Robot::new(&agent, &body).map_err(|e| format!("{e:#}"));
            for url in &urls {
                let case = Case { body: body.clone(), agent: agent.clone(), url: url.clone() };
                let mine = robots.decide(Some(&token(&agent)), &url_path(url)).is_allowed();
                let theirs = match &texting {
                    Ok(robot) => Answer::Allowed(robot.allowed(url)),
                    Err(e) => Answer::Failed(format!("texting_robots: {e}")),
                };
                tally.run_with(&case, &name, mine, theirs);
            }
        }
    }
    tally.report(what);
}

#[test]
fn real_files() {
    run_files(fixtures(), "fixtures");
}

/// The whole corpus, when asked for: `ROBOTS_CORPUS=../shared/corpus/robots cargo test --test
/// main corpus_files -- --ignored --nocapture`.
#[test]
#[ignore = "slow; needs ROBOTS_CORPUS"]
fn corpus_files() {
    let Some(dir) = std::env::var_os("ROBOTS_CORPUS") else { return };
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .expect("ROBOTS_CORPUS is a directory")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .filter_map(|p| {
            Some((p.file_name()?.to_string_lossy().into_owned(), std::fs::read(&p).ok()?))
        })
        .collect();
    files.sort();
    run_files(files, "corpus");
}

#[test]
fn the_known_differences_are_real() {
    // Each known difference shows on a minimal example, so the list cannot go stale silently.
    let case = |body: &str, agent: &str, path: &str| Case {
        body: body.as_bytes().to_vec(),
        agent: agent.into(),
        url: format!("https://example.com{path}"),
    };
    let differs = |engine: Other, c: &Case| other(engine, c) != Answer::Allowed(ours(c));
    let r = Other::Robotstxt;
    let t = Other::TextingRobots;
    assert!(differs(r, &case("\u{FEFF}User-agent: FooBot\nDisallow: /x\n", "FooBot", "/x")));
    assert!(differs(
        r,
        &case(
            "User-agent: a\nSitemap: https://e.test/s\nUser-agent: FooBot\nDisallow: /\n",
            "a",
            "/x"
        )
    ));
    assert!(differs(r, &case("User-agent: *\nDisallow: /*ab\n", "FooBot", "/aab")));
    assert!(differs(r, &case("User-agent: *\nDisallow: /*/admin/\n", "FooBot", "/a/b/admin/x")));
    assert!(differs(t, &case("User-agent: FooBot/1.0\nDisallow: /\n", "FooBot", "/x")));
    assert!(differs(t, &case("User-agent: *\nDisallow:\nDisallow: /\n", "FooBot", "/x")));
    assert!(differs(t, &case("User-agent: *\nDisallow: /a$b\n", "FooBot", "/a$b")));
    assert!(differs(
        t,
        &case("User-agent: a\nCrawl-delay: 1\nUser-agent: FooBot\nDisallow: /\n", "a", "/x")
    ));
    assert!(differs(
        t,
        &case("User-agent: *\nDisallow: /\nAllow: /d/index.html\n", "FooBot", "/d/")
    ));
    assert!(differs(t, &case("Disallow: /\n", "FooBot", "/x")));
    for e in [r, t] {
        assert!(differs(e, &case("User-agent: *\nDisallow: /%62az\n", "FooBot", "/baz")));
    }
    // And each is explained by its own name.
    let c = case("User-agent: *\nDisallow: /*ab\n", "FooBot", "/aab");
    assert_eq!(explain(r, &c), Some(vec!["wildcard-positions"]));
    let c = case("User-agent: FooBot/1.0\nDisallow: /\n", "FooBot", "/x");
    assert_eq!(explain(t, &c), Some(vec!["user-agent-value-not-token"]));
}
