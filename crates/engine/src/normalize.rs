//! Percent-encoding normalisation of robots.txt patterns and URL paths.
//!
//! RFC 9309 §2.2.2 compares patterns and paths octet by octet after bringing both into one form.
//! The project's decision (`shared/spec/README.md`, "Matching a URL"):
//!
//! * non-ASCII and reserved octets compare in percent-encoded form (UTF-8);
//! * `%XX` of an unreserved character (`A-Z a-z 0-9 - . _ ~`) compares equal to the character;
//! * hex case does not matter.
//!
//! The canonical form produced here therefore:
//!
//! * keeps unreserved and reserved (RFC 3986 §2.2) characters as they are;
//! * decodes `%XX` when it encodes an unreserved character, and upper-cases the hex otherwise;
//! * encodes every other octet (controls, space, `"<>\^`{|}`, non-ASCII, a `%` that does not
//!   start a valid escape) as `%XX`.
//!
//! The form is idempotent and always ASCII. `*` and `$` are reserved characters, so they survive
//! unchanged and keep their meaning in patterns. For matching, [`normalize_pattern`] and
//! [`normalize_path_for_matching_into`] go one step further so that `%2A` and `%24` in a pattern
//! name a URL's literal `*` and `$` (RFC 9309 §2.2.3).
//!
//! The engine matches a path as written: dot-segments and repeated slashes are not resolved
//! here. What an origin server makes of them is the proxy's concern (`crate::policy::readings`).

/// What a byte is to RFC 3986, for the purpose of normalisation.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    /// `A-Z a-z 0-9 - . _ ~`
    Unreserved,
    /// `: / ? # [ ] @ ! $ & ' ( ) * + , ; =`
    Reserved,
    /// `%`
    Percent,
    /// Everything else: always written as `%XX`.
    Other,
}

const fn class_table() -> [Class; 256] {
    let mut t = [Class::Other; 256];
    let mut b = 0usize;
    while b < 256 {
        let c = b as u8;
        t[b] = if c.is_ascii_alphanumeric() || c == b'-' || c == b'.' || c == b'_' || c == b'~' {
            Class::Unreserved
        } else if matches!(
            c,
            b':' | b'/'
                | b'?'
                | b'#'
                | b'['
                | b']'
                | b'@'
                | b'!'
                | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b';'
                | b'='
        ) {
            Class::Reserved
        } else if c == b'%' {
            Class::Percent
        } else {
            Class::Other
        };
        b += 1;
    }
    t
}

static CLASS: [Class; 256] = class_table();

const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";

/// The value of one hex digit.
pub fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

fn push_escaped(out: &mut Vec<u8>, b: u8) {
    out.push(b'%');
    out.push(HEX_UPPER[usize::from(b >> 4)]);
    out.push(HEX_UPPER[usize::from(b & 0x0f)]);
}

/// Writes octets that were already percent-decoded so that matching reads each as the octet it
/// is: unreserved and reserved characters stay, except `?` and `#` (which would start a query
/// or a fragment); `%` and every other octet are escaped.
pub fn escape_decoded(input: &[u8]) -> String {
    let mut out = Vec::with_capacity(input.len() + 8);
    for &b in input {
        push_decoded(&mut out, b);
    }
    // ASCII by construction.
    String::from_utf8(out).unwrap_or_default()
}

/// One decoded octet as [`escape_decoded`] writes it.
fn push_decoded(out: &mut Vec<u8>, b: u8) {
    match CLASS[usize::from(b)] {
        Class::Unreserved | Class::Reserved if b != b'?' && b != b'#' => out.push(b),
        _ => push_escaped(out, b),
    }
}

/// A pattern in canonical form ([`normalize_pattern`]) read as an origin reads a path it
/// percent-decodes: every `%XX` decoded and written back by [`escape_decoded`], the function a
/// decoded reading of a path goes through (`crate::policy::readings`), so that
/// `/wiki/Special%3ARandom` becomes `/wiki/Special:Random` and `/a%2Fb` becomes `/a/b`. What
/// [`escape_decoded`] escapes again (`%25`, `%3F`, `%23`, non-ASCII, …) comes out as it was;
/// `%2A` and `%24` stay too, as they name a literal `*` and `$` where the raw characters are
/// operators. `None` when nothing changes, the common case.
pub(crate) fn decode_pattern(pattern: &[u8]) -> Option<String> {
    let first = memchr::memchr(b'%', pattern)?;
    let mut out = Vec::with_capacity(pattern.len());
    out.extend_from_slice(&pattern[..first]);
    let mut changed = false;
    let mut i = first;
    while i < pattern.len() {
        let b = pattern[i];
        let escaped = (b == b'%')
            .then(|| Some(hex_value(*pattern.get(i + 1)?)? << 4 | hex_value(*pattern.get(i + 2)?)?))
            .flatten();
        match escaped {
            Some(d) if d != b'*' && d != b'$' => {
                let before = out.len();
                push_decoded(&mut out, d);
                changed |= out.len() - before == 1;
                i += 3;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    // ASCII by construction.
    changed.then(|| String::from_utf8(out).unwrap_or_default())
}

/// Whether `input` is already in canonical form, so that a caller can skip the copy.
///
/// Conservative: any `%` makes it answer `false`.
pub fn is_canonical(input: &[u8]) -> bool {
    input.iter().all(|&b| matches!(CLASS[usize::from(b)], Class::Unreserved | Class::Reserved))
}

/// Whether `input` is already in the canonical form of a path *for matching*
/// ([`normalize_path_for_matching_into`]): canonical, and without a literal `*` or `$`.
pub fn is_canonical_path_for_matching(input: &[u8]) -> bool {
    // Branch-free over chunks: paths are short and nearly always canonical, so an early exit
    // saves nothing while a branch per byte costs a lot.
    let mut chunks = input.chunks_exact(8);
    for chunk in &mut chunks {
        if !chunk.iter().fold(true, |ok, &b| ok & PLAIN_FOR_MATCHING[usize::from(b)]) {
            return false;
        }
    }
    chunks.remainder().iter().fold(true, |ok, &b| ok & PLAIN_FOR_MATCHING[usize::from(b)])
}

/// The octets that a path keeps as they are in the form for matching: unreserved and reserved,
/// but not `*` and `$`. One table lookup per octet on the hot path of every decision.
static PLAIN_FOR_MATCHING: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0usize;
    while b < 256 {
        t[b] = matches!(CLASS[b], Class::Unreserved | Class::Reserved)
            && b != b'*' as usize
            && b != b'$' as usize;
        b += 1;
    }
    t
};

/// Appends the canonical form of `input` to `out` (see the module documentation).
pub(crate) fn normalize_into(input: &[u8], out: &mut Vec<u8>) {
    normalize_with(input, out, false);
}

/// Appends the form of a URL path and query that patterns are matched against: the canonical
/// form, with `*` and `$` written `%2A` and `%24`.
///
/// Why: in a pattern `*` and `$` are operators, so a pattern names the characters themselves as
/// `%2A` and `%24`, and RFC 9309 §2.2.3 says such a pattern matches a URL that has them literally
/// (`/path/file-with-a-%2A.html` matches `/path/file-with-a-*.html`). Encoding them in the path
/// (and a `$` that is not a pattern's final anchor, see [`normalize_pattern`]) makes the literal
/// and the encoded forms compare equal on both sides. This form is for matching only: a proxy
/// forwards the path as it was sent.
pub fn normalize_path_for_matching_into(input: &[u8], out: &mut Vec<u8>) {
    normalize_with(input, out, true);
}

/// The canonical form of an `allow`/`disallow` pattern: [`normalize`], and every `$` but a
/// final one (which anchors) written `%24`, since elsewhere `$` is an ordinary character
/// (Google) that must compare equal to a URL's `$` (see [`normalize_path_for_matching_into`]).
pub fn normalize_pattern(input: &[u8]) -> String {
    let mut out = Vec::with_capacity(input.len() + 8);
    normalize_pattern_into(input, &mut out);
    // ASCII by construction, as in `normalize`.
    String::from_utf8(out).unwrap_or_default()
}

/// [`normalize_pattern`] appending to `out`, so that a parser can reuse one buffer. Returns the
/// pattern's priority length: its canonical length with each middle `$` counted as the one
/// octet it was written as, not as the `%24` it becomes (Google measures the pattern as
/// written, so `Allow: /p$q` weighs 4 octets and loses to `Disallow: /p*q*`).
pub(crate) fn normalize_pattern_into(input: &[u8], out: &mut Vec<u8>) -> usize {
    let start = out.len();
    normalize_into(input, out);
    let pattern = &out[start..];
    let written_len = pattern.len();
    let body_len = pattern.len() - usize::from(pattern.last() == Some(&b'$'));
    if memchr::memchr(b'$', &pattern[..body_len]).is_some() {
        let mut rewritten = Vec::with_capacity(pattern.len() + 4);
        for &b in &pattern[..body_len] {
            if b == b'$' {
                rewritten.extend_from_slice(b"%24");
            } else {
                rewritten.push(b);
            }
        }
        rewritten.extend_from_slice(&pattern[body_len..]);
        out.truncate(start);
        out.extend_from_slice(&rewritten);
    }
    written_len
}

fn normalize_with(input: &[u8], out: &mut Vec<u8>, encode_operators: bool) {
    // Most patterns and paths are already canonical: one scan and one copy.
    let plain = |b: u8| match CLASS[usize::from(b)] {
        Class::Unreserved => true,
        Class::Reserved => !encode_operators || (b != b'*' && b != b'$'),
        Class::Percent | Class::Other => false,
    };
    if input.iter().all(|&b| plain(b)) {
        out.extend_from_slice(input);
        return;
    }
    out.reserve(input.len());
    let mut i = 0;
    while i < input.len() {
        let b = input[i];
        match CLASS[usize::from(b)] {
            Class::Reserved if encode_operators && (b == b'*' || b == b'$') => push_escaped(out, b),
            Class::Unreserved | Class::Reserved => out.push(b),
            Class::Other => push_escaped(out, b),
            Class::Percent => {
                let hi = input.get(i + 1).copied().and_then(hex_value);
                let lo = input.get(i + 2).copied().and_then(hex_value);
                match (hi, lo) {
                    (Some(hi), Some(lo)) => {
                        let decoded = (hi << 4) | lo;
                        if CLASS[usize::from(decoded)] == Class::Unreserved {
                            out.push(decoded);
                        } else {
                            push_escaped(out, decoded);
                        }
                        i += 2;
                    }
                    // A `%` that starts no escape stands for itself: `%25`.
                    _ => push_escaped(out, b'%'),
                }
            }
        }
        i += 1;
    }
}

/// The canonical form of `input` as a string (always ASCII).
pub fn normalize(input: &[u8]) -> String {
    let mut out = Vec::with_capacity(input.len() + 8);
    normalize_into(input, &mut out);
    // The canonical form is ASCII by construction: every byte >= 0x80 is escaped.
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only text with no `%` and nothing to encode is reported canonical.
    #[test]
    fn is_canonical_says_no_for_what_normalising_would_change() {
        assert!(is_canonical(b"/a/b?c=d&e=f*$"));
        for other in [&b"/a%20b"[..], b"/a b", b"/caf\xc3\xa9", b"/a\"b"] {
            assert!(!is_canonical(other), "{:?}", String::from_utf8_lossy(other));
        }
    }

    #[test]
    fn decoded_patterns() {
        let d = |p: &str| decode_pattern(p.as_bytes());
        assert_eq!(d("/wiki/Special%3ARandom").as_deref(), Some("/wiki/Special:Random"));
        assert_eq!(d("/a%2Fb*%2C$").as_deref(), Some("/a/b*,$"));
        // Kept: `%25`, `%2A`, `%24`, `%3F`, `%23`, non-ASCII, space; so nothing changes.
        assert_eq!(d("/p%25%2A%24%3F%23%C3%A9%20"), None);
        assert_eq!(d("/plain/*.php$"), None);
    }

    #[test]
    fn rfc_9309_percent_encoding_table() {
        // RFC 9309 §2.2.2, the table of equivalent forms.
        assert_eq!(normalize(b"/foo/bar?baz=quz"), "/foo/bar?baz=quz");
        assert_eq!(normalize("/foo/bar/ツ".as_bytes()), "/foo/bar/%E3%83%84");
        assert_eq!(normalize(b"/foo/bar/%E3%83%84"), "/foo/bar/%E3%83%84");
        assert_eq!(normalize(b"/foo/bar/%e3%83%84"), "/foo/bar/%E3%83%84");
        assert_eq!(normalize(b"/foo/bar/%62%61%7A"), "/foo/bar/baz");
        // Reserved characters keep their encoded and literal forms apart.
        assert_eq!(normalize(b"/a%2Fb"), "/a%2Fb");
        assert_ne!(normalize(b"/a%2Fb"), normalize(b"/a/b"));
        assert_eq!(normalize(b"/a%2fb"), "/a%2Fb");
    }

    #[test]
    fn other_octets_are_escaped() {
        assert_eq!(normalize(b"/a b"), "/a%20b");
        assert_eq!(normalize(b"/a%"), "/a%25");
        assert_eq!(normalize(b"/a%zz"), "/a%25zz");
        assert_eq!(normalize(b"/\xff"), "/%FF");
        assert_eq!(normalize(b"/*.php$"), "/*.php$");
    }

    #[test]
    fn canonical_is_idempotent_on_examples() {
        for s in ["/a%2", "/%25", "/%%41", "/%7e%7E", "/ü?x=ä", "/%2e%2E/x"] {
            let once = normalize(s.as_bytes());
            assert_eq!(normalize(once.as_bytes()), once, "{s}");
        }
    }

    #[test]
    fn star_and_dollar_compare_encoded_for_matching() {
        // RFC 9309 §2.2.3: `%2A` and `%24` in a pattern match a URL's literal `*` and `$`.
        assert_eq!(normalize_pattern(b"/a$b"), "/a%24b");
        assert_eq!(normalize_pattern(b"/a$b$"), "/a%24b$");
        assert_eq!(normalize_pattern(b"/a$$"), "/a%24$");
        assert_eq!(normalize_pattern(b"/*.php$"), "/*.php$");
        assert_eq!(normalize_pattern(b"/%2a%24"), "/%2A%24");
        let mut out = Vec::new();
        normalize_path_for_matching_into(b"/file-*.html?x=$1&y=%2a", &mut out);
        assert_eq!(out, b"/file-%2A.html?x=%241&y=%2A");
        assert!(!is_canonical_path_for_matching(b"/a*"));
        assert!(!is_canonical_path_for_matching(b"/a$"));
        assert!(is_canonical_path_for_matching(b"/a/b?c=d"));
        // A lone `*` or `$` in an otherwise plain path is escaped too (a survivor of the
        // engine's mutation run: only paths that also needed other escapes were tried).
        for (path, canonical) in [(&b"/a*b"[..], &b"/a%2Ab"[..]), (b"/a$b", b"/a%24b")] {
            out.clear();
            normalize_path_for_matching_into(path, &mut out);
            assert_eq!(out, canonical);
        }
    }

    /// A `$` in a form for matching is escaped even where nothing else would be (input with no
    /// other reserved octet; a survivor of the engine's mutation run: the one-scan fast path
    /// kept it).
    #[test]
    fn a_lone_dollar_is_escaped_for_matching() {
        for (input, canonical) in [(&b"a$b"[..], &b"a%24b"[..]), (b"$", b"%24"), (b"a*", b"a%2A")] {
            let mut out = Vec::new();
            normalize_path_for_matching_into(input, &mut out);
            assert_eq!(out, canonical);
        }
    }
}
