//! The token-id stream every protocol draws its inputs from, shared with
//! the llama.cpp peer (`bench/peers/llamacpp.py`):
//!
//! ```text
//! token ids: LCG  state0 = 2463534242
//!                 state_{n+1} = state_n · 6364136223846793005 + 1442695040888963407  (mod 2^64)
//!                 id_n = (state_n >> 33) mod n_vocab,  n = 1, 2, …
//! ```
//!
//! Each protocol says where its stream restarts (per workload, per run).

use fak_engine::Append;
use fak_model::{LogitsWanted, SeqId};

/// First LCG state; `id_1` comes from the state after it.
pub const LCG_STATE0: u64 = 2463534242;
const LCG_MUL: u64 = 6364136223846793005;
const LCG_INC: u64 = 1442695040888963407;

/// The token-id stream of the protocols (see the module docs).
#[derive(Debug, Clone)]
pub struct LcgIds {
    state: u64,
    n_vocab: u64,
}

impl LcgIds {
    /// A stream at `state0` for a vocabulary of `n_vocab` (at least 1) ids.
    pub fn new(n_vocab: usize) -> LcgIds {
        LcgIds {
            state: LCG_STATE0,
            n_vocab: (n_vocab as u64).max(1),
        }
    }

    /// The first `n` ids of a fresh stream.
    pub fn take(n_vocab: usize, n: usize) -> Vec<u32> {
        LcgIds::new(n_vocab).take(n).collect()
    }
}

impl Iterator for LcgIds {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        self.state = self.state.wrapping_mul(LCG_MUL).wrapping_add(LCG_INC);
        // The remainder is below n_vocab, itself a usize-sized vocabulary.
        Some(((self.state >> 33) % self.n_vocab) as u32)
    }
}

/// One [`Append`] per sequence: `seqs[i]` gets `ids[i]`, logits wanted
/// (pairs past the shorter list are dropped).
pub fn appends<'a, T: AsRef<[u32]>>(seqs: &[SeqId], ids: &'a [T]) -> Vec<Append<'a>> {
    seqs.iter()
        .zip(ids)
        .map(|(&seq, t)| Append {
            seq,
            ids: t.as_ref(),
            logits: LogitsWanted::Yes,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn lcg_matches_the_protocol() {
        // Computed independently with Python's big integers.
        assert_eq!(
            LcgIds::take(49152, 5),
            vec![18117, 44637, 44831, 22441, 6062]
        );
        assert_eq!(
            LcgIds::take(151936, 5),
            vec![124613, 146141, 47647, 107561, 45358]
        );
    }

    proptest! {
        /// Ids are always inside the vocabulary and the stream is a pure
        /// function of its position.
        #[test]
        fn lcg_ids_are_in_range_and_prefix_stable(n_vocab in 1usize..200_000, n in 0usize..300) {
            let long = LcgIds::take(n_vocab, n + 10);
            let short = LcgIds::take(n_vocab, n);
            prop_assert!(long.iter().all(|&id| (id as usize) < n_vocab));
            prop_assert_eq!(&long[..n], &short[..]);
        }
    }
}
