//! Issue 39, item 6: the real proxy pushes its audit checkpoints to witnesses on loopback (a
//! C2SP tlog-witness implemented in the test support, `support::witness`), and stores their
//! cosignatures in the log; a witness whose key is not the one configured is refused and
//! counted; a witness that is down changes no answer and is tried again at the next
//! checkpoint; after a restart the witness is caught up from the file; `audit verify
//! --witness-key` requires the cosignatures.

use std::time::{Duration, Instant};

use super::audit_chain::{block, lines, s, verify, wait_for_lines, Keyed};
use super::support::witness::{cosignature_verifies, key_pair, vkey, Witness};
use super::support::{direct_client, run, sample, Origin, ProxyProcess};

const ROBOTS: &str = "User-agent: *\nDisallow: /private\n";

fn cosignatures(path: &std::path::Path, witness: &str) -> Vec<serde_json::Value> {
    lines(path)
        .iter()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| {
            v["event.action"] == "audit_cosignature" && v["audit.cosignature.witness"] == witness
        })
        .collect()
}

async fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < Duration::from_secs(20), "never: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn metrics(proxy: &ProxyProcess) -> String {
    let url = format!("{}/metrics", proxy.admin());
    direct_client().get(url).send().await.unwrap().text().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoints_are_cosigned_by_witnesses_on_loopback() {
    let origin = Origin::start(ROBOTS).await;
    let keyed = Keyed::new();
    let path = keyed.state.path().join("audit.jsonl");
    let log_public = robots_proxy::audit::checkpoint::PublicKey::read(&keyed.public_key).unwrap();
    let log_key = *log_public.raw();
    let any = "127.0.0.1:0".parse().unwrap();
    // A: a good witness. B: answers, but its key is not the one configured for it.
    // C: down at first (nothing listens on its port), up later.
    let a_pair = key_pair();
    let a_vkey = vkey("witness.test/a", &a_pair);
    let a_public = ring::signature::KeyPair::public_key(&a_pair).as_ref().to_vec();
    let a = Witness::start(any, "witness.test/a", a_pair, log_key).await;
    let b = Witness::start(any, "witness.test/b", key_pair(), log_key).await;
    let b_wrong = vkey("witness.test/b", &key_pair());
    let c_port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let c_pair = key_pair();
    let c_vkey = vkey("witness.test/c", &c_pair);

    let made = run(&["keys", "new", "k1"], &[("ROBOTS_PROXY_STATE_DIR", s(keyed.state.path()))]);
    assert!(made.status.success());
    let config = keyed.state.path().join("robots-proxy.toml");
    std::fs::write(
        &config,
        format!(
            "[audit]\ncheckpoint_key = \"{}\"\ncheckpoint_interval = \"1s\"\n\
             witnesses = [\"{}\", \"{}\", \"http://{c_port}/\"]\n\
             witness_keys = [\"{a_vkey}\", \"{b_wrong}\", \"{c_vkey}\"]\n\
             [signing]\ndirectory_listen = \"127.0.0.1:0\"\nkeys = [{{ name = \"k1\" }}]\n\
             identities = [{{ token = \"*\", keys = [\"k1\"], agent = \"https://bots.example.com\" }}]\n",
            s(&keyed.key),
            a.url(),
            b.url(),
        ),
    )
    .unwrap();
    let env = [("ROBOTS_PROXY_STATE_DIR", s(keyed.state.path()))];
    let check = run(&["config", "check", "--config", s(&config)], &env);
    assert!(check.status.success(), "{}", String::from_utf8_lossy(&check.stderr));
    let mut proxy = ProxyProcess::start(&["--config", s(&config)], &env);

    // Requests are answered at once while witness C is down.
    let started = Instant::now();
    block(&proxy, &origin, 3, "a").await;
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    wait_for("two cosignatures of A", || cosignatures(&path, "witness.test/a").len() >= 2).await;
    block(&proxy, &origin, 2, "b").await;
    wait_for_lines(&path, "/private/b-1", 1).await;
    let after = lines(&path).iter().filter(|l| l.contains("/private/b-1")).count();
    assert_eq!(after, 1);
    wait_for("a cosignature of A after the b requests", || {
        let all = lines(&path);
        let at = all.iter().position(|l| l.contains("/private/b-1")).unwrap();
        all[at..].iter().any(|l| l.contains("\"audit.cosignature.witness\":\"witness.test/a\""))
    })
    .await;

    // Every cosignature stored verifies, with the witness's key, over a checkpoint the log
    // signed and holds.
    let checkpoints: Vec<String> = lines(&path)
        .iter()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["audit.checkpoint.note"].as_str().map(str::to_owned))
        .collect();
    for record in cosignatures(&path, "witness.test/a") {
        let note = record["audit.cosignature.note"].as_str().unwrap();
        let at = note.find("\n\n").unwrap();
        let (text, sigs) = (&note[..at + 1], &note[at + 2..]);
        let line = sigs.lines().find(|l| l.starts_with("\u{2014} witness.test/a ")).unwrap();
        assert!(cosignature_verifies("witness.test/a", &a_public, text, line), "{note}");
        let checkpoint = robots_proxy::audit::note::open(note, &log_public).unwrap();
        assert_eq!(record["audit.cosignature.tree_size"], checkpoint.size);
        assert!(checkpoints.iter().any(|c| note.starts_with(c.as_str())), "{note}");
    }
    // Every field of the record is documented.
    let docs = include_str!("../../docs/audit.md");
    for record in cosignatures(&path, "witness.test/a") {
        for field in record.as_object().unwrap().keys() {
            assert!(docs.contains(&format!("| `{field}` |")), "{field} is not in docs/audit.md");
        }
    }
    // The witness checked consistency proofs from the size it had cosigned.
    assert!(a.seen().iter().any(|s| s.status == 200 && s.old > 0 && s.proof > 0), "{:?}", a.seen());
    assert!(
        a.seen().iter().all(|s| (s.status == 200 && s.size >= s.old) || s.status == 409),
        "{:?}",
        a.seen()
    );

    // B's cosignatures are refused (not its configured key) and counted; C's pushes failed.
    assert!(cosignatures(&path, "witness.test/b").is_empty());
    assert!(b.seen().iter().any(|s| s.status == 200));
    let text = metrics(&proxy).await;
    let series = |w: &str, r: &str| {
        sample(
            &text,
            &format!("robots_proxy_audit_witness_pushes_total{{witness=\"{w}\",result=\"{r}\"}}"),
        )
    };
    assert!(series("witness.test/a", "ok") >= 2.0, "{text}");
    assert!(series("witness.test/b", "failed") >= 1.0 && series("witness.test/b", "ok") == 0.0);
    assert!(series("witness.test/c", "failed") >= 1.0 && series("witness.test/c", "ok") == 0.0);

    // GET /audit/checkpoint serves the latest checkpoint with the cosignatures gathered.
    let directory: std::net::SocketAddr = proxy
        .stderr()
        .lines()
        .find_map(|l| l.strip_prefix("robots-proxy key directory listening on ").map(str::to_owned))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let client = direct_client();
    let served = async {
        let url = format!("http://{directory}/audit/checkpoint");
        client.get(url).send().await.unwrap().text().await.unwrap()
    };
    let start = Instant::now();
    let mut note = served.await;
    while !note.contains("\u{2014} witness.test/a ") {
        assert!(start.elapsed() < Duration::from_secs(20), "{note}");
        tokio::time::sleep(Duration::from_millis(100)).await;
        let url = format!("http://{directory}/audit/checkpoint");
        note = client.get(url).send().await.unwrap().text().await.unwrap();
    }
    robots_proxy::audit::note::open(&note, &log_public).unwrap();

    // C comes up: the next checkpoint reaches it.
    let c = Witness::start(c_port, "witness.test/c", c_pair, log_key).await;
    wait_for("a cosignature of C", || !cosignatures(&path, "witness.test/c").is_empty()).await;
    assert!(c.seen().iter().any(|s| s.status == 200));
    Keyed::stop(&mut proxy).await;

    // A restart: the witness had a size from before; the proxy learns it (409), proves from
    // it with the lines in the file, and A cosigns again.
    let before = a.size(&checkpoint_origin(&path)).unwrap();
    let mut proxy = ProxyProcess::start(&["--config", s(&config)], &env);
    block(&proxy, &origin, 1, "c").await;
    wait_for("A cosigns after the restart", || {
        cosignatures(&path, "witness.test/a")
            .iter()
            .any(|r| r["audit.cosignature.tree_size"].as_u64().unwrap() > before + 2)
    })
    .await;
    assert!(a.seen().iter().any(|s| s.status == 409), "{:?}", a.seen());
    Keyed::stop(&mut proxy).await;

    // audit verify: with A's key the log is witnessed; with a key that never cosigned, not
    // proven; with A's key but a cosignature changed, tampering.
    let key = s(&keyed.public_key);
    let (code, out, err) = verify(&["--public-key", key, "--witness-key", &a_vkey, s(&path)]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("witnessed"), "{out}");
    let (code, out, err) = verify(&["--public-key", key, "--witness-key", &b_wrong, s(&path)]);
    assert_eq!(code, 3, "{out}{err}");
    let (code, out, err) = verify(&[
        "--public-key",
        key,
        "--witness-key",
        &a_vkey,
        "--witness-key",
        &c_vkey,
        "--witness-quorum",
        "2",
        s(&path),
    ]);
    assert_eq!(code, 0, "{out}{err}");

    // audit prove picks a checkpoint a witness cosigned, and carries the cosignature;
    // check-proof checks it with the witness's key.
    let record: serde_json::Value = lines(&path)
        .iter()
        .find(|l| l.contains("/private/a-0"))
        .map(|l| serde_json::from_str(l).unwrap())
        .unwrap();
    let sequence = record["event.sequence"].to_string();
    let out = run(&["audit", "prove", "--sequence", &sequence, s(&path)], &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let proof_path = keyed.state.path().join("proof.json");
    std::fs::write(&proof_path, &out.stdout).unwrap();
    let checked = run(
        &["audit", "check-proof", s(&proof_path), "--public-key", key, "--witness-key", &a_vkey],
        &[],
    );
    let said = String::from_utf8_lossy(&checked.stdout).into_owned();
    assert!(checked.status.success(), "{said}{}", String::from_utf8_lossy(&checked.stderr));
    assert!(said.contains("cosigned by witness(es) witness.test/a"), "{said}");
    let checked = run(
        &["audit", "check-proof", s(&proof_path), "--public-key", key, "--witness-key", &b_wrong],
        &[],
    );
    assert_eq!(checked.status.code(), Some(1));
}

/// The origin of the last checkpoint in `path`.
fn checkpoint_origin(path: &std::path::Path) -> String {
    let last = lines(path)
        .iter()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["audit.checkpoint.note"].as_str().map(str::to_owned))
        .next_back()
        .unwrap();
    last.split('\n').next().unwrap().to_owned()
}
