//! The site-file store's core, sans-IO (in the manner of `quinn-proto`'s `Connection`): which
//! fetch runs for which authority, who waits for it, what its result does, what a purge
//! cancels. No I/O, no tokio, no clock: time and the entry found are passed in, and what the
//! store must do comes out of `poll_*`. The driver ([`super::files`], `fetching.rs`,
//! `refresh.rs`) owns the entries (moka), spawns the fetches, runs the fleet's lease, persists,
//! archives and answers.
//!
//! Methods, as in `quinn-proto`:
//! * `handle_*`: an event came in. A request asks for an authority at `now`
//!   ([`Core::handle_ask`]); a request in an entry's refresh window asks for its refresh
//!   ([`Core::handle_refresh`]); a fetch finished with a value ([`Core::handle_fetched`]) or
//!   ended without one ([`Core::handle_abandoned`]: the fleet was out of reach); the
//!   authority, or everything, was purged ([`Core::handle_purge`]).
//! * `poll_*`: what the driver must do now. Start a fetch ([`Core::poll_fetch`]: a
//!   [`FetchJob`], run on a task of its own, never on a request's); store, archive, answer
//!   ([`Core::poll_output`]).
//!
//! The rules it holds, for every [`SiteFile`] kind:
//! * One fetch per authority: a request that finds no current entry joins the fetch in flight
//!   or starts one; the fetch is the store's (a [`FetchJob`]), so a request that stops waiting
//!   (its client hung up) cancels nothing, and the fetch's value is stored all the same.
//! * A due entry the kind serves while its retry runs ([`SiteFile::while_retrying`]: a
//!   failing robots.txt, RFC 9309 §2.3.1.4) answers at once, and one retry starts.
//! * A refresh ahead of expiry starts only when no fetch is in flight and the entry it
//!   refreshes is still the one in force.
//! * A purge forgets the fetches in flight: they still answer the requests that wait for them,
//!   but their value is not stored (it may predate the purge).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::SystemTime;

use super::sitefile::SiteFile;
use robots_proxy_authority::Authority;

/// A fetch the store runs: for `authority`, numbered `id` (so a fetch forgotten by a purge does
/// not store its value), `ahead` of the entry's expiry or not, and where its waiters wait
/// (`wait`, the driver's: given back to the core with the result).
#[derive(Debug, Clone)]
pub(crate) struct FetchJob<W> {
    pub(crate) authority: Authority,
    pub(crate) id: u64,
    pub(crate) ahead: bool,
    pub(crate) wait: W,
}

/// What a request that asked does.
pub(crate) enum Asked<V, W> {
    /// Goes on with this entry (current, or in force while its retry runs).
    Use(Arc<V>),
    /// Waits at `W` for the fetch in flight (joined, or just started).
    Wait(W),
}

/// What the driver must do after a fetch ended.
pub(crate) enum Output<V, W> {
    /// Keep `value` as the entry of `authority` (and, for a kind that does, on disk).
    Store { authority: Authority, value: Arc<V> },
    /// Hand `value` to the archive and the result hook: `keep` when it is a result the store
    /// decides with, `stored` when it was stored.
    Archive { value: Arc<V>, keep: bool, stored: bool },
    /// Answer every request waiting at `wait` with `value`.
    Answer { wait: W, value: Arc<V> },
}

/// A fetch in flight: its number and where its waiters wait.
struct Flight<W> {
    id: u64,
    wait: W,
}

/// The store's state for one [`SiteFile`] kind (see the [module documentation](self)). `W`
/// is where the driver's waiters wait (a channel); the core only hands it around.
pub(crate) struct Core<K: SiteFile, W> {
    flights: HashMap<Authority, Flight<W>>,
    next_id: u64,
    jobs: VecDeque<FetchJob<W>>,
    outputs: VecDeque<Output<K::Value, W>>,
}

impl<K: SiteFile, W: Clone> Default for Core<K, W> {
    fn default() -> Self {
        Core {
            flights: HashMap::new(),
            next_id: 0,
            jobs: VecDeque::new(),
            outputs: VecDeque::new(),
        }
    }
}

impl<K: SiteFile, W: Clone> Core<K, W> {
    /// A request asks for `authority` at `now`, `entry` being the store's entry for it (if
    /// any). `new_wait` makes a place to wait, if a fetch is started.
    pub(crate) fn handle_ask(
        &mut self,
        now: SystemTime,
        authority: &Authority,
        entry: Option<&Arc<K::Value>>,
        new_wait: impl FnOnce() -> W,
    ) -> Asked<K::Value, W> {
        if let Some(entry) = entry {
            if K::is_current(entry, now) {
                return Asked::Use(entry.clone());
            }
            if let Some(in_force) = K::while_retrying(entry) {
                if !self.flights.contains_key(authority) {
                    self.start(authority, false, new_wait);
                }
                return Asked::Use(in_force);
            }
        }
        if let Some(flight) = self.flights.get(authority) {
            return Asked::Wait(flight.wait.clone());
        }
        Asked::Wait(self.start(authority, false, new_wait))
    }

    /// A request found `authority`'s entry in its refresh window (and was the first to):
    /// starts its refresh unless a fetch is in flight or the entry it found is no longer the
    /// one in force (`still_in_force` false: purged or replaced since). Whether one started.
    pub(crate) fn handle_refresh(
        &mut self,
        authority: &Authority,
        still_in_force: bool,
        new_wait: impl FnOnce() -> W,
    ) -> bool {
        if !still_in_force || self.flights.contains_key(authority) {
            return false;
        }
        self.start(authority, true, new_wait);
        true
    }

    /// Fetch `job` ended with `value`; `keep`: it is a result to keep (not an answer made up
    /// while no fetch could run). Stored unless a purge came since the fetch started. Whether
    /// it was stored.
    pub(crate) fn handle_fetched(
        &mut self,
        job: FetchJob<W>,
        value: Arc<K::Value>,
        keep: bool,
    ) -> bool {
        let ours = self.finish(&job);
        let stored = ours && keep;
        if stored {
            let authority = job.authority;
            self.outputs.push_back(Output::Store { authority, value: value.clone() });
        }
        self.outputs.push_back(Output::Archive { value: value.clone(), keep, stored });
        self.outputs.push_back(Output::Answer { wait: job.wait, value });
        stored
    }

    /// Fetch `job` ended without a result (the fleet was required and out of reach): its
    /// waiters get `value`, nothing is stored or archived, and the next request asks again.
    pub(crate) fn handle_abandoned(&mut self, job: FetchJob<W>, value: Arc<K::Value>) {
        self.finish(&job);
        self.outputs.push_back(Output::Answer { wait: job.wait, value });
    }

    /// `authority` (every authority with `None`) was purged: the fetches in flight for it are
    /// forgotten (they answer their waiters, but store nothing).
    pub(crate) fn handle_purge(&mut self, authority: Option<&Authority>) {
        match authority {
            Some(authority) => {
                self.flights.remove(authority);
            }
            None => self.flights.clear(),
        }
    }

    /// The next fetch to start, on a task of its own.
    pub(crate) fn poll_fetch(&mut self) -> Option<FetchJob<W>> {
        self.jobs.pop_front()
    }

    /// The next thing to do with a fetch's result, in order: store, archive, answer.
    pub(crate) fn poll_output(&mut self) -> Option<Output<K::Value, W>> {
        self.outputs.pop_front()
    }

    /// Fetches started so far.
    #[cfg(test)]
    pub(crate) fn fetches_started(&self) -> u64 {
        self.next_id
    }

    /// Whether a fetch of `authority` is in flight.
    #[cfg(test)]
    pub(crate) fn is_fetching(&self, authority: &Authority) -> bool {
        self.flights.contains_key(authority)
    }

    fn start(&mut self, authority: &Authority, ahead: bool, new_wait: impl FnOnce() -> W) -> W {
        self.next_id += 1;
        let (id, wait) = (self.next_id, new_wait());
        self.flights.insert(authority.clone(), Flight { id, wait: wait.clone() });
        let job = FetchJob { authority: authority.clone(), id, ahead, wait: wait.clone() };
        self.jobs.push_back(job);
        wait
    }

    /// Takes `job`'s flight off if it is still the one in flight: whether it was.
    fn finish(&mut self, job: &FetchJob<W>) -> bool {
        let ours = self.flights.get(&job.authority).is_some_and(|f| f.id == job.id);
        if ours {
            self.flights.remove(&job.authority);
        }
        ours
    }
}

#[cfg(test)]
#[path = "core_tests.rs"]
mod tests;
