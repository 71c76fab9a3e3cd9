//! The proxy: accepts client connections, asks the policy about each request, and either
//! answers 403 itself or forwards the request to its origin.
//!
//! The decision and the upstream connection use only the authority of the request-target, and
//! the path that is checked is the path that is sent.

mod answer;
mod connect;
mod facts;
mod forward;
mod pool;
mod preferences;
mod safety;
mod throttle;

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;

use crate::audit::{AuditLog, AuditRecord};
use crate::authority::{Authority, Scheme};
use crate::clock::Clock;
use crate::config::Config;
use crate::fleet::Fleet;
use crate::guard::DestinationGuard;
use crate::metrics::{Decision, Metrics};
use crate::pacing::Pacer;
use crate::policy::{
    Policy, Readings, RecentRobots, RecentUserAgent, RobotsSnapshot, RobotsStore, UsagePreferences,
};
use crate::tls::ca::CertificateAuthority;
use crate::tls::HttpsSection;

/// The body of every response the proxy sends: streamed from the origin or written by us.
pub type ProxyBody = UnsyncBoxBody<Bytes, BodyError>;

/// Why a response body streamed from an origin ended before it was complete. The client's
/// connection is then aborted (its response head has gone out already).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BodyError {
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

/// Why the proxy cannot start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProxyError {
    /// The users file cannot be used.
    #[error(transparent)]
    Access(#[from] crate::access::AccessError),
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
    header_read_timeout: Duration,
    connect_timeout: Duration,
    https: HttpsSection,
    ca: Option<Arc<CertificateAuthority>>,
    /// Access list, authentication, limits and the destination guard (see `safety.rs`).
    safety: safety::Safety,
    /// The fleet this instance belongs to, if any (for the admin's view of it).
    fleet: Option<Arc<Fleet>>,
}

/// The part of the configuration a reload replaces (see [`Proxy::reload`]). Everything else in
/// [`Shared`] is fixed at start.
struct Live {
    policy: Arc<Policy>,
    usage: Arc<crate::usage::UsagePolicy>,
    response_timeout: Duration,
    body_idle_timeout: Duration,
}

impl Live {
    fn new(config: &Config, store: &Arc<dyn RobotsStore>) -> Self {
        Live {
            policy: Arc::new(Policy::new(&config.policy, store.clone())),
            usage: Arc::new(crate::usage::UsagePolicy::new(&config.usage)),
            response_timeout: config.upstream.response_timeout,
            body_idle_timeout: config.upstream.body_idle_timeout,
        }
    }
}

impl Shared {
    /// Queues an audit record. The writer never drops one (a full queue makes the request
    /// wait), so an error means the writer has stopped; it is logged, not answered.
    async fn write_audit(&self, record: AuditRecord) {
        if let Err(e) = self.audit.record(record).await {
            tracing::error!(error = %e, "audit record could not be queued");
        }
    }

    /// The one way a request is refused: counts it (once, from what the record says was
    /// done), lists it among the blocks on the admin page, logs it, writes its audit record,
    /// and gives back the answer.
    async fn refuse(
        &self,
        record: AuditRecord,
        scheme: Scheme,
        answer: Response<ProxyBody>,
    ) -> Response<ProxyBody> {
        self.metrics.count(Decision::of(record.action), scheme);
        self.metrics.blocked(&record);
        tracing::info!(
            action = %record.action,
            url = %record.url,
            token = ?record.product_token,
            reading = ?record.reading,
            reason = %record.reason,
            "refused"
        );
        self.write_audit(record).await;
        answer
    }

    /// The reloadable settings in force now. A request reads them once, so that a reload in
    /// the middle of it cannot mix old and new (say, decide by one token header and strip
    /// another).
    fn live(&self) -> Arc<Live> {
        self.live.load_full()
    }
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
    /// configuration for origins ([`crate::tls::client_config`]), shared with the robots.txt
    /// fetcher of `parts.store` (see [`crate::tls::https_connector`]): the listeners the guard
    /// learns (the proxy's in [`Proxy::serve`], the admin's in [`crate::admin::serve`]) are
    /// then refused for forwards, tunnels and robots.txt fetches alike.
    ///
    /// Must be called inside a tokio runtime: the pool of origin connections starts its
    /// reaper of idle connections here.
    pub fn new(config: &Config, parts: ProxyParts) -> Result<Self, ProxyError> {
        let ProxyParts { store, audit, clock, ca, guard, tls, pacer, fleet } = parts;
        let metrics = Arc::new(Metrics::with_pacer(
            store.clone(),
            audit.clone(),
            Some(pacer.clone()),
            fleet.clone(),
        ));
        let shared = Shared {
            live: ArcSwap::from_pointee(Live::new(config, &store)),
            metrics,
            store,
            pacer,
            audit,
            // A clone shares the verifier and the session cache of the one configuration.
            client: forward::client(&config.upstream, (*tls).clone(), guard.clone()),
            clock,
            via: forward::Via::new(&config.proxy.via),
            listen: config.proxy.listen.to_string(),
            header_read_timeout: config.proxy.header_read_timeout,
            connect_timeout: config.upstream.connect_timeout,
            https: config.https.clone(),
            ca,
            safety: safety::Safety::new(config, guard)?,
            fleet,
        };
        Ok(Proxy { shared: Arc::new(shared) })
    }

    /// Applies the reloadable part of `config` (the `[policy]` section,
    /// `upstream.response_timeout` and `upstream.body_idle_timeout`) to requests that start
    /// from now on. Open connections and the robots cache are kept. On error nothing changes. The audit options are the audit
    /// log's to apply ([`AuditLog::reconfigure`]); see [`crate::config::RELOADABLE`].
    pub fn reload(&self, config: &Config) -> Result<(), ProxyError> {
        let live = Live::new(config, &self.shared.store);
        self.shared.live.store(Arc::new(live));
        Ok(())
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

    /// Serves connections from `listener` until `shutdown` completes, then stops accepting and
    /// lets open connections finish their current request for up to `grace`.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()>,
        grace: Duration,
    ) {
        // Connections watch `stop` to finish gracefully; each holds a clone of `alive`, so
        // `all_closed` completes when the last one ends.
        let (stop, stop_rx) = tokio::sync::watch::channel(false);
        let (alive, mut all_closed) = tokio::sync::mpsc::channel::<()>(1);
        tokio::pin!(shutdown);
        // safety: a request to the proxy's own listener must never loop back into it.
        if let Ok(local) = listener.local_addr() {
            self.shared.safety.guard.add_own_listener(local);
        }
        self.shared.metrics.set_listening(true);
        loop {
            // safety: limits.max_connections with when_full = "wait" waits here, before accept.
            let slot = tokio::select! {
                slot = self.shared.safety.wait_for_slot() => slot,
                () = &mut shutdown => break,
            };
            let (stream, peer) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(conn) => conn,
                    Err(e) => {
                        // Out of file descriptors and the like: wait, don't die.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
                () = &mut shutdown => break,
            };
            let _ = stream.set_nodelay(true);
            // safety: access.allow_clients and limits.max_connections; refused ones are closed.
            let Some(io) = self.shared.safety.admit(stream, peer, slot) else { continue };
            // One per connection: cloning it for each request touches only this connection's
            // counter, not one that every connection shares.
            let connection = Arc::new(Connection {
                shared: self.shared.clone(),
                peer,
                memory: ConnectionMemory::default(),
                verdicts: io.verdicts(),
            });
            let service = service_fn(move |req| {
                let connection = connection.clone();
                // safety: request smuggling checks, one verdict per request head, in order.
                let verdict = connection.verdicts.next();
                async move {
                    let Connection { shared, peer, memory, verdicts } = &*connection;
                    if let Some(refused) = shared.safety.check_request(*peer, &req, verdict) {
                        return Ok::<_, Infallible>(refused);
                    }
                    let connect = req.method() == Method::CONNECT;
                    // Boxed: hyper keeps the service's future in the connection for as long
                    // as the connection lives, idle or not, and moves it on every request;
                    // a pointer is cheaper to move and to keep than the whole request state.
                    let handling = Box::pin(handle(shared, memory, *peer, req));
                    let resp = handling.await;
                    if connect {
                        // safety: a refused CONNECT leaves the connection in HTTP/1.1.
                        verdicts.connect_answered(resp.status().is_success());
                    }
                    Ok::<_, Infallible>(resp)
                }
            });
            let mut builder = hyper::server::conn::http1::Builder::new();
            // safety: limits.max_headers and limits.max_header_bytes (431 beyond them).
            self.shared.safety.limits.apply_http1(&mut builder);
            let conn = builder
                .timer(TokioTimer::new())
                .header_read_timeout(self.shared.header_read_timeout)
                .keep_alive(true)
                .serve_connection(TokioIo::new(io), service)
                .with_upgrades();
            let mut stop_rx = stop_rx.clone();
            let alive = alive.clone();
            let open = self.shared.metrics.connection_opened();
            tokio::spawn(async move {
                let _alive = (alive, open);
                tokio::pin!(conn);
                let result = tokio::select! {
                    r = conn.as_mut() => r,
                    () = async { drop(stop_rx.wait_for(|stop| *stop).await) } => {
                        conn.as_mut().graceful_shutdown();
                        conn.await
                    }
                };
                if let Err(e) = result {
                    tracing::debug!(client = %peer, error = %e, "client connection ended with an error");
                }
            });
        }
        drop(listener);
        self.shared.metrics.set_listening(false);
        drop(alive);
        let _ = stop.send(true);
        tokio::select! {
            _ = all_closed.recv() => tracing::info!("all connections closed"),
            () = tokio::time::sleep(grace) => tracing::warn!("grace period over; closing open connections"),
        }
    }
}

/// A client connection, as its requests see it.
struct Connection {
    shared: Arc<Shared>,
    peer: SocketAddr,
    memory: ConnectionMemory,
    /// The framing watch's verdicts on its request heads (see `crate::framing`).
    verdicts: crate::framing::Verdicts,
}

/// What a client connection remembers from one request to the next, so that the requests of
/// a keep-alive connection (the same crawler, usually the same few sites) skip look-ups in
/// structures every connection shares. Locked only by the request in progress (HTTP/1.1
/// serves one at a time), so never contended.
#[derive(Default)]
struct ConnectionMemory {
    robots: Mutex<RecentRobots>,
    user_agent: Mutex<RecentUserAgent>,
}

/// One request from a client connection: a CONNECT, or an absolute-form proxy request.
async fn handle(
    shared: &Arc<Shared>,
    memory: &ConnectionMemory,
    client: SocketAddr,
    req: Request<Incoming>,
) -> Response<ProxyBody> {
    // safety: proxy authentication (access.users_file), CONNECT included.
    let req = if shared.safety.requires_credentials() {
        let authenticating = Box::pin(shared.safety.authenticate(client, req));
        match authenticating.await {
            Ok(req) => req,
            Err(answer) => return answer,
        }
    } else {
        req
    };
    if req.method() == Method::CONNECT {
        let connecting = Box::pin(connect::handle_connect(shared.clone(), client, req));
        return connecting.await;
    }
    let uri = req.uri();
    if uri.scheme().is_none() && uri.authority().is_none() {
        return answer::not_a_proxy_request(&shared.listen);
    }
    let authority = match Authority::from_uri(uri) {
        Ok(a) => a,
        Err(e) => {
            return answer::text(
                StatusCode::BAD_REQUEST,
                "http_request_error",
                format!("400 Bad Request: cannot proxy {uri}: {e}\n"),
            )
        }
    };
    if authority.scheme() != Scheme::Http {
        return answer::text(
            StatusCode::BAD_REQUEST,
            "http_request_error",
            format!(
                "400 Bad Request: {uri}: send https:// requests through CONNECT \
                 (set HTTPS_PROXY), not as plain proxy requests\n"
            ),
        );
    }
    process(shared, memory, client, authority, req).await
}

/// When robots.txt could not be fetched because the origin's TLS certificate failed
/// verification, the request could not be forwarded either: answer 502 naming the TLS error
/// rather than a 403 that would blame robots.txt.
fn untrusted_origin(snapshot: &RobotsSnapshot) -> Option<Response<ProxyBody>> {
    if let Some(answer) = fleet_unavailable(snapshot) {
        return Some(answer);
    }
    let error = snapshot.untrusted_certificate()?;
    Some(answer::text(
        StatusCode::BAD_GATEWAY,
        "tls_certificate_error",
        format!(
            "502 Bad Gateway: TLS with {} failed: {error}\n\nThe origin's certificate is not \
             trusted (see https.upstream_ca_file).\n",
            snapshot.authority
        ),
    ))
}

/// With a fleet whose shared state is required (`fleet.on_redis_error = "refuse"`) and out of
/// reach, the request cannot be decided: answer 503 naming the cause.
fn fleet_unavailable(snapshot: &RobotsSnapshot) -> Option<Response<ProxyBody>> {
    let why = snapshot.fleet_unavailable()?;
    Some(answer::text(
        StatusCode::SERVICE_UNAVAILABLE,
        "proxy_internal_error",
        format!(
            "503 Service Unavailable: the fleet's shared state cannot be reached ({why}), and \
             fleet.on_redis_error is \"refuse\"\n"
        ),
    ))
}

/// The explained decision for a request that is blocked, or that is audited although
/// allowed (`audit.all_decisions`): writes its audit record and answers `Some(403)` when the
/// request is blocked, `None` when it may go on.
async fn decide_and_audit(
    shared: &Shared,
    policy: &Policy,
    facts: &facts::Facts,
    snapshot: &RobotsSnapshot,
    started: Instant,
) -> Option<Response<ProxyBody>> {
    let now = shared.clock.now();
    let decision = policy.decide(snapshot, facts.token(), &facts.readings, now);
    shared.metrics.decision_time(started);
    let url = facts.url();
    let status = (!decision.is_allowed()).then_some(403);
    let mut record = decision.audit_record(
        now,
        facts.client,
        &facts.method,
        &url,
        &facts.authority.to_string(),
        facts.path(),
        facts.user_agent(),
        facts.token(),
        status,
    );
    record.token_source = Some(facts.token_origin.as_str());
    if decision.is_allowed() {
        shared.write_audit(record).await;
        return None;
    }
    let token = facts.token().map(|t| t.as_str());
    let answer = answer::blocked(&decision, &url, token, facts.want_json);
    Some(shared.refuse(record, facts.authority.scheme(), answer).await)
}

/// Decides one request for `authority` and answers 403 or forwards it. Shared by plain proxy
/// requests and requests read inside an intercepted CONNECT tunnel.
///
/// Only the common path (decide, allow, forward) is awaited in place; every other await is
/// boxed, which keeps this future small (hyper moves it at least once per request).
async fn process(
    shared: &Arc<Shared>,
    memory: &ConnectionMemory,
    client: SocketAddr,
    authority: Authority,
    req: Request<Incoming>,
) -> Response<ProxyBody> {
    let started = Instant::now();
    let live = shared.live();
    // Forwarded as received; decided on every reading of it (policy::readings).
    let readings = Readings::of(req.uri().path_and_query().map_or("/", |p| p.as_str()));
    let token = live.policy.token_for_connection(
        safety::tied_token(&req),
        req.headers(),
        &mut memory.user_agent.lock().unwrap_or_else(|poisoned| poisoned.into_inner()),
    );
    let facts = facts::Facts::of(&req, client, authority, readings, token);
    let authority = &facts.authority;
    // safety: the destination guard, for an IP literal before robots.txt is even fetched.
    if let Some(p) = shared.safety.literal_prohibited(authority) {
        let why = p.to_string();
        return Box::pin(safety::refuse_request(shared, &facts, &why)).await;
    }
    let snapshot = live.policy.robots_for(&memory.robots, authority).await;
    // safety: the robots.txt fetch (or a redirect of it) went to a prohibited address.
    if let Some(why) = safety::robots_prohibited(&snapshot) {
        return Box::pin(safety::refuse_request(shared, &facts, why)).await;
    }
    if let Some(answer) = untrusted_origin(&snapshot) {
        shared.metrics.upstream_error("tls_certificate_error");
        return answer;
    }
    // robots.txt: every reading of the path must be allowed.
    if shared.audit.all_decisions()
        || !live.policy.is_allowed(&snapshot, facts.token(), &facts.readings)
    {
        // Boxed: the audit record and the explanation are big, and the allowed requests that
        // never come here should not carry room for them.
        let deciding = Box::pin(decide_and_audit(shared, &live.policy, &facts, &snapshot, started));
        if let Some(blocked) = deciding.await {
            return blocked;
        }
    } else {
        shared.metrics.decision_time(started);
    }
    // AI usage preferences (crate::usage): only for crawlers with configured purposes.
    let purposes = if live.usage.is_active() {
        live.usage.purposes_for(facts.token(), facts.user_name())
    } else {
        Vec::new()
    };
    let mut usage_prefs = UsagePreferences::default();
    if !purposes.is_empty() {
        usage_prefs = live.policy.usage_for(&snapshot, facts.token(), &facts.readings);
        if let Some(block) = live.usage.blocking(&purposes, &usage_prefs) {
            let subject = preferences::Subject { facts: &facts, snapshot: &snapshot };
            let action = crate::audit::AuditAction::UsageDisallow;
            let refusal = Box::pin(preferences::refuse(
                shared,
                &live.policy,
                &subject,
                &purposes,
                &usage_prefs,
                &block,
                action,
            ));
            return refusal.await;
        }
    }
    // Politeness (crate::pacing): wait for the site's pace, or answer 429. The permit is held
    // until the origin's response headers arrive.
    let _permit = if shared.pacer.is_enabled() {
        let admitting = Box::pin(shared.pacer.admit(authority, &snapshot, facts.token()));
        match admitting.await {
            Ok(permit) => permit,
            Err(throttled) => {
                return Box::pin(throttle::refused(shared, &facts, &snapshot, &throttled)).await;
            }
        }
    } else {
        crate::pacing::PacePermit::default()
    };
    // Counted as allowed once the origin's answer is known: it may still be refused (the
    // guard at connect time) or withheld (usage preferences), and each request counts once.
    let forwarded = forward::upstream_request(
        req,
        authority,
        facts.path(),
        live.policy.token_header(),
        &shared.via,
    );
    let upstream = match forwarded {
        Ok(r) => r,
        Err(e) => {
            shared.metrics.count(Decision::Allow, authority.scheme());
            return answer::text(
                StatusCode::BAD_REQUEST,
                "http_request_error",
                format!("400 Bad Request: cannot build the upstream request: {e}\n"),
            );
        }
    };
    let resp = forward::send(
        &shared.client,
        authority,
        upstream,
        forward::Timeouts { response: live.response_timeout, body_idle: live.body_idle_timeout },
        &shared.via,
        &shared.metrics,
    )
    .await;
    // safety: the guard refused the origin's address at connect time (its DNS answer changed
    // since robots.txt was fetched): audit the 403 that `send` made of it.
    if let Some(p) = resp.extensions().get::<crate::guard::Prohibited>() {
        let why = p.to_string();
        return Box::pin(safety::refuse_request(shared, &facts, &why)).await;
    }
    if purposes.is_empty() {
        shared.metrics.count(Decision::Allow, authority.scheme());
        return resp;
    }
    let subject = preferences::Subject { facts: &facts, snapshot: &snapshot };
    let answer = Box::pin(preferences::on_response(
        shared,
        &live.policy,
        &live.usage,
        &subject,
        &purposes,
        usage_prefs,
        resp,
    ));
    answer.await
}
