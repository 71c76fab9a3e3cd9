//! The status page at `/`, rendered by headless Chromium: the blocked request must appear in the
//! DOM, which only the page's JavaScript puts there (the HTML itself holds no data).

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::support::{get, InProcess, Origin};

/// Chromium's binary, from the `PATH`.
fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| ["chromium", "chromium-browser"].map(|name| dir.join(name)))
        .find(|candidate| candidate.is_file())
}

/// Runs `command` to the end, killing it after `limit` (a hung browser must not hang the suite).
fn run_bounded(mut command: Command, limit: Duration) -> Output {
    let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let start = Instant::now();
    // Read the pipes on threads, so a large DOM cannot fill one and block the browser.
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut stdout, &mut buf).map(|_| buf)
    });
    let err = std::thread::spawn(move || {
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut stderr, &mut buf).map(|_| buf)
    });
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Output {
        status,
        stdout: out.join().unwrap().unwrap_or_default(),
        stderr: err.join().unwrap().unwrap_or_default(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_page_shows_blocks_in_headless_chromium() {
    let Some(browser) = chromium() else {
        crate::skip::missing("chromium", "apt-get install chromium");
        return;
    };
    let origin = Origin::start("User-agent: *\nDisallow: /members\n").await;
    let p = InProcess::start().await;
    let blocked_url = format!("{}/members/area-51", origin.base());
    let resp =
        p.client().get(&blocked_url).header("User-Agent", "PageTestBot/1.0").send().await.unwrap();
    assert_eq!(resp.status(), 403);

    // The page as served holds no data: whatever the browser shows, its script fetched.
    let (status, html) = get(&format!("{}/", p.admin())).await;
    assert_eq!(status, 200);
    assert!(!html.contains("area-51"));
    assert!(!html.contains("src=\"http"), "no external assets");

    let profile = tempfile::tempdir().unwrap();
    let mut command = Command::new(browser);
    command
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--dump-dom")
        .arg(format!("{}/", p.admin()))
        .stdin(Stdio::null());
    let output = tokio::task::spawn_blocking(move || run_bounded(command, Duration::from_secs(90)))
        .await
        .unwrap();
    let dom = String::from_utf8_lossy(&output.stdout);
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(
        dom.contains(&blocked_url),
        "the blocked URL is on the page; status {:?}\nDOM:\n{dom}\nchromium stderr:\n{log}",
        output.status
    );
    assert!(dom.contains("PageTestBot"), "the top tokens list the blocked token:\n{dom}");
    assert!(dom.contains(&origin.base()), "the top authorities list the origin:\n{dom}");
    assert!(dom.contains("accepting connections"), "the status line was rendered:\n{dom}");
}

/// Headless Chromium's DOM of `url` after its scripts ran (at most 90 s).
async fn dump_dom(browser: PathBuf, url: String) -> (String, String) {
    let profile = tempfile::tempdir().unwrap();
    let mut command = Command::new(browser);
    command
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--dump-dom")
        .arg(url)
        .stdin(Stdio::null());
    let output = tokio::task::spawn_blocking(move || run_bounded(command, Duration::from_secs(90)))
        .await
        .unwrap();
    let dom = String::from_utf8_lossy(&output.stdout).into_owned();
    (dom, String::from_utf8_lossy(&output.stderr).into_owned())
}

/// The status page's robots.txt history (issue 19): two versions of a real origin's
/// robots.txt, served by the real binary, both shown with the line diff between them; text
/// from robots.txt is shown as text, never as HTML.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_page_shows_robots_history_with_a_diff_in_headless_chromium() {
    let Some(browser) = chromium() else {
        crate::skip::missing("chromium", "apt-get install chromium");
        return;
    };
    let v1 = "User-agent: *\nDisallow: /old-area\nDisallow: /kept\n";
    let v2 = "User-agent: *\nDisallow: /kept\nDisallow: /new-area\n# <b id=\"injected\">x</b>\n";
    let origin = Origin::start(v1).await;
    let proxy = super::support::ProxyProcess::start(&[], &[]);
    let client = super::support::proxied_client(proxy.proxy_addr);
    let base = origin.base();
    let blocked = |path: &str| {
        let (client, url) = (client.clone(), format!("{base}{path}"));
        async move { client.get(url).header("user-agent", "PageBot").send().await.unwrap().status() }
    };
    assert_eq!(blocked("/old-area/x").await, 403);
    origin.set_robots(200, v2);
    let purge = format!("{}/cache/purge?authority={base}", proxy.admin());
    assert_eq!(super::support::post_json(&purge).await.0, 200);
    assert_eq!(blocked("/new-area/x").await, 403);
    let api = format!("{}/api/robots/versions?authority={base}", proxy.admin());
    for _ in 0..500 {
        let (_, listed) = super::support::get_json(&api).await;
        if listed["versions"].as_array().is_some_and(|v| v.len() == 2) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let (dom, log) = dump_dom(browser, format!("{}/#history={base}", proxy.admin())).await;
    let digest = |text: &str| {
        let d = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
        d.as_ref().iter().map(|b| format!("{b:02x}")).collect::<String>()
    };
    for d in [digest(v1), digest(v2)] {
        assert!(dom.contains(&d), "both versions are listed ({d}):\n{dom}\nchromium:\n{log}");
    }
    assert!(dom.contains("2 version(s)"), "{dom}");
    assert!(dom.contains("<div class=\"del\">- Disallow: /old-area</div>"), "removed line:\n{dom}");
    assert!(dom.contains("<div class=\"add\">+ Disallow: /new-area</div>"), "added line:\n{dom}");
    assert!(dom.contains("<div class=\"same\">  Disallow: /kept</div>"), "context line:\n{dom}");
    assert!(!dom.contains("<b id=\"injected\">"), "robots.txt text is never HTML:\n{dom}");
    assert!(
        dom.contains("+ # &lt;b id=\"injected\"&gt;x&lt;/b&gt;"),
        "it is shown as text:\n{dom}"
    );
}

/// Report-only mode (issue 20): the status page shows the would-blocks per token beside the
/// real blocks, and their total, from the real binary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_page_shows_would_blocks_beside_blocks_in_headless_chromium() {
    let Some(browser) = chromium() else {
        crate::skip::missing("chromium", "apt-get install chromium");
        return;
    };
    let origin = Origin::start("User-agent: *\nDisallow: /members\n").await;
    // Report mode for a token is granted only to a user tied to it (controls 1).
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users");
    let hash = robots_proxy::access::hash_password("pw", &argon2::Params::default()).unwrap();
    std::fs::write(&users, format!("reportbot:{hash}:ReportBot\nblockedbot:{hash}:BlockedBot\n"))
        .unwrap();
    let env = [
        ("ROBOTS_PROXY_POLICY__REPORT_TOKENS", "ReportBot"),
        ("ROBOTS_PROXY_ACCESS__USERS_FILE", users.to_str().unwrap()),
    ];
    let proxy = super::support::ProxyProcess::start(&[], &env);
    let client = super::support::proxied_client(proxy.proxy_addr);
    let url = format!("{}/members/a", origin.base());
    let get_as = |ua: &'static str| {
        use base64ct::Encoding;
        let user = ua.split('/').next().unwrap_or_default().to_lowercase();
        let basic = base64ct::Base64::encode_string(format!("{user}:pw").as_bytes());
        let auth = format!("Basic {basic}");
        client.get(&url).header("User-Agent", ua).header("Proxy-Authorization", auth).send()
    };
    assert_eq!(get_as("BlockedBot/1.0").await.unwrap().status(), 403);
    for _ in 0..2 {
        assert_eq!(get_as("ReportBot/1.0").await.unwrap().status(), 200);
    }
    let (dom, log) = dump_dom(browser, format!("{}/", proxy.admin())).await;
    let row = |token: &str, blocks: u32, would: u32| {
        format!(
            "<tr><td>{token}</td><td class=\"num\">{blocks}</td><td class=\"num\">{would}</td></tr>"
        )
    };
    assert!(dom.contains(&row("BlockedBot", 1, 0)), "DOM:\n{dom}\nchromium stderr:\n{log}");
    assert!(dom.contains(&row("ReportBot", 0, 2)), "DOM:\n{dom}");
    assert!(dom.contains("would block<b id=\"would-block\">2</b>"), "DOM:\n{dom}");
}

/// The sum of every `name{...}` sample of a Prometheus text scrape (0 when there is none).
fn metric_sum(scrape: &str, name: &str) -> u64 {
    scrape
        .lines()
        .filter(|l| l.strip_prefix(name).is_some_and(|rest| rest.starts_with(['{', ' ', ','])))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// What the charts say in `dom`: the text of the element with this `id`.
fn text_of(dom: &str, id: &str) -> String {
    let start = dom.find(&format!("id=\"{id}\"")).unwrap_or_else(|| panic!("no #{id}:\n{dom}"));
    let rest = &dom[start..];
    let open = rest.find('>').unwrap() + 1;
    let close = rest[open..].find('<').unwrap() + open;
    rest[open..close].to_owned()
}

/// Waits until `/api/series` holds a sample taken after `blocks` blocks and `allowed`
/// forwarded requests (bounded: 15 s).
async fn until_sampled(admin: &str, blocks: u64, allowed: u64) -> serde_json::Value {
    let url = format!("{admin}/api/series");
    for _ in 0..150 {
        let (status, series) = super::support::get_json(&url).await;
        assert_eq!(status, 200);
        let w = &series["window"];
        if w["blocked_total"] == blocks && w["allowed"] == allowed {
            return series;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no sample with {blocks} blocks and {allowed} allowed within 15 s");
}

/// The charts (issue 23): drawn by the page from `/api/series` in inline SVG, updated as
/// samples come (every `admin.chart_interval`, 200 ms here), and showing what `/metrics` counts:
/// the blocks of the chart add up to `robots_proxy_blocks_total`, the allowed requests to
/// `robots_proxy_requests_total{decision="allow"}`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_page_charts_render_update_and_agree_with_metrics_in_headless_chromium() {
    let Some(browser) = chromium() else {
        crate::skip::missing("chromium", "apt-get install chromium");
        return;
    };
    let origin = Origin::start("User-agent: *\nDisallow: /members\n").await;
    let env = [("ROBOTS_PROXY_ADMIN__CHART_INTERVAL", "200ms")];
    let proxy = super::support::ProxyProcess::start(&[], &env);
    let client = super::support::proxied_client(proxy.proxy_addr);
    let base = origin.base();
    let send = |path: &str, ua: &'static str| {
        let (client, url) = (client.clone(), format!("{base}{path}"));
        async move { client.get(url).header("user-agent", ua).send().await.unwrap().status() }
    };
    for i in 0..3 {
        assert_eq!(send(&format!("/members/{i}"), "ChartBot/1.0").await, 403);
    }
    assert_eq!(send("/open", "ChartBot/1.0").await, 200);
    until_sampled(&proxy.admin(), 3, 1).await;

    let (dom, log) = dump_dom(browser.clone(), format!("{}/", proxy.admin())).await;
    assert!(dom.contains("<svg id=\"chart-decisions\""), "DOM:\n{dom}\nchromium:\n{log}");
    assert!(dom.contains("<polyline data-series=\"allowed\""), "a line of allowed:\n{dom}");
    assert!(
        dom.contains("<polyline data-series=\"blocked:robots_disallow\""),
        "a line of robots.txt blocks:\n{dom}"
    );
    assert!(dom.contains("<polyline data-series=\"2xx\""), "a line of robots.txt fetches:\n{dom}");
    assert!(dom.contains(&format!("data-name=\"{base}\" data-count=\"3\"")), "site bar:\n{dom}");
    assert!(dom.contains("data-name=\"ChartBot\" data-count=\"3\""), "token bar:\n{dom}");
    let scrape = super::support::get(&format!("{}/metrics", proxy.admin())).await.1;
    let blocks = metric_sum(&scrape, "robots_proxy_blocks_total");
    assert_eq!(blocks, 3, "{scrape}");
    assert_eq!(text_of(&dom, "chart-blocked-total"), blocks.to_string(), "{dom}");
    let allowed = metric_sum(&scrape, "robots_proxy_requests_total{decision=\"allow\"");
    assert!(
        dom.contains(&format!("allowed <b>{allowed}</b>")),
        "the legend shows {allowed} allowed, as /metrics:\n{dom}"
    );
    let first: u64 = text_of(&dom, "chart-samples").parse().unwrap();
    assert!(first >= 1, "{dom}");

    // More traffic: the next sample carries it, and the page shows it.
    for i in 0..2 {
        assert_eq!(send(&format!("/members/more-{i}"), "OtherBot/2.0").await, 403);
    }
    let series = until_sampled(&proxy.admin(), 5, 1).await;
    assert!(series["samples"].as_array().unwrap().len() as u64 > first);
    let (dom, log) = dump_dom(browser, format!("{}/", proxy.admin())).await;
    let scrape = super::support::get(&format!("{}/metrics", proxy.admin())).await.1;
    assert_eq!(metric_sum(&scrape, "robots_proxy_blocks_total"), 5, "{scrape}");
    assert_eq!(text_of(&dom, "chart-blocked-total"), "5", "DOM:\n{dom}\nchromium:\n{log}");
    assert!(dom.contains(&format!("data-name=\"{base}\" data-count=\"5\"")), "site bar:\n{dom}");
    assert!(dom.contains("data-name=\"OtherBot\" data-count=\"2\""), "new token bar:\n{dom}");
    let later: u64 = text_of(&dom, "chart-samples").parse().unwrap();
    assert!(later > first, "a new sample appeared: {first} then {later}");
}

/// Recorded exceptions (issue 20): the status page lists each configured exception with its
/// effect, scope, reference, expiry and use count, from the real binary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_page_shows_exceptions_and_their_use_counts_in_headless_chromium() {
    let Some(browser) = chromium() else {
        crate::skip::missing("chromium", "apt-get install chromium");
        return;
    };
    let origin = Origin::start("User-agent: *\nDisallow: /\n").await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("robots-proxy.toml");
    // The crawler as a user tied to its token: an allow is granted only to one (controls 1).
    let users = dir.path().join("users");
    let hash = robots_proxy::access::hash_password("pw", &argon2::Params::default()).unwrap();
    std::fs::write(&users, format!("page:{hash}:PageExBot\n")).unwrap();
    let config = format!(
        "state_dir = {:?}\n\n[access]\nusers_file = {users:?}\n\n[[exceptions]]\n\
         id = \"partner-page\"\n\
         authorities = [\"127.0.0.1\"]\ntokens = [\"PageExBot\"]\npaths = [\"/archive/\"]\n\
         effect = \"allow\"\nreference = \"https://legal.example/page\"\n\
         granted_by = \"legal@example.com\"\nexpires = \"2099-01-01T00:00:00Z\"\n",
        dir.path().join("state")
    );
    std::fs::write(&file, config).unwrap();
    let proxy = super::support::ProxyProcess::start(&["--config", file.to_str().unwrap()], &[]);
    let client = super::support::proxied_client(proxy.proxy_addr);
    for path in ["/archive/1", "/archive/2", "/archive/3"] {
        let url = format!("{}{path}", origin.base());
        let auth = "Basic cGFnZTpwdw=="; // page:pw
        let get = client.get(url).header("User-Agent", "PageExBot/1.0");
        let resp = get.header("Proxy-Authorization", auth).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{path}");
    }
    let (dom, log) = dump_dom(browser, format!("{}/", proxy.admin())).await;
    let row = "<tr><td>partner-page</td><td>allow</td><td>127.0.0.1 · token pageexbot · \
               /archive/</td><td class=\"url\">https://legal.example/page</td>\
               <td>2099-01-01 00:00:00 (in ";
    assert!(dom.contains(row), "DOM:\n{dom}\nchromium stderr:\n{log}");
    assert!(dom.contains("</td><td class=\"num\">3</td></tr>"), "three uses:\n{dom}");
    assert!(dom.contains("Recorded exceptions <span class=\"muted\" id=\"exceptions-count\">(1)"));
}

/// Issue 41, review-ops low 6: the "CONNECT refused" tile counted plain GETs the destination
/// guard refused (both are the `refuse` decision). Three GETs to the proxy's own listener (a
/// destination the guard always prohibits) and two CONNECTs to a port outside
/// `https.connect_ports`: the tiles say 2 CONNECTs refused and 3 destinations refused, their
/// sum is the `refuse` decision's count, and with the disallowed tile they add up to the
/// blocks the page lists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_page_counts_connect_refusals_apart_from_destination_refusals() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let origin = Origin::start("User-agent: *\nDisallow: /members\n").await;
    let p = InProcess::start().await;
    let client = p.client();
    for n in 0..3 {
        let own = format!("http://{}/self-{n}", p.proxy_addr);
        assert_eq!(client.get(&own).send().await.unwrap().status(), 403);
    }
    let blocked = format!("{}/members/a", origin.base());
    assert_eq!(client.get(&blocked).send().await.unwrap().status(), 403);
    for _ in 0..2 {
        let mut tcp = tokio::net::TcpStream::connect(p.proxy_addr).await.unwrap();
        let connect = "CONNECT 127.0.0.1:25 HTTP/1.1\r\nHost: 127.0.0.1:25\r\n\r\n";
        tcp.write_all(connect.as_bytes()).await.unwrap();
        let mut head = vec![0u8; 12];
        tcp.read_exact(&mut head).await.unwrap();
        assert_eq!(&head, b"HTTP/1.1 403", "{}", String::from_utf8_lossy(&head));
    }
    p.audit.flush().await.unwrap();
    let (status, summary) = super::support::get_json(&format!("{}/api/summary", p.admin())).await;
    assert_eq!(status, 200);
    assert_eq!(summary["refused"]["connect"], 2, "{summary}");
    assert_eq!(summary["refused"]["destination"], 3, "{summary}");
    assert_eq!(summary["requests"]["refuse"], 5, "{summary}");
    assert_eq!(summary["requests"]["disallow"], 1, "{summary}");
    assert_eq!(summary["blocks"]["total"], 6, "{summary}");

    let Some(browser) = chromium() else {
        crate::skip::missing("chromium", "apt-get install chromium");
        return;
    };
    let (dom, log) = dump_dom(browser, format!("{}/", p.admin())).await;
    assert_eq!(text_of(&dom, "refused-connect"), "2", "chromium stderr:\n{log}");
    assert_eq!(text_of(&dom, "refused-destination"), "3");
    assert_eq!(text_of(&dom, "req-disallow"), "1");
    assert!(dom.contains("(6 since start)"), "{dom}");
}
