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
    pub(crate) fn path(&self) -> &str {
        let path = self.path_and_query.split_once('?').map_or(self.path_and_query, |(p, _)| p);
        if path.is_empty() {
            "/"
        } else {
            path
        }
    }

    /// The query without its `?`, if the target has one.
    pub(crate) fn query(&self) -> Option<&str> {
        self.path_and_query.split_once('?').map(|(_, q)| q)
    }
}

/// The components every request signature covers, in order: the configured ones (with
/// `@authority` added first when it is missing), then the identity's `Signature-Agent` member.
#[derive(Debug, Clone)]
pub(crate) struct Coverage {
    components: Vec<Component>,
    /// `("@method" "@authority" "@path" "signature-agent";key="sig1")`
    inner: String,
}

impl Coverage {
    pub(crate) fn new(configured: &[Component]) -> Coverage {
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
    pub(crate) fn lines(&self, target: &Target<'_>, agent_value: &str, base: &mut String) {
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
    pub(crate) fn params(
        &self,
        created: u64,
        expires: u64,
        keyid: &str,
        nonce: Option<&str>,
    ) -> String {
        params_of(&self.inner, created, expires, keyid, nonce)
    }

    /// The covered components, in order, without the `Signature-Agent` member.
    pub(crate) fn components(&self) -> &[Component] {
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
    use std::fmt::Write as _;
    let mut params = String::with_capacity(inner.len() + 160);
    params.push_str(inner);
    let _ = write!(params, ";created={created};expires={expires}");
    if let Some(nonce) = nonce {
        let _ = write!(params, ";nonce=\"{nonce}\"");
    }
    let _ = write!(params, ";keyid=\"{keyid}\";alg=\"{ALG}\";tag=\"{REQUEST_TAG}\"");
    params
}

/// A fresh `nonce` (RFC 9421 §2.3): 16 random bytes, base64. It makes every per-request
/// signature different, even for two identical requests in the same second.
pub(crate) fn nonce() -> Result<String, SigningError> {
    let mut bytes = [0u8; 16];
    SystemRandom::new().fill(&mut bytes).map_err(|_| SigningError::Random)?;
    Ok(Base64::encode_string(&bytes))
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
    fn nonces_differ() {
        assert_ne!(nonce().unwrap(), nonce().unwrap());
    }
}
