//! Request smuggling checks on the bytes a client sends, for what hyper accepts silently.
//!
//! hyper already answers `400` to most framing attacks: conflicting `Content-Length` values,
//! a `Transfer-Encoding` whose last coding is not `chunked`, `Transfer-Encoding` in HTTP/1.0,
//! header lines folded with obsolete line folding, whitespace before a colon. One it lets
//! through: a request with both `Content-Length` and `Transfer-Encoding`. It then follows RFC
//! 9112 §6.3 (the transfer coding wins, `Content-Length` is dropped and the connection closed
//! after the response), which is safe for the proxy itself, but RFC 9112 §6.1 also lets a
//! server reject such a request outright, and a request built to be read two ways is an attack
//! on whatever sits behind: the proxy refuses it with `400` and forwards nothing.
//!
//! hyper does not show which header fields it dropped, so [`FramingWatch`] reads along: it
//! follows the HTTP/1.1 message framing of the byte stream (heads, `Content-Length` bodies,
//! chunked bodies and trailers) exactly as hyper's parser does, judges each request head, and
//! queues one [`Verdict`] per head, in order; the service takes one per request it is given
//! ([`Verdicts::next`]).
//!
//! It must never lose step with hyper while hyper still reads requests from the connection:
//!
//! * chunk-size lines are read byte by byte with hyper's rules (any number of leading zeros,
//!   at most 64 bits of size, whitespace and extensions after it, CRLF only), so whatever
//!   hyper accepts the watch follows, and what hyper rejects ends the connection anyway;
//! * after a `CONNECT` head the watch keeps what follows until the service says how the
//!   CONNECT was answered ([`Verdicts::connect_answered`]): a tunnel (2xx) ends the HTTP on
//!   the connection, anything else leaves it in HTTP/1.1 and the kept bytes are followed as
//!   requests;
//! * an `Upgrade` request changes nothing: hyper switches only on a `101` response, after
//!   which it reads no more requests from the connection;
//! * the HTTP/2 connection preface (prior knowledge) ends the watch: HTTP/2 has no such
//!   framing to confuse.
//!
//! Where it cannot follow (a head larger than the limit, a malformed chunk, a refused request
//! after which the proxy closes the connection) hyper rejects the message itself or the
//! connection is closed; should hyper nevertheless hand over another request, its verdict is
//! [`Verdict::Unfollowed`] and it is refused rather than let through unjudged.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

// The crate this one stands on, under the name the project uses for it.
use robots_proxy_sync as sync;

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// What the watch found in one request head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verdict {
    /// Nothing wrong with the framing.
    Clean,
    /// Both `Content-Length` and `Transfer-Encoding` (RFC 9112 §6.1).
    LengthAndTransferEncoding,
    /// A header line continued with obsolete line folding (RFC 9112 §5.2).
    ObsoleteLineFolding,
    /// `Content-Length` values that disagree (RFC 9112 §6.3, item 5).
    ConflictingLengths,
    /// The watch could not follow the connection's framing up to this request (an earlier
    /// message was malformed or too large to follow), so its head was never judged.
    Unfollowed,
}

impl Verdict {
    /// Why the request is refused, or `None` for [`Verdict::Clean`].
    pub fn problem(self) -> Option<&'static str> {
        match self {
            Verdict::Clean => None,
            Verdict::LengthAndTransferEncoding => Some(
                "the request has both Content-Length and Transfer-Encoding (RFC 9112 §6.1), \
                 which different servers read differently (request smuggling)",
            ),
            Verdict::ObsoleteLineFolding => Some(
                "a header field is folded over several lines (obsolete line folding, RFC 9112 \
                 §5.2)",
            ),
            Verdict::ConflictingLengths => {
                Some("the request has Content-Length values that disagree (RFC 9112 §6.3)")
            }
            Verdict::Unfollowed => Some(
                "the framing of an earlier message on this connection could not be followed, \
                 so this request's framing cannot be checked",
            ),
        }
    }
}

/// The verdicts of one connection, for the service: the other side of a [`FramingWatch`].
#[derive(Debug, Clone)]
pub struct Verdicts(Arc<Mutex<Follower>>);

impl Default for Verdicts {
    /// Verdicts without a watch: always [`Verdict::Clean`].
    fn default() -> Self {
        Verdicts(Arc::new(Mutex::new(Follower::new(0, State::Switched))))
    }
}

impl Verdicts {
    /// The verdict for the next HTTP/1 request hyper hands the service (never ask for an
    /// HTTP/2 one). [`Verdict::Unfollowed`] when the watch lost the framing.
    pub fn next(&self) -> Verdict {
        let mut follower = self.lock();
        match follower.verdicts.pop_front() {
            Some(verdict) => verdict,
            None if matches!(follower.state, State::Lost) => Verdict::Unfollowed,
            None => Verdict::Clean,
        }
    }

    /// Tells the watch how the last CONNECT was answered: `tunnel` when with a 2xx (hyper
    /// hands the connection over; nothing on it is HTTP any more). Otherwise the connection
    /// stays HTTP/1.1 and what the client sent after the CONNECT is followed as requests.
    /// Must be called before the response goes to hyper.
    pub fn connect_answered(&self, tunnel: bool) {
        let mut follower = self.lock();
        if !matches!(follower.state, State::Paused { .. }) {
            return;
        }
        let paused = std::mem::replace(&mut follower.state, State::Switched);
        if let (State::Paused { resume, kept }, false) = (paused, tunnel) {
            follower.state = *resume;
            follower.feed(&kept);
        }
    }

    fn lock(&self) -> MutexGuard<'_, Follower> {
        crate::sync::lock(&self.0)
    }
}

/// Most bytes kept after a CONNECT head until it is answered: more than hyper reads ahead
/// (its default read buffer limit is about 400 KiB).
const MAX_KEPT: usize = 512 * 1024;

/// Most bytes of chunk extensions in one body, as hyper (`CHUNKED_EXTENSIONS_LIMIT`).
const MAX_EXTENSIONS: u64 = 16 * 1024;

#[derive(Debug)]
enum State {
    /// Reading a request head (leading empty lines skipped).
    Head,
    /// `n` body bytes to go.
    Body(u64),
    /// Inside a chunked body, between chunk data (see [`Chunk`]).
    Chunked(Chunk),
    /// `n` chunk data bytes to go, then CRLF.
    ChunkData(u64),
    /// After a CONNECT head: what follows is kept until the answer tells what it is.
    Paused { resume: Box<State>, kept: Vec<u8> },
    /// The connection is no longer HTTP/1 (a tunnel, HTTP/2): nothing to follow.
    Switched,
    /// The watch cannot follow the stream any more.
    Lost,
}

/// The steps of hyper's chunked decoder (`ChunkedState` in hyper's `proto/h1/decode.rs`)
/// outside chunk data, with the same transitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// The first hex digit of a chunk size.
    Start,
    /// More hex digits, or what ends them.
    Size,
    /// Whitespace after the size.
    SizeLws,
    /// A chunk extension, up to CR.
    Extension,
    /// The LF of the chunk-size line.
    SizeLf,
    /// The CR after chunk data.
    BodyCr,
    /// The LF after chunk data.
    BodyLf,
    /// After the last chunk: CR of the final CRLF, or the start of a trailer field.
    EndCr,
    /// A trailer field, up to CR.
    Trailer,
    /// The LF ending a trailer field.
    TrailerLf,
    /// The LF of the final CRLF.
    EndLf,
}

/// Follows the request framing of one client connection; see the module documentation.
/// Feed it every byte read from the client, in order ([`FramingWatch::feed`], or wrap the
/// stream in a [`Watched`]).
#[derive(Debug)]
pub struct FramingWatch(Arc<Mutex<Follower>>);

impl FramingWatch {
    /// A watch for heads of at most `max_head` bytes, reporting to a new [`Verdicts`].
    pub fn new(max_head: usize) -> Self {
        FramingWatch(Arc::new(Mutex::new(Follower::new(max_head, State::Head))))
    }

    /// Where the verdicts go.
    pub fn verdicts(&self) -> Verdicts {
        Verdicts(self.0.clone())
    }

    /// Follows `data`, the next bytes read from the client.
    pub fn feed(&mut self, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        let mut follower = crate::sync::lock(&self.0);
        follower.feed(data);
    }
}

#[derive(Debug)]
struct Follower {
    state: State,
    /// A head read in pieces.
    buf: Vec<u8>,
    max_head: usize,
    /// The size of the chunk being read, and the extension bytes of the body so far.
    chunk_size: u64,
    extensions: u64,
    verdicts: VecDeque<Verdict>,
}

impl Follower {
    fn new(max_head: usize, state: State) -> Self {
        Follower {
            state,
            buf: Vec::new(),
            max_head,
            chunk_size: 0,
            extensions: 0,
            verdicts: VecDeque::new(),
        }
    }

    fn feed(&mut self, mut data: &[u8]) {
        // Each round consumes at least one byte or ends the loop.
        while !data.is_empty() {
            match &mut self.state {
                State::Switched | State::Lost => return,
                State::Paused { kept, .. } => {
                    kept.extend_from_slice(data);
                    if kept.len() > MAX_KEPT {
                        self.lose();
                    }
                    return;
                }
                State::Head => data = self.head(data),
                State::Body(left) | State::ChunkData(left) => {
                    let n = usize::try_from(*left).unwrap_or(usize::MAX).min(data.len());
                    data = &data[n..];
                    *left -= n as u64;
                    if *left == 0 {
                        self.state = if matches!(self.state, State::Body(_)) {
                            State::Head
                        } else {
                            State::Chunked(Chunk::BodyCr)
                        };
                    }
                }
                State::Chunked(step) => {
                    let step = *step;
                    data = self.chunked(step, data);
                }
            }
        }
    }

    /// Reads (part of) a request head from `data`; returns what follows it.
    fn head<'d>(&mut self, mut data: &'d [u8]) -> &'d [u8] {
        if self.buf.is_empty() {
            let skip = data.iter().take_while(|b| matches!(b, b'\r' | b'\n')).count();
            data = &data[skip..];
            if data.is_empty() {
                return data;
            }
            // The common case: the whole head arrived in this read. Judge it where it lies
            // rather than copying it first.
            if let Some(end) = head_end(data, 0) {
                let (verdict, next) = judge(&data[..end]);
                self.judged(verdict, next);
                return &data[end..];
            }
        }
        let searched_from = self.buf.len().saturating_sub(3);
        self.buf.extend_from_slice(data);
        let Some(end) = head_end(&self.buf, searched_from) else {
            if self.buf.len() > self.max_head {
                // hyper answers 431 and closes.
                self.lose();
            }
            return &[];
        };
        let rest_from = data.len() - (self.buf.len() - end);
        self.buf.truncate(end);
        let (verdict, next) = judge(&self.buf);
        self.buf.clear();
        self.judged(verdict, next);
        &data[rest_from..]
    }

    fn judged(&mut self, verdict: Option<Verdict>, next: State) {
        if let Some(verdict) = verdict {
            self.verdicts.push_back(verdict);
        }
        // hyper's decoder is new for each message.
        self.chunk_size = 0;
        self.extensions = 0;
        self.state = next;
    }

    /// One step of a chunked body outside chunk data, as hyper takes it; returns the rest.
    fn chunked<'d>(&mut self, step: Chunk, data: &'d [u8]) -> &'d [u8] {
        // Extensions and trailer fields run up to CR: skipped in one go.
        if matches!(step, Chunk::Extension | Chunk::Trailer) {
            let stop = match step {
                Chunk::Extension => memchr::memchr2(b'\r', b'\n', data),
                _ => memchr::memchr(b'\r', data),
            };
            let n = stop.unwrap_or(data.len());
            if step == Chunk::Extension {
                self.extensions = self.extensions.saturating_add(n as u64);
                if self.extensions >= MAX_EXTENSIONS {
                    self.lose();
                    return &[];
                }
            }
            if n == data.len() {
                return &[];
            }
            let (byte, rest) = (data[n], &data[n + 1..]);
            match (step, byte) {
                (Chunk::Extension, b'\r') => self.state = State::Chunked(Chunk::SizeLf),
                (Chunk::Trailer, b'\r') => self.state = State::Chunked(Chunk::TrailerLf),
                _ => self.lose(),
            }
            return rest;
        }
        let (byte, rest) = (data[0], &data[1..]);
        let hex = hex_value(byte);
        let next = match (step, byte, hex) {
            (Chunk::Start | Chunk::Size, _, Some(digit)) => {
                match self.chunk_size.checked_mul(16).and_then(|s| s.checked_add(digit)) {
                    Some(size) => {
                        self.chunk_size = size;
                        Some(Chunk::Size)
                    }
                    None => None,
                }
            }
            (Chunk::Size | Chunk::SizeLws, b' ' | b'\t', _) => Some(Chunk::SizeLws),
            (Chunk::Size | Chunk::SizeLws, b';', _) => Some(Chunk::Extension),
            (Chunk::Size | Chunk::SizeLws, b'\r', _) => Some(Chunk::SizeLf),
            (Chunk::SizeLf, b'\n', _) => {
                let size = std::mem::take(&mut self.chunk_size);
                if size > 0 {
                    self.state = State::ChunkData(size);
                    return rest;
                }
                Some(Chunk::EndCr)
            }
            (Chunk::BodyCr, b'\r', _) => Some(Chunk::BodyLf),
            (Chunk::BodyLf, b'\n', _) => Some(Chunk::Start),
            (Chunk::EndCr, b'\r', _) => Some(Chunk::EndLf),
            (Chunk::EndCr, _, _) => Some(Chunk::Trailer),
            (Chunk::TrailerLf, b'\n', _) => Some(Chunk::EndCr),
            (Chunk::EndLf, b'\n', _) => {
                self.state = State::Head;
                return rest;
            }
            _ => None,
        };
        match next {
            Some(step) => self.state = State::Chunked(step),
            // hyper fails the body and closes the connection.
            None => self.lose(),
        }
        rest
    }

    fn lose(&mut self) {
        self.state = State::Lost;
        self.buf = Vec::new();
    }
}

fn hex_value(byte: u8) -> Option<u64> {
    char::from(byte).to_digit(16).map(u64::from)
}

/// The length of the head in `buf` up to and including its blank line, searching from `from`.
fn head_end(buf: &[u8], from: usize) -> Option<usize> {
    let mut at = from;
    while let Some(i) = memchr::memchr(b'\n', &buf[at..]) {
        let nl = at + i;
        if buf.get(nl + 1) == Some(&b'\n') {
            return Some(nl + 2);
        }
        if buf.get(nl + 1..nl + 3) == Some(b"\r\n") {
            return Some(nl + 3);
        }
        at = nl + 1;
    }
    None
}

/// The verdict on a complete head (`None` for the HTTP/2 preface), and the framing of what
/// follows it.
fn judge(head: &[u8]) -> (Option<Verdict>, State) {
    let mut start = 0;
    let mut lines =
        memchr::memchr_iter(b'\n', head).chain(std::iter::once(head.len())).map(|end| {
            let line = &head[start.min(end)..end];
            start = end + 1;
            line.strip_suffix(b"\r").unwrap_or(line)
        });
    let request_line = lines.next().unwrap_or_default();
    if request_line == b"PRI * HTTP/2.0" {
        // HTTP/2 with prior knowledge: hyper's HTTP/1 parser rejects it, an HTTP/2 server
        // takes the connection.
        return (None, State::Switched);
    }
    // hyper's methods are case-sensitive: only this is a CONNECT.
    let is_connect = request_line.starts_with(b"CONNECT ");
    let mut lengths: Vec<u64> = Vec::new();
    let mut bad_length = false;
    let (mut te, mut folded) = (false, false);
    for line in lines {
        if line.is_empty() {
            continue;
        }
        if matches!(line[0], b' ' | b'\t') {
            folded = true;
            continue;
        }
        let Some(colon) = memchr::memchr(b':', line) else { continue };
        let (name, value) = (&line[..colon], &line[colon + 1..]);
        if name.eq_ignore_ascii_case(b"content-length") {
            for part in value.split(|&b| b == b',') {
                match std::str::from_utf8(part).ok().and_then(|p| p.trim().parse::<u64>().ok()) {
                    Some(n) => lengths.push(n),
                    None => bad_length = true,
                }
            }
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            te = true;
        }
    }
    let verdict = if te && (!lengths.is_empty() || bad_length) {
        Verdict::LengthAndTransferEncoding
    } else if folded {
        Verdict::ObsoleteLineFolding
    } else if lengths.windows(2).any(|w| w[0] != w[1]) {
        Verdict::ConflictingLengths
    } else {
        Verdict::Clean
    };
    let next = if bad_length || verdict != Verdict::Clean {
        // hyper rejects the head, or the proxy closes the connection after refusing it.
        State::Lost
    } else if te {
        State::Chunked(Chunk::Start)
    } else {
        match lengths.first() {
            Some(&n) if n > 0 => State::Body(n),
            _ => State::Head,
        }
    };
    let next = if is_connect && !matches!(next, State::Lost) {
        State::Paused { resume: Box::new(next), kept: Vec::new() }
    } else {
        next
    };
    (Some(verdict), next)
}

/// A client stream with a [`FramingWatch`] reading along, for connections served from
/// inside a CONNECT tunnel (the listener's own connections use `robots_proxy::limits::ClientIo`).
#[derive(Debug)]
pub struct Watched<T> {
    inner: T,
    watch: Option<FramingWatch>,
}

impl<T> Watched<T> {
    /// `inner`, followed by `watch` (none: nothing is followed, every verdict is clean).
    pub fn new(inner: T, watch: Option<FramingWatch>) -> Self {
        Watched { inner, watch }
    }

    /// The verdicts of the watch, one per request head.
    pub fn verdicts(&self) -> Verdicts {
        self.watch.as_ref().map(FramingWatch::verdicts).unwrap_or_default()
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Watched<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        let poll = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let (Poll::Ready(Ok(())), Some(watch)) = (&poll, this.watch.as_mut()) {
            watch.feed(&buf.filled()[before..]);
        }
        poll
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Watched<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdicts(stream: &[u8], split: usize) -> Vec<Verdict> {
        let mut watch = FramingWatch::new(64 * 1024);
        // Fed in pieces of `split` bytes, as reads would deliver them.
        for piece in stream.chunks(split.max(1)) {
            watch.feed(piece);
        }
        queued(&watch.verdicts())
    }

    fn queued(v: &Verdicts) -> Vec<Verdict> {
        v.lock().verdicts.drain(..).collect()
    }

    fn state(watch: &FramingWatch) -> String {
        format!("{:?}", watch.0.lock().unwrap().state)
    }

    #[test]
    fn pipelined_requests_with_bodies_are_followed() {
        let stream = b"\r\nGET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n\
POST http://a/x HTTP/1.1\r\nHost: a\r\nContent-Length: 20\r\n\r\nTransfer-Encoding: x\
POST http://a/y HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n\
5;ext=1\r\nhello\r\n1A\r\nContent-Length: 5\r\n\r\nxxxxx\r\n0\r\nTrailer: 1\r\n\r\n\
GET http://a/z HTTP/1.1\nHost: a\n\n";
        for split in [1, 2, 3, 7, 64, stream.len()] {
            assert_eq!(verdicts(stream, split), vec![Verdict::Clean; 4], "split {split}");
        }
    }

    #[test]
    fn smuggling_heads_are_flagged() {
        let cases: [(&[u8], Verdict); 5] = [
            (
                b"POST http://a/ HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
                Verdict::LengthAndTransferEncoding,
            ),
            (
                b"POST http://a/ HTTP/1.1\r\ntransfer-encoding: chunked\r\ncontent-length: 5\r\n\r\n",
                Verdict::LengthAndTransferEncoding,
            ),
            (b"GET http://a/ HTTP/1.1\r\nX-A: 1\r\n  2\r\n\r\n", Verdict::ObsoleteLineFolding),
            (
                b"POST http://a/ HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
                Verdict::ConflictingLengths,
            ),
            (b"POST http://a/ HTTP/1.1\r\nContent-Length: 5, 6\r\n\r\n", Verdict::ConflictingLengths),
        ];
        for (head, want) in cases {
            assert_eq!(verdicts(head, 5), vec![want], "{}", String::from_utf8_lossy(head));
            assert!(want.problem().is_some());
        }
    }

    #[test]
    fn a_smuggled_head_inside_a_body_is_not_judged() {
        // The body of a Content-Length request looks like a request; it is skipped.
        let body =
            b"GET http://b/ HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n";
        let mut stream =
            format!("POST http://a/ HTTP/1.1\r\nContent-Length: {}\r\n\r\n", body.len())
                .into_bytes();
        stream.extend_from_slice(body);
        stream.extend_from_slice(b"GET http://a/next HTTP/1.1\r\n\r\n");
        assert_eq!(verdicts(&stream, 9), vec![Verdict::Clean, Verdict::Clean]);
    }

    const CL_TE: &[u8] =
        b"POST http://a/s HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n";

    #[test]
    fn chunk_sizes_are_read_as_hyper_reads_them() {
        // Leading zeros beyond 16 digits, whitespace, extensions of any length up to hyper's
        // limit, and upper-case digits: hyper accepts all of them, and so does the watch.
        let long_extension = format!(";x={}", "y".repeat(10_000));
        for size_line in [
            "0000000000000000005".to_owned(),
            format!("{}5", "0".repeat(300)),
            "5 \t ;a=b".to_owned(),
            format!("5{long_extension}"),
            "00005;a=\"q;r\"".to_owned(),
        ] {
            let mut stream = format!(
                "POST http://a/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n\
                 {size_line}\r\nhello\r\n000\r\n\r\n"
            )
            .into_bytes();
            stream.extend_from_slice(CL_TE);
            for split in [1, 5, 4096] {
                assert_eq!(
                    verdicts(&stream, split),
                    vec![Verdict::Clean, Verdict::LengthAndTransferEncoding],
                    "{}, split {split}",
                    &size_line[..size_line.len().min(40)]
                );
            }
        }
        // Sixteen significant digits fit in 64 bits; seventeen overflow (hyper fails the body).
        let mut watch = FramingWatch::new(1024);
        watch.feed(b"POST http://a/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n");
        watch.feed(b"0FFFFFFFFFFFFFFFF\r\n");
        assert!(state(&watch).starts_with("ChunkData(18446744073709551615)"), "{}", state(&watch));
        let mut watch = FramingWatch::new(1024);
        watch.feed(b"POST http://a/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n");
        watch.feed(b"10000000000000000\r\n");
        assert_eq!(state(&watch), "Lost");
    }

    #[test]
    fn trailers_are_read_as_hyper_reads_them() {
        let mut stream = b"POST http://a/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n\
0\r\nX-Trailer: a\nb\r\nY: 2\r\n\r\n"
            .to_vec();
        stream.extend_from_slice(CL_TE);
        for split in [1, 3, 1000] {
            assert_eq!(
                verdicts(&stream, split),
                vec![Verdict::Clean, Verdict::LengthAndTransferEncoding]
            );
        }
    }

    #[test]
    fn what_hyper_rejects_loses_the_watch_and_later_requests_are_unfollowed() {
        for body in [&b"zz\r\n"[..], b"5\nhello\r\n", b"5;a\nb\r\n", b"5\r\nhelloX", b"-1\r\n"] {
            let mut watch = FramingWatch::new(1024);
            watch.feed(b"POST http://a/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n");
            watch.feed(body);
            assert_eq!(state(&watch), "Lost", "{}", String::from_utf8_lossy(body));
            let verdicts = watch.verdicts();
            assert_eq!(verdicts.next(), Verdict::Clean);
            assert_eq!(verdicts.next(), Verdict::Unfollowed);
        }
        let mut watch = FramingWatch::new(16);
        watch.feed(b"GET http://a/ HTTP/1.1\r\nX-Long: aaaaaaaaaaaaaaaaaaaaaaaaaaa");
        assert_eq!(state(&watch), "Lost");
        assert_eq!(watch.verdicts().next(), Verdict::Unfollowed);
    }

    #[test]
    fn upgrade_requests_are_followed_like_any_other() {
        let mut stream =
            b"GET http://a/ws HTTP/1.1\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n"
                .to_vec();
        stream.extend_from_slice(CL_TE);
        assert_eq!(verdicts(&stream, 7), vec![Verdict::Clean, Verdict::LengthAndTransferEncoding]);
    }

    #[test]
    fn after_connect_the_answer_decides() {
        let mut stream = b"CONNECT a:443 HTTP/1.1\r\n\r\n".to_vec();
        stream.extend_from_slice(CL_TE);
        // Refused: the connection stays HTTP/1.1 and the kept bytes are requests.
        let mut watch = FramingWatch::new(1024);
        watch.feed(&stream[..30]);
        watch.feed(&stream[30..]);
        let verdicts = watch.verdicts();
        assert_eq!(verdicts.next(), Verdict::Clean);
        verdicts.connect_answered(false);
        assert_eq!(verdicts.next(), Verdict::LengthAndTransferEncoding);
        // A tunnel: what follows is not HTTP, and nothing is judged.
        let mut watch = FramingWatch::new(1024);
        watch.feed(&stream);
        let verdicts = watch.verdicts();
        assert_eq!(verdicts.next(), Verdict::Clean);
        verdicts.connect_answered(true);
        watch.feed(CL_TE);
        assert_eq!(state(&watch), "Switched");
        assert_eq!(queued(&verdicts), vec![]);
        // A CONNECT with a body: the body is skipped once the CONNECT is refused.
        let mut watch = FramingWatch::new(1024);
        watch.feed(b"CONNECT a:443 HTTP/1.1\r\nContent-Length: 4\r\n\r\nabcd");
        watch.feed(CL_TE);
        watch.verdicts().connect_answered(false);
        assert_eq!(
            queued(&watch.verdicts()),
            vec![Verdict::Clean, Verdict::LengthAndTransferEncoding]
        );
    }

    #[test]
    fn the_http2_preface_ends_the_watch() {
        let stream = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x12\x04\x00\x00\x00\x00\x00";
        let mut watch = FramingWatch::new(1024);
        watch.feed(stream);
        assert_eq!(state(&watch), "Switched");
        assert_eq!(watch.verdicts().next(), Verdict::Clean);
    }
}
