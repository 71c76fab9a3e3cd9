//! What an origin's response framing becomes on the way to the client (RFC 9112 §6). (The
//! cookie fields an HTTP/2 client splits are in `tls_listener`, which speaks HTTP/2.)

use tokio::io::AsyncWriteExt;

use super::faults::FaultOrigin;
use super::support::{raw_get, TestProxy};

const ROBOTS: &str = "User-agent: *\nDisallow: /private\n";

/// An origin that answers robots.txt plainly and everything else with `answer`, as written.
async fn origin_answering(answer: &'static str) -> FaultOrigin {
    FaultOrigin::start(move |mut socket, path| async move {
        let reply = if path == "/robots.txt" {
            format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{ROBOTS}",
                ROBOTS.len()
            )
        } else {
            answer.to_owned()
        };
        let _ = socket.write_all(reply.as_bytes()).await;
        let _ = socket.shutdown().await;
    })
    .await
}

/// RFC 9112 §6.3 ¶3: with both, the transfer coding frames the body and `Content-Length` must
/// not be forwarded; the client gets the whole body, not the first three bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunked_with_a_content_length_reaches_the_client_whole() {
    let origin = origin_answering(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n\
         b\r\nhello world\r\n0\r\n\r\n",
    )
    .await;
    let proxy = TestProxy::start().await;
    let resp = raw_get(proxy.addr, &format!("{}/page", origin.base()), "x", "").await;
    assert_eq!(resp.status, 200, "{resp:?}");
    assert_ne!(resp.headers.get("content-length").map(String::as_str), Some("3"), "{resp:?}");
    assert!(resp.body.contains("hello world"), "{resp:?}");
}

/// A transfer coding hyper does not undo would reach the client still encoded, with nothing
/// saying so: 502 instead. So is a 101 for a request that asked for no upgrade.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codings_other_than_chunked_and_unasked_upgrades_are_502() {
    let gzip = origin_answering(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
    )
    .await;
    let upgrade = origin_answering(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n\
         raw bytes of another protocol",
    )
    .await;
    let proxy = TestProxy::start().await;
    for (origin, says) in [(&gzip, "transfer coding"), (&upgrade, "switched protocols")] {
        let resp = raw_get(proxy.addr, &format!("{}/page", origin.base()), "x", "").await;
        assert_eq!(resp.status, 502, "{resp:?}");
        assert!(resp.headers["proxy-status"].contains("error=http_protocol_error"), "{resp:?}");
        assert!(resp.body.contains(says), "{resp:?}");
        assert!(!resp.body.contains("abc") && !resp.body.contains("raw bytes"), "{resp:?}");
    }
}
