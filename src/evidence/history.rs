//! What is known of each authority's robots.txt over time, gathered from every source, and the
//! windows in which each version was in force.
//!
//! A source gives *observations*: at a time, an authority had a given thing in force — a file
//! (a version, by its SHA-256), or no file with its RFC 9309 consequence (a 4xx answer: allow
//! all; 5xx or a network failure with no copy: disallow all). An observation is a fetch (the
//! version's `robots.fetched_at`) or a confirmation (a record decided on it at its
//! `@timestamp`). Versions are keyed by digest alone, so the same bytes from several sources
//! (instances of a fleet, rotated files) are one version, and their observations one timeline.
//!
//! Every observation from an audit record names the instance that wrote it (`service.node.name`,
//! none outside a fleet): the windows can be built from every source ([`Scope::All`]) or from one
//! instance's records alone ([`Scope::Instance`]), and [`History::instances_at`] says what each
//! instance had in force at a time, and whether they disagree (issue 39, L5: instances of a
//! fleet that each fetch a robots.txt larger than `fleet.max_shared_body` can hold different
//! versions at once, and the merged timeline gave one instance's answer for another's request).
//!
//! The windows of an authority: its observations sorted by time, runs of the same thing merged.
//! A window runs from its first observation (`from`) to the first observation of the next
//! window (`replaced_at`); the last window runs to its last observation (`last_confirmed`):
//! after that nothing is known, and nothing is claimed.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, OnceLock};
use std::time::SystemTime;

use crate::archive::ArchiveReader;

/// What an authority had in force.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum InForce {
    /// A robots.txt file: its version, by the lowercase hex SHA-256 of its bytes.
    File(String),
    /// No file: robots.txt answered 4xx, so every path was allowed (RFC 9309 §2.3.1.3).
    AllowAll,
    /// No file: robots.txt could not be fetched (429, 5xx, network) and no copy was kept, so
    /// every path was disallowed (RFC 9309 §2.3.1.4).
    DisallowAll,
}

impl InForce {
    /// `file`, `allow-all` or `disallow-all`.
    pub fn kind(&self) -> &'static str {
        match self {
            InForce::File(_) => "file",
            InForce::AllowAll => "allow-all",
            InForce::DisallowAll => "disallow-all",
        }
    }
}

/// One version's bytes and where they came from.
#[derive(Debug, Clone)]
pub struct Body {
    /// The bytes, as parsed by the proxy.
    pub bytes: Vec<u8>,
    /// The robots.txt URL.
    pub url: String,
    /// The HTTP status of the fetch, when known.
    pub status: Option<u16>,
}

/// One thing known at one time.
#[derive(Debug, Clone)]
pub struct Observation {
    /// When.
    pub at: SystemTime,
    /// What was in force.
    pub what: InForce,
    /// Whether `at` is a fetch time (`robots.fetched_at`), not only a decision made with it.
    pub fetch: bool,
    /// Why, for a window without a file (the record's `event.reason`).
    pub note: Option<String>,
    /// Whether the source says it was still in force when the source was read (the archive's
    /// window in force).
    pub open: bool,
    /// The fetch it names (`robots.fetched_at`): the observations of one fetch make one
    /// stretch of time in which what it gave was in force.
    pub fetch_key: Option<SystemTime>,
    /// Up to when the source says it stayed in force (a `robots_fetch` record's
    /// `robots.expires_at`; an archive window's `replaced_at`, or for the window in force its
    /// expiry). Without it, only the observation's own time is known.
    pub until: Option<SystemTime>,
    /// Whether it comes from audit files, whose knowledge ends at their last record: a
    /// stretch is cut there (a stopped proxy decides nothing).
    pub from_audit: bool,
    /// The instance whose audit record it comes from (`service.node.name`); none for a record
    /// without it (a proxy outside a fleet) and for an archive's observations.
    pub instance: Option<Arc<str>>,
}

impl Observation {
    /// An observation of `what` at `at`, with nothing more known.
    pub fn at(at: SystemTime, what: InForce) -> Observation {
        Observation {
            at,
            what,
            fetch: false,
            note: None,
            open: false,
            fetch_key: None,
            until: None,
            from_audit: false,
            instance: None,
        }
    }
}

/// Which observations a view of the history is built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope<'a> {
    /// Every source's.
    All,
    /// Those of the audit records one instance wrote (`service.node.name`; `None`: the records
    /// that name no instance). An archive's observations name no instance and are left out.
    Instance(Option<&'a str>),
}

impl Scope<'_> {
    fn holds(&self, o: &Observation) -> bool {
        match self {
            Scope::All => true,
            Scope::Instance(name) => o.from_audit && o.instance.as_deref() == *name,
        }
    }
}

/// What one instance had in force at a time ([`History::instances_at`]).
#[derive(Debug, Clone)]
pub struct InstanceInForce {
    /// The instance (`service.node.name`; `None`: records that name none).
    pub instance: Option<String>,
    /// Its window in force then, or why none is known.
    pub window: Result<Window, Unknown>,
}

impl InstanceInForce {
    /// What was in force, `None` when nothing is known.
    pub fn what(&self) -> Option<&InForce> {
        self.window.as_ref().ok().map(|w| &w.what)
    }
}

/// What each instance that the audit files show with the authority had in force at a time.
#[derive(Debug, Clone, Default)]
pub struct Instances {
    /// One per instance, in name order (the records naming none first).
    pub each: Vec<InstanceInForce>,
}

impl Instances {
    /// Whether they disagree: two instances had different things in force, or one is known
    /// and another is not.
    pub fn disagree(&self) -> bool {
        let mut seen = self.each.iter().map(InstanceInForce::what);
        match seen.next() {
            Some(first) => seen.any(|w| w != first),
            None => false,
        }
    }

    /// The entry of `instance`.
    pub fn of(&self, instance: Option<&str>) -> Option<&InstanceInForce> {
        self.each.iter().find(|e| e.instance.as_deref() == instance)
    }
}

/// One window in which one thing was in force for an authority.
#[derive(Debug, Clone)]
pub struct Window {
    /// What was in force.
    pub what: InForce,
    /// The first observation.
    pub from: SystemTime,
    /// The last observation.
    pub last_confirmed: SystemTime,
    /// The first observation of the next window, if there is one.
    pub replaced_at: Option<SystemTime>,
    /// The distinct fetch times seen in the window, sorted.
    pub fetches: Vec<SystemTime>,
    /// How many observations the window was built from.
    pub observations: usize,
    /// Why, for a window without a file.
    pub note: Option<String>,
    /// Whether a source says it is still in force (the archive's window in force).
    pub open: bool,
    /// The stretches of time in which the sources know it was in force, sorted: each fetch's
    /// (from its first observation to its expiry or its last use, whichever is later), and
    /// each observation with no fetch named. Between them nothing is known: the proxy was
    /// stopped, or idle past the copy's expiry (issue 39, M2, H2).
    pub known: Vec<(SystemTime, SystemTime)>,
}

impl Window {
    /// Whether `at` falls between the window's first observation and the next window.
    pub fn spans(&self, at: SystemTime) -> bool {
        self.from <= at && self.replaced_at.is_none_or(|replaced| at < replaced)
    }

    /// Whether the window covers `at`: it [spans](Self::spans) it, and a stretch the sources
    /// know of holds it.
    pub fn covers(&self, at: SystemTime) -> bool {
        self.spans(at) && self.known_at(at).is_some()
    }

    /// The stretch of [`Window::known`] that holds `at`.
    pub fn known_at(&self, at: SystemTime) -> Option<(SystemTime, SystemTime)> {
        self.known.iter().find(|(a, b)| *a <= at && at <= *b).copied()
    }

    /// The last time known in force (the end of the last stretch, before the next window).
    pub fn known_until(&self) -> SystemTime {
        let end = self.known.iter().map(|k| k.1).max().unwrap_or(self.last_confirmed);
        match self.replaced_at {
            Some(replaced) => end.min(replaced),
            None => end,
        }
    }

    /// The last fetch at or before `at` in this window (the bytes in force at `at` were fetched
    /// then), else the window's start.
    pub fn fetched_before(&self, at: SystemTime) -> Option<SystemTime> {
        self.fetches.iter().rev().find(|f| **f <= at).copied().or(self.fetches.first().copied())
    }
}

/// What every source gave, merged.
#[derive(Debug, Default)]
pub struct History {
    bodies: HashMap<String, Body>,
    observations: BTreeMap<String, Vec<Observation>>,
    /// (authority, sha256) of the versions a source says came from an origin that reads paths
    /// case-insensitively (the archive's `folds_case`).
    folding: std::collections::HashSet<(String, String)>,
    /// The latest `@timestamp` of the audit files read: they know nothing after it.
    audit_end: Option<SystemTime>,
    /// The same per instance (`service.node.name`; `None`: records naming none): the audit
    /// records of each instance the files hold, and the last time each knows of.
    instance_end: BTreeMap<Option<Arc<str>>, SystemTime>,
    /// Bodies a source holds but that could not be used (unreadable, or not what their
    /// digest says): digest → why.
    unusable: HashMap<String, String>,
    /// Bodies a state directory's archive holds, read and checked against their digest only
    /// when an answer asks for one (issue 39, L2: every window's body was read and checked for
    /// any question, so one bad body failed them all).
    archived: HashMap<String, Archived>,
    /// What the sources skipped and the answer should name (an archive's unusable files).
    warnings: Vec<String>,
}

/// A body an archive holds, read on first use.
#[derive(Debug)]
struct Archived {
    reader: Arc<ArchiveReader>,
    url: String,
    status: Option<u16>,
    /// Once read: the body, none (not kept), or why it cannot be used.
    read: OnceLock<Result<Option<Body>, String>>,
}

impl Archived {
    fn get(&self, sha256: &str) -> &Result<Option<Body>, String> {
        self.read.get_or_init(|| match self.reader.body_checked(sha256) {
            Ok(Some(bytes)) => {
                Ok(Some(Body { bytes: bytes.to_vec(), url: self.url.clone(), status: self.status }))
            }
            Ok(None) => Ok(None),
            Err(e) => Err(e.to_string()),
        })
    }
}

/// Why nothing is known at a time: the earliest and the latest time anything is known of the
/// authority, and, when the time falls inside a window but outside every stretch known of it,
/// that stretch's end and the next known time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unknown {
    /// The earliest time anything is known.
    pub earliest: Option<SystemTime>,
    /// The latest.
    pub latest: Option<SystemTime>,
    /// In a window: what was in force before, until when it was known, and the next time
    /// anything is known.
    pub gap: Option<(InForce, SystemTime, Option<SystemTime>)>,
}

impl History {
    /// Adds the bytes of a version (the first source that has them wins: the same digest is
    /// the same bytes).
    pub fn add_body(&mut self, sha256: &str, body: Body) {
        self.bodies.entry(sha256.to_owned()).or_insert(body);
    }

    /// Notes an audit record's `@timestamp` and the instance that wrote it: the audit files
    /// (and that instance's records) know of the time up to it. Returns the instance's name as
    /// the history keeps it, for the record's observations ([`Observation::instance`]).
    pub fn audit_record_at(&mut self, at: SystemTime, instance: Option<&str>) -> Option<Arc<str>> {
        self.audit_end = Some(self.audit_end.map_or(at, |end| end.max(at)));
        let key = instance.map(|name| {
            self.instance_end
                .keys()
                .flatten()
                .find(|k| &***k == name)
                .cloned()
                .unwrap_or_else(|| Arc::from(name))
        });
        let end = self.instance_end.entry(key.clone()).or_insert(at);
        *end = (*end).max(at);
        key
    }

    /// The instances the audit files' records name (`service.node.name`), in name order;
    /// `None` first when some records name none (a proxy outside a fleet).
    pub fn instances(&self) -> Vec<Option<&str>> {
        self.instance_end.keys().map(Option::as_deref).collect()
    }

    /// Adds an observation for `authority` (`scheme://host[:port]`).
    pub fn observe(&mut self, authority: &str, observation: Observation) {
        self.observations.entry(authority.to_owned()).or_default().push(observation);
    }

    /// Notes that `authority`'s version `sha256` came from an origin that reads paths
    /// case-insensitively, so the proxy decided the case-folded reading with it.
    pub fn note_folds_case(&mut self, authority: &str, sha256: &str) {
        self.folding.insert((authority.to_owned(), sha256.to_owned()));
    }

    /// Whether a source said `authority`'s version `sha256` came from such an origin.
    pub fn folds_case(&self, authority: &str, sha256: &str) -> bool {
        self.folding.contains(&(authority.to_owned(), sha256.to_owned()))
    }

    /// Notes that `reader`'s archive may hold the body of `sha256` (from `url`, fetched with
    /// `status`): read and checked only if [`History::body`] asks for it and no other source
    /// gave it.
    pub fn offer_archived_body(
        &mut self,
        sha256: &str,
        reader: &Arc<ArchiveReader>,
        url: &str,
        status: Option<u16>,
    ) {
        self.archived.entry(sha256.to_owned()).or_insert_with(|| Archived {
            reader: reader.clone(),
            url: url.to_owned(),
            status,
            read: OnceLock::new(),
        });
    }

    /// Notes something a source skipped, for the answer to name.
    pub fn warn(&mut self, warning: String) {
        if !self.warnings.contains(&warning) {
            self.warnings.push(warning);
        }
    }

    /// What the sources skipped (see [`History::warn`]).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Notes that a source's body of `sha256` could not be used, and why.
    pub fn note_unusable_body(&mut self, sha256: &str, why: String) {
        self.unusable.entry(sha256.to_owned()).or_insert(why);
    }

    /// Why a source's body of `sha256` could not be used, if one could not.
    pub fn unusable_body(&self, sha256: &str) -> Option<&str> {
        self.unusable.get(sha256).map(String::as_str).or_else(|| {
            let archived = self.archived.get(sha256)?;
            archived.get(sha256).as_ref().err().map(String::as_str)
        })
    }

    /// The bytes of a version, when a source holds them (an archive's body is read and checked
    /// now, the first time it is asked for).
    pub fn body(&self, sha256: &str) -> Option<&Body> {
        self.bodies.get(sha256).or_else(|| {
            let archived = self.archived.get(sha256)?;
            archived.get(sha256).as_ref().ok()?.as_ref()
        })
    }

    /// Every authority with an observation.
    pub fn authorities(&self) -> impl Iterator<Item = &str> {
        self.observations.keys().map(String::as_str)
    }

    /// The windows of `authority`, oldest first, from every source.
    pub fn windows(&self, authority: &str) -> Vec<Window> {
        self.windows_in(authority, Scope::All)
    }

    /// The windows of `authority` built from the observations of `scope`, oldest first.
    pub fn windows_in(&self, authority: &str, scope: Scope<'_>) -> Vec<Window> {
        let Some(observed) = self.observations.get(authority) else { return Vec::new() };
        let mut observed: Vec<&Observation> = observed.iter().filter(|o| scope.holds(o)).collect();
        observed.sort_by(|a, b| a.at.cmp(&b.at).then_with(|| a.what.cmp(&b.what)));
        let mut windows: Vec<Window> = Vec::new();
        let mut members: Vec<Vec<&Observation>> = Vec::new();
        for o in observed {
            match windows.last_mut() {
                Some(w) if w.what == o.what => {
                    w.last_confirmed = o.at;
                    w.observations += 1;
                    // One fetch is named by every record decided on it: counted once.
                    if o.fetch && w.fetches.last() != Some(&o.at) {
                        w.fetches.push(o.at);
                    }
                    if w.note.is_none() {
                        w.note.clone_from(&o.note);
                    }
                    w.open |= o.open;
                    if let Some(m) = members.last_mut() {
                        m.push(o);
                    }
                }
                last => {
                    if let Some(w) = last {
                        w.replaced_at = Some(o.at);
                    }
                    windows.push(Window {
                        what: o.what.clone(),
                        from: o.at,
                        last_confirmed: o.at,
                        replaced_at: None,
                        fetches: if o.fetch { vec![o.at] } else { Vec::new() },
                        observations: 1,
                        note: o.note.clone(),
                        open: o.open,
                        known: Vec::new(),
                    });
                    members.push(vec![o]);
                }
            }
        }
        let audit_end = match scope {
            Scope::All => self.audit_end,
            Scope::Instance(name) => {
                self.instance_end.iter().find(|(k, _)| k.as_deref() == name).map(|(_, end)| *end)
            }
        };
        for (w, m) in windows.iter_mut().zip(members) {
            w.known = known(&m, audit_end);
        }
        windows
    }

    /// The window of `authority` in force at `at`, or why there is none: the earliest time
    /// anything is known for it, and the last (`None` each when nothing is known at all).
    pub fn in_force_at(&self, authority: &str, at: SystemTime) -> Result<Window, Unknown> {
        self.in_force_in(authority, at, Scope::All)
    }

    /// What each instance whose audit records name `authority` had in force for it at `at`,
    /// each from its own records alone.
    pub fn instances_at(&self, authority: &str, at: SystemTime) -> Instances {
        let named: BTreeSet<Option<&str>> = self
            .observations
            .get(authority)
            .into_iter()
            .flatten()
            .filter(|o| o.from_audit)
            .map(|o| o.instance.as_deref())
            .collect();
        let each = named
            .into_iter()
            .map(|name| InstanceInForce {
                instance: name.map(str::to_owned),
                window: self.in_force_in(authority, at, Scope::Instance(name)),
            })
            .collect();
        Instances { each }
    }

    /// [`History::in_force_at`], from the observations of `scope`.
    pub fn in_force_in(
        &self,
        authority: &str,
        at: SystemTime,
        scope: Scope<'_>,
    ) -> Result<Window, Unknown> {
        let windows = self.windows_in(authority, scope);
        if let Some(w) = windows.iter().find(|w| w.covers(at)) {
            return Ok(w.clone());
        }
        let gap = windows.iter().find(|w| w.spans(at)).map(|w| {
            let before = w.known.iter().filter(|k| k.1 < at).map(|k| k.1).max();
            let next = w.known.iter().map(|k| k.0).filter(|a| *a > at).min().or(w.replaced_at);
            (w.what.clone(), before.unwrap_or(w.from), next)
        });
        Err(Unknown {
            earliest: windows.first().map(|w| w.from),
            latest: windows.iter().map(Window::known_until).max(),
            gap,
        })
    }
}

/// The stretches `observed` (one window's) make known: one per fetch named, from its first
/// observation to the latest of its observations and what they say it lasted to; one per
/// observation naming no fetch. What audit files say ends at their last record (`audit_end`,
/// of the files or of the one instance whose records the window was built from).
fn known(
    observed: &[&Observation],
    audit_end: Option<SystemTime>,
) -> Vec<(SystemTime, SystemTime)> {
    let mut fetches: BTreeMap<SystemTime, (SystemTime, SystemTime)> = BTreeMap::new();
    let mut known = Vec::new();
    for o in observed {
        let mut end = o.until.unwrap_or(o.at).max(o.at);
        if let (true, Some(last)) = (o.from_audit, audit_end) {
            end = end.min(last).max(o.at);
        }
        match o.fetch_key {
            Some(key) => {
                let k = fetches.entry(key).or_insert((o.at, end));
                k.0 = k.0.min(o.at);
                k.1 = k.1.max(end);
            }
            None => known.push((o.at, end)),
        }
    }
    known.extend(fetches.into_values());
    known.sort();
    known
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn t(s: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(s)
    }

    fn file(h: &str) -> InForce {
        InForce::File(h.to_owned())
    }

    /// An observation of `what` at `at`, naming the fetch at `key`.
    fn seen(h: &mut History, at: u64, what: InForce, key: u64) {
        let o = Observation {
            fetch_key: Some(t(key)),
            fetch: at == key,
            ..Observation::at(t(at), what)
        };
        h.observe("http://a.test", o);
    }

    /// A fetch at `at` (a `robots_fetch` record) in force until `until`.
    fn fetched(h: &mut History, at: u64, what: InForce, until: u64) {
        let o = Observation {
            fetch_key: Some(t(at)),
            until: Some(t(until)),
            fetch: true,
            from_audit: true,
            ..Observation::at(t(at), what)
        };
        h.observe("http://a.test", o);
    }

    #[test]
    fn runs_of_one_version_are_one_window_replaced_by_the_next() {
        let mut h = History::default();
        seen(&mut h, 100, file("v1"), 100);
        seen(&mut h, 150, file("v1"), 100);
        seen(&mut h, 160, file("v1"), 160);
        seen(&mut h, 200, file("v2"), 200);
        seen(&mut h, 250, file("v2"), 200);
        let w = h.windows("http://a.test");
        assert_eq!(w.len(), 2);
        assert_eq!(
            (w[0].from, w[0].last_confirmed, w[0].replaced_at),
            (t(100), t(160), Some(t(200)))
        );
        assert_eq!(w[0].fetches, [t(100), t(160)]);
        assert_eq!(w[0].fetched_before(t(155)), Some(t(100)));
        assert_eq!(w[1].replaced_at, None);
        assert_eq!(h.in_force_at("http://a.test", t(150)).unwrap().what, file("v1"));
        assert_eq!(h.in_force_at("http://a.test", t(200)).unwrap().what, file("v2"));
        let unknown = |earliest, latest, gap| Unknown { earliest, latest, gap };
        assert_eq!(
            h.in_force_at("http://a.test", t(99)).unwrap_err(),
            unknown(Some(t(100)), Some(t(250)), None)
        );
        // Between what the fetches are known for (v1's second fetch seen only at 160, v2 from
        // 200) nothing is known: the proxy may have been stopped (issue 39, M2).
        assert_eq!(
            h.in_force_at("http://a.test", t(199)).unwrap_err(),
            unknown(Some(t(100)), Some(t(250)), Some((file("v1"), t(160), Some(t(200)))))
        );
        // A fetch record says how long its result lasts.
        fetched(&mut h, 160, file("v1"), 230);
        assert_eq!(h.in_force_at("http://a.test", t(199)).unwrap().what, file("v1"));
        // Nothing is claimed after the last observation.
        assert!(h.in_force_at("http://a.test", t(251)).is_err());
        assert_eq!(h.in_force_at("http://b.test", t(150)).unwrap_err(), unknown(None, None, None));
    }

    /// Issue 39, H2: a version only allowed requests used, known by its fetch record alone,
    /// splits the window of the version on either side; and a fetch record's expiry is cut at
    /// the audit files' last record.
    #[test]
    fn a_fetch_record_alone_makes_a_window() {
        let mut h = History::default();
        fetched(&mut h, 100, file("v1"), 103);
        seen(&mut h, 101, file("v1"), 100);
        fetched(&mut h, 110, file("v2"), 113);
        fetched(&mut h, 120, file("v1"), 123);
        seen(&mut h, 121, file("v1"), 120);
        h.audit_record_at(t(121), None);
        assert_eq!(h.in_force_at("http://a.test", t(111)).unwrap().what, file("v2"));
        // v2 expired at 113 and nothing was fetched until 120: nothing is known.
        assert!(h.in_force_at("http://a.test", t(115)).is_err());
        assert_eq!(h.in_force_at("http://a.test", t(121)).unwrap().what, file("v1"));
        // The files end at 121: v1's lifetime to 123 is not claimed.
        assert!(h.in_force_at("http://a.test", t(122)).is_err());
    }

    #[test]
    fn a_version_that_comes_back_has_a_second_window() {
        let mut h = History::default();
        seen(&mut h, 100, file("v1"), 100);
        fetched(&mut h, 200, InForce::DisallowAll, 260);
        seen(&mut h, 300, file("v1"), 300);
        let w = h.windows("http://a.test");
        let kinds: Vec<_> = w.iter().map(|w| w.what.clone()).collect();
        assert_eq!(kinds, [file("v1"), InForce::DisallowAll, file("v1")]);
        assert_eq!(h.in_force_at("http://a.test", t(250)).unwrap().what, InForce::DisallowAll);
        assert!(h.in_force_at("http://a.test", t(301)).is_err());
        // The archive's window in force runs on, to its expiry.
        let open =
            Observation { open: true, until: Some(t(9999)), ..Observation::at(t(300), file("v1")) };
        h.observe("http://a.test", open);
        assert_eq!(h.in_force_at("http://a.test", t(9999)).unwrap().what, file("v1"));
        assert!(h.in_force_at("http://a.test", t(10_000)).is_err());
    }

    #[test]
    fn observations_from_several_sources_merge_into_one_timeline() {
        let mut h = History::default();
        // Two instances' files, read one after the other.
        seen(&mut h, 300, file("v2"), 300);
        seen(&mut h, 100, file("v1"), 100);
        seen(&mut h, 120, file("v1"), 100);
        seen(&mut h, 310, file("v2"), 300);
        let w = h.windows("http://a.test");
        assert_eq!(w.len(), 2);
        assert_eq!(w[0].replaced_at, Some(t(300)));
    }

    /// An instance's audit record at `at` in force `what`, fetched at `key` until `until`.
    fn by(h: &mut History, instance: &str, at: u64, what: InForce, key: u64, until: u64) {
        let name = h.audit_record_at(t(at), Some(instance));
        let o = Observation {
            fetch_key: Some(t(key)),
            fetch: at == key,
            until: Some(t(until)),
            from_audit: true,
            instance: name,
            ..Observation::at(t(at), what)
        };
        h.observe("http://a.test", o);
    }

    /// Issue 39, L5: two instances each fetched for themselves; A kept v1 while B had v2. Each
    /// instance's history is its own records; the merged one gave B's answer for A's time.
    #[test]
    fn each_instance_has_its_own_timeline() {
        let mut h = History::default();
        by(&mut h, "a", 100, file("v1"), 100, 1000);
        by(&mut h, "b", 200, file("v2"), 200, 1000);
        by(&mut h, "b", 250, file("v2"), 200, 1000);
        by(&mut h, "a", 300, file("v1"), 100, 1000);
        assert_eq!(h.instances(), [Some("a"), Some("b")]);
        let a = Scope::Instance(Some("a"));
        let b = Scope::Instance(Some("b"));
        // The merged timeline: v2 from B's fetch on, back to v1 at A's record.
        assert_eq!(h.in_force_at("http://a.test", t(250)).unwrap().what, file("v2"));
        assert_eq!(h.in_force_in("http://a.test", t(250), a).unwrap().what, file("v1"));
        assert_eq!(h.in_force_in("http://a.test", t(250), b).unwrap().what, file("v2"));
        assert_eq!(h.windows_in("http://a.test", a).len(), 1);
        // Each instance's records end at its own last record: B knows nothing after 250.
        assert!(h.in_force_in("http://a.test", t(280), b).is_err());
        assert_eq!(h.in_force_in("http://a.test", t(280), a).unwrap().what, file("v1"));
        // What each had at 250: they disagree; before B's first fetch B knew nothing, which
        // is a disagreement too.
        let at = |s| h.instances_at("http://a.test", t(s));
        let each = at(250);
        let names: Vec<_> = each.each.iter().map(|e| e.instance.clone()).collect();
        assert_eq!(names, [Some("a".to_owned()), Some("b".to_owned())]);
        assert_eq!(each.of(Some("a")).and_then(|e| e.what().cloned()), Some(file("v1")));
        assert_eq!(each.of(Some("b")).and_then(|e| e.what().cloned()), Some(file("v2")));
        assert!(each.disagree());
        assert!(at(150).disagree());
        assert!(at(150).of(Some("b")).unwrap().window.is_err());
        // An unknown instance has no records: nothing is known from them.
        assert!(h.in_force_in("http://a.test", t(250), Scope::Instance(Some("c"))).is_err());
    }

    #[test]
    fn instances_that_had_the_same_version_agree() {
        let mut h = History::default();
        by(&mut h, "a", 100, file("v1"), 100, 1000);
        by(&mut h, "b", 110, file("v1"), 110, 1000);
        by(&mut h, "b", 400, file("v1"), 110, 1000);
        // A's last record (of anything) at 400: its files know of A up to then.
        h.audit_record_at(t(400), Some("a"));
        assert!(!h.instances_at("http://a.test", t(200)).disagree());
        assert_eq!(h.instances_at("http://a.test", t(200)).each.len(), 2);
        // An archive's observation names no instance: not one of the instances, and left out
        // of each instance's view.
        let archived = Observation { until: Some(t(900)), ..Observation::at(t(300), file("v9")) };
        h.observe("http://a.test", archived);
        let each = h.instances_at("http://a.test", t(350));
        assert_eq!(each.each.len(), 2);
        assert!(!each.disagree());
        let a = h.in_force_in("http://a.test", t(350), Scope::Instance(Some("a")));
        assert_eq!(a.unwrap().what, file("v1"));
        // Records naming no instance (a proxy outside a fleet) are one instance of their own.
        let name = h.audit_record_at(t(120), None);
        assert_eq!(name, None);
        let o = Observation { from_audit: true, ..Observation::at(t(120), file("v0")) };
        h.observe("http://a.test", o);
        assert_eq!(h.instances(), [None, Some("a"), Some("b")]);
        assert_eq!(h.instances_at("http://a.test", t(120)).each.len(), 3);
        assert!(h.instances_at("http://a.test", t(120)).disagree());
    }
}
