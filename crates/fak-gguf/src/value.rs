//! Metadata values: the thirteen GGUF value types and their wire ids.
//!
//! A GGUF key/value pair is stored as `key: string, type: u32, value`. Arrays
//! are `elem_type: u32, count: u64, elements...`; an element type of `ARRAY`
//! makes every element itself a full array header plus payload, so arrays of
//! arrays may mix element types per inner array. fak bounds that nesting at
//! [`MAX_ARRAY_DEPTH`].

use std::fmt;

/// Deepest allowed array nesting; a plain array has depth 1.
pub const MAX_ARRAY_DEPTH: usize = 4;

/// The wire id of a metadata value type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum ValueType {
    U8 = 0,
    I8 = 1,
    U16 = 2,
    I16 = 3,
    U32 = 4,
    I32 = 5,
    F32 = 6,
    Bool = 7,
    Str = 8,
    Array = 9,
    U64 = 10,
    I64 = 11,
    F64 = 12,
}

impl ValueType {
    /// All value types in id order.
    pub const ALL: [ValueType; 13] = [
        ValueType::U8,
        ValueType::I8,
        ValueType::U16,
        ValueType::I16,
        ValueType::U32,
        ValueType::I32,
        ValueType::F32,
        ValueType::Bool,
        ValueType::Str,
        ValueType::Array,
        ValueType::U64,
        ValueType::I64,
        ValueType::F64,
    ];

    /// Maps a raw id to a type, `None` if unknown.
    pub fn from_id(id: u32) -> Option<ValueType> {
        ValueType::ALL.iter().copied().find(|t| *t as u32 == id)
    }

    /// The raw id.
    pub fn id(self) -> u32 {
        self as u32
    }

    /// Encoded size of one value, `None` for the variable-size string and
    /// array types.
    pub fn fixed_size(self) -> Option<u64> {
        use ValueType::*;
        match self {
            U8 | I8 | Bool => Some(1),
            U16 | I16 => Some(2),
            U32 | I32 | F32 => Some(4),
            U64 | I64 | F64 => Some(8),
            Str | Array => None,
        }
    }

    /// Smallest possible encoding of one value: a string is at least its
    /// u64 length, an array at least its element type and count.
    pub fn min_size(self) -> u64 {
        match self {
            ValueType::Str => 8,
            ValueType::Array => 4 + 8,
            other => other.fixed_size().unwrap_or(1),
        }
    }

    /// Lower-case name used in error messages.
    pub fn name(self) -> &'static str {
        use ValueType::*;
        match self {
            U8 => "u8",
            I8 => "i8",
            U16 => "u16",
            I16 => "i16",
            U32 => "u32",
            I32 => "i32",
            F32 => "f32",
            Bool => "bool",
            Str => "string",
            Array => "array",
            U64 => "u64",
            I64 => "i64",
            F64 => "f64",
        }
    }
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum MetaValue {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    Str(String),
    U64(u64),
    I64(i64),
    F64(f64),
    Array(MetaArray),
}

/// A homogeneous metadata array (arrays of arrays may differ per element).
#[derive(Debug, Clone, PartialEq)]
pub enum MetaArray {
    U8(Vec<u8>),
    I8(Vec<i8>),
    U16(Vec<u16>),
    I16(Vec<i16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    F32(Vec<f32>),
    Bool(Vec<bool>),
    Str(Vec<String>),
    U64(Vec<u64>),
    I64(Vec<i64>),
    F64(Vec<f64>),
    Array(Vec<MetaArray>),
}

impl MetaValue {
    /// The wire type of this value.
    pub fn value_type(&self) -> ValueType {
        match self {
            MetaValue::U8(_) => ValueType::U8,
            MetaValue::I8(_) => ValueType::I8,
            MetaValue::U16(_) => ValueType::U16,
            MetaValue::I16(_) => ValueType::I16,
            MetaValue::U32(_) => ValueType::U32,
            MetaValue::I32(_) => ValueType::I32,
            MetaValue::F32(_) => ValueType::F32,
            MetaValue::Bool(_) => ValueType::Bool,
            MetaValue::Str(_) => ValueType::Str,
            MetaValue::U64(_) => ValueType::U64,
            MetaValue::I64(_) => ValueType::I64,
            MetaValue::F64(_) => ValueType::F64,
            MetaValue::Array(_) => ValueType::Array,
        }
    }

    /// Human-readable type, e.g. `u32` or `array of string`.
    pub fn type_name(&self) -> String {
        match self {
            MetaValue::Array(a) => a.type_name(),
            other => other.value_type().name().to_string(),
        }
    }

    /// The value as an integer if it is any integer type (not bool).
    pub fn as_i128(&self) -> Option<i128> {
        match *self {
            MetaValue::U8(v) => Some(v.into()),
            MetaValue::I8(v) => Some(v.into()),
            MetaValue::U16(v) => Some(v.into()),
            MetaValue::I16(v) => Some(v.into()),
            MetaValue::U32(v) => Some(v.into()),
            MetaValue::I32(v) => Some(v.into()),
            MetaValue::U64(v) => Some(v.into()),
            MetaValue::I64(v) => Some(v.into()),
            _ => None,
        }
    }
}

impl MetaArray {
    /// Element type of the array.
    pub fn elem_type(&self) -> ValueType {
        match self {
            MetaArray::U8(_) => ValueType::U8,
            MetaArray::I8(_) => ValueType::I8,
            MetaArray::U16(_) => ValueType::U16,
            MetaArray::I16(_) => ValueType::I16,
            MetaArray::U32(_) => ValueType::U32,
            MetaArray::I32(_) => ValueType::I32,
            MetaArray::F32(_) => ValueType::F32,
            MetaArray::Bool(_) => ValueType::Bool,
            MetaArray::Str(_) => ValueType::Str,
            MetaArray::U64(_) => ValueType::U64,
            MetaArray::I64(_) => ValueType::I64,
            MetaArray::F64(_) => ValueType::F64,
            MetaArray::Array(_) => ValueType::Array,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            MetaArray::U8(v) => v.len(),
            MetaArray::I8(v) => v.len(),
            MetaArray::U16(v) => v.len(),
            MetaArray::I16(v) => v.len(),
            MetaArray::U32(v) => v.len(),
            MetaArray::I32(v) => v.len(),
            MetaArray::F32(v) => v.len(),
            MetaArray::Bool(v) => v.len(),
            MetaArray::Str(v) => v.len(),
            MetaArray::U64(v) => v.len(),
            MetaArray::I64(v) => v.len(),
            MetaArray::F64(v) => v.len(),
            MetaArray::Array(v) => v.len(),
        }
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Nesting depth: 1 for a plain array, 1 + the deepest element for an
    /// array of arrays.
    pub fn depth(&self) -> usize {
        match self {
            MetaArray::Array(v) => 1 + v.iter().map(MetaArray::depth).max().unwrap_or(0),
            _ => 1,
        }
    }

    /// Human-readable type, e.g. `array of i32`.
    pub fn type_name(&self) -> String {
        format!("array of {}", self.elem_type().name())
    }

    /// Element `i` as an integer, for integer-typed arrays.
    pub fn int_at(&self, i: usize) -> Option<i128> {
        match self {
            MetaArray::U8(v) => v.get(i).map(|&x| x.into()),
            MetaArray::I8(v) => v.get(i).map(|&x| x.into()),
            MetaArray::U16(v) => v.get(i).map(|&x| x.into()),
            MetaArray::I16(v) => v.get(i).map(|&x| x.into()),
            MetaArray::U32(v) => v.get(i).map(|&x| x.into()),
            MetaArray::I32(v) => v.get(i).map(|&x| x.into()),
            MetaArray::U64(v) => v.get(i).map(|&x| x.into()),
            MetaArray::I64(v) => v.get(i).map(|&x| x.into()),
            _ => None,
        }
    }
}

macro_rules! from_scalar {
    ($($t:ty => $v:ident),* $(,)?) => {$(
        impl From<$t> for MetaValue {
            fn from(x: $t) -> MetaValue {
                MetaValue::$v(x)
            }
        }
        impl From<Vec<$t>> for MetaArray {
            fn from(x: Vec<$t>) -> MetaArray {
                MetaArray::$v(x)
            }
        }
    )*};
}

from_scalar!(
    u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32, f32 => F32,
    bool => Bool, String => Str, u64 => U64, i64 => I64, f64 => F64,
);

impl From<&str> for MetaValue {
    fn from(s: &str) -> MetaValue {
        MetaValue::Str(s.to_string())
    }
}

impl From<MetaArray> for MetaValue {
    fn from(a: MetaArray) -> MetaValue {
        MetaValue::Array(a)
    }
}
