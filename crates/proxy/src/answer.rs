//! Responses the proxy writes itself: usage errors, blocks and upstream failures.
//!
//! Every one of them says, for a person, what happened, and carries a `Proxy-Status` header
//! (RFC 9209) saying the same for a program.

use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};
use http_body_util::{BodyExt, Full};

use super::refusal::Refusal;
use super::ProxyBody;
use robots_proxy_audit::AuditAction;
use robots_proxy_decide::Explanation;
use robots_proxy_output as output;

/// The name this proxy gives itself in `Proxy-Status`.
pub(crate) const PROXY_NAME: &str = "robots-proxy";

/// A full body from a string.
pub(crate) fn full(body: impl Into<Bytes>) -> ProxyBody {
    Full::new(body.into()).map_err(|never| match never {}).boxed_unsync()
}

/// An RFC 9209 `Proxy-Status` value: `robots-proxy;error=<type>;details="<text>"`, written
/// as a structured-field item (RFC 9651) by `sfv`. `details` is a structured-field string,
/// printable ASCII only: any other character is written `?`.
pub(crate) fn proxy_status(error: &str, details: &str) -> HeaderValue {
    proxy_status_item(Some(error), details)
}

/// [`proxy_status`], with no `error` parameter when `error` is `None` (a request that goes on,
/// as report-only mode's member says).
pub(crate) fn proxy_status_item(error: Option<&str>, details: &str) -> HeaderValue {
    let printable: String =
        details.chars().map(|c| if (' '..='~').contains(&c) { c } else { '?' }).collect();
    let item = || -> Result<String, sfv::Error> {
        let mut item = sfv::ItemSerializer::new().bare_item(sfv::TokenRef::from_str(PROXY_NAME)?);
        if let Some(error) = error {
            item = item.parameter(sfv::KeyRef::from_str("error")?, sfv::TokenRef::from_str(error)?);
        }
        Ok(item
            .parameter(sfv::KeyRef::from_str("details")?, sfv::StringRef::from_str(&printable)?)
            .finish())
    };
    item()
        .ok()
        .and_then(|value| HeaderValue::from_str(&value).ok())
        .unwrap_or_else(|| HeaderValue::from_static(PROXY_NAME))
}

/// An answer with a body that the proxy writes itself (a refusal, an error): `status`,
/// `content_type`, `Cache-Control: no-store`, and `nosniff` ([`robots_proxy_net::server::stamp_own_answer`]).
/// Every own answer with a body is made here, so none goes without them.
pub(crate) fn own(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<ProxyBody> {
    let mut resp = Response::new(full(body));
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    robots_proxy_net::server::stamp_own_answer(h);
    resp
}

/// The media type of the proxy's text answers.
pub(crate) const TEXT: &str = "text/plain; charset=utf-8";

/// The media type of the proxy's JSON answers.
pub(crate) const JSON: &str = "application/json";

/// A plain-text answer from the proxy itself.
pub(crate) fn text(status: StatusCode, error: &str, body: String) -> Response<ProxyBody> {
    // A text answer often quotes the URL or the origin's words: shown escaped, line by line.
    let body = output::terminal_text(&body);
    let details = body.lines().next().unwrap_or_default().to_owned();
    let mut resp = own(status, TEXT, body);
    resp.headers_mut().insert("proxy-status", proxy_status(error, &details));
    resp
}

/// The 400 for a request that is not a proxy request (origin-form), telling how to use us.
/// `proxy_url` is the listener's, as a client sets it (`http://…`, or `https://…` for the TLS
/// listener).
pub(crate) fn not_a_proxy_request(proxy_url: &str) -> Response<ProxyBody> {
    text(
        StatusCode::BAD_REQUEST,
        "http_request_error",
        format!(
            "This is robots-proxy, a forward proxy that enforces robots.txt.\n\
             It only serves proxy requests (absolute-form, e.g. `GET http://example.com/ HTTP/1.1`).\n\
             Point your crawler at it instead of requesting it directly:\n\
             \n\
             \x20   export HTTP_PROXY={proxy_url}\n\
             \x20   curl -x {proxy_url} http://example.com/\n"
        ),
    )
}

/// The 403 for a request robots.txt disallows (JSON when the client asked for it).
/// The JSON form is built only for a client that asked for it (`want_json`): the deny path
/// answers most refusals as text, and a JSON object of a dozen members is not free.
pub(crate) fn blocked(
    decision: &Explanation,
    url: &str,
    token: Option<&str>,
    want_json: bool,
) -> Refusal {
    let json = want_json.then(|| blocked_json(decision, url, token));
    let token_line =
        token.map_or_else(|| "(none found: the `*` group applies)".to_owned(), str::to_owned);
    let rule_line = match (&decision.rule, decision.line) {
        (Some(rule), Some(line)) => format!("line {line}: {rule}"),
        _ => "(none: see reason)".to_owned(),
    };
    let group_line = decision.group.as_deref().unwrap_or("(none)");
    let reading_line = format!(
        "{}: {} ({})",
        decision.reading,
        decision.read_path,
        decision.reading.description()
    );
    // The version line only when a file is in force (not for disallow all).
    let version_line = decision.version.as_ref().map_or_else(String::new, |v| {
        format!("Version:       sha256:{}, fetched {}\n", v.sha256(), v.fetched_at_text())
    });
    // The URL, the group and the rule are the crawler's and the origin's bytes: the refusal
    // escapes the whole body at once, line by line, as every text answer is.
    let text = format!(
        "403 Forbidden: robots.txt does not allow this request.\n\
         \n\
         URL:           {url}\n\
         Product token: {token_line}\n\
         robots.txt:    {robots} ({state}, {age}s old)\n\
         {version_line}\
         Group:         user-agent: {group_line}\n\
         Rule:          {rule_line}\n\
         Reading:       {reading_line}\n\
         Reason:        {reason}\n",
        robots = decision.robots_url,
        state = decision.state_word(),
        age = decision.age.as_secs(),
        reason = decision.reason,
    );
    let refusal = Refusal::new(
        StatusCode::FORBIDDEN,
        "http_request_denied",
        AuditAction::RobotsDisallow,
        text,
    )
    .details(decision.reason.clone());
    match json {
        Some(json) => refusal.json(json),
        None => refusal,
    }
}

/// The JSON body of [`blocked`].
fn blocked_json(decision: &Explanation, url: &str, token: Option<&str>) -> serde_json::Value {
    let mut json = serde_json::json!({
        "error": "robots_disallowed",
        "url": url,
        "product_token": token,
        "robots_url": decision.robots_url,
        "robots_state": decision.state_word(),
        "rule": decision.rule,
        "line": decision.line,
        "group": decision.group,
        "reason": decision.reason,
        "reading": decision.reading.name(),
        "read_path": decision.read_path,
    });
    if let (Some(version), Some(map)) = (&decision.version, json.as_object_mut()) {
        map.insert("robots_sha256".to_owned(), version.sha256().into());
        map.insert("robots_fetched_at".to_owned(), version.fetched_at_text().into());
    }
    json
}

/// Whether the client prefers a JSON answer.
pub(crate) fn wants_json(headers: &http::HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/json"))
}

#[cfg(test)]
mod tests {
    use super::proxy_status;

    #[test]
    fn proxy_status_is_a_structured_field_item() {
        let v = proxy_status("http_request_denied", "disallowed by \"line 2\": /a\\b ü");
        assert_eq!(
            v.to_str().unwrap(),
            r#"robots-proxy;error=http_request_denied;details="disallowed by \"line 2\": /a\\b ?""#
        );
    }
}
