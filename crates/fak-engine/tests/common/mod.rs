//! The model, tokenizer and token stream the engine's integration tests
//! share (SmolLM2 Q8_0 on a 2-thread pool, loaded once per test binary).
//!
//! Each test binary compiles this module on its own and not every one uses
//! every item, so the items a binary may leave unused carry
//! `#[allow(dead_code)]`.

use std::path::Path;
use std::sync::OnceLock;

use fak_model::Model;
use fak_tokenizer::Tokenizer;

/// SmolLM2-135M-Instruct Q8_0 (`scripts/fetch-models.sh`), on 2 threads.
pub fn model() -> &'static Model {
    static M: OnceLock<Model> = OnceLock::new();
    M.get_or_init(|| {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../models/smollm2-135m-instruct-q8_0.gguf");
        assert!(
            p.exists(),
            "{} is missing: run scripts/fetch-models.sh",
            p.display()
        );
        let mut m = Model::load(&p).expect("load");
        m.set_threads(2).expect("threads");
        m
    })
}

/// [`model`]'s tokenizer.
#[allow(dead_code)] // fleet.rs and seqs.rs take no text
pub fn tok() -> &'static Tokenizer {
    static T: OnceLock<Tokenizer> = OnceLock::new();
    T.get_or_init(|| Tokenizer::from_gguf(model().gguf()).expect("tokenizer"))
}

/// `n` pseudo-random token ids below [`model`]'s vocabulary size, the same
/// stream for the same `seed` (a 64-bit LCG, its high bits).
#[allow(dead_code)] // constraint.rs and schemas.rs tokenize real text
pub fn ids(seed: u64, n: usize) -> Vec<u32> {
    let nv = model().config().n_vocab as u64;
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 33) % nv) as u32
        })
        .collect()
}
