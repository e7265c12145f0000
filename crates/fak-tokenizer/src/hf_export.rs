//! A Hugging Face tokenizer directory (`tokenizer.json` and
//! `tokenizer_config.json`) written from a GGUF vocabulary, for tools built
//! on the HF `tokenizers` library (routers that match prompts by token, for
//! one) that must count and cut text exactly as fak does.
//!
//! The rule is that a written file encodes every text to the ids
//! [`Tokenizer::encode`] gives it (special tokens parsed; BOS/EOS as the
//! GGUF says with `add_special_tokens`, none without). Whatever fak does
//! that the HF format cannot say is refused with
//! [`TokenizerError::Unexpressible`], naming it; nothing is approximated.
//!
//! How each part maps:
//!
//! | fak, from the GGUF | `tokenizer.json` |
//! |---|---|
//! | tokens, ids | `model.vocab`, every token at its id |
//! | control, unknown and user-defined tokens (after fak's name rules, e.g. `</s>` in a Qwen vocab is control) | `added_tokens`, matched in raw text; `special` for control and unknown, not for user-defined |
//! | `add_bos_token`, `add_eos_token` | a `TemplateProcessing` post-processor: `[BOS] $A [EOS]` as far as each is added |
//! | **byte-level BPE** (`gpt2`) | |
//! | pre-tokenizer (`default`, `gpt-2`, `smollm`, `qwen2`, `llama3` groups) | one `Split` per regex of fak's list, Unicode classes as explicit ranges ([`split`]), then `ByteLevel` with `use_regex: false` |
//! | a byte with no token (SmolLM2 has 21): fak drops it and merges nothing across it | a last `Split` isolating those byte characters, so each is a piece HF drops |
//! | merges | `model.merges` in rank order ([`merges`]) |
//! | Llama 3's whole-word lookup | `ignore_merges: true` |
//! | detokenizing | a `ByteLevel` decoder |
//! | **SentencePiece** (`llama`) | |
//! | space prefix, spaces as `▁` | normalizer `Prepend("▁")` (when `add_space_prefix`), `Replace(" ", "▁")`; HF normalizes each stretch between special tokens on its own, as fak prefixes each one |
//! | merging by token score | BPE merges: every split of every token, ranked by score ([`merges`]) |
//! | `<0xNN>` byte fallback | `byte_fallback: true` (all 256 byte tokens must exist) |
//! | detokenizing | decoders `Replace("▁", " ")`, `ByteFallback`, `Fuse`, and `Strip` of one leading space with a space prefix |
//!
//! Refused, each with one line naming it:
//!
//! * special tokens that drop the whitespace next to them (phi-3, jina's
//!   `<mask>`): HF drops every Unicode space there, fak only ASCII
//!   whitespace;
//! * special tokens whose matches can overlap (fak cuts the longer token
//!   first, HF the leftmost match), other than runs of one character;
//! * a BPE merge through a string that is not a vocabulary token;
//! * bytes without a token in a vocabulary that looks whole words up before
//!   merging (Llama 3's): fak looks up the whole word, HF each part;
//! * an SPM vocabulary missing a byte token, merging from a character that
//!   has no token, or with two formable tokens of equal score other than
//!   runs of one character (see [`merges`]).
//!
//! Decoding the ids that encoding gives yields fak's [`Tokenizer::decode`]
//! text, except for llama.cpp's space clean-up of some BPE vocabularies
//! (GPT-2's, Llama 3's), which HF's decoders do not have
//! (`clean_up_tokenization_spaces` is false); ids encoding never gives
//! (unused tokens, a byte token cut from its character) may decode
//! differently.
//!
//! `tokenizer_config.json` carries the chat template verbatim, the special
//! tokens by text, `add_bos_token` / `add_eos_token`, `model_max_length`
//! (the GGUF's context length) and `added_tokens_decoder`.

mod json;
mod merges;
mod split;

use std::collections::HashMap;

use fak_gguf::GgufFile;

use crate::error::TokenizerError;
use crate::pretok::{AddToken, MergePolicy, PreTokenizer};
use crate::spm::SPACE_MARK;
use crate::tokenizer::{Tokenizer, TokenizerConfig};
use crate::unicode::BYTE_TO_CHAR;
use crate::vocab::VocabKind;
use crate::vocab::{apply_strip, attrs_from_types, derive, Attr, SpecialTokenIds};
use json::{
    AddedToken, AddedTokenEntry, BpeModel, Decoder, Normalizer, OrderedVocab, Pattern,
    PostProcessor, PreTok, TokenizerConfigJson, TokenizerJson,
};

/// What goes into `tokenizer_config.json` besides the vocabulary.
#[derive(Clone, Debug, Default)]
pub struct HfExportOptions {
    /// `tokenizer.chat_template`, written verbatim.
    pub chat_template: Option<String>,
    /// The model's context length (`model_max_length`).
    pub model_max_length: Option<u64>,
}

/// What an export wrote, for a summary line.
#[derive(Clone, Debug)]
pub struct HfExportSummary {
    /// The vocabulary family.
    pub kind: VocabKind,
    /// The pre-tokenizer (byte-level BPE only).
    pub pre_tokenizer: Option<PreTokenizer>,
    /// Tokens in `model.vocab`.
    pub n_vocab: usize,
    /// Entries in `model.merges`.
    pub n_merges: usize,
    /// Entries in `added_tokens`.
    pub n_added_tokens: usize,
    /// Whether `add_special_tokens` adds BOS.
    pub add_bos: AddToken,
    /// Whether `add_special_tokens` adds EOS.
    pub add_eos: AddToken,
    /// Whether a chat template was written.
    pub chat_template: bool,
}

/// The two files of a Hugging Face tokenizer directory.
#[derive(Clone, Debug)]
pub struct HfTokenizerFiles {
    /// `tokenizer.json`.
    pub tokenizer_json: String,
    /// `tokenizer_config.json`.
    pub tokenizer_config_json: String,
    /// What they hold.
    pub summary: HfExportSummary,
}

impl HfTokenizerFiles {
    /// The files for a GGUF model: its tokenizer, `tokenizer.chat_template`
    /// and `<architecture>.context_length`.
    pub fn from_gguf(f: &GgufFile) -> Result<HfTokenizerFiles, TokenizerError> {
        let cfg = TokenizerConfig::from_gguf(f)?;
        let model_max_length = match f.get_str("general.architecture")? {
            Some(arch) => f.get_uint(&format!("{arch}.context_length"))?,
            None => None,
        };
        let opts = HfExportOptions {
            chat_template: f.get_str("tokenizer.chat_template")?.map(str::to_string),
            model_max_length,
        };
        HfTokenizerFiles::from_config(&cfg, &opts)
    }

    /// The files for a tokenizer description, or the reason it cannot be
    /// written exactly.
    pub fn from_config(
        cfg: &TokenizerConfig,
        opts: &HfExportOptions,
    ) -> Result<HfTokenizerFiles, TokenizerError> {
        let tok = Tokenizer::new(cfg.clone())?;
        let n = tok.n_vocab();
        let texts: Vec<String> = (0..n)
            .map(|i| {
                u32::try_from(i)
                    .ok()
                    .and_then(|id| tok.token_text(id))
                    .unwrap_or_default()
                    .to_string()
            })
            .collect();
        let attrs = special_attrs(cfg, &texts, &tok)?;
        let specials: Vec<(u32, &str)> = attrs
            .iter()
            .zip(&texts)
            .enumerate()
            .filter(|(_, (a, _))| a.is_special())
            .filter_map(|(i, (_, t))| Some((u32::try_from(i).ok()?, t.as_str())))
            .collect();
        if let Some(&(id, t)) = specials.iter().find(|&&(id, _)| {
            attrs
                .get(id as usize)
                .is_some_and(|a| a.lstrip() || a.rstrip())
        }) {
            return Err(TokenizerError::Unexpressible {
                what: format!(
                    "special token {t:?} (id {id}) drops the whitespace next to it \
                     (llama.cpp's rule for this model family); Hugging Face strips every \
                     Unicode space there, fak only ASCII whitespace"
                ),
            });
        }
        merges::check_special_overlaps(&specials)?;
        let lookup: HashMap<&str, u32> = texts
            .iter()
            .enumerate()
            .filter_map(|(i, t)| Some((t.as_str(), u32::try_from(i).ok()?)))
            .collect();

        let text_of = |id: u32| texts.get(id as usize).map_or("", String::as_str);
        let (normalizer, pre_tokenizer, model_merges, decoder, unk, byte_fallback) = match cfg.kind
        {
            VocabKind::Bpe => {
                let missing: Vec<char> = BYTE_TO_CHAR
                    .iter()
                    .copied()
                    .filter(|c| !lookup.contains_key(c.encode_utf8(&mut [0u8; 4]) as &str))
                    .collect();
                if !missing.is_empty() && cfg.merge_policy == MergePolicy::WholeWordFirst {
                    return Err(TokenizerError::Unexpressible {
                        what: format!(
                            "{} of the 256 bytes have no token, and whole words are looked up \
                             before merging (fak looks up the whole word, Hugging Face each \
                             part between such bytes)",
                            missing.len()
                        ),
                    });
                }
                let merges = merges::bpe_merges(&cfg.merges, &lookup)?;
                let pre = byte_level_pre_tokenizer(cfg.pre, &missing);
                (None, Some(pre), merges, Decoder::byte_level(), None, false)
            }
            VocabKind::Spm => {
                let is_special: Vec<bool> = attrs.iter().map(|a| a.is_special()).collect();
                let ids = merges::spm_merges(&merges::SpmVocab {
                    texts: &texts,
                    scores: &cfg.scores,
                    types: &cfg.token_types,
                    special: &is_special,
                    lookup: &lookup,
                })?;
                let pairs = ids
                    .into_iter()
                    .map(|(a, b)| (text_of(a), text_of(b)))
                    .collect();
                let unk = tok.special_ids().unk.map(text_of);
                let norm = spm_normalizer(cfg.add_space_prefix);
                let dec = Decoder::spm(cfg.add_space_prefix);
                (Some(norm), None, pairs, dec, unk, true)
            }
        };

        let added_tokens: Vec<AddedToken> = specials
            .iter()
            .map(|&(id, content)| AddedToken {
                id,
                content,
                single_word: false,
                lstrip: false,
                rstrip: false,
                normalized: false,
                special: tok.is_control(id),
            })
            .collect();
        let (add_bos, add_eos) = tok.adds();
        let bos = (add_bos == AddToken::Add)
            .then(|| tok.bos())
            .flatten()
            .map(|id| (id, text_of(id)));
        let eos = (add_eos == AddToken::Add)
            .then(|| tok.eos())
            .flatten()
            .map(|id| (id, text_of(id)));
        let n_merges = model_merges.len();
        let json = TokenizerJson {
            version: "1.0",
            truncation: None,
            padding: None,
            added_tokens: &added_tokens,
            normalizer,
            pre_tokenizer,
            model: BpeModel {
                kind: "BPE",
                dropout: None,
                unk_token: unk,
                continuing_subword_prefix: None,
                end_of_word_suffix: None,
                fuse_unk: byte_fallback,
                byte_fallback,
                ignore_merges: cfg.kind == VocabKind::Bpe
                    && cfg.merge_policy == MergePolicy::WholeWordFirst,
                vocab: OrderedVocab(&texts),
                merges: model_merges,
            },
            post_processor: PostProcessor::template(bos, eos),
            decoder,
        };
        let tokenizer_json = serde_json::to_string(&json).map_err(json_error)?;

        let ids = tok.special_ids();
        let config = TokenizerConfigJson {
            add_bos_token: add_bos == AddToken::Add,
            add_eos_token: add_eos == AddToken::Add,
            added_tokens_decoder: added_tokens
                .iter()
                .map(|t| (t.id, AddedTokenEntry::from(t)))
                .collect(),
            bos_token: ids.bos.map(text_of),
            chat_template: opts.chat_template.as_deref(),
            clean_up_tokenization_spaces: false,
            eos_token: ids.eos.map(text_of),
            model_max_length: opts.model_max_length,
            pad_token: ids.pad.map(text_of),
            tokenizer_class: "PreTrainedTokenizerFast",
            unk_token: ids.unk.map(text_of),
        };
        let tokenizer_config_json = serde_json::to_string_pretty(&config).map_err(json_error)?;

        Ok(HfTokenizerFiles {
            tokenizer_json,
            tokenizer_config_json,
            summary: HfExportSummary {
                kind: cfg.kind,
                pre_tokenizer: (cfg.kind == VocabKind::Bpe).then_some(cfg.pre),
                n_vocab: n,
                n_merges,
                n_added_tokens: added_tokens.len(),
                add_bos,
                add_eos,
                chat_template: opts.chat_template.is_some(),
            },
        })
    }
}

/// A serialization failure (none is expected: every value is a string,
/// number or bool).
fn json_error(e: serde_json::Error) -> TokenizerError {
    TokenizerError::Unexpressible {
        what: format!("the JSON could not be written: {e}"),
    }
}

/// Every token's attributes, derived exactly as [`Tokenizer::new`] derives
/// them (file types, llama.cpp's name rules, the strip rule), checked
/// against the built tokenizer.
fn special_attrs(
    cfg: &TokenizerConfig,
    texts: &[String],
    tok: &Tokenizer,
) -> Result<Vec<Attr>, TokenizerError> {
    let n = texts.len();
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
    let mut attrs = derive(texts, attrs_from_types(&cfg.token_types, n), ids).attrs;
    apply_strip(texts, &mut attrs, cfg.strip);
    let differs = attrs
        .iter()
        .enumerate()
        .find(|&(i, a)| u32::try_from(i).is_ok_and(|id| a.is_parse_only() != tok.is_control(id)));
    if let Some((i, _)) = differs {
        return Err(TokenizerError::Unexpressible {
            what: format!("token id {i}: its attributes could not be derived as fak derives them"),
        });
    }
    Ok(attrs)
}

/// `Split` per regex, then the byte map, then (if some bytes have no
/// token) each such byte cut out on its own: fak never merges across one
/// and drops it, as HF drops a piece it has no token for.
fn byte_level_pre_tokenizer(pre: PreTokenizer, missing: &[char]) -> PreTok {
    let split = |p: String| PreTok::Split {
        pattern: Pattern::Regex(p),
        behavior: "Isolated",
        invert: false,
    };
    let mut steps: Vec<PreTok> = split::Classes::new()
        .patterns(pre)
        .into_iter()
        .map(split)
        .collect();
    steps.push(PreTok::ByteLevel {
        add_prefix_space: false,
        trim_offsets: true,
        use_regex: false,
    });
    if !missing.is_empty() {
        let class: String = missing
            .iter()
            .map(|&c| format!(r"\x{{{:X}}}", u32::from(c)))
            .collect();
        steps.push(split(format!("[{class}]")));
    }
    PreTok::Sequence {
        pretokenizers: steps,
    }
}

/// The SentencePiece text preparation: `▁` prefix, spaces as `▁`.
fn spm_normalizer(space_prefix: bool) -> Normalizer {
    let mut steps = Vec::new();
    if space_prefix {
        steps.push(Normalizer::Prepend {
            prepend: SPACE_MARK.to_string(),
        });
    }
    steps.push(Normalizer::Replace {
        pattern: Pattern::String(" ".to_string()),
        content: SPACE_MARK.to_string(),
    });
    Normalizer::Sequence { normalizers: steps }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::SpecialStrip;
    use serde_json::Value;

    /// The 256 byte characters, a few merges, a control and a user-defined
    /// token.
    fn bpe_config() -> TokenizerConfig {
        let mut tokens: Vec<String> = vec!["<|im_start|>".into(), "<tool>".into()];
        tokens.extend(BYTE_TO_CHAR.iter().map(|c| c.to_string()));
        tokens.extend(["he", "ll", "hell", "hello"].map(String::from));
        let mut types = vec![3, 4];
        types.resize(tokens.len(), 1);
        TokenizerConfig {
            tokens,
            token_types: types,
            merges: ["h e", "l l", "he ll", "hell o"].map(String::from).to_vec(),
            pre: PreTokenizer::SmolLm,
            special: SpecialTokenIds {
                bos: Some(0),
                ..Default::default()
            },
            add_bos: AddToken::Add,
            ..Default::default()
        }
    }

    fn parse(s: &str) -> Value {
        serde_json::from_str(s).expect("valid JSON")
    }

    #[test]
    fn bpe_export_has_the_hf_shape() {
        let opts = HfExportOptions {
            chat_template: Some("{{ messages }}".into()),
            model_max_length: Some(8192),
        };
        let files = HfTokenizerFiles::from_config(&bpe_config(), &opts).expect("exportable");
        let j = parse(&files.tokenizer_json);
        assert_eq!(j["model"]["type"], "BPE");
        assert_eq!(j["model"]["vocab"]["hello"], 261);
        assert_eq!(j["model"]["merges"][3], serde_json::json!(["hell", "o"]));
        assert_eq!(j["model"]["ignore_merges"], false);
        let steps = j["pre_tokenizer"]["pretokenizers"]
            .as_array()
            .expect("steps");
        assert_eq!(steps.len(), 3, "digits, GPT-2, byte map");
        assert_eq!(steps[0]["type"], "Split");
        assert_eq!(steps[0]["behavior"], "Isolated");
        assert_eq!(steps[2]["type"], "ByteLevel");
        assert_eq!(steps[2]["use_regex"], false);
        let added = j["added_tokens"].as_array().expect("added");
        assert_eq!(added.len(), 2);
        assert_eq!(added[0]["special"], true, "control");
        assert_eq!(added[1]["special"], false, "user-defined");
        let single = &j["post_processor"]["single"];
        assert_eq!(single[0]["SpecialToken"]["id"], "<|im_start|>");
        assert_eq!(single[1]["Sequence"]["id"], "A");
        assert_eq!(j["decoder"]["type"], "ByteLevel");

        let c = parse(&files.tokenizer_config_json);
        assert_eq!(c["chat_template"], "{{ messages }}");
        assert_eq!(c["model_max_length"], 8192);
        assert_eq!(c["bos_token"], "<|im_start|>");
        assert_eq!(c["add_bos_token"], true);
        assert_eq!(c["clean_up_tokenization_spaces"], false);
        assert_eq!(c["added_tokens_decoder"]["1"]["content"], "<tool>");
        assert!(c.get("pad_token").is_none());
        assert_eq!(files.summary.n_merges, 4);
    }

    #[test]
    fn whitespace_stripping_specials_are_refused() {
        let cfg = TokenizerConfig {
            strip: SpecialStrip::Phi3,
            ..bpe_config()
        };
        let err = HfTokenizerFiles::from_config(&cfg, &HfExportOptions::default())
            .expect_err("phi-3's rule is not expressible");
        assert!(matches!(err, TokenizerError::Unexpressible { .. }));
        assert!(err.to_string().contains("\"<|im_start|>\""), "{err}");
    }

    #[test]
    fn merges_outside_the_vocab_are_refused() {
        let mut cfg = bpe_config();
        cfg.merges.push("o o".into());
        let err = HfTokenizerFiles::from_config(&cfg, &HfExportOptions::default())
            .expect_err("oo is not a token");
        assert!(err.to_string().contains("\"oo\""), "{err}");
    }

    #[test]
    fn bytes_without_a_token_are_cut_out_or_refused() {
        let mut cfg = bpe_config();
        let gone = BYTE_TO_CHAR[4].to_string();
        cfg.tokens.retain(|t| *t != gone);
        cfg.token_types.pop();
        let files =
            HfTokenizerFiles::from_config(&cfg, &HfExportOptions::default()).expect("exportable");
        let j = parse(&files.tokenizer_json);
        let steps = j["pre_tokenizer"]["pretokenizers"]
            .as_array()
            .expect("steps");
        assert_eq!(steps.len(), 4);
        assert_eq!(steps[3]["pattern"]["Regex"], r"[\x{104}]");
        cfg.merge_policy = MergePolicy::WholeWordFirst;
        let err = HfTokenizerFiles::from_config(&cfg, &HfExportOptions::default())
            .expect_err("whole-word lookup across a missing byte");
        assert!(err.to_string().contains("1 of the 256 bytes"), "{err}");
    }

    #[test]
    fn spm_export_has_the_llama_shape() {
        let mut tokens: Vec<String> = vec!["<unk>".into(), "<s>".into(), "</s>".into()];
        tokens.extend((0..=255u8).map(|b| format!("<0x{b:02X}>")));
        tokens.extend(["▁", "h", "i", "▁h", "hi", "▁hi"].map(String::from));
        let mut types = vec![2, 3, 3];
        types.resize(259, 6);
        types.resize(tokens.len(), 1);
        let mut scores = vec![0.0; 259];
        scores.extend([-1.0, -1.0, -1.0, -5.0, -3.0, -2.0]);
        let cfg = TokenizerConfig {
            kind: VocabKind::Spm,
            tokens,
            scores,
            token_types: types,
            add_space_prefix: true,
            special: SpecialTokenIds {
                bos: Some(1),
                eos: Some(2),
                unk: Some(0),
                ..Default::default()
            },
            add_bos: AddToken::Add,
            ..Default::default()
        };
        let files =
            HfTokenizerFiles::from_config(&cfg, &HfExportOptions::default()).expect("exportable");
        let j = parse(&files.tokenizer_json);
        assert_eq!(j["model"]["byte_fallback"], true);
        assert_eq!(j["model"]["unk_token"], "<unk>");
        // The best score first ("▁hi", -2), its splits longer left half first.
        let merges = j["model"]["merges"].as_array().expect("merges");
        assert_eq!(merges[0], serde_json::json!(["▁h", "i"]));
        assert_eq!(merges[1], serde_json::json!(["▁", "hi"]));
        assert_eq!(merges[2], serde_json::json!(["h", "i"]));
        assert_eq!(j["normalizer"]["normalizers"][0]["type"], "Prepend");
        assert_eq!(j["normalizer"]["normalizers"][1]["pattern"]["String"], " ");
        assert!(j["pre_tokenizer"].is_null());
        assert_eq!(j["decoder"]["decoders"][3]["type"], "Strip");
        assert_eq!(j["added_tokens"].as_array().map(Vec::len), Some(3));
    }
}
