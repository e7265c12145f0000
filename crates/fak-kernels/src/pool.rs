//! A persistent thread pool for fork-join loops over borrowed data.
//!
//! [`ThreadPool::new`]`(n)` starts `n - 1` worker threads once; every
//! [`ThreadPool::run`] then hands one closure to all of them and to the
//! calling thread, which takes thread index 0. `run` returns only after every
//! index has finished, so the closure may borrow the caller's stack, the way
//! `std::thread::scope` allows, but without creating threads or allocating
//! per call.
//!
//! ```text
//!  caller                         worker k (k = 1..n)
//!  ──────                         ───────────────────
//!  lock run_lock                  loop:
//!  job      := (&f, trampoline)     wait until generation != seen
//!  remaining := n - 1               (spin, then yield, then sleep on a condvar)
//!  generation += 1  ──Release──►    read job            ◄──Acquire──
//!  f(0, n)                          f(k, n)
//!  wait until remaining == 0 ◄────  remaining -= 1      ──Release──►
//!  unlock run_lock                  (never touches the job again)
//! ```
//!
//! Soundness argument: the job slot is written only by the thread holding
//! `run_lock`, and only while `remaining == 0`, i.e. while no worker is
//! between reading the job and decrementing `remaining`. A worker reads the
//! slot only after observing a new generation (Acquire, pairing with the
//! caller's Release increment), so it sees the fully written job. The
//! caller's borrow of `f` outlives every use because `run` does not return
//! (not even by unwinding: panics are caught) until `remaining` is back to 0.
//!
//! A nested `run` (from inside a closure, on any pool) and a `run` on a
//! pool with one thread execute every index serially on the calling thread,
//! so every index still runs exactly once.
//!
//! # Model checking
//!
//! The handshake above is checked with the `loom` model checker, which runs
//! a test once per thread schedule and reports a deadlock (a lost wake-up),
//! a racy access to the job slot or to a closure's state, or a failed
//! assertion:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test --release -p fak-kernels --lib pool::loom_tests
//! ```
//!
//! With `--cfg loom` the atomics, locks, condvar, threads and the job slot
//! come from `loom` (the `sync` submodule), and waiters do not spin on a
//! clock, which `loom` does not have: a worker looks at the generation once
//! and then sleeps on the condvar, and the caller's barrier yields on every
//! iteration. `ThreadPool::new` also stores two initial values again with
//! SeqCst, for `loom`'s partial model of SeqCst (the comment there says
//! why). Everything else is the code a normal build runs. A separate target
//! directory keeps the normal build's cache.

mod sync;

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
// The contention score is a heuristic outside the protocol: a `std` atomic
// even under `loom`, so the checker does not explore its interleavings.
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::PoisonError;
use sync::{
    fence, thread, Arc, AtomicBool, AtomicU64, AtomicUsize, Condvar, JobCell, Mutex, MutexGuard,
    USE_CLOCK,
};

/// How long a waiter busy-waits (`spin_loop` hints) before it starts
/// yielding. It is a time, not a count, because a `pause` costs from ~10
/// to ~140 cycles across CPUs. It must outlast the serial stretch between
/// two products of a decode step (norms, RoPE, attention of one token): a
/// worker that went to sleep there is woken by a futex, which took tens of
/// microseconds on the 2-vCPU VMs, and the step's next product started
/// without it. At 4,096 `pause`s (150 µs on a Zen 3 VM) the 1.5B model's
/// decode spent ~25% of its worker's time idle; at 65,536 (2.4 ms), 13%.
const SPIN: std::time::Duration = std::time::Duration::from_millis(2);
/// The spin while the pool looks oversubscribed (see [`Contention`]): with
/// more runnable threads than cores, a 2 ms spin burns the slice of the
/// very thread it waits for (two 2-thread pools on 2 cores ran 4-8x
/// slower; docs/PERFORMANCE.md, "More threads than cores").
const SPIN_CONTENDED: std::time::Duration = std::time::Duration::from_micros(50);
/// Spin iterations between two clock reads.
const SPIN_CHECK_EVERY: u32 = 64;
/// How long an idle worker yields (after spinning) before it sleeps on the
/// condvar: yielding costs nothing when the CPU has no other work and
/// hands it over when it has.
const YIELD: std::time::Duration = std::time::Duration::from_millis(20);

/// A waiter's busy-wait budget: [`Spin::keep_spinning`] is true for
/// `budget` after the first call.
struct Spin {
    start: Option<std::time::Instant>,
    iters: u32,
    done: bool,
    budget: std::time::Duration,
}

impl Spin {
    fn new(budget: std::time::Duration) -> Spin {
        Spin {
            start: None,
            iters: 0,
            done: false,
            budget,
        }
    }

    /// Time since the first [`Spin::keep_spinning`] call (zero before).
    fn elapsed(&self) -> std::time::Duration {
        self.start.map(|s| s.elapsed()).unwrap_or_default()
    }

    /// Whether the waiter should still spin (then it has spun once more).
    fn keep_spinning(&mut self) -> bool {
        if self.done {
            return false;
        }
        self.iters += 1;
        if self.iters.is_multiple_of(SPIN_CHECK_EVERY) {
            let start = *self.start.get_or_insert_with(std::time::Instant::now);
            self.done = start.elapsed() >= self.budget;
        }
        std::hint::spin_loop();
        !self.done
    }
}

/// Whether the pool's waits say its threads are being descheduled.
///
/// A score: a wait that lasted [`SPIN`] or more (the thread waited for did
/// not get there in 2 ms: it was descheduled, or the pool was idle) adds
/// [`Contention::LONG`]; a wait shorter than [`SPIN_CONTENDED`] takes one
/// off. While the score is above zero
/// waiters spin only [`SPIN_CONTENDED`] before they yield. A decode step
/// waits dozens of times, each short when every thread has a core, so an
/// idle gap or one slow wait costs a few yields and the long spin is back
/// within [`Contention::LONG`] short waits.
struct Contention(AtomicU32);

impl Contention {
    /// Added per long wait.
    const LONG: u32 = 8;
    /// Highest score.
    const MAX: u32 = 64;

    /// The spin budget for the next wait.
    fn budget(&self) -> std::time::Duration {
        if self.0.load(Ordering::Relaxed) > 0 {
            SPIN_CONTENDED
        } else {
            SPIN
        }
    }

    /// Records a finished wait of `spin`'s length (`slept`: it went to the
    /// condvar).
    fn record(&self, spin: &Spin, slept: bool) {
        let score = self.0.load(Ordering::Relaxed);
        let waited = spin.elapsed();
        let next = if slept || waited >= SPIN {
            score.saturating_add(Self::LONG).min(Self::MAX)
        } else if waited < SPIN_CONTENDED {
            score.saturating_sub(1)
        } else {
            score
        };
        if next != score {
            // A lost update between threads only shifts the score by one
            // wait's worth; it is a heuristic, not a count.
            self.0.store(next, Ordering::Relaxed);
        }
    }
}

/// Most threads a pool may have. A count beyond it is refused
/// ([`PoolError::BadThreadCount`]) before anything is allocated or started.
pub const MAX_THREADS: usize = 1024;

/// Errors of [`ThreadPool`].
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PoolError {
    /// The thread count is 0 or above [`MAX_THREADS`].
    #[error("a thread pool needs 1..={max} threads, got {n}", max = MAX_THREADS)]
    BadThreadCount {
        /// The count asked for.
        n: usize,
    },
    /// A closure invocation panicked; every other index still ran.
    #[error("thread-pool closure panicked on thread index {thread_index}")]
    Panicked {
        /// The lowest thread index whose invocation panicked.
        thread_index: usize,
    },
    /// The operating system refused to start a worker thread.
    #[error("cannot start thread-pool worker {index}: {message}")]
    Spawn {
        /// Index of the worker that failed to start.
        index: usize,
        /// The OS error text.
        message: String,
    },
}

#[cfg(not(loom))]
std::thread_local! {
    /// True on pool workers, and on a caller while it runs a job: a `run`
    /// issued there executes serially instead of waiting on a busy pool.
    static IN_POOL: Cell<bool> = const { Cell::new(false) };
}
#[cfg(loom)]
loom::thread_local! {
    /// As in a normal build (`loom`'s macro takes no `const` initializer).
    static IN_POOL: Cell<bool> = Cell::new(false);
}

/// A type-erased reference to the caller's closure.
#[derive(Clone, Copy)]
struct Job {
    /// Points at an `F: Fn(usize, usize) + Sync` on the caller's stack.
    data: *const (),
    /// `trampoline::<F>`: casts `data` back to `&F` and calls it.
    call: unsafe fn(*const (), usize, usize),
}

/// Calls the closure behind `data`.
///
/// # Safety
/// `data` must point to a live `F` (it came from `&F` in [`ThreadPool::run`],
/// which does not return while a worker may still call this).
unsafe fn trampoline<F: Fn(usize, usize) + Sync>(data: *const (), index: usize, n: usize) {
    // SAFETY: the caller guarantees `data` is a live `&F`.
    let f = unsafe { &*data.cast::<F>() };
    f(index, n);
}

/// A no-op job for the slot's initial value.
fn noop(_: *const (), _: usize, _: usize) {}

/// State shared by the caller and the workers.
struct Shared {
    n_threads: usize,
    /// Bumped once per job (and once at shutdown); workers wait for a change.
    generation: AtomicU64,
    /// Written only under `run_lock` while `remaining == 0`; see module docs.
    job: JobCell,
    /// Workers that have not finished the current job.
    remaining: AtomicUsize,
    /// Lowest worker index that panicked in the current job, `usize::MAX` if none.
    panicked: AtomicUsize,
    shutdown: AtomicBool,
    /// Workers asleep on `wake` (they registered under `sleep_lock`).
    sleepers: AtomicUsize,
    sleep_lock: Mutex<()>,
    wake: Condvar,
    /// How long waiters spin (see [`Contention`]).
    contention: Contention,
}

// SAFETY: `job` is the only non-Sync field; access to it is ordered by the
// generation/remaining protocol described in the module docs, and the closure
// it points at is `Sync`.
unsafe impl Sync for Shared {}
// SAFETY: the raw pointer in `job` refers to a `Sync` closure that is only
// called while its owner blocks in `run`.
unsafe impl Send for Shared {}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A fixed set of worker threads that run fork-join jobs; see the module docs.
pub struct ThreadPool {
    shared: Arc<Shared>,
    workers: Vec<thread::JoinHandle<()>>,
    /// Serializes callers: one job at a time.
    run_lock: Mutex<()>,
}

impl ThreadPool {
    /// Starts a pool of `n_threads` threads in all (`n_threads - 1` workers
    /// plus the caller of `run`).
    ///
    /// # Errors
    ///
    /// [`PoolError::BadThreadCount`] unless `1 <= n_threads <=`
    /// [`MAX_THREADS`]; [`PoolError::Spawn`] if the OS refuses a worker
    /// (the workers started so far are stopped and joined).
    pub fn new(n_threads: usize) -> Result<ThreadPool, PoolError> {
        if !(1..=MAX_THREADS).contains(&n_threads) {
            return Err(PoolError::BadThreadCount { n: n_threads });
        }
        let shared = Arc::new(Shared {
            n_threads,
            generation: AtomicU64::new(0),
            job: JobCell::new(Job {
                data: std::ptr::null(),
                call: noop,
            }),
            remaining: AtomicUsize::new(0),
            panicked: AtomicUsize::new(usize::MAX),
            shutdown: AtomicBool::new(false),
            sleepers: AtomicUsize::new(0),
            sleep_lock: Mutex::new(()),
            wake: Condvar::new(),
            contention: Contention(AtomicU32::new(0)),
        });
        // `loom` orders a SeqCst load only against SeqCst stores, and an
        // atomic's initial value is not one: a SeqCst load may still return
        // it after a newer SeqCst store, which no real execution does
        // (SeqCst operations have one total order), and the first job's
        // sleep/notify handshake would show a lost wake-up that cannot
        // happen. Storing the initial values again with SeqCst, before any
        // worker starts, gives the checker that order.
        #[cfg(loom)]
        {
            shared.generation.store(0, Ordering::SeqCst);
            shared.sleepers.store(0, Ordering::SeqCst);
        }
        let mut pool = ThreadPool {
            shared,
            workers: Vec::with_capacity(n_threads - 1),
            run_lock: Mutex::new(()),
        };
        for index in 1..n_threads {
            let sh = Arc::clone(&pool.shared);
            let handle = thread::Builder::new()
                .name(format!("fak-pool-{index}"))
                .spawn(move || worker(&sh, index))
                .map_err(|e| PoolError::Spawn {
                    index,
                    message: e.to_string(),
                })?;
            // On error above, dropping `pool` joins the workers started so far.
            pool.workers.push(handle);
        }
        Ok(pool)
    }

    /// Total threads a job runs on, the caller included (at least 1).
    pub fn n_threads(&self) -> usize {
        self.shared.n_threads
    }

    /// Calls `f(thread_index, n_threads)` once for every `thread_index` in
    /// `0..n_threads`, concurrently, and returns when all calls are done.
    ///
    /// A panic inside `f` is caught (after all other indices finished) and
    /// reported as [`PoolError::Panicked`]. Called from inside a job, `f` runs
    /// for every index serially on the calling thread.
    pub fn run<F: Fn(usize, usize) + Sync>(&self, f: F) -> Result<(), PoolError> {
        let n = self.shared.n_threads;
        if n == 1 || IN_POOL.with(Cell::get) {
            return run_serial(&f, n);
        }
        let _guard = lock(&self.run_lock);
        let sh = &*self.shared;
        // SAFETY: we hold `run_lock` and the previous job finished
        // (`remaining == 0`, observed with Acquire before its `run` returned),
        // so no worker reads `job` until the generation bump below.
        unsafe {
            sh.job.write(Job {
                data: std::ptr::from_ref(&f).cast(),
                call: trampoline::<F>,
            });
        }
        sh.panicked.store(usize::MAX, Ordering::Relaxed);
        sh.remaining.store(n - 1, Ordering::Relaxed);
        sh.generation.fetch_add(1, Ordering::SeqCst);
        if sh.sleepers.load(Ordering::SeqCst) > 0 {
            let _g = lock(&sh.sleep_lock);
            sh.wake.notify_all();
        }

        IN_POOL.with(|c| c.set(true));
        let own = catch_unwind(AssertUnwindSafe(|| f(0, n)));
        IN_POOL.with(|c| c.set(false));

        // Barrier: `f` must stay borrowed until every worker is done with it.
        // Under `loom` (no clock) every iteration yields to the checker.
        let mut spin = Spin::new(sh.contention.budget());
        while sh.remaining.load(Ordering::Acquire) != 0 {
            if !USE_CLOCK || !spin.keep_spinning() {
                thread::yield_now();
            }
        }
        sh.contention.record(&spin, false);
        if own.is_err() {
            return Err(PoolError::Panicked { thread_index: 0 });
        }
        match sh.panicked.load(Ordering::Relaxed) {
            usize::MAX => Ok(()),
            thread_index => Err(PoolError::Panicked { thread_index }),
        }
    }

    /// Splits `data` into `data.chunks_mut(chunk_len)` and calls
    /// `f(chunk_index, chunk)` for every chunk, in parallel: thread `k` takes
    /// chunks `k, k + n_threads, k + 2·n_threads, …`.
    ///
    /// `data`: any slice; `chunk_len`: elements per chunk (the last chunk may
    /// be shorter; `0` is treated as `data.len()`, i.e. one chunk).
    pub fn run_chunks_mut<T, F>(
        &self,
        data: &mut [T],
        chunk_len: usize,
        f: F,
    ) -> Result<(), PoolError>
    where
        T: Send,
        F: Fn(usize, &mut [T]) + Sync,
    {
        self.chunks(data, chunk_len, ChunkOrder::RoundRobin, f)
    }

    /// As [`ThreadPool::run_chunks_mut`], but the threads claim chunks in
    /// order from a shared counter instead of a fixed round-robin, so a
    /// thread that is slowed down (a preempted vCPU, a neighbour's load, a
    /// chunk with more work) simply takes fewer chunks. `f` must not care
    /// which thread runs a chunk.
    pub fn run_chunks_dynamic_mut<T, F>(
        &self,
        data: &mut [T],
        chunk_len: usize,
        f: F,
    ) -> Result<(), PoolError>
    where
        T: Send,
        F: Fn(usize, &mut [T]) + Sync,
    {
        self.chunks(data, chunk_len, ChunkOrder::Claimed, f)
    }

    /// As [`ThreadPool::run_chunks_dynamic_mut`] over several slices in one
    /// job: part `i` is `parts[i].0` cut into chunks of `parts[i].1`
    /// elements (`0`: one chunk), and `f(i, chunk_index, chunk)` runs once
    /// for every chunk of every part, the chunks claimed in order (part 0's
    /// first) from one shared counter. One job instead of one per part
    /// saves a fork and a join per part: the products of a decode step that
    /// share their input (q, k and v; gate and up) run as one.
    pub fn run_parts_dynamic_mut<T, F, const N: usize>(
        &self,
        parts: &mut [(&mut [T], usize); N],
        f: F,
    ) -> Result<(), PoolError>
    where
        T: Send,
        F: Fn(usize, usize, &mut [T]) + Sync,
    {
        // (base, len, chunk_len, first global chunk index) per part, on the
        // stack: a decode step allocates nothing.
        let mut total = 0usize;
        let layout: [(SendPtr<T>, usize, usize, usize); N] = std::array::from_fn(|i| {
            let data = &mut parts[i].0;
            let len = data.len();
            let chunk_len = match parts[i].1 {
                0 => len.max(1),
                c => c,
            };
            let first = total;
            total += len.div_ceil(chunk_len);
            (SendPtr(parts[i].0.as_mut_ptr()), len, chunk_len, first)
        });
        if total == 0 {
            return Ok(());
        }
        let next = AtomicUsize::new(0);
        let layout = &layout;
        self.run(|_, _| loop {
            let g = next.fetch_add(1, Ordering::Relaxed);
            if g >= total {
                break;
            }
            // The part holding global chunk `g`: the last whose first
            // index is at most `g` (parts with no chunks are skipped, as
            // the next part starts at the same index).
            let i = layout.partition_point(|p| p.3 <= g) - 1;
            let (base, len, chunk_len, first) = &layout[i];
            let c = g - first;
            let start = c * chunk_len;
            let end = (start + chunk_len).min(*len);
            // SAFETY: `start < end <= len` (chunk `c` exists in part `i`:
            // `g` is below the next part's first index), so the range lies
            // inside part `i`'s slice, which stays mutably borrowed for the
            // whole `run`. `fetch_add` hands out every global index once and
            // each maps to one (part, chunk), so no two live `&mut` slices
            // overlap.
            let chunk = unsafe { std::slice::from_raw_parts_mut(base.0.add(start), end - start) };
            f(i, c, chunk);
        })
    }

    /// The body of the two chunked runs.
    fn chunks<T, F>(
        &self,
        data: &mut [T],
        chunk_len: usize,
        order: ChunkOrder,
        f: F,
    ) -> Result<(), PoolError>
    where
        T: Send,
        F: Fn(usize, &mut [T]) + Sync,
    {
        let len = data.len();
        if len == 0 {
            return Ok(());
        }
        let chunk_len = if chunk_len == 0 { len } else { chunk_len };
        let n_chunks = len.div_ceil(chunk_len);
        let base = SendPtr(data.as_mut_ptr());
        let next = AtomicUsize::new(0);
        self.run(|k, n| {
            let base = &base;
            let claim = |after: Option<usize>| match (order, after) {
                (ChunkOrder::RoundRobin, None) => k,
                (ChunkOrder::RoundRobin, Some(c)) => c + n,
                (ChunkOrder::Claimed, _) => next.fetch_add(1, Ordering::Relaxed),
            };
            let mut c = claim(None);
            while c < n_chunks {
                let start = c * chunk_len;
                let end = (start + chunk_len).min(len);
                // SAFETY: `start < end <= len`, so the range lies inside
                // `data`, which stays mutably borrowed for the whole `run`.
                // Each chunk index goes to exactly one thread: round-robin
                // visits chunk `c` only on thread `c % n` (`run` calls each
                // thread index once), and `fetch_add` hands out every index
                // once. So no two live `&mut` slices overlap.
                let chunk =
                    unsafe { std::slice::from_raw_parts_mut(base.0.add(start), end - start) };
                f(c, chunk);
                c = claim(Some(c));
            }
        })
    }
}

/// How the threads of a chunked run pick their chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChunkOrder {
    /// Thread `k` takes chunks `k, k + n, …`.
    RoundRobin,
    /// Threads claim the next chunk from a shared counter.
    Claimed,
}

/// A raw pointer to a `Send` element type that may be shared with workers.
struct SendPtr<T>(*mut T);
// SAFETY: only used by `run_chunks_mut`, `run_chunks_dynamic_mut` and
// `run_parts_dynamic_mut`, which hand out disjoint chunks of `&mut [T]`s
// with `T: Send` to different threads.
unsafe impl<T: Send> Sync for SendPtr<T> {}

/// Runs every index on the calling thread, catching panics like `run`.
fn run_serial<F: Fn(usize, usize)>(f: &F, n: usize) -> Result<(), PoolError> {
    let mut first_panic = None;
    for i in 0..n {
        if catch_unwind(AssertUnwindSafe(|| f(i, n))).is_err() && first_panic.is_none() {
            first_panic = Some(i);
        }
    }
    match first_panic {
        None => Ok(()),
        Some(thread_index) => Err(PoolError::Panicked { thread_index }),
    }
}

/// Waits (spin for the [`Contention`] budget, yield for [`YIELD`], then
/// sleep) until the generation differs from `seen`.
///
/// Under `loom` (no clock) the waiter looks at the generation once and then
/// goes straight to the condvar, so the checker explores both the fast path
/// and the sleep/wake-up handshake.
fn wait_for_job(sh: &Shared, seen: u64) -> u64 {
    let mut spin = Spin::new(sh.contention.budget());
    loop {
        let g = sh.generation.load(Ordering::Acquire);
        if g != seen {
            sh.contention.record(&spin, false);
            return g;
        }
        if !USE_CLOCK {
            break;
        }
        if !spin.keep_spinning() {
            if spin.elapsed() >= spin.budget + YIELD {
                break;
            }
            thread::yield_now();
        }
    }
    let mut guard = lock(&sh.sleep_lock);
    sh.sleepers.fetch_add(1, Ordering::SeqCst);
    // Re-check under the lock: a caller that bumped the generation before our
    // registration is seen here; one that bumps it after sees `sleepers > 0`
    // and notifies under the same lock, so no wake-up is lost.
    let g = loop {
        let g = sh.generation.load(Ordering::SeqCst);
        if g != seen {
            break g;
        }
        guard = sh.wake.wait(guard).unwrap_or_else(PoisonError::into_inner);
    };
    sh.sleepers.fetch_sub(1, Ordering::SeqCst);
    drop(guard);
    sh.contention.record(&spin, true);
    // Pairs with the caller's Release increment (the SeqCst load above is
    // already acquiring; this keeps the intent explicit).
    fence(Ordering::Acquire);
    g
}

fn worker(sh: &Shared, index: usize) {
    IN_POOL.with(|c| c.set(true));
    let mut seen = 0u64;
    loop {
        seen = wait_for_job(sh, seen);
        if sh.shutdown.load(Ordering::Acquire) {
            return;
        }
        // SAFETY: we observed the new generation with Acquire, after the
        // caller wrote `job`; the caller does not rewrite it until we
        // decrement `remaining` below, and keeps the closure alive until then.
        let job = unsafe { sh.job.read() };
        // SAFETY: `job.data` points at the live closure `job.call` expects.
        let r = catch_unwind(AssertUnwindSafe(|| unsafe {
            (job.call)(job.data, index, sh.n_threads)
        }));
        if r.is_err() {
            sh.panicked.fetch_min(index, Ordering::Relaxed);
        }
        // Release: our writes (and the panic flag) happen-before the caller's
        // Acquire load that sees the count reach 0.
        sh.remaining.fetch_sub(1, Ordering::Release);
    }
}

impl Drop for ThreadPool {
    /// Stops and joins every worker.
    fn drop(&mut self) {
        let sh = &*self.shared;
        sh.shutdown.store(true, Ordering::Release);
        sh.generation.fetch_add(1, Ordering::SeqCst);
        {
            let _g = lock(&sh.sleep_lock);
            sh.wake.notify_all();
        }
        for h in self.workers.drain(..) {
            // A worker never panics outside `catch_unwind`; nothing to report.
            let _ = h.join();
        }
    }
}

impl std::fmt::Debug for ThreadPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadPool")
            .field("n_threads", &self.shared.n_threads)
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests;

#[cfg(all(test, loom))]
mod loom_tests;
