//! Limits per client (issue 26 §16): one client address cannot take every connection slot,
//! and with a users file a connection that never proves its user is closed soon.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use super::support::{parse_response, Origin, TestProxy};

const RULES: &str = "User-agent: *\nDisallow: /private\n";

/// Reads until the proxy closes the connection; what it sent. Bounded, so a connection left
/// open fails the test instead of hanging it.
async fn until_closed(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    match tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut buf)).await {
        Ok(_) => Some(buf),
        Err(_) => None,
    }
}

/// A connection to `addr` from the loopback address `from` (127.0.0.2 is another client).
async fn connect_from(from: &str, addr: std::net::SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
    socket.connect(addr).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_of_one_client_do_not_starve_another() {
    let origin = Origin::start(RULES).await;
    let proxy = TestProxy::start_with(|c| {
        c.limits.max_connections = 3;
        c.limits.max_connections_per_client = 2;
        // Idle connections are not reaped during the test.
        c.proxy.header_read_timeout = Duration::from_secs(120);
    })
    .await;
    // One client (127.0.0.1) opens idle connections, as many as the proxy serves at once.
    let mut idle = Vec::new();
    for _ in 0..3 {
        idle.push(connect_from("127.0.0.1", proxy.addr).await);
    }
    // The one past its cap is answered 503 and closed, so it holds no slot.
    let mut third = idle.pop().unwrap();
    let refused = until_closed(&mut third).await.expect("the third is closed");
    let refused = parse_response(&refused);
    assert_eq!(refused.status, 503, "{refused:?}");
    let status = refused.headers.get("proxy-status").cloned().unwrap_or_default();
    assert!(status.contains("max_connections_per_client"), "{refused:?}");
    // Another client (127.0.0.2) is served while the first one's connections stay idle.
    let mut other = connect_from("127.0.0.2", proxy.addr).await;
    let request =
        format!("GET {}/x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", origin.base());
    other.write_all(request.as_bytes()).await.unwrap();
    let answer = until_closed(&mut other).await.expect("the other client is answered");
    let answer = parse_response(&answer);
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.body, "hello from /x");
    drop(idle);
}

/// A users file with alice, at the default Argon2 cost.
fn users_file(dir: &tempfile::TempDir) -> std::path::PathBuf {
    let cost = argon2::Params::default();
    let hash = robots_proxy::access::hash_password("alice-secret", &cost).unwrap();
    let path = dir.path().join("users");
    std::fs::write(&path, format!("alice:{hash}\n")).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_proves_no_user_is_closed_after_auth_timeout() {
    use base64ct::Encoding;
    let dir = tempfile::tempdir().unwrap();
    let origin = Origin::start(RULES).await;
    let users = users_file(&dir);
    let proxy = TestProxy::start_with(move |c| {
        c.access.users_file = Some(users);
        c.limits.auth_timeout = Duration::from_secs(1);
        c.proxy.header_read_timeout = Duration::from_secs(120);
    })
    .await;
    // Idle, and sending requests without credentials: both are closed, long before the
    // header read timeout.
    let mut silent = TcpStream::connect(proxy.addr).await.unwrap();
    let mut asking = TcpStream::connect(proxy.addr).await.unwrap();
    let request = format!("GET {}/x HTTP/1.1\r\nHost: x\r\n\r\n", origin.base());
    asking.write_all(request.as_bytes()).await.unwrap();
    assert!(until_closed(&mut silent).await.is_some(), "an idle connection is closed");
    let told = until_closed(&mut asking).await.expect("an unauthenticated connection is closed");
    assert_eq!(parse_response(&told).status, 407);
    // A connection that authenticated is kept past the deadline.
    let token = base64ct::Base64::encode_string(b"alice:alice-secret");
    let alice = TcpStream::connect(proxy.addr).await.unwrap();
    let (mut send, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(alice)).await.unwrap();
    tokio::spawn(conn);
    for path in ["/a", "/b"] {
        let req = http::Request::get(format!("{}{path}", origin.base()))
            .header("host", "x")
            .header("proxy-authorization", format!("Basic {token}"))
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .unwrap();
        let resp = tokio::time::timeout(Duration::from_secs(10), send.send_request(req))
            .await
            .expect("answered")
            .expect("the connection is open");
        assert_eq!(resp.status(), 200);
        let _ = http_body_util::BodyExt::collect(resp.into_body()).await;
        // Past the deadline before the second request.
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }
}
