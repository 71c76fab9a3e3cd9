//! From a robots.txt response body to the bytes the engine parses: content codings undone
//! (RFC 9110 §8.4), a UTF-16 file transcoded to UTF-8, and at most `limit + 1` decoded bytes
//! kept however large the body would decode to.
//!
//! * **Codings**: `gzip` (and `x-gzip`, several members allowed), `deflate` (zlib-wrapped as
//!   RFC 9110 §8.4.1.2 says, or the raw deflate some servers send) and `identity`, stacked in
//!   any order. The fetcher asks for exactly these (`Accept-Encoding: gzip, deflate`): with no
//!   `Accept-Encoding` at all any coding would be acceptable (RFC 9110 §12.5.3), so a server
//!   could answer `br` or `zstd` within its rights. Servers send gzip unasked anyway (files
//!   stored pre-compressed), so decoding does not depend on having asked.
//! * **The size cap applies to the decoded bytes**, while decoding: decompression stops once
//!   `limit + 1` bytes are out, so a gzip bomb costs `limit` bytes of memory, not what it
//!   would expand to. What is past the cap is ignored exactly as for a plain file (the extra
//!   byte tells [`robots_proxy_engine::RobotsTxt::parse_with_limit`] that a line was cut).
//! * **What cannot be decoded** (a coding not listed above, a corrupt or truncated stream) is
//!   an error, which the fetcher reports as unreachable (RFC 9309 §2.3.1.4: disallow all, or
//!   the earlier copy), never as an empty file that would allow everything.
//! * **UTF-16 with a byte-order mark** (`FF FE` or `FE FF`) is transcoded to UTF-8, which is
//!   what its author meant; unpaired surrogates become U+FFFD. The cap counts the file's own
//!   bytes. Without a BOM the body is taken as UTF-8, as RFC 9309 §2.2 says.

use std::io::{self, Write};

use flate2::write::{DeflateDecoder, MultiGzDecoder, ZlibDecoder};
use http::header::{HeaderMap, CONTENT_ENCODING, TRANSFER_ENCODING};

/// What the fetcher sends as `Accept-Encoding`: the codings [`Decoder`] undoes.
pub(super) const ACCEPT_ENCODING: &str = "gzip, deflate";

/// More codings stacked on one body than anyone sends: refused rather than decoded.
const MAX_CODINGS: usize = 4;

/// Why a body could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// `Content-Encoding` or `Transfer-Encoding` names a coding this decoder does not know, or
    /// too many.
    #[error("unsupported coding {0:?}")]
    Unsupported(String),
    /// The body is not a valid stream of its coding (bad header, bad data, truncated).
    #[error("corrupt {coding} body: {source}")]
    Corrupt {
        /// The coding that failed.
        coding: &'static str,
        /// What the decompressor said.
        source: io::Error,
    },
}

/// A content coding this decoder undoes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Coding {
    Gzip,
    Deflate,
}

impl Coding {
    fn name(self) -> &'static str {
        match self {
            Coding::Gzip => "gzip",
            Coding::Deflate => "deflate",
        }
    }
}

/// The codings of `headers`' `Content-Encoding` fields, then those of its
/// `Transfer-Encoding` fields, in the order they were applied (`identity` left out).
///
/// A transfer coding is applied after every content coding (RFC 9112 §6.1), so it comes last
/// here and is undone first. hyper undoes `chunked` and nothing else: a body sent with
/// `Transfer-Encoding: gzip, chunked` (or `gzip` alone, read to close) still arrives gzipped,
/// and would parse as a binary file with no rules. `gzip` and `deflate` are undone as the
/// content codings are (the cap on decoded bytes applies); `chunked` is skipped; any other
/// transfer coding is [`DecodeError::Unsupported`], which the fetcher reports as unreachable.
fn codings(headers: &HeaderMap) -> Result<Vec<Coding>, DecodeError> {
    let mut out = Vec::new();
    for (field, transfer) in [(CONTENT_ENCODING, false), (TRANSFER_ENCODING, true)] {
        for value in headers.get_all(field) {
            let text = value.to_str().map_err(|_| {
                DecodeError::Unsupported(String::from_utf8_lossy(value.as_bytes()).into())
            })?;
            for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                // Transfer codings may carry parameters (RFC 9112 §7): none of ours take any.
                let name = name.split(';').next().unwrap_or_default().trim();
                let coding = if name.eq_ignore_ascii_case("gzip")
                    || name.eq_ignore_ascii_case("x-gzip")
                {
                    Coding::Gzip
                } else if name.eq_ignore_ascii_case("deflate") {
                    Coding::Deflate
                } else if name.eq_ignore_ascii_case(if transfer { "chunked" } else { "identity" }) {
                    // hyper undid `chunked`; `identity` is no coding at all.
                    continue;
                } else {
                    let which = if transfer { "Transfer-Encoding" } else { "Content-Encoding" };
                    return Err(DecodeError::Unsupported(format!("{which} {name}")));
                };
                out.push(coding);
            }
        }
    }
    if out.len() > MAX_CODINGS {
        return Err(DecodeError::Unsupported(format!("{} codings stacked", out.len())));
    }
    Ok(out)
}

/// Where decoded bytes end up: at most `cap` of them. Past it, writes fail, which stops the
/// decompressors feeding it.
struct Capped {
    out: Vec<u8>,
    cap: usize,
}

impl Capped {
    fn is_full(&self) -> bool {
        self.out.len() >= self.cap
    }
}

impl Write for Capped {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let room = self.cap.saturating_sub(self.out.len());
        if room == 0 && !buf.is_empty() {
            return Err(io::Error::other("decoded size limit reached"));
        }
        let n = buf.len().min(room);
        self.out.extend_from_slice(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The decoders, outermost (the last coding applied, which the body bytes reach first)
/// around the innermost, around the [`Capped`] output.
enum Chain {
    Plain(Capped),
    Gzip(Box<MultiGzDecoder<Chain>>),
    Zlib(Box<ZlibDecoder<Chain>>),
    RawDeflate(Box<DeflateDecoder<Chain>>),
    /// `deflate` before its first two bytes tell a zlib header from raw deflate data.
    Deflate {
        head: Vec<u8>,
        next: Box<Chain>,
    },
}

impl Chain {
    fn output(&self) -> &Capped {
        match self {
            Chain::Plain(capped) => capped,
            Chain::Gzip(d) => d.get_ref().output(),
            Chain::Zlib(d) => d.get_ref().output(),
            Chain::RawDeflate(d) => d.get_ref().output(),
            Chain::Deflate { next, .. } => next.output(),
        }
    }

    fn into_output(self) -> Capped {
        match self {
            Chain::Plain(capped) => capped,
            // The decoders are finished (or abandoned) by now: only their output is wanted.
            Chain::Gzip(mut d) => std::mem::replace(d.get_mut(), Chain::empty()).into_output(),
            Chain::Zlib(mut d) => std::mem::replace(d.get_mut(), Chain::empty()).into_output(),
            Chain::RawDeflate(mut d) => {
                std::mem::replace(d.get_mut(), Chain::empty()).into_output()
            }
            Chain::Deflate { next, .. } => next.into_output(),
        }
    }

    fn empty() -> Chain {
        Chain::Plain(Capped { out: Vec::new(), cap: 0 })
    }

    /// The coding at this level, for error messages.
    fn coding(&self) -> &'static str {
        match self {
            Chain::Plain(_) => "identity",
            Chain::Gzip(_) => Coding::Gzip.name(),
            Chain::Zlib(_) | Chain::RawDeflate(_) | Chain::Deflate { .. } => Coding::Deflate.name(),
        }
    }

    /// A `deflate` level that has seen enough bytes picks its decoder: a zlib header is a
    /// compression method of 8 in the low nibble and a big-endian check value divisible by 31
    /// (RFC 1950 §2.2); anything else is taken as raw deflate (RFC 1951).
    fn settle_deflate(&mut self, finishing: bool) -> io::Result<()> {
        let Chain::Deflate { head, next } = self else { return Ok(()) };
        if head.len() < 2 && !finishing {
            return Ok(());
        }
        let head = std::mem::take(head);
        let next = std::mem::replace(next.as_mut(), Chain::empty());
        let zlib = head.len() >= 2
            && head[0] & 0x0f == 8
            && (u16::from(head[0]) << 8 | u16::from(head[1])) % 31 == 0;
        *self = if zlib {
            Chain::Zlib(Box::new(ZlibDecoder::new(next)))
        } else {
            Chain::RawDeflate(Box::new(DeflateDecoder::new(next)))
        };
        self.write_all(&head)
    }

    /// Ends every level, outermost first: trailing output is written, and a stream that
    /// stops before its end is an error.
    fn finish(&mut self) -> io::Result<()> {
        self.settle_deflate(true)?;
        match self {
            Chain::Plain(_) | Chain::Deflate { .. } => Ok(()),
            Chain::Gzip(d) => {
                d.try_finish()?;
                d.get_mut().finish()
            }
            Chain::Zlib(d) => {
                d.try_finish()?;
                d.get_mut().finish()
            }
            Chain::RawDeflate(d) => {
                d.try_finish()?;
                d.get_mut().finish()
            }
        }
    }
}

impl Write for Chain {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if let Chain::Deflate { head, .. } = self {
            let take = buf.len().min(2 - head.len().min(2));
            head.extend_from_slice(&buf[..take]);
            self.settle_deflate(false)?;
            if take > 0 {
                return Ok(take);
            }
        }
        match self {
            Chain::Plain(capped) => capped.write(buf),
            Chain::Gzip(d) => d.write(buf),
            Chain::Zlib(d) => d.write(buf),
            Chain::RawDeflate(d) => d.write(buf),
            Chain::Deflate { .. } => Ok(0),
        }
    }

    /// Writes out what every level decoded so far (flate2's writers hold up to one buffer of
    /// output until the next write), so that [`Decoder::decoded`] sees it. A `deflate` level
    /// that has not yet seen two bytes holds them and writes nothing.
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Chain::Plain(_) | Chain::Deflate { .. } => Ok(()),
            Chain::Gzip(d) => d.flush(),
            Chain::Zlib(d) => d.flush(),
            Chain::RawDeflate(d) => d.flush(),
        }
    }
}

/// Decodes one response body as it arrives (see the [module documentation](self)).
pub struct Decoder {
    chain: Chain,
    limit: usize,
    received: bool,
}

impl Decoder {
    /// A decoder for a body sent with `headers`, keeping at most `limit + 1` decoded bytes.
    pub fn new(headers: &HeaderMap, limit: usize) -> Result<Decoder, DecodeError> {
        let cap = limit.saturating_add(1);
        let mut chain = Chain::Plain(Capped { out: Vec::new(), cap });
        for coding in codings(headers)? {
            chain = match coding {
                Coding::Gzip => Chain::Gzip(Box::new(MultiGzDecoder::new(chain))),
                Coding::Deflate => Chain::Deflate { head: Vec::new(), next: Box::new(chain) },
            };
        }
        Ok(Decoder { chain, limit, received: false })
    }

    /// Whether the decoded bytes reached the cap: nothing more of the body is needed.
    pub fn is_full(&self) -> bool {
        self.chain.output().is_full()
    }

    /// Decodes the next piece of the body.
    pub fn push(&mut self, data: &[u8]) -> Result<(), DecodeError> {
        if data.is_empty() || self.is_full() {
            return Ok(());
        }
        self.received = true;
        match self.chain.write_all(data) {
            Ok(()) => Ok(()),
            // Stopped by the cap: what is past it is ignored, not an error.
            Err(_) if self.is_full() => Ok(()),
            Err(source) => Err(DecodeError::Corrupt { coding: self.chain.coding(), source }),
        }
    }

    /// Writes out everything the body decoded to so far, for [`Decoder::decoded`] (the body
    /// need not have ended). Errors as [`Decoder::push`] does; reaching the cap is none.
    pub fn flush(&mut self) -> Result<(), DecodeError> {
        if self.is_full() {
            return Ok(());
        }
        match self.chain.flush() {
            Ok(()) => Ok(()),
            Err(_) if self.is_full() => Ok(()),
            Err(source) => Err(DecodeError::Corrupt { coding: self.chain.coding(), source }),
        }
    }

    /// The bytes decoded so far, as they came (at most `limit + 1`; no UTF-16 transcoding):
    /// call [`Decoder::flush`] first to see all that the pieces pushed decode to.
    pub fn decoded(&self) -> &[u8] {
        &self.chain.output().out
    }

    /// The bytes decoded so far as text: in UTF-8 when they start with a UTF-16 byte-order
    /// mark (transcoded as [`Decoder::finish`] does), else as they came. The one reading of a
    /// body's start as text, for every reader of a prefix (the proxy's `<meta>` opt-outs), so
    /// that a page in UTF-16 says what it says in UTF-8 (found by the conformance kit,
    /// `policy::conformance`). Call [`Decoder::flush`] first.
    pub fn text(&self) -> std::borrow::Cow<'_, [u8]> {
        let out = &self.chain.output().out;
        match out.get(..2) {
            Some([0xff, 0xfe] | [0xfe, 0xff]) => {
                std::borrow::Cow::Owned(utf16_to_utf8(out.clone(), self.limit))
            }
            _ => std::borrow::Cow::Borrowed(out),
        }
    }

    /// The decoded body (at most `limit + 1` bytes), in UTF-8 when it was UTF-16 with a BOM.
    /// A stream that ends early is an error, unless the cap was reached first; an empty body
    /// is an empty file whatever its `Content-Encoding` says.
    pub fn finish(mut self) -> Result<Vec<u8>, DecodeError> {
        if self.received && !self.is_full() {
            if let Err(source) = self.chain.finish() {
                if !self.is_full() {
                    return Err(DecodeError::Corrupt { coding: self.chain.coding(), source });
                }
            }
        }
        let out = self.chain.into_output().out;
        Ok(utf16_to_utf8(out, self.limit))
    }
}

/// `body` in UTF-8 when it starts with a UTF-16 byte-order mark, else unchanged. `body` holds
/// at most `limit + 1` bytes of the file; when it holds more than `limit`, the file went on
/// past the cap, and the line the cap cut is dropped (as for a UTF-8 file), so a rule is never
/// shortened.
fn utf16_to_utf8(body: Vec<u8>, limit: usize) -> Vec<u8> {
    let little_endian = match body.get(..2) {
        Some([0xff, 0xfe]) => true,
        Some([0xfe, 0xff]) => false,
        _ => return body,
    };
    let cut = body.len() > limit;
    let end = body.len().min(limit);
    let units = body[2..end].chunks_exact(2).map(|pair| {
        let pair = [pair[0], pair[1]];
        if little_endian {
            u16::from_le_bytes(pair)
        } else {
            u16::from_be_bytes(pair)
        }
    });
    let text: String =
        char::decode_utf16(units).map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER)).collect();
    let mut out = text.into_bytes();
    if cut && !matches!(out.last(), Some(b'\n' | b'\r')) {
        let keep = memchr::memrchr2(b'\n', b'\r', &out).map_or(0, |p| p + 1);
        out.truncate(keep);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::write::{DeflateEncoder, GzEncoder, ZlibEncoder};
    use flate2::Compression;
    use http::HeaderValue;

    const RULES: &[u8] = b"User-agent: *\nDisallow: /private\n";

    fn headers(encoding: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(CONTENT_ENCODING, HeaderValue::from_str(encoding).unwrap());
        h
    }

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = GzEncoder::new(Vec::new(), Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn decode(encoding: &str, body: &[u8], limit: usize) -> Result<Vec<u8>, DecodeError> {
        let mut decoder = Decoder::new(&headers(encoding), limit)?;
        // In small pieces, as frames arrive.
        for piece in body.chunks(7) {
            decoder.push(piece)?;
            if decoder.is_full() {
                break;
            }
        }
        decoder.finish()
    }

    #[test]
    fn codings_are_undone() {
        assert_eq!(decode("identity", RULES, 100).unwrap(), RULES);
        assert_eq!(decode("gzip", &gzip(RULES), 100).unwrap(), RULES);
        assert_eq!(decode("X-Gzip", &gzip(RULES), 100).unwrap(), RULES);
        let mut zlib = ZlibEncoder::new(Vec::new(), Compression::default());
        zlib.write_all(RULES).unwrap();
        assert_eq!(decode("deflate", &zlib.finish().unwrap(), 100).unwrap(), RULES);
        let mut raw = DeflateEncoder::new(Vec::new(), Compression::default());
        raw.write_all(RULES).unwrap();
        assert_eq!(decode("deflate", &raw.finish().unwrap(), 100).unwrap(), RULES);
        // Applied in order: gzip first, then gzip again.
        assert_eq!(decode("gzip, identity, gzip", &gzip(&gzip(RULES)), 100).unwrap(), RULES);
        // Two gzip members make one file.
        let two = [gzip(b"User-agent: *\n"), gzip(b"Disallow: /private\n")].concat();
        assert_eq!(decode("gzip", &two, 100).unwrap(), RULES);
        // Nothing sent: an empty file.
        assert_eq!(decode("gzip", b"", 100).unwrap(), b"");
    }

    /// Review-core N1: hyper undoes `chunked` only, so a body sent with `Transfer-Encoding:
    /// gzip, chunked` (or `gzip` read to close) arrives gzipped. It is decoded like a content
    /// coding, after it (a transfer coding is applied last); any other transfer coding is
    /// refused, never read as a file with no rules.
    #[test]
    fn transfer_codings_are_undone_or_refused() {
        let with = |content: Option<&str>, transfer: &str| {
            let mut h = HeaderMap::new();
            if let Some(c) = content {
                h.insert(CONTENT_ENCODING, HeaderValue::from_str(c).unwrap());
            }
            h.insert(TRANSFER_ENCODING, HeaderValue::from_str(transfer).unwrap());
            h
        };
        let run = |h: &HeaderMap, body: &[u8]| {
            let mut decoder = Decoder::new(h, 100)?;
            decoder.push(body)?;
            decoder.finish()
        };
        assert_eq!(run(&with(None, "gzip, chunked"), &gzip(RULES)).unwrap(), RULES);
        assert_eq!(run(&with(None, "gzip"), &gzip(RULES)).unwrap(), RULES);
        assert_eq!(run(&with(None, "chunked"), RULES).unwrap(), RULES);
        let mut zlib = ZlibEncoder::new(Vec::new(), Compression::default());
        zlib.write_all(RULES).unwrap();
        assert_eq!(run(&with(None, "Deflate, chunked"), &zlib.finish().unwrap()).unwrap(), RULES);
        // Content coding first, then the transfer coding over it.
        assert_eq!(run(&with(Some("gzip"), "gzip, chunked"), &gzip(&gzip(RULES))).unwrap(), RULES);
        for other in ["compress, chunked", "br", "x-custom, chunked", "identity"] {
            let refused = run(&with(None, other), RULES);
            assert!(matches!(refused, Err(DecodeError::Unsupported(_))), "{other}: {refused:?}");
        }
        // The cap counts decoded bytes here too.
        let big = vec![b'#'; 10_000];
        let mut decoder = Decoder::new(&with(None, "gzip, chunked"), 100).unwrap();
        decoder.push(&gzip(&big)).unwrap();
        assert_eq!(decoder.finish().unwrap().len(), 101);
    }

    #[test]
    fn what_cannot_be_decoded_is_an_error() {
        assert!(matches!(decode("br", RULES, 100), Err(DecodeError::Unsupported(_))));
        assert!(matches!(decode("gzip, zstd", RULES, 100), Err(DecodeError::Unsupported(_))));
        assert!(matches!(decode("gzip", RULES, 100), Err(DecodeError::Corrupt { .. })));
        let whole = gzip(RULES);
        let truncated = &whole[..whole.len() - 12];
        assert!(matches!(decode("gzip", truncated, 100), Err(DecodeError::Corrupt { .. })));
        let mut flipped = whole.clone();
        flipped[whole.len() - 6] ^= 0xff; // the length in the trailer
        assert!(matches!(decode("gzip", &flipped, 100), Err(DecodeError::Corrupt { .. })));
        assert!(decode("deflate", b"\xff\xff\xff\xff", 100).is_err());
    }

    #[test]
    fn the_cap_counts_decoded_bytes() {
        let bomb = gzip(&vec![b'\n'; 10 << 20]);
        assert!(bomb.len() < 64 * 1024, "{}", bomb.len());
        let out = decode("gzip", &bomb, 1000).unwrap();
        assert_eq!(out.len(), 1001);
        let plain = decode("identity", &vec![b'x'; 5000], 1000).unwrap();
        assert_eq!(plain.len(), 1001);
    }

    /// `decoded` after `flush` holds all that the pieces pushed so far decode to (the body
    /// need not have ended), and never more than the cap, whatever they inflate to.
    #[test]
    fn decoded_so_far_is_visible_and_capped() {
        let page = b"<html><head><meta name=\"tdm-reservation\" content=\"1\">";
        let coded = gzip(&gzip(page));
        let mut decoder = Decoder::new(&headers("gzip, gzip"), 1000).unwrap();
        // All but the trailers: the stream has not ended, its bytes are all there.
        decoder.push(&coded[..coded.len() - 8]).unwrap();
        decoder.flush().unwrap();
        assert_eq!(decoder.decoded(), page);
        // 64 KiB of coded zeros, megabytes decoded: cut at the cap.
        let bomb = gzip(&vec![0; 64 << 20]);
        let piece = &bomb[..bomb.len().min(64 * 1024)];
        let mut decoder = Decoder::new(&headers("gzip"), 1000).unwrap();
        decoder.push(piece).unwrap();
        decoder.flush().unwrap();
        assert_eq!(decoder.decoded().len(), 1001);
    }

    fn utf16(text: &str, little_endian: bool) -> Vec<u8> {
        let mut out = if little_endian { vec![0xff, 0xfe] } else { vec![0xfe, 0xff] };
        for unit in text.encode_utf16() {
            out.extend(if little_endian { unit.to_le_bytes() } else { unit.to_be_bytes() });
        }
        out
    }

    #[test]
    fn utf16_with_a_bom_is_transcoded() {
        let text = "User-agent: *\nDisallow: /caf\u{e9}/\u{1F600}\n";
        assert_eq!(utf16_to_utf8(utf16(text, true), 1000), text.as_bytes());
        assert_eq!(utf16_to_utf8(utf16(text, false), 1000), text.as_bytes());
        assert_eq!(decode("gzip", &gzip(&utf16(text, true)), 1000).unwrap(), text.as_bytes());
        // No BOM: left alone (UTF-8).
        assert_eq!(utf16_to_utf8(RULES.to_vec(), 1000), RULES);
        // A lone surrogate becomes U+FFFD.
        assert_eq!(
            utf16_to_utf8(vec![0xff, 0xfe, 0x00, 0xd8, b'a', 0], 100),
            "\u{FFFD}a".as_bytes()
        );
    }

    /// A prefix in UTF-16 reads as text as the whole body does (the conformance kit found a
    /// UTF-16 page's `<meta name="robots" content="noai">` unread).
    #[test]
    fn a_prefix_in_utf16_reads_as_text() {
        let page = "<html><head><meta name=\"robots\" content=\"noai\"></head>";
        for little_endian in [true, false] {
            let mut decoder = Decoder::new(&HeaderMap::new(), 16 * 1024).unwrap();
            decoder.push(&utf16(page, little_endian)).unwrap();
            decoder.flush().unwrap();
            assert_eq!(&*decoder.text(), page.as_bytes());
            assert_ne!(decoder.decoded(), page.as_bytes());
        }
        let mut decoder = Decoder::new(&HeaderMap::new(), 16 * 1024).unwrap();
        decoder.push(page.as_bytes()).unwrap();
        assert_eq!(&*decoder.text(), page.as_bytes());
    }

    #[test]
    fn utf16_cut_by_the_cap_drops_the_cut_line() {
        let text = "User-agent: *\nDisallow: /a\nDisallow: /abcdefgh\n";
        let bytes = utf16(text, true);
        // The cap falls inside "/abcdefgh": that line goes, the rest stays.
        let limit = 2 + 2 * "User-agent: *\nDisallow: /a\nDisallow: /abc".len();
        let kept = utf16_to_utf8(bytes[..limit + 1].to_vec(), limit);
        assert_eq!(kept, b"User-agent: *\nDisallow: /a\n");
    }
}
