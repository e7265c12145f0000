//! Per-token row operations of the forward pass (norms, RoPE, SwiGLU,
//! residual adds, activation quantization) spread over the model's pool
//! when a batch has enough tokens. Each row's arithmetic is the same on
//! whichever thread runs it, so results do not depend on the thread count.
//!
//! ```text
//!   out [n, width] ─ chunks of whole rows ─► thread k: f(t, row t) for its rows
//!   n < PAR_MIN_ROWS (decode steps): the calling thread, no dispatch
//! ```

use crate::error::ModelError;
use crate::weights::Model;

/// Rows below which a row operation runs on the calling thread (the pool
/// dispatch and barrier cost more than the work).
const PAR_MIN_ROWS: usize = 8;

/// Chunks per thread (shorter chunks even out rows of unequal cost).
const CHUNKS_PER_THREAD: usize = 2;

impl Model {
    /// Calls `f(t, row)` for every row `t` of `out` (`[n, width]`,
    /// row-major), on the pool when `n >= PAR_MIN_ROWS`.
    pub(crate) fn rows_mut<T, F>(&self, out: &mut [T], width: usize, f: F) -> Result<(), ModelError>
    where
        T: Send,
        F: Fn(usize, &mut [T]) + Sync,
    {
        if width == 0 {
            return Ok(());
        }
        let n = out.len() / width;
        let threads = self.pool.n_threads();
        if n < PAR_MIN_ROWS || threads == 1 {
            for (t, row) in out.chunks_exact_mut(width).enumerate() {
                f(t, row);
            }
            return Ok(());
        }
        let per = n.div_ceil(threads * CHUNKS_PER_THREAD);
        self.pool
            .run_chunks_mut(&mut out[..n * width], per * width, |c, chunk| {
                for (i, row) in chunk.chunks_exact_mut(width).enumerate() {
                    f(c * per + i, row);
                }
            })?;
        Ok(())
    }
}
