//! Weight matrices repacked at load into 8-row groups, and their products
//! with quantized activation rows: Q8_0 and Q5_0 (against Q8_0
//! activations, below), Q4_0, IQ4_NL, Q4_1 and Q5_1 (against Q8_0 and Q8_1, in
//! `q4`, with the float steps of their scalar `vec_dot`s) and Q4_K,
//! Q5_K, Q6_K, Q2_K, Q3_K and IQ4_XS (against Q8_K, in `k`).
//!
//! The plain [`crate::gemm::gemm`] keeps llama.cpp's per-element
//! arithmetic: an 8-lane float accumulator per output element, so every
//! 32-value block costs each element an int → float convert and a scaled
//! accumulate, and the sign / `maddubs` / `madd` chain runs on one row at a
//! time. Here eight weight rows share every instruction instead: the lanes
//! of one register are eight *rows*, not eight slices of one row.
//!
//! ```text
//!   packed group g (weight rows 8g..8g+8), block b (values 32b..32b+32),
//!   "step" k = values 4k..4k+4 of the block, position p = 4·row + i:
//!
//!   Q8_0 (272 B):  8 × f16 scales d_w[0..8]                      16 B
//!                  step 0: row0 q[0..4] row1 q[0..4] .. row7 q[0..4]  32 B
//!                  ...     (8 steps)                         256 B
//!   Q5_0 (176 B):  8 × f16 scales                                16 B
//!                  nibbles: chunk c (0..4), byte p =
//!                    (u[2c][p] & 15) | (u[2c+1][p] & 15) << 4    128 B
//!                  high bits: byte p, bit k = u[k][p] >> 4        32 B
//!                  (u = q + 16, the stored 5-bit value; q = u - 16)
//!
//!   per token t (a Q8_0 activation row), per group g, block b:
//!     s[r]   = Σ_k Σ_i q_w[r][4k+i] · q_x[4k+i]           exact i32, r = lane
//!     acc[r] = acc[r] + (d_w[r] · d_x) · f32(s[r])       three f32 roundings
//!   y[t][8g + r] = acc[r] after the last block (blocks in order, from 0.0)
//! ```
//!
//! The sizes equal the GGUF blocks' (8 × 34 and 8 × 22 bytes), so decode
//! streams no more bytes than before. The float steps are a multiply, a
//! multiply and an add: no fused multiply-add, so the scalar twin
//! ([`packed_gemm_with_isa`] with [`Isa::Scalar`]) computes the very same
//! bits as the AVX2 kernel, and a packed product's output does not depend
//! on the ISA at all. As with [`crate::gemm::gemm`], an output element is a
//! function of its weight row and its token row only: not of the tile, the
//! thread split or the other tokens in the call (batch invariance).
//!
//! The integer block sums are exact, so the result differs from llama.cpp's
//! `ggml_vec_dot_q8_0_q8_0` / `_q5_0_q8_0` only in how the exact block
//! sums are scaled and added (one f32 per block here, eight partial lanes
//! there).
//!
//! The files, one kernel family per folder as `attn/` and `peak/` keep
//! theirs: this one (the API, the scalar twin of every product, the ISA
//! dispatch), `layout.rs` (group geometry), `q4.rs` and `k.rs` (encoders
//! and the scalar steps of Q4_0/Q4_1 and the k-quants), and the ISA twins:
//! `avx2.rs` (Q5_0 and the AVX2 dispatch), `q8_avx2.rs`, `q4_avx2.rs`,
//! `k_avx2.rs`; `vnni.rs` (Q8_0, Q5_0 and the VNNI dispatch),
//! `q4_vnni.rs`, `k_vnni.rs`; with the loads they share in `tiles.rs`.
//! `grid.rs` runs the codebook formats (IQ1_*, IQ2_*, IQ3_*) on the
//! k-quant tiles: it decodes each 8-row group per product into a scratch
//! group block, since those rows stay in their file layout. `wide.rs`
//! does the same for packed Q3_K and Q5_K products of many tokens on AVX2
//! (their quants cost the most to unpack), with the packed blocks' own
//! unpacked steps.

use std::ops::Range;

use crate::blocks::{
    BlockIQ4_NL, BlockIQ4_XS, BlockMXFP4, BlockNVFP4, BlockQ1_0, BlockQ2_K, BlockQ3_K, BlockQ4_0,
    BlockQ4_1, BlockQ4_K, BlockQ5_0, BlockQ5_1, BlockQ5_K, BlockQ6_K, BlockQ8_0, BlockQ8_K,
};
use crate::error::{KernelError, Op, Operand, RowCheck};
use crate::fp::f16_to_f32;
use crate::isa::{isa, Isa};
mod k;
mod layout;
mod nv;
#[cfg(target_arch = "x86_64")]
mod nv_avx2;
mod q1;
#[cfg(target_arch = "x86_64")]
mod q1_avx2;
mod q4;

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
pub(crate) mod grid;
#[cfg(target_arch = "x86_64")]
mod k_avx2;
#[cfg(target_arch = "x86_64")]
mod k_vnni;
#[cfg(target_arch = "x86_64")]
mod q4_avx2;
#[cfg(target_arch = "x86_64")]
mod q4_vnni;
#[cfg(target_arch = "x86_64")]
mod q8_avx2;
#[cfg(target_arch = "x86_64")]
mod tiles;
#[cfg(target_arch = "x86_64")]
mod vnni;
#[cfg(target_arch = "x86_64")]
mod wide;

use crate::pool::ThreadPool;
use layout::{PackedArgs, QK, SCALE_BYTES, STEP, STEPS};
pub use layout::{PackedFormat, GROUP_ROWS};

impl PackedFormat {
    /// Packs row `r` of a group block `dst` from its GGUF block `b`.
    fn pack_row(self, dst: &mut [u8], r: usize, b: &[u8]) {
        match self {
            PackedFormat::Q8_0 => {
                let Ok(b) = <&[u8; BlockQ8_0::BYTES]>::try_from(b) else {
                    return;
                };
                dst[2 * r..2 * r + 2].copy_from_slice(&b[..2]);
                for k in 0..STEPS {
                    let at = SCALE_BYTES + k * GROUP_ROWS * STEP + r * STEP;
                    dst[at..at + STEP].copy_from_slice(&b[2 + k * STEP..2 + (k + 1) * STEP]);
                }
            }
            PackedFormat::Q5_0 => {
                // Straight from the bits: the stored 5-bit value `u = q + 16`
                // is the low nibble of `qs[e % 16]` (high half for e >= 16)
                // with bit `e` of `qh` on top.
                let Ok(b) = <&[u8; BlockQ5_0::BYTES]>::try_from(b) else {
                    return;
                };
                dst[2 * r..2 * r + 2].copy_from_slice(&b[..2]);
                let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
                for e in 0..QK {
                    let (k, p) = (e / STEP, r * STEP + e % STEP);
                    let low = (b[6 + e % 16] >> (4 * (e / 16))) & 15;
                    dst[SCALE_BYTES + (k / 2) * 32 + p] |= low << (4 * (k % 2));
                    dst[SCALE_BYTES + 128 + p] |= (((qh >> e) & 1) as u8) << k;
                }
            }
            PackedFormat::Q4_0 => {
                if let Ok(b) = <&[u8; BlockQ4_0::BYTES]>::try_from(b) {
                    q4::encode_q4_0(dst, r, b);
                }
            }
            PackedFormat::Q4_1 => {
                if let Ok(b) = <&[u8; BlockQ4_1::BYTES]>::try_from(b) {
                    q4::encode_q4_1(dst, r, b);
                }
            }
            PackedFormat::IQ4NL => {
                if let Ok(b) = <&[u8; BlockIQ4_NL::BYTES]>::try_from(b) {
                    q4::encode_iq4_nl(dst, r, b);
                }
            }
            PackedFormat::MXFP4 => {
                if let Ok(b) = <&[u8; BlockMXFP4::BYTES]>::try_from(b) {
                    q4::encode_mxfp4(dst, r, b);
                }
            }
            PackedFormat::Q1_0 => {
                if let Ok(b) = <&[u8; BlockQ1_0::BYTES]>::try_from(b) {
                    q1::encode(dst, r, b);
                }
            }
            PackedFormat::NVFP4 => {
                if let Ok(b) = <&[u8; BlockNVFP4::BYTES]>::try_from(b) {
                    nv::encode(dst, r, b);
                }
            }
            PackedFormat::Q5_1 => {
                if let Ok(b) = <&[u8; BlockQ5_1::BYTES]>::try_from(b) {
                    q4::encode_q5_1(dst, r, b);
                }
            }
            PackedFormat::Q4K => {
                if let Ok(b) = <&[u8; BlockQ4_K::BYTES]>::try_from(b) {
                    k::encode_q4_k(dst, r, b);
                }
            }
            PackedFormat::Q5K => {
                if let Ok(b) = <&[u8; BlockQ5_K::BYTES]>::try_from(b) {
                    k::encode_q5_k(dst, r, b);
                }
            }
            PackedFormat::Q6K => {
                if let Ok(b) = <&[u8; BlockQ6_K::BYTES]>::try_from(b) {
                    k::encode_q6_k(dst, r, b);
                }
            }
            PackedFormat::IQ4XS => {
                if let Ok(b) = <&[u8; BlockIQ4_XS::BYTES]>::try_from(b) {
                    k::encode_iq4_xs(dst, r, b);
                }
            }
            PackedFormat::Q2K => {
                if let Ok(b) = <&[u8; BlockQ2_K::BYTES]>::try_from(b) {
                    k::encode_q2_k(dst, r, b);
                }
            }
            PackedFormat::Q3K => {
                if let Ok(b) = <&[u8; BlockQ3_K::BYTES]>::try_from(b) {
                    k::encode_q3_k(dst, r, b);
                }
            }
        }
    }

    /// Row `r`'s quants in a packed group block (the scalar twin's read).
    fn quants(self, b: &[u8], r: usize) -> [i8; QK] {
        let mut q = [0i8; QK];
        for k in 0..STEPS {
            for i in 0..STEP {
                let p = r * STEP + i;
                q[k * STEP + i] = match self {
                    PackedFormat::Q8_0 => b[SCALE_BYTES + k * GROUP_ROWS * STEP + p] as i8,
                    PackedFormat::Q5_0 => {
                        let low = (b[SCALE_BYTES + (k / 2) * 32 + p] >> (4 * (k % 2))) & 15;
                        let high = (b[SCALE_BYTES + 128 + p] >> k) & 1;
                        (low | high << 4) as i8 - 16
                    }
                    PackedFormat::Q4_0
                    | PackedFormat::Q4_1
                    | PackedFormat::Q5_1
                    | PackedFormat::IQ4NL
                    | PackedFormat::MXFP4
                    | PackedFormat::Q1_0
                    | PackedFormat::NVFP4
                    | PackedFormat::Q4K
                    | PackedFormat::Q5K
                    | PackedFormat::Q6K
                    | PackedFormat::IQ4XS
                    | PackedFormat::Q2K
                    | PackedFormat::Q3K => 0,
                };
            }
        }
        q
    }
}

/// A weight matrix `[rows, n]` of a [`PackedFormat`] in the 8-row group
/// layout.
#[derive(Clone)]
pub struct PackedMatrix {
    format: PackedFormat,
    rows: usize,
    n: usize,
    nb: usize,
    /// `rows / 8` groups of `nb` block images, group-major.
    data: Vec<u8>,
}

impl std::fmt::Debug for PackedMatrix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackedMatrix")
            .field("format", &self.format)
            .field("rows", &self.rows)
            .field("n", &self.n)
            .field("bytes", &self.data.len())
            .finish()
    }
}

impl PackedMatrix {
    /// Repacks `rows` rows of `n` values of `format` (`w`: `[rows, n]`
    /// GGUF blocks, row-major, exactly `rows · n / 32` blocks).
    ///
    /// # Errors
    ///
    /// [`KernelError::PartialBlock`] if `n` is not a whole number of
    /// blocks (32 values, 256 for the k-quants);
    /// [`KernelError::RowGroup`] if `rows` is not a multiple of
    /// [`GROUP_ROWS`]; [`KernelError::Length`] if `w` has the wrong length;
    /// [`KernelError::TooLarge`] if a size overflows.
    pub fn pack(
        format: PackedFormat,
        w: &[u8],
        rows: usize,
        n: usize,
    ) -> Result<PackedMatrix, KernelError> {
        PackedMatrix::pack_inner(None, format, w, rows, n)
    }

    /// [`PackedMatrix::pack`] with the groups spread over `pool`'s threads
    /// (the same bytes; model loading uses it).
    ///
    /// # Errors
    ///
    /// As [`PackedMatrix::pack`].
    pub fn pack_on(
        pool: &ThreadPool,
        format: PackedFormat,
        w: &[u8],
        rows: usize,
        n: usize,
    ) -> Result<PackedMatrix, KernelError> {
        PackedMatrix::pack_inner(Some(pool), format, w, rows, n)
    }

    fn pack_inner(
        pool: Option<&ThreadPool>,
        format: PackedFormat,
        w: &[u8],
        rows: usize,
        n: usize,
    ) -> Result<PackedMatrix, KernelError> {
        let ty = format.ty();
        let check = RowCheck {
            op: Op::Pack,
            ty,
            n,
        };
        let row_bytes = check.bytes()?;
        if !rows.is_multiple_of(GROUP_ROWS) {
            return Err(KernelError::RowGroup {
                rows,
                group: GROUP_ROWS,
            });
        }
        let too_large = KernelError::TooLarge {
            op: Op::Pack,
            ty,
            n,
        };
        let total = row_bytes.checked_mul(rows).ok_or(too_large.clone())?;
        check.expect(Operand::WeightRow, total, w.len())?;
        let (nb, wb) = (n / ty.block_size(), ty.type_size());
        let gb = format.group_block_bytes();
        let per_group = nb.checked_mul(gb).ok_or(too_large.clone())?;
        let size = (rows / GROUP_ROWS)
            .checked_mul(per_group)
            .ok_or(too_large)?;
        let mut data = vec![0u8; size];
        // Fills the group blocks of `chunk`, which starts at group `g0`.
        let fill = |g0: usize, chunk: &mut [u8]| {
            for (i, dst) in chunk.chunks_exact_mut(gb).enumerate() {
                let (g, b) = (g0 + i / nb.max(1), i % nb.max(1));
                for r in 0..GROUP_ROWS {
                    let at = ((g * GROUP_ROWS + r) * nb + b) * wb;
                    format.pack_row(dst, r, w.get(at..at + wb).unwrap_or_default());
                }
            }
        };
        let groups = rows / GROUP_ROWS;
        match pool {
            Some(pool) if pool.n_threads() > 1 && groups > 1 => {
                let per_chunk = groups.div_ceil(pool.n_threads() * 4);
                let filled =
                    pool.run_chunks_dynamic_mut(&mut data, per_chunk * per_group, |c, chunk| {
                        fill(c * per_chunk, chunk);
                    });
                if filled.is_err() {
                    // A worker panicked: redo it all here (a panic again
                    // surfaces on this thread).
                    data.fill(0);
                    fill(0, &mut data);
                }
            }
            _ => fill(0, &mut data),
        }
        Ok(PackedMatrix {
            format,
            rows,
            n,
            nb,
            data,
        })
    }

    /// The packed format.
    pub fn format(&self) -> PackedFormat {
        self.format
    }

    /// Weight rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Values per row.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Bytes held by the packed image.
    pub fn bytes(&self) -> usize {
        self.data.len()
    }

    /// The bytes of groups `groups` (`nb` blocks per group, group-major).
    fn groups(&self, groups: Range<usize>) -> &[u8] {
        let per = self.nb * self.format.group_block_bytes();
        self.data
            .get(groups.start * per..groups.end * per)
            .unwrap_or(&[])
    }
}

/// `out[t * out_stride + (j - rows.start)] = W[j] · a[t]` for weight rows
/// `j in rows` and tokens `t in 0..n_tok`, on the kernels of [`isa()`].
///
/// * `w`: the packed weights `[w.rows(), n]`.
/// * `rows`: a range of weight rows whose ends are multiples of
///   [`GROUP_ROWS`] (or `w.rows()`).
/// * `a`: `n_tok` Q8_0 activation rows of `n` values, contiguous
///   (`[n_tok, n]`, row-major).
/// * `out`: `[n_tok, out_stride]` f32, row-major; only the first
///   `rows.len()` values of each token row are written.
///
/// # Errors
///
/// [`KernelError::RowGroup`] if `rows` is not group-aligned or leaves the
/// matrix; [`KernelError::Length`] if `a` is not exactly `n_tok` rows or
/// `out` is too short (or `out_stride < rows.len()` with several tokens).
pub fn packed_gemm(
    w: &PackedMatrix,
    rows: Range<usize>,
    (a, n_tok): (&[u8], usize),
    out: &mut [f32],
    out_stride: usize,
) -> Result<(), KernelError> {
    run(isa(), w, rows, (a, n_tok), out, out_stride)
}

/// [`packed_gemm`] on the kernels of a given `isa`. Every ISA gives the
/// same bits (see the module doc); for tests and benchmarks.
///
/// # Errors
///
/// [`KernelError::IsaUnavailable`] if this CPU cannot run `isa`; otherwise
/// as [`packed_gemm`].
pub fn packed_gemm_with_isa(
    isa: Isa,
    w: &PackedMatrix,
    rows: Range<usize>,
    (a, n_tok): (&[u8], usize),
    out: &mut [f32],
    out_stride: usize,
) -> Result<(), KernelError> {
    if !isa.is_available() {
        return Err(KernelError::IsaUnavailable { isa });
    }
    run(isa, w, rows, (a, n_tok), out, out_stride)
}

fn run(
    isa: Isa,
    w: &PackedMatrix,
    rows: Range<usize>,
    (a, n_tok): (&[u8], usize),
    out: &mut [f32],
    out_stride: usize,
) -> Result<(), KernelError> {
    if rows.start > rows.end
        || rows.end > w.rows
        || !rows.start.is_multiple_of(GROUP_ROWS)
        || !rows.end.is_multiple_of(GROUP_ROWS)
    {
        return Err(KernelError::RowGroup {
            rows: rows.end.saturating_sub(rows.start),
            group: GROUP_ROWS,
        });
    }
    let aty = w.format.act_ty();
    let check = RowCheck {
        op: Op::VecDot,
        ty: aty,
        n: w.n,
    };
    let row_bytes = check.bytes()?;
    let a_len = row_bytes.checked_mul(n_tok).ok_or(KernelError::TooLarge {
        op: Op::VecDot,
        ty: aty,
        n: w.n,
    })?;
    check.expect(Operand::ActivationRow, a_len, a.len())?;
    let n_rows = rows.len();
    if n_tok == 0 || n_rows == 0 {
        return Ok(());
    }
    let out_check = RowCheck {
        op: Op::VecDot,
        ty: w.format.ty(),
        n: n_rows,
    };
    if n_tok > 1 && out_stride < n_rows {
        return Err(out_check.length(Operand::FloatOutput, n_rows, out_stride));
    }
    let need = (n_tok - 1)
        .checked_mul(out_stride)
        .and_then(|x| x.checked_add(n_rows))
        .ok_or(KernelError::TooLarge {
            op: Op::VecDot,
            ty: w.format.ty(),
            n: n_rows,
        })?;
    if out.len() < need {
        return Err(out_check.length(Operand::FloatOutput, need, out.len()));
    }
    let args = PackedArgs {
        format: w.format,
        nb: w.nb,
        w: w.groups(rows.start / GROUP_ROWS..rows.end / GROUP_ROWS),
        a,
        n_tok,
        out_stride,
    };
    #[cfg(target_arch = "x86_64")]
    if isa == Isa::Avx512 && Isa::Avx512.is_available() {
        // SAFETY: `Isa::Avx512.is_available()` means AVX2, FMA, F16C and
        // AVX-512 F/BW/VL/VNNI; the lengths were checked above.
        unsafe { vnni::gemm(&args, out) };
        return Ok(());
    }
    #[cfg(target_arch = "x86_64")]
    if isa != Isa::Scalar && Isa::Avx2.is_available() {
        // SAFETY: `Isa::Avx2.is_available()` means AVX2, FMA and F16C; the
        // lengths were checked above.
        unsafe { avx2::gemm(&args, out) };
        return Ok(());
    }
    let _ = isa;
    gemm_scalar(&args, out);
    Ok(())
}

/// The scalar product of a format packed whole per GGUF block whose
/// tile keeps ggml's float order (Q1_0, NVFP4): each row's GGUF blocks
/// rebuilt from its group blocks (`decode`) and dotted with every token by
/// the scalar twin, so the tiles' bits are these.
fn rows_rebuilt_scalar<const B: usize>(
    g: &PackedArgs<'_>,
    out: &mut [f32],
    decode: fn(&[u8], usize) -> [u8; B],
) {
    let (ty, gb) = (g.format.ty(), g.format.group_block_bytes());
    let nb = g.nb.max(1);
    let n = nb * ty.block_size();
    let arow = g.format.act_ty().type_size() * n / g.format.act_ty().block_size();
    for (gi, group) in g.w.chunks_exact(nb * gb).enumerate() {
        for r in 0..GROUP_ROWS {
            let row: Vec<u8> = group
                .chunks_exact(gb)
                .flat_map(|blk| decode(blk, r))
                .collect();
            for t in 0..g.n_tok {
                let (Some(a), Some(o)) = (
                    g.a.get(t * arow..(t + 1) * arow),
                    out.get_mut(t * g.out_stride + gi * GROUP_ROWS + r),
                ) else {
                    continue;
                };
                *o = crate::dot::vec_dot(ty, n, &row, a).unwrap_or(0.0);
            }
        }
    }
}

/// The scalar twin: the arithmetic of the module diagram (and of
/// `q4`'s and `k`'s), element by element. Each group block's quants
/// are decoded once for all tokens; an element's accumulator lives in
/// `out` (from 0.0, blocks in order, so the same operations as one running
/// sum). `out` holds at least `(n_tok - 1) · out_stride + rows` values.
fn gemm_scalar(g: &PackedArgs<'_>, out: &mut [f32]) {
    match g.format {
        PackedFormat::Q1_0 => return rows_rebuilt_scalar(g, out, q1::decode),
        PackedFormat::NVFP4 => return rows_rebuilt_scalar(g, out, nv::decode),
        _ => {}
    }
    let gb = g.format.group_block_bytes();
    let ab = g.format.act_ty().type_size();
    let nb = g.nb.max(1);
    let cols = |t: usize, gi: usize| {
        let at = t * g.out_stride + gi * GROUP_ROWS;
        at..at + GROUP_ROWS
    };
    for (gi, group) in g.w.chunks_exact(nb * gb).enumerate() {
        for t in 0..g.n_tok {
            if let Some(o) = out.get_mut(cols(t, gi)) {
                o.fill(0.0);
            }
        }
        for (b, wb) in group.chunks_exact(gb).enumerate() {
            let act = |t: usize| g.a.get((t * g.nb + b) * ab..(t * g.nb + b + 1) * ab);
            match g.format {
                PackedFormat::Q8_0 | PackedFormat::Q5_0 => {
                    let q: [[i8; QK]; GROUP_ROWS] = std::array::from_fn(|r| g.format.quants(wb, r));
                    for t in 0..g.n_tok {
                        let (Some(ab), Some(o)) = (act(t), out.get_mut(cols(t, gi))) else {
                            continue;
                        };
                        let dx = f16_to_f32(u16::from_le_bytes([ab[0], ab[1]]));
                        for (r, acc) in o.iter_mut().enumerate() {
                            let dw = f16_to_f32(u16::from_le_bytes([wb[2 * r], wb[2 * r + 1]]));
                            let s: i32 = q[r]
                                .iter()
                                .zip(&ab[2..])
                                .map(|(&w, &x)| i32::from(w) * i32::from(x as i8))
                                .sum();
                            *acc += (dw * dx) * s as f32;
                        }
                    }
                }
                PackedFormat::Q4_0
                | PackedFormat::Q4_1
                | PackedFormat::Q5_1
                | PackedFormat::IQ4NL
                | PackedFormat::MXFP4 => {
                    let u: [[u8; QK]; GROUP_ROWS] =
                        std::array::from_fn(|r| q4::row_nibbles(g.format, wb, r));
                    for t in 0..g.n_tok {
                        if let (Some(ab), Some(o)) = (act(t), out.get_mut(cols(t, gi))) {
                            q4::block_scalar(g.format, wb, &u, ab, o);
                        }
                    }
                }
                // Handled whole, before this loop (`q1::gemm_scalar`).
                PackedFormat::Q1_0 | PackedFormat::NVFP4 => {}
                PackedFormat::Q4K
                | PackedFormat::Q5K
                | PackedFormat::Q6K
                | PackedFormat::Q2K
                | PackedFormat::Q3K
                | PackedFormat::IQ4XS => {
                    let u: [[u8; layout::QK_K]; GROUP_ROWS] =
                        std::array::from_fn(|r| match g.format {
                            PackedFormat::Q4K => k::row_quants_q4_k(wb, r),
                            PackedFormat::Q5K => k::row_quants_q5_k(wb, r),
                            PackedFormat::IQ4XS => k::row_quants_iq4_xs(wb, r),
                            PackedFormat::Q2K => k::row_quants_q2_k(wb, r),
                            PackedFormat::Q3K => k::row_quants_q3_k(wb, r),
                            _ => k::row_quants_q6_k(wb, r),
                        });
                    for t in 0..g.n_tok {
                        let Some(Ok(ab)) = act(t).map(<&[u8; BlockQ8_K::BYTES]>::try_from) else {
                            continue;
                        };
                        let Some(o) = out.get_mut(cols(t, gi)) else {
                            continue;
                        };
                        let a = BlockQ8_K::from_bytes(ab);
                        for (r, acc) in o.iter_mut().enumerate() {
                            *acc = match g.format {
                                PackedFormat::Q6K => k::element_q6_k(wb, r, &u[r], &a, *acc),
                                PackedFormat::IQ4XS => k::element_iq4_xs(wb, r, &u[r], &a, *acc),
                                PackedFormat::Q2K => k::element_q2_k(wb, r, &u[r], &a, *acc),
                                PackedFormat::Q3K => k::element_q3_k(wb, r, &u[r], &a, *acc),
                                _ => k::element_q4_k(wb, r, &u[r], &a, *acc),
                            };
                        }
                    }
                }
            }
        }
    }
}
