//! The AI usage preference fields of an audit record (`robots.usage.*`).

use serde::Serialize;

/// The AI usage preference part of an audit record: which category, what the site said, where
/// it said it, and what the crawler fetched for. Lets a compliance team answer "which
/// opted-out pages did we fetch for training, and when".
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct UsageAudit {
    /// The category (`train-ai`, `ai-use`, `search`).
    #[serde(rename = "robots.usage.category")]
    pub category: String,
    /// The effective value: `y`, `n` or `unknown`.
    #[serde(rename = "robots.usage.value")]
    pub value: String,
    /// `robots.txt line N`, `response header`, or both.
    #[serde(rename = "robots.usage.source")]
    pub source: String,
    /// The crawler's purposes, comma-separated.
    #[serde(rename = "robots.usage.purpose")]
    pub purpose: String,
    /// Every known preference, merged from all sources, as a `Content-Usage` dictionary.
    #[serde(rename = "robots.usage.preferences", skip_serializing_if = "Option::is_none")]
    pub preferences: Option<String>,
    /// The TDMRep `tdm-policy` URL that applied, when a TDM reservation decided.
    #[serde(rename = "robots.usage.tdm_policy", skip_serializing_if = "Option::is_none")]
    pub tdm_policy: Option<String>,
    /// The response's opt-out fields that could not be parsed as a whole (read as far as they
    /// could be), comma-separated: `X-Robots-Tag`, `Content-Usage`, `tdm-reservation`, …
    #[serde(rename = "robots.usage.unparsed", skip_serializing_if = "Option::is_none")]
    pub unparsed: Option<String>,
}
