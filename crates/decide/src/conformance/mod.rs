//! The conformance kit (issue 38, item 9): every rule source runs through every bypass family
//! of `shared/spec/README.md`, as a property.
//!
//! * A **rule source** is an entry of [`SOURCES`]: how it writes "refuse the paths matching
//!   `P` to the training crawler `T`" into a [`Site`] (a robots.txt line, a `tdmrep.json`
//!   rule, a response header, an HTML `<meta>`, an `[[exceptions]]` entry), which family
//!   applies to it ([`Support`], said for each one: never a silent skip), and what refuses
//!   ([`Ground`], for the privileges that may lift it).
//! * A **family** is a file of this directory, one property over every entry of [`SOURCES`]:
//!   [`Family::Readings`] (`readings.rs`), [`Family::Authority`] (`authority.rs`),
//!   [`Family::Provenance`] (`provenance.rs`), [`Family::Codings`] (`codings.rs`),
//!   [`Family::OversizeBody`] and [`Family::LongRequest`] (`sizes.rs`).
//! * The **harness** (`harness.rs`) serves the site through the real robots store
//!   ([`robots_proxy_sitefiles::RobotsCache`], with a fetcher that answers from memory through the
//!   production decoder and parser) and decides each request as the proxy's pipeline does
//!   (`proxy::pipeline`, `Exchange::run`): the token and its provenance from the request's headers, the
//!   one decision ([`super::decide`]) with the exceptions, report-only mode, the usage
//!   preferences, `tdmrep.json` and the response's opt-outs.
//!
//! A new rule source is covered by adding it to [`SOURCES`], and its non-applicable families to
//! [`NOT_APPLICABLE`] (docs/testing.md, "The conformance kit").

mod authority;
mod codings;
mod harness;
mod provenance;
mod readings;
mod sizes;

pub(super) use harness::{Ask, Coding, Site, Who};

/// The training crawler every rule is written for.
pub(super) const TOKEN: &str = "TrainBot";

/// A bypass family of `shared/spec/README.md`: a way a request or a site's bytes may say the
/// same thing differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Family {
    /// Every reading of the path an origin applies ("What the proxy decides on").
    Readings,
    /// Every spelling of the same authority ("Fetching and caching robots.txt").
    Authority,
    /// A token asserted by the client against one known from credentials (`policy::claim`).
    Provenance,
    /// The same file in every content and transfer coding, BOM, line end and chunking the
    /// fetcher accepts ("Parsing: encoding").
    Codings,
    /// Files of many rules, up to and past their size limit ("Parsing: size").
    OversizeBody,
    /// Very long paths and very long tokens in the request.
    LongRequest,
}

impl Family {
    /// Every family.
    pub(super) const ALL: [Family; 6] = [
        Family::Readings,
        Family::Authority,
        Family::Provenance,
        Family::Codings,
        Family::OversizeBody,
        Family::LongRequest,
    ];
}

/// Whether a family applies to a source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Support {
    /// The family's property runs on the source.
    Applies,
    /// It does not, and why (the table in docs/testing.md).
    NotApplicable(&'static str),
}

/// What a source's refusal is, for the privileges that lift refusals ([`PRIVILEGES`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ground {
    /// robots.txt's allow/disallow.
    Robots,
    /// A usage preference (`train-ai=n`, from any source).
    Usage,
    /// A disallow exception.
    Exception,
}

/// The documented decision for a rule file or field of hostile size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Limit {
    /// Read up to this many bytes; what is past them is ignored (a line cut there too).
    Prefix(usize),
    /// A file over this many bytes is ignored as a whole.
    Whole(usize),
    /// Read whole (a header field, bounded by the HTTP parser's own limits; configuration).
    Unbounded,
}

/// Which ports of a host a rule covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ports {
    /// The port of the authority the file was fetched from (a site's own file).
    Fetched,
    /// As the rule names the site: `host` any port, `host:port` that one (configuration).
    AsWritten,
}

/// One rule source of the decision.
pub(super) trait RuleSource: Sync {
    /// Its name in failures and in docs/testing.md.
    fn name(&self) -> &'static str;
    /// What its refusal is.
    fn ground(&self) -> Ground;
    /// Whether `family` applies to it.
    fn support(&self, family: Family) -> Support;
    /// Which ports of the host its rule covers.
    fn ports(&self) -> Ports {
        Ports::Fetched
    }
    /// What happens to its rules in a large file or field (spec README, "Parsing: size").
    fn limit(&self) -> Limit;
    /// Writes into `site` the rule "refuse the paths matching `pattern` to the crawler
    /// `token`", as this source writes it (a source without paths refuses every path).
    fn refuse(&self, site: &mut Site, pattern: &str, token: &str);
}

/// `Disallow: P` in the crawler's robots.txt group.
struct RobotsDisallow;
/// `Content-Usage: P train-ai=n` in the crawler's robots.txt group (draft-ietf-aipref-attach).
struct ContentUsage;
/// A reserving `tdmrep.json` rule for `P` (W3C TDMRep).
struct TdmrepJson;
/// `X-Robots-Tag: T: noai` on the response.
struct XRobotsTag;
/// `<meta name="T" content="noai">` in the HTML head of the response.
struct MetaRobots;
/// A disallow `[[exceptions]]` entry for `T` at the site with the path `P`.
struct ExceptionDisallow;
/// `Content-Signal: ai-train=no` in the crawler's robots.txt group (Cloudflare's Content
/// Signals).
struct ContentSignal;
/// `Content-Usage: train-ai=n` on the response (draft-ietf-aipref-attach).
struct ContentUsageHeader;
/// `tdm-reservation: 1` on the response (TDMRep).
struct TdmReservationHeader;
/// `<meta name="tdm-reservation" content="1">` in the HTML head of the response (TDMRep).
struct MetaTdmReservation;

/// Every rule source. A new one is covered by every family once it is here.
pub(super) static SOURCES: &[&dyn RuleSource] = &[
    &RobotsDisallow,
    &ContentUsage,
    &ContentSignal,
    &TdmrepJson,
    &ContentUsageHeader,
    &TdmReservationHeader,
    &XRobotsTag,
    &MetaRobots,
    &MetaTdmReservation,
    &ExceptionDisallow,
];

const NO_PATH: &str = "it states no path: it is the response's own and holds for every path";
const GROUP_WIDE: &str = "it states no path: it holds for every path its group's rules allow";
const THE_RESPONSE: &str =
    "it comes with the response of the authority asked, whatever its spelling";
const NO_BODY: &str = "it is a header (or configuration), not a body: no coding applies";
const CONFIGURATION: &str =
    "it is the operator's configuration, validated at load, not a site's bytes";

/// The (source, family) pairs that do not apply, as docs/testing.md lists them.
pub(super) const NOT_APPLICABLE: &[(&str, Family)] = &[
    ("Content-Signal", Family::Readings),
    ("Content-Usage header", Family::Readings),
    ("Content-Usage header", Family::Authority),
    ("Content-Usage header", Family::Codings),
    ("tdm-reservation header", Family::Readings),
    ("tdm-reservation header", Family::Authority),
    ("tdm-reservation header", Family::Codings),
    ("X-Robots-Tag", Family::Readings),
    ("X-Robots-Tag", Family::Authority),
    ("X-Robots-Tag", Family::Codings),
    ("meta robots", Family::Readings),
    ("meta robots", Family::Authority),
    ("meta tdm-reservation", Family::Readings),
    ("meta tdm-reservation", Family::Authority),
    ("exception", Family::Codings),
    ("exception", Family::OversizeBody),
];

impl RuleSource for RobotsDisallow {
    fn limit(&self) -> Limit {
        Limit::Prefix(harness::robots_limit())
    }
    fn name(&self) -> &'static str {
        "robots.txt"
    }
    fn ground(&self) -> Ground {
        Ground::Robots
    }
    fn support(&self, _: Family) -> Support {
        Support::Applies
    }
    fn refuse(&self, site: &mut Site, pattern: &str, token: &str) {
        site.robots.push_str(&format!("User-agent: {token}\nDisallow: {pattern}\n"));
    }
}

impl RuleSource for ContentUsage {
    fn limit(&self) -> Limit {
        Limit::Prefix(harness::robots_limit())
    }
    fn name(&self) -> &'static str {
        "Content-Usage"
    }
    fn ground(&self) -> Ground {
        Ground::Usage
    }
    fn support(&self, _: Family) -> Support {
        Support::Applies
    }
    fn refuse(&self, site: &mut Site, pattern: &str, token: &str) {
        site.robots.push_str(&format!(
            "User-agent: {token}\nAllow: /\nContent-Usage: {pattern} train-ai=n\n"
        ));
    }
}

impl RuleSource for TdmrepJson {
    fn limit(&self) -> Limit {
        Limit::Whole(robots_proxy_sitefiles::wellknown::TDMREP_MAX_BYTES)
    }
    fn name(&self) -> &'static str {
        "tdmrep.json"
    }
    fn ground(&self) -> Ground {
        Ground::Usage
    }
    fn support(&self, _: Family) -> Support {
        Support::Applies
    }
    fn refuse(&self, site: &mut Site, pattern: &str, _token: &str) {
        let location = serde_json::Value::from(pattern);
        site.tdmrep.push(format!(r#"{{"location": {location}, "tdm-reservation": 1}}"#));
    }
}

impl RuleSource for XRobotsTag {
    fn limit(&self) -> Limit {
        Limit::Unbounded
    }
    fn name(&self) -> &'static str {
        "X-Robots-Tag"
    }
    fn ground(&self) -> Ground {
        Ground::Usage
    }
    fn support(&self, family: Family) -> Support {
        header_support(family)
    }
    fn refuse(&self, site: &mut Site, _pattern: &str, token: &str) {
        site.headers.push(("x-robots-tag", format!("{token}: noai")));
    }
}

impl RuleSource for MetaRobots {
    fn limit(&self) -> Limit {
        Limit::Prefix(harness::META_PREFIX_BYTES)
    }
    fn name(&self) -> &'static str {
        "meta robots"
    }
    fn ground(&self) -> Ground {
        Ground::Usage
    }
    fn support(&self, family: Family) -> Support {
        match family {
            Family::Readings => Support::NotApplicable(NO_PATH),
            Family::Authority => Support::NotApplicable(THE_RESPONSE),
            Family::Provenance | Family::Codings | Family::OversizeBody | Family::LongRequest => {
                Support::Applies
            }
        }
    }
    fn refuse(&self, site: &mut Site, _pattern: &str, token: &str) {
        site.meta.push(format!(r#"<meta name="{token}" content="noai">"#));
    }
}

impl RuleSource for ExceptionDisallow {
    fn ports(&self) -> Ports {
        Ports::AsWritten
    }
    fn limit(&self) -> Limit {
        Limit::Unbounded
    }
    fn name(&self) -> &'static str {
        "exception"
    }
    fn ground(&self) -> Ground {
        Ground::Exception
    }
    fn support(&self, family: Family) -> Support {
        match family {
            Family::Codings => Support::NotApplicable(NO_BODY),
            Family::OversizeBody => Support::NotApplicable(CONFIGURATION),
            Family::Readings | Family::Authority | Family::Provenance | Family::LongRequest => {
                Support::Applies
            }
        }
    }
    fn refuse(&self, site: &mut Site, pattern: &str, token: &str) {
        let entry = harness::exception(super::exceptions::Effect::Disallow, site, token, pattern);
        site.exceptions.push(entry);
    }
}

/// A loosening of enforcement granted to a token: it must follow only a token known from
/// credentials, never the same token asserted (`policy::claim`).
pub(super) struct Privilege {
    /// Its name in failures.
    pub(super) name: &'static str,
    /// Grants it to `token` on `site`.
    pub(super) grant: fn(&mut Site, &str),
    /// The refusals it lifts for the entitled crawler.
    pub(super) lifts: &'static [Ground],
}

/// Every privilege a token can be granted.
pub(super) static PRIVILEGES: &[Privilege] = &[
    Privilege {
        name: "policy.report_tokens",
        grant: |site, token| site.report_tokens.push(token.to_owned()),
        // Report-only mode reports every refusal on policy grounds, a disallow exception's too.
        lifts: &[Ground::Robots, Ground::Usage, Ground::Exception],
    },
    Privilege {
        name: "allow exception",
        grant: |site, token| {
            let allow = harness::exception(super::exceptions::Effect::Allow, site, token, "/");
            site.exceptions.push(allow);
        },
        // A disallow exception wins over every allow.
        lifts: &[Ground::Robots],
    },
    Privilege {
        name: "usage lift (exception usage = [\"train-ai\"])",
        grant: |site, token| {
            let mut lift = harness::exception(super::exceptions::Effect::Allow, site, token, "/");
            lift.id = "lift".into();
            lift.usage = vec!["train-ai".into()];
            site.exceptions.push(lift);
        },
        lifts: &[Ground::Robots, Ground::Usage],
    },
];

/// The sources `family` applies to.
pub(super) fn sources_for(family: Family) -> impl Iterator<Item = &'static dyn RuleSource> {
    SOURCES.iter().copied().filter(move |s| s.support(family) == Support::Applies)
}

/// The source named `name`.
pub(super) fn source(name: &str) -> &'static dyn RuleSource {
    *SOURCES.iter().find(|s| s.name() == name).expect("a source of SOURCES")
}

#[test]
fn the_pairs_that_do_not_apply_are_the_documented_table() {
    let found: Vec<(&str, Family, &str)> = SOURCES
        .iter()
        .flat_map(|s| Family::ALL.iter().map(move |f| (s, *f)))
        .filter_map(|(s, f)| match s.support(f) {
            Support::NotApplicable(why) => Some((s.name(), f, why)),
            Support::Applies => None,
        })
        .collect();
    let pairs: Vec<(&str, Family)> = found.iter().map(|(s, f, _)| (*s, *f)).collect();
    assert_eq!(pairs, NOT_APPLICABLE);
    // docs/testing.md shows the same table, with the same reasons.
    let doc = include_str!("../../../../docs/testing.md");
    for (source, family, why) in &found {
        let row = format!("| {source} | {family:?} | {why} |");
        assert!(doc.contains(&row), "docs/testing.md lacks the row {row:?}");
    }
    let rows = doc
        .lines()
        .filter(|l| Family::ALL.iter().any(|f| l.contains(&format!(" | {f:?} | it "))))
        .count();
    assert_eq!(rows, found.len(), "docs/testing.md has rows no source declares");
    // Every family runs on some source, and the names are unique.
    for family in Family::ALL {
        assert!(sources_for(family).next().is_some(), "{family:?} runs on no source");
    }
    let mut names: Vec<&str> = SOURCES.iter().map(|s| s.name()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), SOURCES.len());
}

/// How a response header source answers the families: no path, no body, the response's own.
fn header_support(family: Family) -> Support {
    match family {
        Family::Readings => Support::NotApplicable(NO_PATH),
        Family::Authority => Support::NotApplicable(THE_RESPONSE),
        Family::Codings => Support::NotApplicable(NO_BODY),
        Family::Provenance | Family::OversizeBody | Family::LongRequest => Support::Applies,
    }
}

impl RuleSource for ContentSignal {
    fn name(&self) -> &'static str {
        "Content-Signal"
    }
    fn ground(&self) -> Ground {
        Ground::Usage
    }
    fn limit(&self) -> Limit {
        Limit::Prefix(harness::robots_limit())
    }
    fn support(&self, family: Family) -> Support {
        match family {
            Family::Readings => Support::NotApplicable(GROUP_WIDE),
            _ => Support::Applies,
        }
    }
    fn refuse(&self, site: &mut Site, _pattern: &str, token: &str) {
        site.robots
            .push_str(&format!("User-agent: {token}\nAllow: /\nContent-Signal: ai-train=no\n"));
    }
}

impl RuleSource for ContentUsageHeader {
    fn name(&self) -> &'static str {
        "Content-Usage header"
    }
    fn ground(&self) -> Ground {
        Ground::Usage
    }
    fn limit(&self) -> Limit {
        Limit::Unbounded
    }
    fn support(&self, family: Family) -> Support {
        header_support(family)
    }
    fn refuse(&self, site: &mut Site, _pattern: &str, _token: &str) {
        site.headers.push(("content-usage", "train-ai=n".into()));
    }
}

impl RuleSource for TdmReservationHeader {
    fn name(&self) -> &'static str {
        "tdm-reservation header"
    }
    fn ground(&self) -> Ground {
        Ground::Usage
    }
    fn limit(&self) -> Limit {
        Limit::Unbounded
    }
    fn support(&self, family: Family) -> Support {
        header_support(family)
    }
    fn refuse(&self, site: &mut Site, _pattern: &str, _token: &str) {
        site.headers.push(("tdm-reservation", "1".into()));
    }
}

impl RuleSource for MetaTdmReservation {
    fn name(&self) -> &'static str {
        "meta tdm-reservation"
    }
    fn ground(&self) -> Ground {
        Ground::Usage
    }
    fn limit(&self) -> Limit {
        Limit::Prefix(harness::META_PREFIX_BYTES)
    }
    fn support(&self, family: Family) -> Support {
        MetaRobots.support(family)
    }
    fn refuse(&self, site: &mut Site, _pattern: &str, _token: &str) {
        site.meta.push(r#"<meta name="tdm-reservation" content="1">"#.into());
    }
}
