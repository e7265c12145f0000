//! The crate's single error type.
//!
//! Every variant names the thing at fault (metadata key, tensor name, header
//! field) so that a rejected file can be diagnosed from the message alone.

use std::path::PathBuf;

use crate::types::GgmlType;

/// Everything that can go wrong while reading, writing or validating GGUF.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GgufError {
    /// The file could not be opened, mapped, written or renamed.
    #[error("'{path}': {source}")]
    Io {
        /// The file involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Writing to a caller-supplied sink failed.
    #[error("writing GGUF output: {source}")]
    Sink {
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The first four bytes are not `GGUF`.
    #[error("bad magic {found:02x?}: not a GGUF file (expected the bytes \"GGUF\")")]
    BadMagic {
        /// The bytes found at offset 0.
        found: [u8; 4],
    },
    /// The header's version field is not 2 or 3.
    #[error("header field 'version' = {version} is unsupported (only GGUF v2 and v3 are read; v1 used 32-bit counts)")]
    UnsupportedVersion {
        /// The version read.
        version: u32,
    },
    /// The version field only makes sense byte-swapped.
    #[error("header field 'version' = {raw:#010x} looks like a big-endian GGUF file; only little-endian files are supported")]
    BigEndian {
        /// The raw little-endian reading of the field.
        raw: u32,
    },
    /// A read ran past the end of the file.
    #[error(
        "truncated file: {what} needs {need} bytes at offset {offset}, but only {available} remain"
    )]
    Truncated {
        /// What was being read.
        what: String,
        /// Absolute file offset of the read.
        offset: u64,
        /// Bytes the read needed.
        need: u64,
        /// Bytes left in the file.
        available: u64,
    },
    /// A count cannot possibly be satisfied by the bytes left in the file.
    #[error("{what} = {count} is impossible: each entry needs at least {min_each} bytes and only {available} remain at offset {offset}")]
    CountTooLarge {
        /// The field holding the count.
        what: String,
        /// The count read.
        count: u64,
        /// Minimum encoded size of one entry.
        min_each: u64,
        /// Absolute file offset after the count.
        offset: u64,
        /// Bytes left in the file.
        available: u64,
    },
    /// A string is not UTF-8.
    #[error("{what}: string is not valid UTF-8")]
    InvalidUtf8 {
        /// Where the string was read.
        what: String,
    },
    /// A metadata value type id outside 0..=12.
    #[error("key '{key}': unknown metadata value type {type_id}")]
    UnknownValueType {
        /// The key whose value (or array element type) was unknown.
        key: String,
        /// The raw type id.
        type_id: u32,
    },
    /// Arrays of arrays nested past [`crate::value::MAX_ARRAY_DEPTH`].
    #[error("key '{key}': arrays nested deeper than {max} levels")]
    ArrayTooDeep {
        /// The offending key.
        key: String,
        /// The allowed depth.
        max: usize,
    },
    /// A bool byte that is neither 0 nor 1.
    #[error("key '{key}': bool byte {byte} is neither 0 nor 1")]
    InvalidBool {
        /// The offending key.
        key: String,
        /// The byte read.
        byte: u8,
    },
    /// A metadata key appears twice.
    #[error("duplicate metadata key '{key}'")]
    DuplicateKey {
        /// The repeated key.
        key: String,
    },
    /// A metadata key is empty or too long.
    #[error("metadata key '{key}' is invalid: {reason}")]
    InvalidKey {
        /// The key (possibly empty).
        key: String,
        /// Why it was rejected.
        reason: &'static str,
    },
    /// `general.alignment` is not a u32 power of two in range.
    #[error("key 'general.alignment': {reason}")]
    BadAlignment {
        /// Why it was rejected.
        reason: String,
    },
    /// A metadata value has a different type than the caller asked for.
    #[error("key '{key}': expected {expected}, found {found}")]
    WrongType {
        /// The key looked up.
        key: String,
        /// The type asked for.
        expected: &'static str,
        /// The type present in the file.
        found: String,
    },
    /// A signed integer asked for as unsigned is negative.
    #[error("key '{key}': value {value} is negative")]
    NegativeValue {
        /// The key looked up.
        key: String,
        /// The value stored.
        value: i64,
    },
    /// A tensor name appears twice.
    #[error("duplicate tensor name '{name}'")]
    DuplicateTensor {
        /// The repeated name.
        name: String,
    },
    /// A tensor name is empty or longer than ggml allows.
    #[error("tensor #{index} name '{name}' is invalid: {reason}")]
    InvalidTensorName {
        /// Position in the tensor list.
        index: u64,
        /// The name read.
        name: String,
        /// Why it was rejected.
        reason: &'static str,
    },
    /// `n_dims` outside 1..=4.
    #[error("tensor '{name}': n_dims = {n_dims}, must be 1..=4")]
    BadDimCount {
        /// The tensor.
        name: String,
        /// The dimension count read.
        n_dims: u64,
    },
    /// A dimension of size zero.
    #[error("tensor '{name}': dimension {index} of shape {dims:?} is zero")]
    ZeroDim {
        /// The tensor.
        name: String,
        /// Which dimension.
        index: usize,
        /// The whole shape.
        dims: Vec<u64>,
    },
    /// The shape's element or byte count does not fit in `i64`.
    #[error("tensor '{name}': element or byte count of shape {dims:?} overflows")]
    ElementCountOverflow {
        /// The tensor.
        name: String,
        /// The shape.
        dims: Vec<u64>,
    },
    /// A tensor type id fak does not know.
    #[error("tensor '{name}': unknown tensor type id {type_id}")]
    UnknownTensorType {
        /// The tensor.
        name: String,
        /// The raw type id.
        type_id: u32,
    },
    /// The row length is not a whole number of blocks.
    #[error("tensor '{name}': row length {row_len} is not a multiple of the {ty} block size {block_size}")]
    RowNotBlockMultiple {
        /// The tensor.
        name: String,
        /// `dims[0]`.
        row_len: u64,
        /// The tensor type.
        ty: GgmlType,
        /// Elements per block of `ty`.
        block_size: u64,
    },
    /// A tensor's data offset is not a multiple of the alignment.
    #[error("tensor '{name}': data offset {offset} is not aligned to {alignment}")]
    Misaligned {
        /// The tensor.
        name: String,
        /// Offset relative to the data section.
        offset: u64,
        /// The file's alignment.
        alignment: u64,
    },
    /// A tensor's bytes run past the end of the file.
    #[error("tensor '{name}': data at offset {offset} with {n_bytes} bytes lies outside the {data_len}-byte data section")]
    TensorOutOfFile {
        /// The tensor.
        name: String,
        /// Offset relative to the data section.
        offset: u64,
        /// Size of the tensor's data.
        n_bytes: u64,
        /// Size of the data section.
        data_len: u64,
    },
    /// Two tensors share bytes.
    #[error("tensors '{first}' and '{second}' overlap: '{first}' ends at data offset {first_end}, '{second}' starts at {second_start}")]
    TensorOverlap {
        /// The tensor with the lower offset.
        first: String,
        /// Exclusive end of its data.
        first_end: u64,
        /// The tensor starting inside it.
        second: String,
        /// Start of its data.
        second_start: u64,
    },
    /// The aligned data section starts past the end of a file that has tensors.
    #[error("data section offset {data_offset} is past the end of the {file_len}-byte file")]
    DataSectionOutOfFile {
        /// Where the data section would start.
        data_offset: u64,
        /// Size of the file.
        file_len: u64,
    },
    /// The writer was asked for a version other than 2 or 3.
    #[error("writer: GGUF version {version} cannot be written (only 2 and 3)")]
    UnsupportedWriteVersion {
        /// The version asked for.
        version: u32,
    },
    /// Tensor bytes handed to the writer do not match the shape.
    #[error("tensor '{name}': data is {actual} bytes, but {ty} shape {dims:?} needs {expected}")]
    TensorDataSize {
        /// The tensor.
        name: String,
        /// Its type.
        ty: GgmlType,
        /// Its shape.
        dims: Vec<u64>,
        /// Bytes the shape needs.
        expected: u64,
        /// Bytes supplied.
        actual: u64,
    },
    /// A key the model needs is absent.
    #[error("missing required key '{key}'")]
    MissingKey {
        /// The key.
        key: String,
    },
    /// `general.architecture` names an architecture fak does not run.
    #[error(
        "key 'general.architecture' = '{arch}' is not supported (expected 'llama', 'qwen2' or 'qwen3')"
    )]
    UnsupportedArch {
        /// The architecture string.
        arch: String,
    },
    /// A hyperparameter is present but unusable.
    #[error("key '{key}': {reason}")]
    BadHyperparameter {
        /// The key.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A special token id does not index the vocabulary.
    #[error("key '{key}': token id {id} is out of range for a vocabulary of {n_vocab} tokens")]
    TokenIdOutOfRange {
        /// The key.
        key: String,
        /// The id stored.
        id: u64,
        /// Vocabulary size.
        n_vocab: u64,
    },
    /// A tensor the architecture needs is absent.
    #[error("missing tensor '{name}' (expected shape {expected:?})")]
    MissingTensor {
        /// The tensor.
        name: String,
        /// The shape it should have.
        expected: Vec<u64>,
    },
    /// A tensor has a different shape than the hyperparameters imply.
    #[error("tensor '{name}': shape {actual:?} does not match the expected {expected:?}")]
    ShapeMismatch {
        /// The tensor.
        name: String,
        /// Shape implied by the hyperparameters.
        expected: Vec<u64>,
        /// Shape in the file.
        actual: Vec<u64>,
    },
    /// A tensor the architecture does not use (fak would silently ignore it).
    #[error("unexpected tensor '{name}': not used by architecture '{arch}'")]
    UnexpectedTensor {
        /// The tensor.
        name: String,
        /// The architecture.
        arch: &'static str,
    },
    /// A tensor's type or values are unusable where it appears.
    #[error("tensor '{name}': {reason}")]
    BadTensor {
        /// The tensor.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A model feature fak does not implement.
    #[error("key '{key}': {feature} is not supported")]
    UnsupportedFeature {
        /// The key that requests the feature.
        key: String,
        /// The feature.
        feature: String,
    },
}
