//! The admin listener: metrics, health, the live decision for a URL, cache purges and a status
//! page, on an address of its own (`admin.listen`, default `127.0.0.1:9090`).
//!
//! | request | answer |
//! |---|---|
//! | `GET /metrics` | Prometheus / OpenMetrics text ([`robots_proxy_metrics`]) |
//! | `GET /healthz` | `200 ok` while the process runs |
//! | `GET /readyz` | `200` when the proxy accepts connections and audit records are being written (none lost since the last one written), else `503`, JSON saying which |
//! | `GET /robots?url=URL&agent=TOKEN` | the decision for `URL` now, and the cached robots.txt state of its authority, JSON (fetches robots.txt if needed) |
//! | `POST /cache/purge?authority=A` | drops the cached robots.txt of `A` (`http://host:port`, or a bare `host[:port]` for both schemes) |
//! | `POST /cache/purge-all` | drops every cached robots.txt (both purges: `503` and `"partial": true` when a fleet's part failed) |
//! | `GET /` | the status page: recent blocks, top blocked authorities and tokens, the cache |
//! | `GET /api/summary` | what the status page shows, JSON |
//! | `GET /api/series` | the charts' samples (one every `admin.chart_interval`, the last 360), with their totals, JSON (`charts.rs`) |
//! | `GET /api/robots/versions?authority=A` | the robots.txt versions the archive holds for `A` (`scheme://host[:port]`), with their windows, JSON (`versions.rs`) |
//! | `POST /api/reload` | reloads the configuration as SIGHUP does; JSON: what changed key by key, what needs a restart, or every error (`422`, the running configuration kept) (`reload.rs`) |
//! | `GET /api/reload/preview` | the same report for the configuration on disk, nothing applied |
//!
//! There is no authentication, so the listener belongs on loopback or a private network. A
//! browser on the same machine could still be made to send a `POST` by some web page, so a
//! `POST` that says it comes from another origin (`Origin`, `Sec-Fetch-Site`) is refused; and
//! a page that rebinds its name to this address is refused whatever it sends: only requests
//! whose `Host` names the listener are answered ([`hosts`]; `421` otherwise).
//!
//! The root crate re-exports this crate as `robots_proxy::admin`. It answers a reload through
//! `config::report::Reloads`, which the root package's reloader implements, so it never reaches
//! what a reload applies.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

mod charts;
mod hosts;
mod reload;
mod robots;
mod versions;

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use serde_json::json;
use tokio::net::TcpListener;

use robots_proxy_authority::{Authority, Scheme};
use robots_proxy_config::report::Reloads;
use robots_proxy_config::AdminSection;
use robots_proxy_decide::FetchClass;
use robots_proxy_metrics::{Decision, PREFIX};
use robots_proxy_net::server::serve_side_listener;
use robots_proxy_proxy::Proxy;

/// The status page: self-contained HTML, CSS and JavaScript (no external assets), which polls
/// `/api/summary`.
const PAGE: &str = include_str!("page.html");

/// How many names the "top blocked" lists show.
const TOP: usize = 10;

/// Most connections from one client address to the admin listener.
const MAX_PER_CLIENT: usize = 16;

/// The body of every admin response.
type Body = Full<Bytes>;

/// Serves the admin endpoints for `proxy` on `listener` until `shutdown` completes.
///
/// Connections open at that point are left to finish on their own (they are short requests);
/// the process exiting ends them.
///
/// The listener's address is added to the proxy's destination guard first: the admin
/// endpoints have no authentication, so a client must never reach them through the proxy.
pub async fn serve(listener: TcpListener, proxy: Proxy, shutdown: impl Future<Output = ()>) {
    serve_with(listener, proxy, &AdminSection::default(), shutdown).await;
}

/// [`serve`] with the settings of `[admin]`: the names it answers for (`admin.hosts`), the
/// clients it admits (`admin.allow_clients`, others are disconnected at once) and how many
/// connections it keeps open (`admin.max_connections`, 16 per client at most).
pub async fn serve_with(
    listener: TcpListener,
    proxy: Proxy,
    section: &AdminSection,
    shutdown: impl Future<Output = ()>,
) {
    serve_with_reload(listener, proxy, section, None, shutdown).await;
}

/// [`serve_with`], answering `POST /api/reload` and `GET /api/reload/preview` with
/// `reloader` (the process's one, which SIGHUP uses too).
pub async fn serve_with_reload(
    listener: TcpListener,
    proxy: Proxy,
    section: &AdminSection,
    reloader: Option<std::sync::Arc<dyn Reloads>>,
    shutdown: impl Future<Output = ()>,
) {
    if let Ok(local) = listener.local_addr() {
        proxy.guard().add_own_listener(local);
    }
    let names: std::sync::Arc<[String]> = section.hosts.clone().into();
    let interval = section.chart_interval;
    let sampler = tokio::spawn(charts::sample(proxy.clone(), interval));
    let service = move |local| {
        let (proxy, names, reloader) = (proxy.clone(), names.clone(), reloader.clone());
        service_fn(move |req| {
            let (proxy, names, reloader) = (proxy.clone(), names.clone(), reloader.clone());
            async move {
                let reloader = reloader.as_deref();
                Ok::<_, Infallible>(handle(&proxy, reloader, &names, interval, local, req).await)
            }
        })
    };
    let limits = robots_proxy_net::server::SideLimits {
        clients: Some(robots_proxy_access::ClientAcl::new(&section.allow_clients)),
        max_connections: section.max_connections,
        per_client: MAX_PER_CLIENT.min(section.max_connections),
        timeouts: robots_proxy_net::server::ConnectionTimeouts::ADMIN,
    };
    serve_side_listener(listener, "admin", limits, service, shutdown).await;
    sampler.abort();
}

/// Checks the request names this listener, then routes it. Every answer says
/// `X-Content-Type-Options: nosniff` and `Cross-Origin-Resource-Policy: same-origin`: no
/// answer of this listener is meant to be read as anything but its own type, nor by another
/// site.
async fn handle(
    proxy: &Proxy,
    reloader: Option<&dyn Reloads>,
    names: &[String],
    chart_interval: Duration,
    local: std::net::SocketAddr,
    req: Request<Incoming>,
) -> Response<Body> {
    let mut resp = answer(proxy, reloader, names, chart_interval, local, req).await;
    let h = resp.headers_mut();
    robots_proxy_net::server::stamp_own_answer(h);
    h.insert("cross-origin-resource-policy", HeaderValue::from_static("same-origin"));
    resp
}

/// [`handle`] before the headers every answer carries.
async fn answer(
    proxy: &Proxy,
    reloader: Option<&dyn Reloads>,
    names: &[String],
    chart_interval: Duration,
    local: std::net::SocketAddr,
    req: Request<Incoming>,
) -> Response<Body> {
    let target = req.uri().authority().map(|a| a.as_str());
    let host = req.headers().get(header::HOST).map(|h| h.to_str().unwrap_or_default());
    let named = |h: Option<&str>| h.is_none_or(|h| hosts::names_listener(h, local, names));
    if (target.is_none() && host.is_none()) || !named(target) || !named(host) {
        return json_response(
            StatusCode::MISDIRECTED_REQUEST,
            &json!({ "error": "this admin listener answers only for localhost, its own \
                               address and the names of admin.hosts" }),
        );
    }
    if let Some(answer) = reload::route(reloader, &req).await {
        return answer;
    }
    route(proxy, chart_interval, req).await
}

/// Routes one request.
async fn route(proxy: &Proxy, chart_interval: Duration, req: Request<Incoming>) -> Response<Body> {
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let query = query_params(req.uri().query());
    let read = method == Method::GET || method == Method::HEAD;
    match path.as_str() {
        "/" | "/index.html" if read => page(),
        "/api/summary" if read => summary(proxy).await,
        "/api/series" if read => charts::series(proxy, chart_interval),
        "/metrics" if read => {
            let accept = req.headers().get(header::ACCEPT).and_then(|v| v.to_str().ok());
            metrics(proxy, robots_proxy_metrics::text::wants_openmetrics(accept)).await
        }
        "/healthz" if read => text(StatusCode::OK, "ok\n".to_owned()),
        "/readyz" if read => readyz(proxy).await,
        // A GET that makes the gateway fetch (and archive) a robots.txt, or read and diff its
        // versions, is refused when a browser sends it for another site (an `<img>` on any
        // page the operator opens).
        "/robots" | "/api/robots/versions" if read => {
            if let Some(refusal) = cross_site(&req) {
                return refusal;
            }
            if path == "/robots" {
                robots::explain(proxy, &query).await
            } else {
                versions::list(proxy, &query).await
            }
        }
        "/api/exceptions" if read => exceptions(proxy),
        "/cache/purge" | "/cache/purge-all" if method == Method::POST => {
            if let Some(refusal) = cross_site(&req) {
                return refusal;
            }
            if path == "/cache/purge-all" {
                purge_all(proxy).await
            } else {
                purge(proxy, &query).await
            }
        }
        "/"
        | "/index.html"
        | "/api/summary"
        | "/api/series"
        | "/metrics"
        | "/healthz"
        | "/readyz"
        | "/robots"
        | "/api/robots/versions"
        | "/api/exceptions" => not_allowed("GET, HEAD"),
        "/cache/purge" | "/cache/purge-all" => not_allowed("POST"),
        _ => json_response(
            StatusCode::NOT_FOUND,
            &json!({
                "error": format!("no admin endpoint at {path}"),
                "endpoints": ["/", "/api/summary", "/api/series", "/metrics", "/healthz", "/readyz",
                              "/robots?url=URL&agent=TOKEN", "/api/robots/versions?authority=A",
                              "/api/exceptions",
                              "POST /cache/purge?authority=A",
                              "POST /cache/purge-all",
                              "POST /api/reload", "/api/reload/preview"],
            }),
        ),
    }
}

/// `GET /api/exceptions`: the `[[exceptions]]` in force, each with its scope, reference,
/// expiry and use count.
fn exceptions(proxy: &Proxy) -> Response<Body> {
    let views = proxy.policy().exceptions().views(proxy.clock().now());
    json_response(StatusCode::OK, &json!({ "exceptions": views }))
}

/// The query string as name → value (the last one wins), percent-decoded.
fn query_params(query: Option<&str>) -> HashMap<String, String> {
    url::form_urlencoded::parse(query.unwrap_or_default().as_bytes()).into_owned().collect()
}

/// A `403` for a request a browser sent on behalf of another site (a `POST`, or a `GET` with
/// side effects), `None` for anything else.
///
/// `curl` and scripts send neither header; a browser sends `Origin` with every `POST`, and
/// `Sec-Fetch-Site` too when it is recent (with every request, an `<img>`'s included).
fn cross_site(req: &Request<Incoming>) -> Option<Response<Body>> {
    let headers = req.headers();
    let site = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok());
    let same_site = matches!(site, None | Some("same-origin") | Some("none"));
    let origin = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok());
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    let same_origin = match (origin, host) {
        (None, _) => true,
        (Some(origin), Some(host)) => origin.strip_prefix("http://") == Some(host),
        (Some(_), None) => false,
    };
    (!(same_site && same_origin)).then(|| {
        let what = if req.method() == Method::POST { "POST" } else { "request" };
        json_response(
            StatusCode::FORBIDDEN,
            &json!({ "error": format!("cross-site {what} refused: send it from the status page, curl or a script") }),
        )
    })
}

fn page() -> Response<Body> {
    let mut resp = Response::new(Full::new(Bytes::from_static(PAGE.as_bytes())));
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    // `nosniff` is added to every admin answer by `handle`.
    h.insert(header::CONTENT_SECURITY_POLICY, page_policy().clone());
    resp
}

/// The page's Content-Security-Policy. Everything the page needs is inline or from this
/// listener; nothing else may load, and no other site may frame it. Only the page's own inline
/// scripts run and only its own inline style sheets apply, each named by its SHA-256 (no
/// `'unsafe-inline'`), so that text put into the page by a slip in its code would never run as
/// script nor restyle it (the page sets no `style` attribute; its scripts set styles through
/// the CSSOM, which CSP does not restrict).
fn page_policy() -> &'static HeaderValue {
    static POLICY: std::sync::OnceLock<HeaderValue> = std::sync::OnceLock::new();
    POLICY.get_or_init(|| {
        use base64ct::{Base64, Encoding};
        use sha2::{Digest, Sha256};
        let hashes = |element: &str| {
            let mut hashes = String::new();
            for block in inline_blocks(PAGE, element) {
                let digest = Sha256::digest(block.as_bytes());
                hashes.push_str(&format!(" 'sha256-{}'", Base64::encode_string(&digest)));
            }
            hashes
        };
        let (scripts, styles) = (hashes("script"), hashes("style"));
        let policy = format!(
            "default-src 'none'; script-src{scripts}; style-src{styles}; \
             connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
        );
        HeaderValue::from_str(&policy).unwrap_or(HeaderValue::from_static("default-src 'none'"))
    })
}

/// The text of each `<element>…</element>` of `page` (`script`, `style`), as a browser hashes
/// it for a CSP hash source.
fn inline_blocks<'a>(page: &'a str, element: &str) -> Vec<&'a str> {
    let (open, close) = (format!("<{element}>"), format!("</{element}>"));
    let mut out = Vec::new();
    let mut rest = page;
    while let Some(start) = rest.find(&open) {
        let body = &rest[start + open.len()..];
        let Some(end) = body.find(&close) else { break };
        out.push(&body[..end]);
        rest = &body[end..];
    }
    out
}

/// `/metrics`, in OpenMetrics for a scraper that asks for it, else in the classic Prometheus
/// text format ([`robots_proxy_metrics::text`]).
async fn metrics(proxy: &Proxy, openmetrics: bool) -> Response<Body> {
    use robots_proxy_metrics::text;
    // The store counts entries lazily; settle the counts so the scrape is current.
    let policy = proxy.policy();
    policy.store_stats().await;
    let expiry = policy.exceptions().expiry_seconds(proxy.clock().now());
    proxy.metrics().set_exception_expiry(&expiry);
    let encoded = proxy.metrics().encode();
    let (body, media) = if openmetrics {
        (encoded, text::OPENMETRICS)
    } else {
        (text::to_prometheus_text(&encoded), text::PROMETHEUS_TEXT)
    };
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(media));
    resp
}

async fn readyz(proxy: &Proxy) -> Response<Body> {
    let listening = proxy.metrics().is_listening();
    let draining = proxy.metrics().is_draining();
    let audit = proxy.audit().check_writable().await;
    let ready = listening && !draining && audit.is_ok();
    let status = if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    json_response(
        status,
        &json!({
            "ready": ready,
            "listening": listening,
            "draining": draining,
            "audit_log": match &audit {
                Ok(()) => "writable".to_owned(),
                Err(e) => e.to_string(),
            },
        }),
    )
}

async fn summary(proxy: &Proxy) -> Response<Body> {
    let metrics = proxy.metrics();
    let store = proxy.policy().store_stats().await;
    let stats = store.counters;
    let audit = proxy.audit().stats();
    let requests =
        |d: Decision| metrics.requests(d, Scheme::Http) + metrics.requests(d, Scheme::Https);
    let fetches: serde_json::Map<String, serde_json::Value> =
        FetchClass::ALL.iter().map(|c| (c.as_str().to_owned(), stats.fetches(*c).into())).collect();
    let uptime = SystemTime::now().duration_since(metrics.started()).unwrap_or_default();
    let fleet = match proxy.fleet() {
        None => serde_json::Value::Null,
        Some(fleet) => json!({
            "instance": fleet.instance(),
            "redis": fleet.redis_url(),
            "up": fleet.is_up(),
            "on_redis_error": if fleet.refuses_when_down() { "refuse" } else { "local" },
            "redis_round_trip_seconds": fleet.round_trip().as_secs_f64(),
            "instances": robots_proxy_fleet::view::instances(fleet).await,
        }),
    };
    json_response(
        StatusCode::OK,
        &json!({
            "version": env!("CARGO_PKG_VERSION"),
            "uptime_seconds": uptime.as_secs(),
            "listening": metrics.is_listening(),
            "open_connections": metrics.open_connections(),
            "requests": {
                "allow": requests(Decision::Allow),
                "disallow": requests(Decision::Disallow),
                "refuse": requests(Decision::Refuse),
                "tunnel": requests(Decision::Tunnel),
                "throttle": requests(Decision::Throttle),
                "unavailable": requests(Decision::Unavailable),
            },
            // `refuse` split by what was refused: a CONNECT, or any request to a destination
            // the guard prohibits (the page's tiles; issue 41, review-ops low 6).
            "refused": {
                "connect": metrics.blocks_by_cause(robots_proxy_audit::AuditAction::ConnectRefuse),
                "destination": metrics.blocks_by_cause(robots_proxy_audit::AuditAction::DestinationProhibited),
            },
            "blocks": metrics.blocks(TOP),
            // Report-only mode: what enforcement would have refused, per token.
            "would_block": metrics.would_blocks(TOP),
            "cache": {
                "entries": store.entries,
                "memory_bytes": store.memory_bytes,
                "hits": stats.hits,
                "misses": stats.misses,
                "fetches": fetches,
            },
            "audit": {
                "records_written": audit.records_written,
                "records_failed": audit.records_lost,
                "write_errors": audit.write_errors,
            },
            "metrics_prefix": PREFIX,
            "fleet": fleet,
        }),
    )
}

/// The authorities named by `authority`: `http://host[:port]` or `https://…` is one; a bare
/// `host[:port]` names both schemes.
fn purge_targets(authority: &str) -> Result<Vec<Authority>, String> {
    let authority = authority.trim();
    if authority.is_empty() {
        return Err("the authority parameter is empty".to_owned());
    }
    if authority.contains("://") {
        let uri: http::Uri =
            authority.parse().map_err(|e| format!("{authority:?} is not a URL: {e}"))?;
        let a = Authority::from_uri(&uri).map_err(|e| format!("{authority:?}: {e}"))?;
        return Ok(vec![a]);
    }
    [Scheme::Http, Scheme::Https]
        .into_iter()
        .map(|scheme| {
            Authority::from_host_port(scheme, authority).map_err(|e| format!("{authority:?}: {e}"))
        })
        .collect()
}

async fn purge(proxy: &Proxy, query: &HashMap<String, String>) -> Response<Body> {
    let Some(authority) = query.get("authority") else {
        return bad_request(
            "missing the authority parameter: POST /cache/purge?authority=http://host:port",
        );
    };
    let targets = match purge_targets(authority) {
        Ok(t) => t,
        Err(e) => return bad_request(&e),
    };
    let mut purged = Vec::with_capacity(targets.len());
    let mut fleet_errors = serde_json::Map::new();
    let policy = proxy.policy();
    for target in targets {
        match policy.purge(&target).await {
            Ok(()) => {
                tracing::info!(authority = %target, "robots.txt purged from the cache (admin)")
            }
            Err(e) => {
                tracing::warn!(authority = %target, error = %e, "robots.txt purged from this instance's cache, but not from the fleet's (admin)");
                fleet_errors.insert(target.to_string(), e.to_string().into());
            }
        }
        purged.push(target.to_string());
    }
    if fleet_errors.is_empty() {
        return json_response(StatusCode::OK, &json!({ "purged": purged }));
    }
    // This instance's copies are gone; the fleet's part was not (all) done: partial.
    json_response(
        StatusCode::SERVICE_UNAVAILABLE,
        &json!({
            "purged": purged,
            "partial": true,
            "fleet_errors": fleet_errors,
            "error": format!(
                "purged from this instance only: {}",
                fleet_errors.values().filter_map(|e| e.as_str()).collect::<Vec<_>>().join("; ")
            ),
        }),
    )
}

async fn purge_all(proxy: &Proxy) -> Response<Body> {
    let done = proxy.policy().purge_all().await;
    let entries = done.entries_before;
    match done.fleet {
        Ok(()) => {
            tracing::info!(entries, "every robots.txt purged from the cache (admin)");
            json_response(StatusCode::OK, &json!({ "purged_all": true, "entries_before": entries }))
        }
        Err(e) => {
            tracing::warn!(entries, error = %e, "every robots.txt purged from this instance's cache, but the fleet's purge failed (admin)");
            json_response(
                StatusCode::SERVICE_UNAVAILABLE,
                &json!({
                    "purged_all": false,
                    "partial": true,
                    "entries_before": entries,
                    "error": format!("purged from this instance only: {e}"),
                }),
            )
        }
    }
}

fn bad_request(message: &str) -> Response<Body> {
    json_response(StatusCode::BAD_REQUEST, &json!({ "error": message }))
}

fn not_allowed(allow: &'static str) -> Response<Body> {
    let mut resp = json_response(
        StatusCode::METHOD_NOT_ALLOWED,
        &json!({ "error": format!("method not allowed; use {allow}") }),
    );
    resp.headers_mut().insert(header::ALLOW, HeaderValue::from_static(allow));
    resp
}

fn text(status: StatusCode, body: String) -> Response<Body> {
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

fn json_response(status: StatusCode, value: &serde_json::Value) -> Response<Body> {
    let mut body = value.to_string();
    body.push('\n');
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn purge_targets_by_url_or_host() {
        let one = purge_targets("https://Example.COM:8443").unwrap();
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].to_string(), "https://example.com:8443");
        let both = purge_targets("example.com").unwrap();
        let shown: Vec<String> = both.iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["http://example.com", "https://example.com"]);
        assert!(purge_targets("").is_err());
        assert!(purge_targets("ftp://example.com").unwrap_err().contains("scheme"));
    }

    #[test]
    fn query_is_decoded() {
        let q = query_params(Some("url=http%3A%2F%2Fa.test%2Fx%3Fy%3D1&agent=Bot"));
        assert_eq!(q["url"], "http://a.test/x?y=1");
        assert_eq!(q["agent"], "Bot");
        assert!(query_params(None).is_empty());
    }
}
