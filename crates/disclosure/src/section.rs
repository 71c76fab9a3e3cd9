//! `[disclosure]`: what the public disclosure of the organisation's crawlers says beyond what
//! the running configuration already knows (the operator, a contact, per crawler a description
//! and the egress IP ranges), and its checks. Every problem names its key
//! (`disclosure.crawlers[2].token`), as `[[exceptions]]` problems do.

use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use robots_proxy_engine::ProductToken;
use robots_proxy_units::bounds::{count, wide, Bound};
use robots_proxy_units::{raw_section, Problems};

/// Most feed entries `disclosure.feed_entries` may keep.
pub const MAX_FEED_ENTRIES: usize = 1000;

/// `[disclosure]`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self", default, deny_unknown_fields)]
pub struct DisclosureSection {
    /// Serve `/crawlers`, `/crawlers.json`, `/crawlers.atom` and the cards on the key directory
    /// listener.
    pub enabled: bool,
    /// The organisation that runs the crawlers, as rightsholders should read it.
    pub operator: String,
    /// The organisation's web site (https).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator_url: Option<String>,
    /// Where rightsholders reach the organisation about its crawlers: `mailto:` or https.
    pub contact: String,
    /// The https URL the key directory listener is reached at from the Internet (no path):
    /// the base of the cards' `client_id` and of the feed's links.
    pub public_url: String,
    /// Feed entries kept (the oldest are dropped), 1 to [`MAX_FEED_ENTRIES`].
    pub feed_entries: usize,
    /// What the configuration cannot know about each crawler, by product token.
    pub crawlers: Vec<CrawlerEntry>,
}

impl Default for DisclosureSection {
    fn default() -> Self {
        DisclosureSection {
            enabled: false,
            operator: String::new(),
            operator_url: None,
            contact: String::new(),
            public_url: String::new(),
            feed_entries: 50,
            crawlers: Vec::new(),
        }
    }
}

/// What the crawler does, in the registry draft's words (`trigger`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Trigger {
    /// Autonomous scanning.
    Crawler,
    /// Requests initiated by a user.
    Fetcher,
}

/// One entry of `disclosure.crawlers`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CrawlerEntry {
    /// The crawler's product token: the `[signing]` identity (and `[usage]` entry) it describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// The name shown to people (default: the token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What it crawls and why, in a sentence or two.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// A page about it (https).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub about_url: Option<String>,
    /// `crawler` or `fetcher`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<Trigger>,
    /// The User-Agent it sends (the card's `expected-user-agent`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_agent: Option<String>,
    /// The public address ranges its requests leave from (CIDR).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ip_ranges: Vec<String>,
}

/// `range` parsed, refused when it is not a CIDR range (or one address) of public space.
pub(crate) fn public_range(range: &str) -> Result<IpNet, String> {
    let net = range
        .parse::<IpNet>()
        .or_else(|_| range.parse::<IpAddr>().map(IpNet::from))
        .map_err(|_| format!("{range:?} is not an address range (CIDR, \"192.0.2.0/24\")"))?;
    // The destination guard's ranges: one list of what is never public (issue 41).
    if let Some(reason) = robots_proxy_net::guard::range_reason(&net) {
        return Err(format!(
            "{range:?} is or holds {reason} ({}), never a public egress address: only the \
             public egress ranges are disclosed",
            reason.range()
        ));
    }
    Ok(net.trunc())
}

/// Whether `text` is an absolute https URL with a host.
fn is_https(text: &str) -> bool {
    url::Url::parse(text).is_ok_and(|u| u.scheme() == "https" && u.host_str().is_some())
}

raw_section!(DisclosureSection, RawDisclosureSection, "disclosure");

/// The bounds of `[disclosure]`.
pub const DISCLOSURE_BOUNDS: &[Bound<DisclosureSection>] =
    &[count("disclosure.feed_entries", |c| wide(c.feed_entries), 1, wide(MAX_FEED_ENTRIES))];

impl TryFrom<RawDisclosureSection> for DisclosureSection {
    type Error = Problems;

    /// The bounds, what `enabled` needs, the URLs, and the crawlers. (That the key directory
    /// listener is set when `enabled` is a rule between sections, checked by the
    /// configuration.)
    fn try_from(raw: RawDisclosureSection) -> Result<Self, Problems> {
        let section = raw.0;
        let mut problems = Problems::new();
        problems.bounds(DISCLOSURE_BOUNDS, &section);
        problems.absorb(section.rules().into_iter().collect());
        problems.or_build(|| section)
    }
}

impl DisclosureSection {
    /// Every problem besides the bounds, as (key, message).
    fn rules(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut bad = |key: &str, message: String| out.push((key.to_owned(), message));
        if self.enabled {
            if self.operator.trim().is_empty() {
                bad("disclosure.operator", "must name the organisation when enabled".into());
            }
            if self.contact.trim().is_empty() {
                bad("disclosure.contact", "must be set when enabled (mailto: or https:)".into());
            }
            if self.public_url.is_empty() {
                bad("disclosure.public_url", "must be set when enabled (https://…)".into());
            }
        }
        let mailto = self.contact.strip_prefix("mailto:").is_some_and(|a| a.contains('@'));
        if !(self.contact.is_empty() || is_https(&self.contact) || mailto) {
            bad(
                "disclosure.contact",
                format!("{:?} is neither an https URL nor a mailto: address", self.contact),
            );
        }
        if let Some(url) = &self.operator_url {
            if !is_https(url) {
                bad("disclosure.operator_url", format!("{url:?} is not an https URL"));
            }
        }
        if !self.public_url.is_empty() {
            let ok = url::Url::parse(&self.public_url).is_ok_and(|u| {
                u.scheme() == "https"
                    && u.host_str().is_some()
                    && u.path() == "/"
                    && u.query().is_none()
                    && u.fragment().is_none()
            });
            if !ok {
                bad(
                    "disclosure.public_url",
                    format!(
                        "{:?} is not an https origin (\"https://bots.example.com\", no path)",
                        self.public_url
                    ),
                );
            }
        }
        for (i, c) in self.crawlers.iter().enumerate() {
            let key = |field: &str| format!("disclosure.crawlers[{}].{field}", i + 1);
            match c.token.as_deref() {
                None => out.push((key("token"), "every crawler needs its product token".into())),
                Some(t) => {
                    if let Err(e) = ProductToken::new(t) {
                        out.push((key("token"), format!("{t:?}: {e}")));
                    }
                    let same = |o: &CrawlerEntry| {
                        o.token.as_deref().is_some_and(|o| o.eq_ignore_ascii_case(t))
                    };
                    if self.crawlers[..i].iter().any(same) {
                        out.push((key("token"), format!("{t} is described twice")));
                    }
                }
            }
            if let Some(url) = &c.about_url {
                if !is_https(url) {
                    out.push((key("about_url"), format!("{url:?} is not an https URL")));
                }
            }
            if let Some(ua) = &c.user_agent {
                if ua.trim().is_empty() || http::HeaderValue::from_str(ua).is_err() {
                    out.push((key("user_agent"), format!("{ua:?} is not a User-Agent value")));
                }
            }
            for range in &c.ip_ranges {
                if let Err(why) = public_range(range) {
                    out.push((key("ip_ranges"), why));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_ranges_are_refused_and_public_ones_kept() {
        assert!(public_range("10.1.0.0/16").is_err());
        assert!(public_range("8.0.0.0/4").is_err(), "holds 10.0.0.0/8");
        assert!(public_range("fd00::1").is_err());
        assert!(public_range("nonsense").is_err());
        // Issue 41 (review finding 10): the guard's list, IPv4-mapped space included.
        for internal in
            ["::ffff:10.0.0.0/104", "198.18.0.0/15", "224.0.0.0/4", "240.0.0.0/8", "::/0"]
        {
            let e = public_range(internal).unwrap_err();
            assert!(e.contains("never a public egress address"), "{internal}: {e}");
        }
        assert!(public_range("::ffff:8.8.8.0/120").is_ok());
        assert_eq!(public_range("192.0.2.7/24").unwrap().to_string(), "192.0.2.0/24");
        assert_eq!(public_range("2001:db8::1").unwrap().to_string(), "2001:db8::1/128");
    }

    #[test]
    fn problems_name_the_key() {
        let section = DisclosureSection {
            enabled: true,
            contact: "http://example.com".into(),
            public_url: "http://bots.example.com".into(),
            operator_url: Some("ftp://x".into()),
            crawlers: vec![CrawlerEntry {
                token: None,
                name: None,
                description: None,
                about_url: Some("http://x.example".into()),
                trigger: None,
                user_agent: None,
                ip_ranges: vec!["192.168.0.0/24".into()],
            }],
            ..DisclosureSection::default()
        };
        let checked = DisclosureSection::try_from(RawDisclosureSection(section));
        let keys: Vec<String> =
            checked.unwrap_err().into_vec().into_iter().map(|(k, _)| k).collect();
        for key in [
            "disclosure.operator",
            "disclosure.contact",
            "disclosure.operator_url",
            "disclosure.public_url",
            "disclosure.crawlers[1].token",
            "disclosure.crawlers[1].about_url",
            "disclosure.crawlers[1].ip_ranges",
        ] {
            assert!(keys.iter().any(|k| k == key), "{key} not in {keys:?}");
        }
        assert!(DisclosureSection::try_from(RawDisclosureSection::default()).is_ok());
    }
}
