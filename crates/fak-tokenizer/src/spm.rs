//! SentencePiece-style tokenization (`tokenizer.ggml.model = "llama"`),
//! reproducing llama.cpp's `llm_tokenizer_spm`.
//!
//! A text fragment is prepared (a space prepended when the vocab asks for a
//! space prefix and the fragment starts the input or follows a special
//! token; every space written as `▁`, U+2581), split into one symbol per
//! UTF-8 character, and then merged greedily by *score*: among adjacent
//! pairs whose concatenation is a vocab token, the one whose token has the
//! highest score merges first, the leftmost on ties. A popped pair is stale
//! (and skipped) if either side changed since it was pushed.
//!
//! ```text
//! " Hi!"  ->  "▁Hi!"   symbols ▁ H i !
//!   scores: ▁H = -5.0, Hi = -3.0, ▁Hi = -1.0
//!   pop Hi  (-3.0)   ▁ [Hi] !
//!   pop ▁Hi (-1.0)   [▁Hi] !
//! ```
//!
//! Every final symbol is a vocab token, except single characters that the
//! vocab lacks: those become one `<0xNN>` byte token per UTF-8 byte (byte
//! fallback), else the single-byte token with that text, else the unknown
//! token (llama.cpp throws there; a file must not make fak panic).

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

/// The SentencePiece escape for a space.
pub(crate) const SPACE_MARK: char = '\u{2581}';

/// End of the symbol chain.
const NIL: usize = usize::MAX;

/// Scores, lookup and byte fallback for one SPM vocabulary.
pub(crate) struct Spm {
    /// Score of token `i`; 0.0 for tokens past the end of the scores array.
    scores: Vec<f32>,
    /// Token for each byte value, if the vocab has one (`<0xNN>` or the
    /// one-byte text).
    byte_tok: [Option<u32>; 256],
    /// The unknown token, used when a byte has no token.
    unk: Option<u32>,
}

/// One symbol of the text being merged: bytes `start..end`.
#[derive(Clone, Copy)]
struct Sym {
    start: usize,
    end: usize,
    prev: usize,
    next: usize,
}

/// A candidate merge: highest score first, then the smallest left index.
/// `size` (bytes of the pair) detects stale entries.
#[derive(Clone, Copy)]
struct Bigram {
    left: usize,
    right: usize,
    score: f32,
    size: usize,
}

impl PartialEq for Bigram {
    fn eq(&self, o: &Bigram) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Bigram {}
impl PartialOrd for Bigram {
    fn partial_cmp(&self, o: &Bigram) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Bigram {
    fn cmp(&self, o: &Bigram) -> Ordering {
        // NaN scores compare as equal, as they do in llama.cpp's `<`.
        self.score
            .partial_cmp(&o.score)
            .unwrap_or(Ordering::Equal)
            .then_with(|| o.left.cmp(&self.left))
    }
}

impl Spm {
    /// The tables for a vocab. `lookup` finds a token by its text;
    /// `scores` may be shorter than the vocab (missing scores are 0.0).
    pub fn new(
        n_vocab: usize,
        scores: &[f32],
        lookup: &HashMap<String, u32>,
        unk: Option<u32>,
    ) -> Spm {
        let mut all = scores.to_vec();
        all.resize(n_vocab, 0.0);
        let mut byte_tok = [None; 256];
        for (b, slot) in byte_tok.iter_mut().enumerate() {
            let hex = format!("<0x{b:02X}>");
            *slot = lookup.get(hex.as_str()).copied().or_else(|| {
                let one = u8::try_from(b).ok().filter(u8::is_ascii).map(char::from)?;
                lookup.get(one.to_string().as_str()).copied()
            });
        }
        Spm {
            scores: all,
            byte_tok,
            unk,
        }
    }

    /// Appends the ids of one prepared fragment (spaces already `▁`).
    pub fn encode(&self, text: &str, lookup: &HashMap<String, u32>, out: &mut Vec<u32>) {
        let bounds: Vec<usize> = text
            .char_indices()
            .map(|(i, _)| i)
            .chain(std::iter::once(text.len()))
            .collect();
        let n = bounds.len().saturating_sub(1);
        if n == 0 {
            return;
        }
        let mut syms: Vec<Sym> = (0..n)
            .map(|i| Sym {
                start: bounds.get(i).copied().unwrap_or(0),
                end: bounds.get(i + 1).copied().unwrap_or(text.len()),
                prev: if i == 0 { NIL } else { i - 1 },
                next: if i + 1 == n { NIL } else { i + 1 },
            })
            .collect();

        let mut heap: BinaryHeap<Bigram> = BinaryHeap::with_capacity(n);
        for i in 1..n {
            self.push_pair(text, &syms, i - 1, i, lookup, &mut heap);
        }
        while let Some(b) = heap.pop() {
            let (Some(&l), Some(&r)) = (syms.get(b.left), syms.get(b.right)) else {
                continue;
            };
            let (ln, rn) = (l.end - l.start, r.end - r.start);
            if ln == 0 || rn == 0 || ln + rn != b.size || l.next != b.right {
                continue;
            }
            if let Some(s) = syms.get_mut(b.left) {
                s.end = r.end;
                s.next = r.next;
            }
            if let Some(s) = syms.get_mut(b.right) {
                s.end = s.start;
            }
            if let Some(s) = syms.get_mut(r.next) {
                s.prev = b.left;
            }
            self.push_pair(text, &syms, l.prev, b.left, lookup, &mut heap);
            self.push_pair(text, &syms, b.left, r.next, lookup, &mut heap);
        }

        let mut i = 0;
        while let Some(s) = syms.get(i) {
            let piece = text.get(s.start..s.end).unwrap_or("");
            match lookup.get(piece) {
                Some(&id) => out.push(id),
                None => self.bytes(piece.as_bytes(), out),
            }
            i = s.next;
        }
    }

    /// Byte fallback for a symbol the vocab lacks.
    fn bytes(&self, piece: &[u8], out: &mut Vec<u32>) {
        for &b in piece {
            if let Some(id) = self.byte_tok[usize::from(b)].or(self.unk) {
                out.push(id);
            }
        }
    }

    fn push_pair(
        &self,
        text: &str,
        syms: &[Sym],
        l: usize,
        r: usize,
        lookup: &HashMap<String, u32>,
        heap: &mut BinaryHeap<Bigram>,
    ) {
        let (Some(ls), Some(rs)) = (syms.get(l), syms.get(r)) else {
            return;
        };
        let Some(joined) = text.get(ls.start..rs.end) else {
            return;
        };
        let Some(&id) = lookup.get(joined) else {
            return;
        };
        let score = self.scores.get(id as usize).copied().unwrap_or(0.0);
        heap.push(Bigram {
            left: l,
            right: r,
            score,
            size: joined.len(),
        });
    }
}

/// Replaces every space by `▁`.
pub(crate) fn escape_spaces(text: &str, out: &mut String) {
    for c in text.chars() {
        out.push(if c == ' ' { SPACE_MARK } else { c });
    }
}

/// The bytes a normal SPM token detokenizes to: its text with `▁` as space.
pub(crate) fn unescape_into(text: &str, out: &mut Vec<u8>) {
    let mut buf = [0u8; 4];
    for c in text.chars() {
        if c == SPACE_MARK {
            out.push(b' ');
        } else {
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocab(entries: &[(&str, f32)]) -> (HashMap<String, u32>, Vec<f32>) {
        let mut map = HashMap::new();
        let mut scores = Vec::new();
        for (i, (t, s)) in entries.iter().enumerate() {
            map.insert(t.to_string(), u32::try_from(i).expect("small"));
            scores.push(*s);
        }
        (map, scores)
    }

    fn enc(entries: &[(&str, f32)], text: &str) -> Vec<u32> {
        let (map, scores) = vocab(entries);
        let spm = Spm::new(entries.len(), &scores, &map, Some(0));
        let mut s = String::new();
        escape_spaces(text, &mut s);
        let mut out = Vec::new();
        spm.encode(&s, &map, &mut out);
        out
    }

    #[test]
    fn merges_by_score_not_position() {
        let v = [
            ("<unk>", 0.0),
            ("▁", -1.0),
            ("H", -1.0),
            ("i", -1.0),
            ("▁H", -5.0),
            ("Hi", -3.0),
            ("▁Hi", -1.0),
        ];
        assert_eq!(enc(&v, " Hi"), [6]);
        // Without "▁Hi", "Hi" (better than "▁H") wins.
        assert_eq!(enc(&v[..6], " Hi"), [1, 5]);
    }

    #[test]
    fn ties_merge_leftmost_first() {
        let v = [("<unk>", 0.0), ("a", 0.0), ("aa", -1.0)];
        assert_eq!(enc(&v, "aaa"), [2, 1]);
    }

    #[test]
    fn byte_fallback_then_unknown() {
        let mut v: Vec<(String, f32)> = vec![("<unk>".into(), 0.0), ("a".into(), 0.0)];
        v.push(("<0xC3>".into(), 0.0));
        v.push(("<0xA9>".into(), 0.0));
        let refs: Vec<(&str, f32)> = v.iter().map(|(t, s)| (t.as_str(), *s)).collect();
        assert_eq!(enc(&refs, "aé"), [1, 2, 3]);
        // 'z' has neither a token nor a byte token: the unknown token.
        assert_eq!(enc(&refs, "z"), [0]);
    }

    #[test]
    fn unescape_turns_marks_into_spaces() {
        let mut out = Vec::new();
        unescape_into("▁hello▁▁x", &mut out);
        assert_eq!(out, b" hello  x");
    }
}
