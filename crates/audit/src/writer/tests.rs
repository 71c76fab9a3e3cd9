//! The writer's chain under write failures.

use super::*;
use std::fs::OpenOptions;

fn line(n: u32) -> Pending {
    format!("{{\"n\":{n}}}\n").into_bytes().into()
}

/// A forger's line, as docs/audit.md says the writer makes it (scheme 2): `body` (the record
/// with its `event.sequence` and `event.previous_hash`, without its final `}`) after `head`;
/// the line (without its newline) and its hash.
fn forged_line(head: &str, body: &str) -> (String, String) {
    use crate::chain::{leaf_of_body, link_leaf, SCHEME_MEMBER};
    let body = format!("{body}{}", std::str::from_utf8(SCHEME_MEMBER).unwrap());
    let hash = link_leaf(head.as_bytes(), &leaf_of_body(body.as_bytes()));
    let hash = String::from_utf8(hash.to_vec()).unwrap();
    (format!("{body},\"event.hash\":\"{hash}\"}}"), hash)
}

/// Records lost to a failed write take no place in the chain: the next record written
/// continues from the last one in the file, and the file verifies.
#[cfg(target_os = "linux")]
#[test]
fn a_failed_write_leaves_the_chain_at_the_last_record_in_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.jsonl");
    let node = Arc::new(std::sync::OnceLock::new());
    let mut sink = Sink::new(
        path.clone(),
        Some(open_file(&path).unwrap()),
        node,
        None,
        Duration::from_secs(60),
    );
    assert_eq!(sink.write(&[line(1)], true, false, false).written, 1);
    // A disk that refuses every byte.
    let full = OpenOptions::new().append(true).open("/dev/full").unwrap();
    sink.file = Some((full, None));
    let failed = sink.write(&[line(2), line(3)], false, false, false);
    assert_eq!((failed.written, failed.lost), (0, 2));
    // The next batch opens the path again and continues the chain.
    assert_eq!(sink.write(&[line(4)], true, false, false).written, 1);
    let report = super::super::verify::verify_files(std::slice::from_ref(&path), None);
    assert_eq!(report.status, super::super::verify::Status::Intact, "{}", report.render());
    assert_eq!(report.records, 2);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.lines().nth(1).unwrap().contains("\"event.sequence\":2,\"event.previous_hash\""));
}

mod anchoring {
    //! Issue 39: the chain at start (C1, H3) and coverage by checkpoints (H1, M7), with the
    //! writer's file written as the proxy writes it and forged as the review's `forge.py` does.

    use super::*;
    use crate::chain::{split_line, GENESIS};
    use crate::checkpoint::PublicKey;
    use crate::verify::{read_shipped, verify, verify_files, Options, Report, Status};
    use robots_proxy_identity::keys::{KeyName, SigningKey};

    fn key(dir: &Path) -> Arc<SigningKey> {
        let name: KeyName = "audit".parse().unwrap();
        Arc::new(SigningKey::create(&name, &name.file_in(&dir.join("keys"))).unwrap())
    }

    fn sink(path: &Path, key: Option<&Arc<SigningKey>>) -> Sink {
        let node = Arc::new(std::sync::OnceLock::new());
        let file = Some(open_file(path).unwrap());
        Sink::new(path.to_owned(), file, node, key.cloned(), Duration::from_secs(1))
    }

    fn check(files: &[PathBuf], key: Option<&PublicKey>) -> Report {
        verify_files(files, key)
    }

    /// `forge.py`: drops the records `drop` (by `"n"`) and every checkpoint, and recomputes
    /// `event.sequence`, `event.previous_hash` and `event.hash` without the key.
    fn forge(path: &Path, drop: &[u64]) {
        let text = std::fs::read_to_string(path).unwrap();
        let mut head: Option<String> = None;
        let mut sequence = 0;
        let mut out = String::new();
        for raw in text.lines().filter(|l| !l.is_empty()) {
            let mut r: serde_json::Map<String, serde_json::Value> =
                serde_json::from_str(raw).unwrap();
            if head.is_none() {
                head = Some(r["event.previous_hash"].as_str().unwrap().to_owned());
                sequence = r["event.sequence"].as_u64().unwrap() - 1;
            }
            let dropped = r.get("n").and_then(|n| n.as_u64()).is_some_and(|n| drop.contains(&n));
            // Checkpoints, and manifests (which name the bytes the forger changes), go.
            let own = ["audit_checkpoint", "audit_manifest"];
            if dropped || r.get("event.action").is_some_and(|a| own.iter().any(|o| a == o)) {
                continue;
            }
            let first = out.is_empty();
            let had_previous = r.contains_key("event.previous_hash");
            for k in ["event.sequence", "event.previous_hash", "event.hash_scheme", "event.hash"] {
                r.remove(k);
            }
            sequence += 1;
            let json = serde_json::Value::Object(r).to_string();
            let mut body = format!("{},\"event.sequence\":{sequence}", &json[..json.len() - 1]);
            if first || had_previous {
                body += &format!(",\"event.previous_hash\":\"{}\"", head.as_ref().unwrap());
            }
            let (line, hash) = forged_line(head.as_ref().unwrap(), &body);
            out += &format!("{line}\n");
            head = Some(hash);
        }
        std::fs::write(path, out).unwrap();
    }

    fn actions(path: &Path) -> Vec<String> {
        let text = std::fs::read_to_string(path).unwrap();
        let action = |l: &str| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["event.action"].as_str().unwrap_or("record").to_owned()
        };
        text.lines().map(action).collect()
    }

    /// C1, the review's attack exactly: a signed log, then (no key) one record removed and
    /// every checkpoint, re-chained; a restart and one more record, signed. Today the writer
    /// continues the forged tail and its checkpoint signs it, and `verify --public-key` says
    /// intact; now it starts a new chain with a record that says why, and the forged records
    /// are reported as not proven.
    #[test]
    fn a_forged_tail_is_never_signed_over_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let key = key(dir.path());
        let public = PublicKey::of(&key);
        let path = dir.path().join("audit.jsonl");
        let mut first = sink(&path, Some(&key));
        assert_eq!(
            first.write(&[line(1), line(2), line(3), line(4)], true, false, false).written,
            4
        );
        first.write(&[], true, true, false);
        drop(first);
        let report = check(std::slice::from_ref(&path), Some(&public));
        assert_eq!(report.status, Status::Intact, "{}", report.render());
        forge(&path, &[3]);
        let forged = check(std::slice::from_ref(&path), Some(&public));
        assert_ne!(forged.status, Status::Intact, "{}", forged.render());

        let mut second = sink(&path, Some(&key));
        assert_eq!(second.write(&[line(5)], true, false, false).written, 1);
        second.write(&[], true, true, false);
        let report = check(std::slice::from_ref(&path), Some(&public));
        assert_eq!(report.status, Status::Unproven, "{}", report.render());
        assert_eq!(report.exit_code(), 3);
        assert_eq!(report.unproven.len(), 1, "{}", report.render());
        assert_eq!(report.unproven[0].records, 3, "the three forged records");
        assert!(
            report.render().contains("the chain starts again (no_checkpoint)"),
            "{}",
            report.render()
        );
        assert!(report.render().contains("NOT PROVEN"), "{}", report.render());
        let all = actions(&path);
        assert_eq!(
            &all[3..],
            ["audit_chain_restart", "audit_checkpoint", "record", "audit_checkpoint"]
        );
        // Without a key the chain verifies (a declared restart is not a break), and says so.
        let report = check(std::slice::from_ref(&path), None);
        assert_eq!(report.status, Status::Intact, "{}", report.render());
        assert!(report.notes.iter().any(|n| n.contains("starts again")), "{:?}", report.notes);
    }

    /// C1: records after the last checkpoint (a crash, or records appended by someone
    /// without the key) are not signed over either: a new chain, and they are not proven.
    #[test]
    fn an_unsigned_tail_starts_a_new_chain() {
        let dir = tempfile::tempdir().unwrap();
        let key = key(dir.path());
        let public = PublicKey::of(&key);
        let path = dir.path().join("audit.jsonl");
        let mut first = sink(&path, Some(&key));
        first.write(&[line(1)], true, true, false);
        first.write(&[line(2), line(3)], true, false, false);
        drop(first); // killed: no closing checkpoint
        let mut second = sink(&path, Some(&key));
        second.write(&[line(4)], true, true, false);
        let report = check(std::slice::from_ref(&path), Some(&public));
        assert_eq!(report.status, Status::Unproven, "{}", report.render());
        assert_eq!(
            report.unproven[0].records,
            2,
            "{}\n{}",
            report.render(),
            std::fs::read_to_string(&path).unwrap()
        );
        assert!(report.render().contains("(unsigned_tail)"), "{}", report.render());
        // A clean stop (the file ends with the closing checkpoint): one chain, no restart.
        let mut third = sink(&path, Some(&key));
        third.write(&[line(5)], true, true, false);
        assert!(
            !actions(&path)[8..].contains(&"audit_chain_restart".to_owned()),
            "{:?}",
            actions(&path)
        );
        let report = check(std::slice::from_ref(&path), Some(&public));
        assert_eq!(report.unproven.len(), 1, "{}", report.render());
    }

    /// H3: a rotation (rename, reopen), then a restart before any record: the chain goes on
    /// from the state kept beside the log, and the untouched files verify, with a key and
    /// without.
    #[test]
    fn a_restart_on_the_empty_file_after_a_rotation_continues_the_chain() {
        for keyed in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let key = key(dir.path());
            let public = PublicKey::of(&key);
            let key = keyed.then_some(&key);
            let path = dir.path().join("audit.jsonl");
            let rotated = dir.path().join("audit.jsonl.1");
            let mut first = sink(&path, key);
            first.write(&[line(1), line(2)], true, false, false);
            std::fs::rename(&path, &rotated).unwrap();
            let (_, opened) = first.reopen();
            opened.unwrap();
            drop(first);
            // With a key, the new file holds the manifest of the rotated one (and its
            // checkpoint); without one, nothing (a manifest is written only with a key). No
            // record of a caller either way.
            let new = std::fs::read_to_string(&path).unwrap();
            if keyed {
                assert!(new.starts_with("{") && new.contains("\"audit_manifest\""), "{new}");
            } else {
                assert!(!new.contains("\"audit_manifest\""), "{new}");
            }
            assert!(!new.contains("\"n\":"), "{new}");
            let mut second = sink(&path, key);
            second.write(&[line(3)], true, true, false);
            let files = [rotated.clone(), path.clone()];
            let report = check(&files, keyed.then_some(&public));
            assert_eq!(report.status, Status::Intact, "keyed {keyed}: {}", report.render());
            assert!(report.notes.is_empty(), "{:?}", report.notes);
            assert!(!actions(&path).contains(&"audit_chain_restart".to_owned()));
        }
    }

    /// H1: checkpoints removed (and the chain recomputed) are not "intact" with a key: none
    /// left; a rotated file that no longer ends with one; records later than the cadence
    /// allows with no checkpoint after them.
    #[test]
    fn removed_checkpoints_are_not_proven() {
        let dir = tempfile::tempdir().unwrap();
        let key = key(dir.path());
        let public = PublicKey::of(&key);
        let path = dir.path().join("audit.jsonl");
        let rotated = dir.path().join("audit.jsonl.1");
        let mut s = sink(&path, Some(&key));
        s.write(&[line(1), line(2)], true, true, false);
        std::fs::rename(&path, &rotated).unwrap();
        s.reopen().1.unwrap();
        s.write(&[line(3)], true, true, false);
        let files = [rotated.clone(), path.clone()];
        assert_eq!(check(&files, Some(&public)).status, Status::Intact);
        // Every checkpoint gone, both files re-chained as one.
        let copy = |name: &str| {
            let d = dir.path().join(name);
            std::fs::create_dir_all(&d).unwrap();
            let (r, c) = (d.join("audit.jsonl.1"), d.join("audit.jsonl"));
            std::fs::copy(&rotated, &r).unwrap();
            std::fs::copy(&path, &c).unwrap();
            (r, c)
        };
        let (r, c) = copy("none");
        forge(&r, &[]);
        let mut joined = std::fs::read(&r).unwrap();
        joined.extend(std::fs::read(&c).unwrap());
        std::fs::write(&r, &joined).unwrap();
        forge(&r, &[]);
        let report = check(std::slice::from_ref(&r), Some(&public));
        assert_eq!(report.status, Status::Unproven, "{}", report.render());
        assert!(report.render().contains("no checkpoint that verifies"), "{}", report.render());
        assert_eq!(check(std::slice::from_ref(&r), None).status, Status::Intact);
        // The rotated file's closing checkpoint removed, record 2 with it.
        let (r, c) = copy("rotated");
        let text = std::fs::read_to_string(&r).unwrap();
        let kept: Vec<&str> = text.lines().take(2).collect();
        std::fs::write(&r, kept.join("\n") + "\n").unwrap();
        let report = check(&[r.clone(), c.clone()], Some(&public));
        // The current file's first record names a hash the rotated file no longer ends with.
        assert_ne!(report.status, Status::Intact, "{}", report.render());
        // Records later than the cadence allows, with no checkpoint after them.
        let late = dir.path().join("late.jsonl");
        let mut s = sink(&late, Some(&key));
        let at = timestamp(std::time::SystemTime::now() + Duration::from_secs(3600));
        let record = format!("{{\"@timestamp\":\"{at}\",\"n\":1}}\n").into_bytes();
        s.write(&[record.into()], true, false, false);
        let report = check(std::slice::from_ref(&late), Some(&public));
        assert_eq!(report.status, Status::Unproven, "{}", report.render());
        assert!(report.render().contains("cadence"), "{}", report.render());
    }

    /// M7: the oldest file left out while checkpoints shipped elsewhere cover its records.
    #[test]
    fn shipped_checkpoints_before_the_files_show_a_missing_oldest_file() {
        let dir = tempfile::tempdir().unwrap();
        let key = key(dir.path());
        let public = PublicKey::of(&key);
        let path = dir.path().join("audit.jsonl");
        let rotated = dir.path().join("audit.jsonl.1");
        let mut s = sink(&path, Some(&key));
        s.write(&[line(1), line(2)], true, true, false);
        std::fs::rename(&path, &rotated).unwrap();
        s.reopen().1.unwrap();
        s.write(&[line(3)], true, true, false);
        let shipped = dir.path().join("shipped.jsonl");
        let mut all = std::fs::read(&rotated).unwrap();
        all.extend(std::fs::read(&path).unwrap());
        std::fs::write(&shipped, all).unwrap();
        let keys = crate::keyset::KeySet::single(public.clone());
        let shipped = read_shipped(&shipped, Some(&keys)).unwrap();
        let options = Options { keys: Some(&keys), shipped: &shipped, range: None };
        let both = verify(&[rotated.clone(), path.clone()], options);
        assert_eq!(both.status, Status::Intact, "{}", both.render());
        let newest = verify(std::slice::from_ref(&path), options);
        assert_eq!(newest.status, Status::Unproven, "{}", newest.render());
        assert!(newest.render().contains("the files before are missing"), "{}", newest.render());
        let _ = (split_line, GENESIS);
    }

    /// Appends `records` (JSON objects) to `path`, chained as the writer chains them from the
    /// file's last line, without the key; the first one from [`GENESIS`] when `restart`.
    fn append_forged(path: &Path, records: &[String], restart: bool) {
        let text = std::fs::read_to_string(path).unwrap();
        let last = text.lines().last().unwrap();
        let (_, hash) = split_line(last.as_bytes()).unwrap();
        let mut head = String::from_utf8(hash.to_vec()).unwrap();
        let last: serde_json::Value = serde_json::from_str(last).unwrap();
        let mut sequence = last["event.sequence"].as_u64().unwrap();
        let mut out = text.clone();
        for (i, record) in records.iter().enumerate() {
            let record = record.strip_suffix('}').unwrap();
            sequence += 1;
            let body = if i == 0 && restart {
                head = String::from_utf8(GENESIS.to_vec()).unwrap();
                format!("{record},\"event.sequence\":{sequence},\"event.previous_hash\":\"{head}\"")
            } else {
                format!("{record},\"event.sequence\":{sequence}")
            };
            let (line, hash) = forged_line(&head, &body);
            out += &format!("{line}\n");
            head = hash;
        }
        std::fs::write(path, out).unwrap();
    }

    /// The review of issue 39: without the key, an `audit_chain_restart` record written after
    /// a genuine checkpoint, records chained from it and no checkpoint after them are not
    /// proven: the writer signs a checkpoint right after every restart it writes.
    #[test]
    fn a_forged_restart_after_a_checkpoint_is_not_proven() {
        let dir = tempfile::tempdir().unwrap();
        let key = key(dir.path());
        let public = PublicKey::of(&key);
        let path = dir.path().join("audit.jsonl");
        let mut s = sink(&path, Some(&key));
        s.write(&[line(1), line(2)], true, true, false);
        drop(s);
        assert_eq!(check(std::slice::from_ref(&path), Some(&public)).status, Status::Intact);
        let at = timestamp(std::time::SystemTime::now());
        let restart = format!(
            "{{\"@timestamp\":\"{at}\",\"event.action\":\"audit_chain_restart\",\
             \"audit.restart.reason\":\"no_checkpoint\"}}"
        );
        let record = format!("{{\"@timestamp\":\"{at}\",\"n\":9}}");
        append_forged(&path, &[restart, record.clone(), record], true);
        let report = check(std::slice::from_ref(&path), Some(&public));
        assert_eq!(report.status, Status::Unproven, "{}", report.render());
        assert_eq!(report.unproven.len(), 1, "{}", report.render());
        assert_eq!(report.unproven[0].records, 3, "the restart and the two records");
        assert!(report.render().contains("no checkpoint verifying"), "{}", report.render());
        // Without a key, a declared restart is not a break.
        assert_eq!(check(std::slice::from_ref(&path), None).status, Status::Intact);
    }

    /// A genuine restart and its checkpoint, copied later into the file (with records chained
    /// after them): the checkpoint's time goes back, and it vouches for nothing.
    #[test]
    fn a_replayed_restart_and_checkpoint_are_not_proven() {
        let dir = tempfile::tempdir().unwrap();
        let key = key(dir.path());
        let public = PublicKey::of(&key);
        let path = dir.path().join("audit.jsonl");
        let mut first = sink(&path, Some(&key));
        first.write(&[line(1)], true, true, false);
        first.write(&[line(2)], true, false, false);
        drop(first); // killed: the next start restarts the chain
        let mut second = sink(&path, Some(&key));
        second.write(&[line(3)], true, true, false);
        std::thread::sleep(Duration::from_millis(20));
        second.write(&[line(4)], true, true, false);
        drop(second);
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let at = lines.iter().position(|l| l.contains("audit_chain_restart")).unwrap();
        assert!(lines[at + 1].contains("audit_checkpoint"));
        let report = check(std::slice::from_ref(&path), Some(&public));
        assert_eq!(report.unproven.len(), 1, "the unsigned tail: {}", report.render());
        // The pair copied at the end, verbatim (its hashes are the same from GENESIS on).
        let mut replayed = text.clone();
        replayed += lines[at];
        replayed += "\n";
        replayed += lines[at + 1];
        replayed += "\n";
        std::fs::write(&path, replayed).unwrap();
        append_forged(&path, &["{\"n\":9}".to_owned()], false);
        let report = check(std::slice::from_ref(&path), Some(&public));
        assert_eq!(report.status, Status::Unproven, "{}", report.render());
        assert_eq!(report.unproven.len(), 2, "{}", report.render());
        assert_eq!(report.unproven[1].records, 3, "the replayed pair and the record after");
        assert!(report.notes.iter().any(|n| n.contains("replayed")), "{:?}", report.notes);
    }
}

mod merkle_tree {
    //! Issue 39, item 1: every line of a chain is a leaf of its Merkle tree; each checkpoint
    //! names the root before it in a signed note; a restart continues the tree.

    use super::*;
    use crate::chain::Sealed;
    use crate::checkpoint::PublicKey;
    use crate::merkle::{self, Tree};
    use crate::note;
    use crate::verify::{verify_files, Kind, Status};
    use robots_proxy_identity::keys::{KeyName, SigningKey};

    fn sink(path: &Path, key: &Arc<SigningKey>) -> Sink {
        let node = Arc::new(std::sync::OnceLock::new());
        let file = Some(open_file(path).unwrap());
        Sink::new(path.to_owned(), file, node, Some(key.clone()), Duration::from_secs(1))
    }

    #[test]
    fn checkpoints_name_the_root_of_the_lines_before_them_across_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let name: KeyName = "audit".parse().unwrap();
        let key = Arc::new(SigningKey::create(&name, &name.file_in(dir.path())).unwrap());
        let public = PublicKey::of(&key);
        let path = dir.path().join("audit.jsonl");
        let mut first = sink(&path, &key);
        first.write(&[line(1), line(2), line(3)], true, false, false);
        first.write(&[line(4)], true, true, false);
        drop(first); // a clean stop: the file ends with the closing checkpoint
        let mut second = sink(&path, &key);
        second.write(&[line(5), line(6)], true, true, false);
        drop(second);
        let report = verify_files(std::slice::from_ref(&path), Some(&public));
        assert_eq!(report.status, Status::Intact, "{}", report.render());

        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(!text.contains("audit_chain_restart"), "one chain:\n{text}");
        let mut tree = Tree::default();
        let mut origins = Vec::new();
        let mut checkpoints = 0;
        for (i, l) in lines.iter().enumerate() {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            if v["event.action"] == "audit_checkpoint" {
                checkpoints += 1;
                assert_eq!(v["audit.checkpoint.tree_size"], i as u64, "line {}", i + 1);
                assert_eq!(v["audit.checkpoint.root"], merkle::encode(&tree.root()));
                let said = note::open(v["audit.checkpoint.note"].as_str().unwrap(), &public);
                let said = said.unwrap();
                assert_eq!((said.size, said.root), (i as u64, tree.root()));
                origins.push(said.origin);
            }
            tree.push_hash(Sealed::parse(l.as_bytes()).unwrap().leaf());
        }
        assert!(checkpoints >= 3, "{text}");
        origins.dedup();
        assert_eq!(origins.len(), 1, "the restart continues the tree under its origin");

        // A forger without the key rewrites the last checkpoint's root and edge to another
        // tree's (consistent with each other) and re-chains the hashes: the root is caught.
        let last = lines.len() - 1;
        let mut other = Tree::default();
        other.push_hash(merkle::leaf_hash(b"forged"));
        for l in &lines[1..last] {
            other.push_hash(Sealed::parse(l.as_bytes()).unwrap().leaf());
        }
        let mut r: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(lines[last]).unwrap();
        r.insert("audit.checkpoint.root".into(), merkle::encode(&other.root()).into());
        let edge: Vec<serde_json::Value> =
            other.edge().iter().map(|h| merkle::encode(h).into()).collect();
        r.insert("audit.checkpoint.tree_edge".into(), edge.into());
        let previous = r.remove("event.previous_hash");
        r.remove("event.hash");
        r.remove("event.hash_scheme");
        let sequence = r.remove("event.sequence").unwrap();
        let json = serde_json::Value::Object(r).to_string();
        let mut body = format!("{},\"event.sequence\":{sequence}", &json[..json.len() - 1]);
        if let Some(p) = previous {
            body += &format!(",\"event.previous_hash\":{p}");
        }
        let before: serde_json::Value = serde_json::from_str(lines[last - 1]).unwrap();
        let head = before["event.hash"].as_str().unwrap();
        let (forged_last, _) = forged_line(head, &body);
        let mut forged = lines[..last].join("\n");
        forged += &format!("\n{forged_last}\n");
        std::fs::write(&path, forged).unwrap();
        for key in [Some(&public), None] {
            let report = verify_files(std::slice::from_ref(&path), key);
            assert_eq!(report.status, Status::Tampered, "{}", report.render());
            assert_eq!(report.exit_code(), 1);
            let problem = report.problem.as_ref().unwrap();
            assert_eq!((problem.kind, problem.line), (Kind::BadCheckpoint, Some(last as u64 + 1)));
            assert!(problem.message.contains("Merkle root mismatch"), "{}", problem.message);
        }
    }

    /// A write cut short leaves the tree at the last line in the file: the next checkpoint's
    /// root is still that of the lines before it.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_failed_write_leaves_the_tree_at_the_last_line_in_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let name: KeyName = "audit".parse().unwrap();
        let key = Arc::new(SigningKey::create(&name, &name.file_in(dir.path())).unwrap());
        let path = dir.path().join("a.jsonl");
        let mut sink = sink(&path, &key);
        sink.write(&[line(1)], true, false, false);
        let full = std::fs::OpenOptions::new().append(true).open("/dev/full").unwrap();
        sink.file = Some((full, None));
        assert_eq!(sink.write(&[line(2), line(3)], false, true, false).written, 0);
        sink.write(&[line(4)], true, true, false);
        let report = verify_files(std::slice::from_ref(&path), Some(&PublicKey::of(&key)));
        assert_eq!(report.status, Status::Intact, "{}", report.render());
        assert!(report.checkpoints >= 2, "{}", report.render());
    }
}
