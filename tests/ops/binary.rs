//! The binary: `config check`, reload on SIGHUP, graceful shutdown on SIGTERM, `health`.

use std::path::Path;
use std::time::Duration;

use futures_util::StreamExt;

use super::support::{
    get, get_json, proxied_client, run, sample, write_atomically, KeepAlive, Origin, ProxyProcess,
    SLOW_CHUNK,
};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn config_check_prints_the_effective_layered_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.toml");
    std::fs::write(&file, "[admin]\nlisten = \"127.0.0.1:9191\"\n[robots]\nmax_age = \"12h\"\n")
        .unwrap();
    let file_arg = file.to_str().unwrap();
    let out = run(
        &["config", "check", "--config", file_arg, "--listen", "127.0.0.1:3128"],
        &[
            ("ROBOTS_PROXY_ROBOTS__MAX_BODY", "1MiB"),
            // Not ours: ignored, whatever it says.
            ("ROBOTS_PROXYX", "1"),
            ("HTTP_PROXY", "http://127.0.0.1:1"),
        ],
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    assert!(stdout.contains("[admin]\nlisten = \"127.0.0.1:9191\""), "{stdout}");
    assert!(stdout.contains("max_age = \"12h\""), "file: {stdout}");
    assert!(stdout.contains("max_body = \"1MiB\""), "environment: {stdout}");
    assert!(stdout.contains("listen = \"127.0.0.1:3128\""), "flag: {stdout}");
    assert!(stdout.contains("fetch_timeout = \"20s\""), "defaults: {stdout}");
    // The output is itself a valid configuration file.
    let again = dir.path().join("again.toml");
    std::fs::write(&again, &stdout).unwrap();
    let out2 = run(&["config", "check", "--config", again.to_str().unwrap()], &[]);
    assert!(out2.status.success(), "{}", text(&out2.stderr));
    assert_eq!(text(&out2.stdout), stdout);
}

#[test]
fn config_check_names_the_key_and_its_source() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.toml");
    std::fs::write(&file, "[admin]\nlistn = \"127.0.0.1:9191\"\n").unwrap();
    let out = run(&["config", "check", "--config", file.to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains(&format!("admin.listn (from file {})", file.display())), "{stderr}");
    assert!(stderr.contains("did you mean admin.listen?"), "{stderr}");

    let out = run(&["config", "check"], &[("ROBOTS_PROXY_ROBOTS__MAX_AGE", "forever")]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("robots.max_age (from environment variable ROBOTS_PROXY_ROBOTS__MAX_AGE)"),
        "{stderr}"
    );

    let out = run(
        &["config", "check", "--admin-listen", "127.0.0.1:8080"],
        &[("ROBOTS_PROXY_PROXY__LISTEN", "127.0.0.1:8080")],
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("admin.listen (from the command line)"), "{stderr}");
}

/// The configuration file of the reload test: tokens from the header and the default only.
fn policy_config(state: &Path, default_token: Option<&str>, extra: &str) -> String {
    let token = default_token.map_or(String::new(), |t| format!("default_token = \"{t}\"\n"));
    format!(
        "state_dir = {state:?}\n[policy]\ntoken_sources = [\"header\", \"default\"]\n{token}\
         [https]\nmode = \"reject\"\n{extra}"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_the_policy_keeps_connections_and_refuses_a_bad_file() {
    let origin = Origin::start("User-agent: FooBot\nDisallow: /private\n").await;
    let state = tempfile::tempdir().unwrap();
    let file = state.path().join("robots-proxy.toml");
    write_atomically(&file, &policy_config(state.path(), None, ""));
    let proxy = ProxyProcess::start(&["--config", file.to_str().unwrap()], &[]);
    let url = format!("{}/private/1", origin.base());

    // No token: only `*` groups apply, and there are none.
    let mut kept = KeepAlive::connect(proxy.proxy_addr).await;
    assert_eq!(kept.get(&url).await.0, 200);

    // The default token becomes FooBot, whose group disallows /private.
    write_atomically(&file, &policy_config(state.path(), Some("FooBot"), ""));
    let audit = state.path().join("audit.jsonl");
    let rotated = state.path().join("audit.jsonl.1");
    std::fs::rename(&audit, &rotated).unwrap();
    proxy.signal("HUP");
    proxy.wait_for_stderr("SIGHUP: configuration reloaded", 1).await;
    let (status, body) = kept.get(&url).await;
    assert_eq!(status, 403, "the connection opened before the reload is still served: {body}");
    assert!(body.contains("FooBot"), "{body}");
    let fresh = proxied_client(proxy.proxy_addr).get(&url).send().await.unwrap();
    assert_eq!(fresh.status(), 403);
    assert_eq!(origin.robots_hits(), 1, "the robots cache survived the reload");
    assert!(audit.exists(), "the audit log was reopened at its path after rotation");

    // A broken file is refused as a whole; the running configuration stays.
    write_atomically(&file, &policy_config(state.path(), Some("Foo Bot"), "[nope]\nx = 1\n"));
    proxy.signal("HUP");
    proxy.wait_for_stderr("the new configuration is refused", 1).await;
    let log = proxy.stderr();
    assert!(log.contains("policy.default_token") || log.contains("nope"), "{log}");
    assert_eq!(kept.get(&url).await.0, 403, "FooBot's rules still apply");
    let (_, metrics) = get(&format!("{}/metrics", proxy.admin())).await;
    let last = "robots_proxy_config_last_reload_successful";
    assert_eq!(sample(&metrics, last), 0.0, "a refused reload: the file is not what runs");

    // A change that needs a restart is reported, and the rest applied: the policy and the
    // log level (debug shows robots.txt fetches, which info does not).
    assert!(!proxy.stderr().contains("fetching robots.txt"), "{}", proxy.stderr());
    let extra = "[robots]\nmax_age = \"1h\"\n[log]\nlevel = \"info,robots_proxy=debug\"\n";
    write_atomically(&file, &policy_config(state.path(), None, extra));
    proxy.signal("HUP");
    proxy.wait_for_stderr("SIGHUP: configuration reloaded", 2).await;
    assert!(proxy.stderr().contains("robots.max_age"), "{}", proxy.stderr());
    assert_eq!(kept.get(&url).await.0, 200, "no default token any more");
    let other = Origin::start("").await;
    assert_eq!(kept.get(&format!("{}/x", other.base())).await.0, 200);
    proxy.wait_for_stderr("fetching robots.txt", 1).await;

    let (_, metrics) = get(&format!("{}/metrics", proxy.admin())).await;
    assert_eq!(sample(&metrics, r#"robots_proxy_config_reloads_total{result="applied"}"#), 2.0);
    assert_eq!(sample(&metrics, r#"robots_proxy_config_reloads_total{result="refused"}"#), 1.0);
    assert_eq!(sample(&metrics, last), 1.0, "applied again");
    assert_eq!(origin.robots_hits(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_an_in_flight_download_finish_then_exits_0() {
    // About three seconds of download: time enough to see the listener closed meanwhile.
    const CHUNKS: usize = 30;
    let origin = Origin::start("User-agent: *\nDisallow: /private\n").await;
    let state = tempfile::tempdir().unwrap();
    let state_dir = state.path().to_str().unwrap();
    let mut proxy = ProxyProcess::start(
        &[],
        &[
            ("ROBOTS_PROXY_STATE_DIR", state_dir),
            ("ROBOTS_PROXY_HTTPS__MODE", "reject"),
            ("ROBOTS_PROXY_PROXY__SHUTDOWN_GRACE", "30s"),
            ("ROBOTS_PROXY_AUDIT__FSYNC", "never"),
        ],
    );
    let client = proxied_client(proxy.proxy_addr);
    let blocked = client.get(format!("{}/private/x", origin.base())).send().await.unwrap();
    assert_eq!(blocked.status(), 403);

    let resp = client.get(format!("{}/slow/{CHUNKS}", origin.base())).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let mut body = resp.bytes_stream();
    let mut received = body.next().await.unwrap().unwrap().len();
    proxy.signal("TERM");
    proxy.wait_for_stderr("SIGTERM: stopping", 1).await;

    // While the download goes on: no new connections, and not ready.
    let addr = proxy.proxy_addr;
    let mut refused = false;
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(addr).await.is_err() {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(refused, "the listener is closed after SIGTERM");
    let (status, ready) = get_json(&format!("{}/readyz", proxy.admin())).await;
    assert_eq!(status, 503, "{ready}");

    while let Some(chunk) = body.next().await {
        received += chunk.expect("the download is not cut off").len();
    }
    assert_eq!(received, CHUNKS * SLOW_CHUNK, "the whole body arrived");
    let status = proxy.wait_exit(Duration::from_secs(60)).await;
    assert_eq!(status.code(), Some(0), "stderr:\n{}", proxy.stderr());
    let audit = std::fs::read_to_string(state.path().join("audit.jsonl")).unwrap();
    assert!(audit.contains("/private/x"), "the block was flushed to the audit log: {audit}");
    assert!(proxy.stderr().contains("robots-proxy stopped"), "{}", proxy.stderr());
}

/// `proxy.shutdown_delay` (ops M3): after SIGTERM, `/readyz` answers 503 at once while the
/// listener still accepts and serves new connections (a load balancer or Kubernetes endpoints
/// take the instance out meanwhile); after the delay it closes and the process exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_with_a_shutdown_delay_keeps_accepting_while_not_ready() {
    let origin = Origin::start("User-agent: *\nDisallow: /private\n").await;
    let mut proxy = ProxyProcess::start(
        &[],
        &[("ROBOTS_PROXY_HTTPS__MODE", "reject"), ("ROBOTS_PROXY_PROXY__SHUTDOWN_DELAY", "3s")],
    );
    let mut ready = false;
    for _ in 0..200 {
        ready = get_json(&format!("{}/readyz", proxy.admin())).await.0 == 200;
        if ready {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(ready, "never ready:\n{}", proxy.stderr());
    let stopping = std::time::Instant::now();
    proxy.signal("TERM");
    proxy.wait_for_stderr("SIGTERM: stopping", 1).await;
    let (status, ready) = get_json(&format!("{}/readyz", proxy.admin())).await;
    assert_eq!(status, 503, "{ready}");
    assert_eq!(ready["draining"], true, "{ready}");
    // A new connection, after SIGTERM: accepted and served.
    let fresh = proxied_client(proxy.proxy_addr);
    let resp = fresh.get(format!("{}/page", origin.base())).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert!(stopping.elapsed() < Duration::from_secs(3), "the test was too slow to tell");
    let status = proxy.wait_exit(Duration::from_secs(30)).await;
    assert_eq!(status.code(), Some(0), "stderr:\n{}", proxy.stderr());
    assert!(stopping.elapsed() >= Duration::from_secs(3), "it stopped before the delay");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_subcommand_probes_the_admin_listener() {
    let state = tempfile::tempdir().unwrap();
    let state_dir = state.path().to_str().unwrap();
    let proxy = ProxyProcess::start(
        &[],
        &[("ROBOTS_PROXY_STATE_DIR", state_dir), ("ROBOTS_PROXY_HTTPS__MODE", "reject")],
    );
    let healthz = format!("{}/healthz", proxy.admin());
    let out = run(&["health", "--url", &healthz], &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("200"), "{}", text(&out.stdout));

    // Without --url: /healthz on admin.listen, from the configuration.
    let admin = proxy.admin_addr.to_string();
    let out = run(&["health"], &[("ROBOTS_PROXY_ADMIN__LISTEN", &admin)]);
    assert!(out.status.success(), "{}", text(&out.stderr));

    let out = run(&["health", "--url", &format!("{}/nothing-here", proxy.admin())], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("404"), "{}", text(&out.stderr));

    // A port nobody listens on: bind one, note it, close it.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let out = run(&["health", "--url", &format!("http://{closed}/healthz")], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("cannot connect"), "{}", text(&out.stderr));
}

/// A reload refuses what `serve` would refuse: a reloadable duration past its bound used to be
/// applied, and the next slow response body (or audit record) panicked (issue 27 §8).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_refuses_durations_past_their_bounds_and_keeps_serving() {
    let origin = Origin::start("User-agent: *\nDisallow:\n").await;
    let state = tempfile::tempdir().unwrap();
    let file = state.path().join("robots-proxy.toml");
    write_atomically(&file, &policy_config(state.path(), None, ""));
    let proxy = ProxyProcess::start(&["--config", file.to_str().unwrap()], &[]);
    let client = proxied_client(proxy.proxy_addr);
    let slow = format!("{}/slow/3", origin.base());
    let body = client.get(&slow).send().await.unwrap().bytes().await.unwrap();
    assert_eq!(body.len(), 3 * SLOW_CHUNK);

    let extra = "[upstream]\nbody_idle_timeout = \"500000000000years\"\n\
                 [audit]\nfsync_interval = \"500000000000years\"\n";
    write_atomically(&file, &policy_config(state.path(), None, extra));
    proxy.signal("HUP");
    proxy.wait_for_stderr("the new configuration is refused", 1).await;
    let log = proxy.stderr();
    assert!(log.contains("upstream.body_idle_timeout"), "{log}");
    assert!(log.contains("audit.fsync_interval"), "{log}");
    assert!(log.contains("is more than 1day"), "{log}");

    let body = client.get(&slow).send().await.unwrap().bytes().await.unwrap();
    assert_eq!(body.len(), 3 * SLOW_CHUNK, "the running configuration still serves");
    let (status, ready) = get_json(&format!("{}/readyz", proxy.admin())).await;
    assert_eq!(status, 200, "the audit writer is alive: {ready}");
    assert!(!proxy.stderr().contains("panicked"), "{}", proxy.stderr());
}

/// `config check` and `serve` refuse the values that used to pass the check and then crash
/// `serve` at start (exit 101) or on every connection (issue 27 §8, §9).
#[test]
fn config_check_and_serve_refuse_huge_counts_naming_the_key() {
    let state = tempfile::tempdir().unwrap();
    let state_dir = state.path().to_str().unwrap();
    for (var, key) in [
        ("ROBOTS_PROXY_AUDIT__QUEUE_CAPACITY", "audit.queue_capacity"),
        ("ROBOTS_PROXY_LIMITS__MAX_HEADERS", "limits.max_headers"),
    ] {
        let env = [("ROBOTS_PROXY_STATE_DIR", state_dir), (var, "9223372036854775807")];
        for args in [
            &["config", "check"][..],
            &["serve", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"],
        ] {
            let out = run(args, &env);
            let stderr = text(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{args:?} {var}: {stderr}");
            assert!(
                stderr.contains(&format!("{key} (from environment variable {var})")),
                "{stderr}"
            );
            assert!(stderr.contains("is more than"), "{stderr}");
        }
    }
}

/// Exit statuses are the same across subcommands (docs/check.md, "Exit status"; issue 27 §13): 1 for an
/// invalid configuration in every command that reads it, 2 for a bad argument.
#[test]
fn exit_statuses_are_consistent_across_subcommands() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().to_str().unwrap();
    let bad_config = [("ROBOTS_PROXY_ROBOTS__MAX_AGE", "forever")];
    for args in [
        &["config", "check"][..],
        &["serve", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"],
        &["health"],
        &["ca", "init"],
        &["keys", "list"],
        &["keys", "new", "k1"],
        &["keys", "export"],
    ] {
        let out = run(args, &bad_config);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", text(&out.stderr));
        assert!(text(&out.stderr).contains("robots.max_age"), "{args:?}: {}", text(&out.stderr));
    }
    for args in [
        &["keys", "new", "../x", "--dir", keys][..],
        &["user", "hash", "a:b"],
        &["check", "--robots", "/nonexistent/robots.txt", "http://a.test/"],
        &["serve", "--no-such-flag"],
    ] {
        let out = run(args, &[]);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out.stderr));
    }
}

/// `keys list` reads `signing.keys` from the configuration, so without `--config` it finds no
/// keys even when `keys new` made some: it says where they are and how to list them (issue 28
/// §10).
#[test]
fn keys_list_without_a_configuration_names_the_key_files_it_did_not_list() {
    let state = tempfile::tempdir().unwrap();
    let env = [("ROBOTS_PROXY_STATE_DIR", state.path().to_str().unwrap())];
    let made = run(&["keys", "new", "k1"], &env);
    assert!(made.status.success(), "{}", text(&made.stderr));
    let out = run(&["keys", "list"], &env);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(said.contains("no keys in signing.keys"), "{said}");
    assert!(said.contains("1 key file(s) that signing.keys does not name: k1"), "{said}");
    assert!(said.contains("--config"), "{said}");
}

/// `limits.transparent_huge_pages = false`, the default, turns transparent huge pages off for
/// the serving process (`src/main/serve.rs`); with `true` the process keeps what it inherited.
/// Read back from the kernel (`THP_enabled` in `/proc/PID/status`, Linux 5.0 and later).
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_transparent_huge_pages_off_by_default_and_kept_with_true() {
    fn thp_enabled(pid: &str) -> Option<String> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let line = status.lines().find(|l| l.starts_with("THP_enabled:"))?;
        line.split_whitespace().nth(1).map(str::to_owned)
    }
    let Some(own) = thp_enabled("self") else {
        crate::skip::report("this kernel does not report THP_enabled in /proc/PID/status");
        return;
    };
    let kept = ProxyProcess::start(&[], &[("ROBOTS_PROXY_LIMITS__TRANSPARENT_HUGE_PAGES", "true")]);
    let default = ProxyProcess::start(&[], &[]);
    for proxy in [&kept, &default] {
        assert_eq!(get(&format!("{}/healthz", proxy.admin())).await.0, 200);
    }
    assert_eq!(thp_enabled(&default.pid().to_string()).as_deref(), Some("0"));
    assert_eq!(thp_enabled(&kept.pid().to_string()), Some(own));
}

/// Review-ops low 10: logrotate's `postrotate` sent SIGHUP, which also reloads the
/// configuration, so a nightly rotation applied (or refused) whatever edit was on disk.
/// SIGUSR1 reopens the audit log and nothing else: the rotated file keeps the records before,
/// a new file at `audit.path` takes the ones after, and a changed configuration on disk is
/// neither applied nor refused (no reload is counted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigusr1_reopens_the_audit_log_without_reading_the_configuration() {
    let origin = Origin::start("User-agent: FooBot\nDisallow: /private\n").await;
    let state = tempfile::tempdir().unwrap();
    let file = state.path().join("robots-proxy.toml");
    write_atomically(&file, &policy_config(state.path(), Some("FooBot"), ""));
    let proxy = ProxyProcess::start(&["--config", file.to_str().unwrap()], &[]);
    let client = proxied_client(proxy.proxy_addr);
    let url = |n: u32| format!("{}/private/{n}", origin.base());
    assert_eq!(client.get(url(1)).send().await.unwrap().status(), 403);
    let audit = state.path().join("audit.jsonl");
    super::support::wait_until("the first block is audited", || {
        std::fs::read_to_string(&audit).is_ok_and(|t| t.contains("/private/1"))
    })
    .await;

    // An edit half done (FooBot no longer the default, and a section that does not exist),
    // then the rotation: rename, SIGUSR1.
    write_atomically(&file, &policy_config(state.path(), None, "[nope]\nx = 1\n"));
    let rotated = state.path().join("audit.jsonl.1");
    std::fs::rename(&audit, &rotated).unwrap();
    proxy.signal("USR1");
    proxy.wait_for_stderr("SIGUSR1: audit log reopened", 1).await;
    assert_eq!(client.get(url(2)).send().await.unwrap().status(), 403, "FooBot's rules stay");
    super::support::wait_until("the next block goes to the new file", || {
        std::fs::read_to_string(&audit).is_ok_and(|t| t.contains("/private/2"))
    })
    .await;
    let old = std::fs::read_to_string(&rotated).unwrap();
    assert!(old.contains("/private/1") && !old.contains("/private/2"), "{old}");
    let (_, metrics) = get(&format!("{}/metrics", proxy.admin())).await;
    assert_eq!(sample(&metrics, r#"robots_proxy_config_reloads_total{result="applied"}"#), 0.0);
    assert_eq!(sample(&metrics, r#"robots_proxy_config_reloads_total{result="refused"}"#), 0.0);
    assert_eq!(sample(&metrics, "robots_proxy_config_last_reload_successful"), 1.0);
    let log = proxy.stderr();
    assert!(!log.contains("configuration is refused") && !log.contains("nope"), "{log}");
    assert!(!log.contains("configuration reloaded"), "{log}");
    // Reopened by the signal, not found replaced at the next write.
    assert_eq!(sample(&metrics, "robots_proxy_audit_file_replaced_total"), 0.0, "{log}");
    // The two files are one chain, in order.
    let out = super::support::run(
        &["audit", "verify", rotated.to_str().unwrap(), audit.to_str().unwrap()],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
}
