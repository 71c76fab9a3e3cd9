//! The proxy: accepts client connections, asks the policy about each request, and either
//! answers 403 itself or forwards the request to its origin.
//!
//! The decision and the upstream connection use only the authority of the request-target, and
//! the path that is checked is the path that is sent.

mod answer;
mod connect;
mod forward;
mod safety;

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;

use crate::audit::AuditLog;
use crate::authority::{Authority, Scheme};
use crate::cache::RobotsCache;
use crate::clock::Clock;
use crate::config::Config;
use crate::policy::{Policy, PolicyError};
use crate::robots::normalize::normalize_request_path;
use crate::tls::ca::CertificateAuthority;
use crate::tls::HttpsSection;

/// The body of every response the proxy sends: streamed from the origin or written by us.
pub type ProxyBody = UnsyncBoxBody<Bytes, hyper::Error>;

/// Why the proxy cannot start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProxyError {
    /// The policy configuration is invalid.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// The TLS client configuration for origins is invalid.
    #[error(transparent)]
    ClientTls(#[from] crate::tls::ClientTlsError),
    /// The users file cannot be used.
    #[error(transparent)]
    Access(#[from] crate::access::AccessError),
}

/// Everything a request handler needs, shared by all connections.
struct Shared {
    policy: Policy,
    cache: Arc<RobotsCache>,
    audit: AuditLog,
    client: forward::UpstreamClient,
    clock: Arc<dyn Clock>,
    via: forward::Via,
    listen: String,
    response_timeout: Duration,
    header_read_timeout: Duration,
    connect_timeout: Duration,
    https: HttpsSection,
    ca: Option<Arc<CertificateAuthority>>,
    /// Access list, authentication, limits and the destination guard (see `safety.rs`).
    safety: safety::Safety,
}

/// A configured proxy, ready to serve a listener.
#[derive(Clone)]
pub struct Proxy {
    shared: Arc<Shared>,
}

impl Proxy {
    /// Builds a proxy from the configuration and its collaborators. `ca` is required for
    /// `https.mode = "intercept"`; without it CONNECT requests in that mode are refused.
    pub fn new(
        config: &Config,
        cache: Arc<RobotsCache>,
        audit: AuditLog,
        clock: Arc<dyn Clock>,
        ca: Option<Arc<CertificateAuthority>>,
    ) -> Result<Self, ProxyError> {
        let tls = crate::tls::client_config(config.https.upstream_ca_file.as_deref())?;
        let guard = Arc::new(crate::guard::DestinationGuard::from_config(config));
        let shared = Shared {
            policy: Policy::new(&config.policy)?,
            cache,
            audit,
            client: forward::client(&config.upstream, tls, guard.clone()),
            clock,
            via: forward::Via::new(&config.proxy.via),
            listen: config.proxy.listen.to_string(),
            response_timeout: config.upstream.response_timeout,
            header_read_timeout: config.proxy.header_read_timeout,
            connect_timeout: config.upstream.connect_timeout,
            https: config.https.clone(),
            ca,
            safety: safety::Safety::new(config, guard)?,
        };
        Ok(Proxy { shared: Arc::new(shared) })
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
            let verdicts = io.verdicts();
            let shared = self.shared.clone();
            let service = service_fn(move |req| {
                let shared = shared.clone();
                // safety: request smuggling checks, one verdict per request head, in order.
                let verdict = verdicts.next();
                async move {
                    if let Some(refused) = shared.safety.check_request(peer, &req, verdict) {
                        return Ok::<_, Infallible>(refused);
                    }
                    Ok::<_, Infallible>(handle(shared, peer, req).await)
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
            tokio::spawn(async move {
                let _alive = alive;
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
        drop(alive);
        let _ = stop.send(true);
        tokio::select! {
            _ = all_closed.recv() => tracing::info!("all connections closed"),
            () = tokio::time::sleep(grace) => tracing::warn!("grace period over; closing open connections"),
        }
    }
}

/// One request from a client connection: a CONNECT, or an absolute-form proxy request.
async fn handle(
    shared: Arc<Shared>,
    client: SocketAddr,
    req: Request<Incoming>,
) -> Response<ProxyBody> {
    // safety: proxy authentication (access.users_file), CONNECT included.
    let req = match shared.safety.authenticate(client, req).await {
        Ok(req) => req,
        Err(answer) => return answer,
    };
    if req.method() == Method::CONNECT {
        return connect::handle_connect(shared, client, req).await;
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
    process(shared, client, authority, req).await
}

/// The path and query that is both checked and sent: normalised by
/// [`normalize_request_path`], or copied as it is when it already is in that form (the common
/// case).
fn checked_path(raw: &str) -> String {
    let bytes = raw.as_bytes();
    let path_end = memchr::memchr(b'?', bytes).unwrap_or(bytes.len());
    let path = &bytes[..path_end];
    let plain = bytes.first() == Some(&b'/')
        && crate::robots::normalize::is_canonical(bytes)
        && memchr::memchr(b'#', bytes).is_none()
        && memchr::memmem::find(path, b"//").is_none()
        && memchr::memmem::find(path, b"/.").is_none();
    if plain {
        raw.to_owned()
    } else {
        normalize_request_path(raw)
    }
}

/// When robots.txt could not be fetched because the origin's TLS certificate failed
/// verification, the request could not be forwarded either: answer 502 naming the TLS error
/// rather than a 403 that would blame robots.txt.
fn untrusted_origin(snapshot: &crate::cache::RobotsSnapshot) -> Option<Response<ProxyBody>> {
    let crate::cache::FetchOutcome::Network(error) = &snapshot.last_outcome else { return None };
    if !matches!(snapshot.rules, crate::cache::RobotsRules::DisallowAll)
        || !error.to_ascii_lowercase().contains("certificate")
    {
        return None;
    }
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

/// Decides one request for `authority` and answers 403 or forwards it. Shared by plain proxy
/// requests and requests read inside an intercepted CONNECT tunnel.
async fn process(
    shared: Arc<Shared>,
    client: SocketAddr,
    authority: Authority,
    req: Request<Incoming>,
) -> Response<ProxyBody> {
    let path = checked_path(req.uri().path_and_query().map_or("/", |p| p.as_str()));
    let path = path.as_str();
    let (token, _origin) = shared.policy.token_for_user(safety::tied_token(&req), req.headers());
    // safety: the destination guard, for an IP literal before robots.txt is even fetched.
    if let Some(p) = shared.safety.literal_prohibited(&authority) {
        let why = p.to_string();
        return safety::refuse_request(&shared, client, &req, &authority, path, &token, &why).await;
    }
    let snapshot = shared.cache.get(&authority).await;
    // safety: the robots.txt fetch (or a redirect of it) went to a prohibited address.
    if let Some(why) = safety::robots_prohibited(&snapshot) {
        return safety::refuse_request(&shared, client, &req, &authority, path, &token, why).await;
    }
    if let Some(answer) = untrusted_origin(&snapshot) {
        return answer;
    }
    let audit_all = shared.audit.all_decisions();
    if audit_all || !shared.policy.is_allowed(&snapshot, token.as_ref(), path) {
        let now = shared.clock.now();
        let decision = shared.policy.decide(&snapshot, token.as_ref(), path, now);
        let url = format!("{authority}{path}");
        let user_agent = req.headers().get(http::header::USER_AGENT).and_then(|v| v.to_str().ok());
        let status = (!decision.is_allowed()).then_some(403);
        let record = decision.audit_record(
            now,
            client,
            req.method(),
            &url,
            &authority.to_string(),
            path,
            user_agent,
            token.as_ref(),
            status,
        );
        if let Err(e) = shared.audit.record(record).await {
            tracing::error!(error = %e, "audit record could not be queued");
        }
        if !decision.is_allowed() {
            tracing::info!(url = %url, token = ?token.as_ref().map(|t| t.as_str()), reason = %decision.reason, "blocked");
            return answer::blocked(
                &decision,
                &url,
                token.as_ref().map(|t| t.as_str()),
                answer::wants_json(req.headers()),
            );
        }
    }
    let upstream = match forward::upstream_request(
        req,
        &authority,
        path,
        shared.policy.token_header(),
        &shared.via,
    ) {
        Ok(r) => r,
        Err(e) => {
            return answer::text(
                StatusCode::BAD_REQUEST,
                "http_request_error",
                format!("400 Bad Request: cannot build the upstream request: {e}\n"),
            )
        }
    };
    let method = upstream.method().clone();
    let resp = forward::send(&shared.client, upstream, shared.response_timeout, &shared.via).await;
    // safety: the guard refused the origin's address at connect time (its DNS answer changed
    // since robots.txt was fetched): audit the 403 that `send` made of it.
    if let Some(p) = resp.extensions().get::<crate::guard::Prohibited>() {
        let what = safety::Refused {
            client,
            method: method.as_str(),
            authority: &authority,
            path,
            user_agent: None,
            token: token.as_ref(),
        };
        return safety::prohibited(&shared, what, &p.to_string()).await;
    }
    resp
}
