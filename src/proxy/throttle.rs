//! The answer to a request that would break its site's pace ([`crate::pacing`]): 429 with
//! `Retry-After`, a body saying why, and an audit record with `event.action = "throttled"`.

use http::{header, HeaderValue, Response, StatusCode};

use super::facts::Facts;
use super::preferences::Subject;
use super::{answer, ProxyBody, Shared};
use crate::audit::{AuditAction, AuditOutcome};
use crate::pacing::{Pace, ThrottleCause, Throttled};
use crate::policy::{Policy, ProductToken, RobotsSnapshot};

/// Records the refusal and answers it. `policy` is the request's own (review-house D4: a
/// request reads the reloadable state once).
pub(super) async fn refused(
    shared: &Shared,
    policy: &Policy,
    facts: &Facts,
    snapshot: &RobotsSnapshot,
    throttled: &Throttled,
) -> Response<ProxyBody> {
    let url = facts.url();
    // The decision gives the robots.txt fields of the record (state, age, group); it allowed
    // the request, so its rule is replaced by the Crawl-delay that held the request back.
    let subject = Subject { facts, snapshot, signed: None, cosign: None };
    let status = Some(status_of(throttled).as_u16());
    let mut record = subject.decision_record(shared, policy, status);
    record.action = match throttled.cause {
        ThrottleCause::FleetUnavailable => AuditAction::FleetUnavailable,
        _ => AuditAction::Throttled,
    };
    record.outcome = AuditOutcome::Failure;
    record.reason = throttled.to_string();
    (record.rule, record.line) = match throttled.pace {
        Pace::CrawlDelay { delay, line } => {
            (Some(format!("crawl-delay: {}", delay.as_secs_f64())), Some(line))
        }
        _ => (None, None),
    };
    let token = facts.token().map(ProductToken::as_str);
    let answer = response(throttled, &url, token, facts.want_json);
    shared.refuse(record, facts.authority.scheme(), answer).await
}

/// The `Proxy-Status` error of the answer.
fn error_of(throttled: &Throttled) -> &'static str {
    match throttled.cause {
        ThrottleCause::FleetUnavailable => "proxy_internal_error",
        _ => "http_request_denied",
    }
}

/// 429, or 503 when the fleet's shared pace is required and out of reach.
fn status_of(throttled: &Throttled) -> StatusCode {
    match throttled.cause {
        ThrottleCause::FleetUnavailable => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::TOO_MANY_REQUESTS,
    }
}

/// The 429 itself. JSON when the client asked for it, like the 403.
fn response(
    throttled: &Throttled,
    url: &str,
    token: Option<&str>,
    want_json: bool,
) -> Response<ProxyBody> {
    let retry_after = throttled.retry_after.as_secs();
    let mut resp = if want_json {
        let body = serde_json::json!({
            "error": "paced",
            "url": url,
            "product_token": token,
            "authority": throttled.authority.to_string(),
            "pace": throttled.pace.to_string(),
            "reason": throttled.to_string(),
            "retry_after": retry_after,
        });
        let mut resp = answer::own(status_of(throttled), answer::JSON, body.to_string());
        let h = resp.headers_mut();
        h.insert("proxy-status", answer::proxy_status(error_of(throttled), &throttled.to_string()));
        resp
    } else {
        let token_line =
            token.map_or_else(|| "(none found: the `*` group applies)".to_owned(), str::to_owned);
        let status = status_of(throttled);
        let body = format!(
            "{status}: {throttled}\n\
             \n\
             URL:           {url}\n\
             Product token: {token_line}\n\
             Pace:          {pace}\n\
             Why:           {cause}\n\
             Retry after:   {retry_after}s\n\
             \n\
             This proxy paces the requests of all its clients to each site together \
             (robots.txt Crawl-delay and the [pacing] settings).\n",
            pace = throttled.pace,
            cause = throttled.cause,
        );
        answer::text(status, error_of(throttled), body)
    };
    if let Ok(value) = HeaderValue::from_str(&retry_after.to_string()) {
        resp.headers_mut().insert(header::RETRY_AFTER, value);
    }
    resp
}
