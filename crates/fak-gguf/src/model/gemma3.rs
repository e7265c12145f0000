//! Gemma 3 hyperparameters: the sliding-window pattern, the local RoPE
//! base, the query scale and the final logit soft-cap, read as llama.cpp
//! reads them (`src/models/gemma3.cpp`, `llama-hparams.cpp`).
//!
//! ```text
//! gemma3.attention.sliding_window          window W (absent or 0: every layer global)
//! gemma3.attention.sliding_window_pattern  period P (default 6): layer il is local
//!                                          when il % P < P - 1; P = 0: all local
//! gemma3.rope.freq_base_swa                local layers' RoPE base (default 10000)
//! gemma3.rope.freq_base                    global layers' RoPE base
//! gemma3.final_logit_softcapping           c: logits = c·tanh(logits / c) (absent or 0: none)
//! query scale                              1/√key_length; 1/√(n_embd / n_head) for the
//!                                          62-layer (27B) model, as gemma_pytorch does
//! ```
//!
//! A local layer's query at position `p` attends to keys `p - W + 1 ..= p`
//! (llama.cpp masks a key when `p - p_key >= W`).

use super::{bad, positive_f32, Arch, ModelConfig};
use crate::error::GgufError;
use crate::file::GgufFile;

/// llama.cpp's default sliding-window period for gemma3.
pub const DEFAULT_SWA_PERIOD: usize = 6;

/// llama.cpp's default RoPE base of sliding-window layers.
pub const DEFAULT_LOCAL_ROPE_BASE: f32 = 10000.0;

/// How a layer attends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LayerAttn {
    /// Every earlier position of the sequence.
    Global,
    /// Only the last `window` positions (the query's own included).
    Local,
}

/// Local attention: the window and which layers use it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlidingWindow {
    /// Positions a local layer's query sees, its own included (> 0).
    pub window: usize,
    /// Per layer, `[n_layer]`.
    pub layers: Vec<LayerAttn>,
}

/// The Gemma 3 parts of a [`ModelConfig`].
#[derive(Debug, Clone, PartialEq)]
pub struct Gemma3Params {
    /// Local layers and their window; `None` when the file has no window
    /// (every layer global, all with `rope.freq_base`).
    pub sliding: Option<SlidingWindow>,
    /// RoPE base of local layers.
    pub rope_theta_local: f32,
    /// Factor applied to the queries before attention.
    pub attn_scale: f32,
    /// Final logit soft-cap `c` (`c·tanh(x / c)`), if any.
    pub final_logit_softcap: Option<f32>,
}

/// Reads the Gemma 3 keys of `file` for a model of `n_layer` layers.
pub(crate) fn read(
    file: &GgufFile,
    (n_layer, n_embd, n_head, head_dim): (usize, usize, usize, usize),
) -> Result<Gemma3Params, GgufError> {
    let k = |suffix: &str| format!("{}.{suffix}", Arch::Gemma3.name());
    let window_key = k("attention.sliding_window");
    let window = match file.get_uint(&window_key)? {
        None | Some(0) => None,
        Some(w) => Some(
            usize::try_from(w)
                .map_err(|_| bad(&window_key, format!("{w} does not fit this platform")))?,
        ),
    };
    let pattern_key = k("attention.sliding_window_pattern");
    if file.get_array(&pattern_key)?.is_some() {
        return Err(GgufError::UnsupportedFeature {
            key: pattern_key,
            feature: "a per-layer sliding-window pattern array (fak reads a period)".into(),
        });
    }
    let sliding = match window {
        None => None,
        Some(window) => {
            let period = match file.get_uint(&pattern_key)? {
                None => DEFAULT_SWA_PERIOD,
                Some(p) => usize::try_from(p)
                    .map_err(|_| bad(&pattern_key, format!("{p} does not fit this platform")))?,
            };
            let layers = (0..n_layer)
                .map(|il| {
                    if period == 0 || il % period < period - 1 {
                        LayerAttn::Local
                    } else {
                        LayerAttn::Global
                    }
                })
                .collect();
            Some(SlidingWindow { window, layers })
        }
    };
    let base_key = k("rope.freq_base_swa");
    let rope_theta_local = match file.get_f32(&base_key)? {
        Some(b) => positive_f32(&base_key, b)?,
        None => DEFAULT_LOCAL_ROPE_BASE,
    };
    let cap_key = k("final_logit_softcapping");
    let final_logit_softcap = match file.get_f32(&cap_key)? {
        None => None,
        Some(0.0) => None,
        Some(c) => Some(positive_f32(&cap_key, c)?),
    };
    // gemma_pytorch's query_pre_attn_scalar: n_embd / n_head for the 27B
    // model (62 layers), the head dimension otherwise.
    let scalar = if n_layer == 62 {
        n_embd / n_head.max(1)
    } else {
        head_dim
    };
    Ok(Gemma3Params {
        sliding,
        rope_theta_local,
        attn_scale: 1.0 / (scalar.max(1) as f32).sqrt(),
        final_logit_softcap,
    })
}

impl ModelConfig {
    /// How layer `layer` attends (every layer of a model without sliding
    /// windows is global).
    pub fn layer_attn(&self, layer: usize) -> LayerAttn {
        self.gemma3
            .as_ref()
            .and_then(|g| g.sliding.as_ref())
            .and_then(|s| s.layers.get(layer).copied())
            .unwrap_or(LayerAttn::Global)
    }

    /// The attention window of `layer`: `Some(W)` for a local layer.
    pub fn window(&self, layer: usize) -> Option<usize> {
        match self.layer_attn(layer) {
            LayerAttn::Global => None,
            LayerAttn::Local => self
                .gemma3
                .as_ref()
                .and_then(|g| g.sliding.as_ref())
                .map(|s| s.window),
        }
    }

    /// The sliding window of the model's local layers, if any layer is
    /// local.
    pub fn sliding_window(&self) -> Option<usize> {
        (0..self.n_layer).find_map(|l| self.window(l))
    }

    /// The RoPE base of `layer`.
    pub fn rope_theta_at(&self, layer: usize) -> f32 {
        match (self.layer_attn(layer), &self.gemma3) {
            (LayerAttn::Local, Some(g)) => g.rope_theta_local,
            _ => self.rope_theta,
        }
    }

    /// The factor attention scores are multiplied by: `1/√head_dim`, or
    /// Gemma 3's query scale.
    pub fn attn_scale(&self) -> f32 {
        match &self.gemma3 {
            Some(g) => g.attn_scale,
            None => 1.0 / (self.head_dim as f32).sqrt(),
        }
    }
}
