//! The yardstick of `benches/proxy/run.sh` (issue #22): a forward proxy with no robots.txt logic
//! at all, built from the same hyper, hyper-util and tokio the gateway uses. Whatever the gateway
//! does beyond this (the robots cache, the decision, audit, metrics) is what a run measures.
//!
//! - Absolute-form requests (`GET http://host:port/path HTTP/1.1`) go to the origin through one
//!   pooled hyper-util client (keep-alive to the origin, as the gateway has). `Connection` and
//!   `Proxy-Connection` are dropped; nothing else is rewritten.
//! - `CONNECT host:port` is answered `200` and relayed with `tokio::io::copy_bidirectional`.
//! - An origin that cannot be reached is a `502`.
//!
//! ```sh
//! cargo build --release --example bare-proxy
//! target/release/examples/bare-proxy 127.0.0.1:18151
//! ```
//!
//! Loopback benchmarks only: it forwards to any address it is given.

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper::header::{HeaderName, CONNECTION};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::{TcpListener, TcpStream};

type Body = BoxBody<Bytes, hyper::Error>;
type Upstream = Client<HttpConnector, Incoming>;

fn empty(status: StatusCode) -> Response<Body> {
    let mut response = Response::new(Empty::new().map_err(|never| match never {}).boxed());
    *response.status_mut() = status;
    response
}

async fn handle(
    upstream: Upstream,
    mut req: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    if req.method() == Method::CONNECT {
        let Some(target) = req.uri().authority().map(|a| a.to_string()) else {
            return Ok(empty(StatusCode::BAD_REQUEST));
        };
        let origin = match TcpStream::connect(&target).await {
            Ok(stream) => stream,
            Err(_) => return Ok(empty(StatusCode::BAD_GATEWAY)),
        };
        let _ = origin.set_nodelay(true);
        tokio::spawn(async move {
            if let Ok(client) = hyper::upgrade::on(req).await {
                let mut client = TokioIo::new(client);
                let mut origin = origin;
                let _ = tokio::io::copy_bidirectional(&mut client, &mut origin).await;
            }
        });
        return Ok(empty(StatusCode::OK));
    }
    if req.uri().authority().is_none() {
        return Ok(empty(StatusCode::BAD_REQUEST));
    }
    let headers = req.headers_mut();
    headers.remove(CONNECTION);
    headers.remove(HeaderName::from_static("proxy-connection"));
    match upstream.request(req).await {
        Ok(response) => Ok(response.map(|body| body.boxed())),
        Err(_) => Ok(empty(StatusCode::BAD_GATEWAY)),
    }
}

#[tokio::main]
async fn main() {
    let listen: SocketAddr = match std::env::args().nth(1).map(|a| a.parse()) {
        Some(Ok(addr)) => addr,
        _ => {
            eprintln!("usage: bare-proxy LISTEN_ADDRESS (for example 127.0.0.1:18151)");
            std::process::exit(2);
        }
    };
    let listener = match TcpListener::bind(listen).await {
        Ok(listener) => listener,
        Err(e) => {
            eprintln!("bare-proxy: cannot listen on {listen}: {e}");
            std::process::exit(1);
        }
    };
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let upstream: Upstream = Client::builder(TokioExecutor::new()).build(connector);
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        let _ = stream.set_nodelay(true);
        let upstream = upstream.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| handle(upstream.clone(), req));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades()
                .await;
        });
    }
}
