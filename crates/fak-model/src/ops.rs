//! Element-wise and row-wise operations of the forward pass (scalar).
//!
//! The arithmetic mirrors ggml's CPU reference closely (sums of squares in
//! f64, RoPE angles by repeated multiplication) so that logits stay close to
//! llama.cpp's.

use fak_gguf::model::RopeStyle;

/// RMSNorm of `x` (`[n]`) scaled by `w` (`[n]`), written to `out` (`[n]`).
pub fn rms_norm(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    let sum: f64 = x.iter().map(|&v| (v as f64) * (v as f64)).sum();
    let mean = (sum / x.len() as f64) as f32;
    let scale = 1.0f32 / (mean + eps).sqrt();
    for ((o, &v), &g) in out.iter_mut().zip(x).zip(w) {
        *o = (v * scale) * g;
    }
}

/// Rotation angles for one position.
///
/// Returns `(cos, sin)` pairs in `cache` (`[rope_dim / 2]` pairs): angle
/// `i` is `pos * theta_scale^i` with `theta_scale = base^(-2 / rope_dim)`,
/// computed by repeated multiplication as ggml does.
pub fn rope_angles(pos: u32, base: f32, rope_dim: usize, cache: &mut [(f32, f32)]) {
    let theta_scale = base.powf(-2.0f32 / rope_dim as f32);
    let mut theta = pos as f32;
    for c in cache.iter_mut().take(rope_dim / 2) {
        *c = (theta.cos(), theta.sin());
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

/// In-place softmax of `x` (`[n]`).
pub fn softmax(x: &mut [f32]) {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0f64;
    for v in x.iter_mut() {
        *v = (*v - max).exp();
        sum += *v as f64;
    }
    let inv = (1.0 / sum) as f32;
    for v in x.iter_mut() {
        *v *= inv;
    }
}

/// SwiGLU: `gate[i] = silu(gate[i]) * up[i]` (`[n]` each).
pub fn swiglu(gate: &mut [f32], up: &[f32]) {
    for (g, &u) in gate.iter_mut().zip(up) {
        let s = *g / (1.0 + (-*g).exp());
        *g = s * u;
    }
}

/// `x[i] += y[i]` (`[n]` each).
pub fn add_assign(x: &mut [f32], y: &[f32]) {
    for (a, &b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rope_at_zero_is_identity() {
        let mut cache = vec![(0.0, 0.0); 4];
        rope_angles(0, 10000.0, 8, &mut cache);
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
        rope_angles(17, 10000.0, 8, &mut cache);
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
    fn softmax_sums_to_one() {
        let mut x = vec![1.0, 2.0, 3.0, -100.0];
        softmax(&mut x);
        let s: f32 = x.iter().sum();
        assert!((s - 1.0).abs() < 1e-6);
        assert!(x[2] > x[1] && x[1] > x[0]);
    }

    #[test]
    fn rms_norm_unit_weight() {
        let x = [3.0f32, 4.0];
        let mut out = [0.0; 2];
        rms_norm(&x, &[1.0, 1.0], 0.0, &mut out);
        let rms = (12.5f32).sqrt();
        assert!((out[0] - 3.0 / rms).abs() < 1e-6);
    }
}
