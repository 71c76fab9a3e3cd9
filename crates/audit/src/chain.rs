//! The hash chain of the audit log (`event.sequence`, `event.previous_hash`, `event.hash`),
//! computed by the writer, the only place that knows the order of the records.
//!
//! Every line the writer writes ends with the members it adds:
//!
//! ```text
//! {…the record…,"event.sequence":N[,"event.previous_hash":"P"],"event.hash_scheme":2,"event.hash":"H"}
//! ```
//!
//! `BODY` is the line without its `,"event.hash":"H"` member and without its newline (a JSON
//! object again). Its Merkle leaf hash is `L` = SHA-256(0x00 || BODY) (RFC 6962), and `H` is the
//! lowercase hex SHA-256 of the previous record's `event.hash` (64 hex characters), a newline
//! and `L` (32 bytes): one pass over the line ([`Scheme::Leaf`], scheme 2). Lines written
//! before (up to 7c3d168) carry no `event.hash_scheme`: `H` = SHA-256(previous hash, newline,
//! BODY) and the leaf is the whole line as written ([`Scheme::Line`], scheme 1); both are
//! read, each line by its own bytes ([`Sealed`]). `event.sequence` counts the records of the
//! chain from 1; `event.previous_hash` is on the first record written after the writer opens a
//! file (start, rotation, recovery from a failed write): it names the hash the chain continues
//! from, so a file can be checked alone, and a sequence of files in order. The chain starts
//! from [`GENESIS`]. `docs/audit.md` ("The hash chain") describes it for verifiers.
//!
//! Per record: one SHA-256 over the bytes already in the batch (and one over 97 bytes), no
//! allocation.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};

use sha2::{Digest, Sha256};

use super::merkle::{self, Hash};
use robots_proxy_archive::robots_version::hex_into;

/// The hash the chain starts from: 64 zeros.
pub const GENESIS: [u8; 64] = [b'0'; 64];

/// What precedes the hash at the end of every line.
pub(crate) const HASH_MEMBER: &[u8] = b",\"event.hash\":\"";

/// The length of the end of a line from `,"event.hash":"` on: the member, 64 hex digits, `"}`.
pub(crate) const HASH_TAIL: usize = HASH_MEMBER.len() + 64 + 2;

/// The member that ends the body of a line of scheme 2 (right before `event.hash`).
pub const SCHEME_MEMBER: &[u8] = b",\"event.hash_scheme\":2";

/// How a line's `event.hash` and Merkle leaf are computed, as its own bytes say: scheme 2 when
/// its body ends with [`SCHEME_MEMBER`], else scheme 1. Never guessed from whether a hash
/// matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// Scheme 1 (written up to 7c3d168): `event.hash` = SHA-256(previous hash, `\n`, BODY);
    /// the leaf is the line as written.
    Line,
    /// Scheme 2: the leaf is BODY; `event.hash` = SHA-256(previous hash, `\n`, leaf hash).
    Leaf,
}

impl Scheme {
    /// The value of `event.hash_scheme` that goes with it (absent for scheme 1).
    pub fn member(self) -> Option<u64> {
        match self {
            Scheme::Line => None,
            Scheme::Leaf => Some(2),
        }
    }
}

/// The leaf hash of a line of scheme 2 whose body (without its final `}`) is `body`:
/// SHA-256(0x00 || body || `}`).
pub(crate) fn leaf_of_body(body: &[u8]) -> Hash {
    let mut h = Sha256::new();
    h.update([0u8]);
    h.update(body);
    h.update(b"}");
    h.finalize().into()
}

/// The `event.hash` (lowercase hex) of a line of scheme 2 after `head`, from its leaf hash.
pub(crate) fn link_leaf(head: &[u8], leaf: &Hash) -> [u8; 64] {
    let mut hasher = Sha256::new();
    hasher.update(head);
    hasher.update(b"\n");
    hasher.update(leaf);
    let mut out = [0u8; 64];
    hex_into(&hasher.finalize(), &mut out);
    out
}

/// A line of the chain (without its newline), split: what the hash covers and the hash.
#[derive(Debug, Clone, Copy)]
pub struct Sealed<'a> {
    line: &'a [u8],
    /// The line without its `event.hash` member and without its final `}`.
    pub body: &'a [u8],
    /// Its `event.hash`, 64 lowercase hex digits.
    pub hash: &'a [u8],
    /// How it was hashed.
    pub scheme: Scheme,
}

/// The Merkle leaf hash of a line of the chain as written (without its newline), by its own
/// scheme ([`Sealed::leaf`]); a line that is not a sealed record is hashed whole.
pub(crate) fn leaf_of_line(line: &[u8]) -> Hash {
    Sealed::parse(line).map_or_else(|| merkle::leaf_hash(line), |sealed| sealed.leaf())
}

impl<'a> Sealed<'a> {
    /// The line split, when it ends with `,"event.hash":"<64 lowercase hex>"}`.
    pub fn parse(line: &'a [u8]) -> Option<Sealed<'a>> {
        let (body, hash) = split_line(line)?;
        let scheme = if body.ends_with(SCHEME_MEMBER) { Scheme::Leaf } else { Scheme::Line };
        Some(Sealed { line, body, hash, scheme })
    }

    /// Its Merkle leaf hash: SHA-256(0x00 || the leaf's bytes).
    pub fn leaf(&self) -> Hash {
        match self.scheme {
            Scheme::Line => merkle::leaf_hash(self.line),
            Scheme::Leaf => leaf_of_body(self.body),
        }
    }

    /// The bytes of its Merkle leaf: the line as written (scheme 1), or without its
    /// `event.hash` member (scheme 2).
    pub fn leaf_bytes(&self) -> std::borrow::Cow<'a, [u8]> {
        match self.scheme {
            Scheme::Line => self.line.into(),
            Scheme::Leaf => [self.body, b"}"].concat().into(),
        }
    }

    /// Whether its `event.hash` follows from `head` (the hash it continues from), given its
    /// leaf hash `leaf` (from [`Sealed::leaf`]: computed once per line).
    pub fn follows(&self, head: &[u8], leaf: &Hash) -> bool {
        let expected = match self.scheme {
            Scheme::Line => link_line(head, self.body),
            Scheme::Leaf => link_leaf(head, leaf),
        };
        expected == self.hash
    }

    /// Its `event.hash` as an array.
    pub(crate) fn hash_array(&self) -> [u8; 64] {
        let mut out = [0u8; 64];
        out.copy_from_slice(self.hash);
        out
    }
}

/// The chain's state in the writer.
#[derive(Debug, Clone)]
pub(super) struct Chain {
    /// The last record's `event.hash`, as hex text.
    pub(super) head: [u8; 64],
    /// The last record's `event.sequence` (0: none yet).
    pub(super) sequence: u64,
    /// The next record names `event.previous_hash` (a file was opened).
    pub(super) mark: bool,
    /// Whether `head` is known (from a record written, or read from the file at start).
    pub(super) known: bool,
    /// The Merkle tree over the lines of this chain since it started (`merkle.rs`), and its
    /// origin (`note.rs`); `None` when the writer continues a chain it found without a key
    /// (no checkpoint is ever signed then).
    pub(super) tree: Option<Segment>,
}

/// The Merkle tree of a chain: its right edge and its checkpoints' origin.
#[derive(Debug, Clone)]
pub(super) struct Segment {
    pub(super) tree: super::merkle::Tree,
    pub(super) origin: String,
}

impl Segment {
    /// A new tree under a new origin.
    pub(super) fn new() -> Segment {
        Segment { tree: super::merkle::Tree::default(), origin: super::note::new_origin() }
    }
}

impl Default for Chain {
    fn default() -> Self {
        Chain { head: GENESIS, sequence: 0, mark: true, known: false, tree: Some(Segment::new()) }
    }
}

impl Chain {
    /// Appends `line` (a JSON object, newline included) to `batch` with the chain's members
    /// (scheme 2); returns its leaf hash.
    pub(super) fn seal(&mut self, batch: &mut Vec<u8>, line: &[u8]) -> Hash {
        let start = batch.len();
        let body = line.strip_suffix(b"\n").unwrap_or(line);
        // Every record is a JSON object: `}` ends it.
        let body = body.strip_suffix(b"}").unwrap_or(body);
        batch.extend_from_slice(body);
        self.sequence += 1;
        batch.extend_from_slice(b",\"event.sequence\":");
        batch.extend_from_slice(itoa::Buffer::new().format(self.sequence).as_bytes());
        if self.mark {
            batch.extend_from_slice(b",\"event.previous_hash\":\"");
            batch.extend_from_slice(&self.head);
            batch.push(b'"');
            self.mark = false;
        }
        batch.extend_from_slice(SCHEME_MEMBER);
        // One pass over the line: its leaf, then the chain's step from the leaf's hash.
        let leaf = leaf_of_body(&batch[start..]);
        self.head = link_leaf(&self.head, &leaf);
        self.known = true;
        batch.extend_from_slice(HASH_MEMBER);
        batch.extend_from_slice(&self.head);
        batch.extend_from_slice(b"\"}");
        if let Some(segment) = &mut self.tree {
            segment.tree.push_hash(leaf);
        }
        batch.push(b'\n');
        leaf
    }

    /// The head as text.
    pub(super) fn head_str(&self) -> &str {
        // Only ASCII hex digits are ever stored.
        std::str::from_utf8(&self.head).unwrap_or("")
    }
}

/// The `event.hash` of a line of scheme 1 after `head`: the lowercase hex SHA-256 of `head`, a
/// newline and `body` with its `}` (the line without its `event.hash` member).
fn link_line(head: &[u8], body_without_brace: &[u8]) -> [u8; 64] {
    let mut hasher = Sha256::new();
    hasher.update(head);
    hasher.update(b"\n");
    hasher.update(body_without_brace);
    hasher.update(b"}");
    let mut out = [0u8; 64];
    hex_into(&hasher.finalize(), &mut out);
    out
}

/// Splits a line (without its newline) into the part the hash covers (without the final `}`)
/// and the hash, when it ends with `,"event.hash":"<64 lowercase hex>"}`.
pub(crate) fn split_line(line: &[u8]) -> Option<(&[u8], &[u8])> {
    if line.len() < HASH_TAIL + 1 || !line.ends_with(b"\"}") {
        return None;
    }
    let at = line.len() - HASH_TAIL;
    let (body, tail) = line.split_at(at);
    let hash = tail.strip_prefix(HASH_MEMBER)?.get(..64)?;
    hash.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')).then_some((body, hash))
}

/// The `event.sequence` of a line's body (the digits after the last `"event.sequence":`).
fn sequence_of(body: &[u8]) -> Option<u64> {
    const KEY: &[u8] = b",\"event.sequence\":";
    let at = body.windows(KEY.len()).rposition(|w| w == KEY)? + KEY.len();
    let digits: &[u8] = &body[at..];
    let end = digits.iter().position(|b| !b.is_ascii_digit()).unwrap_or(digits.len());
    std::str::from_utf8(&digits[..end]).ok()?.parse().ok()
}

/// Most lines looked at from the end of a file for the last record of the chain (the lines
/// after it being torn by crashes).
const LOOK_BACK_LINES: usize = 16;

/// The chain as the file at `file` ends: the last whole record's hash and sequence, looking
/// back past torn lines (up to [`LOOK_BACK_LINES`]). `None` when the file holds no record of
/// a chain (empty, or written before the chain existed).
pub(super) fn read_head(file: &mut File) -> io::Result<Option<Chain>> {
    let len = file.seek(SeekFrom::End(0))?;
    // The file's tail, twice as long each time the lines in it do not settle the question.
    let mut want: u64 = 64 * 1024;
    loop {
        let from = len.saturating_sub(want);
        let mut tail = vec![0u8; usize::try_from(len - from).unwrap_or(usize::MAX)];
        file.seek(SeekFrom::Start(from))?;
        file.read_exact(&mut tail)?;
        let mut lines = tail.split(|b| *b == b'\n').rev();
        // What follows the last newline: nothing, or a line cut short.
        let _ = lines.next();
        let mut looked = 0;
        let mut lines = lines.peekable();
        while let Some(line) = lines.next() {
            // The first line of the tail may begin before it, unless the tail is the file.
            if lines.peek().is_none() && from > 0 {
                break;
            }
            if let Some((body, hash)) = split_line(line) {
                if let Some(sequence) = sequence_of(body) {
                    let mut head = [0u8; 64];
                    head.copy_from_slice(hash);
                    return Ok(Some(Chain { head, sequence, mark: true, known: true, tree: None }));
                }
            }
            looked += 1;
            if looked >= LOOK_BACK_LINES {
                return Ok(None);
            }
        }
        if from == 0 {
            return Ok(None);
        }
        want = want.saturating_mul(2);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn seal_appends_sequence_previous_and_hash_and_split_reads_them_back() {
        let mut chain = Chain::default();
        let mut batch = Vec::new();
        let leaf1 = chain.seal(&mut batch, b"{\"a\":1}\n");
        let leaf2 = chain.seal(&mut batch, b"{\"b\":2}\n");
        let text = String::from_utf8(batch.clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with(
            "{\"a\":1,\"event.sequence\":1,\"event.previous_hash\":\"0000000000000000"
        ));
        assert!(lines[1].starts_with(
            "{\"b\":2,\"event.sequence\":2,\"event.hash_scheme\":2,\"event.hash\":\""
        ));
        // Scheme 2: the leaf is the line without its event.hash member, and the hash follows
        // from the previous hash and the leaf's hash.
        let one = Sealed::parse(lines[0].as_bytes()).unwrap();
        assert_eq!(one.scheme, Scheme::Leaf);
        assert_eq!(one.leaf(), leaf1);
        let body = format!("{}}}", std::str::from_utf8(one.body).unwrap());
        assert_eq!(merkle::leaf_hash(body.as_bytes()), leaf1);
        assert_eq!(&one.leaf_bytes()[..], body.as_bytes());
        assert_eq!(link_leaf(&GENESIS, &leaf1), one.hash);
        assert!(one.follows(&GENESIS, &leaf1));
        assert!(!one.follows(&[b'1'; 64], &leaf1));
        let two = Sealed::parse(lines[1].as_bytes()).unwrap();
        assert_eq!(two.leaf(), leaf2);
        assert!(two.follows(one.hash, &leaf2));
        assert!(!two.follows(one.hash, &leaf1));
        assert_eq!(&chain.head[..], two.hash);
        // One byte changed: the leaf and so the hash no longer follow.
        let changed = lines[1].replace("\"b\":2", "\"b\":3");
        let changed = Sealed::parse(changed.as_bytes()).unwrap();
        assert!(!changed.follows(one.hash, &changed.leaf()));
        // Each line is JSON.
        for line in lines {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            assert!(v["event.hash"].is_string());
            assert_eq!(v["event.hash_scheme"], 2);
        }
    }

    /// Lines written before (scheme 1, tests/fixtures/audit-v1, by 7c3d168) are read by their
    /// own rule: the hash over the body, the leaf over the line as written.
    #[test]
    fn lines_of_the_first_scheme_follow_by_their_own_rule() {
        let text = include_str!("../../../tests/fixtures/audit-v1/audit.jsonl.1");
        let mut head: Option<[u8; 64]> = None;
        for line in text.lines() {
            let sealed = Sealed::parse(line.as_bytes()).unwrap();
            assert_eq!(sealed.scheme, Scheme::Line);
            assert_eq!(sealed.leaf(), merkle::leaf_hash(line.as_bytes()));
            assert_eq!(&sealed.leaf_bytes()[..], line.as_bytes());
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let from = match v["event.previous_hash"].as_str() {
                Some(p) => p.as_bytes().try_into().unwrap(),
                None => head.unwrap(),
            };
            assert!(sealed.follows(&from, &sealed.leaf()), "{line}");
            // The same line read as scheme 2 does not follow: no line passes under both.
            let as_two = Sealed { scheme: Scheme::Leaf, ..sealed };
            assert!(!as_two.follows(&from, &as_two.leaf()));
            head = Some(sealed.hash_array());
        }
    }

    #[test]
    fn the_head_is_read_back_past_torn_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.jsonl");
        let mut chain = Chain::default();
        let mut batch = Vec::new();
        chain.seal(&mut batch, b"{\"a\":1}\n");
        chain.seal(&mut batch, &[b"{\"big\":\"", &vec![b'x'; 200_000][..], b"\"}\n"].concat());
        let want = chain.clone();
        batch.extend_from_slice(b"{\"torn\":\"xx\n{\"torn2\n");
        std::fs::File::create(&path).unwrap().write_all(&batch).unwrap();
        let mut file = std::fs::File::open(&path).unwrap();
        let got = read_head(&mut file).unwrap().unwrap();
        assert_eq!(got.head, want.head);
        assert_eq!(got.sequence, 2);
        std::fs::write(&path, b"{\"old\":1}\n").unwrap();
        let mut file = std::fs::File::open(&path).unwrap();
        assert!(read_head(&mut file).unwrap().is_none());
        std::fs::write(&path, b"").unwrap();
        let mut file = std::fs::File::open(&path).unwrap();
        assert!(read_head(&mut file).unwrap().is_none());
    }
}
