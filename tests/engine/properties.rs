//! Properties checked over generated inputs (proptest). Case counts are modest so the suite stays
//! fast in a debug build.

use proptest::prelude::*;
use robots_proxy::policy::Readings;
use robots_proxy::robots::normalize::normalize;
use robots_proxy::robots::{ProductToken, RobotsTxt};

use super::util::glob_matches;

/// Pieces that robots.txt patterns and paths are made of, chosen to collide often.
const PIECES: &[&str] =
    &["/", "a", "b", "ab", "/a", ".php", "?", "=", "%41", "%2F", "%2f", "é", "-", "~", "%"];

fn piece_string(max: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(PIECES), 0..max).prop_map(|v| v.concat())
}

/// A pattern: `/` and pieces, with `*` here and there and sometimes a final `$`.
fn pattern() -> impl Strategy<Value = String> {
    (prop::collection::vec((piece_string(3), any::<bool>()), 0..4), any::<bool>(), 0..8u8).prop_map(
        |(parts, anchored, lead)| {
            let mut p = String::from(if lead == 0 { "*" } else { "/" });
            for (s, star) in parts {
                p.push_str(&s);
                if star {
                    p.push('*');
                }
            }
            if anchored {
                p.push('$');
            }
            p
        },
    )
}

fn path() -> impl Strategy<Value = String> {
    piece_string(8).prop_map(|s| format!("/{s}"))
}

/// A group: user-agent values and at least one rule (`true` = allow).
type Group = (Vec<&'static str>, Vec<(bool, String)>);

fn groups() -> impl Strategy<Value = Vec<Group>> {
    let agents = prop::collection::vec(
        prop::sample::select(&["*", "FooBot", "BarBot", "foobot/2.0", "* "][..]),
        1..3,
    );
    let rules = prop::collection::vec((any::<bool>(), pattern()), 1..6);
    prop::collection::vec((agents, rules), 1..4)
}

fn render(groups: &[Group]) -> String {
    let mut out = String::new();
    for (agents, rules) in groups {
        for a in agents {
            out.push_str(&format!("User-agent: {a}\n"));
        }
        for (allow, p) in rules {
            out.push_str(if *allow { "Allow: " } else { "Disallow: " });
            out.push_str(p);
            out.push('\n');
        }
        out.push('\n');
    }
    out
}

fn agents() -> [Option<ProductToken>; 3] {
    [ProductToken::new("FooBot").ok(), ProductToken::new("BarBot").ok(), None]
}

/// Bytes that look like robots.txt often enough to reach deep into the parser.
fn robots_like_bytes() -> impl Strategy<Value = Vec<u8>> {
    let fragment = prop_oneof![
        Just(b"User-agent: ".to_vec()),
        Just(b"Disallow: ".to_vec()),
        Just(b"Allow:".to_vec()),
        Just(b"Sitemap: ".to_vec()),
        Just(b"Crawl-delay: 1e309".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"\r".to_vec()),
        Just(b"\n".to_vec()),
        Just(b"*".to_vec()),
        Just(b"$".to_vec()),
        Just(b"%".to_vec()),
        Just(b"#".to_vec()),
        Just(b"\xEF\xBB\xBF".to_vec()),
        Just("/ü".as_bytes().to_vec()),
        prop::collection::vec(any::<u8>(), 0..16),
    ];
    prop::collection::vec(fragment, 0..64).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn parsing_never_panics_on_arbitrary_bytes(
        body in prop::collection::vec(any::<u8>(), 0..2048),
        path in any::<String>(),
    ) {
        let robots = RobotsTxt::parse(&body);
        let t = ProductToken::new("FooBot").ok();
        let _ = robots.decide(t.as_ref(), &path);
        let _ = robots.decide(None, &path);
        let _ = robots.matching_rules(None, &path);
        let _ = robots.crawl_delay(None);
        prop_assert_eq!(robots.parsed_bytes(), body.len());
    }

    #[test]
    fn parsing_never_panics_on_robots_like_bytes(
        body in robots_like_bytes(),
        path in prop::collection::vec(any::<u8>(), 0..64),
        agent in "[A-Za-z_-]{1,8}",
    ) {
        let robots = RobotsTxt::parse(&body);
        let path = String::from_utf8_lossy(&path);
        let t = ProductToken::new(&agent).ok();
        let d = robots.decide(t.as_ref(), &path);
        // The deciding rule, if any, is one of the rules that match.
        if let Some(rule) = d.rule() {
            prop_assert!(rule.matches(&path));
            let all = robots.matching_rules(t.as_ref(), &path);
            prop_assert!(all.iter().any(|r| std::ptr::eq(*r, rule)));
            prop_assert_eq!(all[0].pattern().len(), rule.pattern().len());
        }
        let _ = robots.disallows_everything(t.as_ref());
    }

    #[test]
    fn normalisation_is_idempotent(input in prop::collection::vec(any::<u8>(), 0..64)) {
        let once = normalize(&input);
        prop_assert!(once.is_ascii());
        prop_assert_eq!(normalize(once.as_bytes()), once);
    }

    #[test]
    fn readings_forward_what_was_sent(input in "[/a.%2eEfF5cC;?#~é\\ ]{0,24}") {
        let readings = Readings::of(&input);
        let sent = readings.as_sent();
        prop_assert!(sent.starts_with('/'));
        // Only the fragment is dropped and an empty path filled in.
        let without_fragment = input.split('#').next().unwrap_or("");
        let filled = format!("/{}", without_fragment);
        prop_assert!(sent == without_fragment || sent == filled);
        // Reading what is forwarded gives the same readings again.
        prop_assert_eq!(&Readings::of(sent), &readings);
        for (_, read) in readings.iter().skip(1) {
            prop_assert!(read.starts_with('/'));
            // Readings resolve every dot-segment and merge every slash run in the path, and
            // write it in ASCII (the query is kept as sent).
            let path = read.split('?').next().unwrap_or("");
            prop_assert!(path.is_ascii());
            prop_assert!(!path.contains("//") && !path.contains("/./") && !path.contains("/../"), "{}", read);
        }
    }

    #[test]
    fn decisions_do_not_depend_on_the_path_encoding(groups in groups(), path in path()) {
        let robots = RobotsTxt::parse(render(&groups).as_bytes());
        let canonical = normalize(path.as_bytes());
        for t in agents() {
            let a = robots.decide(t.as_ref(), &path).is_allowed();
            let b = robots.decide(t.as_ref(), &canonical).is_allowed();
            prop_assert_eq!(a, b);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Adding an allow rule to a group never turns an allowed URL disallowed.
    #[test]
    fn adding_an_allow_rule_never_disallows(
        groups in groups(),
        which in any::<prop::sample::Index>(),
        at in any::<prop::sample::Index>(),
        extra in pattern(),
        paths in prop::collection::vec(path(), 1..6),
    ) {
        let before = RobotsTxt::parse(render(&groups).as_bytes());
        let mut more = groups.clone();
        let g = which.index(more.len());
        let pos = at.index(more[g].1.len() + 1);
        more[g].1.insert(pos, (true, extra.clone()));
        let after = RobotsTxt::parse(render(&more).as_bytes());
        for t in agents() {
            for p in &paths {
                if before.decide(t.as_ref(), p).is_allowed() {
                    prop_assert!(
                        after.decide(t.as_ref(), p).is_allowed(),
                        "allow {} made {} disallowed for {:?}", extra, p, t
                    );
                }
            }
        }
    }

    /// A path that starts with a plain (wildcard-free) disallow pattern and matches no allow rule
    /// is disallowed.
    #[test]
    fn a_plain_disallow_prefix_without_allow_is_disallowed(
        rules in prop::collection::vec((any::<bool>(), pattern()), 1..8),
        plain in piece_string(4),
        suffix in piece_string(4),
        noise in groups(),
    ) {
        // The `*` group holds the rules and a plain disallow; other groups (never `*`) are noise.
        let plain = format!("/{}", plain.replace(['*', '$'], ""));
        let mut star: Group = (vec!["*"], rules);
        star.1.push((false, plain.clone()));
        let mut all: Vec<Group> = noise
            .into_iter()
            .map(|(a, r)| (a.into_iter().filter(|a| !a.starts_with('*')).collect(), r))
            .filter(|(a, _): &Group| !a.is_empty())
            .collect();
        all.insert(0, star.clone());
        let robots = RobotsTxt::parse(render(&all).as_bytes());
        let path = format!("{}{}", normalize(plain.as_bytes()), normalize(suffix.as_bytes()));
        let allow_matches = star
            .1
            .iter()
            .filter(|(allow, _)| *allow)
            .any(|(_, p)| glob_matches(normalize(p.as_bytes()).as_bytes(), path.as_bytes()));
        if !allow_matches {
            prop_assert!(!robots.decide(None, &path).is_allowed(), "{} under {:?}", path, star);
        }
    }

    /// The engine agrees with a naive longest-match over the reference matcher.
    #[test]
    fn decide_agrees_with_a_naive_longest_match(
        rules in prop::collection::vec((any::<bool>(), pattern()), 1..10),
        paths in prop::collection::vec(path(), 1..8),
    ) {
        let groups: Vec<Group> = vec![(vec!["*"], rules.clone())];
        let robots = RobotsTxt::parse(render(&groups).as_bytes());
        for p in &paths {
            let canon = normalize(p.as_bytes());
            let best = rules
                .iter()
                .map(|(allow, pat)| (*allow, normalize(pat.as_bytes())))
                .filter(|(_, pat)| glob_matches(pat.as_bytes(), canon.as_bytes()))
                .max_by_key(|(allow, pat)| (pat.len(), *allow));
            let want = best.is_none_or(|(allow, _)| allow);
            prop_assert_eq!(robots.decide(None, p).is_allowed(), want, "{} {:?}", p, rules);
        }
    }
}

#[test]
fn the_reference_matcher_itself() {
    assert!(glob_matches(b"/a*b", b"/aXb/c"));
    assert!(!glob_matches(b"/a*b$", b"/aXb/c"));
    assert!(glob_matches(b"/*ab", b"/aab"));
    assert!(glob_matches(b"/$", b"/"));
    assert!(!glob_matches(b"/$", b"/x"));
    assert!(glob_matches(b"*", b""));
    assert!(glob_matches(b"/a$b", b"/a$bc"));
}
