//! `[[exceptions]]`: recorded, expiring exceptions to robots.txt, as the file writes them, and
//! their validation. Nothing is ever inferred: every exception names its tokens or users, and
//! an allow names where the permission is written, who granted it and when it ends.

use robots_proxy_units::Problems;
use std::collections::BTreeMap;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use robots_proxy_engine::usage::Category;
use robots_proxy_engine::ProductToken;

/// What an exception does.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Effect {
    /// Lets through what robots.txt disallows, for its scope, until `expires`.
    Allow,
    /// Refuses, even where robots.txt allows.
    Disallow,
}

impl Effect {
    /// The name used in the configuration.
    pub fn name(self) -> &'static str {
        match self {
            Effect::Allow => "allow",
            Effect::Disallow => "disallow",
        }
    }
}

/// One `[[exceptions]]` entry.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ExceptionEntry {
    /// A name for it, unique in the file: audit records and refusals carry it.
    pub id: String,
    /// Exact hosts (`news.example`, `news.example:8080`) or `*.suffix` (any subdomain).
    pub authorities: Vec<String>,
    /// The product tokens it applies to (never `*`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tokens: Vec<String>,
    /// The authenticated proxy users it applies to (`access.users_file`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub users: Vec<String>,
    /// robots.txt-style path patterns (`*`, final `$`); default `["/"]`, every path.
    #[serde(default = "every_path")]
    pub paths: Vec<String>,
    /// `allow` or `disallow`.
    pub effect: Effect,
    /// Where the permission (or the prohibition) is written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// Who granted it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub granted_by: Option<String>,
    /// When it stops applying, RFC 3339 (`2027-06-30T00:00:00Z`); required for `allow`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<String>,
    /// Usage preference categories it lifts for the same scope (`train-ai`), allow only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub usage: Vec<String>,
}

fn every_path() -> Vec<String> {
    vec!["/".to_owned()]
}

/// Parses an RFC 3339 time as `expires` takes it (`2027-06-30T00:00:00Z`, any offset).
pub fn parse_expires(text: &str) -> Result<SystemTime, String> {
    time::OffsetDateTime::parse(text.trim(), &time::format_description::well_known::Rfc3339)
        .map(SystemTime::from)
        .map_err(|_| format!("{text:?} is not an RFC 3339 time such as \"2027-06-30T00:00:00Z\""))
}

/// Whether a path pattern can match some path: paths start with `/`, so a pattern must start
/// with `/` or `*`.
fn pattern_matches_something(p: &str) -> bool {
    p.starts_with('/') || p.starts_with('*')
}

/// `[[exceptions]]` as written, checked: the entries, or every problem with them, each key
/// naming the entry and the field (`exceptions[2].expires`, counted from 1). The list's
/// `TryFrom`, as the sections have theirs (a list of entries has no type of its own).
///
/// An expiry already past is not a problem: the file that ran yesterday must start and reload
/// today, so an expired entry is loaded inert (it decides nothing, `/api/exceptions` shows it
/// inactive, `/metrics` counts it) and `config check` warns about it.
pub fn checked(entries: Vec<ExceptionEntry>) -> Result<Vec<ExceptionEntry>, Problems> {
    let problems: Problems = problems(&entries).into_iter().collect();
    problems.or_build(|| entries)
}

fn problems(entries: &[ExceptionEntry]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut ids: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, e) in entries.iter().enumerate() {
        let n = i + 1;
        let mut bad = |field: &str, message: String| {
            out.push((format!("exceptions[{n}].{field}"), message));
        };
        if e.id.trim().is_empty() {
            bad("id", "must not be empty".into());
        }
        if let Some(first) = ids.insert(&e.id, n) {
            bad("id", format!("{:?} is also the id of exceptions[{first}]", e.id));
        }
        if e.authorities.is_empty() {
            bad("authorities", "must name at least one host (or *.suffix)".into());
        }
        for a in &e.authorities {
            if let Err(why) = super::Site::parse(a) {
                bad("authorities", format!("{why} (such as \"*.news.example\")"));
            }
        }
        if e.tokens.is_empty() && e.users.is_empty() {
            bad("tokens", "name the tokens or users it applies to (tokens or users)".into());
        }
        for t in &e.tokens {
            if t.trim() == "*" {
                bad("tokens", "\"*\" is not allowed: an exception names its crawlers".into());
            } else if let Err(err) = ProductToken::new(t) {
                bad("tokens", format!("{t:?}: {err}"));
            }
        }
        for u in &e.users {
            if u.trim().is_empty() || u.trim() == "*" {
                bad("users", format!("{u:?} is not a user name"));
            }
        }
        if e.paths.is_empty() {
            bad("paths", "must list at least one pattern (default [\"/\"])".into());
        }
        for p in &e.paths {
            if !pattern_matches_something(p) {
                bad("paths", format!("{p:?} matches no path: a pattern starts with / or *"));
            } else if p.contains(['#', '\n', '\r']) {
                bad("paths", format!("{p:?}: a robots.txt pattern holds no # and no line break"));
            } else if p.chars().any(char::is_control) {
                // A NUL ends a robots.txt line (Google's parser, and ours), so `/ok\0/only` would
                // act as `/ok`: an allow would cover more than it says.
                bad("paths", format!("{p:?}: a pattern holds no control character (NUL, tab…)"));
            }
        }
        let allow = e.effect == Effect::Allow;
        for (field, value) in [("reference", &e.reference), ("granted_by", &e.granted_by)] {
            match value {
                Some(v) if !v.trim().is_empty() => {}
                Some(_) => bad(field, "must not be empty".into()),
                None => {
                    bad(field, "is required: where the decision is written, and by whom".into())
                }
            }
        }
        match &e.expires {
            None if allow => bad("expires", "is required for an allow exception".into()),
            None => {}
            Some(text) => {
                if let Err(m) = parse_expires(text) {
                    bad("expires", m);
                }
            }
        }
        for label in &e.usage {
            if !allow {
                bad("usage", "only an allow exception lifts usage preferences".into());
            }
            if Category::from_label(label).is_none() {
                bad("usage", format!("unknown category {label:?} (train-ai, ai-use, search)"));
            }
        }
    }
    out
}

/// What `config check` says about the exceptions: one line per entry saying what it covers,
/// and a note for every allow that a disallow overlaps (the disallow wins).
pub fn describe(entries: &[ExceptionEntry]) -> Vec<String> {
    let mut lines = Vec::new();
    for e in entries {
        let mut who: Vec<String> = e.tokens.iter().map(|t| format!("token {t}")).collect();
        who.extend(e.users.iter().map(|u| format!("user {u}")));
        let mut line = format!(
            "exception {}: {} {} on {} paths {} ({}",
            e.id,
            e.effect.name(),
            who.join(", "),
            sites(e).iter().map(ToString::to_string).collect::<Vec<_>>().join(", "),
            e.paths.join(" "),
            e.reference.as_deref().unwrap_or("no reference"),
        );
        if let Some(x) = &e.expires {
            line.push_str(&format!(", until {x}"));
        }
        if !e.usage.is_empty() {
            line.push_str(&format!(", lifts usage {}", e.usage.join(", ")));
        }
        line.push(')');
        lines.push(line);
    }
    for a in entries.iter().filter(|e| e.effect == Effect::Allow) {
        for d in entries.iter().filter(|e| e.effect == Effect::Disallow) {
            if overlaps(a, d) {
                lines.push(format!(
                    "note: exceptions {} (allow) and {} (disallow) overlap: the disallow wins \
                     where both apply",
                    a.id, d.id
                ));
            }
        }
    }
    lines
}

/// Whether two exceptions may apply to one request: a shared authority pattern (or one
/// covering the other), a shared token or user. Paths are not compared: patterns overlap too
/// easily to tell, so a shared site and crawler is enough to warn.
fn overlaps(a: &ExceptionEntry, b: &ExceptionEntry) -> bool {
    let lower = |v: &[String]| v.iter().map(|s| s.to_ascii_lowercase()).collect::<Vec<_>>();
    let (at, bt) = (lower(&a.tokens), lower(&b.tokens));
    // A token-scoped entry and a user-scoped one can apply to one request too: a user tied to
    // the token, or naming it.
    let crossed = (!a.tokens.is_empty() && !b.users.is_empty())
        || (!a.users.is_empty() && !b.tokens.is_empty());
    let who =
        at.iter().any(|t| bt.contains(t)) || a.users.iter().any(|u| b.users.contains(u)) || crossed;
    // Compared normalised, as requests meet them: `BÜCHER.example` is `xn--bcher-kva.example`,
    // and an entry without a port covers every port of one with.
    let (sa, sb) = (sites(a), sites(b));
    let site = sa.iter().any(|x| sb.iter().any(|y| x.overlaps(y)));
    who && site
}

/// The entry's authorities, normalised (those that cannot be are left out: `problems` names
/// them).
fn sites(e: &ExceptionEntry) -> Vec<super::Site> {
    e.authorities.iter().filter_map(|a| super::Site::parse(a).ok()).collect()
}
