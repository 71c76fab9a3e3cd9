//! Whom and with which key the real proxy signs for (issue 24 §9, §17): with a users file, a
//! token identity signs only for the users tied to its token or listed in its `users`, never
//! for a user who merely sends that token; and the key is the one that signs when the request
//! leaves, not when it arrived.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use web_bot_auth::WebBotAuthVerifier;

use robots_proxy::authority::Authority;

use super::signing::{
    directory_keys, header, make_key, toml_entry, verify, Received, AGENT, ROBOTS,
};
use super::support::{until, Origin, TestProxy};

/// A users file (Argon2 hashes of the default cost, as a users file requires): `alice` tied
/// to ExampleBot, `intern` and `crawl` tied to nothing; every password is `pw`.
fn users_file(dir: &std::path::Path) -> PathBuf {
    let cost = argon2::Params::default();
    let hash = || robots_proxy::access::hash_password("pw", &cost).unwrap();
    let text = format!("alice:{}:ExampleBot\nintern:{}\ncrawl:{}\n", hash(), hash(), hash());
    let path = dir.join("users");
    std::fs::write(&path, text).unwrap();
    path
}

/// A client of `proxy` that authenticates as `user`.
fn client_as(proxy: &TestProxy, user: &str) -> reqwest::Client {
    let through =
        reqwest::Proxy::all(format!("http://{}", proxy.addr)).unwrap().basic_auth(user, "pw");
    super::support::reqwest_builder()
        .proxy(through)
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap()
}

/// Sends `GET origin/path` as `user` with `User-Agent: agent`; the headers the origin saw.
async fn seen_as(
    proxy: &TestProxy,
    origin: &Origin,
    user: &str,
    agent: &str,
    path: &str,
) -> Received {
    let resp = client_as(proxy, user)
        .get(format!("{}{path}", origin.base()))
        .header("user-agent", agent)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "{user} {agent} {path}");
    let seen = origin.seen().into_iter().find(|s| s.target == path).unwrap();
    Received::of(origin.addr.to_string(), &seen)
}

fn unsigned(received: &Received) -> bool {
    ["signature", "signature-input", "signature-agent"]
        .iter()
        .all(|name| received.headers.get(*name).is_none())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_users_file_only_the_user_tied_to_a_token_is_signed_as_it() {
    let keys = tempfile::tempdir().unwrap();
    let keyid = make_key(keys.path(), "k1");
    let users = users_file(keys.path());
    let origin = Origin::start(ROBOTS).await;
    let proxy = TestProxy::start_with(|c| {
        c.access.users_file = Some(users);
        c.audit.all_decisions = true;
        c.signing.keys_dir = keys.path().to_owned();
        c.signing.keys = vec![toml_entry(r#"{ name = "k1" }"#)];
        c.signing.identities = vec![toml_entry(&format!(
            r#"{{ token = "ExampleBot", keys = ["k1"], agent = "{AGENT}" }}"#
        ))];
    })
    .await;
    let (ring, _) = directory_keys(proxy.signer.clone().unwrap()).await;

    // The intern says it is ExampleBot (curl -U intern:pw -A ExampleBot): forwarded, unsigned.
    let borrowed = seen_as(&proxy, &origin, "intern", "ExampleBot/1.0", "/intern").await;
    assert!(unsigned(&borrowed), "the intern was signed as ExampleBot: {:?}", borrowed.headers);
    assert!(proxy.metrics.encode().contains("robots_proxy_signing_refused_total 1"));
    // Alice is tied to ExampleBot: signed, whatever her User-Agent says.
    let alice = seen_as(&proxy, &origin, "alice", "curl/8.0", "/alice").await;
    assert_eq!(header(&alice.headers, "signature-agent").unwrap(), format!("sig1=\"{AGENT}\""));
    verify(&alice, &ring).expect("alice's request carries ExampleBot's signature");
    let records = proxy.audit_records().await;
    let keyid_of = |path: &str| {
        let record = records.iter().find(|r| r["robots.path"] == path).unwrap();
        record.get("robots.signature.keyid").cloned()
    };
    assert_eq!(keyid_of("/alice"), Some(keyid.clone().into()));
    assert_eq!(keyid_of("/intern"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_identity_with_users_signs_for_the_users_it_lists() {
    let keys = tempfile::tempdir().unwrap();
    make_key(keys.path(), "k1");
    let users = users_file(keys.path());
    let origin = Origin::start(ROBOTS).await;
    let proxy = TestProxy::start_with(|c| {
        c.access.users_file = Some(users);
        c.signing.keys_dir = keys.path().to_owned();
        c.signing.keys = vec![toml_entry(r#"{ name = "k1" }"#)];
        c.signing.identities = vec![toml_entry(&format!(
            r#"{{ token = "OtherBot", users = ["crawl"], keys = ["k1"], agent = "{AGENT}" }}"#
        ))];
    })
    .await;
    let (ring, _) = directory_keys(proxy.signer.clone().unwrap()).await;
    let listed = seen_as(&proxy, &origin, "crawl", "OtherBot/2.0", "/crawl").await;
    verify(&listed, &ring).expect("a listed user is signed for");
    for user in ["intern", "alice"] {
        let path = format!("/{user}");
        let other = seen_as(&proxy, &origin, user, "OtherBot/2.0", &path).await;
        assert!(unsigned(&other), "{user} was signed as OtherBot");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_is_chosen_when_the_request_leaves_not_when_it_arrives() {
    let keys = tempfile::tempdir().unwrap();
    let old = make_key(keys.path(), "old");
    let new = make_key(keys.path(), "new");
    let origin = Origin::start(ROBOTS).await;
    // The rotation time T, an hour from now in whole seconds.
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() + 3600;
    let t = UNIX_EPOCH + Duration::from_secs(secs);
    let text = |t: SystemTime| humantime::format_rfc3339_seconds(t).to_string();
    let (until_t, published) = (text(t), text(t + Duration::from_secs(3600)));
    let proxy = TestProxy::start_with(|c| {
        c.pacing.enabled = true;
        c.pacing.default_rps = 0.5;
        c.signing.keys_dir = keys.path().to_owned();
        c.signing.keys = vec![
            toml_entry(&format!(
                r#"{{ name = "old", sign_until = "{until_t}", publish_until = "{published}" }}"#
            )),
            toml_entry(&format!(r#"{{ name = "new", sign_from = "{until_t}" }}"#)),
        ];
        c.signing.identities = vec![toml_entry(&format!(
            r#"{{ token = "ExampleBot", keys = ["old", "new"], agent = "{AGENT}" }}"#
        ))];
    })
    .await;
    proxy.clock.set(t - Duration::from_secs(30));
    let client = proxy.client();
    let get = |path: &'static str| {
        let request =
            client.get(format!("{}{path}", origin.base())).header("user-agent", "ExampleBot/1.0");
        async move { assert_eq!(request.send().await.unwrap().status(), 200, "{path}") }
    };
    get("/first").await;
    // The second waits 2 s for the site's pace; T passes meanwhile.
    let second = tokio::spawn(get("/second"));
    let authority = Authority::from_uri(&origin.base().parse().unwrap()).unwrap();
    until("the second request waits for the pace", || proxy.pacer.queue_depth(&authority) == 1)
        .await;
    proxy.clock.set(t + Duration::from_secs(1));
    second.await.unwrap();

    let (ring, _) = directory_keys(proxy.signer.clone().unwrap()).await;
    for (path, keyid) in [("/first", &old), ("/second", &new)] {
        let seen = origin.seen().into_iter().find(|s| s.target == path).unwrap();
        let input = header(&seen.headers, "signature-input").unwrap();
        assert!(input.contains(&format!("keyid=\"{keyid}\"")), "{path}: {input}");
        let received = Received::of(origin.addr.to_string(), &seen);
        // The proxy's clock is an hour ahead of the verifier's: only the signature is checked.
        WebBotAuthVerifier::parse(&received).unwrap().verify(&ring, None).expect(path);
    }
}
