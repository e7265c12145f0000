//! Tensor element types (`ggml_type`) and their block geometry.
//!
//! Every quantized ggml type stores a row as a sequence of fixed-size blocks:
//! `block_size` elements packed into `type_size` bytes. Plain types have a
//! block size of one. This module only knows geometry; the kernels that read
//! the blocks live in `fak-kernels`.

use std::fmt;

/// A ggml tensor element type, numbered as in the GGUF specification.
///
/// Only types whose byte layout fak knows are listed; any other id is
/// rejected by the reader as unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
#[allow(non_camel_case_types)]
pub enum GgmlType {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,
    IQ2_XXS = 16,
    IQ2_XS = 17,
    IQ3_XXS = 18,
    IQ1_S = 19,
    IQ4_NL = 20,
    IQ3_S = 21,
    IQ2_S = 22,
    IQ4_XS = 23,
    I8 = 24,
    I16 = 25,
    I32 = 26,
    I64 = 27,
    F64 = 28,
    IQ1_M = 29,
    BF16 = 30,
    TQ1_0 = 34,
    TQ2_0 = 35,
    MXFP4 = 39,
    NVFP4 = 40,
    Q1_0 = 41,
}

/// Elements per super-block of the k-quant family.
pub const QK_K: usize = 256;

impl GgmlType {
    /// All known types, in id order.
    pub const ALL: [GgmlType; 34] = [
        GgmlType::F32,
        GgmlType::F16,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q8_0,
        GgmlType::Q8_1,
        GgmlType::Q2_K,
        GgmlType::Q3_K,
        GgmlType::Q4_K,
        GgmlType::Q5_K,
        GgmlType::Q6_K,
        GgmlType::Q8_K,
        GgmlType::IQ2_XXS,
        GgmlType::IQ2_XS,
        GgmlType::IQ3_XXS,
        GgmlType::IQ1_S,
        GgmlType::IQ4_NL,
        GgmlType::IQ3_S,
        GgmlType::IQ2_S,
        GgmlType::IQ4_XS,
        GgmlType::I8,
        GgmlType::I16,
        GgmlType::I32,
        GgmlType::I64,
        GgmlType::F64,
        GgmlType::IQ1_M,
        GgmlType::BF16,
        GgmlType::TQ1_0,
        GgmlType::TQ2_0,
        GgmlType::MXFP4,
        GgmlType::NVFP4,
        GgmlType::Q1_0,
    ];

    /// Maps a raw GGUF type id to a known type, or `None` if unknown.
    pub fn from_id(id: u32) -> Option<GgmlType> {
        GgmlType::ALL.iter().copied().find(|t| *t as u32 == id)
    }

    /// The raw GGUF id.
    pub fn id(self) -> u32 {
        self as u32
    }

    /// Elements per block.
    pub fn block_size(self) -> usize {
        use GgmlType::*;
        match self {
            F32 | F16 | BF16 | I8 | I16 | I32 | I64 | F64 => 1,
            Q4_0 | Q4_1 | Q5_0 | Q5_1 | Q8_0 | Q8_1 | IQ4_NL | MXFP4 => 32,
            Q2_K | Q3_K | Q4_K | Q5_K | Q6_K | Q8_K | IQ4_XS => QK_K,
            IQ2_XXS | IQ2_XS | IQ2_S | IQ3_XXS | IQ3_S | IQ1_S | IQ1_M => QK_K,
            TQ1_0 | TQ2_0 => QK_K,
            NVFP4 => 64,
            Q1_0 => 128,
        }
    }

    /// Bytes per block.
    pub fn type_size(self) -> usize {
        use GgmlType::*;
        match self {
            F32 | I32 => 4,
            F16 | BF16 | I16 => 2,
            I8 => 1,
            I64 | F64 => 8,
            Q4_0 => 2 + 16,
            Q4_1 => 2 + 2 + 16,
            Q5_0 => 2 + 4 + 16,
            Q5_1 => 2 + 2 + 4 + 16,
            Q8_0 => 2 + 32,
            Q8_1 => 2 + 2 + 32,
            Q2_K => QK_K / 16 + QK_K / 4 + 2 + 2,
            Q3_K => QK_K / 8 + QK_K / 4 + 12 + 2,
            Q4_K => 2 + 2 + 12 + QK_K / 2,
            Q5_K => 2 + 2 + 12 + QK_K / 8 + QK_K / 2,
            Q6_K => QK_K / 2 + QK_K / 4 + QK_K / 16 + 2,
            Q8_K => 4 + QK_K + QK_K / 16 * 2,
            IQ4_NL => 2 + 16,
            IQ4_XS => 2 + 2 + QK_K / 64 + QK_K / 2,
            IQ2_XXS => 2 + QK_K / 4,
            IQ2_XS => 2 + QK_K / 4 + QK_K / 32,
            IQ2_S => 2 + QK_K / 4 + QK_K / 32 + QK_K / 32,
            IQ3_XXS => 2 + 3 * QK_K / 8,
            IQ3_S => 2 + QK_K / 4 + QK_K / 32 + QK_K / 8 + QK_K / 64,
            IQ1_S => 2 + QK_K / 8 + QK_K / 16,
            IQ1_M => QK_K / 8 + QK_K / 16 + QK_K / 32,
            TQ1_0 => (QK_K - 4 * QK_K / 64) / 5 + QK_K / 64 + 2,
            TQ2_0 => QK_K / 4 + 2,
            MXFP4 => 1 + 16,
            NVFP4 => 4 + 32,
            Q1_0 => 2 + 16,
        }
    }

    /// Whether the type is a block-quantized format (block size > 1).
    pub fn is_quantized(self) -> bool {
        self.block_size() > 1
    }

    /// Bytes needed for a row of `n` elements, or `None` if `n` is not a
    /// multiple of the block size or the size overflows.
    pub fn row_bytes(self, n: u64) -> Option<u64> {
        let bs = self.block_size() as u64;
        if !n.is_multiple_of(bs) {
            return None;
        }
        (n / bs).checked_mul(self.type_size() as u64)
    }

    /// The lower-case name llama.cpp prints (`q4_k`, `f16`, ...).
    pub fn name(self) -> &'static str {
        use GgmlType::*;
        match self {
            F32 => "f32",
            F16 => "f16",
            Q4_0 => "q4_0",
            Q4_1 => "q4_1",
            Q5_0 => "q5_0",
            Q5_1 => "q5_1",
            Q8_0 => "q8_0",
            Q8_1 => "q8_1",
            Q2_K => "q2_k",
            Q3_K => "q3_k",
            Q4_K => "q4_k",
            Q5_K => "q5_k",
            Q6_K => "q6_k",
            Q8_K => "q8_k",
            IQ4_NL => "iq4_nl",
            IQ4_XS => "iq4_xs",
            IQ2_XXS => "iq2_xxs",
            IQ2_XS => "iq2_xs",
            IQ2_S => "iq2_s",
            IQ3_XXS => "iq3_xxs",
            IQ3_S => "iq3_s",
            IQ1_S => "iq1_s",
            IQ1_M => "iq1_m",
            I8 => "i8",
            I16 => "i16",
            I32 => "i32",
            I64 => "i64",
            F64 => "f64",
            BF16 => "bf16",
            TQ1_0 => "tq1_0",
            TQ2_0 => "tq2_0",
            MXFP4 => "mxfp4",
            NVFP4 => "nvfp4",
            Q1_0 => "q1_0",
        }
    }

    /// Parses a name as printed by [`GgmlType::name`] (case-insensitive).
    pub fn from_name(s: &str) -> Option<GgmlType> {
        let l = s.to_ascii_lowercase();
        GgmlType::ALL.iter().copied().find(|t| t.name() == l)
    }
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_match_ggml() {
        assert_eq!(GgmlType::Q4_K.type_size(), 144);
        assert_eq!(GgmlType::Q5_K.type_size(), 176);
        assert_eq!(GgmlType::Q6_K.type_size(), 210);
        assert_eq!(GgmlType::Q8_K.type_size(), 292);
        assert_eq!(GgmlType::Q2_K.type_size(), 84);
        assert_eq!(GgmlType::Q3_K.type_size(), 110);
        assert_eq!(GgmlType::IQ4_NL.type_size(), 18);
        assert_eq!(GgmlType::IQ4_XS.type_size(), 136);
        assert_eq!(GgmlType::IQ2_XXS.type_size(), 66);
        assert_eq!(GgmlType::IQ2_XS.type_size(), 74);
        assert_eq!(GgmlType::IQ2_S.type_size(), 82);
        assert_eq!(GgmlType::IQ3_XXS.type_size(), 98);
        assert_eq!(GgmlType::IQ3_S.type_size(), 110);
        assert_eq!(GgmlType::IQ1_S.type_size(), 50);
        assert_eq!(GgmlType::IQ1_M.type_size(), 56);
        assert_eq!(GgmlType::Q5_0.type_size(), 22);
        assert_eq!(GgmlType::Q5_1.type_size(), 24);
        assert_eq!(GgmlType::TQ1_0.type_size(), 54);
        assert_eq!(GgmlType::TQ2_0.type_size(), 66);
        assert_eq!(GgmlType::MXFP4.type_size(), 17);
        assert_eq!(GgmlType::NVFP4.type_size(), 36);
        assert_eq!(GgmlType::Q1_0.type_size(), 18);
    }

    #[test]
    fn ids_round_trip() {
        for t in GgmlType::ALL {
            assert_eq!(GgmlType::from_id(t.id()), Some(t));
            assert_eq!(GgmlType::from_name(t.name()), Some(t));
        }
        assert_eq!(GgmlType::from_id(4), None);
        assert_eq!(GgmlType::from_id(99), None);
    }
}
