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
//! The windows of an authority: its observations sorted by time, runs of the same thing merged.
//! A window runs from its first observation (`from`) to the first observation of the next
//! window (`replaced_at`); the last window runs to its last observation (`last_confirmed`):
//! after that nothing is known, and nothing is claimed.

use std::collections::{BTreeMap, HashMap};
use std::time::SystemTime;

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
    /// Whether a source says it is still in force (the archive's window in force): then, when
    /// nothing replaced it, it covers every time from its start.
    pub open: bool,
}

impl Window {
    /// Whether the window covers `at`: from its first observation up to the next window, or,
    /// for the last window, up to its last observation (or on, when it is open).
    pub fn covers(&self, at: SystemTime) -> bool {
        self.from <= at
            && match self.replaced_at {
                Some(replaced) => at < replaced,
                None => self.open || at <= self.last_confirmed,
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
}

impl History {
    /// Adds the bytes of a version (the first source that has them wins: the same digest is
    /// the same bytes).
    pub fn add_body(&mut self, sha256: &str, body: Body) {
        self.bodies.entry(sha256.to_owned()).or_insert(body);
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

    /// The bytes of a version, when a source holds them.
    pub fn body(&self, sha256: &str) -> Option<&Body> {
        self.bodies.get(sha256)
    }

    /// Every authority with an observation.
    pub fn authorities(&self) -> impl Iterator<Item = &str> {
        self.observations.keys().map(String::as_str)
    }

    /// The windows of `authority`, oldest first.
    pub fn windows(&self, authority: &str) -> Vec<Window> {
        let Some(observed) = self.observations.get(authority) else { return Vec::new() };
        let mut observed: Vec<&Observation> = observed.iter().collect();
        observed.sort_by(|a, b| a.at.cmp(&b.at).then_with(|| a.what.cmp(&b.what)));
        let mut windows: Vec<Window> = Vec::new();
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
                    });
                }
            }
        }
        windows
    }

    /// The window of `authority` in force at `at`, or why there is none: the earliest time
    /// anything is known for it, and the last (`None` each when nothing is known at all).
    pub fn in_force_at(
        &self,
        authority: &str,
        at: SystemTime,
    ) -> Result<Window, (Option<SystemTime>, Option<SystemTime>)> {
        let windows = self.windows(authority);
        match windows.iter().find(|w| w.covers(at)) {
            Some(w) => Ok(w.clone()),
            None => {
                Err((windows.first().map(|w| w.from), windows.last().map(|w| w.last_confirmed)))
            }
        }
    }
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

    fn seen(h: &mut History, at: u64, what: InForce, fetch: bool) {
        h.observe("http://a.test", Observation { at: t(at), what, fetch, note: None, open: false });
    }

    #[test]
    fn runs_of_one_version_are_one_window_replaced_by_the_next() {
        let mut h = History::default();
        seen(&mut h, 100, file("v1"), true);
        seen(&mut h, 150, file("v1"), false);
        seen(&mut h, 160, file("v1"), true);
        seen(&mut h, 200, file("v2"), true);
        seen(&mut h, 250, file("v2"), false);
        let w = h.windows("http://a.test");
        assert_eq!(w.len(), 2);
        assert_eq!(
            (w[0].from, w[0].last_confirmed, w[0].replaced_at),
            (t(100), t(160), Some(t(200)))
        );
        assert_eq!(w[0].fetches, [t(100), t(160)]);
        assert_eq!(w[0].fetched_before(t(155)), Some(t(100)));
        assert_eq!(w[1].replaced_at, None);
        assert_eq!(h.in_force_at("http://a.test", t(199)).unwrap().what, file("v1"));
        assert_eq!(h.in_force_at("http://a.test", t(200)).unwrap().what, file("v2"));
        assert_eq!(
            h.in_force_at("http://a.test", t(99)).unwrap_err(),
            (Some(t(100)), Some(t(250)))
        );
        // Nothing is claimed after the last observation.
        assert!(h.in_force_at("http://a.test", t(251)).is_err());
        assert_eq!(h.in_force_at("http://b.test", t(150)).unwrap_err(), (None, None));
    }

    #[test]
    fn a_version_that_comes_back_has_a_second_window() {
        let mut h = History::default();
        seen(&mut h, 100, file("v1"), true);
        seen(&mut h, 200, InForce::DisallowAll, false);
        seen(&mut h, 300, file("v1"), true);
        let w = h.windows("http://a.test");
        let kinds: Vec<_> = w.iter().map(|w| w.what.clone()).collect();
        assert_eq!(kinds, [file("v1"), InForce::DisallowAll, file("v1")]);
        assert_eq!(h.in_force_at("http://a.test", t(250)).unwrap().what, InForce::DisallowAll);
        assert!(h.in_force_at("http://a.test", t(301)).is_err());
        // The archive's window in force runs on.
        let open =
            Observation { at: t(300), what: file("v1"), fetch: true, note: None, open: true };
        h.observe("http://a.test", open);
        assert_eq!(h.in_force_at("http://a.test", t(9999)).unwrap().what, file("v1"));
    }

    #[test]
    fn observations_from_several_sources_merge_into_one_timeline() {
        let mut h = History::default();
        // Two instances' files, read one after the other.
        seen(&mut h, 300, file("v2"), true);
        seen(&mut h, 100, file("v1"), true);
        seen(&mut h, 120, file("v1"), false);
        seen(&mut h, 310, file("v2"), false);
        let w = h.windows("http://a.test");
        assert_eq!(w.len(), 2);
        assert_eq!(w[0].replaced_at, Some(t(300)));
    }
}
