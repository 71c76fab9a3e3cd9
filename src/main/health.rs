//! `robots-proxy health`: an HTTP/1.1 probe with hyper's client, so that a container image
//! without a shell or curl (distroless) can still have a `HEALTHCHECK`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::process::ExitCode;
use std::time::Duration;

use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use super::HealthArgs;

/// Why the probe failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProbeError {
    #[error("{0:?} is not a URL: {1}")]
    Url(String, http::uri::InvalidUri),
    #[error("{0:?}: only http:// URLs can be probed")]
    Scheme(String),
    #[error("cannot connect to {0}: {1}")]
    Connect(String, String),
    #[error("no answer from {0}: {1}")]
    Request(String, String),
    #[error("no answer from {0} within {1:?}")]
    Timeout(String, Duration),
    #[error("cannot start the probe: {0}")]
    Runtime(std::io::Error),
    #[error("cannot load the configuration to find admin.listen: {}", super::describe(.0))]
    Config(anyhow::Error),
}

pub(crate) fn run(args: HealthArgs) -> ExitCode {
    let result = target(&args).and_then(|url| probe(&url, args.timeout).map(|s| (url, s)));
    match result {
        Ok((url, (code, line))) if (200..300).contains(&code) => {
            println!("{url}: {}", robots_proxy::output::terminal(&line));
            ExitCode::SUCCESS
        }
        Ok((url, (_, line))) => {
            eprintln!("robots-proxy health: {url}: {}", robots_proxy::output::terminal(&line));
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("robots-proxy health: {}", robots_proxy::output::terminal(e));
            ExitCode::from(1)
        }
    }
}

/// `--url`, or `/healthz` on the configured admin address.
fn target(args: &HealthArgs) -> Result<String, ProbeError> {
    if let Some(url) = &args.url {
        return Ok(url.clone());
    }
    Ok(format!("{}/healthz", admin_base(args.config.clone())?))
}

/// GETs `url` within `timeout`; the status code and the status line (`HTTP/1.1 200 OK`).
fn probe(url: &str, timeout: Duration) -> Result<(u16, String), ProbeError> {
    get(url, timeout).map(|(code, line, _)| (code, line))
}

/// The admin address of the configuration in `file` (an unspecified address such as 0.0.0.0
/// is reached on loopback), as `http://host:port`.
pub(crate) fn admin_base(file: Option<std::path::PathBuf>) -> Result<String, ProbeError> {
    let config = super::serve::load(file, None, None).map_err(ProbeError::Config)?;
    let mut addr = config.admin.listen;
    if addr.ip().is_unspecified() {
        let loopback = match addr.ip() {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
        };
        addr.set_ip(loopback);
    }
    Ok(format!("http://{addr}"))
}

/// GETs `url` within `timeout`: the status code, the status line and the body.
pub(crate) fn get(url: &str, timeout: Duration) -> Result<(u16, String, Vec<u8>), ProbeError> {
    request(http::Method::GET, url, timeout)
}

/// Sends `method` to `url` with an empty body, within `timeout`: the status code, the status
/// line and the body.
pub(crate) fn request(
    method: http::Method,
    url: &str,
    timeout: Duration,
) -> Result<(u16, String, Vec<u8>), ProbeError> {
    let uri: http::Uri = url.trim().parse().map_err(|e| ProbeError::Url(url.to_owned(), e))?;
    if uri.scheme_str() != Some("http") || uri.authority().is_none() {
        return Err(ProbeError::Scheme(url.to_owned()));
    }
    let authority = uri.authority().map(|a| a.to_string()).unwrap_or_default();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(ProbeError::Runtime)?;
    runtime.block_on(async {
        let client = Client::builder(TokioExecutor::new()).build_http::<Empty<bytes::Bytes>>();
        let request = http::Request::builder()
            .method(method)
            .uri(uri)
            .header(http::header::USER_AGENT, "robots-proxy-health")
            .header(http::header::CONNECTION, "close")
            .body(Empty::new())
            .map_err(|e| ProbeError::Request(authority.clone(), e.to_string()))?;
        let answer = tokio::time::timeout(timeout, client.request(request))
            .await
            .map_err(|_| ProbeError::Timeout(authority.clone(), timeout))?;
        let response = answer.map_err(|e| {
            // The whole chain: "tcp connect error: Connection refused (os error 111)".
            let mut cause = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                cause.push_str(": ");
                cause.push_str(&s.to_string());
                source = s.source();
            }
            if e.is_connect() {
                ProbeError::Connect(authority.clone(), cause)
            } else {
                ProbeError::Request(authority.clone(), cause)
            }
        })?;
        let status = response.status();
        let line = format!(
            "{:?} {} {}",
            response.version(),
            status.as_u16(),
            status.canonical_reason().unwrap_or_default()
        );
        let reading = http_body_util::BodyExt::collect(response.into_body());
        let body = tokio::time::timeout(timeout, reading)
            .await
            .map_err(|_| ProbeError::Timeout(authority.clone(), timeout))?
            .map_err(|e| ProbeError::Request(authority.clone(), e.to_string()))?
            .to_bytes();
        Ok((status.as_u16(), line.trim_end().to_owned(), body.to_vec()))
    })
}
