//! Turning a robots.txt body into lines, key/value pairs and groups.
//!
//! The parser is lenient in the way Google's open-source parser is (RFC 9309 §2.2 asks crawlers
//! to be "liberal in what they accept"): it never fails, it skips what it cannot read, and it
//! accepts the common misspellings of field names. What it produces is a flat list of groups and
//! rules with their line numbers; compiling them for matching is [`super::RobotsTxt`]'s job.

/// Longest line Google's parser reads; longer lines are cut to this many bytes and the rest of
/// the line is ignored (Google: `kMaxLineLen = 2083 * 8`, one byte kept for the terminator).
pub const MAX_LINE_BYTES: usize = 2083 * 8 - 1;

/// What a line says, once its field name has been recognised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Field {
    Allow,
    ContentSignal,
    ContentUsage,
    CrawlDelay,
    Disallow,
    Sitemap,
    UserAgent,
    Unknown,
}

/// One `field: value` line, borrowed from the body.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Line<'a> {
    pub(crate) number: u32,
    pub(crate) field: Field,
    pub(crate) value: &'a [u8],
}

/// Skips a leading UTF-8 byte order mark, or the part of one that is there (Google skips a
/// partial BOM too).
pub(crate) fn skip_bom(body: &[u8]) -> &[u8] {
    const BOM: &[u8] = b"\xEF\xBB\xBF";
    let n = body.iter().zip(BOM).take_while(|(a, b)| a == b).count();
    &body[n..]
}

/// Iterates over the physical lines of `body` with their 1-based numbers. A line ends at CR, LF
/// or CRLF; the last line need not end at all. What follows a NUL octet on a line is not part
/// of it.
pub(crate) fn physical_lines(body: &[u8]) -> impl Iterator<Item = (u32, &[u8])> {
    let mut rest = body;
    let mut number: u32 = 0;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        number = number.saturating_add(1);
        let end = memchr::memchr2(b'\n', b'\r', rest).unwrap_or(rest.len());
        let mut line = &rest[..end];
        // A NUL ends the line's content there, as in Google's parser (which reads each line as
        // a C string); the line still counts.
        if let Some(nul) = memchr::memchr(0, line) {
            line = &line[..nul];
        }
        let mut next = end;
        if next < rest.len() {
            next += if rest[next] == b'\r' && rest.get(next + 1) == Some(&b'\n') { 2 } else { 1 };
        }
        rest = &rest[next..];
        Some((number, line))
    })
}

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\x0b' | b'\x0c' | b'\r' | b'\n')
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = s {
        if is_space(*first) {
            s = rest;
        } else {
            break;
        }
    }
    while let [rest @ .., last] = s {
        if is_space(*last) {
            s = rest;
        } else {
            break;
        }
    }
    s
}

/// Splits one physical line into key and value, or `None` if the line holds no directive.
///
/// `key : value # comment`, with whitespace allowed around each part. As in Google's parser, a
/// missing colon is accepted when the line holds exactly two whitespace-separated words
/// (`disallow /x`).
pub(crate) fn key_value(line: &[u8]) -> Option<(&[u8], &[u8])> {
    let line = &line[..line.len().min(MAX_LINE_BYTES)];
    let line = match memchr::memchr(b'#', line) {
        Some(hash) => &line[..hash],
        None => line,
    };
    let line = trim(line);
    if line.is_empty() {
        return None;
    }
    let (key, value) = match memchr::memchr(b':', line) {
        Some(colon) => (&line[..colon], &line[colon + 1..]),
        None => {
            let space = line.iter().position(|&b| b == b' ' || b == b'\t')?;
            let value = trim(&line[space..]);
            if value.iter().any(|&b| b == b' ' || b == b'\t') {
                return None;
            }
            (&line[..space], value)
        }
    };
    let key = trim(key);
    if key.is_empty() {
        return None;
    }
    Some((key, trim(value)))
}

fn starts_with_ignore_case(s: &[u8], prefix: &str) -> bool {
    s.len() >= prefix.len() && s[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
}

/// Recognises a field name, with the misspellings Google accepts.
pub(crate) fn field_of(key: &[u8]) -> Field {
    let any = |names: &[&str]| names.iter().any(|n| starts_with_ignore_case(key, n));
    // Dispatch on the first letter first: this runs for every line of files with 100,000 lines.
    match key.first().map(u8::to_ascii_lowercase) {
        Some(b'u') if any(&["user-agent", "useragent", "user agent", "user_agent"]) => {
            Field::UserAgent
        }
        Some(b'a') if any(&["allow"]) => Field::Allow,
        Some(b'd')
            if any(&["disallow", "dissallow", "dissalow", "disalow", "diasllow", "disallaw"]) =>
        {
            Field::Disallow
        }
        Some(b's') if any(&["sitemap", "site-map"]) => Field::Sitemap,
        Some(b'c') if any(&["crawl-delay", "crawl_delay", "crawldelay", "crawl delay"]) => {
            Field::CrawlDelay
        }
        Some(b'c') if any(&["content-usage"]) => Field::ContentUsage,
        Some(b'c') if any(&["content-signal"]) => Field::ContentSignal,
        _ => Field::Unknown,
    }
}

/// Iterates over the directive lines of a body that has already been cut to the size limit.
pub(crate) fn lines(body: &[u8]) -> impl Iterator<Item = Line<'_>> {
    physical_lines(skip_bom(body)).filter_map(|(number, raw)| {
        let (key, value) = key_value(raw)?;
        Some(Line { number, field: field_of(key), value })
    })
}

/// What a `user-agent` value names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AgentName {
    /// `*`: the group for every crawler without a group of its own.
    Any,
    /// A product token, lower-cased: the longest prefix of the value made of letters, `_` and
    /// `-` (so `Googlebot/2.1` and `googlebot*` both name `googlebot`). May be empty, in which
    /// case the line names no crawler.
    Token(Box<[u8]>),
}

/// Reads a `user-agent` value the way Google does.
pub(crate) fn agent_name(value: &[u8]) -> AgentName {
    if value.first() == Some(&b'*') && value.get(1).is_none_or(|&b| is_space(b)) {
        return AgentName::Any;
    }
    let end = value
        .iter()
        .position(|&b| !(b.is_ascii_alphabetic() || b == b'_' || b == b'-'))
        .unwrap_or(value.len());
    AgentName::Token(value[..end].to_ascii_lowercase().into_boxed_slice())
}

/// The crawler name a `user-agent` value writes in full, lower-cased, when it is more than
/// Google's reading ([`agent_name`]) keeps: `AI2Bot` (Google: `ai`), `MJ12bot` (`mj`),
/// `360Spider` (no name at all), `archive.org_bot` (`archive`), `Kangaroo Bot` (`kangaroo`).
/// RFC 9309 §2.2.1 allows only letters, `_` and `-` in a product token, but the site that writes
/// `User-agent: AI2Bot` means the crawler called AI2Bot, so a group names that full name too
/// (`docs/engine.md`, "Crawler names beyond RFC 9309's tokens").
///
/// The name is the value up to a `/` (a version) or a `*`, its words made of letters, digits,
/// `_`, `-` and `.` and separated by single spaces (runs of blanks count as one). `None` when the
/// value holds anything else, or when the full name is Google's reading (every RFC 9309 token):
/// then the line names exactly what it did before.
pub(crate) fn full_agent_name(value: &[u8]) -> Option<Box<[u8]>> {
    let end = value.iter().position(|&b| b == b'/' || b == b'*').unwrap_or(value.len());
    let mut out: Vec<u8> = Vec::with_capacity(end);
    for word in value[..end].split(|&b| is_space(b)).filter(|w| !w.is_empty()) {
        if !word.iter().all(|&b| is_name_byte(b)) {
            return None;
        }
        if !out.is_empty() {
            out.push(b' ');
        }
        out.extend(word.iter().map(u8::to_ascii_lowercase));
    }
    let google = match agent_name(value) {
        AgentName::Token(t) => t,
        AgentName::Any => return None,
    };
    (!out.is_empty() && out[..] != google[..]).then(|| out.into_boxed_slice())
}

/// A byte of a crawler's name as the proxy reads it (beyond RFC 9309's letters, `_`, `-`):
/// also digits and `.`.
pub(crate) fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')
}

/// Reads a `crawl-delay` value: a non-negative decimal number of seconds.
pub(crate) fn crawl_delay_seconds(value: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(value).ok()?;
    let seconds: f64 = text.trim().parse().ok()?;
    (seconds.is_finite() && seconds >= 0.0).then_some(seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_endings_are_counted_alike() {
        let nums = |b: &[u8]| physical_lines(b).map(|(n, l)| (n, l.to_vec())).collect::<Vec<_>>();
        let expect =
            vec![(1, b"a".to_vec()), (2, b"b".to_vec()), (3, b"".to_vec()), (4, b"c".to_vec())];
        assert_eq!(nums(b"a\nb\n\nc"), expect);
        assert_eq!(nums(b"a\r\nb\r\n\r\nc\r\n"), expect);
        assert_eq!(nums(b"a\rb\r\rc\r"), expect);
        assert_eq!(nums(b"a\r\nb\r\n\rc\n"), expect);
    }

    #[test]
    fn key_value_forms() {
        assert_eq!(key_value(b"  Disallow :  /x  # c"), Some((&b"Disallow"[..], &b"/x"[..])));
        assert_eq!(key_value(b"disallow /x"), Some((&b"disallow"[..], &b"/x"[..])));
        assert_eq!(key_value(b"disallow /x /y"), None);
        assert_eq!(key_value(b"# only a comment"), None);
        assert_eq!(key_value(b": /x"), None);
        assert_eq!(key_value(b"disallow:"), Some((&b"disallow"[..], &b""[..])));
        assert_eq!(key_value(b"allow: /a:b"), Some((&b"allow"[..], &b"/a:b"[..])));
    }

    #[test]
    fn misspelled_fields() {
        for k in ["disalow", "dissallow", "dissalow", "diasllow", "disallaw", "DISALLOW"] {
            assert_eq!(field_of(k.as_bytes()), Field::Disallow, "{k}");
        }
        for k in ["useragent", "user agent", "User-Agent"] {
            assert_eq!(field_of(k.as_bytes()), Field::UserAgent, "{k}");
        }
        assert_eq!(field_of(b"site-map"), Field::Sitemap);
        assert_eq!(field_of(b"foo"), Field::Unknown);
    }

    #[test]
    fn agent_names() {
        assert_eq!(agent_name(b"*"), AgentName::Any);
        assert_eq!(agent_name(b"* "), AgentName::Any);
        assert_eq!(agent_name(b"Googlebot/2.1"), AgentName::Token(b"googlebot".to_vec().into()));
        assert_eq!(agent_name(b"googlebot*"), AgentName::Token(b"googlebot".to_vec().into()));
        assert_eq!(agent_name(b"Foo Bar"), AgentName::Token(b"foo".to_vec().into()));
        assert_eq!(agent_name(b"*bot"), AgentName::Token(b"".to_vec().into()));
        // The full name, where Google's reading keeps less (review-core N3).
        let full = |v: &[u8]| full_agent_name(v).map(|n| String::from_utf8(n.into()).unwrap());
        assert_eq!(full(b"AI2Bot").as_deref(), Some("ai2bot"));
        assert_eq!(full(b"MJ12bot/v1.4").as_deref(), Some("mj12bot"));
        assert_eq!(full(b"360Spider").as_deref(), Some("360spider"));
        assert_eq!(full(b"archive.org_bot").as_deref(), Some("archive.org_bot"));
        assert_eq!(full(b"Kangaroo  Bot").as_deref(), Some("kangaroo bot"));
        assert_eq!(full(b"Googlebot/2.1"), None);
        assert_eq!(full(b"googlebot*"), None);
        assert_eq!(full(b"*"), None);
        assert_eq!(full(b"Foo (bar)"), None);
    }

    #[test]
    fn bom_whole_or_partial() {
        assert_eq!(skip_bom(b"\xEF\xBB\xBFa"), b"a");
        assert_eq!(skip_bom(b"\xEF\xBBa"), b"a");
        assert_eq!(skip_bom(b"\xEFa"), b"a");
        assert_eq!(skip_bom(b"a"), b"a");
    }

    /// Each field by its own name only: a key that shares the first letter is unknown.
    #[test]
    fn fields_are_told_apart_past_their_first_letter() {
        assert_eq!(field_of(b"Allow"), Field::Allow);
        assert_eq!(field_of(b"ajax"), Field::Unknown);
        assert_eq!(field_of(b"Content-Usage"), Field::ContentUsage);
        assert_eq!(field_of(b"content-signal"), Field::ContentSignal);
        assert_eq!(field_of(b"crawl_delay"), Field::CrawlDelay);
        assert_eq!(field_of(b"content-type"), Field::Unknown);
        // Only the names Google accepts are `disallow` or `sitemap`.
        assert_eq!(field_of(b"disallow"), Field::Disallow);
        assert_eq!(field_of(b"disalow"), Field::Disallow);
        assert_eq!(field_of(b"deny"), Field::Unknown);
        assert_eq!(field_of(b"d"), Field::Unknown);
        assert_eq!(field_of(b"site-map"), Field::Sitemap);
        assert_eq!(field_of(b"search"), Field::Unknown);
    }

    /// A crawl-delay is a finite number of seconds, zero or more.
    #[test]
    fn crawl_delays_are_finite_and_not_negative() {
        assert_eq!(crawl_delay_seconds(b" 2.5 "), Some(2.5));
        assert_eq!(crawl_delay_seconds(b"0"), Some(0.0));
        for bad in [&b"-1"[..], b"soon", b"inf", b"NaN", b"", b"\xff"] {
            assert_eq!(crawl_delay_seconds(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }

    /// A crawler's name goes on through `_` and `-` (`googlebot-news`), and stops at others.
    #[test]
    fn agent_names_take_underscores_and_dashes() {
        assert_eq!(
            agent_name(b"Foo-Bar_Baz/1.0"),
            AgentName::Token(b"foo-bar_baz".to_vec().into())
        );
        assert_eq!(agent_name(b"a-b c"), AgentName::Token(b"a-b".to_vec().into()));
    }
}
