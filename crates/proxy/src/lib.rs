//! The proxy: accepts client connections, asks the policy about each request, and either
//! answers 403 itself or forwards the request to its origin.
//!
//! The decision and the upstream connection use only the authority of the request-target, and
//! the path that is checked is the path that is sent.
//!
//! The root crate re-exports this crate as `robots_proxy::proxy`.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

mod answer;
mod connect;
mod exception;
mod exchange;
mod facts;
mod forward;
mod listener;
mod optouts;
mod pipeline;
mod pool;
mod preferences;
mod refusal;
mod relay;
mod report;
mod safety;

mod throttle;
mod tunnel;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;

use robots_proxy_audit::{AuditLog, AuditRecord};
use robots_proxy_clock::Clock;
use robots_proxy_config::Config;
use robots_proxy_decide::{Policy, RecentRobots, RecentUserAgent, RobotsStore};
use robots_proxy_fleet::Fleet;
use robots_proxy_identity::Signer;
use robots_proxy_metrics::Metrics;
use robots_proxy_net::guard::DestinationGuard;
use robots_proxy_net::server::ConnectionTimeouts;
use robots_proxy_net::tls::ca::CertificateAuthority;
use robots_proxy_net::tls::HttpsSection;
use robots_proxy_pace::Pacer;

pub use listener::TlsListener;

/// The body of every response the proxy sends: streamed from the origin or written by us.
pub(crate) type ProxyBody = UnsyncBoxBody<Bytes, BodyError>;

/// Why a response body streamed from an origin ended before it was complete. The client's
/// connection is then aborted (its response head has gone out already).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum BodyError {
    /// Reading the body from the origin failed.
    #[error("reading the response body from the origin failed")]
    Upstream(#[source] hyper::Error),
    /// The origin sent nothing more of the body for `upstream.body_idle_timeout`.
    #[error(
        "the origin sent nothing of the response body for {} (upstream.body_idle_timeout)",
        humantime::format_duration(*.0)
    )]
    Idle(Duration),
}

/// Why the proxy cannot start, or a reload is refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProxyError {
    /// The users file cannot be used.
    #[error(transparent)]
    Access(#[from] robots_proxy_access::AccessError),
    /// `[pacing]` cannot be applied.
    #[error(transparent)]
    Pacing(#[from] robots_proxy_pace::PacingError),
}

/// What [`Proxy::reload`] did besides swapping the settings.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct Reloaded {
    /// The users file newly put in force because `access.users_file` names another file (or
    /// none: `Some(None)` when authentication was turned off); `None` when it names the same.
    pub users_file: Option<Option<std::path::PathBuf>>,
}

/// A reload built and checked by [`Proxy::prepare_reload`], not yet in force.
pub struct PreparedReload {
    pacing: robots_proxy_pace::PacingPlan,
    users: safety::UsersChange,
    live: Live,
}

/// Everything a request handler needs, shared by all connections.
struct Shared {
    /// What a configuration reload changes; read once per request.
    live: ArcSwap<Live>,
    metrics: Arc<Metrics>,
    /// The robots store, for the policy a reload builds.
    store: Arc<dyn RobotsStore>,
    pacer: Arc<Pacer>,
    audit: AuditLog,
    client: forward::UpstreamClient,
    clock: Arc<dyn Clock>,
    via: forward::Via,
    listen: String,
    /// `proxy.tls_listen`, when the TLS listener is on.
    tls_listen: Option<String>,
    /// The head limits of every client connection, on the listeners and inside interception
    /// (the listeners add CONNECT upgrades). What bounds them in time is [`Live::timeouts`].
    http: robots_proxy_net::server::HttpSettings,
    connect_timeout: Duration,
    /// Access list, authentication, limits and the destination guard (see `safety.rs`).
    safety: safety::Safety,
    /// The fleet this instance belongs to, if any (for the admin's view of it).
    fleet: Option<Arc<Fleet>>,
    /// Bumped by every reload, for what must look again at what a reload changed (a tunnel an
    /// exception opened).
    reloads: tokio::sync::watch::Sender<u64>,
    /// Set at shutdown: every client connection, intercepted ones included, is asked to
    /// finish, and dropped after [`ConnectionTimeouts::drain`].
    stop: tokio::sync::watch::Sender<bool>,
}

/// The part of the configuration a reload replaces (see [`Proxy::reload`]). Everything else in
/// [`Shared`] is fixed at start.
struct Live {
    policy: Arc<Policy>,
    usage: Arc<robots_proxy_decide::usage::UsagePolicy>,
    response_timeout: Duration,
    body_idle_timeout: Duration,
    /// `[https]`: the mode and ports a CONNECT is judged by (a tunnel keeps those it opened
    /// with); the listener-side keys (`https.upstream_ca_file`) are not read from here.
    https: HttpsSection,
    /// The CA for HTTPS interception, when `https.mode = "intercept"`.
    ca: Option<Arc<CertificateAuthority>>,
    /// Web Bot Auth: signs the requests of the identities it knows, last thing before they go.
    signer: Option<Arc<Signer>>,
    /// What bounds a client connection in time: a connection reads it when it is accepted, a
    /// CONNECT when it arrives (see [`connection_timeouts`]).
    timeouts: ConnectionTimeouts,
}

/// The proxy's [`ConnectionTimeouts`], from `config`: on a reload (`running`, those in force),
/// only the reloadable key (`https.tunnel_idle_timeout`) is taken from `config`; the others
/// apply after a restart (`config::reload::restart_reason`).
fn connection_timeouts(
    config: &Config,
    running: Option<&ConnectionTimeouts>,
) -> ConnectionTimeouts {
    let tunnel_idle = config.https.tunnel_idle_timeout;
    if let Some(running) = running {
        return ConnectionTimeouts { tunnel_idle, ..*running };
    }
    ConnectionTimeouts {
        head: config.proxy.header_read_timeout,
        body: config.limits.client_body_idle_timeout,
        write: config.limits.client_write_timeout,
        drain: config.proxy.shutdown_grace,
        tunnel_idle,
    }
}

/// What a reload builds besides the configuration, because building it may fail or costs a
/// file read: the CA (`https.mode = "intercept"`) and the signer (`[signing]`). See
/// [`Proxy::reload`].
#[derive(Default)]
pub struct LiveParts {
    /// The CA for HTTPS interception, when `https.mode = "intercept"`.
    pub ca: Option<Arc<CertificateAuthority>>,
    /// The Web Bot Auth signer, when `[signing]` has keys.
    pub signer: Option<Arc<Signer>>,
}

impl Live {
    fn new(
        config: &Config,
        store: &Arc<dyn RobotsStore>,
        parts: LiveParts,
        timeouts: ConnectionTimeouts,
    ) -> Self {
        Live {
            timeouts,
            https: config.https.clone(),
            ca: parts.ca,
            signer: parts.signer,
            policy: Arc::new(Policy::new(&config.policy, store.clone()).with_exceptions(Arc::new(
                robots_proxy_decide::Exceptions::new(&config.exceptions),
            ))),
            usage: Arc::new(robots_proxy_decide::usage::UsagePolicy::new(&config.usage)),
            response_timeout: config.upstream.response_timeout,
            body_idle_timeout: config.upstream.body_idle_timeout,
        }
    }
}

impl Shared {
    /// What every refusal does before it is counted and written: the refusal written into its
    /// record (action, outcome, status), listed among the blocks on the admin page, logged.
    /// Every refusal goes through it, from [`exchange::Ledger::refuse`].
    fn note_refusal(&self, record: &mut AuditRecord, refusal: &refusal::Refusal) {
        refusal.stamp(record);
        self.metrics.blocked(record);
        tracing::info!(
            action = %record.action,
            url = %record.url,
            token = record.product_token.as_deref(),
            reading = record.reading.as_deref(),
            reason = %record.reason,
            "refused"
        );
    }

    /// The reloadable settings in force now. A request reads them once, so that a reload in
    /// the middle of it cannot mix old and new (say, decide by one token header and strip
    /// another); so does a CONNECT, and its tunnel keeps them. In builds with debug
    /// assertions (the tests), a second reading inside one [`exchange_scope`] panics.
    fn live(&self) -> Arc<Live> {
        count_live_read();
        self.live.load_full()
    }

    /// Completes once the proxy is shutting down (see [`Shared::stop`]).
    fn stopping(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut stop = self.stop.subscribe();
        async move { drop(stop.wait_for(|stop| *stop).await) }
    }
}

/// Counts a reading of [`Live`] in the exchange running on this task, if any; in builds with
/// debug assertions, panics at the second (review-house D4).
fn count_live_read() {
    #[cfg(debug_assertions)]
    let _ = LIVE_READS.try_with(|reads| {
        reads.set(reads.get() + 1);
        assert!(
            reads.get() == 1,
            "the reloadable state (Live) was read twice in one request or CONNECT: read it \
             once and pass it down (docs/architecture.md)"
        );
    });
}

#[cfg(debug_assertions)]
tokio::task_local! {
    /// How many times the exchange running on this task has read [`Live`].
    static LIVE_READS: std::cell::Cell<u32>;
}

/// Runs `handling`, one request or one CONNECT, as one exchange: in builds with debug
/// assertions, one that reads [`Live`] more than once panics (review-house D4).
#[cfg(debug_assertions)]
fn exchange_scope<F: std::future::Future>(
    handling: F,
) -> impl std::future::Future<Output = F::Output> {
    LIVE_READS.scope(std::cell::Cell::new(0), handling)
}

/// [`exchange_scope`] in a release build: `handling` itself. Not an `async fn` around it: that
/// would hold the future twice (as its argument and as what it awaits), and the request's
/// future, boxed and moved once per request, would weigh twice as much (11 KB, not 5.7 KB).
#[cfg(not(debug_assertions))]
fn exchange_scope<F: std::future::Future>(handling: F) -> F {
    handling
}

/// What the composition root builds once for the process and hands to [`Proxy::new`].
pub struct ProxyParts {
    /// Where robots.txt snapshots come from (the policy's store).
    pub store: Arc<dyn RobotsStore>,
    /// The audit log writer.
    pub audit: AuditLog,
    /// The clock decisions are made by.
    pub clock: Arc<dyn Clock>,
    /// The CA for HTTPS interception, when `https.mode = "intercept"`.
    pub ca: Option<Arc<CertificateAuthority>>,
    /// The process's one destination guard.
    pub guard: Arc<DestinationGuard>,
    /// The process's one TLS client configuration for origins.
    pub tls: Arc<rustls::ClientConfig>,
    /// The pacer (pacing per authority across every crawler).
    pub pacer: Arc<Pacer>,
    /// The fleet (`[fleet]`), when robots.txt and the pace are shared through Redis. The
    /// store and the pacer above are then already the shared ones; this is for the view.
    pub fleet: Option<Arc<Fleet>>,
    /// The Web Bot Auth signer (`[signing]`), when keys are configured.
    pub signer: Option<Arc<Signer>>,
}

/// A configured proxy, ready to serve a listener.
#[derive(Clone)]
pub struct Proxy {
    shared: Arc<Shared>,
}

impl Proxy {
    /// Builds a proxy from the configuration and the collaborators the composition root
    /// (`main.rs`) made once for the process. `parts.ca` is required for
    /// `https.mode = "intercept"`; without it CONNECT requests in that mode are refused.
    ///
    /// `parts.guard` and `parts.tls` are the process's one destination guard and TLS client
    /// configuration for origins ([`robots_proxy_net::tls::client_config`]), shared with the robots.txt
    /// fetcher of `parts.store` (see [`robots_proxy_net::tls::https_connector`]): the listeners the guard
    /// learns (the proxy's in [`Proxy::serve`], the admin's in `admin::serve`) are
    /// then refused for forwards, tunnels and robots.txt fetches alike.
    ///
    /// Must be called inside a tokio runtime: the pool of origin connections starts its
    /// reaper of idle connections here.
    pub fn new(config: &Config, parts: ProxyParts) -> Result<Self, ProxyError> {
        let ProxyParts { store, audit, clock, ca, guard, tls, pacer, fleet, signer } = parts;
        let metrics = Arc::new(Metrics::with_pacer(
            store.clone(),
            audit.clone(),
            Some(pacer.clone()),
            fleet.clone(),
        ));
        let timeouts = connection_timeouts(config, None);
        let live = Live::new(config, &store, LiveParts { ca, signer }, timeouts);
        let shared = Shared {
            live: ArcSwap::from_pointee(live),
            metrics,
            store,
            pacer,
            audit,
            // A clone shares the verifier and the session cache of the one configuration.
            client: forward::client(&config.upstream, (*tls).clone(), guard.clone()),
            clock,
            via: forward::Via::new(&config.proxy.via),
            listen: config.proxy.listen.to_string(),
            tls_listen: config.proxy.tls_listen.map(|a| a.to_string()),
            http: robots_proxy_net::server::HttpSettings::default().with_limits(&config.limits),
            connect_timeout: config.upstream.connect_timeout,
            safety: safety::Safety::new(config, guard)?,
            fleet,
            reloads: tokio::sync::watch::Sender::new(0),
            stop: tokio::sync::watch::Sender::new(false),
        };
        Ok(Proxy { shared: Arc::new(shared) })
    }

    /// Applies the reloadable part of `config` (see [`robots_proxy_config::RELOADABLE`]) to requests
    /// and connections that start from now on: the policy, `[usage]` and the exceptions,
    /// `[https]`'s mode and ports with the CA and the signer of `parts`, `[access]` (the
    /// allowed clients, the destination guard's `allow_destinations`, the users file when it
    /// names another file), `[pacing]` and the upstream timeouts. Open connections and tunnels
    /// keep what they started with; the robots cache and the pace already kept stay.
    ///
    /// Everything that can fail is checked first: on error nothing changes. The audit options
    /// are the audit log's to apply ([`AuditLog::reconfigure`]), the robots.txt lifetimes the
    /// cache's.
    pub fn reload(&self, config: &Config, parts: LiveParts) -> Result<Reloaded, ProxyError> {
        let prepared = self.prepare_reload(config, parts)?;
        Ok(self.apply_reload(config, prepared))
    }

    /// The first half of [`Proxy::reload`]: builds and checks everything for `config`, and
    /// changes nothing.
    pub fn prepare_reload(
        &self,
        config: &Config,
        parts: LiveParts,
    ) -> Result<PreparedReload, ProxyError> {
        let pacing = self.shared.pacer.prepare(&config.pacing)?;
        let users = self.shared.safety.prepare_users(config)?;
        let running = self.shared.live.load();
        let timeouts = connection_timeouts(config, Some(&running.timeouts));
        let live = Live::new(config, &self.shared.store, parts, timeouts);
        live.policy.exceptions().carry_counts(running.policy.exceptions());
        Ok(PreparedReload { pacing, users, live })
    }

    /// The second half of [`Proxy::reload`]: puts in force what [`Proxy::prepare_reload`] built
    /// from `config`. Nothing here can fail.
    pub fn apply_reload(&self, config: &Config, prepared: PreparedReload) -> Reloaded {
        let PreparedReload { pacing, users, live } = prepared;
        self.shared.pacer.apply(pacing);
        let users_file = self.shared.safety.apply(config, users);
        self.shared.live.store(Arc::new(live));
        self.shared.reloads.send_modify(|n| *n = n.wrapping_add(1));
        Reloaded { users_file }
    }

    /// Reads `access.users_file` again (SIGHUP) and puts its users in force; a file that cannot
    /// be read or parsed keeps the users in force. `None` without a users file; otherwise the
    /// file read, or why it was refused (the error names the file and the line).
    pub fn reload_users(
        &self,
    ) -> Option<Result<std::path::PathBuf, robots_proxy_access::AccessError>> {
        self.shared.safety.reload_users()
    }

    /// The users file in force (`access.users_file`, as the last reload set it).
    pub fn users_file(&self) -> Option<std::path::PathBuf> {
        self.shared.safety.users_file()
    }

    /// The CA for HTTPS interception in force, if any.
    pub fn ca(&self) -> Option<Arc<CertificateAuthority>> {
        self.shared.live().ca.clone()
    }

    /// The destination guard every connection of this proxy goes through.
    pub fn guard(&self) -> &Arc<DestinationGuard> {
        &self.shared.safety.guard
    }

    /// The metrics this proxy records.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.shared.metrics
    }

    /// The audit log the proxy writes to.
    pub fn audit(&self) -> &AuditLog {
        &self.shared.audit
    }

    /// The policy in force now (it changes on [`Proxy::reload`]).
    pub fn policy(&self) -> Arc<Policy> {
        self.shared.live().policy.clone()
    }

    /// The clock decisions are made by.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.shared.clock
    }

    /// The pacer, for its statistics ([`Pacer::stats`], [`Pacer::queue_depths`]).
    pub fn pacer(&self) -> Arc<Pacer> {
        self.shared.pacer.clone()
    }

    /// The fleet this instance belongs to, if any.
    pub fn fleet(&self) -> Option<&Arc<Fleet>> {
        self.shared.fleet.as_ref()
    }
}

/// What a client connection remembers from one request to the next, so that the requests of
/// a keep-alive connection (the same crawler, usually the same few sites) skip look-ups in
/// structures every connection shares. Locked only by the requests of the connection (one at
/// a time on HTTP/1.1, briefly by concurrent streams on HTTP/2), so hardly ever contended.
#[derive(Default)]
struct ConnectionMemory {
    robots: Mutex<RecentRobots>,
    user_agent: Mutex<RecentUserAgent>,
    /// Whether the connection came through the TLS listener (for the proxy URL the
    /// "not a proxy request" answer gives).
    over_tls: bool,
    /// Told when a request of the connection proves its user (`limits.auth_timeout`).
    authenticated: tokio::sync::Notify,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reload_changes_only_the_reloadable_connection_timeout() {
        let started = Config::default();
        let running = connection_timeouts(&started, None);
        assert_eq!(running.head, started.proxy.header_read_timeout);
        assert_eq!(running.drain, started.proxy.shutdown_grace);
        let mut new = started.clone();
        new.proxy.header_read_timeout = Duration::from_secs(7);
        new.limits.client_write_timeout = Duration::from_secs(8);
        new.limits.client_body_idle_timeout = Duration::from_secs(9);
        new.proxy.shutdown_grace = Duration::from_secs(10);
        new.https.tunnel_idle_timeout = Duration::from_secs(11);
        let reloaded = connection_timeouts(&new, Some(&running));
        assert_eq!(
            reloaded,
            ConnectionTimeouts { tunnel_idle: Duration::from_secs(11), ..running }
        );
        let fresh = connection_timeouts(&new, None);
        assert_eq!(
            (fresh.head, fresh.write, fresh.body, fresh.drain, fresh.tunnel_idle),
            (
                new.proxy.header_read_timeout,
                new.limits.client_write_timeout,
                new.limits.client_body_idle_timeout,
                new.proxy.shutdown_grace,
                new.https.tunnel_idle_timeout
            )
        );
    }

    #[cfg(debug_assertions)]
    #[tokio::test]
    async fn one_reading_of_live_per_exchange_holds_and_a_second_panics() {
        exchange_scope(async { count_live_read() }).await;
        // Outside an exchange (the admin's view, a tunnel's reload watch) nothing is counted.
        count_live_read();
        count_live_read();
        let twice = tokio::spawn(exchange_scope(async {
            count_live_read();
            count_live_read();
        }));
        let panicked = twice.await.expect_err("a second reading in one exchange panics");
        assert!(panicked.is_panic());
    }
}
