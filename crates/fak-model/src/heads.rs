//! Per-head steps between the q/k/v products and the KV cache:
//! the optional q/k RMSNorm (qwen3), then rope.
//!
//! ```text
//! q row [n_head · hd], k row [n_head_kv · hd], one head of hd values at a time:
//!   QkNorm::PerHead:  head = rms_norm(head) · attn_{q,k}_norm     (llama.cpp's build_norm
//!                     over ne0 = hd, before ggml_rope_ext, qwen3.cpp)
//!   rope(head, angles of the token's position)   angles already divided by
//!                     llama 3.x's rope_freqs factors (ops::rope_angles)
//! ```
//!
//! The norm follows ggml's `rms_norm` (sum of squares in f64, mean as f32,
//! `scale = 1 / sqrt(mean + eps)`, `(x · scale) · w`) and runs in place, so a
//! decode step allocates nothing for it.

use fak_gguf::model::QkNorm;
use fak_gguf::{GgufFile, ModelConfig};

use crate::error::ModelError;
use crate::ops;

/// One layer's q/k norm weights (`[head_dim]` each).
#[derive(Debug)]
pub(crate) struct QkNormWeights {
    pub q: Vec<f32>,
    pub k: Vec<f32>,
}

impl QkNormWeights {
    /// Layer `layer`'s weights, if `cfg` asks for a q/k norm.
    pub fn load(
        file: &GgufFile,
        cfg: &ModelConfig,
        layer: usize,
    ) -> Result<Option<QkNormWeights>, ModelError> {
        match cfg.qk_norm {
            QkNorm::None => Ok(None),
            QkNorm::PerHead => Ok(Some(QkNormWeights {
                q: crate::norms::vector(file, &format!("blk.{layer}.attn_q_norm.weight"))?,
                k: crate::norms::vector(file, &format!("blk.{layer}.attn_k_norm.weight"))?,
            })),
        }
    }
}

/// RMSNorm of `head` in place with weights `w` (same length).
pub(crate) fn rms_norm_in_place(head: &mut [f32], w: &[f32], eps: f32) {
    let sum: f64 = head.iter().map(|&v| (v as f64) * (v as f64)).sum();
    let mean = (sum / head.len().max(1) as f64) as f32;
    let scale = 1.0f32 / (mean + eps).sqrt();
    for (v, &g) in head.iter_mut().zip(w) {
        *v = (*v * scale) * g;
    }
}

/// Normalizes (if `norm` is given) and ropes every head of one token's q or
/// k row with that token's `angles`.
pub(crate) fn norm_rope_row(
    row: &mut [f32],
    norm: Option<&[f32]>,
    angles: &[(f32, f32)],
    cfg: &ModelConfig,
) {
    for head in row.chunks_exact_mut(cfg.head_dim.max(1)) {
        if let Some(w) = norm {
            rms_norm_in_place(head, w, cfg.rms_eps);
        }
        ops::rope_head(head, angles, cfg.rope_dim, cfg.rope_style);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_place_norm_matches_the_kernel() {
        let x: Vec<f32> = (0..128)
            .map(|i| ((i * 37 % 23) as f32 - 11.0) * 0.37)
            .collect();
        let w: Vec<f32> = (0..128).map(|i| 0.5 + (i % 7) as f32 * 0.1).collect();
        let mut want = vec![0.0f32; 128];
        fak_kernels::ops::scalar::rms_norm(&x, &w, 1e-6, &mut want);
        let mut got = x.clone();
        rms_norm_in_place(&mut got, &w, 1e-6);
        assert_eq!(got, want);
    }

    #[test]
    fn each_head_is_normalized_on_its_own() {
        // Two heads of 4 with very different scales: after the norm (unit
        // weights) each head has mean square 1, whatever the other holds.
        let mut row = [1.0f32, -1.0, 1.0, -1.0, 100.0, 0.0, 0.0, 0.0];
        let w = [1.0f32; 4];
        for head in row.chunks_exact_mut(4) {
            rms_norm_in_place(head, &w, 0.0);
        }
        assert_eq!(&row[..4], &[1.0, -1.0, 1.0, -1.0]);
        assert_eq!(&row[4..], &[2.0, 0.0, 0.0, 0.0]);
    }
}
