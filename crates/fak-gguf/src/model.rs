//! Architecture hyperparameters, validated against the tensors they imply.
//!
//! [`model_config`] reads the `{arch}.*` keys of a llama, qwen2, qwen3 or
//! gemma3 file (gemma3's own keys in [`gemma3`]), applies llama.cpp's
//! defaults, sanity-checks every value, checks special token ids against
//! the vocabulary, refuses features fak does not implement (rope scaling
//! types, mixture of experts), and finally checks that every tensor the
//! architecture needs exists with the implied shape and that no unused
//! tensor is present (see the `shapes` submodule). Llama 3.x's
//! per-dimension rope frequency factors (`rope_freqs.weight`) are read and
//! checked in the `rope_freqs` submodule.

pub mod gemma3;
mod rope_freqs;
mod shapes;

use crate::error::GgufError;
use crate::file::GgufFile;
use crate::value::MetaValue;
pub use gemma3::{Gemma3Params, LayerAttn, SlidingWindow};

/// Model architectures fak runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Arch {
    /// Llama family (also SmolLM, Mistral without sliding window, ...).
    Llama,
    /// Qwen2 family: llama layout plus q/k/v biases and NeoX rope.
    Qwen2,
    /// Qwen3 family: llama layout, NeoX rope, and a per-head RMSNorm on q
    /// and k before rope (`attn_q_norm` / `attn_k_norm`); no q/k/v biases.
    Qwen3,
    /// Gemma 3: q/k norms, post-attention/FFN norms, GELU, sliding windows.
    Gemma3,
}

impl Arch {
    /// The `general.architecture` string.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
            Arch::Qwen3 => "qwen3",
            Arch::Gemma3 => "gemma3",
        }
    }

    /// Parses a `general.architecture` string.
    pub fn from_name(s: &str) -> Option<Arch> {
        match s {
            "llama" => Some(Arch::Llama),
            "qwen2" => Some(Arch::Qwen2),
            "qwen3" => Some(Arch::Qwen3),
            "gemma3" => Some(Arch::Gemma3),
            _ => None,
        }
    }

    /// How this architecture pairs up dimensions for rotary embeddings.
    pub fn rope_style(self) -> RopeStyle {
        match self {
            Arch::Llama => RopeStyle::Normal,
            Arch::Qwen2 | Arch::Qwen3 | Arch::Gemma3 => RopeStyle::Neox,
        }
    }

    /// Whether q and k are normalized per head before rope.
    pub fn qk_norm(self) -> QkNorm {
        match self {
            // Gemma 3 has per-head norms too, loaded with its other norms
            // (`gemma3` in fak-model).
            Arch::Llama | Arch::Qwen2 | Arch::Gemma3 => QkNorm::None,
            Arch::Qwen3 => QkNorm::PerHead,
        }
    }

    /// Whether the architecture reads per-dimension rope frequency factors
    /// (`rope_freqs.weight`, llama 3.x) when the file has them; llama.cpp
    /// loads that tensor for llama only.
    pub fn takes_rope_freqs(self) -> bool {
        matches!(self, Arch::Llama)
    }
}

/// Normalization of the query and key heads between their projections and
/// rope.
///
/// ```text
/// None:     q = Wq·h            k = Wk·h
/// PerHead:  q_h = rms_norm(q_h) · attn_q_norm    k_h = rms_norm(k_h) · attn_k_norm
///           (each head of head_dim values on its own, eps = rms epsilon)  (qwen3)
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QkNorm {
    /// No normalization.
    None,
    /// RMSNorm over each head, weights `blk.N.attn_{q,k}_norm.weight`
    /// (`[head_dim]`).
    PerHead,
}

/// Which elements of a head vector rotary embedding rotates together.
///
/// ```text
/// Normal: (x0,x1) (x2,x3) (x4,x5) ...        adjacent pairs      (llama)
/// Neox:   (x0,x_{d/2}) (x1,x_{d/2+1}) ...    halves paired up    (qwen2)
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RopeStyle {
    /// Rotate `(x[2i], x[2i+1])`.
    Normal,
    /// Rotate `(x[i], x[i + d/2])`.
    Neox,
}

/// Validated model hyperparameters.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    /// Architecture.
    pub arch: Arch,
    /// Vocabulary size (rows of `token_embd.weight`).
    pub n_vocab: usize,
    /// Hidden size.
    pub n_embd: usize,
    /// Number of transformer blocks.
    pub n_layer: usize,
    /// Query heads.
    pub n_head: usize,
    /// Key/value heads (divides `n_head`).
    pub n_head_kv: usize,
    /// Elements per attention head (even).
    pub head_dim: usize,
    /// Feed-forward hidden size.
    pub n_ff: usize,
    /// Context length the model was trained with.
    pub n_ctx_train: usize,
    /// Rope base frequency.
    pub rope_theta: f32,
    /// Leading head dimensions that rope rotates (even, <= `head_dim`).
    pub rope_dim: usize,
    /// Rope pairing.
    pub rope_style: RopeStyle,
    /// RMS norm epsilon.
    pub rms_eps: f32,
    /// `true` if there is no `output.weight` and the output projection
    /// reuses `token_embd.weight`.
    pub tied_embeddings: bool,
    /// `true` if every layer has `attn_{q,k,v}.bias`.
    pub qkv_bias: bool,
    /// Per-head q/k normalization before rope.
    pub qk_norm: QkNorm,
    /// Rope frequency factors (`rope_freqs.weight`, `[rope_dim / 2]`,
    /// finite and positive): angle `i` is divided by factor `i`, as
    /// llama.cpp's `ggml_rope_ext` does with `freq_factors` (llama 3.x rope
    /// scaling). `None`: every factor is 1.
    pub rope_freq_factors: Option<Vec<f32>>,
    /// Gemma 3's windows, local RoPE base, query scale and soft-cap
    /// (`Some` exactly for [`Arch::Gemma3`]).
    pub gemma3: Option<Gemma3Params>,
}

impl ModelConfig {
    /// Width of the query projection, `n_head * head_dim`.
    pub fn n_embd_q(&self) -> usize {
        self.n_head.saturating_mul(self.head_dim)
    }

    /// Width of the key and value projections, `n_head_kv * head_dim`.
    pub fn n_embd_kv(&self) -> usize {
        self.n_head_kv.saturating_mul(self.head_dim)
    }
}

/// Largest block count accepted.
pub const MAX_LAYERS: u64 = 512;

/// Largest embedding / feed-forward / vocabulary size accepted (2^24).
pub const MAX_WIDTH: u64 = 1 << 24;

/// Largest head count accepted.
pub const MAX_HEADS: u64 = 4096;

/// Largest training context accepted (2^32).
pub const MAX_CONTEXT: u64 = 1 << 32;

pub(crate) fn bad(key: &str, reason: impl Into<String>) -> GgufError {
    GgufError::BadHyperparameter {
        key: key.to_string(),
        reason: reason.into(),
    }
}

/// An integer in `1..=max`, as `usize`.
fn in_range(key: &str, v: u64, max: u64) -> Result<usize, GgufError> {
    if v == 0 || v > max {
        return Err(bad(key, format!("{v} is outside 1..={max}")));
    }
    usize::try_from(v).map_err(|_| bad(key, format!("{v} does not fit this platform")))
}

fn required_uint(file: &GgufFile, key: &str, max: u64) -> Result<usize, GgufError> {
    let v = file.get_uint(key)?.ok_or_else(|| GgufError::MissingKey {
        key: key.to_string(),
    })?;
    in_range(key, v, max)
}

fn optional_uint(file: &GgufFile, key: &str, max: u64) -> Result<Option<usize>, GgufError> {
    file.get_uint(key)?
        .map(|v| in_range(key, v, max))
        .transpose()
}

pub(crate) fn positive_f32(key: &str, v: f32) -> Result<f32, GgufError> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(bad(key, format!("{v} is not a finite positive number")))
    }
}

/// Reads, checks and cross-checks a llama / qwen2 / qwen3 / gemma3 model's hyperparameters
/// and tensor shapes.
pub fn model_config(file: &GgufFile) -> Result<ModelConfig, GgufError> {
    let arch_key = "general.architecture";
    let arch_name = file
        .get_str(arch_key)?
        .ok_or_else(|| GgufError::MissingKey {
            key: arch_key.into(),
        })?;
    let arch = Arch::from_name(arch_name).ok_or_else(|| GgufError::UnsupportedArch {
        arch: arch_name.chars().take(80).collect(),
    })?;
    let k = |suffix: &str| format!("{}.{suffix}", arch.name());

    let n_layer_key = k("block_count");
    let n_layer = required_uint(file, &n_layer_key, MAX_LAYERS)?;
    if n_layer > file.tensors().len() {
        return Err(bad(
            &n_layer_key,
            format!(
                "{n_layer} layers but the file has only {} tensors",
                file.tensors().len()
            ),
        ));
    }
    let n_embd = required_uint(file, &k("embedding_length"), MAX_WIDTH)?;
    let n_ff = required_uint(file, &k("feed_forward_length"), MAX_WIDTH)?;
    let n_ctx_train = required_uint(file, &k("context_length"), MAX_CONTEXT)?;
    let head_key = k("attention.head_count");
    let n_head = required_uint(file, &head_key, MAX_HEADS)?;
    let kv_key = k("attention.head_count_kv");
    let n_head_kv = optional_uint(file, &kv_key, MAX_HEADS)?.unwrap_or(n_head);
    if n_head % n_head_kv != 0 {
        return Err(bad(
            &kv_key,
            format!("{n_head_kv} does not divide head_count {n_head}"),
        ));
    }

    let key_len_key = k("attention.key_length");
    let head_dim = match optional_uint(file, &key_len_key, MAX_WIDTH)? {
        Some(d) => d,
        None if n_embd % n_head == 0 => n_embd / n_head,
        None => {
            return Err(bad(
                &head_key,
                format!(
                "{n_head} does not divide embedding_length {n_embd} (and no attention.key_length)"
            ),
            ))
        }
    };
    if head_dim % 2 != 0 {
        return Err(bad(
            &key_len_key,
            format!("head dimension {head_dim} is odd"),
        ));
    }
    let value_len_key = k("attention.value_length");
    if let Some(v) = optional_uint(file, &value_len_key, MAX_WIDTH)? {
        if v != head_dim {
            return Err(GgufError::UnsupportedFeature {
                key: value_len_key,
                feature: format!(
                    "a value head size ({v}) different from the key head size ({head_dim})"
                ),
            });
        }
    }

    let rope_dim_key = k("rope.dimension_count");
    let rope_dim = optional_uint(file, &rope_dim_key, MAX_WIDTH)?.unwrap_or(head_dim);
    if rope_dim % 2 != 0 || rope_dim > head_dim {
        return Err(bad(
            &rope_dim_key,
            format!("{rope_dim} must be even and at most the head dimension {head_dim}"),
        ));
    }
    let theta_key = k("rope.freq_base");
    let rope_theta = positive_f32(&theta_key, file.get_f32(&theta_key)?.unwrap_or(10000.0))?;
    let eps_key = k("attention.layer_norm_rms_epsilon");
    let rms_eps = file
        .get_f32(&eps_key)?
        .ok_or_else(|| GgufError::MissingKey {
            key: eps_key.clone(),
        })?;
    let rms_eps = positive_f32(&eps_key, rms_eps)?;

    check_unsupported(file, arch)?;
    let gemma3 = match arch {
        Arch::Gemma3 => Some(gemma3::read(file, (n_layer, n_embd, n_head, head_dim))?),
        Arch::Llama | Arch::Qwen2 | Arch::Qwen3 => None,
    };
    let n_vocab = vocab_size(file, arch)?;
    check_special_tokens(file, n_vocab)?;

    let mut cfg = ModelConfig {
        arch,
        n_vocab,
        n_embd,
        n_layer,
        n_head,
        n_head_kv,
        head_dim,
        n_ff,
        n_ctx_train,
        rope_theta,
        rope_dim,
        rope_style: arch.rope_style(),
        rms_eps,
        tied_embeddings: false,
        qkv_bias: false,
        qk_norm: arch.qk_norm(),
        rope_freq_factors: None,
        gemma3,
    };
    let layout = shapes::check_tensors(file, &cfg)?;
    cfg.tied_embeddings = layout.tied_embeddings;
    cfg.qkv_bias = layout.qkv_bias;
    cfg.rope_freq_factors = rope_freqs::read(file, &cfg)?;
    Ok(cfg)
}

/// Rejects keys that request features fak does not implement.
fn check_unsupported(file: &GgufFile, arch: Arch) -> Result<(), GgufError> {
    let k = |suffix: &str| format!("{}.{suffix}", arch.name());
    let scaling_key = k("rope.scaling.type");
    if let Some(t) = file.get_str(&scaling_key)? {
        if t != "none" {
            return Err(GgufError::UnsupportedFeature {
                key: scaling_key,
                feature: format!("rope scaling '{}'", t.chars().take(40).collect::<String>()),
            });
        }
    }
    for key in [k("rope.scaling.factor"), k("rope.scale_linear")] {
        if let Some(f) = file.get_f32(&key)? {
            if f != 0.0 && f != 1.0 {
                return Err(GgufError::UnsupportedFeature {
                    key,
                    feature: format!("rope scaling factor {f}"),
                });
            }
        }
    }
    let experts_key = k("expert_count");
    if file.get_uint(&experts_key)?.is_some_and(|n| n > 0) {
        return Err(GgufError::UnsupportedFeature {
            key: experts_key,
            feature: "mixture of experts".into(),
        });
    }
    Ok(())
}

/// The vocabulary size: `{arch}.vocab_size` and/or the token list length,
/// which must agree when both are present. Per-token arrays must match it.
fn vocab_size(file: &GgufFile, arch: Arch) -> Result<usize, GgufError> {
    let size_key = format!("{}.vocab_size", arch.name());
    let tokens_key = "tokenizer.ggml.tokens";
    let from_key = file.get_uint(&size_key)?;
    let tokens = file.get_str_array(tokens_key)?;
    let n = match (from_key, tokens) {
        (Some(n), Some(t)) if n != t.len() as u64 => {
            return Err(bad(
                &size_key,
                format!("{n} but {tokens_key} has {} entries", t.len()),
            ))
        }
        (Some(n), _) => in_range(&size_key, n, MAX_WIDTH)?,
        (None, Some(t)) => in_range(tokens_key, t.len() as u64, MAX_WIDTH)?,
        (None, None) => {
            return Err(GgufError::MissingKey {
                key: tokens_key.into(),
            })
        }
    };
    let scores = file
        .get_f32_array("tokenizer.ggml.scores")?
        .map(|s| ("tokenizer.ggml.scores", s.len()));
    let types = file
        .get_i32_array("tokenizer.ggml.token_type")?
        .map(|t| ("tokenizer.ggml.token_type", t.len()));
    for (key, len) in [scores, types].into_iter().flatten() {
        if tokens.is_some() && len != n {
            return Err(bad(
                key,
                format!("{len} entries but the vocabulary has {n} tokens"),
            ));
        }
    }
    file.get_str_array("tokenizer.ggml.merges")?;
    Ok(n)
}

/// Every `tokenizer.ggml.*_token_id` (and integer `*_token_ids` array) must
/// index the vocabulary.
fn check_special_tokens(file: &GgufFile, n_vocab: usize) -> Result<(), GgufError> {
    let n = n_vocab as u64;
    let out_of_range = |key: &str, id: u64| GgufError::TokenIdOutOfRange {
        key: key.to_string(),
        id,
        n_vocab: n,
    };
    for (key, value) in file.metadata() {
        if !key.starts_with("tokenizer.ggml.") {
            continue;
        }
        if key.ends_with("_token_id") {
            let id = file.get_uint(key)?.unwrap_or(0);
            if id >= n {
                return Err(out_of_range(key, id));
            }
        } else if key.ends_with("_token_ids") {
            let MetaValue::Array(a) = value else {
                return Err(GgufError::WrongType {
                    key: key.clone(),
                    expected: "an integer array",
                    found: value.type_name(),
                });
            };
            for i in 0..a.len() {
                let id = a.int_at(i).ok_or_else(|| GgufError::WrongType {
                    key: key.clone(),
                    expected: "an integer array",
                    found: a.type_name(),
                })?;
                let id = u64::try_from(id).map_err(|_| GgufError::NegativeValue {
                    key: key.clone(),
                    value: i64::try_from(id).unwrap_or(i64::MIN),
                })?;
                if id >= n {
                    return Err(out_of_range(key, id));
                }
            }
        }
    }
    Ok(())
}
