//! The archive of robots.txt versions (issue 19): a real origin whose robots.txt changes
//! between fetches, the real binary, and what `state_dir/robots-archive/` and
//! `GET /api/robots/versions` hold afterwards, across a restart, after retention, and while the
//! archive's directory takes no writes.

use std::path::Path;
use std::time::Duration;

use robots_proxy::archive::{ArchiveReader, Consequence, Window};

use super::support::{get, get_json, post_json, proxied_client, Origin, ProxyProcess};

const V1: &str = "User-agent: *\nDisallow: /v1-private\n";

/// The lowercase hex SHA-256 of `bytes`, computed here, independently of the proxy.
fn sha256_hex(bytes: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// Forgets the cached robots.txt of `origin` and makes one request through the proxy, so that
/// robots.txt is fetched again; answers the request's status.
async fn refetch(proxy: &ProxyProcess, origin: &Origin, path: &str) -> u16 {
    let (code, body) =
        post_json(&format!("{}/cache/purge?authority={}", proxy.admin(), origin.base())).await;
    assert_eq!(code, 200, "{body}");
    let resp = proxied_client(proxy.proxy_addr)
        .get(format!("{}{path}", origin.base()))
        .header("user-agent", "ArchiveBot/1.0")
        .send()
        .await
        .unwrap();
    resp.status().as_u16()
}

/// `GET /api/robots/versions?authority=A`.
async fn versions(proxy: &ProxyProcess, authority: &str) -> (u16, serde_json::Value) {
    let encoded: String = url::form_urlencoded::byte_serialize(authority.as_bytes()).collect();
    get_json(&format!("{}/api/robots/versions?authority={encoded}", proxy.admin())).await
}

/// Waits (at most 10 s) until the archive on disk holds `count` windows for `authority`, and
/// answers them.
async fn windows_on_disk(state: &Path, authority: &str, count: usize) -> Vec<Window> {
    let mut last = Vec::new();
    for _ in 0..500 {
        if let Ok(reader) = ArchiveReader::open(state) {
            last = reader.windows(authority);
            if last.len() == count {
                return last;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the archive never held {count} windows for {authority}: {last:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_archive_keeps_every_version_and_its_windows_across_a_restart() {
    let origin = Origin::start(V1).await;
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().to_str().unwrap();
    let env = [("ROBOTS_PROXY_STATE_DIR", dir)];
    let proxy = ProxyProcess::start(&[], &env);
    let authority = origin.base();

    // v1, fetched three times unchanged: one window whose last confirmation moves on.
    assert_eq!(refetch(&proxy, &origin, "/v1-private/a").await, 403);
    let first = windows_on_disk(state.path(), &authority, 1).await;
    for _ in 0..2 {
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert_eq!(refetch(&proxy, &origin, "/v1-private/a").await, 403);
    }
    // v2: not UTF-8 (a Latin-1 comment and a stray 0xff).
    let v2: &[u8] = b"# caf\xe9 \xff\nUser-agent: *\nDisallow: /v2-private\n";
    origin.set_robots_bytes(200, v2);
    assert_eq!(refetch(&proxy, &origin, "/v2-private/a").await, 403);
    // v3: the largest body the proxy reads (robots.max_body, 500 KiB), every byte kept.
    let mut v3 = b"User-agent: *\nDisallow: /v3-private\n".to_vec();
    while v3.len() < 500 * 1024 {
        v3.extend_from_slice(b"# padding to the maximum size of a robots.txt body\n");
    }
    v3.truncate(500 * 1024);
    origin.set_robots_bytes(200, &v3);
    assert_eq!(refetch(&proxy, &origin, "/v3-private/a").await, 403);
    // No file: 404 allows all, then 503 disallows all (the purge dropped any earlier copy).
    origin.set_robots(404, "not here");
    assert_eq!(refetch(&proxy, &origin, "/v3-private/a").await, 200);
    origin.set_robots(503, "down");
    assert_eq!(refetch(&proxy, &origin, "/anything").await, 403);

    let windows = windows_on_disk(state.path(), &authority, 5).await;
    let digests: Vec<Option<String>> = windows.iter().map(|w| w.sha256.clone()).collect();
    let (d1, d2, d3) = (sha256_hex(V1.as_bytes()), sha256_hex(v2), sha256_hex(&v3));
    assert_eq!(digests, [Some(d1.clone()), Some(d2.clone()), Some(d3.clone()), None, None]);
    let w = &windows;
    assert_eq!(w[0].first_fetched, first[0].first_fetched);
    assert!(w[0].last_confirmed > w[0].first_fetched, "three fetches of v1: {:?}", w[0]);
    for pair in w.windows(2) {
        assert_eq!(pair[0].replaced_at, Some(pair[1].first_fetched), "{w:#?}");
    }
    assert_eq!(w[4].replaced_at, None);
    assert_eq!((w[0].status, w[0].consequence), (Some(200), Consequence::Rules));
    assert_eq!(w[2].size, Some(500 * 1024));
    assert_eq!((w[3].status, w[3].consequence), (Some(404), Consequence::AllowAll));
    assert_eq!((w[4].status, w[4].consequence), (Some(503), Consequence::DisallowAll));
    assert_eq!((w[3].state.as_str(), w[4].state.as_str()), ("unavailable", "unreachable"));

    // Bodies byte for byte, each stored once under its digest.
    let reader = ArchiveReader::open(state.path()).unwrap();
    assert_eq!(reader.authorities(), std::slice::from_ref(&authority));
    assert_eq!(reader.body(&d1).as_deref(), Some(V1.as_bytes()));
    assert_eq!(reader.body(&d2).as_deref(), Some(v2));
    assert_eq!(reader.body(&d3).as_deref(), Some(&v3[..]));
    let bodies = walk_files(&state.path().join("robots-archive/bodies"));
    assert_eq!(bodies.len(), 3, "{bodies:?}");
    // In force at a time inside each window.
    assert_eq!(reader.in_force_at(&authority, w[1].first_fetched).unwrap().sha256, Some(d2));
    assert!(reader.in_force_at(&authority, w[0].first_fetched - Duration::from_secs(1)).is_none());

    // The admin's answer lists the same windows.
    let (code, listed) = versions(&proxy, &authority).await;
    assert_eq!(code, 200, "{listed}");
    assert_eq!(listed["windows"].as_array().unwrap().len(), 5, "{listed}");
    assert_eq!(listed["windows"][0]["sha256"], d1.as_str());
    assert_eq!(listed["windows"][3]["consequence"], "allow_all");
    assert_eq!(listed["versions"].as_array().unwrap().len(), 3, "{listed}");
    assert_eq!(listed["versions"][2]["size"], 500 * 1024);
    // A missing or bare authority is refused clearly; one with no history lists nothing.
    let (code, body) = get_json(&format!("{}/api/robots/versions", proxy.admin())).await;
    assert_eq!(code, 400, "{body}");
    assert!(body["error"].as_str().unwrap().contains("missing the authority"), "{body}");
    let (code, body) = versions(&proxy, "example.com").await;
    assert_eq!(code, 400, "{body}");
    assert!(body["error"].as_str().unwrap().contains("no scheme"), "{body}");
    let (code, body) = versions(&proxy, "http://never.example:8080").await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["windows"], serde_json::json!([]), "{body}");

    // Killed (SIGKILL) and started again on the same state_dir: the history is all there.
    drop(proxy);
    let proxy = ProxyProcess::start(&[], &env);
    let (code, again) = versions(&proxy, &authority).await;
    assert_eq!(code, 200);
    assert_eq!(again["windows"], listed["windows"], "after a restart");
}

/// Every file under `dir`, recursively.
fn walk_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk_files(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_prunes_replaced_versions_but_not_a_body_still_in_force() {
    let origin = Origin::start(V1).await;
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().to_str().unwrap();
    let env = [("ROBOTS_PROXY_STATE_DIR", dir), ("ROBOTS_PROXY_ARCHIVE__RETENTION", "1s")];
    let proxy = ProxyProcess::start(&[], &env);
    let authority = origin.base();
    let v2 = "User-agent: *\nDisallow: /v2-private\n";
    let (d1, d2) = (sha256_hex(V1.as_bytes()), sha256_hex(v2.as_bytes()));
    let body_file = |d: &str| state.path().join(format!("robots-archive/bodies/{}/{d}", &d[..2]));

    // v1, v2, then v1 again: v1's first window and v2's are replaced; v1 is in force.
    assert_eq!(refetch(&proxy, &origin, "/v1-private/a").await, 403);
    origin.set_robots(200, v2);
    assert_eq!(refetch(&proxy, &origin, "/v2-private/a").await, 403);
    super::support::wait_until("v2's body is archived", || body_file(&d2).is_file()).await;
    origin.set_robots(200, V1);
    assert_eq!(refetch(&proxy, &origin, "/v1-private/a").await, 403);

    // A second after the replacements, the pruning (every second with this retention) drops
    // both replaced windows and v2's body, and keeps v1's body: the window in force names it.
    let windows = windows_on_disk(state.path(), &authority, 1).await;
    assert_eq!(windows[0].sha256.as_deref(), Some(d1.as_str()));
    assert_eq!(windows[0].replaced_at, None);
    super::support::wait_until("v2's body is pruned", || !body_file(&d2).exists()).await;
    assert!(body_file(&d1).is_file());
    assert_eq!(
        ArchiveReader::open(state.path()).unwrap().body(&d1).as_deref(),
        Some(V1.as_bytes())
    );

    // Started again with the same state_dir and retention: the window in force is still there.
    drop(proxy);
    let proxy = ProxyProcess::start(&[], &env);
    let (code, listed) = versions(&proxy, &authority).await;
    assert_eq!(code, 200);
    assert_eq!(listed["windows"].as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed["windows"][0]["sha256"], d1.as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_archive_that_takes_no_writes_costs_no_decision_and_resumes() {
    let origin = Origin::start(V1).await;
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().to_str().unwrap();
    let proxy = ProxyProcess::start(&[], &[("ROBOTS_PROXY_STATE_DIR", dir)]);
    let authority = origin.base();
    assert_eq!(refetch(&proxy, &origin, "/v1-private/a").await, 403);
    windows_on_disk(state.path(), &authority, 1).await;

    // The authorities' directory is replaced by a file: every write of windows fails (chmod
    // would not do: the tests may run as root).
    let windows_dir = state.path().join("robots-archive/authorities");
    let aside = state.path().join("authorities-aside");
    std::fs::rename(&windows_dir, &aside).unwrap();
    std::fs::write(&windows_dir, b"in the way").unwrap();

    // Three more versions: each decided and audited as usual.
    let mut digests = Vec::new();
    for n in 2..=4 {
        let body = format!("User-agent: *\nDisallow: /v{n}-private\n");
        digests.push(sha256_hex(body.as_bytes()));
        origin.set_robots(200, &body);
        assert_eq!(refetch(&proxy, &origin, &format!("/v{n}-private/a")).await, 403);
    }
    let audit_file = state.path().join("audit.jsonl");
    let audited = |d: &str| {
        let audit = std::fs::read_to_string(&audit_file).unwrap_or_default();
        audit.lines().any(|l| l.contains(d) && l.contains("\"robots_disallow\""))
    };
    for d in &digests {
        super::support::wait_until("each block is audited", || audited(d)).await;
    }
    let (_, metrics) = get(&format!("{}/metrics", proxy.admin())).await;
    assert!(super::support::sample(&metrics, "robots_proxy_archive_write_errors_total") >= 1.0);
    assert_eq!(super::support::sample(&metrics, "robots_proxy_archive_failing"), 1.0);
    // The admin still answers from memory, every version included.
    let (_, listed) = versions(&proxy, &authority).await;
    assert_eq!(listed["windows"].as_array().unwrap().len(), 4, "{listed}");
    // Logged once, however many writes failed (retries every 2 s, and each new version).
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let warned = "robots.txt archive: cannot write";
    assert_eq!(proxy.stderr().matches(warned).count(), 1, "{}", proxy.stderr());

    // The directory is back: archiving resumes by itself, with everything kept meanwhile.
    std::fs::remove_file(&windows_dir).unwrap();
    std::fs::rename(&aside, &windows_dir).unwrap();
    let windows = windows_on_disk(state.path(), &authority, 4).await;
    let kept: Vec<String> = windows[1..].iter().filter_map(|w| w.sha256.clone()).collect();
    assert_eq!(kept, digests);
    proxy.wait_for_stderr("robots.txt archive: writing again", 1).await;
    let (_, metrics) = get(&format!("{}/metrics", proxy.admin())).await;
    assert_eq!(super::support::sample(&metrics, "robots_proxy_archive_failing"), 0.0);
    assert_eq!(proxy.stderr().matches(warned).count(), 1);
}

/// Issue 39, L2: a body overwritten with other bytes was never repaired (the proxy fetched the
/// same version again and again and left the file as it was), and `evidence --state-dir` then
/// failed (exit 2) for every time on the authority, even one decided on another version. Now
/// the next fetch of the version writes the body again, and a bad body fails only an answer
/// that needs it, naming the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_body_is_written_again_and_fails_only_the_answer_that_needs_it() {
    const V2: &str = "User-agent: *\nDisallow: /v2-private\n";
    let origin = Origin::start(V1).await;
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().to_str().unwrap();
    let proxy = ProxyProcess::start(&[], &[("ROBOTS_PROXY_STATE_DIR", dir)]);
    let authority = origin.base();
    let d1 = sha256_hex(V1.as_bytes());
    let body = state.path().join(format!("robots-archive/bodies/{}/{d1}", &d1[..2]));
    assert_eq!(refetch(&proxy, &origin, "/v1-private/a").await, 403);
    windows_on_disk(state.path(), &authority, 1).await;
    super::support::wait_until("v1's body on disk", || body.is_file()).await;
    std::fs::write(&body, b"User-agent: *\nAllow: /\n").unwrap();
    // The same version fetched again: its body is written again, whole.
    assert_eq!(refetch(&proxy, &origin, "/v1-private/b").await, 403);
    super::support::wait_until("the body written again", || {
        std::fs::read(&body).is_ok_and(|b| b == V1.as_bytes())
    })
    .await;
    // Version 2, then v1's body spoilt again with the proxy stopped.
    origin.set_robots(200, V2);
    assert_eq!(refetch(&proxy, &origin, "/v2-private/a").await, 403);
    let windows = windows_on_disk(state.path(), &authority, 2).await;
    drop(proxy);
    std::fs::write(&body, b"spoilt").unwrap();
    let at = |w: &Window| robots_proxy::robots_version::rfc3339_millis(w.first_fetched);
    let ask = |when: String| {
        let url = format!("{authority}/v1-private/x");
        let args = ["evidence", &url, "--at", &when, "--token", "ArchiveBot", "--state-dir", dir];
        super::support::run(&args, &[])
    };
    // A time under v2 does not need v1's body: answered.
    let out = ask(at(&windows[1]));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    // A time under v1 does: refused, naming the file.
    let out = ask(at(&windows[0]));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(&d1) && err.contains("do not match"), "{err}");
}

/// What `du -sB1` says the archive under `state` takes on disk.
fn du(state: &Path) -> f64 {
    let out = std::process::Command::new("du")
        .arg("-sB1")
        .arg(state.join("robots-archive"))
        .output()
        .expect("du runs");
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace().next().and_then(|n| n.parse().ok()).expect("du prints a size")
}

/// Waits (at most 10 s) until `robots_proxy_archive_bytes` is what `du` counts (a pruning pass
/// counted it), and answers the metrics text.
async fn archive_bytes_settled(proxy: &ProxyProcess, state: &Path) -> String {
    let mut text = String::new();
    for _ in 0..500 {
        text = get(&format!("{}/metrics", proxy.admin())).await.1;
        if super::support::sample(&text, "robots_proxy_archive_bytes") == du(state) {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("robots_proxy_archive_bytes never matched du ({}):\n{text}", du(state));
}

/// Issue 41, review-ops M4: `archive.max_bytes` with many robots.txt versions. Over the bound,
/// nothing that evidence needs within retention is removed (every version is within the
/// default 400 days): the archive stays over, says so in the log and in
/// `robots_proxy_archive_bytes` (what `du` counts), and `evidence` still answers for the first
/// version. With a retention the replaced versions have left, the pass removes their bodies,
/// counted, and keeps the one in force: the archive is under the bound again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_bytes_removes_only_what_left_retention_and_says_when_it_cannot() {
    let origin = Origin::start(V1).await;
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().to_str().unwrap();
    let bound = 500 * 1024;
    let env = [("ROBOTS_PROXY_STATE_DIR", dir), ("ROBOTS_PROXY_ARCHIVE__MAX_BYTES", "500KiB")];
    let proxy = ProxyProcess::start(&[], &env);
    let authority = origin.base();
    // 24 versions of about 40 KiB: about twice the bound in bodies alone.
    let versions = 24;
    let mut digests = Vec::new();
    for n in 0..versions {
        let mut body = format!("User-agent: *\nDisallow: /v{n}-private\n");
        while body.len() < 40 * 1024 {
            body.push_str(&format!("# version {n}: padding to make each body weigh something\n"));
        }
        digests.push(sha256_hex(body.as_bytes()));
        origin.set_robots(200, &body);
        assert_eq!(refetch(&proxy, &origin, &format!("/v{n}-private/a")).await, 403);
    }
    let windows = windows_on_disk(state.path(), &authority, versions).await;
    let bodies = || walk_files(&state.path().join("robots-archive/bodies")).len();
    super::support::wait_until("every body written", || bodies() == versions).await;
    // Counted as they are written, before any pruning pass.
    let (_, metrics) = get(&format!("{}/metrics", proxy.admin())).await;
    assert!(super::support::sample(&metrics, "robots_proxy_archive_bytes") > bound as f64);
    assert_eq!(super::support::sample(&metrics, "robots_proxy_archive_max_bytes"), bound as f64);

    // Started again: the pass at the start counts the archive (as du does), finds it over the
    // bound with nothing retention lets go, removes nothing and says so.
    drop(proxy);
    let proxy = ProxyProcess::start(&[], &env);
    let metrics = archive_bytes_settled(&proxy, state.path()).await;
    assert!(super::support::sample(&metrics, "robots_proxy_archive_bytes") > bound as f64);
    assert_eq!(super::support::sample(&metrics, "robots_proxy_archive_bodies_removed_total"), 0.0);
    proxy.wait_for_stderr("over archive.max_bytes with only what evidence needs", 1).await;
    assert_eq!(bodies(), versions, "nothing within retention is removed for size");
    let first = robots_proxy::robots_version::rfc3339_millis(windows[0].first_fetched);
    let url = format!("{authority}/v0-private/x");
    let args = ["evidence", &url, "--at", &first, "--token", "ArchiveBot", "--state-dir", dir];
    let out = super::support::run(&args, &[]);
    let said = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "the first version still answers: {said}{err}");
    assert!(said.contains(&digests[0]), "{said}");

    // A retention every replaced version has left: the pass at the start removes their
    // bodies (counted), keeps the one in force, and the archive is under the bound.
    drop(proxy);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let short = [env[0], env[1], ("ROBOTS_PROXY_ARCHIVE__RETENTION", "1s")];
    let proxy = ProxyProcess::start(&[], &short);
    let metrics = archive_bytes_settled(&proxy, state.path()).await;
    let removed = super::support::sample(&metrics, "robots_proxy_archive_bodies_removed_total");
    assert_eq!(removed, (versions - 1) as f64, "{metrics}");
    assert!(super::support::sample(&metrics, "robots_proxy_archive_bytes") <= bound as f64);
    let left = walk_files(&state.path().join("robots-archive/bodies"));
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(left[0].ends_with(digests[versions - 1].as_str()), "the body in force stays");
    assert!(!proxy.stderr().contains("over archive.max_bytes"), "{}", proxy.stderr());
}

/// Issue 39, L2: one authority file that does not parse failed `evidence --state-dir` for
/// every authority (`ArchiveReader::open` read them all or nothing), and every window's body
/// was read and checked whatever time was asked about. Now the bad file is skipped and named
/// (and its own authority's question says that its file is the one skipped), the proxy counts
/// it in `robots_proxy_archive_unusable_files`, and only the body of the window asked about is
/// read: another version's body replaced by a FIFO, which blocks whoever opens it, costs the
/// answer nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evidence_skips_a_corrupt_authority_file_and_reads_only_the_body_it_asks_about() {
    const VA: &str = "User-agent: *\nDisallow: /a-private\n";
    const V2: &str = "User-agent: *\nDisallow: /v2-private\n";
    let a = Origin::start(VA).await;
    let b = Origin::start(V1).await;
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().to_str().unwrap();
    let env = [("ROBOTS_PROXY_STATE_DIR", dir)];
    let proxy = ProxyProcess::start(&[], &env);
    assert_eq!(refetch(&proxy, &a, "/a-private/x").await, 403);
    assert_eq!(refetch(&proxy, &b, "/v1-private/x").await, 403);
    b.set_robots(200, V2);
    assert_eq!(refetch(&proxy, &b, "/v2-private/x").await, 403);
    let (auth_a, auth_b) = (a.base(), b.base());
    let windows_a = windows_on_disk(state.path(), &auth_a, 1).await;
    let windows_b = windows_on_disk(state.path(), &auth_b, 2).await;
    let body = |d: &str| state.path().join(format!("robots-archive/bodies/{}/{d}", &d[..2]));
    let (d1, d2) = (sha256_hex(V1.as_bytes()), sha256_hex(V2.as_bytes()));
    super::support::wait_until("every body written", || {
        body(&d1).is_file() && body(&d2).is_file() && body(&sha256_hex(VA.as_bytes())).is_file()
    })
    .await;
    drop(proxy);

    // a's authority file cut short; b's first version's body a FIFO.
    let file_a = state
        .path()
        .join(format!("robots-archive/authorities/{}.json", sha256_hex(auth_a.as_bytes())));
    let text = std::fs::read(&file_a).unwrap();
    std::fs::write(&file_a, &text[..text.len() / 2]).unwrap();
    std::fs::remove_file(body(&d1)).unwrap();
    let made = std::process::Command::new("mkfifo").arg(body(&d1)).status().unwrap();
    assert!(made.success());

    let reader = ArchiveReader::open(state.path()).expect("one bad file does not fail the rest");
    assert_eq!(reader.authorities(), std::slice::from_ref(&auth_b));
    assert_eq!(reader.skipped().len(), 1, "{:?}", reader.skipped());
    assert_eq!(reader.skipped()[0].path, file_a);
    assert!(reader.skipped_file_of(&auth_a).is_some() && reader.skipped_file_of(&auth_b).is_none());

    let at = |w: &Window| robots_proxy::robots_version::rfc3339_millis(w.first_fetched);
    let ask = |url: String, when: String| {
        let bin = env!("CARGO_BIN_EXE_robots-proxy");
        let args = ["evidence", &url, "--at", &when, "--token", "ArchiveBot", "--state-dir", dir];
        std::process::Command::new("timeout")
            .arg("20")
            .arg(bin)
            .args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    // b under v2: answered at once (v1's FIFO is never opened), a's file named.
    let out = ask(format!("{auth_b}/v2-private/y"), at(&windows_b[1]));
    let (said, err) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{said}{err}");
    assert!(said.contains(&d2), "{said}");
    let name = file_a.file_name().unwrap().to_str().unwrap();
    assert!(
        err.contains("skipped") && err.contains(name) && err.contains("does not parse"),
        "{err}"
    );
    assert!(!err.contains("the file of"), "b's own file is fine: {err}");
    // a: nothing known from this archive, and the warning says its own file is the skipped one.
    let out = ask(format!("{auth_a}/a-private/y"), at(&windows_a[0]));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("the file of {auth_a}")), "{err}");

    // The proxy counts the file it cannot use (its first pruning pass, at the start).
    std::fs::remove_file(body(&d1)).unwrap();
    let proxy = ProxyProcess::start(&[], &env);
    let mut unusable = 0.0;
    for _ in 0..250 {
        let (_, metrics) = get(&format!("{}/metrics", proxy.admin())).await;
        unusable = super::support::sample(&metrics, "robots_proxy_archive_unusable_files");
        if unusable == 1.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(unusable, 1.0, "{}", proxy.stderr());
}
