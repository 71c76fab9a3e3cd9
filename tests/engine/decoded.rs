//! Patterns read decoded (issue 26.4): `RobotsTxt::decide_decoded` holds rules written with
//! encoded reserved characters against paths an origin decodes; `decide` stays octet for octet.

use robots_proxy::policy::{decide_reading, Reading, Readings};
use robots_proxy::robots::RobotsTxt;

const ROBOTS: &str = "User-agent: *\nDisallow: /wiki/Special%3ARandom\nDisallow: /a%2Fb\n\
Disallow: /x%2Cy\nDisallow: /lit%2Astar\nDisallow: /pct%25\nAllow: /wiki/Special%3ARandom/ok\n";

#[test]
fn encoded_reserved_rules_hold_decoded_paths() {
    let robots = RobotsTxt::parse(ROBOTS.as_bytes());
    assert!(robots.has_decoded_patterns());
    for path in ["/wiki/Special:Random", "/a/b", "/x,y", "/wiki/Special:Random/x"] {
        assert!(robots.decide(None, path).is_allowed(), "as written, Google: {path}");
        assert!(!robots.decide_decoded(None, path).is_allowed(), "decoded: {path}");
    }
    // The longest pattern still wins among decoded patterns.
    assert!(robots.decide_decoded(None, "/wiki/Special:Random/ok").is_allowed());
    // The rule reported is the rule as written.
    let d = robots.decide_decoded(None, "/x,y");
    assert_eq!(d.rule().map(|r| (r.pattern(), r.line())), Some(("/x%2Cy", 4)));
    // `%2A` and `%25` keep naming a literal `*` and `%`: not a wildcard, not a new escape.
    assert!(!robots.decide_decoded(None, "/lit*star").is_allowed());
    assert!(robots.decide_decoded(None, "/litXstar").is_allowed());
    assert!(!robots.decide_decoded(None, "/pct%25").is_allowed());
    // A file without such patterns decides the same both ways.
    let plain = RobotsTxt::parse(b"User-agent: *\nDisallow: /a/b\n");
    assert!(!plain.has_decoded_patterns());
    assert!(!plain.decide_decoded(None, "/a/b").is_allowed());
}

/// What the proxy decides: the path as sent against the patterns as written, every reading
/// (and the path as sent read decoded, when the file has encoded patterns) against the decoded
/// patterns. `/x%2cy` as sent and its decoded reading `/x,y` agree.
#[test]
fn every_reading_is_decided_against_the_decoded_patterns() {
    let robots = RobotsTxt::parse(ROBOTS.as_bytes());
    let decide = |path: &str| -> Vec<(Reading, String, bool)> {
        Readings::of(path)
            .to_decide(robots.has_decoded_patterns(), false)
            .map(|(r, p)| (r, p.to_owned(), decide_reading(&robots, None, r, p).is_allowed()))
            .collect()
    };
    assert_eq!(
        decide("/x%2cy"),
        [(Reading::AsSent, "/x%2cy".into(), false), (Reading::Decoded, "/x,y".into(), false)]
    );
    assert_eq!(
        decide("/wiki/Special:Random"),
        [
            (Reading::AsSent, "/wiki/Special:Random".into(), true),
            (Reading::Decoded, "/wiki/Special:Random".into(), false)
        ]
    );
    // Without encoded patterns, nothing is added: one reading, one decision.
    let plain = RobotsTxt::parse(b"User-agent: *\nDisallow: /a/b\n");
    assert_eq!(Readings::of("/wiki/x").to_decide(plain.has_decoded_patterns(), false).count(), 1);
}
