//! Constrained decoding ([`Request::constraint`]): outputs match their
//! grammar and end only where it accepts; bad grammars fail at `add`;
//! a constrained request gets the same tokens alone and among others.

use std::collections::HashMap;

use fak_engine::{
    Constraint, Engine, EngineConfig, EngineError, Event, FinishReason, PagedKvConfig, PrefixCache,
    Request, RequestId, SamplingParams,
};
use fak_model::KvType;

mod common;

use common::{chat, model, tok};

fn roomy() -> EngineConfig {
    EngineConfig {
        kv: PagedKvConfig {
            block_size: 16,
            n_blocks: 256,
            kv_type: KvType::F16,
            window: fak_engine::KvWindow::Drop,
        },
        token_budget: 64,
        max_running: 64,
        max_waiting: None,
        n_ctx: 1024,
        prefix_cache: PrefixCache::Off,
        prefill: fak_engine::SERIAL_PREFILL,
        mask: fak_engine::MaskMode::default(),
    }
}

fn engine() -> Engine<'static> {
    Engine::new(model(), Some(tok()), roomy()).expect("engine")
}

fn constrained(prompt: Vec<u32>, c: Constraint, n: usize, seed: u64) -> Request {
    Request {
        sampling: SamplingParams {
            temperature: 1.0,
            seed,
            ..SamplingParams::greedy()
        },
        constraint: Some(c),
        ..Request::greedy(prompt, n)
    }
}

#[derive(Debug, Default, Clone)]
struct Out {
    tokens: Vec<u32>,
    text: String,
    finish: Option<FinishReason>,
    error: Option<String>,
}

fn drain(e: &mut Engine<'_>) -> HashMap<RequestId, Out> {
    let mut outs: HashMap<RequestId, Out> = HashMap::new();
    let mut steps = 0;
    while e.has_work() {
        steps += 1;
        assert!(steps < 5000, "the engine does not finish");
        for ev in e.step().expect("step") {
            let o = outs.entry(ev.id()).or_default();
            match ev {
                Event::Token { token, text, .. } => {
                    o.tokens.push(token);
                    o.text.push_str(&text);
                }
                Event::Finished { reason, text, .. } => {
                    o.text.push_str(&text);
                    o.finish = Some(reason);
                }
                Event::Failed { error, .. } => o.error = Some(error.to_string()),
                Event::Admitted { .. } => {}
            }
        }
    }
    outs
}

fn alone(req: Request) -> Out {
    let mut e = engine();
    let id = e.add(req).expect("add");
    let out = drain(&mut e).remove(&id).unwrap_or_default();
    assert!(out.error.is_none(), "{:?}", out.error);
    out
}

const SCHEMA: &str = r#"{
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 12},
    "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3}
  },
  "required": ["name", "age", "tags"],
  "additionalProperties": false
}"#;

#[test]
fn json_schema_outputs_parse_validate_and_end_at_the_grammar() {
    let prompt = chat("Describe a person as JSON with name, age and tags.");
    for seed in 0..4 {
        let out = alone(constrained(
            prompt.clone(),
            Constraint::JsonSchema(SCHEMA.into()),
            96,
            seed,
        ));
        assert_eq!(out.finish, Some(FinishReason::EndOfGeneration), "{out:?}");
        let v: serde_json::Value = serde_json::from_str(&out.text)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}: {:?}", out.text));
        let o = v.as_object().expect("an object");
        assert_eq!(o.len(), 3, "{v}");
        assert!(o["name"].as_str().is_some_and(|s| s.chars().count() <= 12));
        assert!(o["age"].as_i64().is_some_and(|a| (0..=120).contains(&a)));
        let tags = o["tags"].as_array().expect("tags");
        assert!(tags.len() <= 3);
        assert!(tags
            .iter()
            .all(|t| ["a", "b", "c"].contains(&t.as_str().unwrap_or(""))));
    }
}

#[test]
fn regex_and_lark_outputs_match_whole() {
    let prompt = chat("Give me a code.");
    let out = alone(constrained(
        prompt.clone(),
        Constraint::Regex("[0-9]{3}-[a-z]{2}".into()),
        32,
        7,
    ));
    assert_eq!(out.finish, Some(FinishReason::EndOfGeneration));
    let b = out.text.as_bytes();
    assert_eq!(b.len(), 6, "{:?}", out.text);
    assert!(b[..3].iter().all(u8::is_ascii_digit) && b[3] == b'-');
    assert!(b[4..].iter().all(u8::is_ascii_lowercase));

    let lark = "start: \"yes\" | \"no\"".to_string();
    let out = alone(constrained(prompt, Constraint::Lark(lark), 8, 3));
    assert!(out.text == "yes" || out.text == "no", "{:?}", out.text);
    assert_eq!(out.finish, Some(FinishReason::EndOfGeneration));
}

#[test]
fn json_object_output_is_an_object_even_when_the_model_would_chat() {
    let prompt = chat("Hello! How are you today?");
    let free = alone(Request::greedy(prompt.clone(), 24));
    assert!(serde_json::from_str::<serde_json::Value>(&free.text).is_err());
    let out = alone(constrained(prompt, Constraint::JsonObject, 128, 1));
    if out.finish == Some(FinishReason::EndOfGeneration) {
        let v: serde_json::Value = serde_json::from_str(&out.text).expect("JSON");
        assert!(v.is_object(), "{v}");
    } else {
        // Out of tokens: still a prefix of an object.
        assert!(out.text.trim_start().starts_with('{'), "{:?}", out.text);
    }
}

#[test]
fn bad_constraints_fail_at_add() {
    let mut e = engine();
    for c in [
        Constraint::Regex("(".into()),
        Constraint::JsonSchema("{not json".into()),
        Constraint::JsonSchema(r#"{"type": "integer", "minimum": 5, "maximum": 1}"#.into()),
        Constraint::Lark("start: undefined_rule".into()),
    ] {
        match e.add(constrained(vec![1, 2, 3], c.clone(), 4, 0)) {
            Err(err @ EngineError::BadConstraint(_)) => {
                assert!(err.is_client_error());
            }
            other => panic!("{c:?}: {other:?}"),
        }
    }
    assert!(!e.has_work());
    let none = Engine::new(model(), None, roomy()).expect("engine");
    let mut none = none;
    assert!(matches!(
        none.add(constrained(vec![1, 2], Constraint::JsonObject, 4, 0)),
        Err(EngineError::ConstraintNeedsTokenizer)
    ));
}

#[test]
fn a_constrained_request_gets_the_same_tokens_among_others() {
    let prompt = chat("Describe a person as JSON.");
    let target = constrained(
        prompt.clone(),
        Constraint::JsonSchema(SCHEMA.into()),
        64,
        11,
    );
    let others: Vec<Request> = (0..6u64)
        .map(|k| {
            let p = chat(&format!("Tell me about the number {k}."));
            match k % 3 {
                0 => Request::greedy(p, 5 + k as usize),
                1 => constrained(p, Constraint::JsonObject, 12, k),
                _ => constrained(p, Constraint::Regex("[a-z ]{1,20}".into()), 12, k),
            }
        })
        .collect();
    let want = alone(target.clone());
    let want_others: Vec<Out> = others.iter().cloned().map(alone).collect();

    let mut e = engine();
    let mut ids = Vec::new();
    for r in &others[..3] {
        ids.push(e.add(r.clone()).expect("add"));
    }
    let id = e.add(target).expect("add");
    for r in &others[3..] {
        ids.push(e.add(r.clone()).expect("add"));
    }
    let mut got = drain(&mut e);
    let g = got.remove(&id).expect("target");
    assert_eq!(g.tokens, want.tokens);
    assert_eq!(g.text, want.text);
    for (i, (oid, w)) in ids.iter().zip(&want_others).enumerate() {
        let o = got.remove(oid).expect("other");
        assert_eq!(o.tokens, w.tokens, "other {i}");
    }
}

#[test]
fn every_sample_of_a_constrained_request_is_checked_or_masked_and_timed() {
    let mut e = engine();
    let req = constrained(
        chat("Describe a person as JSON."),
        Constraint::JsonSchema(SCHEMA.into()),
        96,
        5,
    );
    let id = e.add(req).expect("add");
    let plain = e.add(Request::greedy(chat("Hi"), 8)).expect("add");
    let mut outs = drain(&mut e);
    let out = outs.remove(&id).expect("out");
    assert!(outs.remove(&plain).is_some_and(|o| o.error.is_none()));
    assert_eq!(out.finish, Some(FinishReason::EndOfGeneration));
    let s = e.stats();
    // One check or mask per sample: each generated token, plus the end
    // token; a temperature draw with no cuts is checked first.
    let samples = out.tokens.len() as u64 + 1;
    assert_eq!(s.constraint_masks + s.constraint_checks, samples);
    assert!(s.constraint_checks > 0, "no sample took the check");
    let per = s.constraint_mask_time / samples as u32;
    eprintln!(
        "constraint: {} checks, {} masks, {:?} total, {:?} per token (n_vocab {})",
        s.constraint_checks,
        s.constraint_masks,
        s.constraint_mask_time,
        per,
        model().config().n_vocab
    );
}

#[test]
fn checking_the_token_first_gives_the_masked_paths_greedy_output() {
    // Logprobs make a request take the masked path at every sample
    // (`Check::MaskFirst`); greedy without them checks first. The argmax
    // of the raw logits, when allowed, is the masked logits' argmax, so
    // both paths emit the same tokens.
    let prompt = chat("Describe a person as JSON with name, age and tags.");
    let checked = alone(Request {
        constraint: Some(Constraint::JsonSchema(SCHEMA.into())),
        ..Request::greedy(prompt.clone(), 96)
    });
    let masked = alone(Request {
        constraint: Some(Constraint::JsonSchema(SCHEMA.into())),
        logprobs: fak_engine::Logprobs::Top(1),
        ..Request::greedy(prompt, 96)
    });
    assert_eq!(checked.finish, Some(FinishReason::EndOfGeneration));
    assert_eq!(checked.tokens, masked.tokens);
    assert_eq!(checked.text, masked.text);
}

/// A server builds the constraint compiler while it loads
/// (`Engine::prepare_constraints`): built on first use, it stalled every
/// running sequence's step while the first constrained request built a
/// token trie over the vocabulary. Prepared, the engine needs nothing
/// more for its first constrained request, whose output is the lazily
/// built engine's; without a tokenizer there is nothing to prepare.
#[test]
fn constraints_are_prepared_before_the_first_request() {
    let mut e = engine();
    assert!(!e.constraints_ready());
    e.prepare_constraints().expect("prepare");
    assert!(e.constraints_ready());
    let req = || {
        constrained(
            chat("Describe a cat as JSON."),
            Constraint::JsonObject,
            24,
            3,
        )
    };
    e.add(req()).expect("add");
    let prepared = drain(&mut e);
    let mut lazy = engine();
    lazy.add(req()).expect("add");
    assert!(lazy.constraints_ready());
    let lazy = drain(&mut lazy);
    let tokens =
        |o: &HashMap<RequestId, Out>| o.values().map(|x| x.tokens.clone()).collect::<Vec<_>>();
    assert_eq!(tokens(&prepared), tokens(&lazy));
    let mut none = Engine::new(model(), None, roomy()).expect("engine");
    none.prepare_constraints().expect("nothing to prepare");
    assert!(!none.constraints_ready());
}
