//! Inputs built to be slow or deep. Only correctness is asserted here; how fast they are decided
//! is measured by `benches/engine.rs`.

use robots_proxy::robots::{RobotsTxt, RuleKind, MIN_SIZE_LIMIT};

#[test]
fn many_stars_against_a_long_path() {
    let body = "User-agent: *\nDisallow: /*a*a*a*a*a*a*a*a*b\n";
    let robots = RobotsTxt::parse(body.as_bytes());
    let long_a = format!("/{}", "a".repeat(2000));
    assert!(robots.decide(None, &long_a).is_allowed(), "no `b`: no match");
    assert!(!robots.decide(None, &format!("{long_a}b")).is_allowed());
    assert!(!robots.decide(None, &format!("/{}b{}", "a".repeat(8), "a".repeat(1991))).is_allowed());
    assert!(robots.decide(None, &format!("/{}b{}", "a".repeat(7), "a".repeat(1992))).is_allowed());
    // Anchored: the `b` must end the path.
    let body = "User-agent: *\nDisallow: /*a*a*a*a*a*a*a*a*b$\n";
    let robots = RobotsTxt::parse(body.as_bytes());
    assert!(!robots.decide(None, &format!("{long_a}b")).is_allowed());
    assert!(robots.decide(None, &format!("{long_a}ba")).is_allowed());
}

/// `User-agent: *`, then `n` rules of several shapes, and the expected verdict for a path.
struct Big {
    body: String,
}

impl Big {
    fn new(n: usize) -> Self {
        let mut body = String::with_capacity(n * 24);
        body.push_str("User-agent: *\n");
        for i in 0..n {
            let line = match i % 10 {
                0..=5 => format!("Disallow: /dir{i}/\n"),
                6 => format!("Allow: /dir{}/public\n", i - 6),
                7 => format!("Disallow: /*.ext{i}$\n"),
                8 => format!("Disallow: /q{i}?*session\n"),
                _ => format!("Allow: /dir{}/public/secret{i}\n", i - 9),
            };
            body.push_str(&line);
        }
        Big { body }
    }
}

#[test]
fn a_file_of_100_000_rules() {
    let big = Big::new(100_000);
    // About 2 MB: past the default limit, so the limit is raised to take it all.
    assert!(big.body.len() > MIN_SIZE_LIMIT);
    let robots = RobotsTxt::parse_with_limit(big.body.as_bytes(), big.body.len());
    assert_eq!(robots.rules_of(&robots.groups()[0]).len(), 100_000);
    let cases: &[(&str, bool)] = &[
        ("/dir0/x", false),
        ("/dir0/public", true),
        ("/dir0/public/secret9", true),
        ("/dir99990/", false),
        ("/dir99995/x", false),
        ("/dir99996/x", true), // i % 10 == 6: an allow of `/dir99990/public` only
        ("/dir99990/public/x", true),
        ("/dir100000/", true),
        ("/dir1/", false),
        ("/dir1", true),
        ("/x.ext7", false),
        ("/a/b/c.ext99997", false),
        ("/x.ext99997/", true),
        ("/x.ext99996", true),
        ("/q8?a=1&session=2", false),
        ("/q8?a=1", true),
        ("/q18session", true),
        ("/", true),
    ];
    for &(path, want) in cases {
        assert_eq!(robots.decide(None, path).is_allowed(), want, "{path}");
    }
    // The longest match among many candidates on the way down the index.
    let d = robots.decide(None, "/dir50/public/secret59/x");
    assert_eq!(d.rule().map(|r| (r.kind(), r.line())), Some((RuleKind::Allow, 61)));
}

#[test]
fn deep_and_wide_prefixes() {
    // Each rule's prefix extends the previous one: a deep chain in the prefix index.
    let mut body = String::from("User-agent: *\n");
    let mut prefix = String::from("/");
    for i in 0..2000 {
        prefix.push(char::from(b'a' + (i % 26) as u8));
        let kind = if i % 2 == 0 { "Disallow" } else { "Allow" };
        body.push_str(&format!("{kind}: {prefix}\n"));
    }
    let robots = RobotsTxt::parse_with_limit(body.as_bytes(), body.len());
    // The longest prefix of the path among the rules decides: even index -> disallow.
    for depth in [1usize, 2, 3, 500, 1999, 2000] {
        let path: String = prefix.chars().take(depth + 1).collect::<String>() + "/zz";
        let expect_allowed = (depth - 1) % 2 == 1;
        assert_eq!(robots.decide(None, &path).is_allowed(), expect_allowed, "depth {depth}");
    }
    // Many siblings under one node.
    let mut body = String::from("User-agent: *\n");
    for b in 0u8..=255 {
        body.push_str(&format!("Disallow: /s/%{b:02X}\n"));
    }
    let robots = RobotsTxt::parse(body.as_bytes());
    assert!(!robots.decide(None, "/s/%FF").is_allowed());
    assert!(!robots.decide(None, "/s/a").is_allowed(), "%61 is `a`");
    assert!(robots.decide(None, "/s/").is_allowed());
}

/// `n` written in letters only (base 26), so that it can be part of a product token.
fn letters(mut n: usize) -> String {
    let mut out = String::new();
    loop {
        out.push(char::from(b'a' + (n % 26) as u8));
        n /= 26;
        if n == 0 {
            return out;
        }
    }
}

#[test]
fn huge_single_line_and_many_user_agents() {
    // 200,000 bytes on one line: cut to the line limit, and still a working rule.
    let body = format!("User-agent: *\nDisallow: /{}\n", "x*".repeat(100_000));
    let robots = RobotsTxt::parse(body.as_bytes());
    assert!(robots.decide(None, &format!("/{}", "x".repeat(100))).is_allowed());
    assert!(!robots.decide(None, &format!("/{}", "x".repeat(9_000))).is_allowed());
    // 10,000 user-agent lines in one group.
    let mut body = String::new();
    for i in 0..10_000 {
        body.push_str(&format!("User-agent: bot-{}\n", letters(i)));
    }
    body.push_str("Disallow: /\n");
    let robots = RobotsTxt::parse(body.as_bytes());
    assert_eq!(robots.groups().len(), 1);
    assert!(!robots
        .decide(Some(&super::util::token(&format!("bot-{}", letters(9_999)))), "/x")
        .is_allowed());
    assert!(robots.decide(Some(&super::util::token("other")), "/x").is_allowed());
}

#[test]
fn wildcards_at_several_depths_of_the_index() {
    // A deep candidate that fails, then a shallow one whose bytes lie before the deep node: the
    // walk's byte filter must cover the whole path, not what follows the deepest node.
    let body = "User-agent: *\nDisallow: /*q/ab/yy\nAllow: /zq/ab/*z\n";
    let robots = RobotsTxt::parse(body.as_bytes());
    let d = robots.decide(None, "/zq/ab/yy");
    assert!(!d.is_allowed());
    assert_eq!(d.rule().map(|r| r.line()), Some(2));
    assert!(robots.decide(None, "/zq/ab/yz").is_allowed());
    // Anchored candidates at several depths.
    let body = "User-agent: *\nDisallow: /*.pdf$\nAllow: /docs/*.pdf$\nDisallow: /docs/x/*f$\n";
    let robots = RobotsTxt::parse(body.as_bytes());
    assert!(!robots.decide(None, "/a.pdf").is_allowed());
    assert!(robots.decide(None, "/docs/a.pdf").is_allowed());
    assert!(robots.decide(None, "/docs/x/a.pdf").is_allowed(), "allow /docs/*.pdf$ is longer");
    assert!(!robots.decide(None, "/docs/x/af").is_allowed());
    assert!(robots.decide(None, "/docs/a.pdf?x").is_allowed());
}

#[test]
fn many_anchored_wildcards_on_one_node_agree_with_a_naive_scan() {
    use super::util::{glob_matches, Rng};
    use robots_proxy::robots::normalize::normalize;
    // Enough `/*...$` rules on the root node that they are looked up by the path's tail.
    let alphabet = ["a", "b", ".", "x", "0", "1", "/", "*"];
    let mut rng = Rng::new(7);
    let word = |rng: &mut Rng, n: usize| -> String {
        (0..1 + rng.below(n)).map(|_| *rng.pick(&alphabet)).collect()
    };
    for _round in 0..5 {
        let mut rules: Vec<(bool, String)> = Vec::new();
        for _ in 0..300 {
            let allow = rng.chance(1, 3);
            let pattern = match rng.below(4) {
                0 => format!("/{}", word(&mut rng, 5)),
                1 => format!("/*{}", word(&mut rng, 6)),
                _ => format!("/*{}$", word(&mut rng, 7)),
            };
            rules.push((allow, pattern));
        }
        let mut body = String::from("User-agent: *\n");
        for (allow, p) in &rules {
            body.push_str(if *allow { "Allow: " } else { "Disallow: " });
            body.push_str(p);
            body.push('\n');
        }
        let robots = RobotsTxt::parse(body.as_bytes());
        for _ in 0..300 {
            let path = format!("/{}", word(&mut rng, 12).replace('*', "b"));
            let canon = normalize(path.as_bytes());
            let best = rules
                .iter()
                .map(|(allow, p)| (*allow, normalize(p.as_bytes())))
                .filter(|(_, p)| glob_matches(p.as_bytes(), canon.as_bytes()))
                .max_by_key(|(allow, p)| (p.len(), *allow));
            let want = best.is_none_or(|(allow, _)| allow);
            assert_eq!(robots.decide(None, &path).is_allowed(), want, "{path}");
        }
    }
}

/// The review's hostile input (issue 26.6): 40 rules `/*aaaa…b` (8,000 + i `a`s) against a
/// 60 KB path `/b` + 60,000 `a`s. No rule matches (the only `b` comes before the `a`s), and the
/// answer must come from a linear search: the old byte-by-byte search took 9.5 s in release.
/// Its speed is measured by `benches/engine.rs` (`pathological/hostile_40_long_segments`).
#[test]
fn long_segments_against_a_long_path_of_near_matches() {
    let mut body = String::from("User-agent: *\n");
    for i in 0..40 {
        body.push_str(&format!("Disallow: /*{}b\n", "a".repeat(8000 + i)));
    }
    let robots = RobotsTxt::parse(body.as_bytes());
    let path = format!("/b{}", "a".repeat(60_000));
    assert!(robots.decide(None, &path).is_allowed(), "no rule matches");
    // The same rules do match once a `b` follows enough `a`s.
    assert!(!robots.decide(None, &format!("{path}b")).is_allowed());
    let d = robots.decide(None, &format!("/{}b", "a".repeat(8005)));
    assert_eq!(d.rule().map(|r| r.line()), Some(7), "the longest that matches: 8,005 `a`s");
}

/// A decision's search work is bounded: past the budget (4 MiB of path searched), the rules
/// still untried are judged on the safe side, so a file of many wildcard rules against a very
/// long path can make a decision more restrictive, never slower than the bound nor less
/// restrictive.
#[test]
fn search_work_per_decision_is_bounded_on_the_safe_side() {
    let path = format!("/{}q", "a".repeat(65_536));
    let rules = |n: usize| {
        let mut body = String::from("User-agent: *\nAllow: /\n");
        for i in 1..=n {
            body.push_str(&format!("Disallow: /*q{}\n", "a".repeat(i)));
        }
        RobotsTxt::parse(body.as_bytes())
    };
    // 40 rules fit in the budget: decided exactly (no `q` is followed by an `a`).
    let d = rules(40).decide(None, &path).rule().map(|r| r.kind());
    assert_eq!(d, Some(RuleKind::Allow));
    // 100 do not: the untried disallows count as matching.
    let robots = rules(100);
    let d = robots.decide(None, &path);
    assert!(!d.is_allowed(), "out of budget: the safe side");
    // ... and the refusal says so, naming no rule: none was seen to match (review-core N5).
    assert!(matches!(d.reason(), robots_proxy::robots::Reason::OverBudget), "{d:?}");
    assert!(d.rule().is_none());
    assert!(d.reason().explain(false).contains("no rule named"));
    // A short path is decided exactly by the same file.
    assert!(robots.decide(None, "/aaaq").is_allowed());
}

/// Review-core N5: an ordinary faceted-navigation file (700 `Disallow: /*?*filterN=`) against
/// a long query with no `filter` in it spends the budget. The decision stays on the safe side
/// but names no rule; the case-folded reading says the same.
#[test]
fn over_budget_refusals_name_no_rule() {
    let mut body = String::from("User-agent: *\n");
    for i in 1..=700 {
        body.push_str(&format!("Disallow: /*?*filter{i}=\n"));
    }
    body.push_str("Allow: /\n");
    let robots = RobotsTxt::parse(body.as_bytes());
    let mut url = String::from("/catalog?");
    for i in 0..400 {
        url.push_str(&format!("k{i}=abcdefghij0123456789&"));
    }
    for d in [robots.decide(None, &url), robots.decide_folded(None, &url)] {
        assert!(!d.is_allowed());
        assert!(matches!(d.reason(), robots_proxy::robots::Reason::OverBudget), "{d:?}");
        assert!(d.rule().is_none(), "{d:?}");
    }
    // A short query is decided exactly.
    assert!(robots.decide(None, "/catalog?k=1").is_allowed());
    assert!(!robots.decide(None, "/catalog?a=1&filter7=x").is_allowed());
}

/// Review-tests F3: the budget's allow side. Once the search budget is spent, an untried allow
/// counts as not matching: a crawler-made long URL cannot turn a disallowed path allowed by
/// making the matcher give up on the allows.
#[test]
fn over_budget_allows_never_match() {
    let mut body = String::from("User-agent: *\nDisallow: /private\n");
    for i in 1..=100 {
        body.push_str(&format!("Allow: /*q{}\n", "a".repeat(i)));
    }
    let robots = RobotsTxt::parse(body.as_bytes());
    let url = format!("/private/{}q", "a".repeat(65_536));
    let d = robots.decide(None, &url);
    assert!(!d.is_allowed(), "{d:?}");
    assert!(!robots.decide_folded(None, &url).is_allowed());
    assert!(!robots.decide_decoded(None, &url).is_allowed());
}
