//! The key directory (draft-ietf-webbotauth-httpsig-protocol -01, §5.5 and Appendix B): a JWK
//! Set of the published Ed25519 keys (`kid` their thumbprint) at
//! `/.well-known/http-message-signatures-directory`, media type
//! `application/http-message-signatures-directory+json`, with `Content-Digest` (RFC 9530,
//! `sha-256`) of the body, and the response signed by every key it lists: covered components
//! `"@authority";req` (the authority the directory was asked for) and `content-digest` (so the
//! key set cannot be swapped under a captured signature), parameters `created`, `expires`,
//! `keyid` and `tag="http-message-signatures-directory"` (exactly those of the draft's test
//! vector, E.2.3), one signature (`sig1`, `sig2`, …) per key.
//!
//! It supports `HEAD`, `ETag` (of the body), `Last-Modified`, conditional requests
//! (`If-None-Match`, `If-Modified-Since` → 304 with fresh signature fields) and sends
//! `Access-Control-Allow-Origin: *` (the draft's Appendix C.2 and C.11).
//!
//! Served on a listener of its own (`signing.directory_listen`), so that the organisation can
//! expose it without exposing the admin listener; `robots-proxy keys export` writes the same
//! body (and, for a given authority, the signature fields) for hosting elsewhere.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64ct::{Base64, Base64UrlUnpadded, Encoding};
use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;

use super::keys::{Jwk, SigningKey};
use super::{directory_params, Signer, SigningError, SIGNATURE, SIGNATURE_INPUT};
use robots_proxy_clock::Clock;

/// Where the directory is served.
pub const PATH: &str = "/.well-known/http-message-signatures-directory";
/// Its media type.
pub const MEDIA_TYPE: &str = "application/http-message-signatures-directory+json";
/// Most connections the directory listener keeps open at once: it is public, and every
/// connection is a file descriptor the proxy shares. Past it, connections are closed at once.
pub(crate) const MAX_CONNECTIONS: usize = 256;
/// Most connections from one client address (a reverse proxy in front counts as one).
pub const MAX_PER_CLIENT: usize = 32;
/// `Content-Digest` (RFC 9530).
pub(crate) static CONTENT_DIGEST: header::HeaderName =
    header::HeaderName::from_static("content-digest");
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

/// The `Content-Digest` field value of `body` (RFC 9530): `sha-256=:<base64>:`.
pub(crate) fn content_digest(body: &[u8]) -> String {
    format!("sha-256=:{}:", Base64::encode_string(&Sha256::digest(body)))
}

/// The fields of a directory response with `body` for `authority`, signed by each of `keys`
/// at `created` (Unix seconds), valid for `lifetime`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SignatureFields {
    /// `Content-Digest` of the body.
    pub content_digest: String,
    /// `Signature-Input`.
    pub input: String,
    /// `Signature`.
    pub signature: String,
}

/// [`SignatureFields`] of a directory response.
pub(crate) fn signature_fields(
    keys: &[&SigningKey],
    authority: &str,
    body: &[u8],
    created: u64,
    lifetime: Duration,
) -> Result<SignatureFields, SigningError> {
    let expires = created + lifetime.as_secs().max(1);
    let digest = content_digest(body);
    let mut inputs = Vec::with_capacity(keys.len());
    let mut signatures = Vec::with_capacity(keys.len());
    for (i, key) in keys.iter().enumerate() {
        let label = format!("sig{}", i + 1);
        let params = directory_params(created, expires, key.keyid())?;
        let base = format!(
            "\"@authority\";req: {authority}\n\"content-digest\": {digest}\n\
             \"@signature-params\": {params}"
        );
        let signature = key.sign(base.as_bytes());
        inputs.push(format!("{label}={params}"));
        signatures.push(format!("{label}=:{}:", Base64::encode_string(&signature)));
    }
    Ok(SignatureFields {
        content_digest: digest,
        input: inputs.join(", "),
        signature: signatures.join(", "),
    })
}

/// The strong `ETag` of a directory body: the base64url SHA-256 of its bytes, quoted, the same
/// on every instance that publishes the same keys.
pub fn etag(body: &[u8]) -> String {
    format!("\"{}\"", Base64UrlUnpadded::encode_string(&Sha256::digest(body)))
}

/// Whether the request's validators say the client holds the current body (RFC 9110 §13.1):
/// `If-None-Match` (weak comparison, `*` for any) when present, else `If-Modified-Since`
/// against `last_modified` in whole seconds (none known: never). The one reading of the
/// validators for every page the public listener serves (the key directory, `/crawlers*`).
pub fn not_modified(headers: &HeaderMap, etag: &str, last_modified: Option<SystemTime>) -> bool {
    let inm: Vec<&str> = headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect();
    if !inm.is_empty() {
        let ours = etag.trim_start_matches("W/");
        return inm.iter().any(|t| *t == "*" || t.trim_start_matches("W/") == ours);
    }
    let Some(last_modified) = last_modified else { return false };
    let since = headers
        .get(header::IF_MODIFIED_SINCE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| httpdate::parse_http_date(v).ok());
    // Whole seconds: Last-Modified is sent in seconds.
    let secs = |t: SystemTime| t.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    since.is_some_and(|since| secs(last_modified) <= secs(since))
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
    let body = Bytes::from(body(keys.iter().copied()));
    let fields = signature_fields(&keys, &authority, &body, created, lifetime).and_then(|f| {
        let value =
            |t: String| HeaderValue::try_from(t).map_err(|e| SigningError::Fields(e.to_string()));
        Ok((value(f.content_digest)?, value(f.input)?, value(f.signature)?))
    });
    let (digest, input, signature) = match fields {
        Ok(fields) => fields,
        Err(e) => {
            tracing::error!(error = %e, "cannot sign the key directory");
            return text(StatusCode::INTERNAL_SERVER_ERROR, "500: cannot sign the key directory\n");
        }
    };
    let etag = etag(&body);
    let last_modified = signer.directory_modified(now);
    // A 304 carries the same fields but the body: a cache that revalidates gets fresh
    // signatures (RFC 9111 §4.3.4 updates the stored header fields), over the same digest.
    let unchanged = not_modified(req.headers(), &etag, Some(last_modified));
    // hyper sends no body for HEAD, and keeps its Content-Length.
    let mut resp = Response::new(Full::new(if unchanged { Bytes::new() } else { body }));
    if unchanged {
        *resp.status_mut() = StatusCode::NOT_MODIFIED;
    }
    let headers = resp.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(MEDIA_TYPE));
    if let Ok(v) = HeaderValue::try_from(format!("max-age={}", lifetime.as_secs())) {
        headers.insert(header::CACHE_CONTROL, v);
    }
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    if let Ok(v) = HeaderValue::try_from(etag) {
        headers.insert(header::ETAG, v);
    }
    if let Ok(v) = HeaderValue::try_from(httpdate::fmt_http_date(last_modified)) {
        headers.insert(header::LAST_MODIFIED, v);
    }
    headers.insert(CONTENT_DIGEST.clone(), digest);
    if !keys.is_empty() {
        headers.insert(SIGNATURE_INPUT.clone(), input);
        headers.insert(SIGNATURE.clone(), signature);
    }
    resp
}

/// Other documents served on the directory's listener (the public disclosure of the crawlers,
/// `robots_proxy::disclosure`), tried before the directory.
pub trait Pages: Send + Sync {
    /// The answer to a request for `path` at `now`, or `None` when `path` is not one of them.
    fn answer(
        &self,
        method: &Method,
        path: &str,
        headers: &http::HeaderMap,
        now: SystemTime,
    ) -> Option<Response<Full<Bytes>>>;
}

/// Two sets of pages, the first tried first.
pub struct BothPages(pub Arc<dyn Pages>, pub Arc<dyn Pages>);

impl Pages for BothPages {
    fn answer(
        &self,
        method: &Method,
        path: &str,
        headers: &http::HeaderMap,
        now: SystemTime,
    ) -> Option<Response<Full<Bytes>>> {
        let first = self.0.answer(method, path, headers, now);
        first.or_else(|| self.1.answer(method, path, headers, now))
    }
}

/// Serves the key directory on `listener` until `shutdown` completes.
pub async fn serve(
    listener: TcpListener,
    signer: Arc<Signer>,
    clock: Arc<dyn Clock>,
    shutdown: impl Future<Output = ()>,
) {
    serve_current(listener, Arc::new(arc_swap::ArcSwap::new(signer)), clock, None, shutdown).await
}

/// [`serve`], with `pages` answered on the same listener.
pub async fn serve_with(
    listener: TcpListener,
    signer: Arc<Signer>,
    clock: Arc<dyn Clock>,
    pages: Option<Arc<dyn Pages>>,
    shutdown: impl Future<Output = ()>,
) {
    serve_current(listener, Arc::new(arc_swap::ArcSwap::new(signer)), clock, pages, shutdown).await
}

/// [`serve_with`] with the signer `signer` holds at each request: a reload that rotates keys
/// puts its signer there, and the directory publishes the new keys at once.
pub async fn serve_current(
    listener: TcpListener,
    signer: Arc<arc_swap::ArcSwap<Signer>>,
    clock: Arc<dyn Clock>,
    pages: Option<Arc<dyn Pages>>,
    shutdown: impl Future<Output = ()>,
) {
    let service = move |_local| {
        let (signer, clock, pages) = (signer.clone(), clock.clone(), pages.clone());
        service_fn(move |req: Request<Incoming>| {
            let now = clock.now();
            let page = pages
                .as_ref()
                .and_then(|p| p.answer(req.method(), req.uri().path(), req.headers(), now));
            let mut resp = page.unwrap_or_else(|| answer(&signer.load(), &req, now));
            // Every answer of this listener (the directory, its errors, the public pages).
            robots_proxy_net::server::stamp_own_answer(resp.headers_mut());
            async move { Ok::<_, Infallible>(resp) }
        })
    };
    let limits = robots_proxy_net::server::SideLimits {
        clients: None,
        max_connections: MAX_CONNECTIONS,
        per_client: MAX_PER_CLIENT,
        timeouts: robots_proxy_net::server::ConnectionTimeouts::KEY_DIRECTORY,
    };
    robots_proxy_net::server::serve_side_listener(
        listener,
        "key directory",
        limits,
        service,
        shutdown,
    )
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// The Ed25519 test key of RFC 9421 §B.1.4 (PKCS#8), which the draft's vectors use.
    const RFC_9421_ED25519: &str = "-----BEGIN PRIVATE KEY-----\n\
        MC4CAQAwBQYDK2VwBCIEIJ+DYvh6SEqVTm50DFtMDoQikTmiCqirVv9mWG9qfSnF\n\
        -----END PRIVATE KEY-----\n";

    /// draft-ietf-webbotauth-httpsig-protocol (editor's copy with the -01 changes), Appendix
    /// E.2.3, "Signed Directory Response": the same key, body, authority, `created` and
    /// `expires` give the same `Content-Digest`, `Signature-Input` and signature bytes.
    #[test]
    fn the_drafts_signed_directory_vector_is_reproduced_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let name: super::super::keys::KeyName = "rfc9421".parse().unwrap();
        let path = name.file_in(dir.path());
        std::fs::write(&path, RFC_9421_ED25519).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let key = SigningKey::load(&name, &path).unwrap();
        assert_eq!(key.jwk().x, "JrQLj5P_89iXES9-vFgrIy29clF9CC_oPPsw3c5D0bs");
        let body = body([&key]);
        assert_eq!(
            body,
            r#"{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U","x":"JrQLj5P_89iXES9-vFgrIy29clF9CC_oPPsw3c5D0bs","use":"sig"}]}"#
        );
        let lifetime = Duration::from_secs(4889289600 - 1735689600);
        let fields = signature_fields(
            &[&key],
            "signature-agent.test",
            body.as_bytes(),
            1735689600,
            lifetime,
        )
        .unwrap();
        assert_eq!(fields.content_digest, "sha-256=:CADMT2aBdV/rqQr/NIru64ERQkCobVvllA4V0fLFDu0=:");
        assert_eq!(
            fields.input,
            r#"sig1=("@authority";req "content-digest");created=1735689600;expires=4889289600;keyid="poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U";tag="http-message-signatures-directory""#
        );
        // The label (`binding` in the draft) is not part of the signature base.
        assert_eq!(
            fields.signature,
            "sig1=:l6P8R67tm3kujAxbHWio7ll01qrEZ0dKD/WWlGhNYEmTnFZM8Wt0VQ9zqGfvo7T/UMkBxsigzChM1Gpz7gOVBg==:"
        );
    }
}
