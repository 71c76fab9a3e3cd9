//! Honouring AI usage preferences for each crawler's purpose.
//!
//! A site says what its content may be used for (`Content-Usage` / `Content-Signal` lines in
//! robots.txt, a `Content-Usage` response header; see [`robots_proxy_engine::usage`]). An organisation
//! says what each of its crawlers fetches for (`[[usage.crawlers]]`: `AcmeTrainer` fetches for
//! `train-ai`). For every purpose a mode says what the gateway does:
//!
//! * `enforce`: a request whose path carries a disallowing preference for one of the crawler's
//!   purposes gets 403 before it leaves; a response whose header disallows it is withheld (403,
//!   body dropped); both audited;
//! * `annotate`: everything passes, and the response carries the effective preference in a
//!   `Content-Usage` header (merged from all sources); the audit log records every response
//!   whose preference is known;
//! * `off`: nothing.
//!
//! An unknown preference means what `usage.unknown` says (default: allowed).

use serde::{Deserialize, Serialize};

use robots_proxy_engine::usage::{Category, Preference, UsagePreferences};
use robots_proxy_engine::ProductToken;

/// What the gateway does about one purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum UsageMode {
    /// Refuse requests and withhold responses that the site's preferences disallow.
    Enforce,
    /// Let everything pass and tell the crawler the effective preference.
    Annotate,
    /// Ignore preferences for this purpose.
    Off,
}

/// What an unknown preference means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum UnknownPreference {
    /// Allowed (the default).
    Allow,
    /// Disallowed: only explicitly allowed content may be used.
    Disallow,
}

/// One crawler and what it fetches for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UsageCrawler {
    /// The crawler's product token (compared case-insensitively).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// Or the authenticated proxy user it runs as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Its purposes: `train-ai`, `ai-use`, `search` (Content Signals labels are accepted too).
    pub purposes: Vec<String>,
}

/// `[usage]`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self", default, deny_unknown_fields)]
pub struct UsageSection {
    /// Mode for the `train-ai` purpose.
    pub train_ai: UsageMode,
    /// Mode for the `ai-use` purpose.
    pub ai_use: UsageMode,
    /// Mode for the `search` purpose.
    pub search: UsageMode,
    /// What an unknown preference means.
    pub unknown: UnknownPreference,
    /// Crawlers and their purposes (configuration file only).
    pub crawlers: Vec<UsageCrawler>,
    /// Whether `X-Robots-Tag: noai` / `noimageai` / `noml` (and a `<meta name="robots">` with
    /// them) count as `train-ai=n`.
    pub x_robots_tag: bool,
    /// Whether the W3C TDM Reservation Protocol (`/.well-known/tdmrep.json`, the
    /// `tdm-reservation` header) is honoured: a reservation counts as `train-ai=n`.
    pub tdmrep: bool,
}

impl Default for UsageSection {
    fn default() -> Self {
        UsageSection {
            train_ai: UsageMode::Enforce,
            ai_use: UsageMode::Enforce,
            search: UsageMode::Enforce,
            unknown: UnknownPreference::Allow,
            crawlers: Vec::new(),
            x_robots_tag: true,
            tdmrep: true,
        }
    }
}

robots_proxy_units::raw_section!(UsageSection, RawUsageSection, "usage");

impl TryFrom<RawUsageSection> for UsageSection {
    type Error = robots_proxy_units::Problems;

    /// The crawlers: each a token or a user, with known purposes.
    fn try_from(raw: RawUsageSection) -> Result<Self, Self::Error> {
        let section = raw.0;
        let problems: robots_proxy_units::Problems = section.problems().into_iter().collect();
        problems.or_build(|| section)
    }
}

impl UsageSection {
    /// Every problem with the crawlers, as (key, message).
    fn problems(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        for (i, c) in self.crawlers.iter().enumerate() {
            if c.token.is_none() == c.user.is_none() {
                out.push((
                    "usage.crawlers",
                    format!("entry {}: give exactly one of token or user", i + 1),
                ));
            }
            if let Some(t) = &c.token {
                if let Err(e) = ProductToken::new(t) {
                    out.push(("usage.crawlers", format!("entry {}: {e}", i + 1)));
                }
            }
            if c.purposes.is_empty() {
                out.push(("usage.crawlers", format!("entry {}: purposes is empty", i + 1)));
            }
            for p in &c.purposes {
                if Category::from_label(p).is_none() {
                    let known: Vec<&str> =
                        robots_proxy_engine::usage::VOCABULARY.iter().map(|(l, _)| *l).collect();
                    out.push((
                        "usage.crawlers",
                        format!(
                            "entry {}: unknown purpose {p:?} (known: {})",
                            i + 1,
                            known.join(", ")
                        ),
                    ));
                }
            }
        }
        out
    }
}

/// The compiled `[usage]` section.
#[derive(Debug, Clone)]
pub struct UsagePolicy {
    modes: [UsageMode; 3],
    unknown: UnknownPreference,
    by_token: Vec<(String, Vec<Category>)>,
    by_user: Vec<(String, Vec<Category>)>,
    x_robots_tag: bool,
    tdmrep: bool,
}

/// A purpose the current request is subject to, with its mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Purpose {
    /// The category.
    pub category: Category,
    /// What to do about it.
    pub mode: UsageMode,
}

/// A preference that stops a request or a response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageBlock {
    /// The purpose it disallows.
    pub category: Category,
    /// `robots.txt line N` or `response header`.
    pub source: String,
    /// The robots.txt line, if it came from robots.txt.
    pub line: Option<u32>,
    /// A sentence for a person.
    pub reason: String,
}

/// Whether a preference that is still unknown is final (see [`UsagePolicy::blocking`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    /// More may be stated: the origin's response head is still to come.
    No,
    /// Nothing more will be stated.
    Yes,
}

impl UsagePolicy {
    /// Compiles the section (assumed validated).
    pub fn new(section: &UsageSection) -> Self {
        let mut by_token = Vec::new();
        let mut by_user = Vec::new();
        for c in &section.crawlers {
            let purposes: Vec<Category> =
                c.purposes.iter().filter_map(|p| Category::from_label(p)).collect();
            if let Some(t) = &c.token {
                by_token.push((t.to_ascii_lowercase(), purposes));
            } else if let Some(u) = &c.user {
                by_user.push((u.clone(), purposes));
            }
        }
        UsagePolicy {
            modes: [section.train_ai, section.ai_use, section.search],
            unknown: section.unknown,
            by_token,
            by_user,
            x_robots_tag: section.x_robots_tag,
            tdmrep: section.tdmrep,
        }
    }

    /// Whether `X-Robots-Tag: noai` counts as `train-ai=n` (`usage.x_robots_tag`).
    pub fn x_robots_tag(&self) -> bool {
        self.x_robots_tag
    }

    /// Whether TDMRep is honoured (`usage.tdmrep`).
    pub fn tdmrep(&self) -> bool {
        self.tdmrep
    }

    /// Whether any crawler has purposes: when not, preferences are never looked at.
    pub fn is_active(&self) -> bool {
        !self.by_token.is_empty() || !self.by_user.is_empty()
    }

    fn mode(&self, category: Category) -> UsageMode {
        match category {
            Category::TrainAi => self.modes[0],
            Category::AiUse => self.modes[1],
            _ => self.modes[2],
        }
    }

    /// The purposes (with modes other than `off`) of the crawler with this token or user.
    pub fn purposes_for(&self, token: Option<&ProductToken>, user: Option<&str>) -> Vec<Purpose> {
        let mut cats: Vec<Category> = Vec::new();
        if let Some(t) = token {
            for (tok, ps) in &self.by_token {
                if tok == t.lowercase() {
                    cats.extend(ps);
                }
            }
        }
        if let Some(u) = user {
            for (name, ps) in &self.by_user {
                if name == u {
                    cats.extend(ps);
                }
            }
        }
        cats.sort();
        cats.dedup();
        cats.into_iter()
            .map(|category| Purpose { category, mode: self.mode(category) })
            .filter(|p| p.mode != UsageMode::Off)
            .collect()
    }

    /// The first enforced purpose that `prefs` disallow. An unknown preference counts as
    /// `usage.unknown` only when `settled`: when nothing more can be learnt (the response head
    /// has been merged in, or the request is a tunnel whose responses cannot be seen). Before
    /// the origin answers, its `Content-Usage` header may still state the preference, so only an
    /// explicit `n` refuses there.
    pub fn blocking(
        &self,
        purposes: &[Purpose],
        prefs: &UsagePreferences,
        settled: Settled,
    ) -> Option<UsageBlock> {
        for p in purposes.iter().filter(|p| p.mode == UsageMode::Enforce) {
            let stated = prefs.get(p.category);
            let disallowed = match stated.preference {
                Preference::Disallow => true,
                Preference::Unknown => {
                    settled == Settled::Yes && self.unknown == UnknownPreference::Disallow
                }
                _ => false,
            };
            if disallowed {
                let source = match (stated.preference, stated.line, stated.from_header) {
                    (Preference::Unknown, _, _) => {
                        "no stated preference (usage.unknown = \"disallow\")".to_owned()
                    }
                    _ if stated.other.is_some() => stated.other.unwrap_or_default().to_owned(),
                    (_, _, true) => "response header".to_owned(),
                    (_, Some(line), _) => format!("robots.txt line {line}"),
                    _ => "robots.txt".to_owned(),
                };
                let reason = format!(
                    "the site's usage preference {}={} ({source}) does not allow this crawler's \
                     purpose {}",
                    p.category.label(),
                    stated.preference.as_str(),
                    p.category.label()
                );
                return Some(UsageBlock {
                    category: p.category,
                    source,
                    line: stated.line,
                    reason,
                });
            }
        }
        None
    }

    /// Whether any purpose is annotated.
    pub fn annotates(purposes: &[Purpose]) -> bool {
        purposes.iter().any(|p| p.mode == UsageMode::Annotate)
    }
}
