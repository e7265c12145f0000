//! Speculative decoding is exact: with prompt-lookup, prediction, fleet
//! and grammar drafts, every request's token ids, the logits (as bytes)
//! each token was sampled from, its log-probabilities, its text and its
//! finish are those of plain decoding, greedy or seeded, with penalties,
//! stop strings and grammars, alone or in a batch of 8, in sessions across
//! a fork and an exact eviction; and drafts are really accepted (fewer
//! passes), so the comparison is not vacuous.

use std::collections::HashMap;
use std::sync::OnceLock;

use fak_engine::{
    Constraint, Context, DraftParams, Engine, EngineConfig, EngineError, EngineStats, Event,
    EvictMode, FinishReason, Logprobs, LookupParams, PagedKvConfig, PrefixCache, Request,
    RequestId, SamplingParams, SpecMode, Speculation, Speculative, StepLogprobs, StopAt, StopRules,
    Tenant, Usage,
};
use fak_model::{KvType, Model};
use fak_tokenizer::EncodeOptions;

mod common;

use common::{bytes, chat, ids, load_model, model, tok};

fn config() -> EngineConfig {
    EngineConfig {
        kv: PagedKvConfig {
            block_size: 16,
            n_blocks: 256,
            kv_type: KvType::F16,
            window: fak_engine::KvWindow::Drop,
        },
        token_budget: 512,
        max_running: 64,
        max_waiting: None,
        n_ctx: 1024,
        prefix_cache: PrefixCache::On,
        prefill: fak_engine::SERIAL_PREFILL,
        mask: fak_engine::MaskMode::default(),
    }
}

/// What one request got.
#[derive(Debug, Default, PartialEq)]
struct Out {
    tokens: Vec<u32>,
    logits: Vec<Vec<u8>>,
    logprobs: Vec<Option<StepLogprobs>>,
    text: String,
    finish: Option<FinishReason>,
    usage: Usage,
}

/// Runs `reqs` together to the end; the outputs in order, and the
/// engine's passes, accepted draft tokens and draft tokens.
fn run(spec: Speculative, reqs: &[Request]) -> (Vec<Out>, u64, u64, u64) {
    let (got, stats) = run_stats(spec, reqs);
    (
        got,
        stats.passes,
        stats.spec_accepted_tokens,
        stats.spec_draft_tokens,
    )
}

/// [`run`] on a new engine, with all its counters.
fn run_stats(spec: Speculative, reqs: &[Request]) -> (Vec<Out>, EngineStats) {
    run_drafted(spec, None, reqs)
}

/// [`run_stats`] with a draft model, if given.
fn run_drafted(
    spec: Speculative,
    draft: Option<&'static Model>,
    reqs: &[Request],
) -> (Vec<Out>, EngineStats) {
    let mut e = engine(spec, draft);
    let got = run_on(&mut e, reqs);
    (got, e.stats())
}

fn engine(spec: Speculative, draft: Option<&'static Model>) -> Engine<'static> {
    let mut e = Engine::new(model(), Some(tok()), config()).expect("engine");
    e.set_speculative(spec);
    if let Some(d) = draft {
        e.set_draft_model(d, DraftParams::default())
            .expect("draft model");
    }
    e
}

/// SmolLM2-135M Q4_1: the same vocabulary as [`model`], other weights, so
/// its drafts are often but not always the target's tokens.
fn draft_model() -> &'static Model {
    static M: OnceLock<Model> = OnceLock::new();
    M.get_or_init(|| load_model("smollm2-135m-instruct-q4_1.gguf"))
}

/// Runs `reqs` together to the end on `e`; the outputs in order.
fn run_on(e: &mut Engine<'_>, reqs: &[Request]) -> Vec<Out> {
    let ids: Vec<RequestId> = reqs
        .iter()
        .map(|r| e.add(r.clone()).expect("add"))
        .collect();
    let mut outs: HashMap<RequestId, Out> = HashMap::new();
    for _ in 0..10_000 {
        if outs.values().filter(|o| o.finish.is_some()).count() == reqs.len() {
            break;
        }
        let mut seen: Vec<(RequestId, Vec<u8>)> = Vec::new();
        let events = e
            .step_observe(|id, l| seen.push((id, bytes(l))))
            .expect("step");
        for (id, l) in seen {
            outs.entry(id).or_default().logits.push(l);
        }
        for ev in events {
            let o = outs.entry(ev.id()).or_default();
            match ev {
                Event::Token {
                    token,
                    text,
                    logprobs,
                    ..
                } => {
                    o.tokens.push(token);
                    o.logprobs.push(logprobs);
                    o.text.push_str(&text);
                }
                Event::Finished {
                    reason,
                    text,
                    usage,
                    ..
                } => {
                    o.text.push_str(&text);
                    o.finish = Some(reason);
                    o.usage = usage;
                }
                Event::Failed { error, .. } => panic!("failed: {error}"),
                Event::Admitted { .. } => {}
            }
        }
    }
    ids.iter()
        .map(|id| outs.remove(id).expect("an output"))
        .collect()
}

fn text_ids(text: &str) -> Vec<u32> {
    tok().encode(text, EncodeOptions::default())
}

/// A prompt that invites copying: a function written out twice, then
/// begun a third time.
fn repetitive() -> Vec<u32> {
    let f = "def scale(values, factor):\n    out = []\n    for v in values:\n        out.append(v * factor)\n    return out\n\n";
    text_ids(&format!("{f}{f}{f}def scale("))
}

fn request(prompt: Vec<u32>, n: usize, sampling: SamplingParams, stop: &[&str]) -> Request {
    Request {
        sampling,
        stop: StopRules {
            eog: StopAt::EndOfGeneration,
            strings: stop.iter().map(|s| s.to_string()).collect(),
            ..StopRules::default()
        },
        ..Request::greedy(prompt, n)
    }
}

fn sampled(seed: u64, presence: f32, frequency: f32) -> SamplingParams {
    SamplingParams {
        temperature: 0.8,
        top_p: 0.95,
        seed,
        presence_penalty: presence,
        frequency_penalty: frequency,
        ..SamplingParams::greedy()
    }
}

fn lookup() -> Speculative {
    Speculative::Lookup(LookupParams::default())
}

fn assert_same(plain: &[Out], spec: &[Out], what: &str) {
    for (i, (p, s)) in plain.iter().zip(spec).enumerate() {
        assert_eq!(p.tokens, s.tokens, "{what}: request {i}'s ids differ");
        assert!(p.logits == s.logits, "{what}: request {i}'s logits differ");
        assert_eq!(
            p.logprobs, s.logprobs,
            "{what}: request {i}'s logprobs differ"
        );
        assert_eq!(p.text, s.text, "{what}: request {i}'s text differs");
        assert_eq!(p.finish, s.finish, "{what}: request {i}'s finish differs");
    }
}

#[test]
fn greedy_alone_is_plain_decoding_in_fewer_passes() {
    let reqs = [request(repetitive(), 64, SamplingParams::greedy(), &[])];
    let (plain, plain_passes, _, _) = run(Speculative::Off, &reqs);
    for (what, how) in [
        ("lookup", lookup()),
        ("auto", Speculative::Auto(LookupParams::default())),
    ] {
        let (spec, spec_passes, accepted, _) = run(how, &reqs);
        assert_same(&plain, &spec, what);
        assert!(accepted > 0, "{what}: no draft token was accepted");
        assert!(
            spec_passes < plain_passes,
            "{what}: {spec_passes} passes with drafts, {plain_passes} without"
        );
    }
}

#[test]
fn seeded_penalised_and_stopped_in_a_batch_of_8_are_plain_decoding() {
    // A stop string the greedy output reaches (a piece of its own text,
    // well inside it): the output ends at the same byte, whatever the
    // draft ran past.
    let (free, _, _, _) = run(
        Speculative::Off,
        &[request(repetitive(), 40, SamplingParams::greedy(), &[])],
    );
    let text = &free[0].text;
    let from = text.len() / 2;
    let at = (from..text.len())
        .find(|&i| text.is_char_boundary(i))
        .expect("a boundary");
    let stop: String = text[at..].chars().take(4).collect();
    assert!(stop.chars().count() == 4, "a short output: {text:?}");
    let mut reqs = vec![
        request(repetitive(), 48, SamplingParams::greedy(), &[]),
        request(repetitive(), 48, sampled(7, 0.0, 0.0), &[]),
        request(repetitive(), 48, sampled(3, 0.5, 0.3), &[]),
        request(repetitive(), 48, SamplingParams::greedy(), &[stop.as_str()]),
        request(repetitive(), 5, SamplingParams::greedy(), &[]),
    ];
    for k in 0..3 {
        reqs.push(request(
            ids(40 + k, 20 + 7 * k as usize),
            24,
            sampled(k, 0.0, 0.0),
            &[],
        ));
    }
    let (plain, _, _, _) = run(Speculative::Off, &reqs);
    let (auto, _, _, _) = run(Speculative::Auto(LookupParams::default()), &reqs);
    assert_same(&plain, &auto, "batch of 8, auto");
    let (spec, _, accepted, drafted) = run(lookup(), &reqs);
    assert_same(&plain, &spec, "batch of 8");
    eprintln!("drafted {drafted}, accepted {accepted}");
    assert!(accepted > 0, "no draft token was accepted");
    // Some drafts were wrong: the comparison covers rejections (taking a
    // draft without verifying it would change the output).
    assert!(
        drafted > accepted,
        "every draft token was accepted ({drafted})"
    );
    assert!(
        matches!(plain[3].finish, Some(FinishReason::StopString(0))),
        "the stop string was not reached: {:?}",
        plain[3].finish
    );
    assert_eq!(plain[4].tokens.len(), 5, "max_tokens");
}

fn predicted(mut r: Request, prediction: Vec<u32>) -> Request {
    r.speculation = Speculation {
        mode: SpecMode::Engine,
        prediction,
    };
    r
}

/// A prompt with nothing to copy: prompt lookup finds little, a
/// prediction is the only good source.
fn story() -> Vec<u32> {
    text_ids("Once upon a time, in a small village by the sea, there lived")
}

#[test]
fn predicted_outputs_are_plain_decoding() {
    let n = 48;
    let (plain, plain_passes, _, _) = run(
        Speculative::Off,
        &[request(story(), n, SamplingParams::greedy(), &[])],
    );
    let out = plain[0].tokens.clone();
    assert!(out.len() > 20, "a short output: {:?}", plain[0].text);
    // The output itself as the prediction, and with a few tokens changed
    // in the middle (an edit), and unrelated tokens.
    let mut edited = out.clone();
    for t in &mut edited[10..14] {
        *t = (*t + 1) % 1000;
    }
    for (what, prediction) in [
        ("exact", out.clone()),
        ("edited", edited),
        ("unrelated", ids(5, 60)),
    ] {
        let reqs = [predicted(
            request(story(), n, SamplingParams::greedy(), &[]),
            prediction,
        )];
        // The engine's own drafting is off: only the prediction drafts.
        let (spec, passes, accepted, drafted) = run(Speculative::Off, &reqs);
        assert_same(&plain, &spec, what);
        let u = spec[0].usage;
        assert_eq!(u.accepted_prediction_tokens as u64, accepted, "{what}");
        assert_eq!(
            (u.accepted_prediction_tokens + u.rejected_prediction_tokens) as u64,
            drafted,
            "{what}"
        );
        eprintln!("{what}: {passes} passes (plain {plain_passes}), drafted {drafted}, accepted {accepted}");
        match what {
            "exact" => {
                // Every token but one per pass came from the prediction.
                assert!(
                    accepted + passes >= out.len() as u64,
                    "{what}: {accepted} accepted in {passes} passes"
                );
                assert!(passes * 3 < plain_passes, "{what}: {passes} passes");
            }
            "edited" => {
                assert!(u.rejected_prediction_tokens > 0, "{what}: nothing rejected");
                assert!(
                    accepted as usize > out.len() / 2,
                    "{what}: {accepted} accepted"
                );
            }
            _ => {}
        }
    }
}

#[test]
fn predictions_in_a_seeded_batch_and_opting_out_are_plain_decoding() {
    let (free, _, _, _) = run(
        Speculative::Off,
        &[request(story(), 32, SamplingParams::greedy(), &[])],
    );
    let guess = free[0].tokens.clone();
    let mut reqs = Vec::new();
    for k in 0..8u64 {
        let sampling = if k % 2 == 0 {
            SamplingParams::greedy()
        } else {
            sampled(k, 0.2 * k as f32, 0.0)
        };
        let r = request(story(), 32, sampling, &[]);
        reqs.push(match k % 4 {
            0 | 1 => predicted(r, guess.clone()),
            2 => predicted(r, ids(k, 40)),
            _ => r,
        });
    }
    let (plain, _, _, _) = run(Speculative::Off, &reqs);
    let (spec, _, accepted, drafted) = run(lookup(), &reqs);
    assert_same(&plain, &spec, "seeded batch with predictions");
    assert!(
        accepted > 0 && drafted > accepted,
        "drafted {drafted}, accepted {accepted}"
    );
    // Opted out: no drafts at all, from the prediction or the engine.
    let mut out = predicted(request(story(), 32, SamplingParams::greedy(), &[]), guess);
    out.speculation.mode = SpecMode::Off;
    let (quiet, _, _, drafted) = run(lookup(), &[out]);
    assert_same(&plain[..1], &quiet, "opted out");
    assert_eq!(drafted, 0, "an opted-out request was drafted for");
}

#[test]
fn fleet_drafts_come_from_the_same_tenant_only_and_are_exact() {
    // One engine, requests one after another: the second request of
    // tenant 1 can draft from the first one's output; tenant 2 cannot.
    let mut e = Engine::new(model(), Some(tok()), config()).expect("engine");
    e.set_speculative(lookup());
    let mut outs = Vec::new();
    for tenant in [1, 1, 2] {
        let before = e.stats();
        let req = Request {
            tenant: fak_engine::Tenant(tenant),
            ..request(story(), 48, SamplingParams::greedy(), &[])
        };
        let id = e.add(req).expect("add");
        let mut tokens = Vec::new();
        let mut done = false;
        while !done {
            for ev in e.step().expect("step") {
                match ev {
                    Event::Token { id: i, token, .. } if i == id => tokens.push(token),
                    Event::Finished { id: i, .. } if i == id => done = true,
                    Event::Failed { error, .. } => panic!("failed: {error}"),
                    _ => {}
                }
            }
        }
        let after = e.stats();
        outs.push((
            tokens,
            after.spec_fleet_draft_tokens - before.spec_fleet_draft_tokens,
            after.spec_fleet_accepted_tokens - before.spec_fleet_accepted_tokens,
        ));
    }
    let (plain, _, _, _) = run(
        Speculative::Off,
        &[request(story(), 48, SamplingParams::greedy(), &[])],
    );
    for (k, (tokens, _, _)) in outs.iter().enumerate() {
        assert_eq!(
            tokens, &plain[0].tokens,
            "request {k}'s ids differ from plain"
        );
    }
    assert_eq!(outs[0].1, 0, "the first request had no fleet to draft from");
    assert!(
        outs[1].2 > 0,
        "tenant 1's second request drafted nothing from its fleet"
    );
    assert_eq!(outs[2].1, 0, "tenant 2 drafted from tenant 1's outputs");
}

#[test]
fn logprobs_requests_verify_exactly() {
    let mut reqs = Vec::new();
    for (k, sampling) in [SamplingParams::greedy(), sampled(5, 0.0, 0.0)]
        .into_iter()
        .enumerate()
    {
        reqs.push(Request {
            logprobs: Logprobs::Top(3 + k),
            ..request(repetitive(), 40, sampling, &[])
        });
    }
    let (plain, _) = run_stats(Speculative::Off, &reqs);
    let (spec, stats) = run_stats(lookup(), &reqs);
    assert_same(&plain, &spec, "logprobs");
    assert!(plain[0].logprobs.iter().all(Option::is_some));
    assert!(
        stats.spec_accepted_tokens > 0,
        "no draft token was accepted"
    );
}

const SCHEMA: &str = r#"{
  "type": "object",
  "properties": {
    "function_name": {"type": "string", "enum": ["read_file", "write_file", "list_directory"]},
    "arguments": {
      "type": "object",
      "properties": {
        "path": {"type": "string", "maxLength": 24},
        "recursive": {"type": "boolean"}
      },
      "required": ["path", "recursive"],
      "additionalProperties": false
    }
  },
  "required": ["function_name", "arguments"],
  "additionalProperties": false
}"#;

#[test]
fn constrained_requests_draft_from_their_grammar_and_stay_exact() {
    let prompt = chat("Call a tool to list the files under src, as JSON.");
    let schema = |sampling| Request {
        constraint: Some(Constraint::JsonSchema(SCHEMA.into())),
        ..request(prompt.clone(), 80, sampling, &[])
    };
    let top_p = SamplingParams {
        temperature: 0.9,
        top_p: 0.9,
        seed: 11,
        ..SamplingParams::greedy()
    };
    let reqs = [
        schema(SamplingParams::greedy()),
        schema(sampled(1, 0.0, 0.0)),
        schema(top_p),
        Request {
            logprobs: Logprobs::Top(2),
            ..schema(sampled(2, 0.0, 0.0))
        },
        request(repetitive(), 32, SamplingParams::greedy(), &[]),
    ];
    let (plain, plain_stats) = run_stats(Speculative::Off, &reqs);
    for (what, how) in [
        ("lookup", lookup()),
        ("auto", Speculative::Auto(LookupParams::default())),
    ] {
        let (spec, stats) = run_stats(how, &reqs);
        assert_same(&plain, &spec, what);
        assert!(
            stats.spec_grammar_accepted_tokens > 0,
            "{what}: no grammar-forced token was accepted"
        );
        // Alone, the greedy one takes fewer passes than plain decoding.
        let (alone, alone_stats) = run_stats(how, &reqs[..1]);
        assert_same(&plain[..1], &alone, what);
        let (_, plain_alone) = run_stats(Speculative::Off, &reqs[..1]);
        assert!(
            alone_stats.passes < plain_alone.passes,
            "{what}: {} passes with drafts, {} without",
            alone_stats.passes,
            plain_alone.passes
        );
    }
    assert_eq!(plain_stats.spec_draft_tokens, 0);
    for (i, o) in plain[..4].iter().enumerate() {
        let v: serde_json::Value = serde_json::from_str(&o.text)
            .unwrap_or_else(|e| panic!("request {i}: {e}: {:?}", o.text));
        assert!(v["function_name"].is_string(), "request {i}: {v}");
        assert!(v["arguments"]["recursive"].is_boolean(), "request {i}: {v}");
    }
}

#[test]
fn session_turns_across_a_fork_and_an_exact_eviction_are_plain_decoding() {
    // Each engine runs the same turns; the outputs and the sessions'
    // tokens must agree turn by turn.
    let turns = |spec: Speculative, draft: Option<&'static Model>| {
        let mut e = engine(spec, draft);
        let s = e.create_session(Tenant(3)).unwrap();
        let turn = |e: &mut Engine<'_>, session, prompt: Vec<u32>, sampling| {
            let r = Request {
                context: Context::Session(session),
                tenant: Tenant(3),
                ..request(prompt, 32, sampling, &[])
            };
            run_on(e, &[r]).remove(0)
        };
        let mut outs = vec![turn(&mut e, s, repetitive(), SamplingParams::greedy())];
        let f = e.fork_session(s).expect("fork");
        outs.push(turn(
            &mut e,
            f,
            text_ids("def scale("),
            sampled(4, 0.0, 0.0),
        ));
        // An exact eviction of a span of the first prompt, then a turn.
        e.evict_session(s, 8..20, EvictMode::Exact).expect("evict");
        outs.push(turn(
            &mut e,
            s,
            text_ids("def scale("),
            SamplingParams::greedy(),
        ));
        let tokens = [s, f].map(|x| e.session_tokens(x).expect("tokens").to_vec());
        (outs, tokens, e.stats())
    };
    let (plain, plain_tokens, _) = turns(Speculative::Off, None);
    let (spec, spec_tokens, stats) = turns(lookup(), None);
    assert_same(&plain, &spec, "session turns");
    assert_eq!(plain_tokens, spec_tokens, "the sessions' tokens differ");
    assert!(
        stats.spec_accepted_tokens > 0,
        "no draft token was accepted"
    );
    let (spec, spec_tokens, stats) = turns(Speculative::Draft, Some(draft_model()));
    assert_same(&plain, &spec, "session turns, draft model");
    assert_eq!(plain_tokens, spec_tokens, "the sessions' tokens differ");
    assert!(
        stats.spec_model_accepted_tokens > 0,
        "no draft-model token was accepted"
    );
}

#[test]
fn draft_model_drafts_in_a_batch_of_8_are_plain_decoding() {
    let mut reqs = vec![
        request(story(), 40, SamplingParams::greedy(), &[]),
        request(story(), 40, sampled(7, 0.0, 0.0), &[]),
        request(story(), 40, sampled(3, 0.5, 0.3), &[]),
        request(repetitive(), 40, SamplingParams::greedy(), &[]),
        request(repetitive(), 5, SamplingParams::greedy(), &[]),
        Request {
            logprobs: Logprobs::Top(2),
            ..request(story(), 24, SamplingParams::greedy(), &[])
        },
        Request {
            constraint: Some(Constraint::JsonSchema(SCHEMA.into())),
            ..request(chat("Call a tool, as JSON."), 60, sampled(2, 0.0, 0.0), &[])
        },
    ];
    let mut quiet = request(story(), 24, SamplingParams::greedy(), &[]);
    quiet.speculation.mode = SpecMode::Off;
    reqs.push(quiet);
    let (plain, _) = run_stats(Speculative::Off, &reqs);
    for (what, how) in [
        ("draft", Speculative::Draft),
        ("auto", Speculative::Auto(LookupParams::default())),
    ] {
        let (spec, stats) = run_drafted(how, Some(draft_model()), &reqs);
        assert_same(&plain, &spec, what);
        let (drafted, accepted) = (
            stats.spec_model_draft_tokens,
            stats.spec_model_accepted_tokens,
        );
        eprintln!("{what}: draft model drafted {drafted}, accepted {accepted}");
        assert!(
            stats.draft_model_failures == 0,
            "{what}: the draft pool ran out"
        );
        if how == Speculative::Draft {
            // (Auto weighs a draft model as costly as the target against
            // lookup and may rightly leave it idle.)
            assert!(accepted > 0, "{what}: no draft-model token was accepted");
            assert!(
                drafted > accepted,
                "{what}: every draft-model token was accepted"
            );
        }
    }
    // Alone, greedy: fewer target passes than plain decoding.
    let (_, plain_alone) = run_stats(Speculative::Off, &reqs[..1]);
    let (alone, stats) = run_drafted(Speculative::Draft, Some(draft_model()), &reqs[..1]);
    assert_same(&plain[..1], &alone, "alone");
    assert!(
        stats.passes < plain_alone.passes,
        "{} passes with a draft model, {} without",
        stats.passes,
        plain_alone.passes
    );
}

#[test]
fn a_draft_model_of_another_vocabulary_is_refused() {
    static QWEN: OnceLock<Model> = OnceLock::new();
    let qwen = QWEN.get_or_init(|| load_model("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"));
    let mut e = Engine::new(model(), Some(tok()), config()).expect("engine");
    let r = e.set_draft_model(qwen, DraftParams::default());
    assert!(
        matches!(r, Err(EngineError::DraftVocabMismatch(_))),
        "{:?}",
        r.err()
    );
}
