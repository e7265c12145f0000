//! Mask modes ([`MaskMode`]): computing constrained requests' masks on a
//! worker during the forward pass gives exactly the tokens of checking
//! first after it, for greedy and seeded sampling (with and without
//! top-p), alone and among other requests; grammars that end mid-batch
//! and cancellations leave the others' outputs unchanged.
//!
//! The worker's error paths, through the `fault-injection` feature
//! ([`Engine::inject_mask_fault`]): a matcher that errs or panics on the
//! worker fails its own request with a typed error while the batch's
//! other requests give exactly their outputs alone; a worker that dies
//! fails the requests whose matchers it held, typed, and is replaced at
//! the next constrained pass.

use std::collections::HashMap;

use fak_engine::{
    Constraint, Engine, EngineConfig, Event, FinishReason, Logprobs, MaskFault, MaskMode,
    PagedKvConfig, PrefixCache, Request, RequestId, SamplingParams,
};
use fak_model::KvType;

mod common;

use common::{chat, model, tok};

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

fn engine(mask: MaskMode) -> Engine<'static> {
    let cfg = EngineConfig {
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
        mask,
    };
    Engine::new(model(), Some(tok()), cfg).expect("engine")
}

/// The sampling settings the tests cover: greedy, a plain temperature
/// draw (checked first), top-p (always masked), log-probabilities.
fn samplings() -> Vec<(SamplingParams, Logprobs)> {
    let g = SamplingParams::greedy();
    let t = SamplingParams {
        temperature: 0.9,
        ..g
    };
    vec![
        (g, Logprobs::Off),
        (t, Logprobs::Off),
        (
            SamplingParams {
                temperature: 0.8,
                top_p: 0.9,
                ..g
            },
            Logprobs::Off,
        ),
        (g, Logprobs::Top(2)),
    ]
}

fn request(
    prompt: Vec<u32>,
    c: Constraint,
    n: usize,
    s: (SamplingParams, Logprobs),
    seed: u64,
) -> Request {
    Request {
        sampling: SamplingParams { seed, ..s.0 },
        logprobs: s.1,
        constraint: Some(c),
        ..Request::greedy(prompt, n)
    }
}

#[derive(Debug, Default, Clone, PartialEq)]
struct Out {
    tokens: Vec<u32>,
    text: String,
    finish: Option<FinishReason>,
    error: Option<String>,
}

fn step_into(e: &mut Engine<'_>, outs: &mut HashMap<RequestId, Out>) {
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
            // Debug: the variant's name, so the tests see the error's type.
            Event::Failed { error, .. } => o.error = Some(format!("{error:?}")),
            Event::Admitted { .. } => {}
        }
    }
}

fn drain(e: &mut Engine<'_>, outs: &mut HashMap<RequestId, Out>) {
    let mut steps = 0;
    while e.has_work() {
        steps += 1;
        assert!(steps < 5000, "the engine does not finish");
        step_into(e, outs);
    }
}

/// Runs `reqs` together in one engine of `mode`; outputs in order.
fn together(mode: MaskMode, reqs: &[Request]) -> Vec<Out> {
    let mut e = engine(mode);
    let ids: Vec<RequestId> = reqs
        .iter()
        .map(|r| e.add(r.clone()).expect("add"))
        .collect();
    let mut outs = HashMap::new();
    drain(&mut e, &mut outs);
    ids.iter()
        .map(|id| outs.remove(id).expect("an output"))
        .collect()
}

fn alone(mode: MaskMode, req: &Request) -> Out {
    together(mode, std::slice::from_ref(req)).remove(0)
}

#[test]
fn both_modes_give_the_same_tokens_alone_and_batched() {
    let prompt = chat("Describe a person as JSON with name, age and tags.");
    let reqs: Vec<Request> = samplings()
        .into_iter()
        .enumerate()
        .flat_map(|(i, s)| {
            let p = prompt.clone();
            (0..2u64).map(move |k| {
                request(
                    p.clone(),
                    Constraint::JsonSchema(SCHEMA.into()),
                    80,
                    s,
                    10 * i as u64 + k,
                )
            })
        })
        .collect();
    let check = together(MaskMode::CheckFirst, &reqs);
    let overlap = together(MaskMode::Overlap, &reqs);
    for (i, (c, o)) in check.iter().zip(&overlap).enumerate() {
        assert!(c.error.is_none() && o.error.is_none(), "{i}: {c:?} {o:?}");
        assert!(!c.tokens.is_empty());
        assert_eq!(c, o, "request {i}: the modes differ");
        serde_json::from_str::<serde_json::Value>(&o.text)
            .unwrap_or_else(|e| panic!("request {i}: {e}: {:?}", o.text));
    }
    // Batch invariance in overlap mode: each alone gives its batched output.
    for (i, r) in reqs.iter().enumerate().step_by(3) {
        assert_eq!(alone(MaskMode::Overlap, r), overlap[i], "request {i} alone");
    }
    // Seeded draws differ between seeds (the test can see a wrong seed).
    assert_ne!(overlap[2].tokens, overlap[3].tokens);
}

#[test]
fn overlap_masks_every_sample_on_the_worker() {
    let mut e = engine(MaskMode::Overlap);
    let req = request(
        chat("Describe a person as JSON."),
        Constraint::JsonSchema(SCHEMA.into()),
        96,
        samplings()[1],
        5,
    );
    let id = e.add(req).expect("add");
    let mut outs = HashMap::new();
    drain(&mut e, &mut outs);
    let out = outs.remove(&id).expect("out");
    assert_eq!(out.finish, Some(FinishReason::EndOfGeneration), "{out:?}");
    let s = e.stats();
    // One mask per sample (each token, and the end token), all from the
    // worker; the temperature draw is still checked first (a bit test).
    let samples = out.tokens.len() as u64 + 1;
    assert_eq!(s.constraint_masks, samples);
    assert!(s.constraint_checks > 0 && s.constraint_checks <= samples);
    assert!(s.constraint_worker_time > std::time::Duration::ZERO);
}

#[test]
fn a_grammar_that_ends_mid_batch_leaves_the_others_unchanged() {
    let long: Vec<Request> = (0..3u64)
        .map(|k| {
            request(
                chat(&format!("Describe person number {k} as JSON.")),
                Constraint::JsonSchema(SCHEMA.into()),
                64,
                samplings()[(k % 3) as usize],
                k,
            )
        })
        .collect();
    let short = request(
        chat("Yes or no?"),
        Constraint::Lark("start: \"yes\" | \"no\"".into()),
        16,
        samplings()[1],
        9,
    );
    let reqs = [
        long[0].clone(),
        short.clone(),
        long[1].clone(),
        long[2].clone(),
    ];
    for mode in [MaskMode::Overlap, MaskMode::CheckFirst] {
        let got = together(mode, &reqs);
        let s = &got[1];
        assert!(s.text == "yes" || s.text == "no", "{mode:?}: {s:?}");
        assert_eq!(s.finish, Some(FinishReason::EndOfGeneration));
        // The others run on after it ended.
        for (i, o) in got.iter().enumerate().filter(|(i, _)| *i != 1) {
            assert!(o.tokens.len() > s.tokens.len() + 4, "{mode:?} request {i}");
        }
        for (i, r) in reqs.iter().enumerate() {
            assert_eq!(got[i], alone(MaskMode::Overlap, r), "{mode:?} request {i}");
        }
    }
}

#[test]
fn cancelling_between_overlapped_steps_leaves_the_others_and_the_slot_sound() {
    let reqs: Vec<Request> = (0..3u64)
        .map(|k| {
            request(
                chat(&format!("Describe person number {k} as JSON.")),
                Constraint::JsonSchema(SCHEMA.into()),
                48,
                samplings()[2],
                k,
            )
        })
        .collect();
    let want: Vec<Out> = reqs.iter().map(|r| alone(MaskMode::Overlap, r)).collect();
    let mut e = engine(MaskMode::Overlap);
    let ids: Vec<RequestId> = reqs
        .iter()
        .map(|r| e.add(r.clone()).expect("add"))
        .collect();
    let mut outs = HashMap::new();
    // Until every request decodes: each step lends the matchers out.
    while outs.len() < 3
        || ids
            .iter()
            .any(|i| outs.get(i).is_none_or(|o: &Out| o.tokens.len() < 3))
    {
        step_into(&mut e, &mut outs);
    }
    e.cancel(ids[1]).expect("cancel");
    // A new constrained request takes the cancelled one's slot.
    let late = request(
        chat("Describe a cat as JSON."),
        Constraint::JsonSchema(SCHEMA.into()),
        40,
        samplings()[1],
        3,
    );
    let late_id = e.add(late.clone()).expect("add");
    drain(&mut e, &mut outs);
    let cancelled = &outs[&ids[1]];
    assert_eq!(
        cancelled.finish,
        Some(FinishReason::Cancelled),
        "{cancelled:?}"
    );
    assert!(want[1].tokens.starts_with(&cancelled.tokens));
    assert_eq!(outs[&ids[0]], want[0]);
    assert_eq!(outs[&ids[2]], want[2]);
    assert_eq!(outs[&late_id], alone(MaskMode::Overlap, &late));
}

/// Steps `e` until every one of `ids` has sampled at least `n` tokens
/// (each pass then lends their matchers to the worker).
fn until_decoding(
    e: &mut Engine<'_>,
    ids: &[RequestId],
    n: usize,
    outs: &mut HashMap<RequestId, Out>,
) {
    while ids
        .iter()
        .any(|i| outs.get(i).is_none_or(|o: &Out| o.tokens.len() < n))
    {
        assert!(e.has_work(), "a request ended before it decoded {n} tokens");
        step_into(e, outs);
    }
}

/// Whether `o` failed with the constraint's typed error.
fn failed_typed(o: &Out) -> bool {
    o.finish.is_none()
        && o.error
            .as_deref()
            .is_some_and(|e| e.starts_with("ConstraintFailed("))
}

#[test]
fn a_matcher_that_errs_or_panics_on_the_worker_fails_its_request_alone() {
    let constrained = |k: u64, s: usize| {
        request(
            chat(&format!("Describe person number {k} as JSON.")),
            Constraint::JsonSchema(SCHEMA.into()),
            64,
            samplings()[s],
            k,
        )
    };
    let free = Request {
        sampling: SamplingParams {
            temperature: 0.8,
            seed: 7,
            ..SamplingParams::greedy()
        },
        ..Request::greedy(chat("Tell me about cats."), 48)
    };
    // The faulted request (1) is greedy; the others draw with and
    // without top-p, and one has no constraint.
    let reqs = [
        constrained(0, 1),
        constrained(1, 0),
        free,
        constrained(2, 2),
    ];
    let want: Vec<Out> = reqs.iter().map(|r| alone(MaskMode::Overlap, r)).collect();
    for (i, w) in want.iter().enumerate() {
        assert!(
            w.error.is_none() && w.tokens.len() > 8,
            "request {i} alone: {w:?}"
        );
    }
    for fault in [MaskFault::MatcherError, MaskFault::Panic] {
        let mut e = engine(MaskMode::Overlap);
        let ids: Vec<RequestId> = reqs
            .iter()
            .map(|r| e.add(r.clone()).expect("add"))
            .collect();
        let mut outs = HashMap::new();
        until_decoding(&mut e, &ids, 3, &mut outs);
        e.inject_mask_fault(ids[1], fault).expect("inject");
        drain(&mut e, &mut outs);
        let got: Vec<&Out> = ids.iter().map(|i| &outs[i]).collect();
        assert!(failed_typed(got[1]), "{fault:?}: {:?}", got[1]);
        // It got as far as it had, then failed at the faulted sample.
        assert!(
            got[1].tokens.len() >= 3
                && got[1].tokens.len() < want[1].tokens.len()
                && want[1].tokens.starts_with(&got[1].tokens),
            "{fault:?}: {:?}",
            got[1]
        );
        for i in [0, 2, 3] {
            assert_eq!(got[i], &want[i], "{fault:?}: request {i}");
        }
        // A fault inside a job leaves the worker running.
        assert_eq!(e.stats().mask_workers_started, 1, "{fault:?}");
    }
}

#[test]
fn a_worker_that_dies_fails_the_requests_it_held_and_is_replaced() {
    let constrained = |k: u64, s: usize| {
        request(
            chat(&format!("Describe person number {k} as JSON.")),
            Constraint::JsonSchema(SCHEMA.into()),
            64,
            samplings()[s],
            k,
        )
    };
    let free = Request::greedy(chat("Tell me about dogs."), 40);
    let reqs = [constrained(0, 1), constrained(1, 2), free];
    let late = request(
        chat("Describe a cat as JSON."),
        Constraint::JsonSchema(SCHEMA.into()),
        48,
        samplings()[1],
        3,
    );
    let want: Vec<Out> = reqs.iter().map(|r| alone(MaskMode::Overlap, r)).collect();
    let want_late = alone(MaskMode::Overlap, &late);
    assert!(want_late.error.is_none() && !want_late.tokens.is_empty());
    serde_json::from_str::<serde_json::Value>(&want_late.text).expect("JSON alone");

    let mut e = engine(MaskMode::Overlap);
    let ids: Vec<RequestId> = reqs
        .iter()
        .map(|r| e.add(r.clone()).expect("add"))
        .collect();
    let mut outs = HashMap::new();
    until_decoding(&mut e, &ids, 3, &mut outs);
    assert_eq!(e.stats().mask_workers_started, 1);
    // One marked request kills the worker while it holds both matchers.
    e.inject_mask_fault(ids[0], MaskFault::WorkerDies)
        .expect("inject");
    step_into(&mut e, &mut outs);
    for i in [0, 1] {
        let o = &outs[&ids[i]];
        assert!(failed_typed(o), "request {i}: {o:?}");
        assert!(want[i].tokens.starts_with(&o.tokens), "request {i}");
        assert!(o.tokens.len() < want[i].tokens.len(), "request {i}");
    }
    // At once, a new constrained request: the next constrained pass
    // starts a new worker, which holds it to its grammar.
    let late_id = e.add(late).expect("add");
    drain(&mut e, &mut outs);
    assert_eq!(outs[&ids[2]], want[2], "the unconstrained request");
    assert_eq!(outs[&late_id], want_late, "the request after the death");
    let s = e.stats();
    assert_eq!(
        s.mask_workers_started, 2,
        "the dead worker was not replaced"
    );
    // Every sample of the late request had a verdict from the worker.
    assert!(s.constraint_worker_time > std::time::Duration::ZERO);
}
