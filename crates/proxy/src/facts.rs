//! One request's facts, read once: who asked, for what, speaking for which crawler.
//!
//! `process` builds them before anything is decided; every answer and audit record of the
//! request (403, 429, usage refusals, guard refusals) is written from them, so the request is
//! read in one place and the headers it was read from can be moved into the forwarded request.

use std::net::SocketAddr;
use std::sync::Arc;

use http::{HeaderValue, Method, Request};

use super::answer;
use robots_proxy_access::AuthenticatedUser;
use robots_proxy_authority::Authority;
use robots_proxy_decide::{ProductToken, Readings, TokenOrigin};

/// What the proxy knows about one request.
pub(super) struct Facts {
    /// The client's address.
    pub(super) client: SocketAddr,
    /// The request method.
    pub(super) method: Method,
    /// The authority the request is for (the robots.txt key).
    pub(super) authority: Authority,
    /// The path and query as sent, and every reading an origin may apply.
    pub(super) readings: Readings,
    /// The crawler's product token, and where it came from.
    pub(super) token: Option<ProductToken>,
    /// Where the token came from.
    pub(super) token_origin: TokenOrigin,
    /// The `User-Agent` header, if any.
    user_agent: Option<HeaderValue>,
    /// The authenticated user (`access.users_file`), if any.
    pub(super) user: Option<Arc<AuthenticatedUser>>,
    /// Whether the client asked for JSON answers.
    pub(super) want_json: bool,
    /// The exception that decided the request (`[[exceptions]]`), once one has: every later
    /// record of the request (a pacing or usage refusal, an annotation) names it too.
    pub(super) exception: std::sync::OnceLock<robots_proxy_audit::ExceptionFields>,
    /// A tunnel-mode CONNECT: no path can be seen ([`Facts::of_tunnel`]).
    tunnel: bool,
}

impl Facts {
    /// The audit record of `decision` (the policy's, for this request) made at `now`,
    /// answered with `status`: the request's own fields and where its token came from.
    pub(super) fn audit_record(
        &self,
        decision: &robots_proxy_decide::Explanation,
        now: std::time::SystemTime,
        status: Option<u16>,
    ) -> robots_proxy_audit::AuditRecord {
        let mut record = decision.audit_record(
            now,
            self.client,
            &self.method,
            &self.url(),
            &self.authority.to_string(),
            self.path(),
            self.user_agent(),
            self.token(),
            status,
        );
        record.token_source = Some(self.token_origin.as_str());
        record.user_name = self.user_name().map(str::to_owned);
        record.exception = self.exception.get().cloned();
        record
    }

    /// The audit record of the request's one decision, written at `now` and answered with
    /// `status`: the base that every record of the request (a refusal, an exception's, a 429,
    /// a usage event) fills in with its own action and reason.
    pub(super) fn record(
        &self,
        decision: &robots_proxy_decide::Decision<'_>,
        now: std::time::SystemTime,
        status: Option<u16>,
    ) -> robots_proxy_audit::AuditRecord {
        let mut explanation = decision.explain();
        if let Some(site) = decision.site() {
            explanation.age = site.age(now);
        }
        self.audit_record(&explanation, now, status)
    }

    /// Notes the exception that decided the request, from its record; the first one stays.
    pub(super) fn decided_by(&self, record: &robots_proxy_audit::AuditRecord) {
        if let Some(fields) = &record.exception {
            let _ = self.exception.set(fields.clone());
        }
    }

    /// Reads the facts of `req`, whose token the policy found already.
    pub(super) fn of<B>(
        req: &Request<B>,
        client: SocketAddr,
        authority: Authority,
        readings: Readings,
        (token, token_origin): (Option<ProductToken>, TokenOrigin),
    ) -> Facts {
        Facts {
            client,
            method: req.method().clone(),
            authority,
            readings,
            token,
            token_origin,
            user_agent: req.headers().get(http::header::USER_AGENT).cloned(),
            user: req.extensions().get::<Arc<AuthenticatedUser>>().cloned(),
            want_json: answer::wants_json(req.headers()),
            exception: std::sync::OnceLock::new(),
            tunnel: false,
        }
    }

    /// Reads the facts of a CONNECT in tunnel mode (`tunnel.rs`): it is decided as `/`, for
    /// every path of the site (no path can be seen), and answered in text (a 403 to a CONNECT
    /// is read by the client's proxy code, not shown as a page).
    pub(super) fn of_tunnel<B>(
        req: &Request<B>,
        client: SocketAddr,
        authority: Authority,
        token: (Option<ProductToken>, TokenOrigin),
    ) -> Facts {
        let mut facts = Facts::of(req, client, authority, Readings::of("/"), token);
        facts.want_json = false;
        facts.tunnel = true;
        facts
    }

    /// The path and query as sent (and forwarded); for a tunnel, that it cannot be seen.
    pub(super) fn path(&self) -> &str {
        if self.tunnel {
            return super::connect::TUNNEL_PATH;
        }
        self.readings.as_sent()
    }

    /// The full URL: `scheme://host[:port]` and the path and query as sent; for a tunnel, the
    /// authority alone.
    pub(super) fn url(&self) -> String {
        if self.tunnel {
            return self.authority.to_string();
        }
        format!("{}{}", self.authority, self.path())
    }

    /// The `User-Agent` header's bytes, whatever they are (the audit record escapes them).
    pub(super) fn user_agent(&self) -> Option<&[u8]> {
        self.user_agent.as_ref().map(|v| v.as_bytes())
    }

    /// The token, borrowed.
    pub(super) fn token(&self) -> Option<&ProductToken> {
        self.token.as_ref()
    }

    /// The authenticated user's name, if any.
    pub(super) fn user_name(&self) -> Option<&str> {
        self.user.as_ref().map(|u| u.name.as_str())
    }

    /// Who the request speaks for, and how the proxy knows: every loosening of enforcement
    /// (report-only mode, an allow exception, a usage lift) is granted through
    /// [`robots_proxy_decide::Claim::entitled`] on this.
    pub(super) fn claim(&self) -> robots_proxy_decide::Claim<'_> {
        robots_proxy_decide::Claim {
            token: self.token.as_ref(),
            origin: self.token_origin,
            user: self.user_name(),
        }
    }
}
