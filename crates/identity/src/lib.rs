//! Web Bot Auth: HTTP Message Signatures (RFC 9421) on requests that leave for origins, for the
//! crawlers the organisation signs for (draft-ietf-webbotauth-httpsig-protocol), and the key
//! directory that lets sites check them (`/.well-known/http-message-signatures-directory`).
//!
//! A signed request carries three fields:
//!
//! ```text
//! Signature-Agent: sig1="https://bots.example.com"
//! Signature-Input: sig1=("@method" "@authority" "@path" "signature-agent";key="sig1");
//!                  created=1764046800;expires=1764046860;nonce="…";keyid="poqk…r0U";
//!                  alg="ed25519";tag="web-bot-auth"
//! Signature: sig1=:base64 of the Ed25519 signature:
//! ```
//!
//! `Signature-Agent` is a structured-field dictionary, and the covered component names its
//! member (`"signature-agent";key="sig1"`): the form of the current drafts and of Cloudflare's
//! test vectors, which the `web-bot-auth` crate verifies.
//!
//! The covered components are `signing.components` (by default `@method`, `@authority`,
//! `@path`; [`request`]). By default every request gets its own signature, with a fresh
//! `nonce`: the draft counts "one static signature for many requests" among the deployment
//! anti-patterns. `signing.reuse` opts in to reusing a signature within a window, and then only
//! for requests with the same values of every covered component: a reused signature never
//! covers another path or method than the one it was made for.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod commands;
pub mod cosign;
pub mod directory;
pub mod keys;
pub mod request;
pub mod section;
pub mod trust;

use std::collections::HashMap;
use std::path::Path;
use std::sync::RwLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64ct::{Base64, Encoding};
use http::header::{HeaderMap, HeaderName, HeaderValue};

pub use cosign::{ClientSignature, Cosign, Left, SkipReason, Skipped};
use keys::{KeyError, SigningKey};
pub use request::Target;
use robots_proxy_authority::Authority;
use robots_proxy_engine::ProductToken;
pub use section::{
    AgentType, ClientSignatures, Component, KeyEntry, RawSigningSection, SigningIdentity,
    SigningSection, TokenPattern, SIGNING_BOUNDS,
};

/// `Signature-Agent`.
pub(crate) static SIGNATURE_AGENT: HeaderName = HeaderName::from_static("signature-agent");
/// `Signature-Input`.
pub(crate) static SIGNATURE_INPUT: HeaderName = HeaderName::from_static("signature-input");
/// `Signature`.
pub(crate) static SIGNATURE: HeaderName = HeaderName::from_static("signature");

/// The label of the proxy's signature and of its `Signature-Agent` member.
pub(crate) const LABEL: &str = "sig1";
/// The `tag` of request signatures.
pub(crate) const REQUEST_TAG: &str = "web-bot-auth";
/// The `alg` of every signature.
pub(crate) const ALG: &str = "ed25519";

/// Most cached signatures per (identity, key) before old windows are dropped (`signing.reuse`).
const CACHE_LIMIT: usize = 4096;

/// Why the signer cannot be built or cannot sign.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SigningError {
    /// A configured key cannot be loaded.
    #[error("signing key {name}: {source}")]
    Key {
        /// The key's name.
        name: String,
        /// Why.
        source: KeyError,
    },
    /// A value does not fit in a structured field or a header (not expected: every input is
    /// checked when the configuration is read).
    #[error("cannot serialise the signature fields: {0}")]
    Fields(String),
    /// `keys export --authority` named no configured agent's authority.
    #[error("{0} is not the authority of any signing.identities agent URL ({1})")]
    NotAnAgent(String, String),
    /// The time is before 1970 (a clock gone wrong).
    #[error("the clock is before 1970")]
    Clock,
    /// None of the identity's keys signs at the time (`sign_from` / `sign_until`).
    #[error("none of the identity's keys signs at this time")]
    NoKeyNow,
    /// The system's random number generator failed (for a `nonce`).
    #[error("the system's random number generator failed")]
    Random,
    /// An identity's `client_keys` file cannot be used.
    #[error(transparent)]
    ClientKeys(#[from] trust::TrustError),
}

/// A configured key with its windows.
struct Configured {
    key: SigningKey,
    entry: KeyEntry,
}

/// A crawler signed for.
struct Identity {
    token: Option<TokenPattern>,
    user: Option<String>,
    /// The users a token identity signs for (`users`); empty: see [`Identity::lends_to`].
    users: Vec<String>,
    /// Indexes into `Signer::keys`, by preference.
    keys: Vec<usize>,
    /// The whole `Signature-Agent` field: `sig1="https://…"`.
    agent_field: HeaderValue,
    /// The member's value as it appears in the signature base: `"https://…"`.
    agent_value: String,
    /// One cache per entry of `keys` (`signing.reuse` only): the values of every covered
    /// component (the base without its `@signature-params` line) → signature of the window.
    cache: Vec<RwLock<HashMap<Box<str>, Cached>>>,
    /// The client keys it trusts under `cosign` (`client_keys`); empty: none.
    client_keys: trust::TrustedKeys,
}

#[derive(Clone)]
struct Cached {
    created: u64,
    input: HeaderValue,
    signature: HeaderValue,
}

/// Signs requests for the configured identities. Built once by the composition root.
pub struct Signer {
    keys: Vec<Configured>,
    identities: Vec<Identity>,
    lifetime: u64,
    reuse: u64,
    coverage: request::Coverage,
    client_signatures: ClientSignatures,
    directory_lifetime: Duration,
    /// When the signer was built (the configuration loaded): see [`Signer::directory_modified`].
    built: SystemTime,
    /// The authorities of the identities' `agent` URLs (RFC 9110 §4.2.3 normalised): the only
    /// ones the key directory answers and signs for.
    agents: Vec<Authority>,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer")
            .field("keys", &self.keys.iter().map(|k| k.key.name().as_str()).collect::<Vec<_>>())
            .field("identities", &self.identities.len())
            .finish_non_exhaustive()
    }
}

/// Who asks for a request to be signed: what [`Signer::plan`] chooses the identity from.
#[derive(Debug, Clone, Copy, Default)]
pub struct Requester<'a> {
    /// The request's product token (the tied user's, or what the client sent).
    pub token: Option<&'a str>,
    /// The authenticated proxy user, if any.
    pub user: Option<&'a str>,
    /// The product token the users file ties that user to, if any.
    pub tied: Option<&'a ProductToken>,
    /// Whether the proxy authenticates its users (`access.users_file`): a token identity then
    /// signs only for the users tied to its token, or listed in its `users`.
    pub authenticated: bool,
}

/// What [`Signer::plan`] decided for one request.
#[derive(Clone, Copy, Default)]
pub struct Plan<'a> {
    /// The identity the request is signed for, if any.
    pub signing: Option<Signing<'a>>,
    /// The token of an identity the request named but whose signature its user may not have
    /// (not tied to that token, nor listed in its `users`): never signed as that crawler.
    pub refused: Option<&'a ProductToken>,
}

/// What [`Signer::plan`] chose for one request: the identity that signs it. The key is chosen
/// when the request is signed ([`Signing::sign`]), after robots.txt and the pace, so that a
/// key whose `sign_until` passed meanwhile is never used.
#[derive(Clone, Copy)]
pub struct Signing<'a> {
    signer: &'a Signer,
    identity: &'a Identity,
}

impl Identity {
    /// Whether this identity may sign for `who`. An identity with `users` signs only for the
    /// users it lists (and, for a token, the users tied to it). Without, a token identity signs
    /// for every request with its token when the proxy does not authenticate its users, and
    /// only for the users tied to the token when it does; `*` and user identities for anyone
    /// they match.
    fn lends_to(&self, who: &Requester<'_>) -> bool {
        let listed = who.user.is_some_and(|u| self.users.iter().any(|l| l == u));
        let tied = match (&self.token, who.tied) {
            (Some(TokenPattern::Token(t)), Some(tied)) => {
                t.as_str().eq_ignore_ascii_case(tied.as_str())
            }
            _ => false,
        };
        if !self.users.is_empty() {
            return listed || tied;
        }
        match &self.token {
            Some(TokenPattern::Token(_)) if who.authenticated => tied,
            _ => true,
        }
    }
}

impl Signer {
    /// Loads every key of `section` from its `keys_dir` (under `state_dir` when relative).
    /// `None` when no key is configured: nothing is signed or published. With keys but no
    /// identity, the keys are published (the directory) and nothing is signed.
    pub fn new(section: &SigningSection, state_dir: &Path) -> Result<Option<Signer>, SigningError> {
        if section.keys.is_empty() {
            return Ok(None);
        }
        if let Some(old) = section.keep_client_signatures {
            tracing::warn!(
                "signing.keep_client_signatures is deprecated: write signing.client_signatures = \
                 {:?} instead ({old} means that)",
                section.client_signatures().as_str()
            );
        }
        let dir = state_dir.join(&section.keys_dir);
        let mut keys = Vec::with_capacity(section.keys.len());
        for entry in &section.keys {
            let key = SigningKey::load(&entry.name, &entry.name.file_in(&dir))
                .map_err(|source| SigningError::Key { name: entry.name.to_string(), source })?;
            keys.push(Configured { key, entry: entry.clone() });
        }
        let mut identities = Vec::with_capacity(section.identities.len());
        let mut agents: Vec<Authority> = Vec::new();
        for who in &section.identities {
            if let Some(a) = who.agent.authority().filter(|a| !agents.contains(a)) {
                agents.push(a);
            }
            let indexes: Vec<usize> = who
                .keys
                .iter()
                .filter_map(|name| keys.iter().position(|k| k.key.name() == name))
                .collect();
            let agent_value = sf_string(who.agent.as_str())?;
            let agent_field = HeaderValue::from_str(&format!("{LABEL}={agent_value}"))
                .map_err(|e| SigningError::Fields(e.to_string()))?;
            let client_keys = match &who.client_keys {
                Some(path) => trust::TrustedKeys::load(&state_dir.join(path))?,
                None => trust::TrustedKeys::default(),
            };
            identities.push(Identity {
                client_keys,
                token: who.token.clone(),
                user: who.user.clone(),
                users: who.users.clone(),
                cache: indexes.iter().map(|_| RwLock::default()).collect(),
                keys: indexes,
                agent_field,
                agent_value,
            });
        }
        Ok(Some(Signer {
            keys,
            identities,
            lifetime: section.lifetime.as_secs().max(1),
            reuse: section.reuse.as_secs(),
            coverage: request::Coverage::new(&section.components),
            client_signatures: section.client_signatures(),
            directory_lifetime: section.directory_lifetime,
            built: SystemTime::now(),
            agents,
        }))
    }

    /// Whom the request of `who` is signed for, if anyone: nobody when no identity matches
    /// or may sign for `who` ([`Plan::refused`] names a token identity it may not have), or
    /// when the client signed it already and `signing.client_signatures` is `keep`. A user's
    /// identity wins over a token's, and a token's over `*`; a token identity `who` may not
    /// have leaves `*` (if it may sign for `who`). The key is chosen when signing.
    pub fn plan(&self, who: &Requester<'_>, headers: &HeaderMap) -> Plan<'_> {
        if self.client_signatures == ClientSignatures::Keep
            && (headers.contains_key(&SIGNATURE) || headers.contains_key(&SIGNATURE_INPUT))
        {
            return Plan::default();
        }
        let by_user =
            who.user.and_then(|u| self.identities.iter().find(|i| i.user.as_deref() == Some(u)));
        if let Some(identity) = by_user {
            return Plan { signing: Some(Signing { signer: self, identity }), refused: None };
        }
        let mut refused = None;
        let by_token = who.token.and_then(|t| {
            self.identities.iter().find_map(|i| match &i.token {
                Some(TokenPattern::Token(p)) if p.as_str().eq_ignore_ascii_case(t) => Some((i, p)),
                _ => None,
            })
        });
        let by_token = by_token.and_then(|(identity, token)| {
            let lends = identity.lends_to(who);
            if !lends {
                refused = Some(token);
            }
            lends.then_some(identity)
        });
        let any = || {
            self.identities
                .iter()
                .find(|i| i.token == Some(TokenPattern::Any))
                .filter(|i| i.lends_to(who))
        };
        let identity = by_token.or_else(any);
        Plan { signing: identity.map(|identity| Signing { signer: self, identity }), refused }
    }

    /// Every configured key, with whether it signs and whether it is published at `now`.
    pub fn keys(&self, now: SystemTime) -> impl Iterator<Item = (&SigningKey, bool, bool)> {
        self.keys.iter().map(move |k| (&k.key, k.entry.signs_at(now), k.entry.published_at(now)))
    }

    /// The keys the directory lists at `now`.
    pub fn published(&self, now: SystemTime) -> impl Iterator<Item = &SigningKey> {
        self.keys.iter().filter(move |k| k.entry.published_at(now)).map(|k| &k.key)
    }

    /// The `@authority` the key directory signs for when asked for `asked` (a `Host`, or
    /// `host[:port]` as given to `keys export`): the authority of a configured `agent` URL that
    /// `asked` names, normalised as RFC 9110 §4.2.3 says (lower case, the scheme's default port
    /// left out; RFC 9421 §2.2.3), or `None` when it names none of them.
    pub(crate) fn directory_authority(&self, asked: &str) -> Option<String> {
        self.agents.iter().find_map(|agent| {
            let named = Authority::from_host_port(agent.scheme(), asked).ok()?;
            (named == *agent).then(|| agent.host_header())
        })
    }

    /// The `@authority` of every configured `agent` URL (see [`Signer::directory_authority`]).
    pub(crate) fn agent_authorities(&self) -> Vec<String> {
        self.agents.iter().map(Authority::host_header).collect()
    }

    /// When the published key set last changed, at `now`: the latest `publish_until` that has
    /// passed (a key dropped), or when this signer was built (keys are added only by a
    /// configuration load), whichever is later; never after `now`. The directory's
    /// `Last-Modified`.
    pub(crate) fn directory_modified(&self, now: SystemTime) -> SystemTime {
        self.keys
            .iter()
            .filter_map(|k| k.entry.publish_until.map(|t| t.0))
            .filter(|t| *t <= now)
            .fold(self.built, SystemTime::max)
            .min(now)
    }

    /// How long the directory's signatures last.
    pub fn directory_lifetime(&self) -> Duration {
        self.directory_lifetime
    }

    /// `created` for `now`: rounded down to the reuse window.
    fn window(&self, now: SystemTime) -> Result<u64, SigningError> {
        let secs = now.duration_since(UNIX_EPOCH).map_err(|_| SigningError::Clock)?.as_secs();
        Ok(if self.reuse > 0 { secs - secs % self.reuse } else { secs })
    }

    /// Whether signatures are reused (`signing.reuse` above 0 s).
    fn reuses(&self) -> bool {
        self.reuse > 0
    }
}

impl<'a> Signing<'a> {
    /// The position in `identity.keys` of the first key that signs at `now`.
    fn slot_at(&self, now: SystemTime) -> Option<usize> {
        let keys = &self.signer.keys;
        self.identity.keys.iter().position(|&k| keys[k].entry.signs_at(now))
    }

    fn key(&self, slot: usize) -> &'a SigningKey {
        &self.signer.keys[self.identity.keys[slot]].key
    }

    /// Signs the request `target` whose header fields are `headers`, with the first of the
    /// identity's keys that signs at `now`: sets `Signature-Agent`, `Signature-Input` and
    /// `Signature`, replacing any the client sent, and answers the key id. `Ok(None)`, and
    /// `headers` unchanged, when none of its keys signs at `now`. Call it last, after every
    /// other change to the request, just before it leaves.
    ///
    /// A fresh signature (with a `nonce`) per call, unless `signing.reuse` is on: then the
    /// signature made for the same values of every covered component in the same window.
    pub fn sign(
        &self,
        target: &Target<'_>,
        headers: &mut HeaderMap,
        now: SystemTime,
    ) -> Result<Option<&'a str>, SigningError> {
        let Some(slot) = self.slot_at(now) else { return Ok(None) };
        let signer = self.signer;
        let mut base = String::with_capacity(320 + 2 * target.path_and_query.len());
        signer.coverage.lines(target, &self.identity.agent_value, &mut base);
        let created = signer.window(now)?;
        let (input, signature) = if !signer.reuses() {
            self.make(slot, &mut base, created, true)?
        } else {
            let cache = &self.identity.cache[slot];
            let hit = robots_proxy_sync::read(cache)
                .get(base.as_str())
                .filter(|c| c.created == created)
                .map(|c| (c.input.clone(), c.signature.clone()));
            match hit {
                Some(fields) => fields,
                None => {
                    let values: Box<str> = base.as_str().into();
                    let made = self.make(slot, &mut base, created, false)?;
                    let mut map = robots_proxy_sync::write(cache);
                    if map.len() >= CACHE_LIMIT {
                        map.retain(|_, c| c.created == created);
                        if map.len() >= CACHE_LIMIT {
                            map.clear();
                        }
                    }
                    let cached =
                        Cached { created, input: made.0.clone(), signature: made.1.clone() };
                    map.insert(values, cached);
                    made
                }
            }
        };
        // `insert` replaces every line of the name: the client's fields, if any, are gone.
        headers.insert(SIGNATURE_AGENT.clone(), self.identity.agent_field.clone());
        headers.insert(SIGNATURE_INPUT.clone(), input);
        headers.insert(SIGNATURE.clone(), signature);
        Ok(Some(self.key(slot).keyid()))
    }

    /// Completes `base` (the component lines) with its `@signature-params` line and signs it:
    /// the `Signature-Input` and `Signature` fields, with a fresh `nonce` when `fresh`. Each
    /// field is written once, in the buffer that becomes its bytes.
    fn make(
        &self,
        slot: usize,
        base: &mut String,
        created: u64,
        fresh: bool,
    ) -> Result<(HeaderValue, HeaderValue), SigningError> {
        let key = self.key(slot);
        let expires = created + self.signer.lifetime;
        let input = self.signer.coverage.input_field(created, expires, key.keyid(), fresh)?;
        base.push_str("\"@signature-params\": ");
        base.push_str(&input[LABEL.len() + 1..]);
        let signature = key.sign(base.as_bytes());
        let mut encoded = [0u8; 88];
        let encoded = Base64::encode(&signature, &mut encoded)
            .map_err(|e| SigningError::Fields(e.to_string()))?;
        let mut field = String::with_capacity(LABEL.len() + 3 + encoded.len());
        field.push_str(LABEL);
        field.push_str("=:");
        field.push_str(encoded);
        field.push(':');
        let value = |text: String| {
            HeaderValue::from_maybe_shared(bytes::Bytes::from(text))
                .map_err(|e| SigningError::Fields(e.to_string()))
        };
        Ok((value(input)?, value(field)?))
    }

    /// With `signing.client_signatures = "cosign"`, the client's signature of the request as
    /// it arrives (`arrival`, `headers`) at `now`, checked against the identity's
    /// `client_keys`, to sign beside it when it leaves ([`Signing::sign_beside`]); `None`
    /// otherwise, or when the client did not sign it.
    pub fn client_signature(
        &self,
        arrival: &Target<'_>,
        headers: &HeaderMap,
        now: SystemTime,
    ) -> Option<ClientSignature> {
        if self.signer.client_signatures != ClientSignatures::Cosign {
            return None;
        }
        ClientSignature::read(arrival, headers, &self.identity.client_keys, now)
    }

    /// Signs afresh, bypassing the cache: what a request costs with `signing.reuse` off
    /// (benchmarks).
    #[doc(hidden)]
    pub fn sign_uncached(&self, target: &Target<'_>, now: SystemTime) -> Result<(), SigningError> {
        let slot = self.slot_at(now).ok_or(SigningError::NoKeyNow)?;
        let mut base = String::with_capacity(320 + 2 * target.path_and_query.len());
        self.signer.coverage.lines(target, &self.identity.agent_value, &mut base);
        self.make(slot, &mut base, self.signer.window(now)?, true).map(drop)
    }
}

/// `text` as a structured-field string (`"…"`, with `\` and `"` escaped).
fn sf_string(text: &str) -> Result<String, SigningError> {
    let string = sfv::StringRef::from_str(text).map_err(|e| SigningError::Fields(e.to_string()))?;
    Ok(sfv::ItemSerializer::new().bare_item(string).finish())
}

/// The signature parameters of a key directory response (the draft's Appendix B and its test
/// vector E.2.3): `("@authority";req "content-digest");created=…;expires=…;keyid="…";`
/// `tag="http-message-signatures-directory"`, no `alg` (the vector has none; the key's JWK
/// says what it is).
pub(crate) fn directory_params(
    created: u64,
    expires: u64,
    keyid: &str,
) -> Result<String, SigningError> {
    let int = |n: u64| {
        i64::try_from(n)
            .ok()
            .and_then(|n| sfv::Integer::try_from(n).ok())
            .ok_or_else(|| SigningError::Fields(format!("{n} is out of range")))
    };
    let keyid = sfv::StringRef::from_str(keyid).map_err(|e| SigningError::Fields(e.to_string()))?;
    let mut list = sfv::ListSerializer::new();
    {
        let mut inner = list.inner_list();
        let _ = inner
            .bare_item(sfv::StringRef::constant("@authority"))
            .parameter(sfv::KeyRef::constant("req"), true);
        let _ = inner.bare_item(sfv::StringRef::constant("content-digest"));
        let _ = inner
            .finish()
            .parameter(sfv::KeyRef::constant("created"), sfv::RefBareItem::Integer(int(created)?))
            .parameter(sfv::KeyRef::constant("expires"), sfv::RefBareItem::Integer(int(expires)?))
            .parameter(sfv::KeyRef::constant("keyid"), keyid)
            .parameter(
                sfv::KeyRef::constant("tag"),
                sfv::StringRef::constant(directory::DIRECTORY_TAG),
            );
    }
    list.finish().ok_or_else(|| SigningError::Fields("empty signature parameters".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A signer over keys `old` (retired at T, listed until T + 1 h) and `new` (from T), for
    /// the user `team` and the tokens `Bot` and `*`; T is 2027-01-01T00:00:00Z.
    fn rotating(dir: &Path) -> Signer {
        for name in ["old", "new", "any"] {
            let name: keys::KeyName = name.parse().unwrap();
            SigningKey::create(&name, &name.file_in(dir)).unwrap();
        }
        let section: SigningSection = toml::from_str(&format!(
            r#"
            keys_dir = "{}"
            keys = [
              {{ name = "old", sign_until = "2027-01-01T00:00:00Z", publish_until = "2027-01-01T01:00:00Z" }},
              {{ name = "new", sign_from = "2027-01-01T00:00:00Z" }},
              {{ name = "any" }},
            ]
            identities = [
              {{ token = "*", keys = ["any"], agent = "https://any.example" }},
              {{ token = "Bot", keys = ["new", "old"], agent = "https://bots.example" }},
              {{ user = "team", keys = ["new"], agent = "https://team.example" }},
            ]
            "#,
            dir.display()
        ))
        .unwrap();
        assert!(section::problems_of(&section).is_empty(), "{:?}", section::problems_of(&section));
        Signer::new(&section, Path::new("/")).unwrap().unwrap()
    }

    fn at(t: &str) -> SystemTime {
        humantime::parse_rfc3339(t).unwrap()
    }

    /// The name of the key `signing` signs with at `now`, if any.
    fn name_at(signing: &Signing<'_>, now: SystemTime) -> Option<String> {
        signing.slot_at(now).map(|slot| signing.key(slot).name().to_string())
    }

    fn asking<'a>(token: Option<&'a str>, user: Option<&'a str>) -> Requester<'a> {
        Requester { token, user, ..Requester::default() }
    }

    #[test]
    fn rotation_follows_the_windows_and_the_directory_keeps_a_retired_key() {
        let dir = tempfile::tempdir().unwrap();
        let signer = rotating(dir.path());
        let none = HeaderMap::new();
        let plan = |token, user| signer.plan(&asking(token, user), &none).signing;
        // The key is chosen when signing: the same plan signs with `old` before T, `new` after.
        let bot = plan(Some("bot"), None).unwrap();
        assert_eq!(name_at(&bot, at("2026-12-31T23:59:59Z")).as_deref(), Some("old"));
        assert_eq!(name_at(&bot, at("2027-01-01T00:00:00Z")).as_deref(), Some("new"));
        let listed = |t| signer.published(at(t)).map(|k| k.name().to_string()).collect::<Vec<_>>();
        assert_eq!(listed("2027-01-01T00:30:00Z"), ["old", "new", "any"], "retired, still listed");
        assert_eq!(listed("2027-01-01T01:00:00Z"), ["new", "any"]);
        // The user's identity wins over the token's, the token's over "*"; the team's only key
        // does not sign yet before T: not signed at all.
        let team = plan(Some("Bot"), Some("team")).unwrap();
        assert_eq!(name_at(&team, at("2027-06-01T00:00:00Z")).as_deref(), Some("new"));
        assert_eq!(name_at(&team, at("2026-06-01T00:00:00Z")), None);
        let mut headers = HeaderMap::new();
        let t = at("2026-06-01T00:00:00Z");
        assert_eq!(team.sign(&target("a.example", "/"), &mut headers, t).unwrap(), None);
        assert!(headers.is_empty(), "no key signs: nothing is set");
        let other = plan(Some("Other"), None).unwrap();
        assert_eq!(name_at(&other, at("2027-06-01T00:00:00Z")).as_deref(), Some("any"));
        // A request the client signed is left alone (client_signatures = "keep").
        let mut signed = HeaderMap::new();
        signed.insert(&SIGNATURE_INPUT, HeaderValue::from_static("sig1=()"));
        assert!(signer.plan(&asking(Some("Bot"), None), &signed).signing.is_none());
    }

    #[test]
    fn with_a_users_file_a_token_identity_signs_only_for_its_users() {
        let dir = tempfile::tempdir().unwrap();
        let signer = rotating(dir.path());
        let none = HeaderMap::new();
        let bot: ProductToken = ProductToken::new("Bot").unwrap();
        let agent = |who: Requester<'_>| {
            let plan = signer.plan(&who, &none);
            let agent = plan.signing.map(|s| s.identity.agent_value.clone());
            (agent, plan.refused.map(|t| t.as_str().to_owned()))
        };
        let (bots, any) = (
            Some("\"https://bots.example\"".to_owned()),
            Some("\"https://any.example\"".to_owned()),
        );
        // No users file: the token is enough.
        assert_eq!(agent(asking(Some("Bot"), Some("intern"))), (bots.clone(), None));
        // A users file: the intern, not tied to Bot, gets `*`'s signature, never Bot's.
        let intern = Requester { authenticated: true, ..asking(Some("Bot"), Some("intern")) };
        assert_eq!(agent(intern), (any.clone(), Some("Bot".to_owned())));
        let tied = Requester { tied: Some(&bot), ..intern };
        assert_eq!(agent(tied), (bots, None));
        // A user's own identity wins, and nothing was refused.
        let team = Requester { user: Some("team"), ..intern };
        assert_eq!(agent(team), (Some("\"https://team.example\"".to_owned()), None));
    }

    #[test]
    fn an_identity_with_users_signs_for_them_only() {
        let dir = tempfile::tempdir().unwrap();
        let name: keys::KeyName = "k".parse().unwrap();
        SigningKey::create(&name, &name.file_in(dir.path())).unwrap();
        let section: SigningSection = toml::from_str(&format!(
            r#"
            keys_dir = "{}"
            keys = [{{ name = "k" }}]
            identities = [
              {{ token = "Bot", users = ["crawl"], keys = ["k"], agent = "https://bots.example" }},
              {{ token = "*", users = ["ops"], keys = ["k"], agent = "https://any.example" }},
            ]
            "#,
            dir.path().display()
        ))
        .unwrap();
        assert!(section::problems_of(&section).is_empty(), "{:?}", section::problems_of(&section));
        let signer = Signer::new(&section, Path::new("/")).unwrap().unwrap();
        let none = HeaderMap::new();
        let signs = |token, user, authenticated| {
            let who = Requester { authenticated, ..asking(token, user) };
            signer.plan(&who, &none).signing.map(|s| s.identity.agent_value.clone())
        };
        for authenticated in [false, true] {
            assert!(signs(Some("Bot"), Some("crawl"), authenticated).unwrap().contains("bots"));
            assert_eq!(signs(Some("Bot"), Some("other"), authenticated), None);
            assert_eq!(signs(Some("Bot"), None, authenticated), None);
            assert!(signs(Some("X"), Some("ops"), authenticated).unwrap().contains("any"));
            assert_eq!(signs(Some("X"), Some("crawl"), authenticated), None);
        }
    }

    fn target<'t>(authority: &'t str, path_and_query: &'t str) -> Target<'t> {
        Target { method: "GET", scheme: "https", authority, path_and_query }
    }

    /// `Signature-Input` and `Signature` of `signing` for `target` at `now`.
    fn fields(signing: &Signing<'_>, target: &Target<'_>, now: SystemTime) -> (String, String) {
        let mut headers = HeaderMap::new();
        signing.sign(target, &mut headers, now).unwrap().unwrap();
        let text = |name: &HeaderName| headers[name].to_str().unwrap().to_owned();
        (text(&SIGNATURE_INPUT), text(&SIGNATURE))
    }

    #[test]
    fn by_default_every_request_gets_its_own_signature() {
        let dir = tempfile::tempdir().unwrap();
        let signer = rotating(dir.path());
        let t = at("2027-06-01T00:00:01Z");
        let plan = signer.plan(&asking(Some("Bot"), None), &HeaderMap::new()).signing.unwrap();
        let first = fields(&plan, &target("a.example", "/x"), t);
        assert!(
            first.0.starts_with(
                r#"sig1=("@method" "@authority" "@path" "signature-agent";key="sig1");created=1811808001;expires=1811808061;nonce=""#
            ),
            "{}",
            first.0
        );
        // The same request at the same instant: another nonce, another signature.
        let again = fields(&plan, &target("a.example", "/x"), t);
        assert_ne!(again.0, first.0);
        assert_ne!(again.1, first.1);
    }

    #[test]
    fn a_reused_signature_never_covers_another_path_or_method() {
        let dir = tempfile::tempdir().unwrap();
        let mut signer = rotating(dir.path());
        signer.reuse = 5;
        let t = at("2027-06-01T00:00:01Z");
        let plan = signer.plan(&asking(Some("Bot"), None), &HeaderMap::new()).signing.unwrap();
        let x = target("a.example", "/x");
        let first = fields(&plan, &x, t);
        assert!(first.0.contains("created=1811808000;expires=1811808060;keyid="), "{}", first.0);
        assert!(!first.0.contains("nonce"), "a reused signature has no nonce");
        assert_eq!(fields(&plan, &x, t + Duration::from_secs(3)), first, "same 5 s window");
        assert_ne!(fields(&plan, &x, t + Duration::from_secs(5)), first, "next window");
        assert_ne!(fields(&plan, &target("b.example", "/x"), t).1, first.1, "another authority");
        assert_ne!(fields(&plan, &target("a.example", "/y"), t).1, first.1, "another path");
        let post = Target { method: "POST", ..x };
        assert_ne!(fields(&plan, &post, t).1, first.1, "another method");
        // The query is not covered by default: the same signature.
        assert_eq!(fields(&plan, &target("a.example", "/x?q=1"), t), first);
        // And the first one is still what /x gets.
        assert_eq!(fields(&plan, &x, t), first);
    }
}
