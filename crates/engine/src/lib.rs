//! The robots.txt engine: parse once, decide many times. Pure: no I/O, no clock, no async.
//!
//! [`RobotsTxt::parse`] reads a body (RFC 9309 as interpreted by Google and by the project's
//! `shared/spec/README.md`) into an immutable, `Send + Sync` compiled form. [`RobotsTxt::decide`]
//! answers, for a product token and a path, whether the path may be crawled and why.
//!
//! ```
//! use robots_proxy_engine::{ProductToken, RobotsTxt, Verdict};
//!
//! let robots = RobotsTxt::parse(b"User-agent: *\nDisallow: /private\nAllow: /private/ok\n");
//! let bot = ProductToken::new("ExampleBot").unwrap();
//! let d = robots.decide(Some(&bot), "/private/x");
//! assert_eq!(d.verdict(), Verdict::Disallow);
//! assert_eq!(d.rule().map(|r| r.line()), Some(2));
//! assert!(robots.decide(Some(&bot), "/private/ok").is_allowed());
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

mod build;
mod fold;
mod index;
pub mod normalize;
pub mod optout;
mod parse;
mod pattern;
mod token;
pub mod usage;

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;
use std::time::Duration;

pub use fold::fold_case;
pub use parse::MAX_LINE_BYTES;
pub use token::{InvalidToken, ProductToken};

use build::Builder;
use index::PrefixIndex;
use pattern::PatternShape;

/// The least a crawler must parse (RFC 9309 §2.5: "at least 500 kibibytes"). Limits below this
/// are raised to it.
pub const MIN_SIZE_LIMIT: usize = 500 * 1024;

/// A parsed and compiled robots.txt. Immutable; share it through `Arc`.
pub struct RobotsTxt {
    rules: Vec<Rule>,
    /// The rules with their patterns read decoded ([`normalize::decode_pattern`]), index for
    /// index; empty when no pattern changes that way (most files).
    decoded_rules: Vec<Rule>,
    groups: Vec<Group>,
    rule_sets: Vec<RuleSet>,
    /// (lookup key, lower-cased product token) → index into `rule_sets`, sorted by key then
    /// token (see [`token::lookup_key`]).
    by_token: Vec<(u64, Box<[u8]>, u32)>,
    /// The rule set for `*`, if the file has a `*` group.
    any: Option<u32>,
    sitemaps: Vec<Sitemap>,
    parsed_bytes: usize,
    ignored_bytes: usize,
    /// Whether the origin that served the file reads paths case-insensitively (see
    /// [`RobotsTxt::with_case_insensitive_origin`]).
    case_insensitive_origin: bool,
    /// Whether some `Content-Usage` / `Content-Signal` path reads differently decoded: known
    /// when the file is compiled, asked on every request that has usage purposes.
    decoded_usage: bool,
    /// The case-folded indexes, built on first use ([`RobotsTxt::decide_folded`]).
    folded: fold::Folded,
}

/// Whether a rule allows or disallows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RuleKind {
    /// `allow:`
    Allow,
    /// `disallow:`
    Disallow,
}

/// One `allow` or `disallow` line of a group.
#[derive(Debug, Clone)]
pub struct Rule {
    kind: RuleKind,
    /// The pattern in canonical percent-encoded form (see [`normalize::normalize_pattern`]).
    pattern: Box<str>,
    line: u32,
    group: u32,
    shape: PatternShape,
    /// The pattern's length in octets, its priority: the canonical form with a middle `$`
    /// counted as written, one octet (see [`normalize::normalize_pattern_into`]).
    priority: u32,
}

impl Rule {
    /// `Allow` or `Disallow`.
    pub fn kind(&self) -> RuleKind {
        self.kind
    }

    /// The pattern, in canonical percent-encoded form.
    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    /// The 1-based line number of the rule in the robots.txt body.
    pub fn line(&self) -> u32 {
        self.line
    }

    /// Whether `path` (path and query, any encoding) matches this rule's pattern.
    pub fn matches(&self, path: &str) -> bool {
        let path = canonical_path(path);
        pattern::matches(self.pattern.as_bytes(), self.shape, path.as_bytes())
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            RuleKind::Allow => "allow",
            RuleKind::Disallow => "disallow",
        };
        write!(f, "{kind}: {}", self.pattern)
    }
}

/// A `user-agent` line, as written.
#[derive(Debug, Clone)]
pub struct UserAgentLine {
    value: Box<str>,
    line: u32,
}

impl UserAgentLine {
    /// The value after `user-agent:` (lossily decoded as UTF-8).
    pub fn value(&self) -> &str {
        &self.value
    }
    /// The 1-based line number.
    pub fn line(&self) -> u32 {
        self.line
    }
}

/// A `crawl-delay` value of a group.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CrawlDelay {
    seconds: f64,
    line: u32,
}

impl CrawlDelay {
    /// The delay in seconds, as written (may be fractional).
    pub fn seconds(&self) -> f64 {
        self.seconds
    }
    /// The delay as a `Duration` (saturating for absurd values).
    pub fn duration(&self) -> Duration {
        Duration::try_from_secs_f64(self.seconds).unwrap_or(Duration::MAX)
    }
    /// The 1-based line number.
    pub fn line(&self) -> u32 {
        self.line
    }
}

/// A group: one or more `user-agent` lines and the rules that follow them.
#[derive(Debug, Clone)]
pub struct Group {
    user_agents: Vec<UserAgentLine>,
    rules: Range<u32>,
    crawl_delay: Option<CrawlDelay>,
    usage: Vec<usage::UsageRule>,
}

impl Group {
    /// The group's `user-agent` lines.
    pub fn user_agents(&self) -> &[UserAgentLine] {
        &self.user_agents
    }
    /// The group's `Content-Usage` and `Content-Signal` lines.
    pub fn usage_rules(&self) -> &[usage::UsageRule] {
        &self.usage
    }
    /// The group's `crawl-delay`, if it has one (the first valid one).
    pub fn crawl_delay(&self) -> Option<CrawlDelay> {
        self.crawl_delay
    }
}

/// A `sitemap` line.
#[derive(Debug, Clone)]
pub struct Sitemap {
    url: Box<str>,
    line: u32,
}

impl Sitemap {
    /// The URL, as written.
    pub fn url(&self) -> &str {
        &self.url
    }
    /// The 1-based line number.
    pub fn line(&self) -> u32 {
        self.line
    }
}

/// The merged rules of all groups that name one product token (or `*`).
#[derive(Debug)]
struct RuleSet {
    groups: Vec<u32>,
    index: PrefixIndex,
    /// The index over the decoded patterns, when one of the set's patterns changes decoded.
    decoded: Option<PrefixIndex>,
    allow_rules: usize,
    disallows_root: bool,
}

/// Allowed or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// The path may be crawled.
    Allow,
    /// The path must not be crawled.
    Disallow,
}

/// Why a [`Decision`] came out the way it did.
#[derive(Debug, Clone, Copy)]
pub enum Reason<'r> {
    /// No group applies to the token and there is no `*` group: everything is allowed.
    NoGroupApplies,
    /// Groups apply, but none of their rules matches the path.
    NoRuleMatched,
    /// The path is `/robots.txt`, which is always allowed (RFC 9309 §2.2.2).
    RobotsTxt,
    /// The longest matching rule decided.
    Rule(&'r Rule),
    /// The matcher's work budget for one decision was spent before the path was decided
    /// (a file of very many wildcard rules against a very long path): refused on the safe
    /// side, without naming a rule, since none was seen to match (review-core N5).
    OverBudget,
}

impl Reason<'_> {
    /// The reason in a sentence, for a decision whose verdict was `allowed`: the one wording
    /// the proxy's refusals, `evidence` and the admin pages share.
    pub fn explain(&self, allowed: bool) -> String {
        match self {
            Reason::Rule(rule) => {
                let verb = if allowed { "allowed" } else { "disallowed" };
                format!("{verb} by robots.txt line {}: {rule}", rule.line())
            }
            Reason::NoRuleMatched => "allowed: no rule in the applicable group matches".to_owned(),
            Reason::NoGroupApplies => "allowed: no group in robots.txt applies".to_owned(),
            Reason::RobotsTxt => "/robots.txt is always allowed".to_owned(),
            Reason::OverBudget => "disallowed: the path is too long to match against this \
                                   robots.txt's wildcard rules within the work one decision may \
                                   take (no rule named: none was seen to match)"
                .to_owned(),
        }
    }
}

/// The answer for one (product token, path): the verdict and why.
#[derive(Clone, Copy)]
pub struct Decision<'r> {
    verdict: Verdict,
    reason: Reason<'r>,
    robots: &'r RobotsTxt,
    rule_set: Option<u32>,
    /// The name (an index of `by_token`) that chose `rule_set`; `None` when the `*` groups
    /// apply.
    name: Option<u32>,
}

impl<'r> Decision<'r> {
    /// `Allow` or `Disallow`.
    pub fn verdict(&self) -> Verdict {
        self.verdict
    }
    /// Whether the verdict is `Allow`.
    pub fn is_allowed(&self) -> bool {
        self.verdict == Verdict::Allow
    }
    /// Why.
    pub fn reason(&self) -> Reason<'r> {
        self.reason
    }
    /// The deciding rule, if a rule decided.
    pub fn rule(&self) -> Option<&'r Rule> {
        match self.reason {
            Reason::Rule(rule) => Some(rule),
            _ => None,
        }
    }
    /// The groups that applied (merged), in file order; empty when none applies.
    pub fn groups(&self) -> impl Iterator<Item = &'r Group> + 'r {
        let robots = self.robots;
        let ids: &'r [u32] = match self.rule_set {
            Some(s) => &robots.rule_sets[s as usize].groups,
            None => &[],
        };
        ids.iter().map(move |&g| &robots.groups[g as usize])
    }
    /// The `user-agent` line of the group that decided (the deciding rule's group, or else the
    /// first group that applied) that named the crawler: the line whose name is the crawler's
    /// token, or the `*` line when the `*` groups apply (review-core N11); the group's first
    /// line only when none says more.
    pub fn user_agent_line(&self) -> Option<&'r UserAgentLine> {
        let group = match self.reason {
            Reason::Rule(rule) => Some(&self.robots.groups[rule.group as usize]),
            _ => self.groups().next(),
        }?;
        let name = self.name.and_then(|i| self.robots.by_token.get(i as usize)).map(|t| &*t.1);
        let names = |line: &UserAgentLine| {
            let value = line.value.as_bytes();
            match (parse::agent_name(value), name) {
                (parse::AgentName::Any, None) => true,
                (parse::AgentName::Token(t), Some(n)) => {
                    *t == *n || parse::full_agent_name(value).is_some_and(|f| *f == *n)
                }
                _ => false,
            }
        };
        group.user_agents.iter().find(|l| names(l)).or_else(|| group.user_agents.first())
    }
}

impl fmt::Debug for Decision<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Decision")
            .field("verdict", &self.verdict)
            .field("reason", &self.reason)
            .field("user_agent_line", &self.user_agent_line().map(|u| (&u.value, u.line)))
            .finish()
    }
}

/// A path and query in the form a pattern read as `reading` is matched against: canonical
/// ([`canonical_path`]), and letters folded for the case-folded reading. Every rule source
/// that matches path patterns brings the request's readings here.
pub fn path_as(path: &str, reading: usage::PatternReading) -> Cow<'_, str> {
    let canonical = canonical_path(path);
    match reading {
        usage::PatternReading::Folded => Cow::Owned(fold::fold_case(&canonical)),
        _ => canonical,
    }
}

/// Brings a path and query into the form patterns are matched against (canonical, `*` and `$`
/// encoded: see [`normalize::normalize_path_for_matching_into`]), borrowing when it already is.
fn canonical_path(path: &str) -> Cow<'_, str> {
    if path.starts_with('/') && normalize::is_canonical_path_for_matching(path.as_bytes()) {
        return Cow::Borrowed(path);
    }
    let mut out = Vec::with_capacity(path.len() + 8);
    if !path.starts_with('/') {
        out.push(b'/');
    }
    normalize::normalize_path_for_matching_into(path.as_bytes(), &mut out);
    Cow::Owned(String::from_utf8(out).unwrap_or_default())
}

/// Whether a canonical path is exactly `/robots.txt`, without a query: the one path robots.txt
/// never disallows (`shared/spec/README.md`, "Matching a URL"). `/robots.txt?x` is another URL
/// that the rules decide.
fn is_robots_txt(path: &[u8]) -> bool {
    path == b"/robots.txt"
}

/// Whether `path` (a path and query in any percent-encoding) is exactly `/robots.txt`, which is
/// always allowed, whatever robots.txt says or whether it could be fetched.
pub fn is_robots_txt_path(path: &str) -> bool {
    is_robots_txt(canonical_path(path).as_bytes())
}

impl RobotsTxt {
    /// Parses a body with the default size limit ([`MIN_SIZE_LIMIT`]). Never fails: what cannot
    /// be read is skipped.
    pub fn parse(body: &[u8]) -> Self {
        Self::parse_with_limit(body, MIN_SIZE_LIMIT)
    }

    /// Parses at most `limit` bytes of `body` (never less than [`MIN_SIZE_LIMIT`]); the rest is
    /// ignored. A line cut by the limit is ignored as a whole, so a rule is never shortened.
    pub fn parse_with_limit(body: &[u8], limit: usize) -> Self {
        let limit = limit.max(MIN_SIZE_LIMIT);
        let mut taken = body;
        if body.len() > limit {
            taken = &body[..limit];
            // Drop the partial last line, unless the cut fell exactly on a line end.
            if !matches!(body[limit], b'\n' | b'\r') && !matches!(taken.last(), Some(b'\n' | b'\r'))
            {
                let end = memchr::memrchr2(b'\n', b'\r', taken).map_or(0, |p| p + 1);
                taken = &taken[..end];
            }
        }
        let mut robots = Builder::default().build(taken);
        robots.parsed_bytes = taken.len();
        robots.ignored_bytes = body.len() - taken.len();
        robots
    }

    /// Decides whether `token` (or, with `None`, a crawler without a token of its own) may crawl
    /// `path`: the path and query of the URL (`/a/b?c=d`), in any percent-encoding.
    ///
    /// The path is normalised as `shared/spec/README.md` says ("Matching a URL") and otherwise
    /// matched as written, octet for octet like Google: `//a` does not start with `/a`, and
    /// dot-segments are not resolved. A proxy also decides on the readings an origin may apply.
    pub fn decide(&self, token: Option<&ProductToken>, path: &str) -> Decision<'_> {
        self.decide_against(token, path, false)
    }

    /// [`RobotsTxt::decide`] against the patterns read as an origin that percent-decodes reads
    /// a path: `%XX` of a reserved character decoded (`Disallow: /wiki/Special%3ARandom` holds
    /// `/wiki/Special:Random`, `/a%2Fb` holds `/a/b`). For a path read decoded (the proxy's
    /// readings other than the path as sent); the path as sent is matched by
    /// [`RobotsTxt::decide`], octet for octet like Google. The deciding rule is reported as
    /// written.
    pub fn decide_decoded(&self, token: Option<&ProductToken>, path: &str) -> Decision<'_> {
        self.decide_against(token, path, true)
    }

    /// Whether some pattern reads differently decoded, so that [`RobotsTxt::decide_decoded`]
    /// can differ from [`RobotsTxt::decide`] on the same path.
    pub fn has_decoded_patterns(&self) -> bool {
        !self.decoded_rules.is_empty()
    }

    fn decide_against(
        &self,
        token: Option<&ProductToken>,
        path: &str,
        decoded: bool,
    ) -> Decision<'_> {
        let (rule_set, name) = self.lookup(token);
        let path = canonical_path(path);
        if is_robots_txt(path.as_bytes()) {
            return Decision {
                verdict: Verdict::Allow,
                reason: Reason::RobotsTxt,
                robots: self,
                rule_set,
                name,
            };
        }
        let Some(set) = rule_set else {
            return Decision {
                verdict: Verdict::Allow,
                reason: Reason::NoGroupApplies,
                robots: self,
                rule_set,
                name,
            };
        };
        let set = &self.rule_sets[set as usize];
        let index = match &set.decoded {
            Some(d) if decoded => d,
            _ => &set.index,
        };
        let best = index.longest_match(path.as_bytes());
        match best {
            Some(best) if best.assumed => Decision {
                verdict: Verdict::Disallow,
                reason: Reason::OverBudget,
                robots: self,
                rule_set,
                name,
            },
            Some(best) => {
                let rule = &self.rules[best.rule as usize];
                let verdict = match rule.kind {
                    RuleKind::Allow => Verdict::Allow,
                    RuleKind::Disallow => Verdict::Disallow,
                };
                Decision { verdict, reason: Reason::Rule(rule), robots: self, rule_set, name }
            }
            None => Decision {
                verdict: Verdict::Allow,
                reason: Reason::NoRuleMatched,
                robots: self,
                rule_set,
                name,
            },
        }
    }

    /// Every rule of the applying groups that matches `path`, longest first (allow before
    /// disallow on equal length): what `check --explain` shows. Allocates; not for the hot path.
    pub fn matching_rules(&self, token: Option<&ProductToken>, path: &str) -> Vec<&Rule> {
        let Some(set) = self.rule_set_for(token) else { return Vec::new() };
        let path = canonical_path(path);
        let mut out: Vec<&Rule> = self.rule_sets[set as usize]
            .groups
            .iter()
            .flat_map(|&g| {
                let r = &self.groups[g as usize].rules;
                &self.rules[r.start as usize..r.end as usize]
            })
            .filter(|rule| pattern::matches(rule.pattern.as_bytes(), rule.shape, path.as_bytes()))
            .collect();
        out.sort_by_key(|r| (std::cmp::Reverse(r.priority), r.kind != RuleKind::Allow, r.line));
        out
    }

    /// The groups that apply to `token` (its own, merged, or else `*`), in file order.
    pub fn groups_for(&self, token: Option<&ProductToken>) -> Vec<&Group> {
        match self.rule_set_for(token) {
            Some(s) => self.rule_sets[s as usize]
                .groups
                .iter()
                .map(|&g| &self.groups[g as usize])
                .collect(),
            None => Vec::new(),
        }
    }

    /// The AI usage preferences that apply to `token` for `path` (path and query, any
    /// encoding): the `Content-Usage` / `Content-Signal` rules of its groups with the longest
    /// matching path, combined most restrictive first. A path that may not be crawled has no
    /// preferences (all unknown): allow/disallow alone decide it.
    pub fn usage(&self, token: Option<&ProductToken>, path: &str) -> usage::UsagePreferences {
        self.usage_as(token, path, usage::PatternReading::AsWritten)
    }

    /// [`RobotsTxt::usage`] for one reading of the path, as allow/disallow decide it: the
    /// patterns read decoded for a reading an origin decodes ([`RobotsTxt::decide_decoded`]),
    /// and decoded with letters folded for the case-folded reading
    /// ([`RobotsTxt::decide_folded`]).
    pub fn usage_as(
        &self,
        token: Option<&ProductToken>,
        path: &str,
        reading: usage::PatternReading,
    ) -> usage::UsagePreferences {
        let allowed = match reading {
            usage::PatternReading::AsWritten => self.decide(token, path),
            usage::PatternReading::Decoded => self.decide_decoded(token, path),
            usage::PatternReading::Folded => self.decide_folded(token, path),
        };
        if !allowed.is_allowed() {
            return usage::UsagePreferences::default();
        }
        let groups = self.groups_for(token);
        if groups.iter().all(|g| g.usage.is_empty()) {
            return usage::UsagePreferences::default();
        }
        let path = path_as(path, reading);
        usage::decide_as(groups.iter().flat_map(|g| g.usage.iter()), path.as_bytes(), reading)
    }

    /// Whether some `Content-Usage` / `Content-Signal` path reads differently decoded, so that
    /// [`RobotsTxt::usage_as`] can differ between the path as sent and its decoded reading.
    pub fn has_decoded_usage_patterns(&self) -> bool {
        self.decoded_usage
    }

    /// The usage preferences that hold on every path for `token` (see [`usage::everywhere`]),
    /// for a request whose path cannot be seen (a CONNECT tunnel). A site whose rules disallow
    /// everything states none.
    pub fn usage_everywhere(&self, token: Option<&ProductToken>) -> usage::UsagePreferences {
        let groups = self.groups_for(token);
        usage::everywhere(groups.iter().flat_map(|g| g.usage.iter()))
    }

    /// The `crawl-delay` that applies to `token`: the first one among its groups.
    pub fn crawl_delay(&self, token: Option<&ProductToken>) -> Option<CrawlDelay> {
        self.groups_for(token).into_iter().find_map(|g| g.crawl_delay)
    }

    /// Whether `token` may crawl nothing at all on this site: its rules hold a disallow of
    /// every path (`/`, `*` or `/*`) and no allow rule. Used where paths cannot be seen (a
    /// CONNECT tunnel); `/robots.txt` itself is not counted.
    pub fn disallows_everything(&self, token: Option<&ProductToken>) -> bool {
        self.rule_set_for(token)
            .map(|s| &self.rule_sets[s as usize])
            .is_some_and(|s| s.disallows_root && s.allow_rules == 0)
    }

    /// All groups, in file order.
    pub fn groups(&self) -> &[Group] {
        &self.groups
    }

    /// The rules of `group`, in file order.
    pub fn rules_of<'a>(&'a self, group: &'a Group) -> &'a [Rule] {
        &self.rules[group.rules.start as usize..group.rules.end as usize]
    }

    /// The `sitemap` lines, in file order.
    pub fn sitemaps(&self) -> &[Sitemap] {
        &self.sitemaps
    }

    /// How many bytes of the body were parsed.
    pub fn parsed_bytes(&self) -> usize {
        self.parsed_bytes
    }

    /// How many bytes past the size limit were ignored.
    pub fn ignored_bytes(&self) -> usize {
        self.ignored_bytes
    }

    /// The memory held by this compiled form, in bytes (what the cache weighs it by): the value
    /// itself and every allocation it owns, by capacity. The case-folded indexes
    /// ([`RobotsTxt::decide_folded`]) are built later, on first use, and not counted.
    pub fn heap_size(&self) -> usize {
        fn vec<T>(v: &Vec<T>) -> usize {
            v.capacity() * std::mem::size_of::<T>()
        }
        let rules =
            |rules: &Vec<Rule>| vec(rules) + rules.iter().map(|r| r.pattern.len()).sum::<usize>();
        let groups: usize = vec(&self.groups)
            + self
                .groups
                .iter()
                .map(|g| {
                    vec(&g.user_agents)
                        + g.user_agents.iter().map(|u| u.value.len()).sum::<usize>()
                        + vec(&g.usage)
                        + g.usage.iter().map(usage::UsageRule::heap_size).sum::<usize>()
                })
                .sum::<usize>();
        let sets: usize = vec(&self.rule_sets)
            + self
                .rule_sets
                .iter()
                .map(|s| {
                    vec(&s.groups)
                        + s.index.heap_size()
                        + s.decoded.as_ref().map_or(0, PrefixIndex::heap_size)
                })
                .sum::<usize>();
        let tokens =
            vec(&self.by_token) + self.by_token.iter().map(|(_, t, _)| t.len()).sum::<usize>();
        let sitemaps =
            vec(&self.sitemaps) + self.sitemaps.iter().map(|s| s.url.len()).sum::<usize>();
        std::mem::size_of::<Self>()
            + rules(&self.rules)
            + rules(&self.decoded_rules)
            + groups
            + sets
            + tokens
            + sitemaps
    }

    fn rule_set_for(&self, token: Option<&ProductToken>) -> Option<u32> {
        self.lookup(token).0
    }

    /// The rule set that applies to `token`, and the name (an index of `by_token`) that chose
    /// it; `(any, None)` when no group names the token.
    fn lookup(&self, token: Option<&ProductToken>) -> (Option<u32>, Option<u32>) {
        if let Some(token) = token {
            let (key, bytes) = (token.lookup_key(), token.lowercase().as_bytes());
            let found = self.by_token.binary_search_by(|(k, t, _)| {
                k.cmp(&key).then_with(|| {
                    if t.len() <= 8 {
                        t.len().cmp(&bytes.len())
                    } else {
                        (**t).cmp(bytes)
                    }
                })
            });
            if let Ok(i) = found {
                return (Some(self.by_token[i].2), Some(i as u32));
            }
        }
        (self.any, None)
    }
}

impl fmt::Debug for RobotsTxt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RobotsTxt")
            .field("groups", &self.groups.len())
            .field("rules", &self.rules.len())
            .field("sitemaps", &self.sitemaps.len())
            .field("parsed_bytes", &self.parsed_bytes)
            .finish()
    }
}

#[cfg(test)]
mod tests;
