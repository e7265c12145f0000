//! Property test: random schedules of create / fork / append / truncate /
//! publish / attach_prefix / free_seq over two tenants and small pools,
//! checked after every step against a shadow model of what each physical
//! (block, row) holds.
//!
//! The shadow stores, per (block, row), the tenant and the whole token prefix
//! `0..=p` whose KV the row holds (a KV row depends on every earlier token),
//! so "same row content" below means "same tenant and same full prefix".
//!
//! The same schedules run on a windowed manager ([`KvManager::with_window`]),
//! driven as the engine drives its local layer group: after each append the
//! rows before the next token's window are dropped, a truncation whose next
//! token would read dropped rows empties the sequence instead, and attaches
//! go by rows. There every sequence must hold exactly the rows its next
//! token reads, each with the right content.

use std::collections::HashMap;

use fak_kv::{BlockId, KvError, KvManager, PoolConfig, PoolStats, SeqSlot, Tenant};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Create {
        tenant: u8,
    },
    Fork {
        who: usize,
    },
    Append {
        who: usize,
        toks: Vec<u32>,
    },
    /// `keep_pct > 100` asks for more than the length (an error).
    Truncate {
        who: usize,
        keep_pct: u8,
    },
    Publish {
        who: usize,
    },
    /// New sequence of `tenant`; attach a published history entry (of any
    /// tenant) extended by `extra`, then append the rest of the request.
    Attach {
        tenant: u8,
        hist: usize,
        extra: Vec<u32>,
    },
    Free {
        who: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let toks = prop::collection::vec(0u32..3, 0..9);
    prop_oneof![
        2 => (0u8..2).prop_map(|tenant| Op::Create { tenant }),
        2 => any::<usize>().prop_map(|who| Op::Fork { who }),
        5 => (any::<usize>(), toks.clone()).prop_map(|(who, toks)| Op::Append { who, toks }),
        2 => (any::<usize>(), 0u8..=110).prop_map(|(who, keep_pct)| Op::Truncate { who, keep_pct }),
        3 => any::<usize>().prop_map(|who| Op::Publish { who }),
        3 => (0u8..2, any::<usize>(), toks).prop_map(|(tenant, hist, extra)| Op::Attach { tenant, hist, extra }),
        2 => any::<usize>().prop_map(|who| Op::Free { who }),
    ]
}

/// What a physical row holds: the tenant and the full prefix `0..=p`.
type Row = (Tenant, Vec<u32>);

struct Live {
    slot: SeqSlot,
    tenant: Tenant,
    tokens: Vec<u32>,
}

struct Model {
    kv: KvManager,
    bs: usize,
    /// The manager's window, if any.
    window: Option<usize>,
    cap: usize,
    live: Vec<Live>,
    /// Token sequences that were published, with their tenant.
    history: Vec<(Tenant, Vec<u32>)>,
    /// Shadow storage: (block, row) → content.
    storage: HashMap<(BlockId, usize), Row>,
}

/// Stats, every block's refcount, every live sequence's (len, block table).
type Observed = (PoolStats, Vec<u32>, Vec<(usize, Vec<BlockId>)>);

/// Everything observable, to compare before and after a failed call.
fn observe(m: &Model) -> Observed {
    let rc = (0..m.cap)
        .map(|b| m.kv.refcount(BlockId(b as u32)))
        .collect();
    let tables = m
        .live
        .iter()
        .map(|l| {
            (
                m.kv.len(l.slot).unwrap(),
                m.kv.blocks(l.slot).unwrap().to_vec(),
            )
        })
        .collect();
    (m.kv.stats(), rc, tables)
}

/// The first position the token at `n` reads through a window of `w`.
fn window_start(n: usize, w: usize) -> usize {
    (n + 1).saturating_sub(w)
}

impl Model {
    fn new(bs: usize, cap: usize, window: Option<usize>) -> Self {
        let cfg = PoolConfig {
            block_size: bs,
            n_blocks: cap,
        };
        Self {
            kv: match window {
                Some(w) => KvManager::with_window(cfg, w).unwrap(),
                None => KvManager::new(cfg).unwrap(),
            },
            bs,
            window,
            cap,
            live: Vec::new(),
            history: Vec::new(),
            storage: HashMap::new(),
        }
    }

    fn pick(&self, who: usize) -> Option<usize> {
        (!self.live.is_empty()).then(|| who % self.live.len())
    }

    /// Appends `toks` to live sequence `i` as the engine would: perform the
    /// returned copies, then write each new position, checking first that
    /// the row may be written in place.
    fn append(&mut self, i: usize, toks: &[u32]) -> Result<(), TestCaseError> {
        let (s, tenant) = (self.live[i].slot, self.live[i].tenant);
        let old_len = self.live[i].tokens.len();
        let before = observe(self);
        match self.kv.append(s, toks.len()) {
            Err(KvError::OutOfBlocks { needed, available }) => {
                let st = self.kv.stats();
                prop_assert_eq!(available, st.free + st.cached);
                prop_assert!(needed > available);
                prop_assert!(observe(self) == before, "failed append changed state");
            }
            Err(e) => return Err(TestCaseError::fail(format!("append: {e}"))),
            Ok(copies) => {
                prop_assert!(copies.len() <= 1);
                for c in &copies {
                    prop_assert_eq!(c.n_tokens, old_len % self.bs);
                    prop_assert!(c.n_tokens > 0);
                    prop_assert_eq!(self.kv.block_at(s, old_len / self.bs), Some(c.dst));
                    prop_assert_eq!(self.kv.refcount(c.dst), 1);
                    for r in 0..c.n_tokens {
                        let Some(row) = self.storage.get(&(c.src, r)).cloned() else {
                            return Err(TestCaseError::fail("copy from an unwritten row"));
                        };
                        self.storage.insert((c.dst, r), row);
                    }
                }
                for (k, &t) in toks.iter().enumerate() {
                    let p = old_len + k;
                    // (3) a shared or published block is never written.
                    prop_assert_eq!(self.kv.is_writable(s, p), Ok(true));
                    let (b, row) = self.kv.locate(s, p).unwrap();
                    prop_assert_eq!(self.kv.refcount(b), 1);
                    prop_assert!(!self.kv.is_published(b));
                    let holders = self
                        .live
                        .iter()
                        .filter(|l| self.kv.blocks(l.slot).unwrap().contains(&b))
                        .count();
                    prop_assert_eq!(holders, 1);
                    self.live[i].tokens.push(t);
                    let prefix = self.live[i].tokens.clone();
                    self.storage.insert((b, row), (tenant, prefix));
                }
                if let Some(w) = self.window {
                    let n = self.live[i].tokens.len();
                    self.kv.drop_before(s, window_start(n, w)).unwrap();
                }
            }
        }
        Ok(())
    }

    /// The first position whose rows `s` holds.
    fn first_held(&self, s: SeqSlot) -> usize {
        self.kv.dropped(s).unwrap() * self.bs
    }

    fn step(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match op {
            Op::Create { tenant } => {
                let tenant = Tenant(u64::from(*tenant));
                let slot = self.kv.create_seq(tenant);
                prop_assert_eq!(self.kv.len(slot), Ok(0));
                self.live.push(Live {
                    slot,
                    tenant,
                    tokens: Vec::new(),
                });
            }
            Op::Fork { who } => {
                let Some(i) = self.pick(*who) else {
                    return Ok(());
                };
                let slot = self.kv.fork(self.live[i].slot).unwrap();
                prop_assert_eq!(
                    self.kv.blocks(slot).unwrap(),
                    self.kv.blocks(self.live[i].slot).unwrap()
                );
                self.live.push(Live {
                    slot,
                    tenant: self.live[i].tenant,
                    tokens: self.live[i].tokens.clone(),
                });
            }
            Op::Append { who, toks } => {
                if let Some(i) = self.pick(*who) {
                    self.append(i, toks)?;
                }
            }
            Op::Truncate { who, keep_pct } => {
                let Some(i) = self.pick(*who) else {
                    return Ok(());
                };
                let s = self.live[i].slot;
                let len = self.live[i].tokens.len();
                if *keep_pct > 100 {
                    let before = observe(self);
                    let r = self.kv.truncate(s, len + 1);
                    prop_assert!(
                        matches!(r, Err(KvError::TruncateBeyondLen { .. })),
                        "{:?}",
                        r
                    );
                    prop_assert!(observe(self) == before);
                } else {
                    let mut n = len * usize::from(*keep_pct) / 100;
                    // The next token would read dropped rows: the engine
                    // recomputes from empty (here: forgets the tokens).
                    if let Some(w) = self.window {
                        if n > 0 && self.first_held(s) > window_start(n, w) {
                            n = 0;
                        }
                    }
                    self.kv.truncate(s, n).unwrap();
                    self.live[i].tokens.truncate(n);
                    let kept = n.div_ceil(self.bs) - self.kv.dropped(s).unwrap();
                    prop_assert_eq!(self.kv.blocks(s).unwrap().len(), kept);
                }
            }
            Op::Publish { who } => {
                let Some(i) = self.pick(*who) else {
                    return Ok(());
                };
                let l = &self.live[i];
                let mut wrong = l.tokens.clone();
                wrong.push(0);
                let r = self.kv.publish(l.slot, &wrong);
                prop_assert!(
                    matches!(r, Err(KvError::TokenCountMismatch { .. })),
                    "{:?}",
                    r
                );
                self.kv.publish(l.slot, &l.tokens).unwrap();
                let full = l.tokens.len() / self.bs * self.bs;
                self.history.push((l.tenant, l.tokens[..full].to_vec()));
            }
            Op::Attach {
                tenant,
                hist,
                extra,
            } => {
                let tenant = Tenant(u64::from(*tenant));
                let mut req = match self.history.len() {
                    0 => Vec::new(),
                    n => self.history[hist % n].1.clone(),
                };
                req.extend_from_slice(extra);
                let slot = self.kv.create_seq(tenant);
                let k = match self.window {
                    None => self.kv.attach_prefix(slot, &req).unwrap(),
                    Some(w) => {
                        let m = self.kv.prefix_match(tenant, &req);
                        let k = self.kv.attach_prefix_rows(slot, &req).unwrap();
                        prop_assert_eq!(k, m);
                        // Exactly the blocks of the window are attached.
                        prop_assert_eq!(
                            self.first_held(slot),
                            window_start(k, w) / self.bs * self.bs
                        );
                        k
                    }
                };
                if self.window.is_none() {
                    prop_assert_eq!(k % self.bs, 0);
                }
                prop_assert!(k <= req.len());
                prop_assert_eq!(self.kv.len(slot), Ok(k));
                // Only blocks holding exactly this tenant's prefix are attached.
                let table = self.kv.blocks(slot).unwrap();
                let first = self.first_held(slot);
                for p in first..k {
                    let want = (tenant, req[..=p].to_vec());
                    let got = self
                        .storage
                        .get(&(table[(p - first) / self.bs], p % self.bs));
                    prop_assert_eq!(got, Some(&want), "attached row {} is wrong", p);
                }
                let r = self.kv.attach_prefix(slot, &req);
                prop_assert!(
                    matches!(r, Err(KvError::SeqNotEmpty { .. }) | Ok(0)),
                    "{:?}",
                    r
                );
                self.live.push(Live {
                    slot,
                    tenant,
                    tokens: req[..k].to_vec(),
                });
                let i = self.live.len() - 1;
                self.append(i, &req[k..])?;
            }
            Op::Free { who } => {
                let Some(i) = self.pick(*who) else {
                    return Ok(());
                };
                let l = self.live.swap_remove(i);
                self.kv.free_seq(l.slot).unwrap();
                prop_assert_eq!(self.kv.free_seq(l.slot), Err(KvError::UnknownSeq(l.slot)));
            }
        }
        Ok(())
    }

    fn check(&self) -> Result<(), TestCaseError> {
        // (1) refcounts equal the block-table references.
        let mut refs = vec![0u32; self.cap];
        for l in &self.live {
            let table = self.kv.blocks(l.slot).unwrap();
            let dropped = self.kv.dropped(l.slot).unwrap();
            let first = dropped * self.bs;
            prop_assert_eq!(self.kv.len(l.slot), Ok(l.tokens.len()));
            prop_assert_eq!(table.len(), l.tokens.len().div_ceil(self.bs) - dropped);
            prop_assert_eq!(self.kv.tenant(l.slot), Ok(l.tenant));
            // (5) rows are dropped only with a window, and never one the
            // next token reads.
            match self.window {
                None => prop_assert_eq!(dropped, 0),
                Some(w) => prop_assert!(first <= window_start(l.tokens.len(), w)),
            }
            for b in table {
                refs[b.0 as usize] += 1;
            }
            // (3) every live sequence's rows still hold its own tokens.
            for p in first..l.tokens.len() {
                let want = (l.tenant, l.tokens[..=p].to_vec());
                let got = self
                    .storage
                    .get(&(table[(p - first) / self.bs], p % self.bs));
                prop_assert_eq!(got, Some(&want), "{:?} position {}", l.slot, p);
            }
        }
        let mut cached = 0;
        for (b, &r) in refs.iter().enumerate() {
            let b = BlockId(b as u32);
            prop_assert_eq!(self.kv.refcount(b), r, "refcount of {:?}", b);
            let should_cache = r == 0 && self.kv.is_published(b);
            prop_assert_eq!(self.kv.is_cached(b), should_cache, "{:?}", b);
            cached += usize::from(should_cache);
        }
        // (2) free + used + cached == capacity.
        let st = self.kv.stats();
        prop_assert_eq!(st.capacity, self.cap);
        prop_assert_eq!(st.used, refs.iter().filter(|&&r| r > 0).count());
        prop_assert_eq!(st.cached, cached);
        prop_assert_eq!(st.free + st.used + st.cached, st.capacity);
        Ok(())
    }

    /// (4) Frees everything, then allocates the whole pool to one sequence
    /// (evicting the cache) and frees it: nothing may leak.
    fn drain(&mut self) -> Result<(), TestCaseError> {
        for l in std::mem::take(&mut self.live) {
            self.kv.free_seq(l.slot).unwrap();
        }
        let st = self.kv.stats();
        prop_assert_eq!(st.used, 0);
        prop_assert_eq!(st.free + st.cached, self.cap);
        let s = self.kv.create_seq(Tenant(0));
        prop_assert_eq!(self.kv.append(s, self.cap * self.bs), Ok(vec![]));
        let st = self.kv.stats();
        prop_assert_eq!((st.used, st.free, st.cached), (self.cap, 0, 0));
        let r = self.kv.append(s, 1);
        prop_assert!(
            matches!(
                r,
                Err(KvError::OutOfBlocks {
                    needed: 1,
                    available: 0
                })
            ),
            "{:?}",
            r
        );
        self.kv.free_seq(s).unwrap();
        let st = self.kv.stats();
        prop_assert_eq!((st.used, st.free, st.cached), (0, self.cap, 0));
        for b in 0..self.cap {
            prop_assert!(!self.kv.is_published(BlockId(b as u32)));
        }
        // Hollow nodes went with the last block below them.
        prop_assert_eq!(self.kv.index_nodes(), 0);
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn random_schedules_keep_every_invariant(
        bs in 1usize..=5,
        cap in 4usize..=40,
        ops in prop::collection::vec(op(), 1..80),
    ) {
        let mut m = Model::new(bs, cap, None);
        for op in &ops {
            m.step(op)?;
            m.check()?;
        }
        m.drain()?;
    }

    #[test]
    fn random_windowed_schedules_hold_every_row_the_next_token_reads(
        bs in 1usize..=5,
        cap in 4usize..=40,
        // At least 2: with a window of 1, truncating to exactly the first
        // held position is allowed by the window but refused by truncate
        // (its last kept block is a dropped one).
        window in 2usize..=12,
        ops in prop::collection::vec(op(), 1..80),
    ) {
        let mut m = Model::new(bs, cap, Some(window));
        for op in &ops {
            m.step(op)?;
            m.check()?;
        }
        m.drain()?;
    }
}
