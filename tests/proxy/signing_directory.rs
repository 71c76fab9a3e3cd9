//! The key directory as draft-ietf-webbotauth-httpsig-protocol -01 wants it (issue 21 §1): a
//! `Content-Digest` (RFC 9530) of the body, covered with `"@authority";req` by every key's
//! signature, so the key set cannot be swapped under a captured signature; `ETag`,
//! `Last-Modified`, conditional `GET`, `HEAD`, and `Access-Control-Allow-Origin: *`. The
//! signatures are checked with Cloudflare's `web-bot-auth` crate.

use std::sync::Arc;
use std::time::Duration;

use base64ct::{Base64, Encoding};
use sha2::{Digest, Sha256};
use web_bot_auth::keyring::{JSONWebKeySet, KeyRing};
use web_bot_auth::message_signatures::MessageVerifier;

use robots_proxy::config::Config;
use robots_proxy::signing::{directory, Signer};

use super::signing::{header, make_key, toml_entry, Received};

/// A signer with key `k1` in `dir`, for `https://bots.example.com`.
fn signer(dir: &std::path::Path) -> Arc<Signer> {
    make_key(dir, "k1");
    let mut config = Config::default();
    config.signing.keys_dir = dir.to_owned();
    config.signing.keys = vec![toml_entry(r#"{ name = "k1" }"#)];
    config.signing.identities = vec![toml_entry(
        r#"{ token = "ExampleBot", keys = ["k1"], agent = "https://bots.example.com" }"#,
    )];
    Arc::new(Signer::new(&config.signing, dir).unwrap().unwrap())
}

/// Serves the directory of `signer` on 127.0.0.1: its address.
async fn serve(signer: Arc<Signer>) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let clock: Arc<dyn robots_proxy::clock::Clock> = Arc::new(robots_proxy::clock::SystemClock);
    tokio::spawn(directory::serve(listener, signer, clock, std::future::pending()));
    addr
}

/// `method` of the directory at `addr` for `Host: bots.example.com`, with `extra` headers.
async fn ask(
    addr: std::net::SocketAddr,
    method: reqwest::Method,
    extra: &[(&str, &str)],
) -> (reqwest::StatusCode, http::HeaderMap, String) {
    let mut req = super::support::reqwest_builder()
        .build()
        .unwrap()
        .request(method, format!("http://{addr}{}", directory::PATH))
        .header("host", "bots.example.com");
    for (name, value) in extra {
        req = req.header(*name, *value);
    }
    let resp = req.send().await.unwrap();
    let (status, headers) = (resp.status(), resp.headers().clone());
    (status, headers, resp.text().await.unwrap())
}

fn digest_of(body: &[u8]) -> String {
    format!("sha-256=:{}:", Base64::encode_string(&Sha256::digest(body)))
}

/// Whether the directory signature in `headers` verifies with `ring` (the `web-bot-auth`
/// crate, one signature per key).
fn directory_signature_verifies(headers: &http::HeaderMap, ring: &KeyRing) -> Result<(), String> {
    let received = Received::directory("bots.example.com", headers.clone());
    let verifier = MessageVerifier::parse(&received, |(_, inner)| {
        inner.params.get("tag").and_then(|v| v.as_string()).map(|v| v.as_str().to_owned())
            == Some(directory::DIRECTORY_TAG.to_owned())
    })
    .map_err(|e| format!("parse: {e}"))?;
    verifier.verify(ring, None).map(drop).map_err(|e| format!("verify: {e}"))
}

#[tokio::test]
async fn the_directory_signature_covers_the_content_digest_and_a_swapped_body_fails() {
    let keys = tempfile::tempdir().unwrap();
    let addr = serve(signer(keys.path())).await;
    let (status, headers, body) = ask(addr, reqwest::Method::GET, &[]).await;
    assert_eq!(status, 200);
    assert_eq!(header(&headers, "content-digest").unwrap(), digest_of(body.as_bytes()));
    let input = header(&headers, "signature-input").unwrap();
    assert!(input.starts_with(r#"sig1=("@authority";req "content-digest");created="#), "{input}");
    let jwks: JSONWebKeySet = serde_json::from_str(&body).unwrap();
    let mut ring = KeyRing::default();
    assert!(ring.import_jwks(jwks.clone()).iter().all(Option::is_none));
    let kid = body.split("\"kid\":\"").nth(1).and_then(|s| s.split('"').next()).unwrap();
    assert_eq!(kid, jwks.keys[0].b64_thumbprint(), "kid is the thumbprint");
    directory_signature_verifies(&headers, &ring).expect("the directory signature verifies");

    // Another key set under the captured signature: its digest is not the one signed, and
    // with the digest field replaced to match it, the signature no longer verifies.
    let other = tempfile::tempdir().unwrap();
    make_key(other.path(), "k9");
    let other_addr = serve(signer(other.path())).await;
    let (_, _, swapped) = ask(other_addr, reqwest::Method::GET, &[]).await;
    assert_ne!(swapped, body);
    assert_ne!(digest_of(swapped.as_bytes()), header(&headers, "content-digest").unwrap());
    let mut forged = headers.clone();
    forged.insert("content-digest", digest_of(swapped.as_bytes()).parse().unwrap());
    assert!(directory_signature_verifies(&forged, &ring).unwrap_err().contains("verify"));
}

#[tokio::test]
async fn the_directory_answers_conditional_requests_and_head_with_cors() {
    let keys = tempfile::tempdir().unwrap();
    let addr = serve(signer(keys.path())).await;
    let (status, headers, body) = ask(addr, reqwest::Method::GET, &[]).await;
    assert_eq!(status, 200);
    assert_eq!(header(&headers, "access-control-allow-origin").as_deref(), Some("*"));
    let etag = header(&headers, "etag").unwrap();
    assert!(etag.starts_with('"') && etag.ends_with('"'), "a strong ETag: {etag}");
    let modified = header(&headers, "last-modified").unwrap();
    httpdate::parse_http_date(&modified).unwrap();

    // If-None-Match with the ETag (or *): 304, no body, the validators and fresh signature
    // fields over the same digest.
    for inm in [etag.clone(), format!("\"x\", W/{etag}"), "*".into()] {
        let (status, h, text) = ask(addr, reqwest::Method::GET, &[("if-none-match", &inm)]).await;
        assert_eq!(status, 304, "{inm}");
        assert!(text.is_empty());
        assert_eq!(header(&h, "etag").unwrap(), etag);
        assert_eq!(header(&h, "content-digest"), header(&headers, "content-digest"));
        assert!(h.contains_key("signature") && h.contains_key("signature-input"));
        assert_eq!(header(&h, "access-control-allow-origin").as_deref(), Some("*"));
    }
    let (status, _, text) =
        ask(addr, reqwest::Method::GET, &[("if-none-match", "\"stale\"")]).await;
    assert_eq!((status.as_u16(), text.as_str()), (200, body.as_str()));
    // If-None-Match wins over If-Modified-Since (RFC 9110 §13.2.2).
    let both = [("if-none-match", "\"stale\""), ("if-modified-since", modified.as_str())];
    assert_eq!(ask(addr, reqwest::Method::GET, &both).await.0, 200);

    // If-Modified-Since: 304 from Last-Modified on, 200 before it.
    let (status, _, _) = ask(addr, reqwest::Method::GET, &[("if-modified-since", &modified)]).await;
    assert_eq!(status, 304);
    let before = httpdate::parse_http_date(&modified).unwrap() - Duration::from_secs(10);
    let before = httpdate::fmt_http_date(before);
    let (status, _, _) = ask(addr, reqwest::Method::GET, &[("if-modified-since", &before)]).await;
    assert_eq!(status, 200);

    // HEAD: the same fields, no body.
    let (status, h, text) = ask(addr, reqwest::Method::HEAD, &[]).await;
    assert_eq!(status, 200);
    assert!(text.is_empty());
    assert_eq!(header(&h, "etag").unwrap(), etag);
    assert_eq!(header(&h, "content-digest"), header(&headers, "content-digest"));
    assert_eq!(header(&h, "content-length").unwrap(), body.len().to_string());
}

/// Issue 42 (L6): every answer of the key-directory listener says `nosniff`: the directory, a
/// 304, and the errors (404 elsewhere, 405, 421 for another authority).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_of_the_directory_listener_says_nosniff() {
    let keys = tempfile::tempdir().unwrap();
    let addr = serve(signer(keys.path())).await;
    let client = super::support::reqwest_builder().build().unwrap();
    let (status, headers, _) = ask(addr, reqwest::Method::GET, &[]).await;
    assert_eq!(status, 200);
    assert_eq!(header(&headers, "x-content-type-options").as_deref(), Some("nosniff"));
    let etag = header(&headers, "etag").unwrap();
    let (status, headers, _) = ask(addr, reqwest::Method::GET, &[("if-none-match", &etag)]).await;
    assert_eq!(status, 304);
    assert_eq!(header(&headers, "x-content-type-options").as_deref(), Some("nosniff"));
    let (status, headers, _) = ask(addr, reqwest::Method::POST, &[]).await;
    assert_eq!(status, 405);
    assert_eq!(header(&headers, "x-content-type-options").as_deref(), Some("nosniff"));
    for (path, host, want) in
        [("/elsewhere", "bots.example.com", 404), (directory::PATH, "other.example", 421)]
    {
        let resp =
            client.get(format!("http://{addr}{path}")).header("host", host).send().await.unwrap();
        assert_eq!(resp.status().as_u16(), want, "{path}");
        assert_eq!(resp.headers()["x-content-type-options"], "nosniff", "{path}");
    }
}
