//! Report-only mode in the data path (`policy.mode`, `policy.report_tokens`,
//! `policy.report_users`; see [`robots_proxy_decide::ReportScope`]).
//!
//! Every refusal on policy grounds (robots.txt, usage preferences, a tunnel-mode CONNECT, and
//! any decision of the policy that refuses) goes through
//! [`super::exchange::Ledger::refuse_or_report`] and [`Shared::note_report`]. For an
//! identity in report mode, the refusal's audit record becomes a `would_block` record (the
//! refusal's action in `robots.would_action`, every explanation field kept), it is counted in
//! `robots_proxy_would_block_total`, and the request goes on; the response then carries the
//! proxy's own `Proxy-Status` member saying what enforcement would have done ([`Reported`]).
//! Pacing, access control, the destination guard, smuggling checks and limits never come here:
//! they are never report-only.
//!
//! With nobody in report mode (the default) this costs one check, on refusals only.

use http::{HeaderValue, Response};

use super::answer::PROXY_NAME;
use super::refusal::Refusal;
use super::{ProxyBody, Shared};
use robots_proxy_audit::{AuditAction, AuditOutcome, AuditRecord};

/// The refusals a request was let through with, in report-only mode: what its response's
/// `Proxy-Status` member says.
#[derive(Debug, Default)]
pub(super) struct Reported {
    would_be: Vec<Report>,
}

/// One refusal that was only reported: what the response's `Proxy-Status` says of it (the
/// action enforcement would have taken is in its `details` and its record).
#[derive(Debug)]
pub(super) struct Report {
    details: String,
}

impl Reported {
    /// Notes a refusal that was only reported (see [`Shared::note_report`]).
    pub(super) fn add(&mut self, report: Report) {
        self.would_be.push(report);
    }

    /// Whether a refusal was reported for this request already. Enforcement would have
    /// stopped at the first refusal, so a later one is not reported again: one `would_block`
    /// record, and one count, per request.
    pub(super) fn any(&self) -> bool {
        !self.would_be.is_empty()
    }

    /// Adds the proxy's `Proxy-Status` member to `resp` when a refusal was reported:
    /// `robots-proxy;details="report only: would be …"`. An origin's own `Proxy-Status`
    /// members are kept, in order, and the proxy's comes last (RFC 9209 §2: each
    /// intermediary appends its member; the list may be sent in one field line).
    pub(super) fn stamp(&self, resp: &mut Response<ProxyBody>) {
        if self.would_be.is_empty() {
            return;
        }
        let each: Vec<&str> = self.would_be.iter().map(|r| r.details.as_str()).collect();
        let details = format!("report only: would be {}", each.join("; and "));
        let member = super::answer::proxy_status_item(None, &details);
        let headers = resp.headers_mut();
        let existing: Option<Vec<&str>> =
            headers.get_all("proxy-status").iter().map(|v| v.to_str().ok()).collect();
        let combined = match existing {
            Some(values) if !values.is_empty() => {
                let list = values.join(", ");
                HeaderValue::from_str(&format!("{list}, {}", member.to_str().unwrap_or(PROXY_NAME)))
                    .ok()
            }
            _ => None,
        };
        match combined {
            Some(value) => {
                headers.insert("proxy-status", value);
            }
            // None before, or values that are not text: the member as a field line of its own
            // (field lines of a list field combine, RFC 9110 §5.3).
            None => {
                headers.append("proxy-status", member);
            }
        }
    }
}

/// Who a refusal is for: the product token, where it came from, and the authenticated user
/// (report-only mode for a token is granted only on a token from credentials).
pub(super) use robots_proxy_decide::Claim as Who;

impl Shared {
    /// What report-only mode makes of a refusal: its record becomes `would_block` (the
    /// refusal's action in `robots.would_action`, every explanation field kept), counted in
    /// `robots_proxy_would_block_total` and logged; gives what the response's `Proxy-Status`
    /// says enforcement would have done. Every refusal on policy grounds comes here, from
    /// [`super::exchange::Ledger::refuse_or_report`].
    pub(super) fn note_report(
        &self,
        who: Who<'_>,
        record: &mut AuditRecord,
        refusal: &Refusal,
    ) -> Report {
        // What enforcement would have answered, in the record; the request goes on.
        refusal.stamp(record);
        let would = record.action;
        let details = format!("refused ({would}): {}", record.reason);
        record.would_action = Some(would);
        record.action = AuditAction::WouldBlock;
        record.outcome = AuditOutcome::Success;
        record.status_code = None;
        self.metrics.would_block(record);
        tracing::info!(
            would_action = %would,
            url = %record.url,
            token = record.product_token.as_deref(),
            user = who.user.map(tracing::field::display),
            reason = %record.reason,
            "would be refused; forwarded (report-only mode)"
        );
        Report { details }
    }
}

/// The 403 of a CONNECT refused on policy grounds (tunnel mode: robots.txt disallows every
/// path, an exception refuses the site, or a usage preference holds for the whole site), for
/// the exchange to give or only report ([`super::exchange::Exchange::refuse_or_report`]).
pub(super) fn connect_refusal(record: &AuditRecord, reason: &str) -> Refusal {
    Refusal::new(
        http::StatusCode::FORBIDDEN,
        "http_request_denied",
        record.action,
        format!("403 Forbidden: {reason}\n"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(proxy_status: &[&str]) -> Response<ProxyBody> {
        let mut resp = Response::new(super::super::answer::full(""));
        for v in proxy_status {
            resp.headers_mut().append("proxy-status", HeaderValue::from_str(v).unwrap());
        }
        resp
    }

    #[test]
    fn nothing_reported_leaves_the_response_alone() {
        let mut resp = response(&["origin-cache;hit"]);
        Reported::default().stamp(&mut resp);
        assert_eq!(resp.headers()["proxy-status"], "origin-cache;hit");
    }

    #[test]
    fn the_proxy_member_comes_last_after_the_origins() {
        let mut reported = Reported::default();
        reported
            .add(Report { details: "refused (robots_disallow): disallowed by \"line 2\"".into() });
        let mut resp = response(&["cdn;error=http_request_error", "origin-lb"]);
        reported.stamp(&mut resp);
        let all: Vec<_> = resp.headers().get_all("proxy-status").iter().collect();
        assert_eq!(all.len(), 1);
        assert_eq!(
            all[0].to_str().unwrap(),
            "cdn;error=http_request_error, origin-lb, robots-proxy;details=\"report only: would \
             be refused (robots_disallow): disallowed by \\\"line 2\\\"\""
        );
        let mut alone = response(&[]);
        reported.stamp(&mut alone);
        assert!(alone.headers()["proxy-status"].to_str().unwrap().starts_with("robots-proxy;"));
    }
}
