//! The audit log's hash chain and signed checkpoints against the real binary: a log written
//! by the proxy (blocked requests, a rotation by rename and SIGHUP, checkpoints, a shutdown)
//! verifies with `audit verify`, and copies of it tampered with in each way are refused,
//! naming the line and the kind; a restart continues the chain.

use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::support::{proxied_client, run, Origin, ProxyProcess};

pub(super) const ROBOTS: &str = "User-agent: *\nDisallow: /private\n";

pub(super) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

pub(super) fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path).unwrap().lines().map(str::to_owned).collect()
}

pub(super) fn write_lines(path: &Path, lines: &[String]) {
    std::fs::write(path, lines.iter().map(|l| format!("{l}\n")).collect::<String>()).unwrap();
}

/// `audit verify` with `args`: (exit status, stdout, stderr).
pub(super) fn verify(args: &[&str]) -> (i32, String, String) {
    let mut all = vec!["audit", "verify"];
    all.extend_from_slice(args);
    let out = run(&all, &[]);
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

pub(super) fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

pub(super) async fn block(proxy: &ProxyProcess, origin: &Origin, n: usize, tag: &str) {
    let client = proxied_client(proxy.proxy_addr);
    for i in 0..n {
        let url = format!("{}/private/{tag}-{i}", origin.base());
        let resp = client.get(&url).send().await.unwrap();
        assert_eq!(resp.status(), 403, "{url}");
    }
}

/// Waits (up to 10 s) until `path` holds a line containing `needle` `times` times.
pub(super) async fn wait_for_lines(path: &Path, needle: &str, times: usize) {
    for _ in 0..500 {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.lines().filter(|l| l.contains(needle)).count() >= times {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{} never held {times} line(s) with {needle:?}", path.display());
}

/// The line (without its newline) and `event.hash` of `body` (the line without its
/// `event.hash` member and final `}`) after `previous`, as docs/audit.md says the writer
/// computes them: scheme 2 (`event.hash_scheme` 2 last in the body) hashes the leaf,
/// SHA-256(0x00, BODY), then SHA-256(previous, "\n", leaf hash); scheme 1 (lines written
/// before) SHA-256(previous, "\n", BODY).
fn hash_line(previous: &str, body: &str) -> (String, String) {
    let mut hasher = Sha256::new();
    hasher.update(previous.as_bytes());
    hasher.update(b"\n");
    if body.ends_with(",\"event.hash_scheme\":2") {
        let leaf = Sha256::new().chain_update([0u8]).chain_update(body).chain_update("}");
        hasher.update(leaf.finalize());
    } else {
        hasher.update(body.as_bytes());
        hasher.update(b"}");
    }
    let hash: String = hasher.finalize().iter().map(|b| format!("{b:02x}")).collect();
    (format!("{body},\"event.hash\":\"{hash}\"}}"), hash)
}

/// Recomputes every `event.hash` (and `audit.checkpoint.head`) of `lines` after an edit, as
/// docs/audit.md says the chain is computed: what someone who rewrites the file without the
/// checkpoint key can do.
pub(super) fn rechain(lines: &mut [String]) {
    let mut head: Option<String> = None;
    for line in lines.iter_mut() {
        let at = line.rfind(",\"event.hash\":\"").unwrap();
        let mut body = line[..at].to_owned();
        let value: serde_json::Value = serde_json::from_str(line).unwrap();
        let previous = match (&head, value["event.previous_hash"].as_str()) {
            (Some(h), _) => h.clone(),
            (None, Some(p)) => p.to_owned(),
            (None, None) => panic!("no head"),
        };
        if value["event.action"] == "audit_checkpoint" {
            let old = value["audit.checkpoint.head"].as_str().unwrap();
            body = body.replace(old, &previous);
        }
        let (new, hash) = hash_line(&previous, &body);
        *line = new;
        head = Some(hash);
    }
}

struct Log {
    _state: tempfile::TempDir,
    rotated: PathBuf,
    current: PathBuf,
    public_key: PathBuf,
    dir: tempfile::TempDir,
}

impl Log {
    /// A copy of the log's files in a new directory.
    fn copy(&self, name: &str) -> (PathBuf, PathBuf) {
        let dir = self.dir.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let rotated = dir.join("audit.jsonl.1");
        let current = dir.join("audit.jsonl");
        std::fs::copy(&self.rotated, &rotated).unwrap();
        std::fs::copy(&self.current, &current).unwrap();
        (rotated, current)
    }
}

/// A real log: blocks, a rotation (rename, SIGHUP), more blocks, a checkpoint on its interval,
/// more blocks, a shutdown.
async fn real_log() -> Log {
    let origin = Origin::start(ROBOTS).await;
    let state = tempfile::tempdir().unwrap();
    let keys = state.path().join("keys");
    let made = run(&["keys", "new", "audit", "--dir", s(&keys)], &[]);
    assert!(made.status.success(), "{}", text(&made.stderr));
    let key = keys.join("audit.pem");
    let env = [
        ("ROBOTS_PROXY_STATE_DIR", s(state.path())),
        ("ROBOTS_PROXY_AUDIT__CHECKPOINT_KEY", s(&key)),
        ("ROBOTS_PROXY_AUDIT__CHECKPOINT_INTERVAL", "1s"),
    ];
    let public = run(&["audit", "public-key"], &env);
    assert!(public.status.success(), "{}", text(&public.stderr));
    let dir = tempfile::tempdir().unwrap();
    let public_key = dir.path().join("audit.jwk");
    std::fs::write(&public_key, &public.stdout).unwrap();

    let mut proxy = ProxyProcess::start(&[], &env);
    let current = state.path().join("audit.jsonl");
    let rotated = state.path().join("audit.jsonl.1");
    block(&proxy, &origin, 6, "a").await;
    wait_for_lines(&current, "robots_disallow", 6).await;
    std::fs::rename(&current, &rotated).unwrap();
    proxy.signal("HUP");
    proxy.wait_for_stderr("audit log reopened", 1).await;
    block(&proxy, &origin, 6, "b").await;
    wait_for_lines(&current, "audit_checkpoint", 1).await;
    block(&proxy, &origin, 4, "c").await;
    wait_for_lines(&current, "robots_disallow", 10).await;
    proxy.signal("TERM");
    assert!(proxy.wait_exit(Duration::from_secs(10)).await.success());
    Log { _state: state, rotated, current, public_key, dir }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_verify_passes_a_real_rotated_log_and_names_each_tampering() {
    let log = real_log().await;
    let key = s(&log.public_key).to_owned();
    let (rotated, current) = (s(&log.rotated).to_owned(), s(&log.current).to_owned());
    let old = lines(&log.rotated);
    let new = lines(&log.current);
    // Each file ends with a checkpoint (the reopen's, the shutdown's); the new file has one
    // from its interval too, with records after it; its first record names the hash the
    // rotated file ends with.
    for file in [&old, &new] {
        assert!(file.last().unwrap().contains("\"event.action\":\"audit_checkpoint\""));
    }
    let checkpoint_at = new.iter().position(|l| l.contains("audit_checkpoint")).unwrap();
    assert!(checkpoint_at + 3 < new.len(), "{new:#?}");
    let last_old: serde_json::Value = serde_json::from_str(old.last().unwrap()).unwrap();
    let first_new: serde_json::Value = serde_json::from_str(&new[0]).unwrap();
    assert_eq!(first_new["event.previous_hash"], last_old["event.hash"]);
    assert_eq!(
        first_new["event.sequence"].as_u64().unwrap(),
        last_old["event.sequence"].as_u64().unwrap() + 1
    );

    // Untouched, rotation included: intact, with and without the key.
    let (code, out, err) = verify(&[&rotated, &current]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("intact"), "{out}");
    let (code, out, err) = verify(&["--public-key", &key, &rotated, &current]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("signatures checked with key"), "{out}");
    // Each file alone verifies too.
    assert_eq!(verify(&[&current]).0, 0);

    // Each tampering, on copies; the first line that breaks the chain is named.
    // A blocked request's record: line 1 is the manifest of the rotated file, 2 the
    // checkpoint that signs it, 3 the robots_version record.
    const RECORD: usize = 4;
    type Edit = Box<dyn Fn(&mut Vec<String>)>;
    let cases: Vec<(&str, Edit, String)> = vec![
        (
            "changed",
            Box::new(|l: &mut Vec<String>| {
                l[RECORD - 1] = l[RECORD - 1].replacen("/private/", "/privatE/", 1)
            }),
            format!("audit.jsonl:{RECORD}: changed"),
        ),
        (
            "deleted",
            Box::new(|l: &mut Vec<String>| {
                l.remove(RECORD - 1);
            }),
            format!("audit.jsonl:{RECORD}: deleted"),
        ),
        (
            "swapped",
            Box::new(|l: &mut Vec<String>| l.swap(RECORD - 1, RECORD)),
            format!("audit.jsonl:{RECORD}: reordered"),
        ),
        (
            "duplicated",
            Box::new(|l: &mut Vec<String>| {
                let copy = l[RECORD - 1].clone();
                l.insert(RECORD, copy);
            }),
            format!("audit.jsonl:{}: duplicated", RECORD + 1),
        ),
        (
            "first",
            Box::new(|l: &mut Vec<String>| {
                l.remove(0);
            }),
            "audit.jsonl:1: first line missing".to_owned(),
        ),
        (
            "inserted",
            Box::new(|l: &mut Vec<String>| {
                l.insert(
                    RECORD - 1,
                    "{\"event.action\":\"robots_allow\",\"url.full\":\"http://x/\"}".to_owned(),
                );
            }),
            format!("audit.jsonl:{RECORD}: inserted"),
        ),
    ];
    for (name, edit, expected) in cases {
        let (r, c) = log.copy(name);
        let mut l = lines(&c);
        edit(&mut l);
        write_lines(&c, &l);
        let (code, out, err) = verify(&[s(&r), s(&c)]);
        assert_eq!(code, 1, "{name}: {out}{err}");
        assert!(out.contains(&expected), "{name}: expected {expected:?} in\n{out}");
        if name == "first" {
            // The file alone, too.
            let (code, out, _) = verify(&[s(&c)]);
            assert_eq!(code, 1, "{out}");
            assert!(out.contains("first line missing"), "{out}");
        }
    }

    // Issue 39, L3: a changed first line is "changed", in the rotated file and in the current
    // one (alone too), not "files out of order" or "records missing".
    let (r, c) = log.copy("first-changed");
    for file in [&r, &c] {
        let mut l = lines(file);
        l[0] = l[0].replacen("\"event.action\":\"", "\"event.action\":\"x", 1);
        write_lines(file, &l);
    }
    let (code, out, _) = verify(&[s(&r), s(&c)]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("audit.jsonl.1:1: changed"), "{out}");
    let (code, out, _) = verify(&[s(&c)]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("audit.jsonl:1: changed"), "{out}");

    // Rotated files given out of order.
    let (code, out, _) = verify(&[&current, &rotated]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("audit.jsonl.1:1: files out of order"), "{out}");

    // A tail cut off after the interval's checkpoint: the files alone cannot tell (the chain
    // is intact up to there), the checkpoints shipped elsewhere can.
    let (r, c) = log.copy("tail");
    write_lines(&c, &new[..=checkpoint_at]);
    let (code, out, _) = verify(&["--public-key", &key, s(&r), s(&c)]);
    assert_eq!(code, 0, "{out}");
    let (code, out, _) = verify(&["--public-key", &key, "--checkpoints", &current, s(&r), s(&c)]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("tail cut"), "{out}");

    // A record before the checkpoint rewritten and every hash recomputed, the checkpoint's
    // head too: the hash chain alone cannot tell. Since the Merkle tree (issue 39), the
    // checkpoint's root shows it even without a key (a forger who also recomputes the root,
    // edge and note text is stopped only by the note's and checkpoint's signatures).
    let (r, c) = log.copy("rechained");
    let mut l = new.clone();
    l[RECORD - 1] = l[RECORD - 1].replacen("/private/", "/public//", 1);
    rechain(&mut l);
    write_lines(&c, &l);
    let (code, out, _) = verify(&[s(&r), s(&c)]);
    assert_eq!(code, 1, "without a key, the Merkle root shows the rewrite: {out}");
    assert!(out.contains("Merkle root mismatch"), "{out}");
    let (code, out, _) = verify(&["--public-key", &key, s(&r), s(&c)]);
    assert_eq!(code, 1, "{out}");
    // The first checkpoint after the rewritten record is the one whose root no longer adds up
    // (the file opens with the rotated file's manifest and its checkpoint, before the record).
    let covering = l
        .iter()
        .enumerate()
        .skip(RECORD)
        .find(|(_, line)| line.contains("\"event.action\":\"audit_checkpoint\""))
        .map(|(i, _)| i)
        .unwrap();
    assert!(out.contains(&format!("audit.jsonl:{}: bad checkpoint", covering + 1)), "{out}");

    // A torn last line (a crash while writing): reported as such, not as tampering.
    let (r, c) = log.copy("torn");
    let mut bytes = std::fs::read(&c).unwrap();
    bytes.extend_from_slice(b"{\"@timestamp\":\"2026-");
    std::fs::write(&c, bytes).unwrap();
    let (code, out, _) = verify(&["--public-key", &key, s(&r), s(&c)]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!("audit.jsonl:{}: torn line (a crash while writing)", new.len() + 1)),
        "{out}"
    );

    // Unreadable input and a line that is not JSON: exit 2, one line naming it.
    let missing = log.dir.path().join("missing.jsonl");
    let (code, out, err) = verify(&[&rotated, s(&missing)]);
    assert_eq!((code, out.as_str()), (2, ""), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("missing.jsonl: cannot read"), "{err}");
    let (r, c) = log.copy("garbage");
    let mut l = lines(&c);
    l.insert(RECORD - 1, "not json".to_owned());
    write_lines(&c, &l);
    let (code, _, err) = verify(&[s(&r), s(&c)]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains(&format!("audit.jsonl:{RECORD}: the line is not JSON")), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");

    // --json gives the same to machines.
    let (code, out, _) = verify(&["--json", &rotated, &current]);
    assert_eq!(code, 0);
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["status"], "intact");
}

/// A restart continues the chain in the same file: the second run's first record names the
/// hash of the first run's last, and the file verifies as one; a torn line left by a `kill -9`
/// in between is reported as torn, not as tampering.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_continues_the_chain() {
    let origin = Origin::start(ROBOTS).await;
    let state = tempfile::tempdir().unwrap();
    let env = [("ROBOTS_PROXY_STATE_DIR", s(state.path()))];
    let path = state.path().join("audit.jsonl");
    for (run, tag) in [(1, "first"), (2, "second"), (3, "third")] {
        let mut proxy = ProxyProcess::start(&[], &env);
        block(&proxy, &origin, 3, tag).await;
        wait_for_lines(&path, "robots_disallow", 3 * run).await;
        if run == 2 {
            // Killed while writing a record: the start of a line, no newline.
            proxy.signal("KILL");
            proxy.wait_exit(Duration::from_secs(10)).await;
            let mut bytes = std::fs::read(&path).unwrap();
            bytes.extend_from_slice(b"{\"@timestamp\":\"2026-11-25T23:");
            std::fs::write(&path, bytes).unwrap();
        } else {
            proxy.signal("TERM");
            assert!(proxy.wait_exit(Duration::from_secs(10)).await.success());
        }
    }
    let all = lines(&path);
    let torn = all.iter().position(|l| serde_json::from_str::<serde_json::Value>(l).is_err());
    let torn = torn.expect("the torn line stays, ended by a newline");
    let values: Vec<serde_json::Value> =
        all.iter().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let sequences: Vec<u64> =
        values.iter().map(|v| v["event.sequence"].as_u64().unwrap()).collect();
    assert_eq!(sequences, (1..=values.len() as u64).collect::<Vec<_>>());
    let marked: Vec<usize> =
        (0..values.len()).filter(|i| values[*i].get("event.previous_hash").is_some()).collect();
    assert_eq!(marked.len(), 3, "{all:#?}");
    for i in &marked[1..] {
        assert_eq!(values[*i]["event.previous_hash"], values[i - 1]["event.hash"]);
    }
    let (code, out, err) = verify(&[s(&path)]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(&format!("audit.jsonl:{}: torn line", torn + 1)), "{out}");
}

/// A checkpoint key that cannot be read stops `config check` (and so `serve`) with the key's
/// name and the file.
#[test]
fn an_unreadable_checkpoint_key_is_refused_naming_the_file() {
    let state = tempfile::tempdir().unwrap();
    let missing = state.path().join("nope.pem");
    let env = [
        ("ROBOTS_PROXY_STATE_DIR", s(state.path())),
        ("ROBOTS_PROXY_AUDIT__CHECKPOINT_KEY", s(&missing)),
    ];
    for args in [&["config", "check"][..], &["serve", "--listen", "127.0.0.1:0"][..]] {
        let out = run(args, &env);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = text(&out.stderr);
        assert!(err.contains("audit.checkpoint_key"), "{err}");
        assert!(err.contains(&missing.display().to_string()), "{err}");
    }
    // Not a key at all.
    let keys = state.path().join("keys");
    std::fs::create_dir(&keys).unwrap();
    let bad = keys.join("bad.pem");
    std::fs::write(&bad, "not a key").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&bad, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::set_permissions(&keys, std::fs::Permissions::from_mode(0o700)).unwrap();
    let out = run(
        &["config", "check"],
        &[
            ("ROBOTS_PROXY_STATE_DIR", s(state.path())),
            ("ROBOTS_PROXY_AUDIT__CHECKPOINT_KEY", s(&bad)),
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("audit.checkpoint_key") && err.contains("bad.pem"), "{err}");
    assert!(err.contains("PRIVATE KEY"), "{err}");
}

/// The review's `forge.py` (issue 39's review, appendix): drops the lines for which `drop`
/// holds and every checkpoint (and every manifest, which names the bytes it changes), and
/// recomputes `event.sequence`, `event.previous_hash` and
/// `event.hash` without the key.
pub(super) fn forge(path: &Path, drop: impl Fn(&str) -> bool) {
    let mut head: Option<String> = None;
    let mut sequence = 0;
    let mut out = Vec::new();
    for raw in lines(path) {
        let mut r: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&raw).unwrap();
        if head.is_none() {
            head = r["event.previous_hash"].as_str().map(str::to_owned);
            sequence = r["event.sequence"].as_u64().unwrap() - 1;
        }
        let own = ["audit_checkpoint", "audit_manifest"];
        if drop(&raw) || r.get("event.action").is_some_and(|a| own.iter().any(|o| a == o)) {
            continue;
        }
        let had_previous = r.contains_key("event.previous_hash");
        for k in ["event.sequence", "event.previous_hash", "event.hash_scheme", "event.hash"] {
            r.remove(k);
        }
        sequence += 1;
        let json = serde_json::Value::Object(r).to_string();
        let mut body = format!("{},\"event.sequence\":{sequence}", &json[..json.len() - 1]);
        if out.is_empty() || had_previous {
            body += &format!(",\"event.previous_hash\":\"{}\"", head.as_ref().unwrap());
        }
        body += ",\"event.hash_scheme\":2";
        let (line, hash) = hash_line(head.as_ref().unwrap(), &body);
        out.push(line);
        head = Some(hash);
    }
    write_lines(path, &out);
}

/// A proxy with a checkpoint key in a new state directory: the environment, the public key
/// file (in the state directory's parent's temporary directory).
pub(super) struct Keyed {
    pub(super) state: tempfile::TempDir,
    pub(super) public_key: PathBuf,
    pub(super) key: PathBuf,
}

impl Keyed {
    pub(super) fn new() -> Keyed {
        let state = tempfile::tempdir().unwrap();
        let keys = state.path().join("keys");
        let made = run(&["keys", "new", "audit", "--dir", s(&keys)], &[]);
        assert!(made.status.success(), "{}", text(&made.stderr));
        let key = keys.join("audit.pem");
        let keyed = Keyed { public_key: state.path().join("audit.jwk"), state, key };
        let public = run(&["audit", "public-key"], &keyed.env());
        assert!(public.status.success(), "{}", text(&public.stderr));
        std::fs::write(&keyed.public_key, &public.stdout).unwrap();
        keyed
    }

    pub(super) fn env(&self) -> [(&str, &str); 3] {
        [
            ("ROBOTS_PROXY_STATE_DIR", s(self.state.path())),
            ("ROBOTS_PROXY_AUDIT__CHECKPOINT_KEY", s(&self.key)),
            ("ROBOTS_PROXY_AUDIT__CHECKPOINT_INTERVAL", "2s"),
        ]
    }

    pub(super) async fn stop(proxy: &mut ProxyProcess) {
        proxy.signal("TERM");
        assert!(proxy.wait_exit(Duration::from_secs(10)).await.success());
    }
}

/// Issue 39, C1, the review's script: a signed log; someone without the key removes one
/// record and every checkpoint and re-chains the rest; the proxy restarts and writes one more
/// record. Before, the proxy continued the forged tail and signed it, and `verify
/// --public-key` said intact (exit 0); now it starts a new chain with an
/// `audit_chain_restart` record, and the forged records are not proven (exit 3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_log_is_not_signed_over_by_a_restart() {
    let origin = Origin::start(ROBOTS).await;
    let keyed = Keyed::new();
    let path = keyed.state.path().join("audit.jsonl");
    let key = s(&keyed.public_key).to_owned();
    let mut proxy = ProxyProcess::start(&[], &keyed.env());
    block(&proxy, &origin, 2, "b").await;
    block(&proxy, &origin, 1, "secret").await;
    block(&proxy, &origin, 1, "b2").await;
    wait_for_lines(&path, "robots_disallow", 4).await;
    Keyed::stop(&mut proxy).await;
    let (code, out, err) = verify(&["--public-key", &key, s(&path)]);
    assert_eq!(code, 0, "{out}{err}");

    forge(&path, |line| line.contains("/private/secret"));
    let mut proxy = ProxyProcess::start(&[], &keyed.env());
    block(&proxy, &origin, 1, "after").await;
    wait_for_lines(&path, "/private/after", 1).await;
    Keyed::stop(&mut proxy).await;
    assert!(!std::fs::read_to_string(&path).unwrap().contains("secret"));
    let (code, out, err) = verify(&["--public-key", &key, s(&path)]);
    assert_eq!(code, 3, "{out}{err}");
    assert!(out.contains("NOT PROVEN") && out.contains("not proven"), "{out}");
    assert!(out.contains("the chain starts again (no_checkpoint)"), "{out}");
    let restart = lines(&path).into_iter().find(|l| l.contains("audit_chain_restart"));
    let restart: serde_json::Value = serde_json::from_str(&restart.unwrap()).unwrap();
    assert_eq!(restart["audit.restart.reason"], "no_checkpoint");
    assert_eq!(restart["event.previous_hash"], "0".repeat(64));
    let (code, out, _) = verify(&["--public-key", &key, "--json", s(&path)]);
    assert_eq!(code, 3);
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["status"], "unproven");
}

/// Issue 39, H3: a rotation (rename, SIGHUP), then a restart before any record: the chain
/// continues from the state kept beside the log, and the untouched files verify as one chain,
/// with the key (before: "files out of order", exit 1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_after_a_rotation_continues_the_chain() {
    let origin = Origin::start(ROBOTS).await;
    let keyed = Keyed::new();
    let path = keyed.state.path().join("audit.jsonl");
    let rotated = keyed.state.path().join("audit.jsonl.1");
    let key = s(&keyed.public_key).to_owned();
    let mut proxy = ProxyProcess::start(&[], &keyed.env());
    block(&proxy, &origin, 3, "a").await;
    wait_for_lines(&path, "robots_disallow", 3).await;
    std::fs::rename(&path, &rotated).unwrap();
    proxy.signal("HUP");
    proxy.wait_for_stderr("audit log reopened", 1).await;
    Keyed::stop(&mut proxy).await;
    let mut proxy = ProxyProcess::start(&[], &keyed.env());
    block(&proxy, &origin, 3, "b").await;
    wait_for_lines(&path, "robots_disallow", 3).await;
    Keyed::stop(&mut proxy).await;
    let (code, out, err) = verify(&["--public-key", &key, s(&rotated), s(&path)]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!out.contains("starts again"), "{out}");
    let (code, out, err) = verify(&[s(&rotated), s(&path)]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(keyed.state.path().join("audit-chain.json").is_file());
}

/// `robots-proxy audit ARGS…`: (exit status, stdout, stderr).
pub(super) fn audit(args: &[&str]) -> (i32, String, String) {
    let mut all = vec!["audit"];
    all.extend_from_slice(args);
    let out = run(&all, &[]);
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

/// The `audit.checkpoint.note` of every checkpoint in `path`, with its tree size.
fn notes(path: &Path) -> Vec<(u64, String)> {
    let values = lines(path).into_iter().map(|l| serde_json::from_str::<serde_json::Value>(&l));
    values
        .filter_map(|v| {
            let v = v.unwrap();
            Some((
                v["audit.checkpoint.tree_size"].as_u64()?,
                v["audit.checkpoint.note"].as_str()?.to_owned(),
            ))
        })
        .collect()
}

/// Issue 39, items 1 and 5: the real proxy with a checkpoint key writes a log (a restart in
/// the middle continues its Merkle tree); `audit prove` proves one blocked request's record
/// and `audit check-proof` checks it with the public key alone; a changed record fails; `audit
/// consistency` holds between two checkpoints of the log and fails between two logs; a forged
/// checkpoint root is caught by `audit verify`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_is_proved_to_a_third_party_and_checkpoints_are_consistent() {
    let origin = Origin::start(ROBOTS).await;
    let keyed = Keyed::new();
    let path = keyed.state.path().join("audit.jsonl");
    let key = s(&keyed.public_key).to_owned();
    let mut proxy = ProxyProcess::start(&[], &keyed.env());
    block(&proxy, &origin, 3, "a").await;
    wait_for_lines(&path, "robots_disallow", 3).await;
    Keyed::stop(&mut proxy).await;
    let mut proxy = ProxyProcess::start(&[], &keyed.env());
    block(&proxy, &origin, 2, "b").await;
    wait_for_lines(&path, "/private/b-1", 1).await;
    Keyed::stop(&mut proxy).await;
    let all = lines(&path);
    assert!(!all.iter().any(|l| l.contains("audit_chain_restart")), "one chain, one tree");
    let (code, out, err) = verify(&["--public-key", &key, s(&path)]);
    assert_eq!(code, 0, "{out}{err}");

    // Prove the record of /private/a-1.
    let record = all.iter().find(|l| l.contains("/private/a-1")).unwrap();
    let value: serde_json::Value = serde_json::from_str(record).unwrap();
    let sequence = value["event.sequence"].as_u64().unwrap().to_string();
    let (code, proof, err) = audit(&["prove", "--sequence", &sequence, s(&path)]);
    assert_eq!(code, 0, "{err}");
    let parsed: serde_json::Value = serde_json::from_str(&proof).unwrap();
    // The record proved is the leaf: the line without its event.hash member (scheme 2), every
    // byte of which the proof covers.
    assert_eq!(parsed["format"], "robots-proxy audit inclusion proof v2");
    assert_eq!(parsed["record"].as_str().unwrap(), without_hash(record));
    assert!(parsed["checkpoint"].as_str().unwrap().starts_with("robots-proxy/audit/"));
    let dir = tempfile::tempdir().unwrap();
    let proof_file = dir.path().join("proof.json");
    std::fs::write(&proof_file, &proof).unwrap();
    let (code, out, err) = audit(&["check-proof", s(&proof_file), "--public-key", &key]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("valid:"), "{out}");
    // The record changed (another path): invalid.
    let changed = proof.replace("/private/a-1", "/private/a-7");
    std::fs::write(&proof_file, changed).unwrap();
    let (code, _, err) = audit(&["check-proof", s(&proof_file), "--public-key", &key]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("invalid"), "{err}");
    // Not a proof: unreadable.
    std::fs::write(&proof_file, "{}").unwrap();
    assert_eq!(audit(&["check-proof", s(&proof_file), "--public-key", &key]).0, 2);
    // No checkpoint covers a record past the end.
    let (code, _, err) = audit(&["prove", "--sequence", "999999", s(&path)]);
    assert_eq!(code, 2, "{err}");

    // Consistency between the first and the last checkpoint of the log, and not back.
    let ours = notes(&path);
    assert!(ours.len() >= 3, "{ours:?}");
    let (first, last) = (&ours[1], &ours[ours.len() - 1]);
    assert!(first.0 < last.0);
    let old = dir.path().join("old.note");
    let new = dir.path().join("new.note");
    std::fs::write(&old, &first.1).unwrap();
    std::fs::write(&new, &last.1).unwrap();
    let consistency = |a: &Path, b: &Path| {
        audit(&["consistency", s(a), s(b), "--log", s(&path), "--public-key", &key])
    };
    let (code, out, err) = consistency(&old, &new);
    assert_eq!(code, 0, "{out}{err}");
    let shown: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(shown["old_size"], first.0);
    assert_eq!(consistency(&new, &old).0, 1);
    // Another log (another proxy, key and origin): not consistent.
    let other = Keyed::new();
    let mut proxy = ProxyProcess::start(&[], &other.env());
    block(&proxy, &origin, 1, "c").await;
    let other_path = other.state.path().join("audit.jsonl");
    wait_for_lines(&other_path, "/private/c-0", 1).await;
    Keyed::stop(&mut proxy).await;
    let other_notes = notes(&other_path);
    std::fs::write(&new, &other_notes[other_notes.len() - 1].1).unwrap();
    let (code, _, err) =
        audit(&["consistency", s(&old), s(&new), "--log", s(&path), s(&other_path)]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("different logs"), "{err}");

    // A forged checkpoint root (the hashes re-chained without the key): tampering, named.
    let mut forged = all.clone();
    let at = forged.iter().rposition(|l| l.contains("audit.checkpoint.root")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&forged[at]).unwrap();
    let root = v["audit.checkpoint.root"].as_str().unwrap().to_owned();
    let fake = format!("{}=", "A".repeat(43));
    forged[at] = forged[at].replace(&root, &fake);
    rechain(&mut forged);
    let forged_path = dir.path().join("forged.jsonl");
    write_lines(&forged_path, &forged);
    let (code, out, err) = verify(&[s(&forged_path)]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains(&format!("forged.jsonl:{}", at + 1)), "{out}");
}

/// Issue 39, item 6: `GET /audit/checkpoint` on `signing.directory_listen` serves the latest
/// checkpoint, signed-note text that verifies with the public key and is in the log; 404
/// with a clear body without a checkpoint key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_directory_listener_serves_the_latest_checkpoint() {
    let state = tempfile::tempdir().unwrap();
    let (mut p, directory) = super::support::directory_proxy(&state, "https://bots.example.com");
    let url = format!("http://{directory}/audit/checkpoint");
    let client = super::support::direct_client();
    let resp = client.get(&url).send().await.unwrap();
    assert_eq!(resp.status(), 404);
    assert_eq!(resp.headers()["content-type"], "text/plain; charset=utf-8");
    assert!(resp.text().await.unwrap().contains("no audit.checkpoint_key"));
    Keyed::stop(&mut p).await;

    let keyed = Keyed::new();
    let config = keyed.state.path().join("robots-proxy.toml");
    let made = run(&["keys", "new", "k1"], &[("ROBOTS_PROXY_STATE_DIR", s(keyed.state.path()))]);
    assert!(made.status.success(), "{}", text(&made.stderr));
    std::fs::write(
        &config,
        "[signing]\ndirectory_listen = \"127.0.0.1:0\"\nkeys = [{ name = \"k1\" }]\n\
         identities = [{ token = \"*\", keys = [\"k1\"], agent = \"https://bots.example.com\" }]\n",
    )
    .unwrap();
    let mut p = ProxyProcess::start(&["--config", s(&config)], &keyed.env());
    let directory: std::net::SocketAddr = p
        .stderr()
        .lines()
        .find_map(|l| l.strip_prefix("robots-proxy key directory listening on ").map(str::to_owned))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let path = keyed.state.path().join("audit.jsonl");
    wait_for_lines(&path, "audit_checkpoint", 1).await;
    let resp = client.get(format!("http://{directory}/audit/checkpoint")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/plain; charset=utf-8");
    let note = resp.text().await.unwrap();
    let public = robots_proxy::audit::checkpoint::PublicKey::read(&keyed.public_key).unwrap();
    let checkpoint = robots_proxy::audit::note::open(&note, &public).unwrap();
    assert!(checkpoint.origin.starts_with("robots-proxy/audit/"), "{note}");
    assert!(notes(&path).iter().any(|(_, n)| *n == note), "the served note is in the log");
    Keyed::stop(&mut p).await;
}

/// A line of scheme 2 without its `event.hash` member: its Merkle leaf.
fn without_hash(line: &str) -> String {
    format!("{}}}", &line[..line.rfind(",\"event.hash\":\"").unwrap()])
}

/// The log of tests/fixtures/audit-v1 (written by 7c3d168, which hashed each line twice:
/// scheme 1; `make.sh` there made it) copied into a new state directory, with its checkpoint
/// key as the proxy wants it (owner only). (The directory, the rotated file, the current file,
/// the public key.)
fn first_scheme_log() -> (tempfile::TempDir, PathBuf, PathBuf, String) {
    use std::os::unix::fs::PermissionsExt;
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/audit-v1");
    let state = tempfile::tempdir().unwrap();
    for name in ["audit.jsonl.1", "audit.jsonl", "audit-chain.json", "audit.jwk"] {
        std::fs::copy(fixture.join(name), state.path().join(name)).unwrap();
    }
    let keys = state.path().join("keys");
    std::fs::create_dir(&keys).unwrap();
    std::fs::copy(fixture.join("audit.pem"), keys.join("audit.pem")).unwrap();
    std::fs::set_permissions(keys.join("audit.pem"), std::fs::Permissions::from_mode(0o600))
        .unwrap();
    std::fs::set_permissions(&keys, std::fs::Permissions::from_mode(0o700)).unwrap();
    let (rotated, current) = (state.path().join("audit.jsonl.1"), state.path().join("audit.jsonl"));
    let key = s(&state.path().join("audit.jwk")).to_owned();
    (state, rotated, current, key)
}

/// `audit prove` of record `sequence` in `files`, checked by `check-proof` with `key`: the
/// proof's JSON. A copy with the record changed is invalid.
fn prove_and_check(files: &[&str], sequence: u64, key: &str, dir: &Path) -> serde_json::Value {
    let mut args = vec!["prove", "--sequence"];
    let sequence = sequence.to_string();
    args.push(&sequence);
    args.extend_from_slice(files);
    let (code, proof, err) = audit(&args);
    assert_eq!(code, 0, "{err}");
    let file = dir.join(format!("proof-{sequence}.json"));
    std::fs::write(&file, &proof).unwrap();
    let (code, out, err) = audit(&["check-proof", s(&file), "--public-key", key]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("valid:"), "{out}");
    std::fs::write(&file, proof.replace("/private/", "/privatE/")).unwrap();
    let (code, _, err) = audit(&["check-proof", s(&file), "--public-key", key]);
    assert_eq!(code, 1, "a changed record: {err}");
    serde_json::from_str(&proof).unwrap()
}

/// The `event.sequence` of the first line of `lines` that contains `needle`.
fn sequence_of(lines: &[String], needle: &str) -> u64 {
    let line = lines.iter().find(|l| l.contains(needle)).unwrap();
    let value: serde_json::Value = serde_json::from_str(line).unwrap();
    value["event.sequence"].as_u64().unwrap()
}

/// Issues 37 and 39 (speed): lines are now hashed once (scheme 2). A log written before, by
/// the scheme that hashed each line twice (a rotation, a heartbeat, a restart, all signed),
/// still verifies intact with the key and without, proves its records (`v1` proofs, the line
/// as written) and its checkpoints' consistency; and each tampering with it still fails,
/// named.
#[test]
fn a_log_of_the_first_scheme_still_verifies_and_tampering_still_fails() {
    let (state, rotated, current, key) = first_scheme_log();
    let (r, c) = (s(&rotated).to_owned(), s(&current).to_owned());
    assert!(!std::fs::read_to_string(&current).unwrap().contains("event.hash_scheme"));
    let (code, out, err) = verify(&["--public-key", &key, &r, &c]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("intact") && out.contains("7 checkpoint(s)"), "{out}");
    assert_eq!(verify(&[&r, &c]).0, 0);
    assert_eq!(verify(&[&c]).0, 0, "the current file alone");

    // A record proved as written, to the first checkpoint that covers it.
    let new = lines(&current);
    let sequence = sequence_of(&new, "/private/b-2");
    let proof = prove_and_check(&[&r, &c], sequence, &key, state.path());
    assert_eq!(proof["format"], "robots-proxy audit inclusion proof v1");
    let record = new.iter().find(|l| l.contains("/private/b-2")).unwrap();
    assert_eq!(proof["record"].as_str().unwrap(), record);
    // Consistency from the first checkpoint of the chain to the last.
    let ours = [notes(&rotated), notes(&current)].concat();
    let (old, last) = (state.path().join("old.note"), state.path().join("new.note"));
    std::fs::write(&old, &ours[1].1).unwrap();
    std::fs::write(&last, &ours[ours.len() - 1].1).unwrap();
    let (code, out, err) =
        audit(&["consistency", s(&old), s(&last), "--log", &r, &c, "--public-key", &key]);
    assert_eq!(code, 0, "{out}{err}");

    // Tampering, on copies of the current file (its first records are a robots_version and
    // checkpoints; line 8 is a blocked request's record).
    let at = new.iter().position(|l| l.contains("/private/b-2")).unwrap();
    type Edit = Box<dyn Fn(&mut Vec<String>)>;
    let cases: Vec<(&str, Edit, String)> = vec![
        (
            "changed",
            Box::new(move |l: &mut Vec<String>| {
                l[at] = l[at].replacen("/private/", "/privatE/", 1)
            }),
            format!("audit.jsonl:{}: changed", at + 1),
        ),
        (
            "deleted",
            Box::new(move |l: &mut Vec<String>| {
                l.remove(at);
            }),
            format!("audit.jsonl:{}: deleted", at + 1),
        ),
        (
            "swapped",
            Box::new(move |l: &mut Vec<String>| l.swap(at, at + 1)),
            format!("audit.jsonl:{}: reordered", at + 1),
        ),
        (
            "marked",
            // The line claimed for scheme 2 by the member, its bytes otherwise the same.
            Box::new(move |l: &mut Vec<String>| {
                let i = l[at].rfind(",\"event.hash\":\"").unwrap();
                l[at].insert_str(i, ",\"event.hash_scheme\":2");
            }),
            format!("audit.jsonl:{}: changed", at + 1),
        ),
    ];
    for (name, edit, expected) in cases {
        let mut l = new.clone();
        edit(&mut l);
        let copy = state.path().join(format!("{name}.jsonl"));
        write_lines(&copy, &l);
        let (code, out, err) = verify(&["--public-key", &key, &r, s(&copy)]);
        assert_eq!(code, 1, "{name}: {out}{err}");
        let expected = expected.replace("audit.jsonl", &format!("{name}.jsonl"));
        assert!(out.contains(&expected), "{name}: expected {expected:?} in\n{out}");
    }
    // A record rewritten and every hash after it recomputed by scheme 1: the checkpoint's
    // Merkle root shows it without a key, its signature with one.
    let mut l = new.clone();
    l[at] = l[at].replacen("/private/", "/public//", 1);
    rechain(&mut l);
    let copy = state.path().join("rechained.jsonl");
    write_lines(&copy, &l);
    let (code, out, _) = verify(&[s(&copy)]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("Merkle root mismatch"), "{out}");
    let (code, out, _) = verify(&["--public-key", &key, &r, s(&copy)]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("bad checkpoint"), "{out}");
}

/// An upgrade: the proxy that hashes each line once starts on a log written by the scheme
/// before (it ends with that proxy's closing checkpoint), continues its chain and its Merkle
/// tree under the same origin (no restart), and the mixed log verifies as one: records of
/// both schemes are proved, a checkpoint of the old scheme is consistent with one of the new,
/// and tampering on either side of the upgrade fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_of_the_first_scheme_continues_in_the_second_after_an_upgrade() {
    let origin = Origin::start(ROBOTS).await;
    let (state, rotated, current, key) = first_scheme_log();
    let before = lines(&current);
    let pem = state.path().join("keys/audit.pem");
    let env = [
        ("ROBOTS_PROXY_STATE_DIR", s(state.path())),
        ("ROBOTS_PROXY_AUDIT__CHECKPOINT_KEY", s(&pem)),
        ("ROBOTS_PROXY_AUDIT__CHECKPOINT_INTERVAL", "2s"),
    ];
    let mut proxy = ProxyProcess::start(&[], &env);
    block(&proxy, &origin, 3, "e").await;
    wait_for_lines(&current, "/private/e-2", 1).await;
    Keyed::stop(&mut proxy).await;
    let after = lines(&current);
    assert_eq!(after[..before.len()], before[..], "the old lines stay as they are");
    let added = &after[before.len()..];
    assert!(added.iter().all(|l| l.contains(",\"event.hash_scheme\":2,\"event.hash\":\"")));
    assert!(!after.iter().any(|l| l.contains("audit_chain_restart")), "one chain, one tree");
    let first: serde_json::Value = serde_json::from_str(&added[0]).unwrap();
    let last_old: serde_json::Value = serde_json::from_str(before.last().unwrap()).unwrap();
    assert_eq!(first["event.previous_hash"], last_old["event.hash"]);
    let (r, c) = (s(&rotated).to_owned(), s(&current).to_owned());
    let (code, out, err) = verify(&["--public-key", &key, &r, &c]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!out.contains("starts again"), "{out}");
    assert_eq!(verify(&[&r, &c]).0, 0);

    // A record of each scheme proved to the first checkpoint that covers it, the old one to a
    // checkpoint the new proxy signed.
    let old_proof =
        prove_and_check(&[&r, &c], sequence_of(&after, "/private/d-3"), &key, state.path());
    assert_eq!(old_proof["format"], "robots-proxy audit inclusion proof v1");
    let new_record = after.iter().find(|l| l.contains("/private/e-1")).unwrap();
    let new_proof =
        prove_and_check(&[&r, &c], sequence_of(&after, "/private/e-1"), &key, state.path());
    assert_eq!(new_proof["format"], "robots-proxy audit inclusion proof v2");
    assert_eq!(new_proof["record"].as_str().unwrap(), without_hash(new_record));
    // The last checkpoint of the old scheme against the last of the new: one growing log.
    let note = |line: &String| {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let size = v["audit.checkpoint.tree_size"].as_u64()?;
        Some((size, v["audit.checkpoint.note"].as_str()?.to_owned()))
    };
    let last_old = before.iter().rev().find_map(note).unwrap();
    let last_new = added.iter().rev().find_map(note).unwrap();
    assert!(last_old.0 < last_new.0);
    let (old, new) = (state.path().join("old.note"), state.path().join("new.note"));
    std::fs::write(&old, &last_old.1).unwrap();
    std::fs::write(&new, &last_new.1).unwrap();
    let (code, out, err) =
        audit(&["consistency", s(&old), s(&new), "--log", &r, &c, "--public-key", &key]);
    assert_eq!(code, 0, "{out}{err}");

    // Tampering before and after the upgrade: changed records are named.
    for needle in ["/private/d-1", "/private/e-0"] {
        let mut l = after.clone();
        let at = l.iter().position(|x| x.contains(needle)).unwrap();
        l[at] = l[at].replacen("/private/", "/privatE/", 1);
        let copy = state.path().join("tampered.jsonl");
        write_lines(&copy, &l);
        let (code, out, _) = verify(&["--public-key", &key, &r, s(&copy)]);
        assert_eq!(code, 1, "{needle}: {out}");
        assert!(out.contains(&format!("tampered.jsonl:{}: changed", at + 1)), "{needle}: {out}");
    }
    // A new record rewritten and the hashes after it recomputed: caught by the Merkle root.
    let mut l = after.clone();
    let at = l.iter().position(|x| x.contains("/private/e-0")).unwrap();
    l[at] = l[at].replacen("/private/", "/public//", 1);
    rechain(&mut l);
    let copy = state.path().join("rechained.jsonl");
    write_lines(&copy, &l);
    let (code, out, _) = verify(&[&r, s(&copy)]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("Merkle root mismatch"), "{out}");
}
