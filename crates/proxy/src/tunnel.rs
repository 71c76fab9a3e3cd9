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
//! Every refusal goes through report-only mode ([`Exchange::refuse_or_report`]).
//!
//! A tunnel-mode CONNECT is an [`Exchange`] as any request is (`exchange.rs`), with facts that
//! have no path ([`Facts::of_tunnel`]): its phases run in the same order and under the same
//! names (Robots, Exceptions, Usage, Forward: the bytes are relayed; Pace, Sign and Response
//! have nothing to act on in bytes that cannot be read), and its Log phase writes its one
//! record and counts it, by construction ([`process`]).

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;

use super::connect::connect_record;
use super::exchange::{Exchange, Flow, Phase};
use super::facts::Facts;
use super::report::{connect_refusal, Who};
use super::{answer, safety, ConnectionMemory, Live, ProxyBody, Shared};
use robots_proxy_audit::{AuditAction, AuditOutcome, AuditRecord};
use robots_proxy_authority::Authority;
use robots_proxy_decide::exceptions::Effect;
use robots_proxy_decide::usage::Settled;
use robots_proxy_decide::{
    Category, Explanation, Preference, ProductToken, RobotsSnapshot, RobotsState,
};
use robots_proxy_metrics::Decision;
use robots_proxy_net::guard::{ConnectTcpError, GuardError};

/// Tunnel mode: the exchange of a CONNECT, refused when every path is disallowed, else
/// relayed byte for byte. `live` is the reloadable state the CONNECT read when it arrived: the
/// tunnel is decided and bounded by it (review-house D4).
pub(super) async fn process(
    shared: &Arc<Shared>,
    memory: &ConnectionMemory,
    live: &Live,
    req: Request<Incoming>,
    (client, authority): (std::net::SocketAddr, Authority),
    token: (Option<ProductToken>, robots_proxy_decide::TokenOrigin),
) -> Response<ProxyBody> {
    let started = Instant::now();
    let facts = Facts::of_tunnel(&req, client, authority, token);
    let mut exchange = Exchange::new(shared, live, memory, &facts, started);
    let answer = match exchange.tunnel(shared, req).await {
        ControlFlow::Break(answer) | ControlFlow::Continue(answer) => answer,
    };
    exchange.log().await;
    answer
}

/// What the tunnel's Robots, Exceptions and Usage phases found, for its Forward phase.
struct Opening {
    snapshot: Arc<RobotsSnapshot>,
    /// robots.txt disallows every path for the crawler.
    blocked: bool,
    /// The decision for `/`, explained: the group that applies and, when every path is
    /// disallowed, the rule that disallows `/` (decided once, for every record).
    root: Explanation,
    /// An allow exception that opens the tunnel bounds it: the relay ends at its `expires`.
    deadline: Option<SystemTime>,
    /// The allow exceptions the tunnel rests on (the one that opened it, one that lifted a
    /// usage preference for it): a reload that withdraws one ends the relay.
    bounds: Vec<Arc<str>>,
    /// The record of the exception that opened the tunnel (or lifted a usage preference for
    /// it), kept when the tunnel opens: an exception's decisions are always audited.
    excepted: Option<AuditRecord>,
}

impl Exchange<'_> {
    /// The phases of a tunnel-mode CONNECT, in their fixed order; `Break` is an answer that
    /// ends the exchange early. The Log phase follows either way ([`process`]).
    async fn tunnel(
        &mut self,
        shared: &Arc<Shared>,
        req: Request<Incoming>,
    ) -> Flow<Response<ProxyBody>> {
        self.phase = Phase::Robots;
        let mut opening = self.tunnel_robots().await?;
        self.phase = Phase::Exceptions;
        self.tunnel_exceptions(&mut opening)?;
        self.phase = Phase::Usage;
        self.tunnel_usage(&mut opening).await?;
        self.phase = Phase::Forward;
        self.open(shared, req, opening).await
    }

    /// The tunnel's record, decided as `/` (`root`): `connect_refuse` with the reason
    /// `refused`, or `tunnel_allow` without one. A tunnel that opens names no rule, since no
    /// rule decided it.
    fn tunnel_record(&self, root: &Explanation, refused: Option<&str>) -> AuditRecord {
        let allowed = refused.is_none();
        let status = if allowed { 200 } else { 403 };
        let mut record = self.facts.audit_record(root, self.shared.clock.now(), Some(status));
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

    /// A refusal of the tunnel on policy grounds, through report-only mode.
    fn refuse_tunnel(&mut self, record: AuditRecord, reason: &str) -> Flow {
        let refusal = connect_refusal(&record, reason);
        self.refuse_or_report(record, refusal)
    }

    /// The Robots phase: the site's robots.txt (the destination guard of its fetch first; the
    /// fleet's store out of reach: 503), and the decision for `/`.
    async fn tunnel_robots(&mut self) -> Flow<Opening> {
        let (shared, live, facts) = (self.shared, self.live, self.facts);
        let snapshot = live.policy.robots(&facts.authority).await;
        // safety: the robots.txt fetch went to a prohibited address.
        if let Some(why) = safety::robots_prohibited(&snapshot) {
            return ControlFlow::Break(self.refuse_prohibited(why));
        }
        if let Some(refusal) = super::pipeline::fleet_unavailable(&snapshot) {
            let reason = super::pipeline::FLEET_UNAVAILABLE_REASON;
            let (now, ua) = (shared.clock.now(), facts.user_agent());
            let record = connect_record(
                now,
                facts.client,
                ua,
                &facts.authority,
                facts.token(),
                false,
                reason,
            );
            return ControlFlow::Break(self.refuse(record, refusal));
        }
        let blocked = live.policy.disallows_everything(&snapshot, facts.token());
        let root =
            live.policy.decide(&snapshot, facts.claim(), &facts.readings, shared.clock.now());
        let root = root.explain();
        ControlFlow::Continue(Opening {
            snapshot,
            blocked,
            root,
            deadline: None,
            bounds: Vec::new(),
            excepted: None,
        })
    }

    /// The Exceptions phase: one that covers every path of the site decides before robots.txt;
    /// else robots.txt refuses a tunnel when it disallows every path.
    fn tunnel_exceptions(&mut self, opening: &mut Opening) -> Flow {
        let (live, facts) = (self.live, self.facts);
        let authority = &facts.authority;
        let now = self.shared.clock.now();
        let exception =
            live.policy.tunnel_exception(&opening.snapshot, facts.claim(), opening.blocked, now);
        if let Some(v) = exception.as_ref().filter(|v| v.effect == Effect::Allow) {
            opening.deadline = v.expires;
            opening.bounds.push(v.id.clone());
        }
        match exception {
            Some(v) if v.effect == Effect::Disallow => {
                let reason = format!(
                    "{}; the tunnel is refused (in tunnel mode an exception decides only when \
                     its paths cover every path of the site)",
                    v.reason()
                );
                let mut record = self.tunnel_record(&opening.root, Some(&reason));
                v.audit(&mut record, !opening.blocked);
                record.reason.clone_from(&reason);
                self.refuse_tunnel(record, &reason)?;
            }
            Some(v) => {
                // robots.txt disallows every path; the exception allows every path.
                let mut record = self.tunnel_record(&opening.root, Some(""));
                v.audit(&mut record, false);
                record.status_code = Some(200);
                record.reason = format!(
                    "{}; the tunnel is opened (robots.txt at {} disallows every path)",
                    v.reason(),
                    authority.robots_url()
                );
                opening.excepted = Some(record);
            }
            None if opening.blocked => {
                let snapshot = &opening.snapshot;
                let reason = if snapshot.state == RobotsState::Unreachable {
                    format!(
                        "robots.txt at {} is unreachable ({}): all paths are disallowed until it \
                         can be fetched; the tunnel is refused",
                        authority.robots_url(),
                        robots_proxy_decide::outcome_text(&snapshot.last_outcome)
                    )
                } else {
                    format!(
                        "robots.txt at {} disallows every path for {}; the tunnel is refused \
                         (paths cannot be seen in tunnel mode)",
                        authority.robots_url(),
                        facts.token().map_or("the `*` group", |t| t.as_str())
                    )
                };
                let record = self.tunnel_record(&opening.root, Some(&reason));
                self.refuse_tunnel(record, &reason)?;
            }
            None => {}
        }
        ControlFlow::Continue(())
    }

    /// The Usage phase: AI usage preferences. The path and the responses cannot be seen in a
    /// tunnel, so only a preference stated for every path of the site can be honoured
    /// (robots.txt's, and a `tdmrep.json` that reserves every path), and an unknown one is
    /// settled now (`usage.unknown`), since no `Content-Usage` header will be seen.
    async fn tunnel_usage(&mut self, opening: &mut Opening) -> Flow {
        let (live, facts) = (self.live, self.facts);
        if !live.usage.is_active() {
            return ControlFlow::Continue(());
        }
        let (authority, now) = (&facts.authority, self.shared.clock.now());
        let mut purposes = live.usage.purposes_for(facts.token(), facts.user_name());
        if !purposes.is_empty() {
            let lifted = live.policy.usage_lifted_everywhere(&opening.snapshot, facts.claim(), now);
            if let Some((categories, v)) = lifted {
                let before = purposes.len();
                purposes.retain(|p| !categories.contains(&p.category));
                if purposes.len() != before {
                    // One use per tunnel: not again for the exception that opened it.
                    if !opening.bounds.contains(&v.id) {
                        live.policy.exceptions().count(&v.id);
                        opening.bounds.push(v.id.clone());
                    }
                    // The tunnel carries what the lift allows only until the lift expires.
                    opening.deadline = match (opening.deadline, v.expires) {
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
                    if opening.excepted.is_none() {
                        let mut r = self.tunnel_record(&opening.root, None);
                        v.audit(&mut r, !opening.blocked);
                        r.reason.clear();
                        opening.excepted = Some(r);
                    }
                    if let Some(record) = opening.excepted.as_mut() {
                        record.reason = if record.reason.is_empty() {
                            lift
                        } else {
                            format!("{}; {lift}", record.reason)
                        };
                    }
                }
            }
        }
        let mut prefs = live.policy.usage_everywhere(&opening.snapshot, facts.token());
        // `tdmrep.json` is fetched only when robots.txt does not disallow `train-ai` already.
        let tdm = if prefs.get(Category::TrainAi).preference == Preference::Disallow {
            None
        } else {
            Box::pin(tdm_everywhere(live, authority, &purposes)).await
        };
        if tdm.is_some() {
            prefs.add_signal(Category::TrainAi, Preference::Disallow, "tdmrep.json");
        }
        // One `would_block` per request (`Reported::any`), as for plain requests.
        let blocking = live.usage.blocking(&purposes, &prefs, Settled::Yes);
        if let Some(block) = blocking.filter(|_| !self.reported.any()) {
            let reason = format!(
                "{}; the tunnel is refused (in tunnel mode only preferences stated for every \
                 path can be seen: robots.txt at {}, and {}/.well-known/tdmrep.json)",
                block.reason,
                authority.robots_url(),
                authority
            );
            let mut record = self.tunnel_record(&opening.root, Some(&reason));
            record.action = AuditAction::UsageDisallow;
            let mut usage = super::preferences::usage_audit(&purposes, &prefs, &block);
            if block.source == "tdmrep.json" {
                usage.tdm_policy = tdm.and_then(|t| t.policy);
            }
            record.usage = Some(usage);
            record.exception = opening.excepted.as_ref().and_then(|r| r.exception.clone());
            self.refuse_tunnel(record, &reason)?;
        }
        ControlFlow::Continue(())
    }

    /// The Forward phase: through the destination guard to the origin, the tunnel's record
    /// kept, and the bytes relayed (bounded by the exceptions it rests on).
    async fn open(
        &mut self,
        shared: &Arc<Shared>,
        req: Request<Incoming>,
        opening: Opening,
    ) -> Flow<Response<ProxyBody>> {
        let (live, facts) = (self.live, self.facts);
        let authority = &facts.authority;
        let addr = format!("{}:{}", bracket(authority.host()), authority.port());
        // safety: through the destination guard, to the addresses it checked.
        let connecting = shared.safety.guard.connect_tcp(
            authority.host(),
            authority.port(),
            shared.connect_timeout,
        );
        let upstream = match connecting.await {
            Ok(s) => s,
            Err(ConnectTcpError::Guard(GuardError::Prohibited(p))) => {
                return ControlFlow::Break(self.refuse_prohibited(&p.to_string()));
            }
            Err(ConnectTcpError::Timeout { .. }) => {
                return ControlFlow::Break(answer::text(
                    StatusCode::GATEWAY_TIMEOUT,
                    "connection_timeout",
                    format!("504 Gateway Timeout: connecting to {addr} timed out\n"),
                ))
            }
            Err(e) => {
                return ControlFlow::Break(answer::text(
                    StatusCode::BAD_GATEWAY,
                    "destination_unavailable",
                    format!("502 Bad Gateway: cannot connect to {addr}: {e}\n"),
                ))
            }
        };
        let _ = upstream.set_nodelay(true);
        // The tunnel's record, for the Log phase.
        self.count(Decision::Tunnel);
        let Opening { snapshot, root, deadline, bounds, excepted, .. } = opening;
        if let Some(record) = excepted {
            self.keep(record);
        } else if live.https.audit_tunnels || shared.audit.all_decisions() {
            let record = self.tunnel_record(&root, None);
            self.keep(record);
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
            let lasts =
                deadline.map(|at| at.duration_since(shared.clock.now()).unwrap_or_default());
            let grants = Grants {
                shared: shared.clone(),
                snapshot,
                token: facts.token.clone(),
                origin: facts.token_origin,
                user: facts.user.clone(),
                bounds,
            };
            tokio::spawn(grants.bound(relaying, lasts));
        }
        let mut opened = Response::new(answer::full(Bytes::new()));
        self.reported.stamp(&mut opened);
        ControlFlow::Continue(opened)
    }
}

/// What a tunnel opened (or freed of a usage preference) by allow exceptions rests on: it
/// lasts while every one of them still grants the crawler the whole site.
struct Grants {
    shared: Arc<Shared>,
    snapshot: Arc<robots_proxy_decide::RobotsSnapshot>,
    token: Option<ProductToken>,
    origin: robots_proxy_decide::TokenOrigin,
    user: Option<Arc<robots_proxy_access::AuthenticatedUser>>,
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
/// [`robots_proxy_decide::optout::TdmFile::reserved_everywhere`]), when TDMRep is on and one of the
/// crawler's purposes is `train-ai`: all of TDMRep a tunnel can apply.
async fn tdm_everywhere(
    live: &super::Live,
    authority: &Authority,
    purposes: &[robots_proxy_decide::usage::Purpose],
) -> Option<robots_proxy_decide::optout::TdmStatement> {
    if !live.usage.tdmrep() || !purposes.iter().any(|p| p.category == Category::TrainAi) {
        return None;
    }
    let site = live.policy.tdmrep(authority).await;
    site.file.as_ref()?.reserved_everywhere().cloned()
}
