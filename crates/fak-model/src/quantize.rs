//! Model file quantization (`fak quantize`).
//!
//! Each tensor's output type follows llama.cpp's rules (`llama-quant.cpp`,
//! without an importance matrix), so that the result matches
//! `llama-quantize` tensor for tensor:
//!
//! * 1-D tensors and `*_norm.weight` stay as they are (F32 norms, biases).
//! * Every other matrix gets the file type's default type, except:
//!   * the output matrix (or, with tied embeddings, `token_embd`): Q6_K
//!     for the quantized types (Q8_0 stays Q8_0; rows that are not whole
//!     blocks of the default type give Q8_0);
//!   * the mixtures' sensitive tensors, by layer (table below);
//!   * a separate `token_embd` of the ternary types: Q4_K;
//!   * a type whose blocks do not divide the row falls back (IQ4_XS →
//!     IQ4_NL; Q2_K, Q3_K, TQ1_0, TQ2_0 → Q4_0; Q4_K → Q5_0; Q5_K → Q5_1; Q6_K → Q8_0;
//!     then F16).
//! * A tensor already in its target type is copied byte for byte.
//!
//! ```text
//!   file type   attn_v                       ffn_down (layer i of n)      attn_output
//!   q2_k        gqa ≥ 4: Q4_K, else Q3_K     Q3_K                          Q3_K
//!   q3_k_s      -                            -                             -
//!   q3_k_m      i < 2: Q5_K, else Q4_K       i < n/16: Q5_K, else Q4_K     Q4_K
//!   q3_k_l      Q5_K                         Q5_K                          Q5_K
//!   q4_k_s      i < 4: Q5_K                  i < n/8: Q5_K                 -
//!   q4_k_m      more_bits(i): Q6_K           more_bits(i): Q6_K            -
//!   q5_k_s      -                            -                             -
//!   q5_k_m      more_bits(i): Q6_K           more_bits(i): Q6_K            -
//!   q5_0, q5_1, q6_k, q4_0, q4_1, q8_0: only the output rule
//!   iq4_nl/xs   gqa ≥ 4: Q5_K                i < n/8: Q5_K                 -
//!   every type: attn_v of an 80-layer model (llama.cpp's "70B"): Q3_K, Q4_K → Q5_K
//!
//!   more_bits(i) = i < n/8 or i ≥ 7n/8 or (i − n/8) mod 3 = 2   (llama.cpp's use_more_bits)
//! ```
//!
//! `attn_v` stands for llama.cpp's whole category: a fused `attn_qkv` and
//! an `attn_kv_b` follow its rules too.
//!
//! Values are requantized through f32 with ggml's reference quantizers.

use std::path::Path;

use fak_gguf::{GgmlType, GgufFile, GgufWriter, MetaValue};
use fak_kernels::KernelError;

use crate::error::ModelError;

/// The file types `fak quantize` produces, with llama.cpp's `llama_ftype`
/// numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub enum FileType {
    /// All matrices F16.
    F16,
    /// All matrices BF16.
    BF16,
    /// All matrices Q8_0.
    Q8_0,
    /// Q4_0 matrices, Q6_K/Q8_0 output.
    Q4_0,
    /// Q4_1 matrices, Q6_K/Q8_0 output.
    Q4_1,
    /// Q5_0 matrices, Q6_K/Q8_0 output.
    Q5_0,
    /// Q5_1 matrices, Q6_K/Q8_0 output.
    Q5_1,
    /// Q2_K matrices; Q3_K/Q4_K for the sensitive ones.
    Q2_K,
    /// Q3_K matrices.
    Q3_K_S,
    /// Q3_K matrices; Q4_K/Q5_K for the sensitive ones.
    Q3_K_M,
    /// Q3_K matrices; Q5_K for the sensitive ones.
    Q3_K_L,
    /// Q4_K matrices; Q5_K for the first four attn_v and the first eighth
    /// of ffn_down.
    Q4_K_S,
    /// Q4_K matrices; Q6_K for half of attn_v and ffn_down.
    Q4_K_M,
    /// Q5_K matrices.
    Q5_K_S,
    /// Q5_K matrices; Q6_K for half of attn_v and ffn_down.
    Q5_K_M,
    /// Q6_K matrices.
    Q6_K,
    /// IQ4_NL matrices; Q5_K for the first eighth of ffn_down.
    IQ4_NL,
    /// IQ4_XS matrices; Q5_K for the first eighth of ffn_down.
    IQ4_XS,
    /// TQ1_0 (ternary) matrices; Q4_K for a separate `token_embd`.
    TQ1_0,
    /// TQ2_0 (ternary) matrices; Q4_K for a separate `token_embd`.
    TQ2_0,
}

impl FileType {
    /// Every file type, in llama.cpp's numbering order.
    pub const ALL: [FileType; 20] = [
        FileType::F16,
        FileType::BF16,
        FileType::Q4_0,
        FileType::Q4_1,
        FileType::Q8_0,
        FileType::Q5_0,
        FileType::Q5_1,
        FileType::Q2_K,
        FileType::Q3_K_S,
        FileType::Q3_K_M,
        FileType::Q3_K_L,
        FileType::Q4_K_S,
        FileType::Q4_K_M,
        FileType::Q5_K_S,
        FileType::Q5_K_M,
        FileType::Q6_K,
        FileType::IQ4_NL,
        FileType::IQ4_XS,
        FileType::TQ1_0,
        FileType::TQ2_0,
    ];

    /// Parses a name `fak quantize` takes (`q3_k_m`; case-insensitive).
    pub fn from_name(s: &str) -> Option<FileType> {
        let s = s.to_ascii_lowercase();
        FileType::ALL.into_iter().find(|t| t.name() == s)
    }

    /// The lower-case name (`q3_k_m`).
    pub fn name(self) -> &'static str {
        match self {
            FileType::F16 => "f16",
            FileType::BF16 => "bf16",
            FileType::Q8_0 => "q8_0",
            FileType::Q4_0 => "q4_0",
            FileType::Q4_1 => "q4_1",
            FileType::Q5_0 => "q5_0",
            FileType::Q5_1 => "q5_1",
            FileType::Q2_K => "q2_k",
            FileType::Q3_K_S => "q3_k_s",
            FileType::Q3_K_M => "q3_k_m",
            FileType::Q3_K_L => "q3_k_l",
            FileType::Q4_K_S => "q4_k_s",
            FileType::Q4_K_M => "q4_k_m",
            FileType::Q5_K_S => "q5_k_s",
            FileType::Q5_K_M => "q5_k_m",
            FileType::Q6_K => "q6_k",
            FileType::IQ4_NL => "iq4_nl",
            FileType::IQ4_XS => "iq4_xs",
            FileType::TQ1_0 => "tq1_0",
            FileType::TQ2_0 => "tq2_0",
        }
    }

    /// llama.cpp's `general.file_type` number.
    pub fn id(self) -> u32 {
        match self {
            FileType::F16 => 1,
            FileType::BF16 => 32,
            FileType::Q4_0 => 2,
            FileType::Q4_1 => 3,
            FileType::Q8_0 => 7,
            FileType::Q5_0 => 8,
            FileType::Q5_1 => 9,
            FileType::Q2_K => 10,
            FileType::Q3_K_S => 11,
            FileType::Q3_K_M => 12,
            FileType::Q3_K_L => 13,
            FileType::Q4_K_S => 14,
            FileType::Q4_K_M => 15,
            FileType::Q5_K_S => 16,
            FileType::Q5_K_M => 17,
            FileType::Q6_K => 18,
            FileType::IQ4_NL => 25,
            FileType::IQ4_XS => 30,
            FileType::TQ1_0 => 36,
            FileType::TQ2_0 => 37,
        }
    }

    /// Default tensor type.
    pub fn default_type(self) -> GgmlType {
        match self {
            FileType::F16 => GgmlType::F16,
            FileType::BF16 => GgmlType::BF16,
            FileType::Q8_0 => GgmlType::Q8_0,
            FileType::Q4_0 => GgmlType::Q4_0,
            FileType::Q4_1 => GgmlType::Q4_1,
            FileType::Q5_0 => GgmlType::Q5_0,
            FileType::Q5_1 => GgmlType::Q5_1,
            FileType::Q2_K => GgmlType::Q2_K,
            FileType::Q3_K_S | FileType::Q3_K_M | FileType::Q3_K_L => GgmlType::Q3_K,
            FileType::Q4_K_S | FileType::Q4_K_M => GgmlType::Q4_K,
            FileType::Q5_K_S | FileType::Q5_K_M => GgmlType::Q5_K,
            FileType::Q6_K => GgmlType::Q6_K,
            FileType::IQ4_NL => GgmlType::IQ4_NL,
            FileType::IQ4_XS => GgmlType::IQ4_XS,
            FileType::TQ1_0 => GgmlType::TQ1_0,
            FileType::TQ2_0 => GgmlType::TQ2_0,
        }
    }
}

/// What the type rules read from the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelShape {
    /// Whether the file has a separate `output.weight` (else `token_embd`
    /// is the output matrix).
    pub has_output: bool,
    /// Layers (`{arch}.block_count`).
    pub n_layer: u32,
    /// Query heads per K/V head (`head_count / head_count_kv`).
    pub n_gqa: u32,
}

impl ModelShape {
    /// Reads the shape from a GGUF file's metadata (missing or malformed
    /// keys read as 0, which no rule depends on).
    pub fn of(file: &GgufFile) -> ModelShape {
        let arch = file
            .get_str("general.architecture")
            .ok()
            .flatten()
            .unwrap_or("")
            .to_string();
        let u = |key: &str| {
            file.get_uint(&format!("{arch}.{key}"))
                .ok()
                .flatten()
                .unwrap_or(0)
        };
        let n_head = u("attention.head_count");
        let n_head_kv = match u("attention.head_count_kv") {
            0 => n_head,
            k => k,
        };
        ModelShape {
            has_output: file.tensor("output.weight").is_some(),
            n_layer: u("block_count") as u32,
            n_gqa: n_head.checked_div(n_head_kv).unwrap_or(0) as u32,
        }
    }
}

/// Which rules a tensor falls under (llama.cpp's `tensor_category`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Category {
    Output,
    TokenEmbd,
    AttnV,
    AttnOutput,
    FfnDown,
    Other,
}

fn category(name: &str) -> Category {
    if name == "output.weight" {
        Category::Output
    } else if name == "token_embd.weight" {
        Category::TokenEmbd
    } else if ["attn_qkv.weight", "attn_kv_b.weight", "attn_v.weight"]
        .iter()
        .any(|s| name.contains(s))
    {
        Category::AttnV
    } else if name.contains("attn_output.weight") {
        Category::AttnOutput
    } else if name.contains("ffn_down") {
        Category::FfnDown
    } else {
        Category::Other
    }
}

/// The layer of a `blk.N.` tensor.
fn layer(name: &str) -> Option<u32> {
    name.strip_prefix("blk.")?.split('.').next()?.parse().ok()
}

/// llama.cpp's `use_more_bits`: the first and last eighth of `n` layers,
/// and every third layer between.
fn more_bits(i: u32, n: u32) -> bool {
    i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2
}

/// The type of the mixtures' sensitive tensors (before the fallback).
fn mixture_type(
    ty: GgmlType,
    cat: Category,
    layer: u32,
    ftype: FileType,
    m: ModelShape,
) -> GgmlType {
    use GgmlType::*;
    match cat {
        Category::AttnV => {
            let t = match ftype {
                FileType::Q2_K if m.n_gqa >= 4 => Q4_K,
                FileType::Q2_K => Q3_K,
                FileType::Q3_K_M if layer < 2 => Q5_K,
                FileType::Q3_K_M => Q4_K,
                FileType::Q3_K_L => Q5_K,
                FileType::IQ4_NL | FileType::IQ4_XS if m.n_gqa >= 4 => Q5_K,
                FileType::Q4_K_M | FileType::Q5_K_M if more_bits(layer, m.n_layer) => Q6_K,
                FileType::Q4_K_S if layer < 4 => Q5_K,
                _ => ty,
            };
            // llama.cpp's 70B rule (its model type 70B is 80 layers).
            if m.n_layer == 80 && matches!(t, Q3_K | Q4_K) {
                Q5_K
            } else {
                t
            }
        }
        Category::FfnDown => match ftype {
            FileType::Q2_K => Q3_K,
            FileType::Q3_K_M if layer < m.n_layer / 16 => Q5_K,
            FileType::Q3_K_M => Q4_K,
            FileType::Q3_K_L => Q5_K,
            FileType::IQ4_NL | FileType::IQ4_XS if layer < m.n_layer / 8 => Q5_K,
            FileType::Q4_K_M | FileType::Q5_K_M if more_bits(layer, m.n_layer) => Q6_K,
            FileType::Q4_K_S if layer < m.n_layer / 8 => Q5_K,
            _ => ty,
        },
        Category::AttnOutput => match ftype {
            FileType::Q2_K => Q3_K,
            FileType::Q3_K_M => Q4_K,
            FileType::Q3_K_L => Q5_K,
            _ => ty,
        },
        Category::Output | Category::TokenEmbd | Category::Other => ty,
    }
}

/// Chooses a tensor's output type.
///
/// `dims` are GGUF dims (`dims[0]` = row length).
pub fn target_type(
    name: &str,
    dims: &[u64],
    current: GgmlType,
    ftype: FileType,
    m: ModelShape,
) -> GgmlType {
    let is_matrix = dims.len() >= 2 && name.ends_with("weight") && !name.ends_with("_norm.weight");
    if !is_matrix {
        return current;
    }
    let def = ftype.default_type();
    if !def.is_quantized() {
        return def;
    }
    let nx = dims[0];
    let cat = category(name);
    let ty = if cat == Category::Output || (!m.has_output && cat == Category::TokenEmbd) {
        if !nx.is_multiple_of(def.block_size() as u64) || def == GgmlType::Q8_0 {
            GgmlType::Q8_0
        } else {
            GgmlType::Q6_K
        }
    } else if cat == Category::TokenEmbd && matches!(ftype, FileType::TQ1_0 | FileType::TQ2_0) {
        // llama.cpp's ternary files keep a separate `token_embd` at Q4_K.
        GgmlType::Q4_K
    } else {
        mixture_type(def, cat, layer(name).unwrap_or(0), ftype, m)
    };
    fallback(ty, nx)
}

/// llama.cpp's fallback for a type whose blocks do not divide a row of
/// `nx` values.
fn fallback(ty: GgmlType, nx: u64) -> GgmlType {
    use GgmlType::*;
    let fits = |t: GgmlType| nx.is_multiple_of(t.block_size() as u64);
    if fits(ty) {
        return ty;
    }
    let t = match ty {
        IQ4_XS => IQ4_NL,
        Q2_K | Q3_K | TQ1_0 | TQ2_0 => Q4_0,
        Q4_K => Q5_0,
        Q5_K => Q5_1,
        Q6_K => Q8_0,
        _ => F16,
    };
    if fits(t) {
        t
    } else {
        F16
    }
}

/// Progress callback: `(tensor index, tensor count, tensor name)`.
pub type Progress<'a> = &'a mut dyn FnMut(usize, usize, &str);

/// What [`quantize_file`] writes, and with how many threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuantizeParams {
    /// The target file type.
    pub ftype: FileType,
    /// Threads that quantize each tensor's rows, each its own run of rows
    /// (0 counts as 1). Rows are quantized independently, so the file is
    /// the same byte for byte whatever the count.
    pub threads: usize,
}

/// Writes `input` requantized to `params.ftype` at `out`.
pub fn quantize_file(
    input: &GgufFile,
    out: &Path,
    params: QuantizeParams,
    progress: Progress<'_>,
) -> Result<(), ModelError> {
    let ftype = params.ftype;
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
    let shape = ModelShape::of(input);
    let n = input.tensors().len();
    for (i, t) in input.tensors().iter().enumerate() {
        progress(i, n, &t.name);
        let ty = target_type(&t.name, &t.dims, t.ty, ftype, shape);
        let src = input.tensor_data(t);
        let data = if ty == t.ty {
            src.to_vec()
        } else {
            let rows = Rows {
                from: t.ty,
                to: ty,
                row_len: t.row_len() as usize,
                n_rows: t.n_rows() as usize,
            };
            requantize(&t.name, src, rows, params.threads)?
        };
        w.add_tensor(&t.name, &t.dims, ty, data)?;
    }
    progress(n, n, "");
    w.write_file(out)?;
    Ok(())
}

/// A tensor's rows: their type before and after, their length, their count.
#[derive(Debug, Clone, Copy)]
struct Rows {
    from: GgmlType,
    to: GgmlType,
    row_len: usize,
    n_rows: usize,
}

/// Fewest values a thread takes: below it, starting a thread costs more
/// than the rows it would quantize.
const MIN_VALUES_PER_THREAD: usize = 1 << 16;

/// `src` (rows of `rows.from`) dequantized and quantized to `rows.to`, row
/// by row; `threads` threads each take one contiguous run of rows.
fn requantize(name: &str, src: &[u8], rows: Rows, threads: usize) -> Result<Vec<u8>, ModelError> {
    let Rows {
        from,
        to,
        row_len,
        n_rows,
    } = rows;
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
    let by_size = (row_len * n_rows / MIN_VALUES_PER_THREAD).max(1);
    let threads = threads.clamp(1, n_rows.max(1)).min(by_size);
    let per = n_rows.div_ceil(threads).max(1);
    let src = &src[..(in_row * n_rows).min(src.len())];
    let runs = src.chunks(per * in_row).zip(out.chunks_mut(per * out_row));
    let result = if threads == 1 {
        runs.into_iter()
            .try_for_each(|(s, d)| requantize_rows(s, d, rows, (in_row, out_row)))
    } else {
        std::thread::scope(|scope| {
            let handles: Vec<_> = runs
                .map(|(s, d)| scope.spawn(move || requantize_rows(s, d, rows, (in_row, out_row))))
                .collect();
            // A worker's panic would be a bug, not bad input (the kernels
            // return errors): raised again here as it was.
            handles
                .into_iter()
                .try_for_each(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
        })
    };
    result.map_err(|source| ModelError::Kernel {
        tensor: name.to_string(),
        source,
    })?;
    Ok(out)
}

/// One run of rows: `src` (`in_row` bytes each) into `dst` (`out_row`
/// bytes each).
fn requantize_rows(
    src: &[u8],
    dst: &mut [u8],
    rows: Rows,
    (in_row, out_row): (usize, usize),
) -> Result<(), KernelError> {
    let mut tmp = vec![0.0f32; rows.row_len];
    for (s, d) in src.chunks_exact(in_row).zip(dst.chunks_exact_mut(out_row)) {
        fak_kernels::dequantize_row(rows.from, s, &mut tmp)?;
        fak_kernels::quantize_row(rows.to, &tmp, d)?;
    }
    Ok(())
}

#[cfg(test)]
#[path = "quantize_tests.rs"]
mod tests;
