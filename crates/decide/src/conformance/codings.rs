//! [`Family::Codings`]: the same rule file (robots.txt, `tdmrep.json`, the HTML page) served
//! in every coding the fetcher accepts ([`Coding`]: gzip, deflate zlib-wrapped or raw, both
//! stacked, a transfer coding; a UTF-8 BOM; CR LF or CR line ends; UTF-16 with its BOM), in
//! frames of any size, decides as the file served as written (spec README, "Parsing:
//! encoding"; `cache::decode`).

use proptest::prelude::*;

use super::{sources_for, Ask, Coding, Family, Site, TOKEN};

/// Paths the rule refuses, and paths it does not.
const PATHS: &[&str] = &["/private", "/private/x", "/PRIVATE/x", "/public", "/", "/x/private"];

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn every_coding_and_framing_decides_as_the_file_as_written(
        coding in proptest::sample::select(&Coding::ALL[..]),
        frame in prop_oneof![1usize..8, 8usize..600, Just(usize::MAX)],
        path in proptest::sample::select(PATHS),
        folds_case in any::<bool>(),
    ) {
        for s in sources_for(Family::Codings) {
            let mut plain = Site::new();
            plain.folds_case = folds_case;
            s.refuse(&mut plain, "/private", TOKEN);
            let expected = plain.outcome(&Ask::path(&plain, path));
            let coded = Site { coding, frame, ..plain.clone() };
            let found = coded.outcome(&Ask::path(&coded, path));
            prop_assert_eq!(
                found, expected,
                "{} served {:?} in frames of {} on {:?} (folds case: {})",
                s.name(), coding, frame, path, folds_case
            );
        }
    }
}

/// Each coding refuses what the rule names (the property above could hold with nothing
/// refused).
#[test]
fn every_coding_refuses_the_rule_s_path() {
    for s in sources_for(Family::Codings) {
        for coding in Coding::ALL {
            let mut site = Site { coding, ..Site::new() };
            s.refuse(&mut site, "/private", TOKEN);
            assert!(
                site.outcome(&Ask::path(&site, "/private/x")).enforced,
                "{} {coding:?}",
                s.name()
            );
        }
    }
}
