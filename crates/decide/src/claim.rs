//! Who a request speaks for, and how the proxy knows it: the one place that decides whether a
//! loosening of enforcement may be granted on a product token.
//!
//! A product token a client sends (`X-Robots-Product-Token`, its User-Agent, or the
//! configured default) is only a claim. Claiming another crawler's token has always changed
//! which robots.txt group applies, and that stays so: the client then obeys that crawler's
//! rules. But some configuration *loosens* enforcement for a token: report-only mode
//! (`policy.report_tokens`), an allow exception or a usage lift for an exception's `tokens`.
//! Granted on a claim, one header would take any client out of enforcement, or lend it a
//! partner's written permission. So a loosening for a token applies only to a request whose
//! token the proxy knows from credentials: a proxy user (`access.users_file`), or a client
//! certificate naming a user, tied to that token, as signing already requires (docs/security.md, "Who
//! may be signed for"). Loosenings for users (`policy.report_users`, an exception's `users`)
//! apply to the authenticated user, as before. Tightening (a disallow exception) applies to
//! every claim: a client that says it is AcmeBot is refused what AcmeBot is refused.

use super::{ProductToken, TokenOrigin};

/// The identity a request claims: its product token, where that token came from, and the
/// authenticated proxy user, if any.
#[derive(Debug, Clone, Copy)]
pub struct Claim<'a> {
    /// The product token the request is decided for (the tied user's, or what it sent).
    pub token: Option<&'a ProductToken>,
    /// Where that token came from: only [`TokenOrigin::Credentials`] is authenticated.
    pub origin: TokenOrigin,
    /// The authenticated proxy user (`access.users_file` or a client certificate), if any.
    pub user: Option<&'a str>,
}

/// The identity a loosening of enforcement may be granted to (see [`Claim::entitled`]).
#[derive(Debug, Clone, Copy)]
pub struct Entitled<'a> {
    /// The product token, only when the authenticated user is tied to it.
    pub token: Option<&'a ProductToken>,
    /// The authenticated user.
    pub user: Option<&'a str>,
}

impl<'a> Claim<'a> {
    /// A claim with no token origin known to be authenticated: what an anonymous request
    /// for `token` is entitled to (the admin's `/robots?url=` asks this way for a crawler
    /// tied to its token through [`Claim::tied`]).
    pub fn asserted(token: Option<&'a ProductToken>, user: Option<&'a str>) -> Self {
        let origin = if token.is_some() { TokenOrigin::Header } else { TokenOrigin::None };
        Claim { token, origin, user }
    }

    /// A request from a user tied to `token` (its credentials name it).
    pub fn tied(token: Option<&'a ProductToken>, user: Option<&'a str>) -> Self {
        Claim { token, origin: TokenOrigin::Credentials, user }
    }

    /// The identity a loosening may be granted to: the token only when it came from the
    /// authenticated user's credentials, and the authenticated user. Every loosening of
    /// enforcement (report-only mode for a token, an allow exception, a usage lift) asks
    /// this, and nothing else; tightening asks the claim itself.
    pub fn entitled(&self) -> Entitled<'a> {
        let token = match self.origin {
            TokenOrigin::Credentials => self.token,
            TokenOrigin::Header | TokenOrigin::UserAgent | TokenOrigin::Default => None,
            TokenOrigin::None => None,
        };
        Entitled { token, user: self.user }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_token_from_credentials_is_entitled() {
        let bot = ProductToken::new("AcmeBot").unwrap();
        for origin in [TokenOrigin::Header, TokenOrigin::UserAgent, TokenOrigin::Default] {
            let claim = Claim { token: Some(&bot), origin, user: Some("alice") };
            let entitled = claim.entitled();
            assert!(entitled.token.is_none(), "{origin:?} is only a claim");
            assert_eq!(entitled.user, Some("alice"));
        }
        let tied = Claim::tied(Some(&bot), Some("bob")).entitled();
        assert_eq!(tied.token.map(ProductToken::as_str), Some("AcmeBot"));
        assert!(Claim::asserted(Some(&bot), None).entitled().token.is_none());
    }
}
