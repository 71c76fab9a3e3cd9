//! AI usage preferences in the data path (see [`crate::usage`]): refuse a request whose path
//! carries a disallowing preference for an enforced purpose, withhold a response whose
//! `Content-Usage` header disallows it, and tell annotated crawlers the merged preference.

use std::ops::ControlFlow;

use http::{header, HeaderValue, Response, StatusCode};

use super::facts::Facts;
use super::report::{Report, Reported, Who};
use super::{answer, ProxyBody, Shared};
use crate::audit::{AuditAction, AuditOutcome, AuditRecord, UsageAudit};
use crate::policy::{Category, Preference, RobotsSnapshot, UsagePreferences};
use crate::usage::{Purpose, Settled, UsageBlock, UsagePolicy};

/// The response header that carries usage preferences (draft-ietf-aipref-attach).
pub(super) const CONTENT_USAGE: &str = "content-usage";

/// What the request is, for the answers and audit records of this module: its facts, the
/// robots.txt it was decided on, and the key id it left signed with, if it was forwarded signed.
pub(super) struct Subject<'a> {
    pub(super) facts: &'a Facts,
    pub(super) snapshot: &'a RobotsSnapshot,
    pub(super) signed: Option<&'a str>,
}

fn purposes_text(purposes: &[Purpose]) -> String {
    purposes.iter().map(|p| p.category.label()).collect::<Vec<_>>().join(",")
}

impl Subject<'_> {
    /// The audit record of the robots.txt decision for this request, answered with `status`:
    /// the base that usage, pacing and other refusals fill in with their own action and reason.
    pub(super) fn decision_record(
        &self,
        shared: &Shared,
        policy: &crate::policy::Policy,
        status: Option<u16>,
    ) -> AuditRecord {
        let now = shared.clock.now();
        let facts = self.facts;
        let decision = policy.decide(self.snapshot, facts.token(), &facts.readings, now);
        facts.audit_record(&decision, now, status)
    }
}

/// The members of a `Content-Usage` value whose label the proxy does not know (not one of
/// [`Category`]'s labels), as written, without empty members.
fn foreign_members(value: &str) -> impl Iterator<Item = String> + '_ {
    value.split(',').map(str::trim).filter(|m| !m.is_empty()).filter_map(|member| {
        let label = member.split(['=', ';']).next().unwrap_or("").trim();
        Category::from_label(label).is_none().then(|| member.to_owned())
    })
}

/// The `robots.usage.*` audit fields of a usage refusal.
pub(super) fn usage_audit(
    purposes: &[Purpose],
    prefs: &UsagePreferences,
    block: &UsageBlock,
) -> UsageAudit {
    UsageAudit {
        category: block.category.label().to_owned(),
        value: prefs.get(block.category).preference.as_str().to_owned(),
        source: block.source.clone(),
        purpose: purposes_text(purposes),
        preferences: prefs.to_header(),
        tdm_policy: None,
    }
}

/// The audit record for a usage event, built on the robots decision's record.
fn record(
    shared: &Shared,
    subject: &Subject<'_>,
    policy: &crate::policy::Policy,
    action: AuditAction,
    reason: &str,
    status: Option<u16>,
    usage: UsageAudit,
) -> AuditRecord {
    let mut record = subject.decision_record(shared, policy, status);
    record.action = action;
    record.outcome = if status.is_some() { AuditOutcome::Failure } else { AuditOutcome::Success };
    record.reason = reason.to_owned();
    record.usage = Some(usage);
    record.signature_keyid = subject.signed.map(str::to_owned);
    record
}

/// The 403 for a usage preference, with its audit record.
pub(super) async fn refuse(
    shared: &Shared,
    policy: &crate::policy::Policy,
    subject: &Subject<'_>,
    purposes: &[Purpose],
    prefs: &UsagePreferences,
    block: &UsageBlock,
    action: AuditAction,
) -> ControlFlow<Response<ProxyBody>, Report> {
    refuse_with(shared, policy, subject, purposes, prefs, block, action, None).await
}

/// [`refuse`], naming the TDMRep policy URL in the audit record.
#[allow(clippy::too_many_arguments)]
pub(super) async fn refuse_with(
    shared: &Shared,
    policy: &crate::policy::Policy,
    subject: &Subject<'_>,
    purposes: &[Purpose],
    prefs: &UsagePreferences,
    block: &UsageBlock,
    action: AuditAction,
    tdm_policy: Option<String>,
) -> ControlFlow<Response<ProxyBody>, Report> {
    let stated = prefs.get(block.category);
    let mut usage = usage_audit(purposes, prefs, block);
    usage.tdm_policy = tdm_policy;
    let rec = record(shared, subject, policy, action, &block.reason, Some(403), usage);
    let url = subject.facts.url();
    let token = subject.facts.token().map_or("(none)", |t| t.as_str());
    let mut resp = if subject.facts.want_json {
        let body = serde_json::json!({
            "error": "usage_disallowed",
            "url": url,
            "product_token": subject.facts.token().map(|t| t.as_str()),
            "purpose": block.category.label(),
            "preference": format!("{}={}", block.category.label(), stated.preference.as_str()),
            "source": block.source,
            "line": block.line,
            "reason": block.reason,
        });
        let mut r = Response::new(answer::full(body.to_string()));
        r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        r
    } else {
        let body = format!(
            "403 Forbidden: the site's AI usage preferences do not allow this crawler's purpose.\n\
             \n\
             URL:           {url}\n\
             Product token: {token}\n\
             Purpose:       {purpose}\n\
             Preference:    {label}={value} ({source})\n\
             robots.txt:    {robots}\n\
             Reason:        {reason}\n",
            purpose = block.category.label(),
            label = block.category.label(),
            value = stated.preference.as_str(),
            source = block.source,
            robots = subject.snapshot.robots_url,
            reason = block.reason,
        );
        let mut r = Response::new(answer::full(body));
        r.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
        r
    };
    *resp.status_mut() = StatusCode::FORBIDDEN;
    resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp.headers_mut()
        .insert("proxy-status", answer::proxy_status("http_request_denied", &block.reason));
    let who = Who { token: subject.facts.token(), user: subject.facts.user_name() };
    shared.refuse_or_report(policy, who, rec, subject.facts.authority.scheme(), resp).await
}

/// Applies the response's `Content-Usage` header (and the other opt-outs of
/// [`super::optouts`]): withholds the response when an enforced
/// purpose is disallowed, otherwise annotates it (for annotated purposes) and audits known
/// preferences.
#[allow(clippy::too_many_arguments)]
pub(super) async fn on_response(
    shared: &Shared,
    policy: &crate::policy::Policy,
    usage: &UsagePolicy,
    subject: &Subject<'_>,
    purposes: &[Purpose],
    mut prefs: UsagePreferences,
    tdm_file: Option<&crate::policy::optout::TdmStatement>,
    mut resp: Response<ProxyBody>,
    reported: &mut Reported,
) -> Response<ProxyBody> {
    // Members the proxy does not know (a newer vocabulary's labels) are passed on as they are
    // when annotating: the merge rewrites only what it understands.
    let mut foreign: Vec<String> = Vec::new();
    for value in resp.headers().get_all(CONTENT_USAGE) {
        if let Ok(text) = value.to_str() {
            prefs.add_header(text);
            foreign.extend(foreign_members(text));
        }
    }
    // X-Robots-Tag: noai and TDMRep (file, header), each as train-ai=n.
    let (resp_read, meta) = super::optouts::read_meta(usage, subject.facts, purposes, resp).await;
    resp = resp_read;
    let tdm =
        super::optouts::apply(usage, subject.facts, tdm_file, meta.as_ref(), &resp, &mut prefs);
    // In report-only mode, a preference of robots.txt already reported before the request left
    // is not reported again for its response.
    let blocking = usage.blocking(purposes, &prefs, Settled::Yes);
    if let Some(block) = blocking.filter(|_| !reported.includes(AuditAction::UsageDisallow)) {
        let withhold = AuditAction::UsageWithhold;
        let tdm_policy = tdm.policy.clone();
        match refuse_with(shared, policy, subject, purposes, &prefs, &block, withhold, tdm_policy)
            .await
        {
            // The body is dropped with `resp`: the content never reaches the crawler.
            ControlFlow::Break(refused) => return refused,
            // Report-only mode: the response goes on as it would without the preference.
            ControlFlow::Continue(report) => reported.add(report),
        }
    }
    if UsagePolicy::annotates(purposes) {
        resp.headers_mut().remove(CONTENT_USAGE);
        let known = prefs.to_header();
        let header: Vec<&str> =
            known.iter().map(String::as_str).chain(foreign.iter().map(String::as_str)).collect();
        if !header.is_empty() {
            if let Ok(v) = HeaderValue::from_str(&header.join(", ")) {
                resp.headers_mut().insert(CONTENT_USAGE, v);
            }
        }
        if let Some(merged) = known {
            // Audit every annotated response whose preference is known.
            let first = purposes
                .iter()
                .map(|p| (p, prefs.get(p.category)))
                .find(|(_, s)| s.preference != Preference::Unknown);
            if let Some((p, stated)) = first {
                let source = match (stated.line, stated.from_header) {
                    _ if stated.other.is_some() => stated.other.unwrap_or_default().to_owned(),
                    (Some(l), true) => format!("robots.txt line {l} and response header"),
                    (Some(l), false) => format!("robots.txt line {l}"),
                    (None, true) => "response header".to_owned(),
                    (None, false) => "robots.txt".to_owned(),
                };
                let usage = UsageAudit {
                    category: p.category.label().to_owned(),
                    value: stated.preference.as_str().to_owned(),
                    source,
                    purpose: purposes_text(purposes),
                    preferences: Some(merged.clone()),
                    tdm_policy: tdm.policy.clone(),
                };
                let reason = format!("forwarded with Content-Usage: {merged}");
                let rec = record(
                    shared,
                    subject,
                    policy,
                    AuditAction::UsageAnnotate,
                    &reason,
                    None,
                    usage,
                );
                shared.write_audit(rec).await;
            }
        }
    }
    shared.metrics.count(crate::metrics::Decision::Allow, subject.facts.authority.scheme());
    resp
}

#[cfg(test)]
mod tests {
    use super::foreign_members;

    #[test]
    fn foreign_members_are_kept_as_written() {
        let kept: Vec<String> =
            foreign_members("train-genai=n, bots=n;x=1, train-ai=y,, ai-train=no").collect();
        assert_eq!(kept, ["train-genai=n", "bots=n;x=1"]);
        assert_eq!(foreign_members("search=y").count(), 0);
    }
}
