//! Golden tests against llama.cpp (llama-cpp-python 0.3.30): exact ids for
//! every corpus string, every token's detokenized bytes, the EOG set, the
//! BOS/EOS policy, chat-template renderings, and round trips.
//!
//! Goldens come from `bench/peers/gen_tokenizer_golden.py`; the models from
//! `scripts/fetch-models.sh`.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Instant;

use fak_gguf::GgufFile;
use fak_tokenizer::{
    AddSpecial, AddToken, ChatMessage, ChatTemplate, EncodeOptions, SpecialTokens, StreamDecoder,
    Tokenizer,
};
use serde_json::Value;
use sha2::{Digest, Sha256};

const MODELS: [(&str, &str); 2] = [
    ("smollm2", "smollm2-135m-instruct-q4_1.gguf"),
    ("qwen2", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"),
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn open_model(file: &str) -> GgufFile {
    let path = root().join("models").join(file);
    assert!(
        path.exists(),
        "model {} is missing: run scripts/fetch-models.sh first",
        path.display()
    );
    GgufFile::open(&path).unwrap_or_else(|e| panic!("opening {}: {e}", path.display()))
}

fn tokenizer(short: &str) -> &'static Tokenizer {
    static SMOL: OnceLock<Tokenizer> = OnceLock::new();
    static QWEN: OnceLock<Tokenizer> = OnceLock::new();
    let (cell, file) = match short {
        "smollm2" => (&SMOL, MODELS[0].1),
        _ => (&QWEN, MODELS[1].1),
    };
    cell.get_or_init(|| {
        let f = open_model(file);
        Tokenizer::from_gguf(&f).unwrap_or_else(|e| panic!("tokenizer of {file}: {e}"))
    })
}

fn golden(short: &str) -> Value {
    let path = root()
        .join("crates/fak-tokenizer/tests/data")
        .join(format!("tokenizer-golden-{short}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (regenerate with bench/peers/gen_tokenizer_golden.py)",
            path.display()
        )
    });
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn ids_of(v: &Value) -> Vec<u32> {
    v.as_array()
        .expect("id array")
        .iter()
        .map(|x| u32::try_from(x.as_u64().expect("id is an integer")).expect("id fits u32"))
        .collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex"))
        .collect()
}

fn cases(g: &Value) -> &Vec<Value> {
    g["cases"].as_array().expect("cases array")
}

#[test]
fn vocab_facts_match_llama_cpp() {
    for (short, _) in MODELS {
        let t = tokenizer(short);
        let g = golden(short);
        let v = &g["vocab"];
        assert_eq!(
            t.n_vocab() as u64,
            v["n_tokens"].as_u64().expect("n_tokens"),
            "{short}"
        );
        assert_eq!(t.bos().map(u64::from), v["bos"].as_u64(), "{short} bos");
        assert_eq!(t.eos().map(u64::from), v["eos"].as_u64(), "{short} eos");
        let (bos, eos) = t.adds();
        assert_eq!(
            bos == AddToken::Add,
            v["add_bos"].as_bool().expect("add_bos"),
            "{short}"
        );
        assert_eq!(
            eos == AddToken::Add,
            v["add_eos"].as_bool().expect("add_eos"),
            "{short}"
        );
        let eog = ids_of(&v["eog"]);
        assert_eq!(t.eog_ids(), eog, "{short} end-of-generation set");
        for &id in &eog {
            assert!(t.is_eog(id));
        }
        assert!(!t.is_eog(u32::MAX));
    }
}

#[test]
fn every_token_piece_matches_llama_cpp() {
    for (short, _) in MODELS {
        let t = tokenizer(short);
        let g = golden(short);
        for s in g["piece_sample"].as_array().expect("piece_sample") {
            let id = u32::try_from(s["id"].as_u64().expect("id")).expect("u32");
            assert_eq!(
                t.token_bytes(id),
                unhex(s["hex"].as_str().expect("hex")).as_slice(),
                "{short} token {id} ({:?})",
                t.token_text(id)
            );
        }
        let mut h = Sha256::new();
        for id in 0..u32::try_from(t.n_vocab()).expect("u32 vocab") {
            let p = t.token_bytes(id);
            h.update(u32::try_from(p.len()).expect("piece length").to_le_bytes());
            h.update(p);
        }
        let got: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            got,
            g["pieces_sha256"].as_str().expect("sha"),
            "{short}: hash over all pieces"
        );
    }
}

#[test]
fn encode_matches_llama_cpp_exactly() {
    let plain = EncodeOptions {
        special: SpecialTokens::Plain,
        add: AddSpecial::FromMetadata,
    };
    for (short, _) in MODELS {
        let t = tokenizer(short);
        let g = golden(short);
        let mut failures = Vec::new();
        for c in cases(&g) {
            let name = c["name"].as_str().expect("name");
            let text = c["text"].as_str().expect("text");
            let want = ids_of(&c["ids"]);
            let got = t.encode(text, EncodeOptions::default());
            if got != want {
                failures.push(format!(
                    "{name}: parse-special\n   want {want:?}\n    got {got:?}"
                ));
            }
            let want_plain = ids_of(&c["ids_plain"]);
            let got_plain = t.encode(text, plain);
            if got_plain != want_plain {
                failures.push(format!(
                    "{name}: plain\n   want {want_plain:?}\n    got {got_plain:?}"
                ));
            }
        }
        assert!(failures.is_empty(), "{short}:\n{}", failures.join("\n"));
        assert!(cases(&g).len() >= 40, "corpus too small");
    }
}

#[test]
fn decode_matches_llama_cpp_detokenize_and_round_trips() {
    let no_bos = EncodeOptions {
        special: SpecialTokens::Parse,
        add: AddSpecial::Never,
    };
    for (short, _) in MODELS {
        let t = tokenizer(short);
        let g = golden(short);
        for c in cases(&g) {
            let name = c["name"].as_str().expect("name");
            let text = c["text"].as_str().expect("text");
            let ids = ids_of(&c["ids"]);
            let detok = unhex(c["detok_hex"].as_str().expect("detok_hex"));
            assert_eq!(
                t.decode(&ids).as_bytes(),
                detok.as_slice(),
                "{short} {name}: decode"
            );
            assert_eq!(
                t.decode(&t.encode(text, no_bos)),
                text,
                "{short} {name}: round trip"
            );
        }
    }
}

#[test]
fn stream_decoder_never_emits_partial_characters() {
    for (short, _) in MODELS {
        let t = tokenizer(short);
        let g = golden(short);
        let mut held_back = 0;
        for c in cases(&g) {
            let name = c["name"].as_str().expect("name");
            if !matches!(
                name,
                "emoji"
                    | "emoji_zwj"
                    | "emoji_flags"
                    | "chinese"
                    | "japanese"
                    | "korean"
                    | "hindi"
                    | "mixed_scripts"
            ) {
                continue;
            }
            let ids = ids_of(&c["ids"]);
            let mut d = StreamDecoder::new();
            let mut text = String::new();
            for &id in &ids {
                let piece = d.push(t, id);
                assert!(
                    !piece.contains('\u{FFFD}'),
                    "{short} {name}: partial char emitted at id {id}"
                );
                if d.has_pending() {
                    held_back += 1;
                }
                text.push_str(&piece);
            }
            assert!(!d.has_pending(), "{short} {name}: bytes left over");
            text.push_str(&d.finish());
            assert_eq!(text, t.decode(&ids), "{short} {name}");
            assert_eq!(text, c["text"].as_str().expect("text"), "{short} {name}");
        }
        assert!(
            held_back > 0,
            "{short}: no token ever split a character; the test proves nothing"
        );
    }
}

#[test]
fn chat_templates_render_like_transformers() {
    for (short, file) in MODELS {
        let f = open_model(file);
        let tmpl = ChatTemplate::from_gguf(&f)
            .unwrap_or_else(|e| panic!("{short}: {e}"))
            .unwrap_or_else(|| panic!("{short}: no chat template"));
        let g = golden(short);
        let chats = g["chat"].as_array().expect("chat array");
        assert!(!chats.is_empty(), "{short}: golden has no chat renderings");
        for c in chats {
            let name = c["name"].as_str().expect("name");
            let messages: Vec<ChatMessage> =
                serde_json::from_value(c["messages"].clone()).expect("messages");
            let gen = c["add_generation_prompt"].as_bool().expect("flag");
            let got = tmpl
                .render(&messages, gen)
                .unwrap_or_else(|e| panic!("{short} {name}: {e}"));
            assert_eq!(
                got,
                c["rendered"].as_str().expect("rendered"),
                "{short} {name}"
            );
        }
    }
}

#[test]
fn qwen_system_user_prompt_is_exact() {
    let f = open_model(MODELS[1].1);
    let tmpl = ChatTemplate::from_gguf(&f)
        .expect("template")
        .expect("present");
    let msgs = [
        ChatMessage {
            role: "system".into(),
            content: "You are terse.".into(),
        },
        ChatMessage {
            role: "user".into(),
            content: "hi".into(),
        },
    ];
    let out = tmpl.render(&msgs, true).expect("renders");
    assert_eq!(
        out,
        "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    );
    let t = tokenizer("qwen2");
    let ids = t.encode(&out, EncodeOptions::default());
    assert_eq!(ids.first().copied(), t.token_id("<|im_start|>"));
    assert_eq!(
        ids.iter().filter(|&&i| t.is_eog(i)).count(),
        2,
        "two <|im_end|>"
    );
}

#[test]
fn encoding_a_few_kilobytes_takes_milliseconds() {
    let unit = "The quick brown fox — 北京 東京 🙂 x = f(42, \"y\");\n\tfn main() { let v = vec![1, 2, 3]; }\n";
    let text: String = unit.repeat(8192 / unit.len() + 1);
    for (short, _) in MODELS {
        let t = tokenizer(short);
        let start = Instant::now();
        let ids = t.encode(&text, EncodeOptions::default());
        let took = start.elapsed();
        eprintln!(
            "{short}: encoded {} bytes into {} ids in {took:?}",
            text.len(),
            ids.len()
        );
        assert!(ids.len() > 1000, "{short}: {} ids", ids.len());
        assert_eq!(t.decode(&ids), text);
        // Generous for a shared 2-core machine; typical is a few ms.
        assert!(
            took.as_millis() < 250,
            "{short}: encoding {} bytes took {took:?}",
            text.len()
        );
    }
}
