//! What the admin page lists of recent blocks: the last blocked requests, and the sites and
//! tokens blocked most, in bounded memory.

use std::collections::{HashMap, VecDeque};

use serde::Serialize;

use super::{RECENT_BLOCKS, TOP_TRACKED};
use robots_proxy_audit::AuditRecord;

/// One blocked request, as the admin page lists it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct BlockedRequest {
    /// When (RFC 3339).
    pub at: String,
    /// The request method.
    pub method: String,
    /// The URL (cut to [`MAX_SHOWN_URL`] bytes).
    pub url: String,
    /// `scheme://host[:port]`.
    pub authority: String,
    /// The product token, if any.
    pub token: Option<String>,
    /// Why it was blocked.
    pub reason: String,
    /// The client's address.
    pub client: String,
}

/// Longest URL kept for the admin page; longer ones are cut (the audit log has them whole).
pub const MAX_SHOWN_URL: usize = 2048;

/// Blocks, as [`Metrics::blocks`] reports them.
#[derive(Debug, Clone, Serialize)]
pub struct BlockSummary {
    /// Blocks since start.
    pub total: u64,
    /// The most recent blocks, newest first (at most [`RECENT_BLOCKS`]).
    pub recent: Vec<BlockedRequest>,
    /// Authorities blocked most often.
    pub top_authorities: Vec<Counted>,
    /// Product tokens blocked most often (`(none)` for requests without one).
    pub top_tokens: Vec<Counted>,
}

/// A name and how often it was seen.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Counted {
    /// The authority or token.
    pub name: String,
    /// Blocks counted for it (an over-estimate by at most `error`).
    pub count: u64,
    /// How much `count` may over-estimate (non-zero only for names that replaced another once
    /// the table was full).
    pub error: u64,
}

#[derive(Default)]
pub(super) struct Activity {
    pub(super) total: u64,
    pub(super) recent: VecDeque<BlockedRequest>,
    pub(super) authorities: TopCounts,
    pub(super) tokens: TopCounts,
}

impl Activity {
    pub(super) fn push(&mut self, record: &AuditRecord) {
        self.total += 1;
        if self.recent.len() == RECENT_BLOCKS {
            self.recent.pop_front();
        }
        self.recent.push_back(BlockedRequest {
            at: record.timestamp.clone(),
            method: record.method.clone(),
            url: cut(&record.url, MAX_SHOWN_URL).to_owned(),
            authority: record.domain.clone(),
            token: record.product_token.clone(),
            reason: record.reason.clone(),
            client: record.client_address.clone(),
        });
        self.authorities.add(&record.domain);
        self.tokens.add(record.product_token.as_deref().unwrap_or("(none)"));
    }
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary.
pub(super) fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Counts of at most [`TOP_TRACKED`] names, by the "space-saving" scheme: when the table is
/// full, a new name takes the place of the least counted one and inherits its count (recorded
/// as the possible error). Names seen often stay; their counts are exact unless they entered
/// late, and then over-estimated by at most `error`.
#[derive(Default)]
pub struct TopCounts {
    counts: HashMap<String, (u64, u64)>,
}

impl TopCounts {
    /// Counts one occurrence of `name`.
    pub fn add(&mut self, name: &str) {
        if let Some((count, _)) = self.counts.get_mut(name) {
            *count += 1;
            return;
        }
        if self.counts.len() < TOP_TRACKED {
            self.counts.insert(name.to_owned(), (1, 0));
            return;
        }
        let least =
            self.counts.iter().min_by_key(|(_, (count, _))| *count).map(|(k, v)| (k.clone(), v.0));
        if let Some((victim, floor)) = least {
            self.counts.remove(&victim);
            self.counts.insert(name.to_owned(), (floor + 1, floor));
        }
    }

    /// The `n` most counted names, most first (ties by name).
    pub fn top(&self, n: usize) -> Vec<Counted> {
        let mut all: Vec<Counted> = self
            .counts
            .iter()
            .map(|(name, &(count, error))| Counted { name: name.clone(), count, error })
            .collect();
        all.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.name.cmp(&b.name)));
        all.truncate(n);
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_counts_stay_bounded_and_keep_the_frequent() {
        let mut top = TopCounts::default();
        for _ in 0..50 {
            top.add("often.example");
        }
        for i in 0..(TOP_TRACKED * 4) {
            top.add(&format!("once-{i}.example"));
        }
        assert!(top.counts.len() <= TOP_TRACKED);
        let best = top.top(3);
        assert_eq!(best[0], Counted { name: "often.example".into(), count: 50, error: 0 });
        assert!(best[1].count <= 50);
    }

    #[test]
    fn cut_respects_characters() {
        assert_eq!(cut("héllo", 2), "h");
        assert_eq!(cut("héllo", 3), "hé");
        assert_eq!(cut("abc", 10), "abc");
    }
}
