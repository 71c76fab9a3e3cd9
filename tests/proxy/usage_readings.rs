//! Every rule source decides on every reading (review-core N4, review-controls 2 and 4): a
//! `Content-Usage` path and a `tdmrep.json` location refuse the readings of a path that an
//! origin serves as the reserved one, as `allow` / `disallow` do: decoded, dot-segments
//! removed, slashes merged, and case-folded where the origin folds case.

use robots_proxy::usage::{UsageCrawler, UsageMode};

use super::support::{raw_get, RawResponse, TestProxy};
use crate::cache::support::{Origin, Reply};

async fn trainer_proxy() -> TestProxy {
    TestProxy::start_with(|c| {
        c.usage.train_ai = UsageMode::Enforce;
        c.usage.crawlers = vec![UsageCrawler {
            token: Some("AcmeTrainer".to_owned()),
            user: None,
            purposes: vec!["train-ai".to_owned()],
        }];
    })
    .await
}

/// `GET` of `path` exactly as written (no client normalises it) by the trainer.
async fn get(proxy: &TestProxy, origin: &Origin, path: &str) -> RawResponse {
    let host = origin.base_url().trim_start_matches("http://").to_owned();
    let url = format!("{}{path}", origin.base_url());
    raw_get(proxy.addr, &url, &host, "User-Agent: AcmeTrainer/1.0\r\n").await
}

async fn origins(robots: &str) -> (Origin, Origin) {
    let plain = Origin::with_robots(Reply::ok(robots.to_owned())).await;
    let iis =
        Origin::with_robots(Reply::ok(robots.to_owned()).header("Server", "Microsoft-IIS/10.0"))
            .await;
    (plain, iis)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn content_usage_paths_are_decided_on_every_reading() {
    let (plain, iis) = origins(
        "User-agent: *\nContent-Usage: /wiki/Special%3A train-ai=n\n\
         Content-Usage: /news/ train-ai=n\nAllow: /\n",
    )
    .await;
    for origin in [&plain, &iis] {
        origin.route("/other", Reply::ok("other"));
    }
    let proxy = trainer_proxy().await;
    for (origin, path) in [
        (&plain, "/wiki/Special%3AX"),
        (&plain, "/wiki/Special:X"),
        (&plain, "/news/a"),
        (&plain, "/free/../news/a"),
        (&plain, "/free/%2e%2e/news/a"),
        (&plain, "/free/..%2Fnews/a"),
        (&plain, "//news/a"),
        (&iis, "/NEWS/x"),
        (&iis, "/News./x"),
        (&iis, "/wiki/SPECIAL:x"),
    ] {
        let resp = get(&proxy, origin, path).await;
        assert_eq!(resp.status, 403, "{path}: {resp:?}");
        assert!(resp.body.contains("train-ai=n"), "{path}: {}", resp.body);
        assert_eq!(origin.hits(path), 0, "{path} reached the origin");
    }
    // A case-sensitive origin serves /NEWS/x as another resource: not refused.
    assert_ne!(get(&proxy, &plain, "/NEWS/x").await.status, 403);
    assert_eq!(get(&proxy, &plain, "/other").await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tdmrep_locations_are_decided_on_every_reading() {
    let (plain, iis) = origins("User-agent: *\nAllow: /\n").await;
    let file = r#"[{"location": "/free/", "tdm-reservation": 0},
                   {"location": "/news/", "tdm-reservation": 1}]"#;
    for origin in [&plain, &iis] {
        origin.route(
            "/.well-known/tdmrep.json",
            Reply::ok(file).header("Content-Type", "application/json"),
        );
        origin.route("/free/a", Reply::ok("free body"));
    }
    let proxy = trainer_proxy().await;
    for (origin, path) in [
        (&plain, "/news/a"),
        (&plain, "/free/../news/a"),
        (&plain, "/free/%2e%2e/news/a"),
        (&plain, "/free/..%2Fnews/a"),
        (&plain, "//news/a"),
        (&iis, "/NEWS/a"),
        (&iis, "/News./a"),
    ] {
        let resp = get(&proxy, origin, path).await;
        assert_eq!(resp.status, 403, "{path}: {resp:?}");
        assert!(resp.body.contains("tdmrep.json"), "{path}: {}", resp.body);
    }
    let free = get(&proxy, &plain, "/free/a").await;
    assert_eq!((free.status, free.body.as_str()), (200, "free body"));
    assert_ne!(get(&proxy, &plain, "/NEWS/a").await.status, 403);
}
