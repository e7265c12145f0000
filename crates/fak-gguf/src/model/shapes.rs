//! Required tensors and their shapes for llama / qwen2 / qwen3.
//!
//! Shapes are ggml order `[row_len, n_rows]`; a projection `y = W x` from
//! `n_in` to `n_out` features is stored as `[n_in, n_out]`:
//!
//! ```text
//! token_embd.weight      [n_embd, n_vocab]
//! output_norm.weight     [n_embd]
//! output.weight          [n_embd, n_vocab]          optional (absent = tied)
//! blk.N.attn_norm.weight [n_embd]
//! blk.N.attn_q.weight    [n_embd, n_head*hd]        .bias [n_head*hd]     (qwen2)
//! blk.N.attn_k.weight    [n_embd, n_head_kv*hd]     .bias [n_head_kv*hd]  (qwen2)
//! blk.N.attn_v.weight    [n_embd, n_head_kv*hd]     .bias [n_head_kv*hd]  (qwen2)
//! blk.N.attn_q_norm.weight [hd]                     (qwen3)
//! blk.N.attn_k_norm.weight [hd]                     (qwen3)
//! blk.N.attn_output.weight [n_head*hd, n_embd]
//! blk.N.ffn_norm.weight  [n_embd]
//! blk.N.ffn_gate.weight  [n_embd, n_ff]
//! blk.N.ffn_up.weight    [n_embd, n_ff]
//! blk.N.ffn_down.weight  [n_ff, n_embd]
//! rope_freqs.weight      [rope_dim/2]               optional (llama 3.x)
//! gemma3 only:
//! blk.N.attn_q_norm.weight, blk.N.attn_k_norm.weight      [hd]
//! blk.N.post_attention_norm.weight, blk.N.post_ffw_norm.weight [n_embd]
//! ```
//!
//! Any other tensor is rejected: fak would silently ignore it and compute
//! something other than the model intended.

use std::collections::HashSet;

use super::{Arch, ModelConfig, QkNorm};
use crate::error::GgufError;
use crate::file::GgufFile;

/// What the tensor check learned about optional tensors.
pub(crate) struct Layout {
    /// No `output.weight`: the output projection is `token_embd.weight`.
    pub tied_embeddings: bool,
    /// Every layer has q/k/v biases.
    pub qkv_bias: bool,
}

/// Tracks which tensors were matched against an expectation.
struct Checker<'a> {
    file: &'a GgufFile,
    used: HashSet<String>,
}

impl Checker<'_> {
    /// Whether `name` exists; if it does, its shape must be `expected`.
    fn optional(&mut self, name: String, expected: &[u64]) -> Result<bool, GgufError> {
        let Some(t) = self.file.tensor(&name) else {
            return Ok(false);
        };
        if t.dims != expected {
            return Err(GgufError::ShapeMismatch {
                name,
                expected: expected.to_vec(),
                actual: t.dims.clone(),
            });
        }
        self.used.insert(name);
        Ok(true)
    }

    /// `name` must exist with shape `expected`.
    fn required(&mut self, name: String, expected: &[u64]) -> Result<(), GgufError> {
        if self.optional(name.clone(), expected)? {
            Ok(())
        } else {
            Err(GgufError::MissingTensor {
                name,
                expected: expected.to_vec(),
            })
        }
    }
}

/// Checks every tensor of `cfg.arch` against the hyperparameters in `cfg`
/// (whose `tied_embeddings` / `qkv_bias` fields are ignored and returned).
pub(crate) fn check_tensors(file: &GgufFile, cfg: &ModelConfig) -> Result<Layout, GgufError> {
    let overflow = || GgufError::BadHyperparameter {
        key: format!("{}.attention.head_count", cfg.arch.name()),
        reason: "head count times head dimension overflows".into(),
    };
    let embd = cfg.n_embd as u64;
    let vocab = cfg.n_vocab as u64;
    let ff = cfg.n_ff as u64;
    let hd = cfg.head_dim as u64;
    let q = (cfg.n_head as u64).checked_mul(hd).ok_or_else(overflow)?;
    let kv = (cfg.n_head_kv as u64)
        .checked_mul(hd)
        .ok_or_else(overflow)?;

    let mut c = Checker {
        file,
        used: HashSet::new(),
    };
    c.required("token_embd.weight".into(), &[embd, vocab])?;
    c.required("output_norm.weight".into(), &[embd])?;
    let tied_embeddings = !c.optional("output.weight".into(), &[embd, vocab])?;
    let qkv_bias = match cfg.arch {
        Arch::Qwen2 => true,
        Arch::Llama | Arch::Qwen3 => file.tensor("blk.0.attn_q.bias").is_some(),
        Arch::Gemma3 => false,
    };
    if cfg.arch.takes_rope_freqs() {
        c.optional(super::rope_freqs::NAME.into(), &[cfg.rope_dim as u64 / 2])?;
    }
    for i in 0..cfg.n_layer {
        let n = |s: &str| format!("blk.{i}.{s}");
        c.required(n("attn_norm.weight"), &[embd])?;
        c.required(n("attn_q.weight"), &[embd, q])?;
        c.required(n("attn_k.weight"), &[embd, kv])?;
        c.required(n("attn_v.weight"), &[embd, kv])?;
        if qkv_bias {
            c.required(n("attn_q.bias"), &[q])?;
            c.required(n("attn_k.bias"), &[kv])?;
            c.required(n("attn_v.bias"), &[kv])?;
        }
        if cfg.qk_norm == QkNorm::PerHead {
            c.required(n("attn_q_norm.weight"), &[hd])?;
            c.required(n("attn_k_norm.weight"), &[hd])?;
        }
        c.required(n("attn_output.weight"), &[q, embd])?;
        c.required(n("ffn_norm.weight"), &[embd])?;
        c.required(n("ffn_gate.weight"), &[embd, ff])?;
        c.required(n("ffn_up.weight"), &[embd, ff])?;
        c.required(n("ffn_down.weight"), &[ff, embd])?;
        if cfg.arch == Arch::Gemma3 {
            c.required(n("attn_q_norm.weight"), &[hd])?;
            c.required(n("attn_k_norm.weight"), &[hd])?;
            c.required(n("post_attention_norm.weight"), &[embd])?;
            c.required(n("post_ffw_norm.weight"), &[embd])?;
        }
    }
    if let Some(extra) = file.tensors().iter().find(|t| !c.used.contains(&t.name)) {
        return Err(GgufError::UnexpectedTensor {
            name: extra.name.clone(),
            arch: cfg.arch.name(),
        });
    }
    Ok(Layout {
        tied_embeddings,
        qkv_bias,
    })
}
