//! A decode step makes no heap allocation once its workspace is warm.
//!
//! A counting global allocator wraps the system one; the count is
//! process-wide, so it also sees the thread pool's workers.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use fak_model::{Batch, FlatKv, KvType, LogitsWanted, Model, SeqId, Workspace};

struct Counting;

static ALLOCS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call to `System`, which upholds the contract; the
// counter has no effect on the returned memory.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn check(file: &str, threads: usize, kv_type: KvType) {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../models")
        .join(file);
    assert!(
        p.exists(),
        "{} is missing: run scripts/fetch-models.sh",
        p.display()
    );
    let mut m = Model::load(&p).expect("load");
    m.set_threads(threads).expect("threads");
    let mut kv = FlatKv::for_model_typed(m.config(), 64, 1, kv_type).expect("kv");
    let mut ws = Workspace::new();
    let mut batch = Batch::new();
    batch.push_seq(SeqId(0), 0, &[1, 2, 3, 4], LogitsWanted::Yes);
    m.forward_into(&batch, &mut kv, &mut ws).expect("prompt");
    let mut step = |pos: u32, ws: &mut Workspace| {
        batch.tokens.clear();
        batch.push_seq(SeqId(0), pos, &[42 + pos], LogitsWanted::Yes);
        m.forward_into(&batch, &mut kv, ws).expect("decode").data[0]
    };
    // Warm-up: the first decode step sizes the workspace for one token.
    step(4, &mut ws);
    step(5, &mut ws);
    let before = ALLOCS.load(Ordering::SeqCst);
    let mut sink = 0.0f32;
    for pos in 6..16 {
        sink += step(pos, &mut ws);
    }
    let after = ALLOCS.load(Ordering::SeqCst);
    assert!(sink.is_finite());
    assert_eq!(
        after - before,
        0,
        "{file}, {threads} threads, {kv_type} cache: 10 decode steps allocated {} times",
        after - before
    );
}

#[test]
fn decode_steps_make_no_heap_allocation() {
    check("smollm2-135m-instruct-q8_0.gguf", 1, KvType::F16);
    check("smollm2-135m-instruct-q8_0.gguf", 2, KvType::F16);
    check("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", 2, KvType::F16);
    check("smollm2-135m-instruct-q8_0.gguf", 2, KvType::Q8_0);
}
