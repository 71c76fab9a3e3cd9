//! The case-folded reading (issue 26.5) through the real binary: origins that say in their
//! robots.txt response that they are IIS, ASP.NET or Express serve `/PRIVATE/x` as
//! `/private/x`, so `Disallow: /private/` refuses it there; elsewhere it does not, unless
//! `policy.fold_case` or `policy.fold_case_sites` say so.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::support::{wait_until, ProxyProcess};

const ROBOTS: &str = "User-agent: *\nDisallow: /private/\n";

/// An origin on 127.0.0.1 whose `/robots.txt` answer carries `headers` (CRLF-ended lines);
/// every other path answers `hello`. One request per connection.
async fn origin(headers: &'static str) -> SocketAddr {
    counting_origin(headers).await.0
}

/// [`origin`], with the number of `/robots.txt` requests it has answered.
async fn counting_origin(headers: &'static str) -> (SocketAddr, Arc<AtomicUsize>) {
    let fetches = Arc::new(AtomicUsize::new(0));
    let counted = fetches.clone();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else { return };
            let counted = counted.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 1024];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 16 * 1024 {
                    match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&buf);
                let robots = head.split(' ').nth(1) == Some("/robots.txt");
                if robots {
                    counted.fetch_add(1, Ordering::SeqCst);
                }
                let (body, extra) = if robots { (ROBOTS, headers) } else { ("hello", "") };
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\
                     {extra}Connection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(answer.as_bytes()).await;
            });
        }
    });
    (addr, fetches)
}

/// `GET http://origin/path` through the proxy: the status.
async fn status(proxy: SocketAddr, origin: SocketAddr, path: &str) -> u16 {
    let request = format!(
        "GET http://{origin}{path} HTTP/1.1\r\nHost: {origin}\r\nConnection: close\r\n\r\n"
    );
    let mut stream = TcpStream::connect(proxy).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut buf)).await;
    let head = String::from_utf8_lossy(&buf);
    head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
}

fn start(state: &tempfile::TempDir, policy: &str) -> ProxyProcess {
    let file = state.path().join("robots-proxy.toml");
    let config = format!(
        "state_dir = {:?}\n[policy]\n{policy}\n[https]\nmode = \"reject\"\n\
         [audit]\nfsync = \"never\"\n",
        state.path()
    );
    std::fs::write(&file, config).unwrap();
    ProxyProcess::start(&["--config", file.to_str().unwrap()], &[])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn origins_that_say_they_fold_case_get_the_case_folded_reading() {
    let iis = origin("Server: Microsoft-IIS/10.0\r\n").await;
    let express = origin("X-Powered-By: Express\r\n").await;
    let plain = origin("Server: nginx/1.27.0\r\n").await;
    let state = tempfile::tempdir().unwrap();
    let proxy = start(&state, "");
    for (origin, path, want) in [
        (iis, "/PRIVATE/x", 403),
        (iis, "/Private/x", 403),
        (iis, "/private/x", 403),
        (iis, "/public/x", 200),
        // Win32 trims a segment's trailing period, and the last segment's periods and spaces.
        (iis, "/private./x", 403),
        (iis, "/PRIVATE./x", 403),
        (iis, "/public./x", 200),
        (express, "/PRIVATE/x", 403),
        // A case-sensitive origin serves /PRIVATE/x as another resource: not over-blocked.
        (plain, "/PRIVATE/x", 200),
        (plain, "/private./x", 200),
        (plain, "/private/x", 403),
    ] {
        assert_eq!(status(proxy.proxy_addr, origin, path).await, want, "{origin}{path}");
    }
    // The refusal names the reading that decided.
    let file = state.path().join("audit.jsonl");
    let folded = || {
        std::fs::read_to_string(&file).unwrap_or_default().lines().any(|l| {
            let r: serde_json::Value = serde_json::from_str(l).unwrap_or_default();
            r["url.path"] == "/PRIVATE/x"
                && r["robots.reading"] == "case-folded"
                && r["robots.rule"] == "disallow: /private/"
        })
    };
    wait_until("a case-folded refusal in the audit log", folded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_switch_and_the_site_list_decide_too() {
    let iis = origin("Server: Microsoft-IIS/10.0\r\n").await;
    let plain = origin("").await;
    // Every origin.
    let state = tempfile::tempdir().unwrap();
    let proxy = start(&state, "fold_case = \"all\"");
    assert_eq!(status(proxy.proxy_addr, plain, "/PRIVATE/x").await, 403);
    drop(proxy);
    // Only the listed site; detection off, so the IIS origin is read as sent.
    let state = tempfile::tempdir().unwrap();
    let proxy = start(&state, &format!("fold_case = \"listed\"\nfold_case_sites = [\"{plain}\"]"));
    assert_eq!(status(proxy.proxy_addr, plain, "/PRIVATE/x").await, 403);
    assert_eq!(status(proxy.proxy_addr, iis, "/PRIVATE/x").await, 200);
}

/// The case-folded reading survives a restart (review-core N2): the copy of robots.txt read
/// back from `state_dir/robots/` keeps what the fetch learnt from the `Server` header, so
/// `/PRIVATE/x` is refused by the copy exactly as by the fetch it came from.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_read_back_after_a_restart_keeps_the_case_folded_reading() {
    let (iis, fetches) = counting_origin("Server: Microsoft-IIS/10.0\r\n").await;
    let state = tempfile::tempdir().unwrap();
    let proxy = start(&state, "");
    assert_eq!(status(proxy.proxy_addr, iis, "/PRIVATE/x").await, 403);
    let records = state.path().join("robots");
    let written = || {
        let rec = |e: &std::fs::DirEntry| e.path().extension().is_some_and(|x| x == "rec");
        std::fs::read_dir(&records).map(|d| d.flatten().any(|e| rec(&e))).unwrap_or(false)
    };
    wait_until("the robots.txt copy written to the state directory", written).await;
    drop(proxy);
    let proxy = start(&state, "");
    assert_eq!(status(proxy.proxy_addr, iis, "/PRIVATE/x").await, 403, "after the restart");
    assert_eq!(status(proxy.proxy_addr, iis, "/public/x").await, 200);
    // Decided by the copy, not by a new fetch (which would have detected IIS again).
    assert_eq!(fetches.load(Ordering::SeqCst), 1, "robots.txt fetched again after the restart");
}
