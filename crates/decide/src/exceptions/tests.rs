use std::time::{Duration, SystemTime};

use super::*;
use crate::{Readings, TokenOrigin};
use robots_proxy_engine::ProductToken;

fn entry(effect: Effect) -> ExceptionEntry {
    ExceptionEntry {
        id: "x".into(),
        authorities: vec!["news.example".into(), "*.news.example".into()],
        tokens: vec!["AcmeBot".into()],
        users: vec![],
        paths: vec!["/archive/".into()],
        effect,
        reference: Some("https://legal.example/4711".into()),
        granted_by: Some("legal@example.com".into()),
        expires: Some("2030-01-01T00:00:00Z".into()),
        usage: vec![],
    }
}

fn now() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

fn keys(entries: &[ExceptionEntry]) -> Vec<String> {
    match checked(entries.to_vec()) {
        Ok(_) => Vec::new(),
        Err(problems) => problems.into_vec().into_iter().map(|(k, _)| k).collect(),
    }
}

#[test]
fn a_valid_entry_has_no_problems() {
    assert!(keys(&[
        entry(Effect::Allow),
        ExceptionEntry { id: "y".into(), ..entry(Effect::Disallow) }
    ])
    .is_empty());
}

#[test]
fn problems_name_the_entry_and_the_key() {
    let mut e = entry(Effect::Allow);
    e.expires = None;
    e.reference = None;
    e.tokens = vec!["*".into()];
    e.paths = vec!["archive".into(), "/a#b".into()];
    let mut past = entry(Effect::Allow);
    past.id = "p".into();
    past.expires = Some("2020-01-01T00:00:00Z".into());
    let dup = entry(Effect::Disallow);
    assert_eq!(
        keys(&[e, past, dup]),
        [
            "exceptions[1].tokens",
            "exceptions[1].paths",
            "exceptions[1].paths",
            "exceptions[1].reference",
            "exceptions[1].expires",
            "exceptions[3].id",
        ]
    );
}

#[test]
fn overlapping_allow_and_disallow_are_noted() {
    let d = ExceptionEntry {
        id: "d".into(),
        authorities: vec!["a.news.example".into()],
        ..entry(Effect::Disallow)
    };
    let lines = describe(&[entry(Effect::Allow), d]);
    assert!(lines.iter().any(|l| l.contains("x (allow) and d (disallow) overlap")), "{lines:?}");
}

fn authority(s: &str) -> Authority {
    Authority::from_uri(&s.parse().unwrap()).unwrap()
}

#[test]
fn scope_is_authority_token_and_every_reading() {
    let set = Exceptions::new(&[entry(Effect::Allow)]);
    let token = ProductToken::new("acmebot").unwrap();
    let other = ProductToken::new("OtherBot").unwrap();
    let decide = |a: &str, t: &ProductToken, path: &str, at: SystemTime| {
        let r = Readings::of(path);
        let all: Vec<(Reading, &str)> = r.to_decide(true, false).collect();
        set.decide(&authority(a), Claim::tied(Some(t), None), &all, &all, at)
            .map(|v| v.id.to_string())
    };
    assert_eq!(decide("http://news.example/", &token, "/archive/1", now()).as_deref(), Some("x"));
    assert_eq!(
        decide("http://www.news.example/", &token, "/archive/1", now()).as_deref(),
        Some("x")
    );
    assert_eq!(decide("http://news.example.org/", &token, "/archive/1", now()), None);
    assert_eq!(decide("http://news.example/", &other, "/archive/1", now()), None);
    assert_eq!(decide("http://news.example/", &token, "/private", now()), None);
    // A reading outside the scope (`/archive/../private` read as `/private`) is not covered.
    assert_eq!(decide("http://news.example/", &token, "/archive/../private", now()), None);
    let expired = parse_expires("2030-01-01T00:00:00Z").unwrap();
    assert_eq!(decide("http://news.example/", &token, "/archive/1", expired), None);
    assert_eq!(set.views(now())[0].uses, 2);
}

#[test]
fn expiry_is_warned_about_once_a_day_from_seven_days_before() {
    let set = Exceptions::new(&[entry(Effect::Allow)]);
    let expires = parse_expires("2030-01-01T00:00:00Z").unwrap();
    let day = Duration::from_secs(86_400);
    assert!(set.warn_expiring(expires - 8 * day).is_empty(), "more than seven days ahead");
    let first = expires - 6 * day;
    assert_eq!(set.warn_expiring(first).len(), 1);
    assert!(set.warn_expiring(first + Duration::from_secs(3600)).is_empty(), "once a day");
    assert_eq!(set.warn_expiring(first + day).len(), 1, "the next day again");
    assert!(set.warn_expiring(expires).is_empty(), "expired: no more warnings");
    assert_eq!(set.expiry_seconds(expires - day), [("x".to_owned(), 86_400)]);
}

#[test]
fn only_an_exception_for_every_path_decides_a_tunnel() {
    let site = Authority::new(robots_proxy_authority::Scheme::Https, "news.example", 443).unwrap();
    let token = ProductToken::new("AcmeBot").unwrap();
    let t = Some(&token);
    let whole = |effect, paths: &[&str]| ExceptionEntry {
        id: format!("{effect:?}{}", paths.join("")),
        paths: paths.iter().map(|p| (*p).to_owned()).collect(),
        ..entry(effect)
    };
    // Some paths only: decides no tunnel, either way.
    let some = Exceptions::new(&[entry(Effect::Allow), entry(Effect::Disallow)]);
    assert!(some.decide_tunnel(&site, Claim::tied(t, None), true, now()).is_none());
    assert!(some.decide_tunnel(&site, Claim::tied(t, None), false, now()).is_none());
    // `/$` is the root only, not every path.
    let root = Exceptions::new(&[whole(Effect::Allow, &["/$"])]);
    assert!(root.decide_tunnel(&site, Claim::tied(t, None), true, now()).is_none());
    // Every path: an allow opens only what robots.txt refuses; a disallow wins.
    let allow = Exceptions::new(&[whole(Effect::Allow, &["/"])]);
    assert!(allow.decide_tunnel(&site, Claim::tied(t, None), false, now()).is_none());
    let v = allow.decide_tunnel(&site, Claim::tied(t, None), true, now()).unwrap();
    assert_eq!(v.effect, Effect::Allow);
    let both = Exceptions::new(&[whole(Effect::Allow, &["/"]), whole(Effect::Disallow, &["*"])]);
    assert_eq!(
        both.decide_tunnel(&site, Claim::tied(t, None), true, now()).unwrap().effect,
        Effect::Disallow
    );
    assert_eq!(both.views(now())[1].uses, 1, "the deciding exception counts a use");
    // Past its expiry it decides nothing.
    let later = now() + Duration::from_secs(400_000_000);
    assert!(allow.decide_tunnel(&site, Claim::tied(t, None), true, later).is_none());
}

#[test]
fn an_allow_needs_a_token_from_credentials_a_disallow_takes_any_claim() {
    let set = Exceptions::new(&[
        entry(Effect::Allow),
        ExceptionEntry {
            id: "ban".into(),
            paths: vec!["/banned/".into()],
            ..entry(Effect::Disallow)
        },
    ]);
    let token = ProductToken::new("AcmeBot").unwrap();
    let site = authority("http://news.example/");
    let decide = |claim: Claim<'_>, path: &str| {
        let r = Readings::of(path);
        let all: Vec<(Reading, &str)> = r.to_decide(true, false).collect();
        set.decide(&site, claim, &all, &all, now()).map(|v| v.id.to_string())
    };
    for origin in [TokenOrigin::Header, TokenOrigin::UserAgent, TokenOrigin::Default] {
        let asserted = Claim { token: Some(&token), origin, user: Some("alice") };
        assert_eq!(decide(asserted, "/archive/1"), None, "{origin:?}: no partner's permission");
        assert_eq!(decide(asserted, "/banned/1").as_deref(), Some("ban"), "{origin:?}");
    }
    let tied = Claim::tied(Some(&token), Some("bob"));
    assert_eq!(decide(tied, "/archive/1").as_deref(), Some("x"));
    assert_eq!(decide(tied, "/banned/1").as_deref(), Some("ban"));
}

#[test]
fn authorities_are_normalised_as_requests_are() {
    let with = |authority: &str| ExceptionEntry {
        authorities: vec![authority.to_owned()],
        ..entry(Effect::Disallow)
    };
    let token = ProductToken::new("AcmeBot").unwrap();
    let hits = |written: &str, url: &str| {
        let set = Exceptions::new(&[with(written)]);
        let r = Readings::of("/archive/1");
        let all: Vec<(Reading, &str)> = r.to_decide(true, false).collect();
        let claim = Claim::asserted(Some(&token), None);
        let site = Authority::from_host_port(robots_proxy_authority::Scheme::Http, url).unwrap();
        set.decide(&site, claim, &all, &[], now()).is_some()
    };
    assert!(hits("localhost.", "localhost:8080"));
    assert!(hits("LOCALHOST", "localhost."));
    assert!(hits("127.1", "127.0.0.1:81"));
    assert!(hits("0x7f.0.0.1:81", "2130706433:81"));
    assert!(!hits("127.1:82", "127.0.0.1:81"));
    assert!(hits("Bücher.example", "xn--bcher-kva.example"));
    assert!(hits("xn--bcher-kva.example", "BÜCHER.example."));
    assert!(hits("*.news.example:8080", "a.news.example:8080"));
    assert!(!hits("*.news.example:8080", "a.news.example"));
    assert!(!hits("*.news.example:8080", "news.example:8080"));
    assert!(hits("*.Bücher.example", "www.xn--bcher-kva.example"));
    for bad in ["*.127.1", "foo.1", "a b", "*.x:0", "host:99999"] {
        let e = with(bad);
        assert_eq!(keys(&[e]), ["exceptions[1].authorities"], "{bad}");
    }
}

#[test]
fn overlaps_are_noted_across_spellings_ports_and_users() {
    let d = |id: &str, authority: &str| ExceptionEntry {
        id: id.into(),
        authorities: vec![authority.into()],
        ..entry(Effect::Disallow)
    };
    let a = |authority: &str| ExceptionEntry {
        authorities: vec![authority.into()],
        ..entry(Effect::Allow)
    };
    let noted = |allow: ExceptionEntry, disallow: ExceptionEntry| {
        describe(&[allow, disallow]).iter().any(|l| l.contains("overlap"))
    };
    assert!(noted(a("news.example:8080"), d("d", "news.example")));
    assert!(noted(a("xn--bcher-kva.example"), d("d", "BÜCHER.example")));
    assert!(!noted(a("news.example:8080"), d("d", "news.example:8081")));
    let users =
        ExceptionEntry { tokens: vec![], users: vec!["team".into()], ..d("u", "news.example") };
    assert!(noted(a("news.example"), users));
}

#[test]
fn a_control_character_in_a_path_is_refused_not_cut_short() {
    let with = |path: &str| ExceptionEntry { paths: vec![path.to_owned()], ..entry(Effect::Allow) };
    assert_eq!(keys(&[with("/ok\u{0}/only-this")]), ["exceptions[1].paths"]);
    assert_eq!(keys(&[with("/ok\t/x")]), ["exceptions[1].paths"]);
    // Compiled anyway (validation bypassed), it is left out rather than widened to `/ok`.
    assert!(Exceptions::new(&[with("/ok\u{0}/only-this")]).is_empty());
}

/// Review-controls 7: what keeps a tunnel an allow exception opened open across a reload: the
/// same id, still an allow, in force, written for the tunnel's site and this claim, for every
/// path.
#[test]
fn a_reload_withdraws_an_allow_by_its_id() {
    let site = Authority::new(robots_proxy_authority::Scheme::Https, "news.example", 443).unwrap();
    let other =
        Authority::new(robots_proxy_authority::Scheme::Https, "other.example", 443).unwrap();
    let acme = ProductToken::new("AcmeBot").unwrap();
    let tied = Claim::tied(Some(&acme), Some("acme"));
    let whole = |effect| ExceptionEntry { paths: vec!["/".into()], ..entry(effect) };
    let loaded = Exceptions::new(&[whole(Effect::Allow)]);
    assert!(loaded.still_grants("x", &site, tied, now()));
    assert!(!loaded.still_grants("x", &other, tied, now()), "narrowed off the site");
    assert!(!loaded.still_grants("y", &site, tied, now()), "another id");
    assert!(!Exceptions::new(&[]).still_grants("x", &site, tied, now()), "removed");
    assert!(!Exceptions::new(&[whole(Effect::Disallow)]).still_grants("x", &site, tied, now()));
    let past =
        ExceptionEntry { expires: Some("2020-01-01T00:00:00Z".into()), ..whole(Effect::Allow) };
    assert!(!Exceptions::new(&[past]).still_grants("x", &site, tied, now()), "expired");
    // Narrowed to some paths, or off this crawler: withdrawn too.
    assert!(!Exceptions::new(&[entry(Effect::Allow)]).still_grants("x", &site, tied, now()));
    let other_bot = ProductToken::new("OtherBot").unwrap();
    let not_tied = Claim::tied(Some(&other_bot), Some("other"));
    assert!(!loaded.still_grants("x", &site, not_tied, now()), "off this crawler");
}
