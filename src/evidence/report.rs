//! The answer of `evidence URL --at TIME`, for a person and as one JSON object.

use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use serde_json::{json, Value};

use super::audit_source::Kept;
use super::history::{Body, InForce, Window};
use super::replay::Replay;
use super::time::show;
use super::Source;
use crate::output::terminal;
use crate::robots::ProductToken;

/// Everything the answer shows.
pub(super) struct Answer<'a> {
    pub(super) url: &'a str,
    pub(super) authority: &'a str,
    pub(super) path: &'a str,
    pub(super) at: SystemTime,
    pub(super) token: Option<&'a ProductToken>,
    pub(super) token_source: &'a str,
    pub(super) window: &'a Window,
    pub(super) body: Option<&'a Body>,
    pub(super) replay: &'a Replay,
    pub(super) records: &'a [Kept],
    pub(super) near: Duration,
    pub(super) fold_case: bool,
    pub(super) sources: &'a [Source],
    /// `audit verify` of each `--audit` file, in the order given.
    pub(super) chains: &'a [(String, crate::audit::verify::Report)],
    /// Exceptions and usage preferences applied to the replayed verdict.
    pub(super) overrides: &'a super::overrides::Overrides,
    /// The records near TIME whose verdict differs from the answer.
    pub(super) disagrees: &'a [Value],
    /// What the audit files and the archive each say, when they differ.
    pub(super) sources_disagree: Option<&'a Value>,
    /// The instance whose records answer, when one was chosen.
    pub(super) instance: Option<&'a super::instances::Chosen>,
    /// What each instance that knew the authority had in force, when there are several.
    pub(super) instances: &'a [super::instances::Entry],
    /// Whether those instances disagree at TIME.
    pub(super) instances_disagree: bool,
}

/// The chain of each audit file, for `--json`.
fn chains_json(a: &Answer<'_>) -> serde_json::Value {
    let each = a.chains.iter().map(|(file, r)| {
        serde_json::json!({
            "file": file,
            "status": if unchained(r) { json!("unchained") } else { json!(r.status) },
            "records": r.records,
            "keyid": r.keyid,
            "problem": r.problem,
            "unproven": r.unproven,
        })
    });
    serde_json::Value::Array(each.collect())
}

/// A file with no record of a hash chain at all (written before the chain existed): nothing
/// to check, which the answer says, not a break.
pub(super) fn unchained(r: &crate::audit::verify::Report) -> bool {
    use crate::audit::verify::Kind;
    r.records == 0
        && r.problem.as_ref().is_some_and(|p| p.kind == Kind::Inserted && p.line == Some(1))
}

/// One line per audit file: what `audit verify` says of its chain.
fn chains_text(a: &Answer<'_>, out: &mut String) {
    use crate::audit::verify::Status;
    for (file, r) in a.chains {
        let status = match r.status {
            _ if unchained(r) => {
                "no hash chain (written before it existed): not checked".to_owned()
            }
            Status::Intact => "intact".to_owned(),
            Status::Unproven => format!("not proven ({} span(s))", r.unproven.len()),
            Status::Tampered | Status::Unreadable => {
                let p = r.problem.as_ref();
                let line = p.and_then(|p| p.line).map(|l| format!(":{l}")).unwrap_or_default();
                let message = p.map(|p| p.message.as_str()).unwrap_or("");
                format!("TAMPERED at {file}{line}: {message}")
            }
        };
        let key = if r.keyid.is_some() { "signatures checked" } else { "signatures not checked" };
        let _ = writeln!(
            out,
            "chain:      {}: {} ({} record(s), {key})",
            terminal(file),
            terminal(&status),
            r.records
        );
    }
}

fn digest(window: &Window) -> Option<&str> {
    match &window.what {
        InForce::File(d) => Some(d),
        _ => None,
    }
}

/// The window as JSON: `from`, `last_confirmed`, `replaced_at` (null while none is known),
/// `fetches` (how many fetches of it are known).
pub(super) fn window_json(w: &Window) -> Value {
    json!({
        "in_force": w.what.kind(),
        "sha256": digest(w),
        "from": show(w.from),
        "last_confirmed": show(w.last_confirmed),
        "replaced_at": w.replaced_at.map(show),
        "fetches": w.fetches.len(),
        "first_fetched_at": w.fetches.first().copied().map(show),
        "observations": w.observations,
        "note": w.note,
        "open": w.open,
        "known_until": show(w.known_until()),
    })
}

/// The one JSON object of `--json` (and a newline), as [`crate::output::json_line`] writes it.
pub(super) fn json(a: &Answer<'_>) -> String {
    let d = &a.replay.decision;
    let records: Vec<Value> = a.records.iter().map(|k| k.value.clone()).collect();
    let version = a
        .body
        .map(|b| json!({ "url": b.url, "status_code": b.status, "body_bytes": b.bytes.len() }));
    let out = json!({
        "url": a.url,
        "authority": a.authority,
        "path": a.path,
        "at": show(a.at),
        "product_token": a.token.map(|t| t.as_str()),
        "token_source": a.token_source,
        "in_force": a.window.what.kind(),
        "sha256": digest(a.window),
        "fetched_at": a.window.fetched_before(a.at).map(show),
        "window": window_json(a.window),
        "known": a.window.known_at(a.at).map(|(from, to)| json!({"from": show(from), "to": show(to)})),
        "version": version,
        "allowed": a.overrides.allowed,
        "reason": a.overrides.reason.as_deref().unwrap_or(&d.reason),
        "robots_allowed": d.allowed,
        "robots_reason": d.reason,
        "exception": a.overrides.exception,
        "usage": a.overrides.usage,
        "disagrees_with": a.disagrees,
        "sources_disagree": a.sources_disagree,
        "instance": a.instance.map(|c| &c.name),
        "instance_chosen_by": a.instance.map(|c| match c.by {
            super::instances::ChosenBy::Flag => "--instance",
            super::instances::ChosenBy::Record(_) => "record",
        }),
        "instances": super::instances::json_list(a.instances),
        "instances_disagree": a.instances_disagree,
        "rule": d.rule,
        "line": d.line,
        "group": d.group,
        "reading": d.reading,
        "read_path": d.path,
        "case_folded_reading": a.fold_case,
        "readings": a.replay.readings,
        "context": a.replay.context,
        "near_seconds": a.near.as_secs(),
        "records": records,
        "sources": a.sources.iter().map(Source::describe).collect::<Vec<_>>(),
        "audit_chain": chains_json(a),
    });
    // The origin's text may hold C1 and bidi controls: escaped as `\uXXXX`, the values the same.
    let mut line = out.to_string().into_bytes();
    crate::output::json_line(&mut line);
    line.push(b'\n');
    String::from_utf8(line).unwrap_or_default()
}

/// The answer for a person. Every value that came from outside (the URL, the origin's
/// robots.txt lines and group values, redirect targets, audit lines) goes through
/// [`output::terminal`]: an origin's escape sequences cannot rewrite what the operator reads.
pub(super) fn text(a: &Answer<'_>) -> String {
    let mut out = String::new();
    let w = a.window;
    let d = &a.replay.decision;
    let _ = writeln!(out, "URL:        {}", terminal(a.url));
    let _ = writeln!(out, "at:         {}", show(a.at));
    let token = a.token.map_or("(none)", |t| t.as_str());
    let _ = writeln!(out, "token:      {} ({})", terminal(token), a.token_source);
    out.push_str(&crate::output::terminal_text(&super::instances::text(
        a.instance,
        a.instances,
        a.instances_disagree,
    )));
    match &w.what {
        InForce::File(sha) => {
            let _ = writeln!(out, "robots.txt: sha256:{sha}");
            if let Some(fetched) = w.fetched_before(a.at) {
                let _ = writeln!(out, "  fetched:  {}", show(fetched));
            }
            if let Some(b) = a.body {
                let status = b.status.map_or(String::new(), |s| format!("HTTP {s}, "));
                let _ = writeln!(
                    out,
                    "  from:     {} ({status}{} bytes)",
                    terminal(&b.url),
                    b.bytes.len()
                );
            }
        }
        InForce::AllowAll => {
            let _ =
                writeln!(out, "robots.txt: no file: it answered 4xx, so every path was allowed");
        }
        InForce::DisallowAll => {
            let _ = writeln!(
                out,
                "robots.txt: no file: it could not be fetched and no copy was kept, so every path \
                 was disallowed"
            );
        }
    }
    if let Some(note) = &w.note {
        let _ = writeln!(out, "  record:   {}", terminal(note));
    }
    let until = match w.replaced_at {
        Some(r) => format!("replaced at {}", show(r)),
        None if w.open => {
            format!("in force when the archive was read, known until {}", show(w.known_until()))
        }
        None => "nothing known after it".to_owned(),
    };
    let _ = writeln!(
        out,
        "  window:   from {}, last confirmed {}, {until} ({} fetch(es), {} observation(s))",
        show(w.from),
        show(w.last_confirmed),
        w.fetches.len(),
        w.observations
    );
    let o = a.overrides;
    let verdict = if o.allowed { "allowed" } else { "disallowed" };
    let reason = o.reason.as_deref().unwrap_or(&d.reason);
    let _ = writeln!(out, "decision:   {verdict}: {}", terminal(reason));
    if o.reason.is_some() {
        let robots = if d.allowed { "allowed" } else { "disallowed" };
        let _ = writeln!(out, "  robots:   {robots}: {}", terminal(&d.reason));
    }
    if let Some(id) = o.exception.as_ref().and_then(|e| e["id"].as_str()) {
        let _ = writeln!(out, "  exception: {}", terminal(id));
    }
    if let Some(d) = a.sources_disagree {
        let _ = writeln!(
            out,
            "  SOURCES DISAGREE: the audit files say {}, the archive {}",
            terminal(&d["audit"].to_string()),
            terminal(&d["archive"].to_string())
        );
    }
    for k in a.disagrees {
        let _ = writeln!(
            out,
            "  DISAGREES with the record {} at {} ({}:{})",
            terminal(k["event.action"].as_str().unwrap_or("")),
            terminal(k["@timestamp"].as_str().unwrap_or("")),
            terminal(k["file"].as_str().unwrap_or("")),
            k["line"]
        );
    }
    if let Some(group) = &d.group {
        let _ = writeln!(out, "  group:    {}", terminal(group));
    }
    if let (Some(rule), Some(line)) = (&d.rule, d.line) {
        let _ = writeln!(out, "  rule:     {} (line {line})", terminal(rule));
    }
    if a.replay.readings.len() > 1 {
        let _ = writeln!(out, "readings:");
        for r in &a.replay.readings {
            let v = if r.allowed { "allowed" } else { "disallowed" };
            let _ = writeln!(
                out,
                "  {:<11} {}  {v} ({})",
                r.reading,
                terminal(&r.path),
                terminal(&r.reason)
            );
        }
    }
    if !a.replay.context.is_empty() {
        let _ = writeln!(out, "context:");
        for c in &a.replay.context {
            let mark = if c.rule { ">" } else { " " };
            let _ = writeln!(out, "  {mark} {:>4}  {}", c.line, terminal(&c.text));
        }
    }
    let near = humantime::format_duration(a.near);
    let _ =
        writeln!(out, "records for this URL within {near} of {}: {}", show(a.at), a.records.len());
    for k in a.records {
        let _ = writeln!(
            out,
            "  {}:{}: {}",
            terminal(&k.file.display().to_string()),
            k.line,
            terminal(&String::from_utf8_lossy(&k.raw))
        );
    }
    let sources: Vec<String> = a.sources.iter().map(Source::describe).collect();
    let _ = writeln!(out, "sources:    {}", terminal(&sources.join(", ")));
    chains_text(a, &mut out);
    out
}
