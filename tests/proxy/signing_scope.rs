//! What a request signature covers (issue 21 §1): by default the method, the authority and
//! the path, with a fresh signature per request, so that one observed signature cannot be
//! replayed against another path; `signing.reuse`, when on, reuses a signature only for the
//! same values of every covered component. Checked with Cloudflare's `web-bot-auth` crate.

use std::time::Duration;

use super::signing::{directory_keys, header, make_key, signing, verify, Received, AGENT, ROBOTS};
use super::support::{Origin, TestProxy};

/// Sends `GET origin/path` as ExampleBot through `proxy`: what the origin received.
async fn fetch(proxy: &TestProxy, origin: &Origin, path: &str) -> Received {
    let resp = proxy
        .client()
        .get(format!("{}{path}", origin.base()))
        .header("user-agent", "ExampleBot/1.0")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "{path}");
    let seen = origin.seen().into_iter().rev().find(|s| s.target == path).unwrap();
    Received::of(origin.addr.to_string(), &seen)
}

#[tokio::test]
async fn a_per_request_signature_replayed_against_another_path_fails() {
    let keys = tempfile::tempdir().unwrap();
    make_key(keys.path(), "k1");
    let origin = Origin::start(ROBOTS).await;
    let proxy = TestProxy::start_with(|c| signing(c, keys.path())).await;
    let (ring, _) = directory_keys(proxy.signer.clone().unwrap()).await;

    let a = fetch(&proxy, &origin, "/a?x=1").await;
    let input = header(&a.headers, "signature-input").unwrap();
    assert!(
        input.starts_with(
            r#"sig1=("@method" "@authority" "@path" "signature-agent";key="sig1");created="#
        ),
        "{input}"
    );
    assert!(input.contains(";nonce=\""), "{input}");
    assert_eq!(header(&a.headers, "signature-agent").unwrap(), format!("sig1=\"{AGENT}\""));
    verify(&a, &ring).expect("the proxy's signature verifies");

    // The same fields lifted onto a request for another path, or with another method, fail.
    let other_path =
        Received { target: "/b?x=1".into(), ..Received::of(a.authority.clone(), &seen(&a)) };
    assert!(verify(&other_path, &ring).unwrap_err().contains("verify"));
    let other_method =
        Received { method: "POST".into(), ..Received::of(a.authority.clone(), &seen(&a)) };
    assert!(verify(&other_method, &ring).unwrap_err().contains("verify"));
    // The query is not covered by default (`signing.components` adds "@query").
    let other_query =
        Received { target: "/a?x=2".into(), ..Received::of(a.authority.clone(), &seen(&a)) };
    verify(&other_query, &ring).expect("the query is not covered");

    // The same request again (the proxy's clock stands still): another signature.
    let again = fetch(&proxy, &origin, "/a?x=1").await;
    verify(&again, &ring).expect("verifies");
    assert_ne!(header(&again.headers, "signature"), header(&a.headers, "signature"));
}

/// The request `received` stands for, to build variants of it.
fn seen(received: &Received) -> super::support::Seen {
    super::support::Seen {
        method: received.method.clone(),
        target: received.target.clone(),
        headers: received.headers.clone(),
    }
}

#[tokio::test]
async fn reuse_when_on_never_crosses_paths() {
    let keys = tempfile::tempdir().unwrap();
    make_key(keys.path(), "k1");
    let origin = Origin::start(ROBOTS).await;
    let proxy = TestProxy::start_with(|c| {
        signing(c, keys.path());
        c.signing.reuse = Duration::from_secs(30);
    })
    .await;
    let (ring, _) = directory_keys(proxy.signer.clone().unwrap()).await;
    // The proxy's clock stands still: every request is in the same window.
    let a1 = fetch(&proxy, &origin, "/a").await;
    let b = fetch(&proxy, &origin, "/b").await;
    let a2 = fetch(&proxy, &origin, "/a").await;
    for r in [&a1, &b, &a2] {
        verify(r, &ring).expect("verifies");
        assert!(!header(&r.headers, "signature-input").unwrap().contains("nonce"));
    }
    assert_eq!(header(&a1.headers, "signature"), header(&a2.headers, "signature"), "reused");
    assert_ne!(header(&a1.headers, "signature"), header(&b.headers, "signature"));
    let lifted = Received { target: "/b".into(), ..Received::of(a1.authority.clone(), &seen(&a1)) };
    assert!(verify(&lifted, &ring).unwrap_err().contains("verify"));
}

#[tokio::test]
async fn query_and_target_uri_can_be_covered() {
    let keys = tempfile::tempdir().unwrap();
    make_key(keys.path(), "k1");
    let origin = Origin::start(ROBOTS).await;
    let proxy = TestProxy::start_with(|c| {
        signing(c, keys.path());
        c.signing.components =
            ["@method", "@path", "@query", "@target-uri"].map(|s| s.parse().unwrap()).into();
    })
    .await;
    let (ring, _) = directory_keys(proxy.signer.clone().unwrap()).await;
    let a = fetch(&proxy, &origin, "/a?x=1").await;
    let input = header(&a.headers, "signature-input").unwrap();
    assert!(
        input.starts_with(
            r#"sig1=("@authority" "@method" "@path" "@query" "@target-uri" "signature-agent";key="sig1");"#
        ),
        "@authority is covered even when not listed: {input}"
    );
    verify(&a, &ring).expect("verifies");
    let other_query =
        Received { target: "/a?x=2".into(), ..Received::of(a.authority.clone(), &seen(&a)) };
    assert!(verify(&other_query, &ring).unwrap_err().contains("verify"));
}

/// `agent_type = "jwks_uri"`: the member is the full https URL of the JWK Set, with no
/// parameter (draft -01 forbids member parameters); `directory` sends the origin. Both verify.
#[tokio::test]
async fn jwks_uri_and_directory_agents_are_sent_as_plain_members() {
    const JWKS: &str = "https://bots.example.com/.well-known/http-message-signatures-directory";
    let keys = tempfile::tempdir().unwrap();
    make_key(keys.path(), "k1");
    let origin = Origin::start(ROBOTS).await;
    let proxy = TestProxy::start_with(|c| {
        signing(c, keys.path());
        c.signing.identities.push(super::signing::toml_entry(&format!(
            r#"{{ token = "ShopBot", keys = ["k1"], agent_type = "jwks_uri", agent = "{JWKS}" }}"#
        )));
    })
    .await;
    let (ring, _) = directory_keys(proxy.signer.clone().unwrap()).await;
    let resp = proxy
        .client()
        .get(format!("{}/shop", origin.base()))
        .header("user-agent", "ShopBot/2.0")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let seen = origin.seen().into_iter().find(|s| s.target == "/shop").unwrap();
    let shop = Received::of(origin.addr.to_string(), &seen);
    assert_eq!(header(&shop.headers, "signature-agent").unwrap(), format!("sig1=\"{JWKS}\""));
    verify(&shop, &ring).expect("the jwks_uri identity's signature verifies");
    let links = web_bot_auth::WebBotAuthVerifier::parse(&shop).unwrap();
    assert_eq!(
        links.get_signature_agents(),
        &[web_bot_auth::SignatureAgentLink::External(JWKS.into())]
    );

    let bot = fetch(&proxy, &origin, "/bot").await;
    assert_eq!(header(&bot.headers, "signature-agent").unwrap(), format!("sig1=\"{AGENT}\""));
    verify(&bot, &ring).expect("the directory identity's signature verifies");
}
