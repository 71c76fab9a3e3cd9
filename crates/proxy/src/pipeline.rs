//! One request's way through the proxy: [`handle`] runs the phases before the exchange
//! (Authenticate, Target: a CONNECT goes to `connect.rs`, a proxy request names its authority),
//! and the [`Exchange`] of a proxy request (or of one read inside an intercepted tunnel) runs
//! the phases after it, in this order (`exchange.rs` drives them and writes the record):
//!
//! 1. Robots: the robots.txt snapshot for the authority (the destination guard first); then the
//!    request's one decision ([`robots_proxy_decide::Policy::decide`]), which every later phase uses;
//!    the fleet's store out of reach (503), an untrusted origin (502); every reading of the
//!    path must be allowed (403 otherwise), unless an exception decides;
//! 2. Exceptions: the exception that decides instead of robots.txt (`exception.rs`);
//! 3. Usage: AI usage preferences stated in robots.txt and `tdmrep.json` (403);
//! 4. Pace: the site's pace (wait, or 429);
//! 5. Sign: the request to the origin, built and signed;
//! 6. Forward: to the origin, streamed;
//! 7. Response: usage preferences stated by the response (`Content-Usage`, `preferences.rs`).

use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::sync::Arc;

use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;

use super::exchange::{answered_before, process, Exchange, Flow, Phase, Signed};
use super::facts::Facts;
use super::refusal::Refusal;
use super::{answer, connect, forward, optouts, preferences, safety};
use super::{ConnectionMemory, Live, ProxyBody, Shared};
use robots_proxy_authority::{Authority, Scheme};
use robots_proxy_decide::usage::{Purpose, Settled};
use robots_proxy_decide::{Decision, Readings, RobotsSnapshot, UsagePreferences};
use robots_proxy_identity::Signing;
use robots_proxy_metrics::Decision as Counted;
use robots_proxy_pace::PacePermit;

/// One request from a client connection: a CONNECT, or an absolute-form proxy request.
pub(super) async fn handle(
    shared: &Arc<Shared>,
    memory: &ConnectionMemory,
    client: SocketAddr,
    req: Request<Incoming>,
) -> Response<ProxyBody> {
    // safety: proxy authentication (access.users_file), CONNECT included, unless a verified
    // client certificate on the TLS listener named the user.
    let req = if shared.safety.requires_credentials(&req) {
        let authenticating = Box::pin(shared.safety.authenticate(client, req));
        match authenticating.await {
            Ok(req) => {
                // safety: the connection has proved its user (limits.auth_timeout).
                memory.authenticated.notify_one();
                req
            }
            Err(answer) => return answered_before(Phase::Authenticate, answer),
        }
    } else {
        req
    };
    if req.method() == Method::CONNECT {
        let connecting = Box::pin(connect::handle_connect(shared.clone(), memory, client, req));
        return connecting.await;
    }
    let uri = req.uri();
    if uri.scheme().is_none() && uri.authority().is_none() {
        let proxy_url = match (&shared.tls_listen, memory.over_tls) {
            (Some(tls), true) => format!("https://{tls}"),
            _ => format!("http://{}", shared.listen),
        };
        return answered_before(Phase::Target, answer::not_a_proxy_request(&proxy_url));
    }
    let authority = match Authority::from_uri(uri) {
        Ok(a) => a,
        Err(e) => {
            let bad = format!("400 Bad Request: cannot proxy {uri}: {e}\n");
            let answer = answer::text(StatusCode::BAD_REQUEST, "http_request_error", bad);
            return answered_before(Phase::Target, answer);
        }
    };
    if authority.scheme() != Scheme::Http {
        let bad = format!(
            "400 Bad Request: {uri}: send https:// requests through CONNECT (set HTTPS_PROXY), \
             not as plain proxy requests\n"
        );
        let answer = answer::text(StatusCode::BAD_REQUEST, "http_request_error", bad);
        return answered_before(Phase::Target, answer);
    }
    process(shared, memory, client, authority, req).await
}

/// The request's facts, read once before the phases after Target. The path is forwarded as
/// received and decided on every reading of it (`policy::readings`); the token is the tied
/// user's, the header's, the User-Agent's or the default, in the configured order.
pub(super) fn read_facts(
    live: &Live,
    memory: &ConnectionMemory,
    client: SocketAddr,
    authority: Authority,
    req: &Request<Incoming>,
) -> Facts {
    let readings = Readings::of(req.uri().path_and_query().map_or("/", |p| p.as_str()));
    let token = live.policy.token_for_connection(
        safety::tied_token(req),
        req.headers(),
        &mut robots_proxy_sync::lock(&memory.user_agent),
    );
    Facts::of(req, client, authority, readings, token)
}

/// The audit reason of a request answered 503 because the fleet's store is out of reach.
pub(super) const FLEET_UNAVAILABLE_REASON: &str = "the fleet's shared store is out of reach and \
     fleet.on_redis_error = \"refuse\": robots.txt could not be read, the request was not decided";

/// With a fleet whose shared state is required (`fleet.on_redis_error = "refuse"`) and out of
/// reach, the request cannot be decided: answer 503. The client is told no more than that:
/// where the store is and why it failed are for the operator's log.
pub(super) fn fleet_unavailable(snapshot: &RobotsSnapshot) -> Option<Refusal> {
    snapshot.fleet_unavailable()?;
    Some(Refusal::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "proxy_internal_error",
        robots_proxy_audit::AuditAction::FleetUnavailable,
        "503 Service Unavailable: the fleet's shared store cannot be reached\n".to_owned(),
    ))
}

/// When robots.txt could not be fetched because the origin's TLS certificate failed
/// verification, the request could not be forwarded either: answer 502 naming the TLS error
/// rather than a 403 that would blame robots.txt.
fn untrusted_origin(snapshot: &RobotsSnapshot) -> Option<Response<ProxyBody>> {
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

/// What the Usage phase found, for the Response phase: the crawler's configured purposes
/// (none for most crawlers) and the preferences robots.txt states for the path.
pub(super) struct Usage {
    pub(super) purposes: Vec<Purpose>,
    pub(super) preferences: UsagePreferences,
    /// The `tdmrep.json` rule for the path (TDMRep), applied with the response head.
    pub(super) tdm_file: Option<robots_proxy_decide::optout::TdmStatement>,
}

impl<'x> Exchange<'x> {
    /// The phases after Target, in their fixed order; `Break` is an answer that ends the
    /// exchange early. The Log phase follows either way ([`super::exchange::process`]).
    pub(super) async fn run(&mut self, req: Request<Incoming>) -> Flow<Response<ProxyBody>> {
        let (shared, live, facts) = (self.shared, self.live, self.facts);
        let signing = self.plan_signing(&req);
        self.phase = Phase::Robots;
        let snapshot = self.robots().await?;
        // The one decision of the request: every later phase uses it, none decides again.
        let decision =
            live.policy.decide(&snapshot, facts.claim(), &facts.readings, shared.clock.now());
        shared.metrics.decision_time(self.started);
        self.undecidable(&decision)?;
        self.robots_verdict(&decision)?;
        self.phase = Phase::Exceptions;
        self.exceptions(&decision)?;
        self.phase = Phase::Usage;
        let usage = self.usage(&decision).await?;
        self.phase = Phase::Pace;
        let _permit = self.pace(&decision).await?;
        self.phase = Phase::Sign;
        let upstream = self.prepare(req, signing.as_ref())?;
        self.phase = Phase::Forward;
        // A request leaves once its records are written (`audit.fsync = "always"` waits for
        // their sync): the allowed record, a report-only refusal's.
        self.write_kept().await;
        let resp = self.forward(upstream).await?;
        self.phase = Phase::Response;
        ControlFlow::Continue(self.response(&decision, usage, resp).await)
    }

    /// Web Bot Auth: whom the request will be signed for, if anyone (it is signed last, with
    /// the key of that moment, in the Sign phase). With `access.users_file`, a token identity
    /// signs only for the users tied to its token or listed in its `users`: a request that
    /// names another crawler's token goes unsigned (or as `*`), never signed as that crawler,
    /// and is logged and counted (`robots_proxy_signing_refused_total`).
    fn plan_signing(&self, req: &Request<Incoming>) -> Option<Signing<'x>> {
        let (shared, facts) = (self.shared, self.facts);
        let signer = self.live.signer.as_deref()?;
        let who = robots_proxy_identity::Requester {
            token: facts.token().map(|t| t.as_str()),
            user: facts.user_name(),
            tied: facts.user.as_ref().and_then(|u| u.token.as_ref()),
            authenticated: shared.safety.authenticates(),
        };
        let plan = signer.plan(&who, req.headers());
        if let Some(token) = plan.refused {
            let n = shared.metrics.signing_refused();
            let user = facts.user_name().unwrap_or("-");
            if robots_proxy_output::warn_on(n) {
                tracing::warn!(
                    client = %facts.client, user, token = token.as_str(), refused_so_far = n,
                    "not signed as {token}: the user is neither tied to that token in \
                     access.users_file nor listed in the identity's users"
                );
            } else {
                tracing::debug!(client = %facts.client, user, token = token.as_str(), "not signed");
            }
        }
        plan.signing
    }

    /// The Robots phase: the robots.txt snapshot of the authority, from the connection's memory
    /// or the store. Refused first when the destination guard prohibits an IP literal (before
    /// robots.txt is even fetched) or the robots.txt fetch went to a prohibited address.
    async fn robots(&mut self) -> Flow<Arc<RobotsSnapshot>> {
        let (shared, live, facts) = (self.shared, self.live, self.facts);
        // safety: the destination guard, for an IP literal before robots.txt is even fetched.
        if let Some(p) = shared.safety.literal_prohibited(&facts.authority) {
            return ControlFlow::Break(self.refuse_prohibited(&p.to_string()));
        }
        let snapshot = live.policy.robots_for(&self.memory.robots, &facts.authority).await;
        // safety: the robots.txt fetch (or a redirect of it) went to a prohibited address.
        if let Some(why) = safety::robots_prohibited(&snapshot) {
            return ControlFlow::Break(self.refuse_prohibited(why));
        }
        ControlFlow::Continue(snapshot)
    }

    /// The Robots phase, continued: a request that cannot be decided on what robots.txt gave: a
    /// 503 when the fleet's shared state is required and out of reach, a 502 when the origin's
    /// certificate is not trusted. The 503's record is the decision's (no rule decided: nothing
    /// was read).
    fn undecidable(&mut self, decision: &Decision<'_>) -> Flow {
        let Some(snapshot) = decision.site() else {
            return ControlFlow::Continue(());
        };
        if let Some(refusal) = fleet_unavailable(snapshot) {
            // Audited and counted (`unavailable`) like every answer the proxy gives itself.
            let mut record = self.facts.record(decision, self.shared.clock.now(), None);
            record.reason = FLEET_UNAVAILABLE_REASON.to_owned();
            (record.rule, record.line) = (None, None);
            return ControlFlow::Break(self.refuse(record, refusal));
        }
        if let Some(answer) = untrusted_origin(snapshot) {
            self.shared.metrics.upstream_error("tls_certificate_error");
            self.count(Counted::Unavailable);
            return ControlFlow::Break(answer);
        }
        ControlFlow::Continue(())
    }

    /// The Robots phase's verdict, when no exception decides (the Exceptions phase does then):
    /// every reading of the path must be allowed. An allowed request's record
    /// (`audit.all_decisions`) is made now, for the Sign phase to keep once the request goes
    /// on. A refusal goes through [`Exchange::refuse_or_report`], so that report-only mode lets
    /// it go on.
    fn robots_verdict(&mut self, decision: &Decision<'_>) -> Flow {
        if decision.exception().is_some() {
            return ControlFlow::Continue(());
        }
        if decision.is_allowed() {
            if self.shared.audit.all_decisions() {
                // `robots.signature.keyid` is set once the request is signed (Sign).
                let record = self.facts.record(decision, self.shared.clock.now(), None);
                self.allowed = Some(Box::new(record));
            }
            return ControlFlow::Continue(());
        }
        self.refuse_robots(decision)
    }

    /// The 403 of a request robots.txt disallows, its record kept; or, in report-only mode,
    /// its `would_block` record kept and the request let go on.
    #[inline(never)]
    fn refuse_robots(&mut self, decision: &Decision<'_>) -> Flow {
        let facts = self.facts;
        let explanation = decision.explain();
        let record = facts.audit_record(&explanation, self.shared.clock.now(), Some(403));
        let token = facts.token().map(|t| t.as_str());
        let refusal = answer::blocked(&explanation, &record.url, token, facts.want_json);
        self.refuse_or_report(record, refusal)
    }

    /// The Usage phase: AI usage preferences (`robots_proxy_decide::usage`), only for crawlers with configured
    /// purposes: an enforced purpose that robots.txt disallows for the path is refused. An
    /// exception that lifts a preference writes itself into [`Exchange::allowed`], the
    /// request's record still to be kept.
    async fn usage(&mut self, decision: &Decision<'_>) -> Flow<Usage> {
        let (live, facts) = (self.live, self.facts);
        let mut purposes = if live.usage.is_active() {
            live.usage.purposes_for(facts.token(), facts.user_name())
        } else {
            Vec::new()
        };
        if !purposes.is_empty() && live.policy.has_exceptions() {
            self.lift_usage(decision, &mut purposes);
        }
        if purposes.is_empty() {
            let preferences = UsagePreferences::default();
            return ControlFlow::Continue(Usage { purposes, preferences, tdm_file: None });
        }
        let preferences = decision.usage();
        // A request whose robots.txt refusal was only reported is not reported again for its
        // usage preference: one `would_block` per request (`Reported::any`).
        let blocking = live.usage.blocking(&purposes, &preferences, Settled::No);
        if let Some(block) = blocking.filter(|_| !self.reported.any()) {
            let action = robots_proxy_audit::AuditAction::UsageDisallow;
            let extra = preferences::ResponseOptOuts::default();
            self.refuse_usage(decision, (&purposes, &preferences), &block, action, extra)?;
        }
        let file = optouts::file_statement(&live.policy, &live.usage, facts, decision, &purposes);
        let tdm_file = Box::pin(file).await;
        ControlFlow::Continue(Usage { purposes, preferences, tdm_file })
    }

    /// The Pace phase: politeness (`robots_proxy_pace`): wait for the site's pace, or answer 429.
    /// The permit is held until the origin's response headers arrive.
    async fn pace(&mut self, decision: &Decision<'_>) -> Flow<PacePermit> {
        let (shared, facts) = (self.shared, self.facts);
        if !shared.pacer.is_enabled() {
            return ControlFlow::Continue(PacePermit::default());
        }
        let Some(snapshot) = decision.site() else {
            return ControlFlow::Continue(PacePermit::default());
        };
        let admitting = Box::pin(
            shared.pacer.admit(&facts.authority, || snapshot.rules.crawl_delay(facts.token())),
        );
        match admitting.await {
            Ok(permit) => ControlFlow::Continue(permit),
            Err(throttled) => ControlFlow::Break(self.throttled(decision, &throttled)),
        }
    }

    /// The Sign phase: the request to the origin, built and signed (the last change made to
    /// it), noting the key id that signed it; or the proxy's own answer when it cannot be built
    /// (400) or signed (500). Built and signed now, after robots.txt and the pace: the key is
    /// the one that signs at the moment the request leaves.
    ///
    /// The allowed request's record (`audit.all_decisions`, or an exception's) is kept here,
    /// once the request is known to go, naming the key that signed it (and what became of the
    /// client's signature under `signing.client_signatures = "cosign"`): a usage or pacing
    /// refusal keeps its own record instead.
    fn prepare(
        &mut self,
        req: Request<Incoming>,
        signing: Option<&Signing<'x>>,
    ) -> Flow<Request<Incoming>> {
        let prepared = self.build_and_sign(req, signing);
        if let Some(mut record) = self.allowed.take() {
            let signed = &self.signed;
            preferences::stamp_signature(&mut record, signed.keyid, signed.cosign.as_ref());
            self.keep(*record);
        }
        prepared
    }

    /// [`Exchange::prepare`]'s request: built, then signed.
    fn build_and_sign(
        &mut self,
        req: Request<Incoming>,
        signing: Option<&Signing<'x>>,
    ) -> Flow<Request<Incoming>> {
        let (shared, facts) = (self.shared, self.facts);
        let authority = &facts.authority;
        // With `signing.client_signatures = "cosign"`: the client's signature as it arrived,
        // before anything of the request changes, to tell at signing time whether what it
        // covers did.
        let client = signing.and_then(|s| {
            let uri = req.uri();
            let host = req.headers().get(http::header::HOST).and_then(|h| h.to_str().ok());
            let arrival = robots_proxy_identity::Target {
                method: req.method().as_str(),
                scheme: uri.scheme_str().unwrap_or(authority.scheme().as_str()),
                authority: uri.authority().map(|a| a.as_str()).or(host).unwrap_or(""),
                path_and_query: uri.path_and_query().map_or("/", |p| p.as_str()),
            };
            s.client_signature(&arrival, req.headers(), shared.clock.now())
        });
        let forwarded = forward::upstream_request(
            req,
            authority,
            facts.path(),
            self.live.policy.token_header(),
            &shared.via,
        );
        let mut upstream = match forwarded {
            Ok(r) => r,
            Err(e) => {
                self.count(Counted::Allow);
                return ControlFlow::Break(answer::text(
                    StatusCode::BAD_REQUEST,
                    "http_request_error",
                    format!("400 Bad Request: cannot build the upstream request: {e}\n"),
                ));
            }
        };
        // Signed last: nothing changes the request after this.
        let Some(signing) = signing else {
            return ControlFlow::Continue(upstream);
        };
        match sign(shared, facts, signing, &mut upstream, client.as_ref()) {
            ControlFlow::Continue(signed) => {
                self.signed = signed;
                ControlFlow::Continue(upstream)
            }
            ControlFlow::Break(refused) => {
                self.count(Counted::Allow);
                ControlFlow::Break(refused)
            }
        }
    }

    /// The Forward phase: the request to the origin, and its response. Counted as allowed only
    /// once the origin's answer is known (the Response phase): it may still be refused (the
    /// guard at connect time) or withheld (usage preferences), and each request counts once.
    async fn forward(&mut self, upstream: Request<Incoming>) -> Flow<Response<ProxyBody>> {
        let (shared, live) = (self.shared, self.live);
        let resp = forward::send(
            &shared.client,
            &self.facts.authority,
            upstream,
            forward::Timeouts {
                response: live.response_timeout,
                body_idle: live.body_idle_timeout,
                client_body_idle: live.timeouts.body,
            },
            &shared.via,
            &shared.metrics,
        )
        .await;
        // safety: the guard refused the origin's address at connect time (its DNS answer changed
        // since robots.txt was fetched): audit the 403 that `send` made of it.
        if let Some(p) = resp.extensions().get::<robots_proxy_net::guard::Prohibited>() {
            let why = p.to_string();
            return ControlFlow::Break(self.refuse_prohibited(&why));
        }
        ControlFlow::Continue(resp)
    }

    /// The Response phase: the origin's response, counted as allowed, or withheld when its
    /// `Content-Usage` header disallows an enforced purpose of the crawler (unless only
    /// reported).
    async fn response(
        &mut self,
        decision: &Decision<'_>,
        usage: Usage,
        resp: Response<ProxyBody>,
    ) -> Response<ProxyBody> {
        if usage.purposes.is_empty() {
            self.count(Counted::Allow);
            return resp;
        }
        Box::pin(self.usage_of_response(decision, usage, resp)).await
    }
}

/// Signs the request about to be forwarded (`Host` is already the authority's, the last change
/// made to it) with the key that signs now: its key id, or `None` when no key of the identity
/// signs at this moment (it leaves unsigned). A failure gives the proxy's own 500 to answer: a
/// request meant to be signed never leaves unsigned by accident.
fn sign<'s>(
    shared: &Shared,
    facts: &Facts,
    signing: &Signing<'s>,
    upstream: &mut Request<Incoming>,
    client: Option<&robots_proxy_identity::ClientSignature>,
) -> Flow<Signed<'s>> {
    // A clone shares the value's bytes; `upstream_request` set it to the authority, and the
    // request-target to the absolute URI with the path and query that were checked.
    let host = upstream.headers().get(http::header::HOST).cloned();
    let uri = upstream.uri().clone();
    let method = upstream.method().clone();
    let signed = match (host.as_ref().and_then(|h| h.to_str().ok()), uri.scheme_str()) {
        (Some(authority), Some(scheme)) => {
            let target = robots_proxy_identity::Target {
                method: method.as_str(),
                scheme,
                authority,
                path_and_query: uri.path_and_query().map_or("/", |p| p.as_str()),
            };
            let now = shared.clock.now();
            match client {
                None => signing
                    .sign(&target, upstream.headers_mut(), now)
                    .map(|keyid| Signed { keyid, cosign: None }),
                Some(client) => signing
                    .sign_beside(&target, upstream.headers_mut(), now, client)
                    // No key of the identity signs at this moment: the request leaves with the
                    // client's fields alone, and nothing is reported (`cosign` is `None`).
                    .map(|(keyid, cosign)| Signed { keyid, cosign }),
            }
        }
        _ => Err(robots_proxy_identity::SigningError::Fields(
            "the request has no Host or no absolute target".into(),
        )),
    };
    match signed {
        Ok(signed) => {
            if let Some(robots_proxy_identity::Cosign::Skipped(why)) = &signed.cosign {
                cosign_skipped(shared, facts, why);
            }
            let kept = matches!(
                &signed.cosign,
                Some(robots_proxy_identity::Cosign::Skipped(s)) if s.left == robots_proxy_identity::Left::Kept
            );
            if signed.keyid.is_none() && !kept {
                // No key of the identity signs now (a gap between key windows): counted and
                // logged, the first ten and then every thousandth (issue 41).
                let n = shared.metrics.signing_unsigned();
                if robots_proxy_output::warn_on(n) {
                    tracing::warn!(
                        authority = %facts.authority, unsigned_so_far = n,
                        "no key of the signing identity signs now: the request leaves unsigned \
                         (check the keys' sign_from/sign_until windows)"
                    );
                }
            }
            ControlFlow::Continue(signed)
        }
        Err(e) => {
            tracing::error!(error = %e, "cannot sign a request; it is not forwarded");
            ControlFlow::Break(answer::text(
                StatusCode::INTERNAL_SERVER_ERROR,
                "proxy_internal_error",
                format!("500 Internal Server Error: cannot sign the request (signing): {e}\n"),
            ))
        }
    }
}

/// A client signature the proxy's could not cover (`signing.client_signatures = "cosign"`):
/// counted (`robots_proxy_cosign_skipped_total{reason}`) and logged, the first ten and then
/// every thousandth at `warn`; the audit record (with `audit.all_decisions`) says why too.
fn cosign_skipped(shared: &Shared, facts: &Facts, why: &robots_proxy_identity::Skipped) {
    let n = shared.metrics.cosign_skipped(why.reason.as_str());
    if robots_proxy_output::warn_on(n) {
        tracing::warn!(
            client = %facts.client, authority = %facts.authority, reason = why.reason.as_str(),
            skipped_so_far = n,
            "the client's signature is forwarded as it is, not covered by the proxy's: {why}"
        );
    } else {
        tracing::debug!(client = %facts.client, reason = why.reason.as_str(), "not cosigned");
    }
}
