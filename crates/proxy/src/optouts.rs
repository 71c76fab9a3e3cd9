//! The other machine-readable opt-outs in the data path (issue 20, part 3; parsing in
//! [`robots_proxy_decide::optout`]): `X-Robots-Tag: noai` and TDMRep, each counting as `train-ai=n`
//! for the response they apply to. Only reached for crawlers with configured purposes
//! ([`robots_proxy_decide::usage`]), so nothing of this runs when `[usage]` names no crawler.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::Response;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame};

use super::facts::Facts;
use super::{BodyError, ProxyBody};
use robots_proxy_decide::optout::{
    self, HtmlMeta, OptOutField, TdmStatement, Unparsed, META_PREFIX_BYTES,
};
use robots_proxy_decide::usage::UsagePolicy;
use robots_proxy_decide::{Category, DecodeError, Decoder, Preference, UsagePreferences};

/// The TDMRep reservation that applied to a response, for the audit record.
#[derive(Debug, Default)]
pub(super) struct TdmApplied {
    /// The `tdm-policy` URL of the statement that decided, if it gave one.
    pub(super) policy: Option<String>,
}

/// The TDMRep statement of the response head: `tdm-reservation` and `tdm-policy`, read by the
/// shared reader ([`optout::tdm_reservation_lines`], [`optout::field_text`]). A
/// `tdm-reservation` other than `0` or `1` is unset (noted in `unparsed`), and leaves the file's
/// rule in force. Several `tdm-reservation` lines (or a list in one) are read together, the
/// reserving one winning: the order of the lines never lifts a reservation.
fn header_statement(resp: &Response<ProxyBody>, unparsed: &mut Unparsed) -> Option<TdmStatement> {
    let values = resp.headers().get_all("tdm-reservation");
    let reserved = optout::tdm_reservation_lines(values.iter().map(|v| v.as_bytes()), unparsed)?;
    let policy = resp
        .headers()
        .get("tdm-policy")
        .map(|v| optout::field_text(OptOutField::TdmPolicy, v.as_bytes(), unparsed))
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty());
    Some(TdmStatement { reserved: Some(reserved), policy })
}

/// Logs the opt-out fields of a response that could not be parsed as a whole (once per
/// response): they were read as far as they could be, and the audit record names them.
pub(super) fn log_unparsed(facts: &Facts, unparsed: &Unparsed) {
    if let Some(names) = unparsed.names() {
        tracing::info!(
            url = %facts.url(),
            fields = %names,
            "opt-out fields that do not parse as a whole: read as far as they could be"
        );
    }
}

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

/// The most bytes of a content-coded HTML body read (as sent, coded) to decode its head: four
/// times [`META_PREFIX_BYTES`], so that a page that barely compresses is still read that far
/// and one that does not decode never holds more.
const META_CODED_BYTES: usize = 4 * META_PREFIX_BYTES;

/// Whether the response is an HTML document.
fn is_html(resp: &Response<ProxyBody>) -> bool {
    resp.headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim_start().to_ascii_lowercase())
        .is_some_and(|v| v.starts_with("text/html") || v.starts_with("application/xhtml+xml"))
}

/// The decoder of the start of an HTML body, for its head only (the coded bytes are forwarded
/// as they came): crawlers choose `Accept-Encoding`, and almost all ask for gzip, so a page's
/// `<meta>` opt-outs must be read through its coding, or a crawler could evade them. It is the
/// robots.txt fetcher's ([`robots_proxy_decide::Decoder`]: gzip and deflate, stacked or not), keeping
/// at most [`META_PREFIX_BYTES`]` + 1` decoded bytes however much the coded bytes inflate to.
fn head_decoder(resp: &Response<ProxyBody>) -> Result<Decoder, DecodeError> {
    Decoder::new(resp.headers(), META_PREFIX_BYTES)
}

/// Decodes the next piece of the body and writes out all it decoded to, so that
/// [`Decoder::decoded`] holds the page so far.
fn push(decoder: &mut Decoder, piece: &[u8]) -> Result<(), DecodeError> {
    decoder.push(piece)?;
    decoder.flush()
}

/// For a training crawler and an HTML response (when TDMRep or X-Robots-Tag is on), reads the
/// start of the body, at most [`META_PREFIX_BYTES`] of the page and only up to the end of the
/// head, and reads its `<meta name="tdm-reservation">`, `tdm-policy` and `robots` elements. A
/// gzip- or deflate-coded page (or one in a stack of them) is decoded for that, reading at most
/// [`META_CODED_BYTES`] as sent and keeping at most [`META_PREFIX_BYTES`]` + 1` decoded; one in
/// another coding (`br`, `zstd`), or that does not decode, is logged as not read. The bytes read
/// are sent on unchanged before the rest of the body. Cost: that many bytes held per response,
/// and the response head waits for them (not for the whole body).
pub(super) async fn read_meta(
    usage: &UsagePolicy,
    facts: &Facts,
    purposes: &[robots_proxy_decide::usage::Purpose],
    resp: Response<ProxyBody>,
) -> (Response<ProxyBody>, Option<HtmlMeta>) {
    let wanted = (usage.tdmrep() || usage.x_robots_tag())
        && purposes.iter().any(|p| p.category == Category::TrainAi)
        && is_html(&resp);
    if !wanted {
        return (resp, None);
    }
    let mut decoder = match head_decoder(&resp) {
        Ok(decoder) => decoder,
        Err(why) => {
            not_read(facts, &why.to_string());
            return (resp, None);
        }
    };
    let (parts, mut body) = resp.into_parts();
    let mut read = VecDeque::new();
    let mut coded = 0usize;
    let mut ended = false;
    let mut head = HeadEnd::default();
    while decoder.decoded().len() < META_PREFIX_BYTES
        && !head.found(decoder.decoded())
        && coded < META_CODED_BYTES
    {
        match body.frame().await {
            None => {
                ended = true;
                break;
            }
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    let room = META_CODED_BYTES - coded;
                    let piece = &data[..data.len().min(room)];
                    coded += piece.len();
                    if let Err(e) = push(&mut decoder, piece) {
                        not_read(facts, &format!("it does not decode: {e}"));
                        read.push_back(Ok(frame));
                        break;
                    }
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
    // As text: a page in UTF-16 (with its byte-order mark) is transcoded, once.
    let page = decoder.text();
    let meta = optout::html_meta(&page[..page.len().min(META_PREFIX_BYTES)], token);
    let rest = (!ended).then_some(body);
    let body = Prefixed { read, rest }.boxed_unsync();
    (Response::from_parts(parts, body), Some(meta))
}

/// Logs that a page's `<meta>` opt-outs could not be read (`why`): the response goes on,
/// decided without them.
fn not_read(facts: &Facts, why: &str) {
    tracing::info!(
        url = %facts.url(),
        why = %why,
        "the page's <meta> opt-outs were not read"
    );
}

/// Looks for the end of the HTML head in a prefix that grows by a frame at a time, scanning
/// each byte about once: an origin that sends its page one byte per frame must not make the
/// proxy scan the whole prefix again for every byte (quadratic in [`META_PREFIX_BYTES`]).
#[derive(Default)]
struct HeadEnd {
    /// How much of the prefix was scanned already.
    scanned: usize,
    /// Bytes looked at in all, for the tests (the work, not the time).
    examined: usize,
}

impl HeadEnd {
    /// The markers that end the head.
    const MARKERS: [&'static [u8]; 2] = [b"</head", b"<body"];
    /// A marker may straddle what was scanned and what is new by this many bytes.
    const OVERLAP: usize = 5;

    /// Whether `prefix` (the page so far: what was given last time and more) holds the end of
    /// the head.
    fn found(&mut self, prefix: &[u8]) -> bool {
        let from = self.scanned.saturating_sub(Self::OVERLAP).min(prefix.len());
        let new = &prefix[from..];
        self.scanned = prefix.len();
        self.examined += new.len();
        Self::MARKERS.iter().any(|m| new.windows(m.len()).any(|w| w.eq_ignore_ascii_case(m)))
    }
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
    unparsed: &mut Unparsed,
) -> TdmApplied {
    if let Some(meta) = meta {
        unparsed.extend(&meta.unparsed);
    }
    if usage.x_robots_tag() {
        let token = facts.token().map(|t| t.as_str());
        // Read from the bytes, as robots.txt lines are: one byte that is not ASCII elsewhere in
        // the field (`unavailable_after: 1 Janvier 2030 été`) must not hide its `noai`. Every
        // line is read (and noted if it does not parse), not only up to the first `noai`.
        let mut noai = false;
        for v in resp.headers().get_all("x-robots-tag") {
            let text = optout::field_text(OptOutField::XRobotsTag, v.as_bytes(), unparsed);
            noai |= optout::x_robots_noai(&text, token);
        }
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
    // The meta tag overrides the header, which overrides the file, for this resource; a
    // source that gives no `tdm-policy` keeps the one a lower source gave (TDMRep, "Processing
    // priority": absence must not reset the current value).
    let header = header_statement(resp, unparsed);
    let file_policy = || file.and_then(|f| f.policy.clone());
    let (statement, source) = match (meta.and_then(|m| m.tdm.clone()), header) {
        (Some(mut s), h) => {
            if s.policy.is_none() {
                s.policy = h.and_then(|h| h.policy).or_else(file_policy);
            }
            (Some(s), "meta")
        }
        (None, Some(mut s)) => {
            if s.policy.is_none() {
                s.policy = file_policy();
            }
            (Some(s), "tdm-reservation header")
        }
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
/// Decided on every reading of the path, as robots.txt is ([`robots_proxy_decide::Decision::tdm_statement`]).
pub(super) async fn file_statement(
    policy: &robots_proxy_decide::Policy,
    usage: &UsagePolicy,
    facts: &Facts,
    decision: &robots_proxy_decide::Decision<'_>,
    purposes: &[robots_proxy_decide::usage::Purpose],
) -> Option<TdmStatement> {
    if !usage.tdmrep() || !purposes.iter().any(|p| p.category == Category::TrainAi) {
        return None;
    }
    let site = policy.tdmrep(&facts.authority).await;
    let file = site.file.as_ref()?;
    decision.tdm_statement(file).cloned()
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    #[test]
    fn the_head_end_is_found_across_frames_scanning_each_byte_about_once() {
        // One byte per frame: the whole prefix, grown a byte at a time.
        let page = format!("<html><HEAD>{}</HeAd><body>", "x".repeat(META_PREFIX_BYTES - 40));
        let mut head = HeadEnd::default();
        let end = (1..=page.len()).find(|&n| head.found(&page.as_bytes()[..n]));
        assert_eq!(end, Some(page.find("</HeAd").unwrap() + "</head".len()));
        // Scanning the prefix again for every byte would look at n²/2 bytes (2 GiB here).
        let n = end.unwrap();
        assert!(head.examined <= (HeadEnd::OVERLAP + 1) * n, "{} bytes looked at", head.examined);
        // `<body` alone ends the head too; no marker, no end.
        let mut head = HeadEnd::default();
        assert!(!head.found(b"<html><bo"));
        assert!(head.found(b"<html><bodY>"));
        assert!(!HeadEnd::default().found(b"<html><head><title>"));
    }

    fn html(coding: &str) -> Response<ProxyBody> {
        let body =
            http_body_util::Empty::<Bytes>::new().map_err(|never| match never {}).boxed_unsync();
        Response::builder()
            .header(http::header::CONTENT_TYPE, "text/html")
            .header(http::header::CONTENT_ENCODING, coding)
            .body(body)
            .unwrap()
    }

    /// A coded head that inflates far past the cap (one [`META_CODED_BYTES`] piece of gzipped
    /// zeros inflates to megabytes) is cut at it: the memory held per response is bounded by the
    /// page cap, not by what the origin's bytes inflate to.
    #[test]
    fn a_highly_compressible_coded_head_is_cut_at_the_cap() {
        for coding in ["gzip", "deflate", "gzip, gzip"] {
            let mut coded = vec![0u8; 4 << 20];
            for layer in coding.split(", ") {
                coded = if layer == "gzip" {
                    let mut e =
                        flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
                    e.write_all(&coded).unwrap();
                    e.finish().unwrap()
                } else {
                    let mut e =
                        flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
                    e.write_all(&coded).unwrap();
                    e.finish().unwrap()
                };
            }
            let mut decoder = head_decoder(&html(coding)).unwrap();
            let piece = &coded[..coded.len().min(META_CODED_BYTES)];
            push(&mut decoder, piece).unwrap();
            assert!(
                decoder.decoded().len() <= META_PREFIX_BYTES + 1,
                "{coding}: {}",
                decoder.decoded().len()
            );
            assert!(
                decoder.decoded().len() >= META_PREFIX_BYTES,
                "{coding}: {}",
                decoder.decoded().len()
            );
        }
        // A page that does not decode, or in a coding not decoded here, is an error (not read).
        let mut decoder = head_decoder(&html("gzip")).unwrap();
        assert!(push(&mut decoder, b"<html><head>").is_err());
        assert!(head_decoder(&html("br")).is_err());
    }
}
