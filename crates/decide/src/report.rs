//! Report-only mode (`policy.mode`, `policy.report_tokens`, `policy.report_users`): who gets
//! their refusals reported instead of enforced. A request that enforcement would refuse on
//! policy grounds (robots.txt, usage preferences, a tunnel-mode CONNECT) goes on, and its
//! refusal is written as a `would_block` audit record. Politeness (pacing), access control and
//! the destination guard are never report-only.

use serde::{Deserialize, Serialize};

use robots_proxy_engine::ProductToken;

/// `policy.mode`: whether the gateway enforces its decisions or only reports them.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyMode {
    /// Refusals are enforced (except for the identities of `policy.report_tokens` and
    /// `policy.report_users`).
    #[default]
    Enforce,
    /// Every refusal on policy grounds is reported (`would_block`), and the request goes on.
    Report,
}

/// Who is in report mode, built from `[policy]`: everyone (`policy.mode = "report"`), or the
/// listed tokens and users.
#[derive(Debug, Clone, Default)]
pub struct ReportScope {
    everyone: bool,
    /// Lower-cased: product tokens compare without regard to case (RFC 9309 §2.2.1).
    tokens: Vec<String>,
    users: Vec<String>,
}

impl ReportScope {
    /// The scope `[policy]` sets.
    pub fn new(mode: PolicyMode, tokens: &[String], users: &[String]) -> Self {
        ReportScope {
            everyone: mode == PolicyMode::Report,
            tokens: tokens.iter().map(|t| t.to_ascii_lowercase()).collect(),
            users: users.to_vec(),
        }
    }

    /// Whether nobody is in report mode (the default): then nothing is ever reported.
    pub fn is_empty(&self) -> bool {
        !self.everyone && self.tokens.is_empty() && self.users.is_empty()
    }

    /// Whether a request for `token`, from the authenticated `user`, is in report mode. Only
    /// [`super::Policy::reports`] asks, with what the claim is entitled to
    /// ([`super::Claim::entitled`]): report-only mode loosens enforcement.
    pub(super) fn covers(&self, token: Option<&ProductToken>, user: Option<&str>) -> bool {
        if self.everyone {
            return true;
        }
        let token_listed = token.is_some_and(|t| {
            let t = t.as_str();
            self.tokens.iter().any(|listed| listed.eq_ignore_ascii_case(t))
        });
        token_listed || user.is_some_and(|u| self.users.iter().any(|listed| listed == u))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(t: &str) -> ProductToken {
        ProductToken::new(t).unwrap()
    }

    #[test]
    fn enforce_with_no_lists_reports_nobody() {
        let scope = ReportScope::new(PolicyMode::Enforce, &[], &[]);
        assert!(scope.is_empty());
        assert!(!scope.covers(Some(&token("AcmeBot")), Some("alice")));
        assert!(!scope.covers(None, None));
    }

    #[test]
    fn report_mode_covers_everyone() {
        let scope = ReportScope::new(PolicyMode::Report, &[], &[]);
        assert!(!scope.is_empty());
        assert!(scope.covers(None, None));
    }

    #[test]
    fn listed_tokens_without_case_and_users_exactly() {
        let scope =
            ReportScope::new(PolicyMode::Enforce, &["AcmeBot".into()], &["search-team".into()]);
        assert!(scope.covers(Some(&token("acmebot")), None));
        assert!(!scope.covers(Some(&token("OtherBot")), None));
        assert!(scope.covers(Some(&token("OtherBot")), Some("search-team")));
        assert!(!scope.covers(None, Some("Search-Team")));
    }
}
