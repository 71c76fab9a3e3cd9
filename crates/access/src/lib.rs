//! Who may use the proxy: the client access list and proxy authentication.
//!
//! * **Client access list** (`access.allow_clients`): the peer address of every accepted
//!   connection must fall in one of the listed ranges (default: loopback only), or the
//!   connection is closed before anything is read from it, logged and counted.
//! * **Proxy authentication** (`access.users_file`, optional): every request, CONNECT
//!   included, must carry `Proxy-Authorization: Basic …` (RFC 9110 §11.7.2, RFC 7617) naming a
//!   user of the file with the right password, or it is answered `407` with
//!   `Proxy-Authenticate: Basic realm="robots-proxy"` (RFC 9110 §11.7.1). A user may be tied to
//!   a product token, which then decides which robots.txt group applies whatever the
//!   User-Agent says, so each team's crawler is identified by its credentials.
//!
//! # The users file
//!
//! One user per line, `name:hash[:token]`; blank lines and lines starting with `#` are ignored.
//! `hash` is an Argon2 hash in PHC string format (`$argon2id$v=19$m=19456,t=2,p=1$…`), as
//! `robots-proxy user hash NAME` prints it. Names cannot contain `:` (RFC 7617 §2).
//!
//! # Cost
//!
//! Argon2 is slow on purpose. Each distinct `Proxy-Authorization` value is verified once; the
//! result is kept in bounded maps keyed by the SHA-256 digest of the header value (never the
//! password itself): successes until unused for an hour, failures for a minute. Verifications
//! run on the blocking pool, at most as many at once as there are CPUs; at most
//! [`WAITING_PER_CPU`] per CPU more wait for their turn, and a request beyond that is answered
//! `503` (not cached, not a failure of its credentials). An unknown user is verified the same
//! way, on the same pool, against a hash made when the file is read with the parameters of its
//! costliest hash (at least the default), so response times do not reveal which names exist.
//!
//! A hash below the minimum cost ([`MIN_MEMORY_KIB`], [`MIN_COST`]) is refused when the file is
//! read, naming the line. The minimum is the weakest of the Argon2id settings the OWASP Password
//! Storage Cheat Sheet recommends (m=19456 KiB with t=2, p=1, or its equivalents down to
//! m=7168 KiB with t=5): memory of at least 7168 KiB, and memory times passes of at least
//! 35840 KiB.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use base64ct::Encoding;
use http::HeaderMap;
use ipnet::IpNet;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use robots_proxy_engine::ProductToken;

/// The realm named in `Proxy-Authenticate`.
pub const REALM: &str = "robots-proxy";

/// An address range in a configuration list: `10.0.0.0/8`, `::1/128`, or a single address
/// (`192.0.2.7`, taken as `/32` or `/128`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpRange(pub IpNet);

impl FromStr for IpRange {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if let Ok(net) = s.parse::<IpNet>() {
            return Ok(IpRange(net));
        }
        if let Ok(ip) = s.parse::<IpAddr>() {
            return Ok(IpRange(IpNet::from(ip)));
        }
        Err(format!("{s:?} is not an address range like 10.0.0.0/8 or ::1/128, nor an address"))
    }
}

impl fmt::Display for IpRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl Serialize for IpRange {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for IpRange {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// `[access]`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self", default, deny_unknown_fields)]
pub struct AccessSection {
    /// Client addresses allowed to connect; others are disconnected at once.
    pub allow_clients: Vec<IpRange>,
    /// The users file; when set, every request needs `Proxy-Authorization: Basic`.
    pub users_file: Option<PathBuf>,
    /// Destination ranges re-opened although the destination guard prohibits them by default
    /// (loopback, private, link-local, …). The proxy's own listeners stay prohibited.
    pub allow_destinations: Vec<IpRange>,
    /// The CAs (PEM bundle) that client certificates on the TLS listener are verified against;
    /// a verified certificate names the user (see [`ClientCertificate`]).
    pub client_ca: Option<PathBuf>,
    /// Whether a client of the TLS listener must present a certificate (with `client_ca`).
    pub client_certificate: ClientCertificate,
}

/// `access.client_certificate`: whether the TLS listener requires a client certificate.
///
/// A certificate that does not verify against `access.client_ca` is refused in both modes
/// (the handshake fails with a TLS alert); "optional" only lets a client send none, and then
/// `access.users_file` (if set) asks for `Proxy-Authorization` as on the plain listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ClientCertificate {
    /// A client may present a certificate or none.
    #[default]
    Optional,
    /// A client without a valid certificate is refused during the handshake.
    Required,
}

impl Default for AccessSection {
    fn default() -> Self {
        AccessSection {
            allow_clients: vec![
                IpRange(IpNet::new_assert(IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 0)), 8)),
                IpRange(IpNet::new_assert(IpAddr::V6(std::net::Ipv6Addr::LOCALHOST), 128)),
            ],
            users_file: None,
            allow_destinations: Vec::new(),
            client_ca: None,
            client_certificate: ClientCertificate::Optional,
        }
    }
}

robots_proxy_units::raw_section!(AccessSection, RawAccessSection, "access");

impl TryFrom<RawAccessSection> for AccessSection {
    type Error = robots_proxy_units::Problems;

    /// The client ranges, and the client certificates against their CAs. (`access.client_ca`
    /// against `proxy.tls_listen` is a rule between sections, checked by the configuration.)
    fn try_from(raw: RawAccessSection) -> Result<Self, Self::Error> {
        let a = raw.0;
        let mut problems = robots_proxy_units::Problems::new();
        problems.need(!a.allow_clients.is_empty(), "access.allow_clients", || {
            "must list at least one range, or no client could use the proxy (loopback: \
             127.0.0.0/8, ::1/128)"
                .into()
        });
        problems.need(
            a.client_certificate != ClientCertificate::Required || a.client_ca.is_some(),
            "access.client_certificate",
            || {
                "\"required\" needs access.client_ca, the CAs that certificates are verified \
                 against"
                    .into()
            },
        );
        problems.or_build(|| a)
    }
}

/// The client access list, checked on every accepted connection.
#[derive(Debug)]
pub struct ClientAcl {
    /// Replaced whole on a reload ([`ClientAcl::replace`]); each connection reads it once.
    allow: arc_swap::ArcSwap<Vec<IpNet>>,
    refused: AtomicU64,
}

impl ClientAcl {
    /// An access list of `allow`.
    pub fn new(allow: &[IpRange]) -> Self {
        ClientAcl {
            allow: arc_swap::ArcSwap::from_pointee(nets(allow)),
            refused: AtomicU64::new(0),
        }
    }

    /// Puts `allow` in force for connections accepted from now on (a reload); the count of
    /// refusals goes on.
    pub fn replace(&self, allow: &[IpRange]) {
        self.allow.store(std::sync::Arc::new(nets(allow)));
    }

    /// Whether a client at `ip` may use the proxy. An IPv4-mapped IPv6 peer (a dual-stack
    /// listener's IPv4 client) is judged by its IPv4 address.
    pub fn allows(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.allow.load().iter().any(|net| net.contains(&ip))
    }

    /// Counts and logs a refused connection from `peer`.
    pub fn record_refusal(&self, peer: SocketAddr) {
        let n = self.refused.fetch_add(1, Ordering::Relaxed) + 1;
        if robots_proxy_output::warn_on(n) {
            tracing::warn!(
                client = %peer,
                refused_so_far = n,
                "connection refused: client address not in access.allow_clients"
            );
        } else {
            tracing::debug!(client = %peer, "connection refused: client address not in access.allow_clients");
        }
    }

    /// Connections refused so far.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

/// The networks of `ranges`, host bits cleared.
fn nets(ranges: &[IpRange]) -> Vec<IpNet> {
    ranges.iter().map(|r| r.0.trunc()).collect()
}

/// Why the users file or a hash line cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AccessError {
    /// The file could not be read.
    #[error("access.users_file {path}: {cause}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why (not a `source`: the message already says it).
        cause: std::io::Error,
    },
    /// A line of the file is wrong.
    #[error("access.users_file {path} line {line}: {message}")]
    Line {
        /// The file.
        path: PathBuf,
        /// The line number, from 1.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The file names no user: nobody could use the proxy.
    #[error("access.users_file {0}: no users (lines `name:hash[:token]`)")]
    Empty(PathBuf),
    /// A user name that cannot be used.
    #[error("user name {0:?}: must not be empty, start with '#', or contain ':' or whitespace")]
    Name(String),
    /// A product token that cannot be used.
    #[error("product token: {0}")]
    Token(#[from] robots_proxy_engine::InvalidToken),
    /// Hashing failed.
    #[error("cannot hash the password: {0}")]
    Hash(String),
}

/// A user who proved who they are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthenticatedUser {
    /// The user name.
    pub name: String,
    /// The product token the user is tied to, if any: it decides which robots.txt group
    /// applies, before any other token source.
    pub token: Option<ProductToken>,
}

struct UserEntry {
    hash: String,
    token: Option<ProductToken>,
}

/// Why a request was not authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AuthFailure {
    /// No `Proxy-Authorization` header.
    Missing,
    /// The header is not `Basic <base64 of name:password>`.
    Malformed(&'static str),
    /// Unknown user or wrong password (not told apart, on purpose).
    Invalid {
        /// The user name given.
        user: String,
    },
    /// Too many verifications are running or waiting: the credentials were not checked.
    Busy,
}

impl fmt::Display for AuthFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AuthFailure::Missing => f.write_str("this proxy requires authentication"),
            AuthFailure::Malformed(why) => write!(f, "malformed Proxy-Authorization: {why}"),
            AuthFailure::Invalid { user } => {
                write!(f, "unknown user or wrong password for {user:?}")
            }
            AuthFailure::Busy => f.write_str(
                "too many password verifications are waiting; the credentials were not checked",
            ),
        }
    }
}

/// Checks `Proxy-Authorization` against the users file, remembering results by digest.
pub struct Authenticator {
    users: HashMap<String, UserEntry>,
    /// What an unknown user's password is verified against: a hash no password matches, with
    /// the parameters of the file's costliest hash (see [`dummy_hash`]).
    dummy: String,
    verified: moka::sync::Cache<[u8; 32], Arc<AuthenticatedUser>>,
    rejected: moka::sync::Cache<[u8; 32], String>,
    verifying: Arc<tokio::sync::Semaphore>,
    /// Verifications running or waiting for a turn, and how many may.
    pending: AtomicUsize,
    max_pending: usize,
    failures: AtomicU64,
    busy: AtomicU64,
}

/// Distinct credentials remembered (each way).
const REMEMBERED: u64 = 4096;
/// Verifications that may wait for a turn, per CPU, besides those running.
pub const WAITING_PER_CPU: usize = 16;
/// The least memory (KiB) a users-file hash may use: OWASP's weakest Argon2id setting
/// (m=7168, t=5).
pub const MIN_MEMORY_KIB: u32 = 7168;
/// The least memory (KiB) times passes a users-file hash may use: OWASP's weakest Argon2id
/// setting, m=7168 KiB × t=5 (the first one, m=19456 × t=2, is 38912).
pub const MIN_COST: u64 = 35_840;

/// Why a hash's Argon2 parameters are too weak, if they are.
fn too_cheap(params: &argon2::Params) -> Option<String> {
    let (m, t) = (params.m_cost(), params.t_cost());
    if m >= MIN_MEMORY_KIB && u64::from(m) * u64::from(t) >= MIN_COST {
        return None;
    }
    Some(format!(
        "the hash's Argon2 cost m={m},t={t},p={} is below the minimum (memory at least \
         {MIN_MEMORY_KIB} KiB and memory × passes at least {MIN_COST}, the weakest setting OWASP \
         recommends; `robots-proxy user hash` uses m=19456,t=2,p=1): hash the password again \
         with `robots-proxy user hash`",
        params.p_cost()
    ))
}

impl Authenticator {
    /// Loads the users file at `path`.
    pub fn load(path: &Path) -> Result<Self, AccessError> {
        let text = std::fs::read_to_string(path)
            .map_err(|cause| AccessError::Read { path: path.to_owned(), cause })?;
        Self::parse(&text, path)
    }

    /// Parses a users file's text; `path` is only used in error messages.
    pub fn parse(text: &str, path: &Path) -> Result<Self, AccessError> {
        let mut users = HashMap::new();
        let mut strongest = argon2::Params::default();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad =
                |message: String| AccessError::Line { path: path.to_owned(), line: i + 1, message };
            let mut fields = line.splitn(3, ':');
            let name = fields.next().unwrap_or_default().trim();
            let hash = fields.next().map(str::trim).unwrap_or_default();
            let token = fields.next().map(str::trim).filter(|t| !t.is_empty());
            if name.is_empty() || hash.is_empty() {
                return Err(bad("expected `name:hash[:token]`".to_owned()));
            }
            check_name(name).map_err(|e| bad(e.to_string()))?;
            let parsed = PasswordHash::new(hash).map_err(|e| {
                bad(format!(
                    "the hash is not a PHC string ({e}); make one with `robots-proxy user hash`"
                ))
            })?;
            if !parsed.algorithm.as_str().starts_with("argon2") {
                return Err(bad(format!(
                    "unsupported hash algorithm {:?}: only Argon2 (argon2id, argon2i, argon2d)",
                    parsed.algorithm.as_str()
                )));
            }
            let params = argon2::Params::try_from(&parsed)
                .map_err(|e| bad(format!("the hash's Argon2 parameters are invalid ({e})")))?;
            if let Some(why) = too_cheap(&params) {
                return Err(bad(why));
            }
            strongest = strongest_of(strongest, &params);
            let token = token
                .map(ProductToken::new)
                .transpose()
                .map_err(|e| bad(format!("product token: {e}")))?;
            if users.insert(name.to_owned(), UserEntry { hash: hash.to_owned(), token }).is_some() {
                return Err(bad(format!("user {name:?} is listed twice")));
            }
        }
        if users.is_empty() {
            return Err(AccessError::Empty(path.to_owned()));
        }
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        Ok(Authenticator {
            users,
            dummy: dummy_hash(&strongest),
            verified: moka::sync::Cache::builder()
                .max_capacity(REMEMBERED)
                .time_to_idle(Duration::from_secs(3600))
                .build(),
            rejected: moka::sync::Cache::builder()
                .max_capacity(REMEMBERED)
                .time_to_live(Duration::from_secs(60))
                .build(),
            verifying: Arc::new(tokio::sync::Semaphore::new(cpus)),
            pending: AtomicUsize::new(0),
            max_pending: cpus.saturating_mul(WAITING_PER_CPU + 1),
            failures: AtomicU64::new(0),
            busy: AtomicU64::new(0),
        })
    }

    /// Requests answered `503` because too many verifications were waiting.
    pub fn busy(&self) -> u64 {
        self.busy.load(Ordering::Relaxed)
    }

    /// Counts and logs a request refused for bad credentials (rate-limited like
    /// [`ClientAcl::record_refusal`]).
    pub fn record_failure(&self, client: SocketAddr, failure: &AuthFailure) {
        let n = self.failures.fetch_add(1, Ordering::Relaxed) + 1;
        if robots_proxy_output::warn_on(n) {
            tracing::warn!(client = %client, reason = %failure, failures_so_far = n, "proxy authentication failed");
        } else {
            tracing::debug!(client = %client, reason = %failure, "proxy authentication failed");
        }
    }

    /// Requests refused for bad credentials so far.
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    /// The product token the user `name` is tied to, if the file lists the user with one.
    /// For users proved otherwise (a verified client certificate on the TLS listener).
    pub fn token_of(&self, name: &str) -> Option<ProductToken> {
        self.users.get(name).and_then(|user| user.token.clone())
    }

    /// The number of users.
    pub fn len(&self) -> usize {
        self.users.len()
    }

    /// Whether there are no users (never true for a loaded file).
    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }

    /// The user a request's `Proxy-Authorization` proves, or why not.
    pub async fn authenticate(
        &self,
        headers: &HeaderMap,
    ) -> Result<Arc<AuthenticatedUser>, AuthFailure> {
        let mut values = headers.get_all(http::header::PROXY_AUTHORIZATION).iter();
        let Some(value) = values.next() else { return Err(AuthFailure::Missing) };
        if values.next().is_some() {
            return Err(AuthFailure::Malformed("more than one Proxy-Authorization header"));
        }
        let digest: [u8; 32] = Sha256::digest(value.as_bytes()).into();
        if let Some(user) = self.verified.get(&digest) {
            return Ok(user);
        }
        if let Some(user) = self.rejected.get(&digest) {
            return Err(AuthFailure::Invalid { user });
        }
        let (name, password) = basic_credentials(value.as_bytes())?;
        let entry = self.users.get(&name);
        // Known and unknown users alike: a hash string, verified on the blocking pool.
        let hash = entry.map_or(&self.dummy, |e| &e.hash).clone();
        let ok = {
            // Bounded: verifications are CPU-heavy, and so is the queue of those waiting.
            let Some(_pending) = Pending::enter(&self.pending, self.max_pending) else {
                self.busy.fetch_add(1, Ordering::Relaxed);
                return Err(AuthFailure::Busy);
            };
            // The semaphore is never closed.
            let _slot = self.verifying.acquire().await;
            let verify = move || verify_password(&password, &hash);
            tokio::task::spawn_blocking(verify).await.unwrap_or(false)
        };
        match entry {
            Some(entry) if ok => {
                let user = Arc::new(AuthenticatedUser { name, token: entry.token.clone() });
                self.verified.insert(digest, user.clone());
                Ok(user)
            }
            _ => {
                self.rejected.insert(digest, name.clone());
                Err(AuthFailure::Invalid { user: name })
            }
        }
    }
}

/// `Basic <token68>` → (name, password). The scheme is case-insensitive (RFC 9110 §11.1); the
/// credentials are UTF-8 (RFC 7617 §2.1) and the name ends at the first colon.
fn basic_credentials(value: &[u8]) -> Result<(String, String), AuthFailure> {
    let text = std::str::from_utf8(value).map_err(|_| AuthFailure::Malformed("not ASCII"))?;
    let (scheme, rest) = text
        .trim()
        .split_once(' ')
        .ok_or(AuthFailure::Malformed("expected `Basic <credentials>`"))?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return Err(AuthFailure::Malformed("only the Basic scheme is supported"));
    }
    let decoded = base64ct::Base64::decode_vec(rest.trim())
        .map_err(|_| AuthFailure::Malformed("the credentials are not base64"))?;
    let decoded = String::from_utf8(decoded)
        .map_err(|_| AuthFailure::Malformed("the credentials are not UTF-8"))?;
    let (name, password) =
        decoded.split_once(':').ok_or(AuthFailure::Malformed("the credentials have no ':'"))?;
    Ok((name.to_owned(), password.to_owned()))
}

fn verify_password(password: &str, hash: &str) -> bool {
    PasswordHash::new(hash)
        .is_ok_and(|parsed| Argon2::default().verify_password(password.as_bytes(), &parsed).is_ok())
}

/// A hash to verify unknown users' passwords against, so they cost as much as a wrong
/// password: Argon2id with `params`, a random salt and an output of zeros, which no password
/// gives. Verifying against it costs a full Argon2 run; making it costs nothing.
fn dummy_hash(params: &argon2::Params) -> String {
    let salt = SaltString::generate(&mut argon2::password_hash::rand_core::OsRng);
    let output = base64ct::Base64Unpadded::encode_string(&[0u8; 32]);
    format!(
        "$argon2id$v=19$m={},t={},p={}${}${output}",
        params.m_cost(),
        params.t_cost(),
        params.p_cost(),
        salt.as_str()
    )
}

/// The costlier of `a` and `b`: more memory × passes (the time a verification takes).
fn strongest_of(a: argon2::Params, b: &argon2::Params) -> argon2::Params {
    let cost = |p: &argon2::Params| u64::from(p.m_cost()) * u64::from(p.t_cost());
    if cost(b) > cost(&a) {
        b.clone()
    } else {
        a
    }
}

/// One verification running or waiting, counted until dropped.
struct Pending<'a>(&'a AtomicUsize);

impl<'a> Pending<'a> {
    /// Counts one in, unless `max` already are.
    fn enter(count: &'a AtomicUsize, max: usize) -> Option<Self> {
        count
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < max).then_some(n + 1))
            .ok()?;
        Some(Pending(count))
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

fn check_name(name: &str) -> Result<(), AccessError> {
    if name.is_empty()
        || name.starts_with('#')
        || name.contains(':')
        || name.chars().any(char::is_whitespace)
    {
        return Err(AccessError::Name(name.to_owned()));
    }
    Ok(())
}

/// An Argon2id hash of `password` with `params` and a random salt, as a PHC string.
pub fn hash_password(password: &str, params: &argon2::Params) -> Result<String, AccessError> {
    let salt = SaltString::generate(&mut argon2::password_hash::rand_core::OsRng);
    Argon2::new(argon2::Algorithm::Argon2id, argon2::Version::V0x13, params.clone())
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| AccessError::Hash(e.to_string()))
}

/// A users-file line for `name` with `password`, tied to `token` if given: what
/// `robots-proxy user hash` prints. Uses Argon2id with the crate's default (OWASP) cost.
pub fn hash_line(name: &str, password: &str, token: Option<&str>) -> Result<String, AccessError> {
    check_name(name)?;
    let token = token.map(ProductToken::new).transpose()?;
    let hash = hash_password(password, &argon2::Params::default())?;
    Ok(match token {
        Some(token) => format!("{name}:{hash}:{}", token.as_str()),
        None => format!("{name}:{hash}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The least cost a users file accepts (OWASP's m=7168, t=5).
    fn cheap(password: &str) -> String {
        hash_password(password, &argon2::Params::new(MIN_MEMORY_KIB, 5, 1, None).unwrap()).unwrap()
    }

    fn header(name: &str, password: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        let value = base64ct::Base64::encode_string(format!("{name}:{password}").as_bytes());
        h.insert(http::header::PROXY_AUTHORIZATION, format!("Basic {value}").parse().unwrap());
        h
    }

    #[test]
    fn ranges_parse_with_or_without_prefix() {
        assert_eq!("10.0.0.0/8".parse::<IpRange>().unwrap().to_string(), "10.0.0.0/8");
        assert_eq!("192.0.2.7".parse::<IpRange>().unwrap().to_string(), "192.0.2.7/32");
        assert_eq!("::1".parse::<IpRange>().unwrap().to_string(), "::1/128");
        let err = "10.0.0.0/33".parse::<IpRange>().unwrap_err();
        assert!(err.contains("not an address range"), "{err}");
        assert!("example.com".parse::<IpRange>().is_err());
    }

    #[test]
    fn default_access_list_is_loopback_only() {
        let acl = ClientAcl::new(&AccessSection::default().allow_clients);
        assert!(acl.allows("127.0.0.1".parse().unwrap()));
        assert!(acl.allows("127.9.9.9".parse().unwrap()));
        assert!(acl.allows("::1".parse().unwrap()));
        assert!(acl.allows("::ffff:127.0.0.1".parse().unwrap()));
        assert!(!acl.allows("10.0.0.1".parse().unwrap()));
        assert!(!acl.allows("::ffff:10.0.0.1".parse().unwrap()));
        assert!(!acl.allows("2001:db8::1".parse().unwrap()));
    }

    #[test]
    fn users_file_errors_name_the_line() {
        let path = Path::new("users");
        let hash = cheap("pw");
        let cases = [
            ("alice\n", "line 1: expected"),
            ("# c\n\nalice:nothash\n", "line 3: the hash is not a PHC string"),
            (&format!("alice:{hash}\nalice:{hash}\n"), "line 2: user \"alice\" is listed twice"),
            (&format!("alice:{hash}:bad token!\n"), "line 1: product token"),
            ("bob:$2b$12$abcdefghijklmnopqrstuuN0Zn2x0s7cY7n0p1W0kq2V6hjX8mXy\n", "line 1:"),
            ("# only comments\n", "no users"),
        ];
        for (text, want) in cases {
            let err = Authenticator::parse(text, path).err().expect(text).to_string();
            assert!(err.contains(want), "{text:?}: {err}");
        }
    }

    #[test]
    fn hashes_below_the_minimum_cost_are_refused_naming_the_line() {
        let path = Path::new("users");
        let weak =
            |m, t| hash_password("pw", &argon2::Params::new(m, t, 1, None).unwrap()).unwrap();
        for (m, t) in [(8, 1), (19456, 1), (4096, 10), (7168, 4)] {
            let text = format!("# users\nalice:{}\nbob:{}\n", cheap("pw"), weak(m, t));
            let err = Authenticator::parse(&text, path).err().expect("refused").to_string();
            assert!(err.contains("users line 3"), "{err}");
            assert!(err.contains(&format!("m={m},t={t},p=1 is below the minimum")), "{err}");
        }
        // OWASP's settings are accepted.
        for (m, t) in [(19456, 2), (47104, 1), (12288, 3), (9216, 4), (7168, 5)] {
            assert!(Authenticator::parse(&format!("a:{}\n", weak(m, t)), path).is_ok(), "{m} {t}");
        }
    }

    #[test]
    fn unknown_users_are_verified_against_a_hash_as_costly_as_the_costliest_user() {
        let strong = hash_password("pw", &argon2::Params::new(32768, 3, 1, None).unwrap()).unwrap();
        let text = format!("a:{}\nb:{strong}\n", cheap("pw"));
        let auth = Authenticator::parse(&text, Path::new("u")).unwrap();
        let dummy = PasswordHash::new(&auth.dummy).unwrap();
        let params = argon2::Params::try_from(&dummy).unwrap();
        assert_eq!((params.m_cost(), params.t_cost(), params.p_cost()), (32768, 3, 1));
        assert!(!verify_password("", &auth.dummy) && !verify_password("pw", &auth.dummy));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn verifications_waiting_are_bounded() {
        let text = format!("alice:{}\n", cheap("s3cret"));
        let mut auth = Authenticator::parse(&text, Path::new("users")).unwrap();
        auth.max_pending = 1;
        let auth = Arc::new(auth);
        // Every verification slot taken: the next one waits.
        let slots = auth.verifying.available_permits() as u32;
        let held = auth.verifying.clone().acquire_many_owned(slots).await.unwrap();
        let waiting = {
            let auth = auth.clone();
            tokio::spawn(async move { auth.authenticate(&header("alice", "s3cret")).await })
        };
        for _ in 0..1000 {
            if auth.pending.load(Ordering::Acquire) == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(auth.pending.load(Ordering::Acquire), 1, "one waits");
        // One more is turned away at once, its credentials neither checked nor remembered.
        let mallory = header("mallory", "x");
        let busy = tokio::time::timeout(Duration::from_secs(10), auth.authenticate(&mallory)).await;
        assert_eq!(busy.ok(), Some(Err(AuthFailure::Busy)), "turned away, not queued");
        assert_eq!(auth.busy(), 1);
        drop(held);
        assert_eq!(waiting.await.unwrap().unwrap().name, "alice");
        let later = auth.authenticate(&header("mallory", "x")).await;
        assert!(matches!(later, Err(AuthFailure::Invalid { .. })), "{later:?}");
    }

    #[tokio::test]
    async fn basic_credentials_are_verified_once_and_remembered() {
        let text = format!("alice:{}:AliceBot\nbob:{}\n", cheap("s3cret"), cheap("hunter2"));
        let auth = Authenticator::parse(&text, Path::new("users")).unwrap();
        assert_eq!(auth.len(), 2);
        let alice = auth.authenticate(&header("alice", "s3cret")).await.unwrap();
        assert_eq!(alice.name, "alice");
        assert_eq!(alice.token.as_ref().map(|t| t.as_str()), Some("AliceBot"));
        let again = auth.authenticate(&header("alice", "s3cret")).await.unwrap();
        assert!(Arc::ptr_eq(&alice, &again), "the second time comes from the map");
        let bob = auth.authenticate(&header("bob", "hunter2")).await.unwrap();
        assert_eq!(bob.token, None);
        for (name, pw) in [("alice", "wrong"), ("mallory", "s3cret"), ("bob", "")] {
            let err = auth.authenticate(&header(name, pw)).await.unwrap_err();
            assert_eq!(err, AuthFailure::Invalid { user: name.to_owned() });
        }
        assert_eq!(auth.authenticate(&HeaderMap::new()).await, Err(AuthFailure::Missing));
        let mut bearer = HeaderMap::new();
        bearer.insert(http::header::PROXY_AUTHORIZATION, "Bearer abc".parse().unwrap());
        assert!(matches!(auth.authenticate(&bearer).await, Err(AuthFailure::Malformed(_))));
        let mut garbage = HeaderMap::new();
        garbage.insert(http::header::PROXY_AUTHORIZATION, "basic !!!".parse().unwrap());
        assert!(matches!(auth.authenticate(&garbage).await, Err(AuthFailure::Malformed(_))));
    }

    #[test]
    fn hash_lines_round_trip() {
        let line = hash_line("carol", "pw", Some("CarolBot")).unwrap();
        assert!(line.starts_with("carol:$argon2id$"), "{line}");
        assert!(line.ends_with(":CarolBot"), "{line}");
        assert!(Authenticator::parse(&line, Path::new("u")).is_ok());
        assert!(matches!(hash_line("a:b", "pw", None), Err(AccessError::Name(_))));
        assert!(matches!(hash_line("a", "pw", Some("no/way")), Err(AccessError::Token(_))));
    }
}
