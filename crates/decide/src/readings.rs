//! Every reading of a request-target's path: what the proxy decides on.
//!
//! `shared/spec/README.md`, "What the proxy decides on":
//!
//! > what is forwarded: the request-target's path and query exactly as received (RFC 9110 §7.1:
//! > a proxy MUST NOT modify them), except what forwarding requires (an empty path becomes `/`;
//! > a fragment is dropped)
//! >
//! > what is decided: the path as received **and** each reading a common origin server
//! > applies: percent-decoded once (`%2F` and `%5C` too), then dot-segments removed and
//! > repeated slashes merged (nginx, Apache); `\` taken as `/` (IIS); `;parameters` dropped
//! > from each segment (Tomcat, Jetty, Spring)
//! >
//! > when the readings disagree: the most restrictive wins
//!
//! [`Readings::of`] computes them. Pure, no I/O. The readings other than the path as sent are
//! only computed when the path holds an octet that can change one (`%`, `\`, `;`, a `.` segment,
//! `//`), so an ordinary path costs one scan.
//!
//! Each reading is written back in a form the engine reads as meant: an octet that decoding
//! produced and that would mean something else to the matcher (`%`, `?`, `#`, and every octet
//! the canonical form escapes) is percent-encoded again, so `%2541` read once is the three
//! characters `%41`, never `A`. The query is not a path: every reading keeps it as sent.

use std::fmt;

use robots_proxy_engine::normalize;

/// One way of reading a request-target's path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Reading {
    /// The path as the client sent it, octet for octet (Google's reading, and the engine's).
    AsSent,
    /// Percent-decoded once (`%2F` and `%5C` too), dot-segments removed, repeated slashes
    /// merged: what nginx and Apache serve.
    Decoded,
    /// [`Reading::Decoded`] with `\` taken as `/`: what IIS serves.
    Backslash,
    /// `;parameters` dropped from each segment, then decoded like [`Reading::Decoded`]: what
    /// servlet containers (Tomcat, Jetty) and Spring serve.
    Parameters,
    /// [`Reading::Backslash`] with ASCII letters compared case-insensitively, on both the path
    /// and the patterns: what IIS, ASP.NET and Express serve. Only for origins known to fold
    /// case (`policy.fold_case`): elsewhere `/Fish` and `/fish` are different resources.
    CaseFolded,
}

impl Reading {
    /// Every reading, in the order they are decided (the first disallowed one is named).
    pub const ALL: [Reading; 5] = [
        Reading::AsSent,
        Reading::Decoded,
        Reading::Backslash,
        Reading::Parameters,
        Reading::CaseFolded,
    ];

    /// The reading's name in audit records, `Proxy-Status` and JSON (`as-sent`, `decoded`,
    /// `backslash`, `parameters`).
    pub fn name(self) -> &'static str {
        match self {
            Reading::AsSent => "as-sent",
            Reading::Decoded => "decoded",
            Reading::Backslash => "backslash",
            Reading::Parameters => "parameters",
            Reading::CaseFolded => "case-folded",
        }
    }

    /// What the reading does and which servers read a path that way, for a person.
    pub fn description(self) -> &'static str {
        match self {
            Reading::AsSent => "the path as sent",
            Reading::Decoded => {
                "percent-decoded, dot-segments removed, slashes merged (as nginx and Apache read it)"
            }
            Reading::Backslash => "with \\ read as / (as IIS reads it)",
            Reading::Parameters => {
                ";parameters dropped from each segment (as Tomcat, Jetty and Spring read it)"
            }
            Reading::CaseFolded => {
                "decoded, \\ as /, letters compared case-insensitively (as IIS, ASP.NET and \
                 Express read it)"
            }
        }
    }
}

impl fmt::Display for Reading {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The path and query as sent, and every other reading of it that differs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readings {
    as_sent: String,
    /// The other readings, each different from the path as sent and from the ones before it.
    others: Vec<(Reading, String)>,
    /// The base of the case-folded reading trimmed as Win32 trims a path, when that changes
    /// it ([`trim_as_windows`]).
    windows: Option<String>,
    /// Only the path as written is decided ([`Readings::exactly`]).
    exact: bool,
}

impl Readings {
    /// The readings of `path_and_query`: what follows the authority in a request-target
    /// (`/a/b?c`), possibly empty, or an origin-form target. A fragment is dropped and an empty
    /// path becomes `/`; nothing else of what is sent changes.
    pub fn of(path_and_query: &str) -> Readings {
        let as_sent = forwardable(path_and_query);
        let path_end = memchr::memchr(b'?', as_sent.as_bytes()).unwrap_or(as_sent.len());
        let (path, query) = as_sent.split_at(path_end);
        if !may_read_differently(path.as_bytes()) {
            return Readings { as_sent, others: Vec::new(), windows: None, exact: false };
        }
        let mut others: Vec<(Reading, String)> = Vec::new();
        for reading in [Reading::Decoded, Reading::Backslash, Reading::Parameters] {
            let mut read = read_path(reading, path.as_bytes());
            read.push_str(query);
            if read != as_sent && others.iter().all(|(_, seen)| *seen != read) {
                others.push((reading, read));
            }
        }
        let mut readings = Readings { as_sent, others, windows: None, exact: false };
        readings.windows = trim_as_windows(readings.folded_base());
        readings
    }

    /// `path_and_query` exactly as written, and no other reading of it: what
    /// `robots-proxy check` decides without `--as-proxy` (Google's reading, octet for octet).
    pub fn exactly(path_and_query: &str) -> Readings {
        let as_sent = path_and_query.to_owned();
        Readings { as_sent, others: Vec::new(), windows: None, exact: true }
    }

    /// What the case-folded reading starts from: the backslash reading, else the decoded one,
    /// else the path as sent (the first that differs is listed; one that agrees is not).
    fn folded_base(&self) -> &str {
        let read = |wanted| self.others.iter().find(|(r, _)| *r == wanted);
        read(Reading::Backslash)
            .or_else(|| read(Reading::Decoded))
            .map_or(self.as_sent.as_str(), |(_, p)| p.as_str())
    }

    /// The path and query exactly as they are forwarded.
    pub fn as_sent(&self) -> &str {
        &self.as_sent
    }

    /// Takes the path and query as they are forwarded.
    pub fn into_as_sent(self) -> String {
        self.as_sent
    }

    /// Whether some origin could read the path differently from how it was sent.
    pub fn has_others(&self) -> bool {
        !self.others.is_empty()
    }

    /// Every reading and its path and query, the path as sent first.
    pub fn iter(&self) -> impl Iterator<Item = (Reading, &str)> + '_ {
        std::iter::once((Reading::AsSent, self.as_sent.as_str()))
            .chain(self.others.iter().map(|(r, p)| (*r, p.as_str())))
    }

    /// What is decided: every reading ([`Readings::iter`]), where each reading but the path as
    /// sent is matched against the patterns read decoded too
    /// (`robots_proxy_engine::RobotsTxt::decide_decoded`). When the robots.txt has such patterns
    /// (`decoded_patterns`) and the decoded reading is the path as sent (`/wiki/Special:Random`
    /// has nothing to decode), that reading is added: the same text, held against other
    /// patterns.
    ///
    /// With `fold_case` (the origin is known to read paths case-insensitively), the
    /// case-folded reading comes last: the backslash reading, else the decoded one, else the
    /// path as sent, to be compared with letters folded; and when trimming trailing dots and
    /// spaces as Win32 trims a path ([`trim_as_windows`]) changes it, that too, as a second
    /// case-folded reading (an origin that maps URLs to files trims; one that routes them in
    /// code may not: the most restrictive wins).
    pub fn to_decide(
        &self,
        decoded_patterns: bool,
        fold_case: bool,
    ) -> impl Iterator<Item = (Reading, &str)> + '_ {
        let (decoded_patterns, fold_case) =
            (decoded_patterns && !self.exact, fold_case && !self.exact);
        let add = decoded_patterns && self.others.iter().all(|(r, _)| *r != Reading::Decoded);
        let folded = fold_case.then(|| (Reading::CaseFolded, self.folded_base()));
        let trimmed = self.windows.as_deref().filter(|_| fold_case);
        self.iter()
            .chain(add.then_some((Reading::Decoded, self.as_sent.as_str())))
            .chain(folded)
            .chain(trimmed.map(|path| (Reading::CaseFolded, path)))
    }
}

/// The path and query as forwarded: a fragment dropped, an empty path made `/`.
fn forwardable(path_and_query: &str) -> String {
    let raw = match memchr::memchr(b'#', path_and_query.as_bytes()) {
        Some(hash) => &path_and_query[..hash],
        None => path_and_query,
    };
    if raw.starts_with('/') {
        raw.to_owned()
    } else {
        let mut out = String::with_capacity(raw.len() + 1);
        out.push('/');
        out.push_str(raw);
        out
    }
}

/// Whether a path holds an octet that can make a reading differ from the path as sent: `%`,
/// `\`, `;`, a segment starting or ending with `.`, or `//`.
fn may_read_differently(path: &[u8]) -> bool {
    memchr::memchr3(b'%', b'\\', b';', path).is_some()
        || memchr::memmem::find(path, b"/.").is_some()
        || memchr::memmem::find(path, b"./").is_some()
        || path.ends_with(b".")
        || memchr::memmem::find(path, b"//").is_some()
}

/// `path_and_query` with its path trimmed as Win32 trims a file path, which is how IIS maps a
/// URL to a file; `None` when that changes nothing. Microsoft Learn, "File path formats on
/// Windows systems", "Normalize the path", *Trim characters*:
///
/// > If a segment ends in a single period, that period is removed. (A segment of a single or
/// > double period is normalized in the previous step. A segment of three or more periods is
/// > not normalized and is actually a valid file/directory name.)
/// >
/// > If the path doesn't end in a separator, all trailing periods and spaces (U+0020) are
/// > removed.
///
/// So `/private./x` and `/private/x.` are `/private/x` to IIS. The path here is a reading
/// written for the engine, where a space is `%20`. Dot-segments are already resolved.
fn trim_as_windows(path_and_query: &str) -> Option<String> {
    let end = memchr::memchr(b'?', path_and_query.as_bytes()).unwrap_or(path_and_query.len());
    let (path, query) = path_and_query.split_at(end);
    let all_dots = |s: &str| s.bytes().all(|b| b == b'.');
    let mut segments: Vec<&str> = path.split('/').collect();
    let last = segments.len() - 1;
    for (i, segment) in segments.iter_mut().enumerate() {
        if i == last {
            // The last segment, when the path does not end in a separator (then it is empty).
            let mut trimmed = *segment;
            while let Some(rest) = trimmed.strip_suffix('.').or_else(|| trimmed.strip_suffix("%20"))
            {
                trimmed = rest;
            }
            if !all_dots(segment) {
                *segment = trimmed;
            }
        } else if segment.ends_with('.') && !all_dots(segment) {
            *segment = &segment[..segment.len() - 1];
        }
    }
    let trimmed = segments.join("/");
    (trimmed != path).then(|| trimmed + query)
}

/// `path` (without the query) as `reading` reads it, written for the engine.
fn read_path(reading: Reading, path: &[u8]) -> String {
    let stripped;
    let path = if reading == Reading::Parameters {
        stripped = drop_parameters(path);
        &stripped[..]
    } else {
        path
    };
    let mut decoded = percent_decode_once(path);
    if reading == Reading::Backslash {
        for b in &mut decoded {
            if *b == b'\\' {
                *b = b'/';
            }
        }
    }
    let resolved = resolve_segments(&decoded);
    normalize::escape_decoded(&resolved)
}

/// Drops `;` and what follows it up to the end of each segment (on the path as sent: a
/// servlet container strips path parameters before it decodes).
fn drop_parameters(path: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(path.len());
    let mut in_parameters = false;
    for &b in path {
        match b {
            b'/' => {
                in_parameters = false;
                out.push(b);
            }
            b';' => in_parameters = true,
            _ if in_parameters => {}
            _ => out.push(b),
        }
    }
    out
}

/// Decodes every valid `%XX` once; a `%` that starts no escape stays as it is.
fn percent_decode_once(path: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(path.len());
    let mut i = 0;
    while i < path.len() {
        let b = path[i];
        if b == b'%' {
            let hi = path.get(i + 1).copied().and_then(normalize::hex_value);
            let lo = path.get(i + 2).copied().and_then(normalize::hex_value);
            if let (Some(hi), Some(lo)) = (hi, lo) {
                out.push((hi << 4) | lo);
                i += 3;
                continue;
            }
        }
        out.push(b);
        i += 1;
    }
    out
}

/// RFC 3986 §5.2.4 `remove_dot_segments` on an absolute path, with empty segments (`//`)
/// merged as nginx's `merge_slashes` and Apache's `MergeSlashes` do. `..` above the root
/// stays at the root.
fn resolve_segments(path: &[u8]) -> Vec<u8> {
    let mut segments: Vec<&[u8]> = Vec::new();
    let mut ends_in_slash = false;
    for segment in path.split(|&b| b == b'/') {
        match segment {
            b"" | b"." => ends_in_slash = true,
            b".." => {
                segments.pop();
                ends_in_slash = true;
            }
            s => {
                segments.push(s);
                ends_in_slash = false;
            }
        }
    }
    let mut out = Vec::with_capacity(path.len() + 1);
    for s in &segments {
        out.push(b'/');
        out.extend_from_slice(s);
    }
    if ends_in_slash || segments.is_empty() {
        out.push(b'/');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(path: &str, reading: Reading) -> Option<String> {
        Readings::of(path).iter().find(|(r, _)| *r == reading).map(|(_, p)| p.to_owned())
    }

    #[test]
    fn ordinary_paths_have_one_reading() {
        for p in ["/", "/index.html", "/a/b.c/d?x=%2F..//", "/a-b_c~d/e.f", "/caf\u{e9}/x"] {
            let r = Readings::of(p);
            assert!(!r.has_others(), "{p}: {r:?}");
            assert_eq!(r.as_sent(), p);
        }
    }

    /// Each reading is named as the audit records, `Proxy-Status` and the JSON refusal name it
    /// (docs/audit.md), and a path an origin may read otherwise says so (survivors of the
    /// decision's mutation run, shards 2/6 and 5/6: only the proxy's tests read the names,
    /// and only paths with one reading asked `has_others`).
    #[test]
    fn readings_are_named_as_recorded_and_a_path_read_otherwise_says_so() {
        let names: Vec<&str> = Reading::ALL.iter().map(|r| r.name()).collect();
        assert_eq!(names, ["as-sent", "decoded", "backslash", "parameters", "case-folded"]);
        // The text answers print them with `Display` (shard 5/6: `Display` → empty survived).
        let shown: Vec<String> = Reading::ALL.iter().map(Reading::to_string).collect();
        assert_eq!(shown, names);
        for p in ["/a\\b", "/a%2fb", "/a;x=1/b", "/a/./b", "/a//b"] {
            assert!(Readings::of(p).has_others(), "{p}");
        }
    }

    /// The case-folded reading starts from the backslash reading when there is one, even when
    /// the decoded reading differs too (a survivor of the decision's mutation run, shard 2/6:
    /// `==` → `!=` in `folded_base` took the decoded reading instead).
    #[test]
    fn the_case_folded_reading_starts_from_the_backslash_reading() {
        let path = "/A%2e%2e/B\\C%2fD";
        let (decoded, backslash) = (read(path, Reading::Decoded), read(path, Reading::Backslash));
        assert!(
            decoded.is_some() && backslash.is_some() && decoded != backslash,
            "{decoded:?} {backslash:?}"
        );
        let r = Readings::of(path);
        let folded: Vec<&str> = r
            .to_decide(false, true)
            .filter(|(x, _)| *x == Reading::CaseFolded)
            .map(|(_, p)| p)
            .collect();
        assert_eq!(folded.first().copied(), backslash.as_deref());
    }

    #[test]
    fn forwarding_drops_only_the_fragment_and_fills_an_empty_path() {
        assert_eq!(Readings::of("").as_sent(), "/");
        assert_eq!(Readings::of("?q").as_sent(), "/?q");
        assert_eq!(Readings::of("/x#frag").as_sent(), "/x");
        assert_eq!(Readings::of("/img//index.html").as_sent(), "/img//index.html");
        assert_eq!(Readings::of("/a/../b").as_sent(), "/a/../b");
    }

    #[test]
    fn encoded_slashes_and_dots_resolve_as_nginx_does() {
        let d = |p| read(p, Reading::Decoded);
        assert_eq!(d("/public/..%2fprivate/secret.html").as_deref(), Some("/private/secret.html"));
        assert_eq!(d("/%2fprivate/x").as_deref(), Some("/private/x"));
        assert_eq!(d("/public/%2e%2e%2fprivate/x").as_deref(), Some("/private/x"));
        assert_eq!(d("/private/open%2f..%2fsecret").as_deref(), Some("/private/secret"));
        assert_eq!(d("/img//index.html").as_deref(), Some("/img/index.html"));
        assert_eq!(d("/a/./b/../c/").as_deref(), Some("/a/c/"));
        assert_eq!(d("/../../x").as_deref(), Some("/x"));
        assert_eq!(d("/a/..").as_deref(), Some("/"));
        // Decoded once: `%2541` is `%41`, which the engine must not read as `A`.
        assert_eq!(d("/%2541").as_deref(), None, "decoded and re-encoded, it is the path as sent");
        assert_eq!(d("/%2541/..").as_deref(), Some("/"));
        assert_eq!(d("/%252e%252e/x").as_deref(), None, "decoded once, `%2e%2e` is a name");
        assert_eq!(d("/a%3Fb?q=1").as_deref(), None, "same as sent once re-encoded");
        assert_eq!(d("/x/%2e%2e/y?a=/../b").as_deref(), Some("/y?a=/../b"));
    }

    #[test]
    fn backslashes_are_slashes_to_iis() {
        assert_eq!(read("/%5cprivate", Reading::Backslash).as_deref(), Some("/private"));
        assert_eq!(read("/\\private", Reading::Backslash).as_deref(), Some("/private"));
        assert_eq!(read("/public\\..\\private", Reading::Backslash).as_deref(), Some("/private"));
        // Decoded alone, a backslash is an ordinary octet.
        assert_eq!(read("/%5cprivate", Reading::Decoded).as_deref(), Some("/%5Cprivate"));
    }

    #[test]
    fn servlet_containers_drop_parameters() {
        let p = |s| read(s, Reading::Parameters);
        assert_eq!(p("/public/..;/private").as_deref(), Some("/private"));
        assert_eq!(p("/;x/private").as_deref(), Some("/private"));
        assert_eq!(p("/private;jsessionid=1/a").as_deref(), Some("/private/a"));
        assert_eq!(p("/a;b/c;d?e;f").as_deref(), Some("/a/c?e;f"));
    }

    #[test]
    fn the_case_folded_reading_trims_segments_as_win32_does() {
        // The last case-folded reading: the trimmed one when trimming changes the path.
        let folded = |p: &str| {
            let r = Readings::of(p);
            let f = r.to_decide(false, true).filter(|(r, _)| *r == Reading::CaseFolded).last();
            f.map(|(_, p)| p.to_owned()).unwrap()
        };
        let untrimmed = Readings::of("/private./x");
        let both: Vec<_> = untrimmed.to_decide(false, true).map(|(_, p)| p.to_owned()).collect();
        assert_eq!(both, ["/private./x", "/private./x", "/private/x"], "untrimmed too");
        assert_eq!(folded("/private./x"), "/private/x");
        assert_eq!(folded("/private/x."), "/private/x");
        assert_eq!(folded("/private/x..%20."), "/private/x");
        assert_eq!(folded("/private%2e/x"), "/private/x");
        assert_eq!(folded("/a../x"), "/a./x", "one period of a middle segment");
        assert_eq!(folded("/private./x?q=a."), "/private/x?q=a.", "the query stays");
        assert_eq!(folded("/.../x"), "/.../x", "three periods are a name");
        assert_eq!(folded("/dir./"), "/dir/", "a trailing separator keeps the rest");
        assert_eq!(folded("/private/x"), "/private/x");
        // Only the case-folded reading trims: nginx serves `/private./x` as a different file.
        assert!(!Readings::of("/private./x").has_others());
    }

    #[test]
    fn readings_that_agree_are_listed_once() {
        let r = Readings::of("/a//b");
        let names: Vec<_> = r.iter().map(|(r, _)| r).collect();
        assert_eq!(names, [Reading::AsSent, Reading::Decoded]);
    }

    /// The path and query as forwarded, taken (a survivor of the decision's mutation run:
    /// `into_as_sent` is what the proxy forwards, and no lib test read it).
    #[test]
    fn the_path_as_forwarded_is_taken_as_it_is() {
        assert_eq!(Readings::of("/a%2Fb?q#frag").into_as_sent(), "/a%2Fb?q");
        assert_eq!(Readings::of("").into_as_sent(), "/");
    }
}
