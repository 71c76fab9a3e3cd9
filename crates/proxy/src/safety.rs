//! The proxy's safety hooks, called from a few marked places in the listener, the request
//! handler and CONNECT: who may connect ([`robots_proxy_access`]), how many
//! ([`robots_proxy_net::limits`]), whether a request is framed honestly ([`robots_proxy_framing`]) and where it
//! may go ([`robots_proxy_net::guard`]). The logic lives in those modules; this file only turns their
//! answers into responses and audit records.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use http::{header, HeaderValue, Request, Response, StatusCode};
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;

use super::exchange::Ledger;
use super::{answer, ProxyBody};
use robots_proxy_access::{AccessError, AuthFailure, AuthenticatedUser, Authenticator, ClientAcl};
use robots_proxy_audit::{AuditAction, AuditRecord, AuditSubject};
use robots_proxy_authority::Authority;
use robots_proxy_config::Config;
use robots_proxy_decide::{ProductToken, RobotsSnapshot};
use robots_proxy_framing::Verdict;
use robots_proxy_net::guard::{DestinationGuard, Prohibited};
use robots_proxy_net::limits::{ClientIo, ConnectionGate, LimitsSection};

/// A users file a reload puts in force: its path (`None`: no users file) and its users;
/// `None` when the reload keeps the file in force.
pub(super) type UsersChange = Option<(Option<std::path::PathBuf>, Option<Authenticator>)>;

/// The safety state of one proxy.
pub(super) struct Safety {
    acl: ClientAcl,
    gate: ConnectionGate,
    /// The users of `access.users_file`, replaced whole when the file is read again (SIGHUP)
    /// or a reload names another file (or none: no authentication).
    auth: arc_swap::ArcSwapOption<Authenticator>,
    /// `access.users_file`, as the last reload (or the start) set it.
    users_file: arc_swap::ArcSwapOption<std::path::PathBuf>,
    pub(super) guard: Arc<DestinationGuard>,
    pub(super) limits: LimitsSection,
}

impl Safety {
    /// From the configuration; loads `access.users_file` when set.
    pub(super) fn new(config: &Config, guard: Arc<DestinationGuard>) -> Result<Self, AccessError> {
        let users_file = config.access.users_file.clone();
        let auth = users_file.as_deref().map(Authenticator::load).transpose()?;
        Ok(Safety {
            acl: ClientAcl::new(&config.access.allow_clients),
            gate: ConnectionGate::new(&config.limits),
            auth: arc_swap::ArcSwapOption::from(auth.map(Arc::new)),
            users_file: arc_swap::ArcSwapOption::from(users_file.map(Arc::new)),
            guard,
            limits: config.limits.clone(),
        })
    }

    /// A connection slot, waited for before accepting (`limits.when_full = "wait"`).
    pub(super) async fn wait_for_slot(&self) -> Option<OwnedSemaphorePermit> {
        self.gate.wait_for_slot().await
    }

    /// The accepted connection, if its client may connect and a slot is free; otherwise it is
    /// closed here (and logged). `watch`: the framing watch reads the connection's bytes (not
    /// on the TLS listener, where it reads the decrypted stream).
    pub(super) fn admit(
        &self,
        stream: TcpStream,
        peer: SocketAddr,
        slot: Option<OwnedSemaphorePermit>,
        watch: bool,
        write_timeout: std::time::Duration,
    ) -> Option<ClientIo> {
        if !self.acl.allows(peer.ip()) {
            self.acl.record_refusal(peer);
            return None;
        }
        self.gate.admit(stream, peer, slot, watch, write_timeout)
    }

    /// Whether the proxy authenticates its users (`access.users_file`).
    pub(super) fn authenticates(&self) -> bool {
        self.auth.load().is_some()
    }

    /// How long a connection may go without a request that proves its user before it is
    /// closed (`limits.auth_timeout`): `None` without a users file, or when a verified client
    /// certificate named the user (`certified`).
    pub(super) fn auth_deadline(&self, certified: bool) -> Option<std::time::Duration> {
        (self.authenticates() && !certified).then_some(self.limits.auth_timeout)
    }

    /// Whether `req` must still prove its user with `Proxy-Authorization`: a users file is
    /// configured and no verified client certificate named the user already.
    pub(super) fn requires_credentials<B>(&self, req: &Request<B>) -> bool {
        self.authenticates() && req.extensions().get::<Arc<AuthenticatedUser>>().is_none()
    }

    /// The user a verified client certificate names (`name`: see
    /// [`robots_proxy_net::tls::listener::client_name`]), tied to the product token the users file gives
    /// that name, exactly like a user who authenticated with a password.
    pub(super) fn certified_user(&self, name: String) -> Arc<AuthenticatedUser> {
        let token = self.auth.load().as_ref().and_then(|auth| auth.token_of(&name));
        Arc::new(AuthenticatedUser { name, token })
    }

    /// Checks `Proxy-Authorization` when a users file is configured. The user is put in the
    /// request's extensions (for the token it is tied to); without credentials the answer is
    /// `407`.
    pub(super) async fn authenticate<B>(
        &self,
        client: SocketAddr,
        mut req: Request<B>,
    ) -> Result<Request<B>, Response<ProxyBody>> {
        let Some(auth) = self.auth.load_full() else { return Ok(req) };
        match auth.authenticate(req.headers()).await {
            Ok(user) => {
                req.extensions_mut().insert(user);
                Ok(req)
            }
            Err(AuthFailure::Busy) => {
                tracing::warn!(client = %client, "proxy authentication refused: {}", AuthFailure::Busy);
                Err(verifications_busy())
            }
            Err(failure) => {
                if !matches!(failure, AuthFailure::Missing) {
                    auth.record_failure(client, &failure);
                }
                Err(auth_required(&failure))
            }
        }
    }

    /// Reads `access.users_file` again and, when it parses, puts its users in force in place of
    /// the old ones (with empty credential caches, so a removed user is refused at once).
    /// `None` without a users file; on an error the users in force stay.
    pub(super) fn reload_users(&self) -> Option<Result<std::path::PathBuf, AccessError>> {
        let path = self.users_file.load_full()?;
        Some(Authenticator::load(&path).map(|fresh| {
            self.auth.store(Some(Arc::new(fresh)));
            path.to_path_buf()
        }))
    }

    /// The users file in force.
    pub(super) fn users_file(&self) -> Option<std::path::PathBuf> {
        self.users_file.load().as_deref().cloned()
    }

    /// For a reload: the users of `config`'s `access.users_file` when it names another file
    /// than the one in force (`Some(None)`: none, authentication off), read now so that a file
    /// that cannot be used refuses the reload before anything changes.
    pub(super) fn prepare_users(&self, config: &Config) -> Result<UsersChange, AccessError> {
        let wanted = config.access.users_file.as_deref();
        if self.users_file.load().as_deref().map(|p| p.as_path()) == wanted {
            return Ok(None);
        }
        let users = wanted.map(Authenticator::load).transpose()?;
        Ok(Some((wanted.map(std::path::Path::to_path_buf), users)))
    }

    /// Puts the reloadable `[access]` keys of `config` in force for connections and requests
    /// that start from now on: `allow_clients`, `allow_destinations` and the users of
    /// [`Safety::prepare_users`]. Returns the users file put in force, if it changed.
    pub(super) fn apply(
        &self,
        config: &Config,
        users: UsersChange,
    ) -> Option<Option<std::path::PathBuf>> {
        self.acl.replace(&config.access.allow_clients);
        self.guard.set_allowed(&config.access.allow_destinations);
        let (path, users) = users?;
        self.auth.store(users.map(Arc::new));
        self.users_file.store(path.clone().map(Arc::new));
        Some(path)
    }

    /// A `400` for a request whose framing is a smuggling attempt, or a `414` for a
    /// request-target over `limits.max_request_line`.
    pub(super) fn check_request<B>(
        &self,
        client: SocketAddr,
        req: &Request<B>,
        verdict: Verdict,
    ) -> Option<Response<ProxyBody>> {
        if let Some(problem) = verdict.problem() {
            tracing::info!(client = %client, problem, "request refused: framing");
            let mut resp = answer::text(
                StatusCode::BAD_REQUEST,
                "http_request_error",
                format!("400 Bad Request: {problem}. The request is refused and not forwarded.\n"),
            );
            // RFC 9112 §6.1: close the connection after responding to such a request.
            resp.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
            return Some(resp);
        }
        // `User-Agent` is a singleton field (RFC 9110 §10.1.5): with two, the token would come
        // from one while the origin may read the other (review-core N12). Refused, not decided.
        if req.headers().get_all(header::USER_AGENT).iter().nth(1).is_some() {
            tracing::info!(client = %client, "request refused: more than one User-Agent field");
            return Some(answer::text(
                StatusCode::BAD_REQUEST,
                "http_request_error",
                "400 Bad Request: the request has more than one User-Agent field (RFC 9110 \
                 §10.1.5 allows one). The request is refused and not forwarded.\n"
                    .to_owned(),
            ));
        }
        let uri = req.uri();
        let length = uri.scheme_str().map_or(0, |s| s.len() + 3)
            + uri.authority().map_or(0, |a| a.as_str().len())
            + uri.path_and_query().map_or(0, |p| p.as_str().len());
        if length > self.limits.max_request_line() {
            return Some(answer::text(
                StatusCode::URI_TOO_LONG,
                "http_request_error",
                format!(
                    "414 URI Too Long: the request-target has {length} bytes, more than \
                     limits.max_request_line ({})\n",
                    self.limits.max_request_line
                ),
            ));
        }
        None
    }

    /// The refused address when `authority` is an IP literal the guard prohibits: checked
    /// before anything else happens (no robots.txt fetch for it).
    pub(super) fn literal_prohibited(&self, authority: &Authority) -> Option<Prohibited> {
        let host = authority.host();
        let ip: IpAddr = host.trim_start_matches('[').trim_end_matches(']').parse().ok()?;
        let addr = SocketAddr::new(ip, authority.port());
        self.guard.check(addr).err().map(|reason| Prohibited {
            host: host.to_owned(),
            addr,
            reason,
            more: 0,
        })
    }
}

/// The token the authenticated user of `req` is tied to, if any.
pub(super) fn tied_token<B>(req: &Request<B>) -> Option<&ProductToken> {
    req.extensions().get::<Arc<AuthenticatedUser>>().and_then(|u| u.token.as_ref())
}

/// The `503` for a request whose credentials could not be checked: too many password
/// verifications are waiting (`robots_proxy_access`, "Cost"). They take tens of milliseconds each.
fn verifications_busy() -> Response<ProxyBody> {
    let mut resp = answer::text(
        StatusCode::SERVICE_UNAVAILABLE,
        "proxy_internal_error",
        format!("503 Service Unavailable: {}. Try again in a moment.\n", AuthFailure::Busy),
    );
    resp.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    resp
}

/// The `407` asking for credentials (RFC 9110 §15.5.8, §11.7.1).
fn auth_required(failure: &AuthFailure) -> Response<ProxyBody> {
    let mut resp = answer::text(
        StatusCode::PROXY_AUTHENTICATION_REQUIRED,
        "http_request_denied",
        format!(
            "407 Proxy Authentication Required: {failure}.\n\nSend `Proxy-Authorization: Basic` \
             with a user of this proxy (curl -U user:password, or \
             HTTP_PROXY=http://user:password@host:port).\n"
        ),
    );
    let challenge = format!("Basic realm=\"{}\", charset=\"UTF-8\"", robots_proxy_access::REALM);
    resp.headers_mut().insert(
        header::PROXY_AUTHENTICATE,
        HeaderValue::from_str(&challenge).unwrap_or(HeaderValue::from_static("Basic")),
    );
    resp
}

/// What the proxy knows about a request it refuses for its destination.
pub(super) struct Refused<'a> {
    pub(super) client: SocketAddr,
    pub(super) method: &'a str,
    pub(super) authority: &'a Authority,
    /// The path and query (`(not visible in a tunnel)` for CONNECT).
    pub(super) path: &'a str,
    /// The `User-Agent` header's bytes.
    pub(super) user_agent: Option<&'a [u8]>,
    pub(super) token: Option<&'a ProductToken>,
}

/// The `403` for a prohibited destination (RFC 9209 `destination_ip_prohibited`) and its
/// audit record, made at `now`. `why` names the address and the reason.
fn prohibited_refusal(
    now: std::time::SystemTime,
    what: Refused<'_>,
    why: &str,
) -> (AuditRecord, super::refusal::Refusal) {
    let url = if what.method == "CONNECT" {
        what.authority.to_string()
    } else {
        format!("{}{}", what.authority, what.path)
    };
    let subject = AuditSubject {
        client: what.client,
        method: what.method,
        url: &url,
        domain: &what.authority.to_string(),
        path: what.path,
        user_agent: what.user_agent,
        token: what.token.map(ProductToken::as_str),
        robots_url: &what.authority.robots_url(),
    };
    let action = AuditAction::DestinationProhibited;
    let record = AuditRecord::new(action, now, subject, Some(403), why.to_owned());
    let told = client_reason(what.authority.host(), why);
    let refusal = super::refusal::Refusal::new(
        StatusCode::FORBIDDEN,
        "destination_ip_prohibited",
        action,
        format!(
            "403 Forbidden: {told}\n\nURL: {url}\n\nThis proxy does not connect to loopback, \
             private, link-local, shared (CGNAT), multicast, reserved, benchmarking, \
             documentation or cloud metadata \
             addresses, nor to itself. An administrator can re-open ranges with \
             access.allow_destinations.\n"
        ),
    );
    (record, refusal)
}

/// The `403` for a CONNECT to a prohibited destination, its audit record kept in `ledger`.
pub(super) fn prohibited(
    ledger: &mut Ledger<'_>,
    what: Refused<'_>,
    why: &str,
) -> Response<ProxyBody> {
    let (record, refusal) = prohibited_refusal(ledger.shared.clock.now(), what, why);
    ledger.refuse(record, refusal, false)
}

/// What a client is told of a prohibited destination. A client that named an IP address is told
/// why that address is refused. A client that named a host is not told the address the host
/// resolves to here: with split-horizon DNS that would let anyone map internal names through
/// the proxy. The full reason, address included, goes to the audit record and the log.
pub(super) fn client_reason(host: &str, why: &str) -> String {
    if host.parse::<std::net::IpAddr>().is_ok() {
        return why.to_owned();
    }
    format!(
        "{host} resolves to an address this proxy does not connect to (the address is in the \
         proxy's audit log, not told to clients); see access.allow_destinations"
    )
}

impl super::exchange::Exchange<'_> {
    /// The `403` for a request whose destination the guard prohibits, its record kept for the
    /// Log phase.
    pub(super) fn refuse_prohibited(&mut self, why: &str) -> Response<ProxyBody> {
        let facts = self.facts;
        let what = Refused {
            client: facts.client,
            method: facts.method.as_str(),
            authority: &facts.authority,
            path: facts.path(),
            user_agent: facts.user_agent(),
            token: facts.token(),
        };
        let (record, refusal) = prohibited_refusal(self.shared.clock.now(), what, why);
        self.refuse(record, refusal)
    }
}

/// The reason to refuse when the robots.txt fetch (or one of its redirects) went to a
/// prohibited address and no rules are in force because of it.
pub(super) fn robots_prohibited(snapshot: &RobotsSnapshot) -> Option<&str> {
    snapshot.prohibited_fetch()
}
