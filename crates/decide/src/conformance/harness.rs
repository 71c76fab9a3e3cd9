//! The kit's harness: a [`Site`] served from memory through the real robots store, and the
//! decision of each request as the proxy's pipeline makes it ([`Site::judge`]).

use std::future::Future;
use std::io::Write;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

use http::{HeaderMap, HeaderValue};

use super::TOKEN;
use crate::exceptions::{Effect, ExceptionEntry, Exceptions};
use crate::usage::{Settled, UsageCrawler, UsagePolicy, UsageSection};
use crate::{Claim, Policy, PolicySection, ProductToken, Readings};
use robots_proxy_authority::Authority;
use robots_proxy_clock::SystemClock;
use robots_proxy_engine::optout;
use robots_proxy_engine::usage::{Category, Preference};
use robots_proxy_sitefiles::decode::{DecodeError, Decoder};
use robots_proxy_sitefiles::fetch::{self, Fetch, Fetched, FileFetched, FileFuture};
use robots_proxy_sitefiles::{FetchOutcome, RobotsCache, RobotsSection};

/// The authenticated proxy user tied to [`TOKEN`] in [`Who::Tied`].
pub(crate) const USER: &str = "crawler-1";

/// The most bytes of an HTML response read for its `<meta>` opt-outs.
pub(crate) use optout::META_PREFIX_BYTES;

/// How a site's bodies (robots.txt, `tdmrep.json`, the HTML page) are served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Coding {
    /// As written.
    Identity,
    /// `Content-Encoding: gzip`.
    Gzip,
    /// `Content-Encoding: deflate`, zlib-wrapped (RFC 9110 §8.4.1.2).
    Deflate,
    /// `Content-Encoding: deflate`, raw (what some servers send).
    RawDeflate,
    /// `Content-Encoding: gzip, gzip`.
    GzipTwice,
    /// `Transfer-Encoding: gzip, chunked`.
    TransferGzip,
    /// `Content-Encoding: identity, X-GZIP` (names are case-insensitive, `x-gzip` is gzip).
    NamedOtherwise,
    /// A UTF-8 byte-order mark first.
    Bom,
    /// Lines ending in CR LF.
    Crlf,
    /// Lines ending in CR alone.
    Cr,
    /// UTF-16 little-endian with its byte-order mark.
    Utf16Le,
    /// UTF-16 big-endian with its byte-order mark.
    Utf16Be,
}

impl Coding {
    /// Every coding.
    pub(crate) const ALL: [Coding; 12] = [
        Coding::Identity,
        Coding::Gzip,
        Coding::Deflate,
        Coding::RawDeflate,
        Coding::GzipTwice,
        Coding::TransferGzip,
        Coding::NamedOtherwise,
        Coding::Bom,
        Coding::Crlf,
        Coding::Cr,
        Coding::Utf16Le,
        Coding::Utf16Be,
    ];

    /// `text` as served in this coding: the response's headers and its bytes.
    fn serve(self, text: &str) -> (HeaderMap, Vec<u8>) {
        let mut headers = HeaderMap::new();
        let mut coded = |field: http::header::HeaderName, value: &'static str| {
            headers.insert(field, HeaderValue::from_static(value));
        };
        let gzip = |b: &[u8]| {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(b).and_then(|()| e.finish()).expect("gzip in memory")
        };
        let bytes = match self {
            Coding::Identity => text.as_bytes().to_vec(),
            Coding::Gzip => {
                coded(http::header::CONTENT_ENCODING, "gzip");
                gzip(text.as_bytes())
            }
            Coding::Deflate => {
                coded(http::header::CONTENT_ENCODING, "deflate");
                let mut e =
                    flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
                e.write_all(text.as_bytes()).and_then(|()| e.finish()).expect("zlib in memory")
            }
            Coding::RawDeflate => {
                coded(http::header::CONTENT_ENCODING, "deflate");
                let mut e =
                    flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
                e.write_all(text.as_bytes()).and_then(|()| e.finish()).expect("deflate in memory")
            }
            Coding::GzipTwice => {
                coded(http::header::CONTENT_ENCODING, "gzip, gzip");
                gzip(&gzip(text.as_bytes()))
            }
            Coding::TransferGzip => {
                coded(http::header::TRANSFER_ENCODING, "gzip, chunked");
                gzip(text.as_bytes())
            }
            Coding::NamedOtherwise => {
                coded(http::header::CONTENT_ENCODING, "identity, X-GZIP");
                gzip(text.as_bytes())
            }
            Coding::Bom => [&b"\xEF\xBB\xBF"[..], text.as_bytes()].concat(),
            Coding::Crlf => text.replace('\n', "\r\n").into_bytes(),
            Coding::Cr => text.replace('\n', "\r").into_bytes(),
            Coding::Utf16Le => {
                let units = text.encode_utf16().flat_map(u16::to_le_bytes);
                [0xFF, 0xFE].into_iter().chain(units).collect()
            }
            Coding::Utf16Be => {
                let units = text.encode_utf16().flat_map(u16::to_be_bytes);
                [0xFE, 0xFF].into_iter().chain(units).collect()
            }
        };
        (headers, bytes)
    }
}

/// One body as the origin sends it: its head and its bytes in the frames they arrive in.
#[derive(Debug, Clone)]
struct Served {
    headers: HeaderMap,
    frames: Vec<Vec<u8>>,
}

impl Served {
    fn new(text: &str, coding: Coding, frame: usize) -> Served {
        let (headers, bytes) = coding.serve(text);
        let frames = bytes.chunks(frame.max(1)).map(<[u8]>::to_vec).collect();
        Served { headers, frames }
    }

    /// The body as the fetcher reads it (`cache::fetch::read_capped`): through the one
    /// [`Decoder`], frame by frame, until it ends or `cap + 1` decoded bytes are held.
    fn receive(&self, cap: usize) -> Result<Vec<u8>, DecodeError> {
        let mut decoder = Decoder::new(&self.headers, cap)?;
        for frame in &self.frames {
            if decoder.is_full() {
                break;
            }
            decoder.push(frame)?;
        }
        decoder.finish()
    }

    /// The page's start as the proxy reads it for its `<meta>` opt-outs
    /// (`proxy::optouts::read_meta`): through the one [`Decoder`], at most
    /// [`META_PREFIX_BYTES`] of it. `None`: it does not decode (not read, logged).
    fn head(&self) -> Option<Vec<u8>> {
        let mut decoder = Decoder::new(&self.headers, META_PREFIX_BYTES).ok()?;
        for frame in &self.frames {
            if decoder.decoded().len() >= META_PREFIX_BYTES {
                break;
            }
            decoder.push(frame).ok()?;
            decoder.flush().ok()?;
        }
        let page = decoder.text();
        Some(page[..page.len().min(META_PREFIX_BYTES)].to_vec())
    }
}

/// What a site says: its files, its responses' opt-outs, and the proxy's configuration for it.
/// Every rule is written by a source ([`super::RuleSource::refuse`]).
#[derive(Debug, Clone)]
pub(crate) struct Site {
    /// How the site's authority is written where a rule names it (`host[:port]`, over http):
    /// the spelling the first request uses, and an exception's `authorities`.
    pub(crate) written_at: String,
    /// robots.txt (a `*` group allowing everything comes first).
    pub(crate) robots: String,
    /// The rules of `tdmrep.json` (JSON objects), when it has any.
    pub(crate) tdmrep: Vec<String>,
    /// The opt-out header fields of every response (`X-Robots-Tag`, `Content-Usage`,
    /// `tdm-reservation`): name and value.
    pub(crate) headers: Vec<(&'static str, String)>,
    /// `<meta>` elements in the head of every HTML response.
    pub(crate) meta: Vec<String>,
    /// `[[exceptions]]`.
    pub(crate) exceptions: Vec<ExceptionEntry>,
    /// `policy.report_tokens`.
    pub(crate) report_tokens: Vec<String>,
    /// Whether the origin's robots.txt answer names IIS (`Server: Microsoft-IIS/10.0`): an
    /// origin that folds case.
    pub(crate) folds_case: bool,
    /// How every body is served.
    pub(crate) coding: Coding,
    /// The size of the frames the bodies arrive in.
    pub(crate) frame: usize,
    /// Filler before the rules of each body (neutral lines, rules or elements, of about this
    /// many bytes).
    pub(crate) pad_before: usize,
    /// Filler after the rules of each body.
    pub(crate) pad_after: usize,
}

/// Who a request says it is.
#[derive(Debug, Clone)]
pub(crate) enum Who {
    /// This `User-Agent` header, nothing else.
    UserAgent(String),
    /// This `X-Robots-Product-Token` header (and a browser's User-Agent).
    Header(String),
    /// The user [`USER`], tied to this token by its credentials (and a browser's User-Agent).
    Tied(String),
    /// No token sent: `policy.default_token` (set to [`TOKEN`] for every site) names it.
    Default,
}

impl Who {
    /// The crawler as it names itself in its User-Agent.
    pub(crate) fn crawler() -> Who {
        Who::UserAgent(format!("Mozilla/5.0 (compatible; {TOKEN}/1.0; +https://example.test)"))
    }
}

/// One request: the authority as spelled in its request-target (`host[:port]`, over http),
/// its path and query, and who it says it is.
#[derive(Debug, Clone)]
pub(crate) struct Ask {
    /// `host[:port]`.
    pub(crate) at: String,
    /// The path and query.
    pub(crate) path: String,
    /// Who.
    pub(crate) who: Who,
}

impl Ask {
    /// The crawler asks `path` at the site's authority as written.
    pub(crate) fn path(site: &Site, path: &str) -> Ask {
        Ask { at: site.written_at.clone(), path: path.to_owned(), who: Who::crawler() }
    }
}

/// What the proxy does with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Outcome {
    /// Some source refuses it (robots.txt, an exception, a usage preference before or after
    /// the response).
    pub(crate) refused: bool,
    /// The refusal is enforced (not only reported: report-only mode).
    pub(crate) enforced: bool,
    /// How many readings of the path were decided (work, bounded whatever the path).
    pub(crate) readings: usize,
}

/// An exception entry with `effect` for `token` at the site's authority as written, on
/// `pattern`.
pub(crate) fn exception(effect: Effect, site: &Site, token: &str, pattern: &str) -> ExceptionEntry {
    ExceptionEntry {
        id: format!("{}-{}", effect.name(), site.exceptions.len()),
        authorities: vec![site.written_at.clone()],
        tokens: vec![token.into()],
        users: vec![],
        paths: vec![pattern.into()],
        effect,
        reference: Some("https://origin.test/permission".into()),
        granted_by: Some("tests".into()),
        expires: Some("2999-01-01T00:00:00Z".into()),
        usage: vec![],
    }
}

/// The origin: answers robots.txt and `tdmrep.json` for one authority (404 for any other),
/// and counts the robots.txt fetches.
struct Origin {
    authority: Authority,
    robots: Served,
    tdmrep: Option<Served>,
    limit: usize,
    fetches: AtomicUsize,
    /// The most decoded bytes a body held.
    decoded: AtomicUsize,
}

impl Origin {
    /// `served` as the fetcher reads it, its decoded size counted.
    fn receive(&self, served: &Served, cap: usize) -> Result<Vec<u8>, DecodeError> {
        let body = served.receive(cap)?;
        self.decoded.fetch_max(body.len(), Ordering::Relaxed);
        Ok(body)
    }
}

impl Fetch for Origin {
    fn fetch(&self, authority: Authority) -> Pin<Box<dyn Future<Output = Fetched> + Send>> {
        self.fetches.fetch_add(1, Ordering::Relaxed);
        let fetched = if authority != self.authority {
            Fetched::Unavailable { outcome: FetchOutcome::Status(404), max_age: None }
        } else {
            match self.receive(&self.robots, self.limit) {
                Ok(body) => fetch::robots_answer(200, &self.robots.headers, body, self.limit),
                Err(e) => Fetched::Unreachable { outcome: FetchOutcome::Network(e.to_string()) },
            }
        };
        Box::pin(async move { fetched })
    }

    fn fetch_file(&self, authority: Authority, _path: &'static str, cap: usize) -> FileFuture {
        let answer = match (&self.tdmrep, authority == self.authority) {
            (Some(served), true) => self
                .receive(served, cap)
                .map(|body| FileFetched { status: 200, body })
                .map_err(fetch::FetchError::from),
            _ => Ok(FileFetched { status: 404, body: Vec::new() }),
        };
        Box::pin(async move { answer })
    }
}

impl Site {
    /// A site at `written_at` with no rule: robots.txt allows everything.
    pub(crate) fn at(written_at: &str) -> Site {
        Site {
            written_at: written_at.to_owned(),
            robots: String::new(),
            tdmrep: Vec::new(),
            headers: Vec::new(),
            meta: Vec::new(),
            exceptions: Vec::new(),
            report_tokens: Vec::new(),
            folds_case: false,
            coding: Coding::Identity,
            frame: usize::MAX,
            pad_before: 0,
            pad_after: 0,
        }
    }

    /// A site at `origin.test` (port 80).
    pub(crate) fn new() -> Site {
        Site::at("origin.test")
    }

    /// The authority the site's files are served for: `written_at` read as configuration
    /// reads a site (Unicode allowed), over http.
    pub(crate) fn authority(&self) -> Authority {
        let site = robots_proxy_authority::SiteName::parse(&self.written_at).expect("a valid site");
        let port = site.port().unwrap_or(80);
        Authority::new(robots_proxy_authority::Scheme::Http, site.host(), port)
            .expect("a valid site")
    }

    /// robots.txt as written: the `*` group, then (when a source wrote rules) filler groups,
    /// the rules, more filler groups. Each body is padded only when it carries a rule.
    pub(crate) fn robots_txt(&self) -> String {
        let filler = |n: usize| {
            let mut out = String::new();
            let mut i = 0;
            while out.len() < n {
                out.push_str(&format!("User-agent: FillerBot{i}\nDisallow: /filler/{i}\n"));
                i += 1;
            }
            out
        };
        let mut text = String::from("User-agent: *\nAllow: /\n\n");
        if self.robots.is_empty() {
            return text;
        }
        text.push_str(&filler(self.pad_before));
        text.push_str(&self.robots);
        text.push_str(&filler(self.pad_after));
        text
    }

    /// `tdmrep.json` as written, when the site has one.
    pub(crate) fn tdmrep_json(&self) -> Option<String> {
        if self.tdmrep.is_empty() {
            return None;
        }
        let filler = |n: usize, from: usize| {
            let mut out = Vec::new();
            let (mut len, mut i) = (0, from);
            while len < n {
                let rule = format!(r#"{{"location": "/filler/{i}", "tdm-reservation": 0}}"#);
                len += rule.len() + 2;
                out.push(rule);
                i += 1;
            }
            out
        };
        let mut rules = filler(self.pad_before, 0);
        rules.extend(self.tdmrep.iter().cloned());
        rules.extend(filler(self.pad_after, 1 << 20));
        Some(format!("[\n{}\n]\n", rules.join(",\n")))
    }

    /// The values of the response's header field `name`, each between filler of its kind
    /// (other directives, other members), as the site's padding asks.
    pub(crate) fn header(&self, name: &str) -> Vec<String> {
        let filler: &str = match name {
            "x-robots-tag" => "nosnippet, max-snippet: 20, ",
            "content-usage" => "search=y, ai-use=y, ",
            _ => "0, ",
        };
        let pad = |n: usize| filler.repeat(n / filler.len());
        let (before, after) = (pad(self.pad_before), pad(self.pad_after));
        let values = self.headers.iter().filter(|(n, _)| *n == name);
        values
            .map(|(_, v)| format!("{before}{v}, {after}").trim_end_matches([',', ' ']).to_owned())
            .collect()
    }

    /// The HTML page's start: its head with the `<meta>` elements between the filler.
    pub(crate) fn page(&self) -> String {
        let filler = |n: usize| {
            let mut out = String::new();
            while out.len() < n {
                out.push_str("<meta name=\"generator\" content=\"filler\">\n");
            }
            out
        };
        if self.meta.is_empty() {
            return "<!DOCTYPE html>\n<html>\n<head>\n<title>x</title>\n</head>\n".to_owned();
        }
        format!(
            "<!DOCTYPE html>\n<html>\n<head>\n<title>x</title>\n{}{}\n{}</head>\n<body>x</body>\n",
            filler(self.pad_before),
            self.meta.join("\n"),
            filler(self.pad_after)
        )
    }

    /// Decides each of `asks` in turn, with one robots store (a later request finds what an
    /// earlier one fetched), as the proxy does; and how many robots.txt fetches they took.
    pub(crate) fn judge(&self, asks: &[Ask]) -> (Vec<Outcome>, Work) {
        let runtime =
            tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        runtime.block_on(self.judge_in(asks))
    }

    /// The one request's outcome.
    pub(crate) fn outcome(&self, ask: &Ask) -> Outcome {
        self.judge(std::slice::from_ref(ask)).0[0]
    }

    async fn judge_in(&self, asks: &[Ask]) -> (Vec<Outcome>, Work) {
        let (policy, origin) = self.policy();
        let usage = UsagePolicy::new(&UsageSection {
            crawlers: vec![UsageCrawler {
                token: Some(TOKEN.into()),
                user: None,
                purposes: vec!["train-ai".into()],
            }],
            ..UsageSection::default()
        });
        let page = Served::new(&self.page(), self.coding, self.frame);
        let mut outcomes = Vec::with_capacity(asks.len());
        for ask in asks {
            outcomes.push(self.decide(&policy, &usage, &page, &origin, ask).await);
        }
        let fetches = origin.fetches.load(Ordering::Relaxed);
        (outcomes, Work { fetches, decoded: origin.decoded.load(Ordering::Relaxed) })
    }

    /// The site's policy, as the proxy builds it: one robots store fetching from the site's
    /// origin (which it returns, to count the fetches), `TOKEN` as the default token, the
    /// site's report-only tokens and exceptions.
    fn policy(&self) -> (Policy, Arc<Origin>) {
        let settings = RobotsSection::default();
        let limit = fetch::body_limit(settings.max_body.0);
        let mut robots = Served::new(&self.robots_txt(), self.coding, self.frame);
        if self.folds_case {
            robots.headers.insert("server", HeaderValue::from_static("Microsoft-IIS/10.0"));
        }
        let tdmrep = self.tdmrep_json().map(|t| Served::new(&t, self.coding, self.frame));
        let origin = Arc::new(Origin {
            authority: self.authority(),
            robots,
            tdmrep,
            limit,
            fetches: AtomicUsize::new(0),
            decoded: AtomicUsize::new(0),
        });
        let store = RobotsCache::with_fetcher(settings, Arc::new(SystemClock), origin.clone());
        let section = PolicySection {
            report_tokens: self.report_tokens.clone(),
            default_token: Some(ProductToken::new(TOKEN).expect("a valid token")),
            ..PolicySection::default()
        };
        let exceptions = Arc::new(Exceptions::new(&self.exceptions));
        (Policy::new(&section, Arc::new(store)).with_exceptions(exceptions), origin)
    }

    /// One request, as the proxy's exchange (`proxy::pipeline`, `Exchange::run`) decides it for a
    /// training crawler.
    async fn decide(
        &self,
        policy: &Policy,
        usage: &UsagePolicy,
        page: &Served,
        served: &Origin,
        ask: &Ask,
    ) -> Outcome {
        let Some(authority) = authority_of(&ask.at) else {
            // A request-target with no valid authority is refused (400) before anything.
            return Outcome { refused: true, enforced: true, readings: 0 };
        };
        let readings = Readings::of(&ask.path);
        let mut headers = HeaderMap::new();
        let browser = HeaderValue::from_static("Mozilla/5.0 (X11; Linux x86_64)");
        let mut tied = None;
        match &ask.who {
            Who::UserAgent(ua) => {
                headers.insert(http::header::USER_AGENT, value(ua));
            }
            Who::Header(token) => {
                headers.insert(http::header::USER_AGENT, browser);
                headers.insert(policy.token_header().clone(), value(token));
            }
            Who::Tied(token) => {
                headers.insert(http::header::USER_AGENT, browser);
                tied = Some(ProductToken::new(token).expect("a valid token"));
            }
            Who::Default => {}
        }
        let user = tied.as_ref().map(|_| USER);
        let (token, origin) = policy.token_for_user(tied.as_ref(), &headers);
        let claim = Claim { token: token.as_ref(), origin, user };
        let snapshot = policy.robots(&authority).await;
        let decision = policy.decide(&snapshot, claim, &readings, SystemTime::now());
        let decided = decision.each().len();
        let mut refused = !decision.is_allowed();
        let mut purposes = usage.purposes_for(token.as_ref(), user);
        if let Some((lifted, _)) = decision.usage_lifted() {
            purposes.retain(|p| !lifted.contains(&p.category));
        }
        if !refused && !purposes.is_empty() {
            let mut prefs = decision.usage();
            refused = usage.blocking(&purposes, &prefs, Settled::No).is_some();
            if !refused {
                // The response (`proxy::preferences::on_response`, `proxy::optouts::apply`):
                // its `Content-Usage`, `X-Robots-Tag` and `tdm-reservation` fields, its page's
                // `<meta>` elements, and the file's statement for the path (the meta wins
                // over the header, which wins over the file).
                let mut unparsed = optout::Unparsed::default();
                for value in self.header("content-usage") {
                    let field = optout::OptOutField::ContentUsage;
                    let text = optout::field_text(field, value.as_bytes(), &mut unparsed);
                    prefs.add_header_read(&text);
                }
                let tdm = policy.tdmrep(&authority).await;
                let file = tdm.file.as_ref().and_then(|f| decision.tdm_statement(f)).cloned();
                let name = token.as_ref().map(ProductToken::as_str);
                let noai =
                    self.header("x-robots-tag").iter().any(|v| optout::x_robots_noai(v, name));
                let head = page.head();
                if let Some(head) = &head {
                    served.decoded.fetch_max(head.len(), Ordering::Relaxed);
                }
                let meta = head.map(|head| optout::html_meta(&head, name));
                if noai || meta.as_ref().is_some_and(|m| m.noai) {
                    prefs.add_signal(Category::TrainAi, Preference::Disallow, "noai");
                }
                let lines = self.header("tdm-reservation");
                let header = optout::tdm_reservation_lines(
                    lines.iter().map(|v| v.as_bytes()),
                    &mut unparsed,
                )
                .map(|reserved| optout::TdmStatement { reserved: Some(reserved), policy: None });
                let statement = meta.and_then(|m| m.tdm).or(header).or(file);
                if statement.is_some_and(|s| s.reserved == Some(true)) {
                    prefs.add_signal(Category::TrainAi, Preference::Disallow, "tdmrep");
                }
                refused = usage.blocking(&purposes, &prefs, Settled::Yes).is_some();
            }
        }
        let enforced = refused && !policy.reports(claim);
        Outcome { refused, enforced, readings: decided }
    }
}

/// The most robots.txt bytes parsed, with the default `robots.max_body`.
pub(crate) fn robots_limit() -> usize {
    fetch::body_limit(RobotsSection::default().max_body.0)
}

/// The work a site's requests took: robots.txt fetches, and the most decoded bytes any one
/// body held (bounded by its cap, whatever it inflates to).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Work {
    /// robots.txt fetches.
    pub(crate) fetches: usize,
    /// The most decoded bytes of one body (robots.txt, `tdmrep.json`, the page's head).
    pub(crate) decoded: usize,
}

/// The authority of `http://{at}/` as the proxy reads a request-target
/// ([`Authority::from_uri`]); `None` when it has none.
pub(crate) fn authority_of(at: &str) -> Option<Authority> {
    let uri: http::Uri = format!("http://{at}/").parse().ok()?;
    Authority::from_uri(&uri).ok()
}

fn value(text: &str) -> HeaderValue {
    HeaderValue::from_str(text).expect("a header value")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A decision made on the store's snapshot names that snapshot and the exception that
    /// decided, and counts the exception's use only when asked (the proxy asks when it acts on
    /// the decision). Survivors of the decision's mutation run (`Decision::site`,
    /// `Decision::exception`, `Decision::count_exception`): the decision's own unit tests
    /// decide without a store, and exceptions need one.
    #[test]
    fn an_exception_decides_on_the_store_s_snapshot_and_is_counted_when_asked() {
        let mut site = Site::new();
        site.robots = format!("User-agent: {TOKEN}\nDisallow: /private\n");
        let allow = exception(Effect::Allow, &site, TOKEN, "/private/open");
        site.exceptions.push(allow);
        let (policy, origin) = site.policy();
        let authority = site.authority();
        let runtime =
            tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        let snapshot = runtime.block_on(policy.robots(&authority));
        assert_eq!(origin.fetches.load(Ordering::Relaxed), 1);
        let token = ProductToken::new(TOKEN).expect("a valid token");
        // An allow exception applies only to a token tied to an authenticated user.
        let claim = Claim::tied(Some(&token), Some(USER));
        let now = SystemTime::now();
        let uses = || policy.exceptions().views(now)[0].uses;

        let open = Readings::of("/private/open/x");
        let d = policy.decide(&snapshot, claim, &open, now);
        assert!(d.is_allowed() && !d.robots_allowed(), "{:?}", d.explain());
        assert_eq!(d.site().map(|s| &s.authority), Some(&authority));
        assert_eq!(d.exception().map(|v| &*v.id), Some("allow-0"));
        assert_eq!(uses(), 0, "deciding counts no use");
        d.count_exception();
        assert_eq!(uses(), 1);

        // No exception decides: nothing is counted.
        let closed = Readings::of("/private/x");
        let d = policy.decide(&snapshot, claim, &closed, now);
        assert!(!d.is_allowed() && d.exception().is_none());
        assert_eq!(d.site().map(|s| &s.authority), Some(&authority));
        d.count_exception();
        assert_eq!(uses(), 1);
    }
}
