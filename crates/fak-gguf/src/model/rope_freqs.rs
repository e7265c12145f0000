//! Llama 3.x rope frequency factors: the `rope_freqs.weight` tensor.
//!
//! Llama 3.x files carry their rope scaling ("llama3" in the Hugging Face
//! config) not as `{arch}.rope.scaling.*` keys but as one f32 tensor of
//! `rope_dim / 2` per-dimension factors, computed by llama.cpp's converter
//! from `factor`, `low_freq_factor`, `high_freq_factor` and
//! `original_max_position_embeddings`. llama.cpp passes it to every
//! layer's `ggml_rope_ext` as `freq_factors`, which divides each rotation
//! angle by its factor:
//!
//! ```text
//! angle_i(pos) = pos · base^(-2i / rope_dim) / rope_freqs[i]
//! ```
//!
//! The shape is checked with the other tensors ([`super::shapes`]); here the
//! type must be F32 (ggml asserts it) and every value finite and positive
//! (a zero or negative factor would turn angles into infinities or flip
//! them).

use super::ModelConfig;
use crate::error::GgufError;
use crate::file::GgufFile;
use crate::types::GgmlType;

/// The tensor's name.
pub(crate) const NAME: &str = "rope_freqs.weight";

/// The factors of `file`'s `rope_freqs.weight`, if `cfg.arch` takes them
/// and the file has the tensor (its shape already checked against
/// `cfg.rope_dim`).
pub(crate) fn read(file: &GgufFile, cfg: &ModelConfig) -> Result<Option<Vec<f32>>, GgufError> {
    if !cfg.arch.takes_rope_freqs() {
        return Ok(None);
    }
    let Some(t) = file.tensor(NAME) else {
        return Ok(None);
    };
    let bad = |reason: String| GgufError::BadTensor {
        name: NAME.into(),
        reason,
    };
    if t.ty != GgmlType::F32 {
        return Err(bad(format!("type {} is not f32", t.ty)));
    }
    let data = file.tensor_data(t);
    let want = cfg.rope_dim / 2;
    if data.len() != want * 4 {
        return Err(bad(format!(
            "{} bytes of data for {want} f32 values",
            data.len()
        )));
    }
    let factors: Vec<f32> = data
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    if let Some((i, v)) = factors
        .iter()
        .enumerate()
        .find(|(_, v)| !(v.is_finite() && **v > 0.0))
    {
        return Err(bad(format!(
            "factor {i} is {v}, not a finite positive number"
        )));
    }
    Ok(Some(factors))
}
