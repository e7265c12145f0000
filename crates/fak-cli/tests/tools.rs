//! OpenAI tool calling over HTTP with Qwen2.5-Coder 0.5B (Hermes
//! `<tool_call>` syntax): `tool_choice` required / named / auto, streamed
//! and not, the agent loop (call, tool result, answer), session chat, and
//! the 400s. SmolLM2's template has no tools: `required` there is a 400.

use serde_json::{json, Value};

mod common;
use common::*;

fn weather_tool() -> Value {
    json!({"type": "function", "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 40},
                "unit": {"enum": ["celsius", "fahrenheit"]}
            },
            "required": ["city", "unit"],
            "additionalProperties": false
        }
    }})
}

fn time_tool() -> Value {
    json!({"type": "function", "function": {
        "name": "get_time",
        "description": "The local time in a time zone.",
        "parameters": {
            "type": "object",
            "properties": {"zone": {"type": "string", "maxLength": 40}},
            "required": ["zone"]
        }
    }})
}

fn body(content: &str, choice: Value, max_tokens: u32) -> Value {
    json!({
        "messages": [{"role": "user", "content": content}],
        "tools": [weather_tool(), time_tool()],
        "tool_choice": choice,
        "max_tokens": max_tokens,
        "temperature": 0,
    })
}

/// Checks a call against the two tools' schemas; returns its arguments.
fn check_call(c: &Value) -> (String, Value) {
    assert_eq!(c["type"], "function", "{c}");
    let id = c["id"].as_str().expect("id");
    assert!(id.starts_with("call_") && id.len() > 10, "{id}");
    let name = c["function"]["name"].as_str().expect("name").to_string();
    let args: Value = serde_json::from_str(c["function"]["arguments"].as_str().expect("string"))
        .unwrap_or_else(|e| panic!("arguments do not parse ({e}): {c}"));
    let o = args.as_object().expect("an object");
    match name.as_str() {
        "get_weather" => {
            assert_eq!(o.len(), 2, "{args}");
            assert!(o["city"].as_str().is_some_and(|s| s.chars().count() <= 40));
            assert!(["celsius", "fahrenheit"].contains(&o["unit"].as_str().unwrap_or("")));
        }
        "get_time" => assert!(o["zone"].as_str().is_some_and(|s| s.chars().count() <= 40)),
        other => panic!("unknown function {other}"),
    }
    (name, args)
}

/// The calls of a whole answer, checked.
fn calls_of(v: &Value) -> Vec<(String, Value)> {
    let choice = &v["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls", "{v}");
    let calls = choice["message"]["tool_calls"]
        .as_array()
        .expect("tool_calls");
    assert!(!calls.is_empty(), "{v}");
    calls.iter().map(check_call).collect()
}

/// A streamed answer's calls, reassembled from `delta.tool_calls` the way
/// a client does: the first delta of an index has id, type and name,
/// the later ones argument fragments.
fn streamed_calls(chunks: &[Value]) -> (Vec<Value>, String, String) {
    let mut calls: Vec<Value> = Vec::new();
    let mut content = String::new();
    let mut finish = String::new();
    for c in chunks {
        let Some(choice) = c["choices"].get(0) else {
            continue;
        };
        if let Some(t) = choice["delta"]["content"].as_str() {
            content.push_str(t);
        }
        if let Some(f) = choice["finish_reason"].as_str() {
            finish = f.to_string();
        }
        for d in choice["delta"]["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let i = d["index"].as_u64().expect("index") as usize;
            if i == calls.len() {
                assert!(
                    d["id"].is_string() && d["function"]["name"].is_string(),
                    "{d}"
                );
                assert_eq!(d["type"], "function");
                calls.push(json!({"id": d["id"], "type": "function",
                    "function": {"name": d["function"]["name"], "arguments": ""}}));
            } else {
                assert!(i < calls.len(), "index {i} out of order: {d}");
                assert!(d.get("id").is_none(), "a later delta repeats the id: {d}");
            }
            if let Some(a) = d["function"]["arguments"].as_str() {
                let s = calls[i]["function"]["arguments"]
                    .as_str()
                    .unwrap()
                    .to_string()
                    + a;
                calls[i]["function"]["arguments"] = json!(s);
            }
        }
    }
    (calls, content, finish)
}

#[test]
fn required_and_named_calls_parse_streamed_or_not() {
    let s = Server::start_model(QWEN, &["--ctx", "2048"]);
    let prompt = "What is the weather in Paris, in celsius?";
    let v = s
        .post("/v1/chat/completions", &body(prompt, json!("required"), 96))
        .ok();
    assert!(v["choices"][0]["message"]["content"].is_null(), "{v}");
    let calls = calls_of(&v);
    assert_eq!(calls[0].0, "get_weather", "{v}");

    // Named: the call is that function's, even where the prompt asks
    // for another.
    let named = json!({"type": "function", "function": {"name": "get_time"}});
    let v = s
        .post("/v1/chat/completions", &body(prompt, named.clone(), 96))
        .ok();
    let calls = calls_of(&v);
    assert!(calls.iter().all(|(n, _)| n == "get_time"), "{v}");

    // Streamed, each choice: the reassembled calls are the whole answer's.
    for choice in [json!("required"), named, json!("auto")] {
        let mut b = body(prompt, choice.clone(), 96);
        let whole = s.post("/v1/chat/completions", &b).ok();
        b["stream"] = json!(true);
        let (chunks, done) = s.stream("/v1/chat/completions", &[], &b).rest();
        assert!(done, "{choice}");
        let (calls, content, finish) = streamed_calls(&chunks);
        let w = &whole["choices"][0];
        assert_eq!(finish, w["finish_reason"].as_str().unwrap(), "{choice}");
        let want: Vec<Value> = w["message"]["tool_calls"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert_eq!(calls.len(), want.len(), "{choice}: {chunks:?}");
        for (got, want) in calls.iter().zip(&want) {
            check_call(got);
            assert_eq!(got["function"], want["function"], "{choice}");
        }
        assert_eq!(
            content,
            w["message"]["content"].as_str().unwrap_or(""),
            "{choice}"
        );
        if choice != json!("auto") {
            assert_eq!(finish, "tool_calls");
        }
    }
    s.assert_healthy();
}

#[test]
fn auto_answers_text_or_a_valid_call_and_the_agent_loop_closes() {
    let s = Server::start_model(QWEN, &["--ctx", "2048"]);
    // A greeting needs no tool: text, finish_reason stop.
    let v = s
        .post(
            "/v1/chat/completions",
            &body("Say hello to me.", json!("auto"), 48),
        )
        .ok();
    let m = &v["choices"][0]["message"];
    if m["tool_calls"].is_null() {
        assert!(m["content"].as_str().is_some_and(|t| !t.is_empty()), "{v}");
        assert_ne!(v["choices"][0]["finish_reason"], "tool_calls");
    } else {
        calls_of(&v);
    }

    // The loop: a call, its result, the final answer.
    let mut b = body(
        "What is the weather in Paris, in celsius?",
        json!("auto"),
        96,
    );
    let v = s.post("/v1/chat/completions", &b).ok();
    let calls = calls_of(&v);
    assert_eq!(calls[0].0, "get_weather", "{v}");
    let call = v["choices"][0]["message"]["tool_calls"][0].clone();
    let msgs = b["messages"].as_array_mut().unwrap();
    msgs.push(json!({"role": "assistant", "content": null, "tool_calls": [call.clone()]}));
    msgs.push(json!({"role": "tool", "tool_call_id": call["id"],
                     "content": "{\"temperature\": 22, \"sky\": \"sunny\"}"}));
    b["max_tokens"] = json!(64);
    let v = s.post("/v1/chat/completions", &b).ok();
    let c = &v["choices"][0];
    // Under auto the 0.5B model may call again (seen: the same call);
    // either way the answer is well formed, and a text answer uses the
    // tool's result.
    if c["finish_reason"] == "tool_calls" {
        calls_of(&v);
    } else {
        assert_eq!(c["finish_reason"], "stop", "{v}");
        let answer = c["message"]["content"].as_str().expect("text");
        assert!(answer.contains("22"), "{answer}");
        assert!(c["message"]["tool_calls"].is_null(), "{v}");
    }

    // tool_choice none: plain text, no calls read.
    let v = s
        .post(
            "/v1/chat/completions",
            &body("What is the weather in Paris?", json!("none"), 24),
        )
        .ok();
    assert!(v["choices"][0]["message"]["tool_calls"].is_null(), "{v}");
    assert_ne!(v["choices"][0]["finish_reason"], "tool_calls");
}

#[test]
fn session_chat_keeps_calls_and_tool_answers_in_its_history() {
    let s = Server::start_model(QWEN, &["--ctx", "2048"]);
    let created = s
        .post(
            "/v1/sessions",
            &json!({"messages": [{"role": "system", "content": "You are a weather assistant."}],
                    "tools": [weather_tool(), time_tool()]}),
        )
        .ok();
    let id = created["id"].as_str().expect("id").to_string();
    let path = format!("/v1/sessions/{id}/chat/completions");
    let v = s
        .post(
            &path,
            &json!({"messages": [{"role": "user", "content": "What is the weather in Paris, in celsius?"}],
                    "tool_choice": "required", "max_tokens": 96, "temperature": 0}),
        )
        .ok();
    let calls = calls_of(&v);
    assert_eq!(calls[0].0, "get_weather");
    let call_id = v["choices"][0]["message"]["tool_calls"][0]["id"].clone();

    // A tool answer for an id the session never issued is refused.
    let r = s.post_raw(
        &path,
        &[],
        json!({"messages": [{"role": "tool", "tool_call_id": "call_nope", "content": "x"}],
               "max_tokens": 8})
        .to_string()
        .as_bytes(),
    );
    assert_eq!(assert_error(&r, 400, "unknown id")["param"], "messages");
    // Changing the session's tools is refused.
    let r = s.post_raw(
        &path,
        &[],
        json!({"messages": [{"role": "user", "content": "hi"}], "tools": [time_tool()],
               "max_tokens": 8})
        .to_string()
        .as_bytes(),
    );
    assert_eq!(assert_error(&r, 400, "other tools")["param"], "tools");

    let v = s
        .post(
            &path,
            &json!({"messages": [{"role": "tool", "tool_call_id": call_id,
                                  "content": "{\"temperature\": 22, \"sky\": \"sunny\"}"}],
                    "max_tokens": 64, "temperature": 0}),
        )
        .ok();
    // Under `auto` the 0.5B model answers from the tool's result, or calls
    // the tool again (seen after the one-exp change moved its logits): a
    // text answer must use the result, a call must be valid. Either way the
    // turn is one assistant message in the history below.
    let c = &v["choices"][0];
    match c["finish_reason"].as_str() {
        Some("stop") => assert!(
            c["message"]["content"]
                .as_str()
                .is_some_and(|t| t.contains("22")),
            "{v}"
        ),
        Some("tool_calls") => assert_eq!(calls_of(&v)[0].0, "get_weather", "{v}"),
        _ => panic!("neither an answer nor a call: {v}"),
    }

    let info = s.get(&format!("/v1/sessions/{id}")).json();
    let m = info["messages"].as_array().expect("messages");
    let roles: Vec<&str> = m.iter().map(|x| x["role"].as_str().unwrap()).collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "assistant"],
        "{info}"
    );
    assert_eq!(m[2]["tool_calls"][0]["id"], call_id);
    assert_eq!(m[2]["tool_calls"][0]["function"]["name"], "get_weather");
    assert_eq!(m[3]["tool_call_id"], call_id);
}

#[test]
fn bad_tool_requests_are_400s() {
    let s = Server::start_model(QWEN, &["--ctx", "2048"]);
    let bad_schema = json!({"type": "function", "function": {"name": "f",
        "parameters": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 5, "maximum": 1}},
                       "required": ["n"]}}});
    let mut b = body("Hi", json!("required"), 8);
    b["tools"] = json!([weather_tool(), bad_schema]);
    let cases = [
        (b, "tools", "a schema that does not compile"),
        (
            body(
                "Hi",
                json!({"type": "function", "function": {"name": "nope"}}),
                8,
            ),
            "tool_choice",
            "unknown function",
        ),
        (
            json!({"messages": [{"role": "user", "content": "Hi"},
                                {"role": "tool", "tool_call_id": "call_x", "content": "1"}],
                   "tools": [weather_tool()], "max_tokens": 8}),
            "messages",
            "a tool message without a call",
        ),
        (
            json!({"messages": [{"role": "tool", "content": "1"}], "max_tokens": 8}),
            "messages",
            "a tool message without tool_call_id",
        ),
        (
            json!({"messages": [{"role": "user", "content": "Hi"}],
                   "tools": [{"type": "function", "function": {"name": "has space"}}]}),
            "tools",
            "a bad name",
        ),
    ];
    for (b, param, what) in cases {
        let r = s.post_raw("/v1/chat/completions", &[], b.to_string().as_bytes());
        let e = assert_error(&r, 400, what);
        assert_eq!(e["param"], param, "{what}: {e}");
        if param == "tools" && what.contains("compile") {
            let m = e["message"].as_str().unwrap();
            assert!(m.contains("tools[1] (f)"), "names the tool: {m}");
        }
    }
    s.assert_healthy();
    drop(s);

    // SmolLM2's template has no tool syntax: auto answers in text,
    // required is refused.
    let s = Server::start(&["--ctx", "1024"]);
    let v = s
        .post("/v1/chat/completions", &body("Hi", json!("auto"), 4))
        .ok();
    assert!(v["choices"][0]["message"]["tool_calls"].is_null(), "{v}");
    let r = s.post_raw(
        "/v1/chat/completions",
        &[],
        body("Hi", json!("required"), 4).to_string().as_bytes(),
    );
    let e = assert_error(&r, 400, "no tool syntax");
    assert_eq!(e["param"], "tool_choice");
}

#[test]
fn auto_reads_a_fenced_json_call_whole_and_streamed() {
    // The agent bench's weather task (bench/tools_workload.py, seed 0,
    // episode 0): greedy Qwen2.5-Coder 0.5B answers it with a Markdown
    // JSON block, not <tool_call> tags.
    let s = Server::start_model(QWEN, &["--ctx", "2048"]);
    let name_schema = json!({"type": "string", "minLength": 1, "maxLength": 80});
    let weather = json!({"type": "function", "function": {
        "name": "get_weather", "description": "Weather forecast for a city.",
        "parameters": {"type": "object", "properties": {
            "location": name_schema, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            "days": {"type": "integer", "minimum": 1, "maximum": 7}},
            "required": ["location", "unit"], "additionalProperties": false}}});
    let air = json!({"type": "function", "function": {
        "name": "get_air_quality", "description": "Current air quality index of a city.",
        "parameters": {"type": "object", "properties": {"location": name_schema},
            "required": ["location"], "additionalProperties": false}}});
    let mut b = json!({
        "messages": [
            {"role": "system", "content": "You are a helpful assistant. When a tool can do what the user asks, call it."},
            {"role": "user", "content": "What will the weather be in Lima over the next 2 days? Give me fahrenheit."}
        ],
        "tools": [weather, air],
        "tool_choice": "auto",
        "max_tokens": 128,
        "temperature": 0,
    });
    let v = s.post("/v1/chat/completions", &b).ok();
    let choice = &v["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls", "{v}");
    assert!(choice["message"]["content"].is_null(), "{v}");
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "get_weather", "{v}");
    let text = call["function"]["arguments"].as_str().expect("arguments");
    // Pretty-printed: the object as the model wrote it, which only the
    // whole-reply reading gives (the grammar's calls are compact).
    assert!(text.contains('\n'), "{text:?}");
    let args: Value = serde_json::from_str(text).expect("JSON");
    assert_eq!(args["location"], "Lima", "{args}");
    assert_eq!(args["unit"], "fahrenheit", "{args}");
    // Streamed: the same call, reassembled.
    b["stream"] = json!(true);
    let (chunks, done) = s.stream("/v1/chat/completions", &[], &b).rest();
    assert!(done);
    let (calls, content, finish) = streamed_calls(&chunks);
    assert_eq!(finish, "tool_calls");
    assert_eq!(content, "");
    assert_eq!(calls.len(), 1, "{chunks:?}");
    assert_eq!(calls[0]["function"], call["function"]);
    s.assert_healthy();
}
