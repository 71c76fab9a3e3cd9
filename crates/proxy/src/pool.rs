//! The pool of connections to origins, shared by every client connection: HTTP/1.1 to `http`
//! origins, and to `https` ones HTTP/2 or HTTP/1.1 as TLS's ALPN chose.
//!
//! Why our own rather than hyper-util's pooled client (which served `https` origins until
//! issue 22): that client spawns a task for every request to wait for its connection to become
//! idle again, and looks the connection up through a chain of futures (check-out, a race with
//! a connect, a lazy connector); on the proxy's hot path these costs were the largest left. It
//! also bounds idle connections per origin and in time only, so its memory grew with the
//! number of `https` sites crawled. Here an HTTP/1.1 request takes an idle connection from its
//! origin's list and puts it back as soon as the response head has arrived; a connection still
//! finishing the previous response's body is simply skipped until it is ready. An HTTP/2
//! connection stays in the list while requests share it (RFC 9113 §9.1: "Clients SHOULD NOT
//! open more than one HTTP/2 connection to a given host and port pair"), and counts as idle
//! from its last request.
//!
//! Connections go only where the destination guard allows (they are made by the same
//! [`GuardedConnector`]). Idle ones are closed after `upstream.pool_idle_timeout` (by a reaper
//! task), beyond `upstream.pool_max_idle_per_host` per origin, and beyond `upstream.pool_max_idle`
//! in all: each idle connection holds hyper's read and write buffers and its task (about
//! 30 KiB), so without the overall bound the pool grows with the number of sites crawled in the
//! last `pool_idle_timeout` (issue 22, `wide`). Past the bound the longest idle connection, of
//! whichever origin, is closed.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use http::uri::PathAndQuery;
use http::{Request, Response, Uri};
use hyper::body::Incoming;
use hyper::client::conn::{http1, http2, TrySendError};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::Connection;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tokio::sync::Notify;

use super::forward::UpstreamBody;
use robots_proxy_authority::{Authority, Scheme};
use robots_proxy_net::guard::GuardedConnector;

/// How many times a request is tried on another connection when the one it was given turns
/// out to have been closed by the origin before the request was sent.
const CLOSED_RETRIES: usize = 2;

/// The shared pool of connections to origins.
pub(crate) struct OriginPool {
    connector: GuardedConnector,
    /// For `https` origins: TLS over the same guarded connector, offering h2 and http/1.1.
    tls: HttpsConnector<GuardedConnector>,
    idle: Arc<Mutex<Idle>>,
    max_idle_per_host: usize,
    max_idle: usize,
}

/// The idle connections, by origin and in the order they became idle.
#[derive(Default)]
struct Idle {
    /// Keyed by a shared authority, which [`Idle::order`] holds too: putting a connection back
    /// clones a pointer, not the host.
    by_origin: HashMap<Arc<Authority>, Vec<IdleConnection>>,
    /// Every idle connection by its sequence number (oldest first) with its origin: which one
    /// goes when `max_idle` is reached.
    order: BTreeMap<u64, Arc<Authority>>,
    next: u64,
    /// `https` origins a connection is being made to, and the notice that it is done: the
    /// requests that find no connection meanwhile wait for it, since it may be HTTP/2 and
    /// theirs to share. (A burst of first requests to an HTTP/2 origin made one connection
    /// each, one for every request.)
    connecting: HashMap<Authority, Arc<Notify>>,
}

/// A request's claim on making the connection to an `https` origin: when it ends, made,
/// failed or given up, the requests waiting for it go on.
struct Connecting<'a> {
    idle: &'a Mutex<Idle>,
    authority: &'a Authority,
}

impl Drop for Connecting<'_> {
    fn drop(&mut self) {
        let mut idle = robots_proxy_sync::lock(self.idle);
        if let Some(done) = idle.connecting.remove(self.authority) {
            done.notify_waiters();
        }
    }
}

struct IdleConnection {
    sender: Sender,
    /// When it became idle; for HTTP/2, when it was last given a request.
    since: Instant,
    /// Its key in [`Idle::order`].
    seq: u64,
}

/// The sending half of an origin connection.
enum Sender {
    /// One request at a time: out of the pool while in use.
    Http1(http1::SendRequest<UpstreamBody>),
    /// Requests at once: stays in the pool, each request sends on a clone.
    Http2(http2::SendRequest<UpstreamBody>),
}

impl Sender {
    fn is_closed(&self) -> bool {
        match self {
            Sender::Http1(s) => s.is_closed(),
            Sender::Http2(s) => s.is_closed(),
        }
    }

    fn is_ready(&self) -> bool {
        match self {
            Sender::Http1(s) => s.is_ready(),
            Sender::Http2(s) => s.is_ready(),
        }
    }

    /// Sends `req`, its target in the form the connection's protocol takes: origin-form on
    /// HTTP/1.1 to the origin itself (RFC 9112 §3.2.1), the whole URI on HTTP/2, whose
    /// `:scheme` and `:authority` come from it (RFC 9113 §8.3.1). On an error before anything
    /// was sent, the request comes back to be tried on another connection.
    async fn send(
        &mut self,
        origin: &Authority,
        mut req: Request<UpstreamBody>,
    ) -> Result<Response<Incoming>, TrySendError<Request<UpstreamBody>>> {
        match self {
            Sender::Http1(s) => {
                *req.uri_mut() = Uri::from(origin_form(req.uri()));
                s.try_send_request(req).await
            }
            Sender::Http2(s) => {
                if req.uri().scheme().is_none() || req.uri().authority().is_none() {
                    let full = format!("{origin}{}", origin_form(req.uri()));
                    if let Ok(full) = full.parse() {
                        *req.uri_mut() = full;
                    }
                }
                s.try_send_request(req).await
            }
        }
    }
}

/// The path and query of `uri`, as a request-target. `as_str` reads an empty path
/// (`GET http://host#frag`) as "/", but the empty value itself would be written as an empty
/// request-target: a real "/" for both.
fn origin_form(uri: &Uri) -> PathAndQuery {
    match uri.path_and_query() {
        Some(p) if p.as_str() != "/" => p.clone(),
        _ => PathAndQuery::from_static("/"),
    }
}

impl Idle {
    /// How many connections are idle, over every origin.
    fn len(&self) -> usize {
        self.order.len()
    }

    /// Keeps the connections of every origin for which `keep` holds, forgetting origins left
    /// with none.
    fn retain(&mut self, mut keep: impl FnMut(&IdleConnection) -> bool) {
        let order = &mut self.order;
        self.by_origin.retain(|_, list| {
            list.retain(|c| {
                let kept = keep(c);
                if !kept {
                    order.remove(&c.seq);
                }
                kept
            });
            !list.is_empty()
        });
    }

    /// Takes a connection of `authority` that is ready for a request; closed ones are dropped
    /// on the way, ones still reading a response body are left for later. An HTTP/2 one stays,
    /// the newest in use: the request gets a clone.
    fn take_ready(&mut self, authority: &Authority) -> Option<Sender> {
        let list = self.by_origin.get_mut(authority)?;
        let order = &mut self.order;
        list.retain(|c| {
            let open = !c.sender.is_closed();
            if !open {
                order.remove(&c.seq);
            }
            open
        });
        let ready = list.iter().rposition(|c| c.sender.is_ready());
        if let Some(shared) = ready.map(|i| &mut list[i]) {
            if let Sender::Http2(sender) = &shared.sender {
                let sender = Sender::Http2(sender.clone());
                if let Some(key) = order.remove(&shared.seq) {
                    shared.seq = self.next;
                    shared.since = Instant::now();
                    order.insert(shared.seq, key);
                    self.next += 1;
                }
                return Some(sender);
            }
        }
        let taken = ready.map(|i| list.swap_remove(i));
        if list.is_empty() {
            self.by_origin.remove(authority);
        }
        let taken = taken?;
        self.order.remove(&taken.seq);
        Some(taken.sender)
    }

    /// Keeps `sender` idle for `authority`: the longest idle of that origin goes first when it
    /// has `max_per_host`, and the longest idle of all when `max` are idle.
    fn put(&mut self, authority: &Authority, sender: Sender, max_per_host: usize, max: usize) {
        if max_per_host == 0 || max == 0 {
            return;
        }
        // One HTTP/2 connection per origin is enough (RFC 9113 §9.1): one made while another
        // was being made serves its own request and closes when that is done.
        if matches!(sender, Sender::Http2(_))
            && self.by_origin.get(authority).is_some_and(|list| {
                list.iter().any(|c| matches!(c.sender, Sender::Http2(_)) && !c.sender.is_closed())
            })
        {
            return;
        }
        if let Some(list) = self.by_origin.get_mut(authority) {
            if list.len() >= max_per_host {
                let oldest = list.remove(0);
                self.order.remove(&oldest.seq);
            }
        }
        while self.len() >= max {
            let Some((seq, origin)) = self.order.pop_first() else { break };
            if let Some(list) = self.by_origin.get_mut(&origin) {
                list.retain(|c| c.seq != seq);
                if list.is_empty() {
                    self.by_origin.remove(&origin);
                }
            }
        }
        let seq = self.next;
        self.next += 1;
        let key = match self.by_origin.get_key_value(authority) {
            Some((key, _)) => key.clone(),
            None => Arc::new(authority.clone()),
        };
        self.order.insert(seq, key.clone());
        self.by_origin.entry(key).or_default().push(IdleConnection {
            sender,
            since: Instant::now(),
            seq,
        });
    }
}

/// Why a request could not be sent.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PoolError {
    /// No connection could be made (the guard's refusal or a network error is its source).
    #[error("cannot connect to the origin")]
    Connect(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The connection failed after the request was (at least partly) sent.
    #[error("the request to the origin failed")]
    Request(#[source] hyper::Error),
}

impl OriginPool {
    /// A pool connecting through `connector`. Starts the reaper of idle connections, which
    /// ends when the pool is dropped; must be called inside a tokio runtime.
    pub(crate) fn new(
        connector: GuardedConnector,
        tls: HttpsConnector<GuardedConnector>,
        idle_timeout: Duration,
        max_idle_per_host: usize,
        max_idle: usize,
    ) -> Self {
        let idle = Arc::new(Mutex::new(Idle::default()));
        let period = (idle_timeout / 2).max(Duration::from_millis(100));
        tokio::spawn(reap(Arc::downgrade(&idle), idle_timeout, period));
        OriginPool { connector, tls, idle, max_idle_per_host, max_idle }
    }

    /// Sends `req` (`Host` set) to the origin `authority` and returns the response head; its
    /// body streams from the connection.
    ///
    /// Making a connection (TCP, TLS, the HTTP handshake) is boxed where it is awaited: most
    /// requests find one idle, and an unboxed handshake would make every request's future (and
    /// each future above it, copied into a box per request) some 6 KB larger.
    pub(crate) async fn send(
        &self,
        authority: &Authority,
        mut req: Request<UpstreamBody>,
    ) -> Result<Response<Incoming>, PoolError> {
        for _ in 0..CLOSED_RETRIES {
            let mut sender = match self.idle_connection(authority) {
                Some(sender) => sender,
                None => Box::pin(self.connect_or_share(authority)).await?,
            };
            match sender.send(authority, req).await {
                Ok(resp) => {
                    self.put_back(authority, sender);
                    return Ok(resp);
                }
                Err(mut e) => match e.take_message() {
                    // Closed by the origin before the request went out: try another.
                    Some(unsent) => req = unsent,
                    None => return Err(PoolError::Request(e.into_error())),
                },
            }
        }
        // Fresh connections cannot have been closed while idle.
        let mut sender = Box::pin(self.connect(authority)).await?;
        let resp =
            sender.send(authority, req).await.map_err(|e| PoolError::Request(e.into_error()))?;
        self.put_back(authority, sender);
        Ok(resp)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Idle> {
        robots_proxy_sync::lock(&self.idle)
    }

    /// An idle connection to `authority` that is ready for a request; closed ones are dropped
    /// on the way, ones still reading a response body are left for later.
    fn idle_connection(&self, authority: &Authority) -> Option<Sender> {
        self.lock().take_ready(authority)
    }

    /// How many connections are idle now, over every origin.
    #[cfg(test)]
    fn idle_count(&self) -> usize {
        self.lock().len()
    }

    /// Returns a connection to the pool as soon as its response head is in: it is taken again
    /// only once the body has been read ([`http1::SendRequest::is_ready`]). An HTTP/2 one is in
    /// the pool from when it was made.
    ///
    /// With `upstream.pool_max_idle_per_host = 0` (or `pool_max_idle = 0`) nothing is pooled:
    /// the sender is dropped, and hyper closes the connection once the response in flight has
    /// been read. A connection that goes for the bounds is closed the same way.
    fn put_back(&self, authority: &Authority, sender: Sender) {
        if sender.is_closed() || matches!(sender, Sender::Http2(_)) {
            return;
        }
        self.lock().put(authority, sender, self.max_idle_per_host, self.max_idle);
    }

    /// A connection for a request that found none ready: to an `https` origin a connection is
    /// being made to, that one if it turns out HTTP/2 (once: a request never waits twice);
    /// otherwise a new one.
    async fn connect_or_share(&self, authority: &Authority) -> Result<Sender, PoolError> {
        if authority.scheme() == Scheme::Http {
            return self.connect(authority).await;
        }
        let made_by_another = {
            let mut idle = self.lock();
            match idle.connecting.get(authority) {
                // Created under the lock: notified even if the connection is done before this
                // future is first polled.
                Some(done) => Some(done.clone().notified_owned()),
                None => {
                    idle.connecting.insert(authority.clone(), Arc::new(Notify::new()));
                    None
                }
            }
        };
        match made_by_another {
            Some(done) => {
                done.await;
                match self.idle_connection(authority) {
                    Some(shared) => Ok(shared),
                    None => self.connect(authority).await,
                }
            }
            None => {
                let _claim = Connecting { idle: &self.idle, authority };
                self.connect(authority).await
            }
        }
    }

    /// A new connection to `authority`: TCP, and TLS for `https` origins, whose ALPN picks
    /// HTTP/2 or HTTP/1.1. An HTTP/2 connection goes into the pool at once, for the requests
    /// that come while this one is in flight.
    async fn connect(&self, authority: &Authority) -> Result<Sender, PoolError> {
        let uri: Uri = format!("{authority}/")
            .parse()
            .map_err(|e: http::uri::InvalidUri| PoolError::Connect(e.into()))?;
        if authority.scheme() == Scheme::Http {
            let mut connector = self.connector.clone();
            let io = tower_service::Service::call(&mut connector, uri)
                .await
                .map_err(PoolError::Connect)?;
            return Ok(Sender::Http1(http1_over(io).await?));
        }
        let mut connector = self.tls.clone();
        let io =
            tower_service::Service::call(&mut connector, uri).await.map_err(PoolError::Connect)?;
        if !io.connected().is_negotiated_h2() {
            return Ok(Sender::Http1(http1_over(io).await?));
        }
        let (sender, connection) = http2::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            .handshake(io)
            .await
            .map_err(|e| PoolError::Connect(e.into()))?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "origin connection (HTTP/2) ended with an error");
            }
        });
        self.lock().put(
            authority,
            Sender::Http2(sender.clone()),
            self.max_idle_per_host,
            self.max_idle,
        );
        Ok(Sender::Http2(sender))
    }
}

/// An HTTP/1.1 connection over `io`, its connection task spawned.
async fn http1_over<T>(io: T) -> Result<http1::SendRequest<UpstreamBody>, PoolError>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (sender, connection) =
        http1::Builder::new().handshake(io).await.map_err(|e| PoolError::Connect(e.into()))?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!(error = %e, "origin connection ended with an error");
        }
    });
    Ok(sender)
}

/// Every `period`, closes the connections idle for longer than `idle_timeout` (and closed
/// ones), and forgets origins left with none. Ends when the pool is gone.
async fn reap(idle: Weak<Mutex<Idle>>, idle_timeout: Duration, period: Duration) {
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(idle) = idle.upgrade() else { return };
        let now = Instant::now();
        let mut idle = robots_proxy_sync::lock(&idle);
        idle.retain(|c| {
            !c.sender.is_closed()
                && (!c.sender.is_ready() || now.duration_since(c.since) < idle_timeout)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use robots_proxy_authority::Scheme;
    use robots_proxy_net::guard::{ConnectSettings, DestinationGuard};

    /// `n` origins on 127.0.0.1 that accept connections and keep them open (the pool's
    /// bookkeeping needs connections, not answers).
    async fn origins(n: usize) -> Vec<Authority> {
        let mut out = Vec::new();
        for _ in 0..n {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = listener.local_addr().unwrap().port();
            tokio::spawn(async move {
                let mut held = Vec::new();
                while let Ok((stream, _)) = listener.accept().await {
                    held.push(stream);
                }
            });
            out.push(Authority::new(Scheme::Http, "127.0.0.1", port).unwrap());
        }
        out
    }

    fn pool(max_idle_per_host: usize, max_idle: usize) -> OriginPool {
        let guard = Arc::new(DestinationGuard::new(&["127.0.0.0/8".parse().unwrap()], &[]));
        let timeout = Duration::from_secs(5);
        let tls = robots_proxy_net::tls::https_connector(
            robots_proxy_net::tls::client_config(None).unwrap(),
            timeout,
            guard.clone(),
        );
        let connector = GuardedConnector::new(guard, ConnectSettings::origins(timeout));
        OriginPool::new(connector, tls, Duration::from_secs(600), max_idle_per_host, max_idle)
    }

    #[tokio::test]
    async fn idle_connections_stay_within_the_overall_bound_whatever_the_number_of_origins() {
        let pool = pool(4, 3);
        let sites = origins(5).await;
        for site in &sites {
            let sender = pool.connect(site).await.unwrap();
            pool.put_back(site, sender);
            assert!(pool.idle_count() <= 3, "{} idle", pool.idle_count());
        }
        assert_eq!(pool.idle_count(), 3);
        // The longest idle went: the first two origins have none left, the last three one each.
        let idle = pool.lock();
        for (i, site) in sites.iter().enumerate() {
            let held = idle.by_origin.get(site).map_or(0, Vec::len);
            assert_eq!(held, usize::from(i >= 2), "origin {i}");
        }
        assert_eq!(idle.by_origin.values().map(Vec::len).sum::<usize>(), idle.len());
    }

    #[tokio::test]
    async fn the_per_origin_bound_and_taking_keep_the_order_in_step() {
        let pool = pool(2, 100);
        let sites = origins(2).await;
        for _ in 0..3 {
            let sender = pool.connect(&sites[0]).await.unwrap();
            pool.put_back(&sites[0], sender);
        }
        assert_eq!(pool.idle_count(), 2, "two per origin");
        let sender = pool.connect(&sites[1]).await.unwrap();
        pool.put_back(&sites[1], sender);
        assert_eq!(pool.idle_count(), 3);
        // Taken connections leave the order too; an origin with none left is forgotten.
        let mut taken = 0;
        for _ in 0..50 {
            if pool.idle_connection(&sites[1]).is_some() {
                taken += 1;
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(taken, 1);
        let idle = pool.lock();
        assert_eq!(idle.len(), 2);
        assert!(!idle.by_origin.contains_key(&sites[1]));
    }

    /// Every pooled connection keeps the first block of hyper's request channel, 32 request
    /// slots: the body is one pointer there (see `UpstreamBody`), not ~90 bytes.
    #[test]
    fn a_request_body_is_one_pointer_in_hyper_s_channel() {
        assert_eq!(std::mem::size_of::<UpstreamBody>(), std::mem::size_of::<usize>());
    }

    #[tokio::test]
    async fn zero_turns_pooling_off() {
        let pool = pool(4, 0);
        let sites = origins(1).await;
        let sender = pool.connect(&sites[0]).await.unwrap();
        pool.put_back(&sites[0], sender);
        assert_eq!(pool.idle_count(), 0);
    }
}
