//! Locks that outlive a panic. A thread that panics while holding one of the process's mutexes
//! poisons it; everything the proxy keeps behind a lock (caches, counters, schedules, the
//! clock of tests) stays consistent at every step, so the value is taken as it is rather than
//! taking the whole process down with it. Every such lock is taken here.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Locks `mutex`, taking the value as it is if a thread panicked while holding it.
pub fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Reads `lock`, taking the value as it is if a thread panicked while writing it.
pub fn read<T: ?Sized>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

/// Writes `lock`, taking the value as it is if a thread panicked while writing it.
pub fn write<T: ?Sized>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    #[test]
    fn a_poisoned_lock_is_taken_as_it_is() {
        let shared = Arc::new(Mutex::new(1));
        let held = shared.clone();
        let _ = std::thread::spawn(move || {
            let mut guard = held.lock().unwrap();
            *guard = 2;
            panic!("poisons the lock");
        })
        .join();
        assert!(shared.is_poisoned());
        assert_eq!(*super::lock(&shared), 2);
    }
}
