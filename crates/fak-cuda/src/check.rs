//! Checks of the device against the CPU: every kernel against its scalar
//! twin on random data, and the device forward's logits against the CPU
//! forward's.
//!
//! Two kinds of agreement:
//!
//! * **Bit-exact** where the device does the CPU's arithmetic in the CPU's
//!   order: the activation quantizers, RMSNorm, softmax, RoPE, SwiGLU, the
//!   f16/bf16 conversions, and the integer dot products (checked with unit
//!   scales, where every partial sum is an integer below 2^24, so any
//!   summation order is exact).
//! * **Within a bound** where the device sums in another order: the dot
//!   products with real scales, `|gpu − cpu| ≤ 2 (k + 2) · 2^-24 · Σ|termᵢ|`
//!   for `k` float terms (twice the textbook bound of one recursive sum),
//!   and attention, within `1e-5 · max|v|` of an f64 host reference.

use cudarc::driver::CudaSlice;
use fak_gguf::{GgmlType, GgufFile};
use fak_kernels::Isa;
use fak_model::{Batch, LogitsWanted, SeqId};
use serde::{Deserialize, Serialize};

use crate::device::Device;
use crate::error::CudaError;
use crate::kv::DeviceKv;
use crate::model::{DeviceModel, Workspace};
use crate::ops::{self, Acts, Convert, KvShape, RopeShape, RowsPerWarp, TokenSlots};

/// splitmix64: the checks' deterministic random numbers.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        let u = (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        lo + (hi - lo) * u
    }

    /// Uniform integer in `[lo, hi]`.
    pub fn int(&mut self, lo: i32, hi: i32) -> i32 {
        lo + (self.next_u64() % (hi - lo + 1) as u64) as i32
    }
}

/// One kernel check's result.
#[derive(Debug, Clone, Serialize)]
pub struct KernelCheck {
    /// Kernel name (as in `kernels.cu`).
    pub kernel: String,
    /// What data it ran on.
    pub case: String,
    /// Values compared.
    pub values: usize,
    /// The agreement required: `bit-exact` or the bound.
    pub required: String,
    /// Values whose bits differ from the CPU twin's.
    pub differing: usize,
    /// Largest error, in the unit of the bound (0 when bit-exact).
    pub worst: f64,
    /// Whether the requirement held.
    pub pass: bool,
}

fn bit_exact(kernel: &str, case: String, got: &[u32], want: &[u32]) -> KernelCheck {
    let differing =
        got.iter().zip(want).filter(|(a, b)| a != b).count() + got.len().abs_diff(want.len());
    KernelCheck {
        kernel: kernel.into(),
        case,
        values: want.len(),
        required: "bit-exact".into(),
        differing,
        worst: differing as f64,
        pass: differing == 0,
    }
}

fn bits(x: &[f32]) -> Vec<u32> {
    x.iter().map(|v| v.to_bits()).collect()
}

/// Random f32s with a spread of magnitudes (and a few exact zeros).
fn random_f32(rng: &mut Rng, n: usize, scale: f32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            if i % 97 == 13 {
                0.0
            } else {
                let e = rng.int(-6, 3) as f32;
                rng.uniform(-1.0, 1.0) * scale * e.exp2()
            }
        })
        .collect()
}

fn f16_bits(v: f32) -> [u8; 2] {
    half::f16::from_f32(v).to_bits().to_le_bytes()
}

/// Runs every kernel check.
///
/// # Errors
///
/// Driver errors (a failed check is a result, not an error).
pub fn kernels(dev: &Device) -> Result<Vec<KernelCheck>, CudaError> {
    let mut out = Vec::new();
    let mut rng = Rng::new(0xfa6c_0da0);
    out.extend(quantizers(dev, &mut rng)?);
    out.push(matmul_q8_0(dev, &mut rng, Scales::Unit)?);
    out.push(matmul_q8_0(dev, &mut rng, Scales::Random)?);
    out.push(matmul_q4_k(dev, &mut rng, Scales::Unit)?);
    out.push(matmul_q4_k(dev, &mut rng, Scales::Random)?);
    out.extend(row_ops(dev, &mut rng)?);
    out.push(attention(dev, &mut rng)?);
    Ok(out)
}

fn quantizers(dev: &Device, rng: &mut Rng) -> Result<Vec<KernelCheck>, CudaError> {
    let (n_tok, n) = (5usize, 4096usize);
    let x = random_f32(rng, n_tok * n, 3.0);
    let xd = dev.stream.clone_htod(&x)?;
    let mut acts = Acts::new(dev, n_tok * n)?;
    let mut res = Vec::new();
    for ty in [GgmlType::Q8_0, GgmlType::Q8_K] {
        ops::quantize(dev, ty, &xd, n_tok, n, &mut acts)?;
        let qs = dev.stream.clone_dtoh(&acts.qs.slice(0..n_tok * n))?;
        let (block, bytes) = (ty.block_size(), ty.type_size());
        let nb = n_tok * n / block;
        let d = dev.stream.clone_dtoh(&acts.d.slice(0..nb))?;
        let bsums = dev
            .stream
            .clone_dtoh(&acts.bsums.slice(0..n_tok * n / 16))?;
        let mut want = vec![0u8; nb * bytes];
        for (row, dst) in x
            .chunks_exact(n)
            .zip(want.chunks_exact_mut(n / block * bytes))
        {
            fak_kernels::quantize_acts_with_isa(Isa::Scalar, ty, row, dst)?;
        }
        // Compare field by field, as u32 words.
        let (mut got_w, mut want_w) = (Vec::new(), Vec::new());
        for (b, wb) in want.chunks_exact(bytes).enumerate() {
            match ty {
                GgmlType::Q8_0 => {
                    let wd = half::f16::from_bits(u16::from_le_bytes([wb[0], wb[1]])).to_f32();
                    want_w.push(wd.to_bits());
                    got_w.push(d[b].to_bits());
                    for i in 0..32 {
                        want_w.push(wb[2 + i] as u32);
                        got_w.push(qs[b * 32 + i] as u8 as u32);
                    }
                }
                _ => {
                    let wd = f32::from_le_bytes([wb[0], wb[1], wb[2], wb[3]]);
                    want_w.push(wd.to_bits());
                    got_w.push(d[b].to_bits());
                    for i in 0..256 {
                        want_w.push(wb[4 + i] as u32);
                        got_w.push(qs[b * 256 + i] as u8 as u32);
                    }
                    for g in 0..16 {
                        let o = 4 + 256 + 2 * g;
                        want_w.push(i16::from_le_bytes([wb[o], wb[o + 1]]) as i32 as u32);
                        got_w.push(bsums[b * 16 + g] as u32);
                    }
                }
            }
        }
        let name = if ty == GgmlType::Q8_0 {
            "quantize_q8_0"
        } else {
            "quantize_q8_k"
        };
        res.push(bit_exact(
            name,
            format!("{n_tok} rows × {n}, mixed magnitudes and zeros"),
            &got_w,
            &want_w,
        ));
    }
    Ok(res)
}

/// Scales of the random blocks of a product check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scales {
    /// Every scale 1: the dot products are integers, compared bit for bit.
    Unit,
    /// Random scales: compared within the reordering bound.
    Random,
}

/// Compares products: bit-exact for unit scales, else within the bound
/// given each output's Σ|terms| (`mags`) and term count `k`.
fn product_check(
    kernel: &str,
    case: String,
    scales: Scales,
    got: &[f32],
    want: &[f32],
    mags: &[f64],
    k: usize,
) -> KernelCheck {
    if scales == Scales::Unit {
        return bit_exact(kernel, case, &bits(got), &bits(want));
    }
    let unit = 2.0f64.powi(-24);
    let bound = 2.0 * (k as f64 + 2.0);
    let mut worst = 0.0f64;
    let mut differing = 0;
    for ((&g, &w), &m) in got.iter().zip(want).zip(mags) {
        if g.to_bits() != w.to_bits() {
            differing += 1;
        }
        let e = (g as f64 - w as f64).abs() / (unit * m.max(f64::MIN_POSITIVE));
        worst = worst.max(e);
    }
    KernelCheck {
        kernel: kernel.into(),
        case,
        values: want.len(),
        required: format!("|Δ| ≤ {bound} · 2^-24 · Σ|terms|"),
        differing,
        worst,
        pass: worst <= bound && got.len() == want.len(),
    }
}

/// Runs `m`'s product over `acts` (`n_tok` tokens) with the one-row and
/// four-row kernels, and token 0 alone with the one-token matvec and the
/// tiled kernel: the one-row outputs (`[n_tok, rows]`) and whether every
/// variant gave the same bits.
fn run_variants(
    dev: &Device,
    m: &crate::weights::DeviceMatrix,
    acts: &Acts,
    n_tok: usize,
) -> Result<(Vec<f32>, bool), CudaError> {
    let (rows, n) = (m.n_out, m.n_in);
    let mut out: CudaSlice<f32> = dev.stream.alloc_zeros(n_tok * rows)?;
    ops::matmul(dev, m, acts, n_tok, &mut out, RowsPerWarp::One)?;
    let got = dev.stream.clone_dtoh(&out)?;
    ops::matmul(dev, m, acts, n_tok, &mut out, RowsPerWarp::Four)?;
    let mut agree = bits(&got) == bits(&dev.stream.clone_dtoh(&out)?);
    // Token 0 alone.
    let mut acts1 = Acts::new(dev, n)?;
    let q0 = dev.stream.clone_dtoh(&acts.qs.slice(0..n))?;
    let d0 = dev
        .stream
        .clone_dtoh(&acts.d.slice(0..acts_blocks(acts, n)))?;
    let b0 = dev.stream.clone_dtoh(&acts.bsums.slice(0..n / 16))?;
    dev.stream.memcpy_htod(&q0, &mut acts1.qs)?;
    dev.stream.memcpy_htod(&d0, &mut acts1.d)?;
    dev.stream.memcpy_htod(&b0, &mut acts1.bsums)?;
    acts1.holds = acts.holds.map(|(ty, _, n)| (ty, 1, n));
    let mut o1: CudaSlice<f32> = dev.stream.alloc_zeros(rows)?;
    for v in [RowsPerWarp::One, RowsPerWarp::Tiled] {
        ops::matmul(dev, m, &acts1, 1, &mut o1, v)?;
        agree &= bits(&dev.stream.clone_dtoh(&o1)?) == bits(&got[..rows]);
    }
    Ok((got, agree))
}

/// Scale entries of one token's activations of row length `n`.
fn acts_blocks(acts: &Acts, n: usize) -> usize {
    match acts.holds {
        Some((GgmlType::Q8_K, _, _)) => n / 256,
        _ => n / 32,
    }
}

/// Adds the check that the one-row and four-row variants gave the same
/// bits (the compared values are the one-row variant's).
fn with_variants(mut c: KernelCheck, agree: bool) -> KernelCheck {
    c.case.push_str(if agree {
        "; 1-row, 4-row and one-token variants bit-identical"
    } else {
        "; 1- and 4-row variants DIFFER"
    });
    c.pass &= agree;
    c
}

fn matmul_q8_0(dev: &Device, rng: &mut Rng, scales: Scales) -> Result<KernelCheck, CudaError> {
    // 37 rows (not a whole number of 4-row groups), 11 tokens (one full
    // and one partial tile of 8).
    let (rows, n, n_tok) = (37usize, 4096usize, 11usize);
    let nb = n / 32;
    let mut w = Vec::with_capacity(rows * nb * 34);
    for _ in 0..rows * nb {
        let d = match scales {
            Scales::Unit => 1.0,
            Scales::Random => rng.uniform(1e-3, 1e-2),
        };
        w.extend(f16_bits(d));
        w.extend((0..32).map(|_| rng.int(-127, 127) as i8 as u8));
    }
    let mut a = Vec::with_capacity(n_tok * nb * 34);
    for _ in 0..n_tok * nb {
        let d = match scales {
            Scales::Unit => 1.0,
            Scales::Random => rng.uniform(1e-3, 1e-1),
        };
        a.extend(f16_bits(d));
        // |Σ| ≤ 4096 · 127 · 31 < 2^24 with unit scales.
        a.extend((0..32).map(|_| rng.int(-31, 31) as i8 as u8));
    }
    let m = crate::weights::DeviceMatrix::upload(dev, "check", GgmlType::Q8_0, n, rows, &w)?;
    let (aq, ad) = crate::weights::repack_q8_0(&a);
    let mut acts = Acts::new(dev, n_tok * n)?;
    dev.stream.memcpy_htod(&aq, &mut acts.qs)?;
    dev.stream.memcpy_htod(&ad, &mut acts.d)?;
    acts.holds = Some((GgmlType::Q8_0, n_tok, n));
    let (got, variants_agree) = run_variants(dev, &m, &acts, n_tok)?;
    let rb = nb * 34;
    let mut want = Vec::with_capacity(n_tok * rows);
    let mut mags = Vec::with_capacity(n_tok * rows);
    for t in 0..n_tok {
        let ar = &a[t * rb..(t + 1) * rb];
        for r in 0..rows {
            let wr = &w[r * rb..(r + 1) * rb];
            want.push(fak_kernels::scalar::vec_dot_q8_0_q8_0(n, wr, ar)?);
            let mut mag = 0.0f64;
            for (bw, ba) in wr.chunks_exact(34).zip(ar.chunks_exact(34)) {
                let s: i32 = (0..32)
                    .map(|i| i32::from(bw[2 + i] as i8) * i32::from(ba[2 + i] as i8))
                    .sum();
                let dw = half::f16::from_le_bytes([bw[0], bw[1]]).to_f32() as f64;
                let da = half::f16::from_le_bytes([ba[0], ba[1]]).to_f32() as f64;
                mag += (s as f64 * dw * da).abs();
            }
            mags.push(mag);
        }
    }
    Ok(with_variants(
        product_check(
            "matmul_q8_0",
            format!("{rows} rows × {n}, {n_tok} tokens, {scales:?} scales"),
            scales,
            &got,
            &want,
            &mags,
            nb,
        ),
        variants_agree,
    ))
}

/// Packs 6-bit scales and mins into Q4_K's 12 bytes (inverse of
/// `get_scale_min_k4`).
fn pack_scales(sc: &[u8; 8], m: &[u8; 8]) -> [u8; 12] {
    let mut q = [0u8; 12];
    for j in 0..4 {
        q[j] = sc[j] & 63;
        q[j + 4] = m[j] & 63;
    }
    for j in 4..8 {
        q[j + 4] = (sc[j] & 0xF) | ((m[j] & 0xF) << 4);
        q[j - 4] |= (sc[j] >> 4) << 6;
        q[j] |= (m[j] >> 4) << 6;
    }
    q
}

fn matmul_q4_k(dev: &Device, rng: &mut Rng, scales: Scales) -> Result<KernelCheck, CudaError> {
    // Unit scales: n = 1024 keeps |Σ| ≤ 4 · 256 · 63 · 15 · 15 < 2^24.
    let n = if scales == Scales::Unit { 1024 } else { 4096 };
    let (rows, n_tok) = (37usize, 11usize);
    let nb = n / 256;
    let mut w = Vec::with_capacity(rows * nb * 144);
    for _ in 0..rows * nb {
        let (d, dmin) = match scales {
            Scales::Unit => (1.0, 1.0),
            Scales::Random => (rng.uniform(1e-4, 1e-3), rng.uniform(1e-4, 1e-3)),
        };
        w.extend(f16_bits(d));
        w.extend(f16_bits(dmin));
        let sc: [u8; 8] = std::array::from_fn(|_| rng.int(0, 63) as u8);
        let m: [u8; 8] = std::array::from_fn(|_| rng.int(0, 63) as u8);
        w.extend(pack_scales(&sc, &m));
        w.extend((0..128).map(|_| rng.next_u64() as u8));
    }
    let aq_lim = if scales == Scales::Unit { 15 } else { 127 };
    let mut a = Vec::with_capacity(n_tok * nb * 292);
    for _ in 0..n_tok * nb {
        let d = match scales {
            Scales::Unit => 1.0f32,
            Scales::Random => rng.uniform(1e-3, 1e-1),
        };
        a.extend(d.to_le_bytes());
        let q: Vec<i8> = (0..256).map(|_| rng.int(-aq_lim, aq_lim) as i8).collect();
        a.extend(q.iter().map(|&v| v as u8));
        for g in q.chunks_exact(16) {
            let s: i32 = g.iter().map(|&v| i32::from(v)).sum();
            a.extend((s as i16).to_le_bytes());
        }
    }
    let m = crate::weights::DeviceMatrix::upload(dev, "check", GgmlType::Q4_K, n, rows, &w)?;
    let mut acts = Acts::new(dev, n_tok * n)?;
    let (mut qs, mut ds, mut bs) = (Vec::new(), Vec::new(), Vec::new());
    for blk in a.chunks_exact(292) {
        ds.push(f32::from_le_bytes([blk[0], blk[1], blk[2], blk[3]]));
        qs.extend(blk[4..260].iter().map(|&v| v as i8));
        for g in 0..16 {
            bs.push(i32::from(i16::from_le_bytes([
                blk[260 + 2 * g],
                blk[261 + 2 * g],
            ])));
        }
    }
    dev.stream.memcpy_htod(&qs, &mut acts.qs)?;
    dev.stream.memcpy_htod(&ds, &mut acts.d)?;
    dev.stream.memcpy_htod(&bs, &mut acts.bsums)?;
    acts.holds = Some((GgmlType::Q8_K, n_tok, n));
    let (got, variants_agree) = run_variants(dev, &m, &acts, n_tok)?;
    let (rbw, rba) = (nb * 144, nb * 292);
    let mut want = Vec::new();
    let mut mags = Vec::new();
    for t in 0..n_tok {
        let ar = &a[t * rba..(t + 1) * rba];
        for r in 0..rows {
            let wr = &w[r * rbw..(r + 1) * rbw];
            want.push(fak_kernels::scalar::vec_dot_q4_k_q8_k(n, wr, ar)?);
            // Σ|terms| over sub-blocks, both the scale and the min term.
            let mut mag = 0.0f64;
            for (bw, ba) in wr.chunks_exact(144).zip(ar.chunks_exact(292)) {
                let d = half::f16::from_le_bytes([bw[0], bw[1]]).to_f32() as f64;
                let dmin = half::f16::from_le_bytes([bw[2], bw[3]]).to_f32() as f64;
                let da = f32::from_le_bytes([ba[0], ba[1], ba[2], ba[3]]) as f64;
                let sc12: [u8; 12] = std::array::from_fn(|i| bw[4 + i]);
                let (sc, mm) = fak_kernels::blocks::get_scale_min_k4(&sc12);
                for j in 0..8 {
                    let mut isum = 0i64;
                    for i in 0..32 {
                        let byte = bw[16 + (j / 2) * 32 + i];
                        let q = if j % 2 == 0 { byte & 0xF } else { byte >> 4 };
                        isum += i64::from(q) * i64::from(ba[4 + j * 32 + i] as i8);
                    }
                    let bsum = i64::from(i16::from_le_bytes([ba[260 + 4 * j], ba[261 + 4 * j]]))
                        + i64::from(i16::from_le_bytes([ba[262 + 4 * j], ba[263 + 4 * j]]));
                    mag += (d * da * (sc[j] as f64) * isum as f64).abs();
                    mag += (dmin * da * (mm[j] as f64) * bsum as f64).abs();
                }
            }
            mags.push(mag);
        }
    }
    Ok(with_variants(
        product_check(
            "matmul_q4_k",
            format!("{rows} rows × {n}, {n_tok} tokens, {scales:?} scales"),
            scales,
            &got,
            &want,
            &mags,
            2 * nb * 8,
        ),
        variants_agree,
    ))
}

fn row_ops(dev: &Device, rng: &mut Rng) -> Result<Vec<KernelCheck>, CudaError> {
    let mut res = Vec::new();
    let (rows, n) = (7usize, 3584usize);
    let x = random_f32(rng, rows * n, 2.0);
    let w: Vec<f32> = (0..n).map(|_| rng.uniform(0.5, 1.5)).collect();
    let xd = dev.stream.clone_htod(&x)?;
    let wd = dev.stream.clone_htod(&w)?;

    // RMSNorm.
    let mut od: CudaSlice<f32> = dev.stream.alloc_zeros(rows * n)?;
    ops::rms_norm(dev, &xd, &wd, &mut od, rows, n, 1e-6)?;
    let got = dev.stream.clone_dtoh(&od)?;
    let mut want = vec![0.0f32; rows * n];
    for (xr, o) in x.chunks_exact(n).zip(want.chunks_exact_mut(n)) {
        fak_kernels::ops::rms_norm_with_isa(Isa::Scalar, xr, &w, 1e-6, o);
    }
    res.push(bit_exact(
        "rms_norm",
        format!("{rows} rows × {n}"),
        &bits(&got),
        &bits(&want),
    ));

    // Softmax (scores-like values).
    let sx: Vec<f32> = (0..rows * 1000).map(|_| rng.uniform(-20.0, 20.0)).collect();
    let mut sd = dev.stream.clone_htod(&sx)?;
    ops::softmax_rows(dev, &mut sd, rows, 1000)?;
    let got = dev.stream.clone_dtoh(&sd)?;
    let mut want = sx.clone();
    for r in want.chunks_exact_mut(1000) {
        fak_kernels::ops::softmax_with_isa(Isa::Scalar, r);
    }
    res.push(bit_exact(
        "softmax_rows",
        format!("{rows} rows × 1000"),
        &bits(&got),
        &bits(&want),
    ));

    // SwiGLU.
    let g = random_f32(rng, rows * n, 8.0);
    let u = random_f32(rng, rows * n, 2.0);
    let mut gd = dev.stream.clone_htod(&g)?;
    let ud = dev.stream.clone_htod(&u)?;
    ops::swiglu(dev, &mut gd, &ud, rows * n)?;
    let got = dev.stream.clone_dtoh(&gd)?;
    let mut want = g.clone();
    fak_kernels::ops::swiglu_with_isa(Isa::Scalar, &mut want, &u);
    res.push(bit_exact(
        "swiglu",
        format!("{} values", rows * n),
        &bits(&got),
        &bits(&want),
    ));

    // RoPE, both styles, angles from the CPU's table.
    for (style, name) in [
        (fak_gguf::RopeStyle::Normal, "normal"),
        (fak_gguf::RopeStyle::Neox, "neox"),
    ] {
        let (n_tok, heads, hd) = (5usize, 4usize, 128usize);
        let q = random_f32(rng, n_tok * heads * hd, 4.0);
        let half = hd / 2;
        let mut cs = vec![0.0f32; n_tok * hd];
        let mut want = q.clone();
        let mut pairs = vec![(0.0f32, 0.0f32); half];
        for t in 0..n_tok {
            let pos = [0u32, 1, 17, 999, 32767][t];
            fak_model::rope_angles(pos, 1e6, hd, None, &mut pairs);
            for (j, &(c, s)) in pairs.iter().enumerate() {
                cs[(t * half + j) * 2] = c;
                cs[(t * half + j) * 2 + 1] = s;
            }
            for head in want[t * heads * hd..(t + 1) * heads * hd].chunks_exact_mut(hd) {
                fak_model::rope_head(head, &pairs, hd, style);
            }
        }
        let mut qd = dev.stream.clone_htod(&q)?;
        let csd = dev.stream.clone_htod(&cs)?;
        let shape = RopeShape {
            n_heads: heads,
            head_dim: hd,
            rope_dim: hd,
            style: if style == fak_gguf::RopeStyle::Normal {
                0
            } else {
                1
            },
        };
        ops::rope(dev, &mut qd, &csd, n_tok, shape)?;
        let got = dev.stream.clone_dtoh(&qd)?;
        res.push(bit_exact(
            "rope",
            format!("{name}, {n_tok} tokens × {heads} heads × {hd}"),
            &bits(&got),
            &bits(&want),
        ));
    }

    // f16 / bf16 activations: round trips against the `half` crate.
    let mut v = random_f32(rng, 100_000, 1.0);
    v.extend([65504.0, 65520.0, 1e-8, -1e-8, 6.1e-5, 3.4e38, -0.0]);
    let vd = dev.stream.clone_htod(&v)?;
    for which in [Convert::F32ToF16, Convert::F32ToBf16] {
        let mut y: CudaSlice<u16> = dev.stream.alloc_zeros(v.len())?;
        let mut back: CudaSlice<f32> = dev.stream.alloc_zeros(v.len())?;
        ops::convert_round_trip(dev, which, &vd, &mut y, &mut back, v.len())?;
        let got_h = dev.stream.clone_dtoh(&y)?;
        let got_b = dev.stream.clone_dtoh(&back)?;
        let (want_h, want_b): (Vec<u16>, Vec<f32>) = match which {
            Convert::F32ToF16 => v
                .iter()
                .map(|&x| {
                    let h = half::f16::from_f32(x);
                    (h.to_bits(), h.to_f32())
                })
                .unzip(),
            Convert::F32ToBf16 => v
                .iter()
                .map(|&x| {
                    let h = half::bf16::from_f32(x);
                    (h.to_bits(), h.to_f32())
                })
                .unzip(),
        };
        let mut got_w: Vec<u32> = got_h.iter().map(|&h| u32::from(h)).collect();
        got_w.extend(bits(&got_b));
        let mut want_w: Vec<u32> = want_h.iter().map(|&h| u32::from(h)).collect();
        want_w.extend(bits(&want_b));
        let name = match which {
            Convert::F32ToF16 => "f32_to_f16 / f16_to_f32",
            Convert::F32ToBf16 => "f32_to_bf16 / bf16_to_f32",
        };
        res.push(bit_exact(
            name,
            format!("{} values incl. edges", v.len()),
            &got_w,
            &want_w,
        ));
    }
    Ok(res)
}

fn attention(dev: &Device, rng: &mut Rng) -> Result<KernelCheck, CudaError> {
    let (n_head, n_head_kv, hd, n_ctx, n_slots) = (8usize, 2usize, 128usize, 600usize, 3usize);
    let kv_dim = n_head_kv * hd;
    // Tokens: slot, pos (each slot filled to its longest position first).
    let toks: Vec<(usize, usize)> = vec![(0, 0), (1, 5), (1, 6), (2, 599), (0, 1)];
    let lens = [2usize, 7, 600];
    let kc: Vec<u16> = (0..n_slots * n_ctx * kv_dim)
        .map(|_| half::f16::from_f32(rng.uniform(-2.0, 2.0)).to_bits())
        .collect();
    let vc: Vec<u16> = (0..n_slots * n_ctx * kv_dim)
        .map(|_| half::f16::from_f32(rng.uniform(-2.0, 2.0)).to_bits())
        .collect();
    let n_tok = toks.len();
    let q = random_f32(rng, n_tok * n_head * hd, 1.0);
    let scale = 1.0 / (hd as f32).sqrt();
    let kcd = dev.stream.clone_htod(&kc)?;
    let vcd = dev.stream.clone_htod(&vc)?;
    let qd = dev.stream.clone_htod(&q)?;
    let slots: Vec<i32> = toks.iter().map(|t| t.0 as i32).collect();
    let poss: Vec<i32> = toks.iter().map(|t| t.1 as i32).collect();
    let sd = dev.stream.clone_htod(&slots)?;
    let pd = dev.stream.clone_htod(&poss)?;
    let mut od: CudaSlice<f32> = dev.stream.alloc_zeros(n_tok * n_head * hd)?;
    let ts = TokenSlots {
        slot: &sd,
        pos: &pd,
        n_tok,
    };
    let shape = KvShape {
        n_head,
        n_head_kv,
        head_dim: hd,
        n_ctx,
    };
    let mut part: CudaSlice<f32> = dev
        .stream
        .alloc_zeros(ops::attention_scratch(n_tok, shape))?;
    ops::attention(dev, &qd, &kcd, &vcd, &ts, shape, scale, &mut part, &mut od)?;
    let got = dev.stream.clone_dtoh(&od)?;
    let f = |b: u16| half::f16::from_bits(b).to_f64();
    let mut worst = 0.0f64;
    let mut differing = 0;
    let group = n_head / n_head_kv;
    for (t, &(slot, pos)) in toks.iter().enumerate() {
        debug_assert!(pos < lens[slot]);
        for h in 0..n_head {
            let kvh = h / group;
            let qh = &q[(t * n_head + h) * hd..(t * n_head + h + 1) * hd];
            let row = |j: usize| (slot * n_ctx + j) * kv_dim + kvh * hd;
            let s: Vec<f64> = (0..=pos)
                .map(|j| {
                    let r = row(j);
                    qh.iter()
                        .enumerate()
                        .map(|(d, &x)| x as f64 * f(kc[r + d]))
                        .sum::<f64>()
                        * scale as f64
                })
                .collect();
            let m = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = s.iter().map(|v| (v - m).exp()).collect();
            let sum: f64 = e.iter().sum();
            for d in 0..hd {
                let want: f64 = e
                    .iter()
                    .enumerate()
                    .map(|(j, p)| p * f(vc[row(j) + d]))
                    .sum::<f64>()
                    / sum;
                let g = got[(t * n_head + h) * hd + d] as f64;
                // Values are within ±2: the bound is 1e-5 · 2.
                let err = (g - want).abs() / 2e-5;
                if err > 0.0 {
                    differing += 1;
                }
                worst = worst.max(err);
            }
        }
    }
    Ok(KernelCheck {
        kernel: "attention".into(),
        case: format!(
            "{n_tok} tokens in 3 slots, {n_head}/{n_head_kv} heads × {hd}, up to 600 keys"
        ),
        values: n_tok * n_head * hd,
        required: "|Δ| ≤ 1e-5 · max|v| of an f64 reference".into(),
        differing,
        worst,
        pass: worst <= 1.0,
    })
}

/// The token batch of a logits check: three sequences of 7, 13 and 5
/// prompt tokens (ids from a fixed seed below `n_vocab`), logits for each
/// last token; then one decode token each.
pub fn check_prompts(n_vocab: usize) -> (Vec<Vec<u32>>, Vec<u32>) {
    let mut rng = Rng::new(0x106_175);
    let prompts = [7usize, 13, 5]
        .iter()
        .map(|&len| {
            (0..len)
                .map(|_| (rng.next_u64() % n_vocab as u64) as u32)
                .collect()
        })
        .collect();
    let next = (0..3)
        .map(|_| (rng.next_u64() % n_vocab as u64) as u32)
        .collect();
    (prompts, next)
}

fn prefill_batch(prompts: &[Vec<u32>]) -> Batch {
    let mut b = Batch::new();
    for (s, p) in prompts.iter().enumerate() {
        b.push_seq(SeqId(s as u32), 0, p, LogitsWanted::Yes);
    }
    b
}

fn decode_batch(prompts: &[Vec<u32>], next: &[u32]) -> Batch {
    let mut b = Batch::new();
    for (s, (p, &t)) in prompts.iter().zip(next).enumerate() {
        b.push_seq(SeqId(s as u32), p.len() as u32, &[t], LogitsWanted::Yes);
    }
    b
}

/// CPU logits of the check batch: six rows (three prefills' last tokens,
/// three decode tokens), with the tokens that made them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Reference {
    /// Where the rows came from (`cpu`, the ISA).
    pub source: String,
    /// The prompts.
    pub prompts: Vec<Vec<u32>>,
    /// The decode tokens.
    pub next: Vec<u32>,
    /// `[6][n_vocab]` logits.
    pub rows: Vec<Vec<f32>>,
}

/// Computes the check batch's logits with the CPU forward.
///
/// # Errors
///
/// Model load or forward errors.
pub fn cpu_reference(file: GgufFile) -> Result<Reference, CudaError> {
    let model = fak_model::Model::from_gguf(file)?;
    let cfg = model.config().clone();
    let (prompts, next) = check_prompts(cfg.n_vocab);
    let mut kv = fak_model::FlatKv::for_model(&cfg, 64, 3)
        .map_err(|e| CudaError::Spec(format!("CPU KV: {e}")))?;
    let mut rows = Vec::new();
    for b in [prefill_batch(&prompts), decode_batch(&prompts, &next)] {
        let l = model.forward(&b, &mut kv)?;
        for i in 0..3 {
            rows.push(l.row(i).to_vec());
        }
    }
    Ok(Reference {
        source: format!("cpu ({})", fak_kernels::isa().name()),
        prompts,
        next,
        rows,
    })
}

/// How close the device's logits must be to the CPU's.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum Tolerance {
    /// A trained model: every row's argmax agrees and max |Δ| ≤ 1% of the
    /// largest |logit|.
    Trained,
    /// A random-weight model: max |Δ| ≤ max(2 · s, 1% of the largest
    /// |logit|), where `s` is how far the CPU's own logits move when the
    /// first layer's query bias is scaled by (1 + 1e-6). Such models flip
    /// activation quants (and near-tied argmaxes) under any reordering of
    /// a sum; `s` measures that in the same run.
    RandomWeights {
        /// The CPU's own max |Δ| under the perturbation.
        cpu_self_sensitivity: f32,
    },
}

/// How far the CPU's logits of the check batch move when every element of
/// `blk.0.attn_q.bias` in `bytes` (a GGUF file) is scaled by (1 + 1e-6).
///
/// # Errors
///
/// [`CudaError::Spec`] when the file has no such F32 bias; model errors.
pub fn cpu_self_sensitivity(bytes: &[u8], reference: &Reference) -> Result<f32, CudaError> {
    let file = GgufFile::from_bytes(bytes.to_vec())?;
    let t = file
        .tensor("blk.0.attn_q.bias")
        .filter(|t| t.ty == GgmlType::F32)
        .ok_or_else(|| CudaError::Spec("no F32 blk.0.attn_q.bias to perturb".into()))?
        .clone();
    let start = (file.data_offset() + t.offset) as usize;
    drop(file);
    let mut b = bytes.to_vec();
    for o in (start..start + t.n_bytes as usize).step_by(4) {
        let v = f32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        b[o..o + 4].copy_from_slice(&(v * (1.0 + 1e-6)).to_le_bytes());
    }
    let moved = cpu_reference(GgufFile::from_bytes(b)?)?;
    let mut m = 0.0f32;
    for (r, s) in moved.rows.iter().zip(&reference.rows) {
        for (a, b) in r.iter().zip(s) {
            m = m.max((a - b).abs());
        }
    }
    Ok(m)
}

/// The device's logits against a CPU reference.
#[derive(Debug, Clone, Serialize)]
pub struct LogitsCheck {
    /// What model ran.
    pub model: String,
    /// Where the reference came from.
    pub reference: String,
    /// Rows compared.
    pub rows: usize,
    /// Logits per row.
    pub n_vocab: usize,
    /// Largest |gpu − cpu| over all rows.
    pub max_abs_diff: f32,
    /// Largest |logit| of the reference.
    pub max_abs_logit: f32,
    /// Rows whose argmax agrees.
    pub argmax_agree: usize,
    /// Smallest overlap of the top-10 token sets over the rows.
    pub top10_overlap_min: usize,
    /// Sequence 0 run alone gives the same logit bits as beside the others.
    pub batch_invariant: bool,
    /// The tolerance applied.
    pub tolerance: Tolerance,
    /// The requirement: batch invariance, and the tolerance's bound.
    pub pass: bool,
}

fn top10(row: &[f32]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..row.len()).collect();
    idx.sort_by(|&a, &b| row[b].total_cmp(&row[a]));
    idx.truncate(10);
    idx
}

/// Runs the check batch on the device and compares it with `reference`.
///
/// # Errors
///
/// Model load, driver or shape errors.
pub fn logits(
    dev: &Device,
    file: GgufFile,
    name: &str,
    reference: &Reference,
    tolerance: Tolerance,
) -> Result<LogitsCheck, CudaError> {
    let model = DeviceModel::load(dev, file)?;
    let mut kv: DeviceKv = model.new_kv(dev, 3, 64)?;
    let mut ws = Workspace::new();
    let mut got: Vec<Vec<f32>> = Vec::new();
    let pre = prefill_batch(&reference.prompts);
    let l = model.forward(dev, &pre, &mut kv, &mut ws)?;
    let n_vocab = model.config().n_vocab;
    got.extend(l.chunks_exact(n_vocab).map(<[f32]>::to_vec));
    let l = model.forward(
        dev,
        &decode_batch(&reference.prompts, &reference.next),
        &mut kv,
        &mut ws,
    )?;
    got.extend(l.chunks_exact(n_vocab).map(<[f32]>::to_vec));
    // Sequence 0 alone, in a fresh store.
    let mut kv1 = model.new_kv(dev, 3, 64)?;
    let alone = prefill_batch(&reference.prompts[..1]);
    let l = model.forward(dev, &alone, &mut kv1, &mut ws)?;
    let mut batch_invariant = bits(l) == bits(&got[0]);
    // And its decode token alone (one-row matmuls) against the batched
    // decode (four-row matmuls).
    let one = decode_batch(&reference.prompts[..1], &reference.next[..1]);
    let l = model.forward(dev, &one, &mut kv1, &mut ws)?;
    batch_invariant &= bits(l) == bits(&got[3]);
    let mut max_abs_diff = 0.0f32;
    let mut max_abs_logit = 0.0f32;
    let mut argmax_agree = 0;
    let mut top10_overlap_min = 10;
    for (g, w) in got.iter().zip(&reference.rows) {
        for (a, b) in g.iter().zip(w) {
            max_abs_diff = max_abs_diff.max((a - b).abs());
            max_abs_logit = max_abs_logit.max(b.abs());
        }
        let (tg, tw) = (top10(g), top10(w));
        if tg[0] == tw[0] {
            argmax_agree += 1;
        }
        top10_overlap_min = top10_overlap_min.min(tg.iter().filter(|t| tw.contains(t)).count());
    }
    let rows = got.len().min(reference.rows.len());
    let close = match tolerance {
        Tolerance::Trained => argmax_agree == rows && max_abs_diff <= 0.01 * max_abs_logit,
        Tolerance::RandomWeights {
            cpu_self_sensitivity,
        } => max_abs_diff <= (2.0 * cpu_self_sensitivity).max(0.01 * max_abs_logit),
    };
    let pass = rows == reference.rows.len() && close && batch_invariant;
    Ok(LogitsCheck {
        model: name.into(),
        reference: reference.source.clone(),
        rows,
        n_vocab,
        max_abs_diff,
        max_abs_logit,
        argmax_agree,
        top10_overlap_min,
        batch_invariant,
        tolerance,
        pass,
    })
}
