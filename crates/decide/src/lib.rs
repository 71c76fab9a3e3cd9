//! The policy: which product token a request speaks for, and what robots.txt says about it.
//!
//! The proxy asks the policy two questions per request: "whose rules?" ([`Policy::token_for`])
//! and "may it go?" ([`Policy::decide`]). The answer, a [`Decision`], is made once; its
//! [`Decision::explain`] carries everything a 403 body, a `Proxy-Status` header and an audit
//! record need, so that the three always agree.
//!
//! The rule sources it decides on live here too: robots.txt (through the site-file store),
//! `[[exceptions]]`, AI usage preferences ([`usage`]) and TDMRep. The root crate re-exports this
//! crate as `robots_proxy::policy`, and [`usage`] as `robots_proxy::usage`.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

mod claim;
#[cfg(test)]
mod conformance;
pub mod decision;
pub mod exceptions;
pub mod readings;
mod report;
mod section;
mod tdmrep;
pub mod usage;

/// The other opt-outs' parsers (X-Robots-Tag, TDMRep), for the proxy.
pub use robots_proxy_engine::optout;

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use http::HeaderMap;

pub use claim::{Claim, Entitled};
pub use decision::{decide, Decision, Provenance, Question, Rules, View, Why};
pub use exceptions::{ExceptionEntry, ExceptionVerdict, Exceptions};
pub use readings::{Reading, Readings};
pub use report::{PolicyMode, ReportScope};
use robots_proxy_audit::{AuditAction, AuditOutcome, AuditRecord};
use robots_proxy_authority::Authority;
use robots_proxy_engine::Verdict;
use robots_proxy_sitefiles::RobotsRules;
pub use section::{FoldCase, PolicySection, RawPolicySection, TokenHeader, TokenSource};

// The types the proxy and the admin listener need from the robots store and the engine: they
// reach both only through the policy.
pub use robots_proxy_sitefiles::{
    FetchClass, FetchOutcome, PurgedAll, RecentRobots, RobotsSnapshot, RobotsState, RobotsStore,
    SharedError, StoreStats,
};
// The body decoder of robots.txt fetches, which the proxy also uses to read an HTML head.
pub use robots_proxy_archive::robots_version::RobotsVersion;
pub use robots_proxy_engine::usage::{Category, Preference, UsagePreferences};
pub use robots_proxy_engine::{ProductToken, RobotsTxt, RuleKind};
pub use robots_proxy_sitefiles::decode::{DecodeError, Decoder};
// The archive of robots.txt versions, which the admin listener reads through the policy.
pub use robots_proxy_archive::{Archive, ArchiveStats, Consequence, Window};

/// How the product token is found, built from `[policy]`.
#[derive(Clone)]
pub struct Policy {
    /// Where robots.txt snapshots come from (the in-process cache, or a fleet-wide store).
    store: Arc<dyn RobotsStore>,
    /// User-Agent header → token, since a crawler sends the same header on every request.
    /// Keyed by the header's bytes copied: a `HeaderValue` hyper parsed shares the connection's
    /// read buffer (8 KiB or more), which a key would keep alive.
    user_agents: moka::sync::Cache<Vec<u8>, Option<ProductToken>>,
    sources: Vec<TokenSource>,
    token_header: http::HeaderName,
    default_token: Option<ProductToken>,
    fold_case: FoldCase,
    /// `policy.fold_case_sites`, normalised as request authorities are
    /// ([`robots_proxy_authority::SiteName`]; an entry that is no site, refused by validation, is
    /// left out).
    fold_case_sites: Vec<robots_proxy_authority::SiteName>,
    /// Who is in report mode (`policy.mode`, `policy.report_tokens`, `policy.report_users`).
    report: ReportScope,
    /// `[[exceptions]]` (empty unless [`Policy::with_exceptions`]).
    exceptions: Arc<exceptions::Exceptions>,
}

/// Where the product token of a request came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TokenOrigin {
    /// The explicit token header.
    Header,
    /// The User-Agent header.
    UserAgent,
    /// `policy.default_token`.
    Default,
    /// No source gave one: only `*` groups apply.
    None,
    /// The authenticated user is tied to it (`access.users_file`); it wins over every source.
    Credentials,
}

impl TokenOrigin {
    /// The name written in audit records (`robots.token_source`).
    pub fn as_str(self) -> &'static str {
        match self {
            TokenOrigin::Header => "header",
            TokenOrigin::UserAgent => "user-agent",
            TokenOrigin::Default => "default",
            TokenOrigin::None => "none",
            TokenOrigin::Credentials => "credentials",
        }
    }
}

/// Why robots.txt decided as it did on one reading, in terms a person and an auditor read: what
/// [`Decision::explain`] renders, and every 403 body, audit record, `check` line, `evidence`
/// report and admin page is written from.
#[derive(Debug, Clone)]
pub struct Explanation {
    /// Allow or Disallow.
    pub verdict: Verdict,
    /// One sentence: why.
    pub reason: String,
    /// What kind of reason it is.
    pub why: Why,
    /// The deciding rule (`disallow: /private`), if a rule decided.
    pub rule: Option<String>,
    /// The deciding rule's line.
    pub line: Option<u32>,
    /// The `user-agent` line of the group that applied (`* (line 1)`).
    pub group: Option<String>,
    /// The robots.txt state.
    pub state: RobotsState,
    /// The robots.txt URL.
    pub robots_url: String,
    /// Age of the robots.txt in force.
    pub age: Duration,
    /// The reading of the path that decided: the first disallowed one, or the path as sent
    /// when every reading is allowed.
    pub reading: Reading,
    /// The path and query as that reading reads it.
    pub read_path: String,
    /// The robots.txt version decided with (its SHA-256 and fetch time), when a file is in
    /// force; `None` for allow all and disallow all (no file).
    pub version: Option<Arc<RobotsVersion>>,
}

/// The User-Agent a client connection sent last and the token found in it (see
/// [`Policy::token_for_connection`]). The token depends only on the header's value, never on
/// the configuration, so it stays right across reloads. The value is a copy of its bytes: the
/// `HeaderValue` hyper parsed is a slice of the connection's read buffer, and holding it would
/// keep that buffer (8 KiB or more) alive beside the one hyper reads into next, for as long
/// as the connection is open (issue 22: 46-48 KiB per idle client connection).
#[derive(Debug, Default)]
pub struct RecentUserAgent {
    last: Option<(Box<[u8]>, Option<ProductToken>)>,
}

impl Policy {
    /// Builds the policy from its configuration section, asking `store` for robots.txt.
    pub fn new(section: &PolicySection, store: Arc<dyn RobotsStore>) -> Self {
        Policy {
            store,
            user_agents: moka::sync::Cache::new(4096),
            sources: section.token_sources.clone(),
            token_header: section.token_header.name().clone(),
            default_token: section.default_token.clone(),
            fold_case: section.fold_case,
            fold_case_sites: section
                .fold_case_sites
                .iter()
                .filter_map(|s| robots_proxy_authority::SiteName::parse(s).ok())
                .collect(),
            report: ReportScope::new(section.mode, &section.report_tokens, &section.report_users),
            exceptions: Arc::default(),
        }
    }

    /// Whether a refusal for `claim` is only reported (report-only mode): the request goes
    /// on, written as `would_block`. A loosening, so `policy.report_tokens` covers a token
    /// only when the authenticated user is tied to it ([`Claim::entitled`]): a client that
    /// merely sends a report token is enforced.
    pub fn reports(&self, claim: Claim<'_>) -> bool {
        if self.report.is_empty() {
            return false;
        }
        let entitled = claim.entitled();
        self.report.covers(entitled.token, entitled.user)
    }

    /// The robots.txt snapshot for `authority` (fetched first when missing or due), for a client
    /// connection that keeps the snapshots it used last in `memory`: served from there while
    /// they are still the store's.
    pub async fn robots_for(
        &self,
        memory: &Mutex<RecentRobots>,
        authority: &Authority,
    ) -> Arc<RobotsSnapshot> {
        let lock = || robots_proxy_sync::lock(memory);
        if let Some(snapshot) = self.store.recent(&lock(), authority) {
            return snapshot;
        }
        let generation = self.store.generation();
        let snapshot = self.store.get(authority).await;
        self.store.remember(&mut lock(), generation, snapshot.clone());
        snapshot
    }

    /// The robots.txt snapshot for `authority`, fetched first when missing or due.
    pub async fn robots(&self, authority: &Authority) -> Arc<RobotsSnapshot> {
        self.store.get(authority).await
    }

    /// Drops the robots.txt of `authority` from the store; the error says what of a fleet's
    /// part was not done (this instance's copy is dropped).
    pub async fn purge(&self, authority: &Authority) -> Result<(), SharedError> {
        self.store.purge(authority).await
    }

    /// Drops every robots.txt from the store; answers how many authorities it held, and
    /// whether the fleet's part was done.
    pub async fn purge_all(&self) -> PurgedAll {
        self.store.purge_all().await
    }

    /// The archive of every robots.txt version the store took in, when it is kept
    /// (`archive.enabled`).
    pub fn archive(&self) -> Option<Arc<Archive>> {
        self.store.archive()
    }

    /// The robots store's size and counters.
    pub async fn store_stats(&self) -> StoreStats {
        self.store.stats().await
    }

    /// Whether robots.txt disallows every path for `token` (so tunnel mode may refuse a whole
    /// CONNECT).
    pub fn disallows_everything(
        &self,
        snapshot: &RobotsSnapshot,
        token: Option<&ProductToken>,
    ) -> bool {
        snapshot.rules.disallows_everything(token)
    }

    /// The header that names the token explicitly; the proxy strips it before forwarding.
    pub fn token_header(&self) -> &http::HeaderName {
        &self.token_header
    }

    /// The product token for a request with these headers, from the configured sources in order.
    pub fn token_for(&self, headers: &HeaderMap) -> (Option<ProductToken>, TokenOrigin) {
        self.token_from_sources(headers, None)
    }

    /// [`Policy::token_for_user`] for a client connection that keeps the User-Agent it sent
    /// last in `recent`: a crawler sends the same one on every request of a keep-alive
    /// connection, and comparing it is cheaper than looking it up again.
    pub fn token_for_connection(
        &self,
        tied: Option<&ProductToken>,
        headers: &HeaderMap,
        recent: &mut RecentUserAgent,
    ) -> (Option<ProductToken>, TokenOrigin) {
        self.token_with(tied, headers, Some(recent))
    }

    fn token_with(
        &self,
        tied: Option<&ProductToken>,
        headers: &HeaderMap,
        recent: Option<&mut RecentUserAgent>,
    ) -> (Option<ProductToken>, TokenOrigin) {
        match tied {
            Some(token) => (Some(token.clone()), TokenOrigin::Credentials),
            None => self.token_from_sources(headers, recent),
        }
    }

    fn token_from_sources(
        &self,
        headers: &HeaderMap,
        mut recent: Option<&mut RecentUserAgent>,
    ) -> (Option<ProductToken>, TokenOrigin) {
        for source in &self.sources {
            match source {
                TokenSource::Header => {
                    let token = headers
                        .get(&self.token_header)
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| ProductToken::new(v.trim()).ok());
                    if let Some(t) = token {
                        return (Some(t), TokenOrigin::Header);
                    }
                }
                TokenSource::UserAgent => {
                    let token = headers.get(http::header::USER_AGENT).and_then(|v| {
                        if let Some((seen, token)) = recent.as_deref().and_then(|r| r.last.as_ref())
                        {
                            if **seen == *v.as_bytes() {
                                return token.clone();
                            }
                        }
                        // From the header's bytes, whatever they are: a byte outside ASCII
                        // (Latin-1 `caf\xE9`) cannot be part of a product token (RFC 9309
                        // §2.2.1: letters, `_` and `-`), so it only ends the word it is in;
                        // the token is found in the ASCII rest as for any other value.
                        let token = self.user_agents.get_with_by_ref(v.as_bytes(), || {
                            ProductToken::from_user_agent(&String::from_utf8_lossy(v.as_bytes()))
                        });
                        if let Some(recent) = recent.as_deref_mut() {
                            recent.last = Some((v.as_bytes().into(), token.clone()));
                        }
                        token
                    });
                    if let Some(t) = token {
                        return (Some(t), TokenOrigin::UserAgent);
                    }
                }
                TokenSource::Default => {
                    if let Some(t) = &self.default_token {
                        return (Some(t.clone()), TokenOrigin::Default);
                    }
                }
            }
        }
        (None, TokenOrigin::None)
    }

    /// The product token for a request whose authenticated user is tied to `tied`: that one
    /// when given (credentials identify a crawler better than anything it sends), else
    /// [`Policy::token_for`].
    pub fn token_for_user(
        &self,
        tied: Option<&ProductToken>,
        headers: &HeaderMap,
    ) -> (Option<ProductToken>, TokenOrigin) {
        self.token_with(tied, headers, None)
    }

    /// What the policy knows of `snapshot`'s site: its rules, whether its origin folds case,
    /// and the exceptions in force.
    pub fn view<'a>(&'a self, snapshot: &'a RobotsSnapshot) -> View<'a> {
        View::of(snapshot, self.folds_case(snapshot)).with_exceptions(&self.exceptions)
    }

    /// Decides the request `claim` makes for the path read as `readings` on `snapshot`: the
    /// one decision ([`decision::decide`]), robots.txt on every reading (the most restrictive
    /// wins, `shared/spec/README.md`, "What the proxy decides on") and the exceptions.
    pub fn decide<'a>(
        &'a self,
        snapshot: &'a RobotsSnapshot,
        claim: Claim<'a>,
        readings: &'a Readings,
        now: SystemTime,
    ) -> Decision<'a> {
        decision::decide(self.view(snapshot), Question { claim, readings, now })
    }

    /// The usage preferences robots.txt states for every path of the site, for a request whose
    /// path cannot be seen (a CONNECT tunnel).
    pub fn usage_everywhere(
        &self,
        snapshot: &RobotsSnapshot,
        token: Option<&ProductToken>,
    ) -> UsagePreferences {
        snapshot.rules.usage_everywhere(token)
    }

    /// Whether the snapshot's origin gets the case-folded reading (`policy.fold_case`): every
    /// origin, the listed sites, or (the default) those and the origins whose robots.txt
    /// response named IIS, ASP.NET or Express.
    pub fn folds_case(&self, snapshot: &RobotsSnapshot) -> bool {
        let listed = || self.fold_case_sites.iter().any(|s| s.matches(&snapshot.authority));
        match self.fold_case {
            FoldCase::All => true,
            FoldCase::Listed => listed(),
            FoldCase::Detect => {
                matches!(&snapshot.rules, RobotsRules::Parsed(r) if r.case_insensitive_origin())
                    || listed()
            }
        }
    }
}

/// How the engine reads the patterns for one reading of the path, for every rule source that
/// matches path patterns (allow/disallow in [`decide_reading`], `Content-Usage` in
/// [`Decision::usage`], `tdmrep.json` in [`Decision::tdm_statement`]): the path as sent against
/// the patterns as written (Google's reading), the case-folded reading against the patterns
/// decoded and folded, every other reading against the patterns decoded.
pub fn pattern_reading(reading: Reading) -> robots_proxy_engine::usage::PatternReading {
    use robots_proxy_engine::usage::PatternReading;
    match reading {
        Reading::AsSent => PatternReading::AsWritten,
        Reading::CaseFolded => PatternReading::Folded,
        _ => PatternReading::Decoded,
    }
}

/// The engine's decision on one reading: the path as sent against the patterns as written
/// (Google's reading), every other reading against the patterns read decoded too.
pub fn decide_reading<'r>(
    robots: &'r robots_proxy_engine::RobotsTxt,
    token: Option<&ProductToken>,
    reading: Reading,
    path: &str,
) -> robots_proxy_engine::Decision<'r> {
    match reading {
        Reading::AsSent => robots.decide(token, path),
        Reading::CaseFolded => robots.decide_folded(token, path),
        _ => robots.decide_decoded(token, path),
    }
}

pub(crate) fn state_word(state: RobotsState) -> &'static str {
    match state {
        RobotsState::Fresh => "fresh",
        RobotsState::Stale => "stale",
        RobotsState::Unavailable => "unavailable",
        RobotsState::Unreachable => "unreachable",
    }
}

/// `HTTP 503`, `redirect limit exceeded`, or the network error.
pub fn outcome_text(outcome: &FetchOutcome) -> String {
    match outcome {
        FetchOutcome::Status(code) => format!("HTTP {code}"),
        FetchOutcome::RedirectLimit => "too many redirects".to_owned(),
        FetchOutcome::Network(e) | FetchOutcome::Prohibited(e) => e.clone(),
        FetchOutcome::Fleet(e) => format!("fleet: {e}"),
    }
}

impl Explanation {
    /// Whether the request may go.
    pub fn is_allowed(&self) -> bool {
        self.verdict == Verdict::Allow
    }

    /// The state as the audit log writes it.
    pub fn state_word(&self) -> &'static str {
        state_word(self.state)
    }

    /// The audit record for this decision.
    #[allow(clippy::too_many_arguments)]
    pub fn audit_record(
        &self,
        now: SystemTime,
        client: std::net::SocketAddr,
        method: &http::Method,
        url: &str,
        domain: &str,
        path: &str,
        user_agent: Option<&[u8]>,
        token: Option<&ProductToken>,
        status_code: Option<u16>,
    ) -> AuditRecord {
        let allowed = self.is_allowed();
        let action = if allowed { AuditAction::RobotsAllow } else { AuditAction::RobotsDisallow };
        let subject = robots_proxy_audit::AuditSubject {
            client,
            method: method.as_str(),
            url,
            domain,
            path,
            user_agent,
            token: token.map(ProductToken::as_str),
            robots_url: &self.robots_url,
        };
        let mut record = AuditRecord::new(action, now, subject, status_code, self.reason.clone());
        record.outcome = if allowed { AuditOutcome::Success } else { AuditOutcome::Failure };
        record.rule = self.rule.clone();
        record.line = self.line;
        record.group = self.group.clone();
        record.state = self.state_word().to_owned();
        record.age_seconds = self.age.as_secs();
        record.reading = Some(self.reading.name().to_owned());
        record.read_path = (self.read_path != path).then(|| self.read_path.clone());
        record.robots_version = self.version.clone().map(robots_proxy_audit::VersionFields);
        record
    }
}
