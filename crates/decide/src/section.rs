//! `[policy]`: where the product token comes from, the policy's own section. A bad header name
//! or token is an error naming the key when the file is read; the rest is checked by
//! `TryFrom<RawPolicySection>`.

use std::fmt;

use http::HeaderName;
use serde::{Deserialize, Serialize};

use robots_proxy_engine::ProductToken;
use robots_proxy_units::{raw_section, Problems};

/// Where the product token comes from.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum TokenSource {
    /// The request header named by `policy.token_header`, stripped before forwarding.
    Header,
    /// The User-Agent header, by the engine's heuristic.
    UserAgent,
    /// `policy.default_token`.
    Default,
}

impl TokenSource {
    /// The name used in the configuration.
    pub fn name(self) -> &'static str {
        match self {
            TokenSource::Header => "header",
            TokenSource::UserAgent => "user-agent",
            TokenSource::Default => "default",
        }
    }
}

/// `[policy]`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(remote = "Self", default, deny_unknown_fields)]
pub struct PolicySection {
    /// Sources of the product token, tried in order; the first that gives one wins.
    pub token_sources: Vec<TokenSource>,
    /// The request header that names the token explicitly.
    pub token_header: TokenHeader,
    /// The token used when no other source gives one (none: only `*` groups apply).
    #[serde(with = "optional_token")]
    pub default_token: Option<ProductToken>,
    /// Which origins also get the case-folded reading.
    pub fold_case: FoldCase,
    /// Sites (`host` or `host:port`) whose paths are read case-insensitively, whatever their
    /// robots.txt response says.
    pub fold_case_sites: Vec<String>,
    /// `enforce` (the default) or `report`: refusals on policy grounds are only reported.
    pub mode: super::report::PolicyMode,
    /// Product tokens in report mode under an enforcing gateway.
    pub report_tokens: Vec<String>,
    /// Users (`access.users_file`) in report mode under an enforcing gateway.
    pub report_users: Vec<String>,
}

/// `policy.fold_case`: which origins get the case-folded reading (paths and patterns compared
/// with ASCII letters folded).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum FoldCase {
    /// Origins whose robots.txt response names IIS, ASP.NET or Express, and the sites of
    /// `policy.fold_case_sites`.
    #[default]
    Detect,
    /// Only the sites of `policy.fold_case_sites`.
    Listed,
    /// Every origin.
    All,
}

impl Default for PolicySection {
    fn default() -> Self {
        PolicySection {
            token_sources: vec![TokenSource::Header, TokenSource::UserAgent, TokenSource::Default],
            token_header: TokenHeader::default_header(),
            default_token: None,
            fold_case: FoldCase::Detect,
            fold_case_sites: Vec::new(),
            mode: super::report::PolicyMode::Enforce,
            report_tokens: Vec::new(),
            report_users: Vec::new(),
        }
    }
}

raw_section!(PolicySection, RawPolicySection, "policy");

impl TryFrom<RawPolicySection> for PolicySection {
    type Error = Problems;

    /// The token sources, the token header against the headers the proxy strips, the sites
    /// and the report tokens and users.
    fn try_from(raw: RawPolicySection) -> Result<Self, Problems> {
        let pol = raw.0;
        let mut problems = Problems::new();
        problems.need(!pol.token_sources.is_empty(), "policy.token_sources", || {
            "must name at least one of: header, user-agent, default".into()
        });
        let mut seen = Vec::new();
        for source in &pol.token_sources {
            problems.need(!seen.contains(source), "policy.token_sources", || {
                format!("{} is listed twice", source.name())
            });
            seen.push(*source);
        }
        // Parsed already (a header name, a product token); what is left is how they combine
        // with the rest of the request.
        problems.need(
            !RESERVED_HEADERS.contains(&pol.token_header.name().as_str()),
            "policy.token_header",
            || {
                format!(
                    "{:?} cannot be used: the proxy strips this header before forwarding, and the \
                 request needs it",
                    pol.token_header.to_string()
                )
            },
        );
        for site in &pol.fold_case_sites {
            problems.need(is_site(site), "policy.fold_case_sites", || {
                format!(
                    "{site:?} is not a site: write a host or host:port, such as \
                         \"shop.example.com\" or \"10.0.0.5:8080\""
                )
            });
        }
        for token in &pol.report_tokens {
            problems.need(ProductToken::new(token).is_ok(), "policy.report_tokens", || {
                format!(
                    "{token:?} is not a product token (letters, digits, \"_\", \"-\" and \".\", \
                     in words separated by single spaces)"
                )
            });
        }
        for user in &pol.report_users {
            problems.need(!user.trim().is_empty(), "policy.report_users", || {
                "a user name must not be empty".into()
            });
        }
        problems.or_build(|| pol)
    }
}

/// Whether `s` is a host or `host:port` as `policy.fold_case_sites` takes them: nothing more
/// (no scheme, user, path or query), the host normalised as a request's
/// ([`robots_proxy_authority::SiteName`]).
fn is_site(s: &str) -> bool {
    robots_proxy_authority::SiteName::parse(s).is_ok()
}

/// Headers that `policy.token_header` must not name: stripping them before forwarding would
/// break the request or hide it (hop-by-hop and framing headers, `Host`, `User-Agent`, `Via`).
const RESERVED_HEADERS: &[&str] = &[
    "connection",
    "content-length",
    "content-type",
    "host",
    "keep-alive",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "user-agent",
    "via",
];

/// `policy.token_header`: a parsed header name, shown as the operator wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenHeader {
    name: HeaderName,
    written: String,
}

impl TokenHeader {
    /// The default, `X-Robots-Product-Token`.
    fn default_header() -> TokenHeader {
        TokenHeader {
            name: HeaderName::from_static("x-robots-product-token"),
            written: "X-Robots-Product-Token".to_owned(),
        }
    }

    /// The header name.
    pub fn name(&self) -> &HeaderName {
        &self.name
    }
}

impl std::str::FromStr for TokenHeader {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        HeaderName::from_bytes(s.as_bytes())
            .map(|name| TokenHeader { name, written: s.to_owned() })
            .map_err(|_| format!("{s:?} is not a valid header name"))
    }
}

impl fmt::Display for TokenHeader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.written)
    }
}

impl PartialEq<&str> for TokenHeader {
    fn eq(&self, other: &&str) -> bool {
        self.name.as_str().eq_ignore_ascii_case(other)
    }
}

impl Serialize for TokenHeader {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.written)
    }
}

impl<'de> Deserialize<'de> for TokenHeader {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// `policy.default_token` as a product token, written as its string.
mod optional_token {
    use serde::{Deserialize, Deserializer, Serializer};

    use robots_proxy_engine::ProductToken;

    pub(super) fn serialize<S: Serializer>(
        token: &Option<ProductToken>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match token {
            Some(token) => s.serialize_some(token.as_str()),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<ProductToken>, D::Error> {
        let text = Option::<String>::deserialize(d)?;
        text.map(|t| ProductToken::new(&t).map_err(serde::de::Error::custom)).transpose()
    }
}
