//! The windows of one authority: which robots.txt (or which failure) was in force from when to
//! when. Pure: observations and times in, windows out; no I/O, no clock.

use std::collections::HashSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// What RFC 9309 makes of a fetch's result: the rules the decisions were made with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Consequence {
    /// The rules of the robots.txt named by the window's `sha256` (fresh, or a stale copy used
    /// while fetches fail: the window's `state` says which).
    Rules,
    /// Everything allowed: 4xx (§2.3.1.3), too many redirects, or unreachable past
    /// `robots.give_up_after` with no copy (§2.3.1.4).
    AllowAll,
    /// Everything disallowed: 429, 5xx or a network failure with no copy (§2.3.1.4).
    DisallowAll,
}

impl Consequence {
    /// `rules`, `allow_all` or `disallow_all`.
    pub fn as_str(self) -> &'static str {
        match self {
            Consequence::Rules => "rules",
            Consequence::AllowAll => "allow_all",
            Consequence::DisallowAll => "disallow_all",
        }
    }
}

/// One stretch of time during which the same robots.txt (or the same failure) was in force for
/// an authority, as this instance decided.
///
/// Refetches that give the same result (the same bytes, or the same failure) extend the window
/// (`last_confirmed`); a different result ends it (`replaced_at`) and starts the next one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    /// The lowercase hex SHA-256 of the robots.txt decided with; `None` when no file was in
    /// force (allow all, disallow all).
    pub sha256: Option<String>,
    /// The body's length in bytes, with `sha256`.
    #[serde(default)]
    pub size: Option<u64>,
    /// The HTTP status of the fetch that gave this window (after redirects), when there was
    /// one: 200 for a fetched file, 404 for allow all, 503 for a stale copy or disallow all.
    pub status: Option<u16>,
    /// Why the fetch failed without a status (network, redirect limit, guard), if it did.
    #[serde(default)]
    pub error: Option<String>,
    /// `fresh`, `stale`, `unavailable` or `unreachable`, as in the audit log's `robots.state`.
    pub state: String,
    /// What the decisions were made with.
    pub consequence: Consequence,
    /// When the window began: the fetch that gave it.
    #[serde(with = "rfc3339")]
    pub first_fetched: SystemTime,
    /// The last fetch (or take-over from the fleet or the disk) that gave the same result.
    #[serde(with = "rfc3339")]
    pub last_confirmed: SystemTime,
    /// When a different result replaced it; `None` while it is in force.
    #[serde(with = "rfc3339::option")]
    pub replaced_at: Option<SystemTime>,
    /// Whether the fetch named a server that reads paths case-insensitively, so the proxy
    /// decided the case-folded reading for the site (review-core N2): `evidence` replays it.
    /// Absent (false) in windows written before it existed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub folds_case: bool,
    /// When the last result that confirmed the window was due to be fetched again (the end of
    /// its lifetime, or the next retry): past it, nothing was decided with the window unless a
    /// later fetch confirmed it, so `evidence` claims nothing past it for the window in force
    /// (issue 39, M2). Absent in windows written before it existed.
    #[serde(default, with = "rfc3339::option", skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<SystemTime>,
    /// The fetch times that gave the window's result, oldest first, the last [`KEEP_FETCHES`]
    /// (issue 39, L1: with only `first_fetched` and `last_confirmed`, `evidence` reported the
    /// window's first fetch as the copy in force, days older than the one used). Absent in
    /// windows written before it existed.
    #[serde(default, with = "rfc3339::list", skip_serializing_if = "Vec::is_empty")]
    pub fetches: Vec<SystemTime>,
}

/// Most fetch times kept per window ([`Window::fetches`]): the latest.
pub(crate) const KEEP_FETCHES: usize = 64;

impl Window {
    /// Whether the window was in force at `at`: from `first_fetched` (included) to
    /// `replaced_at` (excluded).
    pub fn in_force_at(&self, at: SystemTime) -> bool {
        self.first_fetched <= at && self.replaced_at.is_none_or(|end| at < end)
    }

    /// Whether `other` is the same result (bytes, status, failure, consequence), so that it
    /// extends this window rather than replacing it.
    fn same_result(&self, other: &Window) -> bool {
        self.sha256 == other.sha256
            && self.status == other.status
            && self.error.is_some() == other.error.is_some()
            && self.state == other.state
            && self.consequence == other.consequence
            && self.folds_case == other.folds_case
    }
}

/// Every window of one authority, oldest first; the last one is in force.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct History {
    /// The file format's version.
    pub(crate) v: u8,
    /// `scheme://host[:port]`, as the audit log writes `url.domain`'s authority.
    pub(crate) authority: String,
    /// Its robots.txt URL.
    pub(crate) url: String,
    /// Oldest first.
    pub(crate) windows: Vec<Window>,
}

impl History {
    pub(crate) fn new(authority: &str, url: &str) -> History {
        History { v: 1, authority: authority.to_owned(), url: url.to_owned(), windows: Vec::new() }
    }

    /// Takes in `seen`, a result observed at `seen.first_fetched` (its `last_confirmed` the
    /// same), `now` being the time it was taken in. Answers whether anything changed.
    ///
    /// * The same result as the window in force extends it (`last_confirmed` only grows).
    /// * Another result replaces it, at the observed time; an observation older than the
    ///   window in force's last confirmation (a copy taken over from the fleet or the disk)
    ///   takes effect when it was taken in, so windows never overlap.
    pub(crate) fn note(&mut self, mut seen: Window, now: SystemTime) -> bool {
        seen.replaced_at = None;
        let Some(current) = self.windows.last_mut() else {
            self.windows.push(seen);
            return true;
        };
        if current.same_result(&seen) {
            let mut changed = false;
            for fetched in seen.fetches {
                if current.fetches.last().is_none_or(|last| fetched > *last) {
                    current.fetches.push(fetched);
                    changed = true;
                }
            }
            if current.fetches.len() > KEEP_FETCHES {
                current.fetches.drain(..current.fetches.len() - KEEP_FETCHES);
            }
            if seen.last_confirmed > current.last_confirmed {
                current.last_confirmed = seen.last_confirmed;
                changed = true;
            }
            if seen.expires_at > current.expires_at {
                current.expires_at = seen.expires_at;
                changed = true;
            }
            return changed;
        }
        if seen.first_fetched < current.last_confirmed {
            let at = truncate(now).max(current.last_confirmed);
            seen.first_fetched = at;
            seen.last_confirmed = at;
        }
        current.replaced_at = Some(seen.first_fetched);
        self.windows.push(seen);
        true
    }

    /// Drops the windows replaced before `cutoff`; the window in force is never dropped.
    /// Answers whether any was.
    pub(crate) fn prune(&mut self, cutoff: SystemTime) -> bool {
        let before = self.windows.len();
        self.windows.retain(|w| w.replaced_at.is_none_or(|end| end >= cutoff));
        self.windows.len() != before
    }

    /// Drops the oldest windows until at most `max` (at least 1) distinct bodies are named:
    /// the window in force stays. Answers how many versions were dropped.
    pub(crate) fn cap_versions(&mut self, max: usize) -> usize {
        let distinct = |windows: &[Window]| {
            windows.iter().filter_map(|w| w.sha256.as_deref()).collect::<HashSet<_>>().len()
        };
        let before = distinct(&self.windows);
        if before <= max.max(1) {
            return 0;
        }
        let mut kept = HashSet::new();
        let mut cut = 0;
        for (i, w) in self.windows.iter().enumerate().rev() {
            if let Some(sha) = w.sha256.as_deref() {
                if !kept.contains(sha) {
                    if kept.len() == max.max(1) {
                        cut = i + 1;
                        break;
                    }
                    kept.insert(sha);
                }
            }
        }
        self.windows.drain(..cut);
        before - distinct(&self.windows)
    }

    /// The window in force at `at`, if any.
    pub(crate) fn in_force_at(&self, at: SystemTime) -> Option<&Window> {
        self.windows.iter().rev().find(|w| w.in_force_at(at))
    }
}

/// `t` to the millisecond, as the files keep times.
pub(crate) fn truncate(t: SystemTime) -> SystemTime {
    let ms = t.duration_since(UNIX_EPOCH).unwrap_or_default().as_millis();
    UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))
}

/// Times as RFC 3339 UTC with milliseconds (`2026-11-22T04:33:16.123Z`), as in the audit log.
mod rfc3339 {
    use std::time::SystemTime;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&crate::robots_version::rfc3339_millis(*t))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SystemTime, D::Error> {
        let text = String::deserialize(d)?;
        humantime::parse_rfc3339(&text).map_err(serde::de::Error::custom)
    }

    pub(super) mod list {
        use std::time::SystemTime;

        use serde::ser::SerializeSeq;
        use serde::{Deserialize, Deserializer, Serializer};

        pub(in super::super) fn serialize<S: Serializer>(
            times: &[SystemTime],
            s: S,
        ) -> Result<S::Ok, S::Error> {
            let mut seq = s.serialize_seq(Some(times.len()))?;
            for t in times {
                seq.serialize_element(&crate::robots_version::rfc3339_millis(*t))?;
            }
            seq.end()
        }

        pub(in super::super) fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<Vec<SystemTime>, D::Error> {
            Vec::<String>::deserialize(d)?
                .iter()
                .map(|text| humantime::parse_rfc3339(text).map_err(serde::de::Error::custom))
                .collect()
        }
    }

    pub(super) mod option {
        use std::time::SystemTime;

        use serde::{Deserialize, Deserializer, Serializer};

        pub(in super::super) fn serialize<S: Serializer>(
            t: &Option<SystemTime>,
            s: S,
        ) -> Result<S::Ok, S::Error> {
            match t {
                Some(t) => super::serialize(t, s),
                None => s.serialize_none(),
            }
        }

        pub(in super::super) fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<Option<SystemTime>, D::Error> {
            match Option::<String>::deserialize(d)? {
                None => Ok(None),
                Some(text) => {
                    humantime::parse_rfc3339(&text).map(Some).map_err(serde::de::Error::custom)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_800_000_000 + s)
    }

    fn file(sha: &str, t: u64) -> Window {
        Window {
            sha256: Some(sha.to_owned()),
            size: Some(3),
            status: Some(200),
            error: None,
            state: "fresh".to_owned(),
            consequence: Consequence::Rules,
            first_fetched: at(t),
            last_confirmed: at(t),
            replaced_at: None,
            folds_case: false,
            expires_at: None,
            fetches: Vec::new(),
        }
    }

    fn failure(status: u16, consequence: Consequence, t: u64) -> Window {
        Window {
            sha256: None,
            size: None,
            status: Some(status),
            error: None,
            state: if consequence == Consequence::AllowAll { "unavailable" } else { "unreachable" }
                .to_owned(),
            consequence,
            first_fetched: at(t),
            last_confirmed: at(t),
            replaced_at: None,
            folds_case: false,
            expires_at: None,
            fetches: Vec::new(),
        }
    }

    /// Review-core N2: the case-insensitive origin flag is kept in the window (and a window
    /// written before it existed reads as false); a change of it is a new window.
    #[test]
    fn the_case_folding_flag_is_kept() {
        let mut w = file("aa", 0);
        w.folds_case = true;
        let text = serde_json::to_string(&w).unwrap();
        assert!(text.contains("\"folds_case\":true"), "{text}");
        let back: Window = serde_json::from_str(&text).unwrap();
        assert!(back.folds_case);
        let plain = serde_json::to_string(&file("aa", 0)).unwrap();
        assert!(!plain.contains("folds_case"), "{plain}");
        assert!(!serde_json::from_str::<Window>(&plain).unwrap().folds_case);
        assert!(!w.same_result(&file("aa", 0)));
    }

    #[test]
    fn unchanged_refetches_extend_one_window() {
        let mut h = History::new("http://a.test", "http://a.test/robots.txt");
        for i in 0..24 {
            assert!(h.note(file("aa", i * 3600), at(i * 3600)));
        }
        assert_eq!(h.windows.len(), 1);
        assert_eq!(h.windows[0].first_fetched, at(0));
        assert_eq!(h.windows[0].last_confirmed, at(23 * 3600));
        // An older copy of the same result (from the disk) changes nothing.
        assert!(!h.note(file("aa", 10), at(24 * 3600)));
    }

    #[test]
    fn a_new_result_replaces_the_window_in_force() {
        let mut h = History::new("http://a.test", "http://a.test/robots.txt");
        h.note(file("aa", 0), at(0));
        h.note(file("bb", 100), at(100));
        h.note(failure(404, Consequence::AllowAll, 200), at(200));
        h.note(failure(503, Consequence::DisallowAll, 300), at(300));
        h.note(failure(503, Consequence::DisallowAll, 310), at(310));
        let w = &h.windows;
        assert_eq!(w.len(), 4);
        assert_eq!(w[0].replaced_at, Some(at(100)));
        assert_eq!(w[1].replaced_at, Some(at(200)));
        assert_eq!((w[2].status, w[2].consequence), (Some(404), Consequence::AllowAll));
        assert_eq!(w[2].replaced_at, Some(at(300)));
        assert_eq!((w[3].last_confirmed, w[3].replaced_at), (at(310), None));
        assert_eq!(h.in_force_at(at(50)).unwrap().sha256.as_deref(), Some("aa"));
        assert_eq!(h.in_force_at(at(100)).unwrap().sha256.as_deref(), Some("bb"));
        assert_eq!(h.in_force_at(at(250)).unwrap().status, Some(404));
        assert_eq!(h.in_force_at(at(10_000)).unwrap().consequence, Consequence::DisallowAll);
        assert!(h.in_force_at(at(0) - Duration::from_secs(1)).is_none());
    }

    #[test]
    fn an_older_copy_of_another_result_starts_when_taken_in() {
        let mut h = History::new("http://a.test", "http://a.test/robots.txt");
        h.note(file("bb", 100), at(100));
        // A copy fetched at 50 by another instance, taken in at 120: no overlap.
        h.note(file("aa", 50), at(120));
        assert_eq!(h.windows[0].replaced_at, Some(at(120)));
        assert_eq!(h.windows[1].first_fetched, at(120));
    }

    #[test]
    fn prune_drops_only_windows_replaced_before_the_cutoff() {
        let mut h = History::new("http://a.test", "http://a.test/robots.txt");
        h.note(file("aa", 0), at(0));
        h.note(file("bb", 100), at(100));
        h.note(file("aa", 200), at(200));
        assert!(!h.prune(at(100)), "replaced exactly at the cutoff: kept");
        assert!(h.prune(at(150)));
        assert_eq!(h.windows.len(), 2);
        assert_eq!(h.windows[0].sha256.as_deref(), Some("bb"));
        // The window in force stays, however old.
        assert!(h.prune(at(1_000_000)));
        assert_eq!(h.windows.len(), 1);
        assert_eq!(h.windows[0].first_fetched, at(200));
        assert!(!h.prune(at(1_000_000)));
    }

    #[test]
    fn windows_round_trip_through_json() {
        let mut h = History::new("http://a.test", "http://a.test/robots.txt");
        h.note(file("aa", 0), at(0));
        h.note(failure(503, Consequence::DisallowAll, 100), at(100));
        let text = serde_json::to_string(&h).unwrap();
        assert!(text.contains("\"first_fetched\":\"2027-01-15T08:00:00.000Z\""), "{text}");
        let back: History = serde_json::from_str(&text).unwrap();
        assert_eq!(back, h);
    }
}
