//! Per crawler, a Signature Agent Card as draft-meunier-webbotauth-registry-04 (27 October
//! 2026) defines it: an OAuth client metadata document (`client_id`, `client_name`,
//! `client_uri`, `contacts`, `jwks_uri`) with a `web_bot_auth` object whose members are
//! `expected-user-agent`, `rfc9309-product-token`, `rfc9309-compliance` (a boolean since -04),
//! `trigger`, `purpose`, `rate-control`, `rate-expectation` and `ips_uri`. The IP ranges are
//! not inline in -04: `ips_uri` points to a list in the JAFAR format
//! (draft-illyes-webbotauth-jafar-00), which [`ip_list`] writes.
//!
//! The card is served at its own `client_id` (`<public_url>/crawlers/<token>.json`), as the
//! draft's resolvable-identity rule wants (the `client_id` in the document is the URL it was
//! fetched from).

use std::time::SystemTime;

use serde::Serialize;
use serde_json::{json, Map, Value};

use super::document::Crawler;

/// The draft the cards follow.
pub(crate) const DRAFT: &str = "draft-meunier-webbotauth-registry-04";

/// The path of a crawler's card.
pub(crate) fn card_path(token: &str) -> String {
    format!("/crawlers/{token}.json")
}

/// The path of a crawler's IP list.
pub(crate) fn ips_path(token: &str) -> String {
    format!("/crawlers/{token}/ips.json")
}

/// The Signature Agent Card of `crawler`, for a disclosure served at `public_url`.
pub fn card(crawler: &Crawler, public_url: &str) -> Value {
    let base = public_url.trim_end_matches('/');
    let token = crawler.product_tokens.first().map(String::as_str).unwrap_or_default();
    let h = &crawler.honours;
    let mut bot = Map::new();
    if let Some(ua) = &crawler.user_agent {
        bot.insert("expected-user-agent".into(), json!(ua));
    }
    bot.insert("rfc9309-product-token".into(), json!(token));
    // True only where the gateway makes every request of the crawler obey robots.txt: not
    // with report-only users, tunnelled HTTPS or an allow exception in force
    // (`Honours::rfc9309_compliant`). A boolean, as -04 and the editor's copy define it.
    bot.insert("rfc9309-compliance".into(), json!(h.rfc9309_compliant()));
    if let Some(trigger) = crawler.trigger {
        bot.insert("trigger".into(), serde_json::to_value(trigger).unwrap_or(Value::Null));
    }
    if !crawler.purposes.is_empty() {
        // A string in -04 (an array is still being discussed): the aipref labels, joined.
        bot.insert("purpose".into(), json!(crawler.purposes.join(", ")));
    }
    let mut control = Vec::new();
    if h.pace.crawl_delay {
        control.push("Crawl-delay in robots.txt".to_owned());
    }
    control.push("robots.txt (RFC 9309)".to_owned());
    bot.insert("rate-control".into(), json!(control.join("; ")));
    let mut rate = Vec::new();
    if let Some(rps) = h.pace.max_rps_per_site {
        rate.push(format!("max={rps}rps"));
    }
    if let Some(c) = h.pace.max_concurrency_per_site {
        rate.push(format!("concurrency={c}"));
    }
    if !rate.is_empty() {
        bot.insert("rate-expectation".into(), json!(format!("{};per=site", rate.join(";"))));
    }
    if !crawler.ip_ranges.is_empty() {
        bot.insert("ips_uri".into(), json!(format!("{base}{}", ips_path(token))));
    }
    let mut card = Map::new();
    card.insert("client_id".into(), json!(format!("{base}{}", card_path(token))));
    card.insert("client_name".into(), json!(crawler.name));
    if let Some(about) = &crawler.about_url {
        card.insert("client_uri".into(), json!(about));
    }
    card.insert("contacts".into(), json!([crawler.contact]));
    // The draft wants an https jwks_uri; an http agent (a test setup) has none in its card.
    if let Some(agent) = &crawler.signature_agent {
        if agent.jwks_uri.starts_with("https://") {
            card.insert("jwks_uri".into(), json!(agent.jwks_uri));
        }
    }
    card.insert("web_bot_auth".into(), Value::Object(bot));
    Value::Object(card)
}

/// One JAFAR prefix.
#[derive(Serialize)]
struct Prefix<'a> {
    #[serde(rename = "ipv4Prefix", skip_serializing_if = "Option::is_none")]
    v4: Option<&'a str>,
    #[serde(rename = "ipv6Prefix", skip_serializing_if = "Option::is_none")]
    v6: Option<&'a str>,
}

/// The crawler's declared egress ranges as a JAFAR list (`creationTime`, `prefixes` of
/// `ipv4Prefix` / `ipv6Prefix`), `created` being when the disclosure last changed.
pub fn ip_list(crawler: &Crawler, created: SystemTime) -> Value {
    let prefixes: Vec<Prefix<'_>> = crawler
        .ip_ranges
        .iter()
        .map(|r| {
            if r.contains(':') {
                Prefix { v4: None, v6: Some(r) }
            } else {
                Prefix { v4: Some(r), v6: None }
            }
        })
        .collect();
    json!({
        "creationTime": humantime::format_rfc3339_seconds(created).to_string(),
        "prefixes": prefixes,
    })
}
