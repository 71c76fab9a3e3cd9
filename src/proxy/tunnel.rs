//! Tunnel mode (`https.mode = "tunnel"`): a CONNECT is relayed byte for byte, and decided once,
//! before it opens, on what holds for every path of the site (no path can be seen):
//! * robots.txt: refused when the token's rules disallow every path;
//! * `[[exceptions]]`: only an exception whose paths cover every path of the site decides; a
//!   disallow one refuses the tunnel (naming itself), an allow one opens a tunnel robots.txt
//!   refuses; one for some paths only decides nothing here;
//! * usage preferences: robots.txt's for every path, and TDMRep's `tdmrep.json` when it
//!   reserves every path (for a crawler with `train-ai` purposes); response headers and
//!   `<meta>` cannot be seen.
//!
//! Every refusal goes through report-only mode ([`super::report::refuse_connect`]).

use std::ops::ControlFlow;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;

use super::connect::{connect_record, refuse_prohibited, TUNNEL_PATH};
use super::exchange::Ledger;
use super::report::{refuse_connect, Reported, Who};
use super::{answer, safety, ProxyBody, Shared};
use crate::audit::{AuditAction, AuditOutcome, AuditRecord};
use crate::authority::Authority;
use crate::guard::{ConnectTcpError, GuardError};
use crate::metrics::Decision;
use crate::policy::exceptions::Effect;
use crate::policy::{Category, Explanation, Preference, ProductToken, RobotsState};
use crate::usage::Settled;
use std::net::SocketAddr;

/// The audit record of a tunnel decided by robots.txt: `connect_refuse` with the reason
/// `refused`, or `tunnel_allow` without one. The robots.txt facts (state, age, URL, group and,
/// for a refusal, the rule and line) are those of `decision`, the policy's decision for `/`:
/// when the tunnel is refused because every path is disallowed, its rule is the one that
/// disallows `/`. A tunnel that opens names no rule, since no rule decided it.
fn tunnel_record(
    shared: &Shared,
    client: SocketAddr,
    req: &Request<Incoming>,
    authority: &Authority,
    token: Option<&ProductToken>,
    decision: &Explanation,
    refused: Option<&str>,
) -> AuditRecord {
    let allowed = refused.is_none();
    let url = authority.to_string();
    let user_agent = req.headers().get(http::header::USER_AGENT).map(|v| v.as_bytes());
    let status = if allowed { 200 } else { 403 };
    let mut record = decision.audit_record(
        shared.clock.now(),
        client,
        &http::Method::CONNECT,
        &url,
        &url,
        TUNNEL_PATH,
        user_agent,
        token,
        Some(status),
    );
    record.user_name =
        req.extensions().get::<Arc<crate::access::AuthenticatedUser>>().map(|u| u.name.clone());
    record.action = if allowed { AuditAction::TunnelAllow } else { AuditAction::ConnectRefuse };
    record.outcome = if allowed { AuditOutcome::Success } else { AuditOutcome::Failure };
    record.reason =
        refused.unwrap_or("tunnel allowed: the path cannot be seen inside a tunnel").to_owned();
    if allowed {
        record.rule = None;
        record.line = None;
    }
    record
}

/// Tunnel mode: refuse when every path is disallowed, else relay bytes.
/// `live` is the reloadable state the CONNECT read when it arrived: the tunnel is decided and
/// bounded by it (review-house D4).
pub(super) async fn tunnel(
    shared: Arc<Shared>,
    live: &super::Live,
    ledger: &mut Ledger<'_>,
    client: SocketAddr,
    req: Request<Incoming>,
    authority: Authority,
    (token, origin): (Option<ProductToken>, crate::policy::TokenOrigin),
) -> Response<ProxyBody> {
    let snapshot = live.policy.robots(&authority).await;
    // safety: the robots.txt fetch went to a prohibited address.
    if let Some(why) = safety::robots_prohibited(&snapshot) {
        return refuse_prohibited(ledger, client, &req, &authority, token.as_ref(), why);
    }
    if let Some(refusal) = super::pipeline::fleet_unavailable(&snapshot) {
        let reason = super::pipeline::FLEET_UNAVAILABLE_REASON;
        let now = shared.clock.now();
        let record = connect_record(now, client, &req, &authority, token.as_ref(), false, reason);
        return ledger.refuse(record, refusal, false);
    }
    let blocked = live.policy.disallows_everything(&snapshot, token.as_ref());
    // Who a refusal is for, and the refusals only reported (report-only mode).
    let user = req.extensions().get::<Arc<crate::access::AuthenticatedUser>>().cloned();
    let who = Who { token: token.as_ref(), origin, user: user.as_ref().map(|u| u.name.as_str()) };
    let mut reported = Reported::default();
    // For the audit record: the group that applies and, when every path is disallowed, the
    // rule that disallows `/`. Decided once, explained when a record is written.
    let root = crate::policy::Readings::of("/");
    let decision = live.policy.decide(&snapshot, who, &root, shared.clock.now());
    let decide_root = || decision.explain();
    // The record of a refused tunnel: decided as `/`, with `reason`.
    let refused_record = |reason: &str| {
        tunnel_record(
            &shared,
            client,
            &req,
            &authority,
            token.as_ref(),
            &decide_root(),
            Some(reason),
        )
    };
    // `[[exceptions]]`: one that covers every path of the site decides before robots.txt.
    let now = shared.clock.now();
    let exception = live.policy.tunnel_exception(&snapshot, who, blocked, now);
    // An allow exception that opens the tunnel bounds it: the relay ends at its `expires`.
    let mut deadline =
        exception.as_ref().filter(|v| v.effect == Effect::Allow).and_then(|v| v.expires);
    // The allow exceptions the tunnel rests on (the one that opened it, one that lifted a
    // usage preference for it): a reload that withdraws one ends the relay.
    let mut bounds: Vec<Arc<str>> = exception
        .as_ref()
        .filter(|v| v.effect == Effect::Allow)
        .map(|v| v.id.clone())
        .into_iter()
        .collect();
    // The record of the exception that opened the tunnel (or lifted a usage preference for
    // it), written when the tunnel opens: an exception's decisions are always audited.
    let mut excepted: Option<AuditRecord> = None;
    match exception {
        Some(v) if v.effect == Effect::Disallow => {
            let reason = format!(
                "{}; the tunnel is refused (in tunnel mode an exception decides only when its \
                 paths cover every path of the site)",
                v.reason()
            );
            let mut record = refused_record(&reason);
            v.audit(&mut record, !blocked);
            record.reason.clone_from(&reason);
            match refuse_connect(ledger, &live.policy, who, record, reason) {
                ControlFlow::Break(refused) => return refused,
                ControlFlow::Continue(details) => reported.add(details),
            }
        }
        Some(v) => {
            // robots.txt disallows every path; the exception allows every path.
            let mut record = refused_record("");
            v.audit(&mut record, false);
            record.status_code = Some(200);
            record.reason = format!(
                "{}; the tunnel is opened (robots.txt at {} disallows every path)",
                v.reason(),
                authority.robots_url()
            );
            excepted = Some(record);
        }
        None if blocked => {
            let reason = if snapshot.state == RobotsState::Unreachable {
                format!(
                    "robots.txt at {} is unreachable ({}): all paths are disallowed until it \
                     can be fetched; the tunnel is refused",
                    authority.robots_url(),
                    crate::policy::outcome_text(&snapshot.last_outcome)
                )
            } else {
                format!(
                    "robots.txt at {} disallows every path for {}; the tunnel is refused \
                     (paths cannot be seen in tunnel mode)",
                    authority.robots_url(),
                    token.as_ref().map_or("the `*` group", |t| t.as_str())
                )
            };
            let record = refused_record(&reason);
            match refuse_connect(ledger, &live.policy, who, record, reason) {
                ControlFlow::Break(refused) => return refused,
                ControlFlow::Continue(details) => reported.add(details),
            }
        }
        None => {}
    }
    // AI usage preferences: the path and the responses cannot be seen in a tunnel, so only a
    // preference stated for every path of the site can be honoured (robots.txt's, and a
    // `tdmrep.json` that reserves every path), and an unknown one is settled now
    // (`usage.unknown`), since no `Content-Usage` header will be seen.
    if live.usage.is_active() {
        let mut purposes = live.usage.purposes_for(token.as_ref(), who.user);
        if !purposes.is_empty() {
            let lifted = live.policy.usage_lifted_everywhere(&snapshot, who, now);
            if let Some((categories, v)) = lifted {
                let before = purposes.len();
                purposes.retain(|p| !categories.contains(&p.category));
                if purposes.len() != before {
                    // One use per tunnel: not again for the exception that opened it.
                    if !bounds.contains(&v.id) {
                        live.policy.exceptions().count(&v.id);
                        bounds.push(v.id.clone());
                    }
                    // The tunnel carries what the lift allows only until the lift expires.
                    deadline = match (deadline, v.expires) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                    let labels: Vec<&str> = categories.iter().map(|c| c.label()).collect();
                    let lift = format!(
                        "usage preferences {} lifted by exception {} ({}) for every path",
                        labels.join(", "),
                        v.id,
                        v.reference
                    );
                    let record = excepted.get_or_insert_with(|| {
                        let mut r = tunnel_record(
                            &shared,
                            client,
                            &req,
                            &authority,
                            token.as_ref(),
                            &decide_root(),
                            None,
                        );
                        v.audit(&mut r, !blocked);
                        r.reason.clear();
                        r
                    });
                    record.reason = if record.reason.is_empty() {
                        lift
                    } else {
                        format!("{}; {lift}", record.reason)
                    };
                }
            }
        }
        let mut prefs = live.policy.usage_everywhere(&snapshot, token.as_ref());
        // `tdmrep.json` is fetched only when robots.txt does not disallow `train-ai` already.
        let tdm = if prefs.get(Category::TrainAi).preference == Preference::Disallow {
            None
        } else {
            tdm_everywhere(live, &authority, &purposes).await
        };
        if tdm.is_some() {
            prefs.add_signal(Category::TrainAi, Preference::Disallow, "tdmrep.json");
        }
        // One `would_block` per request (`Reported::any`), as for plain requests.
        let blocking = live.usage.blocking(&purposes, &prefs, Settled::Yes);
        if let Some(block) = blocking.filter(|_| !reported.any()) {
            let reason = format!(
                "{}; the tunnel is refused (in tunnel mode only preferences stated for every \
                 path can be seen: robots.txt at {}, and {}/.well-known/tdmrep.json)",
                block.reason,
                authority.robots_url(),
                authority
            );
            let mut record = refused_record(&reason);
            record.action = AuditAction::UsageDisallow;
            let mut usage = super::preferences::usage_audit(&purposes, &prefs, &block);
            if block.source == "tdmrep.json" {
                usage.tdm_policy = tdm.and_then(|t| t.policy);
            }
            record.usage = Some(usage);
            record.exception = excepted.as_ref().and_then(|r| r.exception.clone());
            match refuse_connect(ledger, &live.policy, who, record, reason) {
                ControlFlow::Break(refused) => return refused,
                ControlFlow::Continue(details) => reported.add(details),
            }
        }
    }
    let addr = format!("{}:{}", bracket(authority.host()), authority.port());
    // safety: through the destination guard, to the addresses it checked.
    let connecting =
        shared.safety.guard.connect_tcp(authority.host(), authority.port(), shared.connect_timeout);
    let upstream = match connecting.await {
        Ok(s) => s,
        Err(ConnectTcpError::Guard(GuardError::Prohibited(p))) => {
            let why = p.to_string();
            return refuse_prohibited(ledger, client, &req, &authority, token.as_ref(), &why);
        }
        Err(ConnectTcpError::Timeout { .. }) => {
            return answer::text(
                StatusCode::GATEWAY_TIMEOUT,
                "connection_timeout",
                format!("504 Gateway Timeout: connecting to {addr} timed out\n"),
            )
        }
        Err(e) => {
            return answer::text(
                StatusCode::BAD_GATEWAY,
                "destination_unavailable",
                format!("502 Bad Gateway: cannot connect to {addr}: {e}\n"),
            )
        }
    };
    let _ = upstream.set_nodelay(true);
    // The tunnel's record, for the CONNECT's Log phase (`connect::handle_connect`).
    ledger.count(Decision::Tunnel);
    if let Some(record) = excepted {
        ledger.keep(record);
    } else if live.https.audit_tunnels || shared.audit.all_decisions() {
        let record =
            tunnel_record(&shared, client, &req, &authority, token.as_ref(), &decide_root(), None);
        ledger.keep(record);
    }
    // https.tunnel_idle_timeout, as in force when the CONNECT arrived.
    let idle = live.timeouts.tunnel_idle;
    let relaying = async move {
        match hyper::upgrade::on(req).await {
            Ok(upgraded) => super::relay::relay(upgraded, upstream, idle).await,
            Err(e) => tracing::debug!(error = %e, "CONNECT upgrade failed"),
        }
    };
    if bounds.is_empty() {
        tokio::spawn(relaying);
    } else {
        let lasts = deadline.map(|at| at.duration_since(shared.clock.now()).unwrap_or_default());
        let grants = Grants { shared: shared.clone(), snapshot, token, origin, user, bounds };
        tokio::spawn(grants.bound(relaying, lasts));
    }
    let mut opened = Response::new(answer::full(Bytes::new()));
    reported.stamp(&mut opened);
    opened
}

/// What a tunnel opened (or freed of a usage preference) by allow exceptions rests on: it
/// lasts while every one of them still grants the crawler the whole site.
struct Grants {
    shared: Arc<Shared>,
    snapshot: Arc<crate::policy::RobotsSnapshot>,
    token: Option<ProductToken>,
    origin: crate::policy::TokenOrigin,
    user: Option<Arc<crate::access::AuthenticatedUser>>,
    bounds: Vec<Arc<str>>,
}

impl Grants {
    /// Runs `relaying` until it ends, `lasts` passes (the earliest `expires` of the
    /// exceptions: past it they grant nothing, so neither does the tunnel), or a reload
    /// withdraws one of them (removed, narrowed off the site, the crawler or a path, expired).
    async fn bound(
        self,
        relaying: impl std::future::Future<Output = ()>,
        lasts: Option<std::time::Duration>,
    ) {
        let expiry = async {
            match lasts {
                Some(lasts) => tokio::time::sleep(lasts).await,
                None => std::future::pending().await,
            }
        };
        let mut reloads = self.shared.reloads.subscribe();
        let withdrawn = async {
            while reloads.changed().await.is_ok() {
                if let Some(id) = self.withdrawn() {
                    return id;
                }
            }
            std::future::pending().await
        };
        tokio::select! {
            () = relaying => {}
            () = expiry => tracing::info!(
                exception = %self.bounds.join(", "),
                "tunnel closed: the exception that opened it expired"
            ),
            id = withdrawn => tracing::info!(
                exception = %id,
                "tunnel closed: a reload withdrew the exception that opened it"
            ),
        }
    }

    /// The first exception of the tunnel's that no longer grants it the whole site.
    fn withdrawn(&self) -> Option<Arc<str>> {
        let live = self.shared.live();
        let user = self.user.as_ref().map(|u| u.name.as_str());
        let claim = Who { token: self.token.as_ref(), origin: self.origin, user };
        let (authority, now) = (&self.snapshot.authority, self.shared.clock.now());
        let exceptions = live.policy.exceptions();
        self.bounds.iter().find(|id| !exceptions.still_grants(id, authority, claim, now)).cloned()
    }
}

fn bracket(host: &str) -> String {
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_owned()
    }
}

/// The `tdmrep.json` statement that reserves every path of `authority` (see
/// [`crate::policy::optout::TdmFile::reserved_everywhere`]), when TDMRep is on and one of the
/// crawler's purposes is `train-ai`: all of TDMRep a tunnel can apply.
async fn tdm_everywhere(
    live: &super::Live,
    authority: &Authority,
    purposes: &[crate::usage::Purpose],
) -> Option<crate::policy::optout::TdmStatement> {
    if !live.usage.tdmrep() || !purposes.iter().any(|p| p.category == Category::TrainAi) {
        return None;
    }
    let site = live.policy.tdmrep(authority).await;
    site.file.as_ref()?.reserved_everywhere().cloned()
}
