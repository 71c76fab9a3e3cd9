//! The disclosed document: every crawler the organisation runs through the gateway, and what
//! the gateway makes it honour, GENERATED from the running configuration (never written by
//! hand). Serialised canonically (fixed field order, no times), its SHA-256 is what the feed
//! compares to decide whether anything disclosed changed.
//!
//! Nothing private goes in: no proxy user (user identities, `users` lists, `[usage]` user
//! entries and report users are left out), no exception id, reference, authority or grantor
//! (exceptions are counted per crawler), no `access` setting, no per-site pace authority
//! (counted), no key file or internal address.

use std::time::{Duration, SystemTime};

use serde::Serialize;

use super::section::{public_range, CrawlerEntry, DisclosureSection, Trigger};
use robots_proxy_decide::usage::{UsageMode, UsageSection};
use robots_proxy_decide::{ExceptionEntry, PolicyMode, PolicySection};
use robots_proxy_identity::{AgentType, SigningSection, TokenPattern};
use robots_proxy_pace::PacingSection;
use robots_proxy_sitefiles::RobotsSection;

/// Where a Web Bot Auth key directory is served under an origin.
const DIRECTORY_PATH: &str = "/.well-known/http-message-signatures-directory";

/// The parts of the running configuration the disclosure is generated from.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    /// `[disclosure]`.
    pub section: &'a DisclosureSection,
    /// `[signing]`: the identities, their agents and keys.
    pub signing: &'a SigningSection,
    /// `[robots]`: cache lifetime, redirects, the unreachable rule.
    pub robots: &'a RobotsSection,
    /// `[policy]`: enforce or report.
    pub policy: &'a PolicySection,
    /// `[pacing]`: Crawl-delay and rates.
    pub pacing: &'a PacingSection,
    /// `[usage]`: purposes, modes, TDMRep and X-Robots-Tag.
    pub usage: &'a UsageSection,
    /// `[[exceptions]]`, counted.
    pub exceptions: &'a [ExceptionEntry],
    /// `[https]`: whether HTTPS paths are decided (intercept) or only the site (tunnel).
    pub https: &'a robots_proxy_net::tls::HttpsSection,
}

/// The published key ids of each configured key name: (name, kid).
pub type KeyIds = Vec<(String, String)>;

/// The whole disclosure.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Document {
    /// Who runs the crawlers.
    pub operator: Operator,
    /// One per crawler.
    pub crawlers: Vec<Crawler>,
}

/// `disclosure.operator`, `operator_url`, `contact`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Operator {
    /// The organisation.
    pub name: String,
    /// Its web site.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Where to write about the crawlers.
    pub contact: String,
}

/// One crawler identity.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Crawler {
    /// The name for people.
    pub name: String,
    /// Its robots.txt product token(s).
    pub product_tokens: Vec<String>,
    /// What it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// A page about it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub about_url: Option<String>,
    /// `crawler` or `fetcher`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trigger: Option<Trigger>,
    /// The User-Agent it sends.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_agent: Option<String>,
    /// What it fetches for (`[usage]`): `train-ai`, `ai-use`, `search`.
    pub purposes: Vec<String>,
    /// The operator's contact.
    pub contact: String,
    /// Its Web Bot Auth identity, when the gateway signs its requests.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signature_agent: Option<SignatureAgent>,
    /// Declared public egress ranges (normalised CIDR).
    pub ip_ranges: Vec<String>,
    /// What the gateway makes it honour.
    pub honours: Honours,
}

/// The `Signature-Agent` of a crawler and its keys.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SignatureAgent {
    /// The `Signature-Agent` member's URL.
    pub url: String,
    /// `directory` or `jwks_uri`.
    #[serde(rename = "type")]
    pub agent_type: &'static str,
    /// The JWK Set's URL.
    pub jwks_uri: String,
    /// The key ids (JWK SHA-256 thumbprints, the directory's `kid`) of its published keys.
    pub key_ids: Vec<String>,
}

/// Everything the gateway enforces on a crawler.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Honours {
    /// robots.txt.
    pub robots_txt: RobotsRules,
    /// Crawl-delay and the pace.
    pub pace: Pace,
    /// AI usage preferences, TDMRep, X-Robots-Tag.
    pub usage: Usage,
    /// Recorded exceptions to robots.txt that apply to it, counted.
    pub exceptions: ExceptionCount,
}

/// How robots.txt is applied.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RobotsRules {
    /// `RFC 9309`.
    pub standard: &'static str,
    /// `enforced` (refused with 403 before the request leaves), `report-only`, or
    /// `partly report-only` (`policy.report_users`: some proxy users' requests, whatever token
    /// they send, are only reported).
    pub enforcement: &'static str,
    /// How many proxy users are report-only (`policy.report_users`), counted, not named.
    pub report_only_users: usize,
    /// How HTTPS requests are decided (`https.mode`): `per-path` (intercepted: every
    /// request, as for plain HTTP), `site-level` (tunnelled: a CONNECT is refused only when
    /// every path of the site is disallowed, the paths inside are not seen) or `refused`.
    pub https: &'static str,
    /// One rule per class of robots.txt answer.
    pub status_rules: Vec<StatusRule>,
    /// The longest a fetched robots.txt is used, in seconds.
    pub cache_max_age_seconds: u64,
    /// The shortest, whatever `Cache-Control` says, in seconds.
    pub cache_min_age_seconds: u64,
    /// How long an unreachable robots.txt means "disallow everything", in seconds.
    pub unreachable_disallow_seconds: u64,
    /// Redirects followed for robots.txt.
    pub max_redirects: u32,
}

/// What one class of robots.txt answer means.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StatusRule {
    /// `2xx`, `3xx`, `4xx`, `429`, `5xx`, `network`.
    pub status: &'static str,
    /// What follows.
    pub rule: String,
}

/// Crawl-delay and rates.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Pace {
    /// Whether the gateway paces requests at all.
    pub enabled: bool,
    /// Whether robots.txt `Crawl-delay` spaces the crawler's requests to a site.
    pub crawl_delay: bool,
    /// The longest Crawl-delay honoured, in seconds (longer ones count as this).
    pub max_crawl_delay_seconds: u64,
    /// Requests per second to one site, all crawlers together; absent: no limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_rps_per_site: Option<f64>,
    /// Requests in flight to one site, all crawlers together; absent: no limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_concurrency_per_site: Option<usize>,
    /// Sites with a pace of their own (counted, not named).
    pub sites_with_own_pace: usize,
}

/// AI usage preferences.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Usage {
    /// Per purpose of the crawler: `enforce`, `annotate` or `off`.
    pub modes: Vec<PurposeMode>,
    /// What an unknown preference means: `allow` or `disallow`.
    pub unknown: &'static str,
    /// Whether a TDMRep reservation counts as `train-ai=n`.
    pub tdmrep: bool,
    /// Whether `X-Robots-Tag: noai` / `noimageai` / `noml` count as `train-ai=n`.
    pub x_robots_tag: bool,
}

/// One purpose and what the gateway does about it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PurposeMode {
    /// `train-ai`, `ai-use`, `search`.
    pub purpose: String,
    /// `enforce`, `annotate`, `off`.
    pub mode: &'static str,
}

/// Exceptions counted by effect, whatever their scope: those naming the crawler's token and
/// those naming proxy users (a user's exception applies whatever token the user sends, so it
/// is counted under every crawler).
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq, Default)]
pub struct ExceptionCount {
    /// Allows past robots.txt in force.
    pub allow: usize,
    /// Prohibitions where robots.txt allows.
    pub disallow: usize,
    /// Of those, how many name proxy users (`users`) rather than only the token.
    pub per_user: usize,
}

impl Honours {
    /// Whether the gateway makes the crawler comply with robots.txt (RFC 9309) on every
    /// request: enforced for every user, every HTTPS path decided, and no allow exception in
    /// force. What the Agent Card's `rfc9309-compliance` says.
    pub(crate) fn rfc9309_compliant(&self) -> bool {
        self.robots_txt.enforcement == "enforced"
            && self.robots_txt.https != "site-level"
            && self.exceptions.allow == 0
    }
}

fn secs(d: Duration) -> u64 {
    d.as_secs()
}

fn mode_name(mode: UsageMode) -> &'static str {
    match mode {
        UsageMode::Enforce => "enforce",
        UsageMode::Annotate => "annotate",
        _ => "off",
    }
}

impl Document {
    /// Generates the document from `inputs` at `now` (exceptions past their expiry are not
    /// counted), with `keys` the key ids of the configured keys that are published at `now`.
    pub fn generate(inputs: &Inputs<'_>, keys: &KeyIds, now: SystemTime) -> Document {
        let section = inputs.section;
        let operator = Operator {
            name: section.operator.clone(),
            url: section.operator_url.clone(),
            contact: section.contact.clone(),
        };
        // The named crawlers: signing identities with a product token, in their order, then
        // the described tokens no identity signs for.
        let mut tokens: Vec<String> = Vec::new();
        for who in &inputs.signing.identities {
            if let Some(TokenPattern::Token(t)) = &who.token {
                if !tokens.iter().any(|k| k.eq_ignore_ascii_case(t.as_str())) {
                    tokens.push(t.as_str().to_owned());
                }
            }
        }
        for entry in &section.crawlers {
            if let Some(t) = &entry.token {
                if !tokens.iter().any(|k| k.eq_ignore_ascii_case(t)) {
                    tokens.push(t.clone());
                }
            }
        }
        let crawlers = tokens.iter().map(|t| crawler(inputs, keys, t, now)).collect();
        Document { operator, crawlers }
    }

    /// The canonical serialisation (the digest's input).
    pub fn canonical(&self) -> Vec<u8> {
        // Strings, numbers, booleans and lists only: serialising cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Hex SHA-256 of [`Document::canonical`].
    pub fn digest(&self) -> String {
        robots_proxy_archive::robots_version::sha256_hex(&self.canonical())
    }
}

/// Hex SHA-256 of one crawler's canonical form (what the feed compares per crawler).
pub(crate) fn crawler_digest(crawler: &Crawler) -> String {
    robots_proxy_archive::robots_version::sha256_hex(
        &serde_json::to_vec(crawler).unwrap_or_default(),
    )
}

fn crawler(inputs: &Inputs<'_>, keys: &KeyIds, token: &str, now: SystemTime) -> Crawler {
    let same = |t: &str| t.eq_ignore_ascii_case(token);
    let entry: Option<&CrawlerEntry> =
        inputs.section.crawlers.iter().find(|c| c.token.as_deref().is_some_and(same));
    let identity = inputs
        .signing
        .identities
        .iter()
        .find(|who| matches!(&who.token, Some(TokenPattern::Token(t)) if same(t.as_str())));
    let signature_agent = identity.map(|who| {
        let url = who.agent.as_str().to_owned();
        let (agent_type, jwks_uri) = match who.agent_type {
            AgentType::JwksUri => ("jwks_uri", url.clone()),
            _ => ("directory", format!("{}{DIRECTORY_PATH}", url.trim_end_matches('/'))),
        };
        let key_ids = who
            .keys
            .iter()
            .filter_map(|name| keys.iter().find(|(n, _)| n == name.as_str()))
            .map(|(_, kid)| kid.clone())
            .collect();
        SignatureAgent { url, agent_type, jwks_uri, key_ids }
    });
    let mut purposes: Vec<String> = Vec::new();
    for c in &inputs.usage.crawlers {
        if c.token.as_deref().is_some_and(same) {
            for p in &c.purposes {
                if let Some(category) = robots_proxy_engine::usage::Category::from_label(p) {
                    let label = category.label().to_owned();
                    if !purposes.contains(&label) {
                        purposes.push(label);
                    }
                }
            }
        }
    }
    let ip_ranges = entry
        .map(|e| e.ip_ranges.iter().filter_map(|r| public_range(r).ok()))
        .into_iter()
        .flatten()
        .map(|n| n.to_string())
        .collect();
    Crawler {
        name: entry.and_then(|e| e.name.clone()).unwrap_or_else(|| token.to_owned()),
        product_tokens: vec![token.to_owned()],
        description: entry.and_then(|e| e.description.clone()),
        about_url: entry.and_then(|e| e.about_url.clone()),
        trigger: entry.and_then(|e| e.trigger),
        user_agent: entry.and_then(|e| e.user_agent.clone()),
        honours: honours(inputs, token, &purposes, now),
        purposes,
        contact: inputs.section.contact.clone(),
        signature_agent,
        ip_ranges,
    }
}

fn honours(inputs: &Inputs<'_>, token: &str, purposes: &[String], now: SystemTime) -> Honours {
    let r = inputs.robots;
    let report = inputs.policy.mode == PolicyMode::Report
        || inputs.policy.report_tokens.iter().any(|t| t.eq_ignore_ascii_case(token));
    let report_only_users = if report { 0 } else { inputs.policy.report_users.len() };
    let hours = |d: Duration| humantime::format_duration(Duration::from_secs(secs(d)));
    let status_rules = vec![
        StatusRule { status: "2xx", rule: "parsed and obeyed".into() },
        StatusRule {
            status: "3xx",
            rule: format!(
                "up to {} redirects followed (across hosts too); more: as 4xx",
                r.max_redirects
            ),
        },
        StatusRule { status: "4xx", rule: "unavailable: everything allowed (429 excepted)".into() },
        StatusRule { status: "429", rule: "unreachable: as 5xx".into() },
        StatusRule {
            status: "5xx",
            rule: format!(
                "unreachable: everything disallowed, or the last fetched copy while it keeps \
                 failing; retried from {} backing off to {}; after {} the last copy, or \
                 everything allowed if there is none",
                hours(r.retry_initial),
                hours(r.retry_max),
                hours(r.give_up_after)
            ),
        },
        StatusRule {
            status: "network",
            rule: "DNS, connection, TLS or timeout failure: as 5xx".into(),
        },
    ];
    let robots_txt = RobotsRules {
        standard: "RFC 9309",
        enforcement: match (report, report_only_users) {
            (true, _) => "report-only",
            (false, 0) => "enforced",
            _ => "partly report-only",
        },
        report_only_users,
        https: match inputs.https.mode {
            robots_proxy_net::tls::HttpsMode::Intercept => "per-path",
            robots_proxy_net::tls::HttpsMode::Tunnel => "site-level",
            robots_proxy_net::tls::HttpsMode::Reject => "refused",
        },
        status_rules,
        cache_max_age_seconds: secs(r.max_age),
        cache_min_age_seconds: secs(r.min_age),
        unreachable_disallow_seconds: secs(r.give_up_after),
        max_redirects: r.max_redirects,
    };
    let p = inputs.pacing;
    let pace = Pace {
        enabled: p.enabled,
        crawl_delay: p.enabled && p.obey_crawl_delay,
        max_crawl_delay_seconds: secs(p.max_crawl_delay),
        max_rps_per_site: (p.enabled && p.default_rps > 0.0).then_some(p.default_rps),
        max_concurrency_per_site: (p.enabled && p.default_concurrency > 0)
            .then_some(p.default_concurrency),
        sites_with_own_pace: if p.enabled { p.sites.len() } else { 0 },
    };
    let u = inputs.usage;
    let modes = purposes
        .iter()
        .map(|purpose| {
            let mode = match purpose.as_str() {
                "train-ai" => u.train_ai,
                "ai-use" => u.ai_use,
                _ => u.search,
            };
            PurposeMode { purpose: purpose.clone(), mode: mode_name(mode) }
        })
        .collect();
    let usage = Usage {
        modes,
        unknown: match u.unknown {
            robots_proxy_decide::usage::UnknownPreference::Disallow => "disallow",
            _ => "allow",
        },
        tdmrep: u.tdmrep,
        x_robots_tag: u.x_robots_tag,
    };
    let mut exceptions = ExceptionCount::default();
    for e in inputs.exceptions {
        // An exception applies to a request whose token it names or whose user it names
        // (whatever token that user sends): counted under every crawler in the second case.
        let applies = e.tokens.iter().any(|t| t.eq_ignore_ascii_case(token)) || !e.users.is_empty();
        let expired = e
            .expires
            .as_deref()
            .and_then(|t| robots_proxy_decide::exceptions::parse_expires(t).ok())
            .is_some_and(|t| t <= now);
        if applies && !expired {
            match e.effect {
                robots_proxy_decide::exceptions::Effect::Allow => exceptions.allow += 1,
                _ => exceptions.disallow += 1,
            }
            if !e.users.is_empty() {
                exceptions.per_user += 1;
            }
        }
    }
    Honours { robots_txt, pace, usage, exceptions }
}

impl Crawler {
    /// The rules as sentences, for people (the HTML page and the feed).
    pub fn sentences(&self) -> Vec<String> {
        let h = &self.honours;
        let r = &h.robots_txt;
        let mut out = Vec::new();
        let dur = |s: u64| humantime::format_duration(Duration::from_secs(s)).to_string();
        out.push(match r.enforcement {
            "enforced" => "robots.txt (RFC 9309) is enforced by the gateway: a disallowed \
                           request is refused before it leaves, on the path as written and on \
                           every reading an origin server may give it."
                .to_owned(),
            "partly report-only" => format!(
                "robots.txt (RFC 9309) is enforced by the gateway, EXCEPT for {} proxy user(s) \
                 whose requests, whatever product token they send, are evaluated and reported \
                 but NOT refused (report-only): requests of this crawler may fetch disallowed \
                 paths.",
                r.report_only_users
            ),
            _ => "robots.txt (RFC 9309) is evaluated and reported, but NOT enforced for this \
                  crawler (report-only)."
                .to_owned(),
        });
        out.push(match r.https {
            "site-level" => "HTTPS requests are tunnelled without being read: robots.txt is \
                             applied to the site only (a site whose rules disallow every path \
                             is refused), NOT to the paths inside, which may be disallowed ones."
                .to_owned(),
            "refused" => "HTTPS requests are refused by the gateway.".to_owned(),
            _ => "HTTPS requests are decided one by one, as plain HTTP ones.".to_owned(),
        });
        for rule in &r.status_rules {
            out.push(format!("robots.txt answered {}: {}.", rule.status, rule.rule));
        }
        out.push(format!(
            "A fetched robots.txt is used for at most {} (Cache-Control may shorten it, to no \
             less than {}).",
            dur(r.cache_max_age_seconds),
            dur(r.cache_min_age_seconds)
        ));
        let p = &h.pace;
        if !p.enabled {
            out.push("The gateway does not pace this crawler's requests.".to_owned());
        } else {
            out.push(if p.crawl_delay {
                format!(
                    "Crawl-delay is obeyed per site (longer delays count as {}).",
                    dur(p.max_crawl_delay_seconds)
                )
            } else {
                "Crawl-delay is not obeyed.".to_owned()
            });
            if let Some(rps) = p.max_rps_per_site {
                out.push(format!("At most {rps} requests per second to one site."));
            }
            if let Some(c) = p.max_concurrency_per_site {
                out.push(format!("At most {c} requests in flight to one site."));
            }
            if p.sites_with_own_pace > 0 {
                out.push(format!("{} sites have a pace of their own.", p.sites_with_own_pace));
            }
        }
        let u = &h.usage;
        if u.modes.is_empty() {
            out.push("No AI usage purpose is declared for this crawler.".to_owned());
        }
        for m in &u.modes {
            out.push(format!(
                "Usage preferences (Content-Usage, Content-Signal) for {}: {}; unknown means {}.",
                m.purpose, m.mode, u.unknown
            ));
        }
        if u.modes.iter().any(|m| m.purpose == "train-ai") {
            out.push(format!(
                "TDMRep reservations {} as train-ai=n; X-Robots-Tag noai/noimageai/noml {}.",
                if u.tdmrep { "count" } else { "do not count" },
                if u.x_robots_tag { "count" } else { "do not count" }
            ));
        }
        let e = h.exceptions;
        out.push(format!(
            "Recorded exceptions to robots.txt in force: {} allowing, {} disallowing{}.",
            e.allow,
            e.disallow,
            if e.per_user > 0 {
                format!(
                    " ({} of them for proxy users, applying whatever product token they send)",
                    e.per_user
                )
            } else {
                String::new()
            }
        ));
        if !h.rfc9309_compliant() {
            out.push(
                "So the gateway does NOT claim RFC 9309 compliance for this crawler \
                 (rfc9309-compliance: false in its Agent Card)."
                    .to_owned(),
            );
        }
        out
    }
}
