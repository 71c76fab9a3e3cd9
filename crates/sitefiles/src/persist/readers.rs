//! The threads that read records from disk.
//!
//! A record is read when an authority is not in memory. Under a crawl wider than the memory
//! cache that is most requests, thousands a second. On tokio's blocking pool each read took a
//! thread of its own, and the process grew to ~80 threads in the `wide` benchmark at a tenth of
//! the cache memory (a bound on reads at once still left 30 blocking threads, since a finished
//! thread is not idle yet when the next read starts); every read paid a hand-over to whichever
//! thread was free. [`READERS`] threads of their own serve the reads: the process keeps 6-7
//! threads in that run, and serves about a third more requests a second (medians of three runs
//! before and four after).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, OnceLock};

/// Threads reading records. A record is a small file, read and decoded in tens of
/// microseconds: two keep up with tens of thousands of misses a second.
const READERS: usize = 2;

/// The name of the reading threads (as `top -H` and `/proc/PID/task/*/comm` show it).
const THREAD_NAME: &str = "robots-disk-read";

/// A read to run.
type Read = Box<dyn FnOnce() + Send>;

/// The reading threads, started at the first read; they end when this is dropped.
#[derive(Default)]
pub(super) struct Readers(OnceLock<Option<Sender<Read>>>);

impl Readers {
    /// Runs `read` on a reading thread, or on tokio's blocking pool when none could be
    /// started. Returns at once; `read` sends its result where its caller waits.
    pub(super) fn run(&self, read: Read) {
        let read = match self.0.get_or_init(start) {
            Some(readers) => match readers.send(read) {
                Ok(()) => return,
                Err(unsent) => unsent.0,
            },
            None => read,
        };
        drop(tokio::task::spawn_blocking(read));
    }
}

/// Starts the reading threads; `None` when not one could be started.
fn start() -> Option<Sender<Read>> {
    let (sender, reads) = channel::<Read>();
    let reads = Arc::new(Mutex::new(reads));
    let mut started = 0;
    for _ in 0..READERS {
        let reads = reads.clone();
        let spawned =
            std::thread::Builder::new().name(THREAD_NAME.into()).spawn(move || serve(&reads));
        match spawned {
            Ok(_) => started += 1,
            Err(e) => tracing::warn!(error = %e, "no thread to read robots.txt records from disk"),
        }
    }
    (started > 0).then_some(sender)
}

/// One reading thread: runs reads until the sender is gone. A read that panics is one read
/// lost (its caller sees no record), not the thread.
fn serve(reads: &Mutex<Receiver<Read>>) {
    loop {
        let next = reads.lock().unwrap_or_else(|e| e.into_inner()).recv();
        let Ok(read) = next else { return };
        if catch_unwind(AssertUnwindSafe(read)).is_err() {
            tracing::error!("reading a robots.txt record from disk panicked");
        }
    }
}
