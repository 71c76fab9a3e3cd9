//! `[signing]`: Web Bot Auth signatures, the signer's own section. A bad key name, product
//! token, agent URL or timestamp is an error naming the key when the file is read;
//! `TryFrom<RawSigningSection>` adds the bounds and the rules between entries (a key an
//! identity names must be listed, windows must be in order).

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::keys::KeyName;
use robots_proxy_engine::ProductToken;
use robots_proxy_units::bounds::{because, duration, Bound, DAY, POSITIVE};
use robots_proxy_units::{raw_section, Problems};

/// The longest signature lifetime accepted: the draft recommends at most 24 hours.
pub(crate) const MAX_LIFETIME: Duration = Duration::from_secs(24 * 3600);

/// `[signing]`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self", default, deny_unknown_fields)]
pub struct SigningSection {
    /// `expires` − `created` of every request signature.
    #[serde(with = "humantime_serde")]
    pub lifetime: Duration,
    /// The components every request signature covers, besides the `Signature-Agent` member
    /// (always covered); `@authority` is covered even when not listed.
    pub components: Vec<Component>,
    /// 0 s (the default): every request gets its own signature, with a fresh `nonce`.
    /// Otherwise `created` is rounded down to a multiple of this, and a signature is reused
    /// within the window by the requests with the same values of every covered component.
    #[serde(with = "humantime_serde")]
    pub reuse: Duration,
    /// What becomes of a request that already carries `Signature` or `Signature-Input` (the
    /// client signed it): see [`ClientSignatures`]. Left at `keep`, the deprecated
    /// `keep_client_signatures = false` makes it `replace`
    /// ([`SigningSection::client_signatures`]).
    pub client_signatures: ClientSignatures,
    /// Deprecated alias of `client_signatures`: `true` is `keep`, `false` is `replace`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keep_client_signatures: Option<bool>,
    /// Where `robots-proxy keys new` writes keys and the proxy reads them; relative paths are
    /// under `state_dir`.
    pub keys_dir: PathBuf,
    /// How long the key directory's own signatures stay valid, and how long it may be cached.
    #[serde(with = "humantime_serde")]
    pub directory_lifetime: Duration,
    /// Address of the key directory listener; unset: none.
    pub directory_listen: Option<SocketAddr>,
    /// The keys, with their validity windows (configuration file only).
    pub keys: Vec<KeyEntry>,
    /// Who is signed for, with which keys and `Signature-Agent` (configuration file only).
    pub identities: Vec<SigningIdentity>,
}

impl Default for SigningSection {
    fn default() -> Self {
        SigningSection {
            lifetime: Duration::from_secs(60),
            components: vec![Component::Method, Component::Authority, Component::Path],
            reuse: Duration::ZERO,
            client_signatures: ClientSignatures::Keep,
            keep_client_signatures: None,
            keys_dir: PathBuf::from("keys"),
            directory_lifetime: Duration::from_secs(3600),
            directory_listen: None,
            keys: Vec::new(),
            identities: Vec::new(),
        }
    }
}

/// What the proxy does with a request the client signed already (`signing.client_signatures`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientSignatures {
    /// Forwarded as it is, without the proxy's signature.
    #[default]
    Keep,
    /// The client's `Signature`, `Signature-Input` and `Signature-Agent` are replaced by the
    /// proxy's.
    Replace,
    /// The proxy adds its own signature under its own label beside the client's, covering the
    /// client's `signature`, `signature-input` and `signature-agent` members and every component
    /// the client's signature covers (draft-ietf-webbotauth-httpsig-protocol, "Multiple
    /// Signatures"); a client signature that cannot be covered is left as it is and the proxy
    /// adds its ordinary signature beside it ([`super::cosign`]).
    Cosign,
}

impl ClientSignatures {
    /// The value, as the configuration writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            ClientSignatures::Keep => "keep",
            ClientSignatures::Replace => "replace",
            ClientSignatures::Cosign => "cosign",
        }
    }
}

/// One entry of `signing.keys`: a key file and when it is used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyEntry {
    /// The key's name: the file `NAME.pem` in `keys_dir`.
    pub name: KeyName,
    /// The key signs from this time on. Unset: from the start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sign_from: Option<Timestamp>,
    /// The key signs until this time (retired after). Unset: no end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sign_until: Option<Timestamp>,
    /// The key is listed in the directory until this time. Unset: as long as it is configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publish_until: Option<Timestamp>,
}

impl KeyEntry {
    /// Whether the key may sign at `now`.
    pub(crate) fn signs_at(&self, now: SystemTime) -> bool {
        self.sign_from.is_none_or(|t| t.0 <= now) && self.sign_until.is_none_or(|t| now < t.0)
    }

    /// Whether the directory lists the key at `now`.
    pub(crate) fn published_at(&self, now: SystemTime) -> bool {
        self.publish_until.is_none_or(|t| now < t.0)
    }
}

/// One entry of `signing.identities`: a crawler the proxy signs for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SigningIdentity {
    /// The product token (case-insensitive), or `*` for every request not matched otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<TokenPattern>,
    /// Or the authenticated proxy user (`access.users_file`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// With `token`: the authenticated users this identity signs for (with the users the users
    /// file ties to its token). Empty: with `access.users_file`, only the users tied to the
    /// token; without, every request with the token.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub users: Vec<String>,
    /// Names of `signing.keys`, by preference: the first that signs at the time is used.
    pub keys: Vec<KeyName>,
    /// The `Signature-Agent`: where the organisation publishes its key directory.
    pub agent: AgentUrl,
    /// What `agent` is: an origin (`directory`, the default) or the URL of the JWK Set.
    #[serde(default, skip_serializing_if = "AgentType::is_directory")]
    pub agent_type: AgentType,
    /// With `client_signatures = "cosign"`: a JWK Set file (under `state_dir` when relative)
    /// of the client keys this identity trusts. The proxy's signature covers a client's only
    /// when it verifies with one of them; unset: none is covered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_keys: Option<PathBuf>,
}

/// The form of an identity's `Signature-Agent` member (`agent_type`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentType {
    /// `agent` is an origin (scheme, host, optional port; no path): a verifier fetches
    /// `/.well-known/http-message-signatures-directory` from it.
    #[default]
    Directory,
    /// `agent` is the full https URL of the JWK Set, fetched as it is.
    JwksUri,
}

impl AgentType {
    fn is_directory(&self) -> bool {
        *self == AgentType::Directory
    }
}

/// A component a request signature may cover (`signing.components`, RFC 9421 §2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Component {
    /// `@method`
    Method,
    /// `@authority`
    Authority,
    /// `@path`
    Path,
    /// `@query`
    Query,
    /// `@target-uri`
    TargetUri,
}

impl Component {
    /// The component identifier, as `Signature-Input` names it.
    pub fn name(self) -> &'static str {
        match self {
            Component::Method => "@method",
            Component::Authority => "@authority",
            Component::Path => "@path",
            Component::Query => "@query",
            Component::TargetUri => "@target-uri",
        }
    }
}

impl FromStr for Component {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        [
            Component::Method,
            Component::Authority,
            Component::Path,
            Component::Query,
            Component::TargetUri,
        ]
        .into_iter()
        .find(|c| c.name() == s)
        .ok_or_else(|| {
            format!(
                "{s:?} is not a component the proxy covers (\"@method\", \"@authority\", \
                 \"@path\", \"@query\", \"@target-uri\")"
            )
        })
    }
}

impl fmt::Display for Component {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A product token, or `*` for any request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenPattern {
    /// Every request, whatever its token (and one without).
    Any,
    /// Requests for this token.
    Token(ProductToken),
}

impl FromStr for TokenPattern {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "*" {
            return Ok(TokenPattern::Any);
        }
        ProductToken::new(s).map(TokenPattern::Token).map_err(|e| e.to_string())
    }
}

impl fmt::Display for TokenPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenPattern::Any => f.write_str("*"),
            TokenPattern::Token(t) => f.write_str(t.as_str()),
        }
    }
}

/// An `http` or `https` URL that fits in a structured-field string (printable ASCII), as the
/// `Signature-Agent` dictionary member carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentUrl(String);

impl AgentUrl {
    /// The URL as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Its authority (scheme, host, port), normalised; `None` if the host is not one the
    /// proxy can name (the URL itself was checked when it was read).
    pub fn authority(&self) -> Option<robots_proxy_authority::Authority> {
        let url = url::Url::parse(&self.0).ok()?;
        let scheme = match url.scheme() {
            "https" => robots_proxy_authority::Scheme::Https,
            _ => robots_proxy_authority::Scheme::Http,
        };
        let host_port = format!("{}:{}", url.host_str()?, url.port_or_known_default()?);
        robots_proxy_authority::Authority::from_host_port(scheme, &host_port).ok()
    }
}

impl AgentUrl {
    /// Whether the URL has the form `agent_type` wants: an origin for `directory` (RFC 6454:
    /// scheme, host and a port other than the default, nothing else, as written), a full
    /// https URL for `jwks_uri`.
    pub fn fits(&self, agent_type: AgentType) -> Result<(), String> {
        let url = url::Url::parse(&self.0).map_err(|e| format!("{:?}: {e}", self.0))?;
        match agent_type {
            AgentType::Directory => {
                let origin = url.origin().ascii_serialization();
                if origin != self.0 {
                    return Err(format!(
                        "{:?} is not an origin (agent_type \"directory\"): write {origin:?} \
                         (scheme and host, a port only if not the default, no path), or set \
                         agent_type = \"jwks_uri\" for the URL of a JWK Set",
                        self.0
                    ));
                }
            }
            AgentType::JwksUri => {
                if url.scheme() != "https" || url.fragment().is_some() {
                    return Err(format!(
                        "{:?}: agent_type \"jwks_uri\" takes the https URL of the JWK Set, \
                         without a fragment",
                        self.0
                    ));
                }
            }
        }
        Ok(())
    }
}

impl FromStr for AgentUrl {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let url = url::Url::parse(s).map_err(|e| format!("{s:?} is not a URL: {e}"))?;
        if !matches!(url.scheme(), "https" | "http") || url.host_str().is_none() {
            return Err(format!("{s:?}: the Signature-Agent must be an https:// (or http://) URL"));
        }
        if sfv::StringRef::from_str(s).is_err() {
            return Err(format!("{s:?}: only printable ASCII fits in Signature-Agent"));
        }
        // Sent in Signature-Agent to every origin and published in the disclosure: a user
        // name or password in it would be handed to everyone (issue 41).
        if !url.username().is_empty() || url.password().is_some() {
            return Err(format!(
                "{:?}: a Signature-Agent URL must not carry a user name or password (it is sent \
                 to every origin and published)",
                format!("{}://…@{}", url.scheme(), url.host_str().unwrap_or_default())
            ));
        }
        Ok(AgentUrl(s.to_owned()))
    }
}

/// A point in time, written in RFC 3339 (`2026-12-01T00:00:00Z`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Timestamp(pub SystemTime);

impl FromStr for Timestamp {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        humantime::parse_rfc3339_weak(s)
            .map(Timestamp)
            .map_err(|e| format!("{s:?} is not an RFC 3339 time like 2026-12-01T00:00:00Z: {e}"))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", humantime::format_rfc3339_seconds(self.0))
    }
}

/// Serialised as the text it was parsed from, parsed on the way in.
macro_rules! as_text {
    ($($t:ty),*) => {$(
        impl Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
            }
        }
    )*};
}
as_text!(TokenPattern, AgentUrl, Timestamp, Component);

impl fmt::Display for AgentUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl SigningSection {
    /// For each identity whose keys' windows leave it without a signing key at some time after
    /// `now` while a key signs again later (or from some time on for good): the identity
    /// (its token or user) and the first such span, `(from, until)` (`None`: for good).
    /// Requests of that identity then leave unsigned (issue 41).
    pub fn key_gaps(&self, now: SystemTime) -> Vec<(String, SystemTime, Option<SystemTime>)> {
        let mut out = Vec::new();
        for who in &self.identities {
            let mut windows: Vec<(SystemTime, Option<SystemTime>)> = who
                .keys
                .iter()
                .filter_map(|name| self.keys.iter().find(|k| &k.name == name))
                .map(|k| {
                    (k.sign_from.map_or(SystemTime::UNIX_EPOCH, |t| t.0), k.sign_until.map(|t| t.0))
                })
                .filter(|(_, until)| until.is_none_or(|u| u > now))
                .collect();
            let name = match (&who.token, &who.user) {
                (Some(t), _) => t.to_string(),
                (None, Some(u)) => format!("user {u}"),
                _ => String::new(),
            };
            if windows.is_empty() {
                if !who.keys.is_empty() {
                    out.push((name, now, None));
                }
                continue;
            }
            windows.sort_by_key(|w| w.0);
            // Sweep from `now`: `covered` is how far the windows reach without a break.
            let mut covered = Some(now);
            for (from, until) in windows {
                let Some(reach) = covered else { break };
                if from > reach {
                    break;
                }
                covered = until.map(|u| reach.max(u));
            }
            if let Some(reach) = covered {
                let next = who
                    .keys
                    .iter()
                    .filter_map(|name| self.keys.iter().find(|k| &k.name == name))
                    .filter_map(|k| k.sign_from.map(|t| t.0))
                    .filter(|t| *t > reach)
                    .min();
                out.push((name, reach, next));
            }
        }
        out
    }

    /// `client_signatures`; left at `keep` (the default), what the deprecated
    /// `keep_client_signatures` says (`true`: `keep`, `false`: `replace`).
    pub fn client_signatures(&self) -> ClientSignatures {
        match (self.client_signatures, self.keep_client_signatures) {
            (ClientSignatures::Keep, Some(false)) => ClientSignatures::Replace,
            (chosen, _) => chosen,
        }
    }

    /// Every rule broken besides the bounds, as (key, message): how values relate.
    fn rules(&self) -> Vec<(&'static str, String)> {
        let mut bad = Vec::new();
        if self.reuse >= self.lifetime {
            bad.push((
                "signing.reuse",
                format!(
                    "{} is not shorter than signing.lifetime ({}): a reused signature would \
                     reach the origin expired",
                    humantime::format_duration(self.reuse),
                    humantime::format_duration(self.lifetime)
                ),
            ));
        }
        // `keep` is the default: with it, the alias decides (`false` means `replace`).
        if let (new, Some(old)) = (self.client_signatures, self.keep_client_signatures) {
            let same = matches!(
                (new, old),
                (ClientSignatures::Keep, _) | (ClientSignatures::Replace, false)
            );
            if !same {
                bad.push((
                    "signing.client_signatures",
                    format!(
                        "{:?} contradicts signing.keep_client_signatures = {old} (deprecated: \
                         true means \"keep\", false \"replace\"); remove \
                         signing.keep_client_signatures",
                        new.as_str()
                    ),
                ));
            }
        }
        for (i, c) in self.components.iter().enumerate() {
            if self.components[..i].contains(c) {
                bad.push(("signing.components", format!("{c} is listed more than once")));
            }
        }
        if self.keys_dir.as_os_str().is_empty() {
            bad.push(("signing.keys_dir", "must not be empty".into()));
        }
        // `serve` cannot start the key directory without a key; a reload checked here refuses
        // it too, instead of leaving the directory publishing the keys it had.
        if self.directory_listen.is_some() && self.keys.is_empty() {
            bad.push((
                "signing.keys",
                "is empty while signing.directory_listen is set: the key directory would \
                 publish no key (add keys, or leave directory_listen out)"
                    .into(),
            ));
        }
        for (i, key) in self.keys.iter().enumerate() {
            let entry = || format!("entry {} ({})", i + 1, key.name);
            if self.keys[..i].iter().any(|k| k.name == key.name) {
                bad.push(("signing.keys", format!("{}: listed more than once", entry())));
            }
            if let (Some(from), Some(until)) = (key.sign_from, key.sign_until) {
                if from >= until {
                    bad.push((
                        "signing.keys",
                        format!("{}: sign_from {from} is not before sign_until {until}", entry()),
                    ));
                }
            }
            if let Some(publish) = key.publish_until {
                // An overflowing signing.lifetime is reported on its own (SIGNING_BOUNDS).
                let last_use =
                    key.sign_until.map(|t| t.0.checked_add(self.lifetime).unwrap_or(t.0));
                if last_use.is_none_or(|t| publish.0 < t) {
                    bad.push((
                        "signing.keys",
                        format!(
                            "{}: publish_until {publish} comes before the key's last signature \
                             expires (set sign_until at least signing.lifetime earlier)",
                            entry()
                        ),
                    ));
                }
            }
        }
        for (i, who) in self.identities.iter().enumerate() {
            let entry = || format!("entry {}", i + 1);
            if who.token.is_none() == who.user.is_none() {
                bad.push((
                    "signing.identities",
                    format!("{}: give exactly one of token or user", entry()),
                ));
            }
            let same = |other: &SigningIdentity| {
                (who.token.is_some() && other.token == who.token)
                    || (who.user.is_some() && other.user == who.user)
            };
            if self.identities[..i].iter().any(same) {
                bad.push((
                    "signing.identities",
                    format!("{}: its token or user is listed twice", entry()),
                ));
            }
            if !who.users.is_empty() && (who.user.is_some() || who.token.is_none()) {
                bad.push((
                    "signing.identities",
                    format!("{}: users goes with token (a user entry names its user)", entry()),
                ));
            }
            if who.users.iter().any(|u| u.is_empty() || u.contains(':')) {
                bad.push((
                    "signing.identities",
                    format!("{}: users: a user name is not empty and has no ':'", entry()),
                ));
            }
            if let Err(why) = who.agent.fits(who.agent_type) {
                bad.push(("signing.identities", format!("{}: agent {why}", entry())));
            }
            if who.keys.is_empty() {
                bad.push(("signing.identities", format!("{}: keys is empty", entry())));
            }
            for name in &who.keys {
                if !self.keys.iter().any(|k| &k.name == name) {
                    bad.push((
                        "signing.identities",
                        format!("{}: key {name} is not listed in signing.keys", entry()),
                    ));
                }
            }
        }
        bad
    }
}

raw_section!(SigningSection, RawSigningSection, "signing");

/// The bounds of `[signing]`.
pub const SIGNING_BOUNDS: &[Bound<SigningSection>] = &[
    because(
        duration("signing.lifetime", |c| c.lifetime, POSITIVE, MAX_LIFETIME),
        "the Web Bot Auth draft recommends at most 24 hours",
    ),
    duration("signing.reuse", |c| c.reuse, Duration::ZERO, DAY),
    because(
        duration("signing.directory_lifetime", |c| c.directory_lifetime, POSITIVE, MAX_LIFETIME),
        "the Web Bot Auth draft recommends at most 24 hours",
    ),
];

impl TryFrom<RawSigningSection> for SigningSection {
    type Error = Problems;

    /// The bounds, and the rules between values and entries.
    fn try_from(raw: RawSigningSection) -> Result<Self, Problems> {
        let section = raw.0;
        let mut problems = Problems::new();
        problems.bounds(SIGNING_BOUNDS, &section);
        problems.absorb(section.rules().into_iter().collect());
        problems.or_build(|| section)
    }
}

/// The problems of `section`, as (key, message), for the tests.
#[cfg(test)]
pub(crate) fn problems_of(section: &SigningSection) -> Vec<(String, String)> {
    let checked = SigningSection::try_from(RawSigningSection(section.clone()));
    checked.err().map(Problems::into_vec).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str, from: Option<&str>, until: Option<&str>, publish: Option<&str>) -> KeyEntry {
        KeyEntry {
            name: name.parse().unwrap(),
            sign_from: from.map(|t| t.parse().unwrap()),
            sign_until: until.map(|t| t.parse().unwrap()),
            publish_until: publish.map(|t| t.parse().unwrap()),
        }
    }

    #[test]
    fn values_are_parsed() {
        assert!("https://bots.example.com".parse::<AgentUrl>().is_ok());
        assert!("ftp://bots.example.com".parse::<AgentUrl>().is_err());
        assert!("https://bots.example.com/é".parse::<AgentUrl>().is_err());
        assert!("not a url".parse::<AgentUrl>().is_err());
        // Issue 41 (review finding 10): no credentials in a URL sent to every origin.
        for secret in ["https://user:secret@x.example/j.json", "https://user@x.example"] {
            let e = secret.parse::<AgentUrl>().unwrap_err();
            assert!(e.contains("user name or password") && !e.contains("secret@"), "{e}");
        }
        assert_eq!("*".parse::<TokenPattern>().unwrap(), TokenPattern::Any);
        assert!("Bad/Token".parse::<TokenPattern>().is_err());
        assert!("Bad  Token".parse::<TokenPattern>().is_err());
        assert!("2026-12-01".parse::<Timestamp>().is_err());
        let t: Timestamp = "2026-12-01T00:00:00Z".parse().unwrap();
        assert_eq!(t.to_string(), "2026-12-01T00:00:00Z");
    }

    /// Issue 41 (review finding 11): a span with no key that signs is found, so `config check`
    /// can warn before requests leave unsigned.
    #[test]
    fn key_window_gaps_are_found() {
        let at = |t: &str| t.parse::<Timestamp>().unwrap().0;
        let section = |keys: Vec<KeyEntry>| SigningSection {
            identities: vec![toml::from_str(
                "token = \"Bot\"\nkeys = [\"a\", \"b\"]\nagent = \"https://bots.example\"",
            )
            .unwrap()],
            keys,
            ..SigningSection::default()
        };
        let now = at("2027-01-01T00:00:00Z");
        let gap = section(vec![
            key("a", None, Some("2027-01-02T00:00:00Z"), None),
            key("b", Some("2027-01-03T00:00:00Z"), None, None),
        ]);
        let found = gap.key_gaps(now);
        assert_eq!(
            found,
            [("Bot".to_owned(), at("2027-01-02T00:00:00Z"), Some(at("2027-01-03T00:00:00Z")))]
        );
        let meet = section(vec![
            key("a", None, Some("2027-01-02T00:00:00Z"), None),
            key("b", Some("2027-01-02T00:00:00Z"), None, None),
        ]);
        assert!(meet.key_gaps(now).is_empty());
        let ends = section(vec![key("a", None, Some("2027-01-02T00:00:00Z"), None)]);
        assert_eq!(ends.key_gaps(now), [("Bot".to_owned(), at("2027-01-02T00:00:00Z"), None)]);
        let later = section(vec![key("b", Some("2027-02-01T00:00:00Z"), None, None)]);
        assert_eq!(
            later.key_gaps(now),
            [("Bot".to_owned(), now, Some(at("2027-02-01T00:00:00Z")))]
        );
    }

    #[test]
    fn defaults_pass() {
        assert!(problems_of(&SigningSection::default()).is_empty());
    }

    #[test]
    fn rules_between_entries_are_named() {
        let section = SigningSection {
            reuse: Duration::from_secs(60),
            keys: vec![
                key("a", Some("2026-12-01T00:00:00Z"), Some("2026-11-01T00:00:00Z"), None),
                key("a", None, Some("2026-12-01T00:00:00Z"), Some("2026-12-01T00:00:30Z")),
            ],
            identities: vec![
                SigningIdentity {
                    token: Some("Bot".parse().unwrap()),
                    user: None,
                    users: vec![],
                    keys: vec!["a".parse().unwrap(), "missing".parse().unwrap()],
                    agent: "https://bots.example.com".parse().unwrap(),
                    agent_type: AgentType::Directory,
                    client_keys: None,
                },
                SigningIdentity {
                    token: Some("bot".parse().unwrap()),
                    user: Some("team".into()),
                    users: vec!["a:b".into()],
                    keys: vec![],
                    agent: "https://bots.example.com".parse().unwrap(),
                    agent_type: AgentType::Directory,
                    client_keys: None,
                },
            ],
            ..SigningSection::default()
        };
        let text = format!("{:?}", problems_of(&section));
        for needle in [
            "signing.reuse",
            "listed more than once",
            "is not before sign_until",
            "publish_until",
            "key missing is not listed",
            "exactly one of token or user",
            "users goes with token",
            "has no ':'",
            "keys is empty",
        ] {
            assert!(text.contains(needle), "{needle}: {text}");
        }
    }

    #[test]
    fn the_deprecated_alias_maps_to_client_signatures_and_a_contradiction_names_both_keys() {
        let with = |new: ClientSignatures, old: Option<bool>| SigningSection {
            client_signatures: new,
            keep_client_signatures: old,
            ..SigningSection::default()
        };
        use ClientSignatures::*;
        assert_eq!(with(Keep, None).client_signatures(), Keep);
        assert_eq!(with(Keep, Some(true)).client_signatures(), Keep);
        assert_eq!(with(Keep, Some(false)).client_signatures(), Replace);
        assert_eq!(with(Cosign, None).client_signatures(), Cosign);
        for (new, old) in [(Keep, true), (Keep, false), (Replace, false)] {
            assert!(problems_of(&with(new, Some(old))).is_empty(), "{new:?} {old}");
        }
        for (new, old) in [(Replace, true), (Cosign, true), (Cosign, false)] {
            let bad = problems_of(&with(new, Some(old)));
            assert_eq!(bad.len(), 1, "{bad:?}");
            assert_eq!(bad[0].0, "signing.client_signatures");
            assert!(bad[0].1.contains("signing.keep_client_signatures"), "{}", bad[0].1);
        }
        let parsed: SigningSection = toml::from_str("client_signatures = \"cosign\"").unwrap();
        assert_eq!(parsed.client_signatures(), Cosign);
        assert!(toml::from_str::<SigningSection>("client_signatures = \"both\"").is_err());
    }

    #[test]
    fn windows() {
        let k = key("a", Some("2026-12-01T00:00:00Z"), Some("2027-01-01T00:00:00Z"), None);
        let at = |t: &str| t.parse::<Timestamp>().unwrap().0;
        assert!(!k.signs_at(at("2026-11-30T23:59:59Z")));
        assert!(k.signs_at(at("2026-12-01T00:00:00Z")));
        assert!(!k.signs_at(at("2027-01-01T00:00:00Z")));
        assert!(k.published_at(at("2030-01-01T00:00:00Z")));
    }
}
