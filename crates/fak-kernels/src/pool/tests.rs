//! Tests of the persistent thread pool: coverage, borrowing, reuse, nesting,
//! panics and shutdown.

use super::*;
use proptest::prelude::*;
use std::sync::atomic::AtomicU32;

fn counts(n: usize) -> Vec<AtomicU32> {
    (0..n).map(|_| AtomicU32::new(0)).collect()
}

#[test]
fn every_index_runs_exactly_once() {
    for n in [1, 2, 3, 5] {
        let pool = ThreadPool::new(n).unwrap();
        assert_eq!(pool.n_threads(), n);
        let c = counts(n);
        pool.run(|i, nt| {
            assert_eq!(nt, n);
            c[i].fetch_add(1, Ordering::Relaxed);
        })
        .unwrap();
        let got: Vec<u32> = c.iter().map(|a| a.load(Ordering::Relaxed)).collect();
        assert_eq!(got, vec![1; n], "n_threads = {n}");
    }
}

#[test]
fn bad_thread_counts_are_refused() {
    for n in [0, MAX_THREADS + 1, usize::MAX] {
        assert_eq!(
            ThreadPool::new(n).err(),
            Some(PoolError::BadThreadCount { n }),
            "{n}"
        );
    }
}

#[test]
fn one_thread_runs_on_the_caller() {
    let pool = ThreadPool::new(1).unwrap();
    assert_eq!(pool.n_threads(), 1);
    let c = counts(1);
    pool.run(|i, _| {
        c[i].fetch_add(1, Ordering::Relaxed);
    })
    .unwrap();
    assert_eq!(c[0].load(Ordering::Relaxed), 1);
}

#[test]
fn parallel_sum_of_borrowed_data_equals_serial() {
    let data: Vec<u64> = (0..10_007u64).map(|i| i * i % 977).collect();
    let serial: u64 = data.iter().sum();
    let pool = ThreadPool::new(4).unwrap();
    let partial = counts(4);
    let total = AtomicU64::new(0);
    pool.run(|i, n| {
        let chunk = data.len().div_ceil(n);
        let lo = (i * chunk).min(data.len());
        let hi = ((i + 1) * chunk).min(data.len());
        let s: u64 = data[lo..hi].iter().sum();
        total.fetch_add(s, Ordering::Relaxed);
        partial[i].fetch_add(1, Ordering::Relaxed);
    })
    .unwrap();
    assert_eq!(total.load(Ordering::Relaxed), serial);
}

#[test]
fn many_rapid_calls_each_cover_every_index() {
    let pool = ThreadPool::new(3).unwrap();
    let c = counts(3);
    let rounds = 5_000u32;
    for r in 0..rounds {
        pool.run(|i, _| {
            // Every index must see the previous round completed.
            assert_eq!(c[i].load(Ordering::Relaxed), r);
            c[i].fetch_add(1, Ordering::Relaxed);
        })
        .unwrap();
    }
    for a in &c {
        assert_eq!(a.load(Ordering::Relaxed), rounds);
    }
}

#[test]
fn calls_after_workers_fell_asleep_still_run() {
    let pool = ThreadPool::new(2).unwrap();
    let c = counts(2);
    for _ in 0..3 {
        // Long enough for the workers to pass their spin and yield phases.
        std::thread::sleep(std::time::Duration::from_millis(30));
        pool.run(|i, _| {
            c[i].fetch_add(1, Ordering::Relaxed);
        })
        .unwrap();
    }
    assert_eq!(c[0].load(Ordering::Relaxed), 3);
    assert_eq!(c[1].load(Ordering::Relaxed), 3);
}

#[test]
fn nested_run_executes_serially_and_completely() {
    let pool = ThreadPool::new(3).unwrap();
    let inner = counts(9);
    pool.run(|i, _| {
        pool.run(|j, n| {
            inner[i * n + j].fetch_add(1, Ordering::Relaxed);
        })
        .unwrap();
    })
    .unwrap();
    for a in &inner {
        assert_eq!(a.load(Ordering::Relaxed), 1);
    }
}

#[test]
fn concurrent_callers_share_one_pool() {
    let pool = Arc::new(ThreadPool::new(3).unwrap());
    let hits = Arc::new(AtomicU64::new(0));
    let callers: Vec<_> = (0..3)
        .map(|_| {
            let pool = Arc::clone(&pool);
            let hits = Arc::clone(&hits);
            std::thread::spawn(move || {
                for _ in 0..500 {
                    pool.run(|_, _| {
                        hits.fetch_add(1, Ordering::Relaxed);
                    })
                    .unwrap();
                }
            })
        })
        .collect();
    for c in callers {
        c.join().unwrap();
    }
    assert_eq!(hits.load(Ordering::Relaxed), 3 * 500 * 3);
}

#[test]
fn panics_are_reported_and_the_pool_stays_usable() {
    let pool = ThreadPool::new(3).unwrap();
    let ran = counts(3);
    let r = pool.run(|i, _| {
        ran[i].fetch_add(1, Ordering::Relaxed);
        if i == 2 {
            panic!("deliberate test panic");
        }
    });
    assert_eq!(r, Err(PoolError::Panicked { thread_index: 2 }));
    let r0 = pool.run(|i, _| {
        if i == 0 {
            panic!("deliberate test panic");
        }
    });
    assert_eq!(r0, Err(PoolError::Panicked { thread_index: 0 }));
    pool.run(|i, _| {
        ran[i].fetch_add(1, Ordering::Relaxed);
    })
    .unwrap();
    for a in &ran {
        assert_eq!(a.load(Ordering::Relaxed), 2);
    }
}

static EXITED: AtomicUsize = AtomicUsize::new(0);

struct ExitMark;
impl Drop for ExitMark {
    fn drop(&mut self) {
        EXITED.fetch_add(1, Ordering::SeqCst);
    }
}

thread_local! {
    static MARK: std::cell::RefCell<Option<ExitMark>> = const { std::cell::RefCell::new(None) };
}

#[test]
fn drop_joins_the_workers() {
    let n = 4;
    let pool = ThreadPool::new(n).unwrap();
    let main_id = std::thread::current().id();
    pool.run(|_, _| {
        // Only worker threads get a mark; their exit drops it.
        if std::thread::current().id() != main_id {
            MARK.with(|m| *m.borrow_mut() = Some(ExitMark));
        }
    })
    .unwrap();
    assert_eq!(EXITED.load(Ordering::SeqCst), 0);
    drop(pool);
    assert_eq!(EXITED.load(Ordering::SeqCst), n - 1);
}

#[test]
fn run_chunks_mut_fills_disjoint_chunks() {
    let pool = ThreadPool::new(3).unwrap();
    let mut v = vec![0usize; 103];
    pool.run_chunks_mut(&mut v, 10, |c, chunk| {
        for (k, x) in chunk.iter_mut().enumerate() {
            *x = c * 10 + k + 1;
        }
    })
    .unwrap();
    let want: Vec<usize> = (1..=103).collect();
    assert_eq!(v, want);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Every element is visited exactly once, by the chunk that owns it.
    #[test]
    fn run_chunks_mut_covers_each_element_once(
        n_threads in 1usize..6,
        len in 0usize..300,
        chunk_len in 0usize..40,
    ) {
        let pool = ThreadPool::new(n_threads).unwrap();
        let mut v = vec![0u32; len];
        let eff = if chunk_len == 0 { len.max(1) } else { chunk_len };
        pool.run_chunks_mut(&mut v, chunk_len, |c, chunk| {
            for x in chunk.iter_mut() {
                *x += 1 + c as u32;
            }
        })
        .unwrap();
        for (i, x) in v.iter().enumerate() {
            prop_assert_eq!(*x, 1 + (i / eff) as u32);
        }
    }

    /// The same for chunks claimed from the shared counter, with uneven
    /// work per chunk so that threads take different numbers of chunks.
    #[test]
    fn run_chunks_dynamic_mut_covers_each_element_once(
        n_threads in 1usize..6,
        len in 0usize..300,
        chunk_len in 0usize..40,
    ) {
        let pool = ThreadPool::new(n_threads).unwrap();
        let mut v = vec![0u32; len];
        let eff = if chunk_len == 0 { len.max(1) } else { chunk_len };
        pool.run_chunks_dynamic_mut(&mut v, chunk_len, |c, chunk| {
            if c % 3 == 0 {
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
            for x in chunk.iter_mut() {
                *x += 1 + c as u32;
            }
        })
        .unwrap();
        for (i, x) in v.iter().enumerate() {
            prop_assert_eq!(*x, 1 + (i / eff) as u32);
        }
    }

    /// Every element of every part is visited once, by the chunk that
    /// holds it, with the part's index (parts may be empty or whole).
    #[test]
    fn run_parts_dynamic_mut_covers_each_element_once(
        n_threads in 1usize..6,
        shapes in proptest::array::uniform4((0usize..120, 0usize..40)),
    ) {
        let pool = ThreadPool::new(n_threads).unwrap();
        let mut bufs: [Vec<u32>; 4] = std::array::from_fn(|i| vec![0; shapes[i].0]);
        let [b0, b1, b2, b3] = &mut bufs;
        let mut parts = [
            (b0.as_mut_slice(), shapes[0].1),
            (b1.as_mut_slice(), shapes[1].1),
            (b2.as_mut_slice(), shapes[2].1),
            (b3.as_mut_slice(), shapes[3].1),
        ];
        pool.run_parts_dynamic_mut(&mut parts, |i, c, chunk| {
            if c % 3 == 0 {
                std::thread::sleep(std::time::Duration::from_micros(20));
            }
            for x in chunk.iter_mut() {
                *x += 1 + (1000 * i + c) as u32;
            }
        })
        .unwrap();
        for (i, (b, &(len, cl))) in bufs.iter().zip(&shapes).enumerate() {
            let eff = if cl == 0 { len.max(1) } else { cl };
            for (e, x) in b.iter().enumerate() {
                prop_assert_eq!(*x, 1 + (1000 * i + e / eff) as u32);
            }
        }
    }
}

/// A finished wait that lasted `d` (`None`: it never reached its first
/// clock read).
fn waited(d: Option<std::time::Duration>) -> Spin {
    Spin {
        start: d.map(|d| std::time::Instant::now() - d),
        iters: 0,
        done: true,
        budget: SPIN,
    }
}

#[test]
fn long_waits_shorten_the_spin_and_short_waits_restore_it() {
    let c = Contention(AtomicU32::new(0));
    assert_eq!(c.budget(), SPIN);
    // Short waits on an uncontended pool change nothing.
    c.record(&waited(None), false);
    c.record(&waited(Some(std::time::Duration::from_micros(10))), false);
    assert_eq!(c.budget(), SPIN);
    // One wait of the whole long spin: the partner was descheduled.
    c.record(&waited(Some(SPIN)), false);
    assert_eq!(c.budget(), SPIN_CONTENDED);
    // A middling wait neither adds nor removes.
    c.record(&waited(Some(SPIN / 2)), false);
    for _ in 1..Contention::LONG {
        c.record(&waited(None), false);
        assert_eq!(c.budget(), SPIN_CONTENDED);
    }
    c.record(&waited(None), false);
    assert_eq!(c.budget(), SPIN);
    // A sleep on the condvar counts as long, however it was measured.
    c.record(&waited(None), true);
    assert_eq!(c.budget(), SPIN_CONTENDED);
    // The score saturates: MAX / LONG short waits bring the long spin back.
    for _ in 0..100 {
        c.record(&waited(Some(10 * SPIN)), false);
    }
    for _ in 0..Contention::MAX {
        c.record(&waited(None), false);
    }
    assert_eq!(c.budget(), SPIN);
}
