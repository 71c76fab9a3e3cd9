//! The audit writer: nothing lost under concurrency, rotation, fsync policies, errors.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, SystemTime};

use robots_proxy::audit::{self, AuditError, AuditLog, AuditRecord};
use robots_proxy::config::{AuditSection, FsyncPolicy};

fn record(task: usize, n: usize) -> AuditRecord {
    AuditRecord {
        timestamp: audit::timestamp(SystemTime::now()),
        action: robots_proxy::audit::AuditAction::RobotsDisallow,
        outcome: robots_proxy::audit::AuditOutcome::Failure,
        would_action: None,
        reason: "disallowed by robots.txt line 3".into(),
        client_address: "127.0.0.1:50000".into(),
        method: "GET".into(),
        status_code: Some(403),
        url: format!("http://example.test:8080/{task}/{n}?q=\"quoted\""),
        domain: "http://example.test:8080".into(),
        path: format!("/{task}/{n}?q=\"quoted\""),
        user_agent: Some("Mozilla/5.0 (compatible; ExampleBot/1.0)".into()),
        product_token: Some("ExampleBot".into()),
        rule: Some("disallow: /".into()),
        line: Some(3),
        group: Some("examplebot".into()),
        robots_url: "http://example.test/robots.txt".into(),
        state: "fresh".into(),
        age_seconds: 12,
        token_source: None,
        user_name: None,
        reading: None,
        read_path: None,
        usage: None,
        signature_keyid: None,
        signature_cosigned: None,
        signature_cosign_skipped: None,
        robots_version: None,
        exception: None,
    }
}

fn settings(fsync: FsyncPolicy) -> AuditSection {
    AuditSection { fsync, fsync_interval: Duration::from_millis(50), ..AuditSection::default() }
}

/// The lines of `path`, each parsed as JSON.
fn lines(path: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    assert!(text.is_empty() || text.ends_with('\n'), "the file ends with a full line");
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

fn url(line: &serde_json::Value) -> String {
    line["url.full"].as_str().expect("url.full is a string").to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_records_are_all_written_once() {
    const TASKS: usize = 40;
    const EACH: usize = 50;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub/dir/audit.jsonl");
    // A small queue, so that senders have to wait for room.
    let log = AuditLog::open(
        path.clone(),
        AuditSection { queue_capacity: 8, ..settings(FsyncPolicy::Interval) },
    )
    .unwrap();
    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let log = log.clone();
            tokio::spawn(async move {
                for n in 0..EACH {
                    log.record(record(t, n)).await.expect("record");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    log.flush().await.expect("flush");

    let lines = lines(&path);
    assert_eq!(lines.len(), TASKS * EACH);
    let urls: BTreeSet<String> = lines.iter().map(url).collect();
    assert_eq!(urls.len(), TASKS * EACH, "every record exactly once");
    for line in &lines {
        for field in ["@timestamp", "event.action", "http.request.method", "url.full", "robots.url"]
        {
            assert!(line.get(field).is_some(), "{field} missing in {line}");
        }
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o007, 0, "not readable by others: {mode:o}");
    }
    let stats = log.stats();
    assert_eq!(stats.records_written, (TASKS * EACH) as u64);
    assert_eq!((stats.records_lost, stats.write_errors), (0, 0));
    assert!(stats.syncs >= 1, "flush syncs");
}

#[tokio::test]
async fn records_use_ecs_field_names() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let log = AuditLog::open(path.clone(), settings(FsyncPolicy::Never)).unwrap();
    let mut minimal = record(1, 2);
    minimal.user_agent = None;
    minimal.rule = None;
    minimal.line = None;
    minimal.status_code = None;
    minimal.path = "/no-query".into();
    log.record(record(1, 1)).await.unwrap();
    log.record(minimal).await.unwrap();
    log.close().await.unwrap();

    let lines = lines(&path);
    let full = lines[0].as_object().unwrap();
    let names: BTreeSet<&str> = full.keys().map(String::as_str).collect();
    let expected: BTreeSet<&str> = [
        "@timestamp",
        "client.address",
        "ecs.version",
        "event.action",
        "event.dataset",
        "event.hash",
        "event.hash_scheme",
        "event.outcome",
        "event.previous_hash",
        "event.reason",
        "event.sequence",
        "http.request.method",
        "http.response.status_code",
        "robots.age_seconds",
        "robots.authority",
        "robots.group",
        "robots.line",
        "robots.path",
        "robots.product_token",
        "robots.rule",
        "robots.state",
        "robots.url",
        "url.domain",
        "url.full",
        "url.path",
        "url.query",
        "user_agent.original",
    ]
    .into();
    assert_eq!(names, expected);
    assert_eq!(full["http.response.status_code"], 403);
    assert_eq!(full["robots.line"], 3);
    assert_eq!(full["ecs.version"], audit::ECS_VERSION);
    assert_eq!(full["event.dataset"], "robots_proxy.audit");
    assert_eq!(full["url.full"], "http://example.test:8080/1/1?q=\"quoted\"");
    assert_eq!(full["url.domain"], "example.test");
    assert_eq!(full["url.path"], "/1/1");
    assert_eq!(full["url.query"], "q=\"quoted\"");
    assert_eq!(full["robots.authority"], "http://example.test:8080");
    assert_eq!(full["robots.path"], "/1/1?q=\"quoted\"");
    let minimal = lines[1].as_object().unwrap();
    assert_eq!(minimal["url.path"], "/no-query");
    for absent in [
        "user_agent.original",
        "robots.rule",
        "robots.line",
        "http.response.status_code",
        "url.query",
    ] {
        assert!(!minimal.contains_key(absent), "{absent} should be left out when unknown");
    }
    // The record alone (without the constant fields) serialises with the same names.
    let value = serde_json::to_value(record(0, 0)).unwrap();
    assert_eq!(value["user_agent.original"], "Mozilla/5.0 (compatible; ExampleBot/1.0)");
    assert_eq!(value["robots.product_token"], "ExampleBot");
}

#[tokio::test]
async fn reopen_after_rename_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let rotated = dir.path().join("audit.jsonl.1");
    let log = AuditLog::open(path.clone(), settings(FsyncPolicy::Always)).unwrap();
    for n in 0..10 {
        log.record(record(0, n)).await.unwrap();
    }
    log.flush().await.unwrap();
    std::fs::rename(&path, &rotated).unwrap();
    // Queued after the rename but before reopen: the writer sees that the path leads to no
    // file, and writes them to a new one there (records never go to a file that was moved
    // or deleted without a reopen).
    for n in 10..15 {
        log.record(record(0, n)).await.unwrap();
    }
    log.reopen().await.unwrap();
    for n in 15..22 {
        log.record(record(0, n)).await.unwrap();
    }
    log.flush().await.unwrap();

    let old: Vec<String> = lines(&rotated).iter().map(url).collect();
    let new: Vec<String> = lines(&path).iter().map(url).collect();
    let want = |r: std::ops::Range<usize>| -> Vec<String> { r.map(|n| url_of(0, n)).collect() };
    assert_eq!(old, want(0..10));
    assert_eq!(new, want(10..22));
    assert_eq!(log.stats().records_written, 22);
    assert_eq!(log.stats().file_replaced, 1);
}

fn url_of(task: usize, n: usize) -> String {
    record(task, n).url
}

/// Waits (up to 5 s) until `done` holds.
async fn wait_for(log: &AuditLog, done: impl Fn(audit::AuditStats) -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !done(log.stats()) {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {:?}", log.stats());
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Records `count` records one batch at a time: each is written before the next is sent.
async fn record_one_by_one(log: &AuditLog, count: usize) {
    for n in 0..count {
        log.record(record(0, n)).await.unwrap();
        wait_for(log, |s| s.records_written == n as u64 + 1).await;
    }
}

// Paused time: the waits for a timer that must not fire pass at once. The writer's blocking
// writes hold the clock still (tokio does not auto-advance while a spawn_blocking task runs).
#[tokio::test(start_paused = true)]
async fn fsync_never_leaves_syncing_to_flush() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let log = AuditLog::open(path.clone(), settings(FsyncPolicy::Never)).unwrap();
    record_one_by_one(&log, 5).await;
    // Written to the OS per batch, without waiting for a flush.
    assert_eq!(lines(&path).len(), 5);
    tokio::time::sleep(Duration::from_millis(120)).await;
    assert_eq!(log.stats().syncs, 0);
    log.flush().await.unwrap();
    assert_eq!(log.stats().syncs, 1, "flush syncs whatever the policy");
    log.close().await.unwrap();
    assert_eq!(lines(&path).len(), 5);
}

#[tokio::test]
async fn fsync_always_syncs_every_batch() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let log = AuditLog::open(path.clone(), settings(FsyncPolicy::Always)).unwrap();
    for n in 1..=5u64 {
        log.record(record(0, n as usize)).await.unwrap();
        wait_for(&log, |s| s.records_written == n).await;
        // A batch's sync is counted with its write: each batch of one record was synced.
        assert_eq!(log.stats().syncs, n);
    }
    log.close().await.unwrap();
    assert_eq!(lines(&path).len(), 5);
}

#[tokio::test(start_paused = true)]
async fn fsync_interval_syncs_at_most_once_per_interval_and_eventually() {
    let interval = Duration::from_millis(100);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let opened = tokio::time::Instant::now();
    let log = AuditLog::open(
        path.clone(),
        AuditSection { fsync_interval: interval, ..settings(FsyncPolicy::Interval) },
    )
    .unwrap();
    record_one_by_one(&log, 5).await;
    // Without more records, the timer syncs what was written.
    wait_for(&log, |s| s.syncs >= 1).await;
    let synced = log.stats().syncs;
    let intervals = (opened.elapsed().as_millis() / interval.as_millis()) as u64;
    assert!(synced <= intervals + 1, "{synced} syncs in {intervals} intervals");
    // Nothing new written: no more syncs.
    tokio::time::sleep(interval * 3).await;
    assert_eq!(log.stats().syncs, synced);
    log.close().await.unwrap();
    assert_eq!(lines(&path).len(), 5);
}

#[tokio::test]
async fn flush_on_never_still_syncs() {
    let dir = tempfile::tempdir().unwrap();
    let log = AuditLog::open(dir.path().join("a.jsonl"), settings(FsyncPolicy::Never)).unwrap();
    log.record(record(0, 0)).await.unwrap();
    log.flush().await.unwrap();
    assert_eq!(log.stats().syncs, 1);
    // Nothing new: no second sync.
    log.flush().await.unwrap();
    assert_eq!(log.stats().syncs, 1);
}

#[tokio::test]
async fn close_writes_everything_then_refuses_records() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let log = AuditLog::open(path.clone(), settings(FsyncPolicy::Never)).unwrap();
    let other = log.clone();
    for n in 0..100 {
        log.record(record(0, n)).await.unwrap();
    }
    log.close().await.unwrap();
    assert_eq!(lines(&path).len(), 100);
    assert!(matches!(other.record(record(0, 100)).await, Err(AuditError::Closed)));
    assert!(matches!(other.flush().await, Err(AuditError::Closed)));
}

#[tokio::test]
async fn appends_and_repairs_a_torn_last_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    std::fs::write(&path, "{\"earlier\":1}\n{\"torn").unwrap();
    let log = AuditLog::open(path.clone(), settings(FsyncPolicy::Never)).unwrap();
    log.record(record(0, 0)).await.unwrap();
    log.close().await.unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let all: Vec<&str> = text.lines().collect();
    assert_eq!(all.len(), 3, "{text}");
    assert_eq!(all[0], "{\"earlier\":1}");
    assert_eq!(all[1], "{\"torn");
    let last: serde_json::Value = serde_json::from_str(all[2]).unwrap();
    assert_eq!(url(&last), url_of(0, 0));
}

#[tokio::test]
async fn unwritable_paths_are_errors_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    // A regular file where a directory should be: fails even for root.
    let file = dir.path().join("plain-file");
    std::fs::write(&file, "").unwrap();
    let under_file = file.join("audit.jsonl");
    let e = AuditLog::open(under_file, AuditSection::default()).unwrap_err();
    assert!(matches!(e, AuditError::CreateDir { .. }), "{e}");
    assert!(
        e.to_string().starts_with(&format!(
            "cannot create directory {} for the audit log: ",
            file.display()
        )),
        "{e}"
    );
    // A directory where the file should be.
    let e = AuditLog::open(dir.path().to_owned(), AuditSection::default()).unwrap_err();
    assert!(matches!(e, AuditError::Open { .. }), "{e}");
    assert!(
        e.to_string().starts_with(&format!("cannot open audit log {}: ", dir.path().display())),
        "{e}"
    );
}

#[test]
fn open_outside_a_runtime_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let e = AuditLog::open(dir.path().join("a.jsonl"), AuditSection::default()).unwrap_err();
    assert!(matches!(e, AuditError::NoRuntime), "{e}");
}

/// Writes that fail (disk full) are counted and reported, the writer keeps going, and the next
/// batch after the disk recovers reopens the path and is written.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn write_errors_are_counted_and_the_writer_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let real = dir.path().join("real.jsonl");
    // /dev/full accepts the open and fails every write with ENOSPC.
    std::os::unix::fs::symlink("/dev/full", &path).unwrap();
    let log = AuditLog::open(path.clone(), settings(FsyncPolicy::Never)).unwrap();
    log.record(record(0, 0)).await.unwrap();
    let e = log.flush().await.unwrap_err();
    assert!(matches!(e, AuditError::Write { .. }), "{e}");
    assert!(e.to_string().starts_with(&format!("cannot write audit log {}: ", path.display())));
    let stats = log.stats();
    assert_eq!((stats.records_written, stats.records_lost), (0, 1));
    assert!(stats.write_errors >= 1);
    // The error is reported once.
    log.flush().await.unwrap();

    // Still failing: the next batch reopens /dev/full and fails again.
    log.record(record(0, 1)).await.unwrap();
    assert!(log.flush().await.is_err());
    assert_eq!(log.stats().records_lost, 2);

    // The disk "recovers": the path now leads to a real file.
    std::fs::remove_file(&path).unwrap();
    std::os::unix::fs::symlink(&real, &path).unwrap();
    log.record(record(0, 2)).await.unwrap();
    log.flush().await.unwrap();
    let written: Vec<String> = lines(&real).iter().map(url).collect();
    assert_eq!(written, [url_of(0, 2)]);
    assert_eq!(log.stats().records_written, 1);
}

#[test]
fn timestamps_are_rfc3339_utc() {
    let t = audit::timestamp(SystemTime::UNIX_EPOCH + Duration::from_millis(1_000_000_000_123));
    assert_eq!(t, "2001-09-09T01:46:40.123Z");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconfigure_changes_all_decisions_while_running() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let log = AuditLog::open(path.clone(), settings(FsyncPolicy::Never)).unwrap();
    assert!(!log.all_decisions());
    let on = AuditSection { all_decisions: true, ..settings(FsyncPolicy::Always) };
    log.reconfigure(&on).await.unwrap();
    assert!(log.all_decisions());
    log.record(record(0, 0)).await.unwrap();
    log.flush().await.unwrap();
    assert_eq!(lines(&path).len(), 1, "the writer still writes after reconfiguring");
    log.close().await.unwrap();
    assert!(matches!(log.reconfigure(&on).await, Err(AuditError::Closed)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_writable_names_an_unopenable_path_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let log = AuditLog::open(path.clone(), settings(FsyncPolicy::Never)).unwrap();
    log.check_writable().await.unwrap();
    // Rotated away without a reopen: the check has the writer open the path again.
    std::fs::rename(&path, dir.path().join("audit.jsonl.1")).unwrap();
    log.check_writable().await.unwrap();
    assert!(path.exists());
    assert_eq!(log.stats().file_replaced, 1);
    std::fs::remove_file(&path).unwrap();
    std::fs::create_dir(&path).unwrap();
    let e = log.check_writable().await.unwrap_err();
    assert!(matches!(e, AuditError::NotOpen { .. }), "{e}");
    let e = e.to_string();
    assert!(e.contains(&path.display().to_string()) && e.contains("directory"), "{e}");
    std::fs::remove_dir(&path).unwrap();
    log.check_writable().await.unwrap();
    log.close().await.unwrap();
    assert!(matches!(log.check_writable().await, Err(AuditError::Closed)));
}

/// Issue 39, H1: with a checkpoint key, checkpoints come on a fixed cadence, idle or not: one
/// at start, then one every interval with no record written, each naming the one before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoints_come_on_their_cadence_while_idle() {
    let dir = tempfile::tempdir().unwrap();
    let made = std::process::Command::new(env!("CARGO_BIN_EXE_robots-proxy"))
        .args(["keys", "new", "audit", "--dir"])
        .arg(dir.path().join("keys"))
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let path = dir.path().join("audit.jsonl");
    let settings = AuditSection {
        checkpoint_key: Some(dir.path().join("keys").join("audit.pem")),
        checkpoint_interval: Duration::from_secs(1),
        ..settings(FsyncPolicy::Interval)
    };
    let log = AuditLog::open(path.clone(), settings).unwrap();
    tokio::time::sleep(Duration::from_millis(2600)).await;
    log.close().await.unwrap();
    let all = lines(&path);
    let checkpoints: Vec<_> =
        all.iter().filter(|l| l["event.action"] == "audit_checkpoint").collect();
    assert!(checkpoints.len() >= 3, "{all:#?}");
    assert_eq!(checkpoints.len(), all.len(), "nothing but checkpoints: {all:#?}");
    for pair in checkpoints.windows(2) {
        assert_eq!(
            pair[1]["audit.checkpoint.previous_signature"],
            pair[0]["audit.checkpoint.signature"]
        );
        assert_eq!(pair[1]["audit.checkpoint.interval_ms"], 1000);
    }
    let report = robots_proxy::audit::verify::verify_files(&[path], None);
    assert_eq!(report.status, robots_proxy::audit::verify::Status::Intact, "{}", report.render());
}
