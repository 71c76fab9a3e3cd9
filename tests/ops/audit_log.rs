//! The audit log against the real binary: readiness while records are lost (a full disk), a
//! file deleted under the running proxy, `fsync = "always"` holding the answer for its record,
//! and each record counted once when a write fails part-way.

use std::path::Path;
use std::time::Duration;

use super::support::{get, get_json, proxied_client, sample, wait_until, Origin, ProxyProcess};

const ROBOTS: &str = "User-agent: *\nDisallow: /private\n";

/// The `url.full` of every whole line (ended by a newline, parsed as JSON) in `path`.
/// How many whole `robots_fetch` records `path` holds.
/// The whole lines of records that are about no request and that the writer counts as any
/// record: `robots_fetch` and the lifecycle records (`proxy_start`, `proxy_stop`,
/// `proxy_reconfigured`).
fn fetch_records(path: &Path) -> usize {
    let bytes = std::fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes);
    let whole = text.rsplit_once('\n').map_or("", |(whole, _)| whole);
    whole
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|v| {
            matches!(
                v["event.action"].as_str(),
                Some("robots_fetch" | "proxy_start" | "proxy_stop" | "proxy_reconfigured")
            )
        })
        .count()
}

fn recorded(path: &Path) -> Vec<String> {
    let bytes = std::fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes);
    let whole = text.rsplit_once('\n').map_or("", |(whole, _)| whole);
    whole
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter_map(|v| v["url.full"].as_str().map(str::to_owned))
        .collect()
}

async fn metric(proxy: &ProxyProcess, name: &str) -> f64 {
    let (status, text) = get(&format!("{}/metrics", proxy.admin())).await;
    assert_eq!(status, 200);
    sample(&text, name)
}

/// Waits (up to 10 s) until the metric `name` reaches `at_least`.
async fn metric_reaches(proxy: &ProxyProcess, name: &str, at_least: f64) {
    for _ in 0..500 {
        if metric(proxy, name).await >= at_least {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{name} never reached {at_least}; stderr:\n{}", proxy.stderr());
}

async fn blocked(proxy: &ProxyProcess, url: &str) {
    let resp = proxied_client(proxy.proxy_addr).get(url).send().await.unwrap();
    assert_eq!(resp.status(), 403, "{url}");
}

/// A disk that takes the open and fails every write (`/dev/full` answers ENOSPC, as a full
/// file system does) keeps `/readyz` at 503, however often it is asked: reopening the file
/// succeeds there, and proves nothing. Only a record written makes it ready again: once the
/// disk has room, the check's own record of the loss, with no request needed.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_keeps_readyz_failing_until_its_loss_is_recorded() {
    let origin = Origin::start(ROBOTS).await;
    let state = tempfile::tempdir().unwrap();
    let path = state.path().join("audit.jsonl");
    let real = state.path().join("real.jsonl");
    std::os::unix::fs::symlink("/dev/full", &path).unwrap();
    let dir = state.path().to_str().unwrap();
    let proxy = ProxyProcess::start(&[], &[("ROBOTS_PROXY_STATE_DIR", dir)]);
    // The proxy's own `proxy_start` record is its first write: lost on the full disk, so the
    // proxy is not ready from its start (a log that cannot be written is not ready).
    metric_reaches(&proxy, "robots_proxy_audit_records_failed_total", 1.0).await;
    let (status, ready) = get_json(&format!("{}/readyz", proxy.admin())).await;
    assert_eq!(status, 503, "{ready}");

    blocked(&proxy, &format!("{}/private/1", origin.base())).await;
    // `proxy_start`, the request's `robots_fetch` record and its own.
    metric_reaches(&proxy, "robots_proxy_audit_records_failed_total", 3.0).await;
    for _ in 0..3 {
        let (status, ready) = get_json(&format!("{}/readyz", proxy.admin())).await;
        assert_eq!(status, 503, "{ready}");
        assert_eq!(ready["ready"], false);
        let why = ready["audit_log"].as_str().unwrap();
        assert!(why.contains("being lost") && why.contains("No space left"), "{why}");
    }

    // The disk has room again. No request comes (a proxy out of service gets none): the
    // readiness check has the writer write a record of the loss, and is ready once it is.
    std::fs::remove_file(&path).unwrap();
    std::os::unix::fs::symlink(&real, &path).unwrap();
    let (status, ready) = get_json(&format!("{}/readyz", proxy.admin())).await;
    assert_eq!(status, 200, "{ready}");
    let text = std::fs::read_to_string(&real).unwrap();
    let lines: Vec<serde_json::Value> =
        text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 1, "{text}");
    let gap = &lines[0];
    assert_eq!(gap["event.action"], "audit_records_lost", "{gap}");
    assert_eq!(gap["event.outcome"], "failure", "{gap}");
    // The `proxy_start` record (the disk was full from the start), the request's record, its
    // robots.txt's `robots_fetch` record, and the four that the checks on the full disk (the
    // one at the start, then three) could not write.
    assert_eq!(gap["audit.records_lost"], 7, "{gap}");
    assert!(gap["event.reason"].as_str().unwrap().contains("No space left"), "{gap}");
    assert!(gap.get("url.full").is_none(), "about the log, not a request: {gap}");
    assert_eq!(metric(&proxy, "robots_proxy_audit_records_failed_total").await, 7.0);
    assert_eq!(metric(&proxy, "robots_proxy_audit_records_written_total").await, 1.0);
    assert!(proxy.stderr().contains("audit log is writable again"), "{}", proxy.stderr());

    blocked(&proxy, &format!("{}/private/2", origin.base())).await;
    wait_until("the next record is written", || recorded(&real).len() == 1).await;
    assert_eq!(recorded(&real), [format!("{}/private/2", origin.base())]);
    let (status, ready) = get_json(&format!("{}/readyz", proxy.admin())).await;
    assert_eq!(status, 200, "{ready}");
}

/// The audit file deleted under the running proxy (no SIGHUP): the next record goes to a new
/// file at the path, not to the deleted one; and a readiness check right after the deletion
/// has the writer create the file, the one it then writes to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_audit_file_is_followed_to_its_path() {
    let origin = Origin::start(ROBOTS).await;
    let state = tempfile::tempdir().unwrap();
    let path = state.path().join("audit.jsonl");
    let dir = state.path().to_str().unwrap();
    let proxy = ProxyProcess::start(&[], &[("ROBOTS_PROXY_STATE_DIR", dir)]);
    let url = |n: u32| format!("{}/private/{n}", origin.base());

    blocked(&proxy, &url(1)).await;
    wait_until("the first record is in the file", || recorded(&path) == [url(1)]).await;
    std::fs::remove_file(&path).unwrap();
    blocked(&proxy, &url(2)).await;
    wait_until("the second record is in a new file at the path", || recorded(&path) == [url(2)])
        .await;
    assert_eq!(metric(&proxy, "robots_proxy_audit_file_replaced_total").await, 1.0);
    let (status, ready) = get_json(&format!("{}/readyz", proxy.admin())).await;
    assert_eq!(status, 200, "{ready}");

    // Deleted again, and no record since: the check notices, and has the writer open the path.
    std::fs::remove_file(&path).unwrap();
    let (status, ready) = get_json(&format!("{}/readyz", proxy.admin())).await;
    assert_eq!(status, 200, "{ready}");
    assert!(path.exists());
    blocked(&proxy, &url(3)).await;
    wait_until("the third record is in the file", || recorded(&path) == [url(3)]).await;
    assert_eq!(metric(&proxy, "robots_proxy_audit_file_replaced_total").await, 2.0);
    assert!(proxy.stderr().contains("deleted or replaced"), "{}", proxy.stderr());
}

/// With `audit.fsync = "always"`, a client that has its 403 finds the record in the file: the
/// answer waits until its record is written and synced. Many clients at once, each reading
/// the file as soon as its answer arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fsync_always_answers_only_after_the_record_is_written() {
    let origin = Origin::start(ROBOTS).await;
    let state = tempfile::tempdir().unwrap();
    let path = state.path().join("audit.jsonl");
    let dir = state.path().to_str().unwrap();
    let env = [("ROBOTS_PROXY_STATE_DIR", dir), ("ROBOTS_PROXY_AUDIT__FSYNC", "always")];
    let proxy = ProxyProcess::start(&[], &env);
    let client = proxied_client(proxy.proxy_addr);
    // robots.txt fetched once, before the clients start.
    blocked(&proxy, &format!("{}/private/warm", origin.base())).await;
    let mut clients = Vec::new();
    for c in 0..16 {
        let (client, path, base) = (client.clone(), path.clone(), origin.base());
        clients.push(tokio::spawn(async move {
            for n in 0..5 {
                let url = format!("{base}/private/{c}-{n}");
                let resp = client.get(&url).send().await.unwrap();
                assert_eq!(resp.status(), 403);
                let in_file = recorded(&path);
                assert!(in_file.contains(&url), "{url} answered before its record was written");
            }
        }));
    }
    for client in clients {
        client.await.unwrap();
    }
    // `proxy_start`, 80 refusals, the warm-up's, and its robots.txt's `robots_fetch` record.
    assert_eq!(metric(&proxy, "robots_proxy_audit_records_written_total").await, 83.0);
}

/// Writes that fail part-way (the file reaches the process's file size limit, `ulimit -f`,
/// EFBIG, as a full disk cuts a write short) count each record once: a record whose line
/// reached the file whole is written, any other is lost, and the two add up to the records
/// made. Requests come in bursts, so that batches hold several records; three proxies, so
/// that at least one batch is likely cut after its first record.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_cut_short_counts_each_record_once() {
    let origin = Origin::start(ROBOTS).await;
    for _ in 0..3 {
        let state = tempfile::tempdir().unwrap();
        let path = state.path().join("audit.jsonl");
        let dir = state.path().to_str().unwrap();
        let env = [("ROBOTS_PROXY_STATE_DIR", dir), ("ROBOTS_PROXY_AUDIT__FSYNC", "always")];
        // SIGXFSZ ignored, as the shell leaves it for the binary: a write past the limit then
        // fails with EFBIG instead of killing the process. 40 blocks of 512 bytes: a few dozen
        // records fit.
        let proxy = ProxyProcess::start_under("trap '' XFSZ; ulimit -f 40", &[], &env);
        let client = proxied_client(proxy.proxy_addr);
        blocked(&proxy, &format!("{}/private/warm", origin.base())).await;
        // `proxy_start`, the warm-up's record and its robots.txt's `robots_fetch` record.
        let mut made = 3;
        for burst in 0..20 {
            let mut requests = Vec::new();
            for n in 0..32 {
                let url = format!("{}/private/{burst}-{n}", origin.base());
                let client = client.clone();
                requests.push(tokio::spawn(async move {
                    client.get(&url).send().await.unwrap().status().as_u16()
                }));
            }
            for request in requests {
                assert_eq!(request.await.unwrap(), 403);
                made += 1;
            }
            if metric(&proxy, "robots_proxy_audit_records_failed_total").await > 0.0 {
                break;
            }
        }
        let written = metric(&proxy, "robots_proxy_audit_records_written_total").await;
        let lost = metric(&proxy, "robots_proxy_audit_records_failed_total").await;
        assert!(lost > 0.0, "the file size limit was never reached");
        // Every whole record line but the writer's own `robots_version` ones.
        let lines = recorded(&path).len() as f64 + fetch_records(&path) as f64;
        assert_eq!(lines, written, "every whole line counted as written ({lost} lost)");
        assert_eq!(written + lost, f64::from(made), "each record counted once");
        // What reached the file is one chain, up to the line the limit cut short.
        let out = super::support::run(&["audit", "verify", path.to_str().unwrap()], &[]);
        let report = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{report}");
        assert!(report.contains("intact"), "{report}");
    }
}
