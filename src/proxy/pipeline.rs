//! One request's way through the proxy: [`handle`] tells a CONNECT from a proxy request, and
//! [`process`] takes a proxy request (or one read inside an intercepted tunnel) through a short
//! pipeline of named steps, each of which either hands the next what it needs or ends the
//! request with an answer:
//!
//! 1. [`read_facts`]: the request's facts, read once (authority, path readings, token, client);
//! 2. [`robots_txt`]: the robots.txt snapshot for the authority (the destination guard first);
//!    then the request's one decision ([`crate::policy::Policy::decide`]), which every later
//!    step uses;
//! 3. [`undecidable`]: the fleet's store out of reach (503), an untrusted origin (502);
//! 4. [`check_robots`]: every reading of the path must be allowed, or an exception allow it
//!    (403 otherwise);
//! 5. [`check_usage`]: AI usage preferences stated in robots.txt (403);
//! 6. [`pace`]: the site's pace (wait, or 429);
//! 7. [`forward`]: to the origin, streamed;
//! 8. [`check_response`]: usage preferences stated by the response (`Content-Usage`).

use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Instant;

use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;

use super::facts::Facts;
use super::refusal::Refusal;
use super::report::Reported;
use super::{answer, connect, forward, preferences, safety, throttle};
use super::{ConnectionMemory, Live, ProxyBody, Shared};
use crate::audit::AuditRecord;
use crate::authority::{Authority, Scheme};
use crate::metrics::Decision as Counted;
use crate::pacing::PacePermit;
use crate::policy::{Decision, Policy, Readings, RobotsSnapshot, UsagePreferences};
use crate::signing::Signing;
use crate::usage::{Purpose, Settled};

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
        let proxy_url = match (&shared.tls_listen, memory.over_tls) {
            (Some(tls), true) => format!("https://{tls}"),
            _ => format!("http://{}", shared.listen),
        };
        return answer::not_a_proxy_request(&proxy_url);
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

/// Decides one request for `authority` and answers 403 (or 429) or forwards it. Shared by
/// plain proxy requests and requests read inside an intercepted CONNECT tunnel.
///
/// Only the common path (decide, allow, forward) is awaited in place; every other await is
/// boxed inside its step, which keeps this future small (hyper moves it at least once per
/// request).
pub(super) async fn process(
    shared: &Arc<Shared>,
    memory: &ConnectionMemory,
    client: SocketAddr,
    authority: Authority,
    req: Request<Incoming>,
) -> Response<ProxyBody> {
    let started = Instant::now();
    let live = shared.live();
    let facts = read_facts(&live, memory, client, authority, &req);
    // Refusals only reported (report-only mode), for the response's `Proxy-Status`.
    let mut reported = Reported::default();
    let mut answer = match steps(shared, &live, memory, &facts, req, started, &mut reported).await {
        ControlFlow::Break(answer) | ControlFlow::Continue(answer) => answer,
    };
    reported.stamp(&mut answer);
    answer
}

/// The steps after the facts; `Break` is an answer that ends the request early.
async fn steps(
    shared: &Arc<Shared>,
    live: &Live,
    memory: &ConnectionMemory,
    facts: &Facts,
    req: Request<Incoming>,
    started: Instant,
    reported: &mut Reported,
) -> ControlFlow<Response<ProxyBody>, Response<ProxyBody>> {
    let signing = plan_signing(shared, live, facts, &req);
    let snapshot = robots_txt(shared, live, memory, facts).await?;
    // The one decision of the request: every later step uses it, none decides again.
    let decision =
        live.policy.decide(&snapshot, facts.claim(), &facts.readings, shared.clock.now());
    shared.metrics.decision_time(started);
    undecidable(shared, facts, &decision).await?;
    let mut allowed = check_robots(shared, live, facts, &decision, reported).await?;
    let usage = check_usage(shared, live, facts, &decision, reported, &mut allowed).await?;
    let _permit = pace(shared, facts, &decision).await?;
    // Built and signed now, after robots.txt and the pace: the key is the one that signs at
    // the moment the request leaves.
    let prepared = prepare(shared, live, facts, req, signing.as_ref());
    let (signed, cosign) = match &prepared {
        ControlFlow::Continue((_, signed)) => (signed.keyid, signed.cosign.clone()),
        ControlFlow::Break(_) => (None, None),
    };
    // The allowed request's record (`audit.all_decisions`) is written once it is known to go,
    // naming the key that signed it (and what became of the client's signature under
    // `signing.client_signatures = "cosign"`): a usage or pacing refusal writes its own record
    // instead, so each request has one.
    if let Some(mut record) = allowed {
        preferences::stamp_signature(&mut record, signed, cosign.as_ref());
        shared.write_audit(*record).await;
    }
    let (upstream, _) = prepared?;
    let resp = forward(shared, live, facts, upstream).await?;
    let signature = (signed, cosign.as_ref());
    let checking = check_response(shared, live, facts, &decision, usage, signature, resp, reported);
    ControlFlow::Continue(checking.await)
}

/// Step 1: the request's facts. The path is forwarded as received and decided on every
/// reading of it (`policy::readings`); the token is the tied user's, the header's, the
/// User-Agent's or the default, in the configured order.
fn read_facts(
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
        &mut crate::sync::lock(&memory.user_agent),
    );
    Facts::of(req, client, authority, readings, token)
}

/// Web Bot Auth: whom the request will be signed for, if anyone (it is signed last, with the
/// key of that moment, in [`prepare`]). With `access.users_file`, a token identity signs only
/// for the users tied to its token or listed in its `users`: a request that names another
/// crawler's token goes unsigned (or as `*`), never signed as that crawler, and is logged and
/// counted (`robots_proxy_signing_refused_total`).
fn plan_signing<'s>(
    shared: &Shared,
    live: &'s Live,
    facts: &Facts,
    req: &Request<Incoming>,
) -> Option<Signing<'s>> {
    let signer = live.signer.as_deref()?;
    let who = crate::signing::Requester {
        token: facts.token().map(|t| t.as_str()),
        user: facts.user_name(),
        tied: facts.user.as_ref().and_then(|u| u.token.as_ref()),
        authenticated: shared.safety.authenticates(),
    };
    let plan = signer.plan(&who, req.headers());
    if let Some(token) = plan.refused {
        let n = shared.metrics.signing_refused();
        let user = facts.user_name().unwrap_or("-");
        if crate::output::warn_on(n) {
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

/// Step 2: the robots.txt snapshot of the authority, from the connection's memory or the
/// store. Refused first when the destination guard prohibits an IP literal (before robots.txt
/// is even fetched) or the robots.txt fetch went to a prohibited address.
async fn robots_txt(
    shared: &Shared,
    live: &Live,
    memory: &ConnectionMemory,
    facts: &Facts,
) -> ControlFlow<Response<ProxyBody>, Arc<RobotsSnapshot>> {
    // safety: the destination guard, for an IP literal before robots.txt is even fetched.
    if let Some(p) = shared.safety.literal_prohibited(&facts.authority) {
        let why = p.to_string();
        return ControlFlow::Break(Box::pin(safety::refuse_request(shared, facts, &why)).await);
    }
    let snapshot = live.policy.robots_for(&memory.robots, &facts.authority).await;
    // safety: the robots.txt fetch (or a redirect of it) went to a prohibited address.
    if let Some(why) = safety::robots_prohibited(&snapshot) {
        return ControlFlow::Break(Box::pin(safety::refuse_request(shared, facts, why)).await);
    }
    ControlFlow::Continue(snapshot)
}

/// Step 3: a request that cannot be decided on what robots.txt gave: a 503 when the fleet's
/// shared state is required and out of reach, a 502 when the origin's certificate is not
/// trusted. The 503's record is the decision's (no rule decided: nothing was read).
async fn undecidable(
    shared: &Shared,
    facts: &Facts,
    decision: &Decision<'_>,
) -> ControlFlow<Response<ProxyBody>> {
    let Some(snapshot) = decision.site() else {
        return ControlFlow::Continue(());
    };
    if let Some(refusal) = fleet_unavailable(snapshot) {
        // Audited and counted (`unavailable`) like every answer the proxy gives itself.
        let mut record = facts.record(decision, shared.clock.now(), None);
        record.reason = FLEET_UNAVAILABLE_REASON.to_owned();
        (record.rule, record.line) = (None, None);
        let scheme = facts.authority.scheme();
        let refusing = Box::pin(shared.refuse(record, scheme, refusal, facts.want_json));
        return ControlFlow::Break(refusing.await);
    }
    if let Some(answer) = untrusted_origin(snapshot) {
        shared.metrics.upstream_error("tls_certificate_error");
        shared.metrics.count(crate::metrics::Decision::Unavailable, facts.authority.scheme());
        return ControlFlow::Break(answer);
    }
    ControlFlow::Continue(())
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
        crate::audit::AuditAction::FleetUnavailable,
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

/// Step 4: robots.txt, and the exception that overrides it. Every reading of the path must be
/// allowed. An allowed request's record (`audit.all_decisions`, or an allow exception's) comes
/// back unwritten, for [`steps`] to write once the request goes on. A refusal goes through
/// [`Shared::refuse_or_report`], so that report-only mode lets it go on.
async fn check_robots(
    shared: &Shared,
    live: &Live,
    facts: &Facts,
    decision: &Decision<'_>,
    reported: &mut Reported,
) -> ControlFlow<Response<ProxyBody>, Option<Box<AuditRecord>>> {
    if decision.exception().is_some() {
        let excepting = Box::pin(super::exception::check(shared, live, facts, decision, reported));
        return excepting.await;
    }
    if decision.is_allowed() {
        if !shared.audit.all_decisions() {
            return ControlFlow::Continue(None);
        }
        // `robots.signature.keyid` is set once the request is signed (`steps`).
        return ControlFlow::Continue(Some(Box::new(facts.record(
            decision,
            shared.clock.now(),
            None,
        ))));
    }
    // Boxed: the audit record and the explanation are big, and the allowed requests that
    // never come here should not carry room for them.
    Box::pin(refuse_robots(shared, &live.policy, facts, decision, reported)).await
}

/// The 403 of a request robots.txt disallows, its record written; or, in report-only mode,
/// its `would_block` record written and the request let go on.
async fn refuse_robots(
    shared: &Shared,
    policy: &Policy,
    facts: &Facts,
    decision: &Decision<'_>,
    reported: &mut Reported,
) -> ControlFlow<Response<ProxyBody>, Option<Box<AuditRecord>>> {
    let explanation = decision.explain();
    let record = facts.audit_record(&explanation, shared.clock.now(), Some(403));
    let token = facts.token().map(|t| t.as_str());
    let refusal = answer::blocked(&explanation, &record.url, token, facts.want_json);
    let (who, scheme) = (facts.claim(), facts.authority.scheme());
    match shared.refuse_or_report(policy, who, record, scheme, refusal, facts.want_json).await {
        ControlFlow::Break(blocked) => ControlFlow::Break(blocked),
        // Report-only mode: its `would_block` record is the request's record.
        ControlFlow::Continue(details) => {
            reported.add(details);
            ControlFlow::Continue(None)
        }
    }
}

/// What [`check_usage`] found, for [`check_response`]: the crawler's configured purposes
/// (none for most crawlers) and the preferences robots.txt states for the path.
struct Usage {
    purposes: Vec<Purpose>,
    preferences: UsagePreferences,
    /// The `tdmrep.json` rule for the path (TDMRep), applied with the response head.
    tdm_file: Option<crate::policy::optout::TdmStatement>,
}

/// Step 5: AI usage preferences (`crate::usage`), only for crawlers with configured purposes:
/// an enforced purpose that robots.txt disallows for the path is refused. An exception that
/// lifts a preference writes itself into `allowed`, the request's record still to be written.
async fn check_usage(
    shared: &Shared,
    live: &Live,
    facts: &Facts,
    decision: &Decision<'_>,
    reported: &mut Reported,
    allowed: &mut Option<Box<AuditRecord>>,
) -> ControlFlow<Response<ProxyBody>, Usage> {
    let mut purposes = if live.usage.is_active() {
        live.usage.purposes_for(facts.token(), facts.user_name())
    } else {
        Vec::new()
    };
    if !purposes.is_empty() && live.policy.has_exceptions() {
        let lifting =
            super::exception::lift_usage(shared, live, facts, decision, &mut purposes, allowed);
        Box::pin(lifting).await;
    }
    if purposes.is_empty() {
        let preferences = UsagePreferences::default();
        return ControlFlow::Continue(Usage { purposes, preferences, tdm_file: None });
    }
    let preferences = decision.usage();
    // A request whose robots.txt refusal was only reported is not reported again for its
    // usage preference: one `would_block` per request (`Reported::any`).
    let blocking = live.usage.blocking(&purposes, &preferences, Settled::No);
    if let Some(block) = blocking.filter(|_| !reported.any()) {
        let subject = preferences::Subject { facts, decision, signed: None, cosign: None };
        let action = crate::audit::AuditAction::UsageDisallow;
        let refusal = Box::pin(preferences::refuse(
            shared,
            &live.policy,
            &subject,
            &purposes,
            &preferences,
            &block,
            action,
        ));
        reported.add(refusal.await?);
    }
    let tdm_file =
        super::optouts::file_statement(&live.policy, &live.usage, facts, decision, &purposes).await;
    ControlFlow::Continue(Usage { purposes, preferences, tdm_file })
}

/// Step 6: politeness (`crate::pacing`): wait for the site's pace, or answer 429. The permit is
/// held until the origin's response headers arrive.
async fn pace(
    shared: &Shared,
    facts: &Facts,
    decision: &Decision<'_>,
) -> ControlFlow<Response<ProxyBody>, PacePermit> {
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
        Err(throttled) => ControlFlow::Break(
            Box::pin(throttle::refused(shared, facts, decision, &throttled)).await,
        ),
    }
}

/// How the request left signed: the key id that signed it, if any, and with
/// `signing.client_signatures = "cosign"` what became of the client's signature.
#[derive(Default)]
struct Signed<'s> {
    keyid: Option<&'s str>,
    cosign: Option<crate::signing::Cosign>,
}

/// Step 7, first half: the request to the origin, built and signed (the last change made to
/// it), with the key id that signed it; or the proxy's own answer when it cannot be built
/// (400) or signed (500).
fn prepare<'s>(
    shared: &'s Shared,
    live: &Live,
    facts: &Facts,
    req: Request<Incoming>,
    signing: Option<&Signing<'s>>,
) -> ControlFlow<Response<ProxyBody>, (Request<Incoming>, Signed<'s>)> {
    let authority = &facts.authority;
    // With `signing.client_signatures = "cosign"`: the client's signature as it arrived, before
    // anything of the request changes, to tell at signing time whether what it covers did.
    let client = signing.and_then(|s| {
        let uri = req.uri();
        let host = req.headers().get(http::header::HOST).and_then(|h| h.to_str().ok());
        let arrival = crate::signing::Target {
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
        live.policy.token_header(),
        &shared.via,
    );
    let mut upstream = match forwarded {
        Ok(r) => r,
        Err(e) => {
            shared.metrics.count(Counted::Allow, authority.scheme());
            return ControlFlow::Break(answer::text(
                StatusCode::BAD_REQUEST,
                "http_request_error",
                format!("400 Bad Request: cannot build the upstream request: {e}\n"),
            ));
        }
    };
    // Signed last: nothing changes the request after this.
    let Some(signing) = signing else {
        return ControlFlow::Continue((upstream, Signed::default()));
    };
    match sign(shared, facts, signing, &mut upstream, client.as_ref()) {
        ControlFlow::Continue(signed) => ControlFlow::Continue((upstream, signed)),
        ControlFlow::Break(refused) => {
            shared.metrics.count(Counted::Allow, authority.scheme());
            ControlFlow::Break(refused)
        }
    }
}

/// Step 7: the request to the origin, and its response. Counted as allowed only once the
/// origin's answer is known ([`check_response`]): it may still be refused (the guard at
/// connect time) or withheld (usage preferences), and each request counts once.
async fn forward(
    shared: &Shared,
    live: &Live,
    facts: &Facts,
    upstream: Request<Incoming>,
) -> ControlFlow<Response<ProxyBody>, Response<ProxyBody>> {
    let authority = &facts.authority;
    let resp = forward::send(
        &shared.client,
        authority,
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
    if let Some(p) = resp.extensions().get::<crate::guard::Prohibited>() {
        let why = p.to_string();
        return ControlFlow::Break(Box::pin(safety::refuse_request(shared, facts, &why)).await);
    }
    ControlFlow::Continue(resp)
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
    client: Option<&crate::signing::ClientSignature>,
) -> ControlFlow<Response<ProxyBody>, Signed<'s>> {
    // A clone shares the value's bytes; `upstream_request` set it to the authority, and the
    // request-target to the absolute URI with the path and query that were checked.
    let host = upstream.headers().get(http::header::HOST).cloned();
    let uri = upstream.uri().clone();
    let method = upstream.method().clone();
    let signed = match (host.as_ref().and_then(|h| h.to_str().ok()), uri.scheme_str()) {
        (Some(authority), Some(scheme)) => {
            let target = crate::signing::Target {
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
        _ => Err(crate::signing::SigningError::Fields(
            "the request has no Host or no absolute target".into(),
        )),
    };
    match signed {
        Ok(signed) => {
            if let Some(crate::signing::Cosign::Skipped(why)) = &signed.cosign {
                cosign_skipped(shared, facts, why);
            }
            let kept = matches!(
                &signed.cosign,
                Some(crate::signing::Cosign::Skipped(s)) if s.left == crate::signing::Left::Kept
            );
            if signed.keyid.is_none() && !kept {
                // No key of the identity signs now (a gap between key windows): counted and
                // logged, the first ten and then every thousandth (issue 41).
                let n = shared.metrics.signing_unsigned();
                if crate::output::warn_on(n) {
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
fn cosign_skipped(shared: &Shared, facts: &Facts, why: &crate::signing::Skipped) {
    let n = shared.metrics.cosign_skipped(why.reason.as_str());
    if crate::output::warn_on(n) {
        tracing::warn!(
            client = %facts.client, authority = %facts.authority, reason = why.reason.as_str(),
            skipped_so_far = n,
            "the client's signature is forwarded as it is, not covered by the proxy's: {why}"
        );
    } else {
        tracing::debug!(client = %facts.client, reason = why.reason.as_str(), "not cosigned");
    }
}

/// Step 8: the origin's response, counted as allowed, or withheld when its `Content-Usage`
/// header disallows an enforced purpose of the crawler (unless only reported).
#[allow(clippy::too_many_arguments)]
async fn check_response(
    shared: &Shared,
    live: &Live,
    facts: &Facts,
    decision: &Decision<'_>,
    usage: Usage,
    (signed, cosign): (Option<&str>, Option<&crate::signing::Cosign>),
    resp: Response<ProxyBody>,
    reported: &mut Reported,
) -> Response<ProxyBody> {
    if usage.purposes.is_empty() {
        shared.metrics.count(Counted::Allow, facts.authority.scheme());
        return resp;
    }
    let subject = preferences::Subject { facts, decision, signed, cosign };
    let answer = Box::pin(preferences::on_response(
        shared,
        &live.policy,
        &live.usage,
        &subject,
        &usage.purposes,
        usage.preferences,
        usage.tdm_file.as_ref(),
        resp,
        reported,
    ));
    answer.await
}
