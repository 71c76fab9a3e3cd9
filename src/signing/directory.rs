//! The key directory (draft-meunier-http-message-signatures-directory, referenced by the Web
//! Bot Auth protocol draft): a JWK Set of the published Ed25519 keys at
//! `/.well-known/http-message-signatures-directory`, media type
//! `application/http-message-signatures-directory+json`, the response signed by every key it
//! lists: covered component `"@authority";req` (the authority the directory was asked for),
//! `created`, `expires`, `keyid`, `alg`, and `tag="http-message-signatures-directory"`, one
//! signature (`sig1`, `sig2`, …) per key.
//!
//! Served on a listener of its own (`signing.directory_listen`), so that the organisation can
//! expose it without exposing the admin listener; `robots-proxy keys export` writes the same
//! body (and, for a given authority, the signature fields) for hosting elsewhere.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64ct::{Base64, Encoding};
use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use tokio::net::TcpListener;

use super::keys::{Jwk, SigningKey};
use super::{directory_params, Signer, SigningError, SIGNATURE, SIGNATURE_INPUT};
use crate::clock::Clock;

/// Where the directory is served.
pub const PATH: &str = "/.well-known/http-message-signatures-directory";
/// Its media type.
pub const MEDIA_TYPE: &str = "application/http-message-signatures-directory+json";
/// Most connections the directory listener keeps open at once: it is public, and every
/// connection is a file descriptor the proxy shares. Past it, connections are closed at once.
pub const MAX_CONNECTIONS: usize = 256;
/// Most connections from one client address (a reverse proxy in front counts as one).
pub const MAX_PER_CLIENT: usize = 32;
/// How long a connection may wait to send a request head, or sit idle between requests.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(5);
/// The `tag` of the directory's own signatures.
pub const DIRECTORY_TAG: &str = "http-message-signatures-directory";

#[derive(serde::Serialize)]
struct JwkSet<'a> {
    keys: Vec<&'a Jwk>,
}

/// The directory's body: `{"keys":[{"kty":"OKP","crv":"Ed25519","x":"…"},…]}`.
pub fn body<'a>(keys: impl IntoIterator<Item = &'a SigningKey>) -> String {
    let set = JwkSet { keys: keys.into_iter().map(SigningKey::jwk).collect() };
    // Strings only: serialising cannot fail.
    serde_json::to_string(&set).unwrap_or_else(|_| r#"{"keys":[]}"#.to_owned())
}

/// The `Signature-Input` and `Signature` fields of a directory response for `authority`,
/// signed by each of `keys` at `created` (Unix seconds), valid for `lifetime`.
pub fn signature_fields(
    keys: &[&SigningKey],
    authority: &str,
    created: u64,
    lifetime: Duration,
) -> Result<(String, String), SigningError> {
    let expires = created + lifetime.as_secs().max(1);
    let mut inputs = Vec::with_capacity(keys.len());
    let mut signatures = Vec::with_capacity(keys.len());
    for (i, key) in keys.iter().enumerate() {
        let label = format!("sig{}", i + 1);
        let params = directory_params(created, expires, key.keyid())?;
        let base = format!("\"@authority\";req: {authority}\n\"@signature-params\": {params}");
        let signature = key.sign(base.as_bytes());
        inputs.push(format!("{label}={params}"));
        signatures.push(format!("{label}=:{}:", Base64::encode_string(&signature)));
    }
    Ok((inputs.join(", "), signatures.join(", ")))
}

/// The authority a directory request was made for: the absolute-form target's, else `Host`,
/// as sent. `None` when there is none or it is not printable ASCII without spaces.
fn requested_authority<B>(req: &Request<B>) -> Option<String> {
    let text = match req.uri().authority() {
        Some(a) => a.as_str().to_owned(),
        None => req.headers().get(header::HOST)?.to_str().ok()?.to_owned(),
    };
    let ok = !text.is_empty() && text.len() <= 255 && text.bytes().all(|b| b.is_ascii_graphic());
    ok.then_some(text)
}

fn text(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    resp
}

/// The answer to one request of the directory listener.
pub fn answer<B>(signer: &Signer, req: &Request<B>, now: SystemTime) -> Response<Full<Bytes>> {
    if req.uri().path() != PATH {
        return text(StatusCode::NOT_FOUND, "404 Not Found: the key directory is at /.well-known/http-message-signatures-directory\n");
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut resp = text(StatusCode::METHOD_NOT_ALLOWED, "405 Method Not Allowed\n");
        resp.headers_mut().insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return resp;
    }
    let Some(asked) = requested_authority(req) else {
        return text(StatusCode::BAD_REQUEST, "400 Bad Request: no usable Host\n");
    };
    // Only the configured agents' authorities: signing for any Host would vouch that these
    // keys are served at whatever authority a requester names (DNS rebinding, an oracle).
    let Some(authority) = signer.directory_authority(&asked) else {
        return text(
            StatusCode::MISDIRECTED_REQUEST,
            "421 Misdirected Request: this key directory answers only for the authorities of \
             the configured agent URLs\n",
        );
    };
    let keys: Vec<&SigningKey> = signer.published(now).collect();
    let created = now.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let lifetime = signer.directory_lifetime();
    let fields = signature_fields(&keys, &authority, created, lifetime).and_then(|(i, s)| {
        let value =
            |t: String| HeaderValue::try_from(t).map_err(|e| SigningError::Fields(e.to_string()));
        Ok((value(i)?, value(s)?))
    });
    // hyper sends no body for HEAD, and keeps its Content-Length.
    let mut resp = Response::new(Full::new(Bytes::from(body(keys.iter().copied()))));
    let headers = resp.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(MEDIA_TYPE));
    if let Ok(v) = HeaderValue::try_from(format!("max-age={}", lifetime.as_secs())) {
        headers.insert(header::CACHE_CONTROL, v);
    }
    match fields {
        Ok((input, signature)) if !keys.is_empty() => {
            headers.insert(SIGNATURE_INPUT.clone(), input);
            headers.insert(SIGNATURE.clone(), signature);
        }
        Ok(_) => {}
        Err(e) => {
            tracing::error!(error = %e, "cannot sign the key directory");
            return text(StatusCode::INTERNAL_SERVER_ERROR, "500: cannot sign the key directory\n");
        }
    }
    resp
}

/// Serves the key directory on `listener` until `shutdown` completes.
pub async fn serve(
    listener: TcpListener,
    signer: Arc<Signer>,
    clock: Arc<dyn Clock>,
    shutdown: impl Future<Output = ()>,
) {
    let service = move |_local| {
        let (signer, clock) = (signer.clone(), clock.clone());
        service_fn(move |req: Request<Incoming>| {
            let resp = answer(&signer, &req, clock.now());
            async move { Ok::<_, Infallible>(resp) }
        })
    };
    let limits = crate::server::SideLimits {
        clients: None,
        max_connections: MAX_CONNECTIONS,
        per_client: MAX_PER_CLIENT,
        idle: IDLE_TIMEOUT,
    };
    crate::server::serve_side_listener(listener, "key directory", limits, service, shutdown).await;
}
