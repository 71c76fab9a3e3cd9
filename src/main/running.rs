//! `robots-proxy config check --against-running`: asks the running proxy's admin listener what
//! a reload would do now (`GET /api/reload/preview`), and prints it: the changes a reload would
//! apply, those that need a restart and why, or every error for which a reload would be
//! refused. Nothing is applied. The running proxy reads its own sources (the file and
//! environment it started with), as a reload would.

use std::process::ExitCode;
use std::time::Duration;

use serde_json::Value;

/// Runs the check; exit 0 when a reload would be accepted, 1 when it would be refused or the
/// proxy cannot be asked.
pub(crate) fn run(
    config: Option<std::path::PathBuf>,
    admin: Option<String>,
    json: bool,
    timeout: Duration,
) -> ExitCode {
    let base = match admin {
        Some(url) => url.trim_end_matches('/').to_owned(),
        None => match super::health::admin_base(config) {
            Ok(base) => base,
            Err(e) => return fail(&e),
        },
    };
    let url = format!("{base}/api/reload/preview");
    let (code, line, body) = match super::health::get(&url, timeout) {
        Ok(answer) => answer,
        Err(e) => return fail(&e),
    };
    let report: Value = match serde_json::from_slice(&body) {
        Ok(report) if code == 200 || code == 422 => report,
        _ => return fail(&format!("{url}: {line}: {}", String::from_utf8_lossy(&body).trim())),
    };
    if json {
        // JSON: C1 controls and Unicode line separators as `\uXXXX`, as in the audit log.
        let mut line = report.to_string().into_bytes();
        robots_proxy::output::json_line(&mut line);
        println!("{}", String::from_utf8_lossy(&line));
    } else {
        print!("{}", robots_proxy::output::terminal_text(&describe(&report)));
    }
    if code == 200 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn fail(e: &dyn std::fmt::Display) -> ExitCode {
    eprintln!(
        "robots-proxy config check --against-running: {}",
        robots_proxy::output::terminal(&e.to_string())
    );
    ExitCode::from(1)
}

/// The report for people: one line per key.
fn describe(report: &Value) -> String {
    let mut out = String::new();
    let list = |name: &str| report.get(name).and_then(Value::as_array).cloned().unwrap_or_default();
    let text = |v: Option<&Value>| v.map_or_else(|| "null".to_owned(), Value::to_string);
    let errors = list("errors");
    if !errors.is_empty() {
        out.push_str("A reload would be refused; the running configuration would stay:\n");
        for e in &errors {
            let key = e.get("key").and_then(Value::as_str).unwrap_or("-");
            let origin = e.get("origin").and_then(Value::as_str).map(|o| format!(" ({o})"));
            let message = e.get("message").and_then(Value::as_str).unwrap_or_default();
            out.push_str(&format!("  error: {key}{}: {message}\n", origin.unwrap_or_default()));
        }
    }
    let changed = list("changed");
    if changed.is_empty() && errors.is_empty() {
        out.push_str("A reload would change nothing that it applies.\n");
    } else if !changed.is_empty() {
        out.push_str("A reload would apply:\n");
    }
    for c in &changed {
        let key = c.get("key").and_then(Value::as_str).unwrap_or("-");
        out.push_str(&format!("  {key}: {} -> {}\n", text(c.get("old")), text(c.get("new"))));
    }
    let pending = list("restart_required");
    if !pending.is_empty() {
        out.push_str("These take effect only after a restart (the running values stay):\n");
    }
    for p in &pending {
        let key = p.get("key").and_then(Value::as_str).unwrap_or("-");
        let reason = p.get("reason").and_then(Value::as_str).unwrap_or_default();
        out.push_str(&format!(
            "  {key}: {} -> {} ({reason})\n",
            text(p.get("running")),
            text(p.get("configured"))
        ));
    }
    out
}
