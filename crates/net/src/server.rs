//! One way to serve a client connection: HTTP/1.1 or HTTP/2 over any byte stream, with the
//! configured limits applied, for the proxy's listener, the connections read inside an
//! intercepted CONNECT tunnel and the admin listener.
//!
//! What bounds a connection in time is one [`ConnectionTimeouts`] value, applied here to every
//! state of the connection (the table in `docs/architecture.md`, "What bounds a connection",
//! names the field for each state). What bounds a request head in size is an [`HttpSettings`]:
//! how many header fields and bytes it may hold (`limits.max_headers`,
//! `limits.max_header_bytes`; HTTP/2's `SETTINGS_MAX_HEADER_LIST_SIZE` is the same byte limit)
//! and whether a `CONNECT` may take the connection over. The framing watch
//! (`robots_proxy_framing`) reads along on the stream the caller hands in (it must see the bytes
//! hyper reads, so it sits below the server).

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
pub fn stamp_own_answer(headers: &mut http::HeaderMap) {
    headers.insert(http::header::X_CONTENT_TYPE_OPTIONS, http::HeaderValue::from_static("nosniff"));
}

/// The HTTP version a connection is served with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
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
    pub fn from_alpn(alpn: Option<&[u8]>) -> Protocol {
        match alpn {
            Some(b"h2") => Protocol::Http2,
            Some(b"http/1.1") => Protocol::Http1,
            _ => Protocol::Auto,
        }
    }
}

/// What bounds a client connection in time, in each of its states: one value per listener,
/// built once from the configuration (the proxy's listeners: `proxy::connection_timeouts`,
/// which also says which of its keys a reload applies), and read by a connection when it is
/// accepted (a CONNECT reads the tunnel's when it arrives). Every wait for a client is bounded
/// by one of these fields; `docs/architecture.md` ("What bounds a connection") has the table
/// of states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionTimeouts {
    /// The client sends nothing: its TLS handshake, its first bytes (the HTTP/2 preface, the
    /// first byte inside an intercepted tunnel), a request head, the next request on a
    /// kept-alive connection (HTTP/1; HTTP/2 is then sent `GOAWAY`) and the ack of a PING
    /// (also the one after `GOAWAY`). `proxy.header_read_timeout` on the proxy's listeners.
    pub head: Duration,
    /// The client stops sending a request body: `limits.client_body_idle_timeout`.
    pub body: Duration,
    /// The client stops reading what is written to it (a response, tunnel bytes):
    /// `limits.client_write_timeout`.
    pub write: Duration,
    /// After the server asked the connection to finish (shutdown): how long the requests in
    /// progress may take to be answered before the connection is dropped.
    /// `proxy.shutdown_grace`.
    pub drain: Duration,
    /// A tunnel (`https.mode = "tunnel"`) in which nothing moved either way:
    /// `https.tunnel_idle_timeout` (reloadable: a tunnel keeps the one in force when its
    /// CONNECT arrived).
    pub tunnel_idle: Duration,
}

/// A client did not finish a step (a TLS handshake, its first bytes) within
/// [`ConnectionTimeouts::head`].
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the client sent nothing for {} (the connection's head timeout)", humantime::format_duration(*.0))]
pub struct Stalled(pub Duration);

impl ConnectionTimeouts {
    /// The admin listener's: a request head within 10 s, and every other state as long (it
    /// reads no bodies and opens no tunnels).
    pub const ADMIN: ConnectionTimeouts = ConnectionTimeouts::side(Duration::from_secs(10));
    /// The key directory's (`signing.directory_listen`, a public listener): 5 s for every
    /// state.
    pub const KEY_DIRECTORY: ConnectionTimeouts = ConnectionTimeouts::side(Duration::from_secs(5));

    /// One bound for every state, for a side listener (short requests, no bodies, no tunnels).
    const fn side(every: Duration) -> ConnectionTimeouts {
        ConnectionTimeouts {
            head: every,
            body: every,
            write: every,
            drain: every,
            tunnel_idle: every,
        }
    }

    /// Runs `step`, a step the client must take before a request head can come (a TLS
    /// handshake, its first bytes), bounded by [`ConnectionTimeouts::head`].
    pub async fn first_bytes<F: Future>(&self, step: F) -> Result<F::Output, Stalled> {
        tokio::time::timeout(self.head, step).await.map_err(|_| Stalled(self.head))
    }
}

/// The head limits a server applies to its connections' requests.
#[derive(Debug, Clone, Copy, Default)]
pub struct HttpSettings {
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
    /// With the head limits of `limits` (`limits.max_headers`, `limits.max_header_bytes`).
    pub fn with_limits(mut self, limits: &LimitsSection) -> Self {
        self.max_headers = Some(limits.max_headers);
        self.max_header_bytes = Some(limits.max_header_bytes());
        self
    }

    /// With `CONNECT` taking the connection over (`hyper::upgrade::on`).
    pub fn with_upgrades(mut self) -> Self {
        self.upgrades = true;
        self
    }

    /// HTTP/1: a request head, and the wait for the next one on a kept-alive connection, within
    /// `timeouts.head` (hyper starts that timer whenever it waits for a head).
    fn http1(&self, timeouts: &ConnectionTimeouts) -> http1::Builder {
        let mut builder = http1::Builder::new();
        builder.timer(TokioTimer::new()).keep_alive(true);
        builder.header_read_timeout(timeouts.head);
        if let Some(max) = self.max_headers {
            builder.max_headers(max);
        }
        if let Some(max) = self.max_header_bytes {
            builder.max_header_size(max);
        }
        builder
    }

    fn http2(&self, timeouts: &ConnectionTimeouts) -> http2::Builder<TokioExecutor> {
        let mut builder = http2::Builder::new(TokioExecutor::new());
        builder.timer(TokioTimer::new());
        // A client that sends no frame for as long as a request head may take is sent a PING,
        // and one that does not ack it within that time again is let go: also after GOAWAY,
        // where finishing waits for a PING's ack (review-house D1). A client waiting for a
        // slow answer acks, so its streams run on.
        builder.keep_alive_interval(timeouts.head).keep_alive_timeout(timeouts.head);
        if let Some(max) = self.max_header_bytes {
            builder.max_header_list_size(u32::try_from(max).unwrap_or(u32::MAX));
        }
        builder
    }
}

/// Why serving a connection ended early.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// hyper gave up on the connection (a malformed message, an I/O error, a timeout).
    #[error(transparent)]
    Http(#[from] hyper::Error),
    /// Reading the first bytes (to tell HTTP/2 from HTTP/1.1) failed.
    #[error("reading the connection preface failed")]
    Preface(#[source] io::Error),
    /// Asked to finish (shutdown), the connection was still busy after
    /// [`ConnectionTimeouts::drain`], and was dropped.
    #[error(
        "the connection did not finish within {} of being asked to (shutdown); dropped",
        humantime::format_duration(*.0)
    )]
    Unfinished(Duration),
}

/// Serves `io` with `service` until the client is done, or, once `stop` completes, until the
/// request in progress is answered (graceful shutdown: HTTP/1 closes after it, HTTP/2 sends
/// `GOAWAY`), for at most `timeouts.drain`. Every wait for the client is bounded by a field of
/// `timeouts` (see [`ConnectionTimeouts`]).
pub async fn serve_connection<I, S, B>(
    io: I,
    protocol: Protocol,
    settings: &HttpSettings,
    timeouts: &ConnectionTimeouts,
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
            let (is_h2, prefix) = tokio::select! {
                read = timeouts.first_bytes(read_preface(&mut io)) => match read {
                    Ok(read) => read.map_err(ServeError::Preface)?,
                    Err(_) => return Ok(()),
                },
                () = &mut stop => return Ok(()),
            };
            let h2 = is_h2 || protocol == Protocol::Http2;
            let version = if h2 { Version::Http2 } else { Version::Http1 };
            let io = Rewind::new(prefix, io);
            return serve_as(io, version, settings, timeouts, service, stop).await;
        }
    };
    serve_as(io, version, settings, timeouts, service, stop).await
}

/// Who may connect to a side listener (the admin listener, the key directory), how many at
/// once, and for how long idle. Connections past a cap, or from a client not allowed, are
/// closed as soon as they are accepted, so they hold no file descriptor the proxy needs.
#[derive(Debug)]
pub struct SideLimits {
    /// The clients allowed; `None`: every client.
    pub clients: Option<robots_proxy_access::ClientAcl>,
    /// Most connections open at once.
    pub max_connections: usize,
    /// Most connections open at once from one client address.
    pub per_client: usize,
    /// What bounds its connections in time ([`ConnectionTimeouts::ADMIN`],
    /// [`ConnectionTimeouts::KEY_DIRECTORY`]).
    pub timeouts: ConnectionTimeouts,
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
/// one for a wildcard bind), bounded by `limits.timeouts`. Connections open at shutdown are
/// asked to finish, and dropped after `limits.timeouts.drain`. `name` names the listener in
/// logs.
pub async fn serve_side_listener<F, S, B>(
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
    // Told to every connection at shutdown, for it to finish (see `drain`).
    let (stop, stopping) = tokio::sync::watch::channel(false);
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
            () = &mut shutdown => {
                stop.send_replace(true);
                return;
            }
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
        let timeouts = limits.timeouts;
        let mut stopping = stopping.clone();
        tokio::spawn(async move {
            let _counted = counted;
            // Writes to a client that reads nothing fail after `timeouts.write`.
            let stream = crate::limits::ClientIo::new(stream, None, timeouts.write, None);
            let settings = HttpSettings::default();
            let stop = async move { drop(stopping.wait_for(|stop| *stop).await) };
            let serving =
                serve_connection(stream, Protocol::Http1, &settings, &timeouts, service, stop);
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
    timeouts: &ConnectionTimeouts,
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
    let drain = timeouts.drain;
    match version {
        Version::Http1 if settings.upgrades => {
            let conn = settings.http1(timeouts).serve_connection(TokioIo::new(io), service);
            Box::pin(drain_within(conn.with_upgrades(), stop, std::future::pending(), drain)).await
        }
        Version::Http1 => {
            let conn = settings.http1(timeouts).serve_connection(TokioIo::new(io), service);
            Box::pin(drain_within(conn, stop, std::future::pending(), drain)).await
        }
        // HTTP/2 has no header read timeout that also ends idle connections, as HTTP/1's
        // does: a connection on which the client sends nothing for `timeouts.head` is asked to
        // finish (GOAWAY; streams still open, tunnels included, run to their end), so an idle
        // client does not keep its connection slot. Finishing waits for the client (hyper
        // sends GOAWAY and a PING, and waits for its ack); a client that never acks is let go
        // by the keep-alive PINGs of `http2()` (review-house D1).
        Version::Http2 => {
            let activity = std::sync::Arc::new(Activity::new());
            let seen = activity.clone();
            let head = timeouts.head;
            let quiet = async move { seen.quiet(head).await };
            let io = WatchedIo::reads(io, activity);
            let conn = settings.http2(timeouts).serve_connection(TokioIo::new(io), service);
            Box::pin(drain_within(conn, stop, quiet, drain)).await
        }
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

/// Runs `conn`. When `quiet` completes (the client went silent), asks it to finish and lets
/// it: its open streams run on, and a client that stops acking is let go by the connection's
/// own keep-alive. When `stop` completes (shutdown), asks it to finish and waits at most
/// `drain` for that.
async fn drain_within<C: Drain>(
    conn: C,
    stop: impl Future<Output = ()>,
    quiet: impl Future<Output = ()>,
    drain: Duration,
) -> Result<(), ServeError> {
    tokio::pin!(conn);
    tokio::pin!(stop);
    tokio::select! {
        r = conn.as_mut() => return Ok(r?),
        () = &mut stop => {}
        () = quiet => {
            conn.as_mut().drain();
            tokio::select! {
                r = conn.as_mut() => return Ok(r?),
                () = &mut stop => {}
            }
        }
    }
    conn.as_mut().drain();
    match tokio::time::timeout(drain, conn).await {
        Ok(r) => Ok(r?),
        Err(_) => Err(ServeError::Unfinished(drain)),
    }
}

/// A stream that first yields bytes already read from it.
pub struct Rewind<T> {
    prefix: Option<Bytes>,
    inner: T,
}

impl<T> Rewind<T> {
    /// `inner`, with `prefix` read again first.
    pub fn new(prefix: Bytes, inner: T) -> Self {
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
