//! robots.txt's driver on the store's core ([`super::core`], through [`super::files`]): the
//! fetch the core asks for runs on a task of its own, through the fleet's lease when there is
//! one, else from the disk's copy or the origin; the status table is applied to its result;
//! the entry is stored (and kept on disk) unless a purge came meanwhile; the result is archived
//! and handed to every request waiting.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::core::Asked;
use super::files::{self, Job};
use super::sitefile::Robots;
use super::{archived, lease, persist, shared, state, FetchOutcome, Inner, RobotsSnapshot};
use robots_proxy_authority::Authority;

impl Inner {
    /// Under the store's lock: the entry to use, or where to wait for the fetch in flight (a
    /// new one started when none is).
    pub(super) async fn ask(
        this: &Arc<Self>,
        authority: &Authority,
    ) -> Asked<RobotsSnapshot, files::Wait<RobotsSnapshot>> {
        let (asked, job) = this.robots.ask(this.clock.now(), authority).await;
        if let Some(job) = job {
            Inner::spawn(this, job);
        }
        asked
    }

    /// Runs `job` on a task of its own: a request that stops waiting cancels nothing. Should
    /// the task fail (a bug), its waiters are answered as unreachable and the next request asks
    /// again.
    pub(super) fn spawn(this: &Arc<Self>, job: Job<Robots>) {
        if job.ahead {
            this.counters.refreshes.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(authority = %job.authority, "refreshing robots.txt ahead of its expiry");
        }
        let this = this.clone();
        tokio::spawn(async move {
            let run = tokio::spawn(Inner::fetch(this.clone(), job.clone()));
            if let Err(e) = run.await {
                let outcome = FetchOutcome::Network(format!("robots.txt fetch task failed: {e}"));
                let snapshot =
                    RobotsSnapshot::unreachable_now(&job.authority, outcome, this.clock.now());
                this.robots.abandon(job, snapshot).await;
            }
        });
    }

    /// The fetch task: fetch, apply the status table, store (unless purged meanwhile), and
    /// hand the result to every waiting request. `job.ahead`: a refresh of the entry in force
    /// ahead of its expiry (`refresh.rs`).
    async fn fetch(this: Arc<Self>, job: Job<Robots>) {
        let authority = job.authority.clone();
        tracing::debug!(%authority, "fetching robots.txt");
        if let Some(shared) = this.shared.get() {
            match lease::through_fleet::<Robots>(&this, shared.as_ref(), &authority, job.ahead)
                .await
            {
                Ok((snapshot, keep)) => {
                    return Inner::store(&this, job, snapshot, keep, None).await;
                }
                Err(e) if shared.required() => {
                    let outcome = FetchOutcome::Fleet(e.to_string());
                    let snapshot =
                        RobotsSnapshot::unreachable_now(&authority, outcome, this.clock.now());
                    // Not stored: the next request asks the fleet again.
                    return this.robots.abandon(job, snapshot).await;
                }
                Err(e) => {
                    tracing::debug!(%authority, error = %e, "fleet out of reach: fetching robots.txt here");
                }
            }
        }
        let mut prev = this.robots.entries.get(&authority).await;
        if prev.is_none() {
            // Not in memory (first request since the start): what was kept on disk.
            if let Some(kept) = persist::load(&this, &authority).await {
                if kept.is_current(this.clock.now()) {
                    return Inner::store(&this, job, kept, true, None).await;
                }
                prev = Some(Arc::new(kept));
            }
        }
        let fetched = <Robots as lease::FetchHere>::fetch_here(&this, &authority).await;
        let body = fetched.as_ref().and_then(persist::body_of);
        let now = this.clock.now();
        let (snapshot, keep) = match fetched {
            Some(fetched) => (
                state::next_snapshot(
                    prev.as_deref(),
                    &authority,
                    fetched,
                    now,
                    &this.settings.load(),
                ),
                true,
            ),
            None => {
                (shared::no_slot(prev.as_deref(), &authority, now, &this.settings.load()), false)
            }
        };
        let save = keep.then_some(body);
        Inner::store(&this, job, snapshot, keep, save).await;
    }

    /// Hands the result of `job` to the core: stored (unless purged meanwhile, or `keep` is
    /// false) and kept on disk when `save` holds the fetched body (`Some(None)`: the body
    /// already kept); then archived, and handed to every waiting request.
    async fn store(
        this: &Arc<Self>,
        job: Job<Robots>,
        snapshot: RobotsSnapshot,
        keep: bool,
        save: Option<Option<bytes::Bytes>>,
    ) {
        let after = this
            .robots
            .finish(job, snapshot, keep, |stored| {
                this.generation.fetch_add(1, Ordering::AcqRel);
                if let Some(body) = save {
                    persist::save(this, stored, body);
                }
            })
            .await;
        for output in after {
            if let super::core::Output::Archive { value, keep, stored } = &output {
                archived::taken_in(this, value, *keep, *stored).await;
            }
            files::answer(output);
        }
    }
}
