//! [`Tokenizer`]: text ⇄ token ids for byte-level BPE vocabularies.
//!
//! Encoding runs in three stages, mirroring llama.cpp's `llama_tokenize`:
//!
//! ```text
//! "<|im_start|>user\nhi 42"
//!  1. special tokens cut out (longest token text first, all occurrences)
//!       [<|im_start|>] "user\nhi 42"
//!  2. pre-tokenizer splits each text fragment into words
//!       "user" "\n" "hi" " " "4" "2"          (smollm)
//!  3. BPE merges each word's bytes into vocab tokens
//!       [1] [4093] [198] [6004] [216] [36] [34]
//! ```
//!
//! plus BOS/EOS when the vocab asks for them.

use std::collections::BTreeSet;
use std::ops::Range;

use crate::bpe::Bpe;
use crate::error::TokenizerError;
use crate::pretok::{AddToken, MergePolicy, PreTokenizer, Splitter};
use crate::vocab::{attrs_from_types, derive, piece_bytes, Attr, SpecialTokenIds};

/// How special-token text in the input is treated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SpecialTokens {
    /// Control tokens written in the text (`<|im_start|>`) become their
    /// ids, like llama.cpp's `parse_special = true` (the CLI default).
    #[default]
    Parse,
    /// Control-token text is tokenized as ordinary text; user-defined
    /// tokens are still matched (llama.cpp's `parse_special = false`).
    Plain,
}

/// Whether BOS/EOS are added around the text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum AddSpecial {
    /// Add BOS/EOS exactly when the vocab says so
    /// (`tokenizer.ggml.add_bos_token` / `add_eos_token`, with llama.cpp's
    /// per-pre-tokenizer defaults).
    #[default]
    FromMetadata,
    /// Never add them.
    Never,
}

/// Options of [`Tokenizer::encode`]. The default is llama.cpp's CLI
/// behaviour: parse special tokens, add BOS/EOS as the vocab says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct EncodeOptions {
    /// Treatment of special-token text.
    pub special: SpecialTokens,
    /// BOS/EOS policy.
    pub add: AddSpecial,
}

/// Everything needed to build a [`Tokenizer`]; [`Tokenizer::from_gguf`]
/// fills it from GGUF metadata.
#[derive(Clone, Debug, Default)]
pub struct TokenizerConfig {
    /// Token texts in GPT-2 byte-character form; index = id. Empty texts
    /// are replaced by `[EMPTY_<id>]` like llama.cpp does.
    pub tokens: Vec<String>,
    /// `tokenizer.ggml.token_type` per token (see
    /// [`TokenType`](crate::TokenType)); empty means all normal.
    pub token_types: Vec<i32>,
    /// Ranked merges, `"left right"`; rank = index.
    pub merges: Vec<String>,
    /// Split rules.
    pub pre: PreTokenizer,
    /// Whether a whole word found in the vocab skips merging.
    pub merge_policy: MergePolicy,
    /// Special token ids (out-of-range ids are ignored).
    pub special: SpecialTokenIds,
    /// Whether [`AddSpecial::FromMetadata`] adds BOS.
    pub add_bos: AddToken,
    /// Whether [`AddSpecial::FromMetadata`] adds EOS.
    pub add_eos: AddToken,
}

/// A byte-level BPE tokenizer. Immutable once built; share it freely.
pub struct Tokenizer {
    texts: Vec<String>,
    attrs: Vec<Attr>,
    /// All tokens' detokenized bytes, concatenated.
    piece_data: Vec<u8>,
    /// `piece_data[piece_offsets[i]..piece_offsets[i + 1]]` is token `i`'s.
    piece_offsets: Vec<usize>,
    bpe: Bpe,
    splitter: Splitter,
    /// Ids matched as whole tokens before BPE, longest text first.
    specials: Vec<u32>,
    ids: SpecialTokenIds,
    eog: BTreeSet<u32>,
    add_bos: AddToken,
    add_eos: AddToken,
}

/// A stretch of the input after special-token matching.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Fragment {
    /// Bytes of the input still to be tokenized.
    Text(Range<usize>),
    /// A matched special token.
    Token(u32),
}

impl Tokenizer {
    /// Builds a tokenizer from plain data. Fails on an empty vocab, duplicate
    /// token texts, a type array shorter than the vocab, or more than
    /// `u32::MAX` tokens.
    pub fn new(cfg: TokenizerConfig) -> Result<Tokenizer, TokenizerError> {
        let n = cfg.tokens.len();
        if n == 0 {
            return Err(TokenizerError::EmptyVocab);
        }
        if u32::try_from(n).is_err() {
            return Err(TokenizerError::VocabTooLarge { n });
        }
        if !cfg.token_types.is_empty() && cfg.token_types.len() < n {
            return Err(TokenizerError::TokenTypeCount {
                got: cfg.token_types.len(),
                want: n,
            });
        }
        let texts: Vec<String> = cfg
            .tokens
            .into_iter()
            .enumerate()
            .map(|(i, t)| {
                if t.is_empty() {
                    format!("[EMPTY_{i}]")
                } else {
                    t
                }
            })
            .collect();
        let bpe = Bpe::new(&texts, &cfg.merges, cfg.merge_policy)?;
        let splitter = Splitter::new(cfg.pre)?;

        let in_range = |id: Option<u32>| id.filter(|&i| (i as usize) < n);
        let s = cfg.special;
        let ids = SpecialTokenIds {
            bos: in_range(s.bos),
            eos: in_range(s.eos),
            eot: in_range(s.eot),
            eom: in_range(s.eom),
            unk: in_range(s.unk),
            sep: in_range(s.sep),
            pad: in_range(s.pad),
            fim_pre: in_range(s.fim_pre),
            fim_suf: in_range(s.fim_suf),
            fim_mid: in_range(s.fim_mid),
            fim_pad: in_range(s.fim_pad),
            fim_rep: in_range(s.fim_rep),
            fim_sep: in_range(s.fim_sep),
        };
        let derived = derive(&texts, attrs_from_types(&cfg.token_types, n), ids);

        let mut specials: Vec<u32> = (0..n)
            .filter(|&i| derived.attrs.get(i).is_some_and(|a| a.is_special()))
            .filter_map(|i| u32::try_from(i).ok())
            .collect();
        specials.sort_by_key(|&id| {
            let len = texts.get(id as usize).map_or(0, String::len);
            (std::cmp::Reverse(len), id)
        });

        let mut piece_data = Vec::with_capacity(n * 6);
        let mut piece_offsets = Vec::with_capacity(n + 1);
        for (t, &a) in texts.iter().zip(&derived.attrs) {
            piece_offsets.push(piece_data.len());
            piece_bytes(t, a, &mut piece_data);
        }
        piece_offsets.push(piece_data.len());

        Ok(Tokenizer {
            texts,
            attrs: derived.attrs,
            piece_data,
            piece_offsets,
            bpe,
            splitter,
            specials,
            ids: derived.ids,
            eog: derived.eog,
            add_bos: cfg.add_bos,
            add_eos: cfg.add_eos,
        })
    }

    /// Token ids for `text`. Never fails: bytes no token covers are
    /// dropped, as in llama.cpp.
    pub fn encode(&self, text: &str, opts: EncodeOptions) -> Vec<u32> {
        let mut out = Vec::with_capacity(text.len() / 3 + 2);
        let add = opts.add == AddSpecial::FromMetadata;
        if add && self.add_bos == AddToken::Add {
            out.extend(self.ids.bos);
        }
        for frag in self.partition(text, opts.special) {
            match frag {
                Fragment::Token(id) => out.push(id),
                Fragment::Text(r) => {
                    if let Some(s) = text.get(r) {
                        self.encode_plain(s, &mut out);
                    }
                }
            }
        }
        if add && self.add_eos == AddToken::Add {
            out.extend(self.ids.eos);
        }
        out
    }

    /// Pre-tokenizes and BPE-merges text that holds no special tokens.
    fn encode_plain(&self, text: &str, out: &mut Vec<u32>) {
        for word in self.splitter.split(text) {
            self.bpe.encode_word(word.as_bytes(), out);
        }
    }

    /// Cuts special tokens out of `text`: for each special token, longest
    /// text first, every occurrence inside the remaining text fragments.
    fn partition(&self, text: &str, mode: SpecialTokens) -> Vec<Fragment> {
        if text.is_empty() {
            return Vec::new();
        }
        let mut frags = vec![Fragment::Text(0..text.len())];
        for &id in &self.specials {
            let Some(attr) = self.attrs.get(id as usize) else {
                continue;
            };
            if mode == SpecialTokens::Plain && attr.is_parse_only() {
                continue;
            }
            let Some(needle) = self.texts.get(id as usize) else {
                continue;
            };
            if !frags
                .iter()
                .any(|f| matches!(f, Fragment::Text(r) if text.get(r.clone()).is_some_and(|s| s.contains(needle.as_str()))))
            {
                continue;
            }
            let mut next = Vec::with_capacity(frags.len() + 2);
            for f in frags {
                let Fragment::Text(r) = f else {
                    next.push(f);
                    continue;
                };
                let Some(hay) = text.get(r.clone()) else {
                    continue;
                };
                let mut last = 0;
                for (at, _) in hay.match_indices(needle.as_str()) {
                    if at > last {
                        next.push(Fragment::Text(r.start + last..r.start + at));
                    }
                    next.push(Fragment::Token(id));
                    last = at + needle.len();
                }
                if last < hay.len() {
                    next.push(Fragment::Text(r.start + last..r.end));
                }
            }
            frags = next;
        }
        frags
    }

    /// Number of tokens in the vocab.
    pub fn n_vocab(&self) -> usize {
        self.texts.len()
    }

    /// Beginning-of-sequence id, if the vocab has one.
    pub fn bos(&self) -> Option<u32> {
        self.ids.bos
    }

    /// End-of-sequence id, if the vocab has one.
    pub fn eos(&self) -> Option<u32> {
        self.ids.eos
    }

    /// All special-token ids known after llama.cpp's name-based detection.
    pub fn special_ids(&self) -> SpecialTokenIds {
        self.ids
    }

    /// Whether `id` ends generation (EOS, EOT, and every token llama.cpp
    /// recognises as an end token: `<|im_end|>`, `<|endoftext|>`, ...).
    pub fn is_eog(&self, id: u32) -> bool {
        self.eog.contains(&id)
    }

    /// The end-of-generation ids, ascending.
    pub fn eog_ids(&self) -> Vec<u32> {
        self.eog.iter().copied().collect()
    }

    /// Whether BOS/EOS are added under [`AddSpecial::FromMetadata`].
    pub fn adds(&self) -> (AddToken, AddToken) {
        (self.add_bos, self.add_eos)
    }

    /// The bytes token `id` detokenizes to, as llama.cpp's
    /// `token_to_piece(special = true)`: control and user-defined tokens as
    /// their text, unused ones as nothing. Empty for out-of-range ids.
    pub fn token_bytes(&self, id: u32) -> &[u8] {
        let i = id as usize;
        match (self.piece_offsets.get(i), self.piece_offsets.get(i + 1)) {
            (Some(&a), Some(&b)) => self.piece_data.get(a..b).unwrap_or(&[]),
            _ => &[],
        }
    }

    /// Whether `id` is a control (or unknown) token: one that text only
    /// produces when special tokens are parsed (`<|im_end|>`, BOS, ...).
    /// False for out-of-range ids.
    pub fn is_control(&self, id: u32) -> bool {
        self.attrs
            .get(id as usize)
            .is_some_and(|a| a.is_parse_only())
    }

    /// The vocab text of `id` (GPT-2 byte-character form), if in range.
    pub fn token_text(&self, id: u32) -> Option<&str> {
        self.texts.get(id as usize).map(String::as_str)
    }

    /// The vocab id whose text is exactly `text`.
    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.bpe.lookup(text)
    }

    /// Concatenated bytes of `ids`, as lossy UTF-8. Special tokens render
    /// as their text; llama.cpp's space clean-up (off for smollm/qwen2) is
    /// not applied.
    pub fn decode(&self, ids: &[u32]) -> String {
        let mut bytes = Vec::with_capacity(ids.len() * 4);
        for &id in ids {
            bytes.extend_from_slice(self.token_bytes(id));
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::unicode::BYTE_TO_CHAR;

    /// A vocab of the 256 byte characters, a few merges, two specials.
    fn toy(pre: PreTokenizer) -> Tokenizer {
        let mut tokens: Vec<String> =
            vec!["<|im_start|>".into(), "<|im_end|>".into(), "<tool>".into()];
        tokens.extend(BYTE_TO_CHAR.iter().map(|c| c.to_string()));
        tokens.extend(["he", "ll", "hell", "hello", "Ġw"].map(String::from));
        let mut types = vec![3, 3, 4];
        types.resize(tokens.len(), 1);
        Tokenizer::new(TokenizerConfig {
            tokens,
            token_types: types,
            merges: ["h e", "l l", "he ll", "hell o", "Ġ w"]
                .map(String::from)
                .to_vec(),
            pre,
            special: SpecialTokenIds {
                bos: Some(0),
                eos: Some(1),
                ..Default::default()
            },
            add_bos: AddToken::Add,
            ..Default::default()
        })
        .expect("toy vocab builds")
    }

    #[test]
    fn encode_decode_round_trip_with_specials() {
        let t = toy(PreTokenizer::Gpt2);
        let text = "<|im_start|>hello w<|im_end|>";
        let ids = t.encode(text, EncodeOptions::default());
        assert_eq!(ids.first(), Some(&0), "BOS first");
        assert_eq!(ids.get(1), Some(&0), "then the parsed <|im_start|>");
        assert_eq!(ids.last(), Some(&1));
        assert_eq!(t.decode(ids.get(1..).unwrap_or(&[])), text);
        assert!(t.is_eog(1));
        assert!(!t.is_eog(0));
    }

    #[test]
    fn plain_mode_keeps_user_defined_tokens() {
        let t = toy(PreTokenizer::Gpt2);
        let opts = EncodeOptions {
            special: SpecialTokens::Plain,
            add: AddSpecial::Never,
        };
        let ids = t.encode("<tool><|im_end|>", opts);
        assert_eq!(ids.first(), Some(&2));
        assert!(!ids.contains(&1));
        assert_eq!(t.decode(&ids), "<tool><|im_end|>");
    }

    #[test]
    fn shareable_across_threads() {
        fn check<T: Send + Sync>() {}
        check::<Tokenizer>();
        check::<crate::ChatTemplate>();
    }

    proptest::proptest! {
        #[test]
        fn plain_text_round_trips(s in "(\\PC|[ \t\n0-9'<|>])*") {
            let never = EncodeOptions { special: SpecialTokens::Plain, add: AddSpecial::Never };
            for pre in [PreTokenizer::Gpt2, PreTokenizer::SmolLm, PreTokenizer::Qwen2, PreTokenizer::Llama3] {
                let t = toy(pre);
                let ids = t.encode(&s, never);
                proptest::prop_assert_eq!(t.decode(&ids), s.clone());
                proptest::prop_assert!(ids.iter().all(|&i| (i as usize) < t.n_vocab()));
            }
        }
    }

    #[test]
    fn out_of_range_ids_are_harmless() {
        let t = toy(PreTokenizer::Gpt2);
        assert!(t.token_bytes(u32::MAX).is_empty());
        assert_eq!(t.token_text(1_000_000), None);
        assert_eq!(t.decode(&[u32::MAX, 7]), t.decode(&[7]));
    }

    #[test]
    fn config_errors_are_typed() {
        let err = Tokenizer::new(TokenizerConfig::default()).err();
        assert!(matches!(err, Some(TokenizerError::EmptyVocab)));
        let dup = Tokenizer::new(TokenizerConfig {
            tokens: vec!["a".into(), "a".into()],
            ..Default::default()
        })
        .err();
        assert!(matches!(dup, Some(TokenizerError::DuplicateToken { .. })));
        let short = Tokenizer::new(TokenizerConfig {
            tokens: vec!["a".into(), "b".into()],
            token_types: vec![1],
            ..Default::default()
        })
        .err();
        assert!(matches!(
            short,
            Some(TokenizerError::TokenTypeCount { got: 1, want: 2 })
        ));
    }
}
