//! [`Tokenizer`]: text ⇄ token ids for byte-level BPE and SentencePiece
//! (SPM) vocabularies.
//!
//! Encoding runs in three stages, mirroring llama.cpp's `llama_tokenize`
//! (shown for BPE; an SPM vocab skips the pre-tokenizer and merges each
//! fragment by token score, see [`crate::spm`]):
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

use std::collections::{BTreeSet, HashMap};
use std::ops::Range;

use crate::bpe::Bpe;
use crate::error::TokenizerError;
use crate::pretok::{AddToken, MergePolicy, PreTokenizer, Splitter};
use crate::spm::{escape_spaces, Spm};
use crate::vocab::{
    apply_strip, attrs_from_types, derive, piece_bytes, Attr, SpecialStrip, SpecialTokenIds,
    VocabKind,
};

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
    /// The tokenizer family.
    pub kind: VocabKind,
    /// Token texts (BPE: GPT-2 byte-character form; SPM: `▁` for spaces);
    /// index = id. Empty texts are replaced by `[EMPTY_<id>]` like
    /// llama.cpp does.
    pub tokens: Vec<String>,
    /// `tokenizer.ggml.scores` (SPM merge priority, higher first); missing
    /// entries count as 0.0. Unused by BPE.
    pub scores: Vec<f32>,
    /// Whether a space is put before the text (SPM: before each text
    /// fragment that starts the input or follows a special token), and
    /// stripped again from the first token when decoding.
    pub add_space_prefix: bool,
    /// `tokenizer.ggml.token_type` per token (see
    /// [`TokenType`](crate::TokenType)); empty means all normal.
    pub token_types: Vec<i32>,
    /// Ranked merges, `"left right"`; rank = index. Unused by SPM.
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
    /// Whitespace stripping around matched special tokens.
    pub strip: SpecialStrip,
    /// Whether [`Tokenizer::decode`] applies llama.cpp's `clean_spaces`.
    pub clean_spaces: bool,
}

/// The merge engine of a vocabulary family.
enum Engine {
    /// Byte-level BPE behind a pre-tokenizer.
    Bpe { bpe: Box<Bpe>, splitter: Splitter },
    /// SentencePiece-style merging by score.
    Spm {
        spm: Box<Spm>,
        lookup: HashMap<String, u32>,
    },
}

/// A BPE or SPM tokenizer. Immutable once built; share it freely.
pub struct Tokenizer {
    kind: VocabKind,
    add_space_prefix: bool,
    clean_spaces: bool,
    texts: Vec<String>,
    attrs: Vec<Attr>,
    /// All tokens' detokenized bytes, concatenated.
    piece_data: Vec<u8>,
    /// `piece_data[piece_offsets[i]..piece_offsets[i + 1]]` is token `i`'s.
    piece_offsets: Vec<usize>,
    engine: Engine,
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
        let mut derived = derive(&texts, attrs_from_types(&cfg.token_types, n), ids);
        apply_strip(&texts, &mut derived.attrs, cfg.strip);
        let engine = match cfg.kind {
            VocabKind::Bpe => Engine::Bpe {
                bpe: Box::new(Bpe::new(&texts, &cfg.merges, cfg.merge_policy)?),
                splitter: Splitter::new(cfg.pre)?,
            },
            VocabKind::Spm => {
                let lookup = unique_lookup(&texts)?;
                Engine::Spm {
                    spm: Box::new(Spm::new(n, &cfg.scores, &lookup, derived.ids.unk)),
                    lookup,
                }
            }
        };

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
            piece_bytes(t, a, cfg.kind, &mut piece_data);
        }
        piece_offsets.push(piece_data.len());

        Ok(Tokenizer {
            kind: cfg.kind,
            add_space_prefix: cfg.add_space_prefix,
            clean_spaces: cfg.clean_spaces,
            texts,
            attrs: derived.attrs,
            piece_data,
            piece_offsets,
            engine,
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
        // SPM: a space prefix before text that starts the input or follows
        // a special token (llama.cpp's `is_prev_special`).
        let mut prev_special = true;
        for frag in self.partition(text, opts.special) {
            match frag {
                Fragment::Token(id) => {
                    out.push(id);
                    prev_special = true;
                }
                Fragment::Text(r) => {
                    if let Some(s) = text.get(r) {
                        self.encode_plain(s, prev_special, &mut out);
                    }
                    prev_special = false;
                }
            }
        }
        if add && self.add_eos == AddToken::Add {
            out.extend(self.ids.eos);
        }
        out
    }

    /// Tokenizes text that holds no special tokens: BPE pre-tokenizes and
    /// merges by rank; SPM escapes spaces (after the space prefix, if
    /// `prefix`) and merges by score.
    fn encode_plain(&self, text: &str, prefix: bool, out: &mut Vec<u32>) {
        match &self.engine {
            Engine::Bpe { bpe, splitter } => {
                for word in splitter.split(text) {
                    bpe.encode_word(word.as_bytes(), out);
                }
            }
            Engine::Spm { spm, lookup } => {
                let mut s = String::with_capacity(text.len() * 3 + 3);
                if self.add_space_prefix && prefix {
                    escape_spaces(" ", &mut s);
                }
                escape_spaces(text, &mut s);
                spm.encode(&s, lookup, out);
            }
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
            let (lstrip, rstrip) = (attr.lstrip(), attr.rstrip());
            let mut next = Vec::with_capacity(frags.len() + 2);
            for f in frags {
                let Fragment::Text(r) = f else {
                    next.push(f);
                    continue;
                };
                let Some(hay) = text.get(r.clone()) else {
                    continue;
                };
                let hb = hay.as_bytes();
                let mut last = 0;
                while let Some(rel) = hay.get(last..).and_then(|h| h.find(needle.as_str())) {
                    let at = last + rel;
                    let mut left_end = at;
                    if lstrip {
                        while left_end > last && hb.get(left_end - 1).is_some_and(|&b| c_isspace(b))
                        {
                            left_end -= 1;
                        }
                    }
                    if left_end > last {
                        next.push(Fragment::Text(r.start + last..r.start + left_end));
                    }
                    next.push(Fragment::Token(id));
                    last = at + needle.len();
                    if rstrip {
                        while hb.get(last).is_some_and(|&b| c_isspace(b)) {
                            last += 1;
                        }
                    }
                }
                if last < hay.len() {
                    next.push(Fragment::Text(r.start + last..r.end));
                }
            }
            frags = next;
        }
        frags
    }

    /// The tokenizer family.
    pub fn kind(&self) -> VocabKind {
        self.kind
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

    /// The vocab text of `id` (BPE: GPT-2 byte-character form; SPM: `▁`
    /// for spaces), if in range.
    pub fn token_text(&self, id: u32) -> Option<&str> {
        self.texts.get(id as usize).map(String::as_str)
    }

    /// The vocab id whose text is exactly `text`.
    pub fn token_id(&self, text: &str) -> Option<u32> {
        match &self.engine {
            Engine::Bpe { bpe, .. } => bpe.lookup(text),
            Engine::Spm { lookup, .. } => lookup.get(text).copied(),
        }
    }

    /// Concatenated bytes of `ids`, as lossy UTF-8, like llama.cpp's
    /// `llama_detokenize(remove_special = false, unparse_special = true)`:
    /// special tokens render as their text, and with a space prefix
    /// (`add_space_prefix`) one leading space of the first token is
    /// dropped, and where the vocab asks for it (`clean_spaces`: most BPE
    /// vocabs, not smollm, qwen2 or SPM) llama.cpp's space clean-up runs.
    pub fn decode(&self, ids: &[u32]) -> String {
        let mut bytes = Vec::with_capacity(ids.len() * 4);
        for (i, &id) in ids.iter().enumerate() {
            let piece = self.token_bytes(id);
            let piece = match piece.split_first() {
                Some((b' ', rest)) if i == 0 && self.add_space_prefix => rest,
                _ => piece,
            };
            bytes.extend_from_slice(piece);
        }
        if self.clean_spaces {
            bytes = clean_spaces(&bytes);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// llama.cpp's `clean_spaces` passes over detokenized bytes: drop the
/// space in `" ?"`, `" !"`, `" ."`, `" ,"`; turn `" ' "` into `"'"`; drop
/// the space before `'s`, `'m`, `'re`, `'ve`.
fn clean_spaces(text: &[u8]) -> Vec<u8> {
    let Some((&first, _)) = text.split_first() else {
        return Vec::new();
    };
    // Pass 1.
    let mut p1: Vec<u8> = vec![first];
    for (i, &x) in text.iter().enumerate().skip(1) {
        if text.get(i - 1) == Some(&b' ') && matches!(x, b'?' | b'!' | b'.' | b',') {
            p1.pop();
        }
        p1.push(x);
    }
    // Pass 2: llama.cpp blanks the skipped space in place, so a later
    // look-behind sees a NUL there, not a space.
    let mut src = p1;
    let mut p2: Vec<u8> = src.first().copied().into_iter().collect();
    let mut i = 1;
    while let Some(&x) = src.get(i) {
        if x == b'\'' && src.get(i - 1) == Some(&b' ') && src.get(i + 1) == Some(&b' ') {
            p2.pop();
            i += 1;
            if let Some(b) = src.get_mut(i) {
                *b = 0;
            }
        }
        p2.push(x);
        i += 1;
    }
    // Pass 3.
    let mut out: Vec<u8> = p2.first().copied().into_iter().collect();
    for (i, &x) in p2.iter().enumerate().skip(1) {
        if p2.get(i - 1) == Some(&b' ') && x == b'\'' {
            match (p2.get(i + 1), p2.get(i + 2)) {
                (Some(b's' | b'm'), _) => {
                    out.pop();
                }
                (Some(b'r'), Some(b'e')) | (Some(b'v'), Some(b'e')) => {
                    out.pop();
                }
                _ => {}
            }
        }
        out.push(x);
    }
    out
}

/// C's `isspace` in the "C" locale (what llama.cpp strips around tokens).
fn c_isspace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r')
}

/// Text → id for every token; an error on two tokens with the same text.
fn unique_lookup(texts: &[String]) -> Result<HashMap<String, u32>, TokenizerError> {
    let mut map: HashMap<String, u32> = HashMap::with_capacity(texts.len());
    for (i, t) in texts.iter().enumerate() {
        let id = u32::try_from(i).map_err(|_| TokenizerError::VocabTooLarge { n: texts.len() })?;
        if let Some(&first) = map.get(t.as_str()) {
            return Err(TokenizerError::DuplicateToken {
                text: t.clone(),
                first,
                second: id,
            });
        }
        map.insert(t.clone(), id);
    }
    Ok(map)
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
    fn clean_spaces_follows_llama_cpp() {
        let c = |s: &str| String::from_utf8(clean_spaces(s.as_bytes())).expect("utf8");
        assert_eq!(c("a , b . c ? d !"), "a, b. c? d!");
        assert_eq!(c("x ' y"), "x'y");
        assert_eq!(
            c("it 's I 'm we 're you 've I 'll he 'd don 't"),
            "it's I'm we're you've I 'll he 'd don 't"
        );
        assert_eq!(c(" ,"), ",", "a leading space goes too, as in llama.cpp");
        assert_eq!(c(""), "");
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
