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

use serde_json::Value;

use super::normalize;
use super::pattern::{self, PatternShape};

/// The `X-Robots-Tag` directives that opt out of AI uses.
pub const NOAI_DIRECTIVES: &[&str] = &["noai", "noimageai", "noml"];

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

/// A TDMRep statement: whether TDM rights are reserved, and the policy URL.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TdmStatement {
    /// `Some(true)` for `1` (reserved), `Some(false)` for `0`, `None` when unset.
    pub reserved: Option<bool>,
    /// The `tdm-policy` URL, if given.
    pub policy: Option<String>,
}

/// Reads a `tdm-reservation` value: `1` reserves, `0` does not, anything else is unset.
pub fn tdm_reservation(value: &str) -> Option<bool> {
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
    pattern: Box<[u8]>,
    shape: PatternShape,
    statement: TdmStatement,
}

/// A parsed `/.well-known/tdmrep.json`: rules in file order; the first whose `location` matches
/// the path wins.
#[derive(Debug, Clone, Default)]
pub struct TdmFile {
    rules: Vec<TdmRule>,
}

impl TdmFile {
    /// Parses the file. Any type error refuses the whole file (a file half understood could
    /// allow by error): an array of objects, each with a string `location`, an optional
    /// `tdm-reservation` number or string, and an optional string `tdm-policy`.
    pub fn parse(body: &[u8]) -> Result<TdmFile, TdmFileError> {
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
            // A location matches like a robots.txt path pattern (`*` and a final `$`).
            let location = if location.starts_with('/') || location.starts_with('*') {
                location.to_owned()
            } else {
                format!("/{location}")
            };
            let mut pattern = Vec::with_capacity(location.len() + 4);
            normalize::normalize_pattern_into(location.as_bytes(), &mut pattern);
            let shape = PatternShape::of(&pattern);
            rules.push(TdmRule {
                pattern: pattern.into(),
                shape,
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
            .find(|r| pattern::matches(&r.pattern, r.shape, path))
            .map(|r| &r.statement)
    }

    /// [`TdmFile::statement_for`] a path as sent (it is brought to the canonical form first).
    pub fn statement_for_sent(&self, sent: &str) -> Option<&TdmStatement> {
        let mut path = Vec::with_capacity(sent.len() + 8);
        normalize::normalize_path_for_matching_into(sent.as_bytes(), &mut path);
        self.statement_for(&path)
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

#[cfg(test)]
mod tests {
    use super::*;

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
        // Values other than 0 and 1 are unset; strings "1" are read too.
        let odd = TdmFile::parse(
            br#"[{"location": "/x", "tdm-reservation": 2}, {"location": "/", "tdm-reservation": "1"}]"#,
        )
        .unwrap();
        assert_eq!(odd.statement_for(b"/x").unwrap().reserved, None);
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
}
