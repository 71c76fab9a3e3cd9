//! The one decision: [`decide`] takes what is known of a site (a [`View`]) and what a request
//! asks (a [`Question`]) and gives a [`Decision`], over every reading of the path
//! (`shared/spec/README.md`, "What the proxy decides on") and every rule source that can be
//! decided before the request leaves: robots.txt (or its absence), the recorded exceptions
//! (`[[exceptions]]`), and, through the decision, robots.txt's usage preferences and
//! `tdmrep.json` ([`Decision::usage`], [`Decision::tdm_statement`]), read on the same readings.
//!
//! The decision is cheap to make (no string is built: it keeps the engine's answer for the
//! deciding reading, which borrows the rules), so it is the only path, allowed requests
//! included. [`Decision::explain`] is the one renderer of why: the proxy's 403 bodies and audit
//! records, `robots-proxy check`, `robots-proxy evidence` and the admin's `/robots?url=` all
//! read it. Every later step of a request (a usage refusal, a 429, a fleet 503, an exception's
//! record) uses the decision already made; none decides again.

use std::time::SystemTime;

use robots_proxy_engine::{Reason, RobotsTxt, Verdict};
use robots_proxy_sitefiles::{RobotsRules, RobotsSnapshot};

use super::exceptions::{Effect, ExceptionVerdict, Exceptions};
use super::{decide_reading, outcome_text, pattern_reading, state_word, Explanation};
use super::{Claim, ProductToken, Reading, Readings, TokenOrigin, UsagePreferences};

/// The rules in force for a site, borrowed: a parsed robots.txt, or its absence.
#[derive(Debug, Clone, Copy)]
pub enum Rules<'a> {
    /// A parsed robots.txt.
    Parsed(&'a RobotsTxt),
    /// Everything allowed (robots.txt unavailable, RFC 9309 §2.3.1.3).
    AllowAll,
    /// Everything disallowed (robots.txt unreachable, no copy kept, §2.3.1.4).
    DisallowAll,
}

impl<'a> From<&'a RobotsRules> for Rules<'a> {
    fn from(rules: &'a RobotsRules) -> Self {
        match rules {
            RobotsRules::Parsed(robots) => Rules::Parsed(robots),
            RobotsRules::AllowAll => Rules::AllowAll,
            RobotsRules::DisallowAll => Rules::DisallowAll,
        }
    }
}

/// What is known of the site a request is for: its rules, how its origin reads paths, the
/// snapshot they came from (for the explanation: state, URL, age, version; `None` offline, in
/// `check` and `evidence`), and the exceptions in force.
#[derive(Clone, Copy)]
pub struct View<'a> {
    /// The rules in force.
    pub rules: Rules<'a>,
    /// Whether the origin gets the case-folded reading (`policy.fold_case`).
    pub fold_case: bool,
    /// The robots store's snapshot the rules come from, when there is one.
    pub site: Option<&'a RobotsSnapshot>,
    /// The recorded exceptions, asked only when some are configured and `site` names the
    /// authority.
    pub exceptions: Option<&'a Exceptions>,
}

impl<'a> View<'a> {
    /// A view of `snapshot`.
    pub fn of(snapshot: &'a RobotsSnapshot, fold_case: bool) -> Self {
        View { rules: (&snapshot.rules).into(), fold_case, site: Some(snapshot), exceptions: None }
    }

    /// A view of a robots.txt alone (offline: `check`, `evidence`).
    pub fn offline(rules: Rules<'a>, fold_case: bool) -> Self {
        View { rules, fold_case, site: None, exceptions: None }
    }

    /// The same view, with `exceptions` asked.
    pub fn with_exceptions(mut self, exceptions: &'a Exceptions) -> Self {
        self.exceptions = Some(exceptions).filter(|e| !e.is_empty());
        self
    }

    /// Whether the rules have patterns that read differently decoded
    /// (see [`Readings::to_decide`]).
    fn decoded_patterns(&self) -> bool {
        matches!(self.rules, Rules::Parsed(robots) if robots.has_decoded_patterns())
    }

    /// The readings robots.txt is decided on.
    fn readings<'r>(&self, readings: &'r Readings) -> impl Iterator<Item = (Reading, &'r str)> {
        readings.to_decide(self.decoded_patterns(), self.fold_case)
    }

    /// robots.txt on one reading: the verdict, and the engine's answer when a file decided.
    fn robots_on(
        &self,
        token: Option<&ProductToken>,
        reading: Reading,
        path: &str,
    ) -> (Verdict, Option<robots_proxy_engine::Decision<'a>>) {
        match self.rules {
            Rules::Parsed(robots) => {
                let d = decide_reading(robots, token, reading, path);
                (d.verdict(), Some(d))
            }
            Rules::AllowAll => (Verdict::Allow, None),
            Rules::DisallowAll if robots_proxy_engine::is_robots_txt_path(path) => {
                (Verdict::Allow, None)
            }
            Rules::DisallowAll => (Verdict::Disallow, None),
        }
    }
}

/// What a request asks: who it speaks for (the token, its provenance, the user), its path's
/// readings, and when.
#[derive(Clone, Copy)]
pub struct Question<'a> {
    /// The token, where it came from, and the authenticated user.
    pub claim: Claim<'a>,
    /// Every reading of the path.
    pub readings: &'a Readings,
    /// When (the robots.txt's age, an exception's expiry).
    pub now: SystemTime,
}

/// What kind of reason an [`Explanation`] gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Why {
    /// The longest matching rule decided.
    Rule,
    /// Groups apply, but none of their rules matches.
    NoRuleMatched,
    /// No group applies (and there is no `*` group).
    NoGroupApplies,
    /// The path is `/robots.txt`, always allowed.
    RobotsTxt,
    /// The matcher's work budget was spent: refused without naming a rule.
    OverBudget,
    /// No file is in force (allow all, disallow all).
    NoFile,
}

/// How the proxy knows the token a request speaks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provenance {
    /// Only claimed: sent by the client (token header, User-Agent), or the configured default.
    Asserted,
    /// Known from credentials: the authenticated user is tied to it.
    Authenticated,
}

impl Provenance {
    fn of(origin: TokenOrigin) -> Self {
        match origin {
            TokenOrigin::Credentials => Provenance::Authenticated,
            _ => Provenance::Asserted,
        }
    }
}

/// The decision for one request, made once: robots.txt on every reading, then the exception
/// that overrides it, if one does. Borrows the view and the question; [`Decision::explain`]
/// says why.
#[derive(Clone)]
pub struct Decision<'a> {
    view: View<'a>,
    question: Question<'a>,
    /// robots.txt's verdict: disallowed when any reading is.
    robots: Verdict,
    /// The deciding reading: the first disallowed one, or the path as sent.
    reading: Reading,
    /// That reading's path and query.
    read_path: &'a str,
    /// Whether the deciding reading is not the first one decided (the explanation says how
    /// the path was read).
    read_otherwise: bool,
    /// The engine's answer on the deciding reading, when a file decided.
    engine: Option<robots_proxy_engine::Decision<'a>>,
    /// The exception that overrides robots.txt, if one does (boxed: most requests have none,
    /// and the proxy holds the decision across every later step of the request).
    exception: Option<Box<ExceptionVerdict>>,
}

/// Decides `question` on `view`: every reading of the path against robots.txt (the most
/// restrictive wins, and the first disallowed reading is named), then the exceptions of the
/// view (a disallow one wins over robots.txt and over any allow, an allow one must cover every
/// reading robots.txt disallowed). Counts no exception use: the proxy counts one when it acts
/// on the decision ([`Decision::count_exception`]).
pub fn decide<'a>(view: View<'a>, question: Question<'a>) -> Decision<'a> {
    let token = question.claim.token;
    let readings = question.readings;
    let mut first: Option<(usize, Reading, &'a str, Option<robots_proxy_engine::Decision<'a>>)> =
        None;
    // The path as sent is always decided first; its answer explains an allowed request.
    let mut as_sent: Option<robots_proxy_engine::Decision<'a>> = None;
    // Only the exceptions need every disallowed reading; robots.txt stops at the first.
    let mut disallowed: Vec<(Reading, &'a str)> = Vec::new();
    let wants_all = view.exceptions.is_some() && view.site.is_some();
    for (i, (reading, path)) in view.readings(readings).enumerate() {
        let (verdict, engine) = view.robots_on(token, reading, path);
        if i == 0 {
            as_sent = engine;
        }
        if verdict == Verdict::Disallow {
            if first.is_none() {
                first = Some((i, reading, path, engine));
            }
            if !wants_all {
                break;
            }
            disallowed.push((reading, path));
        }
    }
    let (robots, reading, read_path, read_otherwise, engine) = match first {
        Some((i, reading, path, engine)) => (Verdict::Disallow, reading, path, i > 0, engine),
        None => (Verdict::Allow, Reading::AsSent, readings.as_sent(), false, as_sent),
    };
    let exception = match (view.exceptions, view.site) {
        (Some(exceptions), Some(site)) => {
            // Every reading, decoded ones included, against the exception's patterns.
            let all: Vec<(Reading, &str)> = readings.to_decide(true, view.fold_case).collect();
            let found =
                exceptions.find(&site.authority, question.claim, &all, &disallowed, question.now);
            found.map(Box::new)
        }
        _ => None,
    };
    Decision { view, question, robots, reading, read_path, read_otherwise, engine, exception }
}

impl<'a> Decision<'a> {
    /// The verdict in force: the exception's when one decides, else robots.txt's.
    pub fn verdict(&self) -> Verdict {
        match self.exception.as_ref().map(|e| e.effect) {
            Some(Effect::Allow) => Verdict::Allow,
            Some(Effect::Disallow) => Verdict::Disallow,
            None => self.robots,
        }
    }

    /// Whether the request may go.
    pub fn is_allowed(&self) -> bool {
        self.verdict() == Verdict::Allow
    }

    /// Whether robots.txt alone allows it (every reading).
    pub fn robots_allowed(&self) -> bool {
        self.robots == Verdict::Allow
    }

    /// The exception that overrides robots.txt, if one does.
    pub fn exception(&self) -> Option<&ExceptionVerdict> {
        self.exception.as_deref()
    }

    /// Counts one use of the exception that decided, if one did.
    pub fn count_exception(&self) {
        if let (Some(v), Some(exceptions)) = (&self.exception, self.view.exceptions) {
            exceptions.count(&v.id);
        }
    }

    /// Who the request speaks for, as decided.
    pub fn claim(&self) -> Claim<'a> {
        self.question.claim
    }

    /// Whether that token is only claimed or known from credentials.
    pub fn provenance(&self) -> Provenance {
        Provenance::of(self.question.claim.origin)
    }

    /// Whether the deciding reading is not the first one decided (a reading other than the
    /// path as sent disallowed it).
    pub fn read_otherwise(&self) -> bool {
        self.read_otherwise
    }

    /// The snapshot decided on, when the view has one.
    pub fn site(&self) -> Option<&'a RobotsSnapshot> {
        self.view.site
    }

    /// Why robots.txt decided as it did, in the words every answer, record and report uses.
    pub fn explain(&self) -> Explanation {
        let mut e = explain_reading(&self.view, self.engine, self.reading, self.read_path);
        e.age = self.view.site.map(|s| s.age(self.question.now)).unwrap_or_default();
        if self.read_otherwise {
            e.reason = format!(
                "{} (the path read as {}: {})",
                e.reason,
                self.read_path,
                self.reading.description()
            );
        }
        e
    }

    /// Every reading decided on, each with its own explanation, the path as sent first (for
    /// `check --as-proxy`, `evidence` and the admin `/robots` page).
    pub fn each(&self) -> Vec<Explanation> {
        let token = self.question.claim.token;
        let at = |s: &RobotsSnapshot| s.age(self.question.now);
        self.view
            .readings(self.question.readings)
            .map(|(reading, path)| {
                let (_, engine) = self.view.robots_on(token, reading, path);
                let mut e = explain_reading(&self.view, engine, reading, path);
                e.age = self.view.site.map(at).unwrap_or_default();
                e
            })
            .collect()
    }

    /// The usage categories an allow exception with `usage` (`usage = ["train-ai"]`) lifts for
    /// this request (every reading of its path in scope), and that exception. Counts no use:
    /// the caller counts one ([`Exceptions::count`]) when the lift dropped a purpose of the
    /// crawler and no other decision of the same exception was counted for the request.
    pub fn usage_lifted(&self) -> Option<(Vec<super::Category>, ExceptionVerdict)> {
        let (exceptions, site) = (self.view.exceptions?, self.view.site?);
        let q = &self.question;
        let all: Vec<(Reading, &str)> = q.readings.to_decide(true, self.view.fold_case).collect();
        exceptions.lifted_usage(&site.authority, q.claim, &all, q.now)
    }

    /// The AI usage preferences robots.txt states for the request's path, combined over every
    /// reading robots.txt is decided on (the decoded readings against the patterns read
    /// decoded, the case-folded one where the origin folds case), per category the most
    /// restrictive.
    pub fn usage(&self) -> UsagePreferences {
        let Rules::Parsed(robots) = self.view.rules else {
            return UsagePreferences::default();
        };
        let decoded = robots.has_decoded_patterns() || robots.has_decoded_usage_patterns();
        let token = self.question.claim.token;
        let mut prefs = UsagePreferences::default();
        for (reading, path) in self.question.readings.to_decide(decoded, self.view.fold_case) {
            prefs.combine(&robots.usage_as(token, path, pattern_reading(reading)));
        }
        prefs
    }

    /// The `tdmrep.json` statement for the request's path, on every reading robots.txt is
    /// decided on: the statement of the first rule matching some reading that reserves TDM
    /// rights wins (the most restrictive reading); else the statement for the path as sent.
    pub fn tdm_statement<'f>(
        &self,
        file: &'f robots_proxy_engine::optout::TdmFile,
    ) -> Option<&'f robots_proxy_engine::optout::TdmStatement> {
        let mut as_sent = None;
        for (reading, path) in self.question.readings.to_decide(true, self.view.fold_case) {
            let read = pattern_reading(reading);
            let path = robots_proxy_engine::path_as(path, read);
            let statement = file.statement_for_as(path.as_bytes(), read);
            if statement.is_some_and(|s| s.reserved == Some(true)) {
                return statement;
            }
            if reading == Reading::AsSent {
                as_sent = statement;
            }
        }
        as_sent
    }
}

/// The explanation of robots.txt on one reading (the age is the caller's).
fn explain_reading(
    view: &View<'_>,
    engine: Option<robots_proxy_engine::Decision<'_>>,
    reading: Reading,
    path: &str,
) -> Explanation {
    let site = view.site;
    let mut e = Explanation {
        verdict: Verdict::Allow,
        reason: String::new(),
        why: Why::NoFile,
        rule: None,
        line: None,
        group: None,
        state: site.map_or(robots_proxy_sitefiles::RobotsState::Fresh, |s| s.state),
        robots_url: site.map(|s| s.robots_url.clone()).unwrap_or_default(),
        age: std::time::Duration::ZERO,
        reading,
        read_path: path.to_owned(),
        version: match view.rules {
            Rules::Parsed(_) => site.and_then(|s| s.version.clone()),
            Rules::AllowAll | Rules::DisallowAll => None,
        },
    };
    if robots_proxy_engine::is_robots_txt_path(path) {
        e.reason = "/robots.txt is always allowed".to_owned();
        e.why = Why::RobotsTxt;
        return e;
    }
    match (view.rules, engine) {
        (Rules::Parsed(_), Some(decision)) => {
            e.verdict = decision.verdict();
            e.group =
                decision.user_agent_line().map(|u| format!("{} (line {})", u.value(), u.line()));
            e.why = match decision.reason() {
                Reason::Rule(rule) => {
                    e.rule = Some(rule.to_string());
                    e.line = Some(rule.line());
                    Why::Rule
                }
                Reason::NoRuleMatched => Why::NoRuleMatched,
                Reason::NoGroupApplies => Why::NoGroupApplies,
                Reason::RobotsTxt => Why::RobotsTxt,
                Reason::OverBudget => Why::OverBudget,
            };
            e.reason = decision.reason().explain(decision.is_allowed());
        }
        (Rules::Parsed(_), None) => {}
        (Rules::AllowAll, _) => {
            e.reason = match site {
                Some(s) => format!(
                    "robots.txt {} ({}): all paths allowed",
                    state_word(s.state),
                    outcome_text(&s.last_outcome)
                ),
                None => "robots.txt answered 4xx (or could not be fetched past \
                         robots.give_up_after): every path allowed (RFC 9309 §2.3.1.3)"
                    .to_owned(),
            };
        }
        (Rules::DisallowAll, _) => {
            e.verdict = Verdict::Disallow;
            e.reason = match site {
                Some(s) => format!(
                    "robots.txt unreachable ({}): all paths disallowed until it can be fetched",
                    outcome_text(&s.last_outcome)
                ),
                None => "robots.txt could not be fetched (429, 5xx or a network failure) and no \
                         copy was kept: every path disallowed (RFC 9309 §2.3.1.4)"
                    .to_owned(),
            };
        }
    }
    e
}

impl Explanation {
    /// The reason in a few words (`line 3: disallow: /private`, `no rule matched`), as
    /// `robots-proxy check` prints it beside each URL.
    pub fn brief(&self) -> String {
        match (self.why, &self.rule, self.line) {
            (Why::Rule, Some(rule), Some(line)) => format!("line {line}: {rule}"),
            (Why::NoRuleMatched, ..) => "no rule matched".to_owned(),
            (Why::NoGroupApplies, ..) => "no group applies".to_owned(),
            (Why::RobotsTxt, ..) => "/robots.txt is always allowed".to_owned(),
            (Why::OverBudget, ..) => {
                "over the match budget: refused without naming a rule".to_owned()
            }
            _ => self.reason.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask<'a>(robots: &'a RobotsTxt, readings: &'a Readings) -> Decision<'a> {
        let claim = Claim::asserted(None, None);
        let question = Question { claim, readings, now: SystemTime::UNIX_EPOCH };
        decide(View::offline(Rules::Parsed(robots), false), question)
    }

    #[test]
    fn the_first_disallowed_reading_decides_and_is_explained_once() {
        let robots = RobotsTxt::parse(b"User-agent: *\nDisallow: /private\n");
        let readings = Readings::of("/public/..%2fprivate/x");
        let d = ask(&robots, &readings);
        assert!(!d.is_allowed() && !d.robots_allowed());
        assert!(d.read_otherwise());
        let e = d.explain();
        assert_eq!(e.reading, Reading::Decoded);
        assert_eq!(e.read_path, "/private/x");
        assert_eq!((e.rule.as_deref(), e.line), (Some("disallow: /private"), Some(2)));
        assert!(e.reason.contains("(the path read as /private/x: percent-decoded"), "{}", e.reason);
        assert_eq!(e.brief(), "line 2: disallow: /private");
        let each: Vec<bool> = d.each().iter().map(Explanation::is_allowed).collect();
        assert_eq!(each, [true, false], "the path as sent, then the decoded reading");

        let readings = Readings::of("/public/x");
        let d = ask(&robots, &readings);
        assert!(d.is_allowed() && !d.read_otherwise());
        let e = d.explain();
        assert_eq!((e.reading, e.why), (Reading::AsSent, Why::NoRuleMatched));
        assert_eq!(e.brief(), "no rule matched");

        // The path as sent disallowed is not "read otherwise" (shard 5/6: `i > 0` → `i >= 0`
        // survived), though it has other readings.
        let readings = Readings::of("/private/./x");
        assert!(readings.has_others());
        let d = ask(&robots, &readings);
        assert!(!d.is_allowed() && !d.read_otherwise());
        assert_eq!(d.explain().reading, Reading::AsSent);
    }

    #[test]
    fn the_token_s_provenance_is_in_the_decision() {
        let robots = RobotsTxt::parse(b"User-agent: *\nAllow: /\n");
        let readings = Readings::of("/");
        let token = ProductToken::new("AcmeBot").unwrap();
        let q = |claim| Question { claim, readings: &readings, now: SystemTime::UNIX_EPOCH };
        let view = View::offline(Rules::Parsed(&robots), false);
        let asserted = decide(view, q(Claim::asserted(Some(&token), None)));
        assert_eq!(asserted.provenance(), Provenance::Asserted);
        let tied = decide(view, q(Claim::tied(Some(&token), Some("alice"))));
        assert_eq!(tied.provenance(), Provenance::Authenticated);
        assert_eq!(tied.claim().user, Some("alice"));
    }

    #[test]
    fn no_file_decides_by_its_consequence_but_robots_txt_stays_allowed() {
        let readings = Readings::of("/x");
        let q = Question {
            claim: Claim::asserted(None, None),
            readings: &readings,
            now: SystemTime::UNIX_EPOCH,
        };
        let d = decide(View::offline(Rules::DisallowAll, false), q);
        assert!(!d.is_allowed());
        assert_eq!(d.explain().why, Why::NoFile);
        let own = Readings::of("/robots.txt");
        let d = decide(View::offline(Rules::DisallowAll, false), Question { readings: &own, ..q });
        assert!(d.is_allowed());
        assert_eq!(d.explain().why, Why::RobotsTxt);
        assert!(decide(View::offline(Rules::AllowAll, false), q).is_allowed());
    }

    /// `tdmrep.json`'s statement for the path as sent, when no reading's reserves rights; the
    /// first reading's that reserves, when one does (shard 3/6: `==` → `!=` on
    /// `Reading::AsSent` survived, returning another reading's statement).
    #[test]
    fn tdmrep_gives_the_path_as_sent_its_statement_unless_a_reading_reserves() {
        let file = robots_proxy_engine::optout::TdmFile::parse(
            br#"[{"location": "/a/", "tdm-reservation": 0, "tdm-policy": "https://p.test/a"},
                 {"location": "/b/", "tdm-reservation": 0, "tdm-policy": "https://p.test/b"},
                 {"location": "/c/", "tdm-reservation": 1, "tdm-policy": "https://p.test/c"}]"#,
        )
        .unwrap();
        let robots = RobotsTxt::parse(b"User-agent: *\nAllow: /\n");
        let policy = |path: &str| {
            let readings = Readings::of(path);
            let d = ask(&robots, &readings);
            d.tdm_statement(&file).and_then(|s| s.policy.clone())
        };
        assert_eq!(policy("/a/..%2fb/x").as_deref(), Some("https://p.test/a"));
        assert_eq!(policy("/a/..%2fc/x").as_deref(), Some("https://p.test/c"));
        assert_eq!(policy("/d/..%2fb/x"), None, "the path as sent has no statement");
    }

    /// robots.txt alone allows what every reading allows (a survivor of the decision's
    /// mutation run: only refusals asked `robots_allowed`).
    #[test]
    fn robots_txt_alone_allows_what_every_reading_allows() {
        let robots = RobotsTxt::parse(b"User-agent: *\nDisallow: /private\n");
        let readings = Readings::of("/public/..%2fopen/x");
        let d = ask(&robots, &readings);
        assert!(d.robots_allowed() && d.is_allowed());
    }

    /// Each kind of reason in a few words; a reason without a rule or a kind of its own (no
    /// file in force) in its sentence (a survivor of the decision's mutation run: no test
    /// asked the over-budget brief).
    #[test]
    fn brief_names_each_kind_of_reason() {
        let robots = RobotsTxt::parse(b"User-agent: *\nDisallow: /x\n");
        let readings = Readings::of("/y");
        let mut e = ask(&robots, &readings).explain();
        for (why, brief) in [
            (Why::NoRuleMatched, "no rule matched"),
            (Why::NoGroupApplies, "no group applies"),
            (Why::RobotsTxt, "/robots.txt is always allowed"),
            (Why::OverBudget, "over the match budget: refused without naming a rule"),
        ] {
            e.why = why;
            assert_eq!(e.brief(), brief);
        }
        e.why = Why::NoFile;
        e.reason = "robots.txt unreachable".to_owned();
        assert_eq!(e.brief(), "robots.txt unreachable");
    }
}
