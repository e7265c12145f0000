//! `fak export-tokenizer`, run as a user would: the files' structure for a
//! byte-level BPE model (SmolLM2) and a SentencePiece one (Gemma 3), the
//! `--json` summary, `--force`, and the one-line refusals. Whether the
//! files tokenize exactly as fak does is checked with Hugging Face's own
//! `tokenizers` package in `tests/openai/test_export_tokenizer.py`.

use std::path::Path;

use serde_json::Value;

mod run;
use run::{assert_clean_error, fak, model, stderr, tmppath};

fn read_json(p: &Path) -> Value {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Exports `file` into `dir` with `--json`; the summary.
fn export(file: &str, dir: &Path, extra: &[&str]) -> Value {
    let m = model(file);
    let d = dir.display().to_string();
    let mut args = vec!["export-tokenizer", m.as_str(), d.as_str(), "--json"];
    args.extend_from_slice(extra);
    let o = fak(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stderr(&o).matches("wrote ").count(), 2, "{}", stderr(&o));
    serde_json::from_slice(&o.stdout).expect("--json prints one JSON object")
}

#[test]
fn smollm2_exports_as_byte_level_bpe() {
    let dir = tmppath("smollm2").join("nested/dir");
    let s = export("smollm2-135m-instruct-q8_0.gguf", &dir, &[]);
    assert_eq!(s["family"], "bpe");
    assert_eq!(s["pre_tokenizer"], "smollm");
    assert_eq!(s["n_vocab"], 49152);
    assert_eq!(s["n_merges"], 48900);
    assert_eq!(s["n_added_tokens"], 17);
    assert_eq!(s["add_bos"], false);
    assert_eq!(s["chat_template"], true);
    assert_eq!(s["files"].as_array().map(Vec::len), Some(2));

    let t = read_json(&dir.join("tokenizer.json"));
    let m = &t["model"];
    assert_eq!(m["type"], "BPE");
    assert_eq!(m["vocab"].as_object().map(|v| v.len()), Some(49152));
    assert_eq!(m["vocab"]["<|im_start|>"], 1);
    assert_eq!(m["merges"].as_array().map(Vec::len), Some(48900));
    assert_eq!(m["merges"][0], serde_json::json!(["Ġ", "t"]));
    assert_eq!(m["byte_fallback"], false);
    assert_eq!(m["ignore_merges"], false);
    // Digits alone, then GPT-2's regex, then the byte map, then the 21
    // bytes SmolLM2 has no token for, each cut out on its own.
    let steps = t["pre_tokenizer"]["pretokenizers"]
        .as_array()
        .expect("a sequence");
    let kinds: Vec<&str> = steps.iter().filter_map(|s| s["type"].as_str()).collect();
    assert_eq!(kinds, ["Split", "Split", "ByteLevel", "Split"]);
    assert!(steps
        .iter()
        .filter(|s| s["type"] == "Split")
        .all(|s| s["behavior"] == "Isolated"));
    assert_eq!(steps[2]["use_regex"], false);
    let gpt2 = steps[1]["pattern"]["Regex"].as_str().expect("regex");
    assert!(
        gpt2.starts_with("'s|'t|'re|'ve|'m|'ll|'d| ?["),
        "{}",
        &gpt2[..40]
    );
    assert!(!gpt2.contains(r"\p{"), "classes are written out as ranges");
    let missing = steps[3]["pattern"]["Regex"].as_str().expect("regex");
    assert_eq!(missing.matches(r"\x{").count(), 21, "{missing}");
    let added = t["added_tokens"].as_array().expect("added tokens");
    assert_eq!(added.len(), 17);
    assert!(added
        .iter()
        .all(|a| a["special"] == true && a["normalized"] == false));
    assert_eq!(t["post_processor"]["type"], "TemplateProcessing");
    assert_eq!(
        t["post_processor"]["single"],
        serde_json::json!([{"Sequence": {"id": "A", "type_id": 0}}])
    );
    assert_eq!(t["decoder"]["type"], "ByteLevel");
    assert!(t["normalizer"].is_null());

    let c = read_json(&dir.join("tokenizer_config.json"));
    let inspect = fak(&[
        "inspect",
        &model("smollm2-135m-instruct-q8_0.gguf"),
        "--json",
    ]);
    let meta: Value = serde_json::from_slice(&inspect.stdout).expect("inspect --json");
    let template = &meta["metadata"]["tokenizer.chat_template"];
    assert!(template
        .as_str()
        .is_some_and(|s| s.contains("<|im_start|>")));
    assert_eq!(&c["chat_template"], template, "the template, verbatim");
    assert_eq!(c["bos_token"], "<|im_start|>");
    assert_eq!(c["eos_token"], "<|im_end|>");
    assert_eq!(c["pad_token"], "<|im_end|>");
    assert_eq!(c["unk_token"], "<|endoftext|>");
    assert_eq!(c["add_bos_token"], false);
    assert_eq!(c["add_eos_token"], false);
    assert_eq!(c["model_max_length"], 8192);
    assert_eq!(c["clean_up_tokenization_spaces"], false);
    assert_eq!(c["tokenizer_class"], "PreTrainedTokenizerFast");
    assert_eq!(c["added_tokens_decoder"]["2"]["content"], "<|im_end|>");
    assert_eq!(c["added_tokens_decoder"]["2"]["special"], true);
    let _ = std::fs::remove_dir_all(tmppath("smollm2"));
}

#[test]
fn gemma3_exports_as_sentencepiece() {
    let dir = tmppath("gemma3");
    let s = export("gemma-3-270m-q4_k_m.gguf", &dir, &[]);
    assert_eq!(s["family"], "spm");
    assert_eq!(s["pre_tokenizer"], Value::Null);
    assert_eq!(s["n_vocab"], 262144);
    assert_eq!(s["add_bos"], true);
    assert_eq!(s["chat_template"], false);

    let t = read_json(&dir.join("tokenizer.json"));
    let m = &t["model"];
    assert_eq!(m["byte_fallback"], true);
    assert_eq!(m["unk_token"], "<unk>");
    assert_eq!(
        m["merges"].as_array().map(Vec::len),
        s["n_merges"].as_u64().map(|n| n as usize)
    );
    assert!(t["pre_tokenizer"].is_null());
    // No space prefix in Gemma: spaces become "▁" and nothing is prepended.
    let norms = t["normalizer"]["normalizers"]
        .as_array()
        .expect("normalizers");
    assert_eq!(norms.len(), 1);
    assert_eq!(norms[0]["type"], "Replace");
    let decoders: Vec<&str> = t["decoder"]["decoders"]
        .as_array()
        .expect("decoders")
        .iter()
        .filter_map(|d| d["type"].as_str())
        .collect();
    assert_eq!(decoders, ["Replace", "ByteFallback", "Fuse"]);
    assert_eq!(
        t["post_processor"]["single"][0]["SpecialToken"]["id"],
        "<bos>"
    );
    let added = t["added_tokens"].as_array().expect("added tokens");
    let tab = added
        .iter()
        .find(|a| a["content"] == "\t")
        .expect("\\t is user-defined");
    assert_eq!(tab["special"], false);
    let turn = added
        .iter()
        .find(|a| a["content"] == "<start_of_turn>")
        .expect("control");
    assert_eq!(turn["special"], true);

    let c = read_json(&dir.join("tokenizer_config.json"));
    assert!(
        c.get("chat_template").is_none(),
        "a base model: no template"
    );
    assert_eq!(c["model_max_length"], 32768);
    assert_eq!(c["add_bos_token"], true);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn existing_files_are_kept_unless_forced() {
    let dir = tmppath("force");
    export("smollm2-135m-instruct-q8_0.gguf", &dir, &[]);
    let first = std::fs::read(dir.join("tokenizer.json")).expect("written");
    std::fs::write(dir.join("tokenizer_config.json"), "{}").expect("overwrite one file");

    let m = model("smollm2-135m-instruct-q8_0.gguf");
    let d = dir.display().to_string();
    let o = fak(&["export-tokenizer", &m, &d]);
    assert_clean_error(&o, "--force");
    assert_eq!(
        std::fs::read_to_string(dir.join("tokenizer_config.json"))
            .ok()
            .as_deref(),
        Some("{}")
    );

    export("smollm2-135m-instruct-q8_0.gguf", &dir, &["--force"]);
    assert_eq!(
        std::fs::read(dir.join("tokenizer.json")).expect("rewritten"),
        first,
        "same bytes"
    );
    let c = read_json(&dir.join("tokenizer_config.json"));
    assert_eq!(c["tokenizer_class"], "PreTrainedTokenizerFast");
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .expect("dir")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn unexpressible_vocabularies_are_refused_in_one_line() {
    // Phi-3's special tokens drop the whitespace after them: ASCII
    // whitespace in fak (llama.cpp), any Unicode space in Hugging Face's.
    let dir = tmppath("phi3");
    let m = model("llama-vocab/ggml-vocab-phi-3.gguf");
    let d = dir.display().to_string();
    let o = fak(&["export-tokenizer", &m, &d]);
    assert_clean_error(&o, "cannot export a Hugging Face tokenizer");
    assert!(stderr(&o).contains("whitespace"), "{}", stderr(&o));
    assert!(!dir.exists(), "nothing is written for a refused vocabulary");

    let o = fak(&["export-tokenizer", "/nonexistent/model.gguf", &d]);
    assert_clean_error(&o, "/nonexistent/model.gguf");
    assert!(!dir.exists());
}
