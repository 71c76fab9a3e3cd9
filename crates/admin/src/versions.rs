//! `GET /api/robots/versions?authority=A`: the robots.txt versions the archive holds for an
//! authority, with the windows in which each was in force (see `docs/evidence.md`, "The
//! archive"). With `diff=1`, the newest versions also carry their text and a line diff against
//! the version before, for the status page.
//!
//! What an origin serves decides how much there is to show (a site that serves a new robots.txt
//! at each fetch piles up versions), so the answer is bounded, and built on the blocking pool,
//! off the threads that serve requests: at most [`MAX_WINDOWS`] windows and [`MAX_VERSIONS`]
//! versions (the newest; `windows_total` and `versions_total` give the counts), text and diff
//! for at most [`MAX_SHOWN`] of them, within [`MAX_SHOWN_BYTES`] and [`SHOWN_DEADLINE`], each
//! diff cut at [`MAX_DIFF_LINES`] lines. A version listed without its text names why in
//! `omitted`; `truncated` says whether anything was left out.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::StatusCode;
use serde_json::{json, Value};
use similar::{ChangeTag, TextDiff};

use super::{bad_request, json_response, Body};
use robots_proxy_authority::Authority;
use robots_proxy_decide::{Archive, Window};
use robots_proxy_proxy::Proxy;

/// Lines of context around each change in a diff.
const CONTEXT: usize = 2;

/// How long a diff may take; past it, the diff is coarser (whole blocks replaced).
const DIFF_DEADLINE: Duration = Duration::from_millis(500);

/// Most windows in one answer: the newest.
const MAX_WINDOWS: usize = 2000;

/// Most versions in one answer: the newest.
const MAX_VERSIONS: usize = 500;

/// Most versions shown with their text and diff (with `diff=1`): the newest.
const MAX_SHOWN: usize = 10;

/// Most bytes of text and diff lines in one answer; the older versions past it are listed
/// without them.
const MAX_SHOWN_BYTES: usize = 4 << 20;

/// Most lines of one diff; the rest is named by a last `{"op": "…"}` line.
const MAX_DIFF_LINES: usize = 2000;

/// How long reading texts and diffing may take for one answer; the older versions past it are
/// listed without them.
const SHOWN_DEADLINE: Duration = Duration::from_secs(3);

/// One `diff=1` answer is built at a time (issue 39, M5: two built at once, each a core's worth
/// of diffing, stalled the proxy's traffic on a two-core machine); another asked meanwhile is
/// answered 503 at once, with `Retry-After`, and costs no work.
static DIFFS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(1);

/// The answer could not be built now: another `diff=1` answer is being built.
#[derive(Debug, thiserror::Error)]
#[error("another diff of versions is being built; ask again in a moment")]
pub(super) struct Busy;

pub(super) async fn list(proxy: &Proxy, query: &HashMap<String, String>) -> http::Response<Body> {
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
    let with_diff = query.get("diff").is_some_and(|d| d == "1" || d == "true");
    match build(archive, authority, with_diff).await {
        Ok(Ok(answer)) => json_response(StatusCode::OK, &answer),
        Ok(Err(busy)) => {
            let mut response = json_response(
                StatusCode::SERVICE_UNAVAILABLE,
                &json!({ "error": busy.to_string() }),
            );
            response
                .headers_mut()
                .insert(http::header::RETRY_AFTER, http::HeaderValue::from_static("1"));
            response
        }
        Err(e) => json_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            &json!({ "error": format!("the versions could not be read: {e}") }),
        ),
    }
}

/// Builds the answer on the blocking pool, off the threads that serve requests (reading the
/// archive is disk I/O, diffing is CPU); with `with_diff`, only when no other diff answer is
/// being built ([`DIFFS`]).
pub(super) async fn build(
    archive: Arc<Archive>,
    authority: String,
    with_diff: bool,
) -> Result<Result<Value, Busy>, tokio::task::JoinError> {
    let permit = match with_diff {
        true => match DIFFS.try_acquire() {
            Ok(permit) => Some(permit),
            Err(_) => return Ok(Err(Busy)),
        },
        false => None,
    };
    // The permit goes with the work: a client that hangs up does not free it early.
    let built = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        answer(&archive, authority, with_diff)
    });
    built.await.map(Ok)
}

/// The answer for `authority`, bounded as the [module documentation](self) says.
fn answer(archive: &Arc<Archive>, authority: String, with_diff: bool) -> Value {
    let all = archive.windows(&authority);
    let windows_total = all.len();
    let windows = &all[windows_total.saturating_sub(MAX_WINDOWS)..];
    let (versions, versions_total, truncated) = versions(archive, windows, with_diff);
    let truncated = truncated || windows_total > windows.len();
    let windows: Vec<Value> =
        windows.iter().map(|w| serde_json::to_value(w).unwrap_or(Value::Null)).collect();
    json!({
        "authority": authority,
        "archive": true,
        "windows": windows,
        "windows_total": windows_total,
        "versions": versions,
        "versions_total": versions_total,
        "truncated": truncated,
    })
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

/// The distinct robots.txt bodies among `windows`, in the order they first came into force
/// (the newest [`MAX_VERSIONS`]), each with the windows it was in force in; with `with_diff`,
/// the newest with their text and diff within the bounds. Also the number of versions, and
/// whether anything was left out.
fn versions(archive: &Archive, windows: &[Window], with_diff: bool) -> (Vec<Value>, usize, bool) {
    let mut order: Vec<&str> = Vec::new();
    let mut by_sha: HashMap<&str, Vec<&Window>> = HashMap::new();
    for w in windows {
        if let Some(sha) = w.sha256.as_deref() {
            let own = by_sha.entry(sha).or_default();
            if own.is_empty() {
                order.push(sha);
            }
            own.push(w);
        }
    }
    let total = order.len();
    let mut truncated = total > MAX_VERSIONS;
    let order = &order[total.saturating_sub(MAX_VERSIONS)..];
    let mut out: Vec<Value> = order
        .iter()
        .map(|&sha| {
            let own = by_sha.get(sha).map(Vec::as_slice).unwrap_or_default();
            json!({
                "sha256": sha,
                "size": own.first().and_then(|w| w.size),
                "first_fetched": own.first().map(|w| robots_proxy_audit::timestamp(w.first_fetched)),
                "last_confirmed": own.iter().map(|w| w.last_confirmed).max().map(robots_proxy_audit::timestamp),
                "replaced_at": own.last().and_then(|w| w.replaced_at).map(robots_proxy_audit::timestamp),
                "windows": own.len(),
            })
        })
        .collect();
    if with_diff {
        truncated |= show(archive, order, &mut out);
    }
    (out, total, truncated)
}

/// Adds `kept`, `utf8`, `text` and `diff` to the newest entries of `out` (one per version of
/// `order`), newest first, within [`MAX_SHOWN`], [`MAX_SHOWN_BYTES`] and [`SHOWN_DEADLINE`];
/// the others get `omitted`, saying why. Answers whether any was omitted.
fn show(archive: &Archive, order: &[&str], out: &mut [Value]) -> bool {
    let started = Instant::now();
    let text_of = |sha: &str| {
        let body = archive.body(sha);
        let utf8 = body.as_deref().is_some_and(|b| std::str::from_utf8(b).is_ok());
        (body.as_deref().map(|b| String::from_utf8_lossy(b).into_owned()), utf8)
    };
    let mut spent = 0;
    // The text of the version before the one shown last: the next one to show.
    let mut next: Option<(Option<String>, bool)> = None;
    for i in (0..order.len()).rev() {
        let why = if order.len() - i > MAX_SHOWN {
            Some("older than the versions shown with their text")
        } else if spent >= MAX_SHOWN_BYTES {
            Some("over the size bound of the answer")
        } else if started.elapsed() >= SHOWN_DEADLINE {
            Some("over the time bound of the answer")
        } else {
            None
        };
        if let Some(why) = why {
            for entry in &mut out[..=i] {
                if let Some(map) = entry.as_object_mut() {
                    map.insert("omitted".to_owned(), why.into());
                }
            }
            return true;
        }
        let (text, utf8) = next.take().unwrap_or_else(|| text_of(order[i]));
        let before = (i > 0).then(|| text_of(order[i - 1]));
        let diff = match (before.as_ref().and_then(|b| b.0.as_deref()), text.as_deref()) {
            (Some(before), Some(after)) => diff(before, after),
            _ => Value::Null,
        };
        spent += text.as_ref().map_or(0, String::len) + diff_bytes(&diff);
        if let Some(map) = out[i].as_object_mut() {
            map.insert("kept".to_owned(), text.is_some().into());
            map.insert("utf8".to_owned(), utf8.into());
            map.insert("text".to_owned(), text.into());
            map.insert("diff".to_owned(), diff);
        }
        next = before;
    }
    false
}

/// About the bytes `diff` takes in the answer.
fn diff_bytes(diff: &Value) -> usize {
    let line = |l: &Value| l["line"].as_str().map_or(0, str::len) + 20;
    diff.as_array().map_or(0, |lines| lines.iter().map(line).sum())
}

/// The line diff from `before` to `after`: groups of lines around each change, each line
/// `{"op": "+" | "-" | " ", "line": text}`, a `{"op": "…"}` between groups.
fn diff(before: &str, after: &str) -> Value {
    let diff = TextDiff::configure().timeout(DIFF_DEADLINE).diff_lines(before, after);
    let mut lines = Vec::new();
    let mut left_out = 0usize;
    for (i, group) in diff.grouped_ops(CONTEXT).iter().enumerate() {
        if i > 0 && lines.len() < MAX_DIFF_LINES {
            lines.push(json!({ "op": "…", "line": "" }));
        }
        for op in group {
            if lines.len() >= MAX_DIFF_LINES {
                left_out += op.new_range().len().max(op.old_range().len());
                continue;
            }
            for change in diff.iter_changes(op) {
                if lines.len() >= MAX_DIFF_LINES {
                    left_out += 1;
                    continue;
                }
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
    if left_out > 0 {
        let note = format!("(about {left_out} more lines not shown)");
        lines.push(json!({ "op": "…", "line": note }));
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

    /// An archive of 30 versions of 400 KiB for `http://a.test`, every line changed each time.
    fn heavy_archive() -> (Arc<Archive>, tempfile::TempDir) {
        use std::time::SystemTime;

        use bytes::Bytes;

        use robots_proxy_archive::robots_version::RobotsVersion;
        use robots_proxy_archive::{ArchiveSection, Consequence, Observation};

        let dir = tempfile::tempdir().unwrap();
        let archive = Arc::new(Archive::open(dir.path(), &ArchiveSection::default()).unwrap());
        let (authority, url) = ("http://a.test", "http://a.test/robots.txt");
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let n = 30;
        for i in 0..n {
            let body: String =
                (0..20_000).map(|l| format!("Disallow: /v{i:02}/{l:05}\n")).collect();
            let at = t0 + Duration::from_secs(60 * i);
            let version = RobotsVersion::new(authority, url, Bytes::from(body), at, Some(200));
            archive.note(Observation {
                authority: authority.to_owned(),
                url: url.to_owned(),
                version: Some(Arc::new(version)),
                status: Some(200),
                error: None,
                state: "fresh",
                consequence: Consequence::Rules,
                at,
                now: at,
                expires_at: at,
                folds_case: false,
            });
        }
        for _ in 0..1000 {
            if archive.windows(authority).len() == 30 {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        (archive, dir)
    }

    /// An origin that served a new 400 KiB robots.txt at each of 30 fetches (every line
    /// changed): one `diff=1` answer stays within its size bound, shows the newest versions with
    /// their text, and says what it left out. Unbounded, it was about 60 MB.
    #[test]
    fn many_big_versions_give_a_bounded_answer() {
        let (archive, _dir) = heavy_archive();
        let authority = "http://a.test";
        let answer = answer(&archive, authority.to_owned(), true);
        let size = answer.to_string().len();
        assert!(size < MAX_SHOWN_BYTES + (1 << 20), "{size} bytes");
        assert_eq!(answer["versions_total"], 30);
        assert_eq!(answer["truncated"], true);
        let versions = answer["versions"].as_array().unwrap();
        let shown = versions.iter().filter(|v| v["text"].is_string()).count();
        assert!((1..=MAX_SHOWN).contains(&shown), "{shown} shown");
        assert!(versions.last().unwrap()["text"].as_str().unwrap().starts_with("Disallow: /v29/"));
        assert!(versions[0]["omitted"].is_string(), "{}", versions[0]);
        let diff = versions.last().unwrap()["diff"].as_array().unwrap();
        assert!(diff.len() <= MAX_DIFF_LINES + 1, "{} diff lines", diff.len());
        assert!(diff.last().unwrap()["line"].as_str().unwrap().contains("more lines not shown"));
    }

    /// Issue 39, M5: a `diff=1` answer is built on the blocking pool, one at a time. On a
    /// runtime with a single thread, an unrelated task makes its 1000 turns while the heavy
    /// answer is still being built (had it been built on the runtime's thread, not one turn
    /// would come before it ended); a second diff answer asked meanwhile is refused at once
    /// with no work done, and once the first is done the next is built.
    #[test]
    fn a_diff_is_built_off_the_runtime_threads_one_at_a_time() {
        let (archive, _dir) = heavy_archive();
        let authority = "http://a.test".to_owned();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let first = tokio::spawn(build(archive.clone(), authority.clone(), true));
            tokio::task::yield_now().await;
            let second = build(archive.clone(), authority.clone(), true).await.unwrap();
            assert!(matches!(second, Err(Busy)), "{second:?}");
            let mut turns = 0;
            while !first.is_finished() && turns < 1000 {
                tokio::task::yield_now().await;
                turns += 1;
            }
            assert_eq!(turns, 1000, "the runtime's thread was held by the diff");
            let answer = first.await.unwrap().unwrap().unwrap();
            assert_eq!(answer["versions_total"], 30);
            let next = build(archive, authority, true).await.unwrap();
            assert!(next.is_ok_and(|a| a["versions_total"] == 30));
        });
    }

    #[test]
    fn an_authority_needs_its_scheme() {
        assert_eq!(parse("https://Example.COM:443/x").unwrap().to_string(), "https://example.com");
        assert!(parse("example.com").unwrap_err().contains("no scheme"));
        assert!(parse("ftp://example.com").is_err());
    }
}
