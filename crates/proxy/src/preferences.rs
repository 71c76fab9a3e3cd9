//! AI usage preferences in the data path (see [`robots_proxy_decide::usage`]): refuse a request whose path
//! carries a disallowing preference for an enforced purpose, withhold a response whose
//! `Content-Usage` header disallows it, and tell annotated crawlers the merged preference.

use std::ops::ControlFlow;

use http::{HeaderValue, Response, StatusCode};

use super::exchange::{Exchange, Flow};
use super::pipeline::Usage;
use super::refusal::Refusal;
use super::ProxyBody;
use robots_proxy_audit::{AuditAction, AuditOutcome, AuditRecord, UsageAudit};
use robots_proxy_decide::optout::{self, OptOutField, Unparsed};
use robots_proxy_decide::usage::{Purpose, Settled, UsageBlock, UsagePolicy};
use robots_proxy_decide::{Category, Decision, Preference, UsagePreferences};

/// The response header that carries usage preferences (draft-ietf-aipref-attach).
pub(super) const CONTENT_USAGE: &str = "content-usage";

/// Writes how the request left signed into its audit record: `robots.signature.keyid`, and
/// `robots.signature.cosigned` or `robots.signature.cosign_skipped` when the proxy signed beside
/// a client's signature. Every record of a forwarded request carries the same.
pub(super) fn stamp_signature(
    record: &mut AuditRecord,
    keyid: Option<&str>,
    cosign: Option<&robots_proxy_identity::Cosign>,
) {
    record.signature_keyid = keyid.map(str::to_owned);
    match cosign {
        Some(robots_proxy_identity::Cosign::Covered(labels)) => {
            record.signature_cosigned = Some(labels.join(","));
        }
        Some(robots_proxy_identity::Cosign::Skipped(why)) => {
            record.signature_cosign_skipped = Some(why.to_string());
        }
        None => {}
    }
}

fn purposes_text(purposes: &[Purpose]) -> String {
    purposes.iter().map(|p| p.category.label()).collect::<Vec<_>>().join(",")
}

/// The members of a `Content-Usage` value the proxy does not read as a preference, as
/// written, without empty members: those whose label it does not know (not one of
/// [`Category`]'s labels), and those under a known label whose value is not one it reads
/// (`train-ai="n"`, a string, which the vocabulary counts as unknown). Each comes with its
/// category when its label is known.
fn foreign_members(value: &str) -> impl Iterator<Item = (Option<Category>, String)> + '_ {
    value.split(',').map(str::trim).filter(|m| !m.is_empty()).filter_map(|member| {
        let label = member.split(['=', ';']).next().unwrap_or("").trim();
        match Category::from_label(label) {
            None => Some((None, member.to_owned())),
            Some(c) => {
                let mut read = UsagePreferences::default();
                read.add_header(member);
                read.is_unknown().then(|| (Some(c), member.to_owned()))
            }
        }
    })
}

/// The annotated `Content-Usage` value: the merged preferences the proxy knows (`known`), and
/// every member of the origin's it did not read, as written. An unread member under a label
/// the merged value states comes before it (a dictionary's later member wins, RFC 9651, so
/// the effective preference is what a reader gets); every other one after it.
fn annotated(
    known: Option<&str>,
    prefs: &UsagePreferences,
    foreign: &[(Option<Category>, String)],
) -> Option<String> {
    let stated =
        |c: &Option<Category>| c.is_some_and(|c| prefs.get(c).preference != Preference::Unknown);
    let before = foreign.iter().filter(|(c, _)| stated(c)).map(|(_, m)| m.as_str());
    let after = foreign.iter().filter(|(c, _)| !stated(c)).map(|(_, m)| m.as_str());
    let all: Vec<&str> = before.chain(known).chain(after).collect();
    (!all.is_empty()).then(|| all.join(", "))
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
        unparsed: None,
    }
}

/// What the response's own opt-outs add to its usage records: the TDMRep policy URL of the
/// reservation that decided, and the opt-out fields that did not parse as a whole.
#[derive(Debug, Default)]
pub(super) struct ResponseOptOuts {
    pub(super) tdm_policy: Option<String>,
    pub(super) unparsed: Option<String>,
}

impl Exchange<'_> {
    /// The audit record for a usage event, built on the robots decision's record, with how the
    /// request left signed (once the Sign phase ran).
    fn usage_record(
        &self,
        decision: &Decision<'_>,
        action: AuditAction,
        reason: &str,
        status: Option<u16>,
        usage: UsageAudit,
    ) -> AuditRecord {
        let mut record = self.facts.record(decision, self.shared.clock.now(), status);
        record.action = action;
        record.outcome =
            if status.is_some() { AuditOutcome::Failure } else { AuditOutcome::Success };
        record.reason = reason.to_owned();
        record.usage = Some(usage);
        stamp_signature(&mut record, self.signed.keyid, self.signed.cosign.as_ref());
        record
    }

    /// The 403 for a usage preference (`action`: `usage_disallow` before the request leaves,
    /// `usage_withhold` for its response), its record kept; or, in report-only mode, its
    /// `would_block` record kept and the request let go on. `extra` names the TDMRep policy URL
    /// and the unparsed opt-out fields in the record.
    pub(super) fn refuse_usage(
        &mut self,
        decision: &Decision<'_>,
        (purposes, prefs): (&[Purpose], &UsagePreferences),
        block: &UsageBlock,
        action: AuditAction,
        extra: ResponseOptOuts,
    ) -> Flow {
        let facts = self.facts;
        let stated = prefs.get(block.category);
        let mut usage = usage_audit(purposes, prefs, block);
        usage.tdm_policy = extra.tdm_policy;
        usage.unparsed = extra.unparsed;
        let rec = self.usage_record(decision, action, &block.reason, Some(403), usage);
        let url = facts.url();
        let token = facts.token().map_or("(none)", |t| t.as_str());
        let json = serde_json::json!({
            "error": "usage_disallowed",
            "url": url,
            "product_token": facts.token().map(|t| t.as_str()),
            "purpose": block.category.label(),
            "preference": format!("{}={}", block.category.label(), stated.preference.as_str()),
            "source": block.source,
            "line": block.line,
            "reason": block.reason,
        });
        let text = format!(
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
            robots = decision.site().map_or("", |s| s.robots_url.as_str()),
            reason = block.reason,
        );
        let refusal = Refusal::new(StatusCode::FORBIDDEN, "http_request_denied", action, text)
            .details(block.reason.clone())
            .json(json);
        self.refuse_or_report(rec, refusal)
    }

    /// The Response phase, for a crawler with purposes: applies the response's
    /// `Content-Usage` header (and the other opt-outs of [`super::optouts`]): withholds the
    /// response when an enforced purpose is disallowed, otherwise annotates it (for annotated
    /// purposes) and audits known preferences.
    pub(super) async fn usage_of_response(
        &mut self,
        decision: &Decision<'_>,
        usage: Usage,
        mut resp: Response<ProxyBody>,
    ) -> Response<ProxyBody> {
        let (facts, live) = (self.facts, self.live);
        let policy: &UsagePolicy = &live.usage;
        let Usage { purposes, preferences: mut prefs, tdm_file } = usage;
        let purposes = &purposes[..];
        // Members the proxy does not know (a newer vocabulary's labels) are passed on as they
        // are when annotating: the merge rewrites only what it understands.
        let mut foreign: Vec<(Option<Category>, String)> = Vec::new();
        let mut unparsed = Unparsed::default();
        for value in resp.headers().get_all(CONTENT_USAGE) {
            // Read from the bytes by the shared reader: a byte that is not ASCII in one
            // member's parameter (`;note="café"`) must not hide `train-ai=n` in another.
            // Unknown members are passed on only from a field in ASCII, since they are written
            // back into a header.
            let text =
                optout::field_text(OptOutField::ContentUsage, value.as_bytes(), &mut unparsed);
            if !prefs.add_header_read(&text) {
                unparsed.note(OptOutField::ContentUsage);
            }
            if let Ok(text) = value.to_str() {
                foreign.extend(foreign_members(text));
            }
        }
        // X-Robots-Tag: noai and TDMRep (file, header), each as train-ai=n.
        let (resp_read, meta) = super::optouts::read_meta(policy, facts, purposes, resp).await;
        resp = resp_read;
        let tdm = super::optouts::apply(
            policy,
            facts,
            tdm_file.as_ref(),
            meta.as_ref(),
            &resp,
            &mut prefs,
            &mut unparsed,
        );
        super::optouts::log_unparsed(facts, &unparsed);
        let unparsed = unparsed.names();
        // Whether a usage record of this response names the unparsed fields already.
        let mut recorded = false;
        // In report-only mode, a request with a refusal reported already (robots.txt, an
        // exception, a preference of robots.txt) is not reported again for its response:
        // enforcement would have refused it once.
        let blocking = policy.blocking(purposes, &prefs, Settled::Yes);
        if let Some(block) = blocking.filter(|_| !self.reported.any()) {
            let withhold = AuditAction::UsageWithhold;
            let extra =
                ResponseOptOuts { tdm_policy: tdm.policy.clone(), unparsed: unparsed.clone() };
            match self.refuse_usage(decision, (purposes, &prefs), &block, withhold, extra) {
                // The body is dropped with `resp`: the content never reaches the crawler.
                ControlFlow::Break(refused) => return refused,
                // Report-only mode: the response goes on as it would without the preference.
                ControlFlow::Continue(()) => recorded = true,
            }
        }
        if UsagePolicy::annotates(purposes) {
            resp.headers_mut().remove(CONTENT_USAGE);
            let known = prefs.to_header();
            if let Some(header) = annotated(known.as_deref(), &prefs, &foreign) {
                if let Ok(v) = HeaderValue::from_str(&header) {
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
                        unparsed: unparsed.clone(),
                    };
                    let reason = format!("forwarded with Content-Usage: {merged}");
                    let action = AuditAction::UsageAnnotate;
                    let rec = self.usage_record(decision, action, &reason, None, usage);
                    self.keep(rec);
                    recorded = true;
                }
            }
        }
        if let (Some(fields), false) = (unparsed, recorded) {
            // Never read as "no opt-out" in silence: the forwarded response has a record saying
            // which of its opt-out fields the proxy could not read whole.
            let category = purposes.first().map_or(Category::TrainAi, |p| p.category);
            let stated = prefs.get(category);
            let usage = UsageAudit {
                category: category.label().to_owned(),
                value: stated.preference.as_str().to_owned(),
                source: stated.other.unwrap_or("response header").to_owned(),
                purpose: purposes_text(purposes),
                preferences: prefs.to_header(),
                tdm_policy: tdm.policy.clone(),
                unparsed: Some(fields.clone()),
            };
            let reason = format!(
                "forwarded; opt-out fields that do not parse as a whole ({fields}) were read as \
                 far as they could be and did not withhold it"
            );
            let action = AuditAction::UsageUnparsed;
            let rec = self.usage_record(decision, action, &reason, None, usage);
            self.keep(rec);
        }
        self.count(robots_proxy_metrics::Decision::Allow);
        resp
    }
}

#[cfg(test)]
mod tests {
    use super::{annotated, foreign_members};
    use robots_proxy_decide::UsagePreferences;

    fn members(value: &str) -> Vec<String> {
        foreign_members(value).map(|(_, m)| m).collect()
    }

    #[test]
    fn foreign_members_are_kept_as_written() {
        // `ai-train` is Content Signals' label, not the IETF vocabulary's: in a Content-Usage it
        // is not read (controls 5), so it is kept as written.
        let kept = members("train-genai=n, bots=n;x=1, train-ai=y,, ai-train=no");
        assert_eq!(kept, ["train-genai=n", "bots=n;x=1", "ai-train=no"]);
        assert_eq!(foreign_members("search=y").count(), 0);
        // A known label with a value that is not read is kept too.
        assert_eq!(
            members("train-ai=\"n\", search=y, search=maybe"),
            ["train-ai=\"n\"", "search=maybe"]
        );
    }

    #[test]
    fn an_unread_member_under_a_stated_label_comes_before_the_merged_value() {
        let mut prefs = UsagePreferences::default();
        prefs.add_header("train-ai=n");
        let foreign: Vec<_> = foreign_members("train-ai=\"y\", search=\"n\", x=1").collect();
        let known = prefs.to_header();
        assert_eq!(
            annotated(known.as_deref(), &prefs, &foreign).unwrap(),
            "train-ai=\"y\", train-ai=n, search=\"n\", x=1"
        );
    }
}
