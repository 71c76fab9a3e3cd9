//! The real-world robots.txt files of `tests/fixtures/robots/`: they parse, their line numbers
//! point at the right lines, and every rule decides the paths it names.

use robots_proxy::robots::normalize::normalize;
use robots_proxy::robots::{ProductToken, RobotsTxt, RuleKind};

use super::util::{fixture, fixtures, token};

/// The physical lines of a body, split independently of the engine: CRLF, CR or LF end a line.
fn physical_lines(body: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < body.len() {
        match body[i] {
            b'\r' => {
                out.push(&body[start..i]);
                if body.get(i + 1) == Some(&b'\n') {
                    i += 1;
                }
                start = i + 1;
            }
            b'\n' => {
                out.push(&body[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    if start < body.len() {
        out.push(&body[start..]);
    }
    out
}

fn lower(line: &[u8]) -> String {
    String::from_utf8_lossy(line).to_ascii_lowercase()
}

/// Every token named in a file's user-agent lines, plus one that no file names.
fn tokens_of(robots: &RobotsTxt) -> Vec<Option<ProductToken>> {
    let mut out: Vec<Option<ProductToken>> = vec![None, Some(token("NoSuchBotAnywhere"))];
    for g in robots.groups() {
        for ua in g.user_agents() {
            let name: String = ua
                .value()
                .chars()
                .take_while(|c| c.is_ascii_alphabetic() || *c == '_' || *c == '-')
                .collect();
            if let Ok(t) = ProductToken::new(&name) {
                if !out.contains(&Some(t.clone())) {
                    out.push(Some(t));
                }
            }
        }
    }
    out
}

#[test]
fn there_are_enough_fixtures() {
    let all = fixtures();
    assert!(all.len() >= 30, "{}", all.len());
    let total: usize = all.iter().map(|(_, b)| b.len()).sum();
    assert!(total > 200_000, "{total}");
}

#[test]
fn every_fixture_parses_whole() {
    for (name, body) in fixtures() {
        let robots = RobotsTxt::parse(&body);
        assert_eq!(robots.parsed_bytes(), body.len(), "{name}");
        assert_eq!(robots.ignored_bytes(), 0, "{name}");
        assert!(robots.heap_size() > 0, "{name}");
    }
}

#[test]
fn line_numbers_point_at_the_right_lines() {
    for (name, body) in fixtures() {
        let robots = RobotsTxt::parse(&body);
        let lines = physical_lines(&body);
        for g in robots.groups() {
            for ua in g.user_agents() {
                let text = lower(lines[ua.line() as usize - 1]);
                assert!(text.contains("user"), "{name}: line {} is {text:?}", ua.line());
            }
            for rule in robots.rules_of(g) {
                let text = lower(lines[rule.line() as usize - 1]);
                let field = match rule.kind() {
                    RuleKind::Allow => "allow",
                    _ => "dis",
                };
                assert!(text.contains(field), "{name}: line {} is {text:?}", rule.line());
            }
        }
        for s in robots.sitemaps() {
            let text = lower(lines[s.line() as usize - 1]);
            assert!(text.contains("site"), "{name}: line {} is {text:?}", s.line());
        }
    }
}

#[test]
fn patterns_are_in_canonical_form() {
    for (name, body) in fixtures() {
        let robots = RobotsTxt::parse(&body);
        for g in robots.groups() {
            for rule in robots.rules_of(g) {
                assert_eq!(normalize(rule.pattern().as_bytes()), rule.pattern(), "{name}");
                assert!(rule.pattern().is_ascii(), "{name}");
            }
        }
    }
}

/// For each plain rule (no `*`, no `$`) of each group that applies to a token, the path the rule
/// names is decided by a rule at least as long: the prefix index misses no candidate.
#[test]
fn each_plain_rule_decides_its_own_path() {
    let mut checked = 0;
    for (name, body) in fixtures() {
        let robots = RobotsTxt::parse(&body);
        for t in tokens_of(&robots) {
            for g in robots.groups_for(t.as_ref()) {
                for rule in robots.rules_of(g) {
                    let p = rule.pattern();
                    if p.contains(['*', '$']) || !p.starts_with('/') || p.starts_with("/robots.txt")
                    {
                        continue;
                    }
                    for path in [p.to_owned(), format!("{p}zz/y?q=1")] {
                        let d = robots.decide(t.as_ref(), &path);
                        let winner = d.rule().unwrap_or_else(|| panic!("{name}: {path} no rule"));
                        assert!(winner.pattern().len() >= p.len(), "{name}: {path}");
                        assert!(winner.matches(&path), "{name}: {path}");
                        checked += 1;
                    }
                }
            }
        }
    }
    assert!(checked > 10_000, "{checked}");
}

#[test]
fn cr_only_files() {
    for name in ["219.txt", "220.txt", "221.txt", "222.txt", "223.txt"] {
        let body = fixture(name);
        assert!(body.contains(&b'\r'));
        let robots = RobotsTxt::parse(&body);
        assert!(!robots.groups().is_empty(), "{name}");
    }
    // 219: one physical "line" per CR; the `*` group's rules are on separate lines.
    let robots = RobotsTxt::parse(&fixture("219.txt"));
    let star = robots.groups_for(None);
    let rules: Vec<u32> = star.iter().flat_map(|g| robots.rules_of(g)).map(|r| r.line()).collect();
    assert!(rules.len() > 10);
    assert!(rules.windows(2).all(|w| w[0] < w[1]), "{rules:?}");
    assert!(!robots.decide(None, "/Analog_Root/x").is_allowed());
    // `User-agent: Yahoo Pipes 1.0` names `Yahoo`.
    assert!(!robots.decide(Some(&token("Yahoo")), "/anything").is_allowed());
    // 221 is `User-agent: *` CR `Disallow:`: nothing disallowed.
    let robots = RobotsTxt::parse(&fixture("221.txt"));
    assert!(robots.decide(None, "/").is_allowed());
}

#[test]
fn bom_files_start_with_a_directive_on_line_one() {
    for name in ["066.txt", "074.txt", "093.txt", "109.txt", "218.txt"] {
        let body = fixture(name);
        assert!(body.starts_with(b"\xEF\xBB\xBF"), "{name}");
        let robots = RobotsTxt::parse(&body);
        let first = lower(physical_lines(&body[3..])[0]);
        if first.trim_start().starts_with("user-agent") {
            assert_eq!(robots.groups()[0].user_agents()[0].line(), 1, "{name}");
        }
        assert!(!robots.groups().is_empty(), "{name}");
    }
}

#[test]
fn non_robots_bodies_yield_nothing_harmful() {
    for name in ["231.txt", "232.txt", "233.txt", "234.txt", "235.txt"] {
        let robots = RobotsTxt::parse(&fixture(name));
        for p in ["/", "/index.html", "/a/b?c=d"] {
            assert!(robots.decide(Some(&token("AnyBot")), p).is_allowed(), "{name} {p}");
        }
    }
    assert_eq!(RobotsTxt::parse(&fixture("234.txt")).sitemaps().len(), 1);
}

#[test]
fn ai_blocklist_blocks_each_listed_crawler() {
    let body = fixture("229.txt");
    let robots = RobotsTxt::parse(&body);
    let mut blocked = 0;
    for t in tokens_of(&robots).into_iter().flatten() {
        if robots.groups_for(Some(&t)).is_empty() {
            continue;
        }
        assert!(robots.disallows_everything(Some(&t)), "{t}");
        assert!(!robots.decide(Some(&t), "/any/page").is_allowed(), "{t}");
        blocked += 1;
    }
    assert!(blocked > 50, "{blocked}");
    assert!(robots.decide(Some(&token("NoSuchBotAnywhere")), "/any/page").is_allowed());
}

#[test]
fn non_utf8_files_keep_their_rules() {
    for name in ["224.txt", "226.txt", "227.txt", "228.txt"] {
        let body = fixture(name);
        assert!(std::str::from_utf8(&body).is_err(), "{name}");
        let robots = RobotsTxt::parse(&body);
        let rules: usize = robots.groups().iter().map(|g| robots.rules_of(g).len()).sum();
        assert!(rules > 0, "{name}");
    }
}
