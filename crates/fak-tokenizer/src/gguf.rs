//! Reading a [`TokenizerConfig`] from GGUF metadata, with llama.cpp's
//! defaults for what the file leaves out.
//!
//! | key (`tokenizer.ggml.*`) | use |
//! |---|---|
//! | `model` | `gpt2` (byte-level BPE) or `llama` (SentencePiece); anything else is refused by name |
//! | `pre` | BPE pre-tokenizer; absent means llama.cpp's `default`; ignored for SPM |
//! | `tokens`, `token_type` | vocab, types |
//! | `merges` | BPE ranked merges (required for BPE) |
//! | `scores` | SPM merge scores (absent: all 0.0) |
//! | `bos_token_id` ... `fim_sep_token_id` | special ids (BPE: BOS/EOS default to 11; SPM: BOS 1, EOS 2, UNK 0; defaults only if in range) |
//! | `add_bos_token`, `add_eos_token` | override the default (BPE: per pre-tokenizer; SPM: BOS yes, EOS no) |
//! | `add_space_prefix` | SPM space prefix (default true for SPM, false for BPE) |
//! | `general.name`, `general.architecture` | llama.cpp's per-model whitespace stripping around special tokens (Phi-3, jina, modern-bert) |

use fak_gguf::GgufFile;

use crate::error::TokenizerError;
use crate::pretok::{AddToken, MergePolicy, PreSettings, PreTokenizer};
use crate::tokenizer::{Tokenizer, TokenizerConfig};
use crate::vocab::VocabKind;
use crate::vocab::{SpecialStrip, SpecialTokenIds};

/// llama.cpp's BOS/EOS default for BPE vocabs that name none.
const BPE_DEFAULT_BOS_EOS: u32 = 11;
/// llama.cpp's SPM defaults: BOS, EOS, unknown.
const SPM_DEFAULT_BOS: u32 = 1;
const SPM_DEFAULT_EOS: u32 = 2;
const SPM_DEFAULT_UNK: u32 = 0;

/// The llama.cpp family of a `tokenizer.ggml.model` value fak does not
/// implement, for the error message.
fn unsupported_family(model: &str) -> &'static str {
    match model {
        "bert" => "WPM, WordPiece",
        "t5" => "UGM, Unigram",
        "rwkv" => "RWKV",
        "plamo2" => "PLaMo-2",
        "no_vocab" | "none" => "no vocabulary",
        "gemma4" | "hybriddna" | "whitespace" => "llama.cpp BPE variant",
        _ => "unknown tokenizer family",
    }
}

fn required<'a, T: ?Sized>(v: Option<&'a T>, key: &'static str) -> Result<&'a T, TokenizerError> {
    v.ok_or(TokenizerError::MissingKey { key })
}

impl TokenizerConfig {
    /// The tokenizer description stored in a GGUF file.
    pub fn from_gguf(f: &GgufFile) -> Result<TokenizerConfig, TokenizerError> {
        let model = required(f.get_str("tokenizer.ggml.model")?, "tokenizer.ggml.model")?;
        let kind = match model {
            "gpt2" => VocabKind::Bpe,
            "llama" => VocabKind::Spm,
            _ => {
                return Err(TokenizerError::UnsupportedModel {
                    model: model.to_string(),
                    family: unsupported_family(model),
                })
            }
        };
        let settings = match (kind, f.get_str("tokenizer.ggml.pre")?) {
            (VocabKind::Spm, _) => PreSettings {
                pre: PreTokenizer::Default,
                merges: MergePolicy::RankedMerges,
                add_bos: AddToken::Add,
                clean_spaces: false,
            },
            (VocabKind::Bpe, None) => PreSettings {
                pre: PreTokenizer::Default,
                merges: MergePolicy::RankedMerges,
                add_bos: AddToken::Omit,
                clean_spaces: true,
            },
            (VocabKind::Bpe, Some(name)) => {
                PreTokenizer::from_ggml_name(name).ok_or_else(|| {
                    TokenizerError::UnsupportedPreTokenizer {
                        name: name.to_string(),
                        known: PreTokenizer::known_names(),
                    }
                })?
            }
        };
        let tokens = required(
            f.get_str_array("tokenizer.ggml.tokens")?,
            "tokenizer.ggml.tokens",
        )?
        .to_vec();
        let token_types = f
            .get_i32_array("tokenizer.ggml.token_type")?
            .map(<[i32]>::to_vec)
            .unwrap_or_default();
        let merges = match kind {
            VocabKind::Bpe => required(
                f.get_str_array("tokenizer.ggml.merges")?,
                "tokenizer.ggml.merges",
            )?
            .to_vec(),
            VocabKind::Spm => Vec::new(),
        };
        let scores = f
            .get_f32_array("tokenizer.ggml.scores")?
            .map(<[f32]>::to_vec)
            .unwrap_or_default();
        if !scores.is_empty() && scores.len() < tokens.len() {
            return Err(TokenizerError::ScoreCount {
                got: scores.len(),
                want: tokens.len(),
            });
        }

        let n = tokens.len() as u64;
        let default = |id: u32| (u64::from(id) < n).then_some(id);
        let mut special = match kind {
            VocabKind::Bpe => SpecialTokenIds {
                bos: default(BPE_DEFAULT_BOS_EOS),
                eos: default(BPE_DEFAULT_BOS_EOS),
                ..Default::default()
            },
            VocabKind::Spm => SpecialTokenIds {
                bos: default(SPM_DEFAULT_BOS),
                eos: default(SPM_DEFAULT_EOS),
                unk: default(SPM_DEFAULT_UNK),
                ..Default::default()
            },
        };
        type Slot = fn(&mut SpecialTokenIds) -> &mut Option<u32>;
        let slots: [(&str, Slot); 16] = [
            ("tokenizer.ggml.bos_token_id", |s| &mut s.bos),
            ("tokenizer.ggml.eos_token_id", |s| &mut s.eos),
            ("tokenizer.ggml.eot_token_id", |s| &mut s.eot),
            ("tokenizer.ggml.eom_token_id", |s| &mut s.eom),
            ("tokenizer.ggml.unknown_token_id", |s| &mut s.unk),
            ("tokenizer.ggml.seperator_token_id", |s| &mut s.sep),
            ("tokenizer.ggml.padding_token_id", |s| &mut s.pad),
            ("tokenizer.ggml.fim_pre_token_id", |s| &mut s.fim_pre),
            ("tokenizer.ggml.fim_suf_token_id", |s| &mut s.fim_suf),
            ("tokenizer.ggml.fim_mid_token_id", |s| &mut s.fim_mid),
            ("tokenizer.ggml.fim_pad_token_id", |s| &mut s.fim_pad),
            ("tokenizer.ggml.fim_rep_token_id", |s| &mut s.fim_rep),
            ("tokenizer.ggml.fim_sep_token_id", |s| &mut s.fim_sep),
            // deprecated spellings, read last like llama.cpp does
            ("tokenizer.ggml.prefix_token_id", |s| &mut s.fim_pre),
            ("tokenizer.ggml.suffix_token_id", |s| &mut s.fim_suf),
            ("tokenizer.ggml.middle_token_id", |s| &mut s.fim_mid),
        ];
        for (key, slot) in slots {
            // An id outside the vocab keeps the default, as in llama.cpp.
            if let Some(id) = f.get_uint(key)?.filter(|&id| id < n) {
                *slot(&mut special) = u32::try_from(id).ok();
            }
        }

        let flag = |key: &str, default: AddToken| -> Result<AddToken, TokenizerError> {
            Ok(match f.get_bool(key)? {
                Some(true) => AddToken::Add,
                Some(false) => AddToken::Omit,
                None => default,
            })
        };
        let name_of = |key: &str| -> Result<String, TokenizerError> {
            Ok(f.get_str(key)?.unwrap_or("").to_string())
        };
        let strip = SpecialStrip::from_names(
            &name_of("general.name")?,
            &name_of("tokenizer.ggml.pre")?,
            &name_of("general.architecture")?,
        );
        let add_space_prefix = f
            .get_bool("tokenizer.ggml.add_space_prefix")?
            .unwrap_or(kind == VocabKind::Spm);
        Ok(TokenizerConfig {
            kind,
            tokens,
            scores,
            add_space_prefix,
            token_types,
            merges,
            pre: settings.pre,
            merge_policy: settings.merges,
            special,
            add_bos: flag("tokenizer.ggml.add_bos_token", settings.add_bos)?,
            add_eos: flag("tokenizer.ggml.add_eos_token", AddToken::Omit)?,
            strip,
            clean_spaces: settings.clean_spaces,
        })
    }
}

impl Tokenizer {
    /// The tokenizer stored in a GGUF file (see [`TokenizerConfig::from_gguf`]).
    pub fn from_gguf(f: &GgufFile) -> Result<Tokenizer, TokenizerError> {
        Tokenizer::new(TokenizerConfig::from_gguf(f)?)
    }
}
