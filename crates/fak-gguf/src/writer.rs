//! [`GgufWriter`]: builds GGUF v3 (or v2) files that the reader accepts.
//!
//! The writer refuses anything the reader would reject: duplicate keys or
//! tensor names, bad alignment, over-deep arrays, invalid shapes and tensor
//! data whose length does not match the shape. Layout:
//!
//! ```text
//! header | kv pairs (insertion order) | tensor infos | pad | t0 | pad | t1 | pad ...
//!                                                          ^ every tensor starts on
//!                                                            a multiple of alignment
//! ```

use std::io::{BufWriter, Write};
use std::path::Path;

use crate::error::GgufError;
use crate::file::GGUF_MAGIC;
use crate::metadata::{
    alignment_from, validate_key, validate_value, ALIGNMENT_KEY, DEFAULT_ALIGNMENT,
};
use crate::tensor::{align_up, tensor_n_bytes, validate_tensor_name};
use crate::types::GgmlType;
use crate::value::{MetaArray, MetaValue};

/// A tensor queued for writing.
#[derive(Debug, Clone)]
struct PendingTensor {
    name: String,
    dims: Vec<u64>,
    ty: GgmlType,
    data: Vec<u8>,
}

/// Builds a GGUF file in memory and writes it out.
#[derive(Debug, Clone)]
pub struct GgufWriter {
    version: u32,
    metadata: Vec<(String, MetaValue)>,
    tensors: Vec<PendingTensor>,
}

impl Default for GgufWriter {
    fn default() -> Self {
        GgufWriter::new()
    }
}

/// Writes into a sink, mapping I/O errors.
struct Out<W: Write> {
    w: W,
    written: u64,
}

impl<W: Write> Out<W> {
    fn bytes(&mut self, b: &[u8]) -> Result<(), GgufError> {
        self.w
            .write_all(b)
            .map_err(|source| GgufError::Sink { source })?;
        self.written = self.written.saturating_add(b.len() as u64);
        Ok(())
    }

    fn u32(&mut self, x: u32) -> Result<(), GgufError> {
        self.bytes(&x.to_le_bytes())
    }

    fn u64(&mut self, x: u64) -> Result<(), GgufError> {
        self.bytes(&x.to_le_bytes())
    }

    fn string(&mut self, s: &str) -> Result<(), GgufError> {
        self.u64(s.len() as u64)?;
        self.bytes(s.as_bytes())
    }

    fn pad_to(&mut self, alignment: u64) -> Result<(), GgufError> {
        let target = align_up(self.written, alignment).unwrap_or(self.written);
        let zeros = [0u8; 64];
        let mut left = target - self.written;
        while left > 0 {
            let n = left.min(zeros.len() as u64);
            self.bytes(zeros.get(..n as usize).unwrap_or(&[]))?;
            left -= n;
        }
        Ok(())
    }

    fn value(&mut self, v: &MetaValue) -> Result<(), GgufError> {
        match v {
            MetaValue::U8(x) => self.bytes(&x.to_le_bytes()),
            MetaValue::I8(x) => self.bytes(&x.to_le_bytes()),
            MetaValue::U16(x) => self.bytes(&x.to_le_bytes()),
            MetaValue::I16(x) => self.bytes(&x.to_le_bytes()),
            MetaValue::U32(x) => self.bytes(&x.to_le_bytes()),
            MetaValue::I32(x) => self.bytes(&x.to_le_bytes()),
            MetaValue::F32(x) => self.bytes(&x.to_le_bytes()),
            MetaValue::U64(x) => self.bytes(&x.to_le_bytes()),
            MetaValue::I64(x) => self.bytes(&x.to_le_bytes()),
            MetaValue::F64(x) => self.bytes(&x.to_le_bytes()),
            MetaValue::Bool(b) => self.bytes(&[u8::from(*b)]),
            MetaValue::Str(s) => self.string(s),
            MetaValue::Array(a) => self.array(a),
        }
    }

    fn array(&mut self, a: &MetaArray) -> Result<(), GgufError> {
        self.u32(a.elem_type().id())?;
        self.u64(a.len() as u64)?;
        macro_rules! each_le {
            ($v:expr) => {{
                for x in $v {
                    self.bytes(&x.to_le_bytes())?;
                }
                Ok(())
            }};
        }
        match a {
            MetaArray::U8(v) => self.bytes(v),
            MetaArray::I8(v) => each_le!(v),
            MetaArray::U16(v) => each_le!(v),
            MetaArray::I16(v) => each_le!(v),
            MetaArray::U32(v) => each_le!(v),
            MetaArray::I32(v) => each_le!(v),
            MetaArray::F32(v) => each_le!(v),
            MetaArray::U64(v) => each_le!(v),
            MetaArray::I64(v) => each_le!(v),
            MetaArray::F64(v) => each_le!(v),
            MetaArray::Bool(v) => {
                for b in v {
                    self.bytes(&[u8::from(*b)])?;
                }
                Ok(())
            }
            MetaArray::Str(v) => {
                for s in v {
                    self.string(s)?;
                }
                Ok(())
            }
            MetaArray::Array(v) => {
                for inner in v {
                    self.array(inner)?;
                }
                Ok(())
            }
        }
    }
}

impl GgufWriter {
    /// An empty GGUF v3 file with the default alignment of 32.
    pub fn new() -> Self {
        GgufWriter {
            version: 3,
            metadata: Vec::new(),
            tensors: Vec::new(),
        }
    }

    /// Selects the version written (2 or 3; the little-endian encodings
    /// are identical apart from this field).
    pub fn set_version(&mut self, version: u32) -> Result<(), GgufError> {
        if !matches!(version, 2 | 3) {
            return Err(GgufError::UnsupportedWriteVersion { version });
        }
        self.version = version;
        Ok(())
    }

    /// The data alignment that will be written: `general.alignment` if set
    /// to a valid value, else 32.
    pub fn alignment(&self) -> u64 {
        alignment_from(self.get(ALIGNMENT_KEY)).unwrap_or(DEFAULT_ALIGNMENT)
    }

    /// Sets the data alignment by storing it as the `u32` key
    /// `general.alignment`. It must be a non-zero power of two <= 1 MiB.
    /// Asking for the default (32) while the key is absent writes nothing,
    /// as llama.cpp does.
    pub fn set_alignment(&mut self, a: u64) -> Result<(), GgufError> {
        let value = u32::try_from(a)
            .map(MetaValue::U32)
            .map_err(|_| GgufError::BadAlignment {
                reason: format!("{a} does not fit a u32"),
            })?;
        alignment_from(Some(&value))?;
        if a == DEFAULT_ALIGNMENT && self.get(ALIGNMENT_KEY).is_none() {
            return Ok(());
        }
        self.set_kv(ALIGNMENT_KEY, value);
        Ok(())
    }

    /// The value queued under `key`.
    pub fn get(&self, key: &str) -> Option<&MetaValue> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Appends a key/value pair; a duplicate key, an invalid key or an
    /// invalid value (e.g. a bad `general.alignment`) is an error.
    pub fn add_kv(&mut self, key: &str, v: MetaValue) -> Result<(), GgufError> {
        validate_key(key)?;
        validate_value(key, &v)?;
        if self.get(key).is_some() {
            return Err(GgufError::DuplicateKey {
                key: key.to_string(),
            });
        }
        self.metadata.push((key.to_string(), v));
        Ok(())
    }

    /// Inserts or replaces a key/value pair, keeping an existing key's
    /// position. Validation is deferred to [`GgufWriter::write_to`].
    pub fn set_kv(&mut self, key: &str, v: MetaValue) {
        match self.metadata.iter_mut().find(|(k, _)| k == key) {
            Some((_, slot)) => *slot = v,
            None => self.metadata.push((key.to_string(), v)),
        }
    }

    /// Removes `key`, returning its value.
    pub fn remove_kv(&mut self, key: &str) -> Option<MetaValue> {
        let i = self.metadata.iter().position(|(k, _)| k == key)?;
        Some(self.metadata.remove(i).1)
    }

    /// Queues a tensor.
    ///
    /// `dims` is the shape in ggml order (`dims[0]` = contiguous row
    /// length, 1..=4 dims). `data` is the raw tensor bytes: `n_rows` rows of
    /// `ty.row_bytes(dims[0])` bytes in `ty`'s block format, so its length
    /// must be exactly `row_bytes * dims[1] * dims[2] * dims[3]`.
    pub fn add_tensor(
        &mut self,
        name: &str,
        dims: &[u64],
        ty: GgmlType,
        data: Vec<u8>,
    ) -> Result<(), GgufError> {
        validate_tensor_name(self.tensors.len() as u64, name)?;
        if self.tensors.iter().any(|t| t.name == name) {
            return Err(GgufError::DuplicateTensor {
                name: name.to_string(),
            });
        }
        let expected = tensor_n_bytes(name, dims, ty)?;
        if data.len() as u64 != expected {
            return Err(GgufError::TensorDataSize {
                name: name.to_string(),
                ty,
                dims: dims.to_vec(),
                expected,
                actual: data.len() as u64,
            });
        }
        self.tensors.push(PendingTensor {
            name: name.to_string(),
            dims: dims.to_vec(),
            ty,
            data,
        });
        Ok(())
    }

    /// Removes the tensor called `name`, returning whether it existed.
    pub fn remove_tensor(&mut self, name: &str) -> bool {
        let before = self.tensors.len();
        self.tensors.retain(|t| t.name != name);
        self.tensors.len() != before
    }

    /// Serializes the file into `w`.
    pub fn write_to<W: Write>(&self, w: W) -> Result<(), GgufError> {
        for (k, v) in &self.metadata {
            validate_key(k)?;
            validate_value(k, v)?;
        }
        let alignment = alignment_from(self.get(ALIGNMENT_KEY))?;
        let mut out = Out {
            w: BufWriter::new(w),
            written: 0,
        };
        out.bytes(&GGUF_MAGIC)?;
        out.u32(self.version)?;
        out.u64(self.tensors.len() as u64)?;
        out.u64(self.metadata.len() as u64)?;
        for (k, v) in &self.metadata {
            out.string(k)?;
            out.u32(v.value_type().id())?;
            out.value(v)?;
        }
        let mut offset = 0u64;
        for t in &self.tensors {
            out.string(&t.name)?;
            out.u32(t.dims.len() as u32)?;
            for &d in &t.dims {
                out.u64(d)?;
            }
            out.u32(t.ty.id())?;
            out.u64(offset)?;
            let end = offset.saturating_add(t.data.len() as u64);
            offset = align_up(end, alignment).unwrap_or(end);
        }
        out.pad_to(alignment)?;
        for t in &self.tensors {
            out.bytes(&t.data)?;
            out.pad_to(alignment)?;
        }
        out.w.flush().map_err(|source| GgufError::Sink { source })
    }

    /// Serializes the file into memory.
    pub fn to_bytes(&self) -> Result<Vec<u8>, GgufError> {
        let mut v = Vec::new();
        self.write_to(&mut v)?;
        Ok(v)
    }

    /// Writes the file to `path` atomically: into a temporary file in the
    /// same directory, synced, then renamed over `path`.
    pub fn write_file(&self, path: &Path) -> Result<(), GgufError> {
        let io = |p: &Path| {
            let p = p.to_path_buf();
            move |source| GgufError::Io { path: p, source }
        };
        let file_name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = path.with_file_name(format!(".{file_name}.tmp-{}", std::process::id()));
        let result = (|| {
            let f = std::fs::File::create(&tmp).map_err(io(&tmp))?;
            self.write_to(&f).map_err(|e| match e {
                GgufError::Sink { source } => GgufError::Io {
                    path: tmp.clone(),
                    source,
                },
                other => other,
            })?;
            f.sync_all().map_err(io(&tmp))?;
            std::fs::rename(&tmp, path).map_err(io(path))
        })();
        if result.is_err() {
            // Best effort: the temporary file is garbage either way.
            let _ = std::fs::remove_file(&tmp);
        }
        result
    }
}
