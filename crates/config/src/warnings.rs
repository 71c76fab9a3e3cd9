//! What `config check` warns about in a configuration it accepts: settings that can never
//! apply as written, and exceptions that have expired. None of them stops `serve` or a
//! reload; each is one line, printed as a comment after the configuration.

use std::time::SystemTime;

use super::Config;
use robots_proxy_decide::exceptions::{parse_expires, Effect};

impl Config {
    /// Every warning about this configuration at `now`, one sentence each:
    /// * a loosening of enforcement granted on a product token (`policy.report_tokens`, an
    ///   allow exception's `tokens`) applies only to a proxy user tied to that token
    ///   (`robots_proxy_decide::Claim::entitled`); without `access.users_file` there is none, so it
    ///   never applies;
    /// * a loosening for users (`policy.report_users`, an exception's `users`) needs an
    ///   authenticated user: a users file or client certificates (`access.client_ca`);
    /// * a fleet without `fleet.key_file` trusts its Redis with every robots.txt it enforces;
    /// * an exception whose `expires` has passed is inert (it is kept, and counted on
    ///   `/metrics`, but decides nothing);
    /// * a `signing.identities` agent over plain http (the draft wants https);
    /// * an identity whose keys' windows leave a span with no key that signs
    ///   ([`robots_proxy_identity::SigningSection::key_gaps`]): its requests leave unsigned then.
    pub fn warnings(&self, now: SystemTime) -> Vec<String> {
        let mut out = Vec::new();
        let users_file = self.access.users_file.is_some();
        let any_user = users_file || self.access.client_ca.is_some();
        let policy = &self.policy;
        if self.fleet.is_enabled() && self.fleet.key_file.is_none() {
            out.push(
                "warning: fleet.redis is set without fleet.key_file: the fleet's shared \
                 robots.txt, tdmrep.json and purge records are not sealed, so whoever can write \
                 to that Redis decides which robots.txt every instance enforces (make a key with \
                 `robots-proxy fleet key new FILE`, give it to every instance, and set \
                 fleet.key_file; docs/fleet.md)"
                    .to_owned(),
            );
        }
        if !policy.report_tokens.is_empty() && !users_file {
            out.push(format!(
                "warning: policy.report_tokens {:?} never applies: report-only mode for a token is \
                 granted only to a proxy user tied to that token (access.users_file), never to \
                 a client that merely sends it; set access.users_file and tie the users",
                policy.report_tokens
            ));
        }
        if !policy.report_users.is_empty() && !any_user {
            out.push(format!(
                "warning: policy.report_users {:?} never applies: no user is ever authenticated \
                 (set access.users_file or access.client_ca)",
                policy.report_users
            ));
        }
        for e in &self.exceptions {
            if e.effect == Effect::Allow && !e.tokens.is_empty() && !users_file {
                out.push(format!(
                    "warning: exception {} allows for tokens {:?}, which never applies without \
                     access.users_file: an allow (and its usage lift) is granted only to a proxy \
                     user tied to one of its tokens, never to a client that merely sends it",
                    e.id, e.tokens
                ));
            }
            if !e.users.is_empty() && !any_user {
                out.push(format!(
                    "warning: exception {} names users {:?}, which never match: no user is ever \
                     authenticated (set access.users_file or access.client_ca)",
                    e.id, e.users
                ));
            }
            let expired = e.expires.as_deref().and_then(|t| parse_expires(t).ok());
            if expired.is_some_and(|at| at <= now) {
                out.push(format!(
                    "warning: exception {} expired at {}: it is inert (it decides nothing; \
                     remove or renew it)",
                    e.id,
                    e.expires.as_deref().unwrap_or_default()
                ));
            }
        }
        let cosign =
            self.signing.client_signatures() == robots_proxy_identity::ClientSignatures::Cosign;
        for who in &self.signing.identities {
            if cosign && who.client_keys.is_none() {
                out.push(format!(
                    "warning: signing.client_signatures = \"cosign\" but signing.identities \
                     {} has no client_keys: no client signature is covered by its signature \
                     (each goes on beside it, counted as unverified_signature)",
                    who.token.as_ref().map_or_else(
                        || format!("user {}", who.user.as_deref().unwrap_or_default()),
                        |t| t.to_string()
                    )
                ));
            }
            if who.agent.as_str().starts_with("http://") {
                out.push(format!(
                    "warning: signing.identities agent {:?} is http://: the Web Bot Auth \
                     protocol draft says a Signature-Agent's scheme MUST be https, and verifiers \
                     may refuse it (and the Agent Card then has no jwks_uri)",
                    who.agent.as_str()
                ));
            }
        }
        for (who, from, until) in self.signing.key_gaps(now) {
            let at = |t: SystemTime| humantime::format_rfc3339_seconds(t).to_string();
            out.push(match until {
                Some(until) => format!(
                    "warning: signing.identities {who}: no key signs from {} until {}: its \
                     requests leave unsigned in between (robots_proxy_signing_unsigned_total); \
                     make the keys' sign_from/sign_until windows meet",
                    at(from),
                    at(until)
                ),
                None => format!(
                    "warning: signing.identities {who}: no key signs from {} on: its requests \
                     leave unsigned (robots_proxy_signing_unsigned_total); add a key that \
                     signs from then",
                    at(from)
                ),
            });
        }
        out
    }
}
