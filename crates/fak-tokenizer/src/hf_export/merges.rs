//! The ranked merges of an exported tokenizer, and the checks that decide
//! whether fak's behaviour can be written down exactly.
//!
//! * Byte-level BPE: the GGUF's merges, read as fak reads them, in rank
//!   order. HF's BPE can only merge vocabulary tokens into vocabulary
//!   tokens, so a merge fak would make through a string outside the
//!   vocabulary is refused.
//! * SentencePiece: fak merges the adjacent pair whose joined text is the
//!   best-scored token, the leftmost first on equal scores. HF's BPE merges
//!   the pair of lowest rank, the leftmost first on equal ranks. Listing
//!   every split `a + b` of every token `t` (both halves tokens), ranked by
//!   `t`'s score, makes the two agree whenever no two *different* tokens
//!   that can be formed share a score: all candidates of the best score
//!   then form the same token `t`, and a token's text is always split the
//!   same way when it is about to form (its two halves grew inside its own
//!   span by the same merges, in the same order, as if it stood alone), so
//!   they are one merge with one rank, taken leftmost first by both. The
//!   one tie allowed is a class of runs `cc`, `ccc`, ... of one character
//!   with every length from 2 up: fak grows each run from its left end,
//!   and ranking the splits by longer left half first makes HF do the same.
//!   Other ties are refused.
//!
//! A token that can never form is left out: text never holds a raw space
//! (fak writes spaces as `▁` before merging), nor a special token, which is
//! cut out of the text first.

use std::collections::{HashMap, HashSet};

use crate::error::TokenizerError;
use crate::spm::SPACE_MARK;
use crate::vocab::TokenType;

/// The refusal for `what`.
fn refuse(what: String) -> TokenizerError {
    TokenizerError::Unexpressible { what }
}

/// `"a b"` -> `("a", "b")`, split at the first space after the first
/// character, as fak reads a merge line.
fn split_merge(line: &str) -> Option<(&str, &str)> {
    let first_len = line.chars().next()?.len_utf8();
    let at = first_len + line.get(first_len..)?.find(' ')?;
    Some((line.get(..at)?, line.get(at + 1..)?))
}

/// The byte-level BPE merges in rank order: unreadable lines skipped and a
/// repeated pair kept at its first rank (as fak does). Refuses a merge
/// whose halves or result are not vocabulary tokens.
pub(super) fn bpe_merges<'m>(
    lines: &'m [String],
    lookup: &HashMap<&str, u32>,
) -> Result<Vec<(&'m str, &'m str)>, TokenizerError> {
    let mut seen: HashSet<(&str, &str)> = HashSet::with_capacity(lines.len());
    let mut out = Vec::with_capacity(lines.len());
    let mut joined = String::new();
    for line in lines {
        let Some((a, b)) = split_merge(line) else {
            continue;
        };
        if !seen.insert((a, b)) {
            continue;
        }
        joined.clear();
        joined.push_str(a);
        joined.push_str(b);
        if let Some(missing) = [a, b, joined.as_str()]
            .into_iter()
            .find(|s| !lookup.contains_key(s))
        {
            return Err(refuse(format!(
                "merge {line:?} goes through {missing:?}, which is not a vocabulary token \
                 (Hugging Face's BPE merges only vocabulary tokens)"
            )));
        }
        out.push((a, b));
    }
    Ok(out)
}

/// Special-token texts as a character trie, to find tokens that contain one.
struct Trie {
    /// Children of each node; node 0 is the root.
    next: Vec<HashMap<char, usize>>,
    /// Whether a text ends at each node.
    end: Vec<bool>,
}

impl Trie {
    fn new<'s>(texts: impl IntoIterator<Item = &'s str>) -> Trie {
        let mut t = Trie {
            next: vec![HashMap::new()],
            end: vec![false],
        };
        for text in texts {
            let mut node = 0;
            for c in text.chars() {
                let fresh = t.next.len();
                let child = t
                    .next
                    .get_mut(node)
                    .map_or(fresh, |m| *m.entry(c).or_insert(fresh));
                if child == fresh {
                    t.next.push(HashMap::new());
                    t.end.push(false);
                }
                node = child;
            }
            if let Some(e) = t.end.get_mut(node) {
                *e = true;
            }
        }
        t
    }

    /// Whether some text of the trie occurs in `s`.
    fn occurs_in(&self, s: &str) -> bool {
        s.char_indices().any(|(i, _)| {
            let mut node = 0;
            for c in s.get(i..).unwrap_or("").chars() {
                match self.next.get(node).and_then(|m| m.get(&c)) {
                    Some(&n) => node = n,
                    None => return false,
                }
                if self.end.get(node) == Some(&true) {
                    return true;
                }
            }
            false
        })
    }
}

/// `Some((c, k))` when `s` is `k >= 1` copies of one character `c`.
fn run_of(s: &str) -> Option<(char, usize)> {
    let c = s.chars().next()?;
    s.chars().all(|x| x == c).then(|| (c, s.chars().count()))
}

/// One candidate merge of an SPM vocabulary.
struct SpmMerge {
    left: u32,
    right: u32,
    result: u32,
    score: f32,
    left_chars: usize,
    right_chars: usize,
}

/// The SPM vocabulary as [`spm_merges`] reads it.
pub(super) struct SpmVocab<'v> {
    /// Token texts (`▁` for spaces); index = id.
    pub texts: &'v [String],
    /// `tokenizer.ggml.scores` (missing entries are 0.0).
    pub scores: &'v [f32],
    /// `tokenizer.ggml.token_type` (empty: all normal).
    pub types: &'v [i32],
    /// Which ids are cut out of the text as special tokens.
    pub special: &'v [bool],
    /// Text → id.
    pub lookup: &'v HashMap<&'v str, u32>,
}

/// The merges that reproduce fak's score-ordered SPM merging, in rank
/// order, as `(left, right)` ids; refuses what HF's BPE cannot reproduce
/// (see the module documentation).
pub(super) fn spm_merges(v: &SpmVocab) -> Result<Vec<(u32, u32)>, TokenizerError> {
    for b in 0..=255u8 {
        let name = format!("<0x{b:02X}>");
        if !v.lookup.contains_key(name.as_str()) {
            return Err(refuse(format!(
                "the byte token {name} is missing (fak then falls back to a one-character \
                 token or the unknown token per byte, Hugging Face's byte fallback to the \
                 unknown token per character)"
            )));
        }
    }
    let is_byte = |id: u32| {
        v.types
            .get(id as usize)
            .is_some_and(|&t| TokenType::from_ggml(t) == TokenType::Byte)
    };
    // Special texts without spaces: any token containing one can never form.
    let blockers = Trie::new(
        v.texts
            .iter()
            .zip(v.special)
            .filter(|(t, &s)| s && !t.contains([' ', SPACE_MARK]))
            .map(|(t, _)| t.as_str()),
    );

    let mut merges: Vec<SpmMerge> = Vec::new();
    for (id, t) in v.texts.iter().enumerate() {
        let Ok(result) = u32::try_from(id) else { break };
        // (left, right): a token id, or None for a character with no token.
        let mut splits: Vec<(&str, Option<u32>, &str, Option<u32>)> = Vec::new();
        for (k, _) in t.char_indices().skip(1) {
            let (Some(a), Some(b)) = (t.get(..k), t.get(k..)) else {
                continue;
            };
            let (ia, ib) = (v.lookup.get(a).copied(), v.lookup.get(b).copied());
            let single = |s: &str| s.chars().nth(1).is_none();
            if (ia.is_some() || single(a)) && (ib.is_some() || single(b)) {
                splits.push((a, ia, b, ib));
            }
        }
        if splits.is_empty() || t.contains(' ') || blockers.occurs_in(t) {
            continue;
        }
        let score = v.scores.get(id).copied().unwrap_or(0.0);
        if score.is_nan() {
            return Err(refuse(format!("token {t:?} (id {id}) has a NaN score")));
        }
        for (a, ia, b, ib) in splits {
            let (Some(left), Some(right)) = (ia, ib) else {
                let c = if ia.is_none() { a } else { b };
                return Err(refuse(format!(
                    "token {t:?} (id {id}) is merged from the character {c:?}, which has no \
                     token of its own (Hugging Face's BPE merges only tokens)"
                )));
            };
            if let Some(byte) = [left, right].into_iter().find(|&x| is_byte(x)) {
                return Err(refuse(format!(
                    "token {t:?} (id {id}) is merged from the byte token id {byte} \
                     (Hugging Face's BPE would also merge byte-fallback pieces)"
                )));
            }
            merges.push(SpmMerge {
                left,
                right,
                result,
                // 0.0 and -0.0 are one score.
                score: score + 0.0,
                left_chars: a.chars().count(),
                right_chars: b.chars().count(),
            });
        }
    }
    check_ties(v.texts, &merges)?;
    merges.sort_by(|x, y| {
        y.score
            .total_cmp(&x.score)
            .then(y.left_chars.cmp(&x.left_chars))
            .then(x.right_chars.cmp(&y.right_chars))
            .then(x.result.cmp(&y.result))
    });
    Ok(merges.iter().map(|m| (m.left, m.right)).collect())
}

/// Refuses two different formable tokens with one score, except a class
/// that is exactly the runs of one character `c` of lengths 2..=L, when no
/// other formable token contains `cc`.
fn check_ties(texts: &[String], merges: &[SpmMerge]) -> Result<(), TokenizerError> {
    // Merges of one token are consecutive: one (id, score) per token.
    let mut formable: Vec<(u32, f32)> = merges.iter().map(|m| (m.result, m.score)).collect();
    formable.dedup_by_key(|f| f.0);
    let mut by_score: HashMap<u32, Vec<u32>> = HashMap::new();
    for &(id, score) in &formable {
        by_score.entry(score.to_bits()).or_default().push(id);
    }
    let text = |id: u32| texts.get(id as usize).map_or("", String::as_str);
    let mut classes: Vec<(u32, Vec<u32>)> =
        by_score.into_iter().filter(|(_, v)| v.len() > 1).collect();
    classes.sort_unstable();
    for (bits, ids) in classes {
        let runs: Option<Vec<(char, usize)>> = ids.iter().map(|&id| run_of(text(id))).collect();
        let ok = runs.as_deref().and_then(|runs| {
            let c = runs.first()?.0;
            let mut lens: Vec<usize> = runs.iter().filter(|r| r.0 == c).map(|r| r.1).collect();
            lens.sort_unstable();
            let contiguous = lens.len() == runs.len() && lens.iter().copied().eq(2..2 + lens.len());
            let cc: String = [c, c].iter().collect();
            let alone = formable
                .iter()
                .all(|&(id, _)| ids.contains(&id) || !text(id).contains(cc.as_str()));
            (contiguous && alone).then_some(())
        });
        if ok.is_none() {
            let a = ids.first().map_or("", |&id| text(id));
            let b = ids.get(1).map_or("", |&id| text(id));
            return Err(refuse(format!(
                "tokens {a:?} and {b:?} have the same score {}: fak merges equal scores \
                 leftmost first, Hugging Face's BPE in one fixed rank order (the same only for \
                 runs of one character)",
                f32::from_bits(bits)
            )));
        }
    }
    Ok(())
}

/// Refuses special tokens whose matches fak and HF could cut differently.
///
/// fak cuts special tokens out of the text longest token first, every
/// occurrence; HF cuts the leftmost match first, the longest at a
/// position. The two agree when no token's proper suffix is another's
/// proper prefix (matches then nest or stay apart), and also when the only
/// such overlaps are between runs of one character (`\n\n`, `\n\n\n`):
/// both then cover a run greedily from its left end with the longest run
/// token that fits.
pub(super) fn check_special_overlaps(specials: &[(u32, &str)]) -> Result<(), TokenizerError> {
    // Each proper prefix: one token starting with it, and one that is not a
    // run of the prefix's character (if any).
    let mut prefixes: HashMap<&str, (u32, Option<u32>)> = HashMap::new();
    for &(id, t) in specials {
        let run = run_of(t).map(|r| r.0);
        for (k, _) in t.char_indices().skip(1) {
            let Some(p) = t.get(..k) else { continue };
            let first = p.chars().next();
            let entry = prefixes.entry(p).or_insert((id, None));
            if run.is_none() || run != first {
                entry.1.get_or_insert(id);
            }
        }
    }
    let text_of = |id: u32| specials.iter().find(|s| s.0 == id).map_or("", |s| s.1);
    for &(id, t) in specials {
        let run = run_of(t);
        for (k, _) in t.char_indices().skip(1) {
            let Some(suffix) = t.get(k..) else { continue };
            let Some(&(any, non_run)) = prefixes.get(suffix) else {
                continue;
            };
            let other = if run.is_some() { non_run } else { Some(any) };
            if let Some(other) = other {
                return Err(refuse(format!(
                    "special tokens {t:?} (id {id}) and {:?} (id {other}) overlap: fak cuts \
                     the longer one first, Hugging Face the leftmost",
                    text_of(other)
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn lookup(texts: &[String]) -> HashMap<&str, u32> {
        texts
            .iter()
            .enumerate()
            .map(|(i, t)| (t.as_str(), u32::try_from(i).expect("small")))
            .collect()
    }

    #[test]
    fn bpe_merges_keep_first_rank_and_refuse_outside_the_vocab() {
        let v = strings(&["a", "b", "ab", "c"]);
        let l = lookup(&v);
        let lines = strings(&["a b", "ab", "a b"]);
        assert_eq!(bpe_merges(&lines, &l).expect("valid"), [("a", "b")]);
        let bad = strings(&["a c"]);
        let err = bpe_merges(&bad, &l).expect_err("ac is not a token");
        assert!(err.to_string().contains("\"ac\""), "{err}");
    }

    /// An SPM vocab: the 256 byte tokens, then `extra` with scores.
    fn spm(
        extra: &[(&str, f32)],
        special: &[&str],
    ) -> Result<Vec<(String, String)>, TokenizerError> {
        let mut texts: Vec<String> = (0..=255u8).map(|b| format!("<0x{b:02X}>")).collect();
        let mut types = vec![6; 256];
        let mut scores = vec![0.0; 256];
        for (t, s) in extra {
            texts.push(t.to_string());
            types.push(1);
            scores.push(*s);
        }
        let is_special: Vec<bool> = texts
            .iter()
            .map(|t| special.contains(&t.as_str()))
            .collect();
        let l = lookup(&texts);
        let v = SpmVocab {
            texts: &texts,
            scores: &scores,
            types: &types,
            special: &is_special,
            lookup: &l,
        };
        let name = |id: u32| texts[id as usize].clone();
        spm_merges(&v).map(|m| m.into_iter().map(|(a, b)| (name(a), name(b))).collect())
    }

    #[test]
    fn spm_merges_rank_by_score_then_longer_left_half() {
        let m = spm(
            &[
                ("a", -1.0),
                ("b", -1.0),
                ("ab", -3.0),
                ("ba", -2.0),
                ("aba", -4.0),
            ],
            &[],
        )
        .expect("no ties");
        let pairs: Vec<(&str, &str)> = m.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        assert_eq!(pairs, [("b", "a"), ("a", "b"), ("ab", "a"), ("a", "ba")]);
    }

    #[test]
    fn spm_ties_are_refused_except_runs() {
        let err = spm(&[("a", -1.0), ("b", -1.0), ("ab", -3.0), ("ba", -3.0)], &[])
            .expect_err("ab and ba tie");
        assert!(err.to_string().contains("same score"), "{err}");
        let runs = spm(
            &[
                ("▁", -1.0),
                ("▁▁", -9.0),
                ("▁▁▁", -9.0),
                ("▁a", -2.0),
                ("a", -1.0),
            ],
            &[],
        );
        assert!(runs.is_ok(), "{runs:?}");
        let gap = spm(&[("▁", -1.0), ("▁▁", -9.0), ("▁▁▁▁", -9.0)], &[]);
        assert!(gap.is_err(), "a run length is missing");
    }

    #[test]
    fn spm_tokens_that_cannot_form_are_left_out() {
        // "x" has no token, but "xy" holds the special "y" and "x z" a space.
        let m = spm(
            &[("y", 0.0), ("z", 0.0), ("xy", -1.0), ("x z", -1.0)],
            &["y"],
        )
        .expect("nothing formable needs x");
        assert!(m.is_empty(), "{m:?}");
        let err = spm(&[("z", 0.0), ("xz", -1.0)], &[]).expect_err("x has no token");
        assert!(
            err.to_string().contains("'x'") || err.to_string().contains("\"x\""),
            "{err}"
        );
    }

    #[test]
    fn special_overlaps() {
        let ok = [
            (0, "<s>"),
            (1, "</s>"),
            (2, "\n"),
            (3, "\n\n"),
            (4, "\n\n\n"),
            (5, "<a\nb>"),
        ];
        assert!(check_special_overlaps(&ok).is_ok());
        let bad = [(0, "\n\n"), (1, "\n<x>")];
        assert!(check_special_overlaps(&bad).is_err());
        let bad = [(0, "ab"), (1, "bcd")];
        let err = check_special_overlaps(&bad).expect_err("overlap");
        assert!(err.to_string().contains("\"ab\""), "{err}");
        assert!(
            check_special_overlaps(&[(0, "abab")]).is_err(),
            "overlaps itself"
        );
    }
}
