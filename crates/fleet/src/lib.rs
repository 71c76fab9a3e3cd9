//! A fleet of gateways: robots.txt and the pace shared through Redis (or Valkey).
//!
//! With `fleet.redis` empty nothing here runs and every instance keeps its own state. With
//! it set, the instance:
//!
//! * shares robots.txt ([`robots::SharedRedis`], behind the cache's
//!   [`robots_proxy_sitefiles::Shared`] seam): one fetch per authority for the whole fleet, a
//!   purge on any instance reaches every instance within a second (pub/sub);
//! * shares the pace ([`pace::RedisPace`], behind [`robots_proxy_pace::PaceStore`]): starts are
//!   reserved atomically by a server-side script on Redis's own clock (`TIME`), concurrency
//!   slots are leases that expire when an instance dies;
//! * announces itself with an expiring heartbeat ([`view`]), listed on every instance's
//!   status page and `/api/summary`.
//!
//! When Redis cannot be reached (`fleet.on_redis_error`): `local` goes on with this
//! instance's own cache and pace, `refuse` answers 503 to requests that need the shared
//! state. Either way the change is logged once, `robots_proxy_fleet_up` says 0, and every
//! call to Redis is bounded by `fleet.timeout`. While Redis is out of reach, calls are not
//! even tried (they fail at once) until the heartbeat, once a second, finds it back.
//!
//! The root crate re-exports this crate as `robots_proxy::fleet`; it never reaches the proxy or
//! `config` (the root hands it its section).

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

mod keys;
pub mod link;
pub mod pace;
pub mod robots;
pub mod seal;
mod section;
pub mod version;
pub mod view;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

pub use link::Conn;
pub use section::{FleetSection, OnRedisError, RawFleetSection, RedisUrl, Topology, FLEET_BOUNDS};

use robots_proxy_sitefiles::SharedError;

/// How often an instance announces itself and probes Redis while it is out of reach.
pub const HEARTBEAT: Duration = Duration::from_secs(1);

/// How long an announcement lasts: an instance that stopped is gone from the view after it.
pub const HEARTBEAT_TTL: Duration = Duration::from_secs(5);

/// The fleet could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// The Redis client could not be made from `fleet.redis`.
    #[error("fleet.redis: {0}")]
    Client(#[from] redis::RedisError),
    /// `fleet.key_file` or `fleet.previous_key_file` could not be loaded.
    #[error("fleet key: {0}")]
    Key(#[from] seal::KeyError),
}

/// This instance's link to the fleet. Shared (`Arc`) by the robots store, the pace store, the
/// heartbeat and the admin view.
pub struct Fleet {
    /// Where the store is (`fleet.topology`), and how to connect to it.
    store: link::Store,
    /// The connection in use; `None` until the first call, and again after a failed call, so
    /// the heartbeat's next probe always dials afresh (and, with sentinels, asks them where
    /// the primary is now) rather than waiting on a reconnection that gave up.
    conn: arc_swap::ArcSwapOption<Conn>,
    /// Held while a connection is made, so concurrent calls make one.
    connecting: tokio::sync::Mutex<()>,
    /// The names of the fleet's keys ([`keys`]).
    pub(crate) keys: keys::Keyspace,
    name: String,
    mode: OnRedisError,
    timeout: Duration,
    /// `fleet.robots_ttl`: the longest a robots.txt record lives in Redis.
    robots_ttl: Duration,
    /// `fleet.max_shared_body`: the largest robots.txt body shared.
    max_shared_body: usize,
    /// `fleet.records_memory_percent`.
    records_memory_percent: u8,
    redacted_url: String,
    /// Whether the last call to Redis worked.
    up: AtomicBool,
    /// Whether the server's version was found fit on the current connection ([`version`]):
    /// checked by the first call on each.
    checked: AtomicBool,
    /// Whether the instance has told the log that Redis is out of reach (once per outage).
    down_logged: AtomicBool,
    /// Calls that failed with an error of Redis's own (not of the link), for the log.
    call_errors: AtomicU64,
    /// The last heartbeat's round trip, in microseconds.
    rtt_micros: AtomicU64,
    /// Times the purge subscription was lost (it ended, or a PING went unanswered) and every
    /// local copy dropped.
    purge_gaps: AtomicU64,
    /// When the instance started (announced).
    pub(crate) started: SystemTime,
    /// Random, per process: instance names need not be unique (a shared configuration file
    /// gives every instance the same `fleet.instance`), members and lease holders must be.
    nonce: String,
    /// The fleet's keys: every shared record written is sealed, every one read verified.
    pub(crate) seal: seal::Seal,
    /// The newest seal used per authority and kind (a replayed older record is refused).
    pub(crate) newest: seal::Newest,
    /// Moved on each time the heartbeat finds that Redis lost the fleet's state (a new epoch,
    /// [`view`]) or is back after being out of reach: the pace puts back what it knows then.
    losses: tokio::sync::watch::Sender<u64>,
    /// Times the pace was put back whole, and times a try was cut short (Redis out of reach
    /// again): `robots_proxy_fleet_pace_restores_total`.
    restores: [AtomicU64; 2],
}

/// A random token for this process: std's hasher keys come from the operating system's
/// randomness; the process id and the clock are mixed in as well.
fn process_nonce() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    h.write_u128(now.as_nanos());
    format!("{:016x}", h.finish())
}

impl Fleet {
    /// The fleet of `section`, or `None` when `fleet.redis` is empty. Does not connect:
    /// an instance starts even when Redis is out of reach, and joins when it can.
    /// `default_name` names the instance when `fleet.instance` is empty.
    pub fn new(
        section: &FleetSection,
        default_name: &str,
    ) -> Result<Option<Arc<Fleet>>, FleetError> {
        if !section.is_enabled() {
            return Ok(None);
        }
        let seal =
            seal::Seal::load(section.key_file.as_deref(), section.previous_key_file.as_deref())?;
        let store = link::Store::new(section, section.timeout)?;
        let name = if section.instance.is_empty() {
            default_name.to_owned()
        } else {
            section.instance.clone()
        };
        Ok(Some(Arc::new(Fleet {
            store,
            conn: arc_swap::ArcSwapOption::empty(),
            connecting: tokio::sync::Mutex::new(()),
            keys: keys::Keyspace::new(&section.key_prefix, section.topology == Topology::Cluster),
            name,
            mode: section.on_redis_error,
            timeout: section.timeout,
            robots_ttl: section.robots_ttl,
            max_shared_body: usize::try_from(section.max_shared_body.0).unwrap_or(usize::MAX),
            records_memory_percent: section.records_memory_percent,
            redacted_url: section.redis.redacted(),
            up: AtomicBool::new(false),
            checked: AtomicBool::new(false),
            down_logged: AtomicBool::new(false),
            call_errors: AtomicU64::new(0),
            rtt_micros: AtomicU64::new(0),
            purge_gaps: AtomicU64::new(0),
            started: SystemTime::now(),
            nonce: process_nonce(),
            seal,
            newest: seal::Newest::default(),
            losses: tokio::sync::watch::Sender::new(0),
            restores: [AtomicU64::new(0), AtomicU64::new(0)],
        })))
    }

    /// This instance's name in the fleet.
    pub fn instance(&self) -> &str {
        &self.name
    }

    /// This process's random token: `instance#nonce` tells this process apart from another
    /// instance of the same name (queue and slot members, fetch leases, the announcement).
    pub fn nonce(&self) -> &str {
        &self.nonce
    }

    /// Whether the last call to Redis worked.
    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::Relaxed)
    }

    /// Whether requests needing the shared state are refused while Redis is out of reach.
    pub fn refuses_when_down(&self) -> bool {
        self.mode == OnRedisError::Refuse
    }

    /// The last heartbeat's round trip to Redis.
    pub fn round_trip(&self) -> Duration {
        Duration::from_micros(self.rtt_micros.load(Ordering::Relaxed))
    }

    /// Times the purge subscription was lost and made again, every local robots.txt copy
    /// dropped each time (`robots_proxy_fleet_purge_gaps_total`).
    pub fn purge_gaps(&self) -> u64 {
        self.purge_gaps.load(Ordering::Relaxed)
    }

    /// Shared records refused, of `kind` for `why` (`robots_proxy_fleet_records_refused_total`).
    pub fn records_refused(&self, kind: seal::Kind, why: seal::Refusal) -> u64 {
        self.seal.refused(kind, why)
    }

    /// Told each time the store lost the fleet's state or is back after an outage ([`view`]).
    pub(crate) fn losses(&self) -> tokio::sync::watch::Receiver<u64> {
        self.losses.subscribe()
    }

    /// The heartbeat found the store lost or back: the pace puts back what it knows.
    pub(crate) fn store_lost(&self) {
        self.losses.send_modify(|n| *n += 1);
    }

    /// The pace was put back (`whole`), or a try was cut short.
    pub(crate) fn restored(&self, whole: bool) {
        self.restores[usize::from(!whole)].fetch_add(1, Ordering::Relaxed);
    }

    /// Times the pace was put back into Redis, whole (`true`) or cut short (`false`).
    pub fn pace_restores(&self, whole: bool) -> u64 {
        self.restores[usize::from(!whole)].load(Ordering::Relaxed)
    }

    /// `fleet.redis`, its password hidden.
    pub fn redis_url(&self) -> &str {
        &self.redacted_url
    }

    /// A subscription to `channel`, made within `fleet.timeout`.
    pub(crate) async fn subscribe(
        &self,
        channel: &str,
    ) -> Result<redis::aio::PubSub, SubscribeError> {
        let subscribing = async {
            let mut pubsub = self.store.subscriber().await?;
            pubsub.subscribe(channel).await?;
            Ok(pubsub)
        };
        match tokio::time::timeout(self.timeout, subscribing).await {
            Ok(subscribed) => subscribed.map_err(SubscribeError::Redis),
            Err(_) => Err(SubscribeError::Timeout),
        }
    }

    /// A subscription to `channel` ([`Fleet::subscribe`]) that is checked for life: see
    /// [`Subscription`].
    pub(crate) async fn follow(&self, channel: &str) -> Result<Subscription, SubscribeError> {
        let (sink, messages) = self.subscribe(channel).await?.split();
        let mut ping = tokio::time::interval(SUBSCRIPTION_PING);
        ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Ok(Subscription { sink, messages, ping, timeout: self.timeout })
    }

    /// Runs one command or script invocation against Redis, bounded by `fleet.timeout`.
    /// While Redis is known to be out of reach, fails at once (the heartbeat probes).
    pub(crate) async fn call<T, F, Fut>(&self, run: F) -> Result<T, SharedError>
    where
        F: FnOnce(Conn) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<T>>,
    {
        if !self.is_up() && self.down_logged.load(Ordering::Relaxed) {
            return Err(SharedError("Redis is out of reach".to_owned()));
        }
        self.attempt(run).await
    }

    /// [`Fleet::call`] even while Redis is known to be out of reach: the heartbeat's probe.
    async fn attempt<T, F, Fut>(&self, run: F) -> Result<T, SharedError>
    where
        F: FnOnce(Conn) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<T>>,
    {
        let work = async {
            let conn = self.connection().await?;
            if !self.checked.load(Ordering::Relaxed) {
                match server_fit(conn.clone()).await? {
                    version::Fit::TooOld(why) => return Ok(Err(why)),
                    version::Fit::Fits => {}
                    version::Fit::Unknown => tracing::warn!(
                        instance = %self.name,
                        "fleet: cannot tell the Redis server's version (INFO server); the fleet \
                         needs Redis 5.0 or later, or Valkey"
                    ),
                }
                self.checked.store(true, Ordering::Relaxed);
            }
            run(conn).await.map(Ok)
        };
        // `fleet.timeout` bounds each round trip: a call on a connection not used yet also
        // connects and checks the server's version (two more), within three times it.
        let budget = if self.checked.load(Ordering::Relaxed) {
            self.timeout
        } else {
            self.timeout.saturating_mul(3)
        };
        match tokio::time::timeout(budget, work).await {
            Ok(Ok(Err(too_old))) => Err(self.mark_down("Redis cannot be used", too_old)),
            Ok(Ok(Ok(value))) => {
                self.mark_up();
                Ok(value)
            }
            Ok(Err(e)) if takes_link_down(&e) => {
                Err(self.mark_down("Redis is out of reach", e.to_string()))
            }
            Ok(Err(e)) => {
                // Redis answered: the link is up; the error concerns this call's keys (a key of
                // the wrong type, a script error, OOM on a write) and is that call's alone.
                self.mark_up();
                let n = self.call_errors.fetch_add(1, Ordering::Relaxed) + 1;
                if robots_proxy_output::warn_on(n) {
                    tracing::warn!(instance = %self.name, error = %e, errors_so_far = n, "fleet: a Redis call failed (the link stays up)");
                }
                Err(SharedError(format!("Redis: {e}")))
            }
            Err(_) => Err(self.mark_down(
                "Redis is out of reach",
                format!(
                    "no answer within fleet.timeout ({})",
                    humantime::format_duration(self.timeout)
                ),
            )),
        }
    }

    /// The connection in use, made now if there is none ([`link::Store::connect`]).
    async fn connection(&self) -> redis::RedisResult<Conn> {
        if let Some(conn) = self.conn.load_full() {
            return Ok(Conn::clone(&conn));
        }
        let _one = self.connecting.lock().await;
        if let Some(conn) = self.conn.load_full() {
            return Ok(Conn::clone(&conn));
        }
        let conn = self.store.connect().await?;
        self.conn.store(Some(Arc::new(conn.clone())));
        Ok(conn)
    }

    fn mark_up(&self) {
        if !self.up.swap(true, Ordering::Relaxed) && self.down_logged.swap(false, Ordering::Relaxed)
        {
            tracing::warn!(redis = %self.redacted_url, instance = %self.name, "fleet: Redis is back; sharing robots.txt and the pace again");
        }
    }

    /// Takes the link down: `what` happened (for the log), `why` (the error).
    fn mark_down(&self, what: &str, why: String) -> SharedError {
        let was_up = self.up.swap(false, Ordering::Relaxed);
        // The next call makes a new connection, perhaps to another server (a sentinel's new
        // primary): its version is checked again.
        self.conn.store(None);
        self.checked.store(false, Ordering::Relaxed);
        if !self.down_logged.swap(true, Ordering::Relaxed) {
            let then = match self.mode {
                OnRedisError::Local => {
                    "going on with this instance's own robots.txt cache and pace"
                }
                OnRedisError::Refuse => "refusing requests that need the shared state (503)",
            };
            tracing::error!(
                redis = %self.redacted_url, instance = %self.name, error = %why, was_up,
                "fleet: {what}; {then} until it is back"
            );
        }
        // The error reaches audit records and the admin's robots view; where Redis is, only the
        // log above says (masked).
        SharedError(format!("Redis: {why}"))
    }
}

/// What the server's `INFO server` says of its version ([`version::fit`]). An `INFO` the
/// server refuses (an ACL without it) says nothing, and the server is used.
/// On a cluster `INFO` is asked of every primary, and each must fit.
async fn server_fit(mut conn: Conn) -> redis::RedisResult<version::Fit> {
    match redis::cmd("INFO").arg("server").query_async::<redis::Value>(&mut conn).await {
        Ok(redis::Value::Map(nodes)) => {
            let mut fit = version::Fit::Unknown;
            for (_, info) in nodes {
                match redis::from_redis_value::<String>(info).map(|i| version::fit(&i)) {
                    Ok(version::Fit::TooOld(why)) => return Ok(version::Fit::TooOld(why)),
                    Ok(version::Fit::Fits) => fit = version::Fit::Fits,
                    _ => {}
                }
            }
            Ok(fit)
        }
        Ok(info) => Ok(redis::from_redis_value::<String>(info)
            .map_or(version::Fit::Unknown, |i| version::fit(&i))),
        Err(e) if takes_link_down(&e) => Err(e),
        Err(_) => Ok(version::Fit::Unknown),
    }
}

/// Whether `e` says the link to Redis is down: an I/O error, a timeout, a dropped or refused
/// connection, one that must be made again, or a server that refuses every call (wrong
/// credentials, loading, a read-only replica, a cluster that is down while it fails over). A
/// key of the wrong type, a script error or an out-of-memory answer concern one call's keys:
/// Redis answered, the other sites go on.
fn takes_link_down(e: &redis::RedisError) -> bool {
    use redis::{ErrorKind, ServerErrorKind};
    e.is_io_error()
        || e.is_timeout()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_unrecoverable_error()
        || matches!(
            e.kind(),
            ErrorKind::AuthenticationFailed
                | ErrorKind::Server(
                    ServerErrorKind::BusyLoading
                        | ServerErrorKind::MasterDown
                        | ServerErrorKind::ReadOnly
                        | ServerErrorKind::ClusterDown
                )
        )
}

/// How often a subscription is sent a PING ([`Subscription`]).
pub(crate) const SUBSCRIPTION_PING: Duration = Duration::from_secs(1);

/// A subscription that is known to be alive: it is sent a PING every [`SUBSCRIPTION_PING`],
/// which must be answered within `fleet.timeout`. A connection that died without a FIN or an
/// RST (a Redis host gone, a NAT or load balancer that dropped it, a failover that moved the
/// address) otherwise looks the same as one on which nobody publishes: the messages would stop
/// for good, silently. Redis answers PING on a subscribed connection (RESP2: a `pong` message).
pub(crate) struct Subscription {
    sink: redis::aio::PubSubSink,
    messages: redis::aio::PubSubStream,
    ping: tokio::time::Interval,
    timeout: Duration,
}

/// What came on a [`Subscription`].
pub(crate) enum Heard {
    /// A message.
    Message(redis::Msg),
    /// The subscription is lost, for the reason given: it ended, or a PING went unanswered.
    Lost(&'static str),
}

impl Subscription {
    /// The next message, or the news that the subscription is lost (then it is of no more use:
    /// subscribe again, and assume that messages were missed).
    pub(crate) async fn next(&mut self) -> Heard {
        use futures_core::Stream;
        loop {
            let messages = &mut self.messages;
            let next = std::future::poll_fn(|cx| std::pin::Pin::new(&mut *messages).poll_next(cx));
            tokio::select! {
                message = next => {
                    return message.map_or(Heard::Lost("the subscription ended"), Heard::Message);
                }
                _ = self.ping.tick() => {
                    let pong = self.sink.ping::<redis::Value>();
                    match tokio::time::timeout(self.timeout, pong).await {
                        Ok(Ok(_)) => {}
                        Ok(Err(_)) => return Heard::Lost("a PING on the subscription failed"),
                        Err(_) => {
                            return Heard::Lost("a PING on the subscription went unanswered within fleet.timeout")
                        }
                    }
                }
            }
        }
    }
}

/// Why a subscription could not be made ([`Fleet::subscribe`]).
#[derive(Debug, thiserror::Error)]
pub(crate) enum SubscribeError {
    /// Redis refused or failed.
    #[error(transparent)]
    Redis(#[from] redis::RedisError),
    /// Redis did not answer within `fleet.timeout`.
    #[error("no answer within fleet.timeout")]
    Timeout,
}
