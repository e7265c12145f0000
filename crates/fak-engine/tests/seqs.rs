//! Paged KV through [`Sequences`]: batch invariance (alone vs together,
//! chunked vs whole, cached prefix vs computed), forks, exact and shift
//! eviction, out-of-blocks handling. Logits are compared as bytes against
//! a reference that runs each sequence alone in a flat (unpaged) cache.

use fak_engine::{
    Append, EngineError, EvictMode, PagedKv, PagedKvConfig, PrefixCache, Sequence, Sequences,
    Tenant,
};
use fak_model::{KvType, LogitsWanted, SeqId};
use proptest::prelude::*;

mod common;

use common::{bytes, ids, lockstep, model};

/// Reference: logits after each chunk, the whole token list computed alone
/// in a flat cache, one chunk per forward call.
fn reference(chunks: &[Vec<u32>]) -> Vec<Vec<u8>> {
    reference_kv(KvType::F16, chunks)
}

/// [`reference`] with a `kv` cache.
fn reference_kv(kv: KvType, chunks: &[Vec<u32>]) -> Vec<Vec<u8>> {
    let n: usize = chunks.iter().map(Vec::len).sum();
    let mut s = Sequence::with_kv_type(model(), n, kv).expect("sequence");
    chunks
        .iter()
        .map(|c| bytes(&s.ingest(model(), c).expect("ingest")))
        .collect()
}

/// A sequence, the chunks it was fed, and the logits (bytes) after each.
type History = (SeqId, Vec<Vec<u32>>, Vec<Vec<u8>>);

fn cache(block_size: usize, n_blocks: usize, prefix: PrefixCache, ubatch: usize) -> Sequences {
    cache_kv(KvType::F16, block_size, n_blocks, prefix, ubatch)
}

/// [`cache`] storing rows as `kv_type`.
fn cache_kv(
    kv_type: KvType,
    block_size: usize,
    n_blocks: usize,
    prefix: PrefixCache,
    ubatch: usize,
) -> Sequences {
    Sequences::new(
        model(),
        PagedKvConfig {
            block_size,
            n_blocks,
            kv_type,
            window: fak_engine::KvWindow::Drop,
        },
        prefix,
        ubatch,
    )
    .expect("cache")
}

#[test]
fn together_equals_alone_and_flat() {
    together_equals_alone_and_flat_with(KvType::F16);
}

#[test]
fn together_equals_alone_and_flat_q8_0_kv() {
    together_equals_alone_and_flat_with(KvType::Q8_0);
}

fn together_equals_alone_and_flat_with(kv: KvType) {
    let m = model();
    let prompts: Vec<Vec<u32>> = (0..4).map(|i| ids(10 + i, 3 + 7 * i as usize)).collect();
    let steps: Vec<Vec<u32>> = (0..4).map(|i| ids(50 + i, 3)).collect();
    let mut seqs = cache_kv(kv, 4, 64, PrefixCache::Off, 512);
    let handles: Vec<SeqId> = (0..4).map(|_| seqs.create(Tenant(1)).unwrap()).collect();
    let got = lockstep(&mut seqs, m, &handles, &prompts, &steps, 3);
    for i in 0..4 {
        let mut chunks = vec![prompts[i].clone()];
        chunks.extend(steps[i].iter().map(|&t| vec![t]));
        assert!(got[i] == reference_kv(kv, &chunks), "sequence {i} differs");
    }
}

#[test]
fn chunked_prefill_equals_whole() {
    chunked_prefill_equals_whole_with(KvType::F16);
}

#[test]
fn chunked_prefill_equals_whole_q8_0_kv() {
    chunked_prefill_equals_whole_with(KvType::Q8_0);
}

fn chunked_prefill_equals_whole_with(kv: KvType) {
    let m = model();
    let p = ids(7, 37);
    let want = reference_kv(kv, std::slice::from_ref(&p));
    for (bs, ubatch) in [(1, 5), (4, 3), (16, 16), (5, 1000)] {
        let mut seqs = cache_kv(kv, bs, 64, PrefixCache::Off, ubatch);
        let s = seqs.create(Tenant(0)).unwrap();
        let got = seqs.ingest(m, s, &p).expect("ingest");
        assert!(vec![bytes(&got)] == want, "block {bs}, ubatch {ubatch}");
    }
}

#[test]
fn cached_prefix_equals_computed_and_tenants_are_isolated() {
    cached_prefix_equals_computed_and_tenants_are_isolated_with(KvType::F16);
}

#[test]
fn cached_prefix_equals_computed_and_tenants_are_isolated_q8_0_kv() {
    cached_prefix_equals_computed_and_tenants_are_isolated_with(KvType::Q8_0);
}

fn cached_prefix_equals_computed_and_tenants_are_isolated_with(kv: KvType) {
    let m = model();
    let prefix = ids(3, 24);
    let a: Vec<u32> = prefix.iter().copied().chain(ids(4, 5)).collect();
    let b: Vec<u32> = prefix.iter().copied().chain(ids(5, 6)).collect();
    let mut seqs = cache_kv(kv, 4, 64, PrefixCache::On, 512);
    let sa = seqs.create(Tenant(1)).unwrap();
    seqs.ingest(m, sa, &a).expect("a");
    seqs.publish(sa).expect("publish");
    // Same tenant: the prefix's blocks are reused.
    let sb = seqs.create(Tenant(1)).unwrap();
    let reused = seqs.attach_prefix(sb, &b).expect("attach");
    assert_eq!(reused, 24);
    let rest = &b[reused..];
    let got = seqs.ingest(m, sb, rest).expect("b");
    assert!(vec![bytes(&got)] == reference_kv(kv, std::slice::from_ref(&b)));
    // Another tenant never sees them.
    let sc = seqs.create(Tenant(2)).unwrap();
    assert_eq!(seqs.attach_prefix(sc, &b).expect("attach"), 0);
    let got = seqs.ingest(m, sc, &b).expect("c");
    assert!(vec![bytes(&got)] == reference_kv(kv, std::slice::from_ref(&b)));
    // Freed sequences leave the published blocks cached, still reusable
    // (all 7 full blocks of `a`).
    seqs.free(sa).expect("free");
    seqs.free(sb).expect("free");
    let sd = seqs.create(Tenant(1)).unwrap();
    assert_eq!(seqs.attach_prefix(sd, &a).expect("attach"), 28);
}

#[test]
fn exact_eviction_equals_never_seeing_the_span_and_spares_siblings() {
    exact_eviction_equals_never_seeing_the_span_and_spares_siblings_with(KvType::F16);
}

#[test]
fn exact_eviction_equals_never_seeing_the_span_and_spares_siblings_q8_0_kv() {
    exact_eviction_equals_never_seeing_the_span_and_spares_siblings_with(KvType::Q8_0);
}

fn exact_eviction_equals_never_seeing_the_span_and_spares_siblings_with(kv: KvType) {
    let m = model();
    let (p, span, q) = (ids(1, 21), ids(2, 9), ids(3, 14));
    let full: Vec<u32> = [p.clone(), span.clone(), q.clone()].concat();
    let mut seqs = cache_kv(kv, 4, 128, PrefixCache::Off, 512);
    let s = seqs.create(Tenant(0)).unwrap();
    seqs.ingest(m, s, &full).expect("ingest");
    let sib = seqs.fork(s).expect("fork");
    let rep = seqs
        .evict(m, s, p.len()..p.len() + span.len(), EvictMode::Exact)
        .expect("evict");
    assert_eq!((rep.removed, rep.recomputed), (9, 14));
    let without: Vec<u32> = [p.clone(), q.clone()].concat();
    assert!(
        vec![bytes(&rep.logits.expect("logits"))]
            == reference_kv(kv, std::slice::from_ref(&without))
    );
    assert_eq!(seqs.tokens(s).expect("tokens"), &without[..]);
    // Both continue; each matches its own reference.
    let next = ids(9, 2);
    let a = seqs.ingest(m, s, &next).expect("s");
    let b = seqs.ingest(m, sib, &next).expect("sib");
    assert!(bytes(&a) == reference_kv(kv, &[without, next.clone()])[1]);
    assert!(bytes(&b) == reference_kv(kv, &[full, next])[1]);
}

#[test]
fn shift_eviction_is_labelled_approximate_and_spares_siblings() {
    let m = model();
    let (p, span, q) = (ids(1, 12), ids(2, 8), ids(3, 6));
    let full: Vec<u32> = [p.clone(), span.clone(), q.clone()].concat();
    let mut seqs = cache(4, 64, PrefixCache::Off, 512);
    let s = seqs.create(Tenant(0)).unwrap();
    seqs.ingest(m, s, &full).expect("ingest");
    let sib = seqs.fork(s).expect("fork");
    let rep = seqs.evict(m, s, 12..20, EvictMode::Shift).expect("evict");
    assert_eq!((rep.removed, rep.recomputed), (8, 0));
    assert!(rep.logits.is_none());
    let without: Vec<u32> = [p, q].concat();
    assert_eq!(seqs.tokens(s).expect("tokens"), &without[..]);
    let next = ids(9, 1);
    let a = seqs.ingest(m, s, &next).expect("s");
    assert!(a.iter().all(|x| x.is_finite()));
    // Approximate: the span's influence remains, so it is not the exact answer.
    assert!(bytes(&a) != reference(&[without, next.clone()])[1]);
    let b = seqs.ingest(m, sib, &next).expect("sib");
    assert!(bytes(&b) == reference(&[full, next])[1]);
}

#[test]
fn out_of_blocks_is_an_error_and_rolls_back() {
    let m = model();
    let mut seqs = cache(4, 3, PrefixCache::Off, 512);
    let s = seqs.create(Tenant(0)).unwrap();
    seqs.ingest(m, s, &ids(1, 10)).expect("fits");
    let err = seqs
        .ingest(m, s, &ids(2, 5))
        .expect_err("13..15 do not fit");
    assert!(
        matches!(err, EngineError::Model(_)),
        "unexpected error {err:?}"
    );
    assert!(err.to_string().contains("full"), "{err}");
    assert_eq!(seqs.tokens(s).expect("tokens").len(), 10);
    // Still usable.
    let got = seqs.ingest(m, s, &ids(3, 2)).expect("fits again");
    assert!(bytes(&got) == reference(&[ids(1, 10), ids(3, 2)])[1]);
}

#[test]
fn bad_spans_are_errors() {
    let m = model();
    let mut seqs = cache(4, 16, PrefixCache::Off, 512);
    let s = seqs.create(Tenant(0)).unwrap();
    seqs.ingest(m, s, &ids(1, 6)).expect("ingest");
    for span in [3..3, 4..7, 7..9] {
        assert!(matches!(
            seqs.evict(m, s, span, EvictMode::Exact),
            Err(EngineError::BadSpan { .. })
        ));
    }
    assert!(matches!(
        seqs.tokens(SeqId(999)),
        Err(EngineError::UnknownSeq(999))
    ));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    /// Random schedules: sequences join at different times, prefill in
    /// random chunks, share a prefix by fork, and decode side by side. Every
    /// sequence's logits equal its own computation alone, as bytes.
    #[test]
    fn random_schedules_are_batch_invariant(
        seed in 0u64..1000,
        lens in proptest::collection::vec(1usize..12, 2..5),
        chunk in 1usize..6,
        block in 1usize..6,
        ubatch in 2usize..40,
        q8 in proptest::bool::ANY,
    ) {
        let m = model();
        let kv = if q8 { KvType::Q8_0 } else { KvType::F16 };
        let mut seqs = cache_kv(kv, block, 256, PrefixCache::On, ubatch);
        let root = seqs.create(Tenant(0)).unwrap();
        let prefix = ids(seed, 5);
        seqs.ingest(m, root, &prefix).expect("root");
        seqs.publish(root).expect("publish");
        let mut hist: Vec<History> = Vec::new();
        for (i, &len) in lens.iter().enumerate() {
            let s = if i % 2 == 0 { seqs.fork(root).expect("fork") } else {
                let s = seqs.create(Tenant(0)).unwrap();
                let n = seqs.attach_prefix(s, &prefix).expect("attach");
                let head = prefix[n..].to_vec();
                if !head.is_empty() {
                    seqs.ingest(m, s, &head).expect("head");
                }
                s
            };
            hist.push((s, vec![prefix.clone()], Vec::new()));
            let body = ids(seed + 1 + i as u64, len);
            // Feed everyone's pending chunk in one ragged step per round.
            let mut pos = 0;
            while pos < body.len() {
                let end = (pos + chunk).min(body.len());
                let c = body[pos..end].to_vec();
                let others: Vec<(usize, [u32; 1])> = (0..hist.len() - 1)
                    .map(|j| (j, [ids(seed ^ 77, 1 + j + pos)[j + pos]]))
                    .collect();
                let mut items = vec![Append { seq: s, ids: &c, logits: LogitsWanted::Yes }];
                for (j, t) in &others {
                    items.push(Append { seq: hist[*j].0, ids: t, logits: LogitsWanted::Yes });
                }
                let out = seqs.step(m, &items).expect("step");
                let last = hist.len() - 1;
                hist[last].1.push(c.clone());
                hist[last].2.push(bytes(out[0].as_ref().expect("logits")));
                for ((j, t), o) in others.iter().zip(&out[1..]) {
                    hist[*j].1.push(t.to_vec());
                    hist[*j].2.push(bytes(o.as_ref().expect("logits")));
                }
                pos = end;
            }
        }
        for (s, chunks, got) in &hist {
            let want = reference_kv(kv, chunks);
            prop_assert!(got[..] == want[1..], "sequence {:?} differs", s);
        }
    }
}

#[test]
fn q8_0_cache_is_smaller_and_changes_logits_only_slightly() {
    let cfg = model().config();
    let sizes = PagedKvConfig::for_sequences(16, 4, 256);
    let f16 = PagedKv::new(cfg, sizes).expect("f16");
    let q8 = PagedKv::new(cfg, sizes.with_kv_type(KvType::Q8_0)).expect("q8_0");
    // 34 bytes per 32 values instead of 64.
    assert_eq!(q8.storage_bytes() * 64, f16.storage_bytes() * 34);
    let p = vec![ids(11, 40)];
    let (a, b) = (
        reference_kv(KvType::F16, &p),
        reference_kv(KvType::Q8_0, &p),
    );
    assert!(a != b, "a Q8_0 cache must change the logits' bits");
    let fl = |v: &[u8]| -> Vec<f32> {
        v.chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    };
    let (x, y) = (fl(&a[0]), fl(&b[0]));
    let range = x.iter().fold(f32::NEG_INFINITY, |m, v| m.max(*v))
        - x.iter().fold(f32::INFINITY, |m, v| m.min(*v));
    let err = x
        .iter()
        .zip(&y)
        .map(|(p, q)| (p - q).abs())
        .fold(0.0f32, f32::max);
    assert!(
        err < 0.05 * range,
        "Q8_0 cache moved logits by {err} of range {range}"
    );
}

/// The property exact speculative decoding rests on: the logits after
/// every token of a chunk appended in one step (`Rows::Every`) are the
/// bytes of feeding the same tokens one decode step at a time, whatever
/// else is in the batch, however the forward calls split it, and after a
/// rejected tail is truncated away and the sequence goes on.
#[test]
fn every_row_of_a_chunk_equals_single_steps() {
    let m = model();
    let prompt = ids(7, 13);
    let tail = ids(8, 9);
    for ubatch in [512, 5] {
        let mut seqs = cache(4, 64, PrefixCache::Off, ubatch);
        // One token at a time.
        let a = seqs.create(Tenant(1)).unwrap();
        seqs.step(
            m,
            &[Append {
                seq: a,
                ids: &prompt,
                logits: LogitsWanted::Yes,
            }],
        )
        .expect("prefill");
        let single: Vec<Vec<u8>> = tail
            .iter()
            .map(|t| {
                let out = seqs
                    .step(
                        m,
                        &[Append {
                            seq: a,
                            ids: std::slice::from_ref(t),
                            logits: LogitsWanted::Yes,
                        }],
                    )
                    .expect("decode");
                bytes(out[0].as_ref().expect("logits"))
            })
            .collect();
        // The whole tail as one chunk, beside another sequence's prefill.
        let b = seqs.create(Tenant(1)).unwrap();
        let other = seqs.create(Tenant(1)).unwrap();
        seqs.step(
            m,
            &[Append {
                seq: b,
                ids: &prompt,
                logits: LogitsWanted::No,
            }],
        )
        .expect("prefill");
        let noise = ids(9, 11);
        let items = [
            Append {
                seq: other,
                ids: &noise,
                logits: LogitsWanted::Yes,
            },
            Append {
                seq: b,
                ids: &tail,
                logits: LogitsWanted::Yes,
            },
        ];
        let mut rows: Vec<Option<Vec<u8>>> = vec![None; tail.len()];
        seqs.step_rows_with(
            m,
            &items,
            &[fak_engine::Rows::Last, fak_engine::Rows::Every],
            |i, j, l| {
                if i == 1 {
                    rows[j] = Some(bytes(l));
                }
            },
        )
        .expect("verify");
        for (j, (r, s)) in rows.iter().zip(&single).enumerate() {
            assert!(
                r.as_ref() == Some(s),
                "ubatch {ubatch}: row {j} differs from the single step"
            );
        }
        // Reject after 3 tokens: truncate, then verify the rest again.
        seqs.truncate(b, prompt.len() + 3).expect("truncate");
        let mut again: Vec<Vec<u8>> = Vec::new();
        seqs.step_rows_with(
            m,
            &[Append {
                seq: b,
                ids: &tail[3..],
                logits: LogitsWanted::Yes,
            }],
            &[fak_engine::Rows::Every],
            |_, _, l| again.push(bytes(l)),
        )
        .expect("verify again");
        assert!(
            again == single[3..],
            "ubatch {ubatch}: rows after the truncation differ"
        );
    }
}
