//! One output encoding per kind of sink, for text that outsiders wrote: an origin (its
//! robots.txt, response headers, redirect targets), a crawler (its URL, User-Agent, token), or
//! a file an operator was handed. The encoding is applied where the sink is written, so that no
//! caller has to remember it.
//!
//! - **Terminals** ([`terminal`]: `check --explain`, `evidence`, `audit`, `config check`, the
//!   403 text body) and **text logs** ([`log`]): every character a terminal or a line-oriented
//!   tool acts on is shown escaped, never emitted: C0 controls (tab excepted) and DEL as `\x1b`,
//!   `\x7f`; the C1 controls U+0080–U+009F (NEL U+0085 among them), the bidi controls
//!   (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069) and the line and paragraph
//!   separators U+2028, U+2029 as `\u0085`, `\u202e`. A terminal value longer than
//!   [`TERMINAL_MAX`] characters is cut with a marker saying how many bytes were left out
//!   (a log value at [`LOG_MAX`]). A backslash is shown as it is: the escapes are for a person
//!   to read, and every command that prints outsider text has a `--json` form (or the audit
//!   record) with the exact value.
//! - **JSON lines** ([`json_line`]: the audit log, the 403 in JSON, `--json` printouts):
//!   U+2028, U+2029, the C1 controls and the bidi controls are written as `\uXXXX` escapes, which any JSON parser reads back as the same characters, so
//!   the values are unchanged while tools that split on Unicode line breaks, and terminals that
//!   `tail` the file, see none of them raw.
//! - **HTML and XML** ([`markup`]: the `/crawlers` page and the Atom feed): `& < > " '` as
//!   entities; the characters XML 1.0 does not allow at all (C0 controls but tab, line feed and
//!   carriage return; U+FFFE, U+FFFF), which no entity can carry and which make a feed not
//!   well-formed, shown as text (`\x1b`, `\ufffe`) as on a terminal. Applied when the page or
//!   feed is written, so text stored before (the feed's persisted entries) is safe too.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

use std::fmt::{self, Write as _};

/// Most characters of one value a terminal sink shows; the rest is cut with a marker.
pub const TERMINAL_MAX: usize = 2048;

/// Most characters of one value a log line shows; the rest is cut with a marker.
pub const LOG_MAX: usize = 8192;

/// Whether `c` is shown escaped on a terminal or in a text log.
pub fn is_unsafe(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{8}' | '\u{a}'..='\u{1f}' | '\u{7f}'..='\u{9f}'
        | '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `value` for a terminal: [`Display`](fmt::Display) writes it with every [unsafe](is_unsafe)
/// character escaped, cut after [`TERMINAL_MAX`] characters.
pub fn terminal<T: fmt::Display>(value: T) -> Escaped<T> {
    Escaped { value, max: TERMINAL_MAX }
}

/// Text of several lines for a terminal: each line as [`terminal`] shows it, the line ends
/// kept. For a whole report printed at once (`audit verify`, `config check`, a text answer).
pub fn terminal_text(text: &str) -> String {
    // The common case (every 403 body): printable ASCII and line ends, no line long enough to
    // cut, nothing to escape: the text as it is, in one pass over its bytes.
    if text.len() <= TERMINAL_MAX && plain_ascii_lines(text.as_bytes()) {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        // Writing to a String cannot fail.
        let _ = write!(out, "{}", terminal(line));
    }
    out
}

/// Whether every byte is printable ASCII, a tab or a line feed. Written without an early
/// exit, so that the compiler checks many bytes at once: it runs on every 403 body.
fn plain_ascii_lines(bytes: &[u8]) -> bool {
    bytes
        .iter()
        .fold(true, |plain, &b| plain & ((b' '..=b'~').contains(&b) | (b == b'\t') | (b == b'\n')))
}

/// `value` for a text log line: escaped as [`terminal`], cut after [`LOG_MAX`] characters. The
/// text log's field formatter (`robots_proxy::logging::EscapedFields`) writes every field and
/// message through it, so call sites log values as they are.
pub fn log<T: fmt::Display>(value: T) -> Escaped<T> {
    Escaped { value, max: LOG_MAX }
}

/// A value shown with its [unsafe](is_unsafe) characters escaped; see [`terminal`] and [`log`].
#[derive(Clone, Copy, Debug)]
pub struct Escaped<T> {
    value: T,
    max: usize,
}

impl<T: fmt::Display> fmt::Display for Escaped<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = Escaper { out: f, left: self.max, cut: 0 };
        fmt::write(&mut out, format_args!("{}", self.value))?;
        let cut = out.cut;
        if cut > 0 {
            write!(f, "…[cut: {cut} more bytes]")?;
        }
        Ok(())
    }
}

/// Writes what it is given to `out`, escaped, until `left` characters are written; counts the
/// bytes after that in `cut`.
struct Escaper<'a, 'b> {
    out: &'a mut fmt::Formatter<'b>,
    left: usize,
    cut: usize,
}

impl fmt::Write for Escaper<'_, '_> {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        // The common case, on every 403 and log line: printable ASCII within what is left, where
        // a character is a byte and none is unsafe. One pass over the bytes, written at once.
        if text.len() <= self.left && text.bytes().all(|b| matches!(b, b' '..=b'~' | b'\t')) {
            self.left -= text.len();
            return self.out.write_str(text);
        }
        let mut start = 0;
        for (i, c) in text.char_indices() {
            if self.left == 0 {
                self.out.write_str(&text[start..i])?;
                self.cut += text.len() - i;
                return Ok(());
            }
            self.left -= 1;
            if is_unsafe(c) {
                self.out.write_str(&text[start..i])?;
                let n = u32::from(c);
                if n < 0x80 {
                    write!(self.out, "\\x{n:02x}")?;
                } else {
                    write!(self.out, "\\u{n:04x}")?;
                }
                start = i + c.len_utf8();
            }
        }
        self.out.write_str(&text[start..])
    }
}

/// `text` for HTML and XML text and attribute values (see the module's rules).
pub fn markup(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\t' | '\n' | '\r' => out.push(c),
            '\u{0}'..='\u{1f}' => out.push_str(&format!("\\x{:02x}", u32::from(c))),
            '\u{fffe}' | '\u{ffff}' => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out
}

/// Rewrites a serialised JSON line (one object, as `serde_json` writes it) so that the
/// characters [`is_unsafe`] names beyond ASCII (the C1 controls U+0080–U+009F, U+2028, U+2029,
/// the bidi controls) appear as `\uXXXX` escapes instead of raw; `serde_json` already escapes
/// the C0 controls. JSON writes those characters only inside strings, where the escape means
/// the same character, so the line parses to the same value. Lines in ASCII, and lines without
/// them (most), are left as they are; so is a line that is not UTF-8 (never from `serde_json`).
pub fn json_line(line: &mut Vec<u8>) {
    if line.is_ascii() {
        return;
    }
    let Ok(text) = std::str::from_utf8(line) else { return };
    if !text.chars().any(|c| !c.is_ascii() && is_unsafe(c)) {
        return;
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if !c.is_ascii() && is_unsafe(c) {
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    *line = out.into_bytes();
}

/// Whether the `n`-th time (counted from 1) an event that can repeat without end (a refused
/// connection, a failed call, an unsigned request) is logged at `warn`: the first ten, then
/// every thousandth, so that a flood cannot flood the log (the one rule for it; it lives here,
/// with what the proxy writes for people, because every module may log and `logging` reaches
/// the configuration). The others go to `debug`, and the
/// event's counter says how many there were.
pub fn warn_on(n: u64) -> bool {
    n <= 10 || n.is_multiple_of(1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_bidi_and_separators_are_escaped() {
        let text =
            "a\u{1b}[2J\u{9b}1G\u{85}\u{2028}\u{2029}\u{202e}x\u{2066}\u{200f}\u{61c}\u{7f}\r\n\tb";
        let shown = terminal(text).to_string();
        assert_eq!(
            shown,
            "a\\x1b[2J\\u009b1G\\u0085\\u2028\\u2029\\u202ex\\u2066\\u200f\\u061c\\x7f\\x0d\\x0a\tb"
        );
        assert!(!shown.chars().any(is_unsafe), "{shown:?}");
    }

    #[test]
    fn markup_escapes_entities_and_shows_what_xml_forbids_as_text() {
        assert_eq!(
            markup("<a href='x'>&\u{7}\u{1b}\t\u{ffff}</a>"),
            "&lt;a href=&#39;x&#39;&gt;&amp;\\x07\\x1b\t\\uffff&lt;/a&gt;"
        );
    }

    #[test]
    fn plain_text_is_unchanged() {
        let text = "User-agent: * café 日本 \\x1b";
        assert_eq!(terminal(text).to_string(), text);
        assert_eq!(log(text).to_string(), text);
    }

    #[test]
    fn printable_ascii_is_cut_at_the_same_count_as_any_text() {
        let text = format!("{}\u{1b}", "a".repeat(TERMINAL_MAX - 1));
        assert_eq!(terminal(&text).to_string(), format!("{}\\x1b", "a".repeat(TERMINAL_MAX - 1)));
        let text = "a".repeat(TERMINAL_MAX + 10);
        let shown = terminal(&text).to_string();
        assert!(shown.ends_with("…[cut: 10 more bytes]"), "{}", &shown[shown.len() - 40..]);
        assert_eq!(shown.matches('a').count(), TERMINAL_MAX);
        // Pieces written one after another share one budget.
        let shown =
            terminal(format_args!("{}{}", "b".repeat(TERMINAL_MAX - 2), "cdef")).to_string();
        assert!(shown.ends_with("cd…[cut: 2 more bytes]"), "{}", &shown[shown.len() - 40..]);
    }

    #[test]
    fn text_keeps_its_line_ends_only() {
        assert_eq!(terminal_text("a\u{1b}]0;\nb\r\n"), "a\\x1b]0;\nb\\x0d\n");
    }

    #[test]
    fn long_values_are_cut_with_a_marker() {
        let text = "é".repeat(TERMINAL_MAX + 10);
        let shown = terminal(&text).to_string();
        assert!(shown.ends_with("…[cut: 20 more bytes]"), "{}", &shown[shown.len() - 40..]);
        assert_eq!(shown.chars().filter(|&c| c == 'é').count(), TERMINAL_MAX);
        assert_eq!(log(&text).to_string(), text);
    }

    #[test]
    fn json_lines_escape_separators_and_c1_and_parse_the_same() {
        let value =
            serde_json::json!({ "url": "/a\u{2028}b\u{2029}c\u{85}d\u{9b}e\u{a0}é\u{1b}\u{202e}" });
        let mut line = serde_json::to_vec(&value).unwrap();
        json_line(&mut line);
        let text = std::str::from_utf8(&line).unwrap();
        assert_eq!(text, "{\"url\":\"/a\\u2028b\\u2029c\\u0085d\\u009be\u{a0}é\\u001b\\u202e\"}");
        assert_eq!(serde_json::from_slice::<serde_json::Value>(&line).unwrap(), value);
        let mut plain = br#"{"url":"/caf\xc3\xa9"}"#.to_vec();
        let before = plain.clone();
        json_line(&mut plain);
        assert_eq!(plain, before);
    }
}
