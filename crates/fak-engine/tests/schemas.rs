//! Seeded random JSON schemas (nested objects, arrays, enums, bounded
//! numbers, required fields, patterns): every constrained output parses
//! and validates under its schema. `valid` below checks the keywords the
//! generator uses; the HTTP test in tests/openai checks served outputs
//! with the `jsonschema` Python package.

use fak_engine::{
    Constraint, Engine, EngineConfig, Event, FinishReason, PagedKvConfig, PrefixCache, Request,
    RequestId, SamplingParams,
};
use fak_model::KvType;
use fak_tokenizer::{ChatMessage, ChatTemplate, EncodeOptions};
use serde_json::{json, Map, Value};

mod common;

use common::{model, tok};

/// A small LCG, so the schemas are the same on every run.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const WORDS: [&str; 8] = ["id", "name", "size", "kind", "tags", "score", "items", "ok"];

fn leaf(r: &mut Lcg) -> Value {
    match r.below(7) {
        0 => {
            let lo = r.below(50) as i64 - 20;
            json!({"type": "integer", "minimum": lo, "maximum": lo + 1 + r.below(200) as i64})
        }
        // Not a bare bounded "number": its fraction digits are unbounded,
        // and a small model can emit zeros until max_tokens (seen: seed 9).
        1 => json!({"type": "number", "enum": [0.5, 1.25, 10]}),
        2 => json!({"type": "string", "maxLength": 1 + r.below(12)}),
        3 => json!({"type": "string", "pattern": "^[a-z]{2,6}$"}),
        4 => json!({"enum": ["red", "green", "blue", 3, null]}),
        5 => json!({"type": "boolean"}),
        _ => json!({"type": "string", "enum": ["low", "mid", "high"]}),
    }
}

fn schema(r: &mut Lcg, depth: u32) -> Value {
    let pick = if depth >= 2 { 0 } else { r.below(4) };
    match pick {
        0 | 1 => leaf(r),
        2 => json!({
            "type": "array",
            "items": schema(r, depth + 1),
            "minItems": r.below(2),
            "maxItems": 1 + r.below(3),
        }),
        _ => object(r, depth + 1),
    }
}

fn object(r: &mut Lcg, depth: u32) -> Value {
    let n = 1 + r.below(4) as usize;
    let mut props = Map::new();
    let mut required = Vec::new();
    for k in 0..n {
        let name = format!("{}{k}", WORDS[r.below(WORDS.len() as u64) as usize]);
        if k == 0 || r.below(2) == 0 {
            required.push(Value::String(name.clone()));
        }
        props.insert(name, schema(r, depth));
    }
    json!({
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": false,
    })
}

/// Checks `v` against `s` for the keywords [`object`] and [`leaf`] use.
fn valid(s: &Value, v: &Value) -> Result<(), String> {
    let fail = |what: &str| Err(format!("{v} fails {what} of {s}"));
    if let Some(e) = s.get("enum").and_then(Value::as_array) {
        if !e.contains(v) {
            return fail("enum");
        }
    }
    let ty = s.get("type").and_then(Value::as_str);
    let num = |k: &str| s.get(k).and_then(Value::as_f64);
    match ty {
        None => Ok(()),
        Some("boolean") if v.is_boolean() => Ok(()),
        Some("integer" | "number") => {
            let Some(x) = v.as_f64() else {
                return fail("type");
            };
            if ty == Some("integer") && !(v.is_i64() || v.is_u64()) {
                return fail("integer");
            }
            if num("minimum").is_some_and(|m| x < m) || num("maximum").is_some_and(|m| x > m) {
                return fail("bounds");
            }
            Ok(())
        }
        Some("string") => {
            let Some(t) = v.as_str() else {
                return fail("type");
            };
            if num("maxLength").is_some_and(|m| t.chars().count() as f64 > m) {
                return fail("maxLength");
            }
            if s.get("pattern").is_some()
                && !((2..=6).contains(&t.len()) && t.bytes().all(|b| b.is_ascii_lowercase()))
            {
                return fail("pattern ^[a-z]{2,6}$");
            }
            Ok(())
        }
        Some("array") => {
            let Some(a) = v.as_array() else {
                return fail("type");
            };
            let n = a.len() as f64;
            if num("minItems").is_some_and(|m| n < m) || num("maxItems").is_some_and(|m| n > m) {
                return fail("item count");
            }
            a.iter().try_for_each(|x| valid(&s["items"], x))
        }
        Some("object") => {
            let Some(o) = v.as_object() else {
                return fail("type");
            };
            let props = s["properties"].as_object().cloned().unwrap_or_default();
            for r in s["required"].as_array().into_iter().flatten() {
                if !r.as_str().is_some_and(|k| o.contains_key(k)) {
                    return fail("required");
                }
            }
            for (k, x) in o {
                match props.get(k) {
                    Some(ps) => valid(ps, x)?,
                    None => return fail("additionalProperties"),
                }
            }
            Ok(())
        }
        Some(_) => fail("type"),
    }
}

#[test]
fn the_validator_rejects_what_it_should() {
    let mut r = Lcg(5);
    let s = object(&mut r, 0);
    assert!(valid(&s, &json!("not an object")).is_err());
    assert!(valid(&s, &json!({})).is_err(), "required");
    let int = json!({"type": "integer", "minimum": 0, "maximum": 3});
    assert!(valid(&int, &json!(2)).is_ok());
    assert!(valid(&int, &json!(4)).is_err());
    assert!(valid(&int, &json!(1.5)).is_err());
    let pat = json!({"type": "string", "pattern": "^[a-z]{2,6}$"});
    assert!(valid(&pat, &json!("abc")).is_ok());
    assert!(valid(&pat, &json!("aBc")).is_err());
    let arr = json!({"type": "array", "items": {"enum": [1]}, "maxItems": 1});
    assert!(valid(&arr, &json!([1, 1])).is_err());
    assert!(valid(&arr, &json!([2])).is_err());
}

fn prompt() -> Vec<u32> {
    let t = ChatTemplate::from_gguf(model().gguf())
        .expect("template")
        .expect("has a template");
    let text = t
        .render(
            &[ChatMessage {
                role: "user".into(),
                content: "Reply with a JSON object.".into(),
            }],
            true,
        )
        .expect("render");
    tok().encode(&text, EncodeOptions::default())
}

#[test]
fn outputs_of_random_schemas_parse_and_validate() {
    const N: u64 = 32;
    let cfg = EngineConfig {
        kv: PagedKvConfig {
            block_size: 16,
            n_blocks: 1024,
            kv_type: KvType::F16,
        },
        token_budget: 256,
        max_running: 64,
        max_waiting: None,
        n_ctx: 1024,
        prefix_cache: PrefixCache::On,
        prefill: fak_engine::SERIAL_PREFILL,
    };
    let mut e = Engine::new(model(), Some(tok()), cfg).expect("engine");
    let p = prompt();
    let mut reqs: Vec<(RequestId, Value)> = Vec::new();
    for seed in 0..N {
        let mut r = Lcg(seed.wrapping_mul(0x9E37_79B9) + 17);
        let s = object(&mut r, 0);
        let req = Request {
            sampling: SamplingParams {
                temperature: 0.7,
                seed,
                ..SamplingParams::greedy()
            },
            constraint: Some(Constraint::JsonSchema(s.to_string())),
            ..Request::greedy(p.clone(), 400)
        };
        let id = e
            .add(req)
            .unwrap_or_else(|err| panic!("seed {seed}: {s}: {err}"));
        reqs.push((id, s));
    }
    let mut text: std::collections::HashMap<RequestId, (String, Option<FinishReason>)> =
        Default::default();
    while e.has_work() {
        for ev in e.step().expect("step") {
            let o = text.entry(ev.id()).or_default();
            match ev {
                Event::Token { text, .. } => o.0.push_str(&text),
                Event::Finished { reason, text, .. } => {
                    o.0.push_str(&text);
                    o.1 = Some(reason);
                }
                Event::Failed { error, .. } => panic!("{error}"),
                Event::Admitted { .. } => {}
            }
        }
    }
    for (seed, (id, s)) in reqs.iter().enumerate() {
        let (out, reason) = &text[id];
        assert_eq!(
            *reason,
            Some(FinishReason::EndOfGeneration),
            "seed {seed}: did not finish: {s}\n{out}"
        );
        let v: Value = serde_json::from_str(out)
            .unwrap_or_else(|err| panic!("seed {seed}: {err}: {out:?}\nschema {s}"));
        if let Err(why) = valid(s, &v) {
            panic!("seed {seed}: {out}\nschema {s}\n{why}");
        }
    }
    let st = e.stats();
    eprintln!(
        "{N} schemas: {} masks, {:?} per mask",
        st.constraint_masks,
        st.constraint_mask_time / st.constraint_masks.max(1) as u32
    );
}
