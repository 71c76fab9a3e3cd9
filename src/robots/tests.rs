//! Engine tests for the rows of `shared/spec/README.md` and Google's documented examples.

use super::*;

fn allowed(body: &str, agent: &str, path: &str) -> bool {
    let token = ProductToken::from_token_or_user_agent(agent);
    RobotsTxt::parse(body.as_bytes()).decide(token.as_ref(), path).is_allowed()
}

#[test]
fn google_precedence_examples() {
    // allow: /p vs disallow: / -> /page allowed (longer match)
    assert!(allowed("user-agent: *\nallow: /p\ndisallow: /\n", "bot", "/page"));
    // allow: /folder vs disallow: /folder -> tie, allow wins
    assert!(allowed("user-agent: *\nallow: /folder\ndisallow: /folder\n", "bot", "/folder/page"));
    // allow: /page vs disallow: /*.htm -> /page.htm disallowed (longer)
    assert!(!allowed("user-agent: *\nallow: /page\ndisallow: /*.htm\n", "bot", "/page.htm"));
    // allow: /page vs disallow: /*.ph -> /page.php allowed (tie, allow wins)
    assert!(allowed("user-agent: *\nallow: /page\ndisallow: /*.ph\n", "bot", "/page.php"));
    // allow: /$ vs disallow: / -> / allowed, /page.htm disallowed
    let body = "user-agent: *\nallow: /$\ndisallow: /\n";
    assert!(allowed(body, "bot", "/"));
    assert!(!allowed(body, "bot", "/page.htm"));
}

#[test]
fn robots_txt_is_always_allowed() {
    assert!(allowed("user-agent: *\ndisallow: /\n", "bot", "/robots.txt"));
    assert!(!allowed("user-agent: *\ndisallow: /\n", "bot", "/robots.txt.bak"));
}

#[test]
fn decision_says_why() {
    let robots = RobotsTxt::parse(b"# c\nUser-agent: FooBot\nDisallow: /x\n");
    let foo = ProductToken::new("foobot").unwrap();
    let d = robots.decide(Some(&foo), "/x/y");
    assert_eq!(d.verdict(), Verdict::Disallow);
    let rule = d.rule().unwrap();
    assert_eq!((rule.pattern(), rule.line()), ("/x", 3));
    assert_eq!(d.user_agent_line().map(|u| (u.value(), u.line())), Some(("FooBot", 2)));
    assert!(matches!(robots.decide(Some(&foo), "/y").reason(), Reason::NoRuleMatched));
    let other = ProductToken::new("other").unwrap();
    assert!(matches!(robots.decide(Some(&other), "/x").reason(), Reason::NoGroupApplies));
}
