//! `GET /api/robots/versions?authority=A`: the robots.txt versions the archive holds for an
//! authority, with the windows in which each was in force (see `docs/evidence.md`, "The
//! archive"). With `diff=1`, each version also carries its text and a line diff against the
//! version before it, for the status page.

use std::collections::HashMap;
use std::time::Duration;

use http::StatusCode;
use serde_json::{json, Value};
use similar::{ChangeTag, TextDiff};

use super::{bad_request, json_response, Body};
use crate::authority::Authority;
use crate::policy::{Archive, Window};
use crate::proxy::Proxy;

/// Lines of context around each change in a diff.
const CONTEXT: usize = 2;

/// How long a diff may take; past it, the diff is coarser (whole blocks replaced).
const DIFF_DEADLINE: Duration = Duration::from_millis(500);

pub(super) fn list(proxy: &Proxy, query: &HashMap<String, String>) -> http::Response<Body> {
    let Some(given) = query.get("authority").map(|a| a.trim()).filter(|a| !a.is_empty()) else {
        return bad_request(
            "missing the authority parameter: GET /api/robots/versions?authority=https://host[:port]",
        );
    };
    let authority = match parse(given) {
        Ok(a) => a.to_string(),
        Err(e) => return bad_request(&e),
    };
    let Some(archive) = proxy.policy().archive() else {
        return json_response(
            StatusCode::OK,
            &json!({ "authority": authority, "archive": false, "windows": [], "versions": [] }),
        );
    };
    let windows = archive.windows(&authority);
    let with_diff = query.get("diff").is_some_and(|d| d == "1" || d == "true");
    let versions = versions(&archive, &windows, with_diff);
    let windows: Vec<Value> =
        windows.iter().map(|w| serde_json::to_value(w).unwrap_or(Value::Null)).collect();
    json_response(
        StatusCode::OK,
        &json!({
            "authority": authority,
            "archive": true,
            "windows": windows,
            "versions": versions,
        }),
    )
}

/// `scheme://host[:port]` (a path after it is ignored); a bare host is refused, since the
/// scheme names another authority.
fn parse(given: &str) -> Result<Authority, String> {
    if !given.contains("://") {
        return Err(format!(
            "{given:?} has no scheme: give the authority as http://host[:port] or https://host[:port]"
        ));
    }
    let uri: http::Uri = given.parse().map_err(|e| format!("{given:?} is not a URL: {e}"))?;
    Authority::from_uri(&uri).map_err(|e| format!("{given:?}: {e}"))
}

/// The distinct robots.txt bodies among `windows`, in the order they first came into force,
/// each with the windows it was in force in.
fn versions(archive: &Archive, windows: &[Window], with_diff: bool) -> Vec<Value> {
    let mut order: Vec<&str> = Vec::new();
    for w in windows {
        if let Some(sha) = w.sha256.as_deref() {
            if !order.contains(&sha) {
                order.push(sha);
            }
        }
    }
    let mut previous: Option<String> = None;
    let mut out = Vec::with_capacity(order.len());
    for sha in order {
        let own: Vec<&Window> =
            windows.iter().filter(|w| w.sha256.as_deref() == Some(sha)).collect();
        let mut entry = json!({
            "sha256": sha,
            "size": own.first().and_then(|w| w.size),
            "first_fetched": own.first().map(|w| crate::audit::timestamp(w.first_fetched)),
            "last_confirmed": own.iter().map(|w| w.last_confirmed).max().map(crate::audit::timestamp),
            "replaced_at": own.last().and_then(|w| w.replaced_at).map(crate::audit::timestamp),
            "windows": own.len(),
        });
        if with_diff {
            let body = archive.body(sha);
            let text = body.as_deref().map(|b| String::from_utf8_lossy(b).into_owned());
            if let Some(map) = entry.as_object_mut() {
                map.insert("kept".to_owned(), body.is_some().into());
                map.insert(
                    "utf8".to_owned(),
                    body.as_deref().is_some_and(|b| std::str::from_utf8(b).is_ok()).into(),
                );
                map.insert("text".to_owned(), text.clone().into());
                let diff = match (&previous, &text) {
                    (Some(before), Some(after)) => diff(before, after),
                    _ => Value::Null,
                };
                map.insert("diff".to_owned(), diff);
            }
            previous = text;
        }
        out.push(entry);
    }
    out
}

/// The line diff from `before` to `after`: groups of lines around each change, each line
/// `{"op": "+" | "-" | " ", "line": text}`, a `{"op": "…"}` between groups.
fn diff(before: &str, after: &str) -> Value {
    let diff = TextDiff::configure().timeout(DIFF_DEADLINE).diff_lines(before, after);
    let mut lines = Vec::new();
    for (i, group) in diff.grouped_ops(CONTEXT).iter().enumerate() {
        if i > 0 {
            lines.push(json!({ "op": "…", "line": "" }));
        }
        for op in group {
            for change in diff.iter_changes(op) {
                let sign = match change.tag() {
                    ChangeTag::Insert => "+",
                    ChangeTag::Delete => "-",
                    ChangeTag::Equal => " ",
                };
                let line = change.value().trim_end_matches(['\n', '\r']);
                lines.push(json!({ "op": sign, "line": line }));
            }
        }
    }
    Value::Array(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_diff_marks_added_and_removed_lines() {
        let d = diff("User-agent: *\nDisallow: /a\n", "User-agent: *\nDisallow: /b\nAllow: /c\n");
        let lines: Vec<String> = d
            .as_array()
            .unwrap()
            .iter()
            .map(|l| format!("{}{}", l["op"].as_str().unwrap(), l["line"].as_str().unwrap()))
            .collect();
        assert_eq!(lines, [" User-agent: *", "-Disallow: /a", "+Disallow: /b", "+Allow: /c"]);
    }

    #[test]
    fn an_authority_needs_its_scheme() {
        assert_eq!(parse("https://Example.COM:443/x").unwrap().to_string(), "https://example.com");
        assert!(parse("example.com").unwrap_err().contains("no scheme"));
        assert!(parse("ftp://example.com").is_err());
    }
}
