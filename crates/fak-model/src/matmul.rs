//! Matrix products `Y = X · Wᵀ` over block-format weights.
//!
//! The activations `X` (`[n_tok, n_in]`, f32, row-major) are first quantized
//! row by row into the weight type's dot-product format
//! ([`fak_kernels::vec_dot_type`]), as ggml does. The weight rows are cut
//! into chunks of whole register tiles (about four per thread), which the
//! threads of the model's persistent pool ([`fak_kernels::pool::ThreadPool`])
//! claim one at a time; each chunk is one [`fak_kernels::gemm::gemm`] (or
//! packed) call over all tokens. Every output element is
//! bit-identical to one [`fak_kernels::vec_dot`] of its weight and token
//! rows (the tiles and `vec_dot` share one per-element accumulation), so
//! results depend neither on the thread count nor on which other tokens
//! are in the batch. Q8_0, Q5_0, Q4_0, Q4_1, Q4_K, Q5_K and Q6_K weights
//! repacked at load ([`Weight::packed`]) run
//! [`fak_kernels::packed::packed_gemm`] instead, whose elements are
//! likewise functions of their weight and token rows alone (and the same
//! on every ISA; for Q4_0 and Q4_1, the bits of the scalar `vec_dot`).
//!
//! A long batch over a matrix that fits in a core's L2 (every layer
//! matrix of SmolLM2), or any batch of at least 64 tokens per thread,
//! splits by *tokens* instead: each thread claims
//! chunks of whole token tiles and runs every weight row over them,
//! writing its own token rows of `Y`, so no scratch is filled and
//! gathered. Elements are the same bits either way.
//!
//! ```text
//!            W rows (n_out) in ROW_TILE-aligned chunks, claimed in order
//!          ┌────┬────┬────┬────┬─ ─ ─┐
//!  X rows  │ c0 │ c1 │ c2 │ c3 │ ... │   Y[t, j] = dot(W[j, :], X[t, :])
//!  (n_tok) │ t0 │ t1 │ t0 │ t0 │     │   (whichever thread is free next)
//!          └────┴────┴────┴────┴─ ─ ─┘
//! ```

use std::sync::{Mutex, PoisonError};

use fak_gguf::GgmlType;
use fak_kernels::pool::ThreadPool;

use crate::error::{BatchError, ModelError};
use crate::weights::{Model, Weight};

/// Work (in multiply-adds) below which a product runs on the calling thread.
const PARALLEL_MIN_WORK: usize = 1 << 18;

/// Row chunks per pool thread in a product (claimed dynamically).
const CHUNKS_PER_THREAD: usize = 4;

/// Rows below which activations are quantized on the calling thread.
const PARALLEL_MIN_ROWS: usize = 8;

/// Products with at least this many tokens per thread may split by tokens
/// ([`Model::matmul_tokens`]).
const TOKEN_SPLIT_MIN_PER_THREAD: usize = 32;

/// The largest weight matrix (bytes) that splits by tokens: each thread
/// then reads all of it, which costs nothing extra while it fits in the
/// thread's L2 with room for the activations.
const TOKEN_SPLIT_MAX_BYTES: usize = 1 << 20;

/// Products with at least this many tokens per thread split by tokens
/// whatever the matrix size: each thread then reads the whole matrix once
/// per 256-token block, which costs less than filling, zeroing and
/// gathering a `[n_tok, n_out]` scratch (the output head of a batch of
/// 256: 50 MB).
const TOKEN_SPLIT_ANY_PER_THREAD: usize = 64;

/// Token chunks are whole multiples of the widest packed token tile.
const TOKEN_TILE: usize = 8;

/// Thread chunks are whole multiples of this many weight rows: the packed
/// products' group (8 rows) and twice the gemm register tile height, so no
/// chunk splits a group or ends in a narrower remainder tile.
const ROW_TILE: usize = fak_kernels::packed::GROUP_ROWS;

/// The first error of a product's pool chunks (the others are dropped).
struct FirstError(Mutex<Option<ModelError>>);

impl FirstError {
    fn new() -> FirstError {
        FirstError(Mutex::new(None))
    }

    /// Keeps `r`'s error if it is the first.
    fn record(&self, r: Result<(), ModelError>) {
        if let Err(e) = r {
            let mut slot = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            slot.get_or_insert(e);
        }
    }

    /// `Err` with the first recorded error, or `Ok`.
    fn into_result(self) -> Result<(), ModelError> {
        match self.0.into_inner().unwrap_or_else(PoisonError::into_inner) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// Activations quantized once for a given dot-product type.
pub(crate) struct QuantActs {
    ty: GgmlType,
    row_bytes: usize,
    n_in: usize,
    data: Vec<u8>,
}

impl QuantActs {
    pub(crate) fn new() -> QuantActs {
        QuantActs {
            ty: GgmlType::F32,
            row_bytes: 0,
            n_in: 0,
            data: Vec::new(),
        }
    }

    /// Quantizes `x` (`[n_tok, n_in]`) for weights of type `wty`, rows
    /// spread over `pool` for long batches.
    pub(crate) fn quantize(
        &mut self,
        pool: &ThreadPool,
        wty: GgmlType,
        x: &[f32],
        n_in: usize,
        name: &str,
    ) -> Result<(), ModelError> {
        let ty = fak_kernels::vec_dot_type(wty);
        let row_bytes = ty
            .row_bytes(n_in as u64)
            .ok_or_else(|| ModelError::UnsupportedType {
                tensor: name.to_string(),
                ty,
                why: "row length is not a multiple of the activation block size",
            })? as usize;
        let n_tok = x.len() / n_in.max(1);
        self.data.resize(n_tok * row_bytes, 0);
        let threads = pool.n_threads();
        if n_tok < PARALLEL_MIN_ROWS || threads == 1 || n_in == 0 {
            for (src, dst) in x
                .chunks_exact(n_in)
                .zip(self.data.chunks_exact_mut(row_bytes))
            {
                fak_kernels::quantize_acts(ty, src, dst).map_err(|source| ModelError::Kernel {
                    tensor: name.to_string(),
                    source,
                })?;
            }
        } else {
            // Whole rows per chunk; each row's bytes do not depend on the
            // thread that quantizes it.
            let per = n_tok.div_ceil(threads * 2);
            let first_err = FirstError::new();
            pool.run_chunks_mut(&mut self.data, per * row_bytes, |c, chunk| {
                let rows = x.get(c * per * n_in..).unwrap_or_default();
                for (src, dst) in rows
                    .chunks_exact(n_in)
                    .zip(chunk.chunks_exact_mut(row_bytes))
                {
                    first_err.record(fak_kernels::quantize_acts(ty, src, dst).map_err(|source| {
                        ModelError::Kernel {
                            tensor: name.to_string(),
                            source,
                        }
                    }));
                }
            })?;
            first_err.into_result()?;
        }
        self.ty = ty;
        self.row_bytes = row_bytes;
        self.n_in = n_in;
        Ok(())
    }

    /// The quantized rows of tokens `toks` and their count (empty if out
    /// of range).
    fn rows(&self, toks: std::ops::Range<usize>) -> (&[u8], usize) {
        match self
            .data
            .get(toks.start * self.row_bytes..toks.end * self.row_bytes)
        {
            Some(d) => (d, toks.len()),
            None => (&[], 0),
        }
    }

    fn n_tok(&self) -> usize {
        self.data.len().checked_div(self.row_bytes).unwrap_or(0)
    }

    #[cfg(test)]
    fn row(&self, t: usize) -> &[u8] {
        &self.data[t * self.row_bytes..(t + 1) * self.row_bytes]
    }
}

impl Model {
    /// `out[t, j] = Σ_i x[t, i] · W[j, i]` where `x` was quantized into `acts`
    /// for `w`'s type. `out` is `[n_tok, w.n_out]`, row-major.
    ///
    /// On one thread, a single [`fak_kernels::gemm::gemm`] writes `out`
    /// directly. On the pool, chunk `k` (weight rows `k·R..(k+1)·R`, taken
    /// by whichever thread is free) is
    /// computed into its own disjoint part of a scratch buffer, laid out
    /// `[n_tok, R]`, and then copied into its columns of `out` (for one
    /// token the scratch *is* `out`, so nothing is copied).
    pub(crate) fn matmul_q(
        &self,
        w: &Weight,
        acts: &QuantActs,
        out: &mut [f32],
    ) -> Result<(), ModelError> {
        let n_tok = acts.n_tok();
        check_shape(w, acts, out)?;
        if n_tok == 0 || w.n_out == 0 {
            return Ok(());
        }
        let work = n_tok * w.n_out * w.n_in;
        let threads = if work < PARALLEL_MIN_WORK {
            1
        } else {
            self.pool.n_threads().clamp(1, w.n_out)
        };
        if threads == 1 {
            return self.matmul_rows(w, acts.rows(0..n_tok), 0, out, w.n_out);
        }
        if splits_by_tokens(w, n_tok, threads) {
            return self.matmul_tokens(w, acts, out, threads);
        }
        // About four chunks per thread, claimed dynamically: a thread that
        // is slowed down (a shared, noisy machine) takes fewer of them.
        let rows_per_chunk = w
            .n_out
            .div_ceil(threads * CHUNKS_PER_THREAD)
            .next_multiple_of(ROW_TILE);
        // Chunk `c` covers rows `c·rows_per_chunk..` and is `[n_tok, rows]`
        // (stride `rows`); with one token that is exactly `out`'s layout.
        let mut scratch = Vec::new();
        let buf: &mut [f32] = if n_tok == 1 {
            &mut *out
        } else {
            // Zeroed by the allocator (`calloc`: fresh pages for a large
            // buffer), so the pages are first touched by the threads that
            // fill them, in parallel; `resize` zeroed every page here, on
            // one thread, before the product could start.
            scratch = vec![0.0f32; n_tok * w.n_out];
            &mut scratch
        };
        let first_err = FirstError::new();
        self.pool
            .run_chunks_dynamic_mut(buf, rows_per_chunk * n_tok, |c, chunk| {
                let rows = chunk.len() / n_tok;
                let lo = c * rows_per_chunk;
                first_err.record(self.matmul_rows(w, acts.rows(0..n_tok), lo, chunk, rows));
            })?;
        first_err.into_result()?;
        if n_tok > 1 {
            // Token rows of `out` in parallel: row t takes its piece of
            // every chunk.
            let n_out = w.n_out;
            self.rows_mut(out, n_out, |t, dst| {
                gather_row(&scratch, rows_per_chunk, n_tok, t, dst);
            })?;
        }
        Ok(())
    }

    /// Several products over the same quantized activations, as one pool
    /// job: every product's row chunks (as [`Model::matmul_q`] cuts them)
    /// are claimed from one counter, so a decode step forks and joins once
    /// for q, k and v (and once for gate and up) instead of once per
    /// matrix. Each element is the same single `vec_dot` as in
    /// [`Model::matmul_q`], so the results are the same bits.
    ///
    /// Every weight's dot-product type must be `acts`' (the caller groups
    /// them). Products that [`Model::matmul_q`] would split by tokens, or a
    /// one-thread pool, run one after the other through it instead.
    pub(crate) fn matmul_many<const N: usize>(
        &self,
        acts: &QuantActs,
        products: &mut [Product<'_>; N],
    ) -> Result<(), ModelError> {
        let n_tok = acts.n_tok();
        let threads = self.pool.n_threads();
        let fused = threads > 1
            && n_tok > 0
            && products
                .iter()
                .all(|p| p.w.n_out > 0 && !splits_by_tokens(p.w, n_tok, threads));
        if !fused {
            for p in products.iter_mut() {
                self.matmul_q(p.w, acts, p.out)?;
            }
            return Ok(());
        }
        for p in products.iter() {
            check_shape(p.w, acts, p.out)?;
        }
        let rows_per_chunk: [usize; N] = std::array::from_fn(|i| {
            products[i]
                .w
                .n_out
                .div_ceil(threads * CHUNKS_PER_THREAD)
                .next_multiple_of(ROW_TILE)
        });
        let weights: [&Weight; N] = std::array::from_fn(|i| products[i].w);
        let run = |parts: &mut [(&mut [f32], usize); N]| -> Result<(), ModelError> {
            let first_err = FirstError::new();
            self.pool.run_parts_dynamic_mut(parts, |i, c, chunk| {
                let (w, rpc) = (weights[i], rows_per_chunk[i]);
                let rows = chunk.len() / n_tok;
                first_err.record(self.matmul_rows(w, acts.rows(0..n_tok), c * rpc, chunk, rows));
            })?;
            first_err.into_result()
        };
        if n_tok == 1 {
            // One token: each chunk's `[1, rows]` layout is the output's,
            // so nothing is allocated or copied.
            let mut parts = products.each_mut().map(|p| (&mut *p.out, 0));
            for (part, &r) in parts.iter_mut().zip(&rows_per_chunk) {
                part.1 = r;
            }
            return run(&mut parts);
        }
        // Several tokens: chunks go to a scratch per product (`[n_tok, rows]`
        // each), then every token row takes its piece of each chunk.
        let mut scratch: [Vec<f32>; N] =
            std::array::from_fn(|i| vec![0.0f32; n_tok * products[i].w.n_out]);
        let mut parts = scratch.each_mut().map(|b| (b.as_mut_slice(), 0));
        for (part, &r) in parts.iter_mut().zip(&rows_per_chunk) {
            part.1 = r * n_tok;
        }
        run(&mut parts)?;
        for ((p, buf), &rpc) in products.iter_mut().zip(&scratch).zip(&rows_per_chunk) {
            let n_out = p.w.n_out;
            self.rows_mut(p.out, n_out, |t, dst| gather_row(buf, rpc, n_tok, t, dst))?;
        }
        Ok(())
    }

    /// [`Model::matmul_q`] split by tokens: chunks of whole token tiles,
    /// claimed dynamically, each one product over every weight row that
    /// writes its own token rows of `out` (so nothing is gathered). Every
    /// chunk reads the whole matrix: free while it stays in a core's L2
    /// ([`TOKEN_SPLIT_MAX_BYTES`]); a larger matrix is cut into one chunk
    /// per thread, so each thread reads it once.
    fn matmul_tokens(
        &self,
        w: &Weight,
        acts: &QuantActs,
        out: &mut [f32],
        threads: usize,
    ) -> Result<(), ModelError> {
        let n_tok = acts.n_tok();
        let chunks = if w.bytes() <= TOKEN_SPLIT_MAX_BYTES {
            threads * CHUNKS_PER_THREAD
        } else {
            threads
        };
        let per = n_tok.div_ceil(chunks).next_multiple_of(TOKEN_TILE);
        let first_err = FirstError::new();
        self.pool
            .run_chunks_dynamic_mut(out, per * w.n_out, |c, chunk| {
                let t0 = c * per;
                let toks = t0..(t0 + chunk.len() / w.n_out.max(1)).min(n_tok);
                first_err.record(self.matmul_rows(w, acts.rows(toks), 0, chunk, w.n_out));
            })?;
        first_err.into_result()
    }

    /// Computes weight rows `lo..lo + rows` for all tokens into `dst`
    /// (`[n_tok, stride]`, token-row-major; row `lo + j` of token `t` lands
    /// at `dst[t * stride + j]`) with one gemm (or packed) call.
    fn matmul_rows(
        &self,
        w: &Weight,
        (acts, n_tok): (&[u8], usize),
        lo: usize,
        dst: &mut [f32],
        stride: usize,
    ) -> Result<(), ModelError> {
        let rows = stride.min(w.n_out.saturating_sub(lo));
        if let Some(p) = &w.packed {
            return fak_kernels::packed::packed_gemm(p, lo..lo + rows, (acts, n_tok), dst, stride)
                .map_err(|source| ModelError::Kernel {
                    tensor: w.name.clone(),
                    source,
                });
        }
        let wrows = self
            .matrix_bytes(w)
            .get(lo * w.row_bytes()..(lo + rows) * w.row_bytes())
            .ok_or_else(|| {
                ModelError::from(BatchError::WeightRows {
                    tensor: w.name.clone(),
                    lo,
                    hi: lo + rows,
                })
            })?;
        fak_kernels::gemm::gemm(w.ty, w.n_in, wrows, rows, acts, n_tok, dst, stride).map_err(
            |source| ModelError::Kernel {
                tensor: w.name.clone(),
                source,
            },
        )
    }
}

/// One product of [`Model::matmul_many`]: a weight and its output
/// (`[n_tok, w.n_out]`, row-major).
pub(crate) struct Product<'a> {
    /// The weight matrix.
    pub(crate) w: &'a Weight,
    /// Its output rows.
    pub(crate) out: &'a mut [f32],
}

/// `out` must be `[acts.n_tok(), w.n_out]` and `acts` rows of `w.n_in`.
fn check_shape(w: &Weight, acts: &QuantActs, out: &[f32]) -> Result<(), ModelError> {
    let n_tok = acts.n_tok();
    if acts.n_in != w.n_in || out.len() != n_tok * w.n_out {
        return Err(BatchError::Shape {
            tensor: w.name.clone(),
            n_tok,
            n_in: acts.n_in,
            out_len: out.len(),
            n_out: w.n_out,
            w_in: w.n_in,
        }
        .into());
    }
    Ok(())
}

/// Whether a product of `w` over `n_tok` tokens on `threads` threads
/// splits by tokens ([`Model::matmul_tokens`]) rather than by weight rows.
fn splits_by_tokens(w: &Weight, n_tok: usize, threads: usize) -> bool {
    threads > 1
        && fak_kernels::blocks::GridFormat::of(w.ty).is_none()
        && n_tok >= threads * TOKEN_SPLIT_MIN_PER_THREAD
        && (w.bytes() <= TOKEN_SPLIT_MAX_BYTES || n_tok >= threads * TOKEN_SPLIT_ANY_PER_THREAD)
}

/// Copies token `t`'s outputs from the chunked scratch layout (chunk `c`
/// holds weight rows `c·R..` as `[n_tok, rows_c]`) into `dst`, the token's
/// `[n_out]` row of the output.
fn gather_row(scratch: &[f32], rows_per_chunk: usize, n_tok: usize, t: usize, dst: &mut [f32]) {
    for (c, chunk) in scratch.chunks(rows_per_chunk * n_tok).enumerate() {
        let rows = chunk.len() / n_tok;
        let lo = c * rows_per_chunk;
        if let (Some(d), Some(src)) = (
            dst.get_mut(lo..lo + rows),
            chunk.get(t * rows..(t + 1) * rows),
        ) {
            d.copy_from_slice(src);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::{Batch, FlatKv, LogitsWanted, SeqId};

    fn model(threads: usize) -> Model {
        model_file("smollm2-135m-instruct-q4_1.gguf", threads)
    }

    fn model_file(name: &str, threads: usize) -> Model {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../models")
            .join(name);
        assert!(
            p.exists(),
            "{} is missing: run scripts/fetch-models.sh",
            p.display()
        );
        let mut m = Model::load(&p).unwrap();
        m.set_threads(threads).expect("threads");
        assert_eq!(m.threads(), threads);
        m
    }

    /// Deterministic activations in roughly [-1, 1).
    fn acts_f32(n: usize, seed: u32) -> Vec<f32> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(1664525).wrapping_add(1013904223);
                (s >> 8) as f32 / (1u32 << 23) as f32 - 1.0
            })
            .collect()
    }

    /// Every output element, for one and several tokens and any thread
    /// count, is exactly one `vec_dot` of its weight and token rows: the
    /// scalar reference's for a packed matrix (Q4_1: its packed product
    /// keeps the scalar float order on every ISA, including the 5 tokens
    /// of a partial 8-token tile), the dispatched one's for a matrix that
    /// the generic `gemm` runs (F16).
    #[test]
    fn each_element_is_one_vec_dot_for_any_thread_count() {
        for (file, packed) in [
            ("smollm2-135m-instruct-q4_1.gguf", true),
            ("smollm2-135m-instruct-f16.gguf", false),
        ] {
            let m = model_file(file, 1);
            let w = &m.layers[0].w_up;
            assert_eq!(w.packed.is_some(), packed, "{file}");
            let dot = if packed {
                fak_kernels::scalar::vec_dot
            } else {
                fak_kernels::vec_dot
            };
            for n_tok in [1usize, 3, 13] {
                let x = acts_f32(n_tok * w.n_in, 7 + n_tok as u32);
                let mut acts = QuantActs::new();
                acts.quantize(&m.pool, w.ty, &x, w.n_in, &w.name).unwrap();
                let mut want = vec![0.0f32; n_tok * w.n_out];
                for t in 0..n_tok {
                    for j in 0..w.n_out {
                        want[t * w.n_out + j] =
                            dot(w.ty, w.n_in, m.row(w, j), acts.row(t)).unwrap();
                    }
                }
                for threads in [1usize, 2, 3] {
                    let mt = model_file(file, threads);
                    let w = &mt.layers[0].w_up;
                    let mut out = vec![f32::NAN; n_tok * w.n_out];
                    mt.matmul_q(w, &acts, &mut out).unwrap();
                    let same = out
                        .iter()
                        .zip(&want)
                        .all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(same, "{file}: n_tok {n_tok}, threads {threads}");
                }
            }
        }
    }

    /// Q8_0 matrices run packed: every element, for one and several tokens
    /// and any thread count, is the packed product of its weight row and
    /// token row alone (computed here one row group and one token at a
    /// time on the scalar twin), for every matrix shape of the model.
    #[test]
    fn packed_elements_do_not_depend_on_threads_or_batch() {
        use fak_kernels::packed::{packed_gemm_with_isa, GROUP_ROWS};
        let m = model_file("smollm2-135m-instruct-q8_0.gguf", 1);
        let l = &m.layers[0];
        for w in [&l.wq, &l.wk, &l.w_up, &l.w_down, &m.output] {
            let p = w.packed.as_ref().expect("Q8_0 matrices are packed");
            // 100 tokens split the layer matrices by tokens on 2 and 3
            // threads; the output matrix (28 MB) splits by rows.
            let n_tok = if w.bytes() > TOKEN_SPLIT_MAX_BYTES {
                5
            } else {
                100
            };
            assert_eq!(splits_by_tokens(w, n_tok, 2), n_tok == 100, "{}", w.name);
            // From 64 tokens per thread, any matrix splits by tokens.
            assert!(splits_by_tokens(w, 128, 2) && !splits_by_tokens(w, 128, 1));
            let x = acts_f32(n_tok * w.n_in, 3);
            let mut acts = QuantActs::new();
            acts.quantize(&m.pool, w.ty, &x, w.n_in, &w.name).unwrap();
            let mut want = vec![0.0f32; n_tok * w.n_out];
            for t in 0..n_tok {
                for g in (0..w.n_out).step_by(GROUP_ROWS) {
                    let mut y = [0.0f32; GROUP_ROWS];
                    packed_gemm_with_isa(
                        fak_kernels::Isa::Scalar,
                        p,
                        g..g + GROUP_ROWS,
                        (acts.row(t), 1),
                        &mut y,
                        GROUP_ROWS,
                    )
                    .unwrap();
                    want[t * w.n_out + g..t * w.n_out + g + GROUP_ROWS].copy_from_slice(&y);
                }
            }
            for threads in [1usize, 2, 3] {
                let mt = model_file("smollm2-135m-instruct-q8_0.gguf", threads);
                for nt in [1usize, 5, n_tok] {
                    let mut a = QuantActs::new();
                    a.quantize(&mt.pool, w.ty, &x[..nt * w.n_in], w.n_in, &w.name)
                        .unwrap();
                    let mut out = vec![f32::NAN; nt * w.n_out];
                    mt.matmul_q(w, &a, &mut out).unwrap();
                    let same = out
                        .iter()
                        .zip(&want)
                        .all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(same, "{}: n_tok {nt}, threads {threads}", w.name);
                }
            }
        }
    }

    /// The synthetic qwen3 (2 layers) with Q5_K attention, feed-forward
    /// and output matrices.
    fn q5_k_model() -> Model {
        use crate::synth::{writer, Ablation, Matrices, Output, SynthModel};
        let mut spec = SynthModel::Qwen3.spec();
        spec.matrices = Matrices::Uniform(GgmlType::Q5_K);
        spec.output = Output::Separate(GgmlType::Q5_K);
        let bytes = writer(&spec, Ablation::None).unwrap().to_bytes().unwrap();
        let mut m = Model::from_gguf(fak_gguf::GgufFile::from_bytes(bytes).unwrap()).unwrap();
        m.set_threads(2).expect("threads");
        m
    }

    /// Prefill logits of 6 tokens, then one decode step's.
    fn prefill_and_decode(m: &Model) -> Vec<f32> {
        let ids = [1u32, 504, 33, 28, 77, 900];
        let mut kv = FlatKv::for_model(m.config(), 16, 1).expect("kv");
        let mut b = Batch::new();
        b.push_seq(SeqId(0), 0, &ids, LogitsWanted::Yes);
        let mut logits = m.forward(&b, &mut kv).unwrap().data;
        let mut d = Batch::new();
        d.push_seq(SeqId(0), ids.len() as u32, &[42], LogitsWanted::Yes);
        logits.extend(m.forward(&d, &mut kv).unwrap().data);
        logits
    }

    /// Q5_K matrices run packed, and close to the row kernels they
    /// replace: each element of every matrix's product (1 and 13 tokens)
    /// is within 1e-5 of the product's largest magnitude from `vec_dot`
    /// (the worst is 3e-7: another float order), and a forward pass
    /// (prefill, then a decode step) on the packed copies stays within 1%
    /// of the logit range of the same pass with the packed copies dropped.
    ///
    /// That pass differs by 0.47% of the range on the AVX2 and AVX-512 row
    /// kernels (under 0.01% on the scalar ones): a last-bit difference
    /// that moves an activation across a Q8_K rounding edge moves it by a
    /// whole quant step, and the random weights carry that to the logits.
    /// The same model with Q4_K matrices, packed since before Q5_K,
    /// differs by 0.92%; with Q6_K, by 0.05%.
    #[test]
    fn q5_k_matrices_run_packed_close_to_the_row_kernels() {
        let m = q5_k_model();
        let l = &m.layers[0];
        for w in [&l.wq, &l.wk, &l.wo, &l.w_up, &l.w_down, &m.output] {
            assert_eq!(w.ty, GgmlType::Q5_K, "{}", w.name);
            assert!(w.packed.is_some(), "{} is packed", w.name);
            for n_tok in [1usize, 13] {
                let x = acts_f32(n_tok * w.n_in, 5 + n_tok as u32);
                let mut acts = QuantActs::new();
                acts.quantize(&m.pool, w.ty, &x, w.n_in, &w.name).unwrap();
                let mut out = vec![f32::NAN; n_tok * w.n_out];
                m.matmul_q(w, &acts, &mut out).unwrap();
                let big = out.iter().fold(0.0f32, |a, v| a.max(v.abs()));
                for t in 0..n_tok {
                    for j in 0..w.n_out {
                        let want =
                            fak_kernels::vec_dot(w.ty, w.n_in, m.row(w, j), acts.row(t)).unwrap();
                        let got = out[t * w.n_out + j];
                        assert!(
                            (got - want).abs() <= 1e-5 * big,
                            "{}: token {t} row {j}: packed {got} vs vec_dot {want}",
                            w.name
                        );
                    }
                }
            }
        }
        let packed = prefill_and_decode(&m);
        let mut rows = q5_k_model();
        rows.output.packed = None;
        for l in &mut rows.layers {
            for w in [
                &mut l.wq,
                &mut l.wk,
                &mut l.wv,
                &mut l.wo,
                &mut l.w_gate,
                &mut l.w_up,
                &mut l.w_down,
            ] {
                w.packed = None;
            }
        }
        let unpacked = prefill_and_decode(&rows);
        assert_eq!(packed.len(), unpacked.len());
        let (lo, hi) = unpacked
            .iter()
            .fold((f32::MAX, f32::MIN), |(lo, hi), &v| (lo.min(v), hi.max(v)));
        let worst = packed
            .iter()
            .zip(&unpacked)
            .fold(0.0f32, |a, (p, u)| a.max((p - u).abs()));
        assert!(
            worst <= 1e-2 * (hi - lo),
            "packed logits differ by {worst} (range {})",
            hi - lo
        );
    }

    /// Activations quantized on a pool (long batches) are byte-identical to
    /// quantizing row by row on one thread.
    #[test]
    fn parallel_quantization_matches_serial() {
        let (m1, m3) = (model(1), model(3));
        for w in [&m1.layers[0].wq, &m1.layers[0].w_down] {
            for n_tok in [1usize, 8, 9, 37] {
                let x = acts_f32(n_tok * w.n_in, 11 + n_tok as u32);
                let (mut a1, mut a3) = (QuantActs::new(), QuantActs::new());
                a1.quantize(&m1.pool, w.ty, &x, w.n_in, &w.name).unwrap();
                a3.quantize(&m3.pool, w.ty, &x, w.n_in, &w.name).unwrap();
                assert_eq!(a1.n_tok(), n_tok);
                assert!(a1.data == a3.data, "{} n_tok {n_tok}", w.name);
            }
        }
    }

    #[test]
    fn mismatched_shapes_are_errors() {
        let m = model(2);
        let w = &m.layers[0].wq;
        let mut acts = QuantActs::new();
        acts.quantize(&m.pool, w.ty, &vec![0.5f32; 2 * w.n_in], w.n_in, &w.name)
            .unwrap();
        let mut out = vec![0.0f32; w.n_out];
        assert!(matches!(
            m.matmul_q(w, &acts, &mut out),
            Err(ModelError::Batch(_))
        ));
    }

    /// Prefill and decode logits are bit-identical for 1, 2 and 3 threads.
    #[test]
    fn logits_do_not_depend_on_thread_count() {
        let ids = [1u32, 504, 3120, 28, 77, 9000];
        let run = |threads: usize| -> Vec<u32> {
            let m = model(threads);
            let mut kv = FlatKv::for_model(m.config(), 16, 1).expect("kv");
            let mut b = Batch::new();
            b.push_seq(SeqId(0), 0, &ids, LogitsWanted::Yes);
            let mut bits: Vec<u32> = m
                .forward(&b, &mut kv)
                .unwrap()
                .data
                .iter()
                .map(|x| x.to_bits())
                .collect();
            let mut d = Batch::new();
            d.push_seq(SeqId(0), ids.len() as u32, &[42], LogitsWanted::Yes);
            bits.extend(
                m.forward(&d, &mut kv)
                    .unwrap()
                    .data
                    .iter()
                    .map(|x| x.to_bits()),
            );
            bits
        };
        let one = run(1);
        assert_eq!(one.len(), 2 * 49152);
        assert!(one == run(2), "2 threads differ from 1");
        assert!(one == run(3), "3 threads differ from 1");
    }
}
