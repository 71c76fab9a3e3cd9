//! `POST /api/reload` (reload the configuration, as SIGHUP does) and `GET /api/reload/preview`
//! (what a reload would change, applying nothing): the report of a reload (`config::report`) as JSON.
//! `200` when applied (or, for the preview, valid); `422 Unprocessable Content` when the
//! configuration has errors, every one listed, the running configuration kept.

use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use serde_json::json;

use super::{cross_site, json_response, not_allowed, Body};
use robots_proxy_config::report::{Outcome, Reloads, Trigger};

/// The answer for `req` when it is for a reload endpoint, else `None`.
pub(super) async fn route(
    reloader: Option<&dyn Reloads>,
    req: &Request<Incoming>,
) -> Option<Response<Body>> {
    let trigger = match (req.uri().path(), req.method()) {
        ("/api/reload", &Method::POST) => Trigger::Api,
        ("/api/reload/preview", &Method::GET | &Method::HEAD) => Trigger::Preview,
        ("/api/reload", _) => return Some(not_allowed("POST")),
        ("/api/reload/preview", _) => return Some(not_allowed("GET, HEAD")),
        _ => return None,
    };
    if trigger == Trigger::Api {
        if let Some(refusal) = cross_site(req) {
            return Some(refusal);
        }
    }
    let Some(reloader) = reloader else {
        return Some(json_response(
            StatusCode::NOT_FOUND,
            &json!({ "error": "this admin listener has no configuration to reload" }),
        ));
    };
    let report = reloader.reload(trigger).await;
    let status = match report.outcome {
        Outcome::Refused => StatusCode::UNPROCESSABLE_ENTITY,
        _ => StatusCode::OK,
    };
    let body = serde_json::to_value(&report)
        .unwrap_or_else(|e| json!({ "error": format!("the report cannot be written: {e}") }));
    Some(json_response(status, &body))
}
