//! Matrix products `Y = X · Wᵀ` over block-format weights.
//!
//! The activations `X` (`[n_tok, n_in]`, f32, row-major) are first quantized
//! row by row into the weight type's dot-product format
//! ([`fak_kernels::vec_dot_type`]), as ggml does. Then every output element
//! is one [`fak_kernels::vec_dot`] of a weight row with an activation row.
//! The threads of the model's persistent pool
//! ([`fak_kernels::pool::ThreadPool`]) split the weight rows; each element is always computed by the same
//! dot product in the same order, so results do not depend on the thread
//! count or on which other tokens are in the batch.
//!
//! ```text
//!            W rows (n_out) split across threads
//!          ┌────────┬────────┐
//!  X rows  │ thread0│ thread1│   Y[t, j] = dot(W[j, :], X[t, :])
//!  (n_tok) │        │        │
//!          └────────┴────────┘
//! ```

use std::sync::{Mutex, PoisonError};

use fak_gguf::GgmlType;

use crate::error::ModelError;
use crate::weights::{Model, Weight};

/// Work (in multiply-adds) below which a product runs on the calling thread.
const PARALLEL_MIN_WORK: usize = 1 << 18;

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

    /// Quantizes `x` (`[n_tok, n_in]`) for weights of type `wty`.
    pub(crate) fn quantize(
        &mut self,
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
        for (src, dst) in x
            .chunks_exact(n_in)
            .zip(self.data.chunks_exact_mut(row_bytes))
        {
            fak_kernels::quantize_row(ty, src, dst).map_err(|source| ModelError::Kernel {
                tensor: name.to_string(),
                source,
            })?;
        }
        self.ty = ty;
        self.row_bytes = row_bytes;
        self.n_in = n_in;
        Ok(())
    }

    fn n_tok(&self) -> usize {
        self.data.len().checked_div(self.row_bytes).unwrap_or(0)
    }

    fn row(&self, t: usize) -> &[u8] {
        &self.data[t * self.row_bytes..(t + 1) * self.row_bytes]
    }
}

impl Model {
    /// `out[t, j] = Σ_i x[t, i] · W[j, i]` where `x` was quantized into `acts`
    /// for `w`'s type. `out` is `[n_tok, w.n_out]`, row-major.
    ///
    /// Runs on the model's persistent pool: thread `k` computes the weight
    /// rows of chunk `k` into a disjoint part of a `[n_out, n_tok]` column
    /// buffer (for one token that buffer *is* `out`, so nothing is copied).
    pub(crate) fn matmul_q(
        &self,
        w: &Weight,
        acts: &QuantActs,
        out: &mut [f32],
    ) -> Result<(), ModelError> {
        let n_tok = acts.n_tok();
        if acts.n_in != w.n_in || out.len() != n_tok * w.n_out {
            return Err(ModelError::Batch(format!(
                "matmul '{}': activations [{n_tok}, {}] and output of {} values do not fit [{}, {}]",
                w.name,
                acts.n_in,
                out.len(),
                w.n_out,
                w.n_in
            )));
        }
        if n_tok == 0 || w.n_out == 0 {
            return Ok(());
        }
        let work = n_tok * w.n_out * w.n_in;
        let threads = if work < PARALLEL_MIN_WORK {
            1
        } else {
            self.pool.n_threads().clamp(1, w.n_out)
        };
        // With one token, `[n_out, 1]` and `[1, n_out]` are the same layout.
        let mut col_buf = Vec::new();
        let col: &mut [f32] = if n_tok == 1 {
            out
        } else {
            col_buf.resize(n_tok * w.n_out, 0.0f32);
            &mut col_buf
        };
        if threads == 1 {
            self.matmul_rows(w, acts, 0, col)?;
        } else {
            let rows_per_chunk = w.n_out.div_ceil(threads);
            let first_err: Mutex<Option<ModelError>> = Mutex::new(None);
            self.pool
                .run_chunks_mut(col, rows_per_chunk * n_tok, |c, chunk| {
                    if let Err(e) = self.matmul_rows(w, acts, c * rows_per_chunk, chunk) {
                        let mut slot = first_err.lock().unwrap_or_else(PoisonError::into_inner);
                        slot.get_or_insert(e);
                    }
                })?;
            if let Some(e) = first_err
                .into_inner()
                .unwrap_or_else(PoisonError::into_inner)
            {
                return Err(e);
            }
        }
        if n_tok > 1 {
            scatter(&col_buf, n_tok, out);
        }
        Ok(())
    }

    /// Computes weight rows `lo..lo + col.len() / n_tok` for all tokens into
    /// `col` (`[rows, n_tok]`, weight-row-major).
    fn matmul_rows(
        &self,
        w: &Weight,
        acts: &QuantActs,
        lo: usize,
        col: &mut [f32],
    ) -> Result<(), ModelError> {
        let n_tok = acts.n_tok();
        for (j, col_row) in (lo..).zip(col.chunks_exact_mut(n_tok)) {
            let wrow = self.row(w, j);
            for (t, y) in col_row.iter_mut().enumerate() {
                *y = fak_kernels::vec_dot(w.ty, w.n_in, wrow, acts.row(t)).map_err(|source| {
                    ModelError::Kernel {
                        tensor: w.name.clone(),
                        source,
                    }
                })?;
            }
        }
        Ok(())
    }
}

/// Transposes `col` (`[n_out, n_tok]`, weight-row-major) into `out`
/// (`[n_tok, n_out]`, token-row-major); both hold `n_tok * n_out` values.
fn scatter(col: &[f32], n_tok: usize, out: &mut [f32]) {
    for (j, col_row) in col.chunks_exact(n_tok).enumerate() {
        for (out_row, &y) in out.chunks_exact_mut(col.len() / n_tok).zip(col_row) {
            if let Some(o) = out_row.get_mut(j) {
                *o = y;
            }
        }
    }
}
