//! The answer to a request that would break its site's pace ([`robots_proxy_pace`]): 429 with
//! `Retry-After`, a body saying why, and an audit record with `event.action = "throttled"`.

use http::{Response, StatusCode};

use super::exchange::Exchange;
use super::refusal::Refusal;
use super::ProxyBody;
use robots_proxy_audit::AuditAction;
use robots_proxy_decide::{Decision, ProductToken};
use robots_proxy_pace::{Pace, ThrottleCause, Throttled};

impl Exchange<'_> {
    /// The Pace phase's refusal: the 429 (or 503), its record kept for the Log phase, made from
    /// the request's own decision (review-house D4: a request reads the reloadable state once,
    /// and is decided once).
    pub(super) fn throttled(
        &mut self,
        decision: &Decision<'_>,
        throttled: &Throttled,
    ) -> Response<ProxyBody> {
        let facts = self.facts;
        let url = facts.url();
        // The request's decision gives the robots.txt fields of the record (state, age,
        // group); it allowed the request, so its rule is replaced by the Crawl-delay that held
        // the request back.
        let mut record = facts.record(decision, self.shared.clock.now(), None);
        record.reason = throttled.to_string();
        (record.rule, record.line) = match throttled.pace {
            Pace::CrawlDelay { delay, line } => {
                (Some(format!("crawl-delay: {}", delay.as_secs_f64())), Some(line))
            }
            _ => (None, None),
        };
        let token = facts.token().map(ProductToken::as_str);
        let refusal = refusal(throttled, &url, token);
        self.refuse(record, refusal)
    }
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

/// The 429 itself (or the 503). JSON when the client asked for it, like the 403.
fn refusal(throttled: &Throttled, url: &str, token: Option<&str>) -> Refusal {
    let retry_after = throttled.retry_after.as_secs();
    let json = serde_json::json!({
        "error": "paced",
        "url": url,
        "product_token": token,
        "authority": throttled.authority.to_string(),
        "pace": throttled.pace.to_string(),
        "reason": throttled.to_string(),
        "retry_after": retry_after,
    });
    let token_line =
        token.map_or_else(|| "(none found: the `*` group applies)".to_owned(), str::to_owned);
    let status = status_of(throttled);
    let text = format!(
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
    let action = match throttled.cause {
        ThrottleCause::FleetUnavailable => AuditAction::FleetUnavailable,
        _ => AuditAction::Throttled,
    };
    Refusal::new(status, error_of(throttled), action, text)
        .details(throttled.to_string())
        .json(json)
        .retry_after(retry_after)
}
