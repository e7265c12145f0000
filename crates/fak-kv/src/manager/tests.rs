//! Unit tests for every [`KvManager`] method, including its errors.

use super::*;

const T0: Tenant = Tenant(0);
const T1: Tenant = Tenant(1);

fn kv(block_size: usize, n_blocks: usize) -> KvManager {
    KvManager::new(PoolConfig {
        block_size,
        n_blocks,
    })
    .unwrap()
}

/// Checks every internal invariant against the block tables.
fn audit(kv: &KvManager) {
    let cap = kv.pool.capacity();
    let mut refs = vec![0u32; cap];
    for seq in kv.seqs.values() {
        assert_eq!(
            seq.blocks.len(),
            seq.len.div_ceil(kv.block_size) - seq.dropped
        );
        for b in &seq.blocks {
            refs[b.0 as usize] += 1;
        }
    }
    let mut cached = 0;
    for (i, &r) in refs.iter().enumerate() {
        let b = BlockId(i as u32);
        assert_eq!(kv.refcount(b), r, "refcount of {b:?}");
        if r == 0 && kv.is_published(b) {
            assert!(
                kv.is_cached(b),
                "{b:?} unreferenced+published must be cached"
            );
            cached += 1;
        } else {
            assert!(!kv.is_cached(b), "{b:?} must not be cached");
        }
    }
    let st = kv.stats();
    assert_eq!(st.cached, cached);
    assert_eq!(st.used, refs.iter().filter(|&&r| r > 0).count());
    assert_eq!(st.free + st.used + st.cached, st.capacity);
}

/// A snapshot of everything observable, to check that errors change nothing.
fn snapshot(kv: &KvManager) -> String {
    format!("{:?}", kv)
}

#[test]
fn new_rejects_bad_config() {
    for (bs, n) in [(0, 4), (4, 0)] {
        let cfg = PoolConfig {
            block_size: bs,
            n_blocks: n,
        };
        assert!(matches!(KvManager::new(cfg), Err(KvError::BadConfig(_))));
    }
    if usize::BITS > 32 {
        let cfg = PoolConfig {
            block_size: 1,
            n_blocks: u32::MAX as usize + 2,
        };
        assert!(matches!(KvManager::new(cfg), Err(KvError::BadConfig(_))));
    }
    let cfg = PoolConfig {
        block_size: 4,
        n_blocks: 4,
    };
    assert!(matches!(
        KvManager::with_window(cfg, 0),
        Err(KvError::BadConfig(_))
    ));
    assert_eq!(KvManager::with_window(cfg, 8).unwrap().window(), Some(8));
    let kv = kv(16, 3);
    assert_eq!(kv.window(), None);
    assert_eq!(kv.block_size(), 16);
    assert_eq!(
        kv.stats(),
        PoolStats {
            capacity: 3,
            free: 3,
            used: 0,
            cached: 0
        }
    );
}

#[test]
fn create_seq_is_empty_and_slots_are_not_reused() {
    let mut kv = kv(4, 4);
    let a = kv.create_seq(T0);
    let b = kv.create_seq(T1);
    assert_ne!(a, b);
    assert_eq!(kv.len(a), Ok(0));
    assert_eq!(kv.is_empty(a), Ok(true));
    assert_eq!(kv.tenant(b), Ok(T1));
    assert_eq!(kv.blocks(a).unwrap(), &[]);
    kv.free_seq(a).unwrap();
    let c = kv.create_seq(T0);
    assert_ne!(c, a, "a freed slot stays unknown");
    assert_eq!(kv.len(a), Err(KvError::UnknownSeq(a)));
    assert_eq!(kv.seqs().collect::<Vec<_>>(), [b, c]);
}

#[test]
fn slot_counter_wraps_past_live_slots() {
    let mut kv = kv(1, 1);
    let a = kv.create_seq(T0);
    kv.next_slot = a.0; // pretend the counter wrapped around
    let b = kv.create_seq(T0);
    assert_ne!(a, b);
}

#[test]
fn unknown_seq_is_reported_by_every_method() {
    let mut kv = kv(2, 2);
    let s = SeqSlot(42);
    let e = KvError::UnknownSeq(s);
    assert_eq!(kv.fork(s).unwrap_err(), e);
    assert_eq!(kv.free_seq(s).unwrap_err(), e);
    assert_eq!(kv.len(s).unwrap_err(), e);
    assert_eq!(kv.is_empty(s).unwrap_err(), e);
    assert_eq!(kv.tenant(s).unwrap_err(), e);
    assert_eq!(kv.blocks(s).unwrap_err(), e);
    assert_eq!(kv.append(s, 1).unwrap_err(), e);
    assert_eq!(kv.truncate(s, 0).unwrap_err(), e);
    assert_eq!(kv.attach_prefix(s, &[]).unwrap_err(), e);
    assert_eq!(kv.publish(s, &[]).unwrap_err(), e);
    assert_eq!(kv.is_writable(s, 0).unwrap_err(), e);
    assert_eq!(kv.locate(s, 0).unwrap_err(), e);
    audit(&kv);
}

#[test]
fn append_allocates_blocks_as_positions_cross_boundaries() {
    let mut kv = kv(4, 8);
    let s = kv.create_seq(T0);
    assert_eq!(kv.append(s, 0), Ok(vec![]));
    assert_eq!(kv.blocks(s).unwrap().len(), 0);
    assert_eq!(kv.append(s, 3), Ok(vec![]));
    assert_eq!(kv.blocks(s).unwrap(), &[BlockId(0)]);
    assert_eq!(kv.append(s, 1), Ok(vec![]));
    assert_eq!(kv.blocks(s).unwrap().len(), 1, "exactly full: no new block");
    assert_eq!(kv.append(s, 6), Ok(vec![]));
    assert_eq!(kv.len(s), Ok(10));
    assert_eq!(kv.blocks(s).unwrap(), &[BlockId(0), BlockId(1), BlockId(2)]);
    assert_eq!(kv.locate(s, 9), Ok((BlockId(2), 1)));
    for p in 0..10 {
        assert_eq!(kv.is_writable(s, p), Ok(true));
    }
    assert_eq!(kv.stats().used, 3);
    audit(&kv);
}

#[test]
fn append_out_of_blocks_leaves_state_unchanged() {
    let mut kv = kv(2, 3);
    let a = kv.create_seq(T0);
    kv.append(a, 3).unwrap();
    let b = kv.fork(a).unwrap();
    // a's partial block is shared with b: a gets a copy (the last free block).
    assert_eq!(kv.append(a, 1).unwrap().len(), 1);
    assert_eq!(kv.stats().free, 0);
    audit(&kv);
    let before = snapshot(&kv);
    // b now holds its partial block alone, so it only needs 1 new block.
    let err = kv.append(b, 3).unwrap_err();
    assert_eq!(
        err,
        KvError::OutOfBlocks {
            needed: 1,
            available: 0
        }
    );
    assert_eq!(snapshot(&kv), before);
    let fresh = kv.create_seq(T0);
    let err = kv.append(fresh, 1).unwrap_err();
    assert!(matches!(err, KvError::OutOfBlocks { needed: 1, .. }));
    audit(&kv);
}

#[test]
fn out_of_blocks_counts_the_copy_and_changes_nothing() {
    let mut kv = kv(2, 3);
    let a = kv.create_seq(T0);
    kv.append(a, 3).unwrap();
    let b = kv.fork(a).unwrap();
    let before = snapshot(&kv);
    assert_eq!(
        kv.append(b, 3),
        Err(KvError::OutOfBlocks {
            needed: 2,
            available: 1
        })
    );
    assert_eq!(snapshot(&kv), before);
    assert_eq!(kv.append(b, 1).unwrap().len(), 1, "the copy alone fits");
    audit(&kv);
}

#[test]
fn append_length_overflow_is_an_error() {
    let mut kv = kv(1, 2);
    let s = kv.create_seq(T0);
    kv.append(s, 1).unwrap();
    assert_eq!(
        kv.append(s, usize::MAX),
        Err(KvError::LengthOverflow {
            seq: s,
            len: 1,
            n: usize::MAX
        })
    );
    assert!(matches!(
        kv.append(s, usize::MAX - 1),
        Err(KvError::OutOfBlocks { .. })
    ));
    assert_eq!(kv.len(s), Ok(1));
}

#[test]
fn fork_shares_every_block_and_copies_on_append() {
    let mut kv = kv(4, 8);
    let a = kv.create_seq(T1);
    kv.append(a, 6).unwrap();
    let b = kv.fork(a).unwrap();
    assert_eq!(kv.tenant(b), Ok(T1));
    assert_eq!(kv.len(b), Ok(6));
    assert_eq!(kv.blocks(a).unwrap(), kv.blocks(b).unwrap());
    for &blk in kv.blocks(a).unwrap() {
        assert_eq!(kv.refcount(blk), 2);
    }
    assert_eq!(kv.is_writable(b, 5), Ok(false));
    let old = kv.blocks(b).unwrap()[1];
    let copies = kv.append(b, 3).unwrap();
    let new = kv.blocks(b).unwrap()[1];
    assert_ne!(old, new);
    assert_eq!(
        copies,
        [BlockCopy {
            src: old,
            dst: new,
            n_tokens: 2
        }]
    );
    assert_eq!(kv.blocks(a).unwrap()[1], old);
    assert_eq!(kv.refcount(old), 1);
    assert_eq!(kv.blocks(b).unwrap().len(), 3);
    // a is now the only holder of `old`: it appends in place.
    assert_eq!(kv.append(a, 1), Ok(vec![]));
    assert_eq!(kv.blocks(a).unwrap()[1], old);
    audit(&kv);
}

#[test]
fn fork_of_block_aligned_seq_needs_no_copy() {
    let mut kv = kv(2, 8);
    let a = kv.create_seq(T0);
    kv.append(a, 4).unwrap();
    let b = kv.fork(a).unwrap();
    assert_eq!(kv.append(b, 1), Ok(vec![]));
    assert_eq!(kv.blocks(b).unwrap()[..2], kv.blocks(a).unwrap()[..]);
    audit(&kv);
}

#[test]
fn truncate_releases_blocks_wholly_past_n() {
    let mut kv = kv(4, 8);
    let s = kv.create_seq(T0);
    kv.append(s, 10).unwrap();
    assert_eq!(
        kv.truncate(s, 11),
        Err(KvError::TruncateBeyondLen {
            seq: s,
            n: 11,
            len: 10
        })
    );
    assert_eq!(kv.len(s), Ok(10));
    kv.truncate(s, 10).unwrap();
    assert_eq!(kv.blocks(s).unwrap().len(), 3);
    kv.truncate(s, 5).unwrap();
    assert_eq!(kv.len(s), Ok(5));
    assert_eq!(kv.blocks(s).unwrap().len(), 2);
    assert_eq!(kv.stats().free, 6);
    kv.truncate(s, 0).unwrap();
    assert_eq!(kv.blocks(s).unwrap().len(), 0);
    assert_eq!(kv.stats().free, 8);
    audit(&kv);
}

#[test]
fn truncate_into_a_published_block_then_append_copies_it() {
    let mut kv = kv(2, 8);
    let s = kv.create_seq(T0);
    kv.append(s, 4).unwrap();
    kv.publish(s, &[1, 2, 3, 4]).unwrap();
    kv.truncate(s, 3).unwrap();
    let pub_blk = kv.blocks(s).unwrap()[1];
    assert!(kv.is_published(pub_blk));
    assert_eq!(kv.is_writable(s, 2), Ok(false));
    let copies = kv.append(s, 1).unwrap();
    assert_eq!(copies.len(), 1);
    assert_eq!(copies[0].src, pub_blk);
    assert_eq!(copies[0].n_tokens, 1);
    // The published block is kept, unreferenced, in the cache.
    assert_eq!(kv.refcount(pub_blk), 0);
    assert!(kv.is_cached(pub_blk));
    assert_eq!(kv.is_writable(s, 3), Ok(true));
    audit(&kv);
    // And it is still attachable.
    let t = kv.create_seq(T0);
    assert_eq!(kv.attach_prefix(t, &[1, 2, 3, 4]), Ok(4));
    assert_eq!(kv.blocks(t).unwrap()[1], pub_blk);
    audit(&kv);
}

#[test]
fn free_seq_releases_blocks_and_forgets_the_slot() {
    let mut kv = kv(2, 4);
    let a = kv.create_seq(T0);
    kv.append(a, 3).unwrap();
    let b = kv.fork(a).unwrap();
    kv.free_seq(a).unwrap();
    assert_eq!(kv.free_seq(a), Err(KvError::UnknownSeq(a)));
    assert_eq!(kv.stats().used, 2, "b still holds both blocks");
    kv.free_seq(b).unwrap();
    assert_eq!(kv.stats().free, 4);
    audit(&kv);
}

#[test]
fn publish_rejects_wrong_token_count() {
    let mut kv = kv(2, 4);
    let s = kv.create_seq(T0);
    kv.append(s, 3).unwrap();
    let before = snapshot(&kv);
    for n in [0, 2, 4] {
        assert_eq!(
            kv.publish(s, &vec![7; n]),
            Err(KvError::TokenCountMismatch {
                seq: s,
                expected: 3,
                got: n
            })
        );
    }
    assert_eq!(snapshot(&kv), before);
}

#[test]
fn publish_then_attach_reuses_full_blocks_only() {
    let mut kv = kv(2, 8);
    let a = kv.create_seq(T0);
    kv.append(a, 5).unwrap();
    kv.publish(a, &[1, 2, 3, 4, 5]).unwrap();
    let ab = kv.blocks(a).unwrap().to_vec();
    assert!(kv.is_published(ab[0]) && kv.is_published(ab[1]));
    assert!(!kv.is_published(ab[2]), "partial block stays private");
    assert_eq!(kv.is_writable(a, 4), Ok(true));
    assert_eq!(kv.is_writable(a, 0), Ok(false));

    let b = kv.create_seq(T0);
    assert_eq!(kv.attach_prefix(b, &[1, 2, 3, 4, 5, 6]), Ok(4));
    assert_eq!(kv.blocks(b).unwrap(), &ab[..2]);
    assert_eq!(kv.len(b), Ok(4));
    assert_eq!(kv.refcount(ab[0]), 2);
    // Only whole-path matches: the second block alone does not match.
    let c = kv.create_seq(T0);
    assert_eq!(kv.attach_prefix(c, &[3, 4]), Ok(0));
    assert_eq!(kv.attach_prefix(c, &[1, 2, 3, 9]), Ok(2));
    // Not on a non-empty sequence.
    let before = snapshot(&kv);
    assert_eq!(
        kv.attach_prefix(c, &[1, 2]),
        Err(KvError::SeqNotEmpty { seq: c, len: 2 })
    );
    assert_eq!(snapshot(&kv), before);
    audit(&kv);
}

#[test]
fn publish_is_idempotent_and_keeps_existing_blocks_for_a_path() {
    let mut kv = kv(2, 8);
    let a = kv.create_seq(T0);
    kv.append(a, 2).unwrap();
    kv.publish(a, &[1, 2]).unwrap();
    kv.publish(a, &[1, 2]).unwrap();
    let b = kv.create_seq(T0);
    kv.append(b, 4).unwrap();
    kv.publish(b, &[1, 2, 3, 4]).unwrap();
    let a0 = kv.blocks(a).unwrap()[0];
    let bb = kv.blocks(b).unwrap().to_vec();
    assert!(
        !kv.is_published(bb[0]),
        "the index keeps a's block for [1 2]"
    );
    assert!(kv.is_published(bb[1]), "b's next block hangs below a's");
    let c = kv.create_seq(T0);
    assert_eq!(kv.attach_prefix(c, &[1, 2, 3, 4]), Ok(4));
    assert_eq!(kv.blocks(c).unwrap(), &[a0, bb[1]]);
    audit(&kv);
}

#[test]
fn publish_with_tokens_contradicting_the_index_is_rejected() {
    let mut kv = kv(2, 8);
    let a = kv.create_seq(T0);
    kv.append(a, 4).unwrap();
    kv.publish(a, &[1, 2, 3, 4]).unwrap();
    let before = snapshot(&kv);
    let e = Err(KvError::PublishConflict {
        seq: a,
        tenant: T0,
        block_index: 0,
    });
    assert_eq!(kv.publish(a, &[9, 9, 3, 4]), e);
    assert_eq!(
        kv.publish(a, &[1, 2, 9, 9]),
        Err(KvError::PublishConflict {
            seq: a,
            tenant: T0,
            block_index: 1
        })
    );
    assert_eq!(snapshot(&kv), before);
}

#[test]
fn tenants_never_share_blocks() {
    let mut kv = kv(2, 8);
    let a = kv.create_seq(T0);
    kv.append(a, 4).unwrap();
    kv.publish(a, &[1, 2, 3, 4]).unwrap();
    let same = kv.create_seq(T0);
    let other = kv.create_seq(T1);
    assert_eq!(kv.attach_prefix(same, &[1, 2, 3, 4]), Ok(4));
    assert_eq!(kv.attach_prefix(other, &[1, 2, 3, 4]), Ok(0));
    kv.append(other, 4).unwrap();
    kv.publish(other, &[1, 2, 3, 4]).unwrap();
    let other2 = kv.create_seq(T1);
    assert_eq!(kv.attach_prefix(other2, &[1, 2, 3, 4]), Ok(4));
    assert_eq!(kv.blocks(other2).unwrap(), kv.blocks(other).unwrap());
    assert!(kv.blocks(other2).unwrap()[0] != kv.blocks(a).unwrap()[0]);
    audit(&kv);
}

#[test]
fn released_published_blocks_are_cached_then_reattached() {
    let mut kv = kv(2, 4);
    let a = kv.create_seq(T0);
    kv.append(a, 5).unwrap();
    kv.publish(a, &[1, 2, 3, 4, 5]).unwrap();
    let ab = kv.blocks(a).unwrap().to_vec();
    kv.free_seq(a).unwrap();
    assert_eq!(
        kv.stats(),
        PoolStats {
            capacity: 4,
            free: 2,
            used: 0,
            cached: 2
        }
    );
    assert_eq!(kv.refcount(ab[0]), 0);
    assert!(kv.is_cached(ab[0]));
    let b = kv.create_seq(T0);
    assert_eq!(kv.attach_prefix(b, &[1, 2, 3, 4]), Ok(4));
    assert_eq!(kv.blocks(b).unwrap(), &ab[..2]);
    assert!(!kv.is_cached(ab[0]));
    assert_eq!(kv.stats().cached, 0);
    audit(&kv);
}

#[test]
fn eviction_takes_lru_block_and_its_subtree() {
    let mut kv = kv(1, 4);
    // Chain x: [1] -> [2]; chain y: [5].
    let x = kv.create_seq(T0);
    kv.append(x, 2).unwrap();
    kv.publish(x, &[1, 2]).unwrap();
    let xb = kv.blocks(x).unwrap().to_vec();
    let y = kv.create_seq(T0);
    kv.append(y, 1).unwrap();
    kv.publish(y, &[5]).unwrap();
    let yb = kv.blocks(y).unwrap().to_vec();
    // A holder of [1 2]'s first block only; then release x: deepest first.
    let h = kv.create_seq(T0);
    assert_eq!(kv.attach_prefix(h, &[1]), Ok(1));
    kv.free_seq(x).unwrap(); // xb[1] cached, xb[0] still held by h
    kv.free_seq(y).unwrap(); // yb[0] cached (newer)
    assert_eq!(kv.stats().cached, 2);
    kv.free_seq(h).unwrap(); // xb[0] cached (newest)
    assert_eq!(kv.stats().free, 1);
    // Allocate 2 blocks: the free one, then evict the LRU-oldest: xb[1].
    let z = kv.create_seq(T0);
    kv.append(z, 2).unwrap();
    assert!(!kv.is_published(xb[1]));
    assert!(kv.is_published(yb[0]) && kv.is_published(xb[0]));
    audit(&kv);
    // Next eviction takes yb[0].
    kv.append(z, 1).unwrap();
    assert!(!kv.is_published(yb[0]));
    // Re-attach [1] so xb[0] is held, then evicting nothing else is possible.
    let h2 = kv.create_seq(T0);
    assert_eq!(kv.attach_prefix(h2, &[1, 2]), Ok(1));
    assert_eq!(kv.stats().free + kv.stats().cached, 0);
    assert!(matches!(kv.append(z, 1), Err(KvError::OutOfBlocks { .. })));
    audit(&kv);
}

#[test]
fn evicting_an_ancestor_unpublishes_held_descendants() {
    let mut kv = kv(1, 3);
    let a = kv.create_seq(T0);
    kv.append(a, 1).unwrap();
    kv.publish(a, &[1]).unwrap();
    let a0 = kv.blocks(a).unwrap()[0];
    kv.free_seq(a).unwrap(); // a0 cached
    let b = kv.create_seq(T0);
    kv.append(b, 2).unwrap();
    kv.publish(b, &[1, 2]).unwrap(); // [1] keeps a0; b's second block hangs below it
    let bb = kv.blocks(b).unwrap().to_vec();
    assert!(!kv.is_published(bb[0]));
    assert!(kv.is_published(bb[1]));
    assert_eq!(kv.stats().free, 0);
    // Allocating evicts a0 and its subtree: bb[1] is held, so only unpublished.
    let c = kv.create_seq(T0);
    kv.append(c, 1).unwrap();
    assert_eq!(kv.blocks(c).unwrap(), &[a0]);
    assert!(!kv.is_published(bb[1]));
    assert_eq!(kv.refcount(bb[1]), 1);
    assert_eq!(kv.is_writable(b, 1), Ok(true));
    let d = kv.create_seq(T0);
    assert_eq!(kv.attach_prefix(d, &[1, 2]), Ok(0));
    audit(&kv);
}

#[test]
fn copy_is_skipped_when_eviction_unpublishes_the_partial_block() {
    let mut kv = kv(2, 3);
    let a = kv.create_seq(T0);
    kv.append(a, 2).unwrap();
    kv.publish(a, &[1, 2]).unwrap();
    kv.free_seq(a).unwrap(); // a0 cached
    let b = kv.create_seq(T0);
    kv.append(b, 4).unwrap();
    kv.publish(b, &[1, 2, 3, 4]).unwrap(); // b1 published below a0
    kv.truncate(b, 3).unwrap();
    let bb = kv.blocks(b).unwrap().to_vec();
    assert_eq!(kv.is_writable(b, 2), Ok(false));
    // The copy needs one block: only a0 can be had, and evicting it
    // unpublishes b1, which b then holds alone: no copy after all.
    assert_eq!(kv.append(b, 1), Ok(vec![]));
    assert_eq!(kv.blocks(b).unwrap(), &bb[..]);
    assert_eq!(kv.is_writable(b, 3), Ok(true));
    assert_eq!(kv.stats().free, 1);
    audit(&kv);
}

#[test]
fn is_writable_and_locate_reject_positions_past_len() {
    let mut kv = kv(4, 2);
    let s = kv.create_seq(T0);
    kv.append(s, 3).unwrap();
    assert_eq!(kv.is_writable(s, 2), Ok(true));
    let e = KvError::PositionOutOfRange {
        seq: s,
        pos: 3,
        len: 3,
    };
    assert_eq!(kv.is_writable(s, 3).unwrap_err(), e);
    assert_eq!(kv.locate(s, 3).unwrap_err(), e);
    assert_eq!(kv.refcount(BlockId(1)), 0);
    assert_eq!(kv.refcount(BlockId(1000)), 0);
}

#[test]
fn attach_prefix_rows_adds_the_matching_rows_of_one_more_block() {
    let mut kv = kv(4, 16);
    let a = kv.create_seq(T0);
    kv.append(a, 12).unwrap();
    kv.publish(a, &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12])
        .unwrap();
    let ab = kv.blocks(a).unwrap().to_vec();
    // A sibling of [5 6 7 8] under [1 2 3 4].
    let b = kv.create_seq(T0);
    kv.append(b, 8).unwrap();
    kv.publish(b, &[1, 2, 3, 4, 5, 6, 9, 9]).unwrap();
    let sibling = kv.blocks(b).unwrap()[1];

    // One whole block, then 3 rows of [5 6 7 8].
    let s = kv.create_seq(T0);
    assert_eq!(kv.attach_prefix_rows(s, &[1, 2, 3, 4, 5, 6, 7, 0]), Ok(7));
    assert_eq!(kv.blocks(s).unwrap(), &ab[..2]);
    assert_eq!(kv.len(s), Ok(7));
    assert_eq!(kv.refcount(ab[1]), 2);
    assert_eq!(kv.is_writable(s, 6), Ok(false));
    audit(&kv);
    // The next append copies those 3 rows; the cached block stays as it is.
    let copies = kv.append(s, 1).unwrap();
    let fresh = kv.blocks(s).unwrap()[1];
    assert_eq!(
        copies,
        vec![BlockCopy {
            src: ab[1],
            dst: fresh,
            n_tokens: 3
        }]
    );
    assert!(kv.is_published(ab[1]) && !kv.is_published(fresh));
    assert_eq!(kv.refcount(ab[1]), 1);
    audit(&kv);

    // Of two siblings, the longer match: [5 6 9] is 3 rows of the sibling.
    let t = kv.create_seq(T0);
    assert_eq!(kv.attach_prefix_rows(t, &[1, 2, 3, 4, 5, 6, 9]), Ok(7));
    assert_eq!(kv.blocks(t).unwrap(), &[ab[0], sibling]);
    // Two whole blocks and 2 rows of the third.
    let u = kv.create_seq(T0);
    assert_eq!(
        kv.attach_prefix_rows(u, &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]),
        Ok(10)
    );
    assert_eq!(kv.blocks(u).unwrap(), &ab[..3]);
    // No first id in common after the whole blocks.
    let v = kv.create_seq(T0);
    assert_eq!(kv.attach_prefix_rows(v, &[1, 2, 3, 4, 0, 6]), Ok(4));
    // Rows of the first block; another tenant's blocks never.
    let w = kv.create_seq(T0);
    assert_eq!(kv.attach_prefix_rows(w, &[1, 2]), Ok(2));
    let x = kv.create_seq(T1);
    assert_eq!(kv.attach_prefix_rows(x, &[1, 2, 3, 4, 5, 6]), Ok(0));
    // Not on a non-empty sequence, state unchanged.
    let before = snapshot(&kv);
    assert_eq!(
        kv.attach_prefix_rows(w, &[1, 2]),
        Err(KvError::SeqNotEmpty { seq: w, len: 2 })
    );
    assert_eq!(snapshot(&kv), before);
    audit(&kv);
    // Freeing every holder leaves the published blocks cached.
    for q in [a, b, s, t, u, v, w, x] {
        kv.free_seq(q).unwrap();
    }
    assert_eq!(kv.stats().used, 0);
    audit(&kv);
}
