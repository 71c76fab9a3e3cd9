//! The other machine-readable opt-outs in the data path (issue 20, part 3; parsing in
//! [`crate::policy::optout`]): `X-Robots-Tag: noai` and TDMRep, each counting as `train-ai=n`
//! for the response they apply to. Only reached for crawlers with configured purposes
//! ([`crate::usage`]), so nothing of this runs when `[usage]` names no crawler.

use http::Response;

use super::facts::Facts;
use super::ProxyBody;
use crate::policy::optout::{self, TdmStatement};
use crate::policy::{Category, Preference, UsagePreferences};
use crate::usage::UsagePolicy;

/// The TDMRep reservation that applied to a response, for the audit record.
#[derive(Debug, Default)]
pub(super) struct TdmApplied {
    /// The `tdm-policy` URL of the statement that decided, if it gave one.
    pub(super) policy: Option<String>,
}

/// The TDMRep statement of the response head: `tdm-reservation` and `tdm-policy`. A
/// `tdm-reservation` other than `0` or `1` is unset (logged), and leaves the file's rule in force.
fn header_statement(facts: &Facts, resp: &Response<ProxyBody>) -> Option<TdmStatement> {
    let value = resp.headers().get("tdm-reservation")?;
    let text = value.to_str().unwrap_or("");
    let reserved = optout::tdm_reservation(text);
    if reserved.is_none() {
        tracing::info!(
            url = %facts.url(),
            value = %String::from_utf8_lossy(value.as_bytes()),
            "ignoring a tdm-reservation header that is neither 0 nor 1 (TDMRep: unset)"
        );
        return None;
    }
    let policy = resp
        .headers()
        .get("tdm-policy")
        .and_then(|v| v.to_str().ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty());
    Some(TdmStatement { reserved, policy })
}

/// Merges `X-Robots-Tag: noai` (when `usage.x_robots_tag`) and TDMRep (when `usage.tdmrep`:
/// the response's `tdm-reservation` header, else the `tdmrep.json` rule `file` that matched the
/// path) into `prefs` as `train-ai=n` statements naming their source.
pub(super) fn apply(
    usage: &UsagePolicy,
    facts: &Facts,
    file: Option<&TdmStatement>,
    resp: &Response<ProxyBody>,
    prefs: &mut UsagePreferences,
) -> TdmApplied {
    if usage.x_robots_tag() {
        let token = facts.token().map(|t| t.as_str());
        let noai = resp
            .headers()
            .get_all("x-robots-tag")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| optout::x_robots_noai(v, token));
        if noai {
            prefs.add_signal(Category::TrainAi, Preference::Disallow, "X-Robots-Tag");
        }
    }
    if !usage.tdmrep() {
        return TdmApplied::default();
    }
    // The header overrides the file for this resource.
    let (statement, source) = match header_statement(facts, resp) {
        Some(s) => (Some(s), "tdm-reservation header"),
        None => (file.cloned(), "tdmrep.json"),
    };
    match statement {
        Some(TdmStatement { reserved: Some(true), policy }) => {
            prefs.add_signal(Category::TrainAi, Preference::Disallow, source);
            TdmApplied { policy }
        }
        _ => TdmApplied::default(),
    }
}

/// The `tdmrep.json` rule for the request's path, when TDMRep is on and one of the crawler's
/// purposes (not `off`) is `train-ai`: the file is fetched (or taken from the cache) before
/// the request leaves, and applied when the response head has come (its header overrides it).
pub(super) async fn file_statement(
    policy: &crate::policy::Policy,
    usage: &UsagePolicy,
    facts: &Facts,
    purposes: &[crate::usage::Purpose],
) -> Option<TdmStatement> {
    if !usage.tdmrep() || !purposes.iter().any(|p| p.category == Category::TrainAi) {
        return None;
    }
    let site = policy.tdmrep(&facts.authority).await;
    let file = site.file.as_ref()?;
    file.statement_for_sent(facts.path()).cloned()
}
