//! A Redis older than 5.0 is not used: the link stays down and the log says which version was
//! found and which is needed. No old redis-server is at hand, so a real one is reached through
//! a forwarder that makes its `INFO` say 4.x (the version's length unchanged, so RESP's byte
//! counts still hold); everything else passes untouched.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::support::{fleet, Redis, TimedOrigin};
use super::{get, metrics, ROBOTS};

/// Replaces the major version after every `redis_version:` in `bytes` by 4.
fn make_old(bytes: &mut [u8]) {
    let field = b"redis_version:";
    let mut i = 0;
    while i + field.len() < bytes.len() {
        if &bytes[i..i + field.len()] == field && bytes[i + field.len()].is_ascii_digit() {
            bytes[i + field.len()] = b'4';
        }
        i += 1;
    }
}

/// A forwarder on a free loopback port to the redis-server on `port`, whose answers say 4.x;
/// its address.
async fn old_redis_in_front_of(port: u16) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((client, _)) = listener.accept().await else { return };
            tokio::spawn(async move {
                let Ok(server) = TcpStream::connect(("127.0.0.1", port)).await else { return };
                let (mut client_read, mut client_write) = client.into_split();
                let (mut server_read, mut server_write) = server.into_split();
                let up = tokio::spawn(async move {
                    let _ = tokio::io::copy(&mut client_read, &mut server_write).await;
                });
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    let n = match server_read.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    make_old(&mut buf[..n]);
                    if client_write.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
                up.abort();
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_older_than_five_is_not_used_and_the_log_says_why() {
    let Some(redis) = Redis::start().await else { return };
    let origin = TimedOrigin::start(ROBOTS, Duration::ZERO).await;
    let old = old_redis_in_front_of(redis.port).await;
    let url = format!("redis://{old}");
    let f = fleet(1, &redis, "old", &[("ROBOTS_PROXY_FLEET__REDIS", &url)]);
    let proxy = &f.instances[0];
    // The log says so within a few heartbeats.
    let mut said = false;
    for _ in 0..100 {
        if proxy.stderr().contains("Redis cannot be used") {
            said = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let log = proxy.stderr();
    assert!(said, "nothing said about the version:\n{log}");
    assert!(log.contains("the Redis server is version 4.0.15"), "{log}");
    assert!(log.contains("needs Redis 5.0 or later"), "{log}");
    // Past several heartbeats, the link is still down, and the instance goes on on its own
    // (fleet.on_redis_error = "local").
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let m = metrics(proxy).await;
    assert!(m.lines().any(|l| l == "robots_proxy_fleet_up 0"), "{m}");
    assert_eq!(get(&f, 0, &origin.url("/a")).await, 200);
    assert!(!proxy.stderr().contains("Redis is back"), "{}", proxy.stderr());
}

#[test]
fn the_forwarder_changes_only_the_major_version() {
    let mut info = b"$40\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n".to_vec();
    make_old(&mut info);
    assert_eq!(info, b"$40\r\nredis_version:4.0.15\r\nredis_mode:standalone\r\n");
}
