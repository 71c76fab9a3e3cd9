//! `robots-proxy evidence` (issue 19): a real origin whose robots.txt changes between fetches
//! (a one-second lifetime), a crawler blocked under each version by the real binary, and then
//! the past decisions replayed from the audit files alone: the version in force at a time
//! within each window and today's decision on it; a refusal before the first fetch; exit 2 for
//! bad input (a changed `robots_version` body too); an export whose manifest names the digests
//! of its files; two instances' files merged; the same from the state directory's archive with
//! the proxy stopped; a 404 and a 503 in force replayed with their consequence; two instances of
//! a fleet that had different versions at once told apart (`--instance`, issue 39, L5).

use std::path::Path;
use std::time::Duration;

use super::support::{post_json, proxied_client, run, wait_until, Origin, ProxyProcess};
use crate::fleet::support::{fleet, Redis};

const V1: &str = "User-agent: *\nDisallow: /private\n";
const V2: &str = "# version two\nUser-agent: *\nDisallow: /secret\n";

/// The lowercase hex SHA-256 of `bytes`, computed here, independently of the proxy.
fn sha256_hex(bytes: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// Every whole line of `path`, parsed.
fn records(path: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

/// The blocks recorded in `path` that name `digest`.
fn blocks_naming(path: &Path, digest: &str) -> Vec<serde_json::Value> {
    records(path)
        .into_iter()
        .filter(|r| r["event.action"] == "robots_disallow" && r["robots.sha256"] == digest)
        .collect()
}

/// `GET url` through the proxy as ExampleBot: the status.
async fn fetch(proxy: &ProxyProcess, url: &str) -> u16 {
    let client = proxied_client(proxy.proxy_addr);
    let resp = client.get(url).header("user-agent", "ExampleBot/1.0").send().await.unwrap();
    resp.status().as_u16()
}

/// `robots-proxy evidence ARGS…`: exit status, stdout, stderr.
fn evidence(args: &[&str]) -> (i32, String, String) {
    evidence_in(args, &[])
}

/// [`evidence`] with `env` in the environment.
fn evidence_in(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut all = vec!["evidence"];
    all.extend_from_slice(args);
    let out = run(&all, env);
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

/// `evidence URL --at AT --token ExampleBot --json` with `--audit` for each file: the object.
fn replay(url: &str, at: &str, audits: &[&Path]) -> serde_json::Value {
    let mut sources = Vec::new();
    for a in audits {
        sources.extend(["--audit", a.to_str().unwrap()]);
    }
    replay_from(url, at, &sources)
}

/// `evidence URL --at AT --token ExampleBot --json SOURCES…`: the object.
fn replay_from(url: &str, at: &str, sources: &[&str]) -> serde_json::Value {
    let mut args = vec![url, "--at", at, "--token", "ExampleBot", "--json"];
    args.extend_from_slice(sources);
    let (code, out, err) = evidence(&args);
    assert_eq!(code, 0, "{args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

/// A time `ms` milliseconds after (or before) the RFC 3339 time `at`, in RFC 3339.
fn shifted(at: &str, ms: i64) -> String {
    let t = humantime::parse_rfc3339(at).unwrap();
    let t = if ms >= 0 {
        t + Duration::from_millis(ms.unsigned_abs())
    } else {
        t - Duration::from_millis(ms.unsigned_abs())
    };
    robots_proxy::robots_version::rfc3339_millis(t)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evidence_replays_each_version_from_the_audit_files_alone() {
    let origin = Origin::start(V1).await;
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().to_str().unwrap();
    let env = [
        ("ROBOTS_PROXY_STATE_DIR", dir),
        ("ROBOTS_PROXY_ROBOTS__MAX_AGE", "1s"),
        ("ROBOTS_PROXY_ROBOTS__MIN_AGE", "1s"),
    ];
    let proxy = ProxyProcess::start(&[], &env);
    let audit = state.path().join("audit.jsonl");
    let base = origin.base();
    let (v1, v2) = (sha256_hex(V1.as_bytes()), sha256_hex(V2.as_bytes()));

    // Version 1 blocks /private; then the origin serves version 2, which the proxy fetches
    // once the first has lived its second, and which blocks /secret.
    assert_eq!(fetch(&proxy, &format!("{base}/private/1")).await, 403);
    origin.set_robots(200, V2);
    let mut blocked = false;
    for _ in 0..100 {
        if fetch(&proxy, &format!("{base}/secret/1")).await == 403 {
            blocked = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(blocked, "version 2 never came into force");
    wait_until("a block under each version", || {
        !blocks_naming(&audit, &v1).is_empty() && !blocks_naming(&audit, &v2).is_empty()
    })
    .await;
    // The archive has version 2 in force, then the proxy is stopped.
    wait_until("the archive's version 2 window", || {
        let reader = robots_proxy::archive::ArchiveReader::open(state.path());
        reader
            .is_ok_and(|r| r.windows(&base).last().is_some_and(|w| w.sha256.as_ref() == Some(&v2)))
    })
    .await;
    drop(proxy);
    let under_v1 = blocks_naming(&audit, &v1).remove(0);
    let under_v2 = blocks_naming(&audit, &v2).remove(0);
    let t1 = under_v1["@timestamp"].as_str().unwrap().to_owned();
    let t2 = under_v2["@timestamp"].as_str().unwrap().to_owned();
    let fetched_v1 = under_v1["robots.fetched_at"].as_str().unwrap().to_owned();

    // At a time within each window: that version, and today's decision on it.
    let secret = format!("{base}/secret/1");
    let at_t1 = replay(&secret, &t1, &[&audit]);
    assert_eq!(at_t1["sha256"], v1.as_str(), "{at_t1:#}");
    assert_eq!(at_t1["fetched_at"], fetched_v1.as_str(), "{at_t1:#}");
    assert_eq!(at_t1["allowed"], true, "version 1 allows /secret: {at_t1:#}");
    assert_eq!(at_t1["rule"], serde_json::Value::Null);
    let at_t2 = replay(&secret, &t2, &[&audit]);
    assert_eq!(at_t2["sha256"], v2.as_str(), "{at_t2:#}");
    assert_eq!(at_t2["allowed"], false, "{at_t2:#}");
    assert_eq!(at_t2["rule"], "disallow: /secret");
    assert_eq!(at_t2["line"], 3);
    assert_eq!(at_t2["group"], "* (line 2)");
    assert!(at_t2["window"]["from"].as_str().unwrap() > t1.as_str(), "{at_t2:#}");
    let marked: Vec<_> =
        at_t2["context"].as_array().unwrap().iter().filter(|c| c["rule"] == true).collect();
    assert_eq!(marked.len(), 1, "{at_t2:#}");
    assert_eq!(marked[0]["text"], "Disallow: /secret");
    // The block under version 2 is among the records near that time, as it was written.
    let near: Vec<_> = at_t2["records"].as_array().unwrap().iter().collect();
    assert!(near.iter().any(|r| **r == under_v2), "{at_t2:#}");
    let private = replay(&format!("{base}/private/1"), &t1, &[&audit]);
    assert_eq!((&private["allowed"], &private["line"]), (&false.into(), &2.into()), "{private:#}");
    assert!(private["window"]["replaced_at"].as_str().is_some(), "{private:#}");
    // For a person, too.
    let (code, text, err) = evidence(&[
        &secret,
        "--at",
        &t2,
        "--token",
        "ExampleBot",
        "--audit",
        audit.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(text.contains(&format!("sha256:{v2}")), "{text}");
    assert!(text.contains("  >    3  Disallow: /secret"), "{text}");

    // Before the first fetch nothing is known: refused, naming the earliest known time.
    let before = shifted(&fetched_v1, -1000);
    let (code, out, err) =
        evidence(&[&secret, "--at", &before, "--audit", audit.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.is_empty(), "{out}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("no robots.txt version is known") && err.contains("earliest known"),
        "{err}"
    );

    // The same from the state directory's archive alone, the proxy stopped; and from the
    // configured state_dir when no source is given.
    let state_dir = ["--state-dir", dir];
    let archived = replay_from(&secret, &t1, &state_dir);
    assert_eq!(
        (&archived["sha256"], &archived["allowed"]),
        (&v1.as_str().into(), &true.into()),
        "{archived:#}"
    );
    let archived = replay_from(&secret, &t2, &state_dir);
    assert_eq!(
        (&archived["sha256"], &archived["allowed"]),
        (&v2.as_str().into(), &false.into()),
        "{archived:#}"
    );
    assert_eq!((&archived["rule"], &archived["line"]), (&"disallow: /secret".into(), &3.into()));
    let (code, out, err) = evidence(&[&secret, "--at", &before, "--state-dir", dir]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("no robots.txt version is known"), "{err}");
    let (code, out, err) = evidence_in(
        &[&secret, "--at", &t2, "--token", "ExampleBot", "--json"],
        &[("ROBOTS_PROXY_STATE_DIR", dir)],
    );
    assert_eq!(code, 0, "{err}");
    let configured: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(configured["sha256"], v2.as_str(), "{configured:#}");
    // Both sources together: one version each, the same answers.
    let both = replay_from(&secret, &t1, &["--state-dir", dir, "--audit", audit.to_str().unwrap()]);
    assert_eq!(
        (&both["sha256"], &both["allowed"]),
        (&v1.as_str().into(), &true.into()),
        "{both:#}"
    );

    // Bad input: one line, exit 2.
    let audit_arg = audit.to_str().unwrap();
    let torn = state.path().join("torn.jsonl");
    let mut bytes = std::fs::read(&audit).unwrap();
    bytes.extend_from_slice(b"{\"@timestamp\": not json\n");
    std::fs::write(&torn, &bytes).unwrap();
    let bad_line = format!("{}:{}", torn.display(), bytes.split(|b| *b == b'\n').count() - 1);
    // A robots_version record whose body was changed no longer matches its digest.
    let altered = state.path().join("altered.jsonl");
    let original = std::fs::read_to_string(&audit).unwrap();
    // The first robots_version record (after the proxy's proxy_start record).
    let (at, first) =
        original.lines().enumerate().find(|(_, l)| l.contains("\"robots_version\"")).unwrap();
    assert!(
        first.contains("\"robots_version\"") && first.contains("Disallow: /private"),
        "{first}"
    );
    let changed = first.replacen("Disallow: /private", "Disallow: /privatE", 1);
    std::fs::write(&altered, original.replacen(first, &changed, 1)).unwrap();
    let altered_line = format!("{}:{}:", altered.display(), at + 1);
    let missing = state.path().join("missing.jsonl");
    for (args, says) in [
        (
            vec![secret.as_str(), "--at", "2026-03-03T10:00:00", "--audit", audit_arg],
            "no time zone",
        ),
        (vec!["ftp://example.com/x", "--at", &t1, "--audit", audit_arg], "not an http(s) URL"),
        (vec![secret.as_str(), "--at", &t1, "--audit", missing.to_str().unwrap()], "cannot read"),
        (vec![secret.as_str(), "--at", &t1, "--audit", torn.to_str().unwrap()], &bad_line),
        (vec![secret.as_str(), "--at", &t1, "--audit", altered.to_str().unwrap()], &altered_line),
    ] {
        let (code, out, err) = evidence(&args);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }

    // Export: the versions byte for byte, the records unchanged, a manifest of digests.
    let out = state.path().join("export");
    let from = shifted(&fetched_v1, -1000);
    let to = shifted(&t2, 1000);
    let export = |out: &Path| {
        evidence(&[
            "export",
            "--authority",
            &base,
            "--from",
            &from,
            "--to",
            &to,
            "--out",
            out.to_str().unwrap(),
            "--audit",
            audit_arg,
        ])
    };
    let (code, said, err) = export(&out);
    assert_eq!(code, 0, "{said}{err}");
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("manifest.json")).unwrap()).unwrap();
    let files = manifest["files"].as_array().unwrap();
    for f in files {
        let bytes = std::fs::read(out.join(f["path"].as_str().unwrap())).unwrap();
        assert_eq!(f["sha256"], sha256_hex(&bytes).as_str(), "{f}");
        assert_eq!(f["bytes"], bytes.len());
    }
    let names: Vec<_> = files.iter().map(|f| f["path"].as_str().unwrap()).collect();
    assert!(names.contains(&format!("versions/{v1}.txt").as_str()), "{manifest:#}");
    assert!(names.contains(&format!("versions/{v2}.txt").as_str()), "{manifest:#}");
    assert_eq!(std::fs::read(out.join(format!("versions/{v2}.txt"))).unwrap(), V2.as_bytes());
    assert_eq!(
        manifest["sources"][0]["sha256"],
        sha256_hex(&std::fs::read(&audit).unwrap()).as_str()
    );
    assert_eq!(manifest["audit_verify"]["status"], "intact", "{manifest:#}");
    let original = std::fs::read_to_string(&audit).unwrap();
    let exported = std::fs::read_to_string(out.join("records.jsonl")).unwrap();
    assert!(exported.lines().count() >= 4, "{exported}");
    assert!(exported.lines().all(|l| original.lines().any(|o| o == l)), "{exported}");
    // From the archive alone: the same versions, byte for byte (no records: those are in the
    // audit files).
    let from_archive = state.path().join("export-archive");
    let (code, said, err) = evidence(&[
        "export",
        "--authority",
        &base,
        "--from",
        &from,
        "--to",
        &to,
        "--out",
        from_archive.to_str().unwrap(),
        "--state-dir",
        dir,
    ]);
    assert_eq!(code, 0, "{said}{err}");
    for (digest, body) in [(&v1, V1), (&v2, V2)] {
        let kept = std::fs::read(from_archive.join(format!("versions/{digest}.txt"))).unwrap();
        assert_eq!(kept, body.as_bytes());
    }
    // A directory that is not empty is refused, and left as it was.
    let (code, _, err) = export(&out);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("not empty"), "{err}");
}

/// Two instances of a fleet, each with its own audit file: one saw version 1, the other
/// version 1 and then version 2. Read together, the same digest is one version whose window
/// holds what both saw; each file alone knows less, and says so rather than guess.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evidence_merges_the_audit_files_of_two_instances() {
    let origin = Origin::start(V1).await;
    let (state_a, state_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a =
        ProxyProcess::start(&[], &[("ROBOTS_PROXY_STATE_DIR", state_a.path().to_str().unwrap())]);
    let b =
        ProxyProcess::start(&[], &[("ROBOTS_PROXY_STATE_DIR", state_b.path().to_str().unwrap())]);
    let (audit_a, audit_b) =
        (state_a.path().join("audit.jsonl"), state_b.path().join("audit.jsonl"));
    let base = origin.base();
    let (v1, v2) = (sha256_hex(V1.as_bytes()), sha256_hex(V2.as_bytes()));

    assert_eq!(fetch(&a, &format!("{base}/private/a")).await, 403);
    assert_eq!(fetch(&b, &format!("{base}/private/b")).await, 403);
    origin.set_robots(200, V2);
    let (code, _) = post_json(&format!("{}/cache/purge?authority={base}", b.admin())).await;
    assert_eq!(code, 200);
    assert_eq!(fetch(&b, &format!("{base}/secret/b")).await, 403);
    wait_until("the blocks recorded", || {
        blocks_naming(&audit_a, &v1).len() == 1
            && blocks_naming(&audit_b, &v1).len() == 1
            && blocks_naming(&audit_b, &v2).len() == 1
    })
    .await;
    drop((a, b));
    let ta = blocks_naming(&audit_a, &v1)[0]["@timestamp"].as_str().unwrap().to_owned();
    let tb = blocks_naming(&audit_b, &v2)[0]["@timestamp"].as_str().unwrap().to_owned();

    let both = [audit_a.as_path(), audit_b.as_path()];
    let at_a = replay(&format!("{base}/secret/x"), &ta, &both);
    assert_eq!(
        (&at_a["sha256"], &at_a["allowed"]),
        (&v1.as_str().into(), &true.into()),
        "{at_a:#}"
    );
    // One version: A's and B's fetches and blocks are in its one window, up to B's version 2.
    assert!(at_a["window"]["observations"].as_u64().unwrap() >= 4, "{at_a:#}");
    assert_eq!(at_a["window"]["fetches"], 2, "each instance fetched it once: {at_a:#}");
    let at_b = replay(&format!("{base}/secret/x"), &tb, &both);
    assert_eq!(
        (&at_b["sha256"], &at_b["allowed"]),
        (&v2.as_str().into(), &false.into()),
        "{at_b:#}"
    );
    assert_eq!(at_a["window"]["replaced_at"], at_b["window"]["from"]);
    // The same answer whichever order the files are given in.
    let reversed = replay(&format!("{base}/secret/x"), &tb, &[&audit_b, &audit_a]);
    assert_eq!(reversed["sha256"], v2.as_str());
    // A's file alone knows nothing after its last record: refused, not guessed.
    let (code, _, err) =
        evidence(&[&format!("{base}/secret/x"), "--at", &tb, "--audit", audit_a.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no robots.txt version is known"), "{err}");
}

/// Issue 39, L5: two instances of a fleet (a real redis-server) that each fetch robots.txt for
/// themselves (`fleet.max_shared_body = 0B`, as for a body over the limit): A keeps version 1
/// while B has fetched version 2. Over both audit files, the answer for B's request is B's
/// version, and says what each instance had and that they disagree; for a URL no record at that
/// time names an instance for, it is refused as ambiguous; `--instance` answers from each one's
/// records alone; an instance no record names is refused, naming those that are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evidence_tells_the_instances_of_a_fleet_apart() {
    let Some(redis) = Redis::start().await else { return };
    let origin = Origin::start(V1).await;
    // Signed checkpoints every second, so that each instance's records can be proved.
    let keys = tempfile::tempdir().unwrap();
    let made = run(&["keys", "new", "audit", "--dir", keys.path().to_str().unwrap()], &[]);
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let pem = keys.path().join("audit.pem");
    let pem = pem.to_str().unwrap();
    let public = run(&["audit", "public-key"], &[("ROBOTS_PROXY_AUDIT__CHECKPOINT_KEY", pem)]);
    assert!(public.status.success(), "{}", String::from_utf8_lossy(&public.stderr));
    let jwk = keys.path().join("audit.jwk");
    std::fs::write(&jwk, &public.stdout).unwrap();
    let mut f = fleet(
        2,
        &redis,
        "evidence-instances",
        &[
            ("ROBOTS_PROXY_FLEET__MAX_SHARED_BODY", "0B"),
            ("ROBOTS_PROXY_AUDIT__CHECKPOINT_KEY", pem),
            ("ROBOTS_PROXY_AUDIT__CHECKPOINT_INTERVAL", "1s"),
        ],
    );
    let (audit_a, audit_b) =
        (f.state_dir(0).join("audit.jsonl"), f.state_dir(1).join("audit.jsonl"));
    let base = origin.base();
    let (v1, v2) = (sha256_hex(V1.as_bytes()), sha256_hex(V2.as_bytes()));

    assert_eq!(fetch(&f.instances[0], &format!("{base}/private/a")).await, 403);
    origin.set_robots(200, V2);
    assert_eq!(fetch(&f.instances[1], &format!("{base}/secret/b")).await, 403);
    // A still decides with its copy of version 1, which allows /secret.
    assert_eq!(fetch(&f.instances[0], &format!("{base}/private/a2")).await, 403);
    assert_eq!(fetch(&f.instances[0], &format!("{base}/secret/a")).await, 200);
    wait_until("the blocks recorded", || {
        blocks_naming(&audit_a, &v1).len() == 2 && blocks_naming(&audit_b, &v2).len() == 1
    })
    .await;
    // A checkpoint after every record about the site, in both files.
    let checkpointed = |path: &Path| {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let last_block = lines.iter().rposition(|l| l.contains("\"robots.authority\""));
        let last_checkpoint = lines.iter().rposition(|l| l.contains("\"audit_checkpoint\""));
        matches!((last_block, last_checkpoint), (Some(b), Some(c)) if c > b)
    };
    wait_until("checkpoints after the blocks", || checkpointed(&audit_a) && checkpointed(&audit_b))
        .await;
    drop(std::mem::take(&mut f.instances));
    let under_v2 = blocks_naming(&audit_b, &v2).remove(0);
    assert_eq!(under_v2["service.node.name"], "instance-1", "{under_v2}");
    let tb = under_v2["@timestamp"].as_str().unwrap().to_owned();
    let files = ["--audit", audit_a.to_str().unwrap(), "--audit", audit_b.to_str().unwrap()];

    // B's request: the record at that time names B, whose version 2 disallowed it; A had
    // version 1 then, which allows the path.
    let secret_b = format!("{base}/secret/b");
    let answer = replay_from(&secret_b, &tb, &files);
    assert_eq!(
        (&answer["sha256"], &answer["allowed"]),
        (&v2.as_str().into(), &false.into()),
        "{answer:#}"
    );
    assert_eq!(
        (&answer["instance"], &answer["instance_chosen_by"]),
        (&"instance-1".into(), &"record".into())
    );
    assert_eq!(answer["instances_disagree"], true, "{answer:#}");
    let each: Vec<_> = answer["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["instance"].clone(), e["sha256"].clone(), e["allowed"].clone()))
        .collect();
    assert_eq!(
        each,
        [
            ("instance-0".into(), v1.as_str().into(), true.into()),
            ("instance-1".into(), v2.as_str().into(), false.into())
        ],
        "{answer:#}"
    );
    assert!(
        answer["records"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["service.node.name"] == "instance-1"),
        "{answer:#}"
    );

    // A URL no record at that time names an instance for: which instance decided is not
    // known, and the answer depends on it: refused, naming what each had.
    let other = format!("{base}/secret/x");
    let (code, out, err) = evidence(&[
        &other,
        "--at",
        &tb,
        "--token",
        "ExampleBot",
        files[0],
        files[1],
        files[2],
        files[3],
    ]);
    assert_eq!(code, 1, "{out}{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("instances disagree"), "{err}");
    assert!(err.contains(&format!("\"instance-0\" had robots.txt sha256:{v1}")), "{err}");
    assert!(err.contains(&format!("\"instance-1\" had robots.txt sha256:{v2}")), "{err}");

    // --instance answers from each one's records alone.
    let with = |name: &'static str| {
        let mut args = files.to_vec();
        args.extend(["--instance", name]);
        replay_from(&other, &tb, &args)
    };
    let at_a = with("instance-0");
    assert_eq!(
        (&at_a["sha256"], &at_a["allowed"], &at_a["instance"], &at_a["instance_chosen_by"]),
        (&v1.as_str().into(), &true.into(), &"instance-0".into(), &"--instance".into()),
        "{at_a:#}"
    );
    assert_eq!(at_a["instances_disagree"], true, "{at_a:#}");
    let at_b = with("instance-1");
    assert_eq!(
        (&at_b["sha256"], &at_b["allowed"], &at_b["instance"]),
        (&v2.as_str().into(), &false.into(), &"instance-1".into()),
        "{at_b:#}"
    );
    // For a person: the instance, and the one line saying they disagree.
    let mut args =
        vec![other.as_str(), "--at", &tb, "--token", "ExampleBot", "--instance", "instance-0"];
    args.extend(files);
    let (code, text, err) = evidence(&args);
    assert_eq!(code, 0, "{err}");
    assert!(text.contains("instance:   \"instance-0\" (--instance)"), "{text}");
    let line: Vec<_> = text.lines().filter(|l| l.contains("INSTANCES DISAGREE")).collect();
    assert_eq!(line.len(), 1, "{text}");
    assert!(line[0].contains(&v1) && line[0].contains(&v2), "{text}");

    // An instance no record names.
    let mut args = vec![other.as_str(), "--at", &tb, "--instance", "instance-9"];
    args.extend(files);
    let (code, out, err) = evidence(&args);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("\"instance-9\"") && err.contains("they name \"instance-0\", \"instance-1\""),
        "{err}"
    );

    // The export: each instance's windows besides the merged ones; with --instance, that
    // instance's windows and records alone.
    let first = blocks_naming(&audit_a, &v1).remove(0);
    let from = shifted(first["robots.fetched_at"].as_str().unwrap(), -1000);
    let to = shifted(&tb, 1000);
    let scratch = tempfile::tempdir().unwrap();
    let export = |out: &Path, more: &[&str]| {
        let mut args = vec!["export", "--authority", &base, "--from", &from, "--to", &to];
        args.extend(["--out", out.to_str().unwrap()]);
        args.extend(files);
        args.extend_from_slice(more);
        let (code, out, err) = evidence(&args);
        assert_eq!(code, 0, "{out}{err}");
    };
    let read = |path: std::path::PathBuf| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
    };
    let digests = |windows: &serde_json::Value| -> Vec<serde_json::Value> {
        windows.as_array().unwrap().iter().map(|w| w["sha256"].clone()).collect()
    };
    let all = scratch.path().join("all");
    export(&all, &[]);
    // Each instance numbers and chains its own records: their proofs are kept apart, each made
    // from that instance's file, and the receiver checks them all with the public key alone.
    assert!(all.join("proofs/instance-0").is_dir() && all.join("proofs/instance-1").is_dir());
    let (code, out, err) =
        evidence(&["verify-export", all.to_str().unwrap(), "--public-key", jwk.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(read(all.join("manifest.json"))["proofs_missing"], serde_json::json!([]));
    let each = read(all.join("instance_windows.json"));
    let each: Vec<_> = each
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["instance"].clone(), digests(&e["windows"])))
        .collect();
    assert_eq!(
        each,
        [
            ("instance-0".into(), vec![v1.as_str().into()]),
            ("instance-1".into(), vec![v2.as_str().into()])
        ]
    );
    let one = scratch.path().join("instance-0");
    export(&one, &["--instance", "instance-0"]);
    assert_eq!(digests(&read(one.join("windows.json"))), [serde_json::Value::from(v1.as_str())]);
    assert_eq!(read(one.join("manifest.json"))["instance"], "instance-0");
    assert!(!one.join("instance_windows.json").exists());
    let exported = records(&one.join("records.jsonl"));
    assert!(
        !exported.is_empty() && exported.iter().all(|r| r["service.node.name"] == "instance-0")
    );
    let (code, out, err) =
        evidence(&["verify-export", one.to_str().unwrap(), "--public-key", jwk.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
}

/// A fetch that gave no file is in force too, with its RFC 9309 consequence: 404, everything
/// allowed; then 503 with no copy kept, everything disallowed. Replayed from the audit file
/// and from the archive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evidence_reports_a_failed_fetch_with_its_consequence() {
    let origin = Origin::start("").await;
    origin.set_robots(404, "not here");
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().to_str().unwrap();
    let env = [
        ("ROBOTS_PROXY_STATE_DIR", dir),
        ("ROBOTS_PROXY_ROBOTS__MAX_AGE", "1s"),
        ("ROBOTS_PROXY_ROBOTS__MIN_AGE", "1s"),
        ("ROBOTS_PROXY_AUDIT__ALL_DECISIONS", "true"),
    ];
    let proxy = ProxyProcess::start(&[], &env);
    let audit = state.path().join("audit.jsonl");
    let base = origin.base();
    assert_eq!(fetch(&proxy, &format!("{base}/a")).await, 200);
    origin.set_robots(503, "down");
    let mut blocked = false;
    for _ in 0..100 {
        if fetch(&proxy, &format!("{base}/a")).await == 403 {
            blocked = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(blocked, "the 503 never came into force");
    let with_state = |state: &str, action: &str| {
        records(&audit)
            .into_iter()
            .find(|r| r["robots.state"] == state && r["event.action"] == action)
            .map(|r| r["@timestamp"].as_str().unwrap().to_owned())
    };
    wait_until("an allow under the 404 and a block under the 503", || {
        with_state("unavailable", "robots_allow").is_some()
            && with_state("unreachable", "robots_disallow").is_some()
    })
    .await;
    wait_until("the archive's 503 window", || {
        let reader = robots_proxy::archive::ArchiveReader::open(state.path());
        reader.is_ok_and(|r| r.windows(&base).last().is_some_and(|w| w.status == Some(503)))
    })
    .await;
    drop(proxy);
    let allowed_at = with_state("unavailable", "robots_allow").unwrap();
    let blocked_at = with_state("unreachable", "robots_disallow").unwrap();
    let url = format!("{base}/a");
    for sources in [["--audit", audit.to_str().unwrap()], ["--state-dir", dir]] {
        let under_404 = replay_from(&url, &allowed_at, &sources);
        assert_eq!(under_404["in_force"], "allow-all", "{sources:?}: {under_404:#}");
        assert_eq!(under_404["allowed"], true, "{under_404:#}");
        assert_eq!(under_404["sha256"], serde_json::Value::Null);
        let under_503 = replay_from(&url, &blocked_at, &sources);
        assert_eq!(under_503["in_force"], "disallow-all", "{sources:?}: {under_503:#}");
        assert_eq!(under_503["allowed"], false, "{under_503:#}");
        assert!(under_503["reason"].as_str().unwrap().contains("disallowed"), "{under_503:#}");
    }
}

/// A `would_block` record (report-only mode) written under an unreachable robots.txt tells the
/// replay what its refusal would have: everything disallowed then, as a `robots_disallow` would.
#[test]
fn evidence_reads_a_would_block_record_as_the_refusal_it_reports() {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let base = "http://127.0.0.1:9";
    let at = "2026-11-20T10:00:00.000Z";
    let record = serde_json::json!({
        "@timestamp": at,
        "event.action": "would_block",
        "robots.would_action": "robots_disallow",
        "event.outcome": "success",
        "event.reason": "robots.txt unreachable (HTTP 503): all paths disallowed until it can be fetched",
        "client.address": "127.0.0.1:5000",
        "http.request.method": "GET",
        "url.full": format!("{base}/a"),
        "robots.authority": base,
        "robots.path": "/a",
        "robots.url": format!("{base}/robots.txt"),
        "robots.state": "unreachable",
        "robots.age_seconds": 0,
    });
    std::fs::write(&audit, format!("{record}\n")).unwrap();
    let replayed = replay(&format!("{base}/a"), at, &[&audit]);
    assert_eq!(replayed["in_force"], "disallow-all", "{replayed:#}");
    assert_eq!(replayed["allowed"], false, "{replayed:#}");
}

/// Issue 39, L4: `evidence … | head`, the reader gone before the answer is written: a quiet
/// exit 0, not a panic ("failed printing to stdout: Broken pipe" and a stack trace).
#[test]
fn evidence_into_a_closed_pipe_exits_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let base = "http://127.0.0.1:9";
    let at = "2026-11-20T10:00:00.000Z";
    let record = serde_json::json!({
        "@timestamp": at,
        "event.action": "would_block",
        "robots.would_action": "robots_disallow",
        "event.outcome": "success",
        "event.reason": "robots.txt unreachable (HTTP 503): all paths disallowed",
        "url.full": format!("{base}/a"),
        "robots.authority": base,
        "robots.path": "/a",
        "robots.state": "unreachable",
    });
    std::fs::write(&audit, format!("{record}\n")).unwrap();
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let url = format!("{base}/a");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_robots-proxy"))
        .args(["evidence", &url, "--at", at, "--token", "ExampleBot"])
        .arg("--audit")
        .arg(&audit)
        .env("ROBOTS_PROXY_STATE_DIR", dir.path())
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
}

/// Issue 39, M1: `evidence` checks the hash chain of the audit files it answers from. A file
/// edited without the chain recomputed (the review's t10) is refused (exit 1, naming the
/// line) unless `--allow-tampered`, and the answer says what the chain is.
#[test]
fn evidence_refuses_audit_files_whose_chain_is_broken() {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let base = "http://127.0.0.1:9";
    let at = "2026-11-20T10:00:00.000Z";
    let record = serde_json::json!({
        "@timestamp": at,
        "event.action": "would_block",
        "robots.would_action": "robots_disallow",
        "event.outcome": "success",
        "event.reason": "robots.txt unreachable (HTTP 503): all paths disallowed",
        "url.full": format!("{base}/a"),
        "robots.authority": base,
        "robots.path": "/a",
        "robots.state": "unreachable",
    })
    .to_string();
    // Sealed as the writer did before scheme 2 (docs/audit.md, "The hash chain": scheme 1,
    // which every verifier still reads).
    let genesis = "0".repeat(64);
    let body = format!(
        "{},\"event.sequence\":1,\"event.previous_hash\":\"{genesis}\"",
        &record[..record.len() - 1]
    );
    let hash = sha256_hex(format!("{genesis}\n{body}}}").as_bytes());
    std::fs::write(&audit, format!("{body},\"event.hash\":\"{hash}\"}}\n")).unwrap();
    let url = format!("{base}/a");
    let args = ["--at", at, "--token", "ExampleBot", "--audit", audit.to_str().unwrap()];
    let state = dir.path().to_str().unwrap();
    let env = [("ROBOTS_PROXY_STATE_DIR", state)];
    let all = |extra: &[&'static str]| -> Vec<String> {
        let mut v = vec![url.clone()];
        v.extend(args.iter().map(|a| a.to_string()));
        v.extend(extra.iter().map(|a| a.to_string()));
        v
    };
    let evidence_in = |v: Vec<String>, env: &[(&str, &str)]| {
        let v: Vec<&str> = v.iter().map(String::as_str).collect();
        evidence_in(&v, env)
    };
    let (code, out, err) = evidence_in(all(&[]), &env);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("audit.jsonl: intact (1 record(s)"), "{out}");
    // Edited in place, no hash recomputed.
    let text = std::fs::read_to_string(&audit).unwrap().replace("HTTP 503", "HTTP 200");
    std::fs::write(&audit, text).unwrap();
    let (code, out, err) = evidence_in(all(&[]), &env);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("hash chain") && err.contains("audit.jsonl:1"), "{err}");
    let (code, out, err) = evidence_in(all(&["--allow-tampered", "--json"]), &env);
    assert_eq!(code, 0, "{out}{err}");
    let answer: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(answer["audit_chain"][0]["status"], "tampered", "{answer:#}");
    // Issue 39, M2 (in part): a time in the future is refused, not answered from the window
    // still open.
    let future = ["--at", "2099-01-01T00:00:00Z", "--token", "ExampleBot", "--allow-tampered"];
    let v: Vec<&str> =
        [&[url.as_str()][..], &future[..], &["--audit", audit.to_str().unwrap()]].concat();
    let out = super::support::run(&[&["evidence"][..], &v[..]].concat(), &env);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("is in the future"), "{err}");
}

/// Issue 39, H2 and M2 (the review's e6): with the default `audit.all_decisions = false` only
/// blocks are recorded, so a version under which every request was allowed reached the log
/// nowhere, and `evidence --audit` answered from the version on either side (v1, disallowed)
/// for a request the proxy allowed under v2. Each result taken in is now a `robots_fetch`
/// record, so the files name v2 and the allow. And a copy idle far past its lifetime (no
/// request, so no fetch) is no longer taken to be in force: nothing is known then, from the
/// audit files (between two fetches) or from the archive (past the window in force's expiry).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evidence_names_a_version_only_allowed_requests_used() {
    const A1: &str = "User-agent: *\nDisallow: /a\n";
    const A2: &str = "User-agent: *\nDisallow: /b\n";
    let origin = Origin::start(A1).await;
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().to_str().unwrap();
    let env = [
        ("ROBOTS_PROXY_STATE_DIR", dir),
        ("ROBOTS_PROXY_ROBOTS__MAX_AGE", "1s"),
        ("ROBOTS_PROXY_ROBOTS__MIN_AGE", "1s"),
        ("ROBOTS_PROXY_ROBOTS__REFRESH_AHEAD", "0"),
    ];
    let proxy = ProxyProcess::start(&[], &env);
    let audit = state.path().join("audit.jsonl");
    let base = origin.base();
    let (v1, v2) = (sha256_hex(A1.as_bytes()), sha256_hex(A2.as_bytes()));
    let url = format!("{base}/a");
    assert_eq!(fetch(&proxy, &url).await, 403);
    // Idle well past v1's one-second lifetime: the next request fetches again (same bytes).
    tokio::time::sleep(Duration::from_millis(3500)).await;
    assert_eq!(fetch(&proxy, &url).await, 403);
    origin.set_robots(200, A2);
    let mut allowed = false;
    for _ in 0..100 {
        if fetch(&proxy, &url).await == 200 {
            allowed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(allowed, "version 2 never came into force");
    origin.set_robots(200, A1);
    let mut blocked = false;
    for _ in 0..100 {
        if fetch(&proxy, &url).await == 403 {
            blocked = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(blocked, "version 1 never came back");
    let fetches = |digest: &str| -> Vec<serde_json::Value> {
        records(&audit)
            .into_iter()
            .filter(|r| r["event.action"] == "robots_fetch" && r["robots.sha256"] == digest)
            .collect()
    };
    wait_until("the fetch records", || fetches(&v1).len() >= 3 && !fetches(&v2).is_empty()).await;
    // The archive is written off the request path: its last window is version 1's again before
    // the proxy stops (under load it could still be version 2's when the proxy was dropped).
    wait_until("version 1's window last in the archive", || {
        let reader = robots_proxy::archive::ArchiveReader::open(state.path());
        reader.is_ok_and(|r| {
            r.windows(&base).last().is_some_and(|w| w.sha256.as_deref() == Some(v1.as_str()))
        })
    })
    .await;
    drop(proxy);
    // Only blocks were recorded as decisions: none names v2.
    assert!(blocks_naming(&audit, &v2).is_empty());
    let under_v2 = fetches(&v2).remove(0);
    assert_eq!(under_v2["robots.status_code"], 200, "{under_v2:#}");
    assert_eq!(under_v2["robots.consequence"], "rules", "{under_v2:#}");
    let at = shifted(under_v2["@timestamp"].as_str().unwrap(), 1);
    let answer = replay(&url, &at, &[&audit]);
    assert_eq!(answer["sha256"], v2.as_str(), "{answer:#}");
    assert_eq!(answer["allowed"], true, "the proxy allowed /a under v2: {answer:#}");

    // Between v1's first fetch (a one-second lifetime) and its second, 3.5 s later, no
    // request came: nothing is known, and the answer says so rather than reach across.
    let first = &fetches(&v1)[0];
    let expired = first["robots.expires_at"].as_str().unwrap();
    let idle = shifted(expired, 1000);
    let (code, out, err) = evidence(&[&url, "--at", &idle, "--audit", audit.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("nothing is known") && err.contains("idle past"), "{err}");
    // The archive's window in force ends at its expiry, not at the time asked (the proxy is
    // stopped now): a time after it is refused, one within it answered.
    wait_until("the archive's last window", || {
        let reader = robots_proxy::archive::ArchiveReader::open(state.path());
        reader.is_ok_and(|r| r.windows(&base).last().is_some_and(|w| w.expires_at.is_some()))
    })
    .await;
    let reader = robots_proxy::archive::ArchiveReader::open(state.path()).unwrap();
    let last = reader.windows(&base).last().cloned().unwrap();
    let expiry = robots_proxy::robots_version::rfc3339_millis(last.expires_at.unwrap());
    let after = shifted(&expiry, 1000);
    let due = humantime::parse_rfc3339(&after).unwrap() + Duration::from_millis(50);
    if let Ok(wait) = due.duration_since(std::time::SystemTime::now()) {
        tokio::time::sleep(wait).await;
    }
    let (code, out, err) = evidence(&[&url, "--at", &after, "--state-dir", dir]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("no robots.txt version is known"), "{err}");
    let within = replay_from(&url, &shifted(&expiry, -1), &["--state-dir", dir]);
    assert_eq!((&within["sha256"], &within["allowed"]), (&v1.as_str().into(), &false.into()));

    // Issue 39, L1: v1's window holds two fetches 3.5 s apart; a time after the second names
    // the second as the copy in force, from the archive too (it named the window's first).
    let second = &fetches(&v1)[1];
    let fetched_second = second["robots.fetched_at"].as_str().unwrap();
    let after_second = shifted(second["@timestamp"].as_str().unwrap(), 1);
    for sources in [["--state-dir", dir], ["--audit", audit.to_str().unwrap()]] {
        let answer = replay_from(&url, &after_second, &sources);
        assert_eq!(answer["fetched_at"], fetched_second, "{sources:?}: {answer:#}");
    }

    // The archive edited (v2's window deleted, as the review flipped e6's answer): read with
    // the audit files, the answer says the two disagree (issue 39, item 8).
    let authorities = state.path().join("robots-archive/authorities");
    let file = std::fs::read_dir(&authorities).unwrap().next().unwrap().unwrap().path();
    let mut history: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    history["windows"].as_array_mut().unwrap().retain(|w| w["sha256"] != v2.as_str());
    std::fs::write(&file, serde_json::to_vec_pretty(&history).unwrap()).unwrap();
    let both = replay_from(&url, &at, &["--state-dir", dir, "--audit", audit.to_str().unwrap()]);
    assert_eq!(both["sha256"], v2.as_str(), "{both:#}");
    assert_eq!(both["sources_disagree"]["audit"]["sha256"], v2.as_str(), "{both:#}");
    assert_ne!(both["sources_disagree"]["archive"]["sha256"], v2.as_str(), "{both:#}");
    let agreeing = replay_from(&url, &at, &["--audit", audit.to_str().unwrap()]);
    assert_eq!(agreeing["sources_disagree"], serde_json::Value::Null, "{agreeing:#}");
}

/// Issue 39, M4 (the review's e5): `evidence` replayed robots.txt's path rules alone. A request
/// the proxy refused for a usage preference of the same robots.txt (`Content-Usage:
/// train-ai=n`, a crawler whose purpose is `train-ai`) and one a disallow exception refused
/// were both answered "allowed", with nothing said of the records that contradicted it. Now
/// the exceptions and `[usage]` of `--config` are applied as the proxy applies them, and a
/// record near TIME that disagrees with the answer is named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evidence_applies_usage_preferences_and_exceptions() {
    const ROBOTS: &str = "User-agent: *\nContent-Usage: train-ai=n\nDisallow: /a\n";
    let origin = Origin::start(ROBOTS).await;
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().join("state");
    let base = origin.base();
    let authority = base.trim_start_matches("http://").to_owned();
    let expires = humantime::format_rfc3339_seconds(
        std::time::SystemTime::now() + Duration::from_secs(86_400),
    );
    let config = state.path().join("proxy.toml");
    std::fs::write(
        &config,
        format!(
            "state_dir = {dir:?}\n\n[access]\nallow_destinations = [\"127.0.0.0/8\"]\n\n\
             [usage]\ncrawlers = [{{ token = \"AcmeTrainer\", purposes = [\"train-ai\"] }}]\n\n\
             [[exceptions]]\nid = \"takedown-7\"\nauthorities = [\"{authority}\"]\n\
             tokens = [\"OtherBot\"]\npaths = [\"/d\"]\neffect = \"disallow\"\n\
             reference = \"https://legal.example/takedown-7\"\ngranted_by = \"legal@example.com\"\n\
             expires = \"{expires}\"\n"
        ),
    )
    .unwrap();
    let config_arg = config.to_str().unwrap();
    let proxy = ProxyProcess::start(&["--config", config_arg], &[]);
    let client = proxied_client(proxy.proxy_addr);
    let get = |ua: &'static str, url: String| {
        let client = client.clone();
        async move { client.get(url).header("user-agent", ua).send().await.unwrap().status() }
    };
    assert_eq!(get("AcmeTrainer/1.0", format!("{base}/x")).await.as_u16(), 403);
    assert_eq!(get("OtherBot/2.0", format!("{base}/d")).await.as_u16(), 403);
    assert_eq!(get("OtherBot/2.0", format!("{base}/x")).await.as_u16(), 200);
    let audit = dir.join("audit.jsonl");
    let at_of = |action: &str| {
        records(&audit)
            .into_iter()
            .find(|r| r["event.action"] == action)
            .map(|r| r["@timestamp"].as_str().unwrap().to_owned())
    };
    wait_until("the two refusals", || {
        at_of("usage_disallow").is_some() && at_of("exception_disallow").is_some()
    })
    .await;
    drop(proxy);
    let ask = |url: String, at: String, token: &str| {
        let args = [
            url.as_str(),
            "--at",
            at.as_str(),
            "--token",
            token,
            "--json",
            "--config",
            config_arg,
            "--audit",
            audit.to_str().unwrap(),
        ];
        let (code, out, err) = evidence(&args);
        assert_eq!(code, 0, "{err}");
        serde_json::from_str::<serde_json::Value>(&out).unwrap()
    };
    let usage = ask(format!("{base}/x"), at_of("usage_disallow").unwrap(), "AcmeTrainer");
    assert_eq!(usage["robots_allowed"], true, "{usage:#}");
    assert_eq!(usage["allowed"], false, "refused for train-ai=n: {usage:#}");
    assert_eq!(usage["usage"]["refused"]["purpose"], "train-ai", "{usage:#}");
    assert_eq!(usage["usage"]["refused"]["line"], 2, "{usage:#}");
    assert_eq!(usage["disagrees_with"], serde_json::json!([]), "{usage:#}");
    let taken_down = ask(format!("{base}/d"), at_of("exception_disallow").unwrap(), "OtherBot");
    assert_eq!(taken_down["allowed"], false, "{taken_down:#}");
    assert_eq!(taken_down["exception"]["id"], "takedown-7", "{taken_down:#}");
    assert_eq!(taken_down["disagrees_with"], serde_json::json!([]), "{taken_down:#}");
    // Without the configuration the records say otherwise, and the answer says so.
    let (code, out, err) = evidence(&[
        &format!("{base}/d"),
        "--at",
        &at_of("exception_disallow").unwrap(),
        "--token",
        "OtherBot",
        "--json",
        "--audit",
        audit.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let bare: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(bare["allowed"], true, "{bare:#}");
    let against = bare["disagrees_with"].as_array().unwrap();
    assert!(against.iter().any(|r| r["event.action"] == "exception_disallow"), "{bare:#}");
}
