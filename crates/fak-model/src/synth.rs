//! Synthetic GGUF models with random weights, for checking architecture
//! math against llama.cpp where no small trained model is at hand.
//!
//! Each [`SynthModel`] is a real architecture's head geometry and metadata
//! keys (qwen3: head_dim 128, 16 query heads, 8 KV heads; llama 3.2 1B:
//! head_dim 64, 32 query heads, 8 KV heads, llama3 rope factors) with few
//! layers, a narrow embedding and a 960-token byte-level BPE vocabulary,
//! so a file is a few MB. Every tensor is drawn from a 64-bit LCG seeded by
//! the spec's seed and the tensor's name, so the same spec always gives
//! the same bytes (the goldens record their SHA-256) and dropping one
//! tensor leaves every other tensor unchanged.
//!
//! ```text
//! fak-model example synth_gguf ──► file.gguf ──► llama.cpp (bench/peers/synth_golden.py)
//!        │                                             │ teacher-forced logits
//!        └─ synth::bytes(model, Ablation::None) ──► fak ┴─► tests/synth.rs compares
//! ```
//!
//! [`Ablation::DropFeature`] writes the same weights without the feature
//! under test (qwen3: as a qwen2 file with zero q/k/v biases and no q/k
//! norm; llama: without `rope_freqs.weight`), so a test can show that the
//! comparison fails without it. Random weights check the math and the
//! metadata handling only, not a trained model's quality.

use fak_gguf::{Arch, GgmlType, GgufWriter, MetaArray, MetaValue};
use fak_kernels::blocks::GridFormat;
use fak_kernels::fp::f32_to_f16;

use crate::error::ModelError;

/// The synthetic models.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SynthModel {
    /// qwen3 geometry (Qwen3-0.6B heads): q/k norm, NeoX rope, no biases;
    /// Q8_0 matrices, F16 tied embeddings.
    Qwen3,
    /// llama 3.2 1B geometry: llama3 rope factors (`rope_freqs.weight`),
    /// base 500000; F16 matrices, Q8_0 embeddings and output.
    Llama32,
    /// llama geometry (as [`SynthModel::Llama32`], without rope factors)
    /// whose fourteen matrices cycle through the seven codebook formats
    /// (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S): random
    /// blocks, scaled to the other models' weight spread.
    IqGrids,
}

/// The types of the attention and feed-forward matrices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Matrices {
    /// Every matrix of one type, from random values through fak's
    /// quantizer.
    Uniform(GgmlType),
    /// Matrix `m` of layer `i` (q, k, v, output, gate, up, down) in codebook
    /// format `GridFormat::CODEBOOK[(m + 3·i) % 7]`, as random blocks.
    GridCycle,
}

/// The same weights with or without the feature the model is there for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ablation {
    /// The model as specified.
    None,
    /// Without it: qwen3's q/k norm (the file becomes qwen2 with zero
    /// biases, otherwise the same math), llama's `rope_freqs.weight`, or
    /// (the codebook model) the IQ1 formats' shift signs, flipped.
    DropFeature,
}

/// Llama 3 rope scaling parameters, turned into `rope_freqs.weight` as
/// llama.cpp's converter does (`conversion/llama.py`,
/// `generate_extra_tensors`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Llama3Rope {
    /// `factor`.
    pub factor: f64,
    /// `low_freq_factor`.
    pub low_freq_factor: f64,
    /// `high_freq_factor`.
    pub high_freq_factor: f64,
    /// `original_max_position_embeddings`.
    pub original_context: f64,
}

/// Where the output projection comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// `token_embd.weight` (no `output.weight`).
    Tied,
    /// An `output.weight` of this type.
    Separate(GgmlType),
}

/// Everything that determines a synthetic file.
#[derive(Debug, Clone, PartialEq)]
pub struct SynthSpec {
    /// `general.architecture`.
    pub arch: Arch,
    /// `tokenizer.ggml.pre`.
    pub pre: &'static str,
    /// Seed of every tensor's LCG.
    pub seed: u64,
    /// Blocks.
    pub n_layer: usize,
    /// Hidden size.
    pub n_embd: usize,
    /// Query heads.
    pub n_head: usize,
    /// Key/value heads.
    pub n_head_kv: usize,
    /// Elements per head (`attention.key_length` / `value_length`).
    pub head_dim: usize,
    /// Feed-forward size.
    pub n_ff: usize,
    /// `context_length`.
    pub n_ctx_train: usize,
    /// `rope.freq_base`.
    pub rope_theta: f32,
    /// `attention.layer_norm_rms_epsilon`.
    pub rms_eps: f32,
    /// Types of the attention and feed-forward matrices.
    pub matrices: Matrices,
    /// Type of `token_embd.weight`.
    pub embd_type: GgmlType,
    /// Embedding values are uniform in `[-embd_scale, embd_scale]`: small,
    /// so the layers' outputs, not the input token's own row, dominate the
    /// residual stream and the logits.
    pub embd_scale: f32,
    /// The output projection.
    pub output: Output,
    /// Llama 3 rope factors, if any.
    pub rope_scaling: Option<Llama3Rope>,
}

/// Vocabulary size of every synthetic model: 256 byte tokens, 702 merges,
/// 2 special tokens.
pub const N_VOCAB: usize = 960;

impl SynthModel {
    /// Every model.
    pub const ALL: [SynthModel; 3] = [SynthModel::Qwen3, SynthModel::Llama32, SynthModel::IqGrids];

    /// The name used in file names and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            SynthModel::Qwen3 => "qwen3",
            SynthModel::Llama32 => "llama3.2",
            SynthModel::IqGrids => "iq-grids",
        }
    }

    /// Parses [`SynthModel::name`].
    pub fn from_name(s: &str) -> Option<SynthModel> {
        SynthModel::ALL.into_iter().find(|m| m.name() == s)
    }

    /// The spec.
    pub fn spec(self) -> SynthSpec {
        match self {
            SynthModel::Qwen3 => SynthSpec {
                arch: Arch::Qwen3,
                pre: "qwen2",
                seed: 0x5157_454e_0003,
                n_layer: 2,
                n_embd: 256,
                n_head: 16,
                n_head_kv: 8,
                head_dim: 128,
                n_ff: 512,
                n_ctx_train: 40960,
                rope_theta: 1_000_000.0,
                rms_eps: 1e-6,
                matrices: Matrices::Uniform(GgmlType::Q8_0),
                embd_type: GgmlType::F16,
                embd_scale: 0.1,
                output: Output::Tied,
                rope_scaling: None,
            },
            SynthModel::Llama32 => SynthSpec {
                arch: Arch::Llama,
                pre: "llama-bpe",
                seed: 0x4c4c_414d_0302,
                n_layer: 2,
                n_embd: 256,
                n_head: 32,
                n_head_kv: 8,
                head_dim: 64,
                n_ff: 512,
                n_ctx_train: 131072,
                rope_theta: 500_000.0,
                rms_eps: 1e-5,
                matrices: Matrices::Uniform(GgmlType::F16),
                embd_type: GgmlType::Q8_0,
                embd_scale: 0.1,
                output: Output::Separate(GgmlType::Q8_0),
                // Llama 3.2's config.json values.
                rope_scaling: Some(Llama3Rope {
                    factor: 32.0,
                    low_freq_factor: 1.0,
                    high_freq_factor: 4.0,
                    original_context: 8192.0,
                }),
            },
            SynthModel::IqGrids => SynthSpec {
                seed: 0x4951_4752_4944,
                matrices: Matrices::GridCycle,
                rope_scaling: None,
                ..SynthModel::Llama32.spec()
            },
        }
    }
}

/// The GGUF bytes of `model` (deterministic).
pub fn bytes(model: SynthModel, ablation: Ablation) -> Result<Vec<u8>, ModelError> {
    Ok(writer(&model.spec(), ablation)?.to_bytes()?)
}

/// Llama 3 rope factors for `dim` rotated dimensions at `base`
/// (`[dim / 2]`), computed in f64 and stored as f32.
pub fn llama3_rope_factors(r: &Llama3Rope, base: f64, dim: usize) -> Vec<f32> {
    let low_wavelen = r.original_context / r.low_freq_factor;
    let high_wavelen = r.original_context / r.high_freq_factor;
    (0..dim / 2)
        .map(|i| {
            let freq = 1.0 / base.powf((2 * i) as f64 / dim as f64);
            let wavelen = 2.0 * std::f64::consts::PI / freq;
            let f = if wavelen < high_wavelen {
                1.0
            } else if wavelen > low_wavelen {
                r.factor
            } else {
                let smooth = (r.original_context / wavelen - r.low_freq_factor)
                    / (r.high_freq_factor - r.low_freq_factor);
                1.0 / ((1.0 - smooth) / r.factor + smooth)
            };
            f as f32
        })
        .collect()
}

/// A writer holding the whole file of `spec`.
pub fn writer(spec: &SynthSpec, ablation: Ablation) -> Result<GgufWriter, ModelError> {
    // Dropping qwen3's q/k norm: qwen2 has the same graph without it, and
    // zero biases add nothing.
    let (arch, zero_biases) = match (spec.arch, ablation) {
        (Arch::Qwen3, Ablation::DropFeature) => (Arch::Qwen2, true),
        (a, _) => (a, false),
    };
    let mut w = GgufWriter::new();
    let a = arch.name();
    let u32v = |v: usize| MetaValue::U32(v as u32);
    w.add_kv("general.architecture", MetaValue::from(a))?;
    w.add_kv("general.type", MetaValue::from("model"))?;
    w.add_kv(
        "general.name",
        MetaValue::from(format!("fak synthetic {} (random weights)", spec.arch.name()).as_str()),
    )?;
    w.add_kv(&format!("{a}.block_count"), u32v(spec.n_layer))?;
    w.add_kv(&format!("{a}.context_length"), u32v(spec.n_ctx_train))?;
    w.add_kv(&format!("{a}.embedding_length"), u32v(spec.n_embd))?;
    w.add_kv(&format!("{a}.feed_forward_length"), u32v(spec.n_ff))?;
    w.add_kv(&format!("{a}.attention.head_count"), u32v(spec.n_head))?;
    w.add_kv(
        &format!("{a}.attention.head_count_kv"),
        u32v(spec.n_head_kv),
    )?;
    w.add_kv(&format!("{a}.attention.key_length"), u32v(spec.head_dim))?;
    w.add_kv(&format!("{a}.attention.value_length"), u32v(spec.head_dim))?;
    w.add_kv(
        &format!("{a}.rope.freq_base"),
        MetaValue::F32(spec.rope_theta),
    )?;
    w.add_kv(
        &format!("{a}.attention.layer_norm_rms_epsilon"),
        MetaValue::F32(spec.rms_eps),
    )?;
    if arch == Arch::Llama {
        w.add_kv(&format!("{a}.rope.dimension_count"), u32v(spec.head_dim))?;
        w.add_kv(&format!("{a}.vocab_size"), u32v(N_VOCAB))?;
    }
    add_tokenizer(&mut w, spec.pre)?;

    let mut t = Tensors {
        w: &mut w,
        seed: spec.seed,
        ablation,
    };
    let (embd, q, kv, ff) = (
        spec.n_embd,
        spec.n_head * spec.head_dim,
        spec.n_head_kv * spec.head_dim,
        spec.n_ff,
    );
    // Uniform in [-s, s] has standard deviation s / √3: matrices keep
    // activations near unit scale, norm weights stay around 1.
    let mat = |n_in: usize| 3f32.sqrt() / (n_in as f32).sqrt();
    t.uniform(
        "token_embd.weight",
        &[embd, N_VOCAB],
        spec.embd_type,
        spec.embd_scale,
        0.0,
    )?;
    t.uniform("output_norm.weight", &[embd], GgmlType::F32, 0.2, 1.0)?;
    if let Output::Separate(ty) = spec.output {
        t.uniform("output.weight", &[embd, N_VOCAB], ty, 2.0 * mat(embd), 0.0)?;
    }
    if let (Some(r), Ablation::None) = (&spec.rope_scaling, ablation) {
        let f = llama3_rope_factors(r, spec.rope_theta as f64, spec.head_dim);
        let data = f.iter().flat_map(|x| x.to_le_bytes()).collect();
        t.w.add_tensor("rope_freqs.weight", &[f.len() as u64], GgmlType::F32, data)?;
    }
    for i in 0..spec.n_layer {
        let n = |s: &str| format!("blk.{i}.{s}");
        // Matrix `m` of this layer: `dims` its ggml shape (inputs first).
        let matrix = |t: &mut Tensors, m: usize, name: &str, dims: [usize; 2]| match spec.matrices {
            Matrices::Uniform(ty) => t.uniform(&n(name), &dims, ty, mat(dims[0]), 0.0),
            Matrices::GridCycle => {
                let fmt = GridFormat::CODEBOOK[(m + 3 * i) % GridFormat::CODEBOOK.len()];
                t.grid(&n(name), &dims, fmt, mat(dims[0]))
            }
        };
        t.uniform(&n("attn_norm.weight"), &[embd], GgmlType::F32, 0.2, 1.0)?;
        matrix(&mut t, 0, "attn_q.weight", [embd, q])?;
        matrix(&mut t, 1, "attn_k.weight", [embd, kv])?;
        matrix(&mut t, 2, "attn_v.weight", [embd, kv])?;
        if zero_biases {
            for (name, len) in [("attn_q.bias", q), ("attn_k.bias", kv), ("attn_v.bias", kv)] {
                t.uniform(&n(name), &[len], GgmlType::F32, 0.0, 0.0)?;
            }
        }
        if spec.arch == Arch::Qwen3 && !zero_biases {
            let hd = spec.head_dim;
            t.uniform(&n("attn_q_norm.weight"), &[hd], GgmlType::F32, 0.5, 1.0)?;
            t.uniform(&n("attn_k_norm.weight"), &[hd], GgmlType::F32, 0.5, 1.0)?;
        }
        matrix(&mut t, 3, "attn_output.weight", [q, embd])?;
        t.uniform(&n("ffn_norm.weight"), &[embd], GgmlType::F32, 0.2, 1.0)?;
        matrix(&mut t, 4, "ffn_gate.weight", [embd, ff])?;
        matrix(&mut t, 5, "ffn_up.weight", [embd, ff])?;
        matrix(&mut t, 6, "ffn_down.weight", [ff, embd])?;
    }
    Ok(w)
}

/// Adds random tensors to a writer.
struct Tensors<'a> {
    w: &'a mut GgufWriter,
    seed: u64,
    ablation: Ablation,
}

impl Tensors<'_> {
    /// Tensor `name` of ggml shape `dims`, values `center + s·u` with `u`
    /// uniform in [-1, 1) from an LCG seeded by the spec's seed and the
    /// name, converted to `ty` (f16 rounding or ggml's reference
    /// quantizer).
    fn uniform(
        &mut self,
        name: &str,
        dims: &[usize],
        ty: GgmlType,
        s: f32,
        center: f32,
    ) -> Result<(), ModelError> {
        let mut rng = Lcg::new(self.seed ^ fnv1a(name));
        let row_len = dims[0];
        let n: usize = dims.iter().product();
        let values: Vec<f32> = (0..n).map(|_| center + s * rng.next_signed()).collect();
        let mut data = Vec::new();
        for row in values.chunks_exact(row_len) {
            let bytes =
                fak_kernels::quantize_row_to_vec(ty, row).map_err(|source| ModelError::Kernel {
                    tensor: name.to_string(),
                    source,
                })?;
            data.extend_from_slice(&bytes);
        }
        let dims: Vec<u64> = dims.iter().map(|&d| d as u64).collect();
        self.w.add_tensor(name, &dims, ty, data)?;
        Ok(())
    }
}

impl Tensors<'_> {
    /// Tensor `name` of ggml shape `dims` in codebook format `fmt`: random
    /// block bytes from the name's LCG, every block's f16 scale then set so
    /// that the weights' RMS is that of uniform values in `[-s, s]`
    /// (`s / √3`).
    fn grid(
        &mut self,
        name: &str,
        dims: &[usize],
        fmt: GridFormat,
        s: f32,
    ) -> Result<(), ModelError> {
        let mut rng = Lcg::new(self.seed ^ fnv1a(name));
        let n: usize = dims.iter().product();
        let blocks = n / 256;
        let mut data: Vec<u8> = (0..blocks * fmt.bytes()).map(|_| rng.next_byte()).collect();
        let kernel = |source| ModelError::Kernel {
            tensor: name.to_string(),
            source,
        };
        let set_d = |data: &mut [u8], d: u16| {
            for b in data.chunks_exact_mut(fmt.bytes()) {
                set_grid_scale(fmt, b, d);
            }
        };
        set_d(&mut data, f32_to_f16(1.0));
        let values = fak_kernels::dequantize_row_to_vec(fmt.ty(), &data, n).map_err(kernel)?;
        let rms = (values.iter().map(|v| f64::from(*v).powi(2)).sum::<f64>() / n as f64).sqrt();
        let target = f64::from(s) / 3f64.sqrt();
        set_d(&mut data, f32_to_f16((target / rms) as f32));
        if self.ablation == Ablation::DropFeature {
            flip_iq1_shifts(fmt, &mut data);
        }
        let dims: Vec<u64> = dims.iter().map(|&d| d as u64).collect();
        self.w.add_tensor(name, &dims, fmt.ty(), data)?;
        Ok(())
    }
}

/// Writes a codebook block's f16 super-block scale `d` (IQ1_M keeps it in
/// the top nibbles of its four scale words; the others in bytes 0..2).
fn set_grid_scale(fmt: GridFormat, b: &mut [u8], d: u16) {
    if fmt == GridFormat::IQ1_M {
        for k in 0..4 {
            let at = 48 + 2 * k;
            let w = u16::from_le_bytes([b[at], b[at + 1]]) & 0x0FFF;
            let w = w | (((d >> (4 * k)) & 0xF) << 12);
            b[at..at + 2].copy_from_slice(&w.to_le_bytes());
        }
    } else {
        b[..2].copy_from_slice(&d.to_le_bytes());
    }
}

/// The ablation of [`SynthModel::IqGrids`]: every IQ1 shift sign flipped
/// (`+1/8` for `-1/8` and back), the smallest part of any codebook
/// format's decoding. Other formats are left alone.
fn flip_iq1_shifts(fmt: GridFormat, data: &mut [u8]) {
    for b in data.chunks_exact_mut(fmt.bytes()) {
        match fmt {
            GridFormat::IQ1_S => (0..8).for_each(|ib| b[34 + 2 * ib + 1] ^= 0x80),
            GridFormat::IQ1_M => b[32..48].iter_mut().for_each(|h| *h ^= 0x88),
            _ => {}
        }
    }
}

/// Knuth's MMIX LCG; the top 24 bits of each state make one value.
struct Lcg(u64);

impl Lcg {
    fn new(seed: u64) -> Lcg {
        Lcg(seed)
    }

    /// Uniform in [-1, 1), multiples of 2^-23.
    fn next_signed(&mut self) -> f32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 40) as f32) / (1u64 << 23) as f32 - 1.0
    }

    /// A uniform byte (the state's top 8 bits).
    fn next_byte(&mut self) -> u8 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 56) as u8
    }
}

/// 64-bit FNV-1a of a name.
fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// GPT-2's byte-to-character map: printable bytes stand for themselves,
/// the others for U+0100 upwards in byte order.
fn byte_char(b: u8) -> char {
    let printable = |x: u8| matches!(x, 33..=126 | 161..=172 | 174..=255);
    if printable(b) {
        return char::from(b);
    }
    let below = (0..b).filter(|&x| !printable(x)).count() as u32;
    char::from_u32(256 + below).unwrap_or('?')
}

/// A byte-level BPE vocabulary (`gpt2` model): the 256 byte tokens, merges
/// `Ġ x` and `x y` over lower-case letters, then `<|endoftext|>` (BOS and
/// EOS) and `<|pad|>`; [`N_VOCAB`] tokens in all.
fn add_tokenizer(w: &mut GgufWriter, pre: &str) -> Result<(), ModelError> {
    let mut tokens: Vec<String> = (0..=255u8).map(|b| byte_char(b).to_string()).collect();
    let mut merges = Vec::new();
    let space = byte_char(b' ');
    let letters: Vec<char> = ('a'..='z').collect();
    for &x in &letters {
        merges.push(format!("{space} {x}"));
        tokens.push(format!("{space}{x}"));
    }
    for &x in &letters {
        for &y in &letters {
            merges.push(format!("{x} {y}"));
            tokens.push(format!("{x}{y}"));
        }
    }
    let eos = tokens.len();
    tokens.push("<|endoftext|>".into());
    tokens.push("<|pad|>".into());
    debug_assert_eq!(tokens.len(), N_VOCAB);
    let mut types = vec![1i32; tokens.len()];
    types[eos] = 3;
    types[eos + 1] = 3;
    w.add_kv("tokenizer.ggml.model", MetaValue::from("gpt2"))?;
    w.add_kv("tokenizer.ggml.pre", MetaValue::from(pre))?;
    w.add_kv(
        "tokenizer.ggml.tokens",
        MetaValue::Array(MetaArray::Str(tokens)),
    )?;
    w.add_kv(
        "tokenizer.ggml.token_type",
        MetaValue::Array(MetaArray::I32(types)),
    )?;
    w.add_kv(
        "tokenizer.ggml.merges",
        MetaValue::Array(MetaArray::Str(merges)),
    )?;
    w.add_kv("tokenizer.ggml.bos_token_id", MetaValue::U32(eos as u32))?;
    w.add_kv("tokenizer.ggml.eos_token_id", MetaValue::U32(eos as u32))?;
    w.add_kv(
        "tokenizer.ggml.padding_token_id",
        MetaValue::U32(eos as u32 + 1),
    )?;
    w.add_kv("tokenizer.ggml.add_bos_token", MetaValue::Bool(false))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_map_is_gpt2s() {
        assert_eq!(byte_char(b'a'), 'a');
        assert_eq!(byte_char(b' '), 'Ġ');
        assert_eq!(byte_char(b'\n'), 'Ċ');
        assert_eq!(byte_char(0), 'Ā');
        assert_eq!(byte_char(173), 'Ń');
        let all: std::collections::HashSet<char> = (0..=255u8).map(byte_char).collect();
        assert_eq!(all.len(), 256);
    }

    #[test]
    fn llama3_factors_follow_the_converter() {
        // Llama 3.2 (base 500000, head_dim 64, factor 32, 1 / 4, 8192):
        // high frequencies unscaled, the lowest divided by 32, a smooth
        // ramp in between.
        let r = SynthModel::Llama32
            .spec()
            .rope_scaling
            .expect("llama3 rope");
        let f = llama3_rope_factors(&r, 500_000.0, 64);
        assert_eq!(f.len(), 32);
        assert_eq!(f[0], 1.0);
        assert_eq!(f[31], 32.0);
        assert!(f.windows(2).all(|p| p[0] <= p[1]), "{f:?}");
        assert!(f.iter().any(|&x| x > 1.0 && x < 32.0), "{f:?}");
    }

    #[test]
    fn bytes_are_deterministic_and_valid() {
        for m in SynthModel::ALL {
            let a = bytes(m, Ablation::None).expect("synthetic file");
            assert_eq!(a, bytes(m, Ablation::None).expect("again"));
            let file = fak_gguf::GgufFile::from_bytes(a).expect("parses");
            let cfg = fak_gguf::model_config(&file).expect("validates");
            let spec = m.spec();
            assert_eq!(cfg.arch, spec.arch);
            assert_eq!(
                (cfg.n_head, cfg.n_head_kv, cfg.head_dim, cfg.n_vocab),
                (spec.n_head, spec.n_head_kv, spec.head_dim, N_VOCAB)
            );
            assert_eq!(cfg.rope_freq_factors.is_some(), spec.rope_scaling.is_some());
        }
    }
}
