//! RoPE for the forward pass (scalar). The other row operations (RMSNorm,
//! softmax, SwiGLU, residual adds) are vectorized in [`fak_kernels::ops`],
//! the attention dots in [`fak_kernels::attn`].
//!
//! The arithmetic mirrors ggml's CPU reference closely (sums of squares in
//! f64, RoPE angles by repeated multiplication) so that logits stay close to
//! llama.cpp's.

use fak_gguf::model::RopeStyle;

/// Rotation angles for one position.
///
/// Returns `(cos, sin)` pairs in `cache` (`[rope_dim / 2]` pairs): angle
/// `i` is `pos * theta_scale^i / factors[i]` with `theta_scale =
/// base^(-2 / rope_dim)`, computed by repeated multiplication as ggml does
/// (`ggml_rope_cache_init`; `factors` are llama 3.x's `rope_freqs`, `None`
/// meaning all 1).
pub fn rope_angles(
    pos: u32,
    base: f32,
    rope_dim: usize,
    factors: Option<&[f32]>,
    cache: &mut [(f32, f32)],
) {
    let theta_scale = base.powf(-2.0f32 / rope_dim as f32);
    let mut theta = pos as f32;
    for (i, c) in cache.iter_mut().take(rope_dim / 2).enumerate() {
        let t = match factors.and_then(|f| f.get(i)) {
            Some(&ff) => theta / ff,
            None => theta,
        };
        *c = (t.cos(), t.sin());
        theta *= theta_scale;
    }
}

/// Rotates one head (`[head_dim]`) in place with the angles of
/// [`rope_angles`]. Dimensions at or past `rope_dim` are left unchanged.
///
/// ```text
/// Normal (llama):  pairs (x0,x1) (x2,x3) ...        angle i for pair (2i, 2i+1)
/// Neox (qwen2):    pairs (x0,x_{d/2}) (x1,x_{d/2+1}) angle i for pair (i, i+d/2)
/// ```
pub fn rope_head(head: &mut [f32], cache: &[(f32, f32)], rope_dim: usize, style: RopeStyle) {
    let half = rope_dim / 2;
    match style {
        RopeStyle::Normal => {
            for (i, &(c, s)) in cache.iter().take(half).enumerate() {
                let (a, b) = (head[2 * i], head[2 * i + 1]);
                head[2 * i] = a * c - b * s;
                head[2 * i + 1] = a * s + b * c;
            }
        }
        RopeStyle::Neox => {
            for (i, &(c, s)) in cache.iter().take(half).enumerate() {
                let (a, b) = (head[i], head[i + half]);
                head[i] = a * c - b * s;
                head[i + half] = a * s + b * c;
            }
        }
    }
}

/// Moves an already roped key row back by `delta` positions: rotates every
/// head of `k` (`[n_head_kv * head_dim]`, heads contiguous) by the angles of
/// position `delta`, negated. Used by the approximate `shift` eviction,
/// which re-ropes the keys after a removed span instead of recomputing
/// them (the rows keep the removed span's influence).
///
/// `layer` picks the RoPE base (Gemma 3's local and global layers differ).
pub fn rope_shift_back(
    k: &mut [f32],
    head_dim: usize,
    cfg: &crate::ModelConfig,
    layer: usize,
    delta: u32,
) {
    let mut cache = vec![(0.0f32, 0.0f32); cfg.rope_dim / 2];
    let factors = cfg.rope_freq_factors.as_deref();
    rope_angles(
        delta,
        cfg.rope_theta_at(layer),
        cfg.rope_dim,
        factors,
        &mut cache,
    );
    for c in cache.iter_mut() {
        c.1 = -c.1;
    }
    for head in k.chunks_exact_mut(head_dim.max(1)) {
        rope_head(head, &cache, cfg.rope_dim, cfg.rope_style);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rope_at_zero_is_identity() {
        let mut cache = vec![(0.0, 0.0); 4];
        rope_angles(0, 10000.0, 8, None, &mut cache);
        let orig: Vec<f32> = (0..8).map(|i| i as f32 + 0.5).collect();
        for style in [RopeStyle::Normal, RopeStyle::Neox] {
            let mut h = orig.clone();
            rope_head(&mut h, &cache, 8, style);
            assert_eq!(h, orig);
        }
    }

    #[test]
    fn rope_preserves_pair_norms() {
        let mut cache = vec![(0.0, 0.0); 4];
        rope_angles(17, 10000.0, 8, None, &mut cache);
        let orig: Vec<f32> = (0..8).map(|i| (i as f32 - 3.0) * 0.7).collect();
        let mut h = orig.clone();
        rope_head(&mut h, &cache, 8, RopeStyle::Neox);
        for i in 0..4 {
            let a = orig[i].hypot(orig[i + 4]);
            let b = h[i].hypot(h[i + 4]);
            assert!((a - b).abs() < 1e-5);
        }
        assert_ne!(h, orig);
    }

    #[test]
    fn freq_factors_divide_each_angle() {
        // Factor 4 on pair 2 and 2 on pair 3: at position 40 those pairs
        // turn as far as at positions 10 and 20 without factors (division
        // by a power of two is exact), the others as at 40.
        let factors = [1.0f32, 1.0, 4.0, 2.0];
        let angles = |pos: u32, f: Option<&[f32]>| {
            let mut c = vec![(0.0f32, 0.0f32); 4];
            rope_angles(pos, 10000.0, 8, f, &mut c);
            c
        };
        let got = angles(40, Some(&factors));
        assert_eq!(got[..2], angles(40, None)[..2]);
        assert_eq!(got[2], angles(10, None)[2]);
        assert_eq!(got[3], angles(20, None)[3]);
    }

    #[test]
    fn rope_shift_back_moves_a_key_to_an_earlier_position() {
        let cfg = crate::ModelConfig {
            arch: fak_gguf::model::Arch::Llama,
            n_vocab: 10,
            n_embd: 16,
            n_layer: 1,
            n_head: 2,
            n_head_kv: 2,
            head_dim: 8,
            n_ff: 32,
            n_ctx_train: 128,
            rope_theta: 10000.0,
            rope_dim: 8,
            rope_style: RopeStyle::Neox,
            rms_eps: 1e-5,
            tied_embeddings: true,
            qkv_bias: false,
            qk_norm: fak_gguf::model::QkNorm::None,
            rope_freq_factors: None,
            gemma3: None,
        };
        let orig: Vec<f32> = (0..16).map(|i| (i as f32 - 7.0) * 0.3).collect();
        let at = |pos: u32| {
            let mut cache = vec![(0.0, 0.0); 4];
            rope_angles(
                pos,
                cfg.rope_theta,
                8,
                cfg.rope_freq_factors.as_deref(),
                &mut cache,
            );
            let mut h = orig.clone();
            for head in h.chunks_exact_mut(8) {
                rope_head(head, &cache, 8, cfg.rope_style);
            }
            h
        };
        let mut k = at(40);
        rope_shift_back(&mut k, 8, &cfg, 0, 15);
        for (a, b) in k.iter().zip(at(25)) {
            assert!((a - b).abs() < 1e-4, "{a} vs {b}");
        }
        // With llama 3.x frequency factors the shift uses them too.
        let cfg = crate::ModelConfig {
            rope_freq_factors: Some(vec![1.0, 2.0, 8.0, 32.0]),
            ..cfg
        };
        let at = |pos: u32| {
            let mut cache = vec![(0.0, 0.0); 4];
            rope_angles(
                pos,
                cfg.rope_theta,
                8,
                cfg.rope_freq_factors.as_deref(),
                &mut cache,
            );
            let mut h = orig.clone();
            for head in h.chunks_exact_mut(8) {
                rope_head(head, &cache, 8, cfg.rope_style);
            }
            h
        };
        let mut k = at(40);
        rope_shift_back(&mut k, 8, &cfg, 0, 15);
        for (a, b) in k.iter().zip(at(25)) {
            assert!((a - b).abs() < 1e-4, "{a} vs {b}");
        }
    }
}
