//! The store's side of the archive ([`robots_proxy_archive`]): every result the store takes in and
//! decides with (its own fetch, a fleet's record, a copy read back from the disk) is handed to
//! the archive, which never makes the store wait.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::{state, FetchOutcome, Inner, RobotsCache, RobotsRules, RobotsSnapshot, RobotsState};
use robots_proxy_archive::{Archive, Consequence, Observation};

/// Told of every result the store takes in and decides with, besides the archive: the audit
/// log's `robots_fetch` record (issue 39, H2: with `audit.all_decisions = false` a version only
/// allowed requests used never reached the log). Awaited before the result is handed to the
/// requests that wait for it, so what it queues comes before any decision made with it.
pub type ResultHook =
    Arc<dyn Fn(Observation) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

impl RobotsCache {
    /// Archives every result taken in from now on in `archive`. Only the first call counts.
    pub fn archive_to(&self, archive: Arc<Archive>) {
        let _ = self.inner.archive.set(archive);
    }

    /// The archive results are handed to, if any.
    pub fn archive(&self) -> Option<Arc<Archive>> {
        self.inner.archive.get().cloned()
    }

    /// Hands every result taken in from now on (each that the archive is given) to `hook`,
    /// and waits for it. Only the first call counts.
    pub fn on_result(&self, hook: ResultHook) {
        let _ = self.inner.on_result.set(hook);
    }
}

/// A fetch's result (or a record taken over) was handed to its requests: logged, and archived
/// and handed to the [`ResultHook`] when it is one the store keeps (`keep`; not a fetch that
/// found no slot, nor a fleet error).
///
/// A refresh ahead of expiry that failed is neither: the copy in force stays in force, so
/// what decisions are made with has not changed (at its expiry, the retry's result is).
pub(super) async fn taken_in(inner: &Inner, snapshot: &RobotsSnapshot, keep: bool, stored: bool) {
    state::log_outcome(snapshot, stored);
    if !keep || state::is_failed_refresh(snapshot) {
        return;
    }
    let (archive, hook) = (inner.archive.get(), inner.on_result.get());
    if archive.is_none() && hook.is_none() {
        return;
    }
    let seen = observation(snapshot, inner.clock.now());
    if let Some(hook) = hook {
        hook(seen.clone()).await;
    }
    if let Some(archive) = archive {
        archive.note(seen);
    }
}

/// What the archive keeps of `snapshot`, taken in at `now`.
fn observation(snapshot: &RobotsSnapshot, now: std::time::SystemTime) -> Observation {
    let (status, error) = match &snapshot.last_outcome {
        FetchOutcome::Status(code) => (Some(*code), None),
        FetchOutcome::RedirectLimit => (None, Some("more than robots.max_redirects redirects")),
        FetchOutcome::Network(e) | FetchOutcome::Prohibited(e) | FetchOutcome::Fleet(e) => {
            (None, Some(e.as_str()))
        }
    };
    let consequence = match snapshot.rules {
        RobotsRules::Parsed(_) => Consequence::Rules,
        RobotsRules::AllowAll => Consequence::AllowAll,
        RobotsRules::DisallowAll => Consequence::DisallowAll,
    };
    let state = match snapshot.state {
        RobotsState::Fresh => "fresh",
        RobotsState::Stale => "stale",
        RobotsState::Unavailable => "unavailable",
        RobotsState::Unreachable => "unreachable",
    };
    // When the result was fetched: a file's fetch time (also for a record fetched by another
    // instance, or read back from the disk), a 4xx's; while fetches fail, the snapshot keeps
    // the first failure, so the latest is the time it was taken in.
    let at = match (snapshot.state, snapshot.failing_since) {
        (RobotsState::Fresh, _) => {
            snapshot.version.as_ref().map_or(snapshot.fetched_at, |v| v.fetched_at())
        }
        (RobotsState::Unavailable, None) => snapshot.fetched_at,
        _ => now,
    };
    let folds_case =
        matches!(&snapshot.rules, RobotsRules::Parsed(r) if r.case_insensitive_origin());
    Observation {
        folds_case,
        authority: snapshot.authority.to_string(),
        url: snapshot.robots_url.clone(),
        version: snapshot.version.clone(),
        status,
        error: error.map(str::to_owned),
        state,
        consequence,
        at,
        now,
        expires_at: snapshot.expires_at,
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::fetch::Fetched;
    use crate::RobotsSection;
    use robots_proxy_authority::{Authority, Scheme};
    use robots_proxy_engine::RobotsTxt;

    #[test]
    fn each_result_is_archived_with_its_consequence() {
        let s = RobotsSection::default();
        let a = Authority::new(Scheme::Http, "a.test", 8080).unwrap();
        let body = bytes::Bytes::from_static(b"User-agent: *\nDisallow: /x\n");
        let ok = Fetched::Robots {
            status: 200,
            robots: Arc::new(RobotsTxt::parse(&body)),
            body,
            max_age: None,
        };
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let t1 = t0 + s.max_age;
        let good = state::next_snapshot(None, &a, ok, t0, &s);
        let seen = observation(&good, t0 + Duration::from_secs(1));
        assert_eq!(
            (seen.status, seen.state, seen.consequence),
            (Some(200), "fresh", Consequence::Rules)
        );
        assert_eq!(seen.at, t0, "a file's window starts at its fetch");
        assert_eq!(seen.authority, "http://a.test:8080");
        let sha = seen.version.as_ref().unwrap().sha256().to_owned();
        // 503 with a copy: the copy's rules, stale; the window starts when the failure came.
        let fail = Fetched::Unreachable { outcome: FetchOutcome::Status(503) };
        let stale = state::next_snapshot(Some(&good), &a, fail, t1, &s);
        let seen = observation(&stale, t1);
        assert_eq!(
            (seen.status, seen.state, seen.consequence),
            (Some(503), "stale", Consequence::Rules)
        );
        assert_eq!(seen.version.as_ref().map(|v| v.sha256()), Some(sha.as_str()));
        assert_eq!(seen.at, t1);
        // No copy: a network failure disallows all, a 404 allows all.
        let down = Fetched::Unreachable { outcome: FetchOutcome::Network("refused".to_owned()) };
        let seen = observation(&state::next_snapshot(None, &a, down, t1, &s), t1);
        assert_eq!((seen.status, seen.error.as_deref()), (None, Some("refused")));
        assert_eq!((seen.state, seen.consequence), ("unreachable", Consequence::DisallowAll));
        assert!(seen.version.is_none());
        let gone = Fetched::Unavailable { outcome: FetchOutcome::Status(404), max_age: None };
        let seen =
            observation(&state::next_snapshot(None, &a, gone, t1, &s), t1 + Duration::from_secs(5));
        assert_eq!(
            (seen.status, seen.state, seen.consequence),
            (Some(404), "unavailable", Consequence::AllowAll)
        );
        assert_eq!(seen.at, t1, "a 4xx's window starts at its fetch");
    }
}
