//! The synchronization primitives the thread pool is built on, from `std`
//! in a normal build and from the `loom` model checker in a build with
//! `--cfg loom`.
//!
//! Under `loom` every atomic access, lock, condvar wait, thread spawn and
//! yield is a point where the checker may switch threads, and it explores
//! every schedule (within its bounds) of a test written with
//! `loom::model`. The job slot becomes a `loom` cell, which reports a read
//! that can race with a write. In a normal build this module only re-exports
//! `std` and wraps the slot in a plain `UnsafeCell`: the pool compiles to the
//! same code as without the shim.
//!
//! [`USE_CLOCK`] tells the waiters whether they may spin on a clock: `loom`
//! has no clock and needs every wait loop to yield to the checker.

#[cfg(loom)]
pub(super) use loom::{
    sync::{
        atomic::{fence, AtomicBool, AtomicU64, AtomicUsize},
        Arc, Condvar, Mutex, MutexGuard,
    },
    thread,
};
#[cfg(not(loom))]
pub(super) use std::{
    sync::{
        atomic::{fence, AtomicBool, AtomicU64, AtomicUsize},
        Arc, Condvar, Mutex, MutexGuard,
    },
    thread,
};

#[cfg(loom)]
use loom::cell::UnsafeCell;
#[cfg(not(loom))]
use std::cell::UnsafeCell;

use super::Job;

/// Whether waiters may spin and yield on a time budget before they block
/// (false under `loom`: see the module docs).
pub(super) const USE_CLOCK: bool = !cfg!(loom);

/// The slot that hands the caller's job to the workers.
///
/// Accesses are ordered by the pool's generation/remaining protocol, not by
/// the slot itself; under `loom` the slot checks that they are.
pub(super) struct JobCell(UnsafeCell<Job>);

impl JobCell {
    /// A slot holding `job`.
    #[inline]
    pub(super) fn new(job: Job) -> JobCell {
        JobCell(UnsafeCell::new(job))
    }

    /// Replaces the job.
    ///
    /// # Safety
    /// No other thread may read or write the slot concurrently: every earlier
    /// [`JobCell::read`] happens-before this write.
    #[inline]
    pub(super) unsafe fn write(&self, job: Job) {
        #[cfg(not(loom))]
        // SAFETY: the caller guarantees exclusive access.
        unsafe {
            *self.0.get() = job;
        }
        #[cfg(loom)]
        // SAFETY: the caller guarantees exclusive access (`loom` checks it).
        self.0.with_mut(|p| unsafe { *p = job });
    }

    /// Copies the job out.
    ///
    /// # Safety
    /// No other thread may write the slot concurrently: the last
    /// [`JobCell::write`] happens-before this read, and the next one waits
    /// for it.
    #[inline]
    pub(super) unsafe fn read(&self) -> Job {
        #[cfg(not(loom))]
        // SAFETY: the caller guarantees no concurrent write.
        unsafe {
            *self.0.get()
        }
        #[cfg(loom)]
        // SAFETY: the caller guarantees no concurrent write (`loom` checks it).
        self.0.with(|p| unsafe { *p })
    }
}
