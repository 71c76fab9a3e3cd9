//! Web Bot Auth signatures made by the real proxy on its way to real origins on 127.0.0.1, and
//! checked by another implementation: Cloudflare's `web-bot-auth` crate, with the keys it
//! reads from the proxy's own key directory listener.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use http::HeaderMap;
use sfv::FieldType;
use web_bot_auth::components::{
    CoveredComponent, DerivedComponent, HTTPField, HTTPFieldParameters,
};
use web_bot_auth::keyring::{JSONWebKeySet, KeyRing};
use web_bot_auth::message_signatures::{MessageVerifier, SignedMessage};
use web_bot_auth::WebBotAuthVerifier;

use robots_proxy::config::Config;
use robots_proxy::signing::keys::{KeyName, SigningKey};
use robots_proxy::signing::{directory, Signer};

use super::support::{Origin, Seen, TestProxy};
use super::tls_support::{connect, h2_over, tls_over, HttpsProxy, TlsOrigin, H1};

pub(super) const AGENT: &str = "https://bots.example.com";
pub(super) const ROBOTS: &str = "User-agent: *\nDisallow: /private\n";

/// A message as an origin received it, for the `web-bot-auth` verifier.
pub(super) struct Received {
    pub(super) authority: String,
    pub(super) headers: HeaderMap,
    /// The method and request-target (origin form) as received.
    pub(super) method: String,
    pub(super) target: String,
}

impl Received {
    /// The request `seen` as it reached an origin at `authority`.
    pub(super) fn of(authority: impl Into<String>, seen: &Seen) -> Received {
        Received {
            authority: authority.into(),
            headers: seen.headers.clone(),
            method: seen.method.clone(),
            target: seen.target.clone(),
        }
    }

    /// A key directory response with `headers`, to the GET for it at `authority`.
    pub(super) fn directory(authority: impl Into<String>, headers: HeaderMap) -> Received {
        Received {
            authority: authority.into(),
            headers,
            method: "GET".into(),
            target: directory::PATH.into(),
        }
    }
}

impl SignedMessage for Received {
    fn lookup_component(&self, name: &CoveredComponent) -> Vec<String> {
        match name {
            CoveredComponent::Derived(DerivedComponent::Authority { .. }) => {
                vec![self.authority.clone()]
            }
            CoveredComponent::Derived(DerivedComponent::Method { .. }) => {
                vec![self.method.clone()]
            }
            CoveredComponent::Derived(DerivedComponent::Path { .. }) => {
                let path = self.target.split_once('?').map_or(self.target.as_str(), |(p, _)| p);
                vec![if path.is_empty() { "/".into() } else { path.into() }]
            }
            CoveredComponent::Derived(DerivedComponent::Query { .. }) => {
                vec![format!("?{}", self.target.split_once('?').map_or("", |(_, q)| q))]
            }
            CoveredComponent::Derived(DerivedComponent::TargetUri { .. }) => {
                vec![format!("http://{}{}", self.authority, self.target)]
            }
            CoveredComponent::HTTP(HTTPField { name, parameters }) => {
                let values: Vec<String> = self
                    .headers
                    .get_all(name.as_str())
                    .iter()
                    .filter_map(|v| v.to_str().ok().map(str::to_owned))
                    .collect();
                let key = parameters.0.iter().find_map(|p| match p {
                    HTTPFieldParameters::Key(k) => Some(k.clone()),
                    _ => None,
                });
                let Some(key) = key else { return values };
                // RFC 9421 §2.1.2: the member of the dictionary, serialised.
                let Ok(dict) = sfv::Parser::new(&values.join(", ")).parse::<sfv::Dictionary>()
                else {
                    return vec![];
                };
                // An item, or an inner list (a `Signature-Input` member, which a cosignature
                // covers): serialised as a one-member list is.
                match dict.get(key.as_str()) {
                    Some(member) => vec![member.clone()].serialize().into_iter().collect(),
                    None => vec![],
                }
            }
            _ => vec![],
        }
    }
}

/// What the `web-bot-auth` crate says of a received request: `Ok` when the signature verifies
/// with `keys` and has not expired (its newer versions refuse expired signatures in `verify`;
/// 0.7 reports expiry as an advisory, checked here the same way).
pub(super) fn verify(received: &Received, keys: &KeyRing) -> Result<(), String> {
    let verifier = WebBotAuthVerifier::parse(received).map_err(|e| format!("parse: {e}"))?;
    let advisory = verifier.get_parsed_label().base.parameters.details.possibly_insecure(|_| false);
    if advisory.is_expired.unwrap_or(true) {
        return Err("expired".into());
    }
    verifier.verify(keys, None).map(drop).map_err(|e| format!("verify: {e}"))
}

/// Makes the key `name` in `dir` and gives its key id.
pub(super) fn make_key(dir: &Path, name: &str) -> String {
    let name: KeyName = name.parse().unwrap();
    SigningKey::create(&name, &name.file_in(dir)).unwrap().keyid().to_owned()
}

/// `[signing]` with key `k1` in `dir` for `ExampleBot`.
pub(super) fn signing(config: &mut Config, dir: &Path) {
    config.signing.keys_dir = dir.to_owned();
    config.signing.keys = vec![toml_entry(r#"{ name = "k1" }"#)];
    config.signing.identities = vec![toml_entry(&format!(
        r#"{{ token = "ExampleBot", keys = ["k1"], agent = "{AGENT}" }}"#
    ))];
    config.audit.all_decisions = true;
}

/// One table entry, parsed as the configuration file is.
pub(super) fn toml_entry<T: serde::de::DeserializeOwned>(inline: &str) -> T {
    #[derive(serde::Deserialize)]
    struct Wrap<T> {
        v: T,
    }
    toml::from_str::<Wrap<T>>(&format!("v = {inline}")).unwrap().v
}

/// Serves the proxy's key directory on 127.0.0.1 and fetches it: the keys it lists, after
/// checking with `web-bot-auth` that every one of them signed the response for the
/// authority it was asked for (its agent's).
pub(super) async fn directory_keys(signer: Arc<Signer>) -> (KeyRing, JSONWebKeySet) {
    directory_keys_for(signer, "bots.example.com").await
}

/// Serves the key directory and asks it for `Host: host`: the response.
async fn ask_directory(signer: Arc<Signer>, host: &str) -> reqwest::Response {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let clock: Arc<dyn robots_proxy::clock::Clock> = Arc::new(robots_proxy::clock::SystemClock);
    tokio::spawn(directory::serve(listener, signer, clock, std::future::pending()));
    super::support::reqwest_builder()
        .build()
        .unwrap()
        .get(format!("http://{addr}{}", directory::PATH))
        .header("host", host)
        .send()
        .await
        .unwrap()
}

/// [`directory_keys`] asking with `Host: host`; the signatures must verify for
/// `bots.example.com`, the agent's authority normalised (RFC 9421 §2.2.3).
async fn directory_keys_for(signer: Arc<Signer>, host: &str) -> (KeyRing, JSONWebKeySet) {
    let resp = ask_directory(signer, host).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], directory::MEDIA_TYPE);
    let headers = resp.headers().clone();
    let jwks: JSONWebKeySet = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
    let mut ring = KeyRing::default();
    assert!(ring.import_jwks(jwks.clone()).iter().all(Option::is_none));
    let received = Received::directory("bots.example.com", headers);
    for key in &jwks.keys {
        let thumbprint = key.b64_thumbprint();
        // The directory signature made by this key (draft: one per key it lists).
        let by_this_key = |message: &Received| {
            MessageVerifier::parse(message, |(_, inner)| {
                let param = |name: &str| {
                    inner.params.get(name).and_then(|v| v.as_string()).map(|v| v.as_str())
                };
                param("tag") == Some(directory::DIRECTORY_TAG)
                    && param("keyid") == Some(thumbprint.as_str())
            })
        };
        let verifier = by_this_key(&received).expect("a signature by each key");
        let advisory = verifier.parsed.base.parameters.details.possibly_insecure(|_| false);
        assert_eq!(advisory.is_expired, Some(false));
        verifier.verify(&ring, None).expect("the directory signature verifies");
        // Signed for the authority asked for, not any other, nor with its default port.
        for other in ["evil.example", "bots.example.com:443"] {
            let headers = received.headers.clone();
            let elsewhere = Received::directory(other, headers);
            assert!(by_this_key(&elsewhere).unwrap().verify(&ring, None).is_err(), "{other}");
        }
    }
    (ring, jwks)
}

pub(super) fn header(headers: &HeaderMap, name: &str) -> Option<String> {
    headers.get(name).map(|v| v.to_str().unwrap().to_owned())
}

#[tokio::test]
async fn plain_http_request_is_signed_and_verified_with_the_directory_keys() {
    let keys = tempfile::tempdir().unwrap();
    let keyid = make_key(keys.path(), "k1");
    let origin = Origin::start(ROBOTS).await;
    let proxy = TestProxy::start_with(|c| signing(c, keys.path())).await;
    let resp = proxy
        .client()
        .get(format!("{}/page?q=1", origin.base()))
        .header("user-agent", "ExampleBot/1.0")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let seen = origin.seen().into_iter().find(|s| s.target == "/page?q=1").unwrap();
    assert_eq!(header(&seen.headers, "signature-agent").unwrap(), format!("sig1=\"{AGENT}\""));
    let input = header(&seen.headers, "signature-input").unwrap();
    assert!(
        input.starts_with(
            r#"sig1=("@method" "@authority" "@path" "signature-agent";key="sig1");created="#
        ),
        "{input}"
    );
    assert!(input.contains(&format!(r#"keyid="{keyid}";alg="ed25519";tag="web-bot-auth""#)));

    let (ring, jwks) = directory_keys(proxy.signer.clone().unwrap()).await;
    assert_eq!(jwks.keys.len(), 1);
    assert_eq!(jwks.keys[0].b64_thumbprint(), keyid, "keyid is the RFC 7638 thumbprint");
    let authority = header(&seen.headers, "host").unwrap();
    assert_eq!(authority, origin.addr.to_string());
    let received = Received::of(authority.clone(), &seen);
    verify(&received, &ring).expect("the proxy's signature verifies");

    // Another authority, or another Signature-Agent, and it no longer does.
    let moved = Received::of("127.0.0.1:1", &seen);
    assert!(verify(&moved, &ring).unwrap_err().contains("verify"));
    let mut agent = seen.headers.clone();
    agent.insert("signature-agent", "sig1=\"https://other.example\"".parse().unwrap());
    let claimed = Received { headers: agent, ..Received::of(authority, &seen) };
    assert!(verify(&claimed, &ring).unwrap_err().contains("verify"));

    // The audit record of the allowed request names the key.
    let records = proxy.audit_records().await;
    let record = records.iter().find(|r| r["robots.path"] == "/page?q=1").unwrap();
    assert_eq!(record["robots.signature.keyid"], keyid.as_str());
}

#[tokio::test]
async fn an_expired_signature_fails_verification() {
    let keys = tempfile::tempdir().unwrap();
    make_key(keys.path(), "k1");
    let origin = Origin::start(ROBOTS).await;
    let proxy = TestProxy::start_with(|c| signing(c, keys.path())).await;
    // The proxy's clock stands 10 minutes back: its 60 s signatures have long expired.
    proxy.clock.set(SystemTime::now() - Duration::from_secs(600));
    let resp = proxy
        .client()
        .get(format!("{}/old", origin.base()))
        .header("user-agent", "ExampleBot/1.0")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let seen = origin.seen().into_iter().find(|s| s.target == "/old").unwrap();
    let (ring, _) = directory_keys(proxy.signer.clone().unwrap()).await;
    let received = Received::of(origin.addr.to_string(), &seen);
    assert_eq!(verify(&received, &ring).unwrap_err(), "expired");
    // Only its time is wrong: the signature itself is sound.
    let verifier = WebBotAuthVerifier::parse(&received).unwrap();
    verifier.verify(&ring, None).expect("the expired signature is otherwise valid");
}

#[tokio::test]
async fn unmapped_tokens_and_blocked_requests_are_not_signed() {
    let keys = tempfile::tempdir().unwrap();
    make_key(keys.path(), "k1");
    let origin = Origin::start(ROBOTS).await;
    let proxy = TestProxy::start_with(|c| signing(c, keys.path())).await;
    let client = proxy.client();
    let other = client
        .get(format!("{}/other", origin.base()))
        .header("user-agent", "OtherBot/2.0")
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), 200);
    let blocked = client
        .get(format!("{}/private/x", origin.base()))
        .header("user-agent", "ExampleBot/1.0")
        .send()
        .await
        .unwrap();
    assert_eq!(blocked.status(), 403);
    let seen = origin.seen().into_iter().find(|s| s.target == "/other").unwrap();
    for name in ["signature", "signature-input", "signature-agent"] {
        assert!(seen.headers.get(name).is_none(), "{name} on an unmapped token");
    }
    assert_eq!(origin.hits("/private/x"), 0);
    let records = proxy.audit_records().await;
    assert!(records.iter().all(|r| r.get("robots.signature.keyid").is_none()), "{records:?}");
}

#[tokio::test]
async fn a_request_the_client_signed_is_left_as_it_is_unless_configured() {
    let keys = tempfile::tempdir().unwrap();
    make_key(keys.path(), "k1");
    let origin = Origin::start(ROBOTS).await;
    let theirs = [
        ("signature-agent", "sig1=\"https://client.example\""),
        ("signature-input", "sig1=(\"@authority\");created=1;keyid=\"x\""),
        ("signature", "sig1=:AAAA:"),
    ];
    let send = |proxy: &TestProxy, path: &str| {
        let mut req = proxy
            .client()
            .get(format!("{}{path}", origin.base()))
            .header("user-agent", "ExampleBot/1.0");
        for (k, v) in theirs {
            req = req.header(k, v);
        }
        req.send()
    };
    let keeping = TestProxy::start_with(|c| signing(c, keys.path())).await;
    assert_eq!(send(&keeping, "/kept").await.unwrap().status(), 200);
    let seen = origin.seen().into_iter().find(|s| s.target == "/kept").unwrap();
    for (k, v) in theirs {
        assert_eq!(header(&seen.headers, k).unwrap(), v, "{k} kept");
    }

    let replacing = TestProxy::start_with(|c| {
        signing(c, keys.path());
        c.signing.client_signatures = robots_proxy::signing::ClientSignatures::Replace;
    })
    .await;
    assert_eq!(send(&replacing, "/replaced").await.unwrap().status(), 200);
    let seen = origin.seen().into_iter().find(|s| s.target == "/replaced").unwrap();
    assert_eq!(seen.headers.get_all("signature").iter().count(), 1);
    assert_eq!(header(&seen.headers, "signature-agent").unwrap(), format!("sig1=\"{AGENT}\""));
    let (ring, _) = directory_keys(replacing.signer.clone().unwrap()).await;
    let received = Received::of(origin.addr.to_string(), &seen);
    verify(&received, &ring).expect("the proxy's signature replaced the client's");
}

#[tokio::test]
async fn intercepted_https_is_signed_over_http1_and_http2() {
    let keys = tempfile::tempdir().unwrap();
    make_key(keys.path(), "k1");
    let origin = TlsOrigin::start(ROBOTS).await;
    let proxy = HttpsProxy::start(&origin.ca, &[origin.port()], |c| signing(c, keys.path())).await;

    // HTTP/1.1 inside the tunnel, by reqwest.
    let resp = proxy
        .client(H1)
        .get(format!("{}/h1", origin.base()))
        .header("user-agent", "ExampleBot/1.0")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);

    // HTTP/2 inside the tunnel.
    let tunnel = connect(proxy.addr(), &origin.host(), "").await.tunnel();
    let tls = tls_over(tunnel, proxy.client_tls(&[b"h2"]), "localhost").await.unwrap();
    let mut send = h2_over(tls).await;
    let req = http::Request::get(format!("{}/h2", origin.base()))
        .version(http::Version::HTTP_2)
        .header("user-agent", "ExampleBot/1.0")
        .body(http_body_util::Empty::new())
        .unwrap();
    send.ready().await.unwrap();
    let answer = send.send_request(req).await.unwrap();
    assert_eq!(answer.status(), 200);

    let (ring, _) = directory_keys(proxy.proxy.signer.clone().unwrap()).await;
    for path in ["/h1", "/h2"] {
        let seen = origin.seen_for(path).pop().unwrap_or_else(|| panic!("{path} reached"));
        let authority = seen.authority.clone().unwrap();
        assert_eq!(authority, origin.host());
        let received = Received {
            authority,
            headers: seen.headers.clone(),
            method: seen.method.clone(),
            target: seen.target.clone(),
        };
        verify(&received, &ring).unwrap_or_else(|e| panic!("{path} ({:?}): {e}", seen.version));
    }
}

#[tokio::test]
async fn usage_records_of_a_signed_request_name_the_key() {
    let keys = tempfile::tempdir().unwrap();
    let keyid = make_key(keys.path(), "k1");
    let origin = Origin::start("User-agent: *\nContent-Signal: ai-train=no\nAllow: /\n").await;
    let proxy = TestProxy::start_with(|c| {
        signing(c, keys.path());
        c.audit.all_decisions = false;
        c.usage.train_ai = robots_proxy::usage::UsageMode::Annotate;
        c.usage.crawlers = vec![toml_entry(r#"{ token = "ExampleBot", purposes = ["train-ai"] }"#)];
    })
    .await;
    let resp = proxy
        .client()
        .get(format!("{}/article", origin.base()))
        .header("user-agent", "ExampleBot/1.0")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(origin
        .seen()
        .iter()
        .any(|s| s.target == "/article" && s.headers.contains_key("signature")));
    let records = proxy.audit_records().await;
    let annotated: Vec<_> =
        records.iter().filter(|r| r["event.action"] == "usage_annotate").collect();
    assert_eq!(annotated.len(), 1, "{records:?}");
    assert_eq!(annotated[0]["robots.signature.keyid"], keyid.as_str());
}

#[tokio::test]
async fn a_retired_key_stays_in_the_directory_and_the_new_one_signs() {
    let keys = tempfile::tempdir().unwrap();
    make_key(keys.path(), "old");
    let new = make_key(keys.path(), "new");
    let origin = Origin::start(ROBOTS).await;
    let now = humantime::format_rfc3339_seconds(SystemTime::now());
    let later = humantime::format_rfc3339_seconds(SystemTime::now() + Duration::from_secs(3600));
    let proxy = TestProxy::start_with(|c| {
        c.signing.keys_dir = keys.path().to_owned();
        c.signing.keys = vec![
            toml_entry(&format!(
                r#"{{ name = "old", sign_until = "{now}", publish_until = "{later}" }}"#
            )),
            toml_entry(&format!(r#"{{ name = "new", sign_from = "{now}" }}"#)),
        ];
        c.signing.identities = vec![toml_entry(&format!(
            r#"{{ token = "ExampleBot", keys = ["old", "new"], agent = "{AGENT}" }}"#
        ))];
    })
    .await;
    let resp = proxy
        .client()
        .get(format!("{}/rotated", origin.base()))
        .header("user-agent", "ExampleBot/1.0")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    // Both keys listed, each signing the directory (checked inside).
    let (ring, jwks) = directory_keys(proxy.signer.clone().unwrap()).await;
    assert_eq!(jwks.keys.len(), 2);
    let seen = origin.seen().into_iter().find(|s| s.target == "/rotated").unwrap();
    let input = header(&seen.headers, "signature-input").unwrap();
    assert!(input.contains(&format!("keyid=\"{new}\"")), "signed by the new key: {input}");
    let received = Received::of(origin.addr.to_string(), &seen);
    verify(&received, &ring).unwrap();
}

#[test]
fn keys_new_writes_mode_0600_and_never_overwrites() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let run = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_robots-proxy"))
            .args(["keys", "new", "bot-2026", "--dir"])
            .arg(dir.path())
            .env_remove("ROBOTS_PROXY_CONFIG")
            .output()
            .unwrap()
    };
    let first = run();
    assert!(first.status.success(), "{first:?}");
    let path = dir.path().join("bot-2026.pem");
    let written = std::fs::read(&path).unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    let name: KeyName = "bot-2026".parse().unwrap();
    let key = SigningKey::load(&name, &path).unwrap();
    assert!(String::from_utf8_lossy(&first.stdout).contains(key.keyid()));

    let second = run();
    assert_eq!(second.status.code(), Some(1));
    let said = String::from_utf8_lossy(&second.stderr);
    assert!(said.contains("exists already") && said.contains("never overwritten"), "{said}");
    assert_eq!(std::fs::read(&path).unwrap(), written, "the key is unchanged");
}

#[test]
fn keys_export_writes_a_directory_whose_signature_verifies_for_the_authority() {
    let state = tempfile::tempdir().unwrap();
    let keyid = make_key(&state.path().join("keys"), "k1");
    let config = state.path().join("c.toml");
    std::fs::write(
        &config,
        format!(
            "[signing]\nkeys = [{{ name = \"k1\" }}]\n\
             identities = [{{ token = \"ExampleBot\", keys = [\"k1\"], agent = \"{AGENT}\" }}]\n"
        ),
    )
    .unwrap();
    let export = |authority: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_robots-proxy"))
            .args(["keys", "export", "--authority", authority, "--valid", "1h", "--config"])
            .arg(&config)
            .env_clear()
            .env("ROBOTS_PROXY_STATE_DIR", state.path())
            .output()
            .unwrap()
    };
    // Not an agent's authority: nothing is signed.
    let refused = export("other.example.com");
    assert!(!refused.status.success(), "{refused:?}");
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("bots.example.com") && !said.contains("Signature:"), "{said}");
    // The default port is left out of what is signed (RFC 9421 §2.2.3).
    let out = export("Bots.Example.com:443");
    assert!(out.status.success(), "{out:?}");
    let jwks: JSONWebKeySet = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(jwks.keys.len(), 1);
    assert_eq!(jwks.keys[0].b64_thumbprint(), keyid);
    let mut ring = KeyRing::default();
    assert!(ring.import_jwks(jwks).iter().all(Option::is_none));
    let mut headers = HeaderMap::new();
    for line in String::from_utf8_lossy(&out.stderr).lines() {
        let (name, value) = line.split_once(": ").unwrap();
        headers
            .insert(http::HeaderName::from_bytes(name.as_bytes()).unwrap(), value.parse().unwrap());
    }
    assert_eq!(header(&headers, "content-type").unwrap(), directory::MEDIA_TYPE);
    let parse = |authority: &str| {
        let received = Received::directory(authority, headers.clone());
        MessageVerifier::parse(&received, |(_, inner)| {
            inner.params.get("tag").and_then(|v| v.as_string()).map(|v| v.as_str())
                == Some(directory::DIRECTORY_TAG)
        })
        .unwrap()
    };
    parse("bots.example.com").verify(&ring, None).expect("signed for the authority given");
    assert!(parse("other.example.com").verify(&ring, None).is_err());
    assert!(parse("bots.example.com:443").verify(&ring, None).is_err());
}

/// Issue 41 (review finding 7): `keys export --out FILE` writes exactly the body its printed
/// `Content-Digest` is of, so the file, hosted as documented, passes its own possession proof.
#[test]
fn keys_export_out_writes_the_bytes_its_content_digest_is_of() {
    use sha2::Digest as _;
    let state = tempfile::tempdir().unwrap();
    make_key(&state.path().join("keys"), "k1");
    let config = state.path().join("c.toml");
    std::fs::write(
        &config,
        format!(
            "[signing]\nkeys = [{{ name = \"k1\" }}]\n\
             identities = [{{ token = \"ExampleBot\", keys = [\"k1\"], agent = \"{AGENT}\" }}]\n"
        ),
    )
    .unwrap();
    let file = state.path().join("directory.json");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_robots-proxy"))
        .args(["keys", "export", "--authority", "bots.example.com", "--out"])
        .arg(&file)
        .arg("--config")
        .arg(&config)
        .env_clear()
        .env("ROBOTS_PROXY_STATE_DIR", state.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stderr);
    let digest = said
        .lines()
        .find_map(|l| l.strip_prefix("Content-Digest: "))
        .unwrap_or_else(|| panic!("no Content-Digest: {said}"));
    let body = std::fs::read(&file).unwrap();
    let sha = <base64ct::Base64 as base64ct::Encoding>::encode_string(&sha2::Sha256::digest(&body));
    assert_eq!(digest, format!("sha-256=:{sha}:"), "the file is the body digested");
    serde_json::from_slice::<JSONWebKeySet>(&body).expect("a JWK Set");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_directory_signs_only_for_the_agents_authority_without_its_default_port() {
    let dir = tempfile::tempdir().unwrap();
    make_key(dir.path(), "k1");
    let proxy = TestProxy::start_with(|c| signing(c, dir.path())).await;
    let signer = proxy.signer.clone().unwrap();
    // Verified for `bots.example.com` (inside), whatever case and default port it was asked with.
    for host in ["bots.example.com", "Bots.Example.COM:443", "bots.example.com."] {
        let (_, jwks) = directory_keys_for(signer.clone(), host).await;
        assert_eq!(jwks.keys.len(), 1, "{host}");
    }
    for host in ["evil.example", "rebind.evil.example:9090", "bots.example.com:80", "127.0.0.1"] {
        let resp = ask_directory(signer.clone(), host).await;
        assert_eq!(resp.status(), 421, "{host}");
        assert!(resp.headers().get("signature").is_none(), "{host}");
    }
}
