//! robots.txt sent compressed or in UTF-16, through the real binary against real origins on
//! 127.0.0.1: the rules are obeyed as if sent plain, what cannot be decoded disallows
//! everything (RFC 9309 §2.3.1.4), and a gzip bomb costs no more than the size cap.

use std::io::Write;

use flate2::write::{GzEncoder, ZlibEncoder};
use flate2::Compression;

use super::support::{raw_get, RawResponse};
use crate::cache::support::{Origin, Reply};
use crate::ops::support::ProxyProcess;

const RULES: &str = "User-agent: *\nDisallow: /private\n";

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn utf16le_with_bom(text: &str) -> Vec<u8> {
    let mut out = vec![0xff, 0xfe];
    text.encode_utf16().for_each(|u| out.extend(u.to_le_bytes()));
    out
}

fn utf16be_with_bom(text: &str) -> Vec<u8> {
    let mut out = vec![0xfe, 0xff];
    text.encode_utf16().for_each(|u| out.extend(u.to_be_bytes()));
    out
}

/// An origin whose robots.txt is `body` with `Content-Encoding: coding` (none when empty).
async fn origin(body: Vec<u8>, coding: &str) -> Origin {
    let mut reply = Reply::ok(body);
    if !coding.is_empty() {
        reply = reply.header("Content-Encoding", coding);
    }
    let origin = Origin::with_robots(reply).await;
    origin.route("/private", Reply::ok("private content"));
    origin.route("/ok", Reply::ok("ok content"));
    origin
}

fn proxy() -> ProxyProcess {
    ProxyProcess::start(&[], &[("ROBOTS_PROXY_ROBOTS__FETCH_TIMEOUT", "5s")])
}

async fn get(proxy: &ProxyProcess, origin: &Origin, path: &str) -> RawResponse {
    let host = origin.base_url().trim_start_matches("http://").to_owned();
    raw_get(proxy.proxy_addr, &format!("{}{path}", origin.base_url()), &host, "").await
}

/// The peak resident memory of process `pid`, in bytes (`VmHWM` in /proc).
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

/// A gzipped or deflated robots.txt is obeyed as the same file sent plain: before decoding,
/// the compressed bytes parsed as no rules and `/private` was forwarded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compressed_robots_txt_is_obeyed() {
    let mut zlib = ZlibEncoder::new(Vec::new(), Compression::default());
    zlib.write_all(RULES.as_bytes()).unwrap();
    let origins = [
        ("gzip", origin(gzip(RULES.as_bytes()), "gzip").await),
        ("deflate", origin(zlib.finish().unwrap(), "deflate").await),
        ("gzip twice", origin(gzip(&gzip(RULES.as_bytes())), "gzip, gzip").await),
    ];
    let proxy = proxy();
    for (label, origin) in &origins {
        let resp = get(&proxy, origin, "/private").await;
        assert_eq!(resp.status, 403, "{label}: {resp:?}");
        assert!(resp.body.contains("disallow: /private"), "{label}: {}", resp.body);
        assert_eq!(get(&proxy, origin, "/ok").await.status, 200, "{label}");
        assert_eq!(origin.hits("/private"), 0, "{label}");
    }
}

/// A body that cannot be decoded is "unreachable": everything is disallowed, never an empty
/// file that allows everything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undecodable_robots_txt_disallows_everything() {
    let whole = gzip(RULES.as_bytes());
    let mut corrupt = whole.clone();
    corrupt[12..20].fill(0xff); // inside the deflate data
    let origins = [
        ("unknown coding", origin(b"\x1b\x00\x00\x00 not brotli".to_vec(), "br").await),
        ("corrupt gzip", origin(corrupt, "gzip").await),
        ("truncated gzip", origin(whole[..whole.len() / 2].to_vec(), "gzip").await),
        ("not gzip at all", origin(RULES.as_bytes().to_vec(), "gzip").await),
    ];
    let proxy = proxy();
    for (label, origin) in &origins {
        let resp = get(&proxy, origin, "/ok").await;
        assert_eq!(resp.status, 403, "{label}: {resp:?}");
        assert!(resp.body.contains("robots.txt unreachable"), "{label}: {}", resp.body);
        assert!(resp.body.contains("cannot be decoded"), "{label}: {}", resp.body);
        assert_eq!(origin.hits("/ok"), 0, "{label}");
    }
}

/// A gzip bomb: the rules, then a gigabyte of NUL bytes in 100 gzip members of 10 MiB each
/// (about 1 MiB on the wire). The first 500 KiB (the cap) are decoded and obeyed; the proxy
/// keeps answering, and its peak memory stays far below what the body would expand to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gzip_bomb_is_cut_at_the_cap() {
    let member = gzip(&vec![0u8; 10 << 20]);
    let mut bomb = gzip(RULES.as_bytes());
    for _ in 0..100 {
        bomb.extend_from_slice(&member);
    }
    assert!(bomb.len() < 4 << 20, "{}", bomb.len());
    let origin = origin(bomb, "gzip").await;
    let proxy = proxy();
    let resp = get(&proxy, &origin, "/private").await;
    assert_eq!(resp.status, 403, "{resp:?}");
    assert!(resp.body.contains("disallow: /private"), "{}", resp.body);
    assert_eq!(get(&proxy, &origin, "/ok").await.status, 200);
    assert_eq!(origin.robots_hits(), 1);
    let peak = peak_rss(proxy.pid());
    assert!(peak < 256 << 20, "peak RSS {peak} bytes for a 1 GiB bomb");
}

/// A UTF-16 robots.txt with a byte-order mark (as Windows editors save it) is transcoded and
/// obeyed; before, its NUL-separated bytes parsed as no rules.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn utf16_robots_txt_with_a_bom_is_obeyed() {
    let origins = [
        ("UTF-16LE", origin(utf16le_with_bom(RULES), "").await),
        ("UTF-16BE", origin(utf16be_with_bom(RULES), "").await),
        ("gzipped UTF-16LE", origin(gzip(&utf16le_with_bom(RULES)), "gzip").await),
    ];
    let proxy = proxy();
    for (label, origin) in &origins {
        let resp = get(&proxy, origin, "/private").await;
        assert_eq!(resp.status, 403, "{label}: {resp:?}");
        assert_eq!(get(&proxy, origin, "/ok").await.status, 200, "{label}");
    }
}

/// An origin that answers `/robots.txt` with `robots` (a whole raw response, sent as it is,
/// then the connection closed) and every other path with `hello`; the number of other
/// requests it answered.
async fn raw_origin(
    robots: Vec<u8>,
) -> (std::net::SocketAddr, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let hits = std::sync::Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else { return };
            let (robots, counted) = (robots.clone(), counted.clone());
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
                let answer = if head.split(' ').nth(1) == Some("/robots.txt") {
                    robots
                } else {
                    counted.fetch_add(1, Ordering::SeqCst);
                    b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello"
                        .to_vec()
                };
                let _ = stream.write_all(&answer).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    (addr, hits)
}

/// Review-core N1: a robots.txt sent with a transfer coding other than `chunked` (which hyper
/// undoes) arrived still compressed, parsed as no rules, and allowed everything. gzip and
/// deflate transfer codings are now undone like content codings; any other is unreachable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transfer_coded_robots_txt_is_obeyed_or_unreachable() {
    use std::sync::atomic::Ordering;
    let chunked = |head: &str, body: &[u8]| {
        let mut out = format!("HTTP/1.1 200 OK\r\n{head}\r\n\r\n{:x}\r\n", body.len()).into_bytes();
        out.extend_from_slice(body);
        out.extend_from_slice(b"\r\n0\r\n\r\n");
        out
    };
    let to_close = |head: &str, body: &[u8]| {
        let mut out =
            format!("HTTP/1.1 200 OK\r\n{head}\r\nConnection: close\r\n\r\n").into_bytes();
        out.extend_from_slice(body);
        out
    };
    let mut zlib = ZlibEncoder::new(Vec::new(), Compression::default());
    zlib.write_all(RULES.as_bytes()).unwrap();
    let deflated = zlib.finish().unwrap();
    let gz = gzip(RULES.as_bytes());
    let obeyed = [
        ("gzip, chunked", chunked("Transfer-Encoding: gzip, chunked", &gz)),
        ("deflate, chunked", chunked("Transfer-Encoding: deflate, chunked", &deflated)),
        ("gzip to close", to_close("Transfer-Encoding: gzip", &gz)),
    ];
    let unreachable = [
        ("compress, chunked", chunked("Transfer-Encoding: compress, chunked", &gz)),
        ("x-custom to close", to_close("Transfer-Encoding: x-custom", &gz)),
    ];
    let proxy = proxy();
    let get = |addr: std::net::SocketAddr, path: &'static str| {
        let target = format!("http://{addr}{path}");
        let proxy_addr = proxy.proxy_addr;
        async move { raw_get(proxy_addr, &target, &addr.to_string(), "").await }
    };
    for (label, robots) in obeyed {
        let (addr, hits) = raw_origin(robots).await;
        let resp = get(addr, "/private").await;
        assert_eq!(resp.status, 403, "{label}: {resp:?}");
        assert!(resp.body.contains("disallow: /private"), "{label}: {}", resp.body);
        assert_eq!(get(addr, "/ok").await.status, 200, "{label}");
        assert_eq!(hits.load(Ordering::SeqCst), 1, "{label}: only /ok reached the origin");
    }
    for (label, robots) in unreachable {
        let (addr, hits) = raw_origin(robots).await;
        let resp = get(addr, "/ok").await;
        assert_eq!(resp.status, 403, "{label}: {resp:?}");
        assert!(resp.body.contains("robots.txt unreachable"), "{label}: {}", resp.body);
        assert_eq!(hits.load(Ordering::SeqCst), 0, "{label}");
    }
}
