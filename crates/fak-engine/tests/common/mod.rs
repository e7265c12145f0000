//! The model, tokenizer and token stream the engine's integration tests
//! share (SmolLM2 Q8_0 on a 2-thread pool, loaded once per test binary).
//!
//! Each test binary compiles this module on its own and not every one uses
//! every item (window.rs loads gemma3 and takes only the helpers that do
//! not name a model), hence the module-wide `allow(dead_code)`.
#![allow(dead_code)]

use std::path::Path;
use std::sync::OnceLock;

use fak_engine::{Append, Sequences};
use fak_model::{LogitsWanted, Model, SeqId};
use fak_tokenizer::{ChatMessage, ChatTemplate, EncodeOptions, Tokenizer};

/// SmolLM2-135M-Instruct Q8_0 (`scripts/fetch-models.sh`), on 2 threads.
pub fn model() -> &'static Model {
    static M: OnceLock<Model> = OnceLock::new();
    M.get_or_init(|| load_model("smollm2-135m-instruct-q8_0.gguf"))
}

/// A model from `models/` (`scripts/fetch-models.sh`), on 2 threads.
pub fn load_model(file: &str) -> Model {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../models")
        .join(file);
    assert!(
        p.exists(),
        "{} is missing: run scripts/fetch-models.sh",
        p.display()
    );
    let mut m = Model::load(&p).expect("load");
    m.set_threads(2).expect("threads");
    m
}

/// [`model`]'s tokenizer.
pub fn tok() -> &'static Tokenizer {
    static T: OnceLock<Tokenizer> = OnceLock::new();
    T.get_or_init(|| Tokenizer::from_gguf(model().gguf()).expect("tokenizer"))
}

/// `n` pseudo-random token ids below [`model`]'s vocabulary size, the same
/// stream for the same `seed` (see [`ids_below`]).
pub fn ids(seed: u64, n: usize) -> Vec<u32> {
    ids_below(seed, n, model().config().n_vocab)
}

/// `n` pseudo-random token ids below `n_vocab`, the same stream for the
/// same `seed` (a 64-bit LCG, its high bits).
pub fn ids_below(seed: u64, n: usize, n_vocab: usize) -> Vec<u32> {
    let nv = n_vocab as u64;
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

/// Logits as their little-endian bytes, for bit-exact comparisons.
pub fn bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// One user message through [`model`]'s chat template, with the
/// assistant's turn opened, as token ids.
pub fn chat(user: &str) -> Vec<u32> {
    let t = ChatTemplate::from_gguf(model().gguf())
        .expect("template")
        .expect("has a template");
    let text = t
        .render(
            &[ChatMessage {
                role: "user".into(),
                content: user.into(),
            }],
            true,
        )
        .expect("render");
    tok().encode(&text, EncodeOptions::default())
}

/// Logits (as bytes) of sequences fed in lockstep through one
/// [`Sequences`]: every sequence's prompt in one step, then token `k` of
/// every tail in step `k + 1`, for `steps` steps. Per sequence (in
/// `handles` order): `[prefill, decode 0, decode 1, ...]`.
pub fn lockstep(
    seqs: &mut Sequences,
    m: &Model,
    handles: &[SeqId],
    prompts: &[Vec<u32>],
    tails: &[Vec<u32>],
    steps: usize,
) -> Vec<Vec<Vec<u8>>> {
    let items: Vec<Append<'_>> = handles
        .iter()
        .zip(prompts)
        .map(|(&seq, p)| Append {
            seq,
            ids: p,
            logits: LogitsWanted::Yes,
        })
        .collect();
    let mut got: Vec<Vec<Vec<u8>>> = seqs
        .step(m, &items)
        .expect("prefill")
        .into_iter()
        .map(|l| vec![bytes(&l.expect("logits"))])
        .collect();
    for k in 0..steps {
        let one: Vec<[u32; 1]> = tails.iter().map(|t| [t[k]]).collect();
        let items: Vec<Append<'_>> = handles
            .iter()
            .zip(&one)
            .map(|(&seq, id)| Append {
                seq,
                ids: id,
                logits: LogitsWanted::Yes,
            })
            .collect();
        for (g, l) in got.iter_mut().zip(seqs.step(m, &items).expect("decode")) {
            g.push(bytes(&l.expect("logits")));
        }
    }
    got
}
