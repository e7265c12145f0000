//! Typed launches of the kernels in `kernels.cu`.
//!
//! Each function checks the lengths it is given against the shapes it
//! documents (a short buffer is a [`CudaError::Spec`], never an
//! out-of-bounds launch) and queues one kernel on the device's stream.
//! Buffers may be longer than needed (pool size classes).

use cudarc::driver::{CudaSlice, LaunchConfig, PushKernelArg};
use fak_gguf::GgmlType;

use crate::device::Device;
use crate::error::CudaError;
use crate::weights::{DeviceMatrix, MatrixData};

/// Tokens one matmul warp takes through a weight row (`TOK_TILE` in
/// `kernels.cu`).
pub(crate) const TOK_TILE: usize = 8;
/// Rows (warps) per matmul thread block.
const MATMUL_WARPS: usize = 4;
/// Threads per attention block.
pub(crate) const ATTN_THREADS: u32 = 128;
/// Dynamic shared memory a launch may use without opting in.
pub(crate) const SMEM_MAX: usize = 48 * 1024;

fn need(what: &str, have: usize, want: usize) -> Result<(), CudaError> {
    if have < want {
        return Err(CudaError::Spec(format!(
            "{what}: buffer of {have} elements, {want} needed"
        )));
    }
    Ok(())
}

fn i32_of(what: &str, v: usize) -> Result<i32, CudaError> {
    i32::try_from(v).map_err(|_| CudaError::Spec(format!("{what} = {v} is too large")))
}

fn grid_1d(n: usize, threads: u32) -> Result<LaunchConfig, CudaError> {
    let blocks = u32::try_from(n.div_ceil(threads as usize))
        .map_err(|_| CudaError::Spec(format!("{n} elements in one launch")))?;
    Ok(LaunchConfig {
        grid_dim: (blocks.max(1), 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: 0,
    })
}

/// Quantized activations on the device, in the format of the product that
/// takes them.
///
/// * Q8_0: `qs` `[n_tok, n]` i8, `d` `[n_tok, n / 32]` f32.
/// * Q8_K: `qs` `[n_tok, n]` i8, `d` `[n_tok, n / 256]` f32, `bsums`
///   `[n_tok, n / 16]` i32.
pub(crate) struct Acts {
    pub qs: CudaSlice<i8>,
    pub d: CudaSlice<f32>,
    pub bsums: CudaSlice<i32>,
    /// What the buffers hold now: (format, tokens, row length).
    pub holds: Option<(GgmlType, usize, usize)>,
}

impl Acts {
    /// Buffers for up to `cap` elements (tokens × row length).
    pub fn new(dev: &Device, cap: usize) -> Result<Acts, CudaError> {
        Ok(Acts {
            qs: dev.stream.alloc_zeros(cap.max(256))?,
            d: dev.stream.alloc_zeros(cap.max(256) / 32)?,
            bsums: dev.stream.alloc_zeros(cap.max(256) / 16)?,
            holds: None,
        })
    }
}

/// Quantizes `x` (`[n_tok, n]` f32) into `acts` as `ty` (Q8_0 or Q8_K).
pub(crate) fn quantize(
    dev: &Device,
    ty: GgmlType,
    x: &CudaSlice<f32>,
    n_tok: usize,
    n: usize,
    acts: &mut Acts,
) -> Result<(), CudaError> {
    let total = n_tok * n;
    need("activations", x.len(), total)?;
    need("quantized activations", acts.qs.len(), total)?;
    let (f, block) = match ty {
        GgmlType::Q8_0 => (&dev.k.quantize_q8_0, 32),
        GgmlType::Q8_K => (&dev.k.quantize_q8_k, 256),
        other => return Err(CudaError::Unsupported(format!("{other:?} activations"))),
    };
    if !n.is_multiple_of(block) {
        return Err(CudaError::Spec(format!(
            "rows of {n} are not whole {ty:?} blocks"
        )));
    }
    let n_blocks = total / block;
    let nb = i32_of("blocks", n_blocks)?;
    // 8 warps per block, one warp per quant block.
    let cfg = LaunchConfig {
        grid_dim: (
            u32::try_from(n_blocks.div_ceil(8)).unwrap_or(u32::MAX),
            1,
            1,
        ),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut b = dev.stream.launch_builder(f);
    b.arg(x).arg(&mut acts.qs).arg(&mut acts.d);
    if ty == GgmlType::Q8_K {
        b.arg(&mut acts.bsums);
    }
    b.arg(&nb);
    // SAFETY: the kernel reads `n_blocks * block` floats of `x` and writes
    // as many quants, `n_blocks` scales and `n_blocks * 16` bsums (Q8_K);
    // every buffer was checked (or sized by `Acts::new` for the same
    // capacity) to hold that.
    unsafe { b.launch(cfg) }?;
    acts.holds = Some((ty, n_tok, n));
    Ok(())
}

/// Which matmul variant runs: rows per warp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowsPerWarp {
    /// One for a single token, four for several.
    Auto,
    /// Always one.
    One,
    /// Always four.
    Four,
    /// One row per warp, always the token-tiled kernel (even for one
    /// token; the checks compare it with the one-token matvec).
    Tiled,
}

/// `out[t, r] = W[r, :] · acts[t, :]`: `out` `[n_tok, w.n_out]` f32.
pub(crate) fn matmul(
    dev: &Device,
    w: &DeviceMatrix,
    acts: &Acts,
    n_tok: usize,
    out: &mut CudaSlice<f32>,
    rows_per_warp: RowsPerWarp,
) -> Result<(), CudaError> {
    if acts.holds != Some((w.acts_type(), n_tok, w.n_in)) {
        return Err(CudaError::Spec(format!(
            "{}: activations hold {:?}, the product needs {:?} of {n_tok} × {}",
            w.name,
            acts.holds,
            w.acts_type(),
            w.n_in
        )));
    }
    need(&w.name, out.len(), n_tok * w.n_out)?;
    let rows = i32_of("rows", w.n_out)?;
    let n = i32_of("n_in", w.n_in)?;
    let nt = i32_of("tokens", n_tok)?;
    // One row per warp for single tokens (the most warps for a
    // bandwidth-bound pass), four for batches (each activation load then
    // serves four rows). The same bits either way.
    // A single token takes the one-token matvec variant (the same bits as
    // the tiled ones).
    let single = n_tok == 1 && rows_per_warp != RowsPerWarp::Tiled;
    let rows_per_warp = match rows_per_warp {
        RowsPerWarp::Auto if n_tok > 1 => 4,
        RowsPerWarp::Auto | RowsPerWarp::One | RowsPerWarp::Tiled => 1,
        RowsPerWarp::Four => 4,
    };
    let row_groups = u32::try_from(w.n_out.div_ceil(MATMUL_WARPS * rows_per_warp))
        .map_err(|_| CudaError::Spec(format!("{}: too many rows", w.name)))?;
    let cfg = LaunchConfig {
        grid_dim: (n_tok.div_ceil(TOK_TILE) as u32, row_groups, 1),
        block_dim: ((MATMUL_WARPS * 32) as u32, 1, 1),
        shared_mem_bytes: 0,
    };
    match &w.data {
        MatrixData::Q8_0 { qs, d } => {
            let f = if rows_per_warp == 4 {
                &dev.k.matmul_q8_0_r4
            } else if single {
                &dev.k.matmul_q8_0_t1
            } else {
                &dev.k.matmul_q8_0
            };
            let mut b = dev.stream.launch_builder(f);
            b.arg(qs).arg(d).arg(&acts.qs).arg(&acts.d).arg(out);
            b.arg(&rows).arg(&n).arg(&nt);
            // SAFETY: weights are [rows, n] quants + [rows, n/32] scales
            // (uploaded so), activations hold n_tok rows of n (checked
            // above), `out` holds n_tok * rows floats (checked).
            unsafe { b.launch(cfg) }?;
        }
        MatrixData::Q4K { blocks } => {
            let f = if rows_per_warp == 4 {
                &dev.k.matmul_q4_k_r4
            } else if single {
                &dev.k.matmul_q4_k_t1
            } else {
                &dev.k.matmul_q4_k
            };
            let mut b = dev.stream.launch_builder(f);
            b.arg(blocks)
                .arg(&acts.qs)
                .arg(&acts.d)
                .arg(&acts.bsums)
                .arg(out);
            b.arg(&rows).arg(&n).arg(&nt);
            // SAFETY: as above, for [rows, n/256] Q4_K blocks and Q8_K
            // activations with bsums.
            unsafe { b.launch(cfg) }?;
        }
    }
    Ok(())
}

/// RMSNorm of `n_rows` rows of `n`: `out = (x · scale) · w`.
///
/// * `x`, `out`: `[n_rows, n]` f32; `w`: `[n]` f32.
pub(crate) fn rms_norm(
    dev: &Device,
    x: &CudaSlice<f32>,
    w: &CudaSlice<f32>,
    out: &mut CudaSlice<f32>,
    n_rows: usize,
    n: usize,
    eps: f32,
) -> Result<(), CudaError> {
    need("rms_norm x", x.len(), n_rows * n)?;
    need("rms_norm out", out.len(), n_rows * n)?;
    need("rms_norm w", w.len(), n)?;
    if n_rows == 0 {
        return Ok(());
    }
    let ni = i32_of("n", n)?;
    if 4 * n > SMEM_MAX {
        return Err(CudaError::Unsupported(format!(
            "rows of {n} (RMSNorm keeps a row in 48 KiB of shared memory)"
        )));
    }
    let cfg = LaunchConfig {
        grid_dim: (n_rows as u32, 1, 1),
        block_dim: (128, 1, 1),
        shared_mem_bytes: (4 * n) as u32,
    };
    let mut b = dev.stream.launch_builder(&dev.k.rms_norm);
    b.arg(x).arg(w).arg(out).arg(&ni).arg(&eps);
    // SAFETY: lengths checked above; one block per row.
    unsafe { b.launch(cfg) }?;
    Ok(())
}

/// Row softmax in place: `x` `[n_rows, n]` f32.
pub(crate) fn softmax_rows(
    dev: &Device,
    x: &mut CudaSlice<f32>,
    n_rows: usize,
    n: usize,
) -> Result<(), CudaError> {
    need("softmax x", x.len(), n_rows * n)?;
    if n_rows == 0 {
        return Ok(());
    }
    let ni = i32_of("n", n)?;
    let cfg = LaunchConfig {
        grid_dim: (n_rows as u32, 1, 1),
        block_dim: (32, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut b = dev.stream.launch_builder(&dev.k.softmax_rows);
    b.arg(x).arg(&ni);
    // SAFETY: length checked; one block per row.
    unsafe { b.launch(cfg) }?;
    Ok(())
}

/// The head geometry of a RoPE launch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RopeShape {
    /// Heads per token row.
    pub n_heads: usize,
    /// Elements per head.
    pub head_dim: usize,
    /// Rotated elements per head.
    pub rope_dim: usize,
    /// 0 normal, 1 neox.
    pub style: i32,
}

/// RoPE in place over `x` (`[n_tok, n_heads * head_dim]` f32) with angles
/// `cs` (`[n_tok, rope_dim / 2]` (cos, sin) pairs as 2 f32 each).
pub(crate) fn rope(
    dev: &Device,
    x: &mut CudaSlice<f32>,
    cs: &CudaSlice<f32>,
    n_tok: usize,
    s: RopeShape,
) -> Result<(), CudaError> {
    need("rope x", x.len(), n_tok * s.n_heads * s.head_dim)?;
    need("rope angles", cs.len(), n_tok * s.rope_dim)?;
    if n_tok == 0 {
        return Ok(());
    }
    let cfg = LaunchConfig {
        grid_dim: (n_tok as u32, 1, 1),
        block_dim: (128, 1, 1),
        shared_mem_bytes: 0,
    };
    let (nh, hd, rd) = (
        i32_of("heads", s.n_heads)?,
        i32_of("head_dim", s.head_dim)?,
        i32_of("rope_dim", s.rope_dim)?,
    );
    let mut b = dev.stream.launch_builder(&dev.k.rope);
    b.arg(x).arg(cs).arg(&nh).arg(&hd).arg(&rd).arg(&s.style);
    // SAFETY: lengths checked; the kernel touches n_tok rows.
    unsafe { b.launch(cfg) }?;
    Ok(())
}

/// `gate = silu(gate) · up` over `n` elements.
pub(crate) fn swiglu(
    dev: &Device,
    gate: &mut CudaSlice<f32>,
    up: &CudaSlice<f32>,
    n: usize,
) -> Result<(), CudaError> {
    need("swiglu gate", gate.len(), n)?;
    need("swiglu up", up.len(), n)?;
    let ni = i32_of("n", n)?;
    let mut b = dev.stream.launch_builder(&dev.k.swiglu);
    b.arg(gate).arg(up).arg(&ni);
    // SAFETY: lengths checked; one thread per element, guarded by n.
    unsafe { b.launch(grid_1d(n, 256)?) }?;
    Ok(())
}

/// `x += y` over `n` elements.
pub(crate) fn add_assign(
    dev: &Device,
    x: &mut CudaSlice<f32>,
    y: &CudaSlice<f32>,
    n: usize,
) -> Result<(), CudaError> {
    need("add x", x.len(), n)?;
    need("add y", y.len(), n)?;
    let ni = i32_of("n", n)?;
    let mut b = dev.stream.launch_builder(&dev.k.add_assign);
    b.arg(x).arg(y).arg(&ni);
    // SAFETY: lengths checked; guarded by n.
    unsafe { b.launch(grid_1d(n, 256)?) }?;
    Ok(())
}

/// `x[t, i] += bias[i]`: `x` `[n / m, m]`, `bias` `[m]`.
pub(crate) fn add_bias(
    dev: &Device,
    x: &mut CudaSlice<f32>,
    bias: &CudaSlice<f32>,
    m: usize,
    n: usize,
) -> Result<(), CudaError> {
    need("bias x", x.len(), n)?;
    need("bias", bias.len(), m)?;
    let (mi, ni) = (i32_of("m", m)?, i32_of("n", n)?);
    let mut b = dev.stream.launch_builder(&dev.k.add_bias);
    b.arg(x).arg(bias).arg(&mi).arg(&ni);
    // SAFETY: lengths checked; guarded by n; bias read at i % m < m.
    unsafe { b.launch(grid_1d(n, 256)?) }?;
    Ok(())
}

/// `out[j] = x[idx[j]]` for `n_idx` rows of `d`.
pub(crate) fn gather_rows(
    dev: &Device,
    x: &CudaSlice<f32>,
    idx: &CudaSlice<i32>,
    out: &mut CudaSlice<f32>,
    n_idx: usize,
    d: usize,
) -> Result<(), CudaError> {
    need("gather idx", idx.len(), n_idx)?;
    need("gather out", out.len(), n_idx * d)?;
    if n_idx == 0 {
        return Ok(());
    }
    let di = i32_of("d", d)?;
    let cfg = LaunchConfig {
        grid_dim: (n_idx as u32, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut b = dev.stream.launch_builder(&dev.k.gather_rows);
    b.arg(x).arg(idx).arg(out).arg(&di);
    // SAFETY: the caller uploads indices < x.len() / d (the model's batch
    // indices); out length checked.
    unsafe { b.launch(cfg) }?;
    Ok(())
}

/// Where each token of a launch reads and writes its sequence's rows.
pub(crate) struct TokenSlots<'a> {
    /// `[n_tok]` slot of each token.
    pub slot: &'a CudaSlice<i32>,
    /// `[n_tok]` position of each token.
    pub pos: &'a CudaSlice<i32>,
    /// Tokens.
    pub n_tok: usize,
}

/// The KV geometry of one layer's cache.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KvShape {
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim: usize,
    pub n_ctx: usize,
}

/// Writes `k`, `v` (`[n_tok, kv_dim]` f32) into the caches `kc`, `vc`
/// (`[n_slots, n_ctx, kv_dim]` f16 bits) at each token's slot and position.
/// The caller checked every slot and position against the cache's size.
pub(crate) fn kv_write(
    dev: &Device,
    k: &CudaSlice<f32>,
    v: &CudaSlice<f32>,
    kc: &mut CudaSlice<u16>,
    vc: &mut CudaSlice<u16>,
    toks: &TokenSlots<'_>,
    s: KvShape,
) -> Result<(), CudaError> {
    let kv_dim = s.n_head_kv * s.head_dim;
    need("kv_write k", k.len(), toks.n_tok * kv_dim)?;
    need("kv_write v", v.len(), toks.n_tok * kv_dim)?;
    if toks.n_tok == 0 {
        return Ok(());
    }
    let (kd, nc) = (i32_of("kv_dim", kv_dim)?, i32_of("n_ctx", s.n_ctx)?);
    let cfg = LaunchConfig {
        grid_dim: (toks.n_tok as u32, 1, 1),
        block_dim: (128, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut b = dev.stream.launch_builder(&dev.k.kv_write);
    b.arg(k).arg(v).arg(kc).arg(vc).arg(toks.slot).arg(toks.pos);
    b.arg(&kd).arg(&nc);
    // SAFETY: slots < n_slots and positions < n_ctx were checked by the
    // caller (DeviceKv::check) before upload; lengths checked above.
    unsafe { b.launch(cfg) }?;
    Ok(())
}

/// Keys per attention chunk (`ATTN_CHUNK` in `kernels.cu`).
pub(crate) const ATTN_CHUNK: usize = 128;

/// Floats of attention scratch for `n_tok` tokens: `[n_tok, n_head,
/// chunks, head_dim + 2]`.
pub(crate) fn attention_scratch(n_tok: usize, s: KvShape) -> usize {
    n_tok * s.n_head * s.n_ctx.div_ceil(ATTN_CHUNK) * (s.head_dim + 2)
}

/// Attention of `q` (`[n_tok, n_head * hd]`, roped) over each token's
/// sequence rows 0..=pos in `kc`, `vc`; result in `out` (same shape as q),
/// through `part` (at least [`attention_scratch`] floats).
#[allow(clippy::too_many_arguments)]
pub(crate) fn attention(
    dev: &Device,
    q: &CudaSlice<f32>,
    kc: &CudaSlice<u16>,
    vc: &CudaSlice<u16>,
    toks: &TokenSlots<'_>,
    s: KvShape,
    scale: f32,
    part: &mut CudaSlice<f32>,
    out: &mut CudaSlice<f32>,
) -> Result<(), CudaError> {
    let q_dim = s.n_head * s.head_dim;
    need("attention q", q.len(), toks.n_tok * q_dim)?;
    need("attention out", out.len(), toks.n_tok * q_dim)?;
    need(
        "attention scratch",
        part.len(),
        attention_scratch(toks.n_tok, s),
    )?;
    if toks.n_tok == 0 {
        return Ok(());
    }
    if !s.head_dim.is_multiple_of(32) || s.head_dim > 256 {
        return Err(CudaError::Unsupported(format!(
            "head_dim {} (attention takes multiples of 32 up to 256)",
            s.head_dim
        )));
    }
    let chunks = s.n_ctx.div_ceil(ATTN_CHUNK);
    let (nh, nkv, hd, nc, ch) = (
        i32_of("heads", s.n_head)?,
        i32_of("kv heads", s.n_head_kv)?,
        i32_of("head_dim", s.head_dim)?,
        i32_of("n_ctx", s.n_ctx)?,
        i32_of("chunks", chunks)?,
    );
    let cfg = LaunchConfig {
        grid_dim: (toks.n_tok as u32, s.n_head as u32, chunks as u32),
        block_dim: (ATTN_THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut b = dev.stream.launch_builder(&dev.k.attention_chunks);
    b.arg(q)
        .arg(kc)
        .arg(vc)
        .arg(toks.slot)
        .arg(toks.pos)
        .arg(&mut *part);
    b.arg(&nh).arg(&nkv).arg(&hd).arg(&nc).arg(&scale).arg(&ch);
    // SAFETY: slots/positions checked by the caller (pos < n_ctx, so a
    // token's chunks are < `chunks`); `part` holds every (token, head,
    // chunk) record (checked above).
    unsafe { b.launch(cfg) }?;
    let cfg = LaunchConfig {
        grid_dim: (toks.n_tok as u32, s.n_head as u32, 1),
        block_dim: (ATTN_THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut b = dev.stream.launch_builder(&dev.k.attention_combine);
    b.arg(&*part)
        .arg(toks.pos)
        .arg(out)
        .arg(&nh)
        .arg(&hd)
        .arg(&ch);
    // SAFETY: reads the records the launch above wrote for chunks below
    // each token's count; `out` checked above.
    unsafe { b.launch(cfg) }?;
    Ok(())
}

/// Element-wise conversion kernels (for the checks).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Convert {
    F32ToF16,
    F32ToBf16,
}

/// Converts `x` (`[n]` f32) to 16-bit bits in `y`, then back to f32 in
/// `back` (both kernels of each format).
pub(crate) fn convert_round_trip(
    dev: &Device,
    which: Convert,
    x: &CudaSlice<f32>,
    y: &mut CudaSlice<u16>,
    back: &mut CudaSlice<f32>,
    n: usize,
) -> Result<(), CudaError> {
    need("convert x", x.len(), n)?;
    need("convert y", y.len(), n)?;
    need("convert back", back.len(), n)?;
    let ni = i32_of("n", n)?;
    let (to, from) = match which {
        Convert::F32ToF16 => (&dev.k.f32_to_f16, &dev.k.f16_to_f32),
        Convert::F32ToBf16 => (&dev.k.f32_to_bf16, &dev.k.bf16_to_f32),
    };
    let mut b = dev.stream.launch_builder(to);
    b.arg(x).arg(&mut *y).arg(&ni);
    // SAFETY: lengths checked; guarded by n.
    unsafe { b.launch(grid_1d(n, 256)?) }?;
    let mut b = dev.stream.launch_builder(from);
    b.arg(&*y).arg(back).arg(&ni);
    // SAFETY: as above.
    unsafe { b.launch(grid_1d(n, 256)?) }?;
    Ok(())
}
