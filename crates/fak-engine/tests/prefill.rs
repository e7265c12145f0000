//! How a pass takes in waiting prompts ([`PrefillMix`]): `Serial` gives a
//! burst's prompts their first tokens one pass apart, oldest first, and
//! lets tiny prompts share a pass; `Fill` packs the budget. Either way
//! every request's tokens are the ones it gets alone.

use fak_engine::{
    Engine, EngineConfig, Event, PagedKvConfig, PrefillMix, PrefixCache, Request, RequestId,
    StopAt, StopRules, SERIAL_PREFILL,
};
use fak_model::KvType;

mod common;

use common::{ids, model, tok};

fn config(prefill: PrefillMix) -> EngineConfig {
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
        n_ctx: 512,
        prefix_cache: PrefixCache::Off,
        prefill,
        mask: fak_engine::MaskMode::default(),
    }
}

/// Greedy, exactly `n` tokens.
fn greedy(prompt: Vec<u32>, n: usize) -> Request {
    Request {
        stop: StopRules {
            eog: StopAt::Never,
            ..StopRules::default()
        },
        ..Request::greedy(prompt, n)
    }
}

/// Per request: the step of its first token, and its tokens.
struct Run {
    first_step: Vec<Option<usize>>,
    tokens: Vec<Vec<u32>>,
}

/// Adds `early` requests and runs `warm` steps, then adds `burst` and
/// drains the engine; reports on the burst's requests.
fn run(prefill: PrefillMix, early: &[Request], warm: usize, burst: &[Request]) -> Run {
    let mut e = Engine::new(model(), Some(tok()), config(prefill)).expect("engine");
    for r in early {
        e.add(r.clone()).expect("add");
    }
    for _ in 0..warm {
        e.step().expect("step");
    }
    let ids: Vec<RequestId> = burst
        .iter()
        .map(|r| e.add(r.clone()).expect("add"))
        .collect();
    let mut out = Run {
        first_step: vec![None; ids.len()],
        tokens: vec![Vec::new(); ids.len()],
    };
    let mut step = 0;
    while e.has_work() {
        assert!(step < 5000, "the engine does not finish");
        for ev in e.step().expect("step") {
            let Event::Token { id, token, .. } = ev else {
                continue;
            };
            if let Some(k) = ids.iter().position(|&i| i == id) {
                out.first_step[k].get_or_insert(step);
                out.tokens[k].push(token);
            }
        }
        step += 1;
    }
    out
}

fn alone(req: &Request) -> Vec<u32> {
    run(PrefillMix::Fill, &[], 0, std::slice::from_ref(req))
        .tokens
        .remove(0)
}

#[test]
fn serial_prefill_gives_a_burst_first_tokens_one_pass_apart() {
    let burst: Vec<Request> = (0..4).map(|k| greedy(ids(10 + k, 40), 6)).collect();
    let serial = run(SERIAL_PREFILL, &[], 0, &burst);
    let fill = run(PrefillMix::Fill, &[], 0, &burst);
    // Serial: the oldest first, one prompt per pass.
    assert_eq!(
        serial.first_step,
        vec![Some(0), Some(1), Some(2), Some(3)],
        "serial"
    );
    // Fill: all four prompts (160 tokens) in the first pass.
    assert_eq!(fill.first_step, vec![Some(0); 4], "fill");
    for (k, req) in burst.iter().enumerate() {
        let a = alone(req);
        assert_eq!(serial.tokens[k], a, "request {k}, serial");
        assert_eq!(fill.tokens[k], a, "request {k}, fill");
    }
}

#[test]
fn serial_prefill_lets_tiny_prompts_share_a_pass() {
    // 5 + 5 + 5 tokens: each joins a pass still under 16 tokens; the
    // fourth finds 15 and joins too, the fifth finds 20 and waits.
    let burst: Vec<Request> = (0..5).map(|k| greedy(ids(20 + k, 5), 3)).collect();
    let serial = run(SERIAL_PREFILL, &[], 0, &burst);
    assert_eq!(
        serial.first_step,
        vec![Some(0), Some(0), Some(0), Some(0), Some(1)]
    );
    for (k, req) in burst.iter().enumerate() {
        assert_eq!(serial.tokens[k], alone(req), "request {k}");
    }
}

#[test]
fn serial_prefill_takes_one_prompt_per_pass_beside_many_decodes() {
    // 20 requests decoding: every pass already holds 20 tokens, so a
    // burst of tiny prompts still goes in one prompt per pass.
    let early: Vec<Request> = (0..20).map(|k| greedy(ids(40 + k, 4), 24)).collect();
    let burst: Vec<Request> = (0..3).map(|k| greedy(ids(70 + k, 4), 3)).collect();
    let serial = run(SERIAL_PREFILL, &early, 16, &burst);
    assert_eq!(serial.first_step, vec![Some(0), Some(1), Some(2)]);
    let fill = run(PrefillMix::Fill, &early, 16, &burst);
    assert_eq!(fill.first_step, vec![Some(0); 3]);
    for (k, req) in burst.iter().enumerate() {
        let a = alone(req);
        assert_eq!(serial.tokens[k], a, "request {k}, serial");
        assert_eq!(fill.tokens[k], a, "request {k}, fill");
    }
}
