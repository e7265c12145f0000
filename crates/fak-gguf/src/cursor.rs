//! A bounds-checked little-endian reader over the file bytes.
//!
//! Every read checks the bytes that remain first, and every count is checked
//! against the remaining bytes (times the smallest possible entry size)
//! before anything is allocated for it.

use crate::error::GgufError;

/// Read position over an immutable byte slice.
pub(crate) struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at offset 0 of `bytes` (the whole file).
    pub(crate) fn new(bytes: &'a [u8]) -> Cursor<'a> {
        Cursor { bytes, pos: 0 }
    }

    /// Current absolute offset.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// Bytes left after the current offset.
    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len().saturating_sub(self.pos)
    }

    /// Takes the next `n` bytes; `what` names the field for the error.
    pub(crate) fn take(
        &mut self,
        n: u64,
        what: &dyn Fn() -> String,
    ) -> Result<&'a [u8], GgufError> {
        let available = self.remaining();
        let slice = usize::try_from(n)
            .ok()
            .filter(|&n| n <= available)
            .and_then(|n| Some((n, self.pos.checked_add(n)?)))
            .and_then(|(n, end)| Some((n, self.bytes.get(self.pos..end)?)));
        match slice {
            Some((n, s)) => {
                self.pos += n;
                Ok(s)
            }
            None => Err(GgufError::Truncated {
                what: what(),
                offset: self.pos as u64,
                need: n,
                available: available as u64,
            }),
        }
    }

    /// Takes exactly `N` bytes as an array.
    pub(crate) fn array<const N: usize>(
        &mut self,
        what: &dyn Fn() -> String,
    ) -> Result<[u8; N], GgufError> {
        let s = self.take(N as u64, what)?;
        let mut out = [0u8; N];
        out.copy_from_slice(s);
        Ok(out)
    }

    /// Reads a little-endian u32.
    pub(crate) fn u32(&mut self, what: &dyn Fn() -> String) -> Result<u32, GgufError> {
        self.array::<4>(what).map(u32::from_le_bytes)
    }

    /// Reads a little-endian u64.
    pub(crate) fn u64(&mut self, what: &dyn Fn() -> String) -> Result<u64, GgufError> {
        self.array::<8>(what).map(u64::from_le_bytes)
    }

    /// Reads a GGUF string (`u64` byte length, then UTF-8 bytes).
    pub(crate) fn string(&mut self, what: &dyn Fn() -> String) -> Result<String, GgufError> {
        let len = self.u64(&|| format!("{} (length)", what()))?;
        let bytes = self.take(len, what)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| GgufError::InvalidUtf8 { what: what() })
    }

    /// Checks that `count` entries of at least `min_each` bytes each can
    /// still fit in the file, and returns the count as a `usize` that is
    /// safe to pre-allocate for. A `min_each` of 0 counts as 1.
    pub(crate) fn check_count(
        &self,
        count: u64,
        min_each: u64,
        what: &dyn Fn() -> String,
    ) -> Result<usize, GgufError> {
        let min_each = min_each.max(1);
        let available = self.remaining() as u64;
        let fits = count
            .checked_mul(min_each)
            .is_some_and(|need| need <= available);
        match usize::try_from(count) {
            Ok(n) if fits => Ok(n),
            _ => Err(GgufError::CountTooLarge {
                what: what(),
                count,
                min_each,
                offset: self.pos as u64,
                available,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn take_past_end_is_an_error() {
        let data = [1u8, 2, 3];
        let mut c = Cursor::new(&data);
        assert_eq!(c.take(2, &|| "x".into()).ok(), Some(&data[..2]));
        let e = c.take(2, &|| "field y".into()).err().map(|e| e.to_string());
        assert!(e.is_some_and(|m| m.contains("field y") && m.contains("only 1 remain")));
        assert!(c.take(u64::MAX, &|| "z".into()).is_err());
        assert_eq!(c.pos(), 2);
    }

    #[test]
    fn counts_are_checked_against_remaining_bytes() {
        let data = [0u8; 16];
        let c = Cursor::new(&data);
        assert!(matches!(c.check_count(2, 8, &|| "n".into()), Ok(2)));
        assert!(c.check_count(3, 8, &|| "n".into()).is_err());
        assert!(c.check_count(u64::MAX, 2, &|| "n".into()).is_err());
        // A zero entry size is treated as one byte, never as "free".
        assert!(c.check_count(17, 0, &|| "n".into()).is_err());
    }
}
