//! The admin endpoints, against the proxy running in this process.

use std::time::Duration;

use super::support::{get, get_json, post_json, sample, wait_until, InProcess, KeepAlive, Origin};

const ROBOTS: &str = "User-agent: ExampleBot\nDisallow: /private\nContent-Usage: train-ai=n\n\nUser-agent: *\nDisallow: /\nAllow: /public\nCrawl-delay: 2\n\nSitemap: http://sitemaps.test/sitemap.xml\n";

async fn metrics(p: &InProcess) -> String {
    let (status, text) = get(&format!("{}/metrics", p.admin())).await;
    assert_eq!(status, 200);
    // No `Accept`: the classic Prometheus text format (OpenMetrics is for scrapers that ask).
    assert!(!text.contains("# EOF"), "{text}");
    assert!(text.contains("# TYPE robots_proxy_requests_total counter"), "{text}");
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_move_as_requests_are_made() {
    let origin = Origin::start(ROBOTS).await;
    let p = InProcess::start().await;
    let before = metrics(&p).await;
    let allow = r#"robots_proxy_requests_total{decision="allow",scheme="http"}"#;
    let disallow = r#"robots_proxy_requests_total{decision="disallow",scheme="http"}"#;
    assert_eq!(sample(&before, allow), 0.0);
    assert_eq!(sample(&before, disallow), 0.0);
    assert_eq!(sample(&before, "robots_proxy_open_connections"), 0.0);

    let client = p.client();
    let base = origin.base();
    let ok = client.get(format!("{base}/public/a")).send().await.unwrap();
    assert_eq!(ok.status(), 200);
    assert_eq!(ok.text().await.unwrap(), "hello from /public/a");
    let blocked = client.get(format!("{base}/secret")).send().await.unwrap();
    assert_eq!(blocked.status(), 403);
    // `/hangup` is disallowed for `*`: ask for it as ExampleBot, whose group allows it.
    let failed = client
        .get(format!("{base}/hangup"))
        .header("X-Robots-Product-Token", "ExampleBot")
        .send()
        .await
        .unwrap();
    assert_eq!(failed.status(), 502);
    p.audit.flush().await.unwrap();
    // A connection held open while the metrics are read.
    let mut held = KeepAlive::connect(p.proxy_addr).await;
    let (status, _) = held.get(&format!("{base}/public/held")).await;
    assert_eq!(status, 200);

    let after = metrics(&p).await;
    assert_eq!(sample(&after, allow), 3.0, "/public/a, /hangup, /public/held");
    assert_eq!(sample(&after, disallow), 1.0, "/secret");
    assert_eq!(sample(&after, r#"robots_proxy_robots_fetches_total{outcome="2xx"}"#), 1.0);
    assert_eq!(sample(&after, r#"robots_proxy_robots_fetches_total{outcome="5xx"}"#), 0.0);
    assert_eq!(sample(&after, "robots_proxy_cache_misses_total"), 1.0);
    assert_eq!(sample(&after, "robots_proxy_cache_hits_total"), 3.0);
    assert_eq!(sample(&after, "robots_proxy_cache_entries"), 1.0);
    assert!(sample(&after, "robots_proxy_cache_memory_bytes") > 0.0);
    assert_eq!(
        sample(&after, r#"robots_proxy_upstream_errors_total{kind="http_response_incomplete"}"#),
        1.0
    );
    assert_eq!(sample(&after, "robots_proxy_audit_records_written_total"), 1.0);
    assert_eq!(sample(&after, "robots_proxy_audit_records_failed_total"), 0.0);
    assert!(sample(&after, "robots_proxy_open_connections") >= 1.0);
    assert_eq!(sample(&after, "robots_proxy_decision_duration_seconds_count"), 4.0);
    assert_eq!(sample(&after, r#"robots_proxy_decision_duration_seconds_bucket{le="+Inf"}"#), 4.0);
    // Two answers came back from the origin; the hang-up did not.
    assert_eq!(sample(&after, "robots_proxy_upstream_duration_seconds_count"), 2.0);
    assert!(after.contains("robots_proxy_build_info{version=\""), "{after}");
    drop((held, client));
    // The gauge comes back down when the connections close.
    let mut closed = false;
    for _ in 0..250 {
        let text = metrics(&p).await;
        if sample(&text, "robots_proxy_open_connections") == 0.0 {
            closed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(closed, "robots_proxy_open_connections returns to 0 after the connections close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_and_readyz() {
    let mut p = InProcess::start().await;
    let (status, body) = get(&format!("{}/healthz", p.admin())).await;
    assert_eq!((status, body.as_str()), (200, "ok\n"));
    let (status, ready) = get_json(&format!("{}/readyz", p.admin())).await;
    assert_eq!(status, 200, "{ready}");
    assert_eq!(ready["ready"], true);
    assert_eq!(ready["audit_log"], "writable");

    // An audit log path that cannot be opened for writing: not ready, and saying why.
    let _ = std::fs::remove_file(&p.audit_path);
    std::fs::create_dir(&p.audit_path).unwrap();
    let (status, ready) = get_json(&format!("{}/readyz", p.admin())).await;
    assert_eq!(status, 503, "{ready}");
    assert_eq!(ready["ready"], false);
    assert_eq!(ready["listening"], true);
    let why = ready["audit_log"].as_str().unwrap();
    assert!(why.contains(&p.audit_path.display().to_string()), "{why}");
    std::fs::remove_dir(&p.audit_path).unwrap();
    let (status, _) = get_json(&format!("{}/readyz", p.admin())).await;
    assert_eq!(status, 200);

    // A proxy that stopped accepting is not ready; the process is still healthy.
    p.stop_proxy();
    wait_until("the proxy stops listening", || !p.proxy.metrics().is_listening()).await;
    let (status, ready) = get_json(&format!("{}/readyz", p.admin())).await;
    assert_eq!(status, 503);
    assert_eq!(ready["listening"], false);
    let (status, _) = get(&format!("{}/healthz", p.admin())).await;
    assert_eq!(status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn robots_endpoint_gives_the_live_decision_and_the_cached_state() {
    let origin = Origin::start(ROBOTS).await;
    let p = InProcess::start().await;
    let base = origin.base();
    let url = |target: &str, agent: &str| {
        format!(
            "{}/robots?url={}&agent={agent}",
            p.admin(),
            url::form_urlencoded::byte_serialize(format!("{base}{target}").as_bytes())
                .collect::<String>()
        )
    };
    let (status, answer) = get_json(&url("/private/x", "ExampleBot")).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["url"], format!("{base}/private/x"));
    assert_eq!(answer["product_token"], "ExampleBot");
    assert_eq!(answer["decision"]["allowed"], false);
    assert_eq!(answer["decision"]["rule"], "disallow: /private");
    assert_eq!(answer["decision"]["line"], 2);
    // A disallowed path has no usage preferences; an allowed one shows them with their line.
    assert_eq!(answer["usage"]["train-ai"]["value"], "unknown");
    let (_, open) = get_json(&url("/open", "ExampleBot")).await;
    assert_eq!(open["usage"]["train-ai"]["value"], "n", "{open}");
    assert_eq!(open["usage"]["train-ai"]["line"], 3);
    assert_eq!(open["usage"]["search"]["value"], "unknown");
    let robots = &answer["robots"];
    assert_eq!(robots["state"], "fresh");
    assert_eq!(robots["stale"], false);
    assert_eq!(robots["status"], 200);
    assert_eq!(robots["url"], format!("{base}/robots.txt"));
    assert_eq!(robots["fetched_at"], "2027-01-15T08:00:00.000Z", "the test clock's time");
    assert_eq!(robots["expires_at"], "2027-01-16T08:00:00.000Z", "robots.max_age later");
    let groups = robots["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 2);
    assert_eq!(groups[0]["user_agents"][0], "ExampleBot");
    assert_eq!(groups[0]["applies"], true);
    assert_eq!(groups[1]["applies"], false);
    assert_eq!(groups[1]["crawl_delay"], 2.0);
    assert_eq!(groups[1]["rules"][1]["kind"], "allow");
    assert_eq!(groups[1]["rules"][1]["pattern"], "/public");
    assert_eq!(robots["sitemaps"][0]["url"], "http://sitemaps.test/sitemap.xml");
    assert_eq!(origin.robots_hits(), 1);
    // The path as sent is the only reading of an ordinary path.
    let readings = answer["readings"].as_array().unwrap();
    assert_eq!(readings.len(), 1, "{answer}");
    assert_eq!(readings[0]["reading"], "as-sent");
    assert_eq!(answer["decision"]["reading"], "as-sent");

    // A path that nginx reads as /private/x: the decision names the reading, and every reading
    // that differs is listed with its verdict.
    let (_, answer) = get_json(&url("/public/..%2fprivate/x", "ExampleBot")).await;
    assert_eq!(answer["path"], "/public/..%2fprivate/x", "{answer}");
    assert_eq!(answer["decision"]["allowed"], false, "{answer}");
    assert_eq!(answer["decision"]["reading"], "decoded", "{answer}");
    assert_eq!(answer["decision"]["read_path"], "/private/x", "{answer}");
    let readings = answer["readings"].as_array().unwrap();
    assert_eq!(readings[0]["reading"], "as-sent");
    assert_eq!(readings[0]["allowed"], true, "{answer}");
    assert_eq!(readings[1]["reading"], "decoded");
    assert_eq!(readings[1]["path"], "/private/x");
    assert_eq!(readings[1]["allowed"], false);
    assert_eq!(readings[1]["rule"], "disallow: /private");

    // A User-Agent works as the agent too; the cached copy is used.
    let (_, answer) =
        get_json(&url("/public/y", "Mozilla%2F5.0+(compatible%3B+OtherBot%2F2)")).await;
    assert_eq!(answer["product_token"], "OtherBot");
    assert_eq!(answer["decision"]["allowed"], true);
    assert_eq!(answer["robots"]["groups"][1]["applies"], true);
    assert_eq!(origin.robots_hits(), 1);

    // Past its lifetime, with the origin failing: the old copy is used and reported stale.
    origin.set_robots(503, "down");
    p.clock.advance(Duration::from_secs(25 * 3600));
    let (_, answer) = get_json(&url("/private/x", "ExampleBot")).await;
    assert_eq!(answer["robots"]["state"], "stale");
    assert_eq!(answer["robots"]["stale"], true);
    assert_eq!(answer["robots"]["status"], 503);
    assert_eq!(answer["robots"]["failures"], 1);
    assert_eq!(answer["decision"]["allowed"], false, "the stale copy still decides");
    assert_eq!(origin.robots_hits(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn robots_endpoint_rejects_bad_input_by_name() {
    let p = InProcess::start().await;
    let (status, answer) = get_json(&format!("{}/robots", p.admin())).await;
    assert_eq!(status, 400);
    assert!(answer["error"].as_str().unwrap().contains("missing the url parameter"), "{answer}");
    let (status, answer) = get_json(&format!("{}/robots?url=ftp://a.test/x", p.admin())).await;
    assert_eq!(status, 400);
    assert!(answer["error"].as_str().unwrap().contains("scheme"), "{answer}");
    let (status, answer) =
        get_json(&format!("{}/robots?url=http://a.test/&agent=Mozilla%2F5.0", p.admin())).await;
    assert_eq!(status, 400);
    assert!(answer["error"].as_str().unwrap().contains("no product token"), "{answer}");
    let (status, _) = get_json(&format!("{}/no-such-page", p.admin())).await;
    assert_eq!(status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purge_makes_the_next_request_refetch() {
    let origin = Origin::start("User-agent: *\nDisallow: /a\n").await;
    let p = InProcess::start().await;
    let client = p.client();
    let base = origin.base();
    let status = |r: reqwest::Response| r.status().as_u16();
    assert_eq!(status(client.get(format!("{base}/a")).send().await.unwrap()), 403);
    origin.set_robots(200, "User-agent: *\nDisallow: /b\n");
    assert_eq!(status(client.get(format!("{base}/a")).send().await.unwrap()), 403, "cached");

    let (code, answer) = post_json(&format!("{}/cache/purge?authority={base}", p.admin())).await;
    assert_eq!(code, 200, "{answer}");
    assert_eq!(answer["purged"][0], base);
    assert_eq!(status(client.get(format!("{base}/a")).send().await.unwrap()), 200);
    assert_eq!(status(client.get(format!("{base}/b")).send().await.unwrap()), 403);
    assert_eq!(origin.robots_hits(), 2);

    origin.set_robots(200, "User-agent: *\nDisallow: /c\n");
    let (code, _) = post_json(&format!("{}/cache/purge-all", p.admin())).await;
    assert_eq!(code, 200);
    assert_eq!(status(client.get(format!("{base}/b")).send().await.unwrap()), 200);
    assert_eq!(status(client.get(format!("{base}/c")).send().await.unwrap()), 403);
    assert_eq!(origin.robots_hits(), 3);

    // Only POST purges; a POST from another site's page is refused; a bad authority is named.
    let resp = super::support::direct_client()
        .get(format!("{}/cache/purge-all", p.admin()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 405);
    assert_eq!(resp.headers()["allow"], "POST");
    let resp = super::support::direct_client()
        .post(format!("{}/cache/purge-all", p.admin()))
        .header("Origin", "http://attacker.test")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    assert_eq!(status(client.get(format!("{base}/c")).send().await.unwrap()), 403);
    assert_eq!(origin.robots_hits(), 3, "the refused purge purged nothing");
    let (code, answer) = post_json(&format!("{}/cache/purge", p.admin())).await;
    assert_eq!(code, 400);
    assert!(answer["error"].as_str().unwrap().contains("authority"), "{answer}");
    let (code, answer) =
        post_json(&format!("{}/cache/purge?authority=http://a.test:99999", p.admin())).await;
    assert_eq!(code, 400);
    assert!(answer["error"].as_str().unwrap().contains("99999"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn summary_lists_recent_blocks_and_top_offenders() {
    let origin = Origin::start("User-agent: *\nDisallow: /no\n").await;
    let p = InProcess::start().await;
    let client = p.client();
    for i in 0..3 {
        let resp = client
            .get(format!("{}/no/{i}", origin.base()))
            .header("User-Agent", "Mozilla/5.0 (compatible; GreedyBot/1.0)")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 403);
    }
    let (status, summary) = get_json(&format!("{}/api/summary", p.admin())).await;
    assert_eq!(status, 200);
    let blocks = &summary["blocks"];
    assert_eq!(blocks["total"], 3);
    assert_eq!(blocks["recent"][0]["url"], format!("{}/no/2", origin.base()), "newest first");
    assert_eq!(blocks["recent"][2]["url"], format!("{}/no/0", origin.base()));
    assert_eq!(blocks["recent"][0]["token"], "GreedyBot");
    assert_eq!(blocks["top_authorities"][0]["name"], origin.base());
    assert_eq!(blocks["top_authorities"][0]["count"], 3);
    assert_eq!(blocks["top_tokens"][0]["name"], "GreedyBot");
    assert_eq!(summary["requests"]["disallow"], 3);
    assert_eq!(summary["cache"]["entries"], 1);
    assert_eq!(summary["cache"]["fetches"]["2xx"], 1);
    assert_eq!(summary["listening"], true);
}
