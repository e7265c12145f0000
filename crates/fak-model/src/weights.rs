//! Model weights: validated, memory-mapped tensors.
//!
//! Matrices stay in their GGUF block format inside the mapping and are read
//! row by row by the matmul kernels, except the matrices of the formats
//! [`PackedFormat::of`] names (Q8_0, Q5_0, Q4_0, Q4_1, Q5_1, IQ4_NL, Q4_K, Q5_K, Q6_K, Q2_K, Q3_K, IQ4_XS) that are used in
//! products and whose row count is a whole number of 8-row groups: those
//! are repacked once at load into the groups of
//! [`fak_kernels::packed`] (the layout its products need); their mapped
//! pages are then released, and read back from the file only by embedding
//! lookups. Small vectors (norm weights, biases) are
//! dequantized to f32 once at load.

use std::path::Path;
use std::sync::Arc;

use fak_gguf::{GgmlType, GgufFile, ModelConfig};
use fak_kernels::packed::{PackedFormat, PackedMatrix, GROUP_ROWS};
use fak_kernels::pool::ThreadPool;

use crate::error::ModelError;
use crate::gemma3::{GemmaNorms, WindowMode};
use crate::heads::QkNormWeights;
use crate::norms::vector;

/// A weight matrix `W` of shape `[n_out, n_in]`: `n_out` rows of `n_in`
/// elements, each row stored contiguously in block format `ty` (GGUF dims
/// `[n_in, n_out]`).
#[derive(Debug, Clone)]
pub struct Weight {
    /// Tensor name, for errors.
    pub name: String,
    /// Block format of the rows.
    pub ty: GgmlType,
    /// Elements per row (input features).
    pub n_in: usize,
    /// Number of rows (output features).
    pub n_out: usize,
    /// Index of the tensor in the file's tensor list.
    index: usize,
    /// Bytes per row.
    row_bytes: usize,
    /// The rows repacked for [`fak_kernels::packed`] (Q8_0, Q5_0, Q4_0,
    /// Q4_1, Q4_K, Q5_K and Q6_K product matrices whose row count is a whole
    /// number of groups); products then use it.
    pub(crate) packed: Option<Arc<PackedMatrix>>,
}

impl Weight {
    /// Bytes of one row in block format.
    pub fn row_bytes(&self) -> usize {
        self.row_bytes
    }

    /// Bytes of the whole matrix in block format.
    pub fn bytes(&self) -> usize {
        self.row_bytes.saturating_mul(self.n_out)
    }
}

/// One transformer layer's weights.
#[derive(Debug)]
pub(crate) struct Layer {
    pub attn_norm: Vec<f32>,
    pub wq: Weight,
    pub wk: Weight,
    pub wv: Weight,
    pub bq: Option<Vec<f32>>,
    pub bk: Option<Vec<f32>>,
    pub bv: Option<Vec<f32>>,
    /// q/k norm weights (qwen3), applied per head before rope.
    pub qk_norm: Option<QkNormWeights>,
    pub wo: Weight,
    pub ffn_norm: Vec<f32>,
    pub w_gate: Weight,
    pub w_up: Weight,
    pub w_down: Weight,
    /// Gemma 3's q/k and post-attention/FFN norms.
    pub gemma: Option<GemmaNorms>,
}

/// A loaded llama / qwen2 / qwen3 / gemma3 model. Immutable; shareable across threads.
pub struct Model {
    pub(crate) cfg: ModelConfig,
    pub(crate) file: GgufFile,
    pub(crate) tok_embd: Weight,
    pub(crate) output: Weight,
    pub(crate) output_norm: Vec<f32>,
    pub(crate) layers: Vec<Layer>,
    /// Persistent workers for the matrix products (see [`Model::set_threads`]).
    pub(crate) pool: Arc<ThreadPool>,
    /// Whether local layers keep to their window (see [`Model::set_window_mode`]).
    pub(crate) window_mode: WindowMode,
}

impl Model {
    /// Opens, validates and maps a GGUF model file.
    pub fn load(path: &Path) -> Result<Model, ModelError> {
        let file = GgufFile::open(path)?;
        Model::from_gguf(file)
    }

    /// Builds a model over an already opened GGUF file.
    pub fn from_gguf(file: GgufFile) -> Result<Model, ModelError> {
        let cfg = fak_gguf::model::model_config(&file)?;
        // The pool packs the weights at load, then runs the products.
        let pool = Arc::new(ThreadPool::new(
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
                .min(fak_kernels::pool::MAX_THREADS),
        )?);
        let (tok_embd, output) = if cfg.tied_embeddings {
            let w = matrix(&file, &pool, "token_embd.weight", Use::Products)?;
            (w.clone(), w)
        } else {
            (
                matrix(&file, &pool, "token_embd.weight", Use::Rows)?,
                matrix(&file, &pool, "output.weight", Use::Products)?,
            )
        };
        let output_norm = vector(&file, "output_norm.weight")?;
        let mut layers = Vec::with_capacity(cfg.n_layer);
        for i in 0..cfg.n_layer {
            let n = |s: &str| format!("blk.{i}.{s}");
            let bias = |s: &str| -> Result<Option<Vec<f32>>, ModelError> {
                if cfg.qkv_bias {
                    vector(&file, &n(s)).map(Some)
                } else {
                    Ok(None)
                }
            };
            layers.push(Layer {
                attn_norm: vector(&file, &n("attn_norm.weight"))?,
                wq: matrix(&file, &pool, &n("attn_q.weight"), Use::Products)?,
                wk: matrix(&file, &pool, &n("attn_k.weight"), Use::Products)?,
                wv: matrix(&file, &pool, &n("attn_v.weight"), Use::Products)?,
                bq: bias("attn_q.bias")?,
                bk: bias("attn_k.bias")?,
                bv: bias("attn_v.bias")?,
                qk_norm: QkNormWeights::load(&file, &cfg, i)?,
                wo: matrix(&file, &pool, &n("attn_output.weight"), Use::Products)?,
                ffn_norm: vector(&file, &n("ffn_norm.weight"))?,
                w_gate: matrix(&file, &pool, &n("ffn_gate.weight"), Use::Products)?,
                w_up: matrix(&file, &pool, &n("ffn_up.weight"), Use::Products)?,
                w_down: matrix(&file, &pool, &n("ffn_down.weight"), Use::Products)?,
                gemma: match cfg.gemma3 {
                    Some(_) => Some(GemmaNorms::load(&file, i, vector)?),
                    None => None,
                },
            });
        }
        Ok(Model {
            cfg,
            file,
            tok_embd,
            output,
            output_norm,
            layers,
            pool,
            window_mode: WindowMode::AsTrained,
        })
    }

    /// The validated hyperparameters.
    pub fn config(&self) -> &ModelConfig {
        &self.cfg
    }

    /// Sets whether sliding-window layers keep to their window
    /// ([`WindowMode::Full`] changes the results; it is for measuring).
    pub fn set_window_mode(&mut self, mode: WindowMode) {
        self.window_mode = mode;
    }

    /// Whether sliding-window layers keep to their window.
    pub fn window_mode(&self) -> WindowMode {
        self.window_mode
    }

    /// The underlying GGUF file (metadata, tokenizer, tensors).
    pub fn gguf(&self) -> &GgufFile {
        &self.file
    }

    /// Bytes of row `r` of `w` (`r < w.n_out`, checked by callers).
    pub(crate) fn row<'a>(&'a self, w: &Weight, r: usize) -> &'a [u8] {
        let all = self.matrix_bytes(w);
        &all[r * w.row_bytes..(r + 1) * w.row_bytes]
    }

    /// All bytes of `w`: `[n_out][row_bytes]`.
    pub(crate) fn matrix_bytes<'a>(&'a self, w: &Weight) -> &'a [u8] {
        match self.file.tensors().get(w.index) {
            Some(t) => self.file.tensor_data(t),
            None => &[],
        }
    }
}

/// Whether a matrix is used in products (and so repacked) or only read by
/// rows (an untied token embedding).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Use {
    /// Matrix products: repack it if its format has a packed layout.
    Products,
    /// Row lookups only: keep the mapped rows alone.
    Rows,
}

fn matrix(
    file: &GgufFile,
    pool: &ThreadPool,
    name: &str,
    usage: Use,
) -> Result<Weight, ModelError> {
    let index = file
        .tensors()
        .iter()
        .position(|t| t.name == name)
        .ok_or_else(|| ModelError::MissingTensor(name.to_string()))?;
    let t = &file.tensors()[index];
    if !fak_kernels::can_vec_dot(t.ty) {
        return Err(ModelError::UnsupportedType {
            tensor: name.to_string(),
            ty: t.ty,
            why: "no matmul kernel for this weight type",
        });
    }
    let n_in = t.row_len() as usize;
    let n_out = t.n_rows() as usize;
    let row_bytes = t.ty.row_bytes(t.row_len()).unwrap_or(0) as usize;
    let packed = match PackedFormat::of(t.ty) {
        Some(format)
            if usage == Use::Products
                && n_out.is_multiple_of(GROUP_ROWS)
                && format.packs(file.tensor_data(t)) =>
        {
            let p = PackedMatrix::pack_on(pool, format, file.tensor_data(t), n_out, n_in).map_err(
                |source| ModelError::Kernel {
                    tensor: name.to_string(),
                    source,
                },
            )?;
            // The products read the packed copy; the mapped rows are only
            // read again by embedding lookups, which fault in what they
            // touch.
            file.release_tensor_pages(t);
            Some(Arc::new(p))
        }
        _ => None,
    };
    Ok(Weight {
        name: name.to_string(),
        ty: t.ty,
        n_in,
        n_out,
        index,
        row_bytes,
        packed,
    })
}
