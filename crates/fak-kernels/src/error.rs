//! Errors returned by the kernels, plus the length checks that produce them.
//!
//! Every public kernel validates its slice lengths once, up front, against
//! the block geometry of [`GgmlType`]; after that the inner loops run over
//! fixed-size block arrays and cannot index out of bounds. A failed check
//! names the operation, the type, the slice at fault and both lengths.

use std::fmt;

use fak_gguf::GgmlType;

/// The kernel entry point that reported an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// [`crate::dequantize_row`].
    Dequantize,
    /// [`crate::quantize_row`].
    Quantize,
    /// [`crate::vec_dot`] and the per-type dot products.
    VecDot,
    /// [`crate::packed::PackedMatrix::pack`].
    Pack,
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Op::Dequantize => "dequantize",
            Op::Quantize => "quantize",
            Op::VecDot => "vec_dot",
            Op::Pack => "pack",
        })
    }
}

/// Which slice argument a length error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operand {
    /// Block-encoded input bytes (dequantize `src`).
    EncodedInput,
    /// Block-encoded output bytes (quantize `dst`).
    EncodedOutput,
    /// `f32` output values (dequantize `dst`).
    FloatOutput,
    /// Weight row bytes (vec_dot `w`).
    WeightRow,
    /// Activation row bytes (vec_dot `a`).
    ActivationRow,
}

impl Operand {
    /// The unit the lengths of this operand are counted in.
    pub fn unit(self) -> &'static str {
        match self {
            Operand::FloatOutput => "f32 values",
            _ => "bytes",
        }
    }
}

impl fmt::Display for Operand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Operand::EncodedInput => "encoded input",
            Operand::EncodedOutput => "encoded output",
            Operand::FloatOutput => "f32 output",
            Operand::WeightRow => "weight row",
            Operand::ActivationRow => "activation row",
        })
    }
}

/// A kernel refused its arguments. Kernels never panic on bad lengths.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KernelError {
    /// The operation is not implemented for this element type.
    #[error("{op} is not supported for type {ty}")]
    Unsupported {
        /// The operation asked for.
        op: Op,
        /// The element type.
        ty: GgmlType,
    },
    /// The row length is not a whole number of blocks.
    #[error("{op} {ty}: row of {n} elements is not a multiple of the block size {block_size}")]
    PartialBlock {
        /// The operation asked for.
        op: Op,
        /// The element type.
        ty: GgmlType,
        /// Elements in the row.
        n: usize,
        /// Elements per block of `ty`.
        block_size: usize,
    },
    /// A slice has the wrong length for the row.
    #[error(
        "{op} {ty}: {operand} has {actual} {unit}, expected {expected} for a row of {n} elements",
        unit = operand.unit()
    )]
    Length {
        /// The operation asked for.
        op: Op,
        /// The element type of the slice at fault.
        ty: GgmlType,
        /// Which slice.
        operand: Operand,
        /// Elements in the row.
        n: usize,
        /// The length the row needs.
        expected: usize,
        /// The length given.
        actual: usize,
    },
    /// The row's byte size does not fit in `usize`.
    #[error("{op} {ty}: a row of {n} elements is too large to address")]
    TooLarge {
        /// The operation asked for.
        op: Op,
        /// The element type.
        ty: GgmlType,
        /// Elements in the row.
        n: usize,
    },
    /// A packed matrix, or a row range of one, is not made of whole groups.
    #[error("packed Q8_0 products need whole groups of {group} weight rows, got {rows} rows")]
    RowGroup {
        /// The rows given (the matrix or the range).
        rows: usize,
        /// Rows per group.
        group: usize,
    },
    /// A kernel path was asked for that this CPU cannot run.
    #[error("the {isa} kernels need CPU features this machine lacks")]
    IsaUnavailable {
        /// The instruction set asked for.
        isa: crate::isa::Isa,
    },
}

/// One row being checked: the operation, the element type and the row
/// length in elements.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RowCheck {
    pub(crate) op: Op,
    pub(crate) ty: GgmlType,
    pub(crate) n: usize,
}

impl RowCheck {
    /// Bytes of the row, or the error explaining why `n` is not a valid row
    /// length for the type.
    pub(crate) fn bytes(self) -> Result<usize, KernelError> {
        let RowCheck { op, ty, n } = self;
        let block_size = ty.block_size();
        if n % block_size != 0 {
            return Err(KernelError::PartialBlock {
                op,
                ty,
                n,
                block_size,
            });
        }
        (n / block_size)
            .checked_mul(ty.type_size())
            .ok_or(KernelError::TooLarge { op, ty, n })
    }

    /// Checks that `operand` has exactly `expected` elements.
    pub(crate) fn expect(
        self,
        operand: Operand,
        expected: usize,
        actual: usize,
    ) -> Result<(), KernelError> {
        let RowCheck { op, ty, n } = self;
        if expected == actual {
            Ok(())
        } else {
            Err(KernelError::Length {
                op,
                ty,
                operand,
                n,
                expected,
                actual,
            })
        }
    }

    /// The [`KernelError::Length`] for `operand` having `actual` where
    /// `expected` was needed.
    pub(crate) fn length(self, operand: Operand, expected: usize, actual: usize) -> KernelError {
        let RowCheck { op, ty, n } = self;
        KernelError::Length {
            op,
            ty,
            operand,
            n,
            expected,
            actual,
        }
    }

    /// Checks that the byte slice `operand` holds exactly one row.
    pub(crate) fn expect_row(self, operand: Operand, actual: usize) -> Result<(), KernelError> {
        let expected = self.bytes()?;
        self.expect(operand, expected, actual)
    }
}
