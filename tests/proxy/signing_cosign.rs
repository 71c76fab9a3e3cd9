//! `signing.client_signatures = "cosign"` (issue 21 §1): the proxy adds its signature under its
//! own label beside the client's, covering the client's `signature`, `signature-input` and
//! `signature-agent` members and every component the client's signature covers
//! (draft-ietf-webbotauth-httpsig-protocol, "Multiple Signatures"). Both signatures are checked
//! with Cloudflare's `web-bot-auth` crate, each with its own key: the client's (made here, by the
//! test, as a crawler would) and the proxy's (from its key directory).

use std::time::{SystemTime, UNIX_EPOCH};

use base64ct::{Base64, Encoding};
use ring::signature::{Ed25519KeyPair, KeyPair};
use web_bot_auth::keyring::{Algorithm, KeyRing};
use web_bot_auth::message_signatures::MessageVerifier;

use robots_proxy::signing::ClientSignatures;

use super::signing::{directory_keys, header, make_key, signing, toml_entry, Received, ROBOTS};
use super::support::{Origin, TestProxy};

const CLIENT_AGENT: &str = r#"agent="https://agent.example""#;
const CLIENT_KEYID: &str = "client-key";

/// A crawler's own Web Bot Auth signature (label `agent`) of `GET path` at `authority`, over
/// `@method`, `@authority`, `@path` and its `Signature-Agent` member (and `extra` fields, each
/// with its value): the `Signature-Input` and `Signature` fields.
fn client_signature(
    key: &Ed25519KeyPair,
    authority: &str,
    path: &str,
    extra: &[(&str, &str)],
) -> (String, String) {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let mut ids = String::from(r#""@method" "@authority" "@path" "signature-agent";key="agent""#);
    let mut base = format!(
        "\"@method\": GET\n\"@authority\": {authority}\n\"@path\": {path}\n\
         \"signature-agent\";key=\"agent\": \"https://agent.example\"\n"
    );
    for (name, value) in extra {
        ids.push_str(&format!(" \"{name}\""));
        base.push_str(&format!("\"{name}\": {value}\n"));
    }
    let params = format!(
        "({ids});created={now};expires={};keyid=\"{CLIENT_KEYID}\";tag=\"web-bot-auth\"",
        now + 300
    );
    base.push_str(&format!("\"@signature-params\": {params}"));
    let signature = Base64::encode_string(key.sign(base.as_bytes()).as_ref());
    (format!("agent={params}"), format!("agent=:{signature}:"))
}

fn client_key() -> Ed25519KeyPair {
    let rng = ring::rand::SystemRandom::new();
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
    Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap()
}

/// Whether the signature labelled `label` of `received` verifies with `ring` (`web-bot-auth`).
fn verifies(received: &Received, label: &str, ring: &KeyRing) -> Result<(), String> {
    let verifier = MessageVerifier::parse(received, |(l, _)| l.as_str() == label)
        .map_err(|e| format!("parse {label}: {e}"))?;
    verifier.verify(ring, None).map(drop).map_err(|e| format!("verify {label}: {e}"))
}

/// Writes `client`'s public key as the JWK Set `clients.json` in `dir`, with `kid`
/// `CLIENT_KEYID`: the client keys an identity trusts (`client_keys`).
fn trust(dir: &std::path::Path, client: &Ed25519KeyPair) -> std::path::PathBuf {
    let x = base64ct::Base64UrlUnpadded::encode_string(client.public_key().as_ref());
    let path = dir.join("clients.json");
    let jwks =
        format!(r#"{{"keys":[{{"kty":"OKP","crv":"Ed25519","kid":"{CLIENT_KEYID}","x":"{x}"}}]}}"#);
    std::fs::write(&path, jwks).unwrap();
    path
}

/// The proxy with `client_signatures = "cosign"` trusting `client`'s key for `ExampleBot`, and
/// a key ring with its keys and the client's.
async fn cosigning(client: &Ed25519KeyPair) -> (TestProxy, KeyRing, tempfile::TempDir) {
    let keys = tempfile::tempdir().unwrap();
    make_key(keys.path(), "k1");
    let trusted = trust(keys.path(), client);
    let proxy = TestProxy::start_with(|c| {
        signing(c, keys.path());
        c.signing.identities[0].client_keys = Some(trusted);
        c.signing.client_signatures = ClientSignatures::Cosign;
    })
    .await;
    let (mut ring, _) = directory_keys(proxy.signer.clone().unwrap()).await;
    let public = client.public_key().as_ref().to_vec();
    assert!(ring.import_raw(CLIENT_KEYID.into(), Algorithm::Ed25519, public));
    (proxy, ring, keys)
}

async fn send(proxy: &TestProxy, url: &str, fields: &[(&str, &str)]) {
    let mut req = proxy.client().get(url).header("user-agent", "ExampleBot/1.0");
    for (k, v) in fields {
        req = req.header(*k, *v);
    }
    assert_eq!(req.send().await.unwrap().status(), 200);
}

#[tokio::test]
async fn a_cosigned_request_verifies_both_signatures_and_a_change_breaks_both() {
    let client = client_key();
    let origin = Origin::start(ROBOTS).await;
    let (proxy, ring, _keys) = cosigning(&client).await;
    let authority = origin.addr.to_string();
    let (input, signature) = client_signature(&client, &authority, "/cosigned", &[]);
    let url = format!("{}/cosigned", origin.base());
    let fields = [
        ("signature-agent", CLIENT_AGENT),
        ("signature-input", input.as_str()),
        ("signature", signature.as_str()),
    ];
    send(&proxy, &url, &fields).await;
    let seen = origin.seen().into_iter().find(|s| s.target == "/cosigned").unwrap();
    let received = Received::of(authority.clone(), &seen);
    // The client's lines arrive as they were sent, the proxy's on lines of their own.
    for (name, value) in fields {
        let lines: Vec<_> = seen.headers.get_all(name).iter().collect();
        assert_eq!(lines.len(), 2, "{name}: {lines:?}");
        assert_eq!(lines[0], value, "{name}");
    }
    let ours = seen.headers.get_all("signature-input").iter().nth(1).unwrap().to_str().unwrap();
    assert!(
        ours.starts_with(
            r#"sig1=("@method" "@authority" "@path" "signature-agent";key="sig1" "signature-agent";key="agent" "signature-input";key="agent" "signature";key="agent");created="#
        ),
        "{ours}"
    );
    verifies(&received, "agent", &ring).expect("the client's signature verifies");
    verifies(&received, "sig1", &ring).expect("the proxy's signature verifies");

    // A field the client's signature covers, changed: both fail.
    let mut headers = seen.headers.clone();
    let agents: Vec<_> = headers.get_all("signature-agent").iter().cloned().collect();
    headers.remove("signature-agent");
    headers.append("signature-agent", r#"agent="https://evil.example""#.parse().unwrap());
    headers.append("signature-agent", agents[1].clone());
    let claimed = Received { headers, ..Received::of(authority.clone(), &seen) };
    assert!(verifies(&claimed, "agent", &ring).unwrap_err().starts_with("verify"));
    assert!(verifies(&claimed, "sig1", &ring).unwrap_err().starts_with("verify"));
    // And the path: both fail.
    let moved = Received { target: "/other".into(), ..Received::of(authority, &seen) };
    assert!(verifies(&moved, "agent", &ring).unwrap_err().starts_with("verify"));
    assert!(verifies(&moved, "sig1", &ring).unwrap_err().starts_with("verify"));

    let records = proxy.audit_records().await;
    let record = records.iter().find(|r| r["robots.path"] == "/cosigned").unwrap();
    assert_eq!(record["robots.signature.cosigned"], "agent");
    assert!(record.get("robots.signature.cosign_skipped").is_none());
}

#[tokio::test]
async fn a_client_signature_that_cannot_be_cosigned_is_left_as_it_is_beside_the_proxys() {
    let client = client_key();
    let origin = Origin::start(ROBOTS).await;
    let (proxy, ring, _keys) = cosigning(&client).await;
    let authority = origin.addr.to_string();

    // A malformed Signature-Input: a recipient joining the lines could not read the proxy's
    // member beside it, so the client's fields are replaced by the proxy's.
    let broken = [
        ("signature-agent", CLIENT_AGENT),
        ("signature-input", r#"agent=("@authority""#),
        ("signature", "agent=:AAAA:"),
    ];
    send(&proxy, &format!("{}/malformed", origin.base()), &broken).await;
    let seen = origin.seen().into_iter().find(|s| s.target == "/malformed").unwrap();
    for (name, _) in broken {
        assert_eq!(seen.headers.get_all(name).iter().count(), 1, "{name} replaced");
    }
    let ours = header(&seen.headers, "signature-input").unwrap();
    assert!(
        ours.starts_with(
            r#"sig1=("@method" "@authority" "@path" "signature-agent";key="sig1");created="#
        ),
        "the proxy's own components only: {ours}"
    );
    let received = Received::of(authority.clone(), &seen);
    verifies(&received, "sig1", &ring).expect("the proxy's signature verifies");

    // A client signature over a field the proxy removes (hop-by-hop `Keep-Alive`): valid as
    // sent, it is not covered, and the proxy's signature still verifies.
    let (input, signature) =
        client_signature(&client, &authority, "/hop", &[("keep-alive", "timeout=5")]);
    let hop = [
        ("signature-agent", CLIENT_AGENT),
        ("signature-input", input.as_str()),
        ("signature", signature.as_str()),
        ("keep-alive", "timeout=5"),
    ];
    send(&proxy, &format!("{}/hop", origin.base()), &hop).await;
    let seen = origin.seen().into_iter().find(|s| s.target == "/hop").unwrap();
    let received = Received::of(authority, &seen);
    verifies(&received, "sig1", &ring).expect("the proxy's signature verifies");
    let ours = seen.headers.get_all("signature-input").iter().nth(1).unwrap().to_str().unwrap();
    assert!(!ours.contains(r#""signature";key="agent""#), "{ours}");

    let records = proxy.audit_records().await;
    let why = |path: &str| {
        let record = records.iter().find(|r| r["robots.path"] == path).unwrap();
        assert!(record.get("robots.signature.cosigned").is_none());
        record["robots.signature.cosign_skipped"].as_str().unwrap().to_owned()
    };
    assert!(why("/malformed").starts_with("malformed_signature_input: "), "{}", why("/malformed"));
    assert!(why("/malformed").ends_with("(the client's signature fields were replaced)"));
    assert!(why("/hop").starts_with("changed_component: \"keep-alive\""), "{}", why("/hop"));
    let metrics = proxy.metrics.encode();
    for reason in ["malformed_signature_input", "changed_component"] {
        let line = format!("robots_proxy_cosign_skipped_total{{reason=\"{reason}\"}} 1");
        assert!(metrics.contains(&line), "{line}");
    }
    assert!(header(&seen.headers, "signature").is_some());
}

#[tokio::test]
async fn usage_records_of_a_cosigned_request_say_what_became_of_the_clients_signature() {
    let client = client_key();
    let origin = Origin::start("User-agent: *\nContent-Signal: ai-train=no\nAllow: /\n").await;
    let keys = tempfile::tempdir().unwrap();
    make_key(keys.path(), "k1");
    let trusted = trust(keys.path(), &client);
    let proxy = TestProxy::start_with(|c| {
        signing(c, keys.path());
        c.signing.identities[0].client_keys = Some(trusted);
        c.signing.client_signatures = ClientSignatures::Cosign;
        c.audit.all_decisions = false;
        c.usage.train_ai = robots_proxy::usage::UsageMode::Annotate;
        c.usage.crawlers = vec![toml_entry(r#"{ token = "ExampleBot", purposes = ["train-ai"] }"#)];
    })
    .await;
    let authority = origin.addr.to_string();
    let (input, signature) = client_signature(&client, &authority, "/article", &[]);
    let fields = [
        ("signature-agent", CLIENT_AGENT),
        ("signature-input", input.as_str()),
        ("signature", signature.as_str()),
    ];
    send(&proxy, &format!("{}/article", origin.base()), &fields).await;
    send(
        &proxy,
        &format!("{}/broken", origin.base()),
        &[
            ("signature-agent", CLIENT_AGENT),
            ("signature-input", r#"agent=("@authority""#),
            ("signature", "agent=:AAAA:"),
        ],
    )
    .await;
    let records = proxy.audit_records().await;
    let annotated = |path: &str| {
        let found: Vec<_> = records
            .iter()
            .filter(|r| r["event.action"] == "usage_annotate" && r["robots.path"] == path)
            .collect();
        assert_eq!(found.len(), 1, "{path}: {records:?}");
        found[0].clone()
    };
    let article = annotated("/article");
    assert_eq!(article["robots.signature.cosigned"], "agent", "{article}");
    assert!(article.get("robots.signature.cosign_skipped").is_none(), "{article}");
    let broken = annotated("/broken");
    assert!(broken.get("robots.signature.cosigned").is_none(), "{broken}");
    let why = broken["robots.signature.cosign_skipped"].as_str().unwrap_or_default();
    assert!(why.starts_with("malformed_signature_input: "), "{broken}");
}

#[tokio::test]
async fn a_client_signature_is_not_counted_as_skipped_when_no_key_of_the_proxy_signs() {
    let keys = tempfile::tempdir().unwrap();
    make_key(keys.path(), "later");
    let origin = Origin::start(ROBOTS).await;
    let from =
        humantime::format_rfc3339_seconds(SystemTime::now() + std::time::Duration::from_secs(3600));
    let proxy = TestProxy::start_with(|c| {
        signing(c, keys.path());
        c.signing.keys =
            vec![toml_entry(&format!(r#"{{ name = "later", sign_from = "{from}" }}"#))];
        c.signing.identities = vec![toml_entry(
            r#"{ token = "ExampleBot", keys = ["later"], agent = "https://bots.example.com" }"#,
        )];
        c.signing.client_signatures = ClientSignatures::Cosign;
    })
    .await;
    let broken = [
        ("signature-agent", CLIENT_AGENT),
        ("signature-input", r#"agent=("@authority""#),
        ("signature", "agent=:AAAA:"),
    ];
    send(&proxy, &format!("{}/unsigned", origin.base()), &broken).await;
    let seen = origin.seen().into_iter().find(|s| s.target == "/unsigned").unwrap();
    // The client's fields alone: no key of the proxy's signs yet.
    assert_eq!(seen.headers.get_all("signature-input").iter().count(), 1);
    let records = proxy.audit_records().await;
    let record = records.iter().find(|r| r["robots.path"] == "/unsigned").unwrap();
    assert!(record.get("robots.signature.keyid").is_none(), "{record}");
    assert!(record.get("robots.signature.cosign_skipped").is_none(), "{record}");
    assert!(
        !proxy.metrics.encode().contains("robots_proxy_cosign_skipped_total{"),
        "nothing of the proxy's was signed, so nothing was skipped"
    );
    // But the request left unsigned for want of a key: counted (issue 41, finding 11).
    assert!(
        proxy.metrics.encode().contains("robots_proxy_signing_unsigned_total 1"),
        "{}",
        proxy.metrics.encode()
    );
}

/// The proxy's public keys, by key id (base64), for [`joined_verifier`].
fn proxy_keys(proxy: &TestProxy) -> Vec<(String, String)> {
    let signer = proxy.signer.clone().unwrap();
    signer
        .keys(SystemTime::now())
        .map(|(k, _, _)| (k.keyid().to_owned(), Base64::encode_string(k.public_key())))
        .collect()
}

/// Checks the signature `label` of the request `seen` at `authority` with
/// `tests/proxy/verify_joined.py`: a verifier that joins each field's lines before parsing, as
/// Python's, Go's and Node's HTTP stacks hand them over (RFC 9110 §5.3). `None` when python3
/// with http_sfv and cryptography is missing (outside CI: the test skips).
fn joined_verifier(
    seen: &super::support::Seen,
    authority: &str,
    label: &str,
    keys: &[(String, String)],
) -> Option<Result<(), String>> {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let ready = Command::new("python3")
        .args(["-c", "import http_sfv, cryptography"])
        .stderr(Stdio::null())
        .status();
    if !ready.is_ok_and(|s| s.success()) {
        crate::skip::missing(
            "python3 with http_sfv and cryptography",
            "pip install http-sfv; apt-get install python3-cryptography",
        );
        return None;
    }
    let headers: Vec<_> =
        seen.headers.iter().map(|(k, v)| (k.as_str(), v.to_str().unwrap_or(""))).collect();
    let request = serde_json::json!({
        "method": seen.method, "authority": authority, "target": seen.target, "scheme": "http",
        "headers": headers, "label": label,
        "keys": keys.iter().cloned().collect::<std::collections::HashMap<_, _>>(),
    });
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/proxy/verify_joined.py");
    let mut child = Command::new("python3")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(request.to_string().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    Some(if out.status.success() { Ok(()) } else { Err(said) })
}

/// Issue 41 (review finding 1): thousands of labels in the client's `Signature-Input` do not
/// make the proxy look at each of them (the unit test
/// `thousands_of_labels_cost_one_read_of_each_field` counts the reads), nor grow its own
/// signature or the audit record with them.
#[tokio::test]
async fn a_client_with_thousands_of_labels_gets_the_proxys_own_signature_only() {
    let client = client_key();
    let origin = Origin::start(ROBOTS).await;
    let (proxy, ring, _keys) = cosigning(&client).await;
    let labels = 1500;
    let input: Vec<_> = (0..labels).map(|i| format!("a{i}=(\"@method\")")).collect();
    let sig: Vec<_> = (0..labels).map(|i| format!("a{i}=:AA==:")).collect();
    let (input, sig) = (input.join(", "), sig.join(", "));
    send(
        &proxy,
        &format!("{}/hostile", origin.base()),
        &[("signature-input", input.as_str()), ("signature", sig.as_str())],
    )
    .await;
    let seen = origin.seen().into_iter().find(|s| s.target == "/hostile").unwrap();
    let ours = seen.headers.get_all("signature-input").iter().nth(1).unwrap().to_str().unwrap();
    assert!(ours.len() < 400, "the proxy's Signature-Input is bounded: {} bytes", ours.len());
    assert!(ours.starts_with(
        "sig1=(\"@method\" \"@authority\" \"@path\" \"signature-agent\";key=\"sig1\");"
    ));
    let received = Received::of(origin.addr.to_string(), &seen);
    verifies(&received, "sig1", &ring).expect("the proxy's signature verifies");
    let records = proxy.audit_records().await;
    let record = records.iter().find(|r| r["robots.path"] == "/hostile").unwrap();
    let why = record["robots.signature.cosign_skipped"].as_str().unwrap();
    assert!(why.starts_with("too_many_labels: 1500 labels"), "{why}");
    assert!(record.to_string().len() < 4096, "the audit record is bounded");
}

/// Issue 41 (review finding 3): a made-up client signature over a made-up
/// `X-Gateway-Claim: approved-by-compliance` does not get the organisation's key over it; the
/// same claim signed by a client key the identity trusts does.
#[tokio::test]
async fn the_proxy_covers_only_a_client_signature_it_verified_with_a_trusted_key() {
    let client = client_key();
    let origin = Origin::start(ROBOTS).await;
    let (proxy, ring, _keys) = cosigning(&client).await;
    let authority = origin.addr.to_string();
    let claim = ("x-gateway-claim", "approved-by-compliance");
    let fake_input = format!(
        r#"agent=("@authority" "x-gateway-claim" "signature-agent";key="agent");created=1;keyid="{CLIENT_KEYID}""#
    );
    let fake = [
        ("signature-agent", CLIENT_AGENT),
        ("signature-input", fake_input.as_str()),
        ("signature", "agent=:AAAA:"),
        claim,
    ];
    send(&proxy, &format!("{}/fake", origin.base()), &fake).await;
    // A real signature, by a key nobody trusts.
    let stranger = client_key();
    let (input, signature) = client_signature(&stranger, &authority, "/stranger", &[claim]);
    let strange = [
        ("signature-agent", CLIENT_AGENT),
        ("signature-input", input.as_str()),
        ("signature", signature.as_str()),
        claim,
    ];
    send(&proxy, &format!("{}/stranger", origin.base()), &strange).await;
    // The trusted client's.
    let (input, signature) = client_signature(&client, &authority, "/trusted", &[claim]);
    let trusted = [
        ("signature-agent", CLIENT_AGENT),
        ("signature-input", input.as_str()),
        ("signature", signature.as_str()),
        claim,
    ];
    send(&proxy, &format!("{}/trusted", origin.base()), &trusted).await;

    let ours = |path: &str| {
        let seen = origin.seen().into_iter().find(|s| s.target == path).unwrap();
        let line = seen.headers.get_all("signature-input").iter().nth(1).unwrap();
        let line = line.to_str().unwrap().to_owned();
        verifies(&Received::of(authority.clone(), &seen), "sig1", &ring).expect("sig1 verifies");
        line
    };
    for path in ["/fake", "/stranger"] {
        let line = ours(path);
        assert!(!line.contains("x-gateway-claim"), "{path}: {line}");
        assert!(!line.contains(r#""signature";key="agent""#), "{path}: {line}");
    }
    let line = ours("/trusted");
    assert!(line.contains(r#""x-gateway-claim""#), "{line}");
    assert!(line.contains(r#""signature";key="agent""#), "{line}");
    let records = proxy.audit_records().await;
    let field = |path: &str, name: &str| {
        let record = records.iter().find(|r| r["robots.path"] == path).unwrap();
        record[name].as_str().unwrap_or_default().to_owned()
    };
    for path in ["/fake", "/stranger"] {
        let why = field(path, "robots.signature.cosign_skipped");
        assert!(why.starts_with("unverified_signature: agent "), "{path}: {why}");
    }
    assert_eq!(field("/trusted", "robots.signature.cosigned"), "agent");
}

/// A client's signature in the legacy string form of `Signature-Agent`, signed by a trusted
/// key, a malformed one, and a stray `,` that makes the joined `Signature-Input` no dictionary:
/// each request reaches the origin with a signature that a verifier joining field lines
/// (Python's, Go's, Node's) reads and verifies (issue 41, review findings 2 and 4).
#[tokio::test]
async fn every_signature_that_leaves_verifies_for_a_verifier_joining_field_lines() {
    let client = client_key();
    let origin = Origin::start(ROBOTS).await;
    let (proxy, _ring, _keys) = cosigning(&client).await;
    let authority = origin.addr.to_string();
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let legacy_agent = "\"https://agent.example\"";
    let params = format!(
        "(\"@authority\" \"signature-agent\");created={now};expires={};keyid=\"{CLIENT_KEYID}\";tag=\"web-bot-auth\"",
        now + 300
    );
    let base = format!(
        "\"@authority\": {authority}\n\"signature-agent\": {legacy_agent}\n\"@signature-params\": {params}"
    );
    let legacy_sig =
        format!("agent=:{}:", Base64::encode_string(client.sign(base.as_bytes()).as_ref()));
    let legacy_input = format!("agent={params}");
    let legacy = [
        ("signature-agent", legacy_agent),
        ("signature-input", legacy_input.as_str()),
        ("signature", legacy_sig.as_str()),
    ];
    send(&proxy, &format!("{}/legacy", origin.base()), &legacy).await;
    let fake_legacy = [
        ("signature-agent", legacy_agent),
        ("signature-input", legacy_input.as_str()),
        ("signature", "agent=:AAAA:"),
    ];
    send(&proxy, &format!("{}/legacy-fake", origin.base()), &fake_legacy).await;
    let (input, signature) = client_signature(&client, &authority, "/comma", &[]);
    let mut req = proxy
        .client()
        .get(format!("{}/comma", origin.base()))
        .header("user-agent", "ExampleBot/1.0");
    for (k, v) in [
        ("signature-agent", CLIENT_AGENT),
        ("signature-input", input.as_str()),
        ("signature-input", "x,"),
        ("signature", signature.as_str()),
    ] {
        req = req.header(k, v);
    }
    assert_eq!(req.send().await.unwrap().status(), 200);

    let mut keys = proxy_keys(&proxy);
    keys.push((CLIENT_KEYID.to_owned(), Base64::encode_string(client.public_key().as_ref())));
    let seen = |path: &str| origin.seen().into_iter().find(|s| s.target == path).unwrap();
    // The legacy form, verified: forwarded as the client signed it, and it still verifies.
    let legacy_seen = seen("/legacy");
    assert_eq!(legacy_seen.headers.get_all("signature-agent").iter().count(), 1);
    let Some(result) = joined_verifier(&legacy_seen, &authority, "agent", &keys) else { return };
    result.expect("the client's legacy-form signature verifies");
    // Unverified legacy form, and a stray comma: replaced by the proxy's, which verifies.
    for path in ["/legacy-fake", "/comma"] {
        let s = seen(path);
        joined_verifier(&s, &authority, "sig1", &keys)
            .unwrap()
            .unwrap_or_else(|e| panic!("{path}: the proxy's signature: {e}"));
    }
    let records = proxy.audit_records().await;
    let why = |path: &str| {
        let record = records.iter().find(|r| r["robots.path"] == path).unwrap();
        record["robots.signature.cosign_skipped"].as_str().unwrap_or_default().to_owned()
    };
    assert!(why("/legacy").starts_with("legacy_signature_agent: "), "{}", why("/legacy"));
    assert!(why("/legacy").ends_with("not signed by the proxy)"), "{}", why("/legacy"));
    assert!(why("/legacy-fake").ends_with("replaced)"), "{}", why("/legacy-fake"));
    assert!(why("/comma").starts_with("malformed_signature_input: "), "{}", why("/comma"));
}
