//! Issue 39, items 2 and 4, against the real binary: lifecycle records (start, reload, stop,
//! a checkpoint key change), manifests of every closed file checked by `audit verify` (a
//! truncated, replaced or missing file is named), key sets with validity windows, and `audit
//! verify --from --to`, which demands that signed checkpoints cover a range of time.

use std::path::Path;
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::audit_chain::{
    block, forge, lines, s, text, verify, wait_for_lines, write_lines, Keyed, ROBOTS,
};
use super::support::{run, Origin, ProxyProcess};

fn records(path: &Path) -> Vec<serde_json::Value> {
    lines(path).iter().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn of<'a>(all: &'a [serde_json::Value], action: &str) -> Vec<&'a serde_json::Value> {
    all.iter().filter(|r| r["event.action"] == action).collect()
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// A second checkpoint key beside `keyed`'s: (its PEM, its public JWK file, its key id).
fn second_key(keyed: &Keyed) -> (String, std::path::PathBuf, String) {
    let keys = keyed.state.path().join("keys");
    let made = run(&["keys", "new", "audit2", "--dir", s(&keys)], &[]);
    assert!(made.status.success(), "{}", text(&made.stderr));
    let pem = keys.join("audit2.pem");
    let env = [("ROBOTS_PROXY_AUDIT__CHECKPOINT_KEY", s(&pem))];
    let public = run(&["audit", "public-key"], &env);
    assert!(public.status.success(), "{}", text(&public.stderr));
    let jwk = keyed.state.path().join("audit2.jwk");
    std::fs::write(&jwk, &public.stdout).unwrap();
    let value: serde_json::Value = serde_json::from_slice(&public.stdout).unwrap();
    (s(&pem).to_owned(), jwk, value["kid"].as_str().unwrap().to_owned())
}

fn keyid(jwk: &Path) -> String {
    let value: serde_json::Value = serde_json::from_slice(&std::fs::read(jwk).unwrap()).unwrap();
    value["kid"].as_str().unwrap().to_owned()
}

/// Issue 39, item 2 (lifecycle) and item 4 (key sets): `proxy_start` names the configuration
/// `config check` prints (its digest) and the settings that change what is logged; a reload
/// that changes `audit.all_decisions` writes `proxy_reconfigured` (one that changes nothing
/// writes none); a clean stop writes `proxy_stop`, the file's manifest and the closing
/// checkpoint. A restart under another checkpoint key writes `audit_key_changed` naming both
/// key ids; `audit verify` passes with both keys given, and names the checkpoint of an
/// unknown key, or of a key outside its window, as tampering.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_records_and_a_key_change_verify_with_a_key_set() {
    let origin = Origin::start(ROBOTS).await;
    let keyed = Keyed::new();
    let path = keyed.state.path().join("audit.jsonl");
    let config = keyed.state.path().join("robots-proxy.toml");
    std::fs::write(&config, "[audit]\nall_decisions = false\n").unwrap();
    // As ProxyProcess starts it: its listeners and destinations on top of the file.
    let args = ["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"];
    let mut env = keyed.env().to_vec();
    env.push(("ROBOTS_PROXY_ACCESS__ALLOW_DESTINATIONS", "127.0.0.0/8"));
    let checked =
        run(&[&["config", "check", "--config", s(&config)][..], &args[..]].concat(), &env);
    assert!(checked.status.success(), "{}", text(&checked.stderr));
    let printed = text(&checked.stdout);
    let digest = printed
        .lines()
        .find_map(|l| l.strip_prefix("# configuration sha256 (audit.config.sha256): "))
        .expect("config check prints the digest")
        .to_owned();
    let toml: String =
        printed.lines().take_while(|l| !l.starts_with("# ")).map(|l| format!("{l}\n")).collect();
    assert_eq!(sha256_hex(toml.as_bytes()), digest, "the digest is of the TOML printed");

    let mut proxy = ProxyProcess::start(&["--config", s(&config)], &keyed.env());
    block(&proxy, &origin, 1, "a").await;
    wait_for_lines(&path, "proxy_start", 1).await;
    wait_for_lines(&path, "robots_disallow", 1).await;
    let all = records(&path);
    let start = of(&all, "proxy_start")[0].clone();
    assert_eq!(start["audit.config.sha256"], digest.as_str(), "{start}");
    assert_eq!(start["audit.config.all_decisions"], false);
    assert_eq!(start["audit.config.policy_mode"], "enforce");
    assert_eq!(start["audit.config.exceptions"], 0);
    assert_eq!(start["audit.config.exceptions_sha256"], sha256_hex(b""));
    assert_eq!(start["audit.config.usage"], false);
    assert_eq!(start["service.version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(start["process.pid"], proxy.pid());
    // proxy_start comes before the first request's record.
    let at = |action: &str| all.iter().position(|r| r["event.action"] == action).unwrap();
    assert!(at("proxy_start") < at("robots_disallow"));

    // A reload that changes all_decisions; then one that changes nothing.
    std::fs::write(&config, "[audit]\nall_decisions = true\n").unwrap();
    proxy.signal("HUP");
    wait_for_lines(&path, "proxy_reconfigured", 1).await;
    proxy.signal("HUP");
    proxy.wait_for_stderr("configuration reloaded", 2).await;
    block(&proxy, &origin, 1, "b").await;
    wait_for_lines(&path, "/private/b-0", 1).await;
    Keyed::stop(&mut proxy).await;
    let all = records(&path);
    let reconfigured = of(&all, "proxy_reconfigured");
    assert_eq!(reconfigured.len(), 1, "a reload that changes nothing writes none");
    assert_eq!(reconfigured[0]["audit.config.all_decisions"], true);
    let changed = reconfigured[0]["audit.config.changed"].as_str().unwrap();
    assert!(changed.contains("all_decisions") && changed.contains("configuration"), "{changed}");
    assert_ne!(reconfigured[0]["audit.config.sha256"], digest.as_str());
    // The stop: proxy_stop with the settings in force, the manifest, the closing checkpoint.
    let n = all.len();
    assert_eq!(all[n - 3]["event.action"], "proxy_stop");
    assert_eq!(all[n - 3]["audit.config.all_decisions"], true);
    assert_eq!(all[n - 2]["event.action"], "audit_manifest");
    assert_eq!(all[n - 2]["audit.manifest.closed"], "stop");
    assert_eq!(all[n - 1]["event.action"], "audit_checkpoint");
    let manifest = &all[n - 2];
    let bytes = std::fs::read(&path).unwrap();
    let length = manifest["audit.manifest.bytes"].as_u64().unwrap() as usize;
    assert_eq!(manifest["audit.manifest.sha256"], sha256_hex(&bytes[..length]));
    assert_eq!(manifest["audit.manifest.file"], "audit.jsonl");

    // A restart under another key: audit_key_changed names both.
    let (pem2, jwk2, keyid2) = second_key(&keyed);
    let keyid1 = keyid(&keyed.public_key);
    let mut env = keyed.env().to_vec();
    env[1] = ("ROBOTS_PROXY_AUDIT__CHECKPOINT_KEY", pem2.as_str());
    let mut proxy = ProxyProcess::start(&[], &env);
    block(&proxy, &origin, 1, "c").await;
    wait_for_lines(&path, "/private/c-0", 1).await;
    Keyed::stop(&mut proxy).await;
    let all = records(&path);
    let changed = of(&all, "audit_key_changed");
    assert_eq!(changed.len(), 1);
    assert_eq!(changed[0]["audit.key.previous_keyid"], keyid1.as_str());
    assert_eq!(changed[0]["audit.key.keyid"], keyid2.as_str());

    // Both keys (repeated, or as one key set): intact. One alone: the other's checkpoint is
    // tampering, named.
    let key1 = s(&keyed.public_key).to_owned();
    let key2 = s(&jwk2).to_owned();
    let (code, out, err) = verify(&["--public-key", &key1, "--public-key", &key2, s(&path)]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(&keyid1) && out.contains(&keyid2), "{out}");
    let (code, out, _) = verify(&["--public-key", &key1, s(&path)]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("bad checkpoint") && out.contains("not in the key set given"), "{out}");
    let first_by_2 = 1 + lines(&path)
        .iter()
        .position(|l| l.contains("audit_checkpoint") && l.contains(&keyid2))
        .unwrap();
    assert!(out.contains(&format!("audit.jsonl:{first_by_2}:")), "{out}");

    // A key set with windows: the switch time between the two runs is fine; key 1 valid only
    // until before its first checkpoint is not.
    // The switch is the restart under key 2: its checkpoint (signed by key 2) follows the
    // restart record directly, and `audit_key_changed` comes after that checkpoint.
    let restart = all
        .iter()
        .rev()
        .find(|r| r["event.action"] == "audit_chain_restart")
        .expect("the restart under key 2");
    let switch = restart["@timestamp"].as_str().unwrap();
    let jwk = |file: &str, extra: &str| {
        let mut v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
        let extra: serde_json::Value = serde_json::from_str(extra).unwrap();
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        v
    };
    let set = keyed.state.path().join("keys.jwks");
    let write_set = |a: serde_json::Value, b: serde_json::Value| {
        std::fs::write(&set, serde_json::json!({ "keys": [a, b] }).to_string()).unwrap();
    };
    write_set(
        jwk(&key1, &format!(r#"{{"valid_until":"{switch}"}}"#)),
        jwk(&key2, &format!(r#"{{"valid_from":"{switch}"}}"#)),
    );
    let (code, out, err) = verify(&["--public-key", s(&set), s(&path)]);
    assert_eq!(code, 0, "{out}{err}");
    write_set(jwk(&key1, r#"{"valid_until":"2000-01-01T00:00:00Z"}"#), jwk(&key2, "{}"));
    let (code, out, _) = verify(&["--public-key", s(&set), s(&path)]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("outside its validity") && out.contains(&keyid1), "{out}");
    assert!(out.contains("audit.jsonl:1:"), "the first checkpoint is named: {out}");
    // A bad window: unreadable input.
    write_set(jwk(&key1, r#"{"valid_from":"yesterday"}"#), jwk(&key2, "{}"));
    let (code, _, err) = verify(&["--public-key", s(&set), s(&path)]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("valid_from") && err.contains("RFC 3339"), "{err}");
}

/// Issue 39, item 2 (manifests): two rotations by rename and SIGHUP, then a stop. Each new
/// file starts with the manifest of the file closed (its name after the rename, length and
/// SHA-256); `audit verify` passes on the whole set, names a truncated file and a replaced
/// (re-chained) one by their manifests, and with the oldest file deleted names it as not
/// given (not proven, exit 3; review M7). Then a restart after a rotation with no record in
/// between keeps every untouched file verifying intact (H3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manifests_name_every_closed_file_and_verify_checks_them() {
    let origin = Origin::start(ROBOTS).await;
    let keyed = Keyed::new();
    let dir = keyed.state.path();
    let current = dir.join("audit.jsonl");
    let (older, old) = (dir.join("audit.jsonl.2"), dir.join("audit.jsonl.1"));
    let key = s(&keyed.public_key).to_owned();
    let mut proxy = ProxyProcess::start(&[], &keyed.env());
    block(&proxy, &origin, 2, "a").await;
    wait_for_lines(&current, "robots_disallow", 2).await;
    std::fs::rename(&current, &older).unwrap();
    proxy.signal("HUP");
    proxy.wait_for_stderr("audit log reopened", 1).await;
    block(&proxy, &origin, 2, "b").await;
    wait_for_lines(&current, "robots_disallow", 2).await;
    std::fs::rename(&current, &old).unwrap();
    proxy.signal("HUP");
    proxy.wait_for_stderr("audit log reopened", 2).await;
    // A restart right after the rotation, before any request's record (H3).
    Keyed::stop(&mut proxy).await;
    let mut proxy = ProxyProcess::start(&[], &keyed.env());
    block(&proxy, &origin, 2, "c").await;
    wait_for_lines(&current, "/private/c-1", 1).await;
    Keyed::stop(&mut proxy).await;

    for (file, named) in [(&old, &older), (&current, &old)] {
        let first = &records(file)[0];
        assert_eq!(first["event.action"], "audit_manifest", "{}", file.display());
        assert_eq!(first["audit.manifest.closed"], "rotation");
        let name = named.file_name().unwrap().to_str().unwrap();
        assert_eq!(first["audit.manifest.file"], name, "the name after the rename");
        let bytes = std::fs::read(named).unwrap();
        assert_eq!(first["audit.manifest.bytes"], bytes.len());
        assert_eq!(first["audit.manifest.sha256"], sha256_hex(&bytes));
        let first_named = &records(named)[0];
        assert_eq!(first["audit.manifest.first_sequence"], first_named["event.sequence"]);
    }
    let all = [s(&older), s(&old), s(&current)];
    let (code, out, err) = verify(&[&["--public-key", key.as_str()][..], &all[..]].concat());
    assert_eq!(code, 0, "{out}{err}");
    assert!(!out.contains("starts again"), "{out}");
    let (code, out, err) = verify(&all);
    assert_eq!(code, 0, "{out}{err}");

    // The oldest file deleted: named by the manifest at the start of the next, not proven.
    let (code, out, _) = verify(&["--public-key", &key, s(&old), s(&current)]);
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("audit.jsonl.2") && out.contains("was not given"), "{out}");
    assert!(out.contains("audit.jsonl.1:1"), "{out}");
    // Without a key: a note.
    let (code, out, _) = verify(&[s(&old), s(&current)]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("note:") && out.contains("was not given"), "{out}");

    // A copy with the middle file truncated (its last lines cut off): named as truncated.
    let copies = tempfile::tempdir().unwrap();
    let copy = |name: &str, from: &Path| {
        let to = copies.path().join(name);
        std::fs::copy(from, &to).unwrap();
        to
    };
    let (c2, c1, c0) =
        (copy("audit.jsonl.2", &older), copy("audit.jsonl.1", &old), copy("audit.jsonl", &current));
    let mut cut = lines(&c1);
    cut.truncate(cut.len() - 2);
    std::fs::write(&c1, cut.iter().map(|l| format!("{l}\n")).collect::<String>()).unwrap();
    let (code, out, _) = verify(&["--public-key", &key, s(&c2), s(&c1), s(&c0)]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("truncated") && out.contains("cut short"), "{out}");
    // The middle file replaced by a re-chained forgery (a record's URL changed, the
    // checkpoints and manifest removed, every hash recomputed without the key, no shorter
    // than the original): named as replaced.
    let length = std::fs::metadata(&old).unwrap().len() as usize;
    let padded: Vec<String> = lines(&old)
        .into_iter()
        .map(|l| l.replacen("/private/b-0", &format!("/private/b-0{}", "x".repeat(length)), 1))
        .collect();
    write_lines(&c1, &padded);
    forge(&c1, |_| false);
    let (code, out, _) = verify(&["--public-key", &key, s(&c2), s(&c1), s(&c0)]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("replaced") && out.contains("audit.jsonl.1"), "{out}");
}

/// Issue 39, item 4: `audit verify --from T1 --to T2`. A log written with a 2 s cadence
/// verifies over the range of its records; a range that starts before the files is a break
/// named at the first signed checkpoint; a proxy frozen (SIGSTOP) for longer than the cadence
/// plus the slack leaves a gap, named at the checkpoint after it; records a `kill -9` left
/// unsigned are named at the first of them. Exit 1 for each; 2 without a key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_from_to_demands_signed_coverage_of_the_range() {
    let origin = Origin::start(ROBOTS).await;
    let keyed = Keyed::new();
    let path = keyed.state.path().join("audit.jsonl");
    let key = s(&keyed.public_key).to_owned();
    let mut proxy = ProxyProcess::start(&[], &keyed.env());
    block(&proxy, &origin, 2, "a").await;
    wait_for_lines(&path, "audit_checkpoint", 2).await;
    Keyed::stop(&mut proxy).await;
    let all = records(&path);
    let time = |r: &serde_json::Value| r["@timestamp"].as_str().unwrap().to_owned();
    let (t1, t2) = (time(&all[0]), time(&all[all.len() - 1]));
    let range = |from: &str, to: &str| {
        verify(&["--public-key", &key, "--from", from, "--to", to, s(&path)])
    };
    let (code, out, err) = range(&t1, &t2);
    assert_eq!(code, 0, "{out}{err}");
    // The range starts a day before the files.
    let (code, out, _) = range("2000-01-01T00:00:00Z", &t2);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("uncovered") && out.contains("the start of the range"), "{out}");
    // No key: the range cannot be demanded.
    let (code, _, err) = verify(&["--from", &t1, s(&path)]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = verify(&["--public-key", &key, "--from", "yesterday", s(&path)]);
    assert_eq!(code, 2, "{err}");

    // A gap in the cadence: the proxy frozen for 13 s (the cadence 2 s plus 10 s of slack).
    let mut proxy = ProxyProcess::start(&[], &keyed.env());
    block(&proxy, &origin, 1, "b").await;
    wait_for_lines(&path, "/private/b-0", 1).await;
    proxy.signal("STOP");
    tokio::time::sleep(Duration::from_secs(13)).await;
    proxy.signal("CONT");
    block(&proxy, &origin, 1, "c").await;
    wait_for_lines(&path, "/private/c-0", 1).await;
    let before = lines(&path).len();
    wait_for_lines(&path, "audit_checkpoint", of(&records(&path), "audit_checkpoint").len() + 1)
        .await;
    assert!(lines(&path).len() > before);
    // Records after the last checkpoint, then kill -9 (no closing checkpoint).
    block(&proxy, &origin, 1, "d").await;
    wait_for_lines(&path, "/private/d-0", 1).await;
    proxy.signal("KILL");
    let _ = proxy.wait_exit(Duration::from_secs(10)).await;
    let all = records(&path);
    let d = 1 + all
        .iter()
        .position(|r| r["url.full"].as_str().is_some_and(|u| u.ends_with("/private/d-0")))
        .unwrap();
    let signed_after_d = all[d..].iter().any(|r| r["event.action"] == "audit_checkpoint");
    let (code, out, _) = range(&t1, &time(&all[all.len() - 1]));
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("uncovered") && out.contains("more than the cadence"), "{out}");
    if !signed_after_d {
        // The heartbeat did not come between the record and the kill (it is due every 2 s).
        assert!(out.contains(&format!("audit.jsonl:{d}: uncovered")), "{out}");
        assert!(out.contains("covered by no signed checkpoint"), "{out}");
    }
    // The range before the freeze is still covered.
    let (code, out, err) = range(&t1, &t2);
    assert_eq!(code, 0, "{out}{err}");
}

/// Issue 39, item 5 (review M6): `evidence export` carries an inclusion proof per record,
/// against a signed checkpoint; `evidence verify-export DIR --public-key K`, with the public
/// key alone, says valid; a changed byte in a record, in a proof or in a version file is
/// invalid (exit 1), naming the file; another key is invalid too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_is_verified_with_the_public_key_alone() {
    let origin = Origin::start(ROBOTS).await;
    let keyed = Keyed::new();
    let path = keyed.state.path().join("audit.jsonl");
    let mut proxy = ProxyProcess::start(&[], &keyed.env());
    block(&proxy, &origin, 3, "a").await;
    wait_for_lines(&path, "robots_disallow", 3).await;
    Keyed::stop(&mut proxy).await;
    let all = records(&path);
    let (from, to) = (
        all[0]["@timestamp"].as_str().unwrap(),
        all[all.len() - 1]["@timestamp"].as_str().unwrap(),
    );
    let out = keyed.state.path().join("export");
    let evidence = |args: &[&str]| {
        let mut all = vec!["evidence"];
        all.extend_from_slice(args);
        let o = run(&all, &[]);
        (o.status.code().unwrap_or(-1), text(&o.stdout), text(&o.stderr))
    };
    let base = origin.base();
    let (code, said, err) = evidence(&[
        "export",
        "--authority",
        &base,
        "--from",
        from,
        "--to",
        to,
        "--out",
        s(&out),
        "--audit",
        s(&path),
    ]);
    assert_eq!(code, 0, "{said}{err}");
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["proofs_missing"], serde_json::json!([]), "{manifest}");
    let exported = lines(&out.join("records.jsonl"));
    assert!(exported.len() >= 3, "{exported:?}");
    let key = s(&keyed.public_key).to_owned();
    let check = || evidence(&["verify-export", s(&out), "--public-key", &key]);
    let (code, said, err) = check();
    assert_eq!(code, 0, "{said}{err}");
    assert!(said.starts_with(&format!("valid: {} record(s)", exported.len())), "{said}");

    // Each proof is also an `audit check-proof` file.
    let value: serde_json::Value = serde_json::from_str(&exported[0]).unwrap();
    let proof = out.join("proofs").join(format!("{}.json", value["event.sequence"]));
    let checked = run(&["audit", "check-proof", s(&proof), "--public-key", &key], &[]);
    assert!(checked.status.success(), "{}", text(&checked.stderr));

    // A changed byte in a record: invalid, named.
    let records_path = out.join("records.jsonl");
    let original = std::fs::read(&records_path).unwrap();
    let changed =
        String::from_utf8(original.clone()).unwrap().replacen("/private/a-1", "/private/a-9", 1);
    std::fs::write(&records_path, &changed).unwrap();
    let (code, _, err) = check();
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("invalid") && err.contains("records.jsonl"), "{err}");
    // The same, with the (unsigned) manifest rewritten to match: the proof still refuses it.
    let manifest_path = out.join("manifest.json");
    let manifest_text = std::fs::read_to_string(&manifest_path).unwrap();
    let rewritten = manifest_text.replace(&sha256_hex(&original), &sha256_hex(changed.as_bytes()));
    std::fs::write(&manifest_path, rewritten).unwrap();
    let (code, _, err) = check();
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("is not the one proofs/"), "{err}");
    std::fs::write(&manifest_path, &manifest_text).unwrap();
    std::fs::write(&records_path, &original).unwrap();
    // A changed byte in a proof's path.
    let proof_text = std::fs::read_to_string(&proof).unwrap();
    let parsed: serde_json::Value = serde_json::from_str(&proof_text).unwrap();
    let mut forged = parsed.clone();
    forged["root"] = serde_json::json!(format!("{}=", "A".repeat(43)));
    std::fs::write(&proof, serde_json::to_vec_pretty(&forged).unwrap()).unwrap();
    let (code, _, err) = check();
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("invalid"), "{err}");
    std::fs::write(&proof, &proof_text).unwrap();
    assert_eq!(check().0, 0);
    // Another key: invalid.
    let other = Keyed::new();
    let (code, _, err) =
        evidence(&["verify-export", s(&out), "--public-key", s(&other.public_key)]);
    assert_eq!(code, 1, "{err}");
    // A missing manifest: unreadable.
    std::fs::remove_file(out.join("manifest.json")).unwrap();
    assert_eq!(check().0, 2);
}
