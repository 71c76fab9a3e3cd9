//! The README's first commands, run as a new user runs them: its shell blocks through `sh`, with
//! the proxy variables they export and the curl they call, and its Python snippet through python3
//! with requests. Only the addresses change: `127.0.0.1:8080` becomes the proxy's ephemeral port
//! and `example.com` a loopback origin (plain HTTP, or HTTPS with a test CA the proxy trusts
//! upstream). The block example of a 403 is compared with what the proxy answers.

use std::path::Path;
use std::process::Command;

use super::support::ProxyProcess;
use crate::proxy::support::Origin;
use crate::proxy::tls_support::TlsOrigin;

const README: &str = include_str!("../../README.md");

/// robots.txt of the README's example: the `*` group on line 2, its rule on line 3.
/// The README's robots.txt: its block example's `Version` line is the SHA-256 of these bytes.
const ROBOTS: &str = "# example.com\nUser-agent: *\nDisallow: /private\n";

/// The first ```` ```lang ```` block after the heading line `heading`.
fn block_after(heading: &str, lang: &str) -> Vec<String> {
    let start = README.find(&format!("\n{heading}\n")).unwrap_or_else(|| panic!("{heading}"));
    let rest = &README[start..];
    let open = rest.find(&format!("```{lang}\n")).expect("a code block") + lang.len() + 4;
    let close = rest[open..].find("```").expect("the block's end");
    rest[open..open + close].lines().map(str::to_owned).collect()
}

/// Whether curl is installed (a failure under CI, a skip elsewhere).
fn have_curl() -> bool {
    let ok = Command::new("curl").arg("--version").output().is_ok_and(|o| o.status.success());
    if !ok {
        crate::skip::missing("curl", "apt-get install curl");
    }
    ok
}

/// The proxy as a user starts it (`robots-proxy serve`: built-in defaults) in `home`, whose
/// `state/` is its state directory, trusting `origin_ca` for origins and letting CONNECT reach
/// `tls_port` (a test origin is not on 443).
fn start_proxy(home: &Path, origin_ca: &str, tls_port: u16) -> ProxyProcess {
    let ca_file = home.join("origin-ca.pem");
    std::fs::write(&ca_file, origin_ca).unwrap();
    let state = home.join("state");
    ProxyProcess::start(
        &[],
        &[
            ("ROBOTS_PROXY_STATE_DIR", state.to_str().unwrap()),
            ("ROBOTS_PROXY_HTTPS__UPSTREAM_CA_FILE", ca_file.to_str().unwrap()),
            ("ROBOTS_PROXY_HTTPS__CONNECT_PORTS", &format!("[{tls_port}]")),
        ],
    )
}

/// Where the README's addresses point in a test: the proxy, the plain and the TLS origin.
#[derive(Clone)]
struct Local {
    proxy: String,
    plain: String,
    tls: String,
}

impl Local {
    /// A README line with its addresses made local and its trailing comment removed.
    fn localise(&self, line: &str) -> String {
        let code = line.split(" #").next().unwrap_or(line).trim_end();
        code.replace("127.0.0.1:8080", &self.proxy)
            .replace("http://example.com", &self.plain)
            .replace("https://example.com", &self.tls)
    }
}

/// Runs the `export` lines and each `curl` line of `block` in one `sh` in `home`, with nothing
/// of this process's environment but `PATH`; each curl prints its status code. The commands
/// (as run) and their statuses.
fn run_block(block: &[String], home: &Path, local: &Local) -> Vec<(String, u16)> {
    let mut script = String::from("set -e\n");
    let mut commands = Vec::new();
    for line in block {
        let local = local.localise(line);
        if local.starts_with("export ") {
            script.push_str(&local);
            script.push('\n');
        } else if local.starts_with("curl ") {
            script.push_str(&format!("{local} -sS -o /dev/null -w '%{{http_code}}\\n'\n"));
            commands.push(local);
        } else {
            assert!(
                local.is_empty() || local.starts_with("robots-proxy serve"),
                "a line this test does not know how to run: {line:?}"
            );
        }
    }
    let out = Command::new("sh")
        .args(["-c", &script])
        .current_dir(home)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the README's commands failed:\n{script}\nstdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let codes: Vec<u16> = stdout.lines().map(|l| l.trim().parse().unwrap()).collect();
    assert_eq!(codes.len(), commands.len(), "one status per curl: {stdout}");
    commands.into_iter().zip(codes).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_commands_work_through_the_variables_they_export() {
    if !have_curl() {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let plain = Origin::start(ROBOTS).await;
    let tls = TlsOrigin::start(ROBOTS).await;
    let proxy = start_proxy(home.path(), &tls.ca.pem, tls.port());
    let home = home.path().to_owned();
    let local = Local { proxy: proxy.proxy_addr.to_string(), plain: plain.base(), tls: tls.base() };
    // Off the runtime's threads: the origins answer on them while curl runs.
    let run = |block: Vec<String>| {
        let (home, local) = (home.clone(), local.clone());
        tokio::task::spawn_blocking(move || run_block(&block, &home, &local))
    };

    // "Using it": the first curl goes through the proxy only because of the variables exported
    // before it, and robots.txt disallows its path.
    let ran = run(block_after("## Using it", "sh")).await.unwrap();
    assert_eq!(ran.len(), 2, "{ran:?}");
    assert!(ran[0].0.contains("/private/"), "{ran:?}");
    assert_eq!(ran[0].1, 403, "the first example is refused by the proxy: {ran:?}");
    assert_eq!(ran[1].1, 200, "{ran:?}");
    assert_eq!(plain.hits("/private/page"), 0, "the refused request never reached the origin");

    // "Quick start for crawlers": plain HTTP and intercepted HTTPS, through the variables.
    let ran = run(block_after("### Quick start for crawlers", "sh")).await.unwrap();
    assert_eq!(ran.len(), 2, "{ran:?}");
    assert!(ran.iter().all(|(_, status)| *status == 200), "{ran:?}");
    let intercepted = tls.seen_for("/");
    assert_eq!(intercepted.len(), 1, "the HTTPS request reached the origin through the proxy");
    assert!(
        intercepted[0].headers.get("user-agent").is_some_and(|ua| ua == "ExampleBot/1.0"),
        "{intercepted:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_python_snippet_is_refused_with_its_proxy_status() {
    let has_requests = Command::new("python3").args(["-c", "import requests"]).status();
    if !has_requests.is_ok_and(|s| s.success()) {
        crate::skip::missing("python3 with requests", "apt-get install python3-requests");
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let plain = Origin::start(ROBOTS).await;
    let tls = TlsOrigin::start(ROBOTS).await;
    let proxy = start_proxy(home.path(), &tls.ca.pem, tls.port());
    let local = Local { proxy: proxy.proxy_addr.to_string(), plain: plain.base(), tls: tls.base() };
    let snippet: Vec<String> = block_after("### Quick start for crawlers", "python")
        .iter()
        .map(|line| local.localise(line))
        .collect();
    let script = format!("{}\nprint('status', r.status_code)\n", snippet.join("\n"));
    let dir = home.path().to_owned();
    let out = tokio::task::spawn_blocking(move || {
        Command::new("python3")
            .args(["-c", &script])
            .current_dir(dir)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        stdout.contains("robots.txt says no: robots-proxy;error=http_request_denied"),
        "{stdout}"
    );
    assert!(stdout.contains("status 403"), "{stdout}");
    assert!(
        tls.seen_for("/private/page").is_empty(),
        "the refused request never reached the origin"
    );
}

/// `(fresh, 12s old)` → `(fresh, Ns old)`: the age is the one thing that varies.
/// `text` with the robots.txt's age and fetch time (which differ from run to run) replaced
/// by `N` and `T`. The digest is kept: the test serves the README's robots.txt, byte for byte.
fn without_age(text: &str) -> String {
    text.lines()
        .map(|line| match line.find("s old)") {
            Some(end) => {
                let start = line[..end].trim_end_matches(|c: char| c.is_ascii_digit()).len();
                format!("{}N{}", &line[..start], &line[end..])
            }
            None => match line.find(", fetched ") {
                Some(at) if line.starts_with("Version:") => format!("{}, fetched T", &line[..at]),
                _ => line.to_owned(),
            },
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_block_example_is_what_the_proxy_answers() {
    let plain = Origin::start(ROBOTS).await;
    let proxy = ProxyProcess::start(&[], &[]);
    let example = block_after("### What a block looks like", "");
    let (status_line, rest) = example.split_first().unwrap();
    assert_eq!(status_line, "HTTP/1.1 403 Forbidden");
    let blank = rest.iter().position(String::is_empty).expect("a blank line after the head");
    let (head, body) = (&rest[..blank], &rest[blank + 1..]);
    let url = body
        .iter()
        .find_map(|l| l.strip_prefix("URL:"))
        .expect("a URL line")
        .trim()
        .replace("http://example.com", &plain.base());

    let resp = super::support::proxied_client(proxy.proxy_addr)
        .get(&url)
        .header("user-agent", "ExampleBot/1.0")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    for line in head {
        let (name, value) = line.split_once(": ").unwrap();
        assert_eq!(resp.headers()[name], value, "the README's {name}");
    }
    let got = resp.text().await.unwrap();
    let want = format!("{}\n", body.join("\n")).replace("http://example.com", &plain.base());
    assert_eq!(without_age(&got), without_age(&want), "the README's block example is out of date");
}
