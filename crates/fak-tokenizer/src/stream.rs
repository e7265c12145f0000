//! [`StreamDecoder`]: turns ids into text one at a time without ever
//! emitting half a character.
//!
//! Byte-level tokens can end in the middle of a UTF-8 sequence (an emoji is
//! often two or three tokens). The decoder keeps the incomplete tail and
//! releases it once the following bytes complete it:
//!
//! ```text
//! push(🙂 part 1: F0 9F)   -> ""      pending F0 9F
//! push(🙂 part 2: 99 82)   -> "🙂"    pending (none)
//! ```
//!
//! Bytes that can never become valid UTF-8 are replaced by U+FFFD exactly
//! as `String::from_utf8_lossy` would on the whole stream, so the
//! concatenated output always equals [`Tokenizer::decode`] of all ids.

use crate::tokenizer::Tokenizer;

/// Incremental detokenizer; one per generated sequence.
#[derive(Clone, Debug, Default)]
pub struct StreamDecoder {
    /// Bytes of an incomplete UTF-8 sequence (at most 3).
    pending: Vec<u8>,
}

impl StreamDecoder {
    /// An empty decoder.
    pub fn new() -> StreamDecoder {
        StreamDecoder::default()
    }

    /// Adds token `id` and returns the text that is now complete (possibly
    /// empty). Out-of-range ids add nothing.
    pub fn push(&mut self, tok: &Tokenizer, id: u32) -> String {
        self.push_bytes(tok.token_bytes(id))
    }

    /// Adds raw bytes; returns the completed text.
    pub fn push_bytes(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    out.push_str(s);
                    self.pending.clear();
                    return out;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    if let Some(s) = self
                        .pending
                        .get(..valid)
                        .and_then(|b| std::str::from_utf8(b).ok())
                    {
                        out.push_str(s);
                    }
                    match e.error_len() {
                        // Invalid for good: replace, keep going after it.
                        Some(len) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            let cut = (valid + len).min(self.pending.len());
                            self.pending.drain(..cut);
                        }
                        // A sequence that more bytes may complete: hold it.
                        None => {
                            self.pending.drain(..valid.min(self.pending.len()));
                            return out;
                        }
                    }
                }
            }
        }
    }

    /// Whether bytes are being held back.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Flushes whatever is held back (as U+FFFD if incomplete) and resets.
    pub fn finish(&mut self) -> String {
        let out = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn holds_back_split_characters() {
        let mut d = StreamDecoder::new();
        let smile = "🙂".as_bytes();
        assert_eq!(d.push_bytes(smile.get(..2).unwrap_or(&[])), "");
        assert!(d.has_pending());
        assert_eq!(d.push_bytes(smile.get(2..).unwrap_or(&[])), "🙂");
        assert!(!d.has_pending());
        assert_eq!(d.push_bytes(&[b'a', 0xE4]), "a");
        assert_eq!(d.finish(), "\u{FFFD}");
        assert_eq!(d.push_bytes(&[0xFF, b'b']), "\u{FFFD}b");
    }

    proptest! {
        #[test]
        fn chunked_output_equals_lossy_whole(
            chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..5), 0..40)
        ) {
            let mut d = StreamDecoder::new();
            let mut got = String::new();
            for c in &chunks {
                got.push_str(&d.push_bytes(c));
                prop_assert!(d.pending.len() <= 3, "only an incomplete sequence is held");
            }
            got.push_str(&d.finish());
            let whole: Vec<u8> = chunks.concat();
            prop_assert_eq!(got, String::from_utf8_lossy(&whole).into_owned());
        }

        #[test]
        fn valid_text_is_never_split(s in "\\PC{0,40}", cuts in proptest::collection::vec(0usize..200, 0..8)) {
            let bytes = s.as_bytes();
            let mut points: Vec<usize> = cuts.into_iter().map(|c| c % (bytes.len() + 1)).collect();
            points.sort_unstable();
            let mut d = StreamDecoder::new();
            let mut got = String::new();
            let mut last = 0;
            for p in points.into_iter().chain(std::iter::once(bytes.len())) {
                let piece = d.push_bytes(bytes.get(last..p).unwrap_or(&[]));
                prop_assert!(
                    s.contains('\u{FFFD}') || !piece.contains('\u{FFFD}'),
                    "no replacement for valid input"
                );
                got.push_str(&piece);
                last = p;
            }
            prop_assert!(!d.has_pending());
            prop_assert_eq!(got, s);
        }
    }
}
