//! Recorded exceptions (`[[exceptions]]`, `robots_proxy_decide::exceptions`) in the pipeline: asked
//! only when some are configured ([`robots_proxy_decide::Policy::has_exceptions`]), before
//! robots.txt's own verdict. An exception that decides is always audited, the allowed requests
//! too, whatever `audit.all_decisions` says.

use std::ops::ControlFlow;

use http::StatusCode;

use super::exchange::{Exchange, Flow};
use super::refusal::Refusal;
use robots_proxy_decide::exceptions::Effect;
use robots_proxy_decide::usage::Purpose;
use robots_proxy_decide::{Decision, ExceptionVerdict};

impl Exchange<'_> {
    /// The Exceptions phase, when an exception decides (the decision names it): the 403 of a
    /// disallow (its record kept), or the record of an allow, kept once the request goes on
    /// (the Sign phase). The exception counts one use.
    pub(super) fn exceptions(&mut self, decision: &Decision<'_>) -> Flow {
        let Some(verdict) = decision.exception() else {
            return ControlFlow::Continue(());
        };
        decision.count_exception();
        let facts = self.facts;
        let now = self.shared.clock.now();
        // The robots.txt verdict it overrides, written next to it.
        let robots_allowed = decision.robots_allowed();
        match verdict.effect {
            Effect::Allow => {
                let mut record = facts.record(decision, now, None);
                verdict.audit(&mut record, robots_allowed);
                facts.decided_by(&record);
                self.allowed = Some(Box::new(record));
                ControlFlow::Continue(())
            }
            Effect::Disallow => {
                let mut record = facts.record(decision, now, Some(403));
                verdict.audit(&mut record, robots_allowed);
                facts.decided_by(&record);
                record.reading = Some(verdict.reading.name().to_owned());
                record.read_path =
                    (verdict.read_path != facts.path()).then(|| verdict.read_path.clone());
                let token = facts.token().map(|t| t.as_str());
                let refusal = refused(verdict, &record.url, token);
                // Report-only mode reports a disallow exception like any other refusal.
                self.refuse_or_report(record, refusal)
            }
        }
    }
}

/// The 403 of a disallow exception: it names the exception and its reference, not robots.txt.
fn refused(verdict: &ExceptionVerdict, url: &str, token: Option<&str>) -> Refusal {
    let reason = verdict.reason();
    let json = serde_json::json!({
        "error": "exception_disallowed",
        "url": url,
        "product_token": token,
        "exception": &*verdict.id,
        "reference": &*verdict.reference,
        "reason": reason,
        "reading": verdict.reading.name(),
        "read_path": verdict.read_path,
    });
    let text = format!(
        "403 Forbidden: {reason}.\n\
         \n\
         URL:           {url}\n\
         Product token: {token}\n\
         Exception:     {id}\n\
         Reference:     {reference}\n\
         Reading:       {reading}: {read_path}\n",
        token = token.unwrap_or("(none)"),
        id = verdict.id,
        reference = verdict.reference,
        reading = verdict.reading,
        read_path = verdict.read_path,
    );
    let action = robots_proxy_audit::AuditAction::ExceptionDisallow;
    Refusal::new(StatusCode::FORBIDDEN, "http_request_denied", action, text)
        .details(reason)
        .json(json)
}

impl Exchange<'_> {
    /// An allow exception with `usage` (`usage = ["train-ai"]`) lifts those usage preferences
    /// for its scope: the crawler's purposes in those categories are dropped for this request
    /// (neither robots.txt's nor the response's preference refuses it), and the request is
    /// audited as `exception_allow`. [`Exchange::allowed`] is the request's record still to be
    /// kept once it goes on (robots.txt's allow under `audit.all_decisions`, or an allow
    /// exception's): the lift is written into it, or becomes it, so that the request has one
    /// record.
    pub(super) fn lift_usage(&mut self, decision: &Decision<'_>, purposes: &mut Vec<Purpose>) {
        let (facts, live) = (self.facts, self.live);
        let policy = &live.policy;
        let Some((lifted, verdict)) = decision.usage_lifted() else {
            return;
        };
        let before = purposes.len();
        purposes.retain(|p| !lifted.contains(&p.category));
        if purposes.len() == before {
            // Nothing of the crawler's was lifted: no use, no record.
            return;
        }
        // One use per request: not again when the same exception decided robots.txt already.
        if facts.exception.get().is_none_or(|decided| decided.id != *verdict.id) {
            policy.exceptions().count(&verdict.id);
        }
        let labels: Vec<&str> = lifted.iter().map(|c| c.label()).collect();
        let lift = format!(
            "usage preferences {} lifted by exception {} ({})",
            labels.join(", "),
            verdict.id,
            verdict.reference
        );
        match &mut self.allowed {
            // An allow exception decided robots.txt already: its record says both.
            Some(record) if record.exception.is_some() => {
                record.reason = format!("{}; {lift}", record.reason);
            }
            // robots.txt allowed it (`audit.all_decisions`): that record becomes the
            // exception's.
            Some(record) => {
                verdict.audit(record, true);
                record.reason = lift;
            }
            None => {
                let mut record = facts.record(decision, self.shared.clock.now(), None);
                verdict.audit(&mut record, decision.robots_allowed());
                record.reason = lift;
                self.allowed = Some(Box::new(record));
            }
        }
        if let Some(record) = &self.allowed {
            facts.decided_by(record);
        }
    }
}
