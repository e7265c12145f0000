//! 200 seeded random JSON schemas (nested objects, arrays, enums, numbers
//! with bounds, required and optional fields, string patterns and
//! lengths): every constrained output ends where its grammar accepts,
//! parses, and validates under its schema, checked by the `jsonschema`
//! crate. Zero invalid outputs. All 200 requests run in one engine,
//! batched, on SmolLM2-135M.
//!
//! Every generated schema bounds its output (string lengths, item counts,
//! number ranges with a `multipleOf` that caps the fraction digits, closed
//! objects), so a request cannot run on to `max_tokens` inside a value.

use std::collections::HashMap;

use fak_engine::{
    Constraint, Engine, EngineConfig, Event, FinishReason, PagedKvConfig, PrefixCache, Request,
    RequestId, SamplingParams,
};
use fak_model::KvType;
use serde_json::{json, Map, Value};

mod common;

use common::{chat, model, tok};

/// How many schemas the test runs.
const N_SCHEMAS: u64 = 200;

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
    fn int(&mut self, lo: i64, span: u64) -> i64 {
        lo + self.below(span) as i64
    }
}

const WORDS: [&str; 10] = [
    "id", "name", "size", "kind", "tags", "score", "items", "ok", "owner", "note",
];

const PATTERNS: [&str; 5] = [
    "^[a-z]{2,6}$",
    "^[A-Z][a-z]{1,5}$",
    "^[0-9]{3}-[0-9]{2}$",
    "^(cat|dog|bird)s?$",
    "^v[0-9]\\.[0-9]$",
];

/// A scalar schema.
fn leaf(r: &mut Lcg) -> Value {
    match r.below(10) {
        0 => {
            let lo = r.int(-100, 150);
            json!({"type": "integer", "minimum": lo, "maximum": lo + 1 + r.below(300) as i64})
        }
        1 => {
            let lo = r.int(-10, 30);
            json!({"type": "integer", "exclusiveMinimum": lo, "exclusiveMaximum": lo + 2 + r.below(50) as i64})
        }
        // A bare bounded "number" has unbounded fraction digits, and a
        // small model can emit zeros until max_tokens; multipleOf caps them.
        2 => {
            let lo = r.int(-5, 10) as f64;
            let step = [0.5, 0.25][r.below(2) as usize];
            json!({"type": "number", "minimum": lo, "maximum": lo + 1.0 + r.below(20) as f64, "multipleOf": step})
        }
        3 => {
            let lo = r.below(4);
            json!({"type": "string", "minLength": lo, "maxLength": lo + 1 + r.below(12)})
        }
        4 => {
            json!({"type": "string", "pattern": PATTERNS[r.below(PATTERNS.len() as u64) as usize]})
        }
        5 => json!({"enum": ["red", "green", "blue", 3, null]}),
        6 => json!({"type": "boolean"}),
        7 => json!({"type": "string", "enum": ["low", "mid", "high"]}),
        8 => {
            let c = [json!("fixed"), json!("yes"), json!(7)];
            json!({"const": c[r.below(3) as usize]})
        }
        _ => json!({"type": ["integer", "null"], "minimum": 0, "maximum": 9}),
    }
}

/// A property's schema: a scalar, an array, or (above `depth` 2) a
/// nested object. Arrays hold scalars or objects of scalars, at most 3 of
/// them, so an output stays short.
fn schema(r: &mut Lcg, depth: u32) -> Value {
    let pick = if depth >= 2 { r.below(4) } else { r.below(5) };
    match pick {
        0..=1 => leaf(r),
        2 => {
            let lo = r.below(2);
            let items = if depth < 2 && r.below(2) == 0 {
                object(r, 2)
            } else {
                leaf(r)
            };
            json!({
                "type": "array",
                "items": items,
                "minItems": lo,
                "maxItems": lo + 1 + r.below(2),
            })
        }
        3 if depth >= 2 => leaf(r),
        _ => object(r, depth + 1),
    }
}

fn object(r: &mut Lcg, depth: u32) -> Value {
    let n = 1 + r.below(if depth >= 2 { 3 } else { 4 }) as usize;
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

/// The schema of seed `seed`.
fn seeded(seed: u64) -> Value {
    let mut r = Lcg(seed.wrapping_mul(0x9E37_79B9) + 17);
    object(&mut r, 0)
}

/// Whether `s` has an object schema below an array's `items`.
fn object_in_array(s: &Value, in_array: bool) -> bool {
    if in_array && s["type"] == "object" {
        return true;
    }
    s["properties"]
        .as_object()
        .into_iter()
        .flat_map(|p| p.values())
        .any(|p| object_in_array(p, in_array))
        || s.get("items").is_some_and(|i| object_in_array(i, true))
}

#[test]
fn the_generator_covers_every_keyword_and_the_validator_rejects() {
    let all: String = (0..N_SCHEMAS).map(|s| seeded(s).to_string()).collect();
    for kw in [
        "\"properties\"",
        "\"required\"",
        "\"items\"",
        "\"minItems\"",
        "\"enum\"",
        "\"const\"",
        "\"minimum\"",
        "\"exclusiveMaximum\"",
        "\"multipleOf\"",
        "\"pattern\"",
        "\"minLength\"",
        "\"boolean\"",
        "\"null\"",
    ] {
        assert!(all.contains(kw), "no schema uses {kw}");
    }
    // The nesting reaches objects inside arrays inside objects.
    assert!((0..N_SCHEMAS).any(|s| object_in_array(&seeded(s), false)));
    // The crate validates what the engine outputs: it must say no.
    let s = json!({
        "type": "object",
        "properties": {
            "n": {"type": "number", "minimum": 0, "maximum": 2, "multipleOf": 0.5},
            "p": {"type": "string", "pattern": PATTERNS[2]},
        },
        "required": ["n"],
        "additionalProperties": false,
    });
    let v = jsonschema::validator_for(&s).expect("schema");
    assert!(v.is_valid(&json!({"n": 1.5, "p": "123-45"})));
    for bad in [
        json!({"n": 1.25}),
        json!({"n": 2.5}),
        json!({"p": "123-45"}),
        json!({"n": 1, "p": "12-345"}),
        json!({"n": 1, "q": 0}),
        json!([1]),
    ] {
        assert!(!v.is_valid(&bad), "{bad} passed");
    }
}

#[derive(Default)]
struct Out {
    text: String,
    tokens: usize,
    finish: Option<FinishReason>,
}

#[test]
fn outputs_of_200_random_schemas_validate() {
    let t0 = std::time::Instant::now();
    let cfg = EngineConfig {
        kv: PagedKvConfig {
            block_size: 16,
            n_blocks: 4096,
            kv_type: KvType::F16,
            window: fak_engine::KvWindow::Drop,
        },
        token_budget: 256,
        max_running: 128,
        max_waiting: None,
        n_ctx: 1024,
        prefix_cache: PrefixCache::On,
        prefill: fak_engine::SERIAL_PREFILL,
        mask: fak_engine::MaskMode::default(),
    };
    let mut e = Engine::new(model(), Some(tok()), cfg).expect("engine");
    let p = chat("Reply with a JSON object.");
    let mut reqs: Vec<(RequestId, Value)> = Vec::new();
    for seed in 0..N_SCHEMAS {
        let s = seeded(seed);
        let req = Request {
            sampling: SamplingParams {
                temperature: 0.7,
                seed,
                ..SamplingParams::greedy()
            },
            constraint: Some(Constraint::JsonSchema(s.to_string())),
            ..Request::greedy(p.clone(), 384)
        };
        let id = e
            .add(req)
            .unwrap_or_else(|err| panic!("seed {seed}: {s}: {err}"));
        reqs.push((id, s));
    }
    let mut outs: HashMap<RequestId, Out> = HashMap::new();
    while e.has_work() {
        for ev in e.step().expect("step") {
            let o = outs.entry(ev.id()).or_default();
            match ev {
                Event::Token { text, .. } => {
                    o.text.push_str(&text);
                    o.tokens += 1;
                }
                Event::Finished { reason, text, .. } => {
                    o.text.push_str(&text);
                    o.finish = Some(reason);
                }
                Event::Failed { error, .. } => panic!("{error}"),
                Event::Admitted { .. } => {}
            }
        }
    }
    let mut invalid = Vec::new();
    let mut tokens = 0;
    for (seed, (id, s)) in reqs.iter().enumerate() {
        let o = &outs[id];
        tokens += o.tokens;
        let validator = jsonschema::validator_for(s)
            .unwrap_or_else(|err| panic!("seed {seed}: the crate rejects {s}: {err}"));
        let why = match (&o.finish, serde_json::from_str::<Value>(&o.text)) {
            (Some(FinishReason::EndOfGeneration), Ok(v)) => validator
                .iter_errors(&v)
                .map(|err| err.to_string())
                .collect::<Vec<_>>()
                .join("; "),
            (Some(FinishReason::EndOfGeneration), Err(err)) => format!("not JSON: {err}"),
            (finish, _) => format!("finished with {finish:?}"),
        };
        if !why.is_empty() {
            invalid.push(format!(
                "seed {seed}: {why}\n  output {}\n  schema {s}",
                o.text
            ));
        }
    }
    let st = e.stats();
    eprintln!(
        "{N_SCHEMAS} schemas: {tokens} tokens, {} masks, {:?} per mask, {:.1?} in all",
        st.constraint_masks,
        st.constraint_mask_time / st.constraint_masks.max(1) as u32,
        t0.elapsed()
    );
    assert!(
        invalid.is_empty(),
        "{} of {N_SCHEMAS} outputs are invalid:\n{}",
        invalid.len(),
        invalid.join("\n")
    );
}
