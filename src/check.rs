//! `robots-proxy check`: test a robots.txt against URLs offline.
//!
//! Two forms:
//!
//! * one robots.txt file, one agent, URLs on the command line: one line per URL, exit status 0
//!   when every URL is allowed, 1 when any is disallowed, 2 on a usage or input error;
//! * `--jsonl`: JSON lines on standard input, one answer line per input line, in order, for
//!   auditing large URL lists.

use std::collections::HashMap;
use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

use crate::output::terminal;
use crate::policy::{decide, Claim, Question, Readings, Rules, View};
use crate::robots::usage::UsagePreferences;
use crate::robots::usage::{Category, Preference};
use crate::robots::{ProductToken, RobotsTxt, Verdict};

/// What can go wrong in `check`, each naming the problem.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckError {
    /// The robots.txt file could not be read.
    #[error("cannot read robots.txt file {path}: {source}")]
    ReadRobots {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A URL could not be parsed as an absolute URL.
    #[error("{url:?} is not an absolute URL: {reason}")]
    BadUrl {
        /// The URL as given.
        url: String,
        /// Why.
        reason: String,
    },
    /// Writing the answer failed.
    #[error("cannot write output: {0}")]
    Output(#[from] io::Error),
}

/// The outcome of a `check` run, as an exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// Every URL was allowed (exit 0).
    AllAllowed,
    /// At least one URL was disallowed (exit 1).
    SomeDisallowed,
}

/// The path and query of an absolute URL, as matched against robots.txt rules: as written,
/// octet for octet (Google's reading), with only the fragment dropped and an empty path made
/// `/`. `//a` stays `//a` and `/a/../b` stays `/a/../b`; `check --as-proxy` adds the readings
/// an origin server may apply ([`crate::policy::Readings`]).
pub fn path_of_url(url: &str) -> Result<String, CheckError> {
    let url = url.trim();
    let parsed = url::Url::parse(url)
        .map_err(|e| CheckError::BadUrl { url: url.to_owned(), reason: e.to_string() })?;
    if parsed.cannot_be_a_base() || !parsed.has_host() {
        return Err(CheckError::BadUrl {
            url: url.to_owned(),
            reason: "it has no host and path".to_owned(),
        });
    }
    // What follows the authority, as written: the URL parser would resolve dot-segments and
    // re-encode, which a crawler's request does not do.
    let after_scheme = url.find("://").map_or(url, |i| &url[i + 3..]);
    let start = after_scheme.find(['/', '?', '#']).unwrap_or(after_scheme.len());
    Ok(Readings::of(&after_scheme[start..]).into_as_sent())
}

/// Reads a robots.txt file.
pub fn read_robots(path: &Path) -> Result<RobotsTxt, CheckError> {
    use std::io::Read as _;
    let error = |source| CheckError::ReadRobots { path: path.to_owned(), source };
    // Only what is parsed is read (a 200 MB file used to be read whole).
    let mut body = Vec::new();
    std::fs::File::open(path)
        // One byte more, so the parser knows the file goes on (and drops a cut line).
        .and_then(|f| f.take(PARSED as u64 + 1).read_to_end(&mut body))
        .map_err(error)?;
    Ok(RobotsTxt::parse(&body))
}

/// How much of a robots.txt is parsed, as the proxy does (RFC 9309 §2.5).
const PARSED: usize = crate::robots::MIN_SIZE_LIMIT;

/// A note for a robots.txt file longer than what is parsed, if `path` is one: rules past the
/// limit are ignored, by `check` as by the proxy.
pub fn size_note(path: &Path) -> Option<String> {
    let len = std::fs::metadata(path).ok()?.len();
    (len > PARSED as u64).then(|| {
        format!(
            "{} is {len} bytes; only its first {} KiB are parsed, as the proxy does (RFC 9309 \
             §2.5): rules past that are ignored",
            path.display(),
            PARSED / 1024
        )
    })
}

/// Checks `urls` against `robots` for `agent` and writes one line per URL.
///
/// Every URL is parsed before anything is written, so a bad URL is an input error with no
/// partial answer.
pub fn check_urls(
    robots: &RobotsTxt,
    agent: Option<&ProductToken>,
    urls: &[String],
    explain: bool,
    out: &mut dyn Write,
) -> Result<Outcome, CheckError> {
    check_urls_for(robots, agent, &[], urls, explain, out)
}

/// Like [`check_urls`], also deciding as the proxy would for a crawler that fetches for
/// `purposes` (`check --purpose`): an allowed URL whose AI usage preferences disallow one of
/// them (`Content-Usage` / `Content-Signal`, see [`crate::robots::usage`]) is disallowed.
/// Every URL's known usage preferences are shown either way.
pub fn check_urls_for(
    robots: &RobotsTxt,
    agent: Option<&ProductToken>,
    purposes: &[Category],
    urls: &[String],
    explain: bool,
    out: &mut dyn Write,
) -> Result<Outcome, CheckError> {
    check_urls_as(robots, agent, purposes, urls, explain, false, out)
}

/// Like [`check_urls_for`]; with `as_proxy` (`check --as-proxy`) each URL is decided as the
/// proxy decides a request: on the path as written and on every reading an origin server may
/// apply to it (`shared/spec/README.md`, "What the proxy decides on"). A URL is disallowed when
/// any reading is, and every reading that differs is listed with its own verdict.
pub fn check_urls_as(
    robots: &RobotsTxt,
    agent: Option<&ProductToken>,
    purposes: &[Category],
    urls: &[String],
    explain: bool,
    as_proxy: bool,
    out: &mut dyn Write,
) -> Result<Outcome, CheckError> {
    let paths = urls.iter().map(|u| path_of_url(u)).collect::<Result<Vec<_>, _>>()?;
    let mut outcome = Outcome::AllAllowed;
    let now = std::time::SystemTime::now();
    if explain {
        let token = agent.map_or("(none: only `*` groups apply)".to_owned(), |t| t.to_string());
        writeln!(out, "product token: {token}")?;
        let groups = robots.groups_for(agent);
        if groups.is_empty() {
            writeln!(out, "groups applied: none (no group for this token and no `*` group)")?;
        }
        for g in groups {
            let agents: Vec<String> = g
                .user_agents()
                .iter()
                .map(|u| format!("line {}: {}", u.line(), terminal(u.value())))
                .collect();
            writeln!(out, "group applied: user-agent {}", agents.join(", "))?;
            if let Some(d) = g.crawl_delay() {
                writeln!(out, "  crawl-delay: {}s (line {})", d.seconds(), d.line())?;
            }
        }
        for s in robots.sitemaps() {
            writeln!(out, "sitemap: {} (line {})", terminal(s.url()), s.line())?;
        }
    }
    for (url, path) in urls.iter().zip(&paths) {
        // The proxy's one decision: every reading with `--as-proxy`, else the path as written
        // (Google's reading).
        let readings = if as_proxy { Readings::of(path) } else { Readings::exactly(path) };
        let view = View::offline(Rules::Parsed(robots), false);
        let question = Question { claim: Claim::asserted(agent, None), readings: &readings, now };
        let decision = decide(view, question);
        let each = decision.each();
        let d = decision.explain();
        let mut word = match d.verdict {
            Verdict::Allow => "allowed",
            Verdict::Disallow => {
                outcome = Outcome::SomeDisallowed;
                "disallowed"
            }
        };
        let mut why = d.brief();
        if decision.read_otherwise() {
            why = format!("{why}; read as {} by the {} reading", d.read_path, d.reading);
        }
        let mut prefs = UsagePreferences::default();
        for e in &each {
            prefs.combine(&robots.usage(agent, &e.read_path));
        }
        if d.is_allowed() {
            let refused = purposes.iter().find_map(|&c| {
                let stated = prefs.get(c);
                (stated.preference == Preference::Disallow).then_some((c, stated.line))
            });
            if let Some((category, line)) = refused {
                outcome = Outcome::SomeDisallowed;
                word = "disallowed";
                let at = line.map_or(String::new(), |l| format!(" (line {l})"));
                why = format!("usage preference {}=n{at} refuses purpose {}", category, category);
            }
        }
        writeln!(out, "{word:<10} {}  ({})", terminal(url), terminal(&why))?;
        for e in each.iter().skip(1) {
            let verdict = if e.is_allowed() { "allowed" } else { "disallowed" };
            writeln!(
                out,
                "  reading {}: {}  {verdict} ({}; {})",
                e.reading,
                terminal(&e.read_path),
                terminal(&e.brief()),
                e.reading.description()
            )?;
        }
        if !prefs.is_unknown() {
            let stated: Vec<String> = Category::ALL
                .iter()
                .filter(|&&c| prefs.get(c).preference != Preference::Unknown)
                .map(|&c| {
                    let s = prefs.get(c);
                    let at = s.line.map_or(String::new(), |l| format!(" (line {l})"));
                    format!("{c}={}{at}", s.preference.as_str())
                })
                .collect();
            writeln!(out, "  usage: {}", stated.join(", "))?;
        }
        if explain {
            let matching = robots.matching_rules(agent, path);
            if matching.is_empty() {
                writeln!(out, "  matching rules: none")?;
            }
            for rule in matching {
                writeln!(
                    out,
                    "  matches line {}: {} ({} octets)",
                    rule.line(),
                    rule,
                    rule.pattern().len()
                )?;
            }
        }
    }
    Ok(outcome)
}

/// One input line of `check --jsonl`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonlRequest {
    robots: Option<String>,
    robots_file: Option<PathBuf>,
    agent: Option<String>,
    /// Purposes for this line (`["train-ai"]`), instead of `--purpose`.
    purposes: Option<Vec<String>>,
    url: String,
}

/// What the command line gives every line of `check --jsonl`: `--agent` for lines without an
/// `"agent"`, `--purpose` for lines without `"purposes"`.
#[derive(Debug, Clone, Default)]
pub struct JsonlDefaults {
    /// `--agent`.
    pub agent: Option<String>,
    /// `--purpose` (repeatable).
    pub purposes: Vec<Category>,
}

/// What a `check --jsonl` run answered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JsonlSummary {
    /// Lines read.
    pub answered: u64,
    /// Lines answered with `{"error": …}`.
    pub errors: u64,
    /// Lines answered `"allowed": false`.
    pub disallowed: u64,
}

impl JsonlSummary {
    /// The exit status, as for URLs on the command line: 2 when any line was an input error, else
    /// 1 when any URL was disallowed, else 0.
    pub fn exit_status(&self) -> u8 {
        if self.errors > 0 {
            2
        } else if self.disallowed > 0 {
            1
        } else {
            0
        }
    }
}

/// Keeps compiled robots.txt bodies between lines, since audits repeat the same few files.
#[derive(Default)]
struct RobotsMemo {
    bodies: HashMap<String, Arc<RobotsTxt>>,
    files: HashMap<PathBuf, Arc<RobotsTxt>>,
}

impl RobotsMemo {
    const MAX_ENTRIES: usize = 4096;

    fn body(&mut self, body: String) -> Arc<RobotsTxt> {
        if let Some(r) = self.bodies.get(&body) {
            return r.clone();
        }
        if self.bodies.len() >= Self::MAX_ENTRIES {
            self.bodies.clear();
        }
        let r = Arc::new(RobotsTxt::parse(body.as_bytes()));
        self.bodies.insert(body, r.clone());
        r
    }

    fn file(&mut self, path: PathBuf) -> Result<Arc<RobotsTxt>, CheckError> {
        if let Some(r) = self.files.get(&path) {
            return Ok(r.clone());
        }
        if self.files.len() >= Self::MAX_ENTRIES {
            self.files.clear();
        }
        let r = Arc::new(read_robots(&path)?);
        self.files.insert(path, r.clone());
        Ok(r)
    }
}

/// Runs `check --jsonl`: reads requests from `input`, writes one answer per line to `out`.
/// `defaults` fills what a line leaves out (`--agent`, `--purpose`).
pub fn check_jsonl(
    input: &mut dyn BufRead,
    out: &mut dyn Write,
    defaults: &JsonlDefaults,
) -> io::Result<JsonlSummary> {
    let mut memo = RobotsMemo::default();
    let mut line = Vec::new();
    let mut summary = JsonlSummary::default();
    let mut tokens: HashMap<String, Option<ProductToken>> = HashMap::new();
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line)? == 0 {
            break;
        }
        if line.last() == Some(&b'\n') {
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
        }
        summary.answered += 1;
        match answer_one(&line, &mut memo, &mut tokens, defaults) {
            Ok(answer) => {
                let allowed = answer.refused_for.is_none() && answer.allowed;
                if !allowed {
                    summary.disallowed += 1;
                }
                let (line_no, pattern) = match answer.rule {
                    Some((n, p)) => (n.to_string(), serde_json::to_string(&p)?),
                    None => ("null".to_owned(), "null".to_owned()),
                };
                write!(out, "{{\"allowed\":{allowed},\"line\":{line_no},\"rule\":{pattern}")?;
                if let Some((category, at)) = answer.refused_for {
                    let at = at.map_or("null".to_owned(), |l| l.to_string());
                    write!(out, ",\"purpose\":\"{}\",\"usage_line\":{at}", category.label())?;
                }
                writeln!(out, "}}")?;
            }
            Err(message) => {
                summary.errors += 1;
                writeln!(out, "{{\"error\":{}}}", serde_json::to_string(&message)?)?;
            }
        }
    }
    out.flush()?;
    Ok(summary)
}

/// The answer to one line: the robots.txt verdict and its rule, and the purpose whose usage
/// preference refuses an allowed URL (with the preference's line), if any.
struct Answer {
    allowed: bool,
    rule: Option<(u32, String)>,
    refused_for: Option<(Category, Option<u32>)>,
}

fn answer_one(
    line: &[u8],
    memo: &mut RobotsMemo,
    tokens: &mut HashMap<String, Option<ProductToken>>,
    defaults: &JsonlDefaults,
) -> Result<Answer, String> {
    let req: JsonlRequest = serde_json::from_slice(line).map_err(|e| {
        if line.iter().all(u8::is_ascii_whitespace) {
            "empty line: expected a JSON object".to_owned()
        } else {
            format!("invalid request: {e}")
        }
    })?;
    let robots = match (req.robots, req.robots_file) {
        (Some(body), None) => memo.body(body),
        (None, Some(path)) => memo.file(path).map_err(|e| e.to_string())?,
        (Some(_), Some(_)) => {
            return Err("give either \"robots\" or \"robots_file\", not both".into())
        }
        (None, None) => return Err("missing field \"robots\" (or \"robots_file\")".into()),
    };
    let agent_text = req
        .agent
        .or_else(|| defaults.agent.clone())
        .ok_or("missing field \"agent\" (or give --agent)")?;
    let purposes = match req.purposes {
        None => defaults.purposes.clone(),
        Some(labels) => labels
            .iter()
            .map(|l| {
                Category::from_label(l).ok_or_else(|| {
                    format!(
                        "unknown purpose {l:?} in \"purposes\" (known: train-ai, ai-use, search)"
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()?,
    };
    let agent = tokens
        .entry(agent_text)
        .or_insert_with_key(|a| ProductToken::from_token_or_user_agent(a))
        .clone();
    let path = path_of_url(&req.url).map_err(|e| e.to_string())?;
    let d = robots.decide(agent.as_ref(), &path);
    let refused_for = if d.is_allowed() && !purposes.is_empty() {
        let prefs = robots.usage(agent.as_ref(), &path);
        purposes.iter().find_map(|&c| {
            let stated = prefs.get(c);
            (stated.preference == Preference::Disallow).then_some((c, stated.line))
        })
    } else {
        None
    };
    Ok(Answer {
        allowed: d.is_allowed(),
        rule: d.rule().map(|r| (r.line(), r.pattern().to_owned())),
        refused_for,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonl_answers_every_line_in_order() {
        let input = concat!(
            r#"{"robots":"User-agent: *\nDisallow: /private\n","agent":"ExampleBot","url":"https://example.com/private/x"}"#,
            "\n",
            r#"{"robots":"User-agent: *\nDisallow: /private\n","agent":"curl/8.5.0","url":"https://example.com/ok"}"#,
            "\n",
            "not json\n",
            r#"{"robots":"","agent":"x","url":"not a url"}"#,
            "\n",
            r#"{"robots_file":"/nonexistent/robots.txt","agent":"x","url":"https://a.test/"}"#,
            "\n",
        );
        let mut out = Vec::new();
        let summary =
            check_jsonl(&mut input.as_bytes(), &mut out, &JsonlDefaults::default()).unwrap();
        assert_eq!(summary, JsonlSummary { answered: 5, errors: 3, disallowed: 1 });
        assert_eq!(summary.exit_status(), 2);
        let lines: Vec<serde_json::Value> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[0], serde_json::json!({"allowed": false, "line": 2, "rule": "/private"}));
        assert_eq!(lines[1], serde_json::json!({"allowed": true, "line": null, "rule": null}));
        assert!(lines[2]["error"].as_str().unwrap().contains("invalid request"));
        assert!(lines[3]["error"].as_str().unwrap().contains("not an absolute URL"));
        assert!(lines[4]["error"].as_str().unwrap().contains("/nonexistent/robots.txt"));
    }

    #[test]
    fn url_paths_are_taken_as_written() {
        assert_eq!(path_of_url("http://a.test").unwrap(), "/");
        assert_eq!(path_of_url("http://a.test?q").unwrap(), "/?q");
        assert_eq!(path_of_url("http://a.test/a/../b?x=1#f").unwrap(), "/a/../b?x=1");
        assert_eq!(path_of_url("http://a.test//a").unwrap(), "//a");
        assert_eq!(path_of_url("http://u@a.test:80/%70rivate").unwrap(), "/%70rivate");
        assert!(path_of_url("mailto:x@y").is_err());
        assert!(path_of_url("/relative").is_err());
    }
}
