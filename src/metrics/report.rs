//! Report-only mode's counts: `robots_proxy_would_block_total{token, action}` and the
//! per-token would-block counts the status page shows beside the real blocks.

use std::collections::HashSet;
use std::sync::Mutex;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use super::{Counted, TopCounts};
use crate::audit::AuditRecord;

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
    /// Tokens already named by a series.
    labelled: HashSet<String>,
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
            let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
            seen.total += 1;
            seen.tokens.add(name);
            if seen.labelled.contains(name) {
                name.to_owned()
            } else if seen.labelled.len() < WOULD_BLOCK_TOKENS {
                seen.labelled.insert(name.to_owned());
                name.to_owned()
            } else {
                "other".to_owned()
            }
        };
        let action = record.would_action.map_or("unknown", |a| a.as_str());
        self.family.get_or_create(&vec![("token", label), ("action", action.to_owned())]).inc();
    }

    /// Would-blocks since start, and the `top` tokens with the most.
    pub(super) fn summary(&self, top: usize) -> WouldBlockSummary {
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
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
