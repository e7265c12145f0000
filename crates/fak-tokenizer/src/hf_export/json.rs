//! The JSON shapes of `tokenizer.json` and `tokenizer_config.json`, as
//! Hugging Face `tokenizers` (and transformers) read them.

use std::collections::BTreeMap;

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;

use crate::spm::SPACE_MARK;

/// `tokenizer.json`.
#[derive(Serialize)]
pub(super) struct TokenizerJson<'a> {
    pub(super) version: &'static str,
    pub(super) truncation: Option<()>,
    pub(super) padding: Option<()>,
    pub(super) added_tokens: &'a [AddedToken<'a>],
    pub(super) normalizer: Option<Normalizer>,
    pub(super) pre_tokenizer: Option<PreTok>,
    pub(super) model: BpeModel<'a>,
    pub(super) post_processor: PostProcessor,
    pub(super) decoder: Decoder,
}

/// One `added_tokens` entry.
#[derive(Serialize)]
pub(super) struct AddedToken<'a> {
    pub(super) id: u32,
    pub(super) content: &'a str,
    pub(super) single_word: bool,
    pub(super) lstrip: bool,
    pub(super) rstrip: bool,
    pub(super) normalized: bool,
    pub(super) special: bool,
}

/// An `added_tokens_decoder` entry of `tokenizer_config.json`.
#[derive(Serialize)]
pub(super) struct AddedTokenEntry<'a> {
    pub(super) content: &'a str,
    pub(super) lstrip: bool,
    pub(super) normalized: bool,
    pub(super) rstrip: bool,
    pub(super) single_word: bool,
    pub(super) special: bool,
}

impl<'a> From<&AddedToken<'a>> for AddedTokenEntry<'a> {
    fn from(t: &AddedToken<'a>) -> AddedTokenEntry<'a> {
        AddedTokenEntry {
            content: t.content,
            lstrip: t.lstrip,
            normalized: t.normalized,
            rstrip: t.rstrip,
            single_word: t.single_word,
            special: t.special,
        }
    }
}

/// A `Split` / `Replace` pattern.
#[derive(Serialize)]
pub(super) enum Pattern {
    String(String),
    Regex(String),
}

/// A normalizer.
#[derive(Serialize)]
#[serde(tag = "type")]
pub(super) enum Normalizer {
    Sequence { normalizers: Vec<Normalizer> },
    Prepend { prepend: String },
    Replace { pattern: Pattern, content: String },
}

/// A pre-tokenizer.
#[derive(Serialize)]
#[serde(tag = "type")]
pub(super) enum PreTok {
    Sequence {
        pretokenizers: Vec<PreTok>,
    },
    Split {
        pattern: Pattern,
        behavior: &'static str,
        invert: bool,
    },
    ByteLevel {
        add_prefix_space: bool,
        trim_offsets: bool,
        use_regex: bool,
    },
}

/// A decoder.
#[derive(Serialize)]
#[serde(tag = "type")]
pub(super) enum Decoder {
    Sequence {
        decoders: Vec<Decoder>,
    },
    ByteLevel {
        add_prefix_space: bool,
        trim_offsets: bool,
        use_regex: bool,
    },
    Replace {
        pattern: Pattern,
        content: String,
    },
    ByteFallback,
    Fuse,
    Strip {
        content: char,
        start: usize,
        stop: usize,
    },
}

impl Decoder {
    /// Byte characters back to bytes (its options only matter to offsets).
    pub(super) fn byte_level() -> Decoder {
        Decoder::ByteLevel {
            add_prefix_space: false,
            trim_offsets: true,
            use_regex: false,
        }
    }

    /// `▁` back to spaces, byte tokens to bytes, and (with a space prefix)
    /// the prefix's space dropped again.
    pub(super) fn spm(space_prefix: bool) -> Decoder {
        let mut decoders = vec![
            Decoder::Replace {
                pattern: Pattern::String(SPACE_MARK.to_string()),
                content: " ".to_string(),
            },
            Decoder::ByteFallback,
            Decoder::Fuse,
        ];
        if space_prefix {
            decoders.push(Decoder::Strip {
                content: ' ',
                start: 1,
                stop: 0,
            });
        }
        Decoder::Sequence { decoders }
    }
}

/// The BPE model.
#[derive(Serialize)]
pub(super) struct BpeModel<'a> {
    #[serde(rename = "type")]
    pub(super) kind: &'static str,
    pub(super) dropout: Option<f32>,
    pub(super) unk_token: Option<&'a str>,
    pub(super) continuing_subword_prefix: Option<&'a str>,
    pub(super) end_of_word_suffix: Option<&'a str>,
    pub(super) fuse_unk: bool,
    pub(super) byte_fallback: bool,
    pub(super) ignore_merges: bool,
    pub(super) vocab: OrderedVocab<'a>,
    pub(super) merges: Vec<(&'a str, &'a str)>,
}

/// The vocabulary as a JSON object in id order.
pub(super) struct OrderedVocab<'a>(pub(super) &'a [String]);

impl Serialize for OrderedVocab<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (id, t) in self.0.iter().enumerate() {
            map.serialize_entry(t, &id)?;
        }
        map.end()
    }
}

/// A `TemplateProcessing` piece.
#[derive(Serialize)]
pub(super) enum Piece {
    SpecialToken { id: String, type_id: u32 },
    Sequence { id: &'static str, type_id: u32 },
}

/// A `special_tokens` entry of `TemplateProcessing`.
#[derive(Serialize)]
pub(super) struct TemplateToken {
    pub(super) id: String,
    pub(super) ids: Vec<u32>,
    pub(super) tokens: Vec<String>,
}

/// The post-processor.
#[derive(Serialize)]
#[serde(tag = "type")]
pub(super) enum PostProcessor {
    TemplateProcessing {
        single: Vec<Piece>,
        pair: Vec<Piece>,
        special_tokens: BTreeMap<String, TemplateToken>,
    },
}

impl PostProcessor {
    /// `[BOS] $A [EOS]` (and `[BOS] $A [EOS] [BOS] $B [EOS]` for pairs),
    /// each of BOS and EOS only when given.
    pub(super) fn template(bos: Option<(u32, &str)>, eos: Option<(u32, &str)>) -> PostProcessor {
        let special = |t: Option<(u32, &str)>, type_id: u32| {
            t.map(|(_, text)| Piece::SpecialToken {
                id: text.to_string(),
                type_id,
            })
        };
        let seq = |id: &'static str, type_id: u32| Piece::Sequence { id, type_id };
        let single: Vec<Piece> = [special(bos, 0), Some(seq("A", 0)), special(eos, 0)]
            .into_iter()
            .flatten()
            .collect();
        let pair: Vec<Piece> = [
            special(bos, 0),
            Some(seq("A", 0)),
            special(eos, 0),
            special(bos, 1),
            Some(seq("B", 1)),
            special(eos, 1),
        ]
        .into_iter()
        .flatten()
        .collect();
        let special_tokens = [bos, eos]
            .into_iter()
            .flatten()
            .map(|(id, text)| {
                (
                    text.to_string(),
                    TemplateToken {
                        id: text.to_string(),
                        ids: vec![id],
                        tokens: vec![text.to_string()],
                    },
                )
            })
            .collect();
        PostProcessor::TemplateProcessing {
            single,
            pair,
            special_tokens,
        }
    }
}

/// `tokenizer_config.json`, keys in alphabetical order as transformers
/// writes them.
#[derive(Serialize)]
pub(super) struct TokenizerConfigJson<'a> {
    pub(super) add_bos_token: bool,
    pub(super) add_eos_token: bool,
    pub(super) added_tokens_decoder: BTreeMap<u32, AddedTokenEntry<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) bos_token: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) chat_template: Option<&'a str>,
    pub(super) clean_up_tokenization_spaces: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) eos_token: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) model_max_length: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) pad_token: Option<&'a str>,
    pub(super) tokenizer_class: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) unk_token: Option<&'a str>,
}
