//! One test (or more) per row of the tables in `shared/spec/README.md`: Parsing, Choosing the
//! group, Matching a URL; plus RFC 9309's percent-encoding table.

use robots_proxy::robots::normalize::normalize;
use robots_proxy::robots::{Reason, RobotsTxt, RuleKind, Verdict, MIN_SIZE_LIMIT};

use super::util::{allowed, deciding_rule, rule_texts, rules_for, token};

// ---------------------------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------------------------

const BODY: &str = "User-agent: FooBot\nDisallow: /private\nAllow: /private/ok\n";

#[test]
fn encoding_whole_bom_is_ignored() {
    let body = [b"\xEF\xBB\xBF".as_slice(), BODY.as_bytes()].concat();
    let robots = RobotsTxt::parse(&body);
    assert_eq!(robots.groups().len(), 1, "the first line is still a user-agent line");
    assert!(!allowed(&body, "FooBot", "/private/x"));
    assert!(allowed(&body, "FooBot", "/private/ok"));
    assert_eq!(deciding_rule(&robots, "FooBot", "/private/x").map(|r| r.2), Some(2));
}

#[test]
fn encoding_partial_bom_is_ignored() {
    for bom in [&b"\xEF\xBB"[..], &b"\xEF"[..]] {
        let body = [bom, BODY.as_bytes()].concat();
        let robots = RobotsTxt::parse(&body);
        assert_eq!(robots.groups().len(), 1, "{bom:x?}");
        assert!(!allowed(&body, "FooBot", "/private/x"), "{bom:x?}");
    }
}

#[test]
fn encoding_bom_that_is_not_one_spoils_only_its_line() {
    // Google's suite: "\xEF\x11\xBF" is not a BOM; the first line is garbage, so the allow line
    // that follows has no group.
    let robots = RobotsTxt::parse(b"\xEF\x11\xBFUser-Agent: foo\nAllow: /AnyValue\n");
    assert!(robots.groups().is_empty());
    // A BOM is only skipped at the start of the body.
    let robots = RobotsTxt::parse(b"User-Agent: foo\n\xEF\xBB\xBFAllow: /AnyValue\n");
    assert_eq!(robots.groups().len(), 1);
    assert!(rules_for(&robots, Some("foo")).is_empty());
}

/// The same file written with each kind of line end: same rules, same line numbers.
#[test]
fn line_ends_cr_lf_crlf_and_mixed_number_lines_alike() {
    let lines = [
        "# robots.txt",
        "User-agent: FooBot",
        "",
        "Disallow: /a",
        "Allow: /a/b",
        "Sitemap: https://example.com/sitemap.xml",
        "User-agent: *",
        "Disallow: /",
    ];
    // No CR directly before an empty line that ends in LF: that would be one CRLF.
    let mixed_ends = ["\r\n", "\n", "\r", "\r\n", "\n", "\r", "\r\n", "\r"];
    let variants: Vec<(&str, String)> = vec![
        ("LF", lines.join("\n")),
        ("CRLF", lines.join("\r\n") + "\r\n"),
        ("CR", lines.join("\r") + "\r"),
        ("mixed", lines.iter().zip(mixed_ends).map(|(l, e)| format!("{l}{e}")).collect()),
    ];
    for (name, body) in &variants {
        let robots = RobotsTxt::parse(body.as_bytes());
        let got: Vec<(RuleKind, String, u32)> = rules_for(&robots, Some("FooBot"));
        assert_eq!(
            got,
            vec![(RuleKind::Disallow, "/a".into(), 4), (RuleKind::Allow, "/a/b".into(), 5)],
            "{name}"
        );
        let any = robots.groups_for(None);
        assert_eq!(any.len(), 1, "{name}");
        assert_eq!(any[0].user_agents()[0].line(), 7, "{name}");
        assert_eq!(robots.sitemaps()[0].line(), 6, "{name}");
        assert_eq!(robots.sitemaps()[0].url(), "https://example.com/sitemap.xml", "{name}");
        assert_eq!(robots.decide(None, "/x").rule().map(|r| r.line()), Some(8), "{name}");
    }
}

#[test]
fn cr_cr_lf_is_two_line_ends() {
    // CR, then CRLF: an empty line between, as in Google's parser.
    let robots = RobotsTxt::parse(b"User-agent: *\r\r\nDisallow: /x\r\n");
    assert_eq!(robots.decide(None, "/x").rule().map(|r| r.line()), Some(3));
    let robots = RobotsTxt::parse(b"User-agent: *\n\r\nDisallow: /x");
    assert_eq!(robots.decide(None, "/x").rule().map(|r| r.line()), Some(3));
}

#[test]
fn comments_are_ignored() {
    let body = "# Disallow: /b\nUser-agent: *  # everyone\nDisallow: /a # not /a/b\n\
                Disallow: /c#d\n  # indented comment: Disallow: /e\n";
    let robots = RobotsTxt::parse(body.as_bytes());
    assert_eq!(rule_texts(&robots, None), ["disallow:/a", "disallow:/c"]);
    assert!(allowed(body, "bot", "/b"));
    assert!(allowed(body, "bot", "/e"));
    assert_eq!(robots.groups()[0].user_agents()[0].value(), "*");
}

#[test]
fn whitespace_around_field_colon_and_value_is_ignored() {
    let body =
        " \t User-agent \t : \t FooBot \t \nDisallow :/a\nDisallow:   /b   \n\tAllow\t:\t/b/c\t\n";
    let robots = RobotsTxt::parse(body.as_bytes());
    assert_eq!(robots.groups()[0].user_agents()[0].value(), "FooBot");
    assert_eq!(rule_texts(&robots, Some("FooBot")), ["disallow:/a", "disallow:/b", "allow:/b/c"]);
    assert!(!allowed(body, "foobot", "/b/x"));
    assert!(allowed(body, "foobot", "/b/c"));
}

#[test]
fn field_names_are_case_insensitive() {
    let body = "USER-AGENT: FooBot\nDISALLOW: /x\nallow: /x/y\nDisAllow: /z\n\
                CRAWL-DELAY: 3\nSITEMAP: https://a.test/s.xml\n";
    let robots = RobotsTxt::parse(body.as_bytes());
    assert_eq!(rule_texts(&robots, Some("FooBot")), ["disallow:/x", "allow:/x/y", "disallow:/z"]);
    assert_eq!(robots.crawl_delay(Some(&token("FooBot"))).map(|d| d.seconds()), Some(3.0));
    assert_eq!(robots.sitemaps().len(), 1);
}

#[test]
fn a_group_ends_at_a_user_agent_line_after_a_rule() {
    let body = "User-agent: a\nUser-agent: b\nDisallow: /ab\nUser-agent: c\nDisallow: /c\n";
    let robots = RobotsTxt::parse(body.as_bytes());
    assert_eq!(robots.groups().len(), 2);
    assert_eq!(rule_texts(&robots, Some("a")), ["disallow:/ab"]);
    assert_eq!(rule_texts(&robots, Some("b")), ["disallow:/ab"]);
    assert_eq!(rule_texts(&robots, Some("c")), ["disallow:/c"]);
    // A group with no rules at the end of the file.
    let robots = RobotsTxt::parse(b"User-agent: a\nDisallow: /\nUser-agent: q\n");
    assert_eq!(robots.groups().len(), 2);
    assert!(rules_for(&robots, Some("q")).is_empty());
    assert!(allowed("User-agent: a\nDisallow: /\nUser-agent: q\n", "q", "/x"));
}

#[test]
fn rules_before_the_first_group_are_ignored() {
    let body = "Disallow: /\nAllow: /x\n\nUser-agent: FooBot\nDisallow: /y\n";
    let robots = RobotsTxt::parse(body.as_bytes());
    assert_eq!(robots.groups().len(), 1);
    assert_eq!(rule_texts(&robots, Some("FooBot")), ["disallow:/y"]);
    assert!(allowed(body, "FooBot", "/z"));
    assert!(allowed(body, "OtherBot", "/"), "no `*` group: the early rules do not become one");
    assert!(RobotsTxt::parse(b"Disallow: /\n").groups().is_empty());
}

#[test]
fn empty_allow_and_disallow_are_ignored() {
    let body = "User-agent: *\nAllow:\nDisallow: /\n";
    assert!(!allowed(body, "bot", "/x"), "an empty allow matches nothing");
    let body = "User-agent: *\nDisallow:\n";
    let robots = RobotsTxt::parse(body.as_bytes());
    assert!(rules_for(&robots, None).is_empty());
    assert!(matches!(robots.decide(None, "/x").reason(), Reason::NoRuleMatched));
    assert!(robots.decide(None, "/").is_allowed());
}

#[test]
fn an_empty_disallow_still_ends_the_user_agent_list() {
    // `a` has a group of its own with only an empty disallow; `b` starts a new group.
    let body = "User-agent: a\nDisallow:\nUser-agent: b\nDisallow: /\n";
    let robots = RobotsTxt::parse(body.as_bytes());
    assert_eq!(robots.groups().len(), 2);
    assert!(allowed(body, "a", "/x"));
    assert!(!allowed(body, "b", "/x"));
    // Same with an empty allow.
    let body = "User-agent: a\nAllow:\nUser-agent: b\nDisallow: /\n";
    assert_eq!(RobotsTxt::parse(body.as_bytes()).groups().len(), 2);
    assert!(allowed(body, "a", "/x"));
}

/// (`Content-Usage` and `Content-Signal` are not "other lines": the spec README's AI usage
/// section makes them group rules, like allow/disallow; `tests/engine/usage.rs` covers them.)
#[test]
fn sitemap_unknown_and_crawl_delay_lines_do_not_end_a_group() {
    for between in [
        "Sitemap: https://example.com/sitemap.xml",
        "Crawl-delay: 7",
        "Noindex: /x",
        "Host: example.com",
        "Request-rate: 1/10",
    ] {
        let body = format!("User-agent: a\n{between}\nUser-agent: b\nDisallow: /\n");
        let robots = RobotsTxt::parse(body.as_bytes());
        assert_eq!(robots.groups().len(), 1, "{between}");
        assert!(!allowed(&body, "a", "/x"), "{between}: `a` shares b's rules");
        assert!(!allowed(&body, "b", "/x"), "{between}");
        // Nor do they end the rules: a rule after them is still in the group.
        let body = format!("User-agent: a\nDisallow: /p\n{between}\nDisallow: /q\n");
        assert!(!allowed(&body, "a", "/q"), "{between}");
    }
}

#[test]
fn sitemaps_are_collected_and_crawl_delay_parsed() {
    let body = "Sitemap: https://example.com/s1.xml\nUser-agent: FooBot\nCrawl-delay: 2.5\n\
                Crawl-delay: 9\nDisallow: /x\nsitemap: https://cdn.example.org/s2.xml\n\
                User-agent: *\nCrawl-delay: nonsense\nDisallow: /y\n";
    let robots = RobotsTxt::parse(body.as_bytes());
    let maps: Vec<(&str, u32)> = robots.sitemaps().iter().map(|s| (s.url(), s.line())).collect();
    assert_eq!(maps, [("https://example.com/s1.xml", 1), ("https://cdn.example.org/s2.xml", 6)]);
    let delay = robots.crawl_delay(Some(&token("FooBot"))).expect("a crawl-delay");
    assert_eq!((delay.seconds(), delay.line()), (2.5, 3), "the first valid one");
    assert_eq!(delay.duration(), std::time::Duration::from_millis(2500));
    assert!(robots.crawl_delay(None).is_none(), "an unparseable delay is no delay");
}

/// A body of `User-agent: *` then `Disallow: /r<N>` lines, a little over `size` bytes.
fn big_body(size: usize) -> (String, Vec<usize>) {
    let mut body = String::from("User-agent: *\n");
    let mut starts = Vec::new();
    let mut n = 0;
    while body.len() < size {
        starts.push(body.len());
        body.push_str(&format!("Disallow: /r{n}\n"));
        n += 1;
    }
    (body, starts)
}

#[test]
fn at_least_500_kib_are_parsed() {
    let (body, starts) = big_body(MIN_SIZE_LIMIT);
    assert!(body.len() >= MIN_SIZE_LIMIT);
    let robots = RobotsTxt::parse(body.as_bytes());
    // The last rule that lies wholly within the first 500 KiB applies.
    let last_inside = starts
        .iter()
        .enumerate()
        .rev()
        .find(|(i, _)| starts.get(i + 1).is_some_and(|&next| next <= MIN_SIZE_LIMIT))
        .map(|(i, _)| i)
        .expect("many lines");
    assert!(!robots.decide(None, &format!("/r{last_inside}")).is_allowed());
    assert!(!robots.decide(None, "/r0").is_allowed());
}

#[test]
fn content_past_the_limit_is_ignored_not_a_failure() {
    let (mut body, _) = big_body(MIN_SIZE_LIMIT + 10_000);
    body.push_str("Disallow: /past-the-limit\n");
    let robots = RobotsTxt::parse(body.as_bytes());
    assert!(robots.decide(None, "/past-the-limit").is_allowed());
    assert!(!robots.decide(None, "/r0").is_allowed());
    assert!(robots.parsed_bytes() <= MIN_SIZE_LIMIT);
    assert_eq!(robots.parsed_bytes() + robots.ignored_bytes(), body.len());
    assert!(robots.ignored_bytes() > 10_000);
}

#[test]
fn the_limit_is_configurable_but_never_below_500_kib() {
    let (mut body, _) = big_body(MIN_SIZE_LIMIT + 10_000);
    body.push_str("Disallow: /past-the-limit\n");
    // A lower limit is raised to 500 KiB.
    let low = RobotsTxt::parse_with_limit(body.as_bytes(), 1024);
    assert!(!low.decide(None, "/r0").is_allowed());
    assert_eq!(low.parsed_bytes(), RobotsTxt::parse(body.as_bytes()).parsed_bytes());
    // A higher limit reads everything.
    let high = RobotsTxt::parse_with_limit(body.as_bytes(), 2 * MIN_SIZE_LIMIT);
    assert!(!high.decide(None, "/past-the-limit").is_allowed());
    assert_eq!(high.ignored_bytes(), 0);
}

#[test]
fn a_line_cut_by_the_limit_is_dropped_whole_never_shortened() {
    let mut body = String::from("User-agent: *\n");
    while body.len() < MIN_SIZE_LIMIT - 20 {
        body.push_str("# padding padding padding padding padding padding padding\n");
    }
    // This line straddles the limit: kept, it would shorten to a prefix like `/straddle`.
    let straddle_at = body.len();
    body.push_str("Disallow: /straddle-and-more-beyond-the-limit\n");
    assert!(straddle_at < MIN_SIZE_LIMIT && body.len() > MIN_SIZE_LIMIT);
    let robots = RobotsTxt::parse(body.as_bytes());
    assert!(rules_for(&robots, None).is_empty(), "{:?}", rule_texts(&robots, None));
    assert!(robots.decide(None, "/straddle").is_allowed());
    assert_eq!(robots.parsed_bytes(), straddle_at);
    // Cut exactly at a line end: the whole last line is kept.
    let mut body = String::from("User-agent: *\n");
    let filler = MIN_SIZE_LIMIT - body.len() - "Disallow: /last\n".len();
    body.push_str(&"#".repeat(filler - 1));
    body.push('\n');
    body.push_str("Disallow: /last\nDisallow: /next\n");
    let robots = RobotsTxt::parse(body.as_bytes());
    assert_eq!(robots.parsed_bytes(), MIN_SIZE_LIMIT);
    assert!(!robots.decide(None, "/last").is_allowed());
    assert!(robots.decide(None, "/next").is_allowed());
}

#[test]
fn misspellings_google_accepts() {
    for (ua, dis) in [
        ("useragent", "disalow"),
        ("user agent", "dissallow"),
        ("User-Agent", "dissalow"),
        ("UserAgent", "diasllow"),
        ("user-agent", "disallaw"),
    ] {
        let body = format!("{ua}: FooBot\n{dis}: /x\n");
        assert!(!allowed(&body, "FooBot", "/x/y"), "{body:?}");
        assert!(allowed(&body, "FooBot", "/y"), "{body:?}");
    }
    // A misspelling that Google does not accept is an unknown line.
    assert!(allowed("user-agent: FooBot\ndisallw: /x\n", "FooBot", "/x"));
}

#[test]
fn missing_colon_is_accepted_for_two_words() {
    let body = "user-agent FooBot\ndisallow /\nallow /ok\n";
    assert!(!allowed(body, "FooBot", "/x"));
    assert!(allowed(body, "FooBot", "/ok/1"));
    // Three words without a colon cannot be read: the line is skipped.
    let body = "user-agent: FooBot\ndisallow / x\n";
    assert!(allowed(body, "FooBot", "/x"));
    assert!(rules_for(&RobotsTxt::parse(body.as_bytes()), Some("FooBot")).is_empty());
}

#[test]
fn html_bodies_yield_their_valid_lines() {
    let body = "<!DOCTYPE html>\n<html><head><title>Not found</title>\n\
                <meta http-equiv=\"refresh\" content=\"0; url=https://example.com/\">\n\
                </head><body>\nUser-agent: *\nDisallow: /private\n<p>Oops: the page</p>\n\
                </body></html>\n";
    let robots = RobotsTxt::parse(body.as_bytes());
    assert_eq!(rule_texts(&robots, None), ["disallow:/private"]);
    assert!(!robots.decide(None, "/private/x").is_allowed());
    assert!(robots.decide(None, "/public").is_allowed());
}

#[test]
fn binary_bodies_yield_their_valid_lines() {
    let mut body: Vec<u8> = (0..=255u8).cycle().take(4096).collect();
    body.extend_from_slice(b"\nUser-agent: *\nDisallow: /bin\n");
    body.extend((0..2048u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8));
    let robots = RobotsTxt::parse(&body);
    assert!(!robots.decide(None, "/bin/x").is_allowed());
    assert!(robots.decide(None, "/other").is_allowed());
    // Non-UTF-8 bytes in a rule are compared in percent-encoded form.
    let robots = RobotsTxt::parse(b"User-agent: *\nDisallow: /caf\xE9\n");
    assert_eq!(rule_texts(&robots, None), ["disallow:/caf%E9"]);
    assert!(!robots.decide(None, "/caf%e9/menu").is_allowed());
}

// ---------------------------------------------------------------------------------------------
// Choosing the group
// ---------------------------------------------------------------------------------------------

#[test]
fn product_tokens_compare_case_insensitively() {
    let body = "User-agent: FOOBOT\nDisallow: /x\n";
    for agent in ["foobot", "FooBot", "FOOBOT"] {
        assert!(!allowed(body, agent, "/x"), "{agent}");
    }
    let body = "User-agent: foobot\nDisallow: /x\n";
    assert!(!allowed(body, "FOOBOT", "/x"));
}

#[test]
fn user_agent_values_with_versions_or_stars_count_as_their_token() {
    for value in ["googlebot/1.2", "googlebot*", "Googlebot/2.1 (+http://www.google.com/bot.html)"]
    {
        let body = format!("User-agent: {value}\nDisallow: /x\n\nUser-agent: *\nDisallow: /\n");
        assert!(!allowed(&body, "Googlebot", "/x"), "{value}");
        assert!(allowed(&body, "Googlebot", "/y"), "{value}: its own group, not `*`");
    }
    // A prefix is not the token: `googlebot-news` is not `googlebot`.
    let body = "User-agent: googlebot-news\nDisallow: /x\n";
    assert!(allowed(body, "googlebot", "/x"));
    // A value that starts with no token names no crawler.
    let body = "User-agent: *bot\nDisallow: /x\n";
    assert!(allowed(body, "bot", "/x"));
    assert!(RobotsTxt::parse(body.as_bytes()).decide(None, "/x").is_allowed());
}

#[test]
fn star_with_trailing_text_is_the_star_group() {
    let body = "User-agent: * # everyone\nDisallow: /x\n";
    assert!(!allowed(body, "AnyBot", "/x"));
    let body = "User-agent: * everyone\nDisallow: /x\n";
    assert!(!allowed(body, "AnyBot", "/x"));
}

#[test]
fn several_groups_for_the_same_token_are_merged() {
    let body = "User-agent: FooBot\nDisallow: /a\n\nUser-agent: BarBot\nDisallow: /b\n\n\
                User-agent: foobot\nDisallow: /c\nAllow: /a/ok\n";
    let robots = RobotsTxt::parse(body.as_bytes());
    assert_eq!(rule_texts(&robots, Some("FooBot")), ["disallow:/a", "disallow:/c", "allow:/a/ok"]);
    assert_eq!(robots.groups_for(Some(&token("FooBot"))).len(), 2);
    assert!(!allowed(body, "FooBot", "/a/x"));
    assert!(!allowed(body, "FooBot", "/c"));
    assert!(allowed(body, "FooBot", "/a/ok"), "an allow of one group beats a disallow of another");
    assert!(allowed(body, "FooBot", "/b"));
    // The deciding rule's own user-agent line is reported.
    let d = robots.decide(Some(&token("FooBot")), "/c");
    assert_eq!(d.user_agent_line().map(|u| (u.value(), u.line())), Some(("foobot", 7)));
}

#[test]
fn without_a_group_of_its_own_the_star_groups_apply_merged() {
    let body = "User-agent: *\nDisallow: /a\n\nUser-agent: FooBot\nDisallow: /f\n\n\
                User-agent: *\nDisallow: /b\n";
    assert!(!allowed(body, "OtherBot", "/a"));
    assert!(!allowed(body, "OtherBot", "/b"));
    assert!(allowed(body, "OtherBot", "/f"));
    let robots = RobotsTxt::parse(body.as_bytes());
    assert_eq!(rule_texts(&robots, None), ["disallow:/a", "disallow:/b"]);
}

#[test]
fn with_neither_everything_is_allowed() {
    let body = "User-agent: FooBot\nDisallow: /\n";
    let robots = RobotsTxt::parse(body.as_bytes());
    let d = robots.decide(Some(&token("OtherBot")), "/x");
    assert_eq!(d.verdict(), Verdict::Allow);
    assert!(matches!(d.reason(), Reason::NoGroupApplies));
    assert!(d.user_agent_line().is_none());
    assert!(robots.decide(None, "/x").is_allowed());
    assert!(RobotsTxt::parse(b"").decide(None, "/").is_allowed());
}

#[test]
fn specific_and_star_groups_are_never_merged() {
    let body = "User-agent: *\nDisallow: /star\n\nUser-agent: FooBot\nDisallow: /foo\n";
    assert!(allowed(body, "FooBot", "/star"));
    assert!(!allowed(body, "FooBot", "/foo"));
    // Even an empty specific group shields its crawler from the `*` rules.
    let body = "User-agent: FooBot\nDisallow:\n\nUser-agent: *\nDisallow: /\n";
    assert!(allowed(body, "FooBot", "/x"));
    assert!(!allowed(body, "OtherBot", "/x"));
    // One group naming both: it applies to both, and `*` rules elsewhere still do not.
    let body =
        "User-agent: FooBot\nUser-agent: *\nDisallow: /both\n\nUser-agent: *\nDisallow: /s\n";
    assert!(!allowed(body, "FooBot", "/both"));
    assert!(allowed(body, "FooBot", "/s"));
    assert!(!allowed(body, "OtherBot", "/s"));
}

// ---------------------------------------------------------------------------------------------
// Matching a URL
// ---------------------------------------------------------------------------------------------

#[test]
fn what_is_matched_is_path_and_query() {
    let body = "User-agent: *\nDisallow: /search?q=\nDisallow: /*?sessionid\n";
    assert!(!allowed(body, "bot", "/search?q=rust"));
    assert!(allowed(body, "bot", "/search"));
    assert!(allowed(body, "bot", "/search?p=1"));
    assert!(!allowed(body, "bot", "/cart?sessionid=1"));
    // A path without a leading slash is taken as if it had one.
    assert!(!allowed(body, "bot", "search?q=1"));
}

#[test]
fn matching_is_case_sensitive() {
    let body = "User-agent: *\nDisallow: /Private\n";
    assert!(!allowed(body, "bot", "/Private/x"));
    assert!(allowed(body, "bot", "/private/x"));
    assert!(allowed(body, "bot", "/PRIVATE"));
}

#[test]
fn the_longest_match_wins_in_octets() {
    let body = "User-agent: *\nDisallow: /a\nAllow: /a/b\nDisallow: /a/b/c\n";
    assert!(!allowed(body, "bot", "/a/x"));
    assert!(allowed(body, "bot", "/a/b/x"));
    assert!(!allowed(body, "bot", "/a/b/c/x"));
    // Order in the file does not matter.
    let body = "User-agent: *\nDisallow: /a/b/c\nAllow: /a/b\nDisallow: /a\n";
    assert!(allowed(body, "bot", "/a/b/x"));
    // Octets of the canonical form: `ツ` is 9 octets (`%E3%83%84`), more than `/abcdefg`'s 8.
    let body = "User-agent: *\nAllow: /abcdefg\nDisallow: /*ツ\n";
    assert!(!allowed(body, "bot", "/abcdefg/%E3%83%84"));
}

#[test]
fn a_tie_between_allow_and_disallow_goes_to_allow() {
    for body in [
        "User-agent: *\nDisallow: /x\nAllow: /x\n",
        "User-agent: *\nAllow: /x\nDisallow: /x\n",
        "User-agent: *\nDisallow: /*y\nAllow: /x*\n",
    ] {
        let robots = RobotsTxt::parse(body.as_bytes());
        let d = robots.decide(None, "/xy");
        assert!(d.is_allowed(), "{body:?}");
        assert_eq!(d.rule().map(|r| r.kind()), Some(RuleKind::Allow), "{body:?}");
    }
}

#[test]
fn star_matches_any_sequence_and_a_trailing_star_changes_nothing() {
    let body = "User-agent: *\nDisallow: /a*b\n";
    for p in ["/ab", "/a/b", "/aXXXb/c", "/aab"] {
        assert!(!allowed(body, "bot", p), "{p}");
    }
    assert!(allowed(body, "bot", "/a"));
    assert!(allowed(body, "bot", "/ba"));
    for p in ["/fish", "/fish/x", "/fishy", "/fish?q"] {
        assert_eq!(
            allowed("User-agent: *\nDisallow: /fish*\n", "bot", p),
            allowed("User-agent: *\nDisallow: /fish\n", "bot", p),
            "{p}"
        );
    }
    assert!(!allowed("User-agent: *\nDisallow: *\n", "bot", "/anything"));
    assert!(!allowed("User-agent: *\nDisallow: /***\n", "bot", "/anything"));
}

#[test]
fn dollar_at_the_end_anchors() {
    let body = "User-agent: *\nDisallow: /*.gif$\nDisallow: /exact$\n";
    assert!(!allowed(body, "bot", "/a/b.gif"));
    assert!(allowed(body, "bot", "/a/b.gif?x=1"));
    assert!(allowed(body, "bot", "/a/b.gifs"));
    assert!(!allowed(body, "bot", "/exact"));
    assert!(allowed(body, "bot", "/exact/"));
    // `$` elsewhere is an ordinary character, the same as `%24`.
    let body = "User-agent: *\nDisallow: /a$b\n";
    assert!(!allowed(body, "bot", "/a$b/c"));
    assert!(!allowed(body, "bot", "/a%24b/c"));
    assert!(!allowed("User-agent: *\nDisallow: /a$$\n", "bot", "/a$"));
    assert!(allowed("User-agent: *\nDisallow: /a$$\n", "bot", "/a$b"));
    assert!(allowed(body, "bot", "/a"));
    // A star before the anchor.
    assert!(!allowed("User-agent: *\nDisallow: /a*$\n", "bot", "/a/anything"));
}

#[test]
fn percent_encoding_non_ascii_compares_encoded() {
    let body = "User-agent: *\nDisallow: /café\n";
    assert!(!allowed(body, "bot", "/caf%C3%A9/menu"));
    assert!(!allowed(body, "bot", "/caf%c3%a9"));
    assert!(!allowed(body, "bot", "/café"));
    assert!(allowed(body, "bot", "/cafe"));
    let body = "User-agent: *\nDisallow: /caf%C3%A9\n";
    assert!(!allowed(body, "bot", "/café"));
}

#[test]
fn percent_encoding_unreserved_compares_equal_to_the_character() {
    let body = "User-agent: *\nDisallow: /%70rivate\nDisallow: /a%2Db\n";
    assert!(!allowed(body, "bot", "/private"));
    assert!(!allowed(body, "bot", "/a-b"));
    let body = "User-agent: *\nDisallow: /private\n";
    assert!(!allowed(body, "bot", "/%70rivate"));
    assert!(!allowed(body, "bot", "/%70%72%69%76%61%74%65"));
    assert!(!allowed(body, "bot", "/priv%61te"));
}

#[test]
fn percent_encoding_reserved_keeps_encoded_and_literal_apart() {
    // RFC 9309 §2.2.2: a percent-encoded reserved character is not decoded.
    let body = "User-agent: *\nDisallow: /a%2Fb\n";
    assert!(!allowed(body, "bot", "/a%2fb"));
    assert!(allowed(body, "bot", "/a/b"));
    let body = "User-agent: *\nDisallow: /a/b\n";
    assert!(allowed(body, "bot", "/a%2Fb"));
}

#[test]
fn percent_encoding_hex_case_does_not_matter() {
    let body = "User-agent: *\nDisallow: /%e3%83%84\n";
    assert!(!allowed(body, "bot", "/%E3%83%84"));
    let body = "User-agent: *\nDisallow: /%E3%83%84\n";
    assert!(!allowed(body, "bot", "/%e3%83%84"));
    assert!(!allowed(body, "bot", "/%E3%83%84"));
}

/// RFC 9309 §2.2.2's table: "Path", "Encoded Path", "Path to match".
#[test]
fn rfc_9309_percent_encoding_table() {
    let rows: [(&str, &str, &str); 5] = [
        ("/foo/bar?baz=quz", "/foo/bar?baz=quz", "/foo/bar?baz=quz"),
        (
            "/foo/bar?baz=http%3A%2F%2Ffoo.bar",
            "/foo/bar?baz=http%3A%2F%2Ffoo.bar",
            "/foo/bar?baz=http%3A%2F%2Ffoo.bar",
        ),
        ("/foo/bar/ツ", "/foo/bar/%E3%83%84", "/foo/bar/%E3%83%84"),
        ("/foo/bar/%E3%83%84", "/foo/bar/%E3%83%84", "/foo/bar/%E3%83%84"),
        ("/foo/bar/%62%61%7A", "/foo/bar/%62%61%7A", "/foo/bar/baz"),
    ];
    for (path, encoded, to_match) in rows {
        assert_eq!(normalize(path.as_bytes()), to_match, "{path}");
        assert_eq!(normalize(encoded.as_bytes()), to_match, "{encoded}");
        // A rule written in any of the three forms matches a URL in any of them.
        for rule in [path, encoded, to_match] {
            let body = format!("User-agent: *\nDisallow: /\nAllow: {rule}$\n");
            for url in [path, encoded, to_match] {
                assert!(allowed(&body, "bot", url), "rule {rule} url {url}");
            }
        }
    }
    // The second row's query holds `://` encoded. Written raw, the query compares raw (as in
    // Google's parser): reserved characters keep their encoded and literal forms apart.
    let body = "User-agent: *\nDisallow: /\nAllow: /foo/bar?baz=http://foo.bar$\n";
    assert!(allowed(body, "bot", "/foo/bar?baz=http://foo.bar"));
    assert!(!allowed(body, "bot", "/foo/bar?baz=http%3A%2F%2Ffoo.bar"));
    // RFC 9309 §2.2.3: special characters matched verbatim are written encoded.
    let body = "User-agent: *\nDisallow: /path/file-with-a-%2A.html\nDisallow: /path/foo-%24\n";
    for url in
        ["/path/file-with-a-*.html", "/path/file-with-a-%2A.html", "/path/file-with-a-%2a.html"]
    {
        assert!(!allowed(body, "bot", url), "{url}");
    }
    assert!(allowed(body, "bot", "/path/file-with-a-x.html"), "%2A is not a wildcard");
    for url in ["/path/foo-$", "/path/foo-%24", "/path/foo-$/x"] {
        assert!(!allowed(body, "bot", url), "{url}");
    }
}

#[test]
fn robots_txt_is_always_allowed() {
    let body = "User-agent: *\nDisallow: /\nDisallow: /robots.txt\nDisallow: /*.txt$\n";
    let robots = RobotsTxt::parse(body.as_bytes());
    for path in ["/robots.txt", "/robots%2Etxt", "/%72obots.txt"] {
        let d = robots.decide(None, path);
        assert!(d.is_allowed(), "{path}");
        assert!(matches!(d.reason(), Reason::RobotsTxt), "{path}");
    }
    // Exactly that path, with no query (spec README, "Matching a URL"): with a query it is
    // another URL, which the rules decide.
    for path in [
        "/robots.txt.bak",
        "/robots.txt/x",
        "/a/robots.txt",
        "/ROBOTS.TXT",
        "/robots.txt?x=1",
        "/robots.txt?",
    ] {
        assert!(!robots.decide(None, path).is_allowed(), "{path}");
    }
}

#[test]
fn disallows_everything_means_every_path() {
    for (body, all) in [
        ("User-agent: *\nDisallow: /\n", true),
        ("User-agent: *\nDisallow: *\n", true),
        ("User-agent: *\nDisallow: /*\n", true),
        ("User-agent: *\nDisallow: /\nAllow: /public\n", false),
        ("User-agent: *\nDisallow: /$\n", false),
        ("User-agent: *\nDisallow: /x\n", false),
        ("User-agent: FooBot\nDisallow: /\n", false),
        ("", false),
    ] {
        let robots = RobotsTxt::parse(body.as_bytes());
        assert_eq!(robots.disallows_everything(None), all, "{body:?}");
        if all {
            for p in ["/", "/a", "/a/b?c"] {
                assert!(!robots.decide(None, p).is_allowed(), "{body:?} {p}");
            }
        }
    }
}

#[test]
fn matching_rules_lists_every_match_longest_first() {
    let body = "User-agent: *\nDisallow: /a\nAllow: /a/b\nDisallow: /*b\nAllow: /x\n";
    let robots = RobotsTxt::parse(body.as_bytes());
    let got: Vec<(String, u32)> =
        robots.matching_rules(None, "/a/b/c").iter().map(|r| (r.to_string(), r.line())).collect();
    assert_eq!(
        got,
        [
            ("allow: /a/b".to_owned(), 3),
            ("disallow: /*b".to_owned(), 4),
            ("disallow: /a".into(), 2)
        ]
    );
    assert!(robots.matching_rules(None, "/zzz").is_empty());
}

#[test]
fn tokens_sharing_long_prefixes_find_their_own_groups() {
    let names = [
        "a",
        "googlebo",
        "googlebot",
        "googlebot-",
        "googlebot-news",
        "googlebot-image",
        "googlebotx",
        "googlebox",
        "z",
        "aaaaaaaaaaaaaaaaaaaaaaaa",
        "aaaaaaaa",
        "aaaaaaaaa",
    ];
    let mut body = String::new();
    for (i, n) in names.iter().enumerate() {
        body.push_str(&format!("User-agent: {n}\nDisallow: /only-{i}\n\n"));
    }
    let robots = RobotsTxt::parse(body.as_bytes());
    for (i, n) in names.iter().enumerate() {
        let upper = n.to_ascii_uppercase();
        for agent in [n.to_string(), upper] {
            assert_eq!(
                rule_texts(&robots, Some(&agent)),
                [format!("disallow:/only-{i}")],
                "{agent}"
            );
        }
    }
    for other in ["googleb", "googlebot-new", "aaaaaaaaaa", "b", "googlebot-newsx"] {
        assert!(rules_for(&robots, Some(other)).is_empty(), "{other}");
    }
}

#[test]
fn a_nul_octet_ends_the_line_there() {
    // Google's parser reads each line as a C string: what follows a NUL is not part of it,
    // and the line still counts.
    let body = "User-agent: *\nDisallow: /private\0/ignored\nDisallow: /x\0\nAllow: /y\n";
    let robots = RobotsTxt::parse(body.as_bytes());
    assert!(!robots.decide(None, "/private/z").is_allowed());
    assert!(!robots.decide(None, "/x").is_allowed());
    let d = robots.decide(None, "/private/z");
    assert_eq!(d.rule().map(|r| (r.line(), r.pattern().to_owned())), Some((2, "/private".into())));
    // A NUL before the colon leaves no directive.
    let robots = RobotsTxt::parse(b"User-agent: *\nDis\0allow: /a\n");
    assert!(robots.decide(None, "/a").is_allowed());
}

#[test]
fn octets_never_allowed_raw_in_a_uri_compare_percent_encoded() {
    // A rule written with a raw space names the encoded path (spec README): the site owner's
    // evident intent, where Google's library keeps the space and never matches.
    let body = "User-agent: *\nDisallow: /a b\nDisallow: /q\"x\nDisallow: /c|d\nDisallow: /e{f}\n";
    for url in ["/a%20b", "/a b", "/a%20bc", "/q%22x", "/c%7Cd", "/c%7cd", "/e%7Bf%7D"] {
        assert!(!allowed(body, "bot", url), "{url}");
    }
    assert!(allowed(body, "bot", "/a+b"), "`+` is not a space in a path");
    assert!(allowed(body, "bot", "/ab"));
}
