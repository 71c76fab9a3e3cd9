//! One refusal: every 403, 429 and 503 the proxy answers on its own behalf is a [`Refusal`],
//! and is rendered here, once: the body as JSON (when the client asked, [`super::answer::wants_json`])
//! or as text for a person, `Content-Type`, `Cache-Control: no-store` and `nosniff`
//! ([`super::answer::own`]), `Proxy-Status` (RFC 9209), `Retry-After` when there is one, and the
//! refusal's fields of the audit record (action, outcome, status code).
//!
//! A text body is escaped line by line for a terminal ([`robots_proxy_output::terminal_text`]): it
//! quotes the crawler's URL and the origin's words. A JSON body has the C1 controls and Unicode
//! line separators written `\uXXXX`, as the audit log does ([`robots_proxy_output::json_line`]).

use http::{header, HeaderValue, Response, StatusCode};

use super::answer;
use super::ProxyBody;
use robots_proxy_audit::{AuditAction, AuditOutcome, AuditRecord};
use robots_proxy_output as output;

/// What `Proxy-Status`'s `details` says of a refusal.
#[derive(Debug, Clone)]
enum Details {
    /// This text.
    Reason(String),
    /// The first line of the text body, as escaped.
    FirstLine,
}

/// One refusal the proxy answers itself, before it is rendered.
#[derive(Debug, Clone)]
#[must_use]
pub(super) struct Refusal {
    /// 403, 429 or 503.
    status: StatusCode,
    /// The RFC 9209 error type of `Proxy-Status` (`http_request_denied`,
    /// `destination_ip_prohibited`, `proxy_internal_error`).
    error: &'static str,
    /// What `Proxy-Status`'s `details` says.
    details: Details,
    /// The body for a person.
    text: String,
    /// The body for a program, when this refusal has one (else the text is sent to both).
    json: Option<serde_json::Value>,
    /// `Retry-After`, in seconds.
    retry_after: Option<u64>,
    /// The audit action the refusal is written as.
    action: AuditAction,
}

impl Refusal {
    /// A refusal with a text body; `Proxy-Status` details its first line.
    pub(super) fn new(
        status: StatusCode,
        error: &'static str,
        action: AuditAction,
        text: String,
    ) -> Self {
        Refusal {
            status,
            error,
            details: Details::FirstLine,
            text,
            json: None,
            retry_after: None,
            action,
        }
    }

    /// `Proxy-Status` details `reason` rather than the body's first line.
    pub(super) fn details(mut self, reason: impl Into<String>) -> Self {
        self.details = Details::Reason(reason.into());
        self
    }

    /// The body for a client that asked for JSON.
    pub(super) fn json(mut self, body: serde_json::Value) -> Self {
        self.json = Some(body);
        self
    }

    /// A `Retry-After` of `seconds`.
    pub(super) fn retry_after(mut self, seconds: u64) -> Self {
        self.retry_after = Some(seconds);
        self
    }

    /// Writes the refusal into the request's audit record: its action, a failure, and the
    /// status code answered (the record's reason is the caller's: it says more than a client is
    /// told).
    pub(super) fn stamp(&self, record: &mut AuditRecord) {
        record.action = self.action;
        record.outcome = AuditOutcome::Failure;
        record.status_code = Some(self.status.as_u16());
    }

    /// The answer: JSON when `want_json` and this refusal has a JSON body, else text.
    pub(super) fn into_response(self, want_json: bool) -> Response<ProxyBody> {
        let text = output::terminal_text(&self.text);
        let details = match self.details {
            Details::Reason(reason) => reason,
            Details::FirstLine => text.lines().next().unwrap_or_default().to_owned(),
        };
        let mut resp = match self.json.filter(|_| want_json) {
            Some(body) => {
                let mut bytes = body.to_string().into_bytes();
                output::json_line(&mut bytes);
                answer::own(self.status, answer::JSON, bytes)
            }
            None => answer::own(self.status, answer::TEXT, text),
        };
        let h = resp.headers_mut();
        h.insert("proxy-status", answer::proxy_status(self.error, &details));
        if let Some(seconds) = self.retry_after {
            h.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        resp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_refusal_renders_text_or_json_with_the_same_headers() {
        let refusal = Refusal::new(
            StatusCode::TOO_MANY_REQUESTS,
            "http_request_denied",
            AuditAction::Throttled,
            "429 Too Many Requests: slow down\n\nmore\n".to_owned(),
        )
        .json(serde_json::json!({ "error": "paced", "reason": "slow\u{85}down" }))
        .retry_after(7);
        let text = refusal.clone().into_response(false);
        assert_eq!(text.headers()["content-type"], answer::TEXT);
        assert_eq!(text.headers()["retry-after"], "7");
        assert_eq!(text.headers()["cache-control"], "no-store");
        assert_eq!(
            text.headers()["proxy-status"],
            "robots-proxy;error=http_request_denied;details=\"429 Too Many Requests: slow down\""
        );
        let json = refusal.clone().details("slow down").into_response(true);
        assert_eq!(json.headers()["content-type"], answer::JSON);
        assert_eq!(json.headers()["retry-after"], "7");
        assert_eq!(
            json.headers()["proxy-status"],
            "robots-proxy;error=http_request_denied;details=\"slow down\""
        );
        let mut record = robots_proxy_audit::AuditRecord::new(
            AuditAction::RobotsAllow,
            std::time::SystemTime::UNIX_EPOCH,
            robots_proxy_audit::AuditSubject {
                client: "127.0.0.1:1".parse().unwrap(),
                method: "GET",
                url: "http://a.test/",
                domain: "http://a.test",
                path: "/",
                user_agent: None,
                token: None,
                robots_url: "http://a.test/robots.txt",
            },
            None,
            "allowed".to_owned(),
        );
        refusal.stamp(&mut record);
        assert_eq!(record.action, AuditAction::Throttled);
        assert_eq!(record.status_code, Some(429));
        assert_eq!(record.outcome, AuditOutcome::Failure);
    }
}
