//! Errors of model loading and the forward pass.

/// What went wrong while loading a model or running a forward pass.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The GGUF file could not be read or failed validation.
    #[error(transparent)]
    Gguf(#[from] fak_gguf::GgufError),
    /// A tensor the architecture needs is absent.
    #[error("missing tensor '{0}'")]
    MissingTensor(String),
    /// A kernel rejected its input (unsupported type, bad length).
    #[error("tensor '{tensor}': {source}")]
    Kernel {
        tensor: String,
        #[source]
        source: fak_kernels::KernelError,
    },
    /// A tensor's type cannot be used where it appears.
    #[error("tensor '{tensor}': type {ty} is not supported here ({why})")]
    UnsupportedType {
        tensor: String,
        ty: fak_gguf::GgmlType,
        why: &'static str,
    },
    /// The batch is malformed.
    #[error("invalid batch: {0}")]
    Batch(#[from] BatchError),
    /// The matmul thread pool could not be started or a worker failed.
    #[error("thread pool: {0}")]
    Pool(#[from] fak_kernels::pool::PoolError),
    /// The KV store refused an access.
    #[error(transparent)]
    Kv(#[from] KvError),
}

/// A malformed batch or product, named by what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    /// A token id outside the vocabulary.
    #[error("token {index}: id {id} is not below n_vocab {n_vocab}")]
    TokenOutOfRange {
        index: usize,
        id: u32,
        n_vocab: usize,
    },
    /// A token at a position that is not its sequence's next one.
    #[error("token {index}: sequence {seq} expects position {expected}, got {got}")]
    Position {
        index: usize,
        seq: u32,
        expected: usize,
        got: u32,
    },
    /// Activations or output that do not fit a weight's shape.
    #[error("matmul '{tensor}': activations [{n_tok}, {n_in}] and output of {out_len} values do not fit [{n_out}, {w_in}]")]
    Shape {
        tensor: String,
        n_tok: usize,
        n_in: usize,
        out_len: usize,
        n_out: usize,
        w_in: usize,
    },
    /// Weight rows outside the tensor's bytes.
    #[error("matmul '{tensor}': weight rows {lo}..{hi} are outside the tensor")]
    WeightRows {
        tensor: String,
        lo: usize,
        hi: usize,
    },
}

/// A refused KV access.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KvError {
    /// The sequence id is not known to the store.
    #[error("unknown sequence {0}")]
    UnknownSeq(u32),
    /// The position does not fit the store's context.
    #[error("sequence {seq}: position {pos} is beyond the context size {n_ctx}")]
    ContextFull { seq: u32, pos: usize, n_ctx: usize },
    /// A write skipped positions or a read asked for an unwritten one.
    #[error("sequence {seq}: position {pos} is not next (sequence holds {len} positions)")]
    NotContiguous { seq: u32, pos: usize, len: usize },
    /// The row width does not match the store's layout.
    #[error("row of {got} values does not match the KV width {want}")]
    Width { got: usize, want: usize },
    /// A paged store has no free block left for the new positions.
    #[error("KV cache is full: {needed} more blocks needed, {available} available")]
    OutOfBlocks { needed: usize, available: usize },
    /// A paged store's block manager (fak-kv) refused the access; its
    /// error, unchanged.
    #[error("sequence {seq}: {source}")]
    Store { seq: u32, source: fak_kv::KvError },
    /// The store's size overflows memory arithmetic.
    #[error(
        "a KV store of {segments} x {seg_rows} rows of {n_kv_dim} values is too large to address"
    )]
    TooLarge {
        segments: usize,
        seg_rows: usize,
        n_kv_dim: usize,
    },
    /// The allocator refused the store's memory.
    #[error("cannot allocate {bytes} bytes for KV rows (give a smaller context or KV pool)")]
    AllocFailed { bytes: usize },
    /// The KV element type cannot hold this model's rows.
    #[error("KV type {ty} needs a head dim that is a multiple of 32 (this model's is {head_dim})")]
    TypeUnsupported { ty: &'static str, head_dim: usize },
}
