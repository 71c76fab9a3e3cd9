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
//! task) and beyond `upstream.pool_max_idle_per_host` per origin.

use std::collections::HashMap;
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
    idle: Arc<Mutex<HashMap<Authority, Vec<IdleConnection>>>>,
    max_idle_per_host: usize,
}

struct IdleConnection {
    sender: SendRequest<UpstreamBody>,
    since: Instant,
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
    ) -> Self {
        let idle = Arc::new(Mutex::new(HashMap::new()));
        let period = (idle_timeout / 2).max(Duration::from_millis(100));
        tokio::spawn(reap(Arc::downgrade(&idle), idle_timeout, period));
        OriginPool { connector, idle, max_idle_per_host }
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

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Authority, Vec<IdleConnection>>> {
        self.idle.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// An idle connection to `authority` that is ready for a request; closed ones are dropped
    /// on the way, ones still reading a response body are left for later.
    fn idle_connection(&self, authority: &Authority) -> Option<SendRequest<UpstreamBody>> {
        let mut idle = self.lock();
        let list = idle.get_mut(authority)?;
        list.retain(|c| !c.sender.is_closed());
        let ready = list.iter().rposition(|c| c.sender.is_ready())?;
        Some(list.swap_remove(ready).sender)
    }

    /// Returns a connection to the pool as soon as its response head is in: it is taken again
    /// only once the body has been read ([`SendRequest::is_ready`]).
    ///
    /// With `upstream.pool_max_idle_per_host = 0` nothing is pooled: the sender is dropped, and
    /// hyper closes the connection once the response in flight has been read.
    fn put_back(&self, authority: &Authority, sender: SendRequest<UpstreamBody>) {
        if sender.is_closed() || self.max_idle_per_host == 0 {
            return;
        }
        let mut idle = self.lock();
        let list = match idle.get_mut(authority) {
            Some(list) => list,
            None => idle.entry(authority.clone()).or_default(),
        };
        if list.len() >= self.max_idle_per_host && !list.is_empty() {
            // The longest idle goes: it is the least likely to be wanted soon.
            list.remove(0);
        }
        list.push(IdleConnection { sender, since: Instant::now() });
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
async fn reap(
    idle: Weak<Mutex<HashMap<Authority, Vec<IdleConnection>>>>,
    idle_timeout: Duration,
    period: Duration,
) {
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(idle) = idle.upgrade() else { return };
        let now = Instant::now();
        let mut idle = idle.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        idle.retain(|_, list| {
            list.retain(|c| {
                !c.sender.is_closed()
                    && (!c.sender.is_ready() || now.duration_since(c.since) < idle_timeout)
            });
            !list.is_empty()
        });
    }
}
