//! [`Family::Readings`]: every source that matches path patterns decides on every reading of
//! the path (spec README, "What the proxy decides on"), through the one mapping
//! [`crate::pattern_reading`]: the same pattern refuses exactly what robots.txt's
//! `Disallow` refuses, on a case-sensitive origin and on one that folds case (issue 37,
//! review-tests F4).

use proptest::prelude::*;

use super::{source, sources_for, Ask, Family, Site, TOKEN};

/// Patterns of every shape the sources share: plain prefixes, a reserved character written
/// encoded, an encoded separator, non-ASCII, a wildcard, an anchor.
pub(super) const PATTERNS: &[&str] =
    &["/news/", "/private", "/wiki/Special%3A", "/a%2Fb", "/caf%C3%A9/", "/*.bak$", "/free/*/x"];

/// Pieces of request paths that make origins read a path differently.
pub(super) const PIECES: &[&str] = &[
    "news",
    "NEWS",
    "News.",
    "private",
    "PRIVATE",
    "wiki",
    "Special:X",
    "Special%3AX",
    "..",
    "%2e%2e",
    ".",
    "%2f",
    "%2F",
    "%5c",
    ";x",
    "a",
    "b",
    "a%2Fb",
    "free",
    "x",
    "caf%C3%A9",
    "CAF%C3%89",
    "%6eews",
    "x.bak",
    "x.BAK",
    "",
];

/// A path of `pieces`, with `query`.
pub(super) fn path_of(pieces: &[&str], query: Option<&str>) -> String {
    format!("/{}{}", pieces.join("/"), query.unwrap_or(""))
}

/// Whether `source`, refusing `pattern`, refuses `path` on a site that folds case or not.
fn refuses(source: &dyn super::RuleSource, pattern: &str, path: &str, folds_case: bool) -> bool {
    let mut site = Site::new();
    site.folds_case = folds_case;
    source.refuse(&mut site, pattern, TOKEN);
    site.outcome(&Ask::path(&site, path)).enforced
}

/// Every path source against robots.txt's `Disallow` on `path`.
fn agree(pattern: &str, path: &str, folds_case: bool) -> Result<(), TestCaseError> {
    let robots = refuses(source("robots.txt"), pattern, path, folds_case);
    for s in sources_for(Family::Readings) {
        let refused = refuses(s, pattern, path, folds_case);
        prop_assert_eq!(
            refused,
            robots,
            "{} vs robots.txt on {:?} for pattern {:?} (folds case: {})",
            s.name(),
            path,
            pattern,
            folds_case
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn every_rule_source_refuses_the_same_readings(
        pattern in proptest::sample::select(PATTERNS),
        pieces in proptest::collection::vec(proptest::sample::select(PIECES), 1..6),
        query in proptest::option::of(Just("?q=1")),
        folds_case in any::<bool>(),
    ) {
        agree(pattern, &path_of(&pieces, query), folds_case)?;
    }
}

/// Patterns of `*`, `$` and literals, generated (review-tests F4): the prefix-index matcher
/// (robots.txt, exceptions) and the pattern matcher (`Content-Usage`, `tdmrep.json`) agree on
/// every one.
fn wildcard_pattern() -> impl Strategy<Value = String> {
    let piece = proptest::sample::select(&["a", "x", "b/", "*", "**", ".", "%2A", "%24"][..]);
    (proptest::collection::vec(piece, 0..5), any::<bool>()).prop_map(|(pieces, anchored)| {
        format!("/{}{}", pieces.concat(), if anchored { "$" } else { "" })
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn both_matchers_agree_on_generated_wildcard_patterns(
        pattern in wildcard_pattern(),
        path in proptest::collection::vec(
            proptest::sample::select(&["a", "x", "b", "/", ".", "*", "$", "%2A", "ab", "xa"][..]),
            0..8,
        ),
        folds_case in any::<bool>(),
    ) {
        agree(&pattern, &format!("/{}", path.concat()), folds_case)?;
    }
}

/// The reviews' cases, fixed: each is refused by every path source.
#[test]
fn the_reviews_readings_are_refused_by_every_source() {
    for (pattern, path, folds) in [
        ("/wiki/Special%3A", "/wiki/Special:X", false),
        ("/news/", "/free/../news/a", false),
        ("/news/", "/free/%2e%2e/news/a", false),
        ("/news/", "//news/a", false),
        ("/news/", "/NEWS/x", true),
        ("/news/", "/News./x", true),
        ("/caf%C3%A9/", "/CAF%C3%89/x", true),
        // Review-tests F4: `*…*$`, where the anchor is read after a segment.
        ("/*a*$", "/xa/b", false),
    ] {
        for s in sources_for(Family::Readings) {
            assert!(refuses(s, pattern, path, folds), "{} lets {path} past {pattern}", s.name());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Issue 37 (review-core): an allow exception for `pattern` over a robots.txt that
    /// disallows everything lets through exactly what `Allow: pattern` beside `Disallow: /`
    /// lets through (it must cover every reading robots.txt disallows). The disallow side is
    /// the `exception` entry of [`super::SOURCES`].
    #[test]
    fn an_allow_exception_lifts_exactly_what_robots_txt_allow_lifts(
        pattern in proptest::sample::select(PATTERNS),
        pieces in proptest::collection::vec(proptest::sample::select(PIECES), 1..6),
        query in proptest::option::of(Just("?q=1")),
        folds_case in any::<bool>(),
    ) {
        let path = path_of(&pieces, query);
        let mut lifted = Site::new();
        lifted.folds_case = folds_case;
        lifted.robots = format!("User-agent: {TOKEN}\nDisallow: /\nAllow: {pattern}\n");
        let allowed_by_robots = !lifted.outcome(&Ask::path(&lifted, &path)).enforced;

        let mut excepted = Site::new();
        excepted.folds_case = folds_case;
        excepted.robots = format!("User-agent: {TOKEN}\nDisallow: /\n");
        let allow = super::harness::exception(
            crate::exceptions::Effect::Allow, &excepted, TOKEN, pattern,
        );
        excepted.exceptions.push(allow);
        // An allow exception loosens enforcement: the crawler's user is tied to its token.
        let ask = Ask { who: super::Who::Tied(TOKEN.into()), ..Ask::path(&excepted, &path) };
        let let_through = !excepted.outcome(&ask).enforced;
        prop_assert_eq!(
            let_through, allowed_by_robots,
            "allow exception vs robots.txt on {:?} for {:?} (folds case: {})",
            path, pattern, folds_case
        );
    }
}
