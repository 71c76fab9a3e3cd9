//! What decides a request besides robots.txt's path rules (issue 39, M4: `evidence` replayed the
//! path rules alone, and answered "allowed" for a request the proxy refused for a usage
//! preference of the same robots.txt): the exceptions of `[[exceptions]]` in force at TIME and
//! the AI usage preferences of `[usage]`, from `--config`, applied in the proxy's order. An
//! exception decides first (a disallow one refuses; an allow one lets through what robots.txt
//! disallows, and may lift usage purposes); then, for an allowed request, a usage preference
//! robots.txt states that does not allow an enforced purpose of the crawler refuses it.
//!
//! What the origin's response said (its `Content-Usage` header, `X-Robots-Tag`) is not in any
//! source: only robots.txt's preferences are replayed, as the proxy decides before the origin
//! answers, and the answer says so.

use std::time::SystemTime;

use serde_json::{json, Value};

use crate::authority::Authority;
use crate::config::Config;
use crate::policy::{pattern_reading, Claim, Exceptions, Readings, RobotsTxt};
use crate::robots::ProductToken;
use crate::usage::{Settled, UsagePolicy};

use super::replay::Replay;

/// The decision once exceptions and usage preferences are applied.
#[derive(Debug, Clone)]
pub(super) struct Overrides {
    /// The final verdict.
    pub(super) allowed: bool,
    /// Why, when an exception or a usage preference decided.
    pub(super) reason: Option<String>,
    /// The exception that decided, as JSON (`id`, `effect`, `reference`, `reading`, `path`).
    pub(super) exception: Option<Value>,
    /// The crawler's purposes (`[usage].crawlers`), their modes, any an exception lifted, and
    /// the preference that refused, if one did.
    pub(super) usage: Value,
}

/// Whether the replayed verdict `allowed` (of `replay`) stands, for `token` (and the
/// authenticated `user`, if given) at `at`.
#[allow(clippy::too_many_arguments)]
pub(super) fn apply(
    config: &Config,
    authority: &Authority,
    token: Option<&ProductToken>,
    user: Option<&str>,
    path: &str,
    at: SystemTime,
    body: Option<&[u8]>,
    fold_case: bool,
    replay: &Replay,
) -> Overrides {
    let readings = Readings::of(path);
    let every: Vec<(crate::policy::Reading, String)> =
        readings.to_decide(true, fold_case).map(|(r, p)| (r, p.to_owned())).collect();
    let every_ref: Vec<(crate::policy::Reading, &str)> =
        every.iter().map(|(r, p)| (*r, p.as_str())).collect();
    let disallowed: Vec<(crate::policy::Reading, &str)> = every_ref
        .iter()
        .filter(|(r, _)| replay.readings.iter().any(|d| d.reading == r.name() && !d.allowed))
        .copied()
        .collect();
    // An authenticated user's credentials name its token (`access.users_file`): only then is
    // the identity entitled to an allow exception, as at the proxy.
    let claim = match user {
        Some(u) => Claim::tied(token, Some(u)),
        None => Claim::asserted(token, None),
    };
    let exceptions = Exceptions::new(&config.exceptions);
    let verdict = exceptions.decide(authority, claim, &every_ref, &disallowed, at);
    let mut allowed = replay.decision.allowed;
    let mut reason = None;
    let exception = verdict.as_ref().map(|v| {
        allowed = v.effect == crate::policy::exceptions::Effect::Allow;
        reason = Some(v.reason());
        json!({
            "id": &*v.id,
            "effect": if allowed { "allow" } else { "disallow" },
            "reference": &*v.reference,
            "reading": v.reading.name(),
            "path": v.read_path,
        })
    });
    // Usage preferences, for an allowed request of a crawler with purposes.
    let policy = UsagePolicy::new(&config.usage);
    let mut purposes = policy.purposes_for(token, user);
    let lifted = exceptions.lifted_usage(authority, claim, &every_ref, at);
    let mut lifted_ids = Vec::new();
    if let Some((categories, by)) = &lifted {
        purposes.retain(|p| !categories.contains(&p.category));
        lifted_ids.push(json!({
            "exception": &*by.id,
            "purposes": categories.iter().map(|c| c.label()).collect::<Vec<_>>(),
        }));
    }
    let mut refused = None;
    if allowed && !purposes.is_empty() {
        if let Some(body) = body {
            let robots = RobotsTxt::parse(body);
            let decoded = robots.has_decoded_patterns() || robots.has_decoded_usage_patterns();
            let mut prefs = crate::policy::UsagePreferences::default();
            for (reading, read) in readings.to_decide(decoded, fold_case) {
                prefs.combine(&robots.usage_as(token, read, pattern_reading(reading)));
            }
            if let Some(block) = policy.blocking(&purposes, &prefs, Settled::No) {
                allowed = false;
                reason = Some(block.reason.clone());
                refused = Some(json!({
                    "purpose": block.category.label(),
                    "source": block.source,
                    "line": block.line,
                    "reason": block.reason,
                }));
            }
        }
    }
    let usage = json!({
        "purposes": purposes
            .iter()
            .map(|p| json!({"purpose": p.category.label(), "mode": format!("{:?}", p.mode).to_lowercase()}))
            .collect::<Vec<_>>(),
        "lifted": lifted_ids,
        "refused": refused,
        "note": "only robots.txt's preferences are replayed: what the origin's response stated \
                 (Content-Usage, X-Robots-Tag) is in no source",
    });
    Overrides { allowed, reason, exception, usage }
}

/// The audit records near TIME for the URL whose verdict differs from `allowed`, each as
/// `@timestamp` and `event.action`: the answer says when it contradicts a record it prints.
pub(super) fn disagreeing(
    records: &[super::Kept],
    token: Option<&ProductToken>,
    allowed: bool,
) -> Vec<Value> {
    records
        .iter()
        .filter(|k| {
            let field = |f: &str| k.value.get(f).and_then(Value::as_str);
            let same_token = match (token, field("robots.product_token")) {
                (Some(t), Some(r)) => t.as_str().eq_ignore_ascii_case(r),
                (None, None) => true,
                _ => false,
            };
            let action = match field("event.action") {
                Some("would_block") => field("robots.would_action"),
                other => other,
            };
            let recorded = match action {
                Some("robots_allow" | "exception_allow" | "tunnel_allow") => Some(true),
                Some(
                    "robots_disallow" | "exception_disallow" | "usage_disallow" | "connect_refuse",
                ) => Some(false),
                _ => None,
            };
            same_token && recorded.is_some_and(|r| r != allowed)
        })
        .map(|k| {
            json!({
                "@timestamp": k.value.get("@timestamp"),
                "event.action": k.value.get("event.action"),
                "file": k.file.display().to_string(),
                "line": k.line,
            })
        })
        .collect()
}
