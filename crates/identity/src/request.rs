//! The request signature: which components it covers (`signing.components`), its signature
//! base (RFC 9421 §2.5) and its parameters, built with as few allocations as can be: the
//! covered-component list is serialised once, when the signer is built; a request pays one
//! string for the base, one for the parameters and one Ed25519 signature.

use base64ct::{Base64, Encoding};
use ring::rand::{SecureRandom, SystemRandom};

use super::section::Component;
use super::{SigningError, ALG, LABEL, REQUEST_TAG};

/// What a request signature covers of the request about to leave.
#[derive(Debug, Clone, Copy)]
pub struct Target<'r> {
    /// The method, as sent (`GET`).
    pub method: &'r str,
    /// `http` or `https`.
    pub scheme: &'r str,
    /// Exactly the request's `Host` (`:authority`).
    pub authority: &'r str,
    /// The request-target's path and query as sent (`/a/b?q=1`).
    pub path_and_query: &'r str,
}

impl Target<'_> {
    /// `@path` (RFC 9421 §2.2.6): the path, `/` when empty.
    pub fn path(&self) -> &str {
        let path = self.path_and_query.split_once('?').map_or(self.path_and_query, |(p, _)| p);
        if path.is_empty() {
            "/"
        } else {
            path
        }
    }

    /// The query without its `?`, if the target has one.
    pub fn query(&self) -> Option<&str> {
        self.path_and_query.split_once('?').map(|(_, q)| q)
    }
}

/// The components every request signature covers, in order: the configured ones (with
/// `@authority` added first when it is missing), then the identity's `Signature-Agent` member.
#[derive(Debug, Clone)]
pub struct Coverage {
    components: Vec<Component>,
    /// `("@method" "@authority" "@path" "signature-agent";key="sig1")`
    inner: String,
}

impl Coverage {
    /// The coverage of `configured` (`signing.components`), `@authority` added when missing.
    pub fn new(configured: &[Component]) -> Coverage {
        let mut components: Vec<Component> = Vec::with_capacity(configured.len() + 1);
        if !configured.contains(&Component::Authority) {
            components.push(Component::Authority);
        }
        for c in configured {
            if !components.contains(c) {
                components.push(*c);
            }
        }
        let mut inner = String::from("(");
        for c in &components {
            inner.push('"');
            inner.push_str(c.name());
            inner.push_str("\" ");
        }
        inner.push_str("\"signature-agent\";key=\"");
        inner.push_str(LABEL);
        inner.push_str("\")");
        Coverage { components, inner }
    }

    /// Appends to `base` one line per covered component (RFC 9421 §2.5), each ending in `\n`:
    /// every line of the signature base but `"@signature-params"`. These lines are also what
    /// a reused signature is keyed on: the values of every covered component.
    pub fn lines(&self, target: &Target<'_>, agent_value: &str, base: &mut String) {
        for c in &self.components {
            base.push('"');
            base.push_str(c.name());
            base.push_str("\": ");
            match c {
                Component::Method => base.push_str(target.method),
                Component::Authority => base.push_str(target.authority),
                Component::Path => base.push_str(target.path()),
                Component::Query => {
                    // RFC 9421 §2.2.7: `?` and the query; only `?` when there is none.
                    base.push('?');
                    base.push_str(target.query().unwrap_or(""));
                }
                Component::TargetUri => {
                    base.push_str(target.scheme);
                    base.push_str("://");
                    base.push_str(target.authority);
                    base.push_str(target.path());
                    if let Some(q) = target.query() {
                        base.push('?');
                        base.push_str(q);
                    }
                }
            }
            base.push('\n');
        }
        base.push_str("\"signature-agent\";key=\"");
        base.push_str(LABEL);
        base.push_str("\": ");
        base.push_str(agent_value);
        base.push('\n');
    }

    /// The signature parameters, as `Signature-Input` carries them after the label and as the
    /// `@signature-params` line of the base ends:
    /// `("@method" "@authority" "@path" "signature-agent";key="sig1");created=…;expires=…;`
    /// `nonce="…";keyid="…";alg="ed25519";tag="web-bot-auth"` (`nonce` only when given).
    /// `keyid` is a base64url thumbprint and `nonce` base64: both fit a structured string.
    /// (What [`Coverage::input_field`] writes after the label.)
    #[cfg(test)]
    pub fn params(&self, created: u64, expires: u64, keyid: &str, nonce: Option<&str>) -> String {
        params_of(&self.inner, created, expires, keyid, nonce)
    }

    /// The whole `Signature-Input` field of a request signature, `sig1=` and its parameters
    /// ([`Coverage::params`]), with a fresh `nonce` when `fresh`: made in one buffer, which
    /// becomes the field's bytes. The parameters are `input[LABEL.len() + 1..]`.
    pub(crate) fn input_field(
        &self,
        created: u64,
        expires: u64,
        keyid: &str,
        fresh: bool,
    ) -> Result<String, SigningError> {
        let mut input = String::with_capacity(LABEL.len() + 1 + self.inner.len() + 160);
        input.push_str(LABEL);
        input.push('=');
        if fresh {
            let mut nonce = [0u8; 24];
            let bytes = nonce_bytes()?;
            let nonce = Base64::encode(&bytes, &mut nonce)
                .map_err(|e| SigningError::Fields(e.to_string()))?;
            push_params(&mut input, &self.inner, created, expires, keyid, Some(nonce));
        } else {
            push_params(&mut input, &self.inner, created, expires, keyid, None);
        }
        Ok(input)
    }

    /// The covered components, in order, without the `Signature-Agent` member.
    pub fn components(&self) -> &[Component] {
        &self.components
    }
}

/// [`Coverage::params`] for the inner list `inner` (`(…)`).
pub(crate) fn params_of(
    inner: &str,
    created: u64,
    expires: u64,
    keyid: &str,
    nonce: Option<&str>,
) -> String {
    let mut params = String::with_capacity(inner.len() + 160);
    push_params(&mut params, inner, created, expires, keyid, nonce);
    params
}

/// Appends the signature parameters to `out` (see [`Coverage::params`]).
fn push_params(
    out: &mut String,
    inner: &str,
    created: u64,
    expires: u64,
    keyid: &str,
    nonce: Option<&str>,
) {
    use std::fmt::Write as _;
    out.push_str(inner);
    let _ = write!(out, ";created={created};expires={expires}");
    if let Some(nonce) = nonce {
        out.push_str(";nonce=\"");
        out.push_str(nonce);
        out.push('"');
    }
    out.push_str(";keyid=\"");
    out.push_str(keyid);
    out.push_str("\";alg=\"");
    out.push_str(ALG);
    out.push_str("\";tag=\"");
    out.push_str(REQUEST_TAG);
    out.push('"');
}

/// Random bytes drawn from the system's generator this many at a time, per thread: one
/// `getrandom` call per 32 nonces instead of one per request.
const POOL: usize = 512;

thread_local! {
    /// System randomness not used yet, and where the unused part starts.
    static RANDOM: std::cell::RefCell<([u8; POOL], usize)> =
        const { std::cell::RefCell::new(([0; POOL], POOL)) };
}

/// 16 fresh random bytes from the system's generator (through this thread's pool; each byte
/// is used once and zeroed).
fn nonce_bytes() -> Result<[u8; 16], SigningError> {
    RANDOM.with(|pool| {
        let mut pool = pool.borrow_mut();
        let (bytes, used) = &mut *pool;
        if *used + 16 > POOL {
            SystemRandom::new().fill(bytes).map_err(|_| SigningError::Random)?;
            *used = 0;
        }
        let mut out = [0u8; 16];
        out.copy_from_slice(&bytes[*used..*used + 16]);
        bytes[*used..*used + 16].fill(0);
        *used += 16;
        Ok(out)
    })
}

/// Appends a fresh `nonce` (RFC 9421 §2.3) to `out`: 16 random bytes, base64 (24 characters).
/// It makes every per-request signature different, even for two identical requests in the
/// same second.
pub fn push_nonce(out: &mut String) -> Result<(), SigningError> {
    let bytes = nonce_bytes()?;
    let mut buf = [0u8; 24];
    let text = Base64::encode(&bytes, &mut buf).map_err(|e| SigningError::Fields(e.to_string()))?;
    out.push_str(text);
    Ok(())
}

/// A fresh `nonce`, as [`push_nonce`] writes it.
pub fn nonce() -> Result<String, SigningError> {
    let mut out = String::with_capacity(24);
    push_nonce(&mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(path_and_query: &str) -> Target<'_> {
        Target { method: "GET", scheme: "https", authority: "example.com", path_and_query }
    }

    #[test]
    fn authority_is_always_covered_and_listed_once() {
        let c = Coverage::new(&[Component::Method, Component::Path]);
        assert_eq!(c.inner, r#"("@authority" "@method" "@path" "signature-agent";key="sig1")"#);
        let c = Coverage::new(&[Component::Method, Component::Authority, Component::Path]);
        assert_eq!(c.inner, r#"("@method" "@authority" "@path" "signature-agent";key="sig1")"#);
    }

    #[test]
    fn base_lines_and_params_are_exact() {
        let all = [
            Component::Method,
            Component::Authority,
            Component::Path,
            Component::Query,
            Component::TargetUri,
        ];
        let c = Coverage::new(&all);
        let mut base = String::new();
        c.lines(&target("/a%20b?x=1&y"), "\"https://bots.example\"", &mut base);
        assert_eq!(
            base,
            "\"@method\": GET\n\"@authority\": example.com\n\"@path\": /a%20b\n\
             \"@query\": ?x=1&y\n\"@target-uri\": https://example.com/a%20b?x=1&y\n\
             \"signature-agent\";key=\"sig1\": \"https://bots.example\"\n"
        );
        let mut base = String::new();
        c.lines(&target(""), "\"a\"", &mut base);
        assert!(
            base.contains("\"@path\": /\n\"@query\": ?\n\"@target-uri\": https://example.com/\n")
        );
        assert_eq!(
            c.params(1, 61, "kid", Some("bm9uY2U=")),
            r#"("@method" "@authority" "@path" "@query" "@target-uri" "signature-agent";key="sig1");created=1;expires=61;nonce="bm9uY2U=";keyid="kid";alg="ed25519";tag="web-bot-auth""#
        );
        // The parameters are a valid structured-field inner list.
        let input = format!("sig1={}", c.params(1, 61, "kid", None));
        sfv::Parser::new(&input).parse::<sfv::Dictionary>().unwrap();
    }

    #[test]
    fn the_input_field_is_the_label_and_the_params() {
        let c = Coverage::new(&[Component::Method, Component::Path]);
        let input = c.input_field(1, 61, "kid", false).unwrap();
        assert_eq!(input, format!("{LABEL}={}", c.params(1, 61, "kid", None)));
        let fresh = c.input_field(1, 61, "kid", true).unwrap();
        let nonce = fresh.split("nonce=\"").nth(1).unwrap().split('"').next().unwrap();
        assert_eq!(fresh, format!("{LABEL}={}", c.params(1, 61, "kid", Some(nonce))));
        assert_eq!(Base64::decode_vec(nonce).unwrap().len(), 16);
    }

    #[test]
    fn nonces_differ() {
        // More than one pool's worth: every nonce differs, across refills.
        let all: std::collections::HashSet<String> =
            (0..3 * POOL / 16).map(|_| nonce().unwrap()).collect();
        assert_eq!(all.len(), 3 * POOL / 16);
        assert_ne!(nonce().unwrap(), nonce().unwrap());
    }
}
