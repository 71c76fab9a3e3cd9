//! The pool of HTTP/1.1 connections to `http` origins, shared by every client connection.
//!
//! Why our own rather than hyper-util's pooled client (which still serves `https` origins):
//! that client spawns a task for every request to wait for its connection to become idle
//! again, and looks the connection up through a chain of futures (check-out, a race with a
//! connect, a lazy connector). Plain HTTP is most of a crawler's traffic, and on the proxy's
//! hot path these costs were the largest left. Here a request takes an idle connection from
//! its origin's list and puts it back as soon as the response head has arrived; a connection
//! still finishing the previous response's body is simply skipped until it is ready.
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

use http::{Request, Response, Uri};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;

use super::forward::UpstreamBody;
use crate::authority::Authority;
use crate::guard::GuardedConnector;

/// How many times a request is tried on another connection when the one it was given turns
/// out to have been closed by the origin before the request was sent.
const CLOSED_RETRIES: usize = 2;

/// The shared pool of connections to `http` origins.
pub(crate) struct OriginPool {
    connector: GuardedConnector,
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
}

struct IdleConnection {
    sender: SendRequest<UpstreamBody>,
    since: Instant,
    /// Its key in [`Idle::order`].
    seq: u64,
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
    /// on the way, ones still reading a response body are left for later.
    fn take_ready(&mut self, authority: &Authority) -> Option<SendRequest<UpstreamBody>> {
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
    fn put(
        &mut self,
        authority: &Authority,
        sender: SendRequest<UpstreamBody>,
        max_per_host: usize,
        max: usize,
    ) {
        if max_per_host == 0 || max == 0 {
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
        idle_timeout: Duration,
        max_idle_per_host: usize,
        max_idle: usize,
    ) -> Self {
        let idle = Arc::new(Mutex::new(Idle::default()));
        let period = (idle_timeout / 2).max(Duration::from_millis(100));
        tokio::spawn(reap(Arc::downgrade(&idle), idle_timeout, period));
        OriginPool { connector, idle, max_idle_per_host, max_idle }
    }

    /// Sends `req` (its target in origin-form, `Host` set) to the `http` origin `authority`
    /// and returns the response head; its body streams from the connection.
    pub(crate) async fn send(
        &self,
        authority: &Authority,
        mut req: Request<UpstreamBody>,
    ) -> Result<Response<Incoming>, PoolError> {
        for _ in 0..CLOSED_RETRIES {
            let mut sender = match self.idle_connection(authority) {
                Some(sender) => sender,
                None => self.connect(authority).await?,
            };
            match sender.try_send_request(req).await {
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
        let mut sender = self.connect(authority).await?;
        let resp = sender.send_request(req).await.map_err(PoolError::Request)?;
        self.put_back(authority, sender);
        Ok(resp)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Idle> {
        self.idle.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// An idle connection to `authority` that is ready for a request; closed ones are dropped
    /// on the way, ones still reading a response body are left for later.
    fn idle_connection(&self, authority: &Authority) -> Option<SendRequest<UpstreamBody>> {
        self.lock().take_ready(authority)
    }

    /// How many connections are idle now, over every origin.
    #[cfg(test)]
    fn idle_count(&self) -> usize {
        self.lock().len()
    }

    /// Returns a connection to the pool as soon as its response head is in: it is taken again
    /// only once the body has been read ([`SendRequest::is_ready`]).
    ///
    /// With `upstream.pool_max_idle_per_host = 0` (or `pool_max_idle = 0`) nothing is pooled:
    /// the sender is dropped, and hyper closes the connection once the response in flight has
    /// been read. A connection that goes for the bounds is closed the same way.
    fn put_back(&self, authority: &Authority, sender: SendRequest<UpstreamBody>) {
        if sender.is_closed() {
            return;
        }
        self.lock().put(authority, sender, self.max_idle_per_host, self.max_idle);
    }

    async fn connect(&self, authority: &Authority) -> Result<SendRequest<UpstreamBody>, PoolError> {
        let uri: Uri = format!("http://{}/", authority.host_header())
            .parse()
            .map_err(|e: http::uri::InvalidUri| PoolError::Connect(e.into()))?;
        let mut connector = self.connector.clone();
        let io =
            tower_service::Service::call(&mut connector, uri).await.map_err(PoolError::Connect)?;
        let (sender, connection) = hyper::client::conn::http1::Builder::new()
            .handshake(io)
            .await
            .map_err(|e| PoolError::Connect(e.into()))?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "origin connection ended with an error");
            }
        });
        Ok(sender)
    }
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
        let mut idle = idle.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        idle.retain(|c| {
            !c.sender.is_closed()
                && (!c.sender.is_ready() || now.duration_since(c.since) < idle_timeout)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authority::Scheme;
    use crate::guard::{ConnectSettings, DestinationGuard};

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
        let connector =
            GuardedConnector::new(guard, ConnectSettings::origins(Duration::from_secs(5)));
        OriginPool::new(connector, Duration::from_secs(600), max_idle_per_host, max_idle)
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

    #[tokio::test]
    async fn zero_turns_pooling_off() {
        let pool = pool(4, 0);
        let sites = origins(1).await;
        let sender = pool.connect(&sites[0]).await.unwrap();
        pool.put_back(&sites[0], sender);
        assert_eq!(pool.idle_count(), 0);
    }
}
