//! Unit tests of [`super`] (`signing.client_signatures = "cosign"`).
use super::*;
use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair};
use base64ct::Base64UrlUnpadded;

fn target(path_and_query: &str) -> Target<'_> {
    Target { method: "GET", scheme: "http", authority: "origin.example", path_and_query }
}

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.append(HeaderName::from_bytes(k.as_bytes()).unwrap(), v.parse().unwrap());
    }
    h
}

fn now() -> std::time::SystemTime {
    std::time::SystemTime::now()
}

/// A client key `k`, and the trusted keys with it.
fn client() -> (Ed25519KeyPair, TrustedKeys) {
    let rng = aws_lc_rs::rand::SystemRandom::new();
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
    let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
    let x = Base64UrlUnpadded::encode_string(pair.public_key().as_ref());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    let jwks = format!(r#"{{"keys":[{{"kty":"OKP","crv":"Ed25519","kid":"k","x":"{x}"}}]}}"#);
    std::fs::write(&path, jwks).unwrap();
    (pair, TrustedKeys::load(&path).unwrap())
}

/// The client's `Signature-Input` member and `Signature` of `GET /a` at origin.example by
/// `key`, over the default components, its agent member and `extra` (name, value).
fn signed(key: &Ed25519KeyPair, extra: &[(&str, &str)]) -> (String, String) {
    let t = now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let mut ids = String::from(r#""@method" "@authority" "@path" "signature-agent";key="agent""#);
    let mut base = "\"@method\": GET\n\"@authority\": origin.example\n\"@path\": /a\n\
                    \"signature-agent\";key=\"agent\": \"https://agent.example\"\n"
        .to_owned();
    for (name, value) in extra {
        ids.push_str(&format!(" \"{name}\""));
        base.push_str(&format!("\"{name}\": {value}\n"));
    }
    let params = format!("({ids});created={t};expires={};keyid=\"k\"", t + 60);
    base.push_str(&format!("\"@signature-params\": {params}"));
    let sig = Base64::encode_string(key.sign(base.as_bytes()).as_ref());
    (format!("agent={params}"), format!("agent=:{sig}:"))
}

const AGENT: (&str, &str) = ("signature-agent", r#"agent="https://agent.example""#);

#[test]
fn a_client_signature_that_verifies_is_read_with_its_values() {
    let (key, trusted) = client();
    let (input, sig) = signed(&key, &[]);
    let h = headers(&[("signature-input", &input), ("signature", &sig), AGENT]);
    let client = ClientSignature::read(&target("/a?q"), &h, &trusted, now()).unwrap();
    let (labels, covered) = client.cover.as_ref().unwrap();
    assert_eq!(labels, &["agent"]);
    let values: Vec<_> = covered.iter().map(|c| c.arrived.as_str()).collect();
    assert_eq!(values, ["GET", "origin.example", "/a", "\"https://agent.example\""]);
    assert_eq!(client.free_label(), "sig1");
    let mut fields = Fields::new(&h);
    assert!(unchanged(covered, &target("/a?other"), &mut fields).is_ok(), "query not covered");
    let changed = unchanged(covered, &target("/b"), &mut fields).unwrap_err();
    assert_eq!(changed.reason, SkipReason::ChangedComponent);
}

/// Issue 41 (review finding 3): a made-up client signature over a made-up claim is not
/// covered by the organisation's key; nor a real one by a key the identity does not trust,
/// nor any with an identity that trusts none.
#[test]
fn a_signature_the_gateway_cannot_verify_is_not_covered() {
    let (key, trusted) = client();
    let claim = ("x-gateway-claim", "approved-by-compliance");
    let read = |input: &str, sig: &str, trusted: &TrustedKeys| {
        let h = headers(&[("signature-input", input), ("signature", sig), AGENT, claim]);
        ClientSignature::read(&target("/a"), &h, trusted, now()).unwrap().cover.unwrap_err()
    };
    let fake = read(
        r#"agent=("@authority" "x-gateway-claim");created=1;keyid="k""#,
        "agent=:AAAA:",
        &trusted,
    );
    assert_eq!(fake.reason, SkipReason::UnverifiedSignature, "{fake}");
    assert_eq!(fake.left, Left::Beside);
    let (input, sig) = signed(&key, &[claim]);
    let (_, other) = client();
    assert_eq!(read(&input, &sig, &other).reason, SkipReason::UnverifiedSignature);
    let none = read(&input, &sig, &TrustedKeys::default());
    assert!(none.detail.contains("no client_keys"), "{none}");
    // The same, verified: covered.
    let h = headers(&[("signature-input", &input), ("signature", &sig), AGENT, claim]);
    let ok = ClientSignature::read(&target("/a"), &h, &trusted, now()).unwrap();
    assert!(ok.cover.is_ok());
    // Expired.
    let later = now() + std::time::Duration::from_secs(120);
    let late = ClientSignature::read(&target("/a"), &h, &trusted, later).unwrap();
    assert!(late.cover.unwrap_err().detail.contains("expired"));
}

#[test]
fn what_cannot_be_cosigned_says_why_and_what_becomes_of_the_fields() {
    let (key, trusted) = client();
    let (input, sig) = signed(&key, &[]);
    let outcome = |pairs: &[(&str, &str)]| {
        let client = ClientSignature::read(&target("/a"), &headers(pairs), &trusted, now());
        let skipped = client.unwrap().cover.unwrap_err();
        (skipped.reason, skipped.left)
    };
    let s = ("signature", sig.as_str());
    use Left::*;
    use SkipReason::*;
    // Not a dictionary, joined: replaced.
    assert_eq!(
        outcome(&[("signature-input", "agent=(\"@authority\""), s]),
        (MalformedSignatureInput, Replaced)
    );
    assert_eq!(
        outcome(&[("signature-input", &input), ("signature-input", "x,"), s]),
        (MalformedSignatureInput, Replaced)
    );
    assert_eq!(
        outcome(&[("signature-input", &input), s, ("signature-agent", "sig1=")]),
        (MalformedSignatureAgent, Replaced)
    );
    // A legacy string: kept when the signature verifies, replaced otherwise.
    let legacy = ("signature-agent", "\"https://agent.example\"");
    let t = now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let params = format!("(\"@authority\" \"signature-agent\");created={t};keyid=\"k\"");
    let base = format!(
        "\"@authority\": origin.example\n\"signature-agent\": \"https://agent.example\"\n\
         \"@signature-params\": {params}"
    );
    let lsig = format!("agent=:{}:", Base64::encode_string(key.sign(base.as_bytes()).as_ref()));
    let linput = format!("agent={params}");
    assert_eq!(
        outcome(&[("signature-input", &linput), ("signature", &lsig), legacy]),
        (LegacySignatureAgent, Kept)
    );
    assert_eq!(
        outcome(&[("signature-input", &linput), ("signature", "agent=:AAAA:"), legacy]),
        (LegacySignatureAgent, Replaced)
    );
    // Dictionaries, but not coverable: beside.
    assert_eq!(
        outcome(&[("signature-input", "agent=\"x\""), s]),
        (MalformedSignatureInput, Beside)
    );
    assert_eq!(outcome(&[("signature-input", &input)]), (MalformedSignature, Beside));
    let input = |c: &str| format!("agent=({c});created=1");
    for c in ["\"@request-target\"", "\"@query-param\";name=\"a\"", "\"accept\";sf"] {
        assert_eq!(outcome(&[("signature-input", &input(c)), s]).0, UnsupportedComponent, "{c}");
    }
    let whole = outcome(&[("signature-input", &input("\"signature-agent\"")), s]);
    assert_eq!(whole, (ChangedComponent, Beside));
    assert_eq!(outcome(&[("signature-input", &input("\"x-absent\"")), s]).0, ChangedComponent);
}

/// Issue 41 (review finding 1): a hostile `Signature-Input` of thousands of labels costs
/// one read of each field, not one per label: the work is counted, not timed.
#[test]
fn thousands_of_labels_cost_one_read_of_each_field() {
    let (_, trusted) = client();
    let reads = |labels: usize| {
        let input: Vec<_> = (0..labels).map(|i| format!("a{i}=(\"@method\")")).collect();
        let sig: Vec<_> = (0..labels).map(|i| format!("a{i}=:AA==:")).collect();
        let h = headers(&[("signature-input", &input.join(", ")), ("signature", &sig.join(", "))]);
        READS.with(|r| r.set(0));
        let client = ClientSignature::read(&target("/a"), &h, &trusted, now()).unwrap();
        let mut fields = Fields::new(&h);
        let _ = client.free_label();
        if let Ok((_, covered)) = &client.cover {
            let _ = unchanged(covered, &target("/a"), &mut fields);
        }
        (READS.with(|r| r.get()), client.cover.map(drop).map_err(|s| s.reason))
    };
    let (one, _) = reads(1);
    let (many, why) = reads(2000);
    assert!(one <= 3 && many <= 3, "reads: 1 label {one}, 2000 labels {many}");
    assert_eq!(why, Err(SkipReason::TooManyLabels));
    let (at_cap, _) = reads(MAX_CLIENT_LABELS);
    assert!(at_cap <= 3, "{at_cap}");
}

#[test]
fn the_label_avoids_the_clients() {
    let t = TrustedKeys::default();
    let h = headers(&[("signature-input", "sig1=(\"@authority\")"), ("signature", "sig1=:AAAA:")]);
    assert_eq!(ClientSignature::read(&target("/"), &h, &t, now()).unwrap().free_label(), "sig2");
    let h = headers(&[
        ("signature-input", "sig1=(\"@authority\"), sig2=()"),
        ("signature", "sig3=:AAAA:"),
    ]);
    assert_eq!(ClientSignature::read(&target("/"), &h, &t, now()).unwrap().free_label(), "sig4");
    assert!(ClientSignature::read(&target("/"), &HeaderMap::new(), &t, now()).is_none());
}
