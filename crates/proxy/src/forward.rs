//! Forwarding an allowed request to its origin and the response back, bodies streamed.
//!
//! What a forward proxy must change on the way (RFC 9110 §7.6, RFC 9112 §3.2.2), and nothing
//! more:
//!
//! * hop-by-hop headers are removed in both directions: `Connection` and every header it names,
//!   `Proxy-Connection`, `Keep-Alive`, `TE`, `Trailer`, `Transfer-Encoding`, `Upgrade`,
//!   `Proxy-Authorization` and `Proxy-Authenticate`;
//! * `Via` is added (RFC 9110 §7.6.3); no `X-Forwarded-For`, which would leak client addresses;
//! * `Host` is replaced by the authority of the request-target (RFC 9112 §3.2.2: "A proxy that
//!   forwards such a request MUST generate a new Host field value based on the received
//!   target URI rather than forward the received Host field value"), so a request for an
//!   allowed site cannot carry another site's `Host` to its server.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Request, Response, StatusCode, Uri};
use hyper::body::{Body, Frame, Incoming, SizeHint};

use super::{answer, BodyError, ProxyBody};
use robots_proxy_authority::Authority;
use robots_proxy_config::UpstreamSection;
use robots_proxy_metrics::Metrics;
use robots_proxy_net::guard::{DestinationGuard, GuardedConnector};

/// The pooled connections to origins, made only where the destination guard allows (see
/// [`super::pool`]): HTTP/1.1 to `http` origins, HTTP/2 or HTTP/1.1 by ALPN to `https` ones.
pub(crate) struct UpstreamClient {
    origins: super::pool::OriginPool,
}

/// A client's request body on its way to the origin, failed when the client sends nothing of it
/// for `limits.client_body_idle_timeout` ([`ClientBodyError::Idle`]): without that, a client
/// that stops half-way through its `Content-Length` to an origin that has already answered
/// would hold its connection slot and an origin connection forever.
///
/// Boxed: a request goes to its origin connection through a channel hyper makes for each
/// connection, whose first block of 32 request slots every pooled connection keeps. A pointer
/// there instead of the ~90 bytes of the body makes each idle origin connection ~2.5 KiB
/// smaller (issue 22: 10,000 of them at 10,000 sites), for one small allocation per request.
pub(crate) struct UpstreamBody(Box<Relayed>);

/// What [`UpstreamBody`] points to.
struct Relayed {
    inner: Incoming,
    idle: IdleTimer,
}

/// Why a client's request body could not be forwarded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum ClientBodyError {
    /// Reading the body from the client failed.
    #[error("reading the request body from the client failed")]
    Client(#[source] hyper::Error),
    /// The client sent nothing more of the body for `limits.client_body_idle_timeout`.
    #[error(
        "the client sent nothing of the request body for {} (limits.client_body_idle_timeout)",
        humantime::format_duration(*.0)
    )]
    Idle(Duration),
}

impl UpstreamBody {
    pub(crate) fn new(inner: Incoming, timeout: Duration) -> Self {
        UpstreamBody(Box::new(Relayed { inner, idle: IdleTimer::new(timeout) }))
    }
}

impl Body for UpstreamBody {
    type Data = Bytes;
    type Error = ClientBodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, ClientBodyError>>> {
        let this = &mut *self.get_mut().0;
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            this.idle.reset();
            return Poll::Ready(frame.map(|f| f.map_err(ClientBodyError::Client)));
        }
        if this.idle.poll_expired(cx).is_pending() {
            return Poll::Pending;
        }
        tracing::info!(
            timeout = %humantime::format_duration(this.idle.timeout),
            "the client stalled in its request body; the request is failed \
             (limits.client_body_idle_timeout)"
        );
        Poll::Ready(Some(Err(ClientBodyError::Idle(this.idle.timeout))))
    }

    fn is_end_stream(&self) -> bool {
        self.0.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.0.inner.size_hint()
    }
}

/// The idle timer of a body being relayed: it runs only while the proxy waits for the sender,
/// from the first moment it keeps the proxy waiting, and starts over whenever a frame comes.
struct IdleTimer {
    timeout: Duration,
    /// Made the first time the sender keeps the proxy waiting, re-armed after.
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
    /// Whether `timer` runs for the current wait.
    waiting: bool,
}

impl IdleTimer {
    fn new(timeout: Duration) -> Self {
        IdleTimer { timeout, timer: None, waiting: false }
    }

    /// A frame came (or the body ended): the next wait starts afresh.
    fn reset(&mut self) {
        self.waiting = false;
    }

    /// Called while the sender keeps the proxy waiting: ready once it has for `timeout`.
    fn poll_expired(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let deadline =
            robots_proxy_clock::deadline_after(tokio::time::Instant::now(), self.timeout);
        let timer = self.timer.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        if !self.waiting {
            timer.as_mut().reset(deadline);
            self.waiting = true;
        }
        if timer.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        self.waiting = false;
        Poll::Ready(())
    }
}

impl UpstreamClient {
    /// Sends `req` (absolute-form target) to its origin through the
    /// [`super::pool::OriginPool`], which writes the target as the connection's protocol takes
    /// it.
    async fn request(
        &self,
        authority: &Authority,
        req: Request<UpstreamBody>,
    ) -> Result<Response<Incoming>, Box<dyn std::error::Error + Send + Sync>> {
        Ok(self.origins.send(authority, req).await?)
    }
}

/// Whether `e` (from [`UpstreamClient::request`]) is a failure to connect, as opposed to one
/// after the request was sent.
fn is_connect_failure(e: &(dyn std::error::Error + 'static)) -> bool {
    matches!(e.downcast_ref(), Some(super::pool::PoolError::Connect(_)))
}

/// Builds the pooled upstream client: idle connections are reaped by a timer and bounded per
/// origin and in all (`upstream.pool_*`). Origin certificates are always verified.
pub(crate) fn client(
    settings: &UpstreamSection,
    tls: rustls::ClientConfig,
    guard: std::sync::Arc<DestinationGuard>,
) -> UpstreamClient {
    let plain = GuardedConnector::new(
        guard.clone(),
        robots_proxy_net::guard::ConnectSettings::origins(settings.connect_timeout),
    );
    let tls = robots_proxy_net::tls::https_connector(tls, settings.connect_timeout, guard);
    let origins = super::pool::OriginPool::new(
        plain,
        tls,
        settings.pool_idle_timeout,
        settings.pool_max_idle_per_host,
        settings.pool_max_idle,
    );
    UpstreamClient { origins }
}

/// Removes hop-by-hop headers (RFC 9110 §7.6.1), including those named in `Connection`.
///
/// One pass over the message's few field names finds what to remove (usually nothing, or
/// `Connection` and the `Keep-Alive` it names): cheaper than trying nine removals, each a hash
/// and a probe, on every message.
pub(crate) fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let mut doomed: Vec<HeaderName> = Vec::new();
    {
        // The options of `Connection`, read once (a message rarely has more than a few).
        let mut listed: Vec<&str> = Vec::new();
        for value in headers.get_all(header::CONNECTION) {
            if let Ok(value) = value.to_str() {
                listed.extend(value.split(',').map(str::trim).filter(|o| !o.is_empty()));
            }
        }
        for name in headers.keys() {
            let name_str = name.as_str();
            if is_hop_by_hop(name_str) || listed.iter().any(|o| o.eq_ignore_ascii_case(name_str)) {
                doomed.push(name.clone());
            }
        }
    }
    for name in &doomed {
        headers.remove(name);
    }
}

/// The hop-by-hop fields every message loses (RFC 9110 §7.6.1), by their lower-case names.
fn is_hop_by_hop(name: &str) -> bool {
    matches!(
        name,
        "connection"
            | "proxy-connection"
            | "keep-alive"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "proxy-authorization"
            | "proxy-authenticate"
    )
}

/// Our `Via` entry (RFC 9110 §7.6.3), prepared once per protocol version.
pub(crate) struct Via {
    pseudonym: String,
    http10: HeaderValue,
    http11: HeaderValue,
    http2: HeaderValue,
}

impl Via {
    pub(crate) fn new(pseudonym: &str) -> Self {
        let value = |proto: &str| {
            HeaderValue::from_str(&format!("{proto} {pseudonym}"))
                .unwrap_or_else(|_| HeaderValue::from_static("1.1 robots-proxy"))
        };
        Via {
            pseudonym: pseudonym.to_owned(),
            http10: value("1.0"),
            http11: value("1.1"),
            http2: value("2"),
        }
    }

    /// Appends our entry to the message's `Via`, for a message received as `version`.
    pub(crate) fn add(&self, headers: &mut HeaderMap, version: http::Version) {
        let ours = match version {
            http::Version::HTTP_10 => &self.http10,
            http::Version::HTTP_2 => &self.http2,
            _ => &self.http11,
        };
        match headers.get(header::VIA).and_then(|v| v.to_str().ok()) {
            None => {
                headers.insert(header::VIA, ours.clone());
            }
            Some(prev) => {
                let joined = format!("{prev}, {}", ours.to_str().unwrap_or(&self.pseudonym));
                if let Ok(v) = HeaderValue::from_str(&joined) {
                    headers.insert(header::VIA, v);
                }
            }
        }
    }
}

/// Rewrites a client's request into the one sent upstream: the normalised path (the one that
/// was checked), `Host` from the request-target, hop-by-hop headers and the token header gone.
pub(crate) fn upstream_request(
    mut req: Request<Incoming>,
    authority: &Authority,
    path: &str,
    token_header: &HeaderName,
    via: &Via,
) -> Result<Request<Incoming>, http::Error> {
    // The request-target is reused as it is when it already names exactly the authority and
    // path that were checked (the common case); otherwise it is rebuilt from them.
    let unchanged = req.uri().scheme_str() == Some(authority.scheme().as_str())
        && req.uri().authority().is_some_and(|a| authority.is_host_header(a.as_str()))
        && req.uri().path_and_query().is_some_and(|p| p.as_str() == path);
    let host = if unchanged {
        // Already exactly the authority's Host form (checked just above).
        req.uri().authority().map(|a| HeaderValue::from_str(a.as_str()))
    } else {
        None
    };
    let host = match host {
        Some(value) => value?,
        None => {
            let host_header = authority.host_header();
            let uri = Uri::builder()
                .scheme(authority.scheme().as_str())
                .authority(host_header.as_str())
                .path_and_query(path)
                .build()?;
            *req.uri_mut() = uri;
            HeaderValue::from_str(&host_header)?
        }
    };
    let version = req.version();
    *req.version_mut() = http::Version::HTTP_11;
    let headers = req.headers_mut();
    if version == http::Version::HTTP_2 {
        join_cookies(headers);
    }
    strip_hop_by_hop(headers);
    headers.remove(token_header);
    headers.insert(header::HOST, host);
    via.add(headers, version);
    Ok(req)
}

/// RFC 9113 §8.2.3: an HTTP/2 client may split `cookie` into one field per pair, and "if there
/// are multiple cookie header fields after decompression, these MUST be concatenated into a
/// single octet string using the two-octet delimiter of 0x3b, 0x20 (the ASCII string "; ")
/// before being passed into a non-HTTP/2 context, such as an HTTP/1.1 connection". Every
/// origin connection is HTTP/1.1 for a request that came over HTTP/2 and goes to an `http`
/// origin; for `https` origins hyper may speak HTTP/2, where one field is as good.
fn join_cookies(headers: &mut HeaderMap) {
    let mut values = headers.get_all(header::COOKIE).iter();
    let (Some(first), Some(_)) = (values.next(), values.next()) else { return };
    let mut joined = first.as_bytes().to_vec();
    for value in headers.get_all(header::COOKIE).iter().skip(1) {
        joined.extend_from_slice(b"; ");
        joined.extend_from_slice(value.as_bytes());
    }
    if let Ok(value) = HeaderValue::from_bytes(&joined) {
        headers.insert(header::COOKIE, value);
    }
}

/// How long the origin may take: to the response head (`upstream.response_timeout`), and
/// between pieces of the body (`upstream.body_idle_timeout`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timeouts {
    pub(crate) response: Duration,
    pub(crate) body_idle: Duration,
    /// `limits.client_body_idle_timeout`, for the client's request body.
    pub(crate) client_body_idle: Duration,
}

/// Sends `req` upstream and turns failures into the proxy's own 502 / 504 answers. Records the
/// round trip (to the response head) and failures in `metrics`.
pub(crate) async fn send(
    client: &UpstreamClient,
    authority: &Authority,
    req: Request<Incoming>,
    timeouts: Timeouts,
    via: &Via,
    metrics: &Arc<Metrics>,
) -> Response<ProxyBody> {
    // Cheap: a `Uri` clone shares its bytes. Only formatted when something fails.
    let target = req.uri().clone();
    let sent = std::time::Instant::now();
    let req = req.map(|body| UpstreamBody::new(body, timeouts.client_body_idle));
    match tokio::time::timeout(timeouts.response, client.request(authority, req)).await {
        Ok(Ok(resp)) => received(resp, sent, via, metrics, target, timeouts.body_idle),
        Ok(Err(e)) => failed(&*e, &target, metrics),
        Err(_) => timed_out(&target, timeouts.response, metrics),
    }
}

/// The origin's response as the client gets it: hop-by-hop fields out, our `Via` in, the body
/// bounded by `body_idle` ([`IdleLimited`]).
fn received(
    resp: Response<Incoming>,
    sent: std::time::Instant,
    via: &Via,
    metrics: &Arc<Metrics>,
    target: Uri,
    body_idle: Duration,
) -> Response<ProxyBody> {
    metrics.upstream_round_trip(sent.elapsed());
    if let Some(problem) = unforwardable(&resp) {
        metrics.upstream_error("http_protocol_error");
        tracing::warn!(url = %target, problem, "the origin's response cannot be forwarded");
        return answer::text(
            StatusCode::BAD_GATEWAY,
            "http_protocol_error",
            format!("502 Bad Gateway: {problem}\n\nURL: {target}\n"),
        );
    }
    let mut resp = resp;
    // RFC 9112 §6.3 ¶3: a message with both Transfer-Encoding and Content-Length is framed by
    // the transfer coding (hyper read it so), and "an intermediary that chooses to forward the
    // message MUST first remove the received Content-Length field". Left in, hyper's server
    // would trust it and cut the body short.
    if resp.headers().contains_key(header::TRANSFER_ENCODING) {
        resp.headers_mut().remove(header::CONTENT_LENGTH);
    }
    let version = resp.version();
    let mut resp = resp.map(|body| {
        let limited = IdleLimited {
            inner: body,
            idle: IdleTimer::new(body_idle),
            target,
            metrics: metrics.clone(),
        };
        http_body_util::BodyExt::boxed_unsync(limited)
    });
    strip_hop_by_hop(resp.headers_mut());
    via.add(resp.headers_mut(), version);
    resp
}

/// Why an origin's response cannot be passed on as it is, if it cannot:
///
/// * a transfer coding other than `chunked`: hyper undoes only the chunked framing, and the
///   `Transfer-Encoding` field is hop-by-hop, so a `gzip, chunked` body would reach the client
///   still gzip-encoded with nothing saying so (RFC 9112 §6.1);
/// * `101 Switching Protocols`: the proxy forwards no upgrade (`Upgrade` never leaves it), so an
///   origin that switches anyway answered a request it was not sent.
fn unforwardable(resp: &Response<Incoming>) -> Option<String> {
    if resp.status() == StatusCode::SWITCHING_PROTOCOLS {
        return Some(
            "the origin switched protocols (101), but this proxy forwards no protocol upgrade"
                .to_owned(),
        );
    }
    let codings: Vec<String> = resp
        .headers()
        .get_all(header::TRANSFER_ENCODING)
        .iter()
        .flat_map(|v| v.to_str().unwrap_or("(not text)").split(','))
        .map(|c| c.trim().to_ascii_lowercase())
        .filter(|c| !c.is_empty())
        .collect();
    if codings.iter().any(|c| c != "chunked") {
        return Some(format!(
            "the origin's response uses the transfer coding {:?}; this proxy decodes only \
             chunked, and would pass the body on still encoded",
            codings.join(", ")
        ));
    }
    None
}

/// An origin's response body that fails with [`BodyError::Idle`] when the origin sends
/// nothing for `timeout` while the proxy waits for it. hyper then aborts the client's
/// response (no terminating chunk, or fewer bytes than its `Content-Length`), and the origin
/// connection, its body dropped unread, is closed rather than reused.
///
/// Only the time spent waiting on the origin counts: a client that reads slowly stops the
/// proxy from asking for more, and that is `limits.client_write_timeout`'s business.
struct IdleLimited {
    inner: Incoming,
    idle: IdleTimer,
    /// For the log line (a `Uri` clone shares its bytes).
    target: Uri,
    metrics: Arc<Metrics>,
}

impl Body for IdleLimited {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = self.get_mut();
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            this.idle.reset();
            return Poll::Ready(frame.map(|f| f.map_err(BodyError::Upstream)));
        }
        if this.idle.poll_expired(cx).is_pending() {
            return Poll::Pending;
        }
        this.metrics.upstream_error("connection_read_timeout");
        tracing::warn!(
            authority = %this.target.authority().map_or("", |a| a.as_str()),
            url = %this.target,
            timeout = %humantime::format_duration(this.idle.timeout),
            "the origin stalled in the response body; the response is cut off (upstream.body_idle_timeout)"
        );
        Poll::Ready(Some(Err(BodyError::Idle(this.idle.timeout))))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The proxy's answer when the origin could not be reached or answered badly.
#[cold]
fn failed(
    e: &(dyn std::error::Error + 'static),
    target: &Uri,
    metrics: &Metrics,
) -> Response<ProxyBody> {
    // safety: the destination guard refused the origin's address at connect time.
    if let Some(p) = robots_proxy_net::guard::find_prohibited(e) {
        let host = target.host().unwrap_or("").trim_start_matches('[').trim_end_matches(']');
        let told = super::safety::client_reason(host, &p.to_string());
        let mut resp = answer::text(
            StatusCode::FORBIDDEN,
            "destination_ip_prohibited",
            format!("403 Forbidden: {told}\n\nURL: {target}\n"),
        );
        resp.extensions_mut().insert(p.clone());
        return resp;
    }
    let (status, kind, what) = classify(e);
    metrics.upstream_error(kind);
    tracing::debug!(
        target = %target,
        error = %robots_proxy_net::error::describe(e),
        "upstream request failed");
    answer::text(
        status,
        kind,
        format!(
            "{status}: {what} for {target}\n\nCause: {}\n",
            robots_proxy_net::error::describe(e)
        ),
    )
}

/// The proxy's `504` when the origin took longer than `upstream.response_timeout`.
#[cold]
fn timed_out(target: &Uri, response_timeout: Duration, metrics: &Metrics) -> Response<ProxyBody> {
    metrics.upstream_error("http_response_timeout");
    answer::text(
        StatusCode::GATEWAY_TIMEOUT,
        "http_response_timeout",
        format!(
            "504 Gateway Timeout: the origin did not answer {target} within {}\n",
            humantime::format_duration(response_timeout)
        ),
    )
}

/// Maps an upstream error to a status, an RFC 9209 error type and a phrase, by the types in
/// its chain (never by its text).
fn classify(e: &(dyn std::error::Error + 'static)) -> (StatusCode, &'static str, &'static str) {
    let io_kind = find_cause::<std::io::Error>(e).map(std::io::Error::kind);
    if find_cause::<rustls::Error>(e).is_some() {
        return (StatusCode::BAD_GATEWAY, "tls_certificate_error", "TLS with the origin failed");
    }
    if is_connect_failure(e) {
        let unresolved = matches!(
            find_cause::<robots_proxy_net::guard::GuardError>(e),
            Some(
                robots_proxy_net::guard::GuardError::Resolve { .. }
                    | robots_proxy_net::guard::GuardError::NoAddress(_)
            )
        );
        return match io_kind {
            _ if unresolved => {
                (StatusCode::BAD_GATEWAY, "dns_error", "the origin's name could not be resolved")
            }
            Some(std::io::ErrorKind::TimedOut) => (
                StatusCode::GATEWAY_TIMEOUT,
                "connection_timeout",
                "timed out connecting to the origin",
            ),
            Some(std::io::ErrorKind::ConnectionRefused) => {
                (StatusCode::BAD_GATEWAY, "connection_refused", "the origin refused the connection")
            }
            _ => {
                (StatusCode::BAD_GATEWAY, "destination_unavailable", "cannot connect to the origin")
            }
        };
    }
    let hyper_closed = find_cause::<hyper::Error>(e)
        .is_some_and(|h| h.is_incomplete_message() || h.is_closed() || h.is_canceled());
    let io_closed = matches!(
        io_kind,
        Some(
            std::io::ErrorKind::ConnectionReset
                | std::io::ErrorKind::ConnectionAborted
                | std::io::ErrorKind::BrokenPipe
                | std::io::ErrorKind::UnexpectedEof
        )
    );
    if hyper_closed || io_closed {
        return (
            StatusCode::BAD_GATEWAY,
            "http_response_incomplete",
            "the origin closed the connection before a complete response",
        );
    }
    (StatusCode::BAD_GATEWAY, "http_protocol_error", "the origin sent an invalid response")
}

/// The first cause of type `T` in an error's chain, looking also inside `io::Error`s (whose
/// `source` skips the error they wrap: a TLS or guard error travels through hyper as one).
fn find_cause<'a, T: std::error::Error + 'static>(
    e: &'a (dyn std::error::Error + 'static),
) -> Option<&'a T> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if let Some(t) = s.downcast_ref::<T>() {
            return Some(t);
        }
        if let Some(inner) = s.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref()) {
            let inner: &(dyn std::error::Error + 'static) = inner;
            if let Some(t) = find_cause::<T>(inner) {
                return Some(t);
            }
        }
        source = s.source();
    }
    None
}
