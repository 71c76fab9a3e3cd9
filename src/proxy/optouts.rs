//! The other machine-readable opt-outs in the data path (issue 20, part 3; parsing in
//! [`crate::policy::optout`]): `X-Robots-Tag: noai` and TDMRep, each counting as `train-ai=n`
//! for the response they apply to. Only reached for crawlers with configured purposes
//! ([`crate::usage`]), so nothing of this runs when `[usage]` names no crawler.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::Response;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame};

use super::facts::Facts;
use super::{BodyError, ProxyBody};
use crate::policy::optout::{self, HtmlMeta, TdmStatement};
use crate::policy::{Category, Preference, UsagePreferences};
use crate::usage::UsagePolicy;

/// The TDMRep reservation that applied to a response, for the audit record.
#[derive(Debug, Default)]
pub(super) struct TdmApplied {
    /// The `tdm-policy` URL of the statement that decided, if it gave one.
    pub(super) policy: Option<String>,
}

/// The TDMRep statement of the response head: `tdm-reservation` and `tdm-policy`. A
/// `tdm-reservation` other than `0` or `1` is unset (logged), and leaves the file's rule in force.
fn header_statement(facts: &Facts, resp: &Response<ProxyBody>) -> Option<TdmStatement> {
    let value = resp.headers().get("tdm-reservation")?;
    let text = value.to_str().unwrap_or("");
    let reserved = optout::tdm_reservation(text);
    if reserved.is_none() {
        tracing::info!(
            url = %crate::output::log(facts.url()),
            value = %crate::output::log(String::from_utf8_lossy(value.as_bytes())),
            "ignoring a tdm-reservation header that is neither 0 nor 1 (TDMRep: unset)"
        );
        return None;
    }
    let policy = resp
        .headers()
        .get("tdm-policy")
        .and_then(|v| v.to_str().ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty());
    Some(TdmStatement { reserved, policy })
}

/// The most bytes of an HTML response read before deciding, to find its `<meta>` elements:
/// reading stops earlier at `</head>` or `<body`, or when the body ends.
pub(super) const META_PREFIX_BYTES: usize = 16 * 1024;

/// A body whose first frames were read already (to look at an HTML head): they are sent first,
/// then the rest of the body as it comes.
struct Prefixed {
    read: VecDeque<Result<Frame<Bytes>, BodyError>>,
    rest: Option<ProxyBody>,
}

impl Body for Prefixed {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        if let Some(frame) = self.read.pop_front() {
            return Poll::Ready(Some(frame));
        }
        match self.rest.as_mut() {
            Some(rest) => Pin::new(rest).poll_frame(cx),
            None => Poll::Ready(None),
        }
    }
}

/// Whether the response is an HTML document whose bytes can be read as they are (no content
/// coding other than `identity`).
fn readable_html(resp: &Response<ProxyBody>) -> bool {
    let html = resp
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim_start().to_ascii_lowercase())
        .is_some_and(|v| v.starts_with("text/html") || v.starts_with("application/xhtml+xml"));
    let coded = resp
        .headers()
        .get_all(http::header::CONTENT_ENCODING)
        .iter()
        .any(|v| !v.as_bytes().trim_ascii().eq_ignore_ascii_case(b"identity"));
    html && !coded
}

/// For a training crawler and an HTML response (when TDMRep or X-Robots-Tag is on), reads the
/// start of the body, at most [`META_PREFIX_BYTES`] and only up to the end of the head, and
/// reads its `<meta name="tdm-reservation">`, `tdm-policy` and `robots` elements. The bytes
/// read are sent on unchanged before the rest of the body. Cost: that many bytes held per
/// response, and the response head waits for them (not for the whole body).
pub(super) async fn read_meta(
    usage: &UsagePolicy,
    facts: &Facts,
    purposes: &[crate::usage::Purpose],
    resp: Response<ProxyBody>,
) -> (Response<ProxyBody>, Option<HtmlMeta>) {
    let wanted = (usage.tdmrep() || usage.x_robots_tag())
        && purposes.iter().any(|p| p.category == Category::TrainAi)
        && readable_html(&resp);
    if !wanted {
        return (resp, None);
    }
    let (parts, mut body) = resp.into_parts();
    let mut read = VecDeque::new();
    let mut prefix: Vec<u8> = Vec::new();
    let mut ended = false;
    while prefix.len() < META_PREFIX_BYTES && !head_ended(&prefix) {
        match body.frame().await {
            None => {
                ended = true;
                break;
            }
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    let room = META_PREFIX_BYTES - prefix.len();
                    prefix.extend_from_slice(&data[..data.len().min(room)]);
                }
                read.push_back(Ok(frame));
            }
            Some(Err(e)) => {
                read.push_back(Err(e));
                ended = true;
                break;
            }
        }
    }
    let token = facts.token().map(|t| t.as_str());
    let meta = optout::html_meta(&prefix, token);
    let rest = (!ended).then_some(body);
    let body = Prefixed { read, rest }.boxed_unsync();
    (Response::from_parts(parts, body), Some(meta))
}

/// Whether `prefix` holds the end of the HTML head already.
fn head_ended(prefix: &[u8]) -> bool {
    let has = |needle: &[u8]| prefix.windows(needle.len()).any(|w| w.eq_ignore_ascii_case(needle));
    has(b"</head") || has(b"<body")
}

/// Merges `X-Robots-Tag: noai` (when `usage.x_robots_tag`: the header, or `<meta
/// name="robots">`) and TDMRep (when `usage.tdmrep`: the `<meta name="tdm-reservation">` of
/// the head, else the response's `tdm-reservation` header, else the `tdmrep.json` rule `file`
/// that matched the path) into `prefs` as `train-ai=n` statements naming their source.
pub(super) fn apply(
    usage: &UsagePolicy,
    facts: &Facts,
    file: Option<&TdmStatement>,
    meta: Option<&HtmlMeta>,
    resp: &Response<ProxyBody>,
    prefs: &mut UsagePreferences,
) -> TdmApplied {
    if usage.x_robots_tag() {
        let token = facts.token().map(|t| t.as_str());
        let noai = resp
            .headers()
            .get_all("x-robots-tag")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| optout::x_robots_noai(v, token));
        if noai {
            prefs.add_signal(Category::TrainAi, Preference::Disallow, "X-Robots-Tag");
        }
        if meta.is_some_and(|m| m.noai) {
            prefs.add_signal(Category::TrainAi, Preference::Disallow, "meta robots");
        }
    }
    if !usage.tdmrep() {
        return TdmApplied::default();
    }
    // The meta tag overrides the header, which overrides the file, for this resource.
    let (statement, source) =
        match (meta.and_then(|m| m.tdm.clone()), header_statement(facts, resp)) {
            (Some(s), _) => (Some(s), "meta"),
            (None, Some(s)) => (Some(s), "tdm-reservation header"),
            (None, None) => (file.cloned(), "tdmrep.json"),
        };
    match statement {
        Some(TdmStatement { reserved: Some(true), policy }) => {
            prefs.add_signal(Category::TrainAi, Preference::Disallow, source);
            TdmApplied { policy }
        }
        _ => TdmApplied::default(),
    }
}

/// The `tdmrep.json` rule for the request's path, when TDMRep is on and one of the crawler's
/// purposes (not `off`) is `train-ai`: the file is fetched (or taken from the cache) before
/// the request leaves, and applied when the response head has come (its header overrides it).
///
/// Decided on every reading of the path, as robots.txt is ([`crate::policy::Policy::tdm_statement`]).
pub(super) async fn file_statement(
    policy: &crate::policy::Policy,
    usage: &UsagePolicy,
    facts: &Facts,
    snapshot: &crate::policy::RobotsSnapshot,
    purposes: &[crate::usage::Purpose],
) -> Option<TdmStatement> {
    if !usage.tdmrep() || !purposes.iter().any(|p| p.category == Category::TrainAi) {
        return None;
    }
    let site = policy.tdmrep(&facts.authority).await;
    let file = site.file.as_ref()?;
    policy.tdm_statement(snapshot, file, &facts.readings).cloned()
}
