//! `/.well-known/tdmrep.json` (W3C TDMRep) per authority: the store's second [`SiteFile`]
//! kind ([`Tdmrep`]), on the same core, driver and fleet loop as robots.txt. Fetched through
//! the robots.txt fetcher (same client, destination guard, timeouts, redirects and content
//! codings); one fetch per authority per lifetime however many requests wait for it.
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
//! * One fetch per authority, owned by the store ([`super::core`]): it runs on a task of its
//!   own, the requests waiting for it only wait, so a client that hangs up cancels nothing.
//! * It takes a fetch slot as robots.txt does (`robots.max_concurrent_fetches`, and
//!   `max_concurrent_fetches_per_host`; a slow one gives its global slot back after a second,
//!   [`super::shared::in_slot`]): an outbound connection like any other, which a crawl across
//!   many new sites, or tarpits, must not multiply. No slot within `fetch_timeout`: no
//!   reservation from the file for now, nothing stored, asked again by the next request.
//! * Shared in a fleet ([`super::Shared`] with [`super::FileKind::Tdmrep`], Redis key
//!   `tdmrep:<authority>`), through the same loop as robots.txt
//!   ([`super::lease::through_fleet`]): an instance that has no current copy first looks for
//!   the fleet's; only when there is none (or it expired) does it take the lease
//!   (`lease:tdmrep:<authority>`, `fetch_timeout` + 2 s), fetch, and store what it found (the
//!   status, the body of a 2xx, when it expires) for the others until the same expiry, which
//!   gives the lease back. The others wait for its record, and fetch themselves only if the
//!   lease runs out first. As for robots.txt, a purge wins over a fetch in flight: the record
//!   is stored only while its fetcher still holds the lease, under the purge generation it
//!   took the lease in. When Redis is out of reach each instance fetches for itself.
//! * Memory: the kept answers weigh at most [`MAX_BYTES`] ([`TdmSite::heap_bytes`], moka's
//!   weigher, least recently used dropped first), as robots.txt's entries are bounded by
//!   `robots.cache_memory`. (A count alone let 100,000 files of up to 64 KiB each hold
//!   gigabytes; a map emptied when full refetched every site at once.)

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;

use super::core::Asked;
use super::files::{self, Job};
use super::lease::{self, FetchHere};
use super::shared::InSlot;
use super::sitefile::{FileKind, SiteFile};
use super::{Inner, RobotsSection};
use robots_proxy_authority::Authority;
use robots_proxy_clock::StoreClock;
use robots_proxy_engine::optout::TdmFile;

/// How long a fetched (or missing, or malformed) `tdmrep.json` is used.
pub const TDMREP_LIFETIME: Duration = Duration::from_secs(24 * 60 * 60);
/// How long an unreachable `tdmrep.json` (5xx, 429, network) counts as absent before a refetch.
pub const TDMREP_RETRY: Duration = Duration::from_secs(5 * 60);
/// The largest `tdmrep.json` read; a longer one is ignored.
pub const TDMREP_MAX_BYTES: usize = 64 * 1024;
/// The most memory the kept answers may hold ([`TdmSite::heap_bytes`], summed).
pub(super) const MAX_BYTES: u64 = 32 * 1024 * 1024;
/// The file's path.
pub(crate) const TDMREP_PATH: &str = "/.well-known/tdmrep.json";

/// What an authority's `tdmrep.json` says.
#[derive(Debug, Clone)]
pub struct TdmSite {
    /// The rules, when a well-formed file was fetched.
    pub file: Option<TdmFile>,
    /// Why there are no rules (or `"ok"`), for logs.
    pub note: String,
    /// Until when it is used.
    expires_at: SystemTime,
    /// The answer's status (0 when the fetch failed), for the fleet's record.
    status: u16,
    /// Why the fetch failed, for the fleet's record.
    error: Option<String>,
}

impl Default for TdmSite {
    fn default() -> Self {
        TdmSite {
            file: None,
            note: String::new(),
            expires_at: SystemTime::UNIX_EPOCH,
            status: 0,
            error: None,
        }
    }
}

impl TdmSite {
    /// The memory it holds, in bytes, for the store's bound: the parsed rules, the note, and
    /// the site's place in the store (its entry and authority).
    fn heap_bytes(&self) -> usize {
        const SLOT: usize = 256;
        SLOT + self.note.capacity()
            + self.error.as_ref().map_or(0, String::capacity)
            + self.file.as_ref().map_or(0, TdmFile::heap_bytes)
    }

    /// The site of `answer`, which came at `now`.
    fn of(answer: &Answer, now: SystemTime) -> TdmSite {
        let (file, note, lifetime) = classify(answer);
        let (status, error) = match answer {
            Ok((status, _)) => (*status, None),
            Err(e) => (0, Some(e.clone())),
        };
        let expires_at = now.checked_add(lifetime).unwrap_or(now);
        TdmSite { file, note, expires_at, status, error }
    }
}

/// What one fetch of `tdmrep.json` gave: the status and body, or why it failed.
type Answer = Result<(u16, Vec<u8>), String>;

/// `tdmrep.json`, a [`SiteFile`] kind.
pub(crate) struct Tdmrep;

impl SiteFile for Tdmrep {
    const KIND: FileKind = FileKind::Tdmrep;
    type Value = TdmSite;
    type Answer = Answer;

    fn is_current(value: &TdmSite, now: SystemTime) -> bool {
        now < value.expires_at
    }

    fn while_retrying(_: &Arc<TdmSite>) -> Option<Arc<TdmSite>> {
        None
    }

    fn weight(value: &TdmSite) -> usize {
        value.heap_bytes()
    }

    fn next(
        _prev: Option<&TdmSite>,
        authority: &Authority,
        answer: Answer,
        now: SystemTime,
        _settings: &RobotsSection,
    ) -> TdmSite {
        let site = TdmSite::of(&answer, now);
        let url = format!("{authority}{TDMREP_PATH}");
        if site.file.is_none() && !site.note.starts_with("status 4") {
            tracing::warn!(%url, reason = %site.note, "ignoring tdmrep.json: no TDM reservation from it");
        } else {
            tracing::debug!(%url, reason = %site.note, "tdmrep.json fetched");
        }
        site
    }

    fn encode(
        value: &TdmSite,
        body: Option<&Bytes>,
        _now: SystemTime,
        times: &StoreClock,
    ) -> Vec<u8> {
        let expires_at_ms = times.to_store(value.expires_at);
        let head = RecordHead { status: value.status, error: value.error.clone(), expires_at_ms };
        let mut record = serde_json::to_vec(&head).unwrap_or_default();
        record.push(b'\n');
        if value.error.is_none() && (200..300).contains(&value.status) {
            record.extend_from_slice(body.map_or(&[][..], |b| &b[..]));
        }
        record
    }

    /// A site from the fleet's record (its expiry on the store's clock `times`), for what is
    /// left of its lifetime (at most [`TDMREP_LIFETIME`] from `now`).
    fn decode(
        _authority: &Authority,
        record: &[u8],
        _body_limit: usize,
        now: SystemTime,
        times: &StoreClock,
    ) -> Option<(TdmSite, Option<Bytes>)> {
        let end = memchr::memchr(b'\n', record)?;
        let head: RecordHead = serde_json::from_slice(&record[..end]).ok()?;
        let body = record[end + 1..].to_vec();
        let expires = times.from_store(head.expires_at_ms, u64::MAX);
        let answer = match head.error {
            Some(e) => Err(e),
            None => Ok((head.status, body)),
        };
        let mut site = TdmSite::of(&answer, now);
        site.expires_at = expires.min(now.checked_add(TDMREP_LIFETIME).unwrap_or(now));
        let body = answer.ok().map(|(_, body)| Bytes::from(body));
        Some((site, body))
    }
}

/// A `tdmrep.json` fetch takes a fetch slot as robots.txt's does ([`FetchHere::ticket`]): an
/// outbound connection like any other, which a crawl across many new sites (or tarpits) must
/// not open more of at once than `robots.max_concurrent_fetches` allows.
impl FetchHere for Tdmrep {
    async fn fetch(
        inner: &Arc<Inner>,
        authority: &Authority,
        slot: super::slots::Slot,
        start: tokio::time::Instant,
        deadline: tokio::time::Instant,
    ) -> Option<Answer> {
        let fetching = inner.fetcher.fetch_file(authority.clone(), TDMREP_PATH, TDMREP_MAX_BYTES);
        let task = tokio::spawn(fetching);
        match super::shared::in_slot(authority, TDMREP_PATH, slot, start, deadline, task).await {
            InSlot::Done(Ok(fetched)) => {
                Some(fetched.map(|f| (f.status, f.body)).map_err(|e| e.to_string()))
            }
            InSlot::Done(Err(e)) => Some(Err(format!("tdmrep.json fetch failed: {e}"))),
            InSlot::TooManySlow(why) => Some(Err(why)),
            InSlot::LateAndOutOfTime => None,
        }
    }

    fn body_of(answer: &Answer) -> Option<Bytes> {
        match answer {
            Ok((status, body)) if (200..300).contains(status) => Some(Bytes::from(body.clone())),
            _ => None,
        }
    }

    fn keeps_body(_: &TdmSite) -> bool {
        true
    }

    fn body_limit(_: &Inner) -> usize {
        TDMREP_MAX_BYTES
    }

    fn no_fetch(_: Option<&TdmSite>, _: &Authority, now: SystemTime, _: &RobotsSection) -> TdmSite {
        TdmSite::of(&Err("no fetch could run".to_owned()), now)
    }

    fn usable(value: &TdmSite, now: SystemTime, _ahead: bool, _: &RobotsSection) -> bool {
        Tdmrep::is_current(value, now)
    }

    fn record_ttl(value: &TdmSite, now: SystemTime, _: &RobotsSection) -> Duration {
        value.expires_at.duration_since(now).unwrap_or_default().max(Duration::from_millis(1))
    }
}

impl Inner {
    /// What `authority`'s `tdmrep.json` says, fetched first when missing or expired (or taken
    /// from the fleet's copy); requests that ask at the same time share one fetch.
    pub(super) async fn tdmrep(this: &Arc<Self>, authority: &Authority) -> Arc<TdmSite> {
        let now = this.clock.now();
        if let Some(site) = this.tdmrep.entries.get(authority).await {
            if Tdmrep::is_current(&site, now) {
                return site;
            }
        }
        let (asked, job) = this.tdmrep.ask(now, authority).await;
        if let Some(job) = job {
            let this = this.clone();
            tokio::spawn(async move {
                let run = tokio::spawn(Inner::fetch_tdmrep(this.clone(), job.clone()));
                if let Err(e) = run.await {
                    let answer = Err(format!("tdmrep.json fetch task failed: {e}"));
                    this.tdmrep.abandon(job, TdmSite::of(&answer, this.clock.now())).await;
                }
            });
        }
        match asked {
            Asked::Use(site) => site,
            Asked::Wait(wait) => files::wait_for(wait).await.unwrap_or_default(),
        }
    }

    /// The fetch task of `tdmrep.json`: through the fleet when there is one (when it is out of
    /// reach, here), then stored unless purged meanwhile, and handed to every waiting request.
    async fn fetch_tdmrep(this: Arc<Self>, job: Job<Tdmrep>) {
        let authority = job.authority.clone();
        let through_fleet = match this.shared.get() {
            Some(shared) => {
                match lease::through_fleet::<Tdmrep>(&this, shared.as_ref(), &authority, false)
                    .await
                {
                    Ok(found) => Some(found),
                    Err(e) => {
                        tracing::debug!(%authority, error = %e, "fleet: tdmrep.json fetched here");
                        None
                    }
                }
            }
            None => None,
        };
        let (site, keep) = match through_fleet {
            Some(found) => found,
            None => {
                let answer = Tdmrep::fetch_here(&this, &authority).await;
                let settings = this.settings.load();
                let now = this.clock.now();
                match answer {
                    Some(answer) => (Tdmrep::next(None, &authority, answer, now, &settings), true),
                    // No slot in time: answered for now, not stored (as for robots.txt).
                    None => (Tdmrep::no_fetch(None, &authority, now, &settings), false),
                }
            }
        };
        for output in this.tdmrep.finish(job, site, keep, |_| {}).await {
            files::answer(output);
        }
    }
}

/// The first line of the fleet's record; the body of a 2xx follows after a newline.
#[derive(serde::Serialize, serde::Deserialize)]
struct RecordHead {
    status: u16,
    /// The fetch failed: why (no status, no body).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    expires_at_ms: u64,
}

/// What an answer for `tdmrep.json` means: the rules (when a well-formed file came), why not
/// (or `"ok"`), and how long it is used.
fn classify(answer: &Answer) -> (Option<TdmFile>, String, Duration) {
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
    use std::sync::Mutex;

    use super::*;
    use crate::fetch::{Fetch, FetchError, Fetched, FileFetched, FileFuture};
    use crate::RobotsCache;
    use robots_proxy_clock::ManualClock;

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

    fn store(fetcher: Arc<dyn Fetch>, clock: Arc<ManualClock>) -> RobotsCache {
        RobotsCache::with_fetcher(RobotsSection::default(), clock, fetcher)
    }

    async fn get(cache: &RobotsCache, a: &Authority) -> Arc<TdmSite> {
        Inner::tdmrep(&cache.inner, a).await
    }

    #[tokio::test]
    async fn lifetimes_per_status() {
        let canned = Arc::new(Canned {
            status: Mutex::new(503),
            body: br#"[{"location": "/", "tdm-reservation": 1}]"#,
            count: AtomicUsize::new(0),
        });
        let clock = Arc::new(ManualClock::new(SystemTime::UNIX_EPOCH));
        let wk = store(canned.clone(), clock.clone());
        let a = Authority::new(robots_proxy_authority::Scheme::Http, "a.test", 80).unwrap();
        assert!(get(&wk, &a).await.file.is_none(), "a 5xx reserves nothing");
        assert!(get(&wk, &a).await.file.is_none());
        assert_eq!(canned.count.load(Ordering::SeqCst), 1);
        clock.advance(TDMREP_RETRY);
        *canned.status.lock().unwrap() = 200;
        assert!(get(&wk, &a).await.file.is_some(), "retried after TDMREP_RETRY");
        assert_eq!(canned.count.load(Ordering::SeqCst), 2);
        clock.advance(TDMREP_LIFETIME - Duration::from_secs(1));
        assert!(get(&wk, &a).await.file.is_some());
        assert_eq!(canned.count.load(Ordering::SeqCst), 2, "kept for its lifetime");
        clock.advance(Duration::from_secs(1));
        *canned.status.lock().unwrap() = 0;
        assert!(get(&wk, &a).await.file.is_none(), "a network error reserves nothing");
        assert_eq!(canned.count.load(Ordering::SeqCst), 3);
    }

    /// Review-house D2: the fetch is the store's, on a task of its own, so a request that stops
    /// waiting (its client hung up) does not cancel it; the next request takes its answer
    /// instead of fetching again.
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
        let wk = store(slow.clone(), clock);
        let a = Authority::new(robots_proxy_authority::Scheme::Http, "a.test", 80).unwrap();
        let gave_up = tokio::time::timeout(Duration::from_millis(10), get(&wk, &a)).await;
        assert!(gave_up.is_err(), "the first request stopped waiting");
        assert!(get(&wk, &a).await.file.is_some());
        assert_eq!(slow.count.load(Ordering::SeqCst), 1, "one fetch, not cancelled and redone");
    }

    /// What the kept files parsed to stays within MAX_BYTES however many sites have one, and
    /// past it the least recently used go, not every site at once: a site asked for all along
    /// stays without a refetch. (Bounded by count alone, 100,000 files of up to 64 KiB each
    /// could be kept: gigabytes; emptied when full, every site was refetched at once.)
    #[tokio::test]
    async fn kept_files_are_bounded_in_bytes_and_the_used_ones_stay() {
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
        let wk = store(canned.clone(), clock);
        let site = |i: usize| {
            Authority::new(robots_proxy_authority::Scheme::Http, &format!("s{i}.test"), 80).unwrap()
        };
        let entries = &wk.inner.tdmrep.entries;
        assert!(get(&wk, &site(0)).await.file.is_some());
        entries.run_pending_tasks().await;
        let one = entries.weighted_size();
        assert!(one >= body.len() as u64 / 2, "a file weighs what it parsed to: {one} bytes");
        let sites = (MAX_BYTES / one) as usize + 10;
        for i in 1..sites {
            assert!(get(&wk, &site(i)).await.file.is_some());
            // Site 0 is used all along.
            assert!(get(&wk, &site(0)).await.file.is_some());
            entries.run_pending_tasks().await;
            let held = entries.weighted_size();
            assert!(held <= MAX_BYTES, "{held} bytes after {i} sites");
        }
        let fetches = canned.count.load(Ordering::SeqCst);
        assert_eq!(fetches, sites, "site 0 was never dropped and fetched again");
        assert!(entries.entry_count() < sites as u64, "some sites were dropped past the bound");
        // A purge takes a site off; purging everything, everything.
        wk.purge_local(&site(0)).await;
        entries.run_pending_tasks().await;
        assert!(entries.get(&site(0)).await.is_none());
        wk.purge_all_local().await;
        entries.run_pending_tasks().await;
        assert_eq!(entries.weighted_size(), 0);
    }

    #[test]
    fn a_record_round_trips() {
        let times = StoreClock::local();
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let a = Authority::new(robots_proxy_authority::Scheme::Http, "a.test", 80).unwrap();
        let body = br#"[{"location": "/", "tdm-reservation": 1}]"#.to_vec();
        let answer: Answer = Ok((200, body.clone()));
        let site = TdmSite::of(&answer, now);
        let record = Tdmrep::encode(&site, Some(&Bytes::from(body)), now, times);
        let (back, _) = Tdmrep::decode(&a, &record, TDMREP_MAX_BYTES, now, times).unwrap();
        assert!(back.file.is_some());
        assert_eq!(back.expires_at, now + TDMREP_LIFETIME);
        let failed = TdmSite::of(&Err("refused".into()), now);
        let record = Tdmrep::encode(&failed, None, now, times);
        assert!(String::from_utf8_lossy(&record).starts_with(r#"{"status":0,"error":"refused","#));
        let (back, _) = Tdmrep::decode(&a, &record, TDMREP_MAX_BYTES, now, times).unwrap();
        assert_eq!((back.file.is_none(), back.expires_at), (true, now + TDMREP_RETRY));
    }
}
