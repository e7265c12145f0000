//! The `Split` regexes of an exported byte-level BPE tokenizer.
//!
//! Each fak pre-tokenizer is a list of regexes (llama.cpp's, see
//! [`crate::pretok`]); the export writes the same list, one Hugging Face
//! `Split` (behaviour `Isolated`: matches and the gaps between them both
//! become pieces) per regex, in order. Only the Unicode classes change:
//! `\p{L}`, `\p{N}`, `\p{P}` and `\s` are written out as the explicit code
//! point ranges of fak's own classification ([`CpClass`]), so the regex
//! engine that reads the file (Oniguruma in HF tokenizers) puts every code
//! point in the class fak does, whatever Unicode version it was built with.
//!
//! ```text
//! fak (collapsed, see pretok.rs)     tokenizer.json
//! \p{L}                              [\x{41}-\x{5A}\x{61}-\x{7A}\x{AA}...]
//! [^\s\p{L}\p{N}]                    [^\x{9}-\x{D}\x{20}...\x{41}-\x{5A}...\x{30}-\x{39}...]
//! \s+(?!\S)                          [\x{9}-\x{D}\x{20}...]+(?![^\x{9}-\x{D}\x{20}...])
//! ```
//!
//! fak runs GPT-2's and Llama 3's regexes through hand-written scanners;
//! the tests below check that these regexes split exactly as those scanners
//! (and as the collapsed regexes) do.

use std::fmt::Write as _;

use crate::pretok::PreTokenizer;
use crate::unicode::{Category, CpClass};

/// Class bodies (the part between `[` and `]`) of fak's four Unicode
/// classes, as explicit ranges.
pub(super) struct Classes {
    /// `\p{L}`: letters.
    letter: String,
    /// `\p{N}`: numbers.
    number: String,
    /// `\s`: White_Space.
    space: String,
    /// `\p{P}`: punctuation.
    punct: String,
}

/// One class being built: its body and the range still open.
#[derive(Default)]
struct RangeBuilder {
    body: String,
    open: Option<(u32, u32)>,
}

impl RangeBuilder {
    fn push(&mut self, cp: u32) {
        match self.open {
            Some((lo, hi)) if hi + 1 == cp => self.open = Some((lo, cp)),
            _ => {
                self.close();
                self.open = Some((cp, cp));
            }
        }
    }

    fn close(&mut self) {
        // Writing to a String cannot fail.
        let _ = match self.open.take() {
            Some((lo, hi)) if lo == hi => write!(self.body, r"\x{{{lo:X}}}"),
            Some((lo, hi)) => write!(self.body, r"\x{{{lo:X}}}-\x{{{hi:X}}}"),
            None => Ok(()),
        };
    }

    fn finish(mut self) -> String {
        self.close();
        self.body
    }
}

impl Classes {
    /// Every Unicode scalar value classified as fak classifies it. As in
    /// fak's collapsed regexes, whitespace wins over the category (no
    /// assigned code point is both, see the tests).
    pub(super) fn new() -> Classes {
        let mut l = RangeBuilder::default();
        let mut n = RangeBuilder::default();
        let mut s = RangeBuilder::default();
        let mut p = RangeBuilder::default();
        for c in (0..=u32::from(char::MAX)).filter_map(char::from_u32) {
            let cls = CpClass::of(c);
            let class = if cls.space {
                &mut s
            } else {
                match cls.cat {
                    Category::Letter => &mut l,
                    Category::Number => &mut n,
                    Category::Punctuation => &mut p,
                    _ => continue,
                }
            };
            class.push(u32::from(c));
        }
        Classes {
            letter: l.finish(),
            number: n.finish(),
            space: s.finish(),
            punct: p.finish(),
        }
    }

    /// GPT-2's regex (`'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+|
    /// ?[^\s\p{L}\p{N}]+|\s+(?!\S)`).
    fn gpt2(&self) -> String {
        let (l, n, s) = (&self.letter, &self.number, &self.space);
        format!(r"'s|'t|'re|'ve|'m|'ll|'d| ?[{l}]+| ?[{n}]+| ?[^{s}{l}{n}]+|[{s}]+(?![^{s}])")
    }

    /// Llama 3's regex (`digits` = `{1,3}`) or Qwen2's (`digits` = ``).
    fn llama3(&self, digits: &str) -> String {
        let (l, n, s) = (&self.letter, &self.number, &self.space);
        format!(
            r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n{l}{n}]?[{l}]+|[{n}]{digits}| ?[^{s}{l}{n}]+[\r\n]*|[{s}]*[\r\n]+|[{s}]+(?![^{s}])|[{s}]+"
        )
    }

    /// The regexes of `pre`, in the order fak applies them.
    pub(super) fn patterns(&self, pre: PreTokenizer) -> Vec<String> {
        let n = &self.number;
        match pre {
            PreTokenizer::Default => vec![
                format!(r"[{}\$\+<=>\^~\|]+", self.punct),
                self.gpt2(),
                format!("[{n}]+"),
                "[0-9][0-9][0-9]".to_string(),
            ],
            PreTokenizer::Gpt2 => vec![self.gpt2()],
            PreTokenizer::SmolLm => vec![format!("[{n}]"), self.gpt2()],
            PreTokenizer::Qwen2 => vec![self.llama3("")],
            PreTokenizer::Llama3 => vec![self.llama3("{1,3}")],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pretok::Splitter;
    use fancy_regex::Regex;

    const ALL: [PreTokenizer; 5] = [
        PreTokenizer::Default,
        PreTokenizer::Gpt2,
        PreTokenizer::SmolLm,
        PreTokenizer::Qwen2,
        PreTokenizer::Llama3,
    ];

    /// What HF's `Split` with behaviour `Isolated` does, regex after regex.
    fn hf_split<'t>(res: &[Regex], text: &'t str) -> Vec<&'t str> {
        let mut pieces = vec![text];
        for re in res {
            let mut next = Vec::new();
            for p in pieces {
                let mut last = 0;
                for m in re.find_iter(p) {
                    let m = m.expect("no backtrack limit on these inputs");
                    if m.start() > last {
                        next.push(&p[last..m.start()]);
                    }
                    next.push(m.as_str());
                    last = m.end();
                }
                if last < p.len() {
                    next.push(&p[last..]);
                }
            }
            pieces = next;
        }
        pieces.retain(|p| !p.is_empty());
        pieces
    }

    /// Every pre-tokenizer's exported regexes (compiled once: they are
    /// large) and fak's splitter.
    fn compiled() -> &'static [(PreTokenizer, Vec<Regex>, Splitter)] {
        static ONCE: std::sync::OnceLock<Vec<(PreTokenizer, Vec<Regex>, Splitter)>> =
            std::sync::OnceLock::new();
        ONCE.get_or_init(|| {
            let classes = Classes::new();
            ALL.iter()
                .map(|&pre| {
                    let res = classes
                        .patterns(pre)
                        .iter()
                        .map(|p| Regex::new(p).expect("exported pattern compiles"))
                        .collect();
                    (pre, res, Splitter::new(pre).expect("fak pattern compiles"))
                })
                .collect()
        })
    }

    #[test]
    fn whitespace_never_has_another_class() {
        for c in (0..=u32::from(char::MAX)).filter_map(char::from_u32) {
            let cls = CpClass::of(c);
            if cls.space {
                assert!(
                    matches!(cls.cat, Category::Separator | Category::Control),
                    "{c:?} is whitespace and {:?}",
                    cls.cat
                );
            }
        }
    }

    #[test]
    fn ranges_are_written_compactly() {
        let mut b = RangeBuilder::default();
        for cp in [0x41, 0x42, 0x43, 0x45, 0x10FFFF] {
            b.push(cp);
        }
        assert_eq!(b.finish(), r"\x{41}-\x{43}\x{45}\x{10FFFF}");
        let c = Classes::new();
        assert!(c.space.starts_with(r"\x{9}-\x{D}\x{20}"), "{}", c.space);
        assert!(c.number.starts_with(r"\x{30}-\x{39}"));
    }

    #[test]
    fn exported_regexes_split_like_fak_on_tricky_text() {
        let cases = [
            "Hello  world's 12345 ~x+y=z; I'LL  DON'T\n\n  x",
            "a\t\tb \n\r\n x\u{3000}y\u{a0}z\u{85}",
            "北京!¿Qué? 3½ ٣٤٥ e\u{301}t\u{200b}w 😀😀 $+<=>^~| 'S 'll",
            "  leading and trailing  ",
            "x1234567y  \t",
        ];
        for (pre, res, fak) in compiled() {
            for text in cases {
                assert_eq!(hf_split(res, text), fak.split(text), "{pre:?} on {text:?}");
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        #[test]
        fn exported_regexes_split_like_fak(
            s in "([ \t\n\r\u{b}\u{c}\u{85}\u{a0}\u{3000}0-9'a-zA-Z$+~|!?.,;:<>^`_-]|\\PC|[sStTlLmMdDrReEvV]){0,40}"
        ) {
            for (pre, res, fak) in compiled() {
                proptest::prop_assert_eq!(hf_split(res, &s), fak.split(&s), "{:?}", pre);
            }
        }
    }
}
