//! The other machine-readable opt-outs a response or a site can carry (issue 20, part 3):
//!
//! * `X-Robots-Tag: noai` / `noimageai` / `noml` (not standardised, widely used by image
//!   sites), unscoped or scoped to one crawler (`X-Robots-Tag: examplebot: noai`);
//! * the W3C TDM Reservation Protocol (TDMRep, Community Group final report of 10 May 2024):
//!   `/.well-known/tdmrep.json` rules, the `tdm-reservation` / `tdm-policy` response headers,
//!   and `<meta name="tdm-reservation">` in an HTML head.
//!
//! Each of them counts as `train-ai=n` where it applies ([`super::usage`]). Parsing is strict
//! where being lenient would allow by error: a malformed `tdmrep.json` is refused as a whole
//! with one reason, and a `tdm-reservation` value other than `0` or `1` is unset.

use std::borrow::Cow;

use serde_json::Value;

use super::normalize;
use super::pattern::{PatternReading, ReadPattern};

/// The `X-Robots-Tag` directives that opt out of AI uses.
pub(crate) const NOAI_DIRECTIVES: &[&str] = &["noai", "noimageai", "noml"];

/// `X-Robots-Tag` directives that take a value after a colon (so the word before the colon is
/// not a user-agent scope).
const VALUED_DIRECTIVES: &[&str] =
    &["unavailable_after", "max-snippet", "max-image-preview", "max-video-preview"];

/// Whether an `X-Robots-Tag` value (or `<meta name="robots">` content) says `noai`,
/// `noimageai` or `noml` for the crawler with product token `token`: unscoped directives apply
/// to every crawler, directives after `name:` only to the crawler whose token is `name`
/// (case-insensitive), up to the next scope.
pub fn x_robots_noai(value: &str, token: Option<&str>) -> bool {
    let mut scope: Option<&str> = None;
    for piece in value.split(',') {
        let mut directive = piece.trim();
        if let Some((head, rest)) = directive.split_once(':') {
            let head = head.trim();
            let is_scope = !head.is_empty()
                && head.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                && !VALUED_DIRECTIVES.iter().any(|d| d.eq_ignore_ascii_case(head));
            if is_scope {
                scope = Some(head);
                directive = rest.trim();
            }
        }
        let applies = match scope {
            None => true,
            Some(s) => token.is_some_and(|t| t.eq_ignore_ascii_case(s)),
        };
        if applies && NOAI_DIRECTIVES.iter().any(|d| d.eq_ignore_ascii_case(directive)) {
            return true;
        }
    }
    false
}

/// An opt-out field the proxy reads on a response (header or `<meta>`), by the name the audit
/// record and the log give it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OptOutField {
    /// The `X-Robots-Tag` response header.
    XRobotsTag,
    /// The `Content-Usage` response header (draft-ietf-aipref-attach).
    ContentUsage,
    /// The `tdm-reservation` response header (TDMRep).
    TdmReservation,
    /// The `tdm-policy` response header (TDMRep).
    TdmPolicy,
    /// `<meta name="robots">` (or the crawler's own name) in the HTML head.
    MetaRobots,
    /// `<meta name="tdm-reservation">` in the HTML head.
    MetaTdmReservation,
    /// `<meta name="tdm-policy">` in the HTML head.
    MetaTdmPolicy,
}

impl OptOutField {
    /// The name written in `robots.usage.unparsed` and in the log.
    pub fn name(self) -> &'static str {
        match self {
            OptOutField::XRobotsTag => "X-Robots-Tag",
            OptOutField::ContentUsage => "Content-Usage",
            OptOutField::TdmReservation => "tdm-reservation",
            OptOutField::TdmPolicy => "tdm-policy",
            OptOutField::MetaRobots => "meta robots",
            OptOutField::MetaTdmReservation => "meta tdm-reservation",
            OptOutField::MetaTdmPolicy => "meta tdm-policy",
        }
    }
}

/// The opt-out fields of one response that could not be parsed as a whole (issue 42, M3):
/// what could be read of them was read ([`field_text`]), and the record says they were there.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Unparsed(Vec<OptOutField>);

impl Unparsed {
    /// Notes that `field` did not parse as a whole (once per field).
    pub fn note(&mut self, field: OptOutField) {
        if !self.0.contains(&field) {
            self.0.push(field);
        }
    }

    /// Adds every field `other` noted.
    pub fn extend(&mut self, other: &Unparsed) {
        for &field in &other.0 {
            self.note(field);
        }
    }

    /// Whether every field parsed (or none was there).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The fields' names, comma-separated in the order they were noted, for the audit record;
    /// `None` when every field parsed.
    pub fn names(&self) -> Option<String> {
        (!self.0.is_empty()).then(|| self.0.iter().map(|f| f.name()).collect::<Vec<_>>().join(","))
    }
}

/// The one reader of an opt-out field's bytes, for every opt-out the proxy reads (the
/// `X-Robots-Tag`, `Content-Usage`, `tdm-reservation` and `tdm-policy` headers, the `<meta>`
/// contents): the text as far as it can be read, a byte that is not UTF-8 (obs-text, which
/// `HeaderValue::to_str` refuses) becoming U+FFFD, so that one such byte never hides the
/// directives beside it. A field with a byte outside printable ASCII (tab and space allowed)
/// is noted in `unparsed`: it is read, and recorded as not parsed as a whole.
pub fn field_text<'a>(
    field: OptOutField,
    bytes: &'a [u8],
    unparsed: &mut Unparsed,
) -> Cow<'a, str> {
    if !bytes.iter().all(|&b| b == b'\t' || (b' '..=b'~').contains(&b)) {
        unparsed.note(field);
    }
    String::from_utf8_lossy(bytes)
}

/// Reads the `tdm-reservation` values of a response's header lines (`values`, their bytes)
/// together: `Some(true)` if any line (or any member of a comma list) is `1`, else
/// `Some(false)` if any is `0`, else unset. A member that is neither is noted in `unparsed`
/// (TDMRep reads it as unset): it never lifts a reservation another member makes.
pub fn tdm_reservation_lines<'a>(
    values: impl Iterator<Item = &'a [u8]>,
    unparsed: &mut Unparsed,
) -> Option<bool> {
    let field = OptOutField::TdmReservation;
    let mut reserved = None;
    for value in values {
        let text = field_text(field, value, unparsed);
        for member in text.split(',') {
            let read = tdm_reservation(member);
            if read.is_none() {
                unparsed.note(field);
            }
            // `None < Some(false) < Some(true)`: the reserving reading wins.
            reserved = reserved.max(read);
        }
    }
    reserved
}

/// A TDMRep statement: whether TDM rights are reserved, and the policy URL.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TdmStatement {
    /// `Some(true)` for `1` (reserved), `Some(false)` for `0`, `None` when unset.
    pub reserved: Option<bool>,
    /// The `tdm-policy` URL, if given.
    pub policy: Option<String>,
}

/// Reads a `tdm-reservation` value: `1` reserves, `0` does not, anything else is unset.
pub(crate) fn tdm_reservation(value: &str) -> Option<bool> {
    match value.trim() {
        "1" => Some(true),
        "0" => Some(false),
        _ => None,
    }
}

/// Why a `tdmrep.json` was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TdmFileError {
    /// Not JSON at all.
    #[error("tdmrep.json is not JSON: {0}")]
    NotJson(String),
    /// JSON, but not an array of rule objects with the right types.
    #[error("tdmrep.json has the wrong shape: {0}")]
    Shape(String),
}

#[derive(Debug, Clone)]
struct TdmRule {
    /// The location, as a canonical pattern with its decoded reading.
    location: ReadPattern,
    statement: TdmStatement,
}

/// A parsed `/.well-known/tdmrep.json`: rules in file order; the first whose `location` matches
/// the path wins.
#[derive(Debug, Clone, Default)]
pub struct TdmFile {
    rules: Vec<TdmRule>,
}

impl TdmFile {
    /// The heap it holds, in bytes (the rules, their patterns and policy URLs): its weight in
    /// the `tdmrep.json` cache's memory bound.
    pub fn heap_bytes(&self) -> usize {
        let rules = self.rules.capacity() * std::mem::size_of::<TdmRule>();
        let each: usize = self
            .rules
            .iter()
            .map(|r| {
                r.location.heap_size() + r.statement.policy.as_ref().map_or(0, String::capacity)
            })
            .sum();
        rules + each
    }

    /// Parses the file. Any type error refuses the whole file (a file half understood could
    /// allow by error): an array of objects, each with a string `location`, an optional
    /// `tdm-reservation` number or string, and an optional string `tdm-policy`. A leading UTF-8
    /// byte-order mark is ignored (RFC 8259 §8.1 lets a parser ignore it, as robots.txt's is).
    /// A rule that states no reservation TDMRep defines (`tdm-reservation` missing, as TDMRep
    /// makes it mandatory, or neither `0` nor `1`) or whose `location` is empty is skipped:
    /// matched first, it would unreserve paths a later rule reserves.
    pub fn parse(body: &[u8]) -> Result<TdmFile, TdmFileError> {
        let body = body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(body);
        let value: Value =
            serde_json::from_slice(body).map_err(|e| TdmFileError::NotJson(e.to_string()))?;
        let Value::Array(items) = value else {
            return Err(TdmFileError::Shape("the top level is not an array".into()));
        };
        let mut rules = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let n = i + 1;
            let Value::Object(obj) = item else {
                return Err(TdmFileError::Shape(format!("rule {n} is not an object")));
            };
            let location = match obj.get("location") {
                Some(Value::String(s)) => s.as_str(),
                Some(_) => {
                    return Err(TdmFileError::Shape(format!("rule {n}: location is not a string")))
                }
                None => return Err(TdmFileError::Shape(format!("rule {n}: no location"))),
            };
            let reserved = match obj.get("tdm-reservation") {
                None | Some(Value::Null) => None,
                Some(Value::Number(x)) => tdm_reservation(&x.to_string()),
                Some(Value::String(s)) => tdm_reservation(s),
                Some(_) => {
                    return Err(TdmFileError::Shape(format!(
                        "rule {n}: tdm-reservation is not a number"
                    )))
                }
            };
            let policy = match obj.get("tdm-policy") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s.clone()),
                Some(_) => {
                    return Err(TdmFileError::Shape(format!(
                        "rule {n}: tdm-policy is not a string"
                    )))
                }
            };
            // Skipped, not read as "not reserved": see above.
            if reserved.is_none() || location.is_empty() {
                continue;
            }
            // A location matches like a robots.txt path pattern (`*` and a final `$`).
            let location = if location.starts_with('/') || location.starts_with('*') {
                location.to_owned()
            } else {
                format!("/{location}")
            };
            let mut pattern = Vec::with_capacity(location.len() + 4);
            let priority = normalize::normalize_pattern_into(location.as_bytes(), &mut pattern);
            // ASCII by construction (see `normalize`).
            let pattern = String::from_utf8(pattern).unwrap_or_default();
            rules.push(TdmRule {
                location: ReadPattern::new(pattern, priority as u32),
                statement: TdmStatement { reserved, policy },
            });
        }
        Ok(TdmFile { rules })
    }

    /// The statement of the first rule whose location matches `path` (canonical form, as
    /// robots.txt rules are matched), if any.
    pub fn statement_for(&self, path: &[u8]) -> Option<&TdmStatement> {
        self.rules
            .iter()
            .find(|r| r.location.matches_as(path, PatternReading::AsWritten).is_some())
            .map(|r| &r.statement)
    }

    /// [`TdmFile::statement_for`] for one reading of the path (`crate::policy::readings`):
    /// the locations read as `reading` says, as `allow` / `disallow` patterns are
    /// ([`super::usage::PatternReading`]); `path` is in canonical form, and folded for the
    /// case-folded reading.
    pub fn statement_for_as(&self, path: &[u8], reading: PatternReading) -> Option<&TdmStatement> {
        self.rules
            .iter()
            .find(|r| r.location.matches_as(path, reading).is_some())
            .map(|r| &r.statement)
    }

    /// [`TdmFile::statement_for`] a path as sent (it is brought to the canonical form first).
    pub fn statement_for_sent(&self, sent: &str) -> Option<&TdmStatement> {
        let mut path = Vec::with_capacity(sent.len() + 8);
        normalize::normalize_path_for_matching_into(sent.as_bytes(), &mut path);
        self.statement_for(&path)
    }

    /// The statement that reserves TDM rights for every path of the site, if the file makes
    /// one: what can be applied where no path is seen (a tunnel). That is the first rule whose
    /// location matches every path (`/`, `*`, `/*`), when it reserves and so does every rule
    /// before it (an earlier rule that does not reserve leaves some paths unreserved).
    pub fn reserved_everywhere(&self) -> Option<&TdmStatement> {
        for rule in &self.rules {
            if rule.statement.reserved != Some(true) {
                return None;
            }
            let mut trimmed: &[u8] = rule.location.as_written().as_bytes();
            while let Some(rest) = trimmed.strip_suffix(b"*") {
                trimmed = rest;
            }
            let everything = !rule.location.shape().anchored && matches!(trimmed, b"" | b"/");
            if everything {
                return Some(&rule.statement);
            }
        }
        None
    }

    /// The number of rules.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether the file has no rules.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

/// The most bytes of an HTML response read for its `<meta>` elements (the prefix given to
/// [`html_meta`]): reading stops earlier at `</head>` or `<body`, or when the body ends.
pub const META_PREFIX_BYTES: usize = 16 * 1024;

/// What the `<meta>` elements of an HTML head say about TDM and AI uses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HtmlMeta {
    /// `<meta name="tdm-reservation" content="…">` (and `tdm-policy`), when the reservation is
    /// `0` or `1`.
    pub tdm: Option<TdmStatement>,
    /// Whether `<meta name="robots">` (or `<meta name="TOKEN">`) says `noai` / `noimageai` /
    /// `noml` for the crawler.
    pub noai: bool,
    /// The `<meta>` opt-outs whose content could not be parsed as a whole (read as far as it
    /// could be).
    pub unparsed: Unparsed,
}

/// Finds `needle` (ASCII, lower case) in `hay`, ignoring ASCII case.
fn find_ci(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w.eq_ignore_ascii_case(needle))
}

/// The value of attribute `name` in the inside of a tag (`name="…"`, `name='…'` or unquoted),
/// as its bytes.
fn attribute<'a>(tag: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let mut at = 0;
    while let Some(found) = find_ci(&tag[at..], name) {
        let start = at + found;
        at = start + name.len();
        let before_ok = start == 0 || tag[start - 1].is_ascii_whitespace();
        let mut i = at;
        while i < tag.len() && tag[i].is_ascii_whitespace() {
            i += 1;
        }
        if !before_ok || tag.get(i) != Some(&b'=') {
            continue;
        }
        i += 1;
        while i < tag.len() && tag[i].is_ascii_whitespace() {
            i += 1;
        }
        let value = match tag.get(i) {
            Some(&q @ (b'"' | b'\'')) => {
                let rest = &tag[i + 1..];
                let end = rest.iter().position(|&b| b == q).unwrap_or(rest.len());
                &rest[..end]
            }
            _ => {
                let rest = &tag[i..];
                let end = rest
                    .iter()
                    .position(|&b| b.is_ascii_whitespace() || b == b'/')
                    .unwrap_or(rest.len());
                &rest[..end]
            }
        };
        return Some(value);
    }
    None
}

/// Reads the `<meta>` elements of `prefix`, the start of an HTML document, up to `</head>` or
/// `<body` (what comes later is not the head). `token` is the crawler's product token, for
/// `<meta name="TOKEN" content="noai">`.
pub fn html_meta(prefix: &[u8], token: Option<&str>) -> HtmlMeta {
    let end = [find_ci(prefix, b"</head"), find_ci(prefix, b"<body")]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(prefix.len());
    let head = &prefix[..end];
    let mut out = HtmlMeta::default();
    let mut reserved = None;
    let mut policy = None;
    let mut at = 0;
    while let Some(found) = find_ci(&head[at..], b"<meta") {
        let start = at + found + 5;
        let Some(len) = head[start..].iter().position(|&b| b == b'>') else { break };
        let tag = &head[start..start + len];
        at = start + len;
        let (Some(name), Some(content)) = (attribute(tag, b"name"), attribute(tag, b"content"))
        else {
            continue;
        };
        let name = String::from_utf8_lossy(name);
        let name = name.trim();
        let mut read = |field| field_text(field, content, &mut out.unparsed).trim().to_owned();
        if name.eq_ignore_ascii_case("tdm-reservation") {
            let content = read(OptOutField::MetaTdmReservation);
            let value = tdm_reservation(&content);
            if value.is_none() {
                out.unparsed.note(OptOutField::MetaTdmReservation);
            }
            reserved = reserved.or(value);
        } else if name.eq_ignore_ascii_case("tdm-policy") {
            let content = read(OptOutField::MetaTdmPolicy);
            policy = policy.or(Some(content).filter(|c| !c.is_empty()));
        } else if name.eq_ignore_ascii_case("robots")
            || token.is_some_and(|t| t.eq_ignore_ascii_case(name))
        {
            out.noai |= x_robots_noai(&read(OptOutField::MetaRobots), None);
        }
    }
    if reserved.is_some() {
        out.tdm = Some(TdmStatement { reserved, policy });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_everywhere_needs_a_reserving_catch_all_with_nothing_unreserved_before() {
        let file = |json: &str| TdmFile::parse(json.as_bytes()).unwrap();
        let everywhere = |json: &str| file(json).reserved_everywhere().cloned();
        let all = r#"[{"location": "/", "tdm-reservation": 1, "tdm-policy": "https://p/t"}]"#;
        assert_eq!(everywhere(all).unwrap().policy.as_deref(), Some("https://p/t"));
        assert!(everywhere(r#"[{"location": "*", "tdm-reservation": 1}]"#).is_some());
        assert!(everywhere(r#"[{"location": "/*", "tdm-reservation": "1"}]"#).is_some());
        let reserving_first = r#"[{"location": "/a/", "tdm-reservation": 1}, {"location": "/", "tdm-reservation": 1}]"#;
        assert!(everywhere(reserving_first).is_some());
        // Some paths only, the root only, or something unreserved first: not every path.
        assert!(everywhere(r#"[{"location": "/a/", "tdm-reservation": 1}]"#).is_none());
        assert!(everywhere(r#"[{"location": "/$", "tdm-reservation": 1}]"#).is_none());
        let open_first = r#"[{"location": "/free/", "tdm-reservation": 0}, {"location": "/", "tdm-reservation": 1}]"#;
        assert!(everywhere(open_first).is_none());
        assert!(everywhere(r#"[{"location": "/", "tdm-reservation": 0}]"#).is_none());
        assert!(everywhere("[]").is_none());
    }

    #[test]
    fn noai_unscoped_and_scoped() {
        assert!(x_robots_noai("noai", None));
        assert!(x_robots_noai("noindex, NoImageAI", Some("AcmeTrainer")));
        assert!(x_robots_noai("noml", Some("x")));
        assert!(!x_robots_noai("noindex, nofollow", Some("AcmeTrainer")));
        assert!(x_robots_noai("acmetrainer: noai", Some("AcmeTrainer")));
        assert!(!x_robots_noai("otherbot: noai", Some("AcmeTrainer")));
        assert!(!x_robots_noai("otherbot: noai", None));
        // A scope lasts until the next one.
        assert!(x_robots_noai("otherbot: noindex, noai, acmetrainer: noai", Some("AcmeTrainer")));
        assert!(!x_robots_noai("acmetrainer: noindex, otherbot: noai", Some("AcmeTrainer")));
        // A valued directive is not a scope.
        assert!(x_robots_noai("unavailable_after: 2030-01-01, noai", Some("AcmeTrainer")));
        assert!(!x_robots_noai("noainoai", None));
    }

    #[test]
    fn meta_in_the_head_only() {
        let html = br#"<!doctype html><html><HEAD><title>x</title>
            <meta name="tdm-reservation" content="1">
            <META content='https://p.example/p' name='tdm-policy'/>
            <meta name=robots content="noindex, noai">
            </head><body><meta name="tdm-reservation" content="0"></body>"#;
        let m = html_meta(html, Some("AcmeTrainer"));
        assert_eq!(
            m.tdm,
            Some(TdmStatement { reserved: Some(true), policy: Some("https://p.example/p".into()) })
        );
        assert!(m.noai);
        let scoped = br#"<head><meta name="acmetrainer" content="noai"></head>"#;
        assert!(html_meta(scoped, Some("AcmeTrainer")).noai);
        assert!(!html_meta(scoped, Some("OtherBot")).noai);
        // After the head, or a bad value: nothing.
        assert_eq!(
            html_meta(br#"<body><meta name="tdm-reservation" content="1">"#, None).tdm,
            None
        );
        assert_eq!(html_meta(br#"<meta name="tdm-reservation" content="yes">"#, None).tdm, None);
        assert_eq!(html_meta(b"<meta name=", None), HtmlMeta::default());
    }

    #[test]
    fn reservation_values() {
        assert_eq!(tdm_reservation("1"), Some(true));
        assert_eq!(tdm_reservation(" 0 "), Some(false));
        assert_eq!(tdm_reservation("yes"), None);
        assert_eq!(tdm_reservation("2"), None);
        assert_eq!(tdm_reservation(""), None);
    }

    #[test]
    fn file_first_match_wins_with_patterns() {
        let f = TdmFile::parse(
            br#"[
              {"location": "/open/*.html$", "tdm-reservation": 0},
              {"location": "/open/", "tdm-reservation": 1, "tdm-policy": "https://p.example/policy"},
              {"location": "/", "tdm-reservation": 1},
              {"location": "/never", "tdm-reservation": 0}
            ]"#,
        )
        .unwrap();
        assert_eq!(f.len(), 4);
        assert_eq!(f.statement_for(b"/open/a.html").unwrap().reserved, Some(false));
        let s = f.statement_for(b"/open/a.html?x").unwrap();
        assert_eq!(s.reserved, Some(true), "$ anchors the end");
        assert_eq!(s.policy.as_deref(), Some("https://p.example/policy"));
        assert_eq!(f.statement_for(b"/never").unwrap().reserved, Some(true), "first wins");
        let none = TdmFile::parse(br#"[{"location": "/a/", "tdm-reservation": 1}]"#).unwrap();
        assert!(none.statement_for(b"/b").is_none());
        // A rule with a value other than 0 and 1 states no reservation TDMRep defines: it is
        // skipped (controls 9), so it cannot unreserve what a later rule reserves; strings "1"
        // are read too.
        let odd = TdmFile::parse(
            br#"[{"location": "/x", "tdm-reservation": 2}, {"location": "/", "tdm-reservation": "1"}]"#,
        )
        .unwrap();
        assert_eq!(odd.statement_for(b"/x").unwrap().reserved, Some(true));
        assert_eq!(odd.statement_for(b"/y").unwrap().reserved, Some(true));
    }

    #[test]
    fn malformed_files_are_refused_with_a_reason() {
        assert!(matches!(TdmFile::parse(b"<html>"), Err(TdmFileError::NotJson(_))));
        let shape = |b: &[u8]| match TdmFile::parse(b) {
            Err(TdmFileError::Shape(m)) => m,
            other => panic!("{other:?}"),
        };
        assert!(shape(br#"{"location": "/"}"#).contains("not an array"));
        assert!(shape(br#"[{"location": 1}]"#).contains("location is not a string"));
        assert!(shape(br#"[{"tdm-reservation": 1}]"#).contains("no location"));
        assert!(shape(br#"[{"location": "/", "tdm-reservation": [1]}]"#).contains("rule 1"));
        assert!(shape(br#"[{"location": "/", "tdm-policy": 5}]"#).contains("tdm-policy"));
        assert!(shape(br#"["/"]"#).contains("not an object"));
    }

    /// A scope names a crawler by letters, digits, `-` and `_` (a survivor of the engine's
    /// mutation run: no test scoped a name with `-` or `_`).
    #[test]
    fn scopes_may_name_crawlers_with_dashes_and_underscores() {
        assert!(x_robots_noai("acme-bot: noai", Some("Acme-Bot")));
        assert!(x_robots_noai("acme_bot: noimageai", Some("acme_bot")));
        assert!(!x_robots_noai("acme-bot: noai", Some("other")));
        assert!(!x_robots_noai("acme_bot: noai", None));
    }

    /// Fields that did not parse are named once each, in the order noted; none, no names.
    #[test]
    fn unparsed_fields_are_named_once_in_order() {
        let mut unparsed = Unparsed::default();
        assert_eq!(unparsed.names(), None);
        unparsed.note(OptOutField::TdmPolicy);
        unparsed.note(OptOutField::XRobotsTag);
        unparsed.note(OptOutField::TdmPolicy);
        assert!(!unparsed.is_empty());
        assert_eq!(unparsed.names().as_deref(), Some("tdm-policy,X-Robots-Tag"));
    }

    /// `tdm-reservation` header lines read together: a `1` anywhere reserves, else a `0`
    /// unreserves; a member that is neither is noted and lifts nothing.
    #[test]
    fn tdm_reservation_lines_read_together() {
        let read = |lines: &[&str]| {
            let mut unparsed = Unparsed::default();
            let r = tdm_reservation_lines(lines.iter().map(|l| l.as_bytes()), &mut unparsed);
            (r, unparsed.names())
        };
        assert_eq!(read(&["0", "x, 1"]), (Some(true), Some("tdm-reservation".to_owned())));
        assert_eq!(read(&["0"]), (Some(false), None));
        assert_eq!(read(&[]), (None, None));
        assert_eq!(read(&["maybe"]), (None, Some("tdm-reservation".to_owned())));
    }

    /// A file's weight counts its rules, their patterns and policies; a path no location
    /// matches has no statement, on any reading.
    #[test]
    fn tdm_files_weigh_their_rules_and_match_only_their_locations() {
        let file = TdmFile::parse(
            br#"[{"location": "/img/%3A*", "tdm-reservation": 1, "tdm-policy": "https://p.example/p"}]"#,
        )
        .unwrap();
        let plain =
            TdmFile::parse(br#"[{"location": "/img/*", "tdm-reservation": 1, "tdm-policy": "x"}]"#)
                .unwrap();
        let least = std::mem::size_of::<TdmRule>() + "/img/*".len() + "x".len();
        assert!(plain.heap_bytes() >= least, "{} < {least}", plain.heap_bytes());
        assert!(file.heap_bytes() > plain.heap_bytes());
        assert_eq!(TdmFile::parse(b"[]").unwrap().heap_bytes(), 0);
        for reading in [PatternReading::AsWritten, PatternReading::Decoded] {
            assert!(file.statement_for_as(b"/txt/x", reading).is_none());
        }
        assert!(file.statement_for_as(b"/img/%3Ax", PatternReading::AsWritten).is_some());
        assert!(file.statement_for_as(b"/img/:x", PatternReading::Decoded).is_some());
    }

    /// An attribute name that ends the tag has no value, and reading it does not run past the
    /// tag (a survivor of the engine's mutation run: `<=` there indexes past the end).
    #[test]
    fn an_attribute_name_at_the_end_of_a_tag_has_no_value() {
        assert_eq!(html_meta(b"<meta name=robots content>", None), HtmlMeta::default());
        assert_eq!(html_meta(b"<meta content=noai name >", None), HtmlMeta::default());
        assert!(html_meta(b"<meta name=robots content=noai>", None).noai);
    }

    /// Whitespace around an attribute's `=` is allowed (HTML), before and after it.
    #[test]
    fn attributes_may_have_whitespace_around_their_equals_sign() {
        assert!(html_meta(b"<meta name = \"robots\" content\t=\n'noai'>", None).noai);
        assert!(html_meta(b"<meta name =robots content= noai>", None).noai);
    }

    /// A path as sent is brought to the canonical form before the locations are matched: its
    /// percent-encoding of unreserved characters does not hide it.
    #[test]
    fn a_path_as_sent_is_matched_in_its_canonical_form() {
        let f = TdmFile::parse(br#"[{"location": "/open/", "tdm-reservation": 1}]"#).unwrap();
        assert_eq!(f.statement_for_sent("/open/a").unwrap().reserved, Some(true));
        assert_eq!(f.statement_for_sent("/%6Fpen/a").unwrap().reserved, Some(true));
        assert!(f.statement_for_sent("/closed").is_none());
    }

    /// An attribute is found by its whole name, not as the end of another (`data-name`), and
    /// is read where it starts the tag's inside too (a survivor of the engine's mutation run:
    /// `start != 0` there took every earlier match).
    #[test]
    fn an_attribute_is_named_whole_not_as_the_end_of_another() {
        assert!(
            html_meta(b"<meta data-name=x name=robots data-content=all content=noai>", None).noai
        );
        assert_eq!(attribute(b"name=robots", b"name"), Some(&b"robots"[..]));
        assert_eq!(attribute(b"x-name=a", b"name"), None);
    }

    /// The fields two readings left unparsed are named together, each once, in order.
    #[test]
    fn unparsed_fields_extend_each_once_in_order() {
        let (mut a, mut b) = (Unparsed::default(), Unparsed::default());
        assert!(a.is_empty(), "nothing noted yet");
        a.note(OptOutField::TdmPolicy);
        b.note(OptOutField::XRobotsTag);
        b.note(OptOutField::TdmPolicy);
        a.extend(&b);
        assert_eq!(a.names().as_deref(), Some("tdm-policy,X-Robots-Tag"));
    }

    /// A `tdmrep.json` with rules is not empty; `[]` is.
    #[test]
    fn a_tdm_file_is_empty_only_without_rules() {
        let file = TdmFile::parse(br#"[{"location": "/", "tdm-reservation": 1}]"#).unwrap();
        assert_eq!((file.len(), file.is_empty()), (1, false));
        let none = TdmFile::parse(b"[]").unwrap();
        assert_eq!((none.len(), none.is_empty()), (0, true));
    }

    /// An attribute whose `=` ends the tag has an empty value, and reading it does not run
    /// past the tag (a survivor of the engine's mutation run: `<=` there indexes past the end).
    #[test]
    fn an_attribute_whose_equals_sign_ends_the_tag_is_empty() {
        assert_eq!(attribute(b"meta name=robots content=", b"content"), Some(&b""[..]));
        assert_eq!(attribute(b"meta content= ", b"content"), Some(&b""[..]));
        assert!(!html_meta(b"<meta name=robots content=>", None).noai);
    }
}
