//! Attention kernels: the scores of a group of queries against cached key
//! rows, and the weighted sums of cached value rows, over f16 rows (the
//! default KV cache) or Q8_0 rows (`--kv-type q8_0`), with the Hadamard
//! rotation and the run-time Q8_0 quantizer that write the Q8_0 rows.
//!
//! One attention step of the forward pass (fak-model `attention`), per KV
//! head and key tile:
//!
//! ```text
//!   queries [G, n] ──► QueryGroup ──┐
//!   key rows ────────► KvRows (f16) ├─► dot_f32_f16_rows_group ──► scores [G, rows]
//!                      KvRowsQ8 ────┘   dot_f32_q8_0_rows_group         │
//!                                                    (caller: scale, mask, softmax)
//!                                                                       ▼
//!   value rows ──────► KvRows / KvRowsQ8 ──► axpy_f16_rows_group ◄── weights [G, rows]
//!                                            axpy_q8_0_rows_group ──► out [G, n] += w · v
//!
//!   K/V write (Q8_0 cache): f32 row ─► hadamard_rotate ─► quantize_q8_0_blocks ─► blocks
//! ```
//!
//! Keys stored dims-major ([`KvCols`], dim `d` of row `r` at `d * dstride +
//! r`) take [`dot_f32_f16_cols_group`]: the same scores, bit for bit, with
//! no 8 × 8 transposes (the KV caches store f16 keys this way:
//! fak-model `KvRowBuf::new_keys`).
//!
//! Every kernel `name` runs on the process-wide [`isa()`](crate::isa());
//! `name_with_isa` takes the [`Isa`](crate::Isa); [`scalar`] holds the
//! scalar twins with the same signatures. A dispatcher first clips the call
//! to the rows its buffers hold, then picks a twin:
//!
//! ```text
//!   name(..) ─► name_with_isa(isa(), ..) ─► clip (types: rows_that_fit, per_query_capacity)
//!     ├─ Avx512, available, many queries ─► avx512     (16 query lanes)  ─┐
//!     ├─ Avx2 or Avx512, available ──────► avx2, lanes_avx2, q8_avx2     ├─► the same bits
//!     └─ otherwise ──────────────────────► scalar                        ─┘
//! ```
//!
//! Files, each importing only the ones below it:
//!
//! ```text
//!   mod.rs        this overview; the public names
//!   f16.rs        f16 dispatchers ─────────────► avx2.rs, avx512.rs, scalar.rs
//!   cols.rs       dims-major f16 scores ───────► cols_avx512.rs, cols_avx2.rs, scalar.rs
//!   q8.rs         Q8_0 dispatchers, rotation ──► q8_avx2.rs, scalar.rs
//!   avx512.rs     16-lane scores, value sums ──► lanes_avx2.rs, avx2.rs
//!   q8_avx2.rs    Q8_0 tiles ──────────────────► avx2.rs (8×8 transpose), scalar.rs
//!   cols_avx512.rs 16 rows per register ───────► cols_avx2.rs (Cols)
//!   cols_avx2.rs  8 rows per register ─────────► simd::ops_avx2 (loads)
//!   avx2.rs       8-row tiles, one-row dot/axpy ► lanes_avx2.rs, scalar.rs, simd::ops_avx2 (loads)
//!   lanes_avx2.rs one lane per query ──────────► simd::ops_avx2 (loads)
//!   scalar.rs     the scalar twins ────────────► types.rs
//!   types.rs      QueryGroup, KvRows, KvCols, KvRowsQ8, bounds (a leaf)
//! ```
//!
//! All kernels but the one-row [`dot_f32_f16`] are **bit-identical on every
//! ISA**: the SIMD twins change which row or query a lane works on, never
//! the order of one score's or one output element's operations (attention
//! is where tiny reorderings showed up as changed greedy tokens). Results
//! depend only on the inputs and the ISA, never on slice alignment, thread
//! or batch.
//!
//! Length convention: nothing panics on short slices; rows that do not fit
//! in a buffer are skipped, and paired slices are covered over the
//! shortest, as a `zip` would. These run once per attention position, so
//! no `Result` is built per call.

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod cols;
#[cfg(target_arch = "x86_64")]
mod cols_avx2;
#[cfg(target_arch = "x86_64")]
mod cols_avx512;
mod f16;
#[cfg(target_arch = "x86_64")]
mod lanes_avx2;
mod q8;
#[cfg(target_arch = "x86_64")]
mod q8_avx2;
pub mod scalar;
mod types;

pub use cols::{dot_f32_f16_cols_group, dot_f32_f16_cols_group_with_isa};
pub use f16::{
    axpy_f16, axpy_f16_rows, axpy_f16_rows_group, axpy_f16_rows_group_with_isa,
    axpy_f16_rows_with_isa, axpy_f16_with_isa, dot_f32_f16, dot_f32_f16_rows,
    dot_f32_f16_rows_group, dot_f32_f16_rows_group_with_isa, dot_f32_f16_rows_with_isa,
    dot_f32_f16_with_isa,
};
pub use q8::{
    axpy_q8_0_rows_group, axpy_q8_0_rows_group_with_isa, dot_f32_q8_0_rows_group,
    dot_f32_q8_0_rows_group_with_isa, hadamard_rotate, quantize_q8_0_blocks,
};
pub use types::{KvCols, KvRows, KvRowsQ8, QueryGroup};
