//! Reading a [`TokenizerConfig`] from GGUF metadata, with llama.cpp's
//! defaults for what the file leaves out.
//!
//! | key (`tokenizer.ggml.*`) | use |
//! |---|---|
//! | `model` | must be `gpt2` (byte-level BPE) |
//! | `pre` | pre-tokenizer; absent means llama.cpp's `default` |
//! | `tokens`, `token_type`, `merges` | vocab, types, ranked merges |
//! | `bos_token_id` ... `fim_sep_token_id` | special ids (BOS/EOS default to 11 like llama.cpp's BPE loader, if in range) |
//! | `add_bos_token`, `add_eos_token` | override the pre-tokenizer's default |

use fak_gguf::GgufFile;

use crate::error::TokenizerError;
use crate::pretok::{AddToken, MergePolicy, PreSettings, PreTokenizer};
use crate::tokenizer::{Tokenizer, TokenizerConfig};
use crate::vocab::SpecialTokenIds;

/// llama.cpp's BOS/EOS default for BPE vocabs that name none.
const BPE_DEFAULT_BOS_EOS: u32 = 11;

fn required<'a, T: ?Sized>(v: Option<&'a T>, key: &'static str) -> Result<&'a T, TokenizerError> {
    v.ok_or(TokenizerError::MissingKey { key })
}

impl TokenizerConfig {
    /// The tokenizer description stored in a GGUF file.
    pub fn from_gguf(f: &GgufFile) -> Result<TokenizerConfig, TokenizerError> {
        let model = required(f.get_str("tokenizer.ggml.model")?, "tokenizer.ggml.model")?;
        if model != "gpt2" {
            return Err(TokenizerError::UnsupportedModel {
                model: model.to_string(),
            });
        }
        let settings = match f.get_str("tokenizer.ggml.pre")? {
            None => PreSettings {
                pre: PreTokenizer::Default,
                merges: MergePolicy::RankedMerges,
                add_bos: AddToken::Omit,
            },
            Some(name) => PreTokenizer::from_ggml_name(name).ok_or_else(|| {
                TokenizerError::UnsupportedPreTokenizer {
                    name: name.to_string(),
                    known: PreTokenizer::known_names(),
                }
            })?,
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
        let merges = required(
            f.get_str_array("tokenizer.ggml.merges")?,
            "tokenizer.ggml.merges",
        )?
        .to_vec();

        let n = tokens.len() as u64;
        let default_id = (u64::from(BPE_DEFAULT_BOS_EOS) < n).then_some(BPE_DEFAULT_BOS_EOS);
        let mut special = SpecialTokenIds {
            bos: default_id,
            eos: default_id,
            ..Default::default()
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
        Ok(TokenizerConfig {
            tokens,
            token_types,
            merges,
            pre: settings.pre,
            merge_policy: settings.merges,
            special,
            add_bos: flag("tokenizer.ggml.add_bos_token", settings.add_bos)?,
            add_eos: flag("tokenizer.ggml.add_eos_token", AddToken::Omit)?,
        })
    }
}

impl Tokenizer {
    /// The tokenizer stored in a GGUF file (see [`TokenizerConfig::from_gguf`]).
    pub fn from_gguf(f: &GgufFile) -> Result<Tokenizer, TokenizerError> {
        Tokenizer::new(TokenizerConfig::from_gguf(f)?)
    }
}
