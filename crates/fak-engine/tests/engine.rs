//! The request-lifecycle [`Engine`]: batch invariance, preemption, cancel
//! in every state, generational ids, validation at `add`, round-robin
//! decode, tenant-scoped prefix reuse, stop rules, logprobs, sessions and
//! penalties. Token ids (and logits, as bytes) are compared exactly with
//! the same request run alone in a roomy engine.

use std::collections::HashMap;

use fak_engine::{
    Context, Engine, EngineConfig, EngineError, Event, FinishReason, Logprobs, PagedKvConfig,
    PrefixCache, Request, RequestId, SamplingParams, StepLogprobs, StopAt, StopRules, Tenant,
    Usage,
};
use fak_model::KvType;
use fak_tokenizer::{ChatMessage, ChatTemplate, EncodeOptions};

mod common;

use common::{bytes, ids, model, tok};

fn text_ids(text: &str) -> Vec<u32> {
    tok().encode(text, EncodeOptions::default())
}

fn config(
    block_size: usize,
    n_blocks: usize,
    token_budget: usize,
    max_running: usize,
    n_ctx: usize,
    prefix_cache: PrefixCache,
) -> EngineConfig {
    EngineConfig {
        kv: PagedKvConfig {
            block_size,
            n_blocks,
            kv_type: KvType::F16,
            window: fak_engine::KvWindow::Drop,
        },
        token_budget,
        max_running,
        max_waiting: None,
        n_ctx,
        prefix_cache,
        prefill: fak_engine::SERIAL_PREFILL,
        mask: fak_engine::MaskMode::default(),
    }
}

/// Room for everything the tests run, no prefix cache.
fn roomy() -> EngineConfig {
    config(16, 128, 512, 64, 512, PrefixCache::Off)
}

fn engine(cfg: EngineConfig) -> Engine<'static> {
    Engine::new(model(), Some(tok()), cfg).expect("engine")
}

/// Greedy, exactly `n` tokens (end-of-generation tokens do not stop it).
fn greedy(prompt: Vec<u32>, n: usize) -> Request {
    Request {
        stop: StopRules {
            eog: StopAt::Never,
            ..StopRules::default()
        },
        ..Request::greedy(prompt, n)
    }
}

/// Temperature 0.8 with `seed`, exactly `n` tokens.
fn sampled(prompt: Vec<u32>, n: usize, seed: u64) -> Request {
    Request {
        sampling: SamplingParams {
            temperature: 0.8,
            seed,
            ..SamplingParams::greedy()
        },
        ..greedy(prompt, n)
    }
}

/// Everything one request got from the engine.
#[derive(Debug, Default)]
struct Out {
    tokens: Vec<u32>,
    /// Streamed text pieces, then the final text of `Finished`.
    text: String,
    /// Logits (bytes) the request sampled each token from, in order.
    logits: Vec<Vec<u8>>,
    logprobs: Vec<Option<StepLogprobs>>,
    /// Step (0-based, per engine run) of each token.
    token_steps: Vec<usize>,
    admitted: usize,
    cached: Option<usize>,
    finish: Option<(FinishReason, Usage)>,
    finished_at: Option<usize>,
    error: Option<EngineError>,
}

/// Drives an engine step by step, recording every event per request.
#[derive(Default)]
struct Recorder {
    outs: HashMap<RequestId, Out>,
    steps: usize,
}

impl Recorder {
    /// One step; returns the ids with events in it.
    fn step(&mut self, e: &mut Engine<'_>) -> Vec<RequestId> {
        let mut seen = Vec::new();
        let mut logits: Vec<(RequestId, Vec<u8>)> = Vec::new();
        let events = e
            .step_observe(|id, l| logits.push((id, bytes(l))))
            .expect("step");
        for (id, l) in logits {
            self.outs.entry(id).or_default().logits.push(l);
        }
        for ev in events {
            let id = ev.id();
            seen.push(id);
            let o = self.outs.entry(id).or_default();
            assert!(
                o.finish.is_none() && o.error.is_none(),
                "{id}: event after end"
            );
            match ev {
                Event::Admitted { cached_tokens, .. } => {
                    o.admitted += 1;
                    o.cached = Some(cached_tokens);
                }
                Event::Token {
                    token,
                    text,
                    logprobs,
                    ..
                } => {
                    o.tokens.push(token);
                    o.text.push_str(&text);
                    o.logprobs.push(logprobs);
                    o.token_steps.push(self.steps);
                }
                Event::Finished {
                    reason,
                    usage,
                    text,
                    ..
                } => {
                    o.text.push_str(&text);
                    o.finish = Some((reason, usage));
                    o.finished_at = Some(self.steps);
                }
                Event::Failed { error, .. } => o.error = Some(error),
            }
        }
        self.steps += 1;
        seen
    }

    fn drain(&mut self, e: &mut Engine<'_>) {
        let limit = self.steps + 5000;
        while e.has_work() {
            assert!(self.steps < limit, "the engine does not finish");
            self.step(e);
        }
    }

    fn take(&mut self, id: RequestId) -> Out {
        self.outs.remove(&id).unwrap_or_default()
    }
}

/// `req` run alone in a roomy engine without a prefix cache.
fn alone(req: Request) -> Out {
    let mut e = engine(roomy());
    let id = e.add(req).expect("add");
    let mut r = Recorder::default();
    r.drain(&mut e);
    let out = r.take(id);
    assert!(out.error.is_none(), "{:?}", out.error);
    out
}

fn used(e: &Engine<'_>) -> usize {
    e.sequences().kv().stats().used
}

fn reason(o: &Out) -> FinishReason {
    o.finish.expect("finished").0
}

#[test]
fn a_request_gets_the_same_tokens_and_logits_among_others() {
    let target = greedy(ids(1, 12), 8);
    let others: Vec<Request> = (0..8u64)
        .map(|k| {
            let p = ids(100 + k, 3 + 5 * k as usize);
            let n = 3 + k as usize % 4;
            if k % 2 == 1 {
                sampled(p, n, k)
            } else {
                greedy(p, n)
            }
        })
        .collect();
    let want = alone(target.clone());
    let want_others: Vec<Out> = others.iter().cloned().map(alone).collect();
    assert_eq!(want.tokens.len(), 8);
    assert_eq!(want.logits.len(), 8);

    // A small budget: prefill chunks share passes with decode tokens.
    let mut e = engine(config(16, 128, 32, 64, 512, PrefixCache::Off));
    let mut ids_others = Vec::new();
    for r in &others[..4] {
        ids_others.push(e.add(r.clone()).expect("add"));
    }
    let id = e.add(target).expect("add");
    for r in &others[4..] {
        ids_others.push(e.add(r.clone()).expect("add"));
    }
    let mut rec = Recorder::default();
    rec.drain(&mut e);
    let got = rec.take(id);
    assert_eq!(got.tokens, want.tokens);
    assert!(got.logits == want.logits, "logits differ from alone");
    assert_eq!(reason(&got), FinishReason::Length);
    for (i, (oid, w)) in ids_others.iter().zip(&want_others).enumerate() {
        let g = rec.take(*oid);
        assert_eq!(g.tokens, w.tokens, "other {i}");
        assert!(g.logits == w.logits, "other {i}: logits differ");
    }
    assert!(e.stats().passes > 10);
}

#[test]
fn preemption_keeps_every_output_bit_identical() {
    // Each request needs 3 blocks alone ((14 + 10) / 16 + 1), and is
    // admitted with 2 (its prompt's, + 1); the pool has 4 for four of them.
    let reqs: Vec<Request> = (0..4).map(|k| greedy(ids(200 + k, 14), 10)).collect();
    let want: Vec<Out> = reqs.iter().cloned().map(alone).collect();
    let mut e = engine(config(16, 4, 512, 8, 64, PrefixCache::Off));
    let rids: Vec<RequestId> = reqs.into_iter().map(|r| e.add(r).expect("add")).collect();
    let mut rec = Recorder::default();
    rec.drain(&mut e);
    assert!(e.stats().preemptions > 0, "{:?}", e.stats());
    for (i, (id, w)) in rids.iter().zip(&want).enumerate() {
        let g = rec.take(*id);
        assert!(g.error.is_none(), "request {i}: {:?}", g.error);
        assert_eq!(reason(&g), FinishReason::Length, "request {i}");
        assert_eq!(g.admitted, 1, "request {i}: Admitted is reported once");
        assert_eq!(g.tokens, w.tokens, "request {i}");
        assert!(g.logits == w.logits, "request {i}: logits differ");
    }
    assert_eq!(used(&e), 0);

    // A seeded sampled request, the youngest of two, is the one preempted:
    // its random stream goes on where it stopped.
    let a = greedy(ids(210, 14), 10);
    let s = sampled(ids(211, 14), 10, 7);
    let (want_a, want_s) = (alone(a.clone()), alone(s.clone()));
    let mut e = engine(config(16, 3, 512, 8, 64, PrefixCache::Off));
    let ia = e.add(a).expect("add");
    let is = e.add(s).expect("add");
    let mut rec = Recorder::default();
    rec.drain(&mut e);
    assert!(e.stats().preemptions > 0, "{:?}", e.stats());
    assert_eq!(rec.take(ia).tokens, want_a.tokens);
    let got_s = rec.take(is);
    assert_eq!(got_s.tokens, want_s.tokens);
    assert!(got_s.logits == want_s.logits);
    assert_ne!(want_s.tokens, alone(greedy(ids(211, 14), 10)).tokens);
}

fn expect_cancelled(rec: &mut Recorder, e: &mut Engine<'_>, id: RequestId) -> Out {
    e.cancel(id).expect("cancel");
    assert!(matches!(e.cancel(id), Err(EngineError::UnknownRequest(x)) if x == id));
    let seen = rec.step(e);
    assert!(seen.contains(&id), "Finished comes at the next step");
    let o = rec.take(id);
    assert_eq!(reason(&o), FinishReason::Cancelled);
    assert!(matches!(e.cancel(id), Err(EngineError::UnknownRequest(_))));
    o
}

#[test]
fn cancel_in_every_state_frees_the_request() {
    // Queued (max_running 1: b waits behind a), then decoding (a).
    let mut e = engine(config(16, 64, 8, 1, 512, PrefixCache::Off));
    let a_req = greedy(ids(300, 3), 40);
    let want_a = alone(a_req.clone());
    let mut rec = Recorder::default();
    let a = e.add(a_req).expect("add");
    rec.step(&mut e);
    rec.step(&mut e);
    let before_b = used(&e);
    let b = e.add(greedy(ids(301, 5), 4)).expect("add");
    rec.step(&mut e);
    assert_eq!(e.stats().waiting, 1);
    assert_eq!(rec.outs.get(&b).map_or(0, |o| o.admitted), 0);
    let ob = expect_cancelled(&mut rec, &mut e, b);
    assert_eq!(ob.admitted, 0);
    assert!(ob.tokens.is_empty());
    assert_eq!(ob.finish.expect("finish").1.completion_tokens, 0);
    assert_eq!(used(&e), before_b, "a is still within its first block");
    assert_eq!(e.stats().waiting, 0);
    // a decodes on, undisturbed.
    rec.step(&mut e);
    let n_a = rec.outs[&a].tokens.len();
    assert!(n_a >= 3);
    assert_eq!(rec.outs[&a].tokens[..], want_a.tokens[..n_a]);
    let oa = expect_cancelled(&mut rec, &mut e, a);
    assert_eq!(oa.finish.expect("finish").1.completion_tokens, n_a);
    assert_eq!(oa.tokens.len(), n_a, "no token after the cancel");
    assert_eq!(used(&e), 0);
    assert!(!e.has_work());

    // Prefilling: 40 prompt tokens through a budget of 8.
    let mut e = engine(config(16, 64, 8, 4, 512, PrefixCache::Off));
    let mut rec = Recorder::default();
    let p = e.add(greedy(ids(302, 40), 4)).expect("add");
    rec.step(&mut e);
    assert_eq!(e.stats().tokens_computed, 8);
    assert!(used(&e) > 0);
    assert!(rec.outs[&p].tokens.is_empty());
    assert_eq!(rec.outs[&p].admitted, 1);
    let op = expect_cancelled(&mut rec, &mut e, p);
    assert!(op.tokens.is_empty());
    assert_eq!(used(&e), 0);
    assert!(!e.has_work());
    // The engine serves the next request as if nothing happened.
    let next = greedy(ids(303, 6), 3);
    let id = e.add(next.clone()).expect("add");
    rec.drain(&mut e);
    assert_eq!(rec.take(id).tokens, alone(next).tokens);
}

#[test]
fn ids_are_generational() {
    let mut e = engine(roomy());
    let mut rec = Recorder::default();
    let a = e.add(greedy(ids(400, 3), 2)).expect("add");
    rec.drain(&mut e);
    assert_eq!(rec.take(a).tokens.len(), 2);
    let b_req = greedy(ids(401, 4), 3);
    let b = e.add(b_req.clone()).expect("add");
    assert_eq!(b.slot, a.slot, "the free slot is reused");
    assert_ne!(b, a);
    assert!(matches!(e.cancel(a), Err(EngineError::UnknownRequest(x)) if x == a));
    rec.drain(&mut e);
    assert!(!rec.outs.contains_key(&a), "no event names the old id");
    let ob = rec.take(b);
    assert_eq!(reason(&ob), FinishReason::Length);
    assert_eq!(ob.tokens, alone(b_req).tokens);
    assert!(matches!(e.cancel(b), Err(EngineError::UnknownRequest(_))));
    let never = RequestId {
        slot: 99,
        generation: 0,
    };
    assert!(matches!(
        e.cancel(never),
        Err(EngineError::UnknownRequest(_))
    ));
}

#[test]
fn bad_requests_fail_alone_at_add() {
    let n_vocab = model().config().n_vocab;
    let mut cfg = config(16, 8, 512, 8, 200, PrefixCache::Off);
    cfg.max_waiting = Some(2);
    let mut e = engine(cfg);
    let good1 = greedy(ids(500, 5), 4);
    let good2 = greedy(ids(501, 7), 4);
    let g1 = e.add(good1.clone()).expect("add");

    let mut errs = Vec::new();
    let mut bad = |e: &mut Engine<'_>, r: Request| -> EngineError {
        let err = e.add(r).expect_err("refused");
        assert!(err.is_client_error(), "{err}");
        errs.push(err.to_string());
        err
    };
    let err = bad(&mut e, greedy(vec![1, 2, n_vocab as u32, 3], 4));
    assert!(matches!(
        err,
        EngineError::TokenOutOfRange { index: 2, id, n_vocab: n }
            if id as usize == n_vocab && n == n_vocab
    ));
    let err = bad(&mut e, greedy(ids(502, 10), 191));
    assert!(matches!(
        err,
        EngineError::ContextOverflow {
            n_prompt_tokens: 10,
            max_tokens: 191,
            n_ctx: 200
        }
    ));
    let mut nan = greedy(ids(503, 3), 4);
    nan.sampling.temperature = f32::NAN;
    let err = bad(&mut e, nan);
    assert!(matches!(err, EngineError::BadSampling(ref b) if b.name == "temperature"));
    let mut top = greedy(ids(504, 3), 4);
    top.logprobs = Logprobs::Top(21);
    let err = bad(&mut e, top);
    assert!(matches!(err, EngineError::BadLogprobs { n: 21, max: 20 }));
    let err = bad(&mut e, greedy(Vec::new(), 4));
    assert!(matches!(err, EngineError::EmptyPrompt));
    // 130 tokens fit n_ctx but need 10 blocks of a pool of 8.
    let err = bad(&mut e, greedy(ids(505, 10), 120));
    assert!(matches!(
        err,
        EngineError::RequestTooLarge {
            needed_blocks: 10,
            n_blocks: 8
        }
    ));
    assert_eq!(e.stats().waiting, 1, "refused requests are not queued");

    let g2 = e.add(good2.clone()).expect("add");
    let full = e.add(greedy(ids(506, 3), 2)).expect_err("queue full");
    assert!(matches!(full, EngineError::QueueFull { max_waiting: 2 }));
    assert!(!full.is_client_error());

    // Without a tokenizer, stop strings cannot be matched.
    let mut bare = Engine::new(model(), None, roomy()).expect("engine");
    let mut s = greedy(ids(507, 3), 2);
    s.stop.strings = vec!["x".into()];
    let err = bare.add(s).expect_err("refused");
    assert!(matches!(err, EngineError::StopStringsNeedTokenizer));
    assert!(err.is_client_error());

    let mut rec = Recorder::default();
    rec.drain(&mut e);
    assert_eq!(rec.outs.len(), 2, "only the good requests have events");
    assert_eq!(rec.take(g1).tokens, alone(good1).tokens);
    assert_eq!(rec.take(g2).tokens, alone(good2).tokens);
    assert_eq!(errs.len(), 6);
}

#[test]
fn decode_is_round_robin_when_the_budget_is_short() {
    // 7 requests, 3 tokens per pass (prefill chunks included).
    let (n, budget) = (7usize, 3usize);
    let reqs: Vec<Request> = (0..n as u64).map(|k| greedy(ids(600 + k, 2), 10)).collect();
    let want: Vec<Out> = reqs.iter().cloned().map(alone).collect();
    let mut e = engine(config(16, 64, budget, 16, 512, PrefixCache::Off));
    let rids: Vec<RequestId> = reqs.into_iter().map(|r| e.add(r).expect("add")).collect();
    let mut rec = Recorder::default();
    rec.drain(&mut e);
    let outs: Vec<Out> = rids.iter().map(|&id| rec.take(id)).collect();
    for (i, (g, w)) in outs.iter().zip(&want).enumerate() {
        assert_eq!(g.tokens, w.tokens, "request {i}");
    }
    // Every request decodes before any finishes: prefill is not starved by
    // decode tokens filling the budget.
    let all_decoding = outs.iter().map(|o| o.token_steps[0]).max().expect("n > 0");
    let first_done = outs
        .iter()
        .filter_map(|o| o.finished_at)
        .min()
        .expect("done");
    assert!(
        all_decoding < first_done,
        "first tokens at steps {:?}, first finish at {first_done}",
        outs.iter().map(|o| o.token_steps[0]).collect::<Vec<_>>()
    );
    // From then on, within any window of ceil(n/budget)+1 steps each
    // request produces a token, until it finishes.
    let window = n.div_ceil(budget) + 1;
    for (i, o) in outs.iter().enumerate() {
        let done = o.finished_at.expect("finished");
        for t in all_decoding..=done.saturating_sub(window - 1) {
            assert!(
                o.token_steps.iter().any(|s| (t..t + window).contains(s)),
                "request {i}: no token in steps {t}..{}: tokens at {:?}",
                t + window,
                o.token_steps
            );
        }
    }
    assert_eq!(e.stats().passes as usize, rec.steps);
}

#[test]
fn prefix_reuse_counts_tokens_per_tenant() {
    let bs = 16;
    let mut e = engine(config(bs, 64, 512, 8, 512, PrefixCache::On));
    let mut rec = Recorder::default();
    let a_prompt = ids(700, 100);
    let a = e.add(greedy(a_prompt.clone(), 4)).expect("add");
    rec.drain(&mut e);
    let oa = rec.take(a);
    assert_eq!(oa.cached, Some(0));
    assert_eq!(oa.finish.expect("finish").1.cached_tokens, 0);
    // A's 100 prompt tokens and 3 fed generated tokens: 6 full blocks
    // (96 tokens) published. A new prompt reuses its shared prefix with
    // them, whole blocks and then the rows of one more block, of all but
    // its last token (one token is always computed).
    let rule = |shared: usize, len: usize| shared.min(len - 1).min(96);

    // B: the first 80 tokens of A, then others.
    let b_prompt = [&a_prompt[..80], &ids(701, 20)[..]].concat();
    // C: A's first 96 tokens exactly: 5 blocks and 15 rows of the sixth.
    let c_prompt = a_prompt[..96].to_vec();
    let d_prompt = b_prompt.clone();
    let (rb, rc) = (greedy(b_prompt.clone(), 4), greedy(c_prompt.clone(), 4));
    let rd = Request {
        tenant: Tenant(1),
        ..greedy(d_prompt, 4)
    };
    let hits_before = e.stats().prefix_hits_tokens;
    let b = e.add(rb.clone()).expect("add");
    let c = e.add(rc.clone()).expect("add");
    let d = e.add(rd.clone()).expect("add");
    rec.drain(&mut e);
    let (ob, oc, od) = (rec.take(b), rec.take(c), rec.take(d));
    assert_eq!(rule(80, 100), 80);
    assert_eq!(ob.cached, Some(80));
    assert_eq!(ob.finish.expect("finish").1.cached_tokens, 80);
    assert_eq!(rule(96, 96), 95);
    assert_eq!(oc.cached, Some(95));
    assert_eq!(oc.finish.expect("finish").1.cached_tokens, 95);
    assert_eq!(od.cached, Some(0), "another tenant's blocks are never used");
    assert_eq!(od.finish.expect("finish").1.cached_tokens, 0);
    assert_eq!(e.stats().prefix_hits_tokens - hits_before, 175);
    let wb = alone(rb);
    assert_eq!(ob.tokens, wb.tokens);
    assert!(ob.logits == wb.logits);
    let wc = alone(rc);
    assert_eq!(oc.tokens, wc.tokens, "15 rows copied from a cached block");
    assert!(oc.logits == wc.logits, "15 rows copied from a cached block");
    assert_eq!(od.tokens, wb.tokens, "same prompt, other tenant");

    // A prompt that diverges inside the first block reuses the rows
    // before the divergence, and computes the same logits.
    let mut early = a_prompt[..40].to_vec();
    early[10] = (early[10] + 1) % model().config().n_vocab as u32;
    let rx = greedy(early, 2);
    let x = e.add(rx.clone()).expect("add");
    rec.drain(&mut e);
    let ox = rec.take(x);
    assert_eq!(ox.cached, Some(10));
    let wx = alone(rx);
    assert_eq!(ox.tokens, wx.tokens);
    assert!(ox.logits == wx.logits);
    // The cached block those rows came from is still intact: C's prompt
    // again reuses its 95 tokens.
    let c2 = e.add(greedy(c_prompt, 4)).expect("add");
    rec.drain(&mut e);
    let oc2 = rec.take(c2);
    assert_eq!(oc2.cached, Some(95));
    assert_eq!(oc2.tokens, wc.tokens);
}

#[test]
fn stop_token_ids_end_before_the_token() {
    let p = ids(800, 6);
    let g = alone(greedy(p.clone(), 8)).tokens;
    let stop = g[2];
    let first = g.iter().position(|&t| t == stop).expect("in g");
    let mut r = greedy(p, 8);
    r.stop.token_ids = vec![stop];
    let o = alone(r);
    assert_eq!(o.tokens, g[..first]);
    assert_eq!(reason(&o), FinishReason::StopToken(stop));
    assert_eq!(o.finish.expect("finish").1.completion_tokens, first);
}

#[test]
fn stop_strings_cut_the_text_before_the_match() {
    let p = text_ids("The capital of France is Paris. The capital of Italy is");
    let base = alone(greedy(p.clone(), 16));
    let g = &base.tokens;
    let text = base.text.clone();
    assert_eq!(text, tok().decode(g));
    // A stop string that starts strictly inside the text of the 2nd or a
    // later token, three bytes long.
    let start = (1..g.len())
        .find_map(|i| {
            let at = tok().decode(&g[..i]).len();
            let end = tok().decode(&g[..=i]).len();
            let s = at + 1;
            (end - at >= 2
                && s + 3 <= text.len()
                && text.is_char_boundary(s)
                && text.is_char_boundary(s + 3))
            .then_some(s)
        })
        .expect("a token of two bytes or more");
    let stop = text[start..start + 3].to_string();
    let cut = text.find(&stop).expect("present");
    let mut r = greedy(p, 16);
    r.stop.strings = vec![stop.clone()];
    let o = alone(r);
    assert_eq!(o.text, text[..cut], "stop string {stop:?}");
    assert_eq!(reason(&o), FinishReason::StopString(0));
    // The tokens are the greedy ones up to the one that completed the match.
    let k = o.tokens.len();
    assert_eq!(o.tokens, g[..k]);
    assert!(tok().decode(&g[..k]).contains(&stop));
    assert!(!tok().decode(&g[..k - 1]).contains(&stop));
}

#[test]
fn end_of_generation_stops_unless_never() {
    let tmpl = ChatTemplate::from_gguf(model().gguf())
        .expect("template")
        .expect("the model has a chat template");
    let prompt = tmpl
        .render(
            &[ChatMessage {
                role: "user".into(),
                content: "Say OK.".into(),
            }],
            true,
        )
        .expect("render");
    let p = text_ids(&prompt);
    let eog = alone(Request::greedy(p.clone(), 64));
    assert_eq!(reason(&eog), FinishReason::EndOfGeneration);
    let n = eog.tokens.len();
    assert!(n < 64);
    assert!(eog.tokens.iter().all(|&t| !tok().is_eog(t)));
    assert_eq!(eog.finish.expect("finish").1.completion_tokens, n);
    let never = alone(greedy(p, n + 2));
    assert_eq!(reason(&never), FinishReason::Length);
    assert_eq!(never.tokens.len(), n + 2);
    assert_eq!(never.tokens[..n], eog.tokens[..]);
    assert!(tok().is_eog(never.tokens[n]));
    assert!(tok().eog_ids().contains(&never.tokens[n]));
}

#[test]
fn top_logprobs_are_sorted_and_normalized() {
    let p = ids(900, 5);
    let plain = alone(greedy(p.clone(), 4));
    assert!(plain.logprobs.iter().all(Option::is_none));
    let mut r = greedy(p, 4);
    r.logprobs = Logprobs::Top(5);
    let o = alone(r);
    assert_eq!(o.tokens, plain.tokens);
    assert_eq!(o.logprobs.len(), 4);
    for (lp, &t) in o.logprobs.iter().zip(&o.tokens) {
        let lp = lp.as_ref().expect("logprobs");
        assert_eq!(lp.top.len(), 5);
        assert_eq!(lp.chosen.token, t);
        assert_eq!(lp.top[0].token, t, "greedy picks the most likely");
        assert_eq!(lp.top[0].logprob, lp.chosen.logprob);
        for w in lp.top.windows(2) {
            assert!(w[0].logprob >= w[1].logprob);
        }
        assert!(lp.top.iter().all(|x| x.logprob <= 0.0));
        let mass: f64 = lp.top.iter().map(|x| f64::from(x.logprob).exp()).sum();
        assert!(mass <= 1.0 + 1e-6, "{mass}");
    }
}

#[test]
fn sessions_append_fork_and_roll_back() {
    let mut e = engine(roomy());
    let mut rec = Recorder::default();
    let s = e.create_session(Tenant(0)).unwrap();
    let in_session = |p: Vec<u32>, n: usize| Request {
        context: Context::Session(s),
        ..greedy(p, n)
    };
    let (p1, p2, p3) = (ids(1000, 10), ids(1001, 5), ids(1002, 4));

    // max_tokens 0 only appends.
    let r1 = e.add(in_session(p1.clone(), 0)).expect("add");
    rec.drain(&mut e);
    let o1 = rec.take(r1);
    assert!(o1.tokens.is_empty());
    assert_eq!(reason(&o1), FinishReason::Length);
    assert_eq!(e.session_tokens(s).expect("tokens"), &p1[..]);
    assert_eq!(e.session_unfed(s).expect("unfed"), None);
    assert_eq!(e.stats().tokens_computed, 10);

    let r2 = e.add(in_session(p2.clone(), 4)).expect("add");
    rec.drain(&mut e);
    let o2 = rec.take(r2);
    let g2 = o2.tokens.clone();
    let usage = o2.finish.expect("finish").1;
    assert_eq!((usage.prompt_tokens, usage.cached_tokens), (15, 10));
    assert_eq!(g2, alone(greedy([&p1[..], &p2[..]].concat(), 4)).tokens);
    let hist: Vec<u32> = [&p1[..], &p2[..], &g2[..3]].concat();
    assert_eq!(e.session_tokens(s).expect("tokens"), &hist[..]);
    assert_eq!(e.session_unfed(s).expect("unfed"), Some(g2[3]));

    // Busy while a request uses it; a cancelled request (queued, then
    // decoding) leaves the session as it was.
    let used0 = used(&e);
    let r3 = e.add(in_session(p3.clone(), 4)).expect("add");
    assert!(matches!(
        e.add(in_session(p3.clone(), 4)),
        Err(EngineError::SessionBusy(x)) if x == s
    ));
    assert!(matches!(
        e.fork_session(s),
        Err(EngineError::SessionBusy(_))
    ));
    expect_cancelled(&mut rec, &mut e, r3);
    let r3 = e.add(in_session(p3.clone(), 8)).expect("add");
    rec.step(&mut e);
    rec.step(&mut e);
    assert!(!rec.outs[&r3].tokens.is_empty());
    expect_cancelled(&mut rec, &mut e, r3);
    assert_eq!(e.session_tokens(s).expect("tokens"), &hist[..]);
    assert_eq!(e.session_unfed(s).expect("unfed"), Some(g2[3]));
    assert_eq!(used(&e), used0);

    // A fork computes nothing; both continue as a fresh request would.
    let computed = e.stats().tokens_computed;
    let f = e.fork_session(s).expect("fork");
    assert_eq!(e.stats().tokens_computed, computed);
    assert_eq!(e.session_tokens(f).expect("tokens"), &hist[..]);
    let rs = e.add(in_session(p3.clone(), 4)).expect("add");
    let rf = e
        .add(Request {
            context: Context::Session(f),
            ..greedy(p3.clone(), 4)
        })
        .expect("add");
    rec.drain(&mut e);
    let (os, of) = (rec.take(rs), rec.take(rf));
    let fresh = alone(greedy([&p1[..], &p2[..], &g2[..], &p3[..]].concat(), 4));
    assert_eq!(os.tokens, fresh.tokens);
    assert_eq!(of.tokens, fresh.tokens);
    assert!(os.logits == fresh.logits && of.logits == fresh.logits);
    assert_eq!(os.cached, Some(hist.len()));
    e.free_session(f).expect("free");
    assert!(matches!(
        e.session_tokens(f),
        Err(EngineError::UnknownSession(_))
    ));
    // The other tenant cannot use the session.
    let other = Request {
        tenant: Tenant(1),
        ..in_session(p3, 1)
    };
    assert!(matches!(e.add(other), Err(EngineError::UnknownSession(_))));
}

#[test]
fn frequency_penalty_changes_a_repetitive_output_deterministically() {
    let p = text_ids("a a a a a a a");
    let plain = alone(greedy(p.clone(), 8)).tokens;
    let mut r = greedy(p, 8);
    r.sampling.frequency_penalty = 2.0;
    let once = alone(r.clone()).tokens;
    assert_ne!(once, plain);
    assert_eq!(alone(r.clone()).tokens, once);
    // Also beside another penalized request.
    let mut e = engine(roomy());
    let mut rec = Recorder::default();
    let mut other = r.clone();
    other.prompt.extend(ids(1100, 2));
    let x = e.add(other).expect("add");
    let y = e.add(r).expect("add");
    rec.drain(&mut e);
    assert_eq!(rec.take(y).tokens, once);
    assert_eq!(rec.take(x).tokens.len(), 8);
}

/// Requests that arrive together with one long shared prompt compute it
/// once: the later ones wait for the first one's blocks to be published
/// (block by block, as its prefill chunks finish), then attach them.
#[test]
fn concurrent_requests_share_a_prefix_being_computed() {
    let bs = 16;
    // Token budget 32: the 100-token prefix takes several passes.
    let mut e = engine(config(bs, 128, 32, 8, 512, PrefixCache::On));
    let mut rec = Recorder::default();
    let shared = ids(900, 100);
    let reqs: Vec<Request> = (0..4)
        .map(|k| greedy([&shared[..], &ids(901 + k, 5)[..]].concat(), 3))
        .collect();
    let computed_before = e.stats().tokens_computed;
    let got: Vec<RequestId> = reqs
        .iter()
        .map(|r| e.add(r.clone()).expect("add"))
        .collect();
    rec.drain(&mut e);
    let outs: Vec<Out> = got.iter().map(|&id| rec.take(id)).collect();
    assert_eq!(outs[0].cached, Some(0));
    for o in &outs[1..] {
        assert_eq!(o.cached, Some(96), "whole blocks of the shared 100 tokens");
    }
    // 105 for the first, 105 - 96 for each other, plus 2 fed decode tokens each.
    let computed = e.stats().tokens_computed - computed_before;
    assert_eq!(computed, 105 + 3 * 9 + 4 * 2);
    for (r, o) in reqs.into_iter().zip(&outs) {
        assert_eq!(o.tokens, alone(r).tokens);
    }
}
