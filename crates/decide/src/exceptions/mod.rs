//! Recorded, expiring exceptions (`[[exceptions]]`): written permission to crawl past
//! robots.txt, or a prohibition where robots.txt allows, for named crawlers on named sites.
//!
//! How they combine with robots.txt ([`Exceptions::decide`]):
//! * a `disallow` exception refuses a request when any reading of its path is in its scope,
//!   whatever robots.txt says; it wins over every allow;
//! * an `allow` exception lets a request through when robots.txt disallows it, if the exception
//!   covers every reading robots.txt disallowed; never at or after its `expires`, read from the
//!   clock at decision time (an expired exception stops applying with no reload).
//!
//! Path patterns are robots.txt patterns, matched by the robots engine itself: each exception's
//! paths are compiled once into a one-group robots.txt (`Disallow: <pattern>` per path), and a
//! path is in scope when that file disallows it.

mod section;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

pub use section::{checked, describe, parse_expires, Effect, ExceptionEntry};

use super::{decide_reading, Claim, Reading};
use robots_proxy_authority::{Authority, SiteName};
use robots_proxy_engine::usage::Category;
use robots_proxy_engine::RobotsTxt;

/// The exceptions in force: compiled from `[[exceptions]]`, replaced as a whole on a reload.
#[derive(Debug, Default)]
pub struct Exceptions {
    list: Vec<Exception>,
}

/// One compiled exception.
#[derive(Debug)]
pub struct Exception {
    id: Arc<str>,
    effect: Effect,
    reference: Arc<str>,
    granted_by: String,
    expires: Option<SystemTime>,
    expires_text: Option<String>,
    sites: Vec<Site>,
    /// Lower-cased.
    tokens: Vec<String>,
    users: Vec<String>,
    paths: RobotsTxt,
    path_patterns: Vec<String>,
    usage: Vec<Category>,
    uses: AtomicU64,
    /// The day (since the epoch) an expiry warning was logged last.
    warned_day: AtomicU64,
    /// Whether its expiry was logged (once per load: an expired entry is inert, not an error).
    expired_logged: std::sync::atomic::AtomicBool,
}

/// An entry of `authorities`, normalised as request authorities are ([`SiteName`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Site {
    /// `host` (any port) or `host:port`.
    Exact(SiteName),
    /// `*.suffix` or `*.suffix:port`: any host ending in `.suffix` (not the suffix itself);
    /// the suffix normalised as a host name, with a dot before it.
    Suffix(String, Option<u16>),
}

impl Site {
    /// Parses one entry of `authorities`: `host`, `host:port`, `*.suffix` or
    /// `*.suffix:port`, through the one authority normalisation ([`SiteName::parse`]): a
    /// trailing dot, Unicode, upper case and IPv4 spellings (`127.1`) read as a request's.
    /// The error says why an entry can name no site.
    pub fn parse(text: &str) -> Result<Site, String> {
        let wrong = |why: String| format!("{text:?} is not a host, host:port or *.suffix: {why}");
        match text.strip_prefix("*.") {
            Some(rest) => {
                let site = SiteName::parse(rest).map_err(|e| wrong(e.to_string()))?;
                if site.is_ip() {
                    return Err(wrong("a *.suffix names a domain, not an address".into()));
                }
                Ok(Site::Suffix(format!(".{}", site.host()), site.port()))
            }
            None => SiteName::parse(text).map(Site::Exact).map_err(|e| wrong(e.to_string())),
        }
    }

    /// Whether two entries can name one authority (for `config check`'s overlap notes): the
    /// same host or one suffix covering the other, and ports that can agree (an entry without
    /// a port takes any).
    pub(crate) fn overlaps(&self, other: &Site) -> bool {
        let ports = |a: Option<u16>, b: Option<u16>| a.is_none() || b.is_none() || a == b;
        match (self, other) {
            (Site::Exact(a), Site::Exact(b)) => a.host() == b.host() && ports(a.port(), b.port()),
            (Site::Exact(a), Site::Suffix(s, p)) | (Site::Suffix(s, p), Site::Exact(a)) => {
                a.host().ends_with(s.as_str()) && ports(a.port(), *p)
            }
            (Site::Suffix(a, p), Site::Suffix(b, q)) => {
                (a.ends_with(b.as_str()) || b.ends_with(a.as_str())) && ports(*p, *q)
            }
        }
    }
}

impl std::fmt::Display for Site {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Site::Exact(site) => write!(f, "{site}"),
            Site::Suffix(suffix, None) => write!(f, "*{suffix}"),
            Site::Suffix(suffix, Some(port)) => write!(f, "*{suffix}:{port}"),
        }
    }
}

/// The exception that decided a request.
#[derive(Debug, Clone)]
pub struct ExceptionVerdict {
    /// What it did.
    pub effect: Effect,
    /// Its `id`.
    pub id: Arc<str>,
    /// Its `reference`.
    pub reference: Arc<str>,
    /// For a disallow, the reading in its scope.
    pub reading: Reading,
    /// That reading's path.
    pub read_path: String,
    /// When the exception stops applying, if it does: a tunnel it opened ends then.
    pub expires: Option<SystemTime>,
}

impl ExceptionVerdict {
    /// A sentence for the refusal and the audit record.
    pub fn reason(&self) -> String {
        match self.effect {
            Effect::Allow => format!(
                "allowed by exception {} ({}) although robots.txt disallows it",
                self.id, self.reference
            ),
            Effect::Disallow => format!(
                "disallowed by exception {} ({}); robots.txt is not what refuses it",
                self.id, self.reference
            ),
        }
    }
}

/// An exception as `GET /api/exceptions` shows it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ExceptionView {
    /// `id`.
    pub id: String,
    /// `allow` or `disallow`.
    pub effect: &'static str,
    /// `authorities`.
    pub authorities: Vec<String>,
    /// `tokens`.
    pub tokens: Vec<String>,
    /// `users`.
    pub users: Vec<String>,
    /// `paths`.
    pub paths: Vec<String>,
    /// `reference`.
    pub reference: String,
    /// `granted_by`.
    pub granted_by: String,
    /// `expires`, as written.
    pub expires: Option<String>,
    /// Seconds until it expires (negative once expired).
    pub expires_in_seconds: Option<i64>,
    /// Whether it applies now (not expired).
    pub active: bool,
    /// Requests it decided since it was loaded (kept across reloads for the same id).
    pub uses: u64,
}

impl Exceptions {
    /// Compiles `entries` (validated by `config` already; an entry that fails anyway is left
    /// out and logged).
    pub fn new(entries: &[ExceptionEntry]) -> Self {
        let list = entries.iter().filter_map(|e| match Exception::compile(e) {
            Ok(x) => Some(x),
            Err(why) => {
                tracing::error!(id = %e.id, "exception left out: {why}");
                None
            }
        });
        Exceptions { list: list.collect() }
    }

    /// Whether there are none: the one check a request pays when none is configured.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Keeps the use counts of `previous` for the exceptions with the same id (a reload).
    pub fn carry_counts(&self, previous: &Exceptions) {
        for e in &self.list {
            if let Some(old) = previous.list.iter().find(|o| o.id == e.id) {
                e.uses.store(old.uses.load(Ordering::Relaxed), Ordering::Relaxed);
                e.warned_day.store(old.warned_day.load(Ordering::Relaxed), Ordering::Relaxed);
            }
        }
    }

    /// The exceptions that apply to this authority and requester at `now` (an allow one only
    /// to the identity entitled to it, see [`Exception::applies`]).
    fn applicable<'s>(
        &'s self,
        authority: &'s Authority,
        claim: Claim<'s>,
        now: SystemTime,
    ) -> impl Iterator<Item = &'s Exception> + 's {
        self.list.iter().filter(move |e| e.applies(authority, claim, now))
    }

    /// Decides a request: `readings` are the readings of its path (every one), `disallowed`
    /// the readings robots.txt disallows. `None`: no exception decides, robots.txt does. The
    /// exception that decides counts one use.
    pub fn decide(
        &self,
        authority: &Authority,
        claim: Claim<'_>,
        readings: &[(Reading, &str)],
        disallowed: &[(Reading, &str)],
        now: SystemTime,
    ) -> Option<ExceptionVerdict> {
        let v = self.find(authority, claim, readings, disallowed, now)?;
        self.count(&v.id);
        Some(v)
    }

    /// Whether the allow exception `id` still grants `claim` something for every path of
    /// `authority` at `now` (it applies as [`Exception::applies`] says, and covers every path):
    /// what keeps a tunnel it opened, or lifted a usage preference for, open across a reload
    /// (review-controls 7). Counts no use.
    pub fn still_grants(
        &self,
        id: &str,
        authority: &Authority,
        claim: Claim<'_>,
        now: SystemTime,
    ) -> bool {
        self.applicable(authority, claim, now)
            .any(|e| &*e.id == id && e.effect == Effect::Allow && e.covers_everything())
    }

    /// Counts one use of the exception `id`.
    pub fn count(&self, id: &str) {
        if let Some(e) = self.list.iter().find(|e| &*e.id == id) {
            e.uses.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn find(
        &self,
        authority: &Authority,
        claim: Claim<'_>,
        readings: &[(Reading, &str)],
        disallowed: &[(Reading, &str)],
        now: SystemTime,
    ) -> Option<ExceptionVerdict> {
        let applicable: Vec<&Exception> = self.applicable(authority, claim, now).collect();
        if applicable.is_empty() {
            return None;
        }
        for e in applicable.iter().filter(|e| e.effect == Effect::Disallow) {
            if let Some(&(reading, path)) = readings.iter().find(|(r, p)| e.covers(*r, p)) {
                return Some(e.verdict(reading, path));
            }
        }
        if disallowed.is_empty() {
            return None;
        }
        let e = applicable
            .iter()
            .filter(|e| e.effect == Effect::Allow)
            .find(|e| disallowed.iter().all(|(r, p)| e.covers(*r, p)))?;
        let (reading, path) = disallowed[0];
        Some(e.verdict(reading, path))
    }

    /// The usage categories an allow exception lifts for this request, every reading in its
    /// scope. Counts no use: the caller counts one when the lift dropped a purpose
    /// ([`Exceptions::count`]).
    pub fn lifted_usage(
        &self,
        authority: &Authority,
        claim: Claim<'_>,
        readings: &[(Reading, &str)],
        now: SystemTime,
    ) -> Option<(Vec<Category>, ExceptionVerdict)> {
        let e = self.applicable(authority, claim, now).find(|e| {
            e.effect == Effect::Allow
                && !e.usage.is_empty()
                && readings.iter().all(|(r, p)| e.covers(*r, p))
        })?;
        let (reading, path) = readings.first().copied().unwrap_or((Reading::AsSent, "/"));
        Some((e.usage.clone(), e.verdict(reading, path)))
    }

    /// The exception that decides a tunnel (a CONNECT in tunnel mode, where no path can be
    /// seen), as robots.txt decides one: only an exception whose paths cover every path of the
    /// site decides. A disallow one refuses the tunnel; an allow one opens a tunnel robots.txt
    /// refuses (`robots_refuses`: it disallows every path). An exception for some paths only
    /// does not decide a tunnel either way. Counts a use.
    pub fn decide_tunnel(
        &self,
        authority: &Authority,
        claim: Claim<'_>,
        robots_refuses: bool,
        now: SystemTime,
    ) -> Option<ExceptionVerdict> {
        let whole: Vec<&Exception> =
            self.applicable(authority, claim, now).filter(|e| e.covers_everything()).collect();
        let e = whole.iter().find(|e| e.effect == Effect::Disallow).or_else(|| {
            robots_refuses.then(|| whole.iter().find(|e| e.effect == Effect::Allow)).flatten()
        })?;
        e.uses.fetch_add(1, Ordering::Relaxed);
        Some(e.verdict(Reading::AsSent, "/"))
    }

    /// [`Exceptions::lifted_usage`] for a tunnel: an allow exception with `usage` whose paths
    /// cover every path of the site. Counts no use, as [`Exceptions::lifted_usage`].
    pub fn lifted_usage_everywhere(
        &self,
        authority: &Authority,
        claim: Claim<'_>,
        now: SystemTime,
    ) -> Option<(Vec<Category>, ExceptionVerdict)> {
        let e = self
            .applicable(authority, claim, now)
            .find(|e| e.effect == Effect::Allow && !e.usage.is_empty() && e.covers_everything())?;
        Some((e.usage.clone(), e.verdict(Reading::AsSent, "/")))
    }

    /// Every exception, for `GET /api/exceptions`.
    pub fn views(&self, now: SystemTime) -> Vec<ExceptionView> {
        self.list.iter().map(|e| e.view(now)).collect()
    }

    /// `(id, seconds until expiry)` of every exception with an expiry, for
    /// `robots_proxy_exception_expiry_seconds`.
    pub fn expiry_seconds(&self, now: SystemTime) -> Vec<(String, i64)> {
        self.list
            .iter()
            .filter_map(|e| Some((e.id.to_string(), seconds_until(e.expires?, now))))
            .collect()
    }

    /// Logs a warning, once a day per exception, for every exception that expires within
    /// seven days; answers the ids warned about. An exception already expired is logged once
    /// (it is loaded inert: `serve` and a reload keep going) and not answered.
    pub fn warn_expiring(&self, now: SystemTime) -> Vec<Arc<str>> {
        const WEEK: Duration = Duration::from_secs(7 * 86_400);
        let day = now.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs() / 86_400);
        let mut warned = Vec::new();
        for e in &self.list {
            let Some(at) = e.expires else { continue };
            let left = at.duration_since(now).unwrap_or_default();
            if at <= now && !e.expired_logged.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    id = %e.id,
                    reference = %e.reference,
                    expires = e.expires_text.as_deref().unwrap_or("-"),
                    "exception {} has expired: it is inert (it decides nothing); remove or renew \
                     it",
                    e.id
                );
            }
            if at <= now || left > WEEK {
                continue;
            }
            if e.warned_day.swap(day, Ordering::Relaxed) == day {
                continue;
            }
            tracing::warn!(
                id = %e.id,
                reference = %e.reference,
                expires = e.expires_text.as_deref().unwrap_or("-"),
                "exception {} expires in {}: renew it or let it end",
                e.id,
                humantime::format_duration(Duration::from_secs(left.as_secs()))
            );
            warned.push(e.id.clone());
        }
        warned
    }
}

fn seconds_until(at: SystemTime, now: SystemTime) -> i64 {
    match at.duration_since(now) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_secs()).unwrap_or(i64::MAX),
    }
}

impl Exception {
    fn compile(e: &ExceptionEntry) -> Result<Self, String> {
        let expires = e.expires.as_deref().map(parse_expires).transpose()?;
        if e.effect == Effect::Allow && expires.is_none() {
            return Err("an allow exception needs expires".into());
        }
        let mut robots = String::from("User-agent: *\n");
        for p in &e.paths {
            if p.contains(['\n', '\r', '#']) || p.chars().any(char::is_control) {
                return Err(format!("{p:?} is not a path pattern"));
            }
            robots.push_str("Disallow: ");
            robots.push_str(p);
            robots.push('\n');
        }
        let sites = e.authorities.iter().map(|a| Site::parse(a)).collect::<Result<_, _>>()?;
        let usage = e.usage.iter().filter_map(|l| Category::from_label(l)).collect();
        Ok(Exception {
            id: e.id.as_str().into(),
            effect: e.effect,
            reference: e.reference.as_deref().unwrap_or_default().into(),
            granted_by: e.granted_by.clone().unwrap_or_default(),
            expires,
            expires_text: e.expires.clone(),
            sites,
            tokens: e.tokens.iter().map(|t| t.to_ascii_lowercase()).collect(),
            users: e.users.clone(),
            paths: RobotsTxt::parse(robots.as_bytes()),
            path_patterns: e.paths.clone(),
            usage,
            uses: AtomicU64::new(0),
            warned_day: AtomicU64::new(u64::MAX),
            expired_logged: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Whether the exception applies to `claim` on `authority` at `now`. A disallow applies
    /// to every claim (the token a client sends, or its user); an allow loosens enforcement,
    /// so it applies only to the identity [`Claim::entitled`] names: a token only when the
    /// authenticated user is tied to it, and the authenticated user.
    fn applies(&self, authority: &Authority, claim: Claim<'_>, now: SystemTime) -> bool {
        if self.expires.is_some_and(|at| now >= at) {
            return false;
        }
        let (token, user) = match self.effect {
            Effect::Disallow => (claim.token, claim.user),
            Effect::Allow => {
                let entitled = claim.entitled();
                (entitled.token, entitled.user)
            }
        };
        let who = token
            .is_some_and(|t| self.tokens.iter().any(|x| t.as_str().eq_ignore_ascii_case(x)))
            || user.is_some_and(|u| self.users.iter().any(|x| x == u));
        who && self.sites.iter().any(|s| s.matches(authority))
    }

    /// Whether every path is in scope (`/`, `*` or `/*`, not anchored).
    fn covers_everything(&self) -> bool {
        self.paths.disallows_everything(None)
    }

    /// Whether one reading of a path is in scope.
    fn covers(&self, reading: Reading, path: &str) -> bool {
        !decide_reading(&self.paths, None, reading, path).is_allowed()
    }

    fn verdict(&self, reading: Reading, path: &str) -> ExceptionVerdict {
        ExceptionVerdict {
            effect: self.effect,
            id: self.id.clone(),
            reference: self.reference.clone(),
            reading,
            read_path: path.to_owned(),
            expires: self.expires,
        }
    }

    fn view(&self, now: SystemTime) -> ExceptionView {
        ExceptionView {
            id: self.id.to_string(),
            effect: self.effect.name(),
            authorities: self.sites.iter().map(Site::to_string).collect(),
            tokens: self.tokens.clone(),
            users: self.users.clone(),
            paths: self.path_patterns.clone(),
            reference: self.reference.to_string(),
            granted_by: self.granted_by.clone(),
            expires: self.expires_text.clone(),
            expires_in_seconds: self.expires.map(|at| seconds_until(at, now)),
            active: self.expires.is_none_or(|at| now < at),
            uses: self.uses.load(Ordering::Relaxed),
        }
    }
}

impl Site {
    /// Whether `authority` (normalised already) is in this entry: both sides went through the
    /// same normalisation, so they compare byte for byte.
    fn matches(&self, authority: &Authority) -> bool {
        match self {
            Site::Exact(site) => site.matches(authority),
            Site::Suffix(suffix, port) => {
                let host = authority.host();
                host.len() > suffix.len()
                    && host.ends_with(suffix.as_str())
                    && port.is_none_or(|p| p == authority.port())
            }
        }
    }
}

#[cfg(test)]
mod tests;

impl super::Policy {
    /// Puts `exceptions` in force for this policy (built from the same configuration).
    pub fn with_exceptions(mut self, exceptions: Arc<Exceptions>) -> Self {
        self.exceptions = exceptions;
        self
    }

    /// The exceptions in force.
    pub fn exceptions(&self) -> &Arc<Exceptions> {
        &self.exceptions
    }

    /// Whether any exception is configured: when not, a request pays this check only.
    #[inline]
    pub fn has_exceptions(&self) -> bool {
        !self.exceptions.is_empty()
    }
}

impl super::Policy {
    /// The exception that decides a tunnel, if one does (see [`Exceptions::decide_tunnel`]);
    /// `robots_refuses`: robots.txt disallows every path for the token. Counts a use.
    pub fn tunnel_exception(
        &self,
        snapshot: &super::RobotsSnapshot,
        claim: Claim<'_>,
        robots_refuses: bool,
        now: SystemTime,
    ) -> Option<ExceptionVerdict> {
        if self.exceptions.is_empty() {
            return None;
        }
        self.exceptions.decide_tunnel(&snapshot.authority, claim, robots_refuses, now)
    }

    /// The usage categories an allow exception lifts for a whole site (a tunnel, see
    /// [`Exceptions::lifted_usage_everywhere`]), and that exception; counts no use.
    pub fn usage_lifted_everywhere(
        &self,
        snapshot: &super::RobotsSnapshot,
        claim: Claim<'_>,
        now: SystemTime,
    ) -> Option<(Vec<Category>, ExceptionVerdict)> {
        if self.exceptions.is_empty() {
            return None;
        }
        self.exceptions.lifted_usage_everywhere(&snapshot.authority, claim, now)
    }
}

impl ExceptionVerdict {
    /// Turns the audit record of the robots.txt decision this exception overrode into the
    /// exception's record: its action, outcome, reason, id and reference; the robots.txt fields
    /// (rule, line, group, state, version) stay, and `robots.exception.robots_verdict` says
    /// what robots.txt decided.
    pub fn audit(&self, record: &mut robots_proxy_audit::AuditRecord, robots_allowed: bool) {
        use robots_proxy_audit::{AuditAction, AuditOutcome, ExceptionFields};
        let robots_reason = std::mem::take(&mut record.reason);
        (record.action, record.outcome) = match self.effect {
            Effect::Allow => (AuditAction::ExceptionAllow, AuditOutcome::Success),
            Effect::Disallow => (AuditAction::ExceptionDisallow, AuditOutcome::Failure),
        };
        record.reason = format!("{} (robots.txt: {robots_reason})", self.reason());
        record.exception = Some(ExceptionFields {
            id: self.id.to_string(),
            reference: self.reference.to_string(),
            robots_verdict: if robots_allowed { "allow" } else { "disallow" },
        });
    }
}
