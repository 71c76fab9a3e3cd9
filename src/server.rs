//! One way to serve a client connection: HTTP/1.1 or HTTP/2 over any byte stream, with the
//! configured limits applied, for the proxy's listener, the connections read inside an
//! intercepted CONNECT tunnel and the admin listener.
//!
//! The limits a connection gets are an [`HttpSettings`]: how long a client may take to send a
//! request head (`proxy.header_read_timeout`), how many header fields and bytes it may hold
//! (`limits.max_headers`, `limits.max_header_bytes`; HTTP/2's `SETTINGS_MAX_HEADER_LIST_SIZE`
//! is the same byte limit) and whether a `CONNECT` may take the connection over. The framing
//! watch ([`crate::framing`]) reads along on the stream the caller hands in (it must see the
//! bytes hyper reads, so it sits below the server).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Incoming};
use hyper::rt::bounds::Http2ServerConnExec;
use hyper::server::conn::{http1, http2};
use hyper::service::HttpService;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};

use crate::limits::{Activity, LimitsSection, WatchedIo};

/// Stamps an answer the proxy writes itself (on any of its listeners: the proxy's refusals and
/// errors, the admin listener, the key directory and public pages) with
/// `X-Content-Type-Options: nosniff`: none of them is meant to be read as anything but the type
/// it names, whatever outsider text it quotes. The one place that says so; a response
/// forwarded from an origin is never stamped (it goes on as received).
pub(crate) fn stamp_own_answer(headers: &mut http::HeaderMap) {
    headers.insert(http::header::X_CONTENT_TYPE_OPTIONS, http::HeaderValue::from_static("nosniff"));
}

/// The HTTP version a connection is served with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Protocol {
    /// Read the first bytes: the HTTP/2 connection preface (RFC 9113 §3.4) means HTTP/2,
    /// anything else HTTP/1.1. For TLS connections whose ALPN may not say.
    Auto,
    /// HTTP/1.1 (and 1.0).
    Http1,
    /// HTTP/2, as negotiated by ALPN (`h2`).
    Http2,
}

impl Protocol {
    /// The protocol ALPN chose: `h2` is HTTP/2, `http/1.1` HTTP/1.1; without ALPN (or with
    /// another protocol) it is told by the first bytes, so that a client with prior knowledge
    /// of HTTP/2 is served too.
    pub(crate) fn from_alpn(alpn: Option<&[u8]>) -> Protocol {
        match alpn {
            Some(b"h2") => Protocol::Http2,
            Some(b"http/1.1") => Protocol::Http1,
            _ => Protocol::Auto,
        }
    }
}

/// The limits a server applies to its connections.
#[derive(Debug, Clone, Default)]
pub(crate) struct HttpSettings {
    /// How long a client may take to send a request head (and, HTTP/1, how long a keep-alive
    /// connection may sit idle between requests). `None`: hyper's default (30 s).
    header_read_timeout: Option<Duration>,
    /// Most header fields in a request head (HTTP/1). `None`: hyper's default (100).
    max_headers: Option<usize>,
    /// Largest request head in bytes (HTTP/1 head, HTTP/2 header list). `None`: hyper's
    /// defaults.
    max_header_bytes: Option<usize>,
    /// Whether a `CONNECT` answered 2xx (HTTP/1) hands the connection to the service.
    /// HTTP/2 CONNECT streams are always handed over.
    upgrades: bool,
}

impl HttpSettings {
    /// hyper's defaults, with request heads bounded by `header_read_timeout` when given.
    pub(crate) fn new(header_read_timeout: Option<Duration>) -> Self {
        HttpSettings { header_read_timeout, ..HttpSettings::default() }
    }

    /// With the head limits of `limits` (`limits.max_headers`, `limits.max_header_bytes`).
    pub(crate) fn with_limits(mut self, limits: &LimitsSection) -> Self {
        self.max_headers = Some(limits.max_headers);
        self.max_header_bytes = Some(limits.max_header_bytes());
        self
    }

    /// With `CONNECT` taking the connection over (`hyper::upgrade::on`).
    pub(crate) fn with_upgrades(mut self) -> Self {
        self.upgrades = true;
        self
    }

    fn http1(&self) -> http1::Builder {
        let mut builder = http1::Builder::new();
        builder.timer(TokioTimer::new()).keep_alive(true);
        if let Some(timeout) = self.header_read_timeout {
            builder.header_read_timeout(timeout);
        }
        if let Some(max) = self.max_headers {
            builder.max_headers(max);
        }
        if let Some(max) = self.max_header_bytes {
            builder.max_header_size(max);
        }
        builder
    }

    fn http2(&self) -> http2::Builder<TokioExecutor> {
        let mut builder = http2::Builder::new(TokioExecutor::new());
        builder.timer(TokioTimer::new());
        // A client that sends no frame for as long as a request head may take is sent a PING,
        // and one that does not ack it within that time again is let go: also after GOAWAY,
        // where finishing waits for a PING's ack (review-house D1). A client waiting for a
        // slow answer acks, so its streams run on.
        if let Some(idle) = self.header_read_timeout {
            builder.keep_alive_interval(idle).keep_alive_timeout(idle);
        }
        if let Some(max) = self.max_header_bytes {
            builder.max_header_list_size(u32::try_from(max).unwrap_or(u32::MAX));
        }
        builder
    }
}

/// Why serving a connection ended early.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum ServeError {
    /// hyper gave up on the connection (a malformed message, an I/O error, a timeout).
    #[error(transparent)]
    Http(#[from] hyper::Error),
    /// Reading the first bytes (to tell HTTP/2 from HTTP/1.1) failed.
    #[error("reading the connection preface failed")]
    Preface(#[source] io::Error),
}

/// Serves `io` with `service` until the client is done, or, once `stop` completes, until the
/// request in progress is answered (graceful shutdown: HTTP/1 closes after it, HTTP/2 sends
/// `GOAWAY`).
pub(crate) async fn serve_connection<I, S, B>(
    io: I,
    protocol: Protocol,
    settings: &HttpSettings,
    service: S,
    stop: impl Future<Output = ()>,
) -> Result<(), ServeError>
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: HttpService<Incoming, ResBody = B>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: Body + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    TokioExecutor: Http2ServerConnExec<S::Future, B>,
{
    let version = match protocol {
        Protocol::Http1 => Version::Http1,
        // HTTP/2 by ALPN still waits for the client's preface, and hyper's idle limit starts
        // only after it: the preface is read here, under the same bound, as for `Auto`.
        Protocol::Http2 | Protocol::Auto => {
            let mut io = io;
            tokio::pin!(stop);
            // The first bytes are part of the first request head: a client that sends none
            // (or too few to tell) for as long as a head may take is let go, as an idle HTTP/1
            // connection is, so a silent connection never holds its slot (review-house D1).
            let wait = settings.header_read_timeout.unwrap_or(HYPER_HEAD_WAIT);
            let (is_h2, prefix) = tokio::select! {
                read = tokio::time::timeout(wait, read_preface(&mut io)) => match read {
                    Ok(read) => read.map_err(ServeError::Preface)?,
                    Err(_) => return Ok(()),
                },
                () = &mut stop => return Ok(()),
            };
            let h2 = is_h2 || protocol == Protocol::Http2;
            let version = if h2 { Version::Http2 } else { Version::Http1 };
            return serve_as(Rewind::new(prefix, io), version, settings, service, stop).await;
        }
    };
    serve_as(io, version, settings, service, stop).await
}

/// How long hyper lets an HTTP/1 client take to send a request head when no
/// `header_read_timeout` is given; the preface read of a connection with no limit of its own
/// waits no longer.
const HYPER_HEAD_WAIT: Duration = Duration::from_secs(30);

/// Who may connect to a side listener (the admin listener, the key directory), how many at
/// once, and for how long idle. Connections past a cap, or from a client not allowed, are
/// closed as soon as they are accepted, so they hold no file descriptor the proxy needs.
#[derive(Debug)]
pub(crate) struct SideLimits {
    /// The clients allowed; `None`: every client.
    pub(crate) clients: Option<crate::access::ClientAcl>,
    /// Most connections open at once.
    pub(crate) max_connections: usize,
    /// Most connections open at once from one client address.
    pub(crate) per_client: usize,
    /// How long a client may take to send a request head, and a kept-alive connection may sit
    /// idle between requests.
    pub(crate) idle: Duration,
}

/// Logs a connection a side listener closed at once: the first ten at `warn`, then one in a
/// thousand (the others at `debug`), so a flood cannot flood the log.
fn log_refusal(name: &str, peer: std::net::SocketAddr, why: &str, refused: &mut u64) {
    *refused += 1;
    if *refused <= 10 || refused.is_multiple_of(1000) {
        tracing::warn!(listener = name, client = %peer, refused_so_far = *refused, "connection refused: {why}");
    } else {
        tracing::debug!(listener = name, client = %peer, "connection refused: {why}");
    }
}

/// Serves a side listener (the admin listener, the key directory) until `shutdown`
/// completes: every connection HTTP/1.1, admitted by `limits`, served by a service from
/// `make_service`, given the address the client connected to (the listener's own, a specific
/// one for a wildcard bind). Connections open at shutdown finish on their own (short
/// requests; the process exiting ends them). `name` names the listener in logs.
pub(crate) async fn serve_side_listener<F, S, B>(
    listener: tokio::net::TcpListener,
    name: &'static str,
    limits: SideLimits,
    make_service: F,
    shutdown: impl Future<Output = ()>,
) where
    F: Fn(std::net::SocketAddr) -> S,
    S: HttpService<Incoming, ResBody = B> + Send + 'static,
    S::Future: Send,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    tokio::pin!(shutdown);
    let open = crate::limits::ClientCounts::default();
    let mut refused = 0u64;
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(e) => {
                    tracing::warn!(listener = name, error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => return,
        };
        let client = peer.ip().to_canonical();
        if limits.clients.as_ref().is_some_and(|acl| !acl.allows(client)) {
            log_refusal(name, peer, "client address not allowed on this listener", &mut refused);
            continue;
        }
        let Some(counted) = open.take(client, limits.max_connections, limits.per_client) else {
            log_refusal(name, peer, "too many connections", &mut refused);
            continue;
        };
        let Ok(local) = stream.local_addr() else { continue };
        let service = make_service(local);
        let idle = limits.idle;
        tokio::spawn(async move {
            let _counted = counted;
            let settings = HttpSettings::new(Some(idle));
            let pending = std::future::pending::<()>();
            let serving = serve_connection(stream, Protocol::Http1, &settings, service, pending);
            if let Err(e) = serving.await {
                tracing::debug!(listener = name, client = %peer, error = %e, "connection ended with an error");
            }
        });
    }
}

/// A protocol once it is known.
#[derive(Debug, Clone, Copy)]
enum Version {
    Http1,
    Http2,
}

/// [`serve_connection`] once the protocol is known.
async fn serve_as<I, S, B>(
    io: I,
    version: Version,
    settings: &HttpSettings,
    service: S,
    stop: impl Future<Output = ()>,
) -> Result<(), ServeError>
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: HttpService<Incoming, ResBody = B>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: Body + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    TokioExecutor: Http2ServerConnExec<S::Future, B>,
{
    // Each protocol's connection is boxed on its own: an idle client connection keeps its
    // task's future for as long as it is open, and an async function's future is as large as
    // its largest state. Unboxed, every HTTP/1 connection would carry room for an HTTP/2 one
    // (and the task, past tokio's 16 KiB, a second box); boxed, it holds what it uses.
    match version {
        Version::Http1 if settings.upgrades => {
            let conn = settings.http1().serve_connection(TokioIo::new(io), service);
            Box::pin(drain(conn.with_upgrades(), stop)).await
        }
        Version::Http1 => {
            let conn = settings.http1().serve_connection(TokioIo::new(io), service);
            Box::pin(drain(conn, stop)).await
        }
        // HTTP/2 has no header read timeout that also ends idle connections, as HTTP/1's
        // does: a connection on which the client sends nothing for that long is asked to
        // finish (GOAWAY; streams still open, tunnels included, run to their end), so an idle
        // client does not keep its connection slot. Finishing waits for the client (hyper
        // sends GOAWAY and a PING, and waits for its ack); a client that never acks is let go
        // by the keep-alive PINGs of `http2()` (review-house D1).
        Version::Http2 => match settings.header_read_timeout {
            Some(idle) => {
                let activity = std::sync::Arc::new(Activity::new());
                let seen = activity.clone();
                let quiet = async move { seen.quiet(idle).await };
                let io = WatchedIo::reads(io, activity);
                let conn = settings.http2().serve_connection(TokioIo::new(io), service);
                let stop = async move {
                    tokio::select! {
                        () = stop => {}
                        () = quiet => {}
                    }
                };
                Box::pin(drain(conn, stop)).await
            }
            None => {
                let conn = settings.http2().serve_connection(TokioIo::new(io), service);
                Box::pin(drain(conn, stop)).await
            }
        },
    }
}

/// The HTTP/2 connection preface (RFC 9113 §3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Reads until the bytes either are the HTTP/2 preface or cannot be (at most its 24 bytes,
/// as hyper-util's automatic server does): whether they are, and what was read (for the server
/// to read again).
async fn read_preface<I: AsyncRead + Unpin>(io: &mut I) -> io::Result<(bool, Bytes)> {
    let mut buf = [0u8; H2_PREFACE.len()];
    let mut filled = 0;
    while filled < buf.len() {
        let n = io.read(&mut buf[filled..]).await?;
        filled += n;
        if n == 0 || buf[..filled] != H2_PREFACE[..filled] {
            return Ok((false, Bytes::copy_from_slice(&buf[..filled])));
        }
    }
    Ok((true, Bytes::copy_from_slice(&buf)))
}

/// A hyper server connection that can be asked to finish gracefully.
trait Drain: Future<Output = Result<(), hyper::Error>> {
    fn drain(self: Pin<&mut Self>);
}

impl<I, S, B> Drain for http1::Connection<I, S>
where
    S: HttpService<Incoming, ResBody = B>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    I: hyper::rt::Read + hyper::rt::Write + Unpin + 'static,
    B: Body + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    fn drain(self: Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}

impl<I, S, B> Drain for http1::UpgradeableConnection<I, S>
where
    S: HttpService<Incoming, ResBody = B>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    B: Body + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    fn drain(self: Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}

impl<I, S, B> Drain for http2::Connection<I, S, TokioExecutor>
where
    S: HttpService<Incoming, ResBody = B>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    I: hyper::rt::Read + hyper::rt::Write + Unpin + 'static,
    B: Body + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    TokioExecutor: Http2ServerConnExec<S::Future, B>,
{
    fn drain(self: Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}

/// Runs `conn`; when `stop` completes first, asks it to finish gracefully and waits for that.
async fn drain<C: Drain>(conn: C, stop: impl Future<Output = ()>) -> Result<(), ServeError> {
    tokio::pin!(conn);
    tokio::pin!(stop);
    let result = tokio::select! {
        r = conn.as_mut() => r,
        () = &mut stop => {
            conn.as_mut().drain();
            conn.await
        }
    };
    Ok(result?)
}

/// A stream that first yields bytes already read from it.
pub(crate) struct Rewind<T> {
    prefix: Option<Bytes>,
    inner: T,
}

impl<T> Rewind<T> {
    /// `inner`, with `prefix` read again first.
    pub(crate) fn new(prefix: Bytes, inner: T) -> Self {
        Rewind { prefix: (!prefix.is_empty()).then_some(prefix), inner }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Rewind<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if let Some(mut prefix) = self.prefix.take() {
            let n = prefix.len().min(buf.remaining());
            buf.put_slice(&prefix.split_to(n));
            if !prefix.is_empty() {
                self.prefix = Some(prefix);
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Rewind<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_preface_tells_http2_and_keeps_what_was_read() {
        let mut h2 = &b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x12\x04"[..];
        let (is_h2, read) = read_preface(&mut h2).await.unwrap();
        assert!(is_h2);
        assert_eq!(&read[..], H2_PREFACE, "nothing past the preface is read");
        let mut h1 = &b"PRIVATE / HTTP/1.1\r\n"[..];
        let (is_h2, read) = read_preface(&mut h1).await.unwrap();
        assert!(!is_h2);
        assert!(b"PRIVATE / HTTP/1.1\r\n".starts_with(&read), "{read:?}");
        let mut rewound = Rewind::new(read, h1);
        let mut all = Vec::new();
        rewound.read_to_end(&mut all).await.unwrap();
        assert_eq!(all, b"PRIVATE / HTTP/1.1\r\n", "the server reads every byte");
        let mut short = &b"PRI * HT"[..];
        assert_eq!(
            read_preface(&mut short).await.unwrap(),
            (false, Bytes::from_static(b"PRI * HT"))
        );
    }
}
