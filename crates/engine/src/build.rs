//! Building a [`RobotsTxt`]: groups and rules collected line by line, then compiled into rule
//! sets with their prefix indexes.

use std::collections::HashMap;

use super::index::PrefixIndex;
use super::parse::{self, AgentName, Field};
use super::pattern::PatternShape;
use super::{normalize, token, usage};
use super::{CrawlDelay, Group, RobotsTxt, Rule, RuleKind, RuleSet, Sitemap, UserAgentLine};

/// Collects groups and rules line by line, then compiles them.
#[derive(Default)]
pub(super) struct Builder {
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
    pub(super) fn build(mut self, body: &[u8]) -> RobotsTxt {
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
                    // The crawler's full name too, where Google's reading keeps less of it.
                    n.extend(parse::full_agent_name(line.value).map(AgentName::Token));
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
                let priority = normalize::normalize_pattern_into(line.value, &mut scratch) as u32;
                // ASCII by construction (see `normalize`).
                let pattern = std::str::from_utf8(&scratch).unwrap_or_default();
                if kind == RuleKind::Allow {
                    // Google: allowing `/dir/index.html` (or `.htm`) also allows `/dir/`.
                    if let Some(slash) = pattern.rfind('/') {
                        if pattern[slash..].starts_with("/index.htm") {
                            let dir = format!("{}$", &pattern[..=slash]);
                            self.push_rule(kind, &dir, line.number, dir.len() as u32);
                        }
                    }
                }
                self.push_rule(kind, pattern, line.number, priority);
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

    fn push_rule(&mut self, kind: RuleKind, pattern: &str, line: u32, priority: u32) {
        let group = self.groups.len() as u32 - 1;
        let shape = PatternShape::of(pattern.as_bytes());
        self.rules.push(Rule { kind, pattern: pattern.into(), line, group, shape, priority });
        if let Some(g) = self.groups.last_mut() {
            g.rules.end = self.rules.len() as u32;
        }
    }

    fn compile(self) -> RobotsTxt {
        let Builder { rules, groups, names, sitemaps, .. } = self;
        // The decoded reading of every pattern, when at least one differs.
        let decoded: Vec<Option<String>> =
            rules.iter().map(|r| normalize::decode_pattern(r.pattern.as_bytes())).collect();
        let decoded_rules: Vec<Rule> = if decoded.iter().any(Option::is_some) {
            rules
                .iter()
                .zip(decoded)
                .map(|(r, d)| match d {
                    // Shorter by two octets per escape decoded, as if written decoded.
                    Some(p) => Rule {
                        shape: PatternShape::of(p.as_bytes()),
                        priority: r.priority - (r.pattern.len() - p.len()) as u32,
                        pattern: p.into(),
                        ..r.clone()
                    },
                    None => r.clone(),
                })
                .collect()
        } else {
            Vec::new()
        };
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
            let changed = |&r: &u32| {
                decoded_rules
                    .get(r as usize)
                    .is_some_and(|d| d.pattern != rules[r as usize].pattern)
            };
            let decoded =
                ids.iter().any(changed).then(|| PrefixIndex::build(&decoded_rules, ids.clone()));
            let index = PrefixIndex::build(&rules, ids);
            let s = rule_sets.len() as u32;
            rule_sets.push(RuleSet {
                groups: group_ids.clone(),
                index,
                decoded,
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
        // A compiled file is kept for its whole lifetime in the cache, one per authority: no
        // spare capacity left from building it (a `Vec<RuleSet>` grown to four for one set
        // held 1 KiB per authority, issue 22).
        let mut rules = rules;
        let mut groups = groups;
        let mut sitemaps = sitemaps;
        let mut decoded_rules = decoded_rules;
        rules.shrink_to_fit();
        decoded_rules.shrink_to_fit();
        for group in &mut groups {
            group.user_agents.shrink_to_fit();
            group.usage.shrink_to_fit();
        }
        groups.shrink_to_fit();
        for set in &mut rule_sets {
            set.groups.shrink_to_fit();
        }
        rule_sets.shrink_to_fit();
        by_token.shrink_to_fit();
        sitemaps.shrink_to_fit();
        let decoded_usage =
            groups.iter().flat_map(|g| g.usage.iter()).any(usage::UsageRule::has_decoded_pattern);
        RobotsTxt {
            rules,
            decoded_rules,
            groups,
            rule_sets,
            by_token,
            any,
            sitemaps,
            parsed_bytes: 0,
            ignored_bytes: 0,
            case_insensitive_origin: false,
            decoded_usage,
            folded: Default::default(),
        }
    }
}
