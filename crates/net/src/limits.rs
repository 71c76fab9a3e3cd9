//! Limits that keep one client (or many) from exhausting the proxy: how many connections it
//! serves, how large a request head may be, and how long a client may leave a response unread.
//!
//! What bounds a client connection in time (`proxy.header_read_timeout`, this section's
//! `client_write_timeout` and `client_body_idle_timeout`, `https.tunnel_idle_timeout`,
//! `proxy.shutdown_grace`) is one `server::ConnectionTimeouts` value per listener; the I/O
//! wrappers here apply two of its fields (`write` in [`ClientIo`], `head` and `tunnel_idle`
//! through [`Activity`]). The limits toward origins stay with them: `upstream.pool_idle_timeout`,
//! `robots.max_body`, `robots.max_redirects` and `robots.max_concurrent_fetches`.

use std::collections::HashMap;
use std::future::Future as _;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Sleep;

use robots_proxy_framing::{FramingWatch, Verdicts};
use robots_proxy_units::bounds::{
    because, count, duration, size, wide, Bound, DAY, POSITIVE, SECOND,
};
use robots_proxy_units::{raw_section, ByteSize, Problems};

/// What happens to a connection beyond `limits.max_connections`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum WhenFull {
    /// Stop accepting until a connection closes: new ones wait in the kernel's accept queue
    /// (and are refused by the kernel once it is full).
    Wait,
    /// Accept and answer `503 Service Unavailable` at once, then close.
    Refuse,
}

/// `[limits]`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self", default, deny_unknown_fields)]
pub struct LimitsSection {
    /// Client connections served at once (CONNECT tunnels included).
    pub max_connections: usize,
    /// `wait` or `refuse`, beyond `max_connections`.
    pub when_full: WhenFull,
    /// Longest request-target; longer ones get `414 URI Too Long`.
    pub max_request_line: ByteSize,
    /// Largest request head (request line and header fields); larger ones get `431`.
    pub max_header_bytes: ByteSize,
    /// Most header fields in a request; more get `431`.
    pub max_headers: usize,
    /// A client that reads nothing of its response for this long is disconnected.
    #[serde(with = "humantime_serde")]
    pub client_write_timeout: Duration,
    /// A client that sends nothing of its request body for this long has the request failed
    /// and its connection closed (the origin connection is dropped).
    #[serde(with = "humantime_serde")]
    pub client_body_idle_timeout: Duration,
    /// Client connections served at once from one client address (CONNECT tunnels
    /// included); past it a connection is answered `503` and closed. 0: no cap per client.
    pub max_connections_per_client: usize,
    /// With `access.users_file`: a connection that has not sent a request with valid
    /// credentials this long after it was accepted is closed.
    #[serde(with = "humantime_serde")]
    pub auth_timeout: Duration,
    /// Whether the kernel may back the heap with transparent huge pages (Linux; set at start).
    /// `false` (the default) turns them off for the process: about half the memory per site at
    /// many sites.
    pub transparent_huge_pages: bool,
}

impl Default for LimitsSection {
    fn default() -> Self {
        LimitsSection {
            max_connections: 10_000,
            when_full: WhenFull::Wait,
            max_request_line: ByteSize(16 * 1024),
            max_header_bytes: ByteSize(64 * 1024),
            max_headers: 100,
            client_write_timeout: Duration::from_secs(60),
            client_body_idle_timeout: Duration::from_secs(60),
            max_connections_per_client: 1024,
            auth_timeout: Duration::from_secs(10),
            transparent_huge_pages: false,
        }
    }
}

/// hyper cannot read a request head into less (its `max_buf_size` minimum is 8 KiB).
pub(crate) const MIN_HEADER_BYTES: ByteSize = ByteSize(8 * 1024);
/// A generous ceiling: hyper keeps a whole head in memory, per connection.
pub(crate) const MAX_HEADER_BYTES: ByteSize = ByteSize(1024 * 1024);

impl LimitsSection {
    /// Longest request-target, in bytes.
    pub fn max_request_line(&self) -> usize {
        usize::try_from(self.max_request_line.0).unwrap_or(usize::MAX)
    }

    /// Largest request head, in bytes.
    pub fn max_header_bytes(&self) -> usize {
        usize::try_from(self.max_header_bytes.0).unwrap_or(usize::MAX)
    }
}

raw_section!(LimitsSection, RawLimitsSection, "limits");

/// The bounds of `[limits]`.
pub const LIMITS_BOUNDS: &[Bound<LimitsSection>] = &[
    count("limits.max_connections", |c| wide(c.max_connections), 1, 1 << 20),
    size("limits.max_request_line", |c| c.max_request_line, 256, MAX_HEADER_BYTES.0),
    size("limits.max_header_bytes", |c| c.max_header_bytes, MIN_HEADER_BYTES.0, MAX_HEADER_BYTES.0),
    because(
        count("limits.max_headers", |c| wide(c.max_headers), 1, 8192),
        "each request head is parsed into an array of this many headers",
    ),
    // As for header_read_timeout: below a second a response could be cut off as it is written.
    duration("limits.client_write_timeout", |c| c.client_write_timeout, SECOND, DAY),
    duration("limits.client_body_idle_timeout", |c| c.client_body_idle_timeout, POSITIVE, DAY),
    because(
        count(
            "limits.max_connections_per_client",
            |c| wide(c.max_connections_per_client),
            0,
            1 << 20,
        ),
        "0 means no cap per client",
    ),
    // Below a second a client could not send its first request in time.
    duration("limits.auth_timeout", |c| c.auth_timeout, SECOND, Duration::from_secs(3600)),
];

impl TryFrom<RawLimitsSection> for LimitsSection {
    type Error = Problems;

    /// The bounds, and the request line within the head.
    fn try_from(raw: RawLimitsSection) -> Result<Self, Problems> {
        let l = raw.0;
        let mut problems = Problems::new();
        problems.bounds(LIMITS_BOUNDS, &l);
        problems.need(l.max_request_line <= l.max_header_bytes, "limits.max_request_line", || {
            format!(
                "{} is more than limits.max_header_bytes ({})",
                l.max_request_line, l.max_header_bytes
            )
        });
        problems.or_build(|| l)
    }
}

/// The connections open on a listener: in all, and per client address. One mechanism for
/// every listener that caps connections per client (the proxy's, the admin listener, the key
/// directory).
#[derive(Debug, Clone, Default)]
pub struct ClientCounts {
    open: Arc<Mutex<OpenCount>>,
}

#[derive(Debug, Default)]
struct OpenCount {
    total: usize,
    per_client: HashMap<IpAddr, usize>,
}

impl ClientCounts {
    /// Counts a connection from `client` (canonical: an IPv4-mapped address as IPv4), or
    /// `None` when `max_total` connections are open, or `per_client` from that client.
    pub(crate) fn take(
        &self,
        client: IpAddr,
        max_total: usize,
        per_client: usize,
    ) -> Option<Counted> {
        let client = client.to_canonical();
        let mut count = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let mine = count.per_client.get(&client).copied().unwrap_or(0);
        if count.total >= max_total || mine >= per_client {
            return None;
        }
        count.total += 1;
        count.per_client.insert(client, mine + 1);
        Some(Counted { open: self.open.clone(), client })
    }
}

/// One open connection counted in a [`ClientCounts`]; uncounted on drop.
#[derive(Debug)]
pub struct Counted {
    open: Arc<Mutex<OpenCount>>,
    client: IpAddr,
}

impl Drop for Counted {
    fn drop(&mut self) {
        let mut count = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        count.total = count.total.saturating_sub(1);
        if let Some(n) = count.per_client.get_mut(&self.client) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                count.per_client.remove(&self.client);
            }
        }
    }
}

/// Admits client connections up to `limits.max_connections`, and
/// `limits.max_connections_per_client` from one client address.
#[derive(Debug, Clone)]
pub struct ConnectionGate {
    slots: Arc<Semaphore>,
    clients: ClientCounts,
    per_client: usize,
    when_full: WhenFull,
    max_head: usize,
}

impl ConnectionGate {
    /// A gate for `limits`.
    pub fn new(limits: &LimitsSection) -> Self {
        let max = limits.max_connections.clamp(1, Semaphore::MAX_PERMITS);
        let per_client = match limits.max_connections_per_client {
            0 => usize::MAX,
            n => n,
        };
        ConnectionGate {
            slots: Arc::new(Semaphore::new(max)),
            clients: ClientCounts::default(),
            per_client,
            when_full: limits.when_full,
            max_head: limits.max_header_bytes(),
        }
    }

    /// In `wait` mode, a free slot, waited for *before* accepting, so excess connections stay
    /// in the kernel's accept queue; `None` in `refuse` mode.
    pub async fn wait_for_slot(&self) -> Option<OwnedSemaphorePermit> {
        match self.when_full {
            // The semaphore is never closed, so this only fails if that changes.
            WhenFull::Wait => self.slots.clone().acquire_owned().await.ok(),
            WhenFull::Refuse => None,
        }
    }

    /// The accepted `stream` as a [`ClientIo`] holding its slot, or `None` (the stream is
    /// answered `503` and closed) when every slot is taken in `refuse` mode. With `watch`, a
    /// [`FramingWatch`] reads along (not for a TLS listener, whose bytes are encrypted: the
    /// watch goes on the decrypted stream there). A write that waits for the client to read
    /// fails after `write_timeout` (the connection's `ConnectionTimeouts::write`).
    pub fn admit(
        &self,
        stream: TcpStream,
        peer: SocketAddr,
        slot: Option<OwnedSemaphorePermit>,
        watch: bool,
        write_timeout: Duration,
    ) -> Option<ClientIo> {
        // Per client first: a connection over its client's cap gives back the slot it may
        // have waited for at once, so one client cannot hold every slot.
        let Some(counted) = self.clients.take(peer.ip(), usize::MAX, self.per_client) else {
            tracing::warn!(client = %peer, "connection refused: limits.max_connections_per_client reached");
            let _ = stream.try_write(BUSY_CLIENT);
            return None;
        };
        let slot = match slot {
            Some(slot) => slot,
            None => match self.slots.clone().try_acquire_owned() {
                Ok(slot) => slot,
                Err(_) => {
                    tracing::warn!(client = %peer, "connection refused: limits.max_connections reached");
                    // One non-blocking write into an empty socket buffer: it fits, and if not,
                    // the client sees the connection close, which says the same.
                    let _ = stream.try_write(BUSY);
                    return None;
                }
            },
        };
        let framing = watch.then(|| FramingWatch::new(self.max_head));
        let mut io = ClientIo::new(stream, Some(slot), write_timeout, framing);
        io._counted = Some(counted);
        Some(io)
    }

    /// Connection slots free now.
    pub fn available(&self) -> usize {
        self.slots.available_permits()
    }
}

const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\n\
Content-Type: text/plain; charset=utf-8\r\n\
Proxy-Status: robots-proxy;error=connection_limit_reached;details=\"limits.max_connections\"\r\n\
Retry-After: 1\r\n\
Connection: close\r\n\
Content-Length: 65\r\n\
\r\n\
503 Service Unavailable: the proxy serves too many connections.\r\n";

const BUSY_CLIENT: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\n\
Content-Type: text/plain; charset=utf-8\r\n\
Proxy-Status: robots-proxy;error=connection_limit_reached;details=\"limits.max_connections_per_client\"\r\n\
Retry-After: 1\r\n\
Connection: close\r\n\
Content-Length: 77\r\n\
\r\n\
503 Service Unavailable: this client has too many connections to the proxy.\r\n";

/// A client connection: holds its connection slot for as long as it lives (through a CONNECT
/// upgrade too, since the tunnel owns the same I/O), fails a write that has waited for the
/// client to read for `write_timeout`, and lets a [`FramingWatch`] read along.
///
/// Only writes are timed: a read may rightly wait while the proxy itself waits (for robots.txt
/// or the origin); waits for the client's bytes are bounded by the server
/// (`server::ConnectionTimeouts`).
pub struct ClientIo {
    inner: TcpStream,
    _slot: Option<OwnedSemaphorePermit>,
    /// Its place in its client's count (`limits.max_connections_per_client`).
    _counted: Option<Counted>,
    /// What else counts the connection for as long as it holds its slot (the open-connections
    /// gauge: see [`ClientIo::counted_by`]).
    _counts: Option<Box<dyn std::any::Any + Send + Sync>>,
    write_timeout: Duration,
    /// Armed when a write could not proceed, cleared when one does.
    stalled: Option<Pin<Box<Sleep>>>,
    framing: Option<FramingWatch>,
}

impl ClientIo {
    /// Wraps `inner`.
    pub fn new(
        inner: TcpStream,
        slot: Option<OwnedSemaphorePermit>,
        write_timeout: Duration,
        framing: Option<FramingWatch>,
    ) -> Self {
        ClientIo {
            inner,
            _slot: slot,
            _counted: None,
            _counts: None,
            write_timeout,
            stalled: None,
            framing,
        }
    }

    /// Keeps `count` (a guard that counts the connection, such as the open-connections gauge's)
    /// for as long as the connection holds its slot: through a CONNECT upgrade too, since the
    /// tunnel or the intercepted connection owns this same I/O. So what it counts is what the
    /// gate counts (review-house D3).
    pub fn counted_by(mut self, count: impl std::any::Any + Send + Sync) -> Self {
        self._counts = Some(Box::new(count));
        self
    }

    /// The verdicts of the framing watch, one per request head (always `Clean` without one).
    pub fn verdicts(&self) -> Verdicts {
        self.framing.as_ref().map(FramingWatch::verdicts).unwrap_or_default()
    }

    /// The socket.
    pub fn get_ref(&self) -> &TcpStream {
        &self.inner
    }

    /// How long a write may wait for the client to read (`limits.client_write_timeout`).
    pub fn write_timeout(&self) -> Duration {
        self.write_timeout
    }

    /// `Pending` from a write: starts (or checks) the stall timer.
    fn stall(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        let timeout = self.write_timeout;
        let timer = self.stalled.get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "the client read nothing for {} (limits.client_write_timeout)",
                    humantime::format_duration(timeout)
                ),
            )),
            Poll::Pending => Poll::Pending,
        }
    }

    fn progress<T>(
        &mut self,
        cx: &mut Context<'_>,
        poll: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        match poll {
            Poll::Ready(r) => {
                self.stalled = None;
                Poll::Ready(r)
            }
            Poll::Pending => self.stall(cx).map(Err),
        }
    }
}

impl AsyncRead for ClientIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let poll = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let (Poll::Ready(Ok(())), Some(framing)) = (&poll, self.framing.as_mut()) {
            framing.feed(&buf.filled()[before..]);
        }
        poll
    }
}

impl AsyncWrite for ClientIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.progress(cx, poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.progress(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.inner).poll_flush(cx);
        self.progress(cx, poll)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.progress(cx, poll)
    }
}

/// When bytes last moved on a connection or relay, for an idle limit: one clock reading per
/// transfer, and one timer for the whole connection, looked at when it fires. Shared by the
/// tunnel relay (`proxy::relay`) and the HTTP/2 idle limit (`server`).
pub struct Activity {
    start: tokio::time::Instant,
    /// Nanoseconds from `start` to the last transfer.
    last: std::sync::atomic::AtomicU64,
}

impl Default for Activity {
    fn default() -> Self {
        Activity::new()
    }
}

impl Activity {
    /// Nothing moved yet: the idle limit counts from now.
    pub fn new() -> Self {
        Activity { start: tokio::time::Instant::now(), last: std::sync::atomic::AtomicU64::new(0) }
    }

    /// Bytes moved now.
    pub fn touch(&self) {
        let nanos = u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.last.store(nanos, std::sync::atomic::Ordering::Relaxed);
    }

    /// Completes once nothing has moved for `idle`.
    pub async fn quiet(&self, idle: Duration) {
        let timer = tokio::time::sleep(idle);
        tokio::pin!(timer);
        loop {
            timer.as_mut().await;
            let last = self.start
                + Duration::from_nanos(self.last.load(std::sync::atomic::Ordering::Relaxed));
            let deadline = last + idle;
            if deadline <= tokio::time::Instant::now() {
                return;
            }
            timer.as_mut().reset(deadline);
        }
    }
}

/// A stream whose transfers count in an [`Activity`]: every read that brought bytes, and
/// with [`WatchedIo::both_ways`] every write that sent some too. The HTTP/2 idle limit watches
/// what its client sends; the tunnel relay watches both directions on the client side.
pub struct WatchedIo<T, A> {
    io: T,
    activity: A,
    writes: bool,
}

impl<T, A: std::ops::Deref<Target = Activity>> WatchedIo<T, A> {
    /// Reads count; writes do not.
    pub fn reads(io: T, activity: A) -> Self {
        WatchedIo { io, activity, writes: false }
    }

    /// Reads and writes count.
    pub fn both_ways(io: T, activity: A) -> Self {
        WatchedIo { io, activity, writes: true }
    }
}

impl<T: AsyncRead + Unpin, A: std::ops::Deref<Target = Activity> + Unpin> AsyncRead
    for WatchedIo<T, A>
{
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let poll = Pin::new(&mut self.io).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.touch();
        }
        poll
    }
}

impl<T: AsyncWrite + Unpin, A: std::ops::Deref<Target = Activity> + Unpin> AsyncWrite
    for WatchedIo<T, A>
{
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.io).poll_write(cx, buf);
        if self.writes && matches!(poll, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        poll
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        if self.writes && matches!(poll, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        poll
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_a_request_line_longer_than_the_head_is_named() {
        // Ranges are checked by the table of bounds (LIMITS_BOUNDS).
        assert!(LimitsSection::try_from(RawLimitsSection::default()).is_ok());
        let bad = LimitsSection {
            max_header_bytes: ByteSize(8 * 1024),
            max_request_line: ByteSize(16 * 1024),
            ..LimitsSection::default()
        };
        let problems = LimitsSection::try_from(RawLimitsSection(bad)).unwrap_err().into_vec();
        let keys: Vec<_> = problems.into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["limits.max_request_line"]);
    }

    #[test]
    fn busy_answer_has_the_right_length() {
        for busy in [BUSY, BUSY_CLIENT] {
            let text = std::str::from_utf8(busy).unwrap();
            let (head, body) = text.split_once("\r\n\r\n").unwrap();
            assert!(head.contains(&format!("Content-Length: {}", body.len())), "{}", body.len());
        }
    }
}
