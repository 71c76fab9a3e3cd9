//! `robots-proxy check` as a process: exit codes, messages, `--explain`, `--agent`, `--jsonl`.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_robots-proxy");

const ROBOTS: &str = "User-agent: *\nDisallow: /private\nAllow: /private/ok\n\n\
                      User-agent: ExampleBot\nDisallow: /example-only\nCrawl-delay: 2\n\n\
                      Sitemap: https://example.com/sitemap.xml\n";

fn robots_file(body: &[u8]) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().expect("temp file");
    f.write_all(body).expect("write robots");
    f
}

fn check(robots: &Path, extra: &[&str]) -> Output {
    Command::new(BIN)
        .arg("check")
        .arg("--robots")
        .arg(robots)
        .args(extra)
        .output()
        .expect("run robots-proxy")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn exit_0_when_every_url_is_allowed() {
    let f = robots_file(ROBOTS.as_bytes());
    let o = check(
        f.path(),
        &["--agent", "OtherBot", "https://example.com/public", "https://example.com/private/ok/1"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(lines[0].starts_with("allowed") && lines[0].contains("https://example.com/public"));
    assert!(lines[0].contains("no rule matched"), "{out}");
    assert!(lines[1].contains("line 3: allow: /private/ok"), "{out}");
}

#[test]
fn exit_1_when_any_url_is_disallowed() {
    let f = robots_file(ROBOTS.as_bytes());
    let o = check(
        f.path(),
        &[
            "--agent",
            "OtherBot",
            "https://example.com/public",
            "https://example.com/private/x",
            "https://example.com/robots.txt",
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(lines[0].starts_with("allowed "), "{out}");
    assert!(lines[1].starts_with("disallowed") && lines[1].contains("/private/x"), "{out}");
    assert!(lines[1].contains("line 2: disallow: /private"), "{out}");
    assert!(lines[2].starts_with("allowed ") && lines[2].contains("always allowed"), "{out}");
}

#[test]
fn urls_are_matched_as_written_like_google() {
    let f = robots_file(ROBOTS.as_bytes());
    // Percent-encoding of unreserved characters is normalised...
    let o = check(f.path(), &["--agent", "OtherBot", "https://example.com/%70rivate"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    // ...but the path is not resolved: `//private` does not start with `/private`.
    for url in [
        "https://example.com/a/../private",
        "https://example.com//private",
        "https://example.com/./private?x=1",
        "https://example.com/public/..%2fprivate",
    ] {
        let o = check(f.path(), &["--agent", "OtherBot", url]);
        assert_eq!(o.status.code(), Some(0), "{url}: {}", stdout(&o));
    }
}

#[test]
fn as_proxy_decides_on_every_reading_and_lists_them() {
    let f = robots_file(ROBOTS.as_bytes());
    for (url, reading) in [
        ("https://example.com/a/../private", "decoded"),
        ("https://example.com//private", "decoded"),
        ("https://example.com/public/..%2fprivate/x", "decoded"),
        ("https://example.com/%5cprivate", "backslash"),
        ("https://example.com/public/..;/private", "parameters"),
        ("https://example.com/;x/private", "parameters"),
    ] {
        let o = check(f.path(), &["--as-proxy", "--agent", "OtherBot", url]);
        let out = stdout(&o);
        assert_eq!(o.status.code(), Some(1), "{url}: {out}");
        let first = out.lines().next().unwrap_or_default();
        assert!(first.starts_with("disallowed") && first.contains(reading), "{url}: {out}");
        assert!(out.contains(&format!("  reading {reading}: /private")), "{url}: {out}");
    }
    // A path that reads the same everywhere lists no other reading.
    let o = check(f.path(), &["--as-proxy", "--agent", "OtherBot", "https://example.com/public"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert_eq!(stdout(&o).lines().count(), 1, "{}", stdout(&o));
}

#[test]
fn exit_2_on_usage_errors() {
    let f = robots_file(ROBOTS.as_bytes());
    // No URL.
    let o = check(f.path(), &["--agent", "OtherBot"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).to_lowercase().contains("url"), "{}", stderr(&o));
    // No robots file.
    let o = Command::new(BIN).args(["check", "https://example.com/"]).output().expect("run");
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--robots"), "{}", stderr(&o));
    // An unknown option.
    let o = check(f.path(), &["--no-such-flag", "https://example.com/"]);
    assert_eq!(o.status.code(), Some(2));
    // --jsonl with URLs.
    let o =
        Command::new(BIN).args(["check", "--jsonl", "https://example.com/"]).output().expect("run");
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn a_missing_robots_file_is_exit_2_naming_the_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let missing = dir.path().join("no-such-robots.txt");
    let o = check(&missing, &["https://example.com/"]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.contains("no-such-robots.txt"), "{err}");
    assert!(err.contains("cannot read robots.txt"), "{err}");
    assert!(stdout(&o).is_empty());
}

#[test]
fn an_unparseable_url_is_exit_2_naming_the_url() {
    let f = robots_file(ROBOTS.as_bytes());
    for bad in ["not a url", "/relative/path", "mailto:someone@example.com", "http://"] {
        let o = check(f.path(), &["https://example.com/private", bad]);
        assert_eq!(o.status.code(), Some(2), "{bad}");
        let err = stderr(&o);
        assert!(err.contains(bad), "{bad}: {err}");
        assert!(err.contains("not an absolute URL"), "{bad}: {err}");
        assert!(stdout(&o).is_empty(), "no partial answer for {bad}");
    }
}

#[test]
fn explain_shows_groups_and_every_matching_rule() {
    let f = robots_file(ROBOTS.as_bytes());
    let o = check(
        f.path(),
        &[
            "--agent",
            "OtherBot",
            "--explain",
            "https://example.com/private/ok/x",
            "https://example.com/z",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("product token: OtherBot"), "{out}");
    assert!(out.contains("group applied: user-agent line 1: *"), "{out}");
    assert!(out.contains("sitemap: https://example.com/sitemap.xml (line 9)"), "{out}");
    // Both matching rules, longest first, with their lengths.
    let allow_at = out.find("matches line 3: allow: /private/ok (11 octets)").expect(&out);
    let dis_at = out.find("matches line 2: disallow: /private (8 octets)").expect(&out);
    assert!(allow_at < dis_at, "{out}");
    assert!(out.contains("matching rules: none"), "{out}");
    // The ExampleBot group, with its crawl-delay.
    let o = check(
        f.path(),
        &["--agent", "ExampleBot", "--explain", "https://example.com/example-only"],
    );
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    assert!(out.contains("group applied: user-agent line 5: ExampleBot"), "{out}");
    assert!(out.contains("crawl-delay: 2s (line 7)"), "{out}");
    // No agent: only `*`.
    let o = check(f.path(), &["--explain", "https://example.com/example-only"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(stdout(&o).contains("product token: (none"), "{}", stdout(&o));
}

#[test]
fn agent_may_be_a_whole_user_agent_string() {
    let f = robots_file(ROBOTS.as_bytes());
    let ua = "Mozilla/5.0 (compatible; ExampleBot/0.1; +https://www.example.com/bot.html)";
    let o = check(f.path(), &["--agent", ua, "https://example.com/example-only/x"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let o = check(f.path(), &["--agent", ua, "https://example.com/private"]);
    assert_eq!(o.status.code(), Some(0), "ExampleBot's group, not `*`: {}", stdout(&o));
    // A browser's User-Agent names no crawler: a note, and the `*` groups.
    let browser = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) \
                   Chrome/120.0.0.0 Safari/537.36";
    let o = check(f.path(), &["--agent", browser, "https://example.com/private"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("no product token"), "{}", stderr(&o));
}

fn jsonl(input: &str) -> (Option<i32>, Vec<serde_json::Value>) {
    let mut child = Command::new(BIN)
        .args(["check", "--jsonl"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    child.stdin.take().expect("stdin").write_all(input.as_bytes()).expect("write");
    let o = child.wait_with_output().expect("wait");
    let lines = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect();
    (o.status.code(), lines)
}

#[test]
fn jsonl_answers_each_line_in_order_with_per_line_errors() {
    let f = robots_file(ROBOTS.as_bytes());
    let file = f.path().to_string_lossy();
    let body = serde_json::to_string(ROBOTS).expect("json");
    let mut input = String::new();
    let urls = ["/private/x", "/public", "/private/ok", "/example-only", "/robots.txt"];
    for (i, u) in urls.iter().enumerate() {
        let agent = if i % 2 == 0 { "OtherBot" } else { "ExampleBot" };
        input.push_str(&format!(
            "{{\"robots\":{body},\"agent\":\"{agent}\",\"url\":\"https://example.com{u}\"}}\n"
        ));
    }
    input.push_str("this is not json\n");
    input.push_str(&format!("{{\"robots\":{body},\"agent\":\"X\",\"url\":\"no url\"}}\n"));
    input.push_str("{\"robots_file\":\"/nonexistent/dir/robots.txt\",\"agent\":\"X\",\"url\":\"https://a.test/\"}\n");
    input.push_str(&format!(
        "{{\"robots_file\":{},\"agent\":\"Mozilla/5.0 (compatible; ExampleBot/0.1)\",\"url\":\"https://example.com/example-only\"}}\r\n",
        serde_json::to_string(&file).expect("json")
    ));
    input.push('\n');
    input.push_str("{\"agent\":\"X\",\"url\":\"https://a.test/\"}\n");
    input.push_str(&format!("{{\"robots\":{body},\"url\":\"https://a.test/private\"}}")); // no final newline
    let (code, out) = jsonl(&input);
    // Error lines make the exit status 2, as `--help` says (it was 0: issue 27 §13).
    assert_eq!(code, Some(2));
    assert_eq!(out.len(), 12, "{out:?}");
    use serde_json::json;
    assert_eq!(out[0], json!({"allowed": false, "line": 2, "rule": "/private"}));
    assert_eq!(out[1], json!({"allowed": true, "line": null, "rule": null}));
    assert_eq!(out[2], json!({"allowed": true, "line": 3, "rule": "/private/ok"}));
    assert_eq!(out[3], json!({"allowed": false, "line": 6, "rule": "/example-only"}));
    assert_eq!(out[4], json!({"allowed": true, "line": null, "rule": null}));
    let err =
        |i: usize| out[i]["error"].as_str().unwrap_or_else(|| panic!("{}", out[i])).to_owned();
    assert!(err(5).contains("invalid request"), "{}", err(5));
    assert!(err(6).contains("no url"), "{}", err(6));
    assert!(err(7).contains("/nonexistent/dir/robots.txt"), "{}", err(7));
    assert_eq!(out[8], json!({"allowed": false, "line": 6, "rule": "/example-only"}));
    assert!(err(9).contains("empty line"), "{}", err(9));
    assert!(err(10).contains("robots"), "{}", err(10));
    assert!(err(11).contains("agent"), "{}", err(11));
}

#[test]
fn jsonl_with_empty_input_answers_nothing() {
    let (code, out) = jsonl("");
    assert_eq!(code, Some(0));
    assert!(out.is_empty());
}

/// Issue 26.4: rules written with encoded reserved characters hold the decoded paths an origin
/// serves as the same resource, through the decoded reading; the path as sent stays Google's
/// octet-for-octet reading.
#[test]
fn as_proxy_holds_encoded_rules_against_decoded_paths() {
    let f = robots_file(
        b"User-agent: *\nDisallow: /wiki/Special%3ARandom\nDisallow: /a%2Fb\nDisallow: /x%2Cy\n",
    );
    for (url, line) in [
        ("https://example.com/wiki/Special:Random", 2),
        ("https://example.com/a/b", 3),
        ("https://example.com/x,y", 4),
        ("https://example.com/x%2cy", 4),
    ] {
        let o = check(f.path(), &["--as-proxy", url]);
        let out = stdout(&o);
        assert_eq!(o.status.code(), Some(1), "{url}: {out}");
        assert!(out.contains(&format!("line {line}")), "{url}: {out}");
        // Without --as-proxy, the literal reading: only the encoded form matches.
        let o = check(f.path(), &[url]);
        let encoded = url.contains('%');
        assert_eq!(o.status.code(), Some(if encoded { 1 } else { 0 }), "{url}: {}", stdout(&o));
    }
    // `/x%2cy`: the path as sent and the decoded reading `/x,y` now agree.
    let o = check(f.path(), &["--as-proxy", "https://example.com/x%2cy"]);
    let out = stdout(&o);
    assert!(out.contains("reading decoded: /x,y  disallowed"), "{out}");
    // Paths the rules do not name stay allowed in every reading.
    let o = check(f.path(), &["--as-proxy", "https://example.com/wiki/Special:Other"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
}

/// `check --jsonl` applies `--agent` and `--purpose` to lines that give none (a line may give
/// its own `"purposes"`), and its exit status is what `--help` says (issue 27 §13).
#[test]
fn jsonl_applies_agent_and_purpose_and_exits_as_documented() {
    use std::io::Write as _;
    let jsonl = |args: &[&str], input: &str| {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_robots-proxy"))
            .arg("check")
            .arg("--jsonl")
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let robots =
        r#""robots":"User-agent: *\nContent-Usage: train-ai=n\nUser-agent: FooBot\nDisallow: /\n""#;
    let line = |extra: &str| format!("{{{robots},\"url\":\"http://a.com/p\"{extra}}}\n");

    // --purpose: the usage preference refuses; exit 1 as for URLs.
    let (code, out) = jsonl(&["--purpose", "train-ai"], &line(",\"agent\":\"x\""));
    assert_eq!(code, Some(1), "{out}");
    let answer: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(answer["allowed"], false, "{out}");
    assert_eq!(answer["purpose"], "train-ai", "{out}");
    assert_eq!(answer["usage_line"], 2, "{out}");

    // A line's own "purposes" replace --purpose.
    let (code, out) =
        jsonl(&["--purpose", "train-ai"], &line(",\"agent\":\"x\",\"purposes\":[\"search\"]"));
    assert_eq!((code, out.trim()), (Some(0), r#"{"allowed":true,"line":null,"rule":null}"#));

    // --agent for a line without one; FooBot's group disallows everything.
    let (code, out) = jsonl(&["--agent", "FooBot"], &line(""));
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains(r#""allowed":false,"line":4"#), "{out}");

    // Every line allowed: 0. An error line: 2, and the other lines are still answered.
    let (code, _) = jsonl(&[], &line(",\"agent\":\"x\""));
    assert_eq!(code, Some(0));
    let (code, out) = jsonl(&[], &format!("{}not json\n", line(",\"agent\":\"x\"")));
    assert_eq!(code, Some(2), "{out}");
    assert_eq!(out.lines().count(), 2, "{out}");
}
