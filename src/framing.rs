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
//! chunked bodies and trailers), judges each request head, and queues one [`Verdict`] per head,
//! in order; the service takes one per request it is given. Anything it does not follow (a
//! CONNECT or Upgrade, a malformed chunk size, a head larger than the limit) stops the
//! watching for that connection: hyper then rejects the malformed message itself, or the bytes
//! are no longer HTTP.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

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
        }
    }
}

/// The verdicts of one connection, shared by the reading side and the service.
#[derive(Debug, Default, Clone)]
pub struct Verdicts(Arc<Mutex<VecDeque<Verdict>>>);

impl Verdicts {
    /// The verdict for the next request hyper hands the service. `Clean` when the watch
    /// stopped following the stream.
    pub fn next(&self) -> Verdict {
        self.lock().pop_front().unwrap_or(Verdict::Clean)
    }

    fn push(&self, verdict: Verdict) {
        self.lock().push_back(verdict);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Verdict>> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Longest chunk-size line or trailer section followed before giving up.
const MAX_LINE: usize = 4096;

#[derive(Debug)]
enum State {
    /// Reading a request head (leading empty lines skipped).
    Head,
    /// `n` body bytes to go.
    Body(u64),
    /// Reading a chunk-size line.
    ChunkSize,
    /// `n` chunk data bytes to go, then the line end.
    ChunkData(u64),
    /// The CRLF after chunk data.
    ChunkEnd,
    /// Trailer lines, up to an empty one.
    Trailers,
    /// No longer following the stream.
    Stopped,
}

/// Follows the request framing of one client connection; see the module documentation.
#[derive(Debug)]
pub struct FramingWatch {
    state: State,
    buf: Vec<u8>,
    max_head: usize,
    verdicts: Verdicts,
}

impl FramingWatch {
    /// A watch for heads of at most `max_head` bytes, reporting to a new [`Verdicts`].
    pub fn new(max_head: usize) -> Self {
        FramingWatch {
            state: State::Head,
            buf: Vec::new(),
            max_head,
            verdicts: Verdicts::default(),
        }
    }

    /// Where the verdicts go.
    pub fn verdicts(&self) -> Verdicts {
        self.verdicts.clone()
    }

    /// Follows `data`, the next bytes read from the client.
    pub fn feed(&mut self, mut data: &[u8]) {
        // Each round consumes at least one byte or ends the loop.
        while !data.is_empty() {
            match &mut self.state {
                State::Stopped => return,
                State::Head => {
                    if self.buf.is_empty() {
                        let skip = data.iter().take_while(|b| matches!(b, b'\r' | b'\n')).count();
                        data = &data[skip..];
                        if data.is_empty() {
                            return;
                        }
                        // The common case: the whole head arrived in this read. Judge it
                        // where it lies rather than copying it first.
                        if let Some(end) = head_end(data, 0) {
                            let (verdict, next) = judge(&data[..end]);
                            self.verdicts.push(verdict);
                            self.state = next;
                            data = &data[end..];
                            continue;
                        }
                    }
                    let searched_from = self.buf.len().saturating_sub(3);
                    self.buf.extend_from_slice(data);
                    let Some(end) = head_end(&self.buf, searched_from) else {
                        if self.buf.len() > self.max_head {
                            self.stop();
                        }
                        return;
                    };
                    let rest_from = data.len() - (self.buf.len() - end);
                    data = &data[rest_from..];
                    self.buf.truncate(end);
                    let (verdict, next) = judge(&self.buf);
                    self.verdicts.push(verdict);
                    self.buf.clear();
                    self.state = next;
                }
                State::Body(left) => {
                    let n = usize::try_from(*left).unwrap_or(usize::MAX).min(data.len());
                    data = &data[n..];
                    *left -= n as u64;
                    if *left == 0 {
                        self.state = State::Head;
                    }
                }
                State::ChunkSize => {
                    let Some(line) = self.line(&mut data) else { continue };
                    match chunk_size(&line) {
                        Some(0) => self.state = State::Trailers,
                        Some(n) => self.state = State::ChunkData(n),
                        None => self.stop(),
                    }
                }
                State::ChunkData(left) => {
                    let n = usize::try_from(*left).unwrap_or(usize::MAX).min(data.len());
                    data = &data[n..];
                    *left -= n as u64;
                    if *left == 0 {
                        self.state = State::ChunkEnd;
                    }
                }
                State::ChunkEnd => {
                    let Some(line) = self.line(&mut data) else { continue };
                    if line.is_empty() {
                        self.state = State::ChunkSize;
                    } else {
                        self.stop();
                    }
                }
                State::Trailers => {
                    let Some(line) = self.line(&mut data) else { continue };
                    if line.is_empty() {
                        self.state = State::Head;
                    }
                }
            }
        }
    }

    /// One line (without its CRLF or LF) from `data` and the bytes kept from earlier reads,
    /// or `None` when `data` ended first (it is kept in `buf`).
    fn line(&mut self, data: &mut &[u8]) -> Option<Vec<u8>> {
        match memchr::memchr(b'\n', data) {
            Some(i) => {
                self.buf.extend_from_slice(&data[..i]);
                *data = &data[i + 1..];
                let mut line = std::mem::take(&mut self.buf);
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                Some(line)
            }
            None => {
                self.buf.extend_from_slice(data);
                *data = &[];
                if self.buf.len() > MAX_LINE {
                    self.stop();
                }
                None
            }
        }
    }

    fn stop(&mut self) {
        self.state = State::Stopped;
        self.buf = Vec::new();
    }
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

/// The verdict on a complete head, and the framing of what follows it.
fn judge(head: &[u8]) -> (Verdict, State) {
    let mut start = 0;
    let mut lines =
        memchr::memchr_iter(b'\n', head).chain(std::iter::once(head.len())).map(|end| {
            let line = &head[start.min(end)..end];
            start = end + 1;
            line.strip_suffix(b"\r").unwrap_or(line)
        });
    let request_line = lines.next().unwrap_or_default();
    let is_connect = request_line.starts_with(b"CONNECT ");
    let mut lengths: Vec<u64> = Vec::new();
    let mut bad_length = false;
    let (mut te, mut upgrade, mut folded) = (false, false, false);
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
        } else if name.eq_ignore_ascii_case(b"upgrade") {
            upgrade = true;
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
    let next = if is_connect || upgrade || bad_length || verdict != Verdict::Clean {
        // A tunnel or another protocol follows, or hyper rejects the head or the proxy closes
        // the connection after refusing it.
        State::Stopped
    } else if te {
        State::ChunkSize
    } else {
        match lengths.first() {
            Some(&n) if n > 0 => State::Body(n),
            _ => State::Head,
        }
    };
    (verdict, next)
}

/// The size of a chunk-size line (`1a;ext=1`), or `None` if it is not one.
fn chunk_size(line: &[u8]) -> Option<u64> {
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 || digits > 16 {
        return None;
    }
    let rest = &line[digits..];
    if !rest.is_empty() && !matches!(rest[0], b';' | b' ' | b'\t') {
        return None;
    }
    u64::from_str_radix(std::str::from_utf8(&line[..digits]).ok()?, 16).ok()
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
        let v = watch.verdicts();
        let mut out = Vec::new();
        for _ in 0..16 {
            let next = v.lock().pop_front();
            match next {
                Some(x) => out.push(x),
                None => break,
            }
        }
        out
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

    #[test]
    fn the_watch_stops_where_it_cannot_follow() {
        let stream = b"CONNECT a:443 HTTP/1.1\r\n\r\n\x16\x03\x01 anything GET / HTTP/1.1\r\n\r\n";
        assert_eq!(verdicts(stream, 4), vec![Verdict::Clean]);
        let stream = b"POST http://a/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
        assert_eq!(verdicts(stream, 4), vec![Verdict::Clean]);
        let mut watch = FramingWatch::new(16);
        watch.feed(b"GET http://a/ HTTP/1.1\r\nX-Long: aaaaaaaaaaaaaaaaaaaaaaaaaaa");
        assert!(matches!(watch.state, State::Stopped));
        assert_eq!(watch.verdicts().next(), Verdict::Clean);
    }

    #[test]
    fn chunk_sizes() {
        assert_eq!(chunk_size(b"1a"), Some(26));
        assert_eq!(chunk_size(b"0"), Some(0));
        assert_eq!(chunk_size(b"ff;name=value"), Some(255));
        assert_eq!(chunk_size(b""), None);
        assert_eq!(chunk_size(b"-1"), None);
        assert_eq!(chunk_size(b"12345678901234567"), None);
        assert_eq!(chunk_size(b"1g"), None);
    }
}
