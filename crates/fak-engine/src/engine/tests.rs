//! How [`Engine::add`] turns a request's [`MaxTokens`] into a number of
//! tokens: the rule alone ([`OutputBounds`]), then through `add` on a
//! real model, fresh and in a session.

use std::path::Path;

use fak_kv::Tenant;
use fak_model::{KvType, Model};

use super::*;
use crate::request::{Event, SessionId};

fn bounds(n_ctx: usize, block_size: usize, n_blocks: usize) -> OutputBounds {
    OutputBounds {
        n_ctx,
        block_size,
        n_blocks,
    }
}

/// The number `add` would give, or its refusal.
fn resolved(b: OutputBounds, max: MaxTokens, n_prompt: usize) -> Result<usize, EngineError> {
    let n = b.resolve(max, n_prompt);
    b.check(n_prompt, n).map(|()| n)
}

fn overflow(n_prompt_tokens: usize, max_tokens: usize, n_ctx: usize) -> String {
    EngineError::ContextOverflow {
        n_prompt_tokens,
        max_tokens,
        n_ctx,
    }
    .to_string()
}

fn too_large(needed_blocks: usize, n_blocks: usize) -> String {
    EngineError::RequestTooLarge {
        needed_blocks,
        n_blocks,
    }
    .to_string()
}

/// The resolution's error as text (`EngineError` has no `PartialEq`).
fn text(r: Result<usize, EngineError>) -> Result<usize, String> {
    r.map_err(|e| e.to_string())
}

#[test]
fn room_is_what_the_context_has_left() {
    // 63 · 16 = 1008 tokens of pool: the context (512) binds.
    let b = bounds(512, 16, 64);
    assert_eq!(text(resolved(b, MaxTokens::Room, 12)), Ok(500));
    // A session's 300 tokens count as tokens before the output.
    assert_eq!(text(resolved(b, MaxTokens::Room, 300 + 12)), Ok(200));
    // A ceiling is cut to the room; under it, kept.
    assert_eq!(text(resolved(b, MaxTokens::Ceiling(128_000), 12)), Ok(500));
    assert_eq!(text(resolved(b, MaxTokens::Ceiling(7), 12)), Ok(7));
    // A strict limit must fit.
    assert_eq!(text(resolved(b, MaxTokens::Strict(500), 12)), Ok(500));
    assert_eq!(
        text(resolved(b, MaxTokens::Strict(501), 12)),
        Err(overflow(12, 501, 512))
    );
    assert_eq!(
        text(resolved(b, MaxTokens::Strict(usize::MAX), 12)),
        Err(overflow(12, usize::MAX, 512))
    );
    // A full context leaves no room: 1 token is asked for, and refused.
    for max in [MaxTokens::Room, MaxTokens::Ceiling(5)] {
        assert_eq!(text(resolved(b, max, 512)), Err(overflow(512, 1, 512)));
    }
    // 0 generates nothing (a session append), and fits a full context.
    assert_eq!(text(resolved(b, MaxTokens::Strict(0), 512)), Ok(0));
}

#[test]
fn room_is_what_the_pool_could_hold_when_that_is_less() {
    // 9 blocks of 16, one spare: 128 tokens, under the context of 512.
    let b = bounds(512, 16, 9);
    assert_eq!(b.most_tokens(), 128);
    assert_eq!(text(resolved(b, MaxTokens::Room, 12)), Ok(116));
    assert_eq!(text(resolved(b, MaxTokens::Ceiling(400), 12)), Ok(116));
    assert_eq!(text(resolved(b, MaxTokens::Strict(116), 12)), Ok(116));
    // 129 tokens: 9 blocks plus the spare.
    assert_eq!(
        text(resolved(b, MaxTokens::Strict(117), 12)),
        Err(too_large(10, 9))
    );
    // A pool of one block holds nothing.
    assert_eq!(
        text(resolved(bounds(512, 16, 1), MaxTokens::Room, 12)),
        Err(too_large(2, 1))
    );
}

fn model() -> Model {
    let p =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models/smollm2-135m-instruct-q8_0.gguf");
    assert!(
        p.exists(),
        "{} is missing: run scripts/fetch-models.sh",
        p.display()
    );
    let mut m = Model::load(&p).expect("load");
    m.set_threads(2).expect("two threads");
    m
}

fn config(n_blocks: usize) -> EngineConfig {
    EngineConfig {
        kv: PagedKvConfig {
            block_size: 16,
            n_blocks,
            kv_type: KvType::F16,
            window: crate::KvWindow::Drop,
        },
        token_budget: 512,
        max_running: 4,
        max_waiting: None,
        n_ctx: 512,
        prefix_cache: crate::PrefixCache::On,
        prefill: SERIAL_PREFILL,
        mask: MaskMode::default(),
    }
}

fn ids(seed: u32, n: usize) -> Vec<u32> {
    (0..n as u32)
        .map(|i| (seed * 7919 + i * 104_729) % 49152)
        .collect()
}

fn asking(prompt: Vec<u32>, max_tokens: MaxTokens, context: Context) -> Request {
    Request {
        max_tokens,
        context,
        ..Request::greedy(prompt, 0)
    }
}

/// The number of tokens `add` gave the queued request `id`.
fn budget(e: &Engine<'_>, id: RequestId) -> usize {
    e.live(id).expect("queued").max_tokens
}

/// Adds `req` and reads back its resolved budget, then cancels it.
fn added(e: &mut Engine<'_>, req: Request) -> Result<usize, String> {
    let id = e.add(req).map_err(|x| x.to_string())?;
    let n = budget(e, id);
    e.cancel(id).expect("cancel");
    e.step().expect("step");
    Ok(n)
}

#[test]
fn add_resolves_the_limit_for_fresh_and_session_contexts() {
    let m = model();
    let mut e = Engine::new(&m, None, config(64)).expect("engine");
    let fresh = |max| asking(ids(1, 12), max, Context::Fresh);
    assert_eq!(added(&mut e, fresh(MaxTokens::Room)), Ok(500));
    assert_eq!(added(&mut e, fresh(MaxTokens::Ceiling(128_000))), Ok(500));
    assert_eq!(added(&mut e, fresh(MaxTokens::Ceiling(7))), Ok(7));
    assert_eq!(added(&mut e, fresh(MaxTokens::Strict(9))), Ok(9));
    assert_eq!(
        added(&mut e, fresh(MaxTokens::Strict(501))),
        Err(overflow(12, 501, 512))
    );

    // max_tokens 0 appends the prompt to a session and generates nothing.
    let s: SessionId = e.create_session(Tenant(0)).unwrap();
    let base = ids(2, 100);
    let id = e
        .add(asking(
            base.clone(),
            MaxTokens::Strict(0),
            Context::Session(s),
        ))
        .expect("append");
    assert_eq!(budget(&e, id), 0);
    let mut events = Vec::new();
    while e.has_work() {
        events.extend(e.step().expect("step"));
    }
    assert!(events.iter().all(|ev| !matches!(ev, Event::Token { .. })));
    assert!(events.iter().any(|ev| matches!(
        ev,
        Event::Finished { reason: FinishReason::Length, usage, .. }
            if usage.completion_tokens == 0 && usage.prompt_tokens == 100
    )));
    assert_eq!(e.session_tokens(s).expect("tokens"), &base[..]);
    assert_eq!(e.session_unfed(s).expect("unfed"), None);

    // The session's tokens count against the room.
    let turn = |p: Vec<u32>, max| asking(p, max, Context::Session(s));
    assert_eq!(added(&mut e, turn(ids(3, 12), MaxTokens::Room)), Ok(400));
    assert_eq!(
        added(&mut e, turn(ids(3, 12), MaxTokens::Ceiling(1000))),
        Ok(400)
    );
    assert_eq!(
        added(&mut e, turn(ids(3, 12), MaxTokens::Strict(401))),
        Err(overflow(112, 401, 512))
    );
    // Nothing to feed: an append of nothing is fine, a reply is not.
    assert_eq!(added(&mut e, turn(Vec::new(), MaxTokens::Strict(0))), Ok(0));
    assert_eq!(
        added(&mut e, turn(Vec::new(), MaxTokens::Room)),
        Err(EngineError::EmptyPrompt.to_string())
    );
    assert_eq!(e.session_tokens(s).expect("tokens"), &base[..]);
}

#[test]
fn add_bounds_the_room_by_the_pool() {
    let m = model();
    // 9 blocks of 16 tokens: 128 tokens for one request, context 512.
    let mut e = Engine::new(&m, None, config(9)).expect("engine");
    let fresh = |max| asking(ids(4, 12), max, Context::Fresh);
    assert_eq!(added(&mut e, fresh(MaxTokens::Room)), Ok(116));
    assert_eq!(added(&mut e, fresh(MaxTokens::Ceiling(400))), Ok(116));
    assert_eq!(
        added(&mut e, fresh(MaxTokens::Strict(117))),
        Err(too_large(10, 9))
    );
}
