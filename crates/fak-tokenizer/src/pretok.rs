//! Pre-tokenization: cutting text into the words BPE then works on, exactly
//! the way llama.cpp does for each `tokenizer.ggml.pre` name.
//!
//! A pre-tokenizer is a list of regexes applied in turn. Each one re-splits
//! every piece produced by the previous one, and both its matches and the
//! gaps between them become pieces; a regex never sees across a piece
//! boundary (its lookahead hits the piece's end):
//!
//! ```text
//! smollm: ["\p{N}", GPT2]        "ab 12"
//!   \p{N}  ->  "ab " | "1" | "2"           (gap, match, match)
//!   GPT2   ->  "ab" | " " | "1" | "2"      (" " is alone in its piece)
//! ```
//!
//! Like llama.cpp, two regexes (GPT-2's and Llama 3's) run through
//! hand-written scanners that reproduce llama.cpp's own scanners, quirks
//! included. Every other regex runs on a *collapsed* copy of the text in
//! which each non-ASCII codepoint is replaced by one marker character for
//! its category (and `\p{L}` etc. in the pattern by the marker plus the ASCII
//! members of the category), so Unicode classes follow llama.cpp's tables:
//!
//! ```text
//! text       "Zoë 42 😀"     pattern \p{L}  ->  [\x{D2}A-Za-z]
//! collapsed  "Zo\u{D2} 42 \u{D5}"   (ë is a letter, 😀 a symbol)
//! ```

use std::ops::Range;

use fancy_regex::Regex;

use crate::error::TokenizerError;
use crate::unicode::{Category, CpClass};

/// GPT-2's split regex, which llama.cpp runs through a custom scanner.
const GPT2: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)";
/// Llama 3's split regex (case-insensitive contractions spelled out), also
/// a custom scanner in llama.cpp.
const LLAMA3: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen2's split regex: Llama 3's with single digits. Runs as a real regex.
const QWEN2: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// The pre-tokenizers fak implements, named after llama.cpp's groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum PreTokenizer {
    /// llama.cpp's fallback for BPE vocabs without (or with `"default"`)
    /// `tokenizer.ggml.pre`: punctuation runs, GPT-2, digit runs, 3 digits.
    #[default]
    Default,
    /// Plain GPT-2 (`gpt-2`, `phi-2`, `mpt`, `olmo`, ...).
    Gpt2,
    /// Every digit alone, then GPT-2 (`smollm`, `starcoder`, `refact`, ...).
    SmolLm,
    /// Qwen2 (`qwen2`, `stablelm2`, `deepseek-r1-qwen`, ...).
    Qwen2,
    /// Llama 3 (`llama3`, `llama-bpe`, `falcon3`, `dbrx`, ...).
    Llama3,
}

/// Whether a word that is itself a vocab token skips BPE merging.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum MergePolicy {
    /// Always merge by rank (most vocabs).
    #[default]
    RankedMerges,
    /// A whole word found in the vocab is emitted as is (llama.cpp's
    /// `ignore_merges`, set for the Llama 3 family).
    WholeWordFirst,
}

/// Whether the BOS/EOS token is added when the caller asks for the
/// vocab's own special tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum AddToken {
    /// Add it.
    Add,
    /// Do not add it.
    #[default]
    Omit,
}

/// What llama.cpp derives from a `tokenizer.ggml.pre` name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PreSettings {
    /// The split rules.
    pub pre: PreTokenizer,
    /// `ignore_merges`.
    pub merges: MergePolicy,
    /// `add_bos` before `tokenizer.ggml.add_bos_token` overrides it.
    pub add_bos: AddToken,
    /// llama.cpp's `clean_spaces` (`clean_up_tokenization_spaces`) for
    /// detokenizing: true for BPE unless the pre-tokenizer turns it off.
    pub clean_spaces: bool,
}

/// `tokenizer.ggml.pre` values accepted, with their pre-tokenizer.
const NAMES: &[(&str, PreTokenizer)] = &[
    ("default", PreTokenizer::Default),
    ("gpt-2", PreTokenizer::Gpt2),
    ("phi-2", PreTokenizer::Gpt2),
    ("jina-es", PreTokenizer::Gpt2),
    ("jina-de", PreTokenizer::Gpt2),
    ("gigachat", PreTokenizer::Gpt2),
    ("jina-v2-es", PreTokenizer::Gpt2),
    ("jina-v2-de", PreTokenizer::Gpt2),
    ("a.x-4.0", PreTokenizer::Gpt2),
    ("mellum", PreTokenizer::Gpt2),
    ("modern-bert", PreTokenizer::Gpt2),
    ("mpt", PreTokenizer::Gpt2),
    ("olmo", PreTokenizer::Gpt2),
    ("jais", PreTokenizer::Gpt2),
    ("trillion", PreTokenizer::Gpt2),
    ("granite-docling", PreTokenizer::Gpt2),
    ("exaone4", PreTokenizer::Gpt2),
    ("smollm", PreTokenizer::SmolLm),
    ("starcoder", PreTokenizer::SmolLm),
    ("refact", PreTokenizer::SmolLm),
    ("command-r", PreTokenizer::SmolLm),
    ("codeshell", PreTokenizer::SmolLm),
    ("exaone", PreTokenizer::SmolLm),
    ("minerva-7b", PreTokenizer::SmolLm),
    ("mellum2", PreTokenizer::SmolLm),
    ("qwen2", PreTokenizer::Qwen2),
    ("deepseek-r1-qwen", PreTokenizer::Qwen2),
    ("kormo", PreTokenizer::Qwen2),
    ("f2llmv2", PreTokenizer::Qwen2),
    ("megrez", PreTokenizer::Qwen2),
    ("stablelm2", PreTokenizer::Qwen2),
    ("hunyuan", PreTokenizer::Qwen2),
    ("solar-open", PreTokenizer::Qwen2),
    ("llama3", PreTokenizer::Llama3),
    ("llama-v3", PreTokenizer::Llama3),
    ("llama-bpe", PreTokenizer::Llama3),
    ("falcon3", PreTokenizer::Llama3),
    ("falcon-h1", PreTokenizer::Llama3),
    ("pixtral", PreTokenizer::Llama3),
    ("midm-2.0", PreTokenizer::Llama3),
    ("lfm2", PreTokenizer::Llama3),
    ("jina-v5-nano", PreTokenizer::Llama3),
    ("dbrx", PreTokenizer::Llama3),
    ("smaug-bpe", PreTokenizer::Llama3),
];

/// Names in [`NAMES`] for which llama.cpp turns `clean_spaces` off.
const NO_CLEAN_SPACES: &[&str] = &[
    "qwen2",
    "deepseek-r1-qwen",
    "kormo",
    "f2llmv2",
    "command-r",
    "smollm",
    "trillion",
    "granite-docling",
    "hunyuan",
    "solar-open",
];

/// Names in [`NAMES`] that also set `ignore_merges` and `add_bos`.
const LLAMA3_FAMILY: &[&str] = &[
    "llama3",
    "llama-v3",
    "llama-bpe",
    "falcon3",
    "falcon-h1",
    "pixtral",
    "midm-2.0",
    "lfm2",
    "jina-v5-nano",
];

impl PreTokenizer {
    /// The settings llama.cpp derives from a `tokenizer.ggml.pre` value, or
    /// `None` if fak does not implement that pre-tokenizer.
    pub fn from_ggml_name(name: &str) -> Option<PreSettings> {
        let pre = NAMES.iter().find(|(n, _)| *n == name).map(|(_, p)| *p)?;
        let llama3 = LLAMA3_FAMILY.contains(&name);
        Some(PreSettings {
            pre,
            merges: if llama3 {
                MergePolicy::WholeWordFirst
            } else {
                MergePolicy::RankedMerges
            },
            add_bos: if llama3 {
                AddToken::Add
            } else {
                AddToken::Omit
            },
            clean_spaces: !NO_CLEAN_SPACES.contains(&name),
        })
    }

    /// Every accepted `tokenizer.ggml.pre` value, comma separated.
    pub fn known_names() -> String {
        NAMES.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
    }

    /// The regex list llama.cpp applies, in order.
    fn patterns(self) -> &'static [&'static str] {
        match self {
            PreTokenizer::Default => &[r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", "[0-9][0-9][0-9]"],
            PreTokenizer::Gpt2 => &[GPT2],
            PreTokenizer::SmolLm => &[r"\p{N}", GPT2],
            PreTokenizer::Qwen2 => &[QWEN2],
            PreTokenizer::Llama3 => &[LLAMA3],
        }
    }
}

/// One split rule, compiled.
enum Rule {
    /// llama.cpp's GPT-2 scanner.
    Gpt2,
    /// llama.cpp's Llama 3 scanner.
    Llama3,
    /// A regex over the collapsed text.
    Regex(Box<Regex>),
}

/// A compiled pre-tokenizer.
pub(crate) struct Splitter {
    rules: Vec<Rule>,
}

impl Splitter {
    pub fn new(pre: PreTokenizer) -> Result<Splitter, TokenizerError> {
        let rules = pre
            .patterns()
            .iter()
            .map(|&p| match p {
                GPT2 => Ok(Rule::Gpt2),
                LLAMA3 => Ok(Rule::Llama3),
                _ => {
                    let collapsed = collapse_pattern(p);
                    Regex::new(&collapsed)
                        .map(|r| Rule::Regex(Box::new(r)))
                        .map_err(|e| TokenizerError::Regex {
                            pattern: collapsed,
                            message: e.to_string(),
                        })
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Splitter { rules })
    }

    /// Cuts `text` into consecutive non-empty pieces that cover it exactly.
    pub fn split<'t>(&self, text: &'t str) -> Vec<&'t str> {
        let chars: Vec<(usize, char)> = text.char_indices().collect();
        let n = chars.len();
        if n == 0 {
            return Vec::new();
        }
        let cps: Vec<char> = chars.iter().map(|&(_, c)| c).collect();
        let classes: Vec<CpClass> = cps.iter().map(|&c| CpClass::of(c)).collect();
        let collapsed = self
            .rules
            .iter()
            .any(|r| matches!(r, Rule::Regex(_)))
            .then(|| Collapsed::new(&cps, &classes));

        let mut pieces: Vec<Range<usize>> = std::iter::once(0..n).collect();
        for rule in &self.rules {
            let mut next = Vec::with_capacity(pieces.len() * 2);
            for r in pieces {
                let view = View {
                    cps: &cps,
                    classes: &classes,
                    lo: r.start,
                    hi: r.end,
                };
                match rule {
                    Rule::Gpt2 => scan_gpt2(&view, &mut next),
                    Rule::Llama3 => scan_llama3(&view, &mut next),
                    Rule::Regex(re) => match &collapsed {
                        Some(c) => split_regex(re, c, r, &mut next),
                        None => next.push(r),
                    },
                }
            }
            pieces = next;
        }

        let byte_at = |i: usize| chars.get(i).map_or(text.len(), |&(b, _)| b);
        pieces
            .into_iter()
            .filter_map(|r| text.get(byte_at(r.start)..byte_at(r.end)))
            .filter(|s| !s.is_empty())
            .collect()
    }
}

/// The pattern with each `\p{..}` category replaced by its collapsed class.
fn collapse_pattern(p: &str) -> String {
    let mut out = String::with_capacity(p.len() * 2);
    let mut inside = false;
    let mut prev: Option<char> = None;
    let mut rest = p;
    while let Some(c) = rest.chars().next() {
        if c == '[' && prev != Some('\\') {
            inside = true;
        } else if c == ']' && inside && prev != Some('\\') {
            inside = false;
        } else if let Some((class, len)) = category_class(rest) {
            if !inside {
                out.push('[');
            }
            out.push_str(class);
            if !inside {
                out.push(']');
            }
            rest = rest.get(len..).unwrap_or("");
            prev = Some('}');
            continue;
        }
        out.push(c);
        prev = Some(c);
        rest = rest.get(c.len_utf8()..).unwrap_or("");
    }
    out
}

/// If `s` starts with a `\p{..}` llama.cpp collapses, the class body that
/// replaces it and the length of the escape.
fn category_class(s: &str) -> Option<(&'static str, usize)> {
    const CLASSES: &[(&str, &str)] = &[
        (r"\p{N}", r"\x{D1}0-9"),
        (r"\p{L}", r"\x{D2}A-Za-z"),
        (r"\p{Lu}", r"\x{D2}A-Za-z"),
        (r"\p{Ll}", r"\x{D2}A-Za-z"),
        (r"\p{Lt}", r"\x{D2}A-Za-z"),
        (r"\p{Lm}", r"\x{D2}A-Za-z"),
        (r"\p{Lo}", r"\x{D2}A-Za-z"),
        // llama.cpp's ASCII punctuation list (note: no '~', '$', '+', ...).
        (r"\p{P}", r"\x{D3}!-#%-*,-/:-;?-@\[-\]_\{\}"),
        (r"\p{M}", r"\x{D4}"),
        (r"\p{S}", r"\x{D5}\$\+<->\^`\|"),
    ];
    CLASSES
        .iter()
        .find(|(esc, _)| s.starts_with(esc))
        .map(|(esc, class)| (*class, esc.len()))
}

/// The collapsed copy of a text: one char per codepoint.
struct Collapsed {
    text: String,
    /// Byte offset of codepoint `i` in `text`; one extra entry at the end.
    offsets: Vec<usize>,
}

impl Collapsed {
    fn new(cps: &[char], classes: &[CpClass]) -> Collapsed {
        let mut text = String::with_capacity(cps.len() * 2);
        let mut offsets = Vec::with_capacity(cps.len() + 1);
        for (&c, &cls) in cps.iter().zip(classes) {
            offsets.push(text.len());
            text.push(collapse_char(c, cls));
        }
        offsets.push(text.len());
        Collapsed { text, offsets }
    }

    fn byte(&self, cp: usize) -> usize {
        self.offsets.get(cp).copied().unwrap_or(self.text.len())
    }

    fn cp_at_byte(&self, byte: usize) -> usize {
        match self.offsets.binary_search(&byte) {
            Ok(i) | Err(i) => i,
        }
    }
}

fn collapse_char(c: char, cls: CpClass) -> char {
    if c.is_ascii() {
        return c;
    }
    if cls.space {
        return '\u{0B}';
    }
    match cls.cat {
        Category::Number => '\u{D1}',
        Category::Letter => '\u{D2}',
        Category::Punctuation => '\u{D3}',
        Category::Mark => '\u{D4}',
        Category::Symbol => '\u{D5}',
        Category::Undefined | Category::Separator | Category::Control => '\u{D0}',
    }
}

/// Splits codepoints `r` of the text with `re`: matches and gaps become
/// pieces. A regex engine error (backtrack limit) keeps the rest whole.
fn split_regex(re: &Regex, c: &Collapsed, r: Range<usize>, out: &mut Vec<Range<usize>>) {
    let base = c.byte(r.start);
    let Some(hay) = c.text.get(base..c.byte(r.end)) else {
        out.push(r);
        return;
    };
    let mut last = r.start;
    for m in re.find_iter(hay) {
        let Ok(m) = m else { break };
        let s = c.cp_at_byte(base + m.start());
        let e = c.cp_at_byte(base + m.end());
        if s > last {
            out.push(last..s);
        }
        if e > s {
            out.push(s..e);
            last = e;
        }
    }
    if last < r.end {
        out.push(last..r.end);
    }
}

/// One piece of text as the custom scanners see it: indices are into the
/// whole text, anything outside `lo..hi` reads as absent.
struct View<'a> {
    cps: &'a [char],
    classes: &'a [CpClass],
    lo: usize,
    hi: usize,
}

impl View<'_> {
    fn cp(&self, i: usize) -> Option<char> {
        (self.lo <= i && i < self.hi)
            .then(|| self.cps.get(i).copied())
            .flatten()
    }

    fn class(&self, i: usize) -> Option<CpClass> {
        (self.lo <= i && i < self.hi)
            .then(|| self.classes.get(i).copied())
            .flatten()
    }

    fn is(&self, i: usize, f: impl Fn(CpClass) -> bool) -> bool {
        self.class(i).is_some_and(f)
    }

    /// Length of the whitespace run at `pos`, and the end of its last
    /// `\r`/`\n` (0 if it has none).
    fn space_run(&self, pos: usize) -> (usize, usize) {
        let mut k = 0;
        let mut last_newline_end = 0;
        while self.is(pos + k, |c| c.space) {
            if matches!(self.cp(pos + k), Some('\r' | '\n')) {
                last_newline_end = pos + k + 1;
            }
            k += 1;
        }
        (k, last_newline_end)
    }

    /// Length (2 or 3) of a contraction `'s 't 'm 'd 're 've 'll` at `pos`.
    fn contraction(&self, pos: usize, fold: Case) -> Option<usize> {
        if self.cp(pos) != Some('\'') || pos + 1 >= self.hi {
            return None;
        }
        let get = |i| {
            self.cp(i).map(|c| match fold {
                Case::Sensitive => c,
                Case::Insensitive => c.to_ascii_lowercase(),
            })
        };
        if matches!(get(pos + 1), Some('s' | 't' | 'm' | 'd')) {
            return Some(2);
        }
        if pos + 2 < self.hi {
            let pair = (get(pos + 1), get(pos + 2));
            if matches!(
                pair,
                (Some('r'), Some('e')) | (Some('v'), Some('e')) | (Some('l'), Some('l'))
            ) {
                return Some(3);
            }
        }
        None
    }
}

/// Case handling of contractions.
#[derive(Clone, Copy)]
enum Case {
    Sensitive,
    Insensitive,
}

/// Collects pieces from the running end of the previous one.
struct Emitter<'o> {
    prev: usize,
    out: &'o mut Vec<Range<usize>>,
}

impl Emitter<'_> {
    fn emit(&mut self, end: usize) {
        if end > self.prev {
            self.out.push(self.prev..end);
        }
        self.prev = end;
    }
}

/// `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)`
/// as llama.cpp scans it (whitespace not followed by the piece's end keeps
/// its last char for the next word; a lone one stands alone).
fn scan_gpt2(v: &View, out: &mut Vec<Range<usize>>) {
    let mut e = Emitter { prev: v.lo, out };
    let mut pos = v.lo;
    while pos < v.hi {
        let Some(c) = v.cp(pos) else { break };
        if let Some(len) = v.contraction(pos, Case::Sensitive) {
            pos += len;
            e.emit(pos);
            continue;
        }
        let lead_pos = if c == ' ' { pos + 1 } else { pos };
        let run: Option<fn(CpClass) -> bool> = if v.is(lead_pos, CpClass::is_letter) {
            Some(CpClass::is_letter)
        } else if v.is(lead_pos, CpClass::is_number) {
            Some(CpClass::is_number)
        } else if v.is(lead_pos, CpClass::is_other) {
            Some(CpClass::is_other)
        } else {
            None
        };
        if let Some(f) = run {
            pos = lead_pos;
            while v.is(pos, f) {
                pos += 1;
            }
            e.emit(pos);
            continue;
        }
        let (k, _) = v.space_run(pos);
        if k > 1 && pos + k < v.hi {
            pos += k - 1;
        } else if k > 0 {
            pos += k;
        } else {
            pos += 1;
        }
        e.emit(pos);
    }
    e.emit(v.hi);
}

/// The Llama 3 regex as llama.cpp scans it.
fn scan_llama3(v: &View, out: &mut Vec<Range<usize>>) {
    const MAX_DIGITS: usize = 3;
    let mut e = Emitter { prev: v.lo, out };
    let mut pos = v.lo;
    while pos < v.hi {
        let (Some(c), Some(cls)) = (v.cp(pos), v.class(pos)) else {
            break;
        };
        if let Some(len) = v.contraction(pos, Case::Insensitive) {
            pos += len;
            e.emit(pos);
            continue;
        }
        // [^\r\n\p{L}\p{N}]?\p{L}+
        if !(c == '\r' || c == '\n' || cls.is_number())
            && (cls.is_letter() || v.is(pos + 1, CpClass::is_letter))
        {
            pos += 1;
            while v.is(pos, CpClass::is_letter) {
                pos += 1;
            }
            e.emit(pos);
            continue;
        }
        // \p{N}{1,3}
        if cls.is_number() {
            let mut start = pos;
            while v.is(pos, CpClass::is_number) {
                pos += 1;
                if pos - start >= MAX_DIGITS {
                    e.emit(pos);
                    start = pos;
                }
            }
            e.emit(pos);
            continue;
        }
        // ' ?[^\s\p{L}\p{N}]+[\r\n]*' (a trailing lone space counts too)
        let lead_pos = if c == ' ' { pos + 1 } else { pos };
        if v.class(lead_pos).is_none_or(CpClass::is_other) {
            pos = lead_pos;
            while v.is(pos, CpClass::is_other) {
                pos += 1;
            }
            while matches!(v.cp(pos), Some('\r' | '\n')) {
                pos += 1;
            }
            e.emit(pos);
            continue;
        }
        let (k, newline_end) = v.space_run(pos);
        if newline_end > 0 {
            pos = newline_end;
        } else if k > 1 && pos + k < v.hi {
            pos += k - 1;
        } else if k > 0 {
            pos += k;
        } else {
            pos += 1;
        }
        e.emit(pos);
    }
    e.emit(v.hi);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(pre: PreTokenizer, s: &str) -> Vec<String> {
        let sp = Splitter::new(pre).expect("builtin patterns compile");
        sp.split(s).into_iter().map(str::to_string).collect()
    }

    #[test]
    fn collapse_rewrites_categories_inside_and_outside_classes() {
        assert_eq!(collapse_pattern(r"\p{N}"), r"[\x{D1}0-9]");
        assert_eq!(collapse_pattern(r"[^\s\p{L}]+"), r"[^\s\x{D2}A-Za-z]+");
        assert_eq!(collapse_pattern(r"\[\p{N}"), r"\[[\x{D1}0-9]");
    }

    #[test]
    fn smollm_splits_digits_then_gpt2() {
        assert_eq!(split(PreTokenizer::SmolLm, "ab 12"), ["ab", " ", "1", "2"]);
        assert_eq!(
            split(PreTokenizer::SmolLm, "Hello  world's"),
            ["Hello", " ", " world", "'s"]
        );
    }

    #[test]
    fn gpt2_whitespace_rules() {
        assert_eq!(split(PreTokenizer::Gpt2, "a   b"), ["a", "  ", " b"]);
        assert_eq!(split(PreTokenizer::Gpt2, "a \n"), ["a", " \n"]);
        assert_eq!(split(PreTokenizer::Gpt2, "a\tb"), ["a", "\t", "b"]);
        assert_eq!(split(PreTokenizer::Gpt2, " ?!x"), [" ?!", "x"]);
    }

    #[test]
    fn qwen2_regex_and_llama3_scanner() {
        assert_eq!(
            split(PreTokenizer::Qwen2, "I'LL pay 123\n\n  x"),
            ["I", "'LL", " pay", " ", "1", "2", "3", "\n\n", " ", " x"]
        );
        assert_eq!(
            split(PreTokenizer::Llama3, "I'LL pay 12345\n\n  x"),
            ["I", "'LL", " pay", " ", "123", "45", "\n\n", " ", " x"]
        );
        assert_eq!(split(PreTokenizer::Qwen2, "北京!"), ["北京", "!"]);
    }

    #[test]
    fn default_pre_tokenizer_compiles_and_covers() {
        let s = "a+b=c; 12345 ~x";
        assert_eq!(split(PreTokenizer::Default, s).concat(), s);
    }

    proptest::proptest! {
        #[test]
        fn pieces_cover_the_text_exactly(s in "(\\PC|[ \t\n\r0-9'])*") {
            for pre in [
                PreTokenizer::Default,
                PreTokenizer::Gpt2,
                PreTokenizer::SmolLm,
                PreTokenizer::Qwen2,
                PreTokenizer::Llama3,
            ] {
                let sp = Splitter::new(pre).expect("builtin patterns compile");
                let pieces = sp.split(&s);
                proptest::prop_assert!(pieces.iter().all(|p| !p.is_empty()));
                proptest::prop_assert_eq!(pieces.concat(), s.clone());
            }
        }
    }

    #[test]
    fn known_names_resolve() {
        let smol = PreTokenizer::from_ggml_name("smollm").expect("smollm is known");
        assert_eq!(smol.pre, PreTokenizer::SmolLm);
        assert_eq!(smol.add_bos, AddToken::Omit);
        let l3 = PreTokenizer::from_ggml_name("llama-bpe").expect("llama-bpe is known");
        assert_eq!(l3.merges, MergePolicy::WholeWordFirst);
        assert_eq!(l3.add_bos, AddToken::Add);
        assert!(PreTokenizer::from_ggml_name("no-such-pre").is_none());
    }
}
