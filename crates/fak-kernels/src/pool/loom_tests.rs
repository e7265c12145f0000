//! Model checks of the pool's handshake under `loom`: the checker runs each
//! test once per thread schedule (within a preemption bound) and fails it
//! on a deadlock (a lost wake-up, a worker that never exits), on a racy
//! access to a tracked cell (the job slot, the closure's captured state) or
//! on a failed assertion.
//!
//! Built and run only with `--cfg loom`; see the `pool` module docs for the
//! command. Pools of 2 and 3 threads keep the schedules countable.

use super::*;
use loom::cell::UnsafeCell;

/// Runs `f` under the checker, exploring schedules with at most
/// `preemptions` preemptions each (`None`: every schedule), or as many as
/// the `LOOM_MAX_PREEMPTIONS` environment variable says.
///
/// The bounds below keep the whole file at about 20 s in a release build.
/// Within them, each of these protocol breaks fails the tests: the
/// worker's decrement or the caller's barrier load made `Relaxed` (a race
/// on the counters), the job written after the generation bump (a race on
/// the job slot), the sleepers read before the bump or the re-check under
/// the sleep lock removed (a lost wake-up: "deadlock", or "exceeded maximum
/// number of branches" while the caller's barrier yields forever).
fn check(preemptions: Option<usize>, f: impl Fn() + Sync + Send + 'static) {
    let mut model = loom::model::Builder::new();
    if std::env::var_os("LOOM_MAX_PREEMPTIONS").is_none() {
        model.preemption_bound = preemptions;
    }
    model.check(f);
}

/// One counter per thread index, in cells the checker tracks: index `i`
/// bumps only counter `i`, and the test thread reads them after `run`
/// returned. A worker still inside the closure when `run` returns, or one
/// whose writes `run` did not wait for, is a race the checker reports.
struct Counts(Vec<UnsafeCell<u32>>);

// SAFETY: every counter is written by one thread index at a time (a `run`
// calls each index once) and read by the test thread only after `run`
// returned; the checker verifies both, which is what these tests are for.
unsafe impl Sync for Counts {}

impl Counts {
    fn new(n: usize) -> Counts {
        Counts((0..n).map(|_| UnsafeCell::new(0)).collect())
    }

    /// Adds `by` to counter `i` (from thread index `i`).
    fn bump(&self, i: usize, by: u32) {
        // SAFETY: only thread index `i` touches counter `i` during a run.
        self.0[i].with_mut(|p| unsafe { *p += by });
    }

    /// Every counter, reset to 0 (from the test thread, between runs).
    fn take(&self) -> Vec<u32> {
        self.0
            .iter()
            // SAFETY: `run` returned, so no thread index is running.
            .map(|c| c.with_mut(|p| unsafe { std::mem::take(&mut *p) }))
            .collect()
    }
}

/// Two runs in a row: every index runs exactly once per run, the second
/// run's job slot write does not race a worker's read of the first job, and
/// no index touches the first closure's state after its `run` returned.
fn two_runs(n: usize, preemptions: Option<usize>) {
    check(preemptions, move || {
        let pool = ThreadPool::new(n).unwrap();
        let counts = Counts::new(n);
        pool.run(|i, nt| {
            assert_eq!(nt, n);
            counts.bump(i, 1);
        })
        .unwrap();
        assert_eq!(counts.take(), vec![1; n]);
        pool.run(|i, _| counts.bump(i, 10)).unwrap();
        assert_eq!(counts.take(), vec![10; n]);
    });
}

#[test]
fn two_runs_on_two_threads() {
    // Every schedule takes 30 s; 5 preemptions cover them in 1 s.
    two_runs(2, Some(5));
}

#[test]
fn two_runs_on_three_threads() {
    // 2 preemptions: 17 s (3 took 5 minutes).
    two_runs(3, Some(2));
}

/// A worker that went to sleep on the condvar is woken by the next `run`:
/// the test waits until the worker has registered as a sleeper, so every
/// schedule takes the notify path (a lost wake-up is a deadlock).
#[test]
fn a_sleeping_worker_is_woken_by_the_next_run() {
    check(None, || {
        let pool = ThreadPool::new(2).unwrap();
        while pool.shared.sleepers.load(Ordering::SeqCst) == 0 {
            thread::yield_now();
        }
        let counts = Counts::new(2);
        pool.run(|i, _| counts.bump(i, 1)).unwrap();
        assert_eq!(counts.take(), vec![1; 2]);
    });
}

/// Dropping the pool stops and joins every worker, whether it has not
/// started yet, waits, or sleeps: every worker's handle on the shared state
/// is gone once `drop` returns.
fn drop_joins(n: usize, runs: usize) {
    check(None, move || {
        let pool = ThreadPool::new(n).unwrap();
        for _ in 0..runs {
            pool.run(|_, _| {}).unwrap();
        }
        let shared = Arc::clone(&pool.shared);
        drop(pool);
        assert_eq!(Arc::strong_count(&shared), 1);
    });
}

#[test]
fn drop_joins_idle_workers_on_three_threads() {
    drop_joins(3, 0);
}

#[test]
fn drop_joins_workers_after_a_run_on_two_threads() {
    drop_joins(2, 1);
}

/// A panic in one index is reported as [`PoolError::Panicked`] with that
/// index, and every other index still ran. The panic is raised with
/// `resume_unwind`, which skips the panic hook: no message per schedule.
fn panic_in(n: usize, bad: usize) {
    // Two runs on two threads, as in `two_runs_on_two_threads`.
    check(Some(5), move || {
        let pool = ThreadPool::new(n).unwrap();
        let counts = Counts::new(n);
        let r = pool.run(|i, _| {
            counts.bump(i, 1);
            if i == bad {
                std::panic::resume_unwind(Box::new("index fails"));
            }
        });
        assert_eq!(r, Err(PoolError::Panicked { thread_index: bad }));
        assert_eq!(counts.take(), vec![1; n]);
        // The pool still works after a panic.
        pool.run(|i, _| counts.bump(i, 1)).unwrap();
        assert_eq!(counts.take(), vec![1; n]);
    });
}

#[test]
fn a_worker_panic_is_reported_and_the_others_ran() {
    panic_in(2, 1);
}

#[test]
fn a_caller_panic_is_reported_and_the_others_ran() {
    panic_in(2, 0);
}
