//! Heap use while parsing stays proportional to the input size, whatever
//! the input claims. A counting global allocator records the peak number
//! of live heap bytes during each parse; this binary holds a single test so
//! that no other test thread allocates concurrently.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{Raw, Tiny};
use fak_gguf::{model_config, GgufFile};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator and only adds bookkeeping.
unsafe impl GlobalAlloc for Counting {
    /// Allocates through [`System`] and records the live total.
    ///
    /// # Safety
    /// Same contract as [`GlobalAlloc::alloc`]: `layout` has non-zero size.
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Ordering::SeqCst) + layout.size();
            PEAK.fetch_max(now, Ordering::SeqCst);
        }
        p
    }

    /// Frees through [`System`] and lowers the live total.
    ///
    /// # Safety
    /// Same contract as [`GlobalAlloc::dealloc`]: `ptr` came from `alloc`
    /// with this `layout`.
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::SeqCst);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Peak heap bytes allocated (beyond what was live before) while parsing
/// and validating `bytes`; the input buffer itself is not counted.
fn peak_extra(bytes: &[u8]) -> usize {
    let input = bytes.to_vec();
    let base = LIVE.load(Ordering::SeqCst);
    PEAK.store(base, Ordering::SeqCst);
    if let Ok(f) = GgufFile::from_bytes(input) {
        let _ = model_config(&f);
    }
    PEAK.load(Ordering::SeqCst).saturating_sub(base)
}

/// Allowed heap per input byte, plus a fixed allowance for error strings
/// and small tables.
const PER_BYTE: usize = 16;
const FIXED: usize = 64 << 10;

#[track_caller]
fn assert_bounded(what: &str, bytes: &[u8]) {
    let peak = peak_extra(bytes);
    let limit = PER_BYTE * bytes.len() + FIXED;
    assert!(
        peak <= limit,
        "{what}: {peak} heap bytes for a {}-byte input (limit {limit})",
        bytes.len()
    );
}

#[test]
fn parsing_allocates_in_proportion_to_the_input() {
    // Lying counts.
    assert_bounded("n_tensors = MAX", &Raw::header(3, u64::MAX, 0).zeros(100).0);
    assert_bounded("n_kv = MAX", &Raw::header(3, 0, u64::MAX).zeros(100).0);
    let lying_array = Raw::header(3, 0, 1)
        .kv("a", common::vt::ARRAY)
        .u32(common::vt::U64)
        .u64(1 << 40)
        .zeros(64)
        .0;
    assert_bounded("array length 2^40", &lying_array);

    // Dense but honest files: many tiny keys, empty strings, tiny tensors.
    let n = 4000u64;
    let mut r = Raw::header(3, 0, n);
    for i in 0..n {
        r = r.kv(&format!("k{i:04}"), common::vt::U8).u8(1);
    }
    assert_bounded("4000 one-byte kvs", &r.0);
    let mut r = Raw::header(3, 0, 1)
        .kv("s", common::vt::ARRAY)
        .u32(common::vt::STR)
        .u64(n);
    for _ in 0..n {
        r = r.str("");
    }
    assert_bounded("4000 empty strings", &r.0);
    let mut r = Raw::header(3, n, 0);
    for i in 0..n {
        r = r.tensor(&format!("t{i}"), &[1], 24, 32 * i);
    }
    let r = r.pad(32).zeros(32 * n as usize);
    assert!(GgufFile::from_bytes(r.0.clone()).is_ok());
    assert_bounded("4000 tensors", &r.0);

    // Every mutation of a model header.
    let bytes = Tiny::llama().writer().to_bytes().expect("tiny model");
    let header_len = GgufFile::from_bytes(bytes.clone())
        .expect("parses")
        .data_offset() as usize;
    let mut worst = 0usize;
    for pos in 0..header_len {
        for word in [u64::MAX, 1 << 40, 0xffff_ffff] {
            let mut m = bytes.clone();
            let w = word.to_le_bytes();
            let end = (pos + 8).min(m.len());
            m[pos..end].copy_from_slice(&w[..end - pos]);
            worst = worst.max(peak_extra(&m));
        }
    }
    let limit = PER_BYTE * bytes.len() + FIXED;
    assert!(
        worst <= limit,
        "mutated tiny model: {worst} heap bytes (limit {limit})"
    );
}
