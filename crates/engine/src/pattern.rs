//! Matching one normalised path against one normalised robots.txt pattern.
//!
//! RFC 9309 §2.2.3: `*` stands for any sequence of characters (including none) and a final `$`
//! anchors the pattern at the end of the path. Everything else is a literal prefix match. A `$`
//! anywhere but at the end is an ordinary character, as in Google's matcher.
//!
//! The algorithm is greedy and linear in practice: the pattern is split at `*` into literal
//! segments; the first must be a prefix of the path, each following one is placed at its
//! leftmost occurrence after the previous, and an anchored last segment must end the path.
//! Leftmost placement is always safe for `*`-only globs, so there is no backtracking and no
//! pathological blow-up (`/*a*a*a*a*b` against a long path costs one scan per segment), and each
//! segment is found by a linear search (`memchr::memmem`), so a long segment against a long path
//! of near-matches costs one pass too, not their lengths multiplied.

/// The parts of a pattern that matching needs, computed once when the file is compiled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PatternShape {
    /// Length of the literal prefix, up to the first `*` (or the whole body).
    pub(crate) prefix_len: u32,
    /// Length of the body: the pattern without a final `$`.
    pub(crate) body_len: u32,
    /// Whether the pattern ends in `$`.
    pub(crate) anchored: bool,
}

impl PatternShape {
    pub(crate) fn of(pattern: &[u8]) -> Self {
        let anchored = pattern.last() == Some(&b'$');
        let body_len = pattern.len() - usize::from(anchored);
        let prefix_len = memchr::memchr(b'*', &pattern[..body_len]).unwrap_or(body_len);
        PatternShape { prefix_len: prefix_len as u32, body_len: body_len as u32, anchored }
    }
}

/// How a pattern is read for one reading of the request's path (`crate::policy::readings`):
/// the path as sent meets the patterns as written (Google's reading); a reading an origin
/// decodes meets them decoded; the case-folded reading meets them decoded with letters folded
/// (what [`super::RobotsTxt::decide_folded`] does for `allow` / `disallow`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatternReading {
    /// The patterns as written.
    AsWritten,
    /// The patterns read decoded.
    Decoded,
    /// The patterns read decoded, letters folded (the path must be folded too).
    Folded,
}

/// A path pattern of a rule source other than `allow` / `disallow` (a `Content-Usage` path, a
/// `tdmrep.json` location), with its decoded reading computed once, so that every source
/// matches every reading of a path the same way ([`ReadPattern::matches_as`]).
#[derive(Debug, Clone)]
pub(crate) struct ReadPattern {
    /// The canonical pattern as written.
    pattern: Box<str>,
    shape: PatternShape,
    /// Its priority length ([`super::normalize::normalize_pattern_into`]).
    priority: u32,
    /// The pattern read decoded ([`super::normalize::decode_pattern`]), its shape and priority
    /// (shorter by two octets per escape decoded, as if written decoded), when it differs.
    decoded: Option<Box<(Box<str>, PatternShape, u32)>>,
}

impl ReadPattern {
    /// `canonical` (ASCII, from [`super::normalize::normalize_pattern_into`]) with its priority.
    pub(crate) fn new(canonical: String, priority: u32) -> ReadPattern {
        let shape = PatternShape::of(canonical.as_bytes());
        let decoded = super::normalize::decode_pattern(canonical.as_bytes()).map(|d| {
            let priority = priority.saturating_sub((canonical.len() - d.len()) as u32);
            Box::new((Box::from(d.as_str()), PatternShape::of(d.as_bytes()), priority))
        });
        ReadPattern { pattern: canonical.into(), shape, priority, decoded }
    }

    /// The canonical pattern as written.
    pub(crate) fn as_written(&self) -> &str {
        &self.pattern
    }

    /// The shape of the pattern as written.
    pub(crate) fn shape(&self) -> PatternShape {
        self.shape
    }

    /// Whether the pattern reads differently decoded.
    pub(crate) fn has_decoded(&self) -> bool {
        self.decoded.is_some()
    }

    /// The bytes it holds on the heap.
    pub(crate) fn heap_size(&self) -> usize {
        self.pattern.len()
            + self
                .decoded
                .as_ref()
                .map_or(0, |d| std::mem::size_of::<(Box<str>, PatternShape, u32)>() + d.0.len())
    }

    /// The priority with which the pattern matches `path` (canonical form; folded for
    /// [`PatternReading::Folded`]) read as `reading`, or `None`.
    pub(crate) fn matches_as(&self, path: &[u8], reading: PatternReading) -> Option<u32> {
        let (pattern, shape, priority) = match (&self.decoded, reading) {
            (_, PatternReading::AsWritten) | (None, _) => {
                (&self.pattern, self.shape, self.priority)
            }
            (Some(d), _) => (&d.0, d.1, d.2),
        };
        let hit = if reading == PatternReading::Folded {
            let folded = super::fold::fold_case(pattern);
            matches(folded.as_bytes(), PatternShape::of(folded.as_bytes()), path)
        } else {
            matches(pattern.as_bytes(), shape, path)
        };
        hit.then_some(priority)
    }
}

/// Whether `path` matches `pattern`, both in canonical form.
pub(crate) fn matches(pattern: &[u8], shape: PatternShape, path: &[u8]) -> bool {
    let prefix = &pattern[..shape.prefix_len as usize];
    path.starts_with(prefix)
        && matches_rest(
            &pattern[shape.prefix_len as usize..shape.body_len as usize],
            shape.anchored,
            &path[prefix.len()..],
        )
}

/// Matches what follows the literal prefix. `rest` is empty or starts with `*`.
pub(crate) fn matches_rest(rest: &[u8], anchored: bool, path: &[u8]) -> bool {
    if rest.is_empty() {
        return !anchored || path.is_empty();
    }
    // A trailing `*` swallows whatever an anchor would have demanded.
    let anchored = anchored && rest.last() != Some(&b'*');
    let mut segments = rest.split(|&b| b == b'*').filter(|s| !s.is_empty()).peekable();
    let mut pos = 0usize;
    while let Some(seg) = segments.next() {
        if anchored && segments.peek().is_none() {
            return path.len() >= pos + seg.len() && path.ends_with(seg);
        }
        match find(&path[pos..], seg) {
            Some(at) => pos += at + seg.len(),
            None => return false,
        }
    }
    // Only stars, or every segment placed: the rest of the path is covered by a star.
    true
}

/// Leftmost occurrence of `needle` (non-empty) in `haystack`: linear in both lengths (two-way
/// search), so a long segment against a long path of near-matches is not quadratic.
pub(crate) fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.len() > haystack.len() {
        return None;
    }
    if needle.len() == 1 {
        return memchr::memchr(needle[0], haystack);
    }
    if needle.len() <= TAIL {
        return memchr::memmem::find(haystack, needle);
    }
    // `memmem`'s vectorised prefilter looks for two rare bytes among the needle's first 256
    // only; a long needle that starts with a run of one byte (`aaaa…ab`) gets no usable pair
    // and is searched by the scalar two-way loop, about one step per byte of the path. Its
    // last `TAIL` bytes are searched first, where the rare bytes usually are: every occurrence
    // of the needle holds one of its tail `len - TAIL` bytes later, so no occurrence of the tail
    // there means no occurrence at all. The first tail found is checked in full; if that fails,
    // the plain search takes over from there, so the worst case stays linear.
    let lead = needle.len() - TAIL;
    let at = memchr::memmem::find(&haystack[lead..], &needle[lead..])?;
    if haystack[at..at + needle.len()] == *needle {
        return Some(at);
    }
    memchr::memmem::find(&haystack[at + 1..], needle).map(|i| at + 1 + i)
}

/// How many of a long needle's last bytes [`find`] searches first.
const TAIL: usize = 255;

#[cfg(test)]
mod tests {
    use super::*;

    fn m(pattern: &str, path: &str) -> bool {
        matches(pattern.as_bytes(), PatternShape::of(pattern.as_bytes()), path.as_bytes())
    }

    /// A trailing `*` swallows the anchor after it, also when a literal segment comes before
    /// it: `/*a*$` is `/*a`, so it matches a path with an `a` anywhere after the `/`, whatever
    /// ends the path (review-tests F4: no test had a literal segment before `*$`, so the anchor
    /// kept could not be told from the anchor swallowed).
    #[test]
    fn a_trailing_star_swallows_the_anchor_after_a_literal_segment() {
        for p in ["/xa/b", "/a", "/xa", "/ba?q=1", "/x/y/za/"] {
            assert!(m("/*a*$", p), "{p}");
        }
        for p in ["/", "/xb", "/b/c"] {
            assert!(!m("/*a*$", p), "{p}");
        }
        // Without the trailing `*` the anchor holds.
        assert!(m("/*a$", "/xa") && !m("/*a$", "/xa/b"));
    }

    /// An anchored last segment may take exactly what is left of the path after the segments
    /// before it, and no less (a mutation testing survivor: `>=` read as `>` went unseen).
    #[test]
    fn an_anchored_last_segment_may_fill_the_rest_of_the_path() {
        assert!(m("/*ab$", "/ab"));
        assert!(m("/*a*b$", "/ab"));
        assert!(m("/x*.php$", "/x.php"));
        // It comes after the segment before it, not overlapping it.
        assert!(!m("/*a*ab$", "/ab"));
    }

    #[test]
    fn google_path_examples() {
        // "/fish"
        for p in ["/fish", "/fish.html", "/fish/salmon.html", "/fishheads", "/fishheads/yummy.html"]
        {
            assert!(m("/fish", p), "{p}");
        }
        for p in ["/Fish.asp", "/catfish", "/?id=fish", "/desert/fish"] {
            assert!(!m("/fish", p), "{p}");
        }
        // "/fish*" is the same as "/fish"
        for p in ["/fish", "/fish.html", "/fish/salmon.html", "/fishheads"] {
            assert!(m("/fish*", p), "{p}");
        }
        assert!(!m("/fish*", "/catfish"));
        // "/fish/"
        for p in ["/fish/", "/fish/?id=anything", "/fish/salmon.htm"] {
            assert!(m("/fish/", p), "{p}");
        }
        for p in ["/fish", "/fish.html", "/animals/fish/", "/Fish/Salmon.asp"] {
            assert!(!m("/fish/", p), "{p}");
        }
        // "/*.php"
        for p in [
            "/index.php",
            "/filename.php",
            "/folder/filename.php",
            "/folder/filename.php?parameters",
            "/folder/any.php.file.html",
            "/filename.php/",
        ] {
            assert!(m("/*.php", p), "{p}");
        }
        for p in ["/", "/windows.PHP"] {
            assert!(!m("/*.php", p), "{p}");
        }
        // "/*.php$"
        for p in ["/filename.php", "/folder/filename.php"] {
            assert!(m("/*.php$", p), "{p}");
        }
        for p in ["/filename.php?parameters", "/filename.php/", "/filename.php5", "/windows.PHP"] {
            assert!(!m("/*.php$", p), "{p}");
        }
        // "/fish*.php"
        for p in ["/fish.php", "/fishheads/catfish.php?parameters"] {
            assert!(m("/fish*.php", p), "{p}");
        }
        assert!(!m("/fish*.php", "/Fish.PHP"));
    }

    #[test]
    fn several_positions_could_match() {
        assert!(m("/*ab", "/aab"));
        assert!(m("/*/admin/", "/a/b/admin/x"));
        assert!(m("/*a*a*b", "/xaxaxb"));
        assert!(!m("/*a*a*b", "/xaxb"));
        assert!(m("/a*$", "/a/anything"));
        assert!(m("*", "/anything"));
        assert!(m("/$", "/"));
        assert!(!m("/$", "/x"));
        assert!(m("/a$b", "/a$b/c"));
        assert!(m("/*x$", "/xx"));
        assert!(!m("/*xy$", "/xy/"));
        assert!(m("/*xy$", "/xyxy"));
    }

    /// Long needles go through the tail-first search: it must find what a naive scan finds.
    #[test]
    fn long_needles_are_found_as_a_naive_scan_finds_them() {
        let naive = |h: &[u8], n: &[u8]| h.windows(n.len()).position(|w| w == n);
        let needle = [vec![b'a'; 300], b"b".to_vec()].concat();
        let cases = [
            [b"b".to_vec(), vec![b'a'; 1000]].concat(),
            [vec![b'a'; 1000], b"b".to_vec()].concat(),
            // The tail (255 `a`s and `b`) first occurs where the whole needle does not fit.
            [b"c".to_vec(), vec![b'a'; 299], b"b".to_vec(), vec![b'a'; 301], b"b".to_vec()]
                .concat(),
            [vec![b'a'; 150], b"c".to_vec(), vec![b'a'; 150], b"b".to_vec()].concat(),
            [vec![b'a'; 299], b"b".to_vec(), vec![b'a'; 300], b"bzz".to_vec()].concat(),
        ];
        for h in &cases {
            assert_eq!(find(h, &needle), naive(h, &needle), "{}", String::from_utf8_lossy(h));
        }
    }

    #[test]
    fn no_blow_up() {
        let path = format!("/{}", "a".repeat(2000));
        assert!(!m("/*a*a*a*a*a*a*a*a*b", &path));
    }
}
