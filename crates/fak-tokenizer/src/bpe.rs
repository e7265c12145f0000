//! Rank-ordered byte-level BPE over one pre-tokenized word.
//!
//! A word starts as one symbol per byte (in its GPT-2 character form). The
//! adjacent pair with the lowest merge rank is merged, leftmost first on
//! ties, until no adjacent pair has a rank. A binary heap holds candidate
//! pairs; a popped pair is stale (and skipped) if either side has changed
//! since it was pushed.
//!
//! ```text
//! "lower"   l o w e r        ranks: (l,o)=3 (lo,w)=5 (e,r)=1 (low,er)=9
//!   pop (e,r)=1    l o w [er]
//!   pop (l,o)=3    [lo] w er
//!   pop (lo,w)=5   [low] er
//!   pop (low,er)=9 [lower]        -> one token if "lower" is in the vocab
//! ```
//!
//! Symbols are named by interned string ids: vocab ids first, then merge
//! parts that are not vocab entries (so merges through such strings work as
//! in llama.cpp). A final symbol that is not a vocab entry falls back to the
//! single-character tokens of its ASCII bytes, as llama.cpp does.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use crate::error::TokenizerError;
use crate::pretok::MergePolicy;
use crate::unicode::{byte_encode_into, BYTE_TO_CHAR};

/// Symbol id of a string that no vocab entry or merge names.
const NO_SYM: u32 = u32::MAX;
/// End of the symbol chain.
const NIL: usize = usize::MAX;

/// Merge table and string interner for one vocabulary.
pub(crate) struct Bpe {
    /// Text of every symbol id: vocab ids `0..n_vocab`, then extras.
    ids: HashMap<String, u32>,
    n_vocab: u32,
    /// `(left, right)` symbol ids -> `(rank, merged symbol id or NO_SYM)`.
    merges: HashMap<(u32, u32), (u32, u32)>,
    /// Symbol id of each byte's GPT-2 character.
    byte_sym: [u32; 256],
    policy: MergePolicy,
}

/// One symbol of a word being merged: bytes `start..end` of the word.
#[derive(Clone, Copy)]
struct Sym {
    start: usize,
    end: usize,
    id: u32,
    prev: usize,
    next: usize,
    alive: bool,
}

/// A candidate merge, ordered so the heap pops the lowest rank, then the
/// leftmost pair. `left_end`/`right_end` detect stale entries.
type Candidate = Reverse<(u32, usize, usize, usize, usize)>;

impl Bpe {
    /// Builds the table. `vocab[i]` is token `i`'s text (already unique and
    /// non-empty); `merges` are `"left right"` lines, rank = line index.
    /// Lines without a separating space are ignored; a repeated pair keeps
    /// its first rank. Fails if two tokens have the same text.
    pub fn new(
        vocab: &[String],
        merges: &[String],
        policy: MergePolicy,
    ) -> Result<Bpe, TokenizerError> {
        let mut ids: HashMap<String, u32> = HashMap::with_capacity(vocab.len() + 1024);
        for (i, t) in vocab.iter().enumerate() {
            let id = u32::try_from(i).unwrap_or(NO_SYM);
            if let Some(&first) = ids.get(t.as_str()) {
                return Err(TokenizerError::DuplicateToken {
                    text: t.clone(),
                    first,
                    second: id,
                });
            }
            ids.insert(t.clone(), id);
        }
        let n_vocab = u32::try_from(vocab.len()).unwrap_or(NO_SYM);

        let split: Vec<(&str, &str)> = merges.iter().filter_map(|m| split_merge(m)).collect();
        let mut next_extra = n_vocab;
        for &(a, b) in &split {
            for part in [a, b] {
                if !ids.contains_key(part) && next_extra < NO_SYM {
                    ids.insert(part.to_string(), next_extra);
                    next_extra += 1;
                }
            }
        }
        let mut table: HashMap<(u32, u32), (u32, u32)> = HashMap::with_capacity(split.len());
        let mut joined = String::new();
        for (rank, &(a, b)) in split.iter().enumerate() {
            let (Some(&ia), Some(&ib)) = (ids.get(a), ids.get(b)) else {
                continue;
            };
            joined.clear();
            joined.push_str(a);
            joined.push_str(b);
            let merged = ids.get(joined.as_str()).copied().unwrap_or(NO_SYM);
            let rank = u32::try_from(rank).unwrap_or(u32::MAX);
            table.entry((ia, ib)).or_insert((rank, merged));
        }

        let mut byte_sym = [NO_SYM; 256];
        let mut buf = [0u8; 4];
        for (b, sym) in byte_sym.iter_mut().enumerate() {
            let s: &str = BYTE_TO_CHAR[b].encode_utf8(&mut buf);
            *sym = ids.get(s).copied().unwrap_or(NO_SYM);
        }

        Ok(Bpe {
            ids,
            n_vocab,
            merges: table,
            byte_sym,
            policy,
        })
    }

    /// The vocab id whose text is exactly `s`.
    pub fn lookup(&self, s: &str) -> Option<u32> {
        self.ids.get(s).copied().filter(|&id| id < self.n_vocab)
    }

    /// Appends the token ids of one word (raw bytes, before GPT-2 encoding).
    pub fn encode_word(&self, word: &[u8], out: &mut Vec<u32>) {
        if word.is_empty() {
            return;
        }
        if self.policy == MergePolicy::WholeWordFirst {
            let mut s = String::with_capacity(word.len() * 2);
            byte_encode_into(word, &mut s);
            if let Some(id) = self.lookup(&s) {
                out.push(id);
                return;
            }
        }

        let n = word.len();
        let mut syms: Vec<Sym> = word
            .iter()
            .enumerate()
            .map(|(i, &b)| Sym {
                start: i,
                end: i + 1,
                id: self.byte_sym[usize::from(b)],
                prev: if i == 0 { NIL } else { i - 1 },
                next: if i + 1 == n { NIL } else { i + 1 },
                alive: true,
            })
            .collect();

        let mut heap: BinaryHeap<Candidate> = BinaryHeap::with_capacity(n);
        for i in 1..n {
            self.push_pair(&syms, i - 1, i, &mut heap);
        }
        while let Some(Reverse((_, l, r, l_end, r_end))) = heap.pop() {
            let (Some(&ls), Some(&rs)) = (syms.get(l), syms.get(r)) else {
                continue;
            };
            if !ls.alive || !rs.alive || ls.next != r || ls.end != l_end || rs.end != r_end {
                continue;
            }
            let merged = self.merges.get(&(ls.id, rs.id)).map_or(NO_SYM, |&(_, m)| m);
            if let Some(s) = syms.get_mut(l) {
                s.end = rs.end;
                s.id = merged;
                s.next = rs.next;
            }
            if let Some(s) = syms.get_mut(r) {
                s.alive = false;
            }
            if let Some(s) = syms.get_mut(rs.next) {
                s.prev = l;
            }
            self.push_pair(&syms, ls.prev, l, &mut heap);
            self.push_pair(&syms, l, rs.next, &mut heap);
        }

        let mut i = 0;
        while let Some(s) = syms.get(i) {
            self.emit_symbol(word, s, out);
            i = s.next;
        }
    }

    fn push_pair(&self, syms: &[Sym], l: usize, r: usize, heap: &mut BinaryHeap<Candidate>) {
        let (Some(ls), Some(rs)) = (syms.get(l), syms.get(r)) else {
            return;
        };
        if ls.id == NO_SYM || rs.id == NO_SYM {
            return;
        }
        if let Some(&(rank, _)) = self.merges.get(&(ls.id, rs.id)) {
            heap.push(Reverse((rank, l, r, ls.end, rs.end)));
        }
    }

    fn emit_symbol(&self, word: &[u8], s: &Sym, out: &mut Vec<u32>) {
        if s.id < self.n_vocab {
            out.push(s.id);
            return;
        }
        // Not a vocab entry: llama.cpp looks up each byte of the symbol's
        // GPT-2 text as a one-byte token; only ASCII bytes can match.
        let Some(bytes) = word.get(s.start..s.end) else {
            return;
        };
        let mut text = String::new();
        byte_encode_into(bytes, &mut text);
        let mut buf = [0u8; 4];
        for b in text.bytes().filter(u8::is_ascii) {
            if let Some(id) = self.lookup(char::from(b).encode_utf8(&mut buf)) {
                out.push(id);
            }
        }
    }
}

/// `"a b"` -> `("a", "b")`, splitting at the first space after the first
/// byte (so a merge may start with a space character).
fn split_merge(line: &str) -> Option<(&str, &str)> {
    let first_len = line.chars().next()?.len_utf8();
    let rel = line.get(first_len..)?.find(' ')?;
    let at = first_len + rel;
    Some((line.get(..at)?, line.get(at + 1..)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toy() -> (Vec<String>, Bpe) {
        let vocab: Vec<String> = [
            "l", "o", "w", "e", "r", "lo", "low", "er", "lower", "Ġ", "Ġl",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let merges: Vec<String> = ["e r", "l o", "lo w", "low er", "Ġ l"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let bpe =
            Bpe::new(&vocab, &merges, MergePolicy::RankedMerges).expect("toy vocab is unique");
        (vocab, bpe)
    }

    fn enc(bpe: &Bpe, vocab: &[String], w: &str) -> Vec<String> {
        let mut ids = Vec::new();
        bpe.encode_word(w.as_bytes(), &mut ids);
        ids.iter()
            .map(|&i| vocab.get(i as usize).cloned().unwrap_or_default())
            .collect()
    }

    #[test]
    fn merges_by_rank() {
        let (v, bpe) = toy();
        assert_eq!(enc(&bpe, &v, "lower"), ["lower"]);
        assert_eq!(enc(&bpe, &v, "lowe"), ["low", "e"]);
        assert_eq!(enc(&bpe, &v, "rel"), ["r", "e", "l"]);
        // (l,o) outranks (Ġ,l), and nothing merges "Ġ" with "lo".
        assert_eq!(enc(&bpe, &v, " lo"), ["Ġ", "lo"]);
        assert_eq!(enc(&bpe, &v, " l"), ["Ġl"]);
    }

    #[test]
    fn unknown_bytes_fall_back_to_nothing() {
        let (v, bpe) = toy();
        // 'z' has no token: llama.cpp drops it.
        assert_eq!(enc(&bpe, &v, "zlo"), ["lo"]);
    }

    #[test]
    fn merge_line_split() {
        assert_eq!(split_merge("Ġ t"), Some(("Ġ", "t")));
        assert_eq!(split_merge("  x"), Some((" ", "x")));
        assert_eq!(split_merge("ab"), None);
        assert_eq!(split_merge(""), None);
    }
}
