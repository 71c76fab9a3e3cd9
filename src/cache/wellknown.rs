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
//! * Not shared in a fleet: each instance fetches once per authority per lifetime.
//! * At most [`MAX_SITES`] authorities are kept; past that the map is emptied (and refetched
//!   as needed), which bounds memory without an eviction order.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use super::fetch::Fetch;
use crate::authority::Authority;
use crate::clock::Clock;
use crate::robots::optout::TdmFile;

/// How long a fetched (or missing, or malformed) `tdmrep.json` is used.
pub const TDMREP_LIFETIME: Duration = Duration::from_secs(24 * 60 * 60);
/// How long an unreachable `tdmrep.json` (5xx, 429, network) counts as absent before a refetch.
pub const TDMREP_RETRY: Duration = Duration::from_secs(5 * 60);
/// The largest `tdmrep.json` read; a longer one is ignored.
pub const TDMREP_MAX_BYTES: usize = 64 * 1024;
/// The most authorities kept.
const MAX_SITES: usize = 100_000;
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

struct Slot {
    cell: tokio::sync::OnceCell<Arc<TdmSite>>,
    started: SystemTime,
}

/// The per-authority `tdmrep.json` cache.
pub(crate) struct WellKnown {
    fetcher: Arc<dyn Fetch>,
    clock: Arc<dyn Clock>,
    slots: Mutex<HashMap<Authority, Arc<Slot>>>,
}

impl WellKnown {
    pub(crate) fn new(fetcher: Arc<dyn Fetch>, clock: Arc<dyn Clock>) -> Self {
        WellKnown { fetcher, clock, slots: Mutex::new(HashMap::new()) }
    }

    /// The slot for `authority`: the current one, or a new one when it is missing or expired.
    fn slot(&self, authority: &Authority) -> Arc<Slot> {
        let now = self.clock.now();
        let mut slots = self.slots.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(slot) = slots.get(authority) {
            let expired = slot.cell.get().is_some_and(|site| {
                now.duration_since(slot.started).unwrap_or_default() >= site.lifetime
            });
            if !expired {
                return slot.clone();
            }
        }
        if slots.len() >= MAX_SITES {
            slots.clear();
        }
        let slot = Arc::new(Slot { cell: tokio::sync::OnceCell::new(), started: now });
        slots.insert(authority.clone(), slot.clone());
        slot
    }

    /// What `authority`'s `tdmrep.json` says, fetched first when missing or expired; requests
    /// that ask at the same time share one fetch.
    pub(crate) async fn get(&self, authority: &Authority) -> Arc<TdmSite> {
        let slot = self.slot(authority);
        slot.cell.get_or_init(|| self.fetch(authority.clone())).await.clone()
    }

    async fn fetch(&self, authority: Authority) -> Arc<TdmSite> {
        let url = format!("{authority}{TDMREP_PATH}");
        let fetched = self.fetcher.fetch_file(authority, TDMREP_PATH, TDMREP_MAX_BYTES).await;
        let (file, note, lifetime) = match fetched {
            Ok(f) if (200..300).contains(&f.status) => {
                if f.body.len() > TDMREP_MAX_BYTES {
                    let note = format!("larger than {TDMREP_MAX_BYTES} bytes");
                    (None, note, TDMREP_LIFETIME)
                } else {
                    match TdmFile::parse(&f.body) {
                        Ok(file) => (Some(file), "ok".to_owned(), TDMREP_LIFETIME),
                        Err(e) => (None, e.to_string(), TDMREP_LIFETIME),
                    }
                }
            }
            Ok(f) if f.status == 429 || f.status >= 500 => {
                (None, format!("unreachable: status {}", f.status), TDMREP_RETRY)
            }
            Ok(f) => (None, format!("status {}: no file", f.status), TDMREP_LIFETIME),
            Err(e) => (None, format!("unreachable: {e}"), TDMREP_RETRY),
        };
        if file.is_none() && !note.starts_with("status 4") {
            tracing::warn!(%url, reason = %note, "ignoring tdmrep.json: no TDM reservation from it");
        } else {
            tracing::debug!(%url, reason = %note, "tdmrep.json fetched");
        }
        Arc::new(TdmSite { file, note, lifetime })
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
        let wk = WellKnown::new(canned.clone(), clock.clone());
        let a = Authority::new(crate::authority::Scheme::Http, "a.test", 80).unwrap();
        assert!(wk.get(&a).await.file.is_none(), "a 5xx reserves nothing");
        assert!(wk.get(&a).await.file.is_none());
        assert_eq!(canned.count.load(Ordering::SeqCst), 1);
        clock.advance(TDMREP_RETRY);
        *canned.status.lock().unwrap() = 200;
        assert!(wk.get(&a).await.file.is_some(), "retried after TDMREP_RETRY");
        assert_eq!(canned.count.load(Ordering::SeqCst), 2);
        clock.advance(TDMREP_LIFETIME - Duration::from_secs(1));
        assert!(wk.get(&a).await.file.is_some());
        assert_eq!(canned.count.load(Ordering::SeqCst), 2, "kept for its lifetime");
        clock.advance(Duration::from_secs(1));
        *canned.status.lock().unwrap() = 0;
        assert!(wk.get(&a).await.file.is_none(), "a network error reserves nothing");
        assert_eq!(canned.count.load(Ordering::SeqCst), 3);
    }
}
