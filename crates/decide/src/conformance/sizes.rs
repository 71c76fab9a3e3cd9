//! Hostile sizes. [`Family::OversizeBody`]: a rule among thousands of others (groups, rules,
//! `<meta>` elements, directives), before or after filler up to and past the source's limit,
//! is decided as its [`Limit`] documents (spec README, "Parsing: size": content past the limit
//! is ignored; `cache::wellknown`: a `tdmrep.json` over its limit is ignored as a whole;
//! `proxy::optouts`: the page is read for its `<meta>` opt-outs up to its first 16 KiB), and
//! whatever a body inflates to, the decoded bytes held stay within the cap (work counted in
//! bytes, not timed). [`Family::LongRequest`]: very long paths and User-Agents decide as short
//! ones, on a bounded number of readings.

use proptest::prelude::*;

use super::{sources_for, Ask, Coding, Family, Limit, RuleSource, Site, Support, Who, TOKEN};

/// Whether `source`'s rule, written after `before` bytes of filler and followed by `after`
/// bytes, is in force, as its limit documents. The filler sizes keep a margin from the limits
/// (see the strategy), so the rule's own few bytes never decide.
fn in_force(source: &dyn RuleSource, before: usize, after: usize) -> bool {
    match source.limit() {
        Limit::Prefix(n) => before < n,
        Limit::Whole(n) => before + after < n,
        Limit::Unbounded => true,
    }
}

/// Filler sizes, each far from every limit (16 KiB, 64 KiB, 500 KiB): none, small, between
/// them, past all.
const FILLER: &[usize] = &[0, 2 << 10, 40 << 10, 200 << 10, 600 << 10];

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn a_rule_in_a_hostile_file_is_decided_as_its_limit_documents(
        before in proptest::sample::select(FILLER),
        after in proptest::sample::select(FILLER),
        coding in proptest::sample::select(&[Coding::Identity, Coding::Gzip][..]),
    ) {
        for s in sources_for(Family::OversizeBody) {
            let mut site = Site { pad_before: before, pad_after: after, coding, ..Site::new() };
            s.refuse(&mut site, "/private", TOKEN);
            let (outcome, work) = site.judge(&[Ask::path(&site, "/private/x")]);
            prop_assert_eq!(
                outcome[0].enforced, in_force(s, before, after),
                "{} with {} bytes before and {} after ({:?})", s.name(), before, after, coding
            );
            prop_assert!(work.decoded <= super::harness::robots_limit() + 1, "{:?}", work);
        }
    }
}

/// A body that inflates to 2 MiB (filler after the rule, gzipped twice) costs each body's
/// cap in decoded bytes, and the rule before it holds where the limit keeps it.
#[test]
fn a_gzip_bomb_costs_the_cap_not_what_it_inflates_to() {
    for s in sources_for(Family::OversizeBody) {
        let mut site = Site { pad_after: 2 << 20, coding: Coding::GzipTwice, ..Site::new() };
        s.refuse(&mut site, "/private", TOKEN);
        let (outcome, work) = site.judge(&[Ask::path(&site, "/private/x")]);
        assert_eq!(outcome[0].enforced, in_force(s, 0, 2 << 20), "{}", s.name());
        assert!(work.decoded <= super::harness::robots_limit() + 1, "{}: {work:?}", s.name());
    }
}

/// The most readings one path is decided on: as sent, three origin readings, the decoded
/// patterns' reading, and two case-folded ones.
const MOST_READINGS: usize = 7;

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    #[test]
    fn long_paths_and_user_agents_decide_as_short_ones(
        repeat in prop_oneof![Just(1usize), 100usize..400, Just(8_000usize)],
        piece in proptest::sample::select(&["a/", "%2e%2e/", "..;x/", "%2F", "A%5c", "*$"][..]),
        long_agent in any::<bool>(),
        public in any::<bool>(),
    ) {
        let rest = piece.repeat(repeat);
        let path = if public { format!("/public/{rest}") } else { format!("/private/{rest}") };
        let who = if long_agent {
            let comment = "x".repeat(8 << 10);
            Who::UserAgent(format!("Mozilla/5.0 (compatible; {comment}; {TOKEN}/1.0)"))
        } else {
            Who::crawler()
        };
        for s in sources_for(Family::LongRequest) {
            let mut site = Site::new();
            s.refuse(&mut site, "/private", TOKEN);
            let outcome = site.outcome(&Ask { who: who.clone(), ..Ask::path(&site, &path) });
            // A source that states no path refuses every path.
            let pathless = matches!(s.support(Family::Readings), Support::NotApplicable(_));
            let expected = !public || pathless;
            prop_assert_eq!(
                outcome.enforced, expected,
                "{} on a path of {} bytes (long User-Agent: {})", s.name(), path.len(), long_agent
            );
            prop_assert!(outcome.readings <= MOST_READINGS, "{} readings", outcome.readings);
        }
    }
}
