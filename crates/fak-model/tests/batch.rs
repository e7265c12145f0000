//! Ragged batches: a sequence's logits do not depend on what else is in the
//! batch, nor on how its prompt was split into chunks. Also for gemma3,
//! past its 512-position sliding window.

use std::path::Path;

use fak_model::{Batch, FlatKv, LogitsWanted, Model, SeqId};

fn model() -> Model {
    model_file("smollm2-135m-instruct-q8_0.gguf")
}

fn model_file(name: &str) -> Model {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../models")
        .join(name);
    assert!(
        p.exists(),
        "{} is missing: run scripts/fetch-models.sh",
        p.display()
    );
    let mut m = Model::load(&p).expect("load");
    m.set_threads(2).expect("threads");
    m
}

/// Deterministic token ids below `n_vocab`.
fn lcg_ids(seed: u64, n: usize, n_vocab: usize) -> Vec<u32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 33) % n_vocab as u64) as u32
        })
        .collect()
}

fn bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Logits (bytes) after prefilling `ids` alone in one batch, then decoding
/// `extra` one token at a time.
fn alone(m: &Model, ids: &[u32], extra: &[u32]) -> Vec<Vec<u8>> {
    let mut kv = FlatKv::for_model(m.config(), ids.len() + extra.len(), 1).expect("kv");
    let mut b = Batch::new();
    b.push_seq(SeqId(0), 0, ids, LogitsWanted::Yes);
    let mut out = vec![bytes(m.forward(&b, &mut kv).expect("fwd").row(0))];
    for (i, &t) in extra.iter().enumerate() {
        let mut b = Batch::new();
        b.push_seq(SeqId(0), (ids.len() + i) as u32, &[t], LogitsWanted::Yes);
        out.push(bytes(m.forward(&b, &mut kv).expect("fwd").row(0)));
    }
    out
}

#[test]
fn logits_are_batch_invariant() {
    check_batch_invariance(&model());
}

/// The same for the synthetic qwen3 (q/k norm) and llama 3.2 (rope
/// factors) files of `fak_model::synth`.
#[test]
fn synthetic_qwen3_and_llama32_are_batch_invariant() {
    use fak_model::synth::{self, Ablation, SynthModel};
    for sm in SynthModel::ALL {
        let bytes = synth::bytes(sm, Ablation::None).expect("synthetic file");
        let file = fak_gguf::GgufFile::from_bytes(bytes).expect("parses");
        let mut m = Model::from_gguf(file).expect("loads");
        m.set_threads(2).expect("threads");
        check_batch_invariance(&m);
    }
}

fn check_batch_invariance(m: &Model) {
    let nv = m.config().n_vocab;
    let prompts: Vec<Vec<u32>> = (0..3)
        .map(|i| lcg_ids(100 + i, 5 + 3 * i as usize, nv))
        .collect();
    let extras: Vec<Vec<u32>> = (0..3).map(|i| lcg_ids(200 + i, 3, nv)).collect();
    let want: Vec<Vec<Vec<u8>>> = prompts
        .iter()
        .zip(&extras)
        .map(|(p, e)| alone(m, p, e))
        .collect();

    // All three together: prefill of all in one ragged batch, then decode
    // steps of all three in one batch, with sequence 1's prefill chunked.
    let mut kv = FlatKv::for_model(m.config(), 32, 3).expect("kv");
    let mut got: Vec<Vec<Vec<u8>>> = vec![Vec::new(); 3];
    let mut b = Batch::new();
    b.push_seq(SeqId(0), 0, &prompts[0], LogitsWanted::Yes);
    b.push_seq(SeqId(1), 0, &prompts[1][..4], LogitsWanted::No);
    b.push_seq(SeqId(2), 0, &prompts[2], LogitsWanted::Yes);
    let l = m.forward(&b, &mut kv).expect("fwd");
    got[0].push(bytes(l.row(0)));
    got[2].push(bytes(l.row(1)));
    let mut b = Batch::new();
    b.push_seq(SeqId(1), 4, &prompts[1][4..], LogitsWanted::Yes);
    got[1].push(bytes(m.forward(&b, &mut kv).expect("fwd").row(0)));
    #[allow(clippy::needless_range_loop)]
    for step in 0..3 {
        let mut b = Batch::new();
        for s in [2usize, 0, 1] {
            b.push_seq(
                SeqId(s as u32),
                (prompts[s].len() + step) as u32,
                &[extras[s][step]],
                LogitsWanted::Yes,
            );
        }
        let l = m.forward(&b, &mut kv).expect("fwd");
        for (row, s) in [2usize, 0, 1].into_iter().enumerate() {
            got[s].push(bytes(l.row(row)));
        }
    }
    for s in 0..3 {
        assert_eq!(got[s].len(), want[s].len());
        for (step, (g, w)) in got[s].iter().zip(&want[s]).enumerate() {
            assert!(
                g == w,
                "sequence {s} step {step}: logits differ from running alone"
            );
        }
    }
}

/// One token over a long context runs its KV heads side by side on the
/// pool's threads (from 256 positions); beside another sequence, its
/// attention runs all heads on one thread. The logits are the same bytes.
#[test]
fn a_long_context_token_alone_equals_it_in_a_batch() {
    let m = model();
    assert!(m.config().n_head_kv >= 2, "the split needs two KV heads");
    let nv = m.config().n_vocab;
    let prompt = lcg_ids(7, 300, nv);
    let extra = lcg_ids(8, 2, nv);
    let other = lcg_ids(9, 10, nv);
    let want = alone(&m, &prompt, &extra);
    let mut kv = FlatKv::for_model(m.config(), prompt.len() + extra.len(), 2).expect("kv");
    let mut b = Batch::new();
    b.push_seq(SeqId(0), 0, &prompt, LogitsWanted::Yes);
    b.push_seq(SeqId(1), 0, &other, LogitsWanted::Yes);
    let mut got = vec![bytes(m.forward(&b, &mut kv).expect("fwd").row(0))];
    for (i, &t) in extra.iter().enumerate() {
        let mut b = Batch::new();
        b.push_seq(
            SeqId(1),
            (other.len() + i) as u32,
            &[other[i]],
            LogitsWanted::Yes,
        );
        b.push_seq(SeqId(0), (prompt.len() + i) as u32, &[t], LogitsWanted::Yes);
        got.push(bytes(m.forward(&b, &mut kv).expect("fwd").row(1)));
    }
    for (step, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(g == w, "step {step}: logits differ from running alone");
    }
}

#[test]
fn bad_batches_are_errors() {
    let m = model();
    let mut kv = FlatKv::for_model(m.config(), 8, 1).expect("kv");
    let mut b = Batch::new();
    b.push_seq(SeqId(0), 1, &[1, 2], LogitsWanted::Yes);
    assert!(m.forward(&b, &mut kv).is_err(), "gap at position 0");
    let mut b = Batch::new();
    b.push_seq(SeqId(0), 0, &[u32::MAX], LogitsWanted::Yes);
    assert!(m.forward(&b, &mut kv).is_err(), "token id out of range");
    let mut b = Batch::new();
    b.push_seq(SeqId(5), 0, &[1], LogitsWanted::Yes);
    assert!(m.forward(&b, &mut kv).is_err(), "unknown sequence");
    let mut b = Batch::new();
    b.push_seq(SeqId(0), 0, &[1; 9], LogitsWanted::Yes);
    assert!(m.forward(&b, &mut kv).is_err(), "context overflow");
}

/// Gemma 3 past its window: three sequences (530, 20 and 600 tokens, the
/// long ones split into chunks that straddle position 512) prefilled and
/// decoded together give the bytes each gives alone. Decode steps of the
/// three share attention chunks (2 threads: two sequences per chunk), so
/// the chunk's earliest window start differs from a sequence's own.
#[test]
fn gemma3_logits_are_batch_invariant_past_the_window() {
    let m = model_file("gemma-3-270m-q4_k_m.gguf");
    assert_eq!(m.config().sliding_window(), Some(512));
    let nv = m.config().n_vocab;
    let lens = [530usize, 20, 600];
    let prompts: Vec<Vec<u32>> = lens
        .iter()
        .enumerate()
        .map(|(i, &n)| lcg_ids(300 + i as u64, n, nv))
        .collect();
    let extras: Vec<Vec<u32>> = (0..3).map(|i| lcg_ids(400 + i, 3, nv)).collect();
    let want: Vec<Vec<Vec<u8>>> = prompts
        .iter()
        .zip(&extras)
        .map(|(p, e)| alone(&m, p, e))
        .collect();

    let mut kv = FlatKv::for_model(m.config(), 640, 3).expect("kv");
    let mut got: Vec<Vec<Vec<u8>>> = vec![Vec::new(); 3];
    let mut b = Batch::new();
    b.push_seq(SeqId(0), 0, &prompts[0][..300], LogitsWanted::No);
    b.push_seq(SeqId(1), 0, &prompts[1], LogitsWanted::Yes);
    b.push_seq(SeqId(2), 0, &prompts[2][..505], LogitsWanted::No);
    let l = m.forward(&b, &mut kv).expect("fwd");
    got[1].push(bytes(l.row(0)));
    let mut b = Batch::new();
    b.push_seq(SeqId(2), 505, &prompts[2][505..], LogitsWanted::Yes);
    b.push_seq(SeqId(0), 300, &prompts[0][300..], LogitsWanted::Yes);
    let l = m.forward(&b, &mut kv).expect("fwd");
    got[2].push(bytes(l.row(0)));
    got[0].push(bytes(l.row(1)));
    #[allow(clippy::needless_range_loop)]
    for step in 0..3 {
        let mut b = Batch::new();
        for s in [0usize, 2, 1] {
            b.push_seq(
                SeqId(s as u32),
                (prompts[s].len() + step) as u32,
                &[extras[s][step]],
                LogitsWanted::Yes,
            );
        }
        let l = m.forward(&b, &mut kv).expect("fwd");
        for (row, s) in [0usize, 2, 1].into_iter().enumerate() {
            got[s].push(bytes(l.row(row)));
        }
    }
    for s in 0..3 {
        assert_eq!(got[s].len(), want[s].len());
        for (step, (g, w)) in got[s].iter().zip(&want[s]).enumerate() {
            assert!(
                g == w,
                "gemma3 sequence {s} step {step}: logits differ from running alone"
            );
        }
    }
}

/// The window is applied: past position 512, the logits of a gemma3
/// sequence differ from those of the same model with every layer global
/// (`WindowMode::Full`), and are equal before it.
#[test]
fn gemma3_window_changes_logits_only_past_the_window() {
    let mut m = model_file("gemma-3-270m-q4_k_m.gguf");
    let nv = m.config().n_vocab;
    let ids = lcg_ids(77, 520, nv);
    let at = |m: &Model, n: usize| alone(m, &ids[..n], &[])[0].clone();
    let (short, long) = (at(&m, 500), at(&m, 520));
    m.set_window_mode(fak_model::WindowMode::Full);
    assert!(at(&m, 500) == short, "inside the window nothing changes");
    assert!(
        at(&m, 520) != long,
        "past the window local layers read less"
    );
}

/// Every token's logits from feeding `ids` alone in chunks of `chunk`
/// tokens (logits for every token), as bytes.
fn alone_chunked(m: &Model, ids: &[u32], chunk: usize) -> Vec<Vec<u8>> {
    let mut kv = FlatKv::for_model(m.config(), ids.len(), 1).expect("kv");
    let mut out = Vec::new();
    for (c, part) in ids.chunks(chunk).enumerate() {
        let b = all_logits(&[(SeqId(0), (c * chunk) as u32, part)]);
        let l = m.forward(&b, &mut kv).expect("fwd");
        out.extend((0..part.len()).map(|i| bytes(l.row(i))));
    }
    out
}

/// A batch of `(seq, start_pos, ids)` runs asking for every token's logits.
fn all_logits(runs: &[(SeqId, u32, &[u32])]) -> Batch {
    let mut b = Batch::new();
    for &(seq, start, ids) in runs {
        for (i, &token) in ids.iter().enumerate() {
            b.tokens.push(fak_model::BatchToken {
                token,
                pos: start + i as u32,
                seq,
                logits: LogitsWanted::Yes,
            });
        }
    }
    b
}

/// Batches big enough to take the token-split matrix paths on 2 threads:
/// 170 tokens (85 per thread, at least 64: every matrix splits by tokens,
/// the 28 MB output matrix included, since all tokens want logits) and a
/// ragged batch of 300 tokens over three sequences (above 256). Their
/// logits must be the bytes of the same tokens fed 5 at a time (every
/// product split by weight rows, attention in other chunks).
#[test]
fn logits_are_batch_invariant_on_token_split_paths() {
    let m = model();
    let nv = m.config().n_vocab;
    let lens = [170usize, 100, 30];
    let prompts: Vec<Vec<u32>> = lens
        .iter()
        .enumerate()
        .map(|(i, &n)| lcg_ids(300 + i as u64, n, nv))
        .collect();
    let want: Vec<Vec<Vec<u8>>> = prompts.iter().map(|p| alone_chunked(&m, p, 5)).collect();

    // One sequence, 170 tokens in one batch.
    let got = alone_chunked(&m, &prompts[0], prompts[0].len());
    for (i, (g, w)) in got.iter().zip(&want[0]).enumerate() {
        assert!(
            g == w,
            "170-token batch: token {i}'s logits differ from 5-token chunks"
        );
    }

    // Three sequences, 300 tokens in one ragged batch, interleaved order.
    let mut kv = FlatKv::for_model(m.config(), 170, 3).expect("kv");
    let b = all_logits(&[
        (SeqId(1), 0, &prompts[1]),
        (SeqId(0), 0, &prompts[0]),
        (SeqId(2), 0, &prompts[2]),
    ]);
    assert!(b.len() > 256);
    let l = m.forward(&b, &mut kv).expect("fwd");
    let mut row = 0;
    for s in [1usize, 0, 2] {
        for (i, w) in want[s].iter().enumerate() {
            assert!(
                &bytes(l.row(row)) == w,
                "300-token batch: sequence {s} token {i}'s logits differ from 5-token chunks"
            );
            row += 1;
        }
    }
}
