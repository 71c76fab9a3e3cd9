//! AI usage preferences in robots.txt (`shared/spec/README.md`, "AI usage preferences"):
//! `Content-Usage` (draft-ietf-aipref-attach, draft-ietf-aipref-vocab) and Cloudflare's
//! `Content-Signal`.

use robots_proxy::robots::usage::{Category, Preference, UsagePreferences};
use robots_proxy::robots::{ProductToken, RobotsTxt};

fn prefs(body: &str, agent: &str, path: &str) -> UsagePreferences {
    let token = ProductToken::new(agent).unwrap();
    RobotsTxt::parse(body.as_bytes()).usage(Some(&token), path)
}

fn train(p: &UsagePreferences) -> (Preference, Option<u32>) {
    let s = p.get(Category::TrainAi);
    (s.preference, s.line)
}

/// The attach draft's example, in today's labels, with its table of paths.
#[test]
fn attach_draft_example() {
    let body = "User-Agent: *\n\
                Allow: /\n\
                Disallow: /never/\n\
                Content-Usage: train-ai=n\n\
                Content-Usage: /ai-ok/ train-ai=y\n";
    assert_eq!(train(&prefs(body, "bot", "/")), (Preference::Disallow, Some(4)));
    assert_eq!(train(&prefs(body, "bot", "/test")), (Preference::Disallow, Some(4)));
    assert_eq!(train(&prefs(body, "bot", "/ai-ok/")), (Preference::Allow, Some(5)));
    assert_eq!(train(&prefs(body, "bot", "/ai-ok/test")), (Preference::Allow, Some(5)));
    // A disallowed path is decided by allow/disallow alone: no preference applies.
    assert!(prefs(body, "bot", "/never/").is_unknown());
    assert!(prefs(body, "bot", "/never/x").is_unknown());
}

#[test]
fn longest_path_takes_precedence() {
    let body = "User-agent: *\n\
                Content-Usage: /a/ train-ai=y\n\
                Content-Usage: /a/b/ train-ai=n\n\
                Content-Usage: /a/b/c/ ai-use=n\n";
    assert_eq!(train(&prefs(body, "bot", "/a/x")), (Preference::Allow, Some(2)));
    assert_eq!(train(&prefs(body, "bot", "/a/b/x")), (Preference::Disallow, Some(3)));
    // The longest matching rule says nothing about train-ai: unknown, not inherited.
    let deep = prefs(body, "bot", "/a/b/c/x");
    assert_eq!(deep.get(Category::TrainAi).preference, Preference::Unknown);
    assert_eq!(deep.get(Category::AiUse).preference, Preference::Disallow);
    assert!(prefs(body, "bot", "/z").is_unknown());
}

#[test]
fn n_and_y_on_the_same_path_combine_to_n() {
    let body = "User-agent: *\n\
                Content-Usage: /p/ train-ai=y, search=y\n\
                Content-Usage: /p/ train-ai=n\n";
    let p = prefs(body, "bot", "/p/1");
    assert_eq!(train(&p), (Preference::Disallow, Some(3)));
    assert_eq!(p.get(Category::Search).preference, Preference::Allow);
    assert_eq!(p.to_header().as_deref(), Some("train-ai=n, search=y"));
}

#[test]
fn both_vocabularies() {
    let body = "User-agent: *\n\
                Content-Signal: search=yes, ai-input=yes, ai-train=no\n\
                Content-Usage: ai-use=n\n\
                Allow: /\n";
    let p = prefs(body, "bot", "/page");
    assert_eq!(train(&p), (Preference::Disallow, Some(2)));
    assert_eq!(p.get(Category::Search).preference, Preference::Allow);
    // ai-input=yes and ai-use=n on the same (empty) path: the most restrictive wins.
    assert_eq!(p.get(Category::AiUse).preference, Preference::Disallow);
    assert_eq!(p.get(Category::AiUse).line, Some(3));
}

#[test]
fn a_dictionary_that_does_not_parse_states_nothing() {
    // draft-ietf-aipref-vocab: a Dictionary that fails to parse (RFC 9651: the empty member,
    // `=n`) leaves every preference unknown, the well-formed members in it too.
    let body = "User-agent: *\n\
                Content-Usage: train-ai=maybe, , =n, search=y;q=1, bogus\n\
                Content-Usage: ((((\n\
                Content-Usage:\n";
    let p = prefs(body, "bot", "/");
    assert_eq!(p.get(Category::TrainAi).preference, Preference::Unknown);
    assert_eq!(p.get(Category::Search).preference, Preference::Unknown);
    // One that parses: a value that is not the token y or n is unknown, the others count.
    let body = "User-agent: *\nContent-Usage: train-ai=maybe, search=y;q=1, bogus\n";
    let p = prefs(body, "bot", "/");
    assert_eq!(p.get(Category::TrainAi).preference, Preference::Unknown);
    assert_eq!(p.get(Category::Search).preference, Preference::Allow);
}

#[test]
fn preferences_follow_group_selection() {
    let body = "User-agent: AcmeTrainer\n\
                Content-Usage: train-ai=n\n\
                \n\
                User-agent: *\n\
                Content-Usage: train-ai=y\n";
    assert_eq!(train(&prefs(body, "AcmeTrainer", "/")), (Preference::Disallow, Some(2)));
    assert_eq!(train(&prefs(body, "OtherBot", "/")), (Preference::Allow, Some(5)));
    // A usage line is a rule: it ends the user-agent lines of its group.
    let robots = RobotsTxt::parse(body.as_bytes());
    assert_eq!(robots.groups().len(), 2);
}

#[test]
fn check_shows_preferences_and_decides_for_a_purpose() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("robots.txt");
    std::fs::write(&file, "User-agent: *\nContent-Signal: search=yes, ai-train=no\nAllow: /\n")
        .unwrap();
    let run = |extra: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_robots-proxy"))
            .arg("check")
            .arg("--robots")
            .arg(&file)
            .args(["--agent", "AcmeBot"])
            .args(extra)
            .arg("https://a.test/page")
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let (code, text) = run(&[]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("usage: train-ai=n (line 2), search=y (line 2)"), "{text}");
    let (code, text) = run(&["--purpose", "train-ai"]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.starts_with("disallowed"), "{text}");
    assert!(text.contains("train-ai=n (line 2)"), "{text}");
    let (code, _) = run(&["--purpose", "search"]);
    assert_eq!(code, Some(0));
    let (code, _) = run(&["--purpose", "mining"]);
    assert_eq!(code, Some(2));
}

/// Issue 26 "Lower", review §5: a `$` inside a `Content-Usage` path is a literal `$`, as in
/// `allow`/`disallow` patterns, and matches a URL's `$` (or `%24`); it weighs one octet, so
/// `/p*q*` (5 octets) is longer than `/p$q` (4).
#[test]
fn a_dollar_inside_a_usage_path_is_literal() {
    let body = "User-agent: *\nContent-Usage: /a$b train-ai=n\n";
    assert_eq!(train(&prefs(body, "bot", "/a$b")), (Preference::Disallow, Some(2)));
    assert_eq!(train(&prefs(body, "bot", "/a%24b/c")), (Preference::Disallow, Some(2)));
    let body = "User-agent: *\nContent-Usage: /p$q train-ai=y\nContent-Usage: /p*q* train-ai=n\n";
    assert_eq!(train(&prefs(body, "bot", "/p$q")), (Preference::Disallow, Some(3)));
}
