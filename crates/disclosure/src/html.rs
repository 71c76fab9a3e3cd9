//! `/crawlers` for people: one self-contained HTML page (an inline style, no script, nothing
//! fetched from elsewhere; the response's Content-Security-Policy says so).

use std::fmt::Write as _;

use super::card::{card_path, ips_path, DRAFT};
use super::document::Document;

/// `text` for HTML and XML: the project's markup sink rule, [`robots_proxy_output::markup`].
pub fn escape(text: &str) -> String {
    robots_proxy_output::markup(text)
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:52em;margin:2em auto;\
padding:0 1em;line-height:1.45;color:#222}h2{border-top:1px solid #ccc;padding-top:1em}\
code{background:#f3f3f3;padding:0 .2em}dt{font-weight:600}dd{margin:0 0 .5em 1em}";

/// The Content-Security-Policy of every `/crawlers*` answer: nothing loads, no script runs, and
/// only the page's own style sheet applies, named by its SHA-256 (no `'unsafe-inline'`), so
/// markup that reached the page by a slip in its escaping could not restyle it either.
pub fn policy() -> &'static http::HeaderValue {
    static POLICY: std::sync::OnceLock<http::HeaderValue> = std::sync::OnceLock::new();
    POLICY.get_or_init(|| {
        use base64ct::{Base64, Encoding};
        use sha2::{Digest, Sha256};
        let style = Base64::encode_string(&Sha256::digest(STYLE.as_bytes()));
        http::HeaderValue::from_str(&format!(
            "default-src 'none'; style-src 'sha256-{style}'; base-uri 'none'; \
             form-action 'none'; frame-ancestors 'none'"
        ))
        .unwrap_or(http::HeaderValue::from_static("default-src 'none'"))
    })
}

/// The page, for a disclosure whose feed was last updated at `updated`.
pub fn page(doc: &Document, updated: Option<&str>) -> String {
    let op = &doc.operator;
    let mut out = String::with_capacity(4096);
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>{name}: crawlers</title>\n<style>{STYLE}</style>\n\
         <link rel=\"alternate\" type=\"application/atom+xml\" href=\"/crawlers.atom\" \
         title=\"Changes\">\n<link rel=\"alternate\" type=\"application/json\" \
         href=\"/crawlers.json\">\n</head>\n<body>\n<h1>{name}: crawlers</h1>\n",
        name = escape(&op.name)
    );
    let _ = write!(
        out,
        "<p>The crawlers below reach the web through a gateway that enforces what is listed \
         for each, generated from the gateway's running configuration. Contact: {}.",
        link(&op.contact)
    );
    if let Some(url) = &op.url {
        let _ = write!(out, " Organisation: {}.", link(url));
    }
    let _ = writeln!(
        out,
        " Machine-readable: <a href=\"/crawlers.json\">crawlers.json</a>; changes: \
         <a href=\"/crawlers.atom\">Atom feed</a>{}.</p>",
        updated.map(|u| format!(" (last change {})", escape(u))).unwrap_or_default()
    );
    if doc.crawlers.is_empty() {
        out.push_str("<p>No crawler is configured.</p>\n");
    }
    for c in &doc.crawlers {
        let token = c.product_tokens.first().map(String::as_str).unwrap_or_default();
        let _ = writeln!(out, "<h2 id=\"{t}\">{}</h2>", escape(&c.name), t = escape(token));
        if let Some(d) = &c.description {
            let _ = writeln!(out, "<p>{}</p>", escape(d));
        }
        out.push_str("<dl>\n");
        let mut item = |term: &str, value: String| {
            let _ = writeln!(out, "<dt>{term}</dt><dd>{value}</dd>");
        };
        let tokens: Vec<String> =
            c.product_tokens.iter().map(|t| format!("<code>{}</code>", escape(t))).collect();
        item("robots.txt product token", tokens.join(", "));
        if let Some(ua) = &c.user_agent {
            item("User-Agent", format!("<code>{}</code>", escape(ua)));
        }
        if let Some(about) = &c.about_url {
            item("About", link(about));
        }
        item(
            "Purposes",
            if c.purposes.is_empty() {
                "none declared".into()
            } else {
                escape(&c.purposes.join(", "))
            },
        );
        item("Contact", link(&c.contact));
        match &c.signature_agent {
            Some(agent) => {
                let kids: Vec<String> =
                    agent.key_ids.iter().map(|k| format!("<code>{}</code>", escape(k))).collect();
                item(
                    "Signature-Agent (Web Bot Auth)",
                    format!(
                        "<code>{}</code> ({}); keys: {}",
                        escape(&agent.url),
                        agent.agent_type,
                        if kids.is_empty() { "none published".into() } else { kids.join(", ") }
                    ),
                );
            }
            None => item("Signature-Agent (Web Bot Auth)", "its requests are not signed".into()),
        }
        item(
            "Egress IP ranges",
            if c.ip_ranges.is_empty() {
                "not declared".into()
            } else {
                let ranges: Vec<String> =
                    c.ip_ranges.iter().map(|r| format!("<code>{}</code>", escape(r))).collect();
                format!(
                    "{} (<a href=\"{}\">JAFAR list</a>)",
                    ranges.join(", "),
                    escape(&ips_path(token))
                )
            },
        );
        item(
            "Signature Agent Card",
            format!(
                "<a href=\"{}\">{}</a> ({DRAFT})",
                escape(&card_path(token)),
                escape(&card_path(token))
            ),
        );
        out.push_str("</dl>\n<h3>What the gateway makes it honour</h3>\n<ul>\n");
        for s in c.sentences() {
            let _ = writeln!(out, "<li>{}</li>", escape(&s));
        }
        out.push_str("</ul>\n");
    }
    out.push_str("</body>\n</html>\n");
    out
}

/// A link to `url` (an https URL or a `mailto:` address), its text the URL.
fn link(url: &str) -> String {
    let shown = url.strip_prefix("mailto:").unwrap_or(url);
    format!("<a href=\"{}\">{}</a>", escape(url), escape(shown))
}
