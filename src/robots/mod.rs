//! The robots.txt engine: parse once, decide many times. Pure: no I/O, no clock, no async.
//!
//! [`RobotsTxt::parse`] reads a body (RFC 9309 as interpreted by Google and by the project's
//! `shared/spec/README.md`) into an immutable, `Send + Sync` compiled form. [`RobotsTxt::decide`]
//! answers, for a product token and a path, whether the path may be crawled and why.
//!
//! ```
//! use robots_proxy::robots::{ProductToken, RobotsTxt, Verdict};
//!
//! let robots = RobotsTxt::parse(b"User-agent: *\nDisallow: /private\nAllow: /private/ok\n");
//! let bot = ProductToken::new("ExampleBot").unwrap();
//! let d = robots.decide(Some(&bot), "/private/x");
//! assert_eq!(d.verdict(), Verdict::Disallow);
//! assert_eq!(d.rule().map(|r| r.line()), Some(2));
//! assert!(robots.decide(Some(&bot), "/private/ok").is_allowed());
//! ```

mod index;
pub mod normalize;
mod parse;
mod pattern;
mod token;
pub mod usage;

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::time::Duration;

pub use parse::MAX_LINE_BYTES;
pub use token::{InvalidToken, ProductToken};

use index::PrefixIndex;
use parse::{AgentName, Field};
use pattern::PatternShape;

/// The least a crawler must parse (RFC 9309 §2.5: "at least 500 kibibytes"). Limits below this
/// are raised to it.
pub const MIN_SIZE_LIMIT: usize = 500 * 1024;

/// A parsed and compiled robots.txt. Immutable; share it through `Arc`.
pub struct RobotsTxt {
    rules: Vec<Rule>,
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
    allow_rules: usize,
    disallows_root: bool,
}

/// Allowed or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Verdict {
    /// The path may be crawled.
    Allow,
    /// The path must not be crawled.
    Disallow,
}

/// Why a [`Decision`] came out the way it did.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Reason<'r> {
    /// No group applies to the token and there is no `*` group: everything is allowed.
    NoGroupApplies,
    /// Groups apply, but none of their rules matches the path.
    NoRuleMatched,
    /// The path is `/robots.txt`, which is always allowed (RFC 9309 §2.2.2).
    RobotsTxt,
    /// The longest matching rule decided.
    Rule(&'r Rule),
}

/// The answer for one (product token, path): the verdict and why.
#[derive(Clone, Copy)]
pub struct Decision<'r> {
    verdict: Verdict,
    reason: Reason<'r>,
    robots: &'r RobotsTxt,
    rule_set: Option<u32>,
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
    /// The `user-agent` line of the group that decided: the deciding rule's group, or else the
    /// first group that applied.
    pub fn user_agent_line(&self) -> Option<&'r UserAgentLine> {
        let group = match self.reason {
            Reason::Rule(rule) => Some(&self.robots.groups[rule.group as usize]),
            _ => self.groups().next(),
        };
        group.and_then(|g| g.user_agents.first())
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
        let rule_set = self.rule_set_for(token);
        let path = canonical_path(path);
        if is_robots_txt(path.as_bytes()) {
            return Decision {
                verdict: Verdict::Allow,
                reason: Reason::RobotsTxt,
                robots: self,
                rule_set,
            };
        }
        let Some(set) = rule_set else {
            return Decision {
                verdict: Verdict::Allow,
                reason: Reason::NoGroupApplies,
                robots: self,
                rule_set,
            };
        };
        let best = self.rule_sets[set as usize].index.longest_match(path.as_bytes());
        match best {
            Some(best) => {
                let rule = &self.rules[best.rule as usize];
                let verdict = match rule.kind {
                    RuleKind::Allow => Verdict::Allow,
                    RuleKind::Disallow => Verdict::Disallow,
                };
                Decision { verdict, reason: Reason::Rule(rule), robots: self, rule_set }
            }
            None => Decision {
                verdict: Verdict::Allow,
                reason: Reason::NoRuleMatched,
                robots: self,
                rule_set,
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
        out.sort_by_key(|r| {
            (std::cmp::Reverse(r.pattern.len()), r.kind != RuleKind::Allow, r.line)
        });
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
        if !self.decide(token, path).is_allowed() {
            return usage::UsagePreferences::default();
        }
        let groups = self.groups_for(token);
        if groups.iter().all(|g| g.usage.is_empty()) {
            return usage::UsagePreferences::default();
        }
        let path = canonical_path(path);
        usage::decide(groups.iter().flat_map(|g| g.usage.iter()), path.as_bytes())
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

    /// Approximate memory held by this compiled form, in bytes (for cache weighing).
    pub fn heap_size(&self) -> usize {
        let rules: usize =
            self.rules.iter().map(|r| std::mem::size_of::<Rule>() + r.pattern.len()).sum();
        let groups: usize = self
            .groups
            .iter()
            .map(|g| {
                std::mem::size_of::<Group>()
                    + g.user_agents.iter().map(|u| 32 + u.value.len()).sum::<usize>()
            })
            .sum();
        let sets: usize = self.rule_sets.iter().map(|s| 64 + s.index.heap_size()).sum();
        let tokens: usize = self.by_token.iter().map(|(_, t, _)| 32 + t.len()).sum();
        let sitemaps: usize = self.sitemaps.iter().map(|s| 24 + s.url.len()).sum();
        std::mem::size_of::<Self>() + rules + groups + sets + tokens + sitemaps
    }

    fn rule_set_for(&self, token: Option<&ProductToken>) -> Option<u32> {
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
                return Some(self.by_token[i].2);
            }
        }
        self.any
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

/// Collects groups and rules line by line, then compiles them.
#[derive(Default)]
struct Builder {
    rules: Vec<Rule>,
    groups: Vec<Group>,
    /// Per group: the agent names of its `user-agent` lines.
    names: Vec<Vec<AgentName>>,
    sitemaps: Vec<Sitemap>,
    /// Whether the current group has seen a rule line, so that the next `user-agent` line
    /// starts a new group (RFC 9309 §2.1).
    in_rules: bool,
    /// Reused for normalising each pattern, so a rule costs one allocation.
    scratch: Vec<u8>,
}

impl Builder {
    fn build(mut self, body: &[u8]) -> RobotsTxt {
        for line in parse::lines(body) {
            self.line(line);
        }
        self.compile()
    }

    fn line(&mut self, line: parse::Line<'_>) {
        match line.field {
            Field::UserAgent => {
                if self.groups.is_empty() || self.in_rules {
                    let start = self.rules.len() as u32;
                    self.groups.push(Group {
                        user_agents: Vec::new(),
                        rules: start..start,
                        crawl_delay: None,
                        usage: Vec::new(),
                    });
                    self.names.push(Vec::new());
                    self.in_rules = false;
                }
                let value = String::from_utf8_lossy(line.value).into_owned().into_boxed_str();
                if let (Some(g), Some(n)) = (self.groups.last_mut(), self.names.last_mut()) {
                    g.user_agents.push(UserAgentLine { value, line: line.number });
                    n.push(parse::agent_name(line.value));
                }
            }
            Field::Allow | Field::Disallow => {
                if self.groups.is_empty() {
                    return; // rules before the first group are ignored
                }
                self.in_rules = true;
                if line.value.is_empty() {
                    return; // an empty rule matches nothing
                }
                let kind =
                    if line.field == Field::Allow { RuleKind::Allow } else { RuleKind::Disallow };
                let mut scratch = std::mem::take(&mut self.scratch);
                scratch.clear();
                normalize::normalize_pattern_into(line.value, &mut scratch);
                // ASCII by construction (see `normalize`).
                let pattern = std::str::from_utf8(&scratch).unwrap_or_default();
                if kind == RuleKind::Allow {
                    // Google: allowing `/dir/index.html` (or `.htm`) also allows `/dir/`.
                    if let Some(slash) = pattern.rfind('/') {
                        if pattern[slash..].starts_with("/index.htm") {
                            let dir = format!("{}$", &pattern[..=slash]);
                            self.push_rule(kind, &dir, line.number);
                        }
                    }
                }
                self.push_rule(kind, pattern, line.number);
                self.scratch = scratch;
            }
            Field::CrawlDelay => {
                if let (Some(g), Some(seconds)) =
                    (self.groups.last_mut(), parse::crawl_delay_seconds(line.value))
                {
                    g.crawl_delay.get_or_insert(CrawlDelay { seconds, line: line.number });
                }
            }
            Field::Sitemap => {
                if !line.value.is_empty() {
                    let url = String::from_utf8_lossy(line.value).into_owned().into_boxed_str();
                    self.sitemaps.push(Sitemap { url, line: line.number });
                }
            }
            Field::ContentSignal | Field::ContentUsage => {
                // A usage preference is a rule of its group (draft-ietf-aipref-attach), so it
                // also ends the group's user-agent lines; before the first group it is ignored.
                let Some(g) = self.groups.last_mut() else { return };
                self.in_rules = true;
                let rule = if line.field == Field::ContentUsage {
                    usage::UsageRule::content_usage(line.value, line.number)
                } else {
                    usage::UsageRule::content_signal(line.value, line.number)
                };
                g.usage.extend(rule);
            }
            Field::Unknown => {}
        }
    }

    fn push_rule(&mut self, kind: RuleKind, pattern: &str, line: u32) {
        let group = self.groups.len() as u32 - 1;
        let shape = PatternShape::of(pattern.as_bytes());
        self.rules.push(Rule { kind, pattern: pattern.into(), line, group, shape });
        if let Some(g) = self.groups.last_mut() {
            g.rules.end = self.rules.len() as u32;
        }
    }

    fn compile(self) -> RobotsTxt {
        let Builder { rules, groups, names, sitemaps, .. } = self;
        // Which groups name each token, and `*`, in file order.
        let mut token_groups: HashMap<Box<[u8]>, Vec<u32>> = HashMap::new();
        let mut any_groups: Vec<u32> = Vec::new();
        for (g, names) in names.iter().enumerate() {
            for name in names {
                let list = match name {
                    AgentName::Any => &mut any_groups,
                    AgentName::Token(t) if t.is_empty() => continue,
                    AgentName::Token(t) => token_groups.entry(t.clone()).or_default(),
                };
                if list.last() != Some(&(g as u32)) {
                    list.push(g as u32);
                }
            }
        }
        // One compiled rule set per distinct list of groups.
        let mut rule_sets: Vec<RuleSet> = Vec::new();
        let mut set_of: HashMap<Vec<u32>, u32> = HashMap::new();
        let mut intern = |group_ids: Vec<u32>, rule_sets: &mut Vec<RuleSet>| -> u32 {
            if let Some(&s) = set_of.get(&group_ids) {
                return s;
            }
            let ids: Vec<u32> =
                group_ids.iter().flat_map(|&g| groups[g as usize].rules.clone()).collect();
            let allow_rules =
                ids.iter().filter(|&&r| rules[r as usize].kind == RuleKind::Allow).count();
            let disallows_root = ids.iter().any(|&r| {
                let rule = &rules[r as usize];
                rule.kind == RuleKind::Disallow
                    && matches!(rule.pattern.trim_end_matches('*'), "" | "/")
                    && !rule.shape.anchored
            });
            let index = PrefixIndex::build(&rules, ids);
            let s = rule_sets.len() as u32;
            rule_sets.push(RuleSet {
                groups: group_ids.clone(),
                index,
                allow_rules,
                disallows_root,
            });
            set_of.insert(group_ids, s);
            s
        };
        let any = (!any_groups.is_empty()).then(|| intern(any_groups, &mut rule_sets));
        let mut by_token: Vec<(u64, Box<[u8]>, u32)> = token_groups
            .into_iter()
            .map(|(token, gs)| {
                let s = intern(gs, &mut rule_sets);
                (token::lookup_key(&token), token, s)
            })
            .collect();
        by_token.sort_unstable();
        RobotsTxt {
            rules,
            groups,
            rule_sets,
            by_token,
            any,
            sitemaps,
            parsed_bytes: 0,
            ignored_bytes: 0,
        }
    }
}

#[cfg(test)]
mod tests;
