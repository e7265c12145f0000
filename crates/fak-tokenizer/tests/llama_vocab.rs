//! Conformance against llama.cpp's own tokenizer test files: the vocab-only
//! GGUFs in llama.cpp's `models/` (`ggml-vocab-*.gguf`) with their
//! `.gguf.inp` / `.gguf.out` cases, as `tests/test-tokenizer-0.cpp` runs
//! them (`add_special = false`, `parse_special = false`).
//!
//! The files are not in the repository (vendor licences): run
//! `scripts/fetch-vocabs.sh`, which extracts them from the llama-cpp-python
//! 0.3.30 sdist into `models/llama-vocab/` (`scripts/test.sh` does).
//!
//! Every vocab fak claims must load and pass every case; every other vocab
//! in the directory must be refused at load with a typed error naming what
//! is unsupported.

use std::path::{Path, PathBuf};

use fak_gguf::{GgufFile, GgufWriter, MetaArray, MetaValue};
use fak_tokenizer::{
    AddSpecial, AddToken, EncodeOptions, SpecialTokens, Tokenizer, TokenizerError, VocabKind,
};

/// Vocabs fak supports (the name after `ggml-vocab-`) and their family.
const CLAIMED: &[(&str, VocabKind)] = &[
    ("llama-spm", VocabKind::Spm),
    ("phi-3", VocabKind::Spm),
    ("llama-bpe", VocabKind::Bpe),
    ("qwen2", VocabKind::Bpe),
    ("gpt-2", VocabKind::Bpe),
    ("starcoder", VocabKind::Bpe),
    ("refact", VocabKind::Bpe),
    ("command-r", VocabKind::Bpe),
    ("mpt", VocabKind::Bpe),
];

/// llama.cpp's test-tokenizer-0 mode.
const TEST_MODE: EncodeOptions = EncodeOptions {
    special: SpecialTokens::Plain,
    add: AddSpecial::Never,
};

fn vocab_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/llama-vocab")
}

fn need_dir() -> PathBuf {
    let dir = vocab_dir();
    assert!(
        dir.join("ggml-vocab-llama-spm.gguf").exists(),
        "{} has no llama.cpp vocab files: run scripts/fetch-vocabs.sh first",
        dir.display()
    );
    dir
}

/// `(input, expected ids)` pairs in test-tokenizer-0's format.
fn read_cases(gguf: &Path) -> Vec<(String, Vec<u32>)> {
    let inp_path = gguf.with_extension("gguf.inp");
    let out_path = gguf.with_extension("gguf.out");
    let raw = std::fs::read_to_string(&inp_path)
        .unwrap_or_else(|e| panic!("{}: {e}", inp_path.display()));
    let out = std::fs::read_to_string(&out_path)
        .unwrap_or_else(|e| panic!("{}: {e}", out_path.display()));
    // Like test-tokenizer-0: a separator at the very end opens no case.
    let mut inputs: Vec<&str> = raw.split("\n__ggml_vocab_test__\n").collect();
    if raw.ends_with("\n__ggml_vocab_test__\n") {
        inputs.pop();
    }
    let outputs: Vec<&str> = out.lines().collect();
    assert_eq!(
        inputs.len(),
        outputs.len(),
        "{}: input and output case counts differ",
        gguf.display()
    );
    inputs
        .iter()
        .zip(&outputs)
        .map(|(i, o)| {
            let ids = o
                .split_whitespace()
                .map(|t| t.parse::<u32>().expect("id in .out file"))
                .collect();
            (i.to_string(), ids)
        })
        .collect()
}

fn load(path: &Path) -> Result<Tokenizer, TokenizerError> {
    let f = GgufFile::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Tokenizer::from_gguf(&f)
}

fn vocab_path(name: &str) -> PathBuf {
    need_dir().join(format!("ggml-vocab-{name}.gguf"))
}

#[test]
fn claimed_vocabs_pass_every_llama_cpp_case() {
    let mut report = Vec::new();
    let mut failures = Vec::new();
    for &(name, kind) in CLAIMED {
        let path = vocab_path(name);
        let t = load(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(t.kind(), kind, "{name}: tokenizer family");
        let cases = read_cases(&path);
        assert!(cases.len() >= 40, "{name}: only {} cases", cases.len());
        let mut passed = 0;
        for (text, want) in &cases {
            let got = t.encode(text, TEST_MODE);
            if &got == want {
                passed += 1;
            } else {
                failures.push(format!(
                    "{name} {text:?}\n   want {want:?}\n    got {got:?}"
                ));
            }
            // No case holds special-token text, so the pieces give it back
            // (less the SPM space prefix; `decode` itself also applies
            // clean_spaces and is checked against llama_detokenize below).
            let mut bytes: Vec<u8> = got
                .iter()
                .flat_map(|&id| t.token_bytes(id).to_vec())
                .collect();
            if kind == VocabKind::Spm && bytes.first() == Some(&b' ') {
                bytes.remove(0);
            }
            if bytes != text.as_bytes() {
                failures.push(format!(
                    "{name} {text:?}: pieces give {:?}",
                    String::from_utf8_lossy(&bytes)
                ));
            }
        }
        report.push(format!("{name}: {passed}/{}", cases.len()));
    }
    eprintln!("{}", report.join(", "));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn other_vocabs_are_refused_by_name() {
    let dir = need_dir();
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "gguf"))
        .collect();
    paths.sort();
    let mut refused = 0;
    for path in paths {
        let file = path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        let name = file
            .trim_start_matches("ggml-vocab-")
            .trim_end_matches(".gguf");
        if CLAIMED.iter().any(|&(n, _)| n == name) {
            continue;
        }
        let has_cases = path.with_extension("gguf.inp").exists();
        let f = GgufFile::open(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
        match Tokenizer::from_gguf(&f) {
            Err(e @ TokenizerError::UnsupportedModel { .. }) => {
                let model = f
                    .get_str("tokenizer.ggml.model")
                    .ok()
                    .flatten()
                    .unwrap_or("?");
                let msg = e.to_string();
                assert!(msg.contains(&format!("{model:?}")), "{file}: {msg}");
                assert!(!msg.contains('\n'), "{file}: one line: {msg}");
                refused += 1;
            }
            Err(e @ TokenizerError::UnsupportedPreTokenizer { .. }) => {
                let pre = f
                    .get_str("tokenizer.ggml.pre")
                    .ok()
                    .flatten()
                    .unwrap_or("?");
                assert!(e.to_string().contains(&format!("{pre:?}")), "{file}: {e}");
                refused += 1;
            }
            Err(e) => panic!("{file}: refused for the wrong reason: {e}"),
            // Loading is fine for vocabs llama.cpp ships no cases for; one
            // with cases that loads must be claimed (and pass them).
            Ok(_) => assert!(!has_cases, "{file} loads but is not in CLAIMED"),
        }
    }
    assert!(
        refused >= 5,
        "only {refused} vocabs refused; the test proves little"
    );
}

#[test]
fn spm_vocab_facts_follow_llama_cpp() {
    let t = load(&vocab_path("llama-spm")).unwrap_or_else(|e| panic!("llama-spm: {e}"));
    assert_eq!((t.bos(), t.eos()), (Some(1), Some(2)));
    assert_eq!(t.special_ids().unk, Some(0));
    assert_eq!(t.adds(), (AddToken::Add, AddToken::Omit));
    // add_bos and the space prefix: "Hello" -> <s> ▁Hello.
    let ids = t.encode("Hello world", EncodeOptions::default());
    assert_eq!(ids, [1, 15043, 3186]);
    assert_eq!(t.decode(&ids), "<s> Hello world");
    // Byte fallback: U+10FFFF has no token; its 4 UTF-8 bytes are <0xNN>.
    let ids = t.encode("\u{10FFFF}", TEST_MODE);
    assert_eq!(ids.len(), 5, "▁ then four byte tokens: {ids:?}");
    assert_eq!(t.decode(&ids), "\u{10FFFF}");
    assert_eq!(t.token_bytes(13), b"\n", "<0x0A>");
    // A control token resets the space prefix, like llama.cpp.
    let ids = t.encode(
        "a</s>b",
        EncodeOptions {
            special: SpecialTokens::Parse,
            add: AddSpecial::Never,
        },
    );
    assert_eq!(ids.get(1..2), Some(&[2][..]));
    assert_eq!(t.decode(&ids), "a</s> b");
}

/// A minimal tokenizer GGUF with `tokenizer.ggml.model = model`.
fn synthetic(model: &str) -> GgufFile {
    let mut w = GgufWriter::new();
    let kv = |w: &mut GgufWriter, k: &str, v: MetaValue| w.add_kv(k, v).expect("unique key");
    kv(
        &mut w,
        "tokenizer.ggml.model",
        MetaValue::Str(model.to_string()),
    );
    kv(
        &mut w,
        "tokenizer.ggml.tokens",
        MetaValue::Array(MetaArray::Str(vec!["<unk>".into(), "a".into(), "b".into()])),
    );
    kv(
        &mut w,
        "tokenizer.ggml.scores",
        MetaValue::Array(MetaArray::F32(vec![0.0; 3])),
    );
    kv(
        &mut w,
        "tokenizer.ggml.merges",
        MetaValue::Array(MetaArray::Str(vec!["a b".into()])),
    );
    GgufFile::from_bytes(w.to_bytes().expect("serializes")).expect("parses")
}

#[test]
fn unsupported_models_are_typed_errors_naming_them() {
    for (model, family) in [
        ("bert", "WPM"),
        ("t5", "UGM"),
        ("rwkv", "RWKV"),
        ("plamo2", "PLaMo-2"),
        ("no_vocab", "no vocabulary"),
        ("gemma4", "BPE variant"),
        ("mystery", "unknown"),
    ] {
        match Tokenizer::from_gguf(&synthetic(model)) {
            Err(e @ TokenizerError::UnsupportedModel { .. }) => {
                let msg = e.to_string();
                assert!(
                    msg.contains(&format!("{model:?}")) && msg.contains(family),
                    "{msg}"
                );
                assert!(!msg.contains('\n'), "{msg}");
            }
            Err(e) => panic!("{model}: wrong error {e}"),
            Ok(_) => panic!("{model}: accepted"),
        }
    }
    for model in ["gpt2", "llama"] {
        if let Err(e) = Tokenizer::from_gguf(&synthetic(model)) {
            panic!("{model}: {e}");
        }
    }
}

#[test]
fn short_scores_array_is_refused() {
    let mut w = GgufWriter::new();
    w.add_kv("tokenizer.ggml.model", MetaValue::Str("llama".into()))
        .expect("kv");
    w.add_kv(
        "tokenizer.ggml.tokens",
        MetaValue::Array(MetaArray::Str(vec!["a".into(), "b".into()])),
    )
    .expect("kv");
    w.add_kv(
        "tokenizer.ggml.scores",
        MetaValue::Array(MetaArray::F32(vec![0.0])),
    )
    .expect("kv");
    let f = GgufFile::from_bytes(w.to_bytes().expect("bytes")).expect("parses");
    assert!(matches!(
        Tokenizer::from_gguf(&f),
        Err(TokenizerError::ScoreCount { got: 1, want: 2 })
    ));
}

/// Vocabs with seeded-random goldens from `bench/peers/gen_vocab_golden.py`.
const GOLDEN: &[&str] = &["llama-spm", "phi-3", "llama-bpe"];

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(s.get(2 * i..2 * i + 2).expect("hex pair"), 16).expect("hex"))
        .collect()
}

fn ids_of(v: &serde_json::Value) -> Vec<u32> {
    v.as_array()
        .expect("id array")
        .iter()
        .map(|x| u32::try_from(x.as_u64().expect("id")).expect("u32 id"))
        .collect()
}

#[test]
fn corpus_and_seeded_random_strings_match_llama_cpp() {
    use sha2::{Digest, Sha256};
    let plain = EncodeOptions {
        special: SpecialTokens::Plain,
        add: AddSpecial::FromMetadata,
    };
    for &name in GOLDEN {
        let gpath = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data")
            .join(format!("vocab-golden-{name}.json"));
        let text = std::fs::read_to_string(&gpath).unwrap_or_else(|e| {
            panic!("{}: {e} (bench/peers/gen_vocab_golden.py)", gpath.display())
        });
        let g: serde_json::Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", gpath.display()));
        let path = vocab_path(name);
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let sha: String = Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            sha,
            g["vocab_sha256"].as_str().expect("sha"),
            "{name}: vocab file differs from the golden's"
        );
        let t = load(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        let cases = g["cases"].as_array().expect("cases");
        let random = cases
            .iter()
            .filter(|c| c["name"].as_str().is_some_and(|n| n.starts_with("random_")))
            .count();
        assert_eq!(random, 300, "{name}: seeded random strings");
        let mut failures = Vec::new();
        for c in cases {
            let cname = c["name"].as_str().expect("name");
            let input = c["text"].as_str().expect("text");
            let want = ids_of(&c["ids"]);
            let got = t.encode(input, EncodeOptions::default());
            if got != want {
                failures.push(format!(
                    "{cname} parse-special {input:?}\n   want {want:?}\n    got {got:?}"
                ));
            }
            let want_plain = ids_of(&c["ids_plain"]);
            let got_plain = t.encode(input, plain);
            if got_plain != want_plain {
                failures.push(format!(
                    "{cname} plain {input:?}\n   want {want_plain:?}\n    got {got_plain:?}"
                ));
            }
            let detok = unhex(c["detok_hex"].as_str().expect("detok_hex"));
            if t.decode(&want).as_bytes() != detok.as_slice() {
                failures.push(format!(
                    "{cname}: decode {:?} != {:?}",
                    t.decode(&want),
                    String::from_utf8_lossy(&detok)
                ));
            }
        }
        assert!(
            failures.is_empty(),
            "{name}: {} failures\n{}",
            failures.len(),
            failures.join("\n")
        );
    }
}
