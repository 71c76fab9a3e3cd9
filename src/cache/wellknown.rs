//! `/.well-known/tdmrep.json` (W3C TDMRep) per authority: fetched through the robots.txt
//! fetcher (same client, destination guard, timeouts, redirects and content codings), cached,
//! and coalesced: one fetch per authority per lifetime however many requests wait for it.
//!
//! * Lifetime: [`TDMREP_LIFETIME`] (24 hours, like robots.txt's default) for an answer (2xx,
//!   4xx, a malformed file); [`TDMREP_RETRY`] (5 minutes) after a 5xx, 429 or a network error.
//! * 404 and every other 4xx: no file, no reservation from it.
//! * 5xx, 429, network errors: no reservation from the file (logged), retried after
//!   [`TDMREP_RETRY`]. TDMRep defines no "unreachable" state, and a site without TDMRep whose
//!   error pages answer 5xx would otherwise lose every training crawler; the response's
//!   `tdm-reservation` header is still honoured.
//! * A body over [`TDMREP_MAX_BYTES`], not JSON, or of the wrong shape is ignored as a whole,
//!   with one logged reason (never read as an allow).
//! * Shared in a fleet ([`super::SharedRobots::load_file`], Redis key `tdmrep:<authority>`):
//!   an instance that has no current copy first looks for the fleet's; only when there is none
//!   (or it expired) does it fetch, and it then stores what it found (the status, the body of a
//!   2xx, when it expires) for the others until the same expiry. As for robots.txt, the
//!   instance that fetches holds a lease (`lease:tdmrep:<authority>`, `fetch_timeout` + 2 s,
//!   given back when it stores): the others wait for its record, and fetch themselves only if
//!   the lease runs out first. Purging an authority drops the record with robots.txt, purging
//!   everything hides it. When Redis is out of reach each instance fetches for itself.
//! * The fetch runs on a task of its own, as robots.txt's does: the requests waiting for it
//!   only wait, so a client that hangs up cancels nothing (and in a fleet the fetch always
//!   ends by storing its record, which gives the lease back).
//! * At most [`MAX_SITES`] authorities, and what they parsed to at most [`MAX_BYTES`], are
//!   kept; past either the map is emptied (and refetched as needed), which bounds memory without
//!   an eviction order. (A count alone let 100,000 files of up to 64 KiB each hold gigabytes.)

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use super::fetch::Fetch;
use super::SharedRobots;
use crate::authority::Authority;
use crate::clock::{Clock, StoreClock};
use crate::robots::optout::TdmFile;

/// How long a fetched (or missing, or malformed) `tdmrep.json` is used.
pub const TDMREP_LIFETIME: Duration = Duration::from_secs(24 * 60 * 60);
/// How long an unreachable `tdmrep.json` (5xx, 429, network) counts as absent before a refetch.
pub const TDMREP_RETRY: Duration = Duration::from_secs(5 * 60);
/// The largest `tdmrep.json` read; a longer one is ignored.
pub const TDMREP_MAX_BYTES: usize = 64 * 1024;
/// The most authorities kept.
const MAX_SITES: usize = 100_000;
/// The most memory the kept answers may hold ([`TdmSite::heap_bytes`], summed).
const MAX_BYTES: usize = 32 * 1024 * 1024;
/// The file's path.
pub const TDMREP_PATH: &str = "/.well-known/tdmrep.json";

/// What an authority's `tdmrep.json` says.
#[derive(Debug, Default)]
pub struct TdmSite {
    /// The rules, when a well-formed file was fetched.
    pub file: Option<TdmFile>,
    /// Why there are no rules (or `"ok"`), for logs.
    pub note: String,
    lifetime: Duration,
}

impl TdmSite {
    /// The memory it holds, in bytes, for the cache's bound: the parsed rules, the note, and
    /// the site's place in the cache (its slot and authority).
    fn heap_bytes(&self) -> usize {
        const SLOT: usize = 256;
        SLOT + self.note.capacity() + self.file.as_ref().map_or(0, TdmFile::heap_bytes)
    }
}

/// One authority's answer, or the fetch that will give it.
struct Slot {
    /// The answer once the fetch task has it; every request that wants it waits here.
    answer: tokio::sync::watch::Sender<Option<Arc<TdmSite>>>,
    /// Whether the fetch task was started (once per slot).
    started_fetch: std::sync::atomic::AtomicBool,
    started: SystemTime,
}

impl Slot {
    fn answer(&self) -> Option<Arc<TdmSite>> {
        self.answer.borrow().clone()
    }
}

/// The per-authority `tdmrep.json` cache.
pub(crate) struct WellKnown {
    task: FetchTask,
    clock: Arc<dyn Clock>,
    slots: Mutex<HashMap<Authority, Arc<Slot>>>,
    /// What the answers fetched since `slots` was last emptied hold ([`TdmSite::heap_bytes`]).
    bytes: Arc<AtomicUsize>,
}

/// What a fetch needs, owned, so that it runs on a task of its own: a request whose client
/// hangs up stops waiting for it, never the fetch (review-house D2). In a fleet the fetch then
/// always ends by storing its record, which gives its lease back.
#[derive(Clone)]
struct FetchTask {
    fetcher: Arc<dyn Fetch>,
    clock: Arc<dyn Clock>,
    /// How long the fleet's fetch lease lasts (`fetch_timeout` and time to store).
    lease: Duration,
}

impl WellKnown {
    pub(crate) fn new(
        fetcher: Arc<dyn Fetch>,
        clock: Arc<dyn Clock>,
        fetch_timeout: Duration,
    ) -> Self {
        let lease = fetch_timeout.saturating_add(super::shared::LEASE_SLACK);
        WellKnown {
            task: FetchTask { fetcher, clock: clock.clone(), lease },
            clock,
            slots: Mutex::new(HashMap::new()),
            bytes: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// The slot for `authority`: the current one, or a new one when it is missing or expired.
    fn slot(&self, authority: &Authority) -> Arc<Slot> {
        let now = self.clock.now();
        let mut slots = self.slots.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(slot) = slots.get(authority) {
            let expired = slot.answer().is_some_and(|site| {
                now.duration_since(slot.started).unwrap_or_default() >= site.lifetime
            });
            if !expired {
                return slot.clone();
            }
            self.unweigh(slot);
        }
        if slots.len() >= MAX_SITES || self.bytes.load(Ordering::Relaxed) >= MAX_BYTES {
            slots.clear();
            self.bytes.store(0, Ordering::Relaxed);
        }
        let slot = Arc::new(Slot {
            answer: tokio::sync::watch::Sender::new(None),
            started_fetch: std::sync::atomic::AtomicBool::new(false),
            started: now,
        });
        slots.insert(authority.clone(), slot.clone());
        slot
    }

    /// Forgets what is known of `authority`'s `tdmrep.json` (every authority's with `None`),
    /// so the next request that needs it fetches it again: a purge of the cache drops it with
    /// the robots.txt. A fetch in flight still answers the requests waiting for it.
    pub(crate) fn forget(&self, authority: Option<&Authority>) {
        let mut slots = self.slots.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match authority {
            Some(authority) => {
                if let Some(gone) = slots.remove(authority) {
                    self.unweigh(&gone);
                }
            }
            None => {
                slots.clear();
                self.bytes.store(0, Ordering::Relaxed);
            }
        }
    }

    /// Takes what `slot`'s answer holds off the count, once it leaves the map.
    fn unweigh(&self, slot: &Slot) {
        if let Some(site) = slot.answer() {
            let weight = site.heap_bytes();
            let _ = self.bytes.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| {
                Some(b.saturating_sub(weight))
            });
        }
    }

    /// What `authority`'s `tdmrep.json` says, fetched first when missing or expired (or taken
    /// from the fleet's copy in `shared`); requests that ask at the same time share one fetch.
    pub(crate) async fn get(
        &self,
        authority: &Authority,
        shared: Option<&Arc<dyn SharedRobots>>,
    ) -> Arc<TdmSite> {
        let slot = self.slot(authority);
        if let Some(site) = slot.answer() {
            return site;
        }
        let mut answer = slot.answer.subscribe();
        if !slot.started_fetch.swap(true, Ordering::AcqRel) {
            let (task, bytes, slot) = (self.task.clone(), self.bytes.clone(), slot.clone());
            let (authority, shared) = (authority.clone(), shared.cloned());
            tokio::spawn(async move {
                let site = task.fetch(authority, shared).await;
                bytes.fetch_add(site.heap_bytes(), Ordering::Relaxed);
                slot.answer.send_replace(Some(site));
            });
        }
        // The sender lives in the slot, which this request holds: the wait ends with the answer.
        let site = match answer.wait_for(Option::is_some).await {
            Ok(site) => site.clone().unwrap_or_default(),
            Err(_) => Arc::default(),
        };
        site
    }
}

impl FetchTask {
    async fn fetch(
        &self,
        authority: Authority,
        shared: Option<Arc<dyn SharedRobots>>,
    ) -> Arc<TdmSite> {
        let url = format!("{authority}{TDMREP_PATH}");
        if let Some(shared) = &shared {
            if let Some(site) = self.shared_copy(shared.as_ref(), &authority).await {
                return Arc::new(site);
            }
            // One instance fetches; the others wait for its record, until its lease runs out.
            if let Ok(false) = shared.lease_file(SHARED_NAME, &authority, self.lease).await {
                let until = tokio::time::Instant::now() + self.lease;
                while tokio::time::Instant::now() < until {
                    tokio::time::sleep(super::shared::POLL).await;
                    if let Some(site) = self.shared_copy(shared.as_ref(), &authority).await {
                        return Arc::new(site);
                    }
                }
            }
        }
        let fetched =
            self.fetcher.fetch_file(authority.clone(), TDMREP_PATH, TDMREP_MAX_BYTES).await;
        let answer = fetched.map(|f| (f.status, f.body)).map_err(|e| e.to_string());
        let (file, note, lifetime) = classify(&answer);
        if file.is_none() && !note.starts_with("status 4") {
            tracing::warn!(%url, reason = %note, "ignoring tdmrep.json: no TDM reservation from it");
        } else {
            tracing::debug!(%url, reason = %note, "tdmrep.json fetched");
        }
        if let Some(shared) = &shared {
            let expires = self.clock.now() + lifetime;
            let record = to_record(&answer, shared.store_clock().to_store(expires));
            if let Err(e) = shared.store_file(SHARED_NAME, &authority, record, lifetime).await {
                tracing::debug!(%url, error = %e, "fleet: tdmrep.json not shared");
            }
        }
        Arc::new(TdmSite { file, note, lifetime })
    }

    /// The fleet's current copy, if there is one.
    async fn shared_copy(
        &self,
        shared: &dyn SharedRobots,
        authority: &Authority,
    ) -> Option<TdmSite> {
        match shared.load_file(SHARED_NAME, authority).await {
            Ok(Some(record)) => {
                let site = self.site_of_record(&record, shared.store_clock())?;
                tracing::debug!(%authority, reason = %site.note, "tdmrep.json from the fleet");
                Some(site)
            }
            Ok(None) => None,
            Err(e) => {
                tracing::debug!(%authority, error = %e, "fleet: tdmrep.json not loaded");
                None
            }
        }
    }

    /// A site from the fleet's record (its expiry on the store's clock `times`), for what is
    /// left of its lifetime; `None` when the record cannot be read or has expired.
    fn site_of_record(&self, record: &[u8], times: &StoreClock) -> Option<TdmSite> {
        let end = record.iter().position(|b| *b == b'\n')?;
        let head: RecordHead = serde_json::from_slice(&record[..end]).ok()?;
        let body = record[end + 1..].to_vec();
        let expires = times.from_store(head.expires_at_ms, u64::MAX);
        let left = expires.duration_since(self.clock.now()).ok().filter(|d| !d.is_zero())?;
        let answer = match head.error {
            Some(e) => Err(e),
            None => Ok((head.status, body)),
        };
        let (file, note, _) = classify(&answer);
        Some(TdmSite { file, note, lifetime: left.min(TDMREP_LIFETIME) })
    }
}

/// The name of the fleet's record ([`SharedRobots::load_file`]).
const SHARED_NAME: &str = "tdmrep";

/// The first line of the fleet's record; the body of a 2xx follows after a newline.
#[derive(serde::Serialize, serde::Deserialize)]
struct RecordHead {
    status: u16,
    /// The fetch failed: why (no status, no body).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    expires_at_ms: u64,
}

/// The fleet's record of `answer`, expiring at `expires_at_ms` (the store's clock).
fn to_record(answer: &Result<(u16, Vec<u8>), String>, expires_at_ms: u64) -> Vec<u8> {
    let (head, body) = match answer {
        Ok((status, body)) => {
            let body: &[u8] = if (200..300).contains(status) { body } else { &[] };
            (RecordHead { status: *status, error: None, expires_at_ms }, body)
        }
        Err(e) => (RecordHead { status: 0, error: Some(e.clone()), expires_at_ms }, &[][..]),
    };
    let mut record = serde_json::to_vec(&head).unwrap_or_default();
    record.push(b'\n');
    record.extend_from_slice(body);
    record
}

/// What an answer for `tdmrep.json` means: the rules (when a well-formed file came), why not
/// (or `"ok"`), and how long it is used.
fn classify(answer: &Result<(u16, Vec<u8>), String>) -> (Option<TdmFile>, String, Duration) {
    match answer {
        Ok((status, body)) if (200..300).contains(status) => {
            if body.len() > TDMREP_MAX_BYTES {
                let note = format!("larger than {TDMREP_MAX_BYTES} bytes");
                (None, note, TDMREP_LIFETIME)
            } else {
                match TdmFile::parse(body) {
                    Ok(file) => (Some(file), "ok".to_owned(), TDMREP_LIFETIME),
                    Err(e) => (None, e.to_string(), TDMREP_LIFETIME),
                }
            }
        }
        Ok((status, _)) if *status == 429 || *status >= 500 => {
            (None, format!("unreachable: status {status}"), TDMREP_RETRY)
        }
        Ok((status, _)) => (None, format!("status {status}: no file"), TDMREP_LIFETIME),
        Err(e) => (None, format!("unreachable: {e}"), TDMREP_RETRY),
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::cache::fetch::{FetchError, Fetched, FileFetched, FileFuture};
    use crate::clock::ManualClock;

    /// Answers with `status` (0: a network error) and `body`, counting the fetches.
    struct Canned {
        status: Mutex<u16>,
        body: &'static [u8],
        count: AtomicUsize,
    }

    impl Fetch for Canned {
        fn fetch(&self, _: Authority) -> Pin<Box<dyn Future<Output = Fetched> + Send>> {
            Box::pin(std::future::pending())
        }

        fn fetch_file(&self, _: Authority, _: &'static str, _: usize) -> FileFuture {
            self.count.fetch_add(1, Ordering::SeqCst);
            let status = *self.status.lock().unwrap();
            let body = self.body.to_vec();
            Box::pin(async move {
                if status == 0 {
                    return Err(FetchError::Request("refused".into()));
                }
                Ok(FileFetched { status, body })
            })
        }
    }

    #[tokio::test]
    async fn lifetimes_per_status() {
        let canned = Arc::new(Canned {
            status: Mutex::new(503),
            body: br#"[{"location": "/", "tdm-reservation": 1}]"#,
            count: AtomicUsize::new(0),
        });
        let clock = Arc::new(ManualClock::new(SystemTime::UNIX_EPOCH));
        let wk = WellKnown::new(canned.clone(), clock.clone(), Duration::from_secs(10));
        let a = Authority::new(crate::authority::Scheme::Http, "a.test", 80).unwrap();
        assert!(wk.get(&a, None).await.file.is_none(), "a 5xx reserves nothing");
        assert!(wk.get(&a, None).await.file.is_none());
        assert_eq!(canned.count.load(Ordering::SeqCst), 1);
        clock.advance(TDMREP_RETRY);
        *canned.status.lock().unwrap() = 200;
        assert!(wk.get(&a, None).await.file.is_some(), "retried after TDMREP_RETRY");
        assert_eq!(canned.count.load(Ordering::SeqCst), 2);
        clock.advance(TDMREP_LIFETIME - Duration::from_secs(1));
        assert!(wk.get(&a, None).await.file.is_some());
        assert_eq!(canned.count.load(Ordering::SeqCst), 2, "kept for its lifetime");
        clock.advance(Duration::from_secs(1));
        *canned.status.lock().unwrap() = 0;
        assert!(wk.get(&a, None).await.file.is_none(), "a network error reserves nothing");
        assert_eq!(canned.count.load(Ordering::SeqCst), 3);
    }

    /// Review-house D2: the fetch runs on a task of its own, so a request that stops waiting
    /// (its client hung up) does not cancel it; the next request takes its answer instead of
    /// fetching again.
    #[tokio::test]
    async fn a_request_that_stops_waiting_does_not_cancel_the_fetch() {
        struct Slow {
            count: AtomicUsize,
        }
        impl Fetch for Slow {
            fn fetch(&self, _: Authority) -> Pin<Box<dyn Future<Output = Fetched> + Send>> {
                Box::pin(std::future::pending())
            }
            fn fetch_file(&self, _: Authority, _: &'static str, _: usize) -> FileFuture {
                self.count.fetch_add(1, Ordering::SeqCst);
                Box::pin(async {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    let body = br#"[{"location": "/", "tdm-reservation": 1}]"#.to_vec();
                    Ok(FileFetched { status: 200, body })
                })
            }
        }
        let slow = Arc::new(Slow { count: AtomicUsize::new(0) });
        let clock = Arc::new(ManualClock::new(SystemTime::UNIX_EPOCH));
        let wk = WellKnown::new(slow.clone(), clock, Duration::from_secs(10));
        let a = Authority::new(crate::authority::Scheme::Http, "a.test", 80).unwrap();
        let gave_up = tokio::time::timeout(Duration::from_millis(10), wk.get(&a, None)).await;
        assert!(gave_up.is_err(), "the first request stopped waiting");
        assert!(wk.get(&a, None).await.file.is_some());
        assert_eq!(slow.count.load(Ordering::SeqCst), 1, "one fetch, not cancelled and redone");
    }

    /// What the kept files parsed to stays within MAX_BYTES however many sites have one: past
    /// it the map is emptied. (Bounded by count alone, 100,000 files of up to 64 KiB each could
    /// be kept: gigabytes.)
    #[tokio::test]
    async fn kept_files_are_bounded_in_bytes() {
        let rules: Vec<String> = (0..400)
            .map(|i| {
                format!(
                    r#"{{"location": "/section-{i:05}/*", "tdm-reservation": 1, "tdm-policy": "https://example.com/policies/tdm/{i:05}.json"}}"#
                )
            })
            .collect();
        let body = format!("[{}]", rules.join(","));
        assert!(body.len() <= TDMREP_MAX_BYTES, "{} bytes", body.len());
        let body: &'static [u8] = Box::leak(body.into_bytes().into_boxed_slice());
        let canned = Arc::new(Canned { status: Mutex::new(200), body, count: AtomicUsize::new(0) });
        let clock = Arc::new(ManualClock::new(SystemTime::UNIX_EPOCH));
        let wk = WellKnown::new(canned.clone(), clock, Duration::from_secs(10));
        let site = |i: usize| {
            Authority::new(crate::authority::Scheme::Http, &format!("s{i}.test"), 80).unwrap()
        };
        assert!(wk.get(&site(0), None).await.file.is_some());
        let one = wk.bytes.load(Ordering::Relaxed);
        assert!(one >= body.len() / 2, "a file weighs what it parsed to: {one} bytes");
        let sites = MAX_BYTES / one + 10;
        for i in 1..sites {
            assert!(wk.get(&site(i), None).await.file.is_some());
            let held = wk.bytes.load(Ordering::Relaxed);
            assert!(held <= MAX_BYTES + one, "{held} bytes after {i} sites");
        }
        let kept = wk.slots.lock().unwrap().len();
        assert!(kept < sites / 2, "{kept} of {sites} sites kept: emptied past the bound");
        // Forgetting takes a site's weight off; forgetting all, everything.
        let before = wk.bytes.load(Ordering::Relaxed);
        wk.forget(Some(&site(sites - 1)));
        assert_eq!(wk.bytes.load(Ordering::Relaxed), before - one);
        wk.forget(None);
        assert_eq!(wk.bytes.load(Ordering::Relaxed), 0);
    }
}
