//! Fetching one robots.txt: an unconditional `GET`, redirects, a capped body, and the status
//! classes of RFC 9309 §2.3.1.
//!
//! The fetcher knows HTTP, not caching: it turns whatever happened on the wire into a
//! [`Fetched`], and [`super::state`] turns that into the rules in force. It never panics on what
//! an origin sends: garbage status lines, resets, endless bodies and redirect loops all become a
//! [`Fetched`] value.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderMap, ACCEPT_ENCODING, CACHE_CONTROL, LOCATION, USER_AGENT};
use http::{HeaderValue, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::connect::{Connect, HttpConnector};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use super::decode::{self, Decoder};
use super::FetchOutcome;
use super::RobotsSection;
use robots_proxy_authority::{Authority, Scheme};
use robots_proxy_engine::{RobotsTxt, MIN_SIZE_LIMIT};

/// What one fetch attempt gave, classified by RFC 9309 §2.3.1.
#[derive(Debug)]
pub enum Fetched {
    /// §2.3.1.1: a 2xx answer, parsed.
    Robots {
        /// The final status (after redirects).
        status: u16,
        /// The parsed body.
        robots: Arc<RobotsTxt>,
        /// The body as received (capped): what a fleet shares, so each instance parses it.
        body: bytes::Bytes,
        /// What the response's `Cache-Control` asks for, if anything (see
        /// [`freshness_hint`]).
        max_age: Option<Duration>,
    },
    /// §2.3.1.3: a 4xx other than 429, or redirects that lead nowhere (§2.3.1.2): everything
    /// is allowed.
    Unavailable {
        /// The status, or [`FetchOutcome::RedirectLimit`].
        outcome: FetchOutcome,
        /// What the response's `Cache-Control` asks for, if anything.
        max_age: Option<Duration>,
    },
    /// §2.3.1.4: 429, 5xx, or a network error: everything is disallowed unless an earlier copy
    /// exists.
    Unreachable {
        /// The status or the network error.
        outcome: FetchOutcome,
    },
}

impl Fetched {
    /// The outcome to report, whatever the class.
    pub fn outcome(&self) -> FetchOutcome {
        match self {
            Fetched::Robots { status, .. } => FetchOutcome::Status(*status),
            Fetched::Unavailable { outcome, .. } | Fetched::Unreachable { outcome } => {
                outcome.clone()
            }
        }
    }
}

/// Why a fetch attempt failed at the network or protocol level. Every variant is "unreachable"
/// in the sense of RFC 9309 §2.3.1.4.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The URL is `https` and the fetcher has no TLS connector yet.
    #[error("https not supported yet")]
    HttpsUnsupported,
    /// The whole fetch took longer than `fetch_timeout`.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// Connecting, sending the request or reading the response head failed.
    #[error("{0}")]
    Request(String),
    /// Reading the response body failed (reset, bad chunking, …).
    #[error("reading the body: {0}")]
    Body(String),
    /// The body's `Content-Encoding` is unknown, or the body is not valid in it: unreachable,
    /// never an empty file.
    #[error("robots.txt body cannot be decoded: {0}")]
    Decode(#[from] decode::DecodeError),
    /// A URL that should have been valid could not be turned into a request.
    #[error("invalid request URL {0:?}")]
    Url(String),
    /// The origin answered with a status outside 2xx–5xx.
    #[error("unexpected status {0}")]
    Status(u16),
    /// The destination guard refused the address of the URL (or of a redirect).
    #[error("{0}")]
    Prohibited(String),
}

/// A file other than robots.txt fetched from an authority (`/.well-known/tdmrep.json`): the
/// final status and the body, read to at most `cap + 1` decoded bytes (so a longer body is
/// seen to be longer than the cap).
#[derive(Debug)]
pub struct FileFetched {
    /// The final status (after redirects).
    pub status: u16,
    /// The decoded body of a 2xx answer (empty otherwise).
    pub body: Vec<u8>,
}

/// The future of [`Fetch::fetch_file`].
pub type FileFuture = Pin<Box<dyn Future<Output = Result<FileFetched, FetchError>> + Send>>;

/// Something that fetches an authority's robots.txt. A trait object, so the cache does not
/// care which connector (plain TCP now, TLS later) or which store sits behind it.
pub trait Fetch: Send + Sync + 'static {
    /// Fetches `authority`'s robots.txt. The future owns everything it needs, so it can run as
    /// its own task.
    fn fetch(&self, authority: Authority) -> Pin<Box<dyn Future<Output = Fetched> + Send>>;

    /// Fetches another file of `authority` (path from the root), through the same client, guard
    /// and timeouts, reading at most `cap + 1` body bytes.
    fn fetch_file(&self, _authority: Authority, _path: &'static str, _cap: usize) -> FileFuture {
        Box::pin(async { Err(FetchError::Request("this fetcher fetches robots.txt only".into())) })
    }
}

/// The HTTP fetcher: a pooled hyper-util client over connector `C`.
///
/// `C` is [`HttpConnector`] for plain HTTP. A TLS connector (for example one that wraps an
/// `HttpConnector` with `enforce_http(false)`) can be plugged in with
/// [`HttpFetcher::with_connector`]; without one, `https` URLs fail as
/// "https not supported yet".
#[derive(Clone)]
pub(crate) struct HttpFetcher<C> {
    client: Client<C, Empty<Bytes>>,
    https: bool,
    user_agent: HeaderValue,
    fetch_timeout: Duration,
    max_redirects: u32,
    body_limit: usize,
}

impl HttpFetcher<HttpConnector> {
    /// A plain-HTTP fetcher with `settings`' timeouts and limits.
    pub(crate) fn plain(settings: &RobotsSection) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(settings.connect_timeout));
        connector.set_nodelay(true);
        Self::with_connector(settings, connector, false)
    }
}

impl<C> HttpFetcher<C>
where
    C: Connect + Clone + Send + Sync + 'static,
{
    /// A fetcher over `connector`; `https` says whether the connector can speak TLS. The
    /// connect timeout is the connector's business.
    pub(crate) fn with_connector(settings: &RobotsSection, connector: C, https: bool) -> Self {
        let client = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            // Nothing is kept idle: robots.txt is fetched once per lifetime per origin, so a
            // kept connection was almost never used again, and at 10,000 authorities the
            // idle ones cost a connection's buffers each (issue 22, `wide`).
            .pool_max_idle_per_host(0)
            .build(connector);
        let user_agent = HeaderValue::from_str(&settings.user_agent).unwrap_or_else(|_| {
            tracing::warn!(
                user_agent = %settings.user_agent,
                "robots.user_agent is not a valid header value; using the default"
            );
            HeaderValue::from_static(concat!("robots-proxy/", env!("CARGO_PKG_VERSION")))
        });
        HttpFetcher {
            client,
            https,
            user_agent,
            fetch_timeout: settings.fetch_timeout,
            max_redirects: settings.max_redirects,
            body_limit: body_limit(settings.max_body.0),
        }
    }

    /// Fetches `authority`'s robots.txt, within `fetch_timeout` for the whole attempt
    /// (redirects and body included).
    pub(crate) async fn fetch_robots(&self, authority: &Authority) -> Fetched {
        if authority.scheme() == Scheme::Https && !self.https {
            return unreachable(FetchError::HttpsUnsupported);
        }
        let url = authority.robots_url();
        match tokio::time::timeout(self.fetch_timeout, self.follow(&url)).await {
            Ok(Ok(fetched)) => fetched,
            Ok(Err(e)) => unreachable(e),
            Err(_) => unreachable(FetchError::Timeout(self.fetch_timeout)),
        }
    }

    /// Requests `start`, following redirects (RFC 9309 §2.3.1.2: "crawlers SHOULD follow at
    /// least five consecutive redirects, even across authorities"). Past `max_redirects` the
    /// file counts as unavailable, like a 404, as Google does.
    async fn follow(&self, start: &str) -> Result<Fetched, FetchError> {
        let mut url = url::Url::parse(start).map_err(|_| FetchError::Url(start.to_owned()))?;
        let mut redirects = 0u32;
        loop {
            let response = self.request(&url).await?;
            let status = response.status();
            if status.is_redirection() {
                // `304 Not Modified` to a GET without validators, and a redirect that leads
                // nowhere (no or bad `Location`, or a scheme other than http/https), say
                // nothing about the file: an origin in trouble, so "unreachable" (RFC 9309
                // §2.3.1.4: disallow all, or the earlier copy), never "not found", which would
                // allow everything (review-core N14). A chain past the limit stays a 404, as
                // Google reads it.
                let next = (status != StatusCode::NOT_MODIFIED)
                    .then(|| redirect_target(&url, response.headers()))
                    .flatten();
                let Some(next) = next else {
                    tracing::debug!(%url, status = status.as_u16(), "robots.txt redirect without a usable Location");
                    return Ok(Fetched::Unreachable {
                        outcome: FetchOutcome::Status(status.as_u16()),
                    });
                };
                if redirects >= self.max_redirects {
                    return Ok(Fetched::Unavailable {
                        outcome: FetchOutcome::RedirectLimit,
                        max_age: None,
                    });
                }
                redirects += 1;
                tracing::debug!(from = %url, to = %next, redirects, "robots.txt redirect");
                if next.scheme() == "https" && !self.https {
                    return Err(FetchError::HttpsUnsupported);
                }
                url = next;
                continue;
            }
            return self.classify(status, response).await;
        }
    }

    /// Sends one unconditional `GET` (RFC 9309 §2.3.1: the crawler identifies itself; no
    /// validators, so the answer is always a whole file), accepting the content codings the
    /// body decoder undoes ([`decode`]).
    async fn request(
        &self,
        url: &url::Url,
    ) -> Result<http::Response<hyper::body::Incoming>, FetchError> {
        let uri: Uri = url.as_str().parse().map_err(|_| FetchError::Url(url.to_string()))?;
        let request = Request::get(uri)
            .header(USER_AGENT, self.user_agent.clone())
            .header(ACCEPT_ENCODING, HeaderValue::from_static(decode::ACCEPT_ENCODING))
            .body(Empty::new())
            .map_err(|_| FetchError::Url(url.to_string()))?;
        self.client.request(request).await.map_err(|e| {
            match robots_proxy_net::guard::find_prohibited(&e) {
                Some(p) => FetchError::Prohibited(format!("robots.txt at {url}: {p}")),
                None => FetchError::Request(robots_proxy_net::error::describe(&e)),
            }
        })
    }

    /// Turns a final (non-redirect) response into a [`Fetched`] (RFC 9309 §2.3.1.1–4).
    async fn classify(
        &self,
        status: StatusCode,
        response: http::Response<hyper::body::Incoming>,
    ) -> Result<Fetched, FetchError> {
        let code = status.as_u16();
        if status.is_success() {
            let headers = response.headers().clone();
            let decoder = Decoder::new(&headers, self.body_limit)?;
            let body = read_capped(response.into_body(), decoder).await?;
            return Ok(robots_answer(code, &headers, body, self.body_limit));
        }
        if status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
            return Ok(Fetched::Unreachable { outcome: FetchOutcome::Status(code) });
        }
        if status.is_client_error() {
            let max_age = freshness_hint(response.headers());
            return Ok(Fetched::Unavailable { outcome: FetchOutcome::Status(code), max_age });
        }
        // 1xx as a final answer, or 600–999: not a valid robots.txt answer.
        Err(FetchError::Status(code))
    }
}

impl<C> Fetch for HttpFetcher<C>
where
    C: Connect + Clone + Send + Sync + 'static,
{
    fn fetch(&self, authority: Authority) -> Pin<Box<dyn Future<Output = Fetched> + Send>> {
        let this = self.clone();
        Box::pin(async move { this.fetch_robots(&authority).await })
    }

    fn fetch_file(&self, authority: Authority, path: &'static str, cap: usize) -> FileFuture {
        let this = self.clone();
        Box::pin(async move {
            let timeout = this.fetch_timeout;
            match tokio::time::timeout(timeout, this.fetch_other(&authority, path, cap)).await {
                Ok(result) => result,
                Err(_) => Err(FetchError::Timeout(timeout)),
            }
        })
    }
}

impl<C> HttpFetcher<C>
where
    C: Connect + Clone + Send + Sync + 'static,
{
    /// One file of `authority` other than robots.txt, following redirects like robots.txt
    /// (a redirect past the limit or without a usable `Location` is its status, no body).
    async fn fetch_other(
        &self,
        authority: &Authority,
        path: &str,
        cap: usize,
    ) -> Result<FileFetched, FetchError> {
        if authority.scheme() == Scheme::Https && !self.https {
            return Err(FetchError::HttpsUnsupported);
        }
        let start = format!("{authority}{path}");
        let mut url = url::Url::parse(&start).map_err(|_| FetchError::Url(start.clone()))?;
        let mut redirects = 0u32;
        loop {
            let response = self.request(&url).await?;
            let status = response.status();
            if status.is_redirection() && redirects < self.max_redirects {
                if let Some(next) = redirect_target(&url, response.headers()) {
                    if next.scheme() == "https" && !self.https {
                        return Err(FetchError::HttpsUnsupported);
                    }
                    redirects += 1;
                    url = next;
                    continue;
                }
            }
            if !status.is_success() {
                return Ok(FileFetched { status: status.as_u16(), body: Vec::new() });
            }
            let decoder = Decoder::new(response.headers(), cap)?;
            let body = read_capped(response.into_body(), decoder).await?;
            return Ok(FileFetched { status: status.as_u16(), body });
        }
    }
}

/// A 2xx robots.txt answer, from its response head and its body as [`Decoder::finish`] gave it
/// (at most `limit + 1` decoded bytes): the file parsed to at most `limit` bytes, whether its
/// origin reads paths case-insensitively, and the lifetime its `Cache-Control` asks for. The
/// one step from received bytes to rules, for the HTTP fetcher and the conformance kit
/// (`policy::conformance`), which serves the same file in every coding through it.
pub fn robots_answer(status: u16, headers: &HeaderMap, body: Vec<u8>, limit: usize) -> Fetched {
    let max_age = freshness_hint(headers);
    let folds_case = case_insensitive_server(headers);
    let robots = RobotsTxt::parse_with_limit(&body, limit).with_case_insensitive_origin(folds_case);
    let (robots, body) = (Arc::new(robots), bytes::Bytes::from(body));
    Fetched::Robots { status, robots, body, max_age }
}

/// The number of body bytes worth parsing: the configured limit, never below RFC 9309 §2.5's
/// 500 KiB.
pub fn body_limit(configured: u64) -> usize {
    usize::try_from(configured).unwrap_or(usize::MAX).max(MIN_SIZE_LIMIT)
}

fn unreachable(error: FetchError) -> Fetched {
    let outcome = match error {
        FetchError::Prohibited(why) => FetchOutcome::Prohibited(why),
        other => FetchOutcome::Network(other.to_string()),
    };
    Fetched::Unreachable { outcome }
}

/// Reads `body` through `decoder` until it ends or `decoder` holds `limit + 1` decoded bytes,
/// then stops (dropping the body closes the connection instead of draining it). The extra byte
/// lets [`RobotsTxt::parse_with_limit`] see that the file goes on past the limit and drop a
/// line the limit cut in two, so a rule is never shortened (RFC 9309 §2.5: content past the
/// limit is ignored, not an error). The limit counts decoded bytes, so a compressed body
/// cannot hold more memory than a plain one.
async fn read_capped(
    mut body: hyper::body::Incoming,
    mut decoder: Decoder,
) -> Result<Vec<u8>, FetchError> {
    while !decoder.is_full() {
        let Some(frame) = body.frame().await else { break };
        let frame = frame.map_err(|e| FetchError::Body(robots_proxy_net::error::describe(&e)))?;
        if let Ok(data) = frame.into_data() {
            decoder.push(&data)?;
        }
    }
    Ok(decoder.finish()?)
}

/// Where a redirect response points, resolved against the URL that was requested. `None` when
/// there is no `Location`, it is not a URL, or it is not http(s). A byte that is not ASCII
/// (raw UTF-8 or Latin-1 in the path, which `HeaderValue::to_str` refuses) is percent-encoded
/// as it is, and the redirect followed, as curl and browsers do.
fn redirect_target(base: &url::Url, headers: &HeaderMap) -> Option<url::Url> {
    let mut location = String::new();
    for &b in headers.get(LOCATION)?.as_bytes() {
        if b.is_ascii() {
            location.push(char::from(b));
        } else {
            location.push_str(&format!("%{b:02X}"));
        }
    }
    let mut next = base.join(location.trim()).ok()?;
    if !matches!(next.scheme(), "http" | "https") || next.host_str().is_none_or(str::is_empty) {
        return None;
    }
    next.set_fragment(None);
    Some(next)
}

/// Whether the robots.txt response names a server that reads paths case-insensitively (the
/// policy then decides a case-folded reading for the site, unless `policy.fold_case` says
/// otherwise):
///
/// * `Server: Microsoft-IIS/…` (IIS on NTFS) and `Server: Microsoft-HTTPAPI/…` (HTTP.sys);
/// * `Server: Kestrel` (ASP.NET Core, whose routing is case-insensitive by default);
/// * an Apache or nginx built for Windows (`Server: Apache/2.4.58 (Win64)`, `(Win32)`), whose
///   files live on NTFS;
/// * `X-Powered-By: ASP.NET` or `Express`, and `X-AspNet-Version` / `X-AspNetMvc-Version`.
fn case_insensitive_server(headers: &HeaderMap) -> bool {
    let has = |name: &str, word: &str| {
        headers.get_all(name).iter().any(|v| {
            let v = v.as_bytes();
            v.windows(word.len()).any(|w| w.eq_ignore_ascii_case(word.as_bytes()))
        })
    };
    has("server", "microsoft-iis")
        || has("server", "microsoft-httpapi")
        || has("server", "kestrel")
        || has("server", "(win32)")
        || has("server", "(win64)")
        || has("x-powered-by", "asp.net")
        || has("x-powered-by", "express")
        || headers.contains_key("x-aspnet-version")
        || headers.contains_key("x-aspnetmvc-version")
}

/// The lifetime `Cache-Control` asks for, before the cache clamps it between `min_age` and
/// `max_age` (RFC 9309 §2.4: "crawlers MAY use standard HTTP cache-control as defined in
/// RFC 9111").
///
/// * `s-maxage` wins over `max-age` (the proxy is a shared cache, RFC 9111 §5.2.2.10);
/// * several values: the smallest (RFC 9111 §4.2.1 allows the most restrictive);
/// * `no-store`, `no-cache` and `private`: as short as allowed (zero, clamped up to
///   `min_age`): the file is still used, but refetched soon;
/// * a value that is not a number: zero, like a stale response (RFC 9111 §1.2.2);
/// * no directive about lifetime: `None`, the configured `max_age` applies.
pub(crate) fn freshness_hint(headers: &HeaderMap) -> Option<Duration> {
    let mut max_age: Option<u64> = None;
    let mut s_maxage: Option<u64> = None;
    let mut no_store = false;
    for value in headers.get_all(CACHE_CONTROL) {
        let Ok(value) = value.to_str() else { continue };
        for directive in value.split(',') {
            let (name, arg) = match directive.split_once('=') {
                Some((n, a)) => (n.trim(), Some(a.trim().trim_matches('"'))),
                None => (directive.trim(), None),
            };
            let seconds = || arg.and_then(|a| a.parse::<u64>().ok()).unwrap_or(0);
            if name.eq_ignore_ascii_case("max-age") {
                max_age = Some(max_age.map_or(seconds(), |m| m.min(seconds())));
            } else if name.eq_ignore_ascii_case("s-maxage") {
                s_maxage = Some(s_maxage.map_or(seconds(), |m| m.min(seconds())));
            } else if ["no-store", "no-cache", "private"]
                .iter()
                .any(|d| name.eq_ignore_ascii_case(d))
            {
                no_store = true;
            }
        }
    }
    if no_store {
        return Some(Duration::ZERO);
    }
    s_maxage.or(max_age).map(Duration::from_secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(values: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(CACHE_CONTROL, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    /// Review-core N6 (review-tests F5): which origins get the case-folded reading.
    #[test]
    fn case_insensitive_servers_are_detected() {
        let one = |name: &'static str, value: &str| {
            let mut h = HeaderMap::new();
            h.insert(name, HeaderValue::from_str(value).unwrap());
            case_insensitive_server(&h)
        };
        for (name, value) in [
            ("server", "Microsoft-IIS/10.0"),
            ("server", "Microsoft-HTTPAPI/2.0"),
            ("server", "Kestrel"),
            ("server", "Apache/2.4.58 (Win64) OpenSSL/3.1.3"),
            ("server", "Apache/2.4.41 (Win32)"),
            ("x-powered-by", "ASP.NET"),
            ("x-powered-by", "Express"),
            ("x-aspnet-version", "4.0.30319"),
            ("x-aspnetmvc-version", "5.2"),
        ] {
            assert!(one(name, value), "{name}: {value}");
        }
        for (name, value) in [
            ("server", "nginx/1.27.0"),
            ("server", "Apache/2.4.58 (Debian)"),
            ("server", "cloudflare"),
            ("x-powered-by", "PHP/8.3"),
        ] {
            assert!(!one(name, value), "{name}: {value}");
        }
    }

    #[test]
    fn cache_control_hints() {
        assert_eq!(freshness_hint(&headers(&[])), None);
        assert_eq!(freshness_hint(&headers(&["public"])), None);
        assert_eq!(freshness_hint(&headers(&["max-age=120"])), Some(Duration::from_secs(120)));
        assert_eq!(
            freshness_hint(&headers(&["public, MAX-AGE = \"300\""])),
            Some(Duration::from_secs(300))
        );
        assert_eq!(
            freshness_hint(&headers(&["max-age=300", "max-age=100"])),
            Some(Duration::from_secs(100))
        );
        assert_eq!(
            freshness_hint(&headers(&["max-age=10, s-maxage=600"])),
            Some(Duration::from_secs(600))
        );
        assert_eq!(freshness_hint(&headers(&["max-age=soon"])), Some(Duration::ZERO));
        assert_eq!(freshness_hint(&headers(&["no-store"])), Some(Duration::ZERO));
        assert_eq!(freshness_hint(&headers(&["max-age=600, no-cache"])), Some(Duration::ZERO));
    }

    #[test]
    fn redirect_targets() {
        let base = url::Url::parse("http://a.test:8080/robots.txt").unwrap();
        let loc = |l: &str| {
            let mut h = HeaderMap::new();
            h.insert(LOCATION, HeaderValue::from_str(l).unwrap());
            redirect_target(&base, &h).map(|u| u.to_string())
        };
        assert_eq!(loc("/r2").as_deref(), Some("http://a.test:8080/r2"));
        assert_eq!(loc("next#frag").as_deref(), Some("http://a.test:8080/next"));
        assert_eq!(loc("https://b.test/robots.txt").as_deref(), Some("https://b.test/robots.txt"));
        assert_eq!(loc("//c.test/x").as_deref(), Some("http://c.test/x"));
        assert_eq!(loc("ftp://b.test/robots.txt"), None);
        assert_eq!(redirect_target(&base, &HeaderMap::new()), None);
        // Bytes that are not ASCII (issue 42, L2): percent-encoded as they are, and followed.
        let raw = |bytes: &'static [u8]| {
            let mut h = HeaderMap::new();
            h.insert(LOCATION, HeaderValue::from_bytes(bytes).unwrap());
            redirect_target(&base, &h).map(|u| u.to_string())
        };
        let utf8 = raw(b"/r/robots-caf\xc3\xa9.txt");
        assert_eq!(utf8.as_deref(), Some("http://a.test:8080/r/robots-caf%C3%A9.txt"));
        let latin1 = raw(b"/r/robots-caf\xe9.txt");
        assert_eq!(latin1.as_deref(), Some("http://a.test:8080/r/robots-caf%E9.txt"));
    }

    #[test]
    fn body_limit_never_below_minimum() {
        assert_eq!(body_limit(0), MIN_SIZE_LIMIT);
        assert_eq!(body_limit(2 << 20), 2 << 20);
    }
}
