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
    ask(Ask::Preview, config, admin, json, timeout)
}

/// `robots-proxy reload`: `POST /api/reload` on the running proxy's admin listener, the report
/// printed; exit 0 when the new configuration was applied, 1 when it was refused (the running
/// one stays) or the proxy cannot be asked. For `systemctl reload` (ExecReload), certbot's
/// deploy hooks and scripts, which `kill -HUP` answers with 0 whatever became of it.
pub(crate) fn reload(
    config: Option<std::path::PathBuf>,
    admin: Option<String>,
    json: bool,
    timeout: Duration,
) -> ExitCode {
    ask(Ask::Reload, config, admin, json, timeout)
}

/// What is asked of the running proxy.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ask {
    /// `GET /api/reload/preview`: nothing is applied.
    Preview,
    /// `POST /api/reload`.
    Reload,
}

fn ask(
    what: Ask,
    config: Option<std::path::PathBuf>,
    admin: Option<String>,
    json: bool,
    timeout: Duration,
) -> ExitCode {
    let who = match what {
        Ask::Preview => "robots-proxy config check --against-running",
        Ask::Reload => "robots-proxy reload",
    };
    let base = match admin {
        Some(url) => url.trim_end_matches('/').to_owned(),
        None => admin_base(config, who),
    };
    let answer = match what {
        Ask::Preview => super::health::get(&format!("{base}/api/reload/preview"), timeout),
        Ask::Reload => {
            super::health::request(http::Method::POST, &format!("{base}/api/reload"), timeout)
        }
    };
    let url = base;
    let (code, line, body) = match answer {
        Ok(answer) => answer,
        Err(e) => return fail(who, &e),
    };
    let report: Value = match serde_json::from_slice(&body) {
        Ok(report) if code == 200 || code == 422 => report,
        _ => {
            let said = String::from_utf8_lossy(&body);
            return fail(who, &format!("{url}: {line}: {}", said.trim()));
        }
    };
    if json {
        // JSON: C1 controls and Unicode line separators as `\uXXXX`, as in the audit log.
        let mut line = report.to_string().into_bytes();
        robots_proxy::output::json_line(&mut line);
        println!("{}", String::from_utf8_lossy(&line));
    } else {
        let done = what == Ask::Reload;
        print!("{}", robots_proxy::output::terminal_text(&describe(&report, done)));
    }
    if code == 200 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn fail(who: &str, e: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("{who}: {}", robots_proxy::output::terminal(&e.to_string()));
    ExitCode::from(1)
}

/// The admin listener of the configuration; when the configuration cannot be loaded (the very
/// case a preview is for: an edit with an error), the default admin address, said so: the
/// running proxy then lists every error of the file.
fn admin_base(config: Option<std::path::PathBuf>, who: &str) -> String {
    match super::health::admin_base(config) {
        Ok(base) => base,
        Err(e) => {
            let listen = robots_proxy::config::Config::default().admin.listen;
            eprintln!(
                "{who}: {}; asking the default admin address {listen} (--admin URL to choose)",
                robots_proxy::output::terminal(&e.to_string())
            );
            format!("http://{listen}")
        }
    }
}

/// The report for people: one line per key; `done`: a reload that was asked for (not a
/// preview).
fn describe(report: &Value, done: bool) -> String {
    if done {
        return describe_reload(report);
    }
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

/// The report of a reload that ran: whether it was applied, then as [`describe`] lists it.
fn describe_reload(report: &Value) -> String {
    let applied = report.get("outcome").and_then(Value::as_str) == Some("applied");
    let preview = describe(report, false)
        .replace("A reload would be refused; the running configuration would stay:", "")
        .replace("A reload would change nothing that it applies.", "Nothing it applies changed.")
        .replace("A reload would apply:", "Applied:");
    let head = if applied {
        "The configuration was reloaded.\n"
    } else {
        "The new configuration was refused; the running configuration stays:\n"
    };
    let body: String =
        preview.lines().filter(|l| !l.is_empty()).map(|l| format!("{l}\n")).collect();
    format!("{head}{body}")
}
