//! The Responses API and the Messages API over raw HTTP: bad input gets a
//! 4xx in each API's own error shape, whatever it is (wrong types, unknown
//! item and block types, missing fields, malformed JSON, and every body
//! made by cutting a valid one short or swapping one of its values for
//! another type), and the server keeps answering (`/health` 200) after
//! all of it. The official clients' tests are in tests/openai.

use serde_json::{json, Value};

mod common;
use common::*;

/// Each leaf value of `v` (and each whole field) replaced by values of
/// other types: the bodies a careless client could send.
fn mutations(v: &Value) -> Vec<Value> {
    let others = [
        json!(null),
        json!(3),
        json!(-1),
        json!("x"),
        json!([]),
        json!({}),
        json!(true),
        json!([{"type": "bogus"}]),
    ];
    let mut out = Vec::new();
    fn walk(v: &Value, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        out.push(path.clone());
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    path.push(k.clone());
                    walk(x, path, out);
                    path.pop();
                }
            }
            Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    path.push(i.to_string());
                    walk(x, path, out);
                    path.pop();
                }
            }
            _ => {}
        }
    }
    let mut paths = Vec::new();
    walk(v, &mut Vec::new(), &mut paths);
    for p in paths.iter().filter(|p| !p.is_empty()) {
        for o in &others {
            let mut m = v.clone();
            let mut at = &mut m;
            for k in &p[..p.len() - 1] {
                at = match at {
                    Value::Object(o) => o.get_mut(k).unwrap(),
                    Value::Array(a) => &mut a[k.parse::<usize>().unwrap()],
                    _ => unreachable!(),
                };
            }
            let last = &p[p.len() - 1];
            match at {
                Value::Object(o2) => {
                    o2.insert(last.clone(), o.clone());
                }
                Value::Array(a) => a[last.parse::<usize>().unwrap()] = o.clone(),
                _ => unreachable!(),
            }
            out.push(m);
        }
    }
    out
}

/// Checks a reply to a mutated body: a success, or a 4xx in the API's shape.
fn check(r: &Resp, anthropic: bool, what: &str) {
    assert!(
        r.status == 200 || (400..500).contains(&r.status),
        "{what}: status {} {}",
        r.status,
        r.text()
    );
    if r.status == 200 {
        return;
    }
    let v = r.json();
    if anthropic {
        assert_eq!(v["type"], "error", "{what}: {v}");
        assert!(v["error"]["type"].is_string(), "{what}: {v}");
        assert!(v["error"]["message"].is_string(), "{what}: {v}");
    } else {
        assert!(v["error"]["message"].is_string(), "{what}: {v}");
        assert!(v["error"]["type"].is_string(), "{what}: {v}");
    }
}

#[test]
fn bad_input_gets_each_apis_own_4xx_and_no_crash() {
    let s = Server::start(&["--ctx", "1024"]);
    let responses = json!({
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi"}]},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "ok"}
        ],
        "instructions": "Be brief.",
        "max_output_tokens": 2,
        "temperature": 0,
        "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
        "tool_choice": "auto",
        "text": {"format": {"type": "text"}},
        "store": false
    });
    let messages = json!({
        "max_tokens": 2,
        "system": [{"type": "text", "text": "Be brief."}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}
        ],
        "tools": [{"name": "f", "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "auto"},
        "temperature": 0
    });
    // The valid bodies are answered.
    s.post("/v1/responses", &responses).ok();
    s.post("/v1/messages", &messages).ok();
    let mut n = 0;
    for (path, body, anthropic) in [
        ("/v1/responses", &responses, false),
        ("/v1/messages", &messages, true),
        ("/v1/messages/count_tokens", &messages, true),
    ] {
        for m in mutations(body) {
            check(&s.post(path, &m), anthropic, &format!("{path} {m}"));
            n += 1;
        }
        let text = serde_json::to_vec(body).unwrap();
        for cut in [0, 1, text.len() / 3, text.len() / 2, text.len() - 1] {
            let r = s.post_raw(path, &[], &text[..cut]);
            assert_eq!(r.status, 400, "{path} cut at {cut}: {}", r.text());
            check(&r, anthropic, &format!("{path} cut at {cut}"));
            n += 1;
        }
    }
    assert!(n > 300, "{n} bodies");
    // Specific refusals, in each API's words.
    for (path, body, status, anthropic) in [
        (
            "/v1/responses",
            json!({"input": [{"type": "bogus"}]}),
            400,
            false,
        ),
        (
            "/v1/responses",
            json!({"input": "x", "background": true}),
            400,
            false,
        ),
        (
            "/v1/responses",
            json!({"input": "x", "previous_response_id": "resp_0"}),
            404,
            false,
        ),
        (
            "/v1/responses",
            json!({"input": "x", "model": "other"}),
            404,
            false,
        ),
        (
            "/v1/messages",
            json!({"messages": [{"role": "user", "content": "x"}]}),
            400,
            true,
        ),
        (
            "/v1/messages",
            json!({"max_tokens": 2, "messages": [{"role": "user", "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": ""}}]}]}),
            400,
            true,
        ),
        (
            "/v1/messages",
            json!({"max_tokens": 2, "model": "other", "messages": []}),
            404,
            true,
        ),
    ] {
        let r = s.post(path, &body);
        assert_eq!(r.status, status, "{path} {body}: {}", r.text());
        check(&r, anthropic, &format!("{path} {body}"));
    }
    let v = s
        .post(
            "/v1/messages",
            &json!({"max_tokens": 2, "model": "other", "messages": []}),
        )
        .json();
    assert_eq!(v["error"]["type"], "not_found_error", "{v}");
    assert_eq!(s.get("/v1/responses/resp_0").status, 404);
    s.assert_healthy();
}

#[test]
fn api_keys_are_checked_in_each_apis_shape() {
    let s = Server::start(&["--ctx", "1024", "--api-key", "k1"]);
    let body = json!({"max_tokens": 2, "messages": [{"role": "user", "content": "Hi"}]});
    let r = s.post("/v1/messages", &body);
    assert_eq!(r.status, 401);
    assert_eq!(
        r.json()["error"]["type"],
        "authentication_error",
        "{}",
        r.text()
    );
    let r = s.post(
        "/v1/responses",
        &json!({"input": "Hi", "max_output_tokens": 2}),
    );
    assert_eq!(r.status, 401);
    assert_eq!(r.json()["error"]["code"], "invalid_api_key", "{}", r.text());
    let r = s.post_raw(
        "/v1/messages",
        &[("x-api-key", "k1"), ("content-type", "application/json")],
        &serde_json::to_vec(&body).unwrap(),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    s.post_key(
        "/v1/responses",
        "k1",
        &json!({"input": "Hi", "max_output_tokens": 2}),
    )
    .ok();
}

#[test]
fn stored_responses_survive_a_restart_with_state_dir() {
    let dir = std::env::temp_dir().join(format!("fak-responses-{}", rand_suffix()));
    let d = dir.to_str().expect("utf-8 path");
    let flags = ["--ctx", "1024", "--state-dir", d];
    let s = Server::start(&flags);
    let ask = json!({"input": "What is the capital of France?", "max_output_tokens": 6, "temperature": 0});
    let r1 = s.post("/v1/responses", &ask).ok();
    let id = r1["id"].as_str().expect("id").to_string();
    let unstored = s
        .post(
            "/v1/responses",
            &json!({"input": "Hi", "max_output_tokens": 2, "store": false}),
        )
        .ok();
    drop(s);

    let s = Server::start(&flags);
    let got = s.get(&format!("/v1/responses/{id}")).ok();
    assert_eq!(got["id"], r1["id"]);
    assert_eq!(got["output"], r1["output"]);
    let other = unstored["id"].as_str().expect("id");
    assert_eq!(s.get(&format!("/v1/responses/{other}")).status, 404);
    // The conversation came back: a continuation sees it.
    let more = json!({"input": "And of Italy?", "previous_response_id": id,
                      "max_output_tokens": 6, "temperature": 0});
    let r2 = s.post("/v1/responses", &more).ok();
    let (p1, o1) = (
        r1["usage"]["input_tokens"].as_u64(),
        r1["usage"]["output_tokens"].as_u64(),
    );
    let p2 = r2["usage"]["input_tokens"].as_u64();
    assert!(p2 > Some(p1.unwrap_or(0) + o1.unwrap_or(0)), "{r1} {r2}");
    // Deleting removes its file: gone after the next restart too.
    let del = s
        .try_request("DELETE", &format!("/v1/responses/{id}"), &[], b"")
        .expect("DELETE");
    assert_eq!(del.status, 200, "{}", del.text());
    drop(s);
    let s = Server::start(&flags);
    assert_eq!(s.get(&format!("/v1/responses/{id}")).status, 404);
    assert_eq!(
        s.get(&format!("/v1/responses/{}", r2["id"].as_str().expect("id")))
            .status,
        200
    );
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

fn rand_suffix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
        ^ u64::from(std::process::id())
}
