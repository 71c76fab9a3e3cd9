//! The status table and lifetimes of RFC 9309 §2.3.1 and §2.4, as a pure function: what the
//! previous entry was, what a fetch gave and what time it is → the next entry. No I/O, no
//! clock reads; [`super::RobotsCache`] supplies `now` from its injected clock.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::fetch::Fetched;
use super::RobotsSection;
use super::{RefreshMark, RobotsRules, RobotsSnapshot, RobotsState};
use robots_proxy_archive::robots_version::RobotsVersion;
use robots_proxy_authority::Authority;

/// Used when adding a configured duration to `now` would overflow `SystemTime`.
const FAR_FUTURE: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// The entry after a fetch at `now` gave `fetched`, `prev` being the entry before (if any).
///
/// * 2xx (§2.3.1.1): the parsed file, `Fresh` for [`lifetime`], and its version (the body's
///   SHA-256, computed here, once per fetch; a stale copy keeps its version).
/// * 4xx except 429, or too many redirects (§2.3.1.2, §2.3.1.3): `AllowAll`, `Unavailable`
///   for [`lifetime`]. An earlier copy is dropped: the origin said there is no file now.
/// * 429, 5xx, network errors (§2.3.1.4): the earlier 2xx copy if there is one (`Stale`),
///   else `DisallowAll` (`Unreachable`). The entry is due again after the back-off
///   ([`retry_delay`]). Once the failures have lasted `give_up_after` (§2.3.1.4: "more than
///   30 days"), a copy is still used (`Stale`) and, without one, the file is assumed
///   unavailable as §2.3.1.4 allows: `AllowAll` with state `Unavailable` (`failing_since`
///   tells it apart from a real 4xx). Retries go on, so a recovered origin is noticed.
/// * A refresh ahead of expiry (`prev` still current and not failing, see [`refresh_due`]):
///   a 2xx or 4xx replaces `prev` as any fetch does; a 429, 5xx or network error keeps `prev`
///   in force until its `expires_at`, noting the failure (`failing_since`, `failures`,
///   `last_outcome`), so that at its expiry the rows above apply.
pub(crate) fn next_snapshot(
    prev: Option<&RobotsSnapshot>,
    authority: &Authority,
    fetched: Fetched,
    now: SystemTime,
    settings: &RobotsSection,
) -> RobotsSnapshot {
    let last_outcome = fetched.outcome();
    if let (Fetched::Unreachable { .. }, Some(prev)) = (&fetched, prev) {
        if refreshing(prev, now) {
            // A refresh ahead of expiry failed (429, 5xx, network): the entry in force stays
            // until it expires, and counts as failing from now on (not refreshed ahead again;
            // at its expiry its retry runs as a failing origin's does).
            return RobotsSnapshot {
                last_outcome,
                failing_since: Some(now),
                failures: 1,
                ..prev.clone()
            };
        }
    }
    let base = |rules, state, fetched_at, expires_at, version| RobotsSnapshot {
        authority: authority.clone(),
        robots_url: authority.robots_url(),
        rules,
        state,
        last_outcome: last_outcome.clone(),
        fetched_at,
        expires_at,
        failing_since: None,
        failures: 0,
        version,
        refresh: RefreshMark::default(),
    };
    match fetched {
        Fetched::Robots { robots, max_age, body, status } => base(
            RobotsRules::Parsed(robots),
            RobotsState::Fresh,
            now,
            after(now, lifetime(max_age, settings)),
            // The one place a fetched body is hashed: once per fetch.
            Some(Arc::new(RobotsVersion::new(
                &authority.to_string(),
                &authority.robots_url(),
                body,
                now,
                Some(status),
            ))),
        ),
        Fetched::Unavailable { max_age, .. } => base(
            RobotsRules::AllowAll,
            RobotsState::Unavailable,
            now,
            after(now, lifetime(max_age, settings)),
            None,
        ),
        Fetched::Unreachable { .. } => {
            let failing = prev.and_then(|p| p.failing_since.map(|since| (since, p.failures)));
            let (failing_since, failures) = match failing {
                Some((since, n)) => (since, n.saturating_add(1)),
                None => (now, 1),
            };
            let given_up_at = failing_since.checked_add(settings.give_up_after);
            let given_up = given_up_at.is_some_and(|t| now >= t);
            let copy = prev.and_then(|p| match &p.rules {
                RobotsRules::Parsed(robots) => {
                    Some((robots.clone(), p.fetched_at, p.version.clone()))
                }
                _ => None,
            });
            let expires_at = after(now, retry_delay(failures, settings));
            let mut snapshot = match (copy, given_up) {
                (Some((robots, copied_at, version)), _) => base(
                    RobotsRules::Parsed(robots),
                    RobotsState::Stale,
                    copied_at,
                    expires_at,
                    version,
                ),
                (None, false) => base(
                    RobotsRules::DisallowAll,
                    RobotsState::Unreachable,
                    failing_since,
                    expires_at,
                    None,
                ),
                (None, true) => base(
                    RobotsRules::AllowAll,
                    RobotsState::Unavailable,
                    given_up_at.unwrap_or(now),
                    expires_at,
                    None,
                ),
            };
            snapshot.failing_since = Some(failing_since);
            snapshot.failures = failures;
            snapshot
        }
    }
}

/// Whether a fetch at `now` with `prev` in force is a refresh ahead of expiry: `prev` is within
/// its lifetime and not failing (an entry whose fetches fail is refetched when its back-off
/// ends, never ahead).
fn refreshing(prev: &RobotsSnapshot, now: SystemTime) -> bool {
    prev.is_current(now) && prev.failing_since.is_none()
}

/// When a refresh of `snapshot` ahead of its expiry may start, `share` being
/// `robots.refresh_ahead`: the last `share` of its lifetime (from `fetched_at` to `expires_at`).
/// `None` when it is never refreshed ahead: `share` is 0, or the entry is failing (its retry
/// waits for the back-off: a stale copy, disallow all, allow all after the give-up, or a copy
/// whose refresh already failed once within its lifetime).
pub(crate) fn refresh_starts(snapshot: &RobotsSnapshot, share: f64) -> Option<SystemTime> {
    if share <= 0.0 || snapshot.failing_since.is_some() {
        return None;
    }
    let lifetime = snapshot.expires_at.duration_since(snapshot.fetched_at).unwrap_or_default();
    let ahead = lifetime.mul_f64(share.min(1.0));
    snapshot.expires_at.checked_sub(ahead)
}

/// Whether a request at `now` that finds `snapshot` in force should start its refresh: it is
/// still current (an expired entry is fetched as before) and in its refresh window.
pub(crate) fn refresh_due(snapshot: &RobotsSnapshot, now: SystemTime, share: f64) -> bool {
    snapshot.is_current(now) && refresh_starts(snapshot, share).is_some_and(|start| now >= start)
}

/// Whether `snapshot` is an entry kept in force after its refresh ahead of expiry failed: it
/// is failing, yet in the state of an answer (fresh, or unavailable from a 4xx) whose failures
/// began within its lifetime. (After the give-up, allow all is dated when the failures had
/// lasted `give_up_after`, never before they began.)
pub(crate) fn is_failed_refresh(snapshot: &RobotsSnapshot) -> bool {
    match (snapshot.state, snapshot.failing_since) {
        (RobotsState::Fresh, Some(_)) => true,
        (RobotsState::Unavailable, Some(since)) => since > snapshot.fetched_at,
        _ => false,
    }
}

/// How long an answer is used: `max_age` (RFC 9309 §2.4: "SHOULD NOT use the cached version
/// for more than 24 hours"), or what `Cache-Control` asks if that is shorter, but never below
/// `min_age`, so a `max-age=0` or `no-store` cannot make every request refetch.
pub(crate) fn lifetime(hint: Option<Duration>, settings: &RobotsSection) -> Duration {
    match hint {
        None => settings.max_age,
        Some(asked) => asked.max(settings.min_age).min(settings.max_age),
    }
}

/// The wait before retry number `failures` (1 for the first failure): `retry_initial`,
/// doubling each time, at most `retry_max` (RFC 9309 §2.3.1.4 leaves the schedule open; this
/// keeps a failing origin from being hammered while it recovers).
pub(crate) fn retry_delay(failures: u32, settings: &RobotsSection) -> Duration {
    let doublings = failures.saturating_sub(1).min(31);
    settings.retry_initial.saturating_mul(1u32 << doublings).min(settings.retry_max)
}

/// `now + d`, or far in the future when that overflows.
fn after(now: SystemTime, d: Duration) -> SystemTime {
    now.checked_add(d).or_else(|| now.checked_add(FAR_FUTURE)).unwrap_or(now)
}

/// Logs what a fetch gave, at a level fitting its state.
pub(super) fn log_outcome(snapshot: &RobotsSnapshot, stored: bool) {
    let authority = &snapshot.authority;
    let outcome = &snapshot.last_outcome;
    if is_failed_refresh(snapshot) {
        tracing::info!(
            %authority, ?outcome, state = ?snapshot.state,
            expires_at = %humantime::format_rfc3339_seconds(snapshot.expires_at), stored,
            "robots.txt refresh failed: the entry in force stays until it expires"
        );
        return;
    }
    match snapshot.state {
        RobotsState::Fresh => {
            tracing::debug!(%authority, ?outcome, state = ?snapshot.state, stored, "robots.txt fetched");
        }
        RobotsState::Unavailable if snapshot.failing_since.is_some() => {
            tracing::info!(
                %authority, ?outcome, failures = snapshot.failures,
                "robots.txt unreachable past give_up_after and no copy: allowing all"
            );
        }
        RobotsState::Unavailable => {
            tracing::debug!(%authority, ?outcome, stored, "robots.txt unavailable: allowing all");
        }
        RobotsState::Stale | RobotsState::Unreachable => {
            tracing::info!(
                %authority, ?outcome, state = ?snapshot.state, failures = snapshot.failures,
                retry_at = %humantime::format_rfc3339_seconds(snapshot.expires_at), stored,
                "robots.txt unreachable"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FetchOutcome;
    use robots_proxy_authority::Scheme;
    use robots_proxy_engine::RobotsTxt;

    fn settings() -> RobotsSection {
        RobotsSection {
            retry_initial: Duration::from_secs(10),
            retry_max: Duration::from_secs(3600),
            ..RobotsSection::default()
        }
    }

    fn auth() -> Authority {
        Authority::new(Scheme::Http, "a.test", 80).unwrap()
    }

    fn ok() -> Fetched {
        Fetched::Robots {
            status: 200,
            robots: Arc::new(RobotsTxt::parse(b"User-agent: *\nDisallow: /x\n")),
            body: bytes::Bytes::new(),
            max_age: None,
        }
    }

    fn fail() -> Fetched {
        Fetched::Unreachable { outcome: FetchOutcome::Status(503) }
    }

    #[test]
    fn retry_delay_doubles_up_to_the_cap() {
        let s = settings();
        let delays: Vec<u64> = (1..=12).map(|n| retry_delay(n, &s).as_secs()).collect();
        assert_eq!(delays, [10, 20, 40, 80, 160, 320, 640, 1280, 2560, 3600, 3600, 3600]);
        assert_eq!(retry_delay(u32::MAX, &s), s.retry_max);
    }

    #[test]
    fn lifetime_is_clamped() {
        let s = settings();
        assert_eq!(lifetime(None, &s), s.max_age);
        assert_eq!(lifetime(Some(Duration::ZERO), &s), s.min_age);
        assert_eq!(lifetime(Some(Duration::from_secs(600)), &s), Duration::from_secs(600));
        assert_eq!(lifetime(Some(Duration::from_secs(u64::MAX)), &s), s.max_age);
        // A misconfigured min_age above max_age does not panic; max_age wins.
        let odd = RobotsSection { min_age: Duration::from_secs(10), max_age: Duration::ZERO, ..s };
        assert_eq!(lifetime(Some(Duration::from_secs(5)), &odd), Duration::ZERO);
    }

    #[test]
    fn failures_keep_the_copy_and_count() {
        let s = settings();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let good = next_snapshot(None, &auth(), ok(), t0, &s);
        assert_eq!(good.state, RobotsState::Fresh);
        let t1 = t0 + s.max_age;
        let stale = next_snapshot(Some(&good), &auth(), fail(), t1, &s);
        assert_eq!(stale.state, RobotsState::Stale);
        assert_eq!(stale.fetched_at, t0);
        // The stale copy names the version it was fetched as: the same digest and fetch time.
        let version = good.version.as_ref().expect("a fetched body has a version");
        assert_eq!(version.fetched_at(), t0);
        assert_eq!(stale.version, good.version);
        assert_eq!(stale.failing_since, Some(t1));
        assert_eq!(stale.expires_at, t1 + s.retry_initial);
        let t2 = stale.expires_at;
        let again = next_snapshot(Some(&stale), &auth(), fail(), t2, &s);
        assert_eq!((again.failures, again.failing_since), (2, Some(t1)));
        assert_eq!(again.expires_at, t2 + 2 * s.retry_initial);
        let recovered = next_snapshot(Some(&again), &auth(), ok(), t2, &s);
        assert_eq!((recovered.failures, recovered.failing_since), (0, None));
    }

    #[test]
    fn a_refresh_starts_in_the_last_share_of_the_lifetime() {
        let s = settings();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let good = next_snapshot(None, &auth(), ok(), t0, &s);
        let life = good.expires_at.duration_since(t0).unwrap();
        assert_eq!(life, s.max_age);
        let start = t0 + life.mul_f64(0.8);
        assert_eq!(refresh_starts(&good, 0.2), Some(start));
        let nano = Duration::from_nanos(1);
        assert!(!refresh_due(&good, t0, 0.2));
        assert!(!refresh_due(&good, start - nano, 0.2), "not before the window");
        assert!(refresh_due(&good, start, 0.2), "from its first instant");
        assert!(refresh_due(&good, good.expires_at - nano, 0.2), "to the last");
        assert!(!refresh_due(&good, good.expires_at, 0.2), "an expired entry is fetched as before");
        assert_eq!(refresh_starts(&good, 0.0), None, "0 turns it off");
        assert!(!refresh_due(&good, good.expires_at - nano, 0.0));
        // A 4xx answer is refreshed too, within its own lifetime.
        let gone = Fetched::Unavailable { outcome: FetchOutcome::Status(404), max_age: None };
        let gone = next_snapshot(None, &auth(), gone, t0, &s);
        assert!(refresh_due(&gone, start, 0.2));
        // A failing entry never is: its retry waits for the back-off.
        let stale = next_snapshot(Some(&good), &auth(), fail(), good.expires_at, &s);
        assert_eq!(refresh_starts(&stale, 0.2), None);
        let down = next_snapshot(None, &auth(), fail(), t0, &s);
        assert_eq!(refresh_starts(&down, 0.5), None);
    }

    #[test]
    fn a_failed_refresh_keeps_the_copy_until_it_expires() {
        let s = settings();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let good = next_snapshot(None, &auth(), ok(), t0, &s);
        let at = refresh_starts(&good, 0.2).unwrap() + Duration::from_secs(1);
        for failure in [503, 500, 429] {
            let failed = Fetched::Unreachable { outcome: FetchOutcome::Status(failure) };
            let kept = next_snapshot(Some(&good), &auth(), failed, at, &s);
            assert_eq!(kept.state, RobotsState::Fresh, "{failure}: still within its lifetime");
            assert_eq!((kept.fetched_at, kept.expires_at), (t0, good.expires_at));
            assert_eq!(kept.version, good.version, "the same copy");
            assert!(!kept.rules.allows(None, "/x"));
            assert_eq!(kept.last_outcome, FetchOutcome::Status(failure));
            assert_eq!((kept.failing_since, kept.failures), (Some(at), 1));
            assert!(is_failed_refresh(&kept));
            assert!(!refresh_due(&kept, at, 0.2), "one refresh per lifetime when it fails");
            // At its expiry, the rules for an unreachable robots.txt: the copy, stale.
            let later = next_snapshot(Some(&kept), &auth(), fail(), good.expires_at, &s);
            assert_eq!(later.state, RobotsState::Stale);
            assert_eq!(later.version, good.version);
            assert_eq!((later.failing_since, later.failures), (Some(at), 2));
            assert!(!is_failed_refresh(&later));
        }
        // A 2xx or a 4xx replaces the copy, as any fetch does.
        let renewed = next_snapshot(Some(&good), &auth(), ok(), at, &s);
        assert_eq!((renewed.fetched_at, renewed.expires_at), (at, at + s.max_age));
        let gone = Fetched::Unavailable { outcome: FetchOutcome::Status(404), max_age: None };
        let gone = next_snapshot(Some(&good), &auth(), gone, at, &s);
        assert!(matches!(gone.rules, RobotsRules::AllowAll));
        // A 4xx answer whose refresh fails still allows all until it expires; then the rules
        // for an unreachable robots.txt without a copy: disallow all.
        let kept = next_snapshot(Some(&gone), &auth(), fail(), at + Duration::from_secs(1), &s);
        assert!(matches!(kept.rules, RobotsRules::AllowAll));
        assert_eq!((kept.state, kept.expires_at), (RobotsState::Unavailable, gone.expires_at));
        assert!(is_failed_refresh(&kept));
        let later = next_snapshot(Some(&kept), &auth(), fail(), gone.expires_at, &s);
        assert!(matches!(later.rules, RobotsRules::DisallowAll));
        assert_eq!(later.state, RobotsState::Unreachable);
        // After the give-up, allow all is not a failed refresh.
        let late = t0 + s.give_up_after;
        let first = next_snapshot(None, &auth(), fail(), t0, &s);
        let gave_up = next_snapshot(Some(&first), &auth(), fail(), late, &s);
        assert_eq!(gave_up.state, RobotsState::Unavailable);
        assert!(!is_failed_refresh(&gave_up));
    }

    #[test]
    fn one_request_claims_the_refresh_of_an_entry() {
        let s = settings();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let good = next_snapshot(None, &auth(), ok(), t0, &s);
        assert!(good.refresh.claim());
        assert!(!good.refresh.claim());
        assert!(!good.refresh.claim());
        // The entry a refresh stores is another one: claimable again in its own window.
        let renewed = next_snapshot(Some(&good), &auth(), ok(), t0, &s);
        assert!(renewed.refresh.claim());
    }

    #[test]
    fn give_up_without_a_copy_allows() {
        let s = settings();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let first = next_snapshot(None, &auth(), fail(), t0, &s);
        assert!(matches!(first.rules, RobotsRules::DisallowAll));
        let late = t0 + s.give_up_after;
        let gave_up = next_snapshot(Some(&first), &auth(), fail(), late, &s);
        assert!(matches!(gave_up.rules, RobotsRules::AllowAll));
        assert_eq!(gave_up.state, RobotsState::Unavailable);
        assert_eq!(gave_up.failing_since, Some(t0));
        // Still failing after giving up: stays given up.
        let later = next_snapshot(Some(&gave_up), &auth(), fail(), late + s.retry_max, &s);
        assert!(matches!(later.rules, RobotsRules::AllowAll));
    }
}
