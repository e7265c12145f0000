//! `response_format` over HTTP: json_object and json_schema outputs parse
//! and follow the schema; a schema that does not compile is a 400 naming
//! `response_format`.

use serde_json::{json, Value};

mod common;
use common::*;

fn with_format(content: &str, max_tokens: u32, format: Value) -> Value {
    let mut b = chat_body(content, max_tokens);
    b["response_format"] = format;
    b
}

#[test]
fn response_format_constrains_chat_and_completions() {
    let s = Server::start(&["--ctx", "2048"]);
    let schema = json!({
        "type": "object",
        "properties": {
            "city": {"type": "string", "maxLength": 20},
            "population": {"type": "integer", "minimum": 0, "maximum": 100000000},
            "size": {"enum": ["small", "large"]}
        },
        "required": ["city", "population", "size"],
        "additionalProperties": false
    });
    let fmt = json!({"type": "json_schema", "json_schema": {"name": "city", "schema": schema, "strict": true}});
    for seed in 0..3 {
        let mut b = with_format("Name a city as JSON.", 128, fmt.clone());
        b["temperature"] = json!(1.0);
        b["seed"] = json!(seed);
        let v = s.post("/v1/chat/completions", &b).ok();
        assert_eq!(v["choices"][0]["finish_reason"], "stop", "{v}");
        let out: Value = serde_json::from_str(&chat_text(&v)).expect("JSON");
        let o = out.as_object().expect("object");
        assert_eq!(o.len(), 3, "{out}");
        assert!(o["city"].as_str().is_some_and(|c| c.chars().count() <= 20));
        assert!(o["population"].as_u64().is_some_and(|p| p <= 100_000_000));
        assert!(["small", "large"].contains(&o["size"].as_str().unwrap_or("")));
    }
    // Streamed: the concatenated deltas are the same object.
    let mut b = with_format("Name a city as JSON.", 128, fmt.clone());
    b["stream"] = json!(true);
    let (chunks, done) = s.stream("/v1/chat/completions", &[], &b).rest();
    assert!(done);
    let text = stream_text(&chunks, true);
    let streamed: Value = serde_json::from_str(&text).expect("streamed JSON");
    b["stream"] = json!(false);
    let whole = s.post("/v1/chat/completions", &b).ok();
    assert_eq!(
        streamed,
        serde_json::from_str::<Value>(&chat_text(&whole)).unwrap()
    );

    let v = s
        .post(
            "/v1/chat/completions",
            &with_format("Hello!", 96, json!({"type": "json_object"})),
        )
        .ok();
    if v["choices"][0]["finish_reason"] == "stop" {
        let out: Value = serde_json::from_str(&chat_text(&v)).expect("JSON");
        assert!(out.is_object(), "{out}");
    }
    let c = s
        .post(
            "/v1/completions",
            &json!({"prompt": "The answer is", "max_tokens": 8, "temperature": 0,
                    "response_format": {"type": "regex", "regex": "(yes|no)"}}),
        )
        .ok();
    let t = completion_text(&c);
    assert!(t == "yes" || t == "no", "{t:?}");

    for (bad, what) in [
        (
            json!({"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "integer", "minimum": 5, "maximum": 1}}}),
            "empty range",
        ),
        (json!({"type": "regex", "regex": "("}), "bad regex"),
        (json!({"type": "yaml"}), "unknown type"),
        (
            json!({"type": "json_schema", "json_schema": {"schema": {}}}),
            "no name",
        ),
    ] {
        let r = s.post_raw(
            "/v1/chat/completions",
            &[],
            with_format("Hi", 4, bad).to_string().as_bytes(),
        );
        let e = assert_error(&r, 400, what);
        assert_eq!(e["param"], "response_format", "{what}: {e}");
    }
    s.assert_healthy();
}

/// `fak serve --mask-mode overlap` (masks computed on a worker during the
/// forward pass) answers a schema-constrained request with the same text
/// as the default check-first mode, for sampled and greedy requests;
/// `/metrics` counts the one mask worker overlap starts (none in
/// check-first) and no constraint failures.
#[test]
fn mask_modes_give_the_same_constrained_answers_over_http() {
    let schema = json!({
        "type": "object",
        "properties": {
            "city": {"type": "string", "maxLength": 20},
            "size": {"enum": ["small", "large"]}
        },
        "required": ["city", "size"],
        "additionalProperties": false
    });
    let fmt = json!({"type": "json_schema", "json_schema": {"name": "city", "schema": schema, "strict": true}});
    let answers = |mode: &str| -> Vec<String> {
        let s = Server::start(&["--ctx", "2048", "--mask-mode", mode]);
        let mut out = Vec::new();
        for (seed, temp) in [(0, 0.0), (1, 1.0), (2, 0.8)] {
            let mut b = with_format("Name a city as JSON.", 64, fmt.clone());
            b["temperature"] = json!(temp);
            b["top_p"] = json!(0.9);
            b["seed"] = json!(seed);
            let v = s.post("/v1/chat/completions", &b).ok();
            let text = chat_text(&v);
            let o: Value = serde_json::from_str(&text).expect("JSON");
            assert!(o["city"].as_str().is_some(), "{text}");
            out.push(text);
        }
        let m = s.metrics();
        let workers = if mode == "overlap" { 1.0 } else { 0.0 };
        assert_eq!(m.value("fak:mask_workers_started_total"), workers, "{mode}");
        assert_eq!(m.value("fak:constraint_failures_total"), 0.0, "{mode}");
        out
    };
    assert_eq!(answers("check-first"), answers("overlap"));
}
