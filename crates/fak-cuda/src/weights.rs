//! Weight matrices on the device.
//!
//! A matrix `W` of shape `[n_out, n_in]` (GGUF dims `[n_in, n_out]`) is
//! uploaded once and stays resident:
//!
//! ```text
//! Q8_0 (34-byte blocks: f16 d, 32 × i8)  ──repack──►  qs [n_out, n_in] i8   (each row's quants back to back,
//!                                                                             16-byte aligned for int4 loads)
//!                                                     d  [n_out, n_in / 32] f32 (the f16 scales, exact)
//! Q4_K (144-byte blocks)                 ──as is───►  blocks [n_out, n_in / 256]
//! ```

use cudarc::driver::CudaSlice;
use fak_gguf::GgmlType;

use crate::device::Device;
use crate::error::CudaError;

/// A weight matrix resident on the device.
pub struct DeviceMatrix {
    /// Tensor name, for errors and reports.
    pub name: String,
    /// The file's block format.
    pub ty: GgmlType,
    /// Elements per row.
    pub n_in: usize,
    /// Rows.
    pub n_out: usize,
    pub(crate) data: MatrixData,
}

impl std::fmt::Debug for DeviceMatrix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceMatrix")
            .field("name", &self.name)
            .field("ty", &self.ty)
            .field("n_in", &self.n_in)
            .field("n_out", &self.n_out)
            .finish()
    }
}

/// The device layout of each supported format.
pub(crate) enum MatrixData {
    Q8_0 {
        qs: CudaSlice<i8>,
        d: CudaSlice<f32>,
    },
    Q4K {
        blocks: CudaSlice<u8>,
    },
}

/// Whether matrices of `ty` can run on the device.
pub fn supported(ty: GgmlType) -> bool {
    matches!(ty, GgmlType::Q8_0 | GgmlType::Q4_K)
}

/// Splits Q8_0 rows into quants and f32 scales (the repacked layout).
///
/// * `bytes`: `n_out` rows of `n_in / 32` 34-byte blocks.
///
/// Returns (`[n_out * n_in]` quants, `[n_out * n_in / 32]` scales).
pub(crate) fn repack_q8_0(bytes: &[u8]) -> (Vec<i8>, Vec<f32>) {
    let nb = bytes.len() / 34;
    let mut qs = Vec::with_capacity(nb * 32);
    let mut d = Vec::with_capacity(nb);
    for b in bytes.chunks_exact(34) {
        d.push(half::f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32());
        qs.extend(b[2..].iter().map(|&q| q as i8));
    }
    (qs, d)
}

impl DeviceMatrix {
    /// Uploads a matrix of `ty` stored as `bytes` (`n_out` rows).
    ///
    /// # Errors
    ///
    /// [`CudaError::Unsupported`] for a format without a device product or
    /// rows that are not whole blocks; [`CudaError::Spec`] when `bytes` has
    /// the wrong length; driver errors.
    pub fn upload(
        dev: &Device,
        name: &str,
        ty: GgmlType,
        n_in: usize,
        n_out: usize,
        bytes: &[u8],
    ) -> Result<DeviceMatrix, CudaError> {
        let block = ty.block_size();
        if !supported(ty) || !n_in.is_multiple_of(block) {
            return Err(CudaError::Unsupported(format!(
                "{name}: {ty:?} matrix with rows of {n_in} (the device has Q8_0 and Q4_K products)"
            )));
        }
        let want = n_out * (n_in / block) * ty.type_size();
        if bytes.len() != want {
            return Err(CudaError::Spec(format!(
                "{name}: {} bytes, {want} expected for [{n_out}, {n_in}] {ty:?}",
                bytes.len()
            )));
        }
        let data = match ty {
            GgmlType::Q8_0 => {
                let (qs, d) = repack_q8_0(bytes);
                MatrixData::Q8_0 {
                    qs: dev.stream.clone_htod(&qs)?,
                    d: dev.stream.clone_htod(&d)?,
                }
            }
            _ => MatrixData::Q4K {
                blocks: dev.stream.clone_htod(bytes)?,
            },
        };
        Ok(DeviceMatrix {
            name: name.to_string(),
            ty,
            n_in,
            n_out,
            data,
        })
    }

    /// Bytes one product reads from this matrix.
    pub fn device_bytes(&self) -> usize {
        match &self.data {
            MatrixData::Q8_0 { qs, d } => qs.len() + 4 * d.len(),
            MatrixData::Q4K { blocks } => blocks.len(),
        }
    }

    /// The activation format its product takes (Q8_0 or Q8_K).
    pub fn acts_type(&self) -> GgmlType {
        match self.ty {
            GgmlType::Q4_K => GgmlType::Q8_K,
            _ => GgmlType::Q8_0,
        }
    }
}
