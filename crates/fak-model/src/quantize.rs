//! Model file quantization (`fak quantize`).
//!
//! Each tensor's output type follows llama.cpp's rules for the plain file
//! types, so that the result matches `llama-quantize` tensor for tensor:
//!
//! * 1-D tensors and `*_norm.weight` stay as they are (F32 norms, biases).
//! * Every other matrix gets the file type's default type,
//! * except the output matrix (or, with tied embeddings, `token_embd`), which
//!   for the 4-bit types gets Q6_K, falling back to Q8_0 when its rows are
//!   not a multiple of 256 elements.
//! * A tensor already in its target type is copied byte for byte.
//!
//! Values are requantized through f32 with ggml's reference quantizers.

use std::path::Path;

use fak_gguf::{GgmlType, GgufFile, GgufWriter, MetaValue};

use crate::error::ModelError;

/// The file types `fak quantize` produces, with llama.cpp's `llama_ftype`
/// numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileType {
    /// All matrices F16.
    F16,
    /// All matrices Q8_0.
    Q8_0,
    /// Q4_0 matrices, Q6_K/Q8_0 output.
    Q4_0,
    /// Q4_1 matrices, Q6_K/Q8_0 output.
    Q4_1,
}

impl FileType {
    /// Parses `f16`, `q8_0`, `q4_0`, `q4_1` (case-insensitive).
    pub fn from_name(s: &str) -> Option<FileType> {
        match s.to_ascii_lowercase().as_str() {
            "f16" => Some(FileType::F16),
            "q8_0" => Some(FileType::Q8_0),
            "q4_0" => Some(FileType::Q4_0),
            "q4_1" => Some(FileType::Q4_1),
            _ => None,
        }
    }

    /// llama.cpp's `general.file_type` number.
    pub fn id(self) -> u32 {
        match self {
            FileType::F16 => 1,
            FileType::Q4_0 => 2,
            FileType::Q4_1 => 3,
            FileType::Q8_0 => 7,
        }
    }

    /// Default tensor type.
    pub fn default_type(self) -> GgmlType {
        match self {
            FileType::F16 => GgmlType::F16,
            FileType::Q8_0 => GgmlType::Q8_0,
            FileType::Q4_0 => GgmlType::Q4_0,
            FileType::Q4_1 => GgmlType::Q4_1,
        }
    }
}

/// Chooses a tensor's output type.
///
/// `dims` are GGUF dims (`dims[0]` = row length); `has_output` tells whether
/// the file has a separate `output.weight`.
pub fn target_type(
    name: &str,
    dims: &[u64],
    current: GgmlType,
    ftype: FileType,
    has_output: bool,
) -> GgmlType {
    let is_matrix = dims.len() >= 2 && name.ends_with("weight") && !name.ends_with("_norm.weight");
    if !is_matrix {
        return current;
    }
    let mut ty = ftype.default_type();
    let nx = dims[0];
    let is_output = name == "output.weight" || (!has_output && name == "token_embd.weight");
    if ty.is_quantized() && is_output {
        let blk = ty.block_size() as u64;
        ty = if !nx.is_multiple_of(blk) || ty == GgmlType::Q8_0 {
            GgmlType::Q8_0
        } else {
            GgmlType::Q6_K
        };
    }
    if !nx.is_multiple_of(ty.block_size() as u64) {
        ty = match ty {
            GgmlType::Q6_K if nx.is_multiple_of(GgmlType::Q8_0.block_size() as u64) => {
                GgmlType::Q8_0
            }
            _ => GgmlType::F16,
        };
    }
    ty
}

/// Progress callback: `(tensor index, tensor count, tensor name)`.
pub type Progress<'a> = &'a mut dyn FnMut(usize, usize, &str);

/// Writes `input` requantized to `ftype` at `out`.
pub fn quantize_file(
    input: &GgufFile,
    out: &Path,
    ftype: FileType,
    progress: Progress<'_>,
) -> Result<(), ModelError> {
    let mut w = GgufWriter::new();
    w.set_alignment(input.alignment())?;
    for (k, v) in input.metadata() {
        if k == "general.alignment" {
            continue;
        }
        w.set_kv(k, v.clone());
    }
    w.set_kv("general.quantization_version", MetaValue::U32(2));
    w.set_kv("general.file_type", MetaValue::U32(ftype.id()));
    let has_output = input.tensor("output.weight").is_some();
    let n = input.tensors().len();
    for (i, t) in input.tensors().iter().enumerate() {
        progress(i, n, &t.name);
        let ty = target_type(&t.name, &t.dims, t.ty, ftype, has_output);
        let src = input.tensor_data(t);
        let data = if ty == t.ty {
            src.to_vec()
        } else {
            requantize(
                &t.name,
                src,
                t.ty,
                ty,
                t.row_len() as usize,
                t.n_rows() as usize,
            )?
        };
        w.add_tensor(&t.name, &t.dims, ty, data)?;
    }
    progress(n, n, "");
    w.write_file(out)?;
    Ok(())
}

fn requantize(
    name: &str,
    src: &[u8],
    from: GgmlType,
    to: GgmlType,
    row_len: usize,
    n_rows: usize,
) -> Result<Vec<u8>, ModelError> {
    let kerr = |source| ModelError::Kernel {
        tensor: name.to_string(),
        source,
    };
    let unsupported = |ty| ModelError::UnsupportedType {
        tensor: name.to_string(),
        ty,
        why: "row length is not a multiple of the block size",
    };
    let in_row = from
        .row_bytes(row_len as u64)
        .ok_or_else(|| unsupported(from))? as usize;
    let out_row = to
        .row_bytes(row_len as u64)
        .ok_or_else(|| unsupported(to))? as usize;
    let mut out = vec![0u8; out_row * n_rows];
    let mut tmp = vec![0.0f32; row_len];
    for (s, d) in src.chunks_exact(in_row).zip(out.chunks_exact_mut(out_row)) {
        fak_kernels::dequantize_row(from, s, &mut tmp).map_err(kerr)?;
        fak_kernels::quantize_row(to, &tmp, d).map_err(kerr)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn norms_and_vectors_stay() {
        assert_eq!(
            target_type(
                "blk.0.attn_norm.weight",
                &[576],
                GgmlType::F32,
                FileType::Q8_0,
                false
            ),
            GgmlType::F32
        );
        assert_eq!(
            target_type(
                "blk.0.attn_q.bias",
                &[896],
                GgmlType::F32,
                FileType::Q4_0,
                true
            ),
            GgmlType::F32
        );
    }

    #[test]
    fn output_rules() {
        // Tied embeddings act as the output matrix.
        assert_eq!(
            target_type(
                "token_embd.weight",
                &[576, 49152],
                GgmlType::Q8_0,
                FileType::Q4_0,
                false
            ),
            GgmlType::Q8_0
        );
        assert_eq!(
            target_type(
                "token_embd.weight",
                &[512, 49152],
                GgmlType::Q8_0,
                FileType::Q4_1,
                false
            ),
            GgmlType::Q6_K
        );
        assert_eq!(
            target_type(
                "token_embd.weight",
                &[512, 49152],
                GgmlType::Q8_0,
                FileType::Q4_1,
                true
            ),
            GgmlType::Q4_1
        );
        assert_eq!(
            target_type(
                "output.weight",
                &[512, 49152],
                GgmlType::Q8_0,
                FileType::Q8_0,
                true
            ),
            GgmlType::Q8_0
        );
        assert_eq!(
            target_type(
                "output.weight",
                &[512, 49152],
                GgmlType::Q8_0,
                FileType::F16,
                true
            ),
            GgmlType::F16
        );
        assert_eq!(
            target_type(
                "blk.0.ffn_up.weight",
                &[576, 1536],
                GgmlType::Q4_1,
                FileType::F16,
                false
            ),
            GgmlType::F16
        );
    }
}
