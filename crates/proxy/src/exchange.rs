//! One exchange per request: the per-request state ([`Exchange`], pingora's `CTX`) driven
//! through a fixed list of named phases ([`Phase`]), the last of which, [`Phase::Log`], writes
//! the exchange's audit records and counts it, once, by construction.
//!
//! Admit, Authenticate and Target run before the exchange exists (the listener's framing and
//! request-line checks, proxy authentication, and the target: a plain request's authority, an
//! intercepted request's tunnel authority, or a CONNECT, see `connect.rs`); their answers
//! (400, 407, 414) carry no audit record. [`process`] then reads the reloadable state once and
//! runs Robots, Exceptions, Usage, Pace, Sign, Forward and Response in that order
//! (`pipeline.rs`). A phase either goes on ([`Flow::Continue`]) or gives the answer that ends the
//! exchange ([`Flow::Break`]); either way [`Phase::Log`] runs next.
//!
//! No phase writes a record or counts a request: a phase *keeps* its record
//! ([`Exchange::keep`], or [`Exchange::refuse`] / [`Exchange::refuse_or_report`] for a refusal)
//! and *notes* how the request is counted ([`Exchange::count`]), on the exchange's [`Ledger`];
//! the Log phase ([`Ledger::log`]) writes the records in the order they were kept and counts the
//! request once. The Forward phase has the Log phase's writer ([`Ledger::write`]) write what was
//! kept so far before the request leaves, so that with `audit.fsync = "always"` no request is
//! forwarded before its record is synced (`docs/audit.md`, "Durability"). A CONNECT refused at its door (`connect.rs`: its port, the guard, reject
//! mode) keeps its record on a [`Ledger`] of its own, written by its own Log phase; a
//! tunnel-mode CONNECT is an exchange like a request's, with no path (`tunnel.rs`). A ledger
//! dropped before its Log phase ran (the client hung up mid-way) logs what it kept from its
//! `Drop`: nothing kept is lost, and nothing is written twice.

use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Instant;

use http::{Request, Response};
use hyper::body::Incoming;

use super::facts::Facts;
use super::refusal::Refusal;
use super::report::{Report, Reported};
use super::{ConnectionMemory, Live, ProxyBody, Shared};
use robots_proxy_audit::{AuditLog, AuditRecord};
use robots_proxy_authority::{Authority, Scheme};
use robots_proxy_metrics::Decision as Counted;

/// The phases of an exchange, in the order they run. Every request goes through them in this
/// order; a phase that answers skips to [`Phase::Log`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// The connection's client may connect, and the request is framed honestly.
    Admit,
    /// Proxy authentication (`access.users_file`).
    Authenticate,
    /// What the request is for: a plain request's authority, an intercepted one's, a tunnel.
    Target,
    /// The robots.txt snapshot (the destination guard first) and the one decision.
    Robots,
    /// An exception (`[[exceptions]]`) that decides instead of robots.txt.
    Exceptions,
    /// AI usage preferences and the other opt-outs known before the request leaves.
    Usage,
    /// The site's pace (wait, or 429).
    Pace,
    /// The request to the origin built and signed (Web Bot Auth).
    Sign,
    /// To the origin.
    Forward,
    /// The origin's response: its usage preferences and opt-outs.
    Response,
    /// The exchange's records written and the request counted.
    Log,
}

impl Phase {
    /// The phase's name, for logs.
    pub(super) fn name(self) -> &'static str {
        match self {
            Phase::Admit => "admit",
            Phase::Authenticate => "authenticate",
            Phase::Target => "target",
            Phase::Robots => "robots",
            Phase::Exceptions => "exceptions",
            Phase::Usage => "usage",
            Phase::Pace => "pace",
            Phase::Sign => "sign",
            Phase::Forward => "forward",
            Phase::Response => "response",
            Phase::Log => "log",
        }
    }
}

/// What a phase gives the driver: `Continue` with what the next phase needs, or `Break` with
/// the answer that ends the exchange (the driver goes to [`Phase::Log`]).
pub(super) type Flow<T = ()> = ControlFlow<Response<ProxyBody>, T>;

/// How the request left signed: the key id that signed it, if any, and with
/// `signing.client_signatures = "cosign"` what became of the client's signature. Every record
/// kept after the Sign phase carries it.
#[derive(Default)]
pub(super) struct Signed<'s> {
    pub(super) keyid: Option<&'s str>,
    pub(super) cosign: Option<robots_proxy_identity::Cosign>,
}

/// One request's state, from the moment its target is known to its Log phase: what
/// [`process`] read once (the reloadable state, the facts), what the phases found, and what
/// the Log phase writes.
pub(super) struct Exchange<'x> {
    pub(super) shared: &'x Shared,
    /// The reloadable state, read once for the exchange.
    pub(super) live: &'x Live,
    pub(super) memory: &'x ConnectionMemory,
    /// The request's facts, read once.
    pub(super) facts: &'x Facts,
    pub(super) started: Instant,
    /// The phase running, or the one the exchange ended in once the Log phase ran.
    pub(super) phase: Phase,
    /// The refusals only reported (report-only mode), for the response's `Proxy-Status`.
    pub(super) reported: Reported,
    /// The allowed request's record (`audit.all_decisions`, or an exception's), made by the
    /// Robots or Exceptions phase and changed by the Usage phase; kept by the Sign phase once
    /// the request is known to go. A usage or pacing refusal keeps its own instead.
    pub(super) allowed: Option<Box<AuditRecord>>,
    /// How the request left signed (set by the Sign phase).
    pub(super) signed: Signed<'x>,
    /// What the Log phase writes, in the order kept, and counts.
    ledger: Ledger<'x>,
}

/// What a Log phase writes and counts: the records kept, in order, and how the request (or
/// CONNECT) is counted. Every audit record of a request or a CONNECT is written by
/// [`Ledger::log`] and nowhere else; the request is counted there, once. A ledger dropped
/// before its Log phase ran (the client hung up mid-way) writes and counts what it holds from
/// its `Drop`.
pub(super) struct Ledger<'x> {
    pub(super) shared: &'x Shared,
    /// The scheme the request is counted under.
    scheme: Scheme,
    /// The records kept and not yet written, in order. Not held in place: an exchange that
    /// keeps none (most allowed requests) carries an empty queue, not a record's room, across
    /// every await of its future.
    kept: std::collections::VecDeque<AuditRecord>,
    counted: Option<Counted>,
    /// Whether the Log phase ran (then `Drop` has nothing to do).
    logged: bool,
}

impl<'x> Ledger<'x> {
    /// An empty ledger for a request counted under `scheme`.
    pub(super) fn new(shared: &'x Shared, scheme: Scheme) -> Self {
        Ledger { shared, scheme, kept: Default::default(), counted: None, logged: false }
    }

    /// Keeps `record` for the Log phase to write, after those kept before it.
    pub(super) fn keep(&mut self, record: AuditRecord) {
        self.kept.push_back(record);
    }

    /// Notes how the request is counted (`robots_proxy_requests_total`): the Log phase counts
    /// it once, as the last note says.
    pub(super) fn count(&mut self, counted: Counted) {
        self.counted = Some(counted);
    }

    /// The one way a request or a CONNECT is refused: the refusal written into its record
    /// (listed among the blocks on the admin page, and logged: [`Shared::note_refusal`]), the
    /// record kept, the count noted from what the record says was done, and the answer (JSON
    /// when `want_json` and the refusal has a JSON body).
    pub(super) fn refuse(
        &mut self,
        mut record: AuditRecord,
        refusal: Refusal,
        want_json: bool,
    ) -> Response<ProxyBody> {
        self.shared.note_refusal(&mut record, &refusal);
        self.count(Counted::of(record.action));
        self.keep(record);
        refusal.into_response(want_json)
    }

    /// The one way a request or a CONNECT is refused on policy grounds: [`Ledger::refuse`]
    /// (`Break` with the answer), or, for an identity in report-only mode
    /// ([`robots_proxy_decide::Policy::reports`]), the record kept as `would_block` and the request
    /// let go on (`Continue` with what the response's `Proxy-Status` says enforcement would
    /// have done; [`Shared::note_report`]).
    pub(super) fn refuse_or_report(
        &mut self,
        policy: &robots_proxy_decide::Policy,
        who: robots_proxy_decide::Claim<'_>,
        mut record: AuditRecord,
        refusal: Refusal,
        want_json: bool,
    ) -> ControlFlow<Response<ProxyBody>, Report> {
        if !policy.reports(who) {
            return ControlFlow::Break(self.refuse(record, refusal, want_json));
        }
        let report = self.shared.note_report(who, &mut record, &refusal);
        self.keep(record);
        ControlFlow::Continue(report)
    }

    /// The Log phase: counts the request (once) and writes every record kept, in order. With
    /// `audit.fsync = "always"` it waits for them ([`write_audit`]): the answer never
    /// goes before its records.
    pub(super) async fn log(&mut self) {
        if let Some(counted) = self.counted.take() {
            self.shared.metrics.count(counted, self.scheme);
        }
        self.write().await;
        self.logged = true;
    }

    /// The Log phase's writer: writes the records kept so far, in order. Besides the Log phase,
    /// only the Forward phase calls it, before the request leaves: with `audit.fsync =
    /// "always"` a request is not forwarded until its records are synced (`docs/audit.md`,
    /// "Durability").
    pub(super) async fn write(&mut self) {
        // Boxed, and only when there is something to write: writing (a record moved into the
        // audit queue, waited for with `fsync = "always"`) would otherwise add some 3 KB to the
        // future of every request, records kept or not (hyper's connection moves it, and it is
        // copied into its box, once per request).
        if !self.kept.is_empty() {
            Box::pin(self.write_each()).await;
        }
    }

    async fn write_each(&mut self) {
        while let Some(record) = self.kept.pop_front() {
            write_audit(&self.shared.audit, record).await;
        }
    }
}

impl Drop for Ledger<'_> {
    /// The Log phase of a request dropped before it ran (the client hung up while the request
    /// was at the origin, or while its records were written): what was kept is counted and
    /// written now, on a task of its own, since nothing here can wait.
    fn drop(&mut self) {
        if self.logged {
            return;
        }
        self.logged = true;
        if let Some(counted) = self.counted.take() {
            self.shared.metrics.count(counted, self.scheme);
        }
        let kept = std::mem::take(&mut self.kept);
        if kept.is_empty() {
            return;
        }
        tracing::debug!(
            records = kept.len(),
            "the client left mid-exchange: its records are written all the same"
        );
        let audit = self.shared.audit.clone();
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn(async move {
                for record in kept {
                    write_audit(&audit, record).await;
                }
            })),
            Err(_) => tracing::error!(
                records = kept.len(),
                "audit records of an abandoned request could not be queued: no runtime"
            ),
        }
    }
}

impl<'x> Exchange<'x> {
    pub(super) fn new(
        shared: &'x Shared,
        live: &'x Live,
        memory: &'x ConnectionMemory,
        facts: &'x Facts,
        started: Instant,
    ) -> Self {
        Exchange {
            shared,
            live,
            memory,
            facts,
            started,
            phase: Phase::Target,
            reported: Reported::default(),
            allowed: None,
            signed: Signed::default(),
            ledger: Ledger::new(shared, facts.authority.scheme()),
        }
    }

    /// Keeps `record` for the Log phase to write, after those kept before it.
    pub(super) fn keep(&mut self, record: AuditRecord) {
        self.ledger.keep(record);
    }

    /// Notes how the request is counted ([`Ledger::count`]).
    pub(super) fn count(&mut self, counted: Counted) {
        self.ledger.count(counted);
    }

    /// The one way the exchange refuses ([`Ledger::refuse`]): JSON when the client asked.
    pub(super) fn refuse(&mut self, record: AuditRecord, refusal: Refusal) -> Response<ProxyBody> {
        self.ledger.refuse(record, refusal, self.facts.want_json)
    }

    /// The one way the exchange refuses on policy grounds ([`Ledger::refuse_or_report`]): in
    /// report-only mode the request goes on (`Continue`) and its response's `Proxy-Status`
    /// will say what enforcement would have done.
    pub(super) fn refuse_or_report(&mut self, record: AuditRecord, refusal: Refusal) -> Flow {
        let (policy, want_json) = (&self.live.policy, self.facts.want_json);
        let claim = self.facts.claim();
        match self.ledger.refuse_or_report(policy, claim, record, refusal, want_json) {
            ControlFlow::Break(refused) => ControlFlow::Break(refused),
            ControlFlow::Continue(report) => {
                self.reported.add(report);
                ControlFlow::Continue(())
            }
        }
    }

    /// Writes the records kept so far ([`Ledger::write`]): the Forward phase's first step.
    pub(super) async fn write_kept(&mut self) {
        self.ledger.write().await;
    }

    /// The Log phase ([`Ledger::log`]), noting the phase the exchange ended in.
    pub(super) async fn log(&mut self) {
        let ended = self.phase;
        self.phase = Phase::Log;
        tracing::trace!(phase = ended.name(), authority = %self.facts.authority, "exchange logged");
        self.ledger.log().await;
    }
}

/// Queues an audit record; with `audit.fsync = "always"`, waits until it is written and synced
/// (up to [`robots_proxy_audit::SYNC_WAIT`]), so the answer never goes before its record. A failing
/// audit log does not change the answer (`docs/audit.md`, "Write errors"): the writer has logged
/// and counted the loss, and readiness fails until records are written.
async fn write_audit(audit: &AuditLog, record: AuditRecord) {
    match audit.record(record).await {
        Ok(()) => {}
        Err(e @ robots_proxy_audit::AuditError::Write { .. }) => {
            tracing::debug!(error = %e, "audit record lost");
        }
        Err(e @ robots_proxy_audit::AuditError::Unconfirmed { .. }) => {
            tracing::warn!(error = %e, "answering before the audit record is synced");
        }
        Err(e) => tracing::error!(error = %e, "audit record could not be queued"),
    }
}

/// An answer given before the exchange exists (Admit, Authenticate or Target: a framing or
/// request-line refusal, a 407, a 400), which has no audit record and is not counted, as
/// every answer of those phases: noted at `trace` with its phase.
pub(super) fn answered_before(phase: Phase, answer: Response<ProxyBody>) -> Response<ProxyBody> {
    tracing::trace!(phase = phase.name(), status = %answer.status(), "answered before the exchange");
    answer
}

/// Decides one request for `authority` and answers 403 (or 429) or forwards it: the driver of
/// the phases after Target. Shared by plain proxy requests and requests read inside an
/// intercepted CONNECT tunnel.
///
/// Only the common path (decide, allow, forward) is awaited in place; every other await is
/// boxed inside its phase, which keeps this future small (hyper moves it at least once per
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
    let facts = super::pipeline::read_facts(&live, memory, client, authority, &req);
    let mut exchange = Exchange::new(shared, &live, memory, &facts, started);
    let mut answer = match exchange.run(req).await {
        ControlFlow::Break(answer) | ControlFlow::Continue(answer) => answer,
    };
    exchange.log().await;
    exchange.reported.stamp(&mut answer);
    answer
}
