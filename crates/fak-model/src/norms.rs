//! Small f32 tensors (norm weights, per-head norms) read whole from a
//! GGUF file, dequantized from whatever type the file stores them in.

use fak_gguf::GgufFile;

use crate::error::ModelError;

/// The tensor `name` of `file` as f32 values (`[n_elements]`).
///
/// # Errors
///
/// [`ModelError::MissingTensor`] if the file has no such tensor;
/// [`ModelError::Kernel`] if its type cannot be dequantized.
pub(crate) fn vector(file: &GgufFile, name: &str) -> Result<Vec<f32>, ModelError> {
    let t = file
        .tensor(name)
        .ok_or_else(|| ModelError::MissingTensor(name.to_string()))?;
    let mut out = vec![0.0f32; t.n_elements() as usize];
    fak_kernels::dequantize_row(t.ty, file.tensor_data(t), &mut out).map_err(|source| {
        ModelError::Kernel {
            tensor: name.to_string(),
            source,
        }
    })?;
    Ok(out)
}
