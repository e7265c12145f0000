//! [`GgufFile`]: a fully validated, read-only view of a GGUF v2/v3 file.
//!
//! Parsing happens once, in [`GgufFile::open`] / [`GgufFile::from_bytes`];
//! afterwards every accessor is infallible or a typed lookup. The checks, in
//! file order:
//!
//! 1. magic `GGUF`, version 2 or 3 (byte-swapped versions are reported as
//!    big-endian files);
//! 2. `n_tensors` / `n_kv` must fit in the remaining bytes at their minimum
//!    encoded sizes before anything is allocated;
//! 3. every key/value: non-empty unique key, known value type, strings and
//!    arrays inside the file, UTF-8 strings, 0/1 bools, bounded nesting;
//! 4. `general.alignment`: a `u32` power of two, at most 1 MiB;
//! 5. every tensor: unique valid name, 1..=4 non-zero dims, known type,
//!    whole blocks per row, no element/byte-count overflow;
//! 6. layout: aligned offsets, data inside the file, no two tensors overlap.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;

use memmap2::Mmap;

use crate::cursor::Cursor;
use crate::error::GgufError;
use crate::metadata::{alignment_from, read_kv, ALIGNMENT_KEY, MIN_KV_BYTES};
use crate::tensor::{align_up, check_layout, read_tensor_info, TensorInfo, MIN_TENSOR_INFO_BYTES};
use crate::value::{MetaArray, MetaValue};

/// The four magic bytes every GGUF file starts with.
pub const GGUF_MAGIC: [u8; 4] = *b"GGUF";

/// The bytes behind a [`GgufFile`].
enum Storage {
    Mapped(Mmap),
    Owned(Vec<u8>),
}

impl Storage {
    fn bytes(&self) -> &[u8] {
        match self {
            Storage::Mapped(m) => m,
            Storage::Owned(v) => v,
        }
    }
}

/// A parsed and validated GGUF file.
pub struct GgufFile {
    storage: Storage,
    version: u32,
    alignment: u64,
    data_offset: u64,
    metadata: Vec<(String, MetaValue)>,
    key_index: HashMap<String, usize>,
    tensors: Vec<TensorInfo>,
    tensor_index: HashMap<String, usize>,
}

impl fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GgufFile")
            .field("len", &self.storage.bytes().len())
            .field("version", &self.version)
            .field("alignment", &self.alignment)
            .field("data_offset", &self.data_offset)
            .field("n_kv", &self.metadata.len())
            .field("n_tensors", &self.tensors.len())
            .finish()
    }
}

/// Everything parsed out of the header, metadata and tensor descriptors.
struct Parsed {
    version: u32,
    alignment: u64,
    data_offset: u64,
    metadata: Vec<(String, MetaValue)>,
    key_index: HashMap<String, usize>,
    tensors: Vec<TensorInfo>,
    tensor_index: HashMap<String, usize>,
}

fn parse(bytes: &[u8]) -> Result<Parsed, GgufError> {
    let mut cur = Cursor::new(bytes);
    let magic = cur.array::<4>(&|| "header field 'magic'".into())?;
    if magic != GGUF_MAGIC {
        return Err(GgufError::BadMagic { found: magic });
    }
    let version = cur.u32(&|| "header field 'version'".into())?;
    match version {
        2 | 3 => {}
        v if matches!(v.swap_bytes(), 1..=3) => return Err(GgufError::BigEndian { raw: v }),
        v => return Err(GgufError::UnsupportedVersion { version: v }),
    }
    let n_tensors = cur.u64(&|| "header field 'n_tensors'".into())?;
    let n_kv = cur.u64(&|| "header field 'n_kv'".into())?;
    let n_kv = cur.check_count(n_kv, MIN_KV_BYTES, &|| "header field 'n_kv'".into())?;
    cur.check_count(n_tensors, MIN_TENSOR_INFO_BYTES, &|| {
        "header field 'n_tensors'".into()
    })?;

    let mut metadata = Vec::with_capacity(n_kv);
    let mut key_index = HashMap::with_capacity(n_kv);
    for i in 0..n_kv {
        let (key, value) = read_kv(&mut cur, i as u64)?;
        if key_index.insert(key.clone(), metadata.len()).is_some() {
            return Err(GgufError::DuplicateKey { key });
        }
        metadata.push((key, value));
    }
    let alignment = alignment_from(
        key_index
            .get(ALIGNMENT_KEY)
            .and_then(|&i| metadata.get(i))
            .map(|(_, v)| v),
    )?;

    // Re-check with the bytes that are left now that the metadata is read.
    let n_tensors = cur.check_count(n_tensors, MIN_TENSOR_INFO_BYTES, &|| {
        "header field 'n_tensors'".into()
    })?;
    let mut tensors = Vec::with_capacity(n_tensors);
    let mut tensor_index = HashMap::with_capacity(n_tensors);
    for i in 0..n_tensors {
        let t = read_tensor_info(&mut cur, i as u64)?;
        if tensor_index.insert(t.name.clone(), tensors.len()).is_some() {
            return Err(GgufError::DuplicateTensor { name: t.name });
        }
        tensors.push(t);
    }

    let file_len = bytes.len() as u64;
    let data_offset = align_up(cur.pos() as u64, alignment).unwrap_or(u64::MAX);
    let data_len = match file_len.checked_sub(data_offset) {
        Some(len) => len,
        // A file without tensors may omit the final padding.
        None if tensors.is_empty() => 0,
        None => {
            return Err(GgufError::DataSectionOutOfFile {
                data_offset,
                file_len,
            })
        }
    };
    check_layout(&tensors, alignment, data_len)?;
    Ok(Parsed {
        version,
        alignment,
        data_offset,
        metadata,
        key_index,
        tensors,
        tensor_index,
    })
}

fn wrong_type(key: &str, expected: &'static str, found: &MetaValue) -> GgufError {
    GgufError::WrongType {
        key: key.to_string(),
        expected,
        found: found.type_name(),
    }
}

impl GgufFile {
    /// Memory-maps and validates the file at `path`.
    pub fn open(path: &Path) -> Result<GgufFile, GgufError> {
        let io = |source| GgufError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = std::fs::File::open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        if len == 0 {
            return GgufFile::from_bytes(Vec::new());
        }
        // SAFETY: the mapping is read-only and fak never writes to model
        // files. Memory-mapping is only sound while no other process
        // truncates or rewrites the file; that is the documented contract
        // of `open` (the writer replaces files by rename, which leaves an
        // existing mapping intact).
        let map = unsafe { Mmap::map(&file) }.map_err(io)?;
        let parsed = parse(&map)?;
        Ok(GgufFile::assemble(Storage::Mapped(map), parsed))
    }

    /// Validates a file held in memory.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<GgufFile, GgufError> {
        let parsed = parse(&bytes)?;
        Ok(GgufFile::assemble(Storage::Owned(bytes), parsed))
    }

    fn assemble(storage: Storage, p: Parsed) -> GgufFile {
        GgufFile {
            storage,
            version: p.version,
            alignment: p.alignment,
            data_offset: p.data_offset,
            metadata: p.metadata,
            key_index: p.key_index,
            tensors: p.tensors,
            tensor_index: p.tensor_index,
        }
    }

    /// GGUF format version (2 or 3).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// Data alignment in bytes (`general.alignment`, default 32).
    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// Absolute file offset of the data section. For a file without
    /// tensors this may equal or exceed the file length.
    pub fn data_offset(&self) -> u64 {
        self.data_offset
    }

    /// The whole file.
    pub fn bytes(&self) -> &[u8] {
        self.storage.bytes()
    }

    /// All key/value pairs, in file order.
    pub fn metadata(&self) -> &[(String, MetaValue)] {
        &self.metadata
    }

    /// The value stored under `key`.
    pub fn get(&self, key: &str) -> Option<&MetaValue> {
        let i = *self.key_index.get(key)?;
        self.metadata.get(i).map(|(_, v)| v)
    }

    /// A string value; `Err` names the key if it holds another type.
    pub fn get_str(&self, key: &str) -> Result<Option<&str>, GgufError> {
        match self.get(key) {
            None => Ok(None),
            Some(MetaValue::Str(s)) => Ok(Some(s)),
            Some(v) => Err(wrong_type(key, "string", v)),
        }
    }

    /// Any integer type as `u64`; negative values and non-integers are
    /// errors naming the key.
    pub fn get_uint(&self, key: &str) -> Result<Option<u64>, GgufError> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        let x = v
            .as_i128()
            .ok_or_else(|| wrong_type(key, "an integer", v))?;
        u64::try_from(x)
            .map(Some)
            .map_err(|_| GgufError::NegativeValue {
                key: key.to_string(),
                value: i64::try_from(x).unwrap_or(i64::MIN),
            })
    }

    /// An `f32`, or an `f64` narrowed to `f32`.
    pub fn get_f32(&self, key: &str) -> Result<Option<f32>, GgufError> {
        match self.get(key) {
            None => Ok(None),
            Some(MetaValue::F32(x)) => Ok(Some(*x)),
            Some(MetaValue::F64(x)) => Ok(Some(*x as f32)),
            Some(v) => Err(wrong_type(key, "f32 or f64", v)),
        }
    }

    /// A bool value.
    pub fn get_bool(&self, key: &str) -> Result<Option<bool>, GgufError> {
        match self.get(key) {
            None => Ok(None),
            Some(MetaValue::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(wrong_type(key, "bool", v)),
        }
    }

    /// Any array value.
    pub fn get_array(&self, key: &str) -> Result<Option<&MetaArray>, GgufError> {
        match self.get(key) {
            None => Ok(None),
            Some(MetaValue::Array(a)) => Ok(Some(a)),
            Some(v) => Err(wrong_type(key, "an array", v)),
        }
    }

    /// An array of strings (element type must be string).
    pub fn get_str_array(&self, key: &str) -> Result<Option<&[String]>, GgufError> {
        match self.get(key) {
            None => Ok(None),
            Some(MetaValue::Array(MetaArray::Str(v))) => Ok(Some(v)),
            Some(v) => Err(wrong_type(key, "array of string", v)),
        }
    }

    /// An array of `i32` (element type must be i32).
    pub fn get_i32_array(&self, key: &str) -> Result<Option<&[i32]>, GgufError> {
        match self.get(key) {
            None => Ok(None),
            Some(MetaValue::Array(MetaArray::I32(v))) => Ok(Some(v)),
            Some(v) => Err(wrong_type(key, "array of i32", v)),
        }
    }

    /// An array of `f32` (element type must be f32).
    pub fn get_f32_array(&self, key: &str) -> Result<Option<&[f32]>, GgufError> {
        match self.get(key) {
            None => Ok(None),
            Some(MetaValue::Array(MetaArray::F32(v))) => Ok(Some(v)),
            Some(v) => Err(wrong_type(key, "array of f32", v)),
        }
    }

    /// All tensor descriptors, in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// The tensor called `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        let i = *self.tensor_index.get(name)?;
        self.tensors.get(i)
    }

    /// The raw data of `t`: exactly `t.n_bytes` bytes, laid out as
    /// `n_rows` rows of `row_len` elements in `t.ty`'s block format, row
    /// `r` at byte `r * row_bytes`.
    ///
    /// The bounds were validated at open for this file's tensors. A
    /// descriptor that did not come from this file is only bounds-checked:
    /// if it points outside the file, the result is empty.
    pub fn tensor_data(&self, t: &TensorInfo) -> &[u8] {
        let range = self
            .data_offset
            .checked_add(t.offset)
            .and_then(|start| Some((start, start.checked_add(t.n_bytes)?)))
            .and_then(|(s, e)| Some(usize::try_from(s).ok()?..usize::try_from(e).ok()?));
        range.and_then(|r| self.bytes().get(r)).unwrap_or(&[])
    }

    /// Lets the OS drop this process's mapped pages of `t`'s data (those
    /// wholly inside it, at 64 KiB granularity) once a caller has copied
    /// the data elsewhere, e.g. repacked it. The data stays readable:
    /// [`GgufFile::tensor_data`] faults the pages back in from the file
    /// (page cache) on the next access. This keeps the resident size of a
    /// model whose weights are repacked at load near one copy instead of
    /// two. Does nothing for files held in memory, or off Unix, or if the
    /// OS refuses (it is only advice).
    pub fn release_tensor_pages(&self, t: &TensorInfo) {
        const GRAIN: u64 = 64 * 1024;
        #[cfg(unix)]
        if let Storage::Mapped(map) = &self.storage {
            let Some(start) = self.data_offset.checked_add(t.offset) else {
                return;
            };
            let Some(end) = start.checked_add(t.n_bytes) else {
                return;
            };
            let (lo, hi) = (start.next_multiple_of(GRAIN), end / GRAIN * GRAIN);
            let (Ok(lo), Ok(hi)) = (usize::try_from(lo), usize::try_from(hi)) else {
                return;
            };
            if lo < hi && hi <= map.len() {
                // SAFETY: the mapping is a read-only, shared mapping of a
                // file (`Mmap::map`). MADV_DONTNEED on it only unmaps the
                // pages from this process: the next read faults them back
                // in with the file's unchanged contents, so every `&[u8]`
                // into the mapping keeps reading the same bytes. The range
                // is inside the mapping and starts at a multiple of 64 KiB
                // from its (page-aligned) start. Failure is harmless.
                let _ = unsafe {
                    map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, lo, hi - lo)
                };
            }
        }
        #[cfg(not(unix))]
        let _ = (t, GRAIN);
    }

    /// The data of the tensor called `name` (see [`GgufFile::tensor_data`]).
    pub fn tensor_data_by_name(&self, name: &str) -> Option<&[u8]> {
        self.tensor(name).map(|t| self.tensor_data(t))
    }
}
