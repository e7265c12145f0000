//! Synthetic GGUF models: real architectures' shapes with random weights,
//! built in memory.
//!
//! Speed runs of a real model's shape (a 7B qwen2 at Q4_K is about 4.5 GB)
//! are needed on a GPU machine to which no model file can travel. A
//! [`SynthSpec`] names a shape from [`SHAPES`], a matrix type and
//! optionally fewer layers (`qwen2.5-7b:q4_k`, `qwen2.5-7b:q8_0@2`);
//! [`gguf_bytes`] turns it into a complete qwen2 GGUF file (q/k/v biases,
//! untied `output.weight`, `{arch}.vocab_size` instead of a tokenizer)
//! that `fak_gguf::model_config` and `fak_model::Model` accept. Random
//! weights check speed, not quality: the logits mean nothing.
//!
//! ```text
//!  "qwen2.5-7b:q4_k@28" ──SynthSpec::parse──► SynthSpec ──gguf_bytes──► Vec<u8> (GGUF v3)
//!                                                │
//!                          plan: every tensor's name, shape, type, fill
//!                                                │
//!        1 MiB chunks of rows ──► available_parallelism() threads ──► tensor bytes
//! ```
//!
//! Quantized blocks are written directly as random bytes, never by
//! quantizing floats (far too slow at 7B):
//!
//! * Q8_0 (34 bytes): f16 scale `d = amp / 127`, then 32 quants uniform
//!   in `[-127, 127]` (0 twice as likely: -128 becomes 0); `amp = sqrt(3 / n_in)`, so the values have a
//!   standard deviation of about `1 / sqrt(n_in)` (`amp = 1` for
//!   `token_embd.weight`).
//! * Q4_K (144 bytes): f16 `d`, f16 `dmin = 7.5·d`, 8 six-bit sub-block
//!   scales `sc_j` uniform in `[32, 63]` with mins `m_j = sc_j`, 128 bytes
//!   of random nibbles. Element value `d·sc_j·q − dmin·m_j = d·sc_j·(q −
//!   7.5)`: every sub-block is zero-mean; `d = sqrt(3 / n_in) / (7.5·47.5)`.
//!
//! Every tensor's random stream is seeded by the spec's seed and the
//! tensor's name; each fixed chunk of 1 MiB of rows is seeded by the
//! tensor's seed and the chunk's index. The bytes are therefore the same
//! for a seed whatever the thread count.

use std::sync::Mutex;

use fak_gguf::{Arch, GgmlType, GgufWriter, MetaValue};

use crate::CudaError;

/// A real model's shape.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shape {
    /// The name used in specs, e.g. `qwen2.5-7b`.
    pub name: &'static str,
    /// Transformer blocks.
    pub n_layer: usize,
    /// Hidden size.
    pub n_embd: usize,
    /// Query heads.
    pub n_head: usize,
    /// Key/value heads.
    pub n_head_kv: usize,
    /// Elements per head.
    pub head_dim: usize,
    /// Feed-forward size.
    pub n_ff: usize,
    /// Vocabulary size (rows of `token_embd.weight` and `output.weight`).
    pub n_vocab: usize,
    /// Rope base frequency.
    pub rope_theta: f32,
}

/// The shapes [`SynthSpec::parse`] knows (Qwen2.5's `config.json` values).
pub const SHAPES: [Shape; 2] = [
    Shape {
        name: "qwen2.5-7b",
        n_layer: 28,
        n_embd: 3584,
        n_head: 28,
        n_head_kv: 4,
        head_dim: 128,
        n_ff: 18944,
        n_vocab: 152064,
        rope_theta: 1e6,
    },
    Shape {
        name: "qwen2.5-coder-1.5b",
        n_layer: 28,
        n_embd: 1536,
        n_head: 12,
        n_head_kv: 2,
        head_dim: 128,
        n_ff: 8960,
        n_vocab: 151936,
        rope_theta: 1e6,
    },
];

/// Other names of shapes in [`SHAPES`]: Qwen2.5-1.5B has the same shape as
/// Qwen2.5-Coder-1.5B.
const ALIASES: [(&str, &str); 1] = [("qwen2.5-1.5b", "qwen2.5-coder-1.5b")];

/// The matrix types a spec may ask for.
const MATRIX_TYPES: [GgmlType; 2] = [GgmlType::Q8_0, GgmlType::Q4_K];

/// Seed of a parsed spec.
const DEFAULT_SEED: u64 = 0x5EED_FA4C_C0DA_0001;

/// Bytes of rows per independently seeded chunk (whole rows, at least one).
const CHUNK_BYTES: usize = 1 << 20;

/// GGUF data alignment (the writer's default).
const ALIGNMENT: usize = 32;

/// A parsed `--synthetic` spec: `SHAPE:TYPE[@LAYERS]`, e.g. `qwen2.5-7b:q4_k` or `qwen2.5-7b:q8_0@2`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SynthSpec {
    /// The model's shape (its `n_layer` is the full depth).
    pub shape: Shape,
    /// Type of the 7 matrices per layer and of `output.weight`: Q8_0 or
    /// Q4_K.
    pub ty: GgmlType,
    /// Blocks written: `1..=shape.n_layer`.
    pub n_layer: usize,
    /// Seed of every tensor's random stream.
    pub seed: u64,
}

impl SynthSpec {
    /// Parses `SHAPE:TYPE[@LAYERS]` (`LAYERS` defaults to the shape's
    /// depth) with the default seed. Errors are one line naming what is
    /// known.
    pub fn parse(s: &str) -> Result<SynthSpec, CudaError> {
        let (body, layers) = match s.split_once('@') {
            Some((b, l)) => (b, Some(l)),
            None => (s, None),
        };
        let Some((shape_name, ty_name)) = body.split_once(':') else {
            return Err(spec_err(format!(
                "synthetic model '{s}': expected SHAPE:TYPE[@LAYERS], e.g. qwen2.5-7b:q4_k or \
                 qwen2.5-7b:q8_0@2 (shapes: {}; types: {})",
                known_shapes(),
                known_types()
            )));
        };
        let shape = find_shape(shape_name.trim())?;
        let ty_name = ty_name.trim();
        let ty = GgmlType::from_name(ty_name)
            .filter(|t| MATRIX_TYPES.contains(t))
            .ok_or_else(|| {
                spec_err(format!(
                    "synthetic weight type '{ty_name}' is not supported (known: {})",
                    known_types()
                ))
            })?;
        let n_layer = match layers {
            None => shape.n_layer,
            Some(l) => l.trim().parse::<usize>().map_err(|_| {
                spec_err(format!(
                    "synthetic model '{s}': layer count '{l}' is not a number in 1..={}",
                    shape.n_layer
                ))
            })?,
        };
        let spec = SynthSpec {
            shape,
            ty,
            n_layer,
            seed: DEFAULT_SEED,
        };
        spec.validate()?;
        Ok(spec)
    }

    /// The canonical spec string, e.g. `qwen2.5-7b:q4_k@28`.
    pub fn name(&self) -> String {
        format!("{}:{}@{}", self.shape.name, self.ty.name(), self.n_layer)
    }

    /// Checks what [`gguf_bytes`] needs: a matrix type from the known ones,
    /// `1..=shape.n_layer` layers, non-zero sizes, and every matrix row
    /// (and the Q8_0 embedding row) a whole number of blocks.
    fn validate(&self) -> Result<(), CudaError> {
        let sh = &self.shape;
        let name = self.name();
        if !MATRIX_TYPES.contains(&self.ty) {
            return Err(spec_err(format!(
                "synthetic model {name}: weight type {} is not supported (known: {})",
                self.ty.name(),
                known_types()
            )));
        }
        if self.n_layer == 0 || self.n_layer > sh.n_layer {
            return Err(spec_err(format!(
                "synthetic model {name}: {} layers is outside 1..={}",
                self.n_layer, sh.n_layer
            )));
        }
        let sizes = [
            ("n_embd", sh.n_embd),
            ("n_head", sh.n_head),
            ("n_head_kv", sh.n_head_kv),
            ("head_dim", sh.head_dim),
            ("n_ff", sh.n_ff),
            ("n_vocab", sh.n_vocab),
        ];
        if let Some((what, _)) = sizes.iter().find(|(_, v)| *v == 0) {
            return Err(spec_err(format!("synthetic model {name}: {what} is 0")));
        }
        let q = sh.n_head.checked_mul(sh.head_dim).ok_or_else(|| {
            spec_err(format!(
                "synthetic model {name}: n_head * head_dim overflows"
            ))
        })?;
        if sh.n_head_kv.checked_mul(sh.head_dim).is_none() {
            return Err(spec_err(format!(
                "synthetic model {name}: n_head_kv * head_dim overflows"
            )));
        }
        let bs = self.ty.block_size();
        for (what, n_in) in [
            ("n_embd", sh.n_embd),
            ("n_ff", sh.n_ff),
            ("n_head * head_dim", q),
        ] {
            if n_in % bs != 0 {
                return Err(spec_err(format!(
                    "synthetic model {name}: {what} = {n_in} is not a multiple of {bs}, the {} block size",
                    self.ty.name()
                )));
            }
        }
        let q8 = GgmlType::Q8_0.block_size();
        if !sh.n_embd.is_multiple_of(q8) {
            return Err(spec_err(format!(
                "synthetic model {name}: n_embd = {} is not a multiple of {q8} (Q8_0 token_embd.weight)",
                sh.n_embd
            )));
        }
        Ok(())
    }
}

fn spec_err(msg: String) -> CudaError {
    CudaError::Spec(msg)
}

/// `a, b (alias c)` over [`SHAPES`].
fn known_shapes() -> String {
    SHAPES
        .iter()
        .map(|s| {
            let aliases: Vec<&str> = ALIASES
                .iter()
                .filter(|(_, to)| *to == s.name)
                .map(|(a, _)| *a)
                .collect();
            if aliases.is_empty() {
                s.name.to_string()
            } else {
                format!("{} (alias {})", s.name, aliases.join(", "))
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// `q8_0, q4_k`.
fn known_types() -> String {
    MATRIX_TYPES
        .iter()
        .map(|t| t.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The shape called `name` (or one of its aliases), case-insensitive.
fn find_shape(name: &str) -> Result<Shape, CudaError> {
    let lower = name.to_ascii_lowercase();
    let canonical = ALIASES
        .iter()
        .find(|(a, _)| *a == lower)
        .map_or(lower.as_str(), |(_, to)| *to);
    SHAPES
        .iter()
        .find(|s| s.name == canonical)
        .copied()
        .ok_or_else(|| {
            spec_err(format!(
                "unknown synthetic shape '{name}' (known: {})",
                known_shapes()
            ))
        })
}

/// How a tensor's bytes are drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Fill {
    /// Q8_0 blocks with f16 scale bits `d`.
    Q8_0 { d: u16 },
    /// Zero-mean Q4_K blocks with f16 bits `d` and `dmin`.
    Q4K { d: u16, dmin: u16 },
    /// F32 values uniform in `[lo, hi)`.
    F32 { lo: f32, hi: f32 },
}

impl Fill {
    /// A weight matrix with `n_in` inputs in `ty` (Q8_0 or Q4_K).
    fn matrix(ty: GgmlType, n_in: usize) -> Fill {
        let amp = (3.0 / n_in as f64).sqrt();
        match ty {
            GgmlType::Q4_K => {
                let d = half::f16::from_f64(amp / (7.5 * 47.5));
                let dmin = half::f16::from_f32(7.5 * d.to_f32());
                Fill::Q4K {
                    d: d.to_bits(),
                    dmin: dmin.to_bits(),
                }
            }
            _ => Fill::q8_0(amp),
        }
    }

    /// Q8_0 values up to `amp` in magnitude.
    fn q8_0(amp: f64) -> Fill {
        Fill::Q8_0 {
            d: half::f16::from_f64(amp / 127.0).to_bits(),
        }
    }
}

/// One tensor to write.
#[derive(Debug, Clone)]
struct Planned {
    name: String,
    /// ggml order: `[n_in, n_out]` or `[n]`.
    dims: Vec<u64>,
    ty: GgmlType,
    fill: Fill,
}

/// Every tensor of `spec`, in file order.
fn plan(spec: &SynthSpec) -> Vec<Planned> {
    let sh = &spec.shape;
    let (embd, ff) = (sh.n_embd, sh.n_ff);
    let q = sh.n_head * sh.head_dim;
    let kv = sh.n_head_kv * sh.head_dim;
    let mut out = Vec::with_capacity(3 + 12 * spec.n_layer);
    let mut push = |name: String, dims: &[usize], ty: GgmlType, fill: Fill| {
        let dims = dims.iter().map(|&d| d as u64).collect();
        out.push(Planned {
            name,
            dims,
            ty,
            fill,
        });
    };
    let norm = Fill::F32 { lo: 0.8, hi: 1.2 };
    let bias = Fill::F32 { lo: -0.1, hi: 0.1 };
    let mat = |n_in: usize| Fill::matrix(spec.ty, n_in);
    push(
        "token_embd.weight".into(),
        &[embd, sh.n_vocab],
        GgmlType::Q8_0,
        Fill::q8_0(1.0),
    );
    push("output_norm.weight".into(), &[embd], GgmlType::F32, norm);
    push(
        "output.weight".into(),
        &[embd, sh.n_vocab],
        spec.ty,
        mat(embd),
    );
    for i in 0..spec.n_layer {
        let n = |s: &str| format!("blk.{i}.{s}");
        push(n("attn_norm.weight"), &[embd], GgmlType::F32, norm);
        push(n("attn_q.weight"), &[embd, q], spec.ty, mat(embd));
        push(n("attn_q.bias"), &[q], GgmlType::F32, bias);
        push(n("attn_k.weight"), &[embd, kv], spec.ty, mat(embd));
        push(n("attn_k.bias"), &[kv], GgmlType::F32, bias);
        push(n("attn_v.weight"), &[embd, kv], spec.ty, mat(embd));
        push(n("attn_v.bias"), &[kv], GgmlType::F32, bias);
        push(n("attn_output.weight"), &[q, embd], spec.ty, mat(q));
        push(n("ffn_norm.weight"), &[embd], GgmlType::F32, norm);
        push(n("ffn_gate.weight"), &[embd, ff], spec.ty, mat(embd));
        push(n("ffn_up.weight"), &[embd, ff], spec.ty, mat(embd));
        push(n("ffn_down.weight"), &[ff, embd], spec.ty, mat(ff));
    }
    out
}

/// The GGUF bytes of `spec` (deterministic for a seed): arch qwen2, with q/k/v biases.
pub fn gguf_bytes(spec: &SynthSpec) -> Result<Vec<u8>, CudaError> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    build(spec, threads)
}

/// [`gguf_bytes`] on `threads` threads.
fn build(spec: &SynthSpec, threads: usize) -> Result<Vec<u8>, CudaError> {
    spec.validate()?;
    let plans = plan(spec);
    let mut bufs = Vec::with_capacity(plans.len());
    for p in &plans {
        let n = fak_gguf::tensor_n_bytes(&p.name, &p.dims, p.ty)?;
        let n = usize::try_from(n).map_err(|_| {
            spec_err(format!(
                "synthetic model {}: tensor {} ({n} bytes) does not fit in memory",
                spec.name(),
                p.name
            ))
        })?;
        bufs.push(vec![0u8; n]);
    }
    fill_all(&plans, &mut bufs, spec.seed, threads);

    let mut w = metadata(spec)?;
    let mut capacity = 64 * 1024;
    for (p, data) in plans.iter().zip(bufs) {
        capacity += data.len().next_multiple_of(ALIGNMENT) + p.name.len() + 64;
        w.add_tensor(&p.name, &p.dims, p.ty, data)?;
    }
    let mut out = Vec::with_capacity(capacity);
    w.write_to(&mut out)?;
    Ok(out)
}

/// A writer holding `spec`'s metadata (qwen2 keys, no tokenizer).
fn metadata(spec: &SynthSpec) -> Result<GgufWriter, CudaError> {
    let sh = &spec.shape;
    let a = Arch::Qwen2.name();
    let mut w = GgufWriter::new();
    let u32v = |key: &str, v: usize| -> Result<MetaValue, CudaError> {
        u32::try_from(v)
            .map(MetaValue::U32)
            .map_err(|_| spec_err(format!("synthetic model: {key} = {v} does not fit a u32")))
    };
    w.add_kv("general.architecture", MetaValue::from(a))?;
    w.add_kv("general.type", MetaValue::from("model"))?;
    w.add_kv(
        "general.name",
        MetaValue::from(format!("fak synthetic {} (random weights)", spec.name()).as_str()),
    )?;
    let ints = [
        ("block_count", spec.n_layer),
        ("context_length", 32768),
        ("embedding_length", sh.n_embd),
        ("feed_forward_length", sh.n_ff),
        ("attention.head_count", sh.n_head),
        ("attention.head_count_kv", sh.n_head_kv),
        ("attention.key_length", sh.head_dim),
        ("attention.value_length", sh.head_dim),
        ("vocab_size", sh.n_vocab),
    ];
    for (suffix, v) in ints {
        let key = format!("{a}.{suffix}");
        let v = u32v(&key, v)?;
        w.add_kv(&key, v)?;
    }
    w.add_kv(
        &format!("{a}.rope.freq_base"),
        MetaValue::F32(sh.rope_theta),
    )?;
    w.add_kv(
        &format!("{a}.attention.layer_norm_rms_epsilon"),
        MetaValue::F32(1e-6),
    )?;
    Ok(w)
}

/// Bytes of all weight matrices (the 7 per layer plus output.weight), i.e. what one decode pass reads.
pub fn matrix_bytes(spec: &SynthSpec) -> u64 {
    let sh = &spec.shape;
    let (embd, ff) = (sh.n_embd as u64, sh.n_ff as u64);
    let q = (sh.n_head as u64).saturating_mul(sh.head_dim as u64);
    let kv = (sh.n_head_kv as u64).saturating_mul(sh.head_dim as u64);
    let per_layer = [(2, q), (2, kv), (3, ff)]
        .iter()
        .fold(0u64, |acc, &(k, n)| {
            acc.saturating_add(embd.saturating_mul(n).saturating_mul(k))
        });
    let elements = per_layer
        .saturating_mul(spec.n_layer as u64)
        .saturating_add(embd.saturating_mul(sh.n_vocab as u64));
    (elements / spec.ty.block_size() as u64).saturating_mul(spec.ty.type_size() as u64)
}

/// A run of whole rows of one tensor with its own random stream.
struct Chunk<'a> {
    fill: Fill,
    seed: u64,
    data: &'a mut [u8],
}

/// Fills every tensor's buffer (`bufs[i]` holds `plans[i]`) on `threads`
/// threads. Chunks are fixed runs of rows, so the result does not depend
/// on `threads`.
fn fill_all(plans: &[Planned], bufs: &mut [Vec<u8>], seed: u64, threads: usize) {
    let mut chunks = Vec::new();
    for (p, buf) in plans.iter().zip(bufs.iter_mut()) {
        let n_rows = p.dims.iter().skip(1).product::<u64>().max(1);
        let row_bytes = buf.len() / usize::try_from(n_rows).unwrap_or(usize::MAX);
        let tensor_seed = mix(seed ^ fnv1a(&p.name));
        let rows_per_chunk = (CHUNK_BYTES / row_bytes.max(1)).max(1);
        let chunk_bytes = (rows_per_chunk * row_bytes).max(1);
        for (i, data) in buf.chunks_mut(chunk_bytes).enumerate() {
            chunks.push(Chunk {
                fill: p.fill,
                seed: mix(tensor_seed ^ mix(i as u64)),
                data,
            });
        }
    }
    let threads = threads.clamp(1, chunks.len().max(1));
    let queue = Mutex::new(chunks.into_iter());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let next = match queue.lock() {
                    Ok(mut q) => q.next(),
                    Err(poisoned) => poisoned.into_inner().next(),
                };
                match next {
                    Some(c) => fill_chunk(c),
                    None => break,
                }
            });
        }
    });
}

/// Writes random blocks (or values) over `c.data`.
fn fill_chunk(c: Chunk<'_>) {
    let mut rng = SplitMix64(c.seed);
    match c.fill {
        Fill::Q8_0 { d } => {
            for block in c.data.chunks_exact_mut(34) {
                let (head, qs) = block.split_at_mut(2);
                head.copy_from_slice(&d.to_le_bytes());
                for eight in qs.chunks_exact_mut(8) {
                    eight.copy_from_slice(&q8_0_quants(rng.next_u64()).to_le_bytes());
                }
            }
        }
        Fill::Q4K { d, dmin } => {
            for block in c.data.chunks_exact_mut(144) {
                let (head, rest) = block.split_at_mut(4);
                let (scales, qs) = rest.split_at_mut(12);
                head[..2].copy_from_slice(&d.to_le_bytes());
                head[2..].copy_from_slice(&dmin.to_le_bytes());
                let r = rng.next_u64();
                let mut sc = [0u8; 8];
                for (j, s) in sc.iter_mut().enumerate() {
                    *s = 32 + ((r >> (5 * j)) & 31) as u8;
                }
                scales.copy_from_slice(&pack_scale_min_k4(&sc, &sc));
                for eight in qs.chunks_exact_mut(8) {
                    eight.copy_from_slice(&rng.next_u64().to_le_bytes());
                }
            }
        }
        Fill::F32 { lo, hi } => {
            for x in c.data.chunks_exact_mut(4) {
                let u = (rng.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
                x.copy_from_slice(&(lo + (hi - lo) * u).to_le_bytes());
            }
        }
    }
}

/// Eight random i8 quants from 64 random bits: every byte as it is, but
/// -128 (0x80) turned into 0, so the values lie in `[-127, 127]`, uniform
/// but for 0, which is twice as likely. Word-wide: 0x80 bytes are the zero
/// bytes of `r ^ 0x80…80`, found exactly by the carry-free zero-byte test.
fn q8_0_quants(r: u64) -> u64 {
    const LOW7: u64 = 0x7F7F_7F7F_7F7F_7F7F;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let x = r ^ HIGH;
    let is_0x80 = !(((x & LOW7) + LOW7) | x) & HIGH;
    r ^ is_0x80
}

/// Packs 8 six-bit scales and mins into Q4_K's 12 bytes, the inverse of
/// ggml's `get_scale_min_k4`: for `j < 4`, `scales[j]` and `scales[j + 4]`
/// hold `sc_j` and `m_j`; for `j >= 4`, `scales[j + 4]` holds the low
/// nibbles of `sc_j` and `m_j`, and their top two bits go to bits 6-7 of
/// `scales[j - 4]` and `scales[j]`.
fn pack_scale_min_k4(sc: &[u8; 8], m: &[u8; 8]) -> [u8; 12] {
    let mut out = [0u8; 12];
    for j in 0..4 {
        out[j] = sc[j] & 63;
        out[j + 4] = m[j] & 63;
    }
    for j in 4..8 {
        let (s, mm) = (sc[j] & 63, m[j] & 63);
        out[j + 4] = (s & 0x0F) | ((mm & 0x0F) << 4);
        out[j - 4] |= (s >> 4) << 6;
        out[j] |= (mm >> 4) << 6;
    }
    out
}

/// SplitMix64 (Steele, Lea, Flood).
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// One SplitMix64 step of `x`: a well-mixed function of it.
fn mix(x: u64) -> u64 {
    SplitMix64(x).next_u64()
}

/// 64-bit FNV-1a of a name.
fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small custom shape whose `token_embd.weight` spans several chunks.
    const TINY: Shape = Shape {
        name: "tiny",
        n_layer: 2,
        n_embd: 256,
        n_head: 4,
        n_head_kv: 2,
        head_dim: 64,
        n_ff: 512,
        n_vocab: 8000,
        rope_theta: 1e6,
    };

    fn tiny(ty: GgmlType) -> SynthSpec {
        SynthSpec {
            shape: TINY,
            ty,
            n_layer: 2,
            seed: 7,
        }
    }

    fn spec_msg(r: Result<SynthSpec, CudaError>) -> String {
        match r {
            Err(CudaError::Spec(m)) => m,
            other => panic!("expected a spec error, got {other:?}"),
        }
    }

    #[test]
    fn parses_specs_and_names_them() {
        let s = SynthSpec::parse("qwen2.5-7b:q4_k").expect("spec");
        assert_eq!(s.shape, SHAPES[0]);
        assert_eq!((s.ty, s.n_layer), (GgmlType::Q4_K, 28));
        assert_eq!(s.name(), "qwen2.5-7b:q4_k@28");
        let s = SynthSpec::parse("qwen2.5-7b:Q8_0@2").expect("spec");
        assert_eq!((s.ty, s.n_layer), (GgmlType::Q8_0, 2));
        assert_eq!(s.name(), "qwen2.5-7b:q8_0@2");
        assert_eq!(SynthSpec::parse(&s.name()).expect("round trip"), s);
        let a = SynthSpec::parse("qwen2.5-1.5b:q8_0@1").expect("alias");
        assert_eq!(a.shape, SHAPES[1]);
        assert_eq!(a.name(), "qwen2.5-coder-1.5b:q8_0@1");
        assert_eq!(
            SynthSpec::parse("qwen2.5-coder-1.5b:q8_0@1").expect("spec"),
            a
        );
    }

    #[test]
    fn bad_specs_are_one_line_errors() {
        let m = spec_msg(SynthSpec::parse("llama-70b:q4_k"));
        assert!(
            m.contains("qwen2.5-7b") && m.contains("qwen2.5-coder-1.5b"),
            "{m}"
        );
        let m = spec_msg(SynthSpec::parse("qwen2.5-7b:q4_0"));
        assert!(m.contains("q8_0, q4_k"), "{m}");
        let m = spec_msg(SynthSpec::parse("qwen2.5-7b:f16"));
        assert!(m.contains("q8_0, q4_k"), "{m}");
        let m = spec_msg(SynthSpec::parse("qwen2.5-7b"));
        assert!(m.contains("SHAPE:TYPE"), "{m}");
        for bad in [
            "qwen2.5-7b:q4_k@0",
            "qwen2.5-7b:q4_k@29",
            "qwen2.5-7b:q4_k@x",
            "",
        ] {
            let m = spec_msg(SynthSpec::parse(bad));
            assert!(!m.contains('\n'), "{m}");
        }
        // Q4_K needs 256-multiples.
        let mut s = tiny(GgmlType::Q4_K);
        s.shape.n_ff = 320;
        assert!(matches!(gguf_bytes(&s), Err(CudaError::Spec(_))));
        s.ty = GgmlType::Q8_0;
        assert!(gguf_bytes(&s).is_ok());
        s.ty = GgmlType::F16;
        assert!(matches!(gguf_bytes(&s), Err(CudaError::Spec(_))));
    }

    #[test]
    fn q4_k_scales_round_trip_through_ggml_unpacking() {
        let mut rng = SplitMix64(1);
        for _ in 0..2000 {
            let r = rng.next_u64();
            let mut sc = [0u8; 8];
            let mut m = [0u8; 8];
            for j in 0..8 {
                sc[j] = ((r >> (6 * j)) & 63) as u8;
                m[j] = ((r >> (6 * j + 3)) & 63) as u8 ^ (j as u8);
            }
            let packed = pack_scale_min_k4(&sc, &m);
            assert_eq!(fak_kernels::blocks::get_scale_min_k4(&packed), (sc, m));
        }
    }

    #[test]
    fn q4_k_blocks_are_zero_mean_sub_blocks() {
        let fill = Fill::matrix(GgmlType::Q4_K, 1536);
        let Fill::Q4K { d, dmin } = fill else {
            panic!("{fill:?}")
        };
        let (d, dmin) = (
            half::f16::from_bits(d).to_f32(),
            half::f16::from_bits(dmin).to_f32(),
        );
        assert!((dmin / d - 7.5).abs() < 7.5 * 2e-3, "{d} {dmin}");
        let mut data = vec![0u8; 144 * 4];
        fill_chunk(Chunk {
            fill,
            seed: 3,
            data: &mut data,
        });
        let mut out = vec![0f32; 256 * 4];
        fak_kernels::dequantize_row(GgmlType::Q4_K, &data, &mut out).expect("dequantize");
        for (b, block) in data.chunks_exact(144).enumerate() {
            let scales: [u8; 12] = block[4..16].try_into().expect("12 bytes");
            let (sc, m) = fak_kernels::blocks::get_scale_min_k4(&scales);
            assert_eq!(sc, m);
            assert!(sc.iter().all(|s| (32..=63).contains(s)), "{sc:?}");
            let qs = &block[16..];
            for e in 0..256 {
                let (g, l, high) = (e / 64, e % 32, (e % 64) >= 32);
                let byte = qs[g * 32 + l];
                let q = if high { byte >> 4 } else { byte & 0xF };
                let j = e / 32;
                let want = d * f32::from(sc[j]) * (f32::from(q) - 7.5);
                let got = out[b * 256 + e];
                let tol = d * 63.0 * 7.5 * 2e-3 + 1e-9;
                assert!(
                    (got - want).abs() <= tol,
                    "block {b} elem {e}: {got} vs {want}"
                );
            }
        }
        let mean = out.iter().sum::<f32>() / out.len() as f32;
        let std = (out.iter().map(|x| x * x).sum::<f32>() / out.len() as f32).sqrt();
        let target = 1.0 / (1536f32).sqrt();
        assert!(mean.abs() < 0.1 * target, "{mean}");
        assert!(
            std > 0.8 * target && std < 1.3 * target,
            "{std} vs {target}"
        );
    }

    #[test]
    fn q8_0_quants_only_drop_minus_128() {
        let mut rng = SplitMix64(9);
        for _ in 0..10_000 {
            let r = rng.next_u64();
            let want = r.to_le_bytes().map(|b| if b == 0x80 { 0 } else { b });
            assert_eq!(q8_0_quants(r).to_le_bytes(), want, "{r:#x}");
        }
        let all = u64::from_le_bytes([0x80, 0x7F, 0x81, 0x00, 0xFF, 0x80, 0x01, 0x80]);
        assert_eq!(
            q8_0_quants(all).to_le_bytes(),
            [0x00, 0x7F, 0x81, 0x00, 0xFF, 0x00, 0x01, 0x00]
        );
    }

    #[test]
    fn q8_0_blocks_have_the_intended_spread() {
        let fill = Fill::matrix(GgmlType::Q8_0, 3584);
        let mut data = vec![0u8; 34 * 64];
        fill_chunk(Chunk {
            fill,
            seed: 5,
            data: &mut data,
        });
        assert!(data
            .chunks_exact(34)
            .all(|b| b[2..].iter().all(|&q| q != 0x80)));
        let mut out = vec![0f32; 32 * 64];
        fak_kernels::dequantize_row(GgmlType::Q8_0, &data, &mut out).expect("dequantize");
        let std = (out.iter().map(|x| x * x).sum::<f32>() / out.len() as f32).sqrt();
        let target = 1.0 / (3584f32).sqrt();
        assert!(
            std > 0.9 * target && std < 1.1 * target,
            "{std} vs {target}"
        );
    }

    #[test]
    fn bytes_do_not_depend_on_threads_and_follow_the_seed() {
        let s = tiny(GgmlType::Q8_0);
        let one = build(&s, 1).expect("1 thread");
        assert_eq!(one, build(&s, 3).expect("3 threads"));
        let mut other = s;
        other.seed = 8;
        assert_ne!(one, build(&other, 2).expect("other seed"));
        // token_embd spans several 1 MiB chunks, which differ.
        let f = fak_gguf::GgufFile::from_bytes(one).expect("parses");
        let t = f.tensor_data_by_name("token_embd.weight").expect("embd");
        assert!(t.len() > 2 * CHUNK_BYTES);
        let rows = CHUNK_BYTES / (TINY.n_embd / 32 * 34);
        let chunk = rows * (TINY.n_embd / 32 * 34);
        assert_ne!(t[..64], t[chunk..chunk + 64]);
    }

    #[test]
    fn tiny_files_validate_and_count_matrix_bytes() {
        for ty in MATRIX_TYPES {
            let s = tiny(ty);
            let f = fak_gguf::GgufFile::from_bytes(gguf_bytes(&s).expect("bytes")).expect("parses");
            let cfg = fak_gguf::model_config(&f).expect("validates");
            assert_eq!(cfg.arch, Arch::Qwen2);
            assert!(cfg.qkv_bias && !cfg.tied_embeddings);
            let sum: u64 = f
                .tensors()
                .iter()
                .filter(|t| t.dims.len() == 2 && t.name != "token_embd.weight")
                .map(|t| {
                    assert_eq!(t.ty, ty, "{}", t.name);
                    t.n_bytes
                })
                .sum();
            assert_eq!(matrix_bytes(&s), sum);
            let norms = f
                .tensors()
                .iter()
                .filter(|t| t.name.ends_with("norm.weight"))
                .flat_map(|t| f.tensor_data(t).chunks_exact(4))
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]));
            assert!(norms.into_iter().all(|x| (0.8..1.2).contains(&x)));
        }
    }

    #[test]
    fn matrix_bytes_of_qwen_7b() {
        let s = SynthSpec::parse("qwen2.5-7b:q4_k").expect("spec");
        // 28 · (2·3584·3584 + 2·3584·512 + 3·3584·18944) + 3584·152064
        // weights at 144 bytes per 256.
        let elements: u64 =
            28 * (2 * 3584 * 3584 + 2 * 3584 * 512 + 3 * 3584 * 18944) + 3584 * 152064;
        assert_eq!(matrix_bytes(&s), elements / 256 * 144);
    }

    fn check_real(spec: &str) {
        let s = SynthSpec::parse(spec).expect("spec");
        let bytes = gguf_bytes(&s).expect("bytes");
        let file = fak_gguf::GgufFile::from_bytes(bytes).expect("parses");
        let cfg = fak_gguf::model_config(&file).expect("validates");
        let sh = s.shape;
        assert_eq!(
            (cfg.arch, cfg.n_layer, cfg.n_embd, cfg.n_head, cfg.n_head_kv),
            (Arch::Qwen2, 1, sh.n_embd, sh.n_head, sh.n_head_kv)
        );
        assert_eq!(
            (cfg.head_dim, cfg.n_ff, cfg.n_vocab, cfg.n_ctx_train),
            (sh.head_dim, sh.n_ff, sh.n_vocab, 32768)
        );
        assert_eq!((cfg.rope_theta, cfg.rms_eps), (1e6, 1e-6));
        assert!(cfg.qkv_bias && !cfg.tied_embeddings);
        let model = fak_model::Model::from_gguf(file).expect("loads");
        assert_eq!(model.config().n_layer, 1);
    }

    #[test]
    fn qwen_1_5b_q8_0_one_layer_loads() {
        check_real("qwen2.5-1.5b:q8_0@1");
    }

    #[test]
    fn qwen_1_5b_q4_k_one_layer_loads() {
        check_real("qwen2.5-1.5b:q4_k@1");
    }

    /// `FAK_SYNTH_SPEC=qwen2.5-7b:q4_k cargo test --release -p fak-cuda --lib
    /// synth::tests::build_time -- --ignored --nocapture`.
    #[test]
    #[ignore = "timing; run in release"]
    fn build_time() {
        let spec = std::env::var("FAK_SYNTH_SPEC").unwrap_or_else(|_| "qwen2.5-1.5b:q4_k".into());
        let s = SynthSpec::parse(&spec).expect("spec");
        let t = std::time::Instant::now();
        let bytes = gguf_bytes(&s).expect("bytes");
        let dt = t.elapsed();
        println!(
            "{}: {} bytes ({:.2} GB) in {:.2} s on {} threads",
            s.name(),
            bytes.len(),
            bytes.len() as f64 / 1e9,
            dt.as_secs_f64(),
            std::thread::available_parallelism().map_or(1, |n| n.get())
        );
    }
}
