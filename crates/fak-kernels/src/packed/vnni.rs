//! AVX-512 VNNI kernels of [`crate::packed`]: the packed layouts and the
//! float steps of [`super::avx2`] and [`super::k_avx2`],
//! with each step's products summed by one `vpdpbusd` (four `u8 · i8`
//! products added into an `i32` lane, no `i16` stage) instead of the AVX2
//! chains of `sign`, `maddubs` and `madd`.
//!
//! `vpdpbusd` multiplies unsigned by signed bytes. Q8_0 and Q5_0 weights
//! are signed, and so are their Q8_0 activations: the activation quants
//! are made unsigned by adding 128 (`x ^ 0x80` as a byte), and the excess
//! comes off in integers once per block:
//!
//! ```text
//!   per block b:
//!     per token t:  xu[t] = x[t] + 128 (32 bytes, once per block)
//!     per step k (values 4k..4k+4):
//!       w      = 8 rows × 4 signed quants             (decoded once per tile)
//!       c     += dpbusd(128, w)           = 128 · Σ w     (shared by the tile)
//!       per token t: s[t] += dpbusd(xu[t][4k..4k+4] in every lane, w)
//!     per token t:  s[t] - c = Σ w · x                   exact i32
//!                   acc[t] = acc[t] + (d_w · d_x[t]) · f32(s[t] - c)
//! ```
//!
//! A lane's sum stays below `2^20` in size (32 products of at most
//! `255 · 128`), so every integer step is exact, for any `i8` weight and
//! activation, `-128` included. The k-quants' weight quants are already
//! unsigned (see [`super::k_avx2`]), so their steps need no bias.
//! The float steps are the AVX2 kernels', so every output has the scalar
//! twin's bits. With AVX-512VL's 32 vector registers a tile holds eight
//! tokens. The Q8_0 and Q5_0 tiles run two groups at once, `g` in the low
//! and `g + 1` in the high half of 512-bit registers ([`tile_prepared`]);
//! so do the k-quant tiles (`k_vnni`) and the 4-bit ones (`q4_vnni`).

use std::arch::x86_64::*;

use super::avx2::Q5;
use super::layout::{PackedArgs, PackedFormat, Q5_0_BYTES, Q8_0_BYTES, SCALE_BYTES, STEPS};
use super::tiles::{
    act_rows, blocks_at, bytes32, load, prefetch_ahead, quad, scale_block, store, store16, Weights,
    AB, VNNI_TILE as TILE,
};

/// A 32-value format whose steps decode to signed quants (against Q8_0
/// activations).
trait SignedSteps<const B: usize> {
    /// Step `k`'s signed quants (8 rows × 4).
    ///
    /// # Safety
    ///
    /// The CPU must support AVX2.
    unsafe fn step(b: &[u8; B], k: usize) -> __m256i;
}

struct Q8;

impl SignedSteps<Q8_0_BYTES> for Q8 {
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn step(b: &[u8; Q8_0_BYTES], k: usize) -> __m256i {
        load(bytes32(b, SCALE_BYTES + 32 * k))
    }
}

struct Q5s;

impl SignedSteps<Q5_0_BYTES> for Q5s {
    /// The stored values minus 16.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn step(b: &[u8; Q5_0_BYTES], k: usize) -> __m256i {
        _mm256_sub_epi8(Q5::unsigned_step(b, k), _mm256_set1_epi8(16))
    }
}

/// One group (`w`: its blocks) times `T` activation rows; returns the 8
/// row results of each token (the module diagram). The tokens after the
/// last whole [`TILE`] run it as one narrower tile ([`rest`]).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn tile_signed<S: SignedSteps<B>, const B: usize, const T: usize>(
    w: &[[u8; B]],
    a: [&[[u8; AB]]; T],
) -> [__m256; T] {
    let bias = _mm256_set1_epi8(i8::MIN);
    let mut acc = [_mm256_setzero_ps(); T];
    let mut xu = [[0u8; 32]; T];
    for (b, wb) in w.iter().enumerate() {
        // The narrow tiles sweep the weights once, after any whole tiles
        // have left the cache: they stream, so they ask ahead.
        prefetch_ahead(wb);
        let ab = blocks_at(&a, b);
        for t in 0..T {
            let x = _mm256_xor_si256(load(bytes32(ab[t], 2)), bias);
            // SAFETY: `xu[t]` is 32 writable bytes; `storeu` needs no
            // alignment.
            unsafe { _mm256_storeu_si256(xu[t].as_mut_ptr().cast(), x) };
        }
        // Keeps `xu` in memory: each step then broadcasts its quads with a
        // load (`vpbroadcastd ymm, m32`) instead of two shuffles on the
        // one shuffle port.
        std::hint::black_box(&mut xu);
        let mut corr = _mm256_setzero_si256();
        let mut sumi = [_mm256_setzero_si256(); T];
        for k in 0..STEPS {
            // SAFETY: this function runs with AVX2 enabled.
            let wq = unsafe { S::step(wb, k) };
            corr = _mm256_dpbusd_epi32(corr, bias, wq);
            for t in 0..T {
                let x = _mm256_set1_epi32(quad::<0, 32>(&xu[t], k));
                sumi[t] = _mm256_dpbusd_epi32(sumi[t], x, wq);
            }
        }
        for s in sumi.iter_mut() {
            *s = _mm256_sub_epi32(*s, corr);
        }
        scale_block(wb, ab, sumi, &mut acc);
    }
    acc
}

/// A token block's activations, prepared once for every group: block `b`
/// of token `t` at `t * nb + b`.
#[derive(Default)]
struct Prepared {
    /// The quants plus 128 (`x ^ 0x80`).
    xu: Vec<[u8; 32]>,
    /// The block scales as f32.
    dx: Vec<f32>,
}

thread_local! {
    /// Each thread's [`Prepared`] buffers: they grow to the largest block
    /// seen and are reused, so a warm product allocates nothing.
    static PREPARED: std::cell::RefCell<Prepared> = std::cell::RefCell::default();
}

/// [`tile_signed`] for [`TILE`] tokens whose activations are [`Prepared`]
/// (`xu`, `dx`: `TILE · nb` entries, token-major), over two neighbouring
/// groups at once: each step's weights of groups `w[0]` and `w[1]` share
/// one 512-bit `vpdpbusd` per token (this CPU class retires as many 512-bit
/// as 256-bit ones per cycle, so a lone group passed twice costs what a
/// 256-bit tile of it would). Lane `r < 8` is row `r` of `w[0]`, lane
/// `8 + r` row `r` of `w[1]`; every lane's integer and float steps are
/// [`tile_signed`]'s, without re-biasing each token's block for every
/// group.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn tile_prepared<S: SignedSteps<B>, const B: usize>(
    w: [&[[u8; B]]; 2],
    xu: &[[u8; 32]],
    dx: &[f32],
    weights: Weights,
) -> [__m512; TILE] {
    let nb = w[0].len().min(w[1].len());
    let bias = _mm512_set1_epi8(i8::MIN);
    let mut acc = [_mm512_setzero_ps(); TILE];
    for (b, (w0, w1)) in w[0].iter().zip(w[1]).enumerate() {
        if weights == Weights::Streamed {
            prefetch_ahead(w0);
            prefetch_ahead(w1);
        }
        let x: [&[u8; 32]; TILE] = std::array::from_fn(|t| xu.get(t * nb + b).unwrap_or(&[0; 32]));
        let mut corr = _mm512_setzero_si512();
        let mut sumi = [_mm512_setzero_si512(); TILE];
        for k in 0..STEPS {
            // SAFETY: this function runs with AVX2 enabled.
            let (lo, hi) = unsafe { (S::step(w0, k), S::step(w1, k)) };
            let wq = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi);
            corr = _mm512_dpbusd_epi32(corr, bias, wq);
            for t in 0..TILE {
                let q = _mm512_set1_epi32(quad::<0, 32>(x[t], k));
                sumi[t] = _mm512_dpbusd_epi32(sumi[t], q, wq);
            }
        }
        let mut scales = [0u8; 2 * SCALE_BYTES];
        scales[..SCALE_BYTES].copy_from_slice(&w0[..SCALE_BYTES]);
        scales[SCALE_BYTES..].copy_from_slice(&w1[..SCALE_BYTES]);
        // SAFETY: 32 readable bytes; `loadu` needs no alignment.
        let dw = _mm512_cvtph_ps(unsafe { _mm256_loadu_si256(scales.as_ptr().cast()) });
        for t in 0..TILE {
            let d = _mm512_mul_ps(
                dw,
                _mm512_set1_ps(dx.get(t * nb + b).copied().unwrap_or(0.0)),
            );
            let s = _mm512_cvtepi32_ps(_mm512_sub_epi32(sumi[t], corr));
            acc[t] = _mm512_add_ps(acc[t], _mm512_mul_ps(d, s));
        }
    }
    acc
}

/// Tokens whose prepared activations [`gemm_signed`] holds at once (at
/// most 256 · 36 bytes per block of a row: under 450 KiB for rows of 1,536
/// values, so they stay in L2 while the weights stream past).
const TOKEN_BLOCK: usize = 256;

/// The signed formats' loop. Blocks of up to [`TOKEN_BLOCK`] tokens are
/// prepared once ([`Prepared`]: biased quants, f32 scales); then every
/// group runs over the block's 8-token tiles, so the weights are read once
/// per token block and each activation block is biased once, not once per
/// group. Tokens past the last whole tile run [`tile_signed`] one at a
/// time.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn gemm_signed<S: SignedSteps<B>, const B: usize>(g: &PackedArgs<'_>, out: &mut [f32]) {
    let nb = g.nb.max(1);
    let (blocks, _) = g.w.as_chunks::<B>();
    let (acts, _) = g.a.as_chunks::<AB>();
    let arow = |t: usize| acts.get(t * g.nb..(t + 1) * g.nb).unwrap_or(&[]);
    let full = g.n_tok / TILE * TILE;
    if full > 0 {
        PREPARED.with_borrow_mut(|p| {
            let cap = full.min(TOKEN_BLOCK) * nb;
            p.xu.resize(cap, [0; 32]);
            p.dx.resize(cap, 0.0);
            let bias = _mm256_set1_epi8(i8::MIN);
            for t0 in (0..full).step_by(TOKEN_BLOCK) {
                let tb = (full - t0).min(TOKEN_BLOCK);
                for t in 0..tb {
                    for (b, ab) in arow(t0 + t).iter().enumerate().take(nb) {
                        let x = _mm256_xor_si256(load(bytes32(ab, 2)), bias);
                        if let Some(o) = p.xu.get_mut(t * nb + b) {
                            // SAFETY: `o` is 32 writable bytes; `storeu`
                            // needs no alignment.
                            unsafe { _mm256_storeu_si256(o.as_mut_ptr().cast(), x) };
                        }
                        if let Some(o) = p.dx.get_mut(t * nb + b) {
                            *o = crate::fp::f16_to_f32(u16::from_le_bytes([ab[0], ab[1]]));
                        }
                    }
                }
                for (pi, pair) in blocks.chunks(2 * nb).enumerate() {
                    let col = pi * 16;
                    for t1 in (0..tb).step_by(TILE) {
                        let at = t1 * nb;
                        let xu = p.xu.get(at..).unwrap_or(&[]);
                        let dx = p.dx.get(at..).unwrap_or(&[]);
                        let row = |t: usize| (t0 + t1 + t) * g.out_stride + col;
                        if let Some((g0, g1)) =
                            pair.split_at_checked(nb).filter(|_| pair.len() == 2 * nb)
                        {
                            let y = tile_prepared::<S, B>([g0, g1], xu, dx, Weights::at(t0 + t1));
                            for (t, v) in y.into_iter().enumerate() {
                                store16(out, row(t), v);
                            }
                        } else {
                            // The last, unpaired group: its rows are the
                            // low 8 lanes.
                            let y =
                                tile_prepared::<S, B>([pair, pair], xu, dx, Weights::at(t0 + t1));
                            for (t, v) in y.into_iter().enumerate() {
                                store(out, row(t), _mm512_castps512_ps256(v));
                            }
                        }
                    }
                }
            }
        });
    }
    match g.n_tok - full {
        0 => {}
        1 => rest::<S, B, 1>(blocks, acts, g, full, out),
        2 => rest::<S, B, 2>(blocks, acts, g, full, out),
        3 => rest::<S, B, 3>(blocks, acts, g, full, out),
        4 => rest::<S, B, 4>(blocks, acts, g, full, out),
        5 => rest::<S, B, 5>(blocks, acts, g, full, out),
        6 => rest::<S, B, 6>(blocks, acts, g, full, out),
        _ => rest::<S, B, 7>(blocks, acts, g, full, out),
    }
}

/// Tokens `t0..t0 + T` (fewer than a [`TILE`]: a decode step, a pass
/// verifying a short draft, a prefill's last tokens) against every group
/// as one `T`-token tile, so the weights are read once for all of them.
/// One token at a time, each token read every weight again: passes of
/// 2, 3 and 5 tokens over SmolLM2-135M Q8_0 cost 1.28, 1.53 and 2.13
/// one-token steps, more than a whole tile of 8 (1.66); as one tile, 1.12,
/// 1.18 and 1.46 (`fak bench verify --context 300`, Zen 5, 2 threads,
/// alternated twice). Out of line: it runs once per call.
#[inline(never)]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn rest<S: SignedSteps<B>, const B: usize, const T: usize>(
    blocks: &[[u8; B]],
    acts: &[[u8; AB]],
    g: &PackedArgs<'_>,
    t0: usize,
    out: &mut [f32],
) {
    let nb = g.nb.max(1);
    let a: [&[[u8; AB]]; T] = act_rows(acts, g.nb, t0);
    for (gi, group) in blocks.chunks_exact(nb).enumerate() {
        let y = tile_signed::<S, B, T>(group, a);
        for (t, v) in y.into_iter().enumerate() {
            store(out, (t0 + t) * g.out_stride + gi * 8, v);
        }
    }
}

/// The packed product of [`crate::packed::packed_gemm`] on VNNI.
///
/// # Safety
///
/// The CPU must support AVX2, FMA, F16C and AVX-512 F, BW, VL and VNNI
/// (what [`crate::isa::Isa::Avx512`] requires).
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(crate) unsafe fn gemm(g: &PackedArgs<'_>, out: &mut [f32]) {
    match g.format {
        PackedFormat::Q8_0 => gemm_signed::<Q8, Q8_0_BYTES>(g, out),
        // No VNNI tile: the AVX2 one (the same bits).
        // SAFETY: this function runs with AVX2, FMA and F16C among others.
        PackedFormat::Q1_0 => unsafe { super::q1_avx2::gemm(g, out) },
        // SAFETY: as for Q1_0.
        PackedFormat::NVFP4 => unsafe { super::nv_avx2::gemm(g, out) },
        PackedFormat::Q5_0 => gemm_signed::<Q5s, Q5_0_BYTES>(g, out),
        PackedFormat::Q4_0
        | PackedFormat::Q4_1
        | PackedFormat::Q5_1
        | PackedFormat::IQ4NL
        | PackedFormat::MXFP4
        | PackedFormat::IQ4XS => {
            // SAFETY: this function runs with every feature `gemm_vnni` needs.
            unsafe { super::q4_vnni::gemm_vnni(g, out) }
        }
        PackedFormat::Q4K
        | PackedFormat::Q5K
        | PackedFormat::Q6K
        | PackedFormat::Q2K
        | PackedFormat::Q3K => {
            // SAFETY: this function runs with every feature `gemm_vnni` needs.
            unsafe { super::k_vnni::gemm_vnni(g, out) }
        }
    }
}
