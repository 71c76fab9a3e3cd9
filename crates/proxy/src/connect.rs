//! CONNECT: HTTPS through the proxy, enforced as exactly as plain HTTP.
//!
//! * `intercept`: after the 200, the first bytes tell TLS (a ClientHello, `0x16`) from plain
//!   HTTP. TLS is terminated with a certificate for the SNI name (or the CONNECT host) from the
//!   proxy's CA, and every request inside is decided like a plain proxy request for the CONNECT
//!   authority, then forwarded over a fresh, verified TLS connection.
//! * `tunnel`: bytes are relayed without looking inside; the CONNECT is refused when the token's
//!   rules disallow every path of the authority, the only decision possible without paths
//!   (see [`super::tunnel`]).
//! * `reject`: every CONNECT is refused.
//!
//! The decision and the upstream connection always use the CONNECT authority. A TLS server
//! name or an inner `Host` / `:authority` naming another host (domain fronting) is refused.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};

use super::exchange::{answered_before, process, Ledger, Phase};
use super::refusal::Refusal;
use super::{answer, safety, ConnectionMemory, ProxyBody, Shared};
use robots_proxy_audit::{AuditAction, AuditRecord, AuditSubject};
use robots_proxy_authority::{Authority, Scheme};
use robots_proxy_decide::ProductToken;
use robots_proxy_framing::{FramingWatch, Verdict, Verdicts, Watched};
use robots_proxy_net::server::{serve_connection, Protocol, Rewind};
use robots_proxy_net::tls::HttpsMode;

/// What audit records and refusals give as the path of a CONNECT: it cannot be seen.
pub(super) const TUNNEL_PATH: &str = "(not visible in a tunnel)";

/// Answers a CONNECT request: the Target phase of a CONNECT, then its Log phase, which writes
/// the record the CONNECT kept (a refusal, or the tunnel's) and counts it
/// ([`super::exchange::Ledger`]).
pub(super) async fn handle_connect(
    shared: Arc<Shared>,
    memory: &ConnectionMemory,
    client: SocketAddr,
    req: Request<Incoming>,
) -> Response<ProxyBody> {
    let mut ledger = Ledger::new(&shared, Scheme::Https);
    let answer = connect_phases(shared.clone(), memory, &mut ledger, client, req).await;
    ledger.log().await;
    answer
}

/// [`handle_connect`] before the Log phase.
async fn connect_phases(
    shared: Arc<Shared>,
    memory: &ConnectionMemory,
    ledger: &mut Ledger<'_>,
    client: SocketAddr,
    req: Request<Incoming>,
) -> Response<ProxyBody> {
    let Some(target) = req.uri().authority().map(|a| a.as_str().to_owned()) else {
        return answer::text(
            StatusCode::BAD_REQUEST,
            "http_request_error",
            "400 Bad Request: CONNECT needs a host:port target\n".to_owned(),
        );
    };
    let https = match Authority::from_host_port(Scheme::Https, &target) {
        Ok(a) => a,
        Err(e) => {
            return answer::text(
                StatusCode::BAD_REQUEST,
                "http_request_error",
                format!("400 Bad Request: CONNECT {target}: {e}\n"),
            )
        }
    };
    if !Authority::names_port(&target) {
        return answer::text(
            StatusCode::BAD_REQUEST,
            "http_request_error",
            format!("400 Bad Request: CONNECT {target}: the target must name a port\n"),
        );
    }
    // The reloadable settings in force when the CONNECT arrived: the tunnel keeps them.
    let live = shared.live();
    if !live.https.connect_ports.contains(&https.port()) {
        return refuse(
            ledger,
            client,
            &req,
            &https,
            None,
            "destination_ip_prohibited",
            format!(
                "CONNECT to port {} is not allowed (https.connect_ports = {:?})",
                https.port(),
                live.https.connect_ports
            ),
        );
    }
    let (token, origin) = live.policy.token_for_user(safety::tied_token(&req), req.headers());
    // safety: a CONNECT to a prohibited IP literal is refused in every mode.
    if let Some(p) = shared.safety.literal_prohibited(&https) {
        return refuse_prohibited(ledger, client, &req, &https, token.as_ref(), &p.to_string());
    }
    match live.https.mode {
        HttpsMode::Reject => refuse(
            ledger,
            client,
            &req,
            &https,
            token.as_ref(),
            "http_request_denied",
            "CONNECT is refused by this proxy (https.mode = \"reject\"): HTTPS cannot be \
                 checked against robots.txt here"
                .to_owned(),
        ),
        HttpsMode::Tunnel => {
            let target = (client, https);
            super::tunnel::process(&shared, memory, &live, req, target, (token, origin)).await
        }
        _ => {
            let Some(ca) = live.ca.clone() else {
                return answer::text(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "proxy_configuration_error",
                    "500: https.mode is intercept but no CA is loaded\n".to_owned(),
                );
            };
            // safety: requests inside the tunnel speak for the user who authenticated it.
            let user =
                req.extensions().get::<Arc<robots_proxy_access::AuthenticatedUser>>().cloned();
            // The inner connection is bounded by the timeouts in force when the CONNECT came.
            let tunnel =
                Intercepted { shared: shared.clone(), ca, client, user, timeouts: live.timeouts };
            tokio::spawn(async move {
                match hyper::upgrade::on(req).await {
                    // The client's own socket, unwrapped from hyper's boxed `Upgraded`: one
                    // indirection less on every read and write of the intercepted connection.
                    Ok(upgraded) => {
                        match upgraded.downcast::<TokioIo<robots_proxy_net::limits::ClientIo>>() {
                            Ok(parts) => {
                                let io = parts.io.into_inner();
                                intercept(tunnel, https, io, parts.read_buf).await
                            }
                            Err(upgraded) => {
                                let io = TokioIo::new(upgraded);
                                intercept(tunnel, https, io, Bytes::new()).await
                            }
                        }
                    }
                    Err(e) => tracing::debug!(error = %e, "CONNECT upgrade failed"),
                }
            });
            Response::new(answer::full(Bytes::new()))
        }
    }
}

/// A 403 for a CONNECT, its audit record kept.
fn refuse(
    ledger: &mut Ledger<'_>,
    client: SocketAddr,
    req: &Request<Incoming>,
    authority: &Authority,
    token: Option<&ProductToken>,
    error: &'static str,
    reason: String,
) -> Response<ProxyBody> {
    let now = ledger.shared.clock.now();
    let ua = req.headers().get(http::header::USER_AGENT).map(|v| v.as_bytes());
    let record = connect_record(now, client, ua, authority, token, false, &reason);
    refuse_record(ledger, record, error, reason)
}

/// A 403 with the given audit record, kept.
fn refuse_record(
    ledger: &mut Ledger<'_>,
    record: AuditRecord,
    error: &'static str,
    reason: String,
) -> Response<ProxyBody> {
    let text = format!("403 Forbidden: {reason}\n");
    let refusal = Refusal::new(StatusCode::FORBIDDEN, error, record.action, text);
    ledger.refuse(record, refusal, false)
}

/// The 403 for a CONNECT to a prohibited destination (see `safety::prohibited`).
fn refuse_prohibited(
    ledger: &mut Ledger<'_>,
    client: SocketAddr,
    req: &Request<Incoming>,
    authority: &Authority,
    token: Option<&ProductToken>,
    why: &str,
) -> Response<ProxyBody> {
    let what = safety::Refused {
        client,
        method: "CONNECT",
        authority,
        path: TUNNEL_PATH,
        user_agent: req.headers().get(http::header::USER_AGENT).map(|v| v.as_bytes()),
        token,
    };
    safety::prohibited(ledger, what, why)
}

/// The audit record of a CONNECT decided without robots.txt (refused at its door, or by the
/// fleet's 503), made at `now`.
pub(super) fn connect_record(
    now: std::time::SystemTime,
    client: SocketAddr,
    user_agent: Option<&[u8]>,
    authority: &Authority,
    token: Option<&ProductToken>,
    allowed: bool,
    reason: &str,
) -> AuditRecord {
    let action = if allowed { AuditAction::TunnelAllow } else { AuditAction::ConnectRefuse };
    let url = authority.to_string();
    let subject = AuditSubject {
        client,
        method: "CONNECT",
        url: &url,
        domain: &url,
        path: TUNNEL_PATH,
        user_agent,
        token: token.map(ProductToken::as_str),
        robots_url: &authority.robots_url(),
    };
    let status = Some(if allowed { 200 } else { 403 });
    AuditRecord::new(action, now, subject, status, reason.to_owned())
}

/// An intercepted CONNECT, as its inner connection is served.
struct Intercepted {
    shared: Arc<Shared>,
    /// The CA in force when the CONNECT came.
    ca: Arc<robots_proxy_net::tls::ca::CertificateAuthority>,
    client: SocketAddr,
    /// The user who authenticated the CONNECT: requests inside speak for them.
    user: Option<Arc<robots_proxy_access::AuthenticatedUser>>,
    /// What bounds the inner connection in time: as on the listener (review-house D1).
    timeouts: robots_proxy_net::server::ConnectionTimeouts,
}

/// Intercept mode, after the 200: tell TLS from plain HTTP and serve what is inside.
/// `buffered` is what the client sent after the CONNECT head and was already read with it.
/// The inner connection has the listener's head limits and its timeouts, and finishes at
/// shutdown as the listener's connections do.
async fn intercept<IO>(tunnel: Intercepted, connect: Authority, mut io: IO, buffered: Bytes)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let Intercepted { shared, ca, client, user, timeouts } = tunnel;
    let limits = shared.safety.limits.clone();
    let settings = shared.http;
    let stop = shared.stopping();
    let prefix = if buffered.is_empty() {
        let mut first = [0u8; 1];
        match timeouts.first_bytes(io.read(&mut first)).await {
            Ok(Ok(n)) if n > 0 => Bytes::copy_from_slice(&first[..n]),
            _ => return,
        }
    } else {
        buffered
    };
    let is_tls = prefix[0] == 0x16;
    // What the requests of this client connection remember from one to the next.
    let memory = Arc::new(ConnectionMemory::default());
    let io = Rewind::new(prefix, io);
    if !is_tls {
        // Plain HTTP inside the tunnel (e.g. `CONNECT host:80`): decide it as HTTP.
        let authority =
            Authority::new(Scheme::Http, connect.host(), connect.port()).unwrap_or(connect);
        // safety: request smuggling checks, as on the listener.
        let io = Watched::new(io, Some(FramingWatch::new(limits.max_header_bytes())));
        let verdicts = io.verdicts();
        let service = service_fn(move |mut req: Request<Incoming>| {
            let (shared, authority, memory) = (shared.clone(), authority.clone(), memory.clone());
            let framing = Framing::take(&verdicts, &req);
            if let Some(user) = &user {
                req.extensions_mut().insert(user.clone());
            }
            async move {
                // Boxed, as on the listener: hyper moves the service's future into the
                // connection on every request; a pointer is cheaper to move than the exchange.
                let answering = inner(shared, &memory, client, authority, None, framing, req);
                let answering = Box::pin(super::exchange_scope(answering));
                Ok::<_, std::convert::Infallible>(answering.await)
            }
        });
        // safety: the same head limits and timeouts as the listener.
        let serving = serve_connection(io, Protocol::Http1, &settings, &timeouts, service, stop);
        if let Err(e) = serving.await {
            tracing::debug!(client = %client, error = %e, "intercepted connection ended with an error");
        }
        return;
    }
    let acceptor = tokio_rustls::LazyConfigAcceptor::new(rustls::server::Acceptor::default(), io);
    let start = match timeouts.first_bytes(acceptor).await {
        Ok(Ok(start)) => start,
        Ok(Err(e)) => {
            tracing::debug!(client = %client, error = %e, "bad TLS ClientHello inside CONNECT");
            return;
        }
        Err(_) => return,
    };
    let sni = start.client_hello().server_name().map(str::to_owned);
    // The SNI is held against the CONNECT authority before any certificate is made: a client
    // naming other hosts than its tunnel's would otherwise have one signed (and cached, pushing
    // out the real hosts') per name. A mismatched client is shown the tunnel host's
    // certificate, which it should refuse; one that goes on anyway has every request refused.
    let mismatch = sni.clone().filter(|s| {
        Authority::new(Scheme::Https, s, connect.port()).map_or(true, |a| a != connect)
    });
    let name = match (&sni, &mismatch) {
        (Some(sni), None) => sni.clone(),
        _ => connect.host().to_owned(),
    };
    if let Some(sni) = &mismatch {
        tracing::info!(client = %client, sni = %sni, connect = %connect, "TLS server name does not match the CONNECT authority; presenting the CONNECT host's certificate");
    }
    let config = match ca.server_config(&name) {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(host = %name, error = %e, "cannot make a certificate");
            return;
        }
    };
    // Bounded like the ClientHello: a client that stalls mid-handshake must not hold the
    // connection (and its task) forever.
    let tls = match timeouts.first_bytes(start.into_stream(config)).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => {
            // Typically the client does not trust our CA and sent an alert.
            tracing::info!(client = %client, host = %name, error = %e, "TLS handshake with client failed");
            return;
        }
        Err(_) => {
            tracing::debug!(client = %client, host = %name, "TLS handshake with client timed out");
            return;
        }
    };
    // safety: request smuggling checks on the decrypted HTTP/1 stream, as on the listener
    // (HTTP/2 frames its messages itself and forbids Transfer-Encoding).
    let protocol = Protocol::from_alpn(tls.get_ref().1.alpn_protocol());
    let watch = (protocol != Protocol::Http2).then(|| FramingWatch::new(limits.max_header_bytes()));
    let tls = Watched::new(tls, watch);
    let verdicts = tls.verdicts();
    let service = service_fn(move |mut req: Request<Incoming>| {
        let (shared, connect, mismatch) = (shared.clone(), connect.clone(), mismatch.clone());
        let memory = memory.clone();
        let framing = Framing::take(&verdicts, &req);
        if let Some(user) = &user {
            req.extensions_mut().insert(user.clone());
        }
        async move {
            // Boxed, as on the listener (above).
            let answering = inner(shared, &memory, client, connect, mismatch, framing, req);
            let answering = Box::pin(super::exchange_scope(answering));
            Ok::<_, std::convert::Infallible>(answering.await)
        }
    });
    // safety: the same head limits and timeouts as the listener.
    let served = serve_connection(tls, protocol, &settings, &timeouts, service, stop).await;
    if let Err(e) = served {
        tracing::debug!(client = %client, error = %e, "intercepted connection ended with an error");
    }
}

/// The framing verdict of a request read inside a tunnel, and the watch that gave it.
struct Framing {
    verdict: Verdict,
    verdicts: Verdicts,
}

impl Framing {
    /// The verdict for `req`, taken in order as hyper hands the requests over. HTTP/2
    /// requests have none (the watch does not follow HTTP/2).
    fn take(verdicts: &Verdicts, req: &Request<Incoming>) -> Framing {
        let verdict =
            if req.version() < http::Version::HTTP_2 { verdicts.next() } else { Verdict::Clean };
        Framing { verdict, verdicts: verdicts.clone() }
    }
}

/// One request read inside a CONNECT tunnel: refused when its framing is a smuggling attempt
/// (see `safety::Safety::check_request`), decided and forwarded otherwise.
async fn inner(
    shared: Arc<Shared>,
    memory: &ConnectionMemory,
    client: SocketAddr,
    connect: Authority,
    sni_mismatch: Option<String>,
    framing: Framing,
    req: Request<Incoming>,
) -> Response<ProxyBody> {
    if let Some(refused) = shared.safety.check_request(client, &req, framing.verdict) {
        return answered_before(Phase::Admit, refused);
    }
    let is_connect = req.method() == http::Method::CONNECT;
    let resp = decide_inner(shared, memory, client, connect, sni_mismatch, req).await;
    if is_connect {
        framing.verdicts.connect_answered(resp.status().is_success());
    }
    resp
}

/// [`inner`] after the framing checks.
async fn decide_inner(
    shared: Arc<Shared>,
    memory: &ConnectionMemory,
    client: SocketAddr,
    connect: Authority,
    sni_mismatch: Option<String>,
    req: Request<Incoming>,
) -> Response<ProxyBody> {
    let named = req.uri().authority().map(|a| a.as_str().to_owned()).or_else(|| {
        req.headers().get(http::header::HOST).and_then(|h| h.to_str().ok()).map(str::to_owned)
    });
    let fronting = if let Some(sni) = sni_mismatch {
        Some(format!(
            "the TLS server name {sni:?} does not match the CONNECT authority {connect}; \
             domain fronting is refused"
        ))
    } else if let Some(named) = named {
        // In plain HTTP through a tunnel, a `Host` without a port names the host the tunnel
        // goes to, whatever its port: a client speaking plain HTTP through `CONNECT host:443`
        // may well send `Host: host`. Fronting is another host, not a port left out. (Inside
        // TLS the default port is the one a port-less `Host` means, as everywhere.)
        let read = Authority::from_host_port(connect.scheme(), &named).and_then(|a| {
            if Authority::names_port(&named) || connect.scheme() != Scheme::Http {
                Ok(a)
            } else {
                Authority::new(connect.scheme(), a.host(), connect.port())
            }
        });
        match read {
            Ok(a) if a == connect => None,
            _ => Some(format!(
                "the request names {named:?} but the tunnel goes to {connect}; domain fronting \
                 is refused"
            )),
        }
    } else {
        None
    };
    if let Some(reason) = fronting {
        let (token, _) =
            shared.live().policy.token_for_user(safety::tied_token(&req), req.headers());
        // Inside an intercepted tunnel the request is visible: the record names it, not the
        // CONNECT.
        let path = robots_proxy_decide::Readings::of(
            req.uri().path_and_query().map_or("/", |p| p.as_str()),
        )
        .into_as_sent();
        let mut ledger = Ledger::new(&shared, connect.scheme());
        let now = shared.clock.now();
        let ua = req.headers().get(http::header::USER_AGENT).map(|v| v.as_bytes());
        let mut record = connect_record(now, client, ua, &connect, token.as_ref(), false, &reason);
        record.method = req.method().as_str().to_owned();
        record.url = format!("{connect}{path}");
        record.path = path;
        // Refused at the Target phase: its own Log phase writes the record.
        let refused = refuse_record(&mut ledger, record, "http_request_denied", reason);
        ledger.log().await;
        return refused;
    }
    process(&shared, memory, client, connect, req).await
}
