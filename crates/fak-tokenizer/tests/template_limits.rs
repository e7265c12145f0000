//! Chat templates are untrusted input: a render runs on a fuel budget and
//! an output cap, and a template that blows either on a probe conversation
//! is refused when it is loaded (directly or from a GGUF file).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use fak_gguf::{GgufFile, GgufWriter, MetaArray, MetaValue};
use fak_tokenizer::{ChatMessage, ChatTemplate, TemplateLimit, TokenizerError};

/// Two nested loops of 100,000 iterations each: 10^10 steps unbounded.
const NESTED_LOOPS: &str = "{% for i in range(100000) %}{% for j in range(100000) %}\
                            {{ '' }}{% endfor %}{% endfor %}";

/// Writes 1 KiB of text per iteration, 100,000 x 100,000 times: about
/// 10 TB unbounded, and the output cap is reached long before the fuel.
fn huge_output() -> String {
    format!(
        "{{% for i in range(100000) %}}{{% for j in range(100000) %}}{}{{% endfor %}}{{% endfor %}}",
        "x".repeat(1024)
    )
}

/// Cheap on the probe (three messages), endless on a long conversation.
const GROWS_WITH_INPUT: &str = "{% if messages | length > 3 %}{% for i in range(100000) %}\
                                {% for j in range(100000) %}{{ '' }}{% endfor %}{% endfor %}\
                                {% endif %}{% for m in messages %}{{ m.content }}{% endfor %}";

fn limit_of(r: Result<ChatTemplate, TokenizerError>) -> Option<TemplateLimit> {
    match r {
        Err(TokenizerError::TemplateLimit { limit }) => Some(limit),
        _ => None,
    }
}

fn msgs(n: usize) -> Vec<ChatMessage> {
    (0..n)
        .map(|i| ChatMessage {
            role: if i % 2 == 0 { "user" } else { "assistant" }.into(),
            content: format!("message {i}"),
        })
        .collect()
}

#[test]
fn nested_loops_are_refused_at_load_by_fuel() {
    let t0 = Instant::now();
    let r = ChatTemplate::new(NESTED_LOOPS, "<s>", "</s>");
    assert_eq!(limit_of(r), Some(TemplateLimit::Fuel));
    assert!(t0.elapsed() < Duration::from_secs(60), "{:?}", t0.elapsed());
}

#[test]
fn huge_output_is_refused_at_load_by_the_output_cap() {
    let r = ChatTemplate::new(&huge_output(), "<s>", "</s>");
    assert_eq!(limit_of(r), Some(TemplateLimit::Output));
}

#[test]
fn a_render_past_the_probe_stops_with_a_one_line_error() {
    let t = ChatTemplate::new(GROWS_WITH_INPUT, "", "").expect("the probe is cheap");
    assert_eq!(
        t.render(&msgs(3), true).expect("three messages"),
        "message 0message 1message 2"
    );
    let e = t.render(&msgs(4), true).unwrap_err();
    assert!(
        matches!(
            e,
            TokenizerError::TemplateLimit {
                limit: TemplateLimit::Fuel
            }
        ),
        "{e}"
    );
    let text = e.to_string();
    assert!(text.contains("fuel limit"), "{text}");
    assert_eq!(text.lines().count(), 1, "{text}");
}

#[test]
fn a_hostile_template_in_a_gguf_file_is_refused() {
    let mut w = GgufWriter::new();
    w.add_kv(
        "tokenizer.chat_template",
        MetaValue::Str(NESTED_LOOPS.into()),
    )
    .expect("kv");
    w.add_kv(
        "tokenizer.ggml.tokens",
        MetaValue::Array(MetaArray::Str(vec!["<s>".into(), "</s>".into()])),
    )
    .expect("kv");
    let path =
        std::env::temp_dir().join(format!("fak-hostile-template-{}.gguf", std::process::id()));
    w.write_file(&path).expect("write");
    let f = GgufFile::open(&path).expect("open");
    let r = ChatTemplate::from_gguf(&f);
    let _ = std::fs::remove_file(&path);
    match r {
        Err(TokenizerError::TemplateLimit { limit }) => assert_eq!(limit, TemplateLimit::Fuel),
        other => panic!("expected the fuel limit, got {other:?}"),
    }
}

/// The limits leave real templates ample room: 2,000 messages render.
#[test]
fn real_templates_fit_the_limits() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models");
    for file in [
        "smollm2-135m-instruct-q4_1.gguf",
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    ] {
        let path = root.join(file);
        assert!(
            path.exists(),
            "{} is missing: run scripts/fetch-models.sh",
            path.display()
        );
        let f = GgufFile::open(&path).expect("open");
        let t = ChatTemplate::from_gguf(&f)
            .expect("template")
            .expect("has one");
        let text = t
            .render(&msgs(2000), true)
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(text.contains("message 1999"), "{file}");
    }
}
