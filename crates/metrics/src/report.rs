//! Report-only mode's counts: `robots_proxy_would_block_total{token, action}` and the
//! per-token would-block counts the status page shows beside the real blocks.

use std::collections::HashMap;
use std::sync::Mutex;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use super::{Counted, TopCounts};
use robots_proxy_audit::AuditRecord;

/// How many distinct tokens `robots_proxy_would_block_total` names; the others are counted
/// under `token="other"`, so the series stay bounded whatever the crawlers send.
pub const WOULD_BLOCK_TOKENS: usize = 64;

type Labels = Vec<(&'static str, String)>;

/// Requests forwarded in report-only mode that enforcement would have refused.
pub(super) struct WouldBlocks {
    family: Family<Labels, Counter>,
    seen: Mutex<Seen>,
}

#[derive(Default)]
struct Seen {
    total: u64,
    /// Tokens already named by a series: lower-cased (product tokens compare without case,
    /// RFC 9309 §2.2.1) → the spelling its series carries, the first one seen.
    labelled: HashMap<String, String>,
    /// For the status page.
    tokens: TopCounts,
}

impl WouldBlocks {
    /// Registers the counter in `registry`.
    pub(super) fn register(registry: &mut Registry) -> Self {
        let family = Family::<Labels, Counter>::default();
        registry.register(
            "would_block",
            "Requests forwarded in report-only mode (policy.mode, policy.report_tokens, \
             policy.report_users) that enforcement would have refused, by product token and by \
             the action enforcement would have taken",
            family.clone(),
        );
        WouldBlocks { family, seen: Mutex::new(Seen::default()) }
    }

    /// Counts a `would_block` record.
    pub(super) fn count(&self, record: &AuditRecord) {
        let name = record.product_token.as_deref().unwrap_or("(none)");
        let label = {
            let mut seen = robots_proxy_sync::lock(&self.seen);
            seen.total += 1;
            // One token however it is spelt: `ReportBot`, `REPORTBOT` and `reportbot` are one
            // series and one row of the status page, not three.
            let key = name.to_ascii_lowercase();
            let label = match seen.labelled.get(&key) {
                Some(first) => first.clone(),
                None if seen.labelled.len() < WOULD_BLOCK_TOKENS => {
                    seen.labelled.insert(key.clone(), name.to_owned());
                    name.to_owned()
                }
                None => "other".to_owned(),
            };
            let row = if label == "other" { key } else { label.clone() };
            seen.tokens.add(&row);
            label
        };
        let action = record.would_action.map_or("unknown", |a| a.as_str());
        self.family.get_or_create(&vec![("token", label), ("action", action.to_owned())]).inc();
    }

    /// Would-blocks since start, and the `top` tokens with the most.
    pub(super) fn summary(&self, top: usize) -> WouldBlockSummary {
        let seen = robots_proxy_sync::lock(&self.seen);
        WouldBlockSummary { total: seen.total, top_tokens: seen.tokens.top(top) }
    }
}

/// Would-blocks, as [`super::Metrics::would_blocks`] reports them for the admin page.
#[derive(Debug, Clone, serde::Serialize)]
pub struct WouldBlockSummary {
    /// Would-blocks since start.
    pub total: u64,
    /// Product tokens with the most would-blocks (`(none)` for requests without one).
    pub top_tokens: Vec<Counted>,
}
