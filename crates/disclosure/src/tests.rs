//! Unit tests of the disclosure: generation from the sections, the feed's rules, the card.

use std::time::{Duration, SystemTime};

use super::*;
use robots_proxy_decide::usage::UsageSection;
use robots_proxy_decide::{ExceptionEntry, PolicySection};
use robots_proxy_pace::PacingSection;
use robots_proxy_sitefiles::RobotsSection;

fn exception(id: &str, effect: &str, expires: &str) -> ExceptionEntry {
    toml::from_str(&format!(
        "id = \"{id}\"\nauthorities = [\"secret.example\"]\ntokens = [\"examplebot\"]\n\
         effect = \"{effect}\"\nreference = \"https://legal.example/{id}\"\n\
         granted_by = \"someone\"\nexpires = \"{expires}\"\n"
    ))
    .unwrap()
}

struct Sections {
    section: DisclosureSection,
    signing: SigningSection,
    robots: RobotsSection,
    policy: PolicySection,
    pacing: PacingSection,
    usage: UsageSection,
    exceptions: Vec<ExceptionEntry>,
    https: robots_proxy_net::tls::HttpsSection,
}

impl Sections {
    fn new() -> Sections {
        let signing: SigningSection = toml::from_str(
            r#"
            keys = [{ name = "k1" }]
            identities = [
              { token = "ExampleBot", keys = ["k1"], agent = "https://bots.example.com" },
              { user = "hidden-user", keys = ["k1"], agent = "https://bots.example.com" },
              { token = "*", keys = ["k1"], agent = "https://any.example.com" },
            ]
            "#,
        )
        .unwrap();
        let section: DisclosureSection = toml::from_str(
            r#"
            enabled = true
            operator = "Example Org"
            contact = "mailto:crawlers@example.com"
            public_url = "https://bots.example.com"
            feed_entries = 2
            crawlers = [{ token = "OtherBot", name = "Other", ip_ranges = ["2001:db8::/32"] }]
            "#,
        )
        .unwrap();
        Sections {
            section,
            signing,
            robots: RobotsSection::default(),
            policy: PolicySection::default(),
            pacing: PacingSection::default(),
            usage: UsageSection::default(),
            exceptions: vec![
                exception("a", "allow", "2099-01-01T00:00:00Z"),
                exception("d", "disallow", "2099-01-01T00:00:00Z"),
                exception("old", "allow", "2001-01-01T00:00:00Z"),
            ],
            https: robots_proxy_net::tls::HttpsSection::default(),
        }
    }

    fn inputs(&self) -> Inputs<'_> {
        Inputs {
            section: &self.section,
            signing: &self.signing,
            robots: &self.robots,
            policy: &self.policy,
            pacing: &self.pacing,
            usage: &self.usage,
            exceptions: &self.exceptions,
            https: &self.https,
        }
    }
}

fn keys() -> KeyIds {
    vec![("k1".into(), "kid-1".into())]
}

#[test]
fn the_document_lists_token_identities_then_described_tokens_and_counts_exceptions() {
    let s = Sections::new();
    let doc = Document::generate(&s.inputs(), &keys(), SystemTime::now());
    let names: Vec<&str> = doc.crawlers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["ExampleBot", "Other"]);
    let bot = &doc.crawlers[0];
    assert_eq!(bot.signature_agent.as_ref().unwrap().key_ids, ["kid-1"]);
    assert_eq!(
        bot.signature_agent.as_ref().unwrap().jwks_uri,
        "https://bots.example.com/.well-known/http-message-signatures-directory"
    );
    // The expired allow is not counted.
    assert_eq!(
        bot.honours.exceptions,
        document::ExceptionCount { allow: 1, disallow: 1, per_user: 0 }
    );
    assert!(doc.crawlers[1].signature_agent.is_none());
    let text = String::from_utf8(doc.canonical()).unwrap();
    for private in ["hidden-user", "secret.example", "legal.example", "someone", "any.example"] {
        assert!(!text.contains(private), "{private} in {text}");
    }
}

#[test]
fn report_mode_is_disclosed_and_the_card_claims_no_compliance() {
    let mut s = Sections::new();
    s.policy.report_tokens = vec!["examplebot".into()];
    let doc = Document::generate(&s.inputs(), &keys(), SystemTime::now());
    assert_eq!(doc.crawlers[0].honours.robots_txt.enforcement, "report-only");
    assert_eq!(doc.crawlers[1].honours.robots_txt.enforcement, "enforced");
    let card = card::card(&doc.crawlers[0], "https://bots.example.com");
    assert_eq!(card["web_bot_auth"]["rfc9309-compliance"], false);
    assert_eq!(card["client_id"], "https://bots.example.com/crawlers/ExampleBot.json");
    let card = card::card(&doc.crawlers[1], "https://bots.example.com");
    assert_eq!(card["web_bot_auth"]["rfc9309-compliance"], true);
    assert_eq!(
        card["web_bot_auth"]["ips_uri"],
        "https://bots.example.com/crawlers/OtherBot/ips.json"
    );
}

/// Issue 41 (review findings 5, 6): report-only users, an exception scoped to users and
/// tunnelled HTTPS each let the crawler fetch disallowed paths; the disclosure says so per
/// crawler and the card withholds `rfc9309-compliance`.
#[test]
fn report_users_user_exceptions_and_tunnel_mode_are_disclosed_and_withhold_compliance() {
    let compliance = |s: &Sections| {
        let doc = Document::generate(&s.inputs(), &keys(), SystemTime::now());
        let card = card::card(&doc.crawlers[0], "https://bots.example.com");
        (doc, card["web_bot_auth"]["rfc9309-compliance"].clone())
    };
    let mut s = Sections::new();
    s.exceptions.retain(|e| e.effect != robots_proxy_decide::exceptions::Effect::Allow);
    let (doc, claimed) = compliance(&s);
    assert_eq!(claimed, true, "enforced, no allow exception: compliant");
    assert_eq!(doc.crawlers[0].honours.robots_txt.https, "per-path");

    let mut report = Sections::new();
    report.exceptions.clear();
    report.policy.report_users = vec!["bob".into()];
    let (doc, claimed) = compliance(&report);
    for crawler in &doc.crawlers {
        let r = &crawler.honours.robots_txt;
        assert_eq!((r.enforcement, r.report_only_users), ("partly report-only", 1));
    }
    assert_eq!(claimed, false);
    assert!(doc.crawlers[0].sentences()[0].contains("EXCEPT for 1 proxy user"));
    assert!(!String::from_utf8(doc.canonical()).unwrap().contains("bob"), "not named");

    let mut users = Sections::new();
    users.exceptions = vec![toml::from_str(
        "id = \"alice\"\nauthorities = [\"a.example\"]\nusers = [\"alice\"]\n\
         effect = \"allow\"\nexpires = \"2099-01-01T00:00:00Z\"\n",
    )
    .unwrap()];
    let (doc, claimed) = compliance(&users);
    let every = document::ExceptionCount { allow: 1, disallow: 0, per_user: 1 };
    for crawler in &doc.crawlers {
        assert_eq!(crawler.honours.exceptions, every, "{}", crawler.name);
    }
    assert_eq!(claimed, false);

    let mut tunnel = Sections::new();
    tunnel.exceptions.clear();
    tunnel.https.mode = robots_proxy_net::tls::HttpsMode::Tunnel;
    let (doc, claimed) = compliance(&tunnel);
    assert_eq!(doc.crawlers[0].honours.robots_txt.https, "site-level");
    assert!(doc.crawlers[0].sentences().iter().any(|s| s.contains("NOT to the paths inside")));
    assert_eq!(claimed, false);
}

#[test]
fn the_feed_adds_an_entry_only_on_change_keeps_a_bounded_number_and_survives_a_reload() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("disclosure/feed.json");
    let mut s = Sections::new();
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let mut feed = Feed::load(&path);
    let doc = Document::generate(&s.inputs(), &keys(), t0);
    assert!(feed.record(&doc, t0, 2));
    assert!(!feed.record(&doc, t0 + Duration::from_secs(60), 2), "same document: no entry");
    feed.save(&path).unwrap();
    assert_eq!(Feed::load(&path), feed, "kept across a restart");

    s.robots.max_age = Duration::from_secs(3600);
    let doc = Document::generate(&s.inputs(), &keys(), t0);
    assert!(feed.record(&doc, t0 + Duration::from_secs(120), 2));
    assert_eq!(feed.entries[0].summary, "Crawlers changed: ExampleBot, Other.");
    s.section.crawlers.clear();
    let doc = Document::generate(&s.inputs(), &keys(), t0);
    assert!(feed.record(&doc, t0 + Duration::from_secs(180), 2));
    assert_eq!(feed.entries[0].summary, "Crawlers removed: Other.");
    assert_eq!(feed.entries.len(), 2, "feed_entries bounds the feed");
    assert_eq!(feed.entries[0].seq, 3);
    let atom = feed.atom("https://bots.example.com", "Example <Org>");
    assert!(atom.contains("<id>tag:bots.example.com,2027-01-15:crawlers/3</id>"), "{atom}");
    assert!(atom.contains("Example &lt;Org&gt;"), "{atom}");
    assert_eq!(atom.matches("<entry>").count(), 2);
}

#[test]
fn a_disabled_disclosure_answers_nothing_and_an_enabled_one_its_paths() {
    use robots_proxy_identity::directory::Pages;
    let dir = tempfile::tempdir().unwrap();
    let mut s = Sections::new();
    // No keys configured: nothing to read.
    s.signing.keys.clear();
    for who in &mut s.signing.identities {
        who.keys.clear();
    }
    let disclosure = Disclosure::open(dir.path());
    let now = SystemTime::now();
    let ask = |path: &str| {
        disclosure.answer(&Method::GET, path, &HeaderMap::new(), now).map(|r| r.status().as_u16())
    };
    assert_eq!(ask("/crawlers"), None);
    assert!(disclosure.update(&s.inputs(), dir.path(), now).unwrap());
    for path in ["/crawlers", "/crawlers.json", "/crawlers.atom", "/crawlers/otherbot.json"] {
        assert_eq!(ask(path), Some(200), "{path}");
    }
    assert_eq!(ask("/crawlers/otherbot/ips.json"), Some(200));
    assert_eq!(ask("/crawlers/nobody.json"), None);
    assert_eq!(ask("/.well-known/http-message-signatures-directory"), None);
    assert!(!disclosure.update(&s.inputs(), dir.path(), now).unwrap(), "unchanged");
    s.section.enabled = false;
    assert!(!disclosure.update(&s.inputs(), dir.path(), now).unwrap());
    assert_eq!(ask("/crawlers"), None);
}

/// Issue 42 (L5): a control character in an operator string (accepted by `config check`) is
/// shown as text in the Atom feed, which stays well-formed XML: no character XML 1.0 forbids.
#[test]
fn the_feed_carries_no_character_xml_forbids() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("disclosure/feed.json");
    let s = Sections::new();
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let mut feed = Feed::load(&path);
    let doc = Document::generate(&s.inputs(), &keys(), t0);
    assert!(feed.record(&doc, t0, 2));
    let atom = feed.atom("https://bots.example.com", "Acme \u{1b}[2J\u{7} \u{ffff}Org");
    let forbidden = |c: char| matches!(c, '\u{0}'..='\u{8}' | '\u{b}' | '\u{c}' | '\u{e}'..='\u{1f}' | '\u{fffe}' | '\u{ffff}');
    assert!(!atom.chars().any(forbidden), "{atom:?}");
    assert!(atom.contains("<name>Acme \\x1b[2J\\x07 \\uffffOrg</name>"), "{atom}");
}

/// Issue 41 (review finding 9): a control character in a crawler `name` is kept in the
/// persisted feed entries (`feed.json`); the feed written from them after a restart, and after
/// the name is fixed, is still well-formed: the escape is applied at the sink
/// (`robots_proxy_output::markup`), not when the entry is stored.
#[test]
fn a_crawler_name_with_control_characters_never_breaks_the_persisted_feed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("disclosure/feed.json");
    let mut s = Sections::new();
    s.section.crawlers[0].name = Some("Signed\u{7}Bot\u{b}".into());
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let mut feed = Feed::load(&path);
    assert!(feed.record(&Document::generate(&s.inputs(), &keys(), t0), t0, 5));
    feed.save(&path).unwrap();
    let mut feed = Feed::load(&path);
    assert!(feed.entries.iter().any(|e| e.summary.contains('\u{7}')), "stored as it was");
    s.section.crawlers[0].name = Some("SignedBot".into());
    let t1 = t0 + Duration::from_secs(60);
    assert!(feed.record(&Document::generate(&s.inputs(), &keys(), t1), t1, 5));
    let atom = feed.atom("https://bots.example.com", "Example Org");
    let forbidden = |c: char| matches!(c, '\u{0}'..='\u{8}' | '\u{b}' | '\u{c}' | '\u{e}'..='\u{1f}' | '\u{fffe}' | '\u{ffff}');
    assert!(!atom.chars().any(forbidden), "{atom:?}");
    assert!(atom.contains("Signed\\x07Bot\\x0b"), "{atom}");
}

/// Issue 41 (review finding 12): a key whose `publish_until` passes and an exception that
/// expires reach `/crawlers.json` (and the feed) at once, without a reload.
#[test]
fn key_retirement_and_exception_expiry_are_disclosed_without_a_reload() {
    use robots_proxy_identity::directory::Pages;
    use robots_proxy_identity::keys::{KeyName, SigningKey};
    let dir = tempfile::tempdir().unwrap();
    let name: KeyName = "k1".parse().unwrap();
    let kid = SigningKey::create(&name, &name.file_in(&dir.path().join("keys")))
        .unwrap()
        .keyid()
        .to_owned();
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_900_000_000);
    let at = |d: u64| humantime::format_rfc3339_seconds(t0 + Duration::from_secs(d)).to_string();
    let mut s = Sections::new();
    s.signing.keys = vec![toml::from_str(&format!(
        "name = \"k1\"\nsign_until = \"{}\"\npublish_until = \"{}\"",
        at(60),
        at(3600)
    ))
    .unwrap()];
    s.exceptions = vec![exception("a", "allow", &at(7200))];
    let disclosure = Disclosure::open(dir.path());
    assert!(disclosure.update(&s.inputs(), dir.path(), t0).unwrap());
    let json = |now: SystemTime| {
        let resp = disclosure.answer(&Method::GET, "/crawlers.json", &HeaderMap::new(), now);
        let body = resp.unwrap().into_body();
        let bytes = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(http_body_util::BodyExt::collect(body))
            .unwrap()
            .to_bytes();
        serde_json::from_slice::<serde_json::Value>(&bytes).unwrap()
    };
    let bot = |v: &serde_json::Value| v["crawlers"][0].clone();
    let first = json(t0);
    assert_eq!(bot(&first)["signature_agent"]["key_ids"], serde_json::json!([kid]));
    assert_eq!(bot(&first)["honours"]["exceptions"]["allow"], 1);
    let retired = json(t0 + Duration::from_secs(3601));
    assert_eq!(bot(&retired)["signature_agent"]["key_ids"], serde_json::json!([]));
    assert_eq!(bot(&retired)["honours"]["exceptions"]["allow"], 1);
    let expired = json(t0 + Duration::from_secs(7201));
    assert_eq!(bot(&expired)["honours"]["exceptions"]["allow"], 0);
    let entries = disclosure.entries();
    assert_eq!(entries.len(), 2, "feed_entries = 2 bounds it");
    assert!(entries.iter().all(|e| e.summary.starts_with("Crawlers changed")), "{entries:?}");
}
