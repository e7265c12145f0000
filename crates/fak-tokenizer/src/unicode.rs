//! Per-codepoint classification and the GPT-2 byte ⇄ character map.
//!
//! llama.cpp's pre-tokenizers see every codepoint as one coarse category
//! (letter, number, punctuation, mark, symbol, separator, control or
//! undefined) plus a whitespace flag. [`CpClass`] is that view, derived
//! from the Unicode General Category and the White_Space property.
//!
//! Byte-level BPE vocabularies do not store raw bytes: each byte is written
//! as a printable character so that every token is valid text.
//!
//! ```text
//! byte 0x21..=0x7E, 0xA1..=0xAC, 0xAE..=0xFF  -> the char with that code
//! every other byte, in increasing order      -> U+0100, U+0101, ... U+0143
//! e.g. b' ' (0x20) -> 'Ġ' (U+0120),  b'\n' (0x0A) -> 'Ċ' (U+010A)
//! ```

use unicode_general_category::{get_general_category, GeneralCategory};

/// The coarse category llama.cpp assigns to a codepoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Category {
    /// Unassigned (`Cn`).
    Undefined,
    /// `\p{N}`: Nd, Nl, No.
    Number,
    /// `\p{L}`: Lu, Ll, Lt, Lm, Lo.
    Letter,
    /// `\p{Z}`: Zs, Zl, Zp.
    Separator,
    /// `\p{M}`: Mn, Mc, Me.
    Mark,
    /// `\p{P}`: Pc, Pd, Ps, Pe, Pi, Pf, Po.
    Punctuation,
    /// `\p{S}`: Sm, Sc, Sk, So.
    Symbol,
    /// `\p{C}` except unassigned: Cc, Cf, Cs, Co.
    Control,
}

/// A codepoint's category and whether it is Unicode White_Space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CpClass {
    pub cat: Category,
    pub space: bool,
}

impl CpClass {
    pub fn of(c: char) -> CpClass {
        CpClass {
            cat: category(c),
            space: c.is_whitespace(),
        }
    }

    pub fn is_letter(self) -> bool {
        self.cat == Category::Letter
    }

    pub fn is_number(self) -> bool {
        self.cat == Category::Number
    }

    /// Matches `[^\s\p{L}\p{N}]`.
    pub fn is_other(self) -> bool {
        !(self.space || self.is_letter() || self.is_number())
    }
}

fn category(c: char) -> Category {
    use GeneralCategory as G;
    match get_general_category(c) {
        G::UppercaseLetter
        | G::LowercaseLetter
        | G::TitlecaseLetter
        | G::ModifierLetter
        | G::OtherLetter => Category::Letter,
        G::DecimalNumber | G::LetterNumber | G::OtherNumber => Category::Number,
        G::NonspacingMark | G::SpacingMark | G::EnclosingMark => Category::Mark,
        G::ConnectorPunctuation
        | G::DashPunctuation
        | G::OpenPunctuation
        | G::ClosePunctuation
        | G::InitialPunctuation
        | G::FinalPunctuation
        | G::OtherPunctuation => Category::Punctuation,
        G::MathSymbol | G::CurrencySymbol | G::ModifierSymbol | G::OtherSymbol => Category::Symbol,
        G::SpaceSeparator | G::LineSeparator | G::ParagraphSeparator => Category::Separator,
        G::Control | G::Format | G::Surrogate | G::PrivateUse => Category::Control,
        G::Unassigned => Category::Undefined,
        // Categories added by later Unicode versions of the crate.
        _ => Category::Undefined,
    }
}

/// Whether byte `b` keeps its own code point in the GPT-2 byte map.
const fn is_printable_byte(b: u8) -> bool {
    matches!(b, 0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF)
}

const fn build_byte_to_char() -> [char; 256] {
    let mut out = ['\0'; 256];
    let mut next_extra: u32 = 256;
    let mut b = 0usize;
    while b < 256 {
        let byte = b as u8;
        if is_printable_byte(byte) {
            out[b] = byte as char;
        } else {
            // 256 + n for n < 68 is always a valid scalar value.
            out[b] = match char::from_u32(next_extra) {
                Some(c) => c,
                None => '\0',
            };
            next_extra += 1;
        }
        b += 1;
    }
    out
}

/// The GPT-2 byte map: `BYTE_TO_CHAR[b]` is how byte `b` appears in vocab text.
pub(crate) const BYTE_TO_CHAR: [char; 256] = build_byte_to_char();

/// Number of code points (from U+0000) that [`BYTE_TO_CHAR`] can produce.
const MAPPED_CHARS: usize = 256 + 68;
/// Marks a code point of [`CHAR_TO_BYTE`] that no byte maps to.
const NO_BYTE: u16 = u16::MAX;

const fn build_char_to_byte() -> [u16; MAPPED_CHARS] {
    let mut out = [NO_BYTE; MAPPED_CHARS];
    let mut b = 0usize;
    while b < 256 {
        let cp = BYTE_TO_CHAR[b] as usize;
        if cp < MAPPED_CHARS {
            out[cp] = b as u16;
        }
        b += 1;
    }
    out
}

const CHAR_TO_BYTE: [u16; MAPPED_CHARS] = build_char_to_byte();

/// Inverse of [`BYTE_TO_CHAR`]: the byte a vocab character stands for, or
/// `None` for characters outside the map.
pub(crate) fn char_to_byte(c: char) -> Option<u8> {
    let v = *CHAR_TO_BYTE.get(c as usize)?;
    u8::try_from(v).ok()
}

/// Appends the GPT-2 encoding of `bytes` to `out`.
pub(crate) fn byte_encode_into(bytes: &[u8], out: &mut String) {
    for &b in bytes {
        out.push(BYTE_TO_CHAR[usize::from(b)]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_map_round_trips_and_is_injective() {
        let mut seen = std::collections::HashSet::new();
        for b in 0u8..=255 {
            let c = BYTE_TO_CHAR[usize::from(b)];
            assert!(seen.insert(c), "byte {b:#x} maps to a char already used");
            assert_eq!(char_to_byte(c), Some(b), "byte {b:#x} via {c:?}");
        }
        assert_eq!(BYTE_TO_CHAR[0x20], 'Ġ');
        assert_eq!(BYTE_TO_CHAR[0x0A], 'Ċ');
        assert_eq!(BYTE_TO_CHAR[b'a' as usize], 'a');
        assert_eq!(char_to_byte('中'), None);
        assert_eq!(char_to_byte('\u{144}'), None);
    }

    #[test]
    fn classes_follow_general_category() {
        assert!(CpClass::of('a').is_letter());
        assert!(CpClass::of('中').is_letter());
        assert!(CpClass::of('٣').is_number());
        assert!(CpClass::of('½').is_number());
        assert_eq!(CpClass::of('\u{301}').cat, Category::Mark);
        assert_eq!(CpClass::of('!').cat, Category::Punctuation);
        assert_eq!(CpClass::of('$').cat, Category::Symbol);
        assert_eq!(CpClass::of('\u{378}').cat, Category::Undefined);
        assert!(CpClass::of('\u{3000}').space);
        assert!(CpClass::of('\u{85}').space);
        assert!(!CpClass::of('\u{200b}').space);
        assert!(CpClass::of('🙂').is_other());
    }
}
