//! The public disclosure of the organisation's crawlers (issue 21, part 2), served on the key
//! directory listener (`signing.directory_listen`, the listener meant to be public):
//!
//! * `GET /crawlers`: an HTML page for people;
//! * `GET /crawlers.json`: the same for machines;
//! * `GET /crawlers.atom`: an Atom feed (RFC 4287) with an entry per change, so that a
//!   rightsholder can subscribe (the GPAI Code of Practice, Measure 1.3(4));
//! * `GET /crawlers/<token>.json`: each crawler's Signature Agent Card
//!   (draft-meunier-webbotauth-registry-04, [`card`]), and `/crawlers/<token>/ips.json` its
//!   declared egress ranges (JAFAR).
//!
//! Everything but the operator's own words (`[disclosure]`: operator, contact, per crawler a
//! description and IP ranges) is generated from the running configuration ([`Document`]):
//! the identities of `[signing]`, the purposes of `[usage]`, the robots.txt rules of `[robots]`
//! and `[policy]`, the pace, and the exceptions, counted. [`Disclosure::update`] is called at
//! start and on every reload with the configuration then in force; a change of the canonical
//! document's digest adds a feed entry ([`feed`]), kept in `state_dir/disclosure/feed.json`.
//!
//! The root crate re-exports this crate as `robots_proxy::disclosure`; it never reaches `config`
//! (the root hands it the inputs of the configuration in force).

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod card;
pub mod document;
pub mod feed;
pub mod html;
pub mod section;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use arc_swap::ArcSwap;
use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Response, StatusCode};
use http_body_util::Full;
use serde_json::{json, Value};

pub use document::{Document, Inputs, KeyIds};
pub use feed::Feed;
pub use section::{
    CrawlerEntry, DisclosureSection, RawDisclosureSection, Trigger, DISCLOSURE_BOUNDS,
};

use robots_proxy_identity::directory::{not_modified, Pages};
use robots_proxy_identity::{Signer, SigningError, SigningSection};

/// Where the feed is kept, under `state_dir`.
pub(crate) const FEED_FILE: &str = "disclosure/feed.json";

/// Why the disclosure could not be brought up to date.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DisclosureError {
    /// The signing keys (for their ids) cannot be loaded.
    #[error("cannot read the signing keys for their ids: {0}")]
    Keys(#[from] SigningError),
    /// The feed cannot be written; the new entry is served but not kept.
    #[error("cannot write the disclosure feed {path}: {source}")]
    Save {
        /// The feed file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// One served document: its body, media type and strong `ETag`.
#[derive(Debug, Clone)]
struct Served {
    body: Bytes,
    media_type: &'static str,
    etag: String,
}

impl Served {
    fn new(body: String, media_type: &'static str) -> Served {
        let body = Bytes::from(body);
        let etag =
            format!("\"{}\"", &robots_proxy_archive::robots_version::sha256_hex(&body)[..32]);
        Served { body, media_type, etag }
    }
}

/// What is served now.
#[derive(Debug, Default)]
struct Published {
    enabled: bool,
    html: Option<Served>,
    json: Option<Served>,
    atom: Option<Served>,
    /// Lower-case token → (card, IP list).
    cards: Vec<(String, Served, Served)>,
    last_modified: Option<SystemTime>,
}

/// The live disclosure: built empty, brought up to date by [`Disclosure::update`].
#[derive(Debug)]
pub struct Disclosure {
    feed_path: PathBuf,
    feed: Mutex<Feed>,
    published: ArcSwap<Published>,
    /// What the last update was generated from, and the next time at which the document
    /// changes by time alone (a key's `publish_until`, an exception's `expires`): reached, the
    /// next answer regenerates it ([`Disclosure::refresh`]), without waiting for a reload.
    source: Mutex<Option<(Owned, PathBuf, Option<SystemTime>)>>,
}

/// An owned copy of [`Inputs`], to regenerate from when time alone changes the document.
#[derive(Debug, Clone)]
struct Owned {
    section: DisclosureSection,
    signing: SigningSection,
    robots: robots_proxy_sitefiles::RobotsSection,
    policy: robots_proxy_decide::PolicySection,
    pacing: robots_proxy_pace::PacingSection,
    usage: robots_proxy_decide::usage::UsageSection,
    exceptions: Vec<robots_proxy_decide::ExceptionEntry>,
    https: robots_proxy_net::tls::HttpsSection,
}

impl Owned {
    fn of(inputs: &Inputs<'_>) -> Owned {
        Owned {
            section: inputs.section.clone(),
            signing: inputs.signing.clone(),
            robots: inputs.robots.clone(),
            policy: inputs.policy.clone(),
            pacing: inputs.pacing.clone(),
            usage: inputs.usage.clone(),
            exceptions: inputs.exceptions.to_vec(),
            https: inputs.https.clone(),
        }
    }

    fn inputs(&self) -> Inputs<'_> {
        Inputs {
            section: &self.section,
            signing: &self.signing,
            robots: &self.robots,
            policy: &self.policy,
            pacing: &self.pacing,
            usage: &self.usage,
            exceptions: &self.exceptions,
            https: &self.https,
        }
    }
}

/// The first time after `now` at which `inputs` disclose something else by time alone: a
/// key's `publish_until` (its id leaves), an exception's `expires` (no longer counted).
fn next_change(inputs: &Inputs<'_>, now: SystemTime) -> Option<SystemTime> {
    let keys = inputs.signing.keys.iter().filter_map(|k| k.publish_until.map(|t| t.0));
    let exceptions = inputs
        .exceptions
        .iter()
        .filter_map(|e| e.expires.as_deref())
        .filter_map(|t| robots_proxy_decide::exceptions::parse_expires(t).ok());
    keys.chain(exceptions).filter(|t| *t > now).min()
}

/// The ids (thumbprints) of the keys of `signing` published at `now`, read from their files.
pub fn key_ids(
    signing: &SigningSection,
    state_dir: &Path,
    now: SystemTime,
) -> Result<KeyIds, SigningError> {
    let Some(signer) = Signer::new(signing, state_dir)? else { return Ok(Vec::new()) };
    Ok(signer
        .keys(now)
        .filter(|(_, _, published)| *published)
        .map(|(key, _, _)| (key.name().to_string(), key.keyid().to_owned()))
        .collect())
}

impl Disclosure {
    /// A disclosure whose feed is kept under `state_dir` (read now, if it is there).
    pub fn open(state_dir: &Path) -> Disclosure {
        let feed_path = state_dir.join(FEED_FILE);
        let feed = Feed::load(&feed_path);
        Disclosure {
            feed_path,
            feed: Mutex::new(feed),
            published: ArcSwap::default(),
            source: Mutex::new(None),
        }
    }

    /// Regenerates everything from `inputs` (the configuration now in force; `state_dir` to
    /// read the keys' ids) at `now`, adding a feed entry when the document changed. Answers
    /// whether an entry was added. On an error the documents served stay as they were, except
    /// when only keeping the feed failed (then the new documents are served).
    pub fn update(
        &self,
        inputs: &Inputs<'_>,
        state_dir: &Path,
        now: SystemTime,
    ) -> Result<bool, DisclosureError> {
        if !inputs.section.enabled {
            self.published.store(Arc::new(Published::default()));
            *robots_proxy_sync::lock(&self.source) = None;
            return Ok(false);
        }
        let keys = key_ids(inputs.signing, state_dir, now)?;
        *robots_proxy_sync::lock(&self.source) =
            Some((Owned::of(inputs), state_dir.to_owned(), next_change(inputs, now)));
        let doc = Document::generate(inputs, &keys, now);
        let mut feed = robots_proxy_sync::lock(&self.feed);
        let mut next = feed.clone();
        let added = next.record(&doc, now, inputs.section.feed_entries);
        let saved = if added { next.save(&self.feed_path) } else { Ok(()) };
        *feed = next;
        self.published.store(Arc::new(publish(&doc, &feed, inputs.section)));
        drop(feed);
        saved.map_err(|source| DisclosureError::Save { path: self.feed_path.clone(), source })?;
        Ok(added)
    }

    /// Regenerates the document when a time-driven change is due at `now` (a key's
    /// `publish_until` or an exception's `expires` has passed since the last update), as an
    /// update with the same configuration would; a feed entry is added if it changed. Errors
    /// are logged: the documents served stay as they were.
    pub fn refresh(&self, now: SystemTime) {
        let due = {
            let source = robots_proxy_sync::lock(&self.source);
            match &*source {
                Some((owned, dir, Some(at))) if *at <= now => Some((owned.clone(), dir.clone())),
                _ => None,
            }
        };
        if let Some((owned, dir)) = due {
            if let Err(e) = self.update(&owned.inputs(), &dir, now) {
                tracing::error!(error = %e, "the crawler disclosure is not up to date");
            }
        }
    }

    /// The feed's entries, newest first.
    pub fn entries(&self) -> Vec<feed::Entry> {
        robots_proxy_sync::lock(&self.feed).entries.clone()
    }
}

fn publish(doc: &Document, feed: &Feed, section: &DisclosureSection) -> Published {
    let updated = feed.updated().map(str::to_owned);
    let last_modified = updated.as_deref().and_then(|u| humantime::parse_rfc3339(u).ok());
    let base = section.public_url.trim_end_matches('/');
    let mut value = serde_json::to_value(doc).unwrap_or(Value::Null);
    if let Some(crawlers) = value.get_mut("crawlers").and_then(Value::as_array_mut) {
        for (c, crawler) in crawlers.iter_mut().zip(&doc.crawlers) {
            let token = crawler.product_tokens.first().map(String::as_str).unwrap_or_default();
            if let Some(c) = c.as_object_mut() {
                c.insert("card".into(), json!(format!("{base}{}", card::card_path(token))));
                c.insert("rules".into(), json!(crawler.sentences()));
            }
        }
    }
    let json = json!({
        "generator": concat!("robots-proxy ", env!("CARGO_PKG_VERSION")),
        "updated": updated,
        "feed": format!("{base}/crawlers.atom"),
        "card_draft": card::DRAFT,
        "digest": doc.digest(),
        "operator": value.get("operator"),
        "crawlers": value.get("crawlers"),
    });
    let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap_or_default() + "\n";
    let created = last_modified.unwrap_or(SystemTime::UNIX_EPOCH);
    let cards = doc
        .crawlers
        .iter()
        .map(|c| {
            let token = c.product_tokens.first().map(String::as_str).unwrap_or_default();
            (
                token.to_ascii_lowercase(),
                Served::new(pretty(&card::card(c, &section.public_url)), "application/json"),
                Served::new(pretty(&card::ip_list(c, created)), "application/json"),
            )
        })
        .collect();
    Published {
        enabled: true,
        html: Some(Served::new(html::page(doc, updated.as_deref()), "text/html; charset=utf-8")),
        json: Some(Served::new(pretty(&json), "application/json")),
        atom: Some(Served::new(
            feed.atom(&section.public_url, &doc.operator.name),
            "application/atom+xml",
        )),
        cards,
        last_modified,
    }
}

fn respond(
    served: &Served,
    headers: &HeaderMap,
    last_modified: Option<SystemTime>,
) -> Response<Full<Bytes>> {
    let unchanged = not_modified(headers, &served.etag, last_modified);
    let mut resp =
        Response::new(Full::new(if unchanged { Bytes::new() } else { served.body.clone() }));
    if unchanged {
        *resp.status_mut() = StatusCode::NOT_MODIFIED;
    }
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(served.media_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("max-age=300"));
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    h.insert(header::CONTENT_SECURITY_POLICY, html::policy().clone());
    // `nosniff` is stamped on every answer of the listener (`robots_proxy_net::server::stamp_own_answer`).
    if let Ok(v) = HeaderValue::try_from(served.etag.as_str()) {
        h.insert(header::ETAG, v);
    }
    if let Some(t) = last_modified {
        if let Ok(v) = HeaderValue::try_from(httpdate::fmt_http_date(t)) {
            h.insert(header::LAST_MODIFIED, v);
        }
    }
    resp
}

impl Pages for Disclosure {
    fn answer(
        &self,
        method: &Method,
        path: &str,
        headers: &HeaderMap,
        now: SystemTime,
    ) -> Option<Response<Full<Bytes>>> {
        if path != "/crawlers" && !path.starts_with("/crawlers/") && !path.starts_with("/crawlers.")
        {
            return None;
        }
        // A key retired or an exception expired since the last update: disclosed now.
        self.refresh(now);
        let published = self.published.load();
        if !published.enabled {
            return None;
        }
        let served = match path {
            "/crawlers" | "/crawlers/" => published.html.as_ref(),
            "/crawlers.json" => published.json.as_ref(),
            "/crawlers.atom" => published.atom.as_ref(),
            _ => {
                let rest = path.strip_prefix("/crawlers/").unwrap_or_default().to_ascii_lowercase();
                let (token, ips) = match rest.strip_suffix("/ips.json") {
                    Some(token) => (token.to_owned(), true),
                    None => (rest.strip_suffix(".json").unwrap_or_default().to_owned(), false),
                };
                published.cards.iter().find(|(t, _, _)| *t == token).map(|(_, card, list)| {
                    if ips {
                        list
                    } else {
                        card
                    }
                })
            }
        };
        let served = served?;
        if method != Method::GET && method != Method::HEAD {
            let mut resp =
                Response::new(Full::new(Bytes::from_static(b"405 Method Not Allowed\n")));
            *resp.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
            resp.headers_mut().insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
            return Some(resp);
        }
        Some(respond(served, headers, published.last_modified))
    }
}

#[cfg(test)]
mod tests;
