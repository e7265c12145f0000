//! Token attributes, special-token ids, the end-of-generation set and the
//! bytes each token detokenizes to, derived the way llama.cpp's vocab
//! loader derives them.
//!
//! Beyond what the GGUF says, llama.cpp recognises some tokens by their
//! text: end-of-turn and fill-in-the-middle tokens are found by name when no
//! id is given, every token named like an end token (`<|im_end|>`,
//! `<|endoftext|>`, `</s>`, ...) joins the end-of-generation set, and such
//! tokens are treated as control tokens even if the file calls them normal
//! (so `</s>` in a Qwen prompt is parsed as one special token).

use std::collections::BTreeSet;

use crate::spm::unescape_into;
use crate::unicode::char_to_byte;

/// The tokenizer family (`tokenizer.ggml.model`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum VocabKind {
    /// `gpt2`: byte-level BPE with ranked merges and a pre-tokenizer.
    #[default]
    Bpe,
    /// `llama`: SentencePiece-style, merged by token score, `▁` for spaces,
    /// `<0xNN>` byte fallback.
    Spm,
}

/// `tokenizer.ggml.token_type` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenType {
    /// 1: ordinary BPE token.
    Normal,
    /// 2: the unknown token.
    Unknown,
    /// 3: control token (`<|im_start|>`, ...).
    Control,
    /// 4: user-defined token, matched as a whole even in plain text.
    UserDefined,
    /// 5: unused slot; detokenizes to nothing.
    Unused,
    /// 6: a `<0xXX>` byte token.
    Byte,
    /// Any other value; detokenizes to nothing.
    Undefined,
}

impl TokenType {
    /// The type for a raw `tokenizer.ggml.token_type` entry.
    pub fn from_ggml(v: i32) -> TokenType {
        match v {
            1 => TokenType::Normal,
            2 => TokenType::Unknown,
            3 => TokenType::Control,
            4 => TokenType::UserDefined,
            5 => TokenType::Unused,
            6 => TokenType::Byte,
            _ => TokenType::Undefined,
        }
    }
}

/// Attribute bits (llama.cpp keeps the file's type and adds `CONTROL` to
/// tokens it recognises by name).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Attr(u8);

impl Attr {
    const NORMAL: u8 = 1;
    const UNKNOWN: u8 = 1 << 1;
    const CONTROL: u8 = 1 << 2;
    const USER_DEFINED: u8 = 1 << 3;
    const BYTE: u8 = 1 << 4;
    /// Whitespace before the token is dropped when it is matched.
    const LSTRIP: u8 = 1 << 5;
    /// Whitespace after the token is dropped when it is matched.
    const RSTRIP: u8 = 1 << 6;
    // Unused and undefined tokens have no bit that matters here.

    fn from_type(t: TokenType) -> Attr {
        Attr(match t {
            TokenType::Normal => Self::NORMAL,
            TokenType::Unknown => Self::UNKNOWN,
            TokenType::Control => Self::CONTROL,
            TokenType::UserDefined => Self::USER_DEFINED,
            TokenType::Byte => Self::BYTE,
            TokenType::Unused | TokenType::Undefined => 0,
        })
    }

    fn has(self, bits: u8) -> bool {
        self.0 & bits != 0
    }

    /// Control and unknown tokens: matched in text only when special
    /// tokens are parsed.
    pub fn is_parse_only(self) -> bool {
        self.has(Self::CONTROL | Self::UNKNOWN)
    }

    /// Tokens matched as a whole before BPE (in some mode).
    pub fn is_special(self) -> bool {
        self.has(Self::CONTROL | Self::UNKNOWN | Self::USER_DEFINED)
    }

    /// Whether whitespace right before a match of this token is dropped.
    pub fn lstrip(self) -> bool {
        self.has(Self::LSTRIP)
    }

    /// Whether whitespace right after a match of this token is dropped.
    pub fn rstrip(self) -> bool {
        self.has(Self::RSTRIP)
    }

    fn set(&mut self, bits: u8, on: bool) {
        if on {
            self.0 |= bits;
        } else {
            self.0 &= !bits;
        }
    }
}

/// llama.cpp's per-model whitespace stripping around special tokens
/// (chosen by `general.name`, `tokenizer.ggml.pre`, `general.architecture`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SpecialStrip {
    /// No stripping.
    #[default]
    None,
    /// Phi-3: whitespace after every special token (and `</s>`) is
    /// dropped, except after `<unk>`, `<s>` and `<|endoftext|>`.
    Phi3,
    /// Whitespace before `<mask>` is dropped (jina-v2, nomic-bert-moe).
    MaskLstrip,
    /// Whitespace before `[MASK]` is dropped (modern-bert).
    BracketMaskLstrip,
}

impl SpecialStrip {
    /// The rule llama.cpp picks for these metadata values (any may be "").
    pub fn from_names(model_name: &str, pre: &str, arch: &str) -> SpecialStrip {
        let name = model_name.to_lowercase();
        let any = |s: &str, subs: &[&str]| subs.iter().any(|x| s.contains(x));
        if any(pre, &["jina-v2-de", "jina-v2-es", "jina-v2-code"])
            || any(arch, &["nomic-bert-moe", "jina-bert-v3"])
        {
            SpecialStrip::MaskLstrip
        } else if any(&name, &["phi-3", "phi3"]) {
            SpecialStrip::Phi3
        } else if name.contains("modern-bert") {
            SpecialStrip::BracketMaskLstrip
        } else {
            SpecialStrip::None
        }
    }
}

/// Sets the strip bits of `rule` (after [`derive`], like llama.cpp).
/// Tokens the rule names but the vocab lacks are skipped.
pub(crate) fn apply_strip(texts: &[String], attrs: &mut [Attr], rule: SpecialStrip) {
    let set_named = |attrs: &mut [Attr], name: &str, bits: u8, on: bool| {
        if let Some(i) = texts.iter().position(|t| t == name) {
            if let Some(a) = attrs.get_mut(i) {
                a.set(bits, on);
            }
        }
    };
    match rule {
        SpecialStrip::None => {}
        SpecialStrip::MaskLstrip => set_named(attrs, "<mask>", Attr::LSTRIP, true),
        SpecialStrip::BracketMaskLstrip => set_named(attrs, "[MASK]", Attr::LSTRIP, true),
        SpecialStrip::Phi3 => {
            for a in attrs.iter_mut().filter(|a| a.is_special()) {
                a.set(Attr::RSTRIP, true);
            }
            set_named(attrs, "</s>", Attr::RSTRIP, true);
            for name in ["<unk>", "<s>", "<|endoftext|>"] {
                set_named(attrs, name, Attr::RSTRIP, false);
            }
        }
    }
}

/// Ids of the vocab's special tokens, as far as the file names them.
/// Every field is `None` when absent; ids outside the vocab are ignored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpecialTokenIds {
    /// Beginning of sequence.
    pub bos: Option<u32>,
    /// End of sequence.
    pub eos: Option<u32>,
    /// End of turn.
    pub eot: Option<u32>,
    /// End of message.
    pub eom: Option<u32>,
    /// Unknown.
    pub unk: Option<u32>,
    /// Separator.
    pub sep: Option<u32>,
    /// Padding.
    pub pad: Option<u32>,
    /// Fill-in-the-middle prefix.
    pub fim_pre: Option<u32>,
    /// Fill-in-the-middle suffix.
    pub fim_suf: Option<u32>,
    /// Fill-in-the-middle middle.
    pub fim_mid: Option<u32>,
    /// Fill-in-the-middle pad.
    pub fim_pad: Option<u32>,
    /// Fill-in-the-middle repository name.
    pub fim_rep: Option<u32>,
    /// Fill-in-the-middle file separator.
    pub fim_sep: Option<u32>,
}

/// Names llama.cpp treats as end-of-turn when no `eot_token_id` is given.
const EOT_NAMES: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
];
const EOM_NAMES: &[&str] = &["<|eom_id|>"];
const FIM_PRE_NAMES: &[&str] = &[
    "<|fim_prefix|>",
    "<fim-prefix>",
    "<fim_prefix>",
    "<｜fim▁begin｜>",
    "<PRE>",
    "▁<PRE>",
    "<|code_prefix|>",
    "<|prefix|>",
];
const FIM_SUF_NAMES: &[&str] = &[
    "<|fim_suffix|>",
    "<fim-suffix>",
    "<fim_suffix>",
    "<｜fim▁hole｜>",
    "<SUF>",
    "▁<SUF>",
    "<|code_suffix|>",
    "<|suffix|>",
];
const FIM_MID_NAMES: &[&str] = &[
    "<|fim_middle|>",
    "<fim-middle>",
    "<fim_middle>",
    "<｜fim▁end｜>",
    "<MID>",
    "▁<MID>",
    "<|code_middle|>",
    "<|middle|>",
];
const FIM_PAD_NAMES: &[&str] = &["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"];
const FIM_REP_NAMES: &[&str] = &[
    "<|fim_repo|>",
    "<|repo_name|>",
    "<fim-repo>",
    "<REPO>",
    "<reponame>",
];
const FIM_SEP_NAMES: &[&str] = &["<|file_sep|>"];
/// Every token with one of these names ends generation.
const EOG_NAMES: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
];
/// Tokens llama.cpp forces to user-defined (always rendered, never EOG).
const FORCED_USER_DEFINED: &[&str] = &["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"];

/// What the vocab loader derives beyond the raw arrays.
pub(crate) struct Derived {
    pub attrs: Vec<Attr>,
    pub ids: SpecialTokenIds,
    pub eog: BTreeSet<u32>,
}

/// Applies llama.cpp's name-based rules. `texts[i]` is token `i`'s text,
/// `attrs` its attributes from the file, `ids` the special ids from the
/// file (already range-checked).
pub(crate) fn derive(texts: &[String], mut attrs: Vec<Attr>, mut ids: SpecialTokenIds) -> Derived {
    let find = |names: &[&str]| -> Option<u32> {
        texts
            .iter()
            .position(|t| names.contains(&t.as_str()))
            .and_then(|i| u32::try_from(i).ok())
    };
    let promote = |attrs: &mut Vec<Attr>, id: u32| {
        if let Some(a) = attrs.get_mut(id as usize) {
            a.0 |= Attr::CONTROL;
        }
    };

    for (slot, names) in [
        (&mut ids.eot, EOT_NAMES),
        (&mut ids.eom, EOM_NAMES),
        (&mut ids.fim_pre, FIM_PRE_NAMES),
        (&mut ids.fim_suf, FIM_SUF_NAMES),
        (&mut ids.fim_mid, FIM_MID_NAMES),
        (&mut ids.fim_pad, FIM_PAD_NAMES),
        (&mut ids.fim_rep, FIM_REP_NAMES),
        (&mut ids.fim_sep, FIM_SEP_NAMES),
    ] {
        if slot.is_none() {
            *slot = find(names);
            if let Some(id) = *slot {
                promote(&mut attrs, id);
            }
        }
    }

    let mut eog: BTreeSet<u32> = [ids.fim_pad, ids.fim_rep, ids.fim_sep]
        .into_iter()
        .flatten()
        .collect();
    for (i, t) in texts.iter().enumerate() {
        let Ok(id) = u32::try_from(i) else { break };
        if EOG_NAMES.contains(&t.as_str()) {
            eog.insert(id);
            promote(&mut attrs, id);
        }
    }
    for (i, t) in texts.iter().enumerate() {
        if FORCED_USER_DEFINED.contains(&t.as_str()) {
            if let Some(a) = attrs.get_mut(i) {
                *a = Attr(Attr::USER_DEFINED);
            }
        }
    }
    eog.extend([ids.eos, ids.eot, ids.eom].into_iter().flatten());

    // Harmony-style vocabs: "<|end|>" only ends a message, not generation.
    let eog_named = |eog: &BTreeSet<u32>, name: &str| {
        eog.iter()
            .copied()
            .find(|&id| texts.get(id as usize).is_some_and(|t| t == name))
    };
    let has = |eog: &BTreeSet<u32>, name: &str| eog_named(eog, name).is_some();
    if let Some(end) = eog_named(&eog, "<|end|>") {
        let call = has(&eog, "<|call|>") || has(&eog, "<|calls|>");
        if call && (has(&eog, "<|return|>") || has(&eog, "<|flush|>")) {
            eog.remove(&end);
            if let Some(a) = attrs.get_mut(end as usize) {
                *a = Attr(Attr::USER_DEFINED);
            }
        }
    }
    // Gemma 4 style: "</s>" is ordinary text when "<|tool_response>" exists.
    if let Some(s) = eog_named(&eog, "</s>") {
        if has(&eog, "<|tool_response>") {
            eog.remove(&s);
            if let Some(a) = attrs.get_mut(s as usize) {
                *a = Attr(Attr::NORMAL);
            }
        }
    }

    Derived { attrs, ids, eog }
}

/// The bytes token `text` with attributes `attr` detokenizes to, like
/// llama.cpp's `token_to_piece(special = true)`: special tokens as their
/// text, normal tokens through the GPT-2 byte map (BPE; a character outside
/// the map passes through as its UTF-8) or with `▁` as a space (SPM), byte
/// tokens as their byte, unused and undefined tokens as nothing.
pub(crate) fn piece_bytes(text: &str, attr: Attr, kind: VocabKind, out: &mut Vec<u8>) {
    if attr.is_special() {
        out.extend_from_slice(text.as_bytes());
    } else if attr.has(Attr::NORMAL) && kind == VocabKind::Spm {
        unescape_into(text, out);
    } else if attr.has(Attr::NORMAL) {
        let mut buf = [0u8; 4];
        for c in text.chars() {
            match char_to_byte(c) {
                Some(b) => out.push(b),
                None => out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes()),
            }
        }
    } else if attr.has(Attr::BYTE) {
        if let Some(b) = parse_byte_token(text) {
            out.push(b);
        }
    }
}

/// `"<0x0A>"` -> `0x0A`.
fn parse_byte_token(text: &str) -> Option<u8> {
    let hex = text.strip_prefix("<0x")?.strip_suffix('>')?;
    u8::from_str_radix(hex, 16).ok()
}

/// Attributes for every token: from the type array, or all normal if the
/// file has none.
pub(crate) fn attrs_from_types(types: &[i32], n: usize) -> Vec<Attr> {
    if types.is_empty() {
        return vec![Attr(Attr::NORMAL); n];
    }
    types
        .iter()
        .take(n)
        .map(|&t| Attr::from_type(TokenType::from_ggml(t)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn eog_collects_named_tokens_and_promotes_them() {
        let texts = strings(&["a", "<|im_end|>", "</s>", "<|endoftext|>", "<reponame>"]);
        let attrs = attrs_from_types(&[1, 3, 1, 3, 3], texts.len());
        let ids = SpecialTokenIds {
            eos: Some(1),
            ..Default::default()
        };
        let d = derive(&texts, attrs, ids);
        assert_eq!(d.eog.iter().copied().collect::<Vec<_>>(), [1, 2, 3, 4]);
        assert!(d.attrs[2].is_parse_only(), "</s> is promoted to control");
        assert!(!d.attrs[0].is_special());
        assert_eq!(d.ids.fim_rep, Some(4));
    }

    #[test]
    fn harmony_end_is_not_eog() {
        let texts = strings(&["<|end|>", "<|return|>", "<|call|>"]);
        let d = derive(
            &texts,
            attrs_from_types(&[3, 3, 3], 3),
            SpecialTokenIds::default(),
        );
        assert_eq!(d.eog.iter().copied().collect::<Vec<_>>(), [1, 2]);
        assert!(!d.attrs[0].is_parse_only());
        assert!(d.attrs[0].is_special());
    }

    #[test]
    fn pieces_by_attribute() {
        let mut out = Vec::new();
        piece_bytes("ĠhelloĊ", Attr(Attr::NORMAL), VocabKind::Bpe, &mut out);
        assert_eq!(out, b" hello\n");
        out.clear();
        piece_bytes("<|im_end|>", Attr(Attr::CONTROL), VocabKind::Bpe, &mut out);
        assert_eq!(out, b"<|im_end|>");
        out.clear();
        piece_bytes("<0xE4>", Attr(Attr::BYTE), VocabKind::Spm, &mut out);
        assert_eq!(out, [0xE4]);
        out.clear();
        piece_bytes("[PAD1]", Attr(0), VocabKind::Bpe, &mut out);
        assert!(out.is_empty());
        piece_bytes("▁hello", Attr(Attr::NORMAL), VocabKind::Spm, &mut out);
        assert_eq!(out, b" hello");
    }
}
