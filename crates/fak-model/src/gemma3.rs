//! The Gemma 3 parts of the forward pass, following llama.cpp's graph
//! (`src/models/gemma3.cpp`):
//!
//! ```text
//! x = embd(token) · √n_embd                                (f32 scale, as ggml_scale)
//! per layer:
//!   h = rms_norm(x) · attn_norm
//!   q, k, v = h·Wqᵀ, h·Wkᵀ, h·Wvᵀ
//!   q, k = rms_norm per head · attn_{q,k}_norm, then RoPE (NeoX; local or global base)
//!   a = attention(q · scale, K, V)    local layers: the last `window` positions only
//!   x = x + rms_norm(a·Woᵀ) · post_attention_norm
//!   h = rms_norm(x) · ffn_norm
//!   x = x + rms_norm((gelu(h·Wgᵀ) ⊙ h·Wuᵀ)·Wdᵀ) · post_ffw_norm
//! logits = (rms_norm(x) · output_norm)·Eᵀ               tied; soft-capped if the file says so
//! ```
//!
//! The norm weights are used as stored: llama.cpp's converter already
//! wrote Gemma's `1 + w` into the file. GELU is ggml's CPU one: the tanh
//! approximation evaluated on the f16 rounding of its input and rounded to
//! f16 (a 64K-entry table), identity above 10 and 0 below -10.

use std::sync::OnceLock;

use fak_gguf::GgufFile;
use half::f16;

use crate::error::ModelError;

/// Whether local layers keep to their sliding window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum WindowMode {
    /// As the model was trained: a local layer reads only its window.
    #[default]
    AsTrained,
    /// Every layer reads every earlier position. Changes the results; it
    /// exists to measure what the window saves (`fak bench model
    /// --window full`).
    Full,
}

/// The per-layer tensors Gemma 3 adds to the llama layout.
#[derive(Debug)]
pub(crate) struct GemmaNorms {
    /// `[head_dim]`, applied to every query head.
    pub q_norm: Vec<f32>,
    /// `[head_dim]`, applied to every key head.
    pub k_norm: Vec<f32>,
    /// `[n_embd]`, on the attention output before the residual add.
    pub post_attn_norm: Vec<f32>,
    /// `[n_embd]`, on the FFN output before the residual add.
    pub post_ffw_norm: Vec<f32>,
}

impl GemmaNorms {
    /// Loads layer `i`'s norms with `vector` (the weights loader's).
    pub(crate) fn load(
        file: &GgufFile,
        i: usize,
        vector: impl Fn(&GgufFile, &str) -> Result<Vec<f32>, ModelError>,
    ) -> Result<GemmaNorms, ModelError> {
        let n = |s: &str| format!("blk.{i}.{s}");
        Ok(GemmaNorms {
            q_norm: vector(file, &n("attn_q_norm.weight"))?,
            k_norm: vector(file, &n("attn_k_norm.weight"))?,
            post_attn_norm: vector(file, &n("post_attention_norm.weight"))?,
            post_ffw_norm: vector(file, &n("post_ffw_norm.weight"))?,
        })
    }
}

/// Multiplies every value by `√n_embd` (computed in f32, as llama.cpp's
/// `sqrtf(n_embd)`).
pub(crate) fn scale_embedding(x: &mut [f32], n_embd: usize) {
    let s = (n_embd as f32).sqrt();
    for v in x {
        *v *= s;
    }
}

/// ggml's tanh-approximated GELU in f32.
fn gelu_f32(x: f32) -> f32 {
    const GELU_COEF_A: f32 = 0.044715;
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * (1.0 + GELU_COEF_A * x * x)).tanh())
}

/// `gelu(f16 value)` rounded to f16, for every f16 bit pattern.
fn gelu_table() -> &'static [u16] {
    static TABLE: OnceLock<Vec<u16>> = OnceLock::new();
    TABLE.get_or_init(|| {
        (0..=u16::MAX)
            .map(|bits| f16::from_f32(gelu_f32(f16::from_bits(bits).to_f32())).to_bits())
            .collect()
    })
}

/// GEGLU as ggml computes it on the CPU: `gate[i] = gelu(gate[i]) · up[i]`
/// with GELU looked up at the f16 rounding of `gate[i]` (0 at or below
/// -10, the identity at or above 10).
pub(crate) fn geglu(gate: &mut [f32], up: &[f32]) {
    let table = gelu_table();
    for (g, &u) in gate.iter_mut().zip(up) {
        let x = *g;
        *g = if x <= -10.0 {
            0.0
        } else if x >= 10.0 {
            x * u
        } else {
            f16::from_bits(table[f16::from_f32(x).to_bits() as usize]).to_f32() * u
        };
    }
}

/// Final logit soft-cap: `x = c · tanh(x / c)` (ggml: scale by `1/c`,
/// tanh, scale by `c`).
pub(crate) fn softcap(x: &mut [f32], c: f32) {
    let inv = 1.0 / c;
    for v in x {
        *v = (*v * inv).tanh() * c;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gelu_matches_the_formula_up_to_f16_rounding() {
        let mut g: Vec<f32> = (-120..=120).map(|i| i as f32 * 0.1).collect();
        let x = g.clone();
        geglu(&mut g, &vec![1.0; x.len()]);
        for (&xi, &gi) in x.iter().zip(&g) {
            let want = if xi <= -10.0 {
                0.0
            } else if xi >= 10.0 {
                xi
            } else {
                gelu_f32(xi)
            };
            // Input and output each rounded to f16 (relative 2^-11 each;
            // the input's rounding moves gelu by at most |gelu'| ≤ 1.13
            // times |x|·2^-11).
            assert!(
                (gi - want).abs() <= 1e-3 * (want.abs() + 1.2 * xi.abs()) + 1e-7,
                "{xi}: {gi} vs {want}"
            );
        }
        // The table is used (the f16 rounding shows): gelu(1.0001) is
        // looked up at 1.0.
        let mut a = [1.0001f32];
        geglu(&mut a, &[1.0]);
        assert_eq!(a[0], f16::from_f32(gelu_f32(1.0)).to_f32());
    }

    #[test]
    fn softcap_bounds_logits() {
        let mut x = [1000.0f32, -1000.0, 0.5];
        softcap(&mut x, 30.0);
        assert!((x[0] - 30.0).abs() < 1e-4 && (x[1] + 30.0).abs() < 1e-4);
        assert!((x[2] - 30.0 * (0.5f32 / 30.0).tanh()).abs() < 1e-7);
    }
}
