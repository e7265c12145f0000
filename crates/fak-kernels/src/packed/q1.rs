//! Q1_0 in [`crate::packed`]: one sign bit per weight, 8 rows per group
//! block of one 128-value GGUF block, against the four Q8_0 activation
//! blocks under it, in ggml's float order.
//!
//! ```text
//!   group block (144 B, the GGUF size):  d 8 × f16                  16 B
//!     then per sub-block k (0..4), step j (0..8): one u32, bit 4·row + i
//!     the sign bit of the row's value 32k + 4j + i                128 B
//!
//!   per row r, token t, block b (Q8_0 blocks 4b..4b+4: d_x,k, quants x):
//!     sumi_k = Σ ±x  over sub-block k  (+ where the bit is set)   exact i32
//!     s      = ((((0 + d_x,0 · f32(sumi_0)) + d_x,1 · f32(sumi_1))
//!               + d_x,2 · f32(sumi_2)) + d_x,3 · f32(sumi_3))
//!     acc    = acc + d_w · s
//! ```
//!
//! This is [`crate::scalar::vec_dot_q1_0_q8_0`]'s arithmetic (ggml's
//! generic kernel) step for step, lane by lane, with no fused
//! multiply-adds: every element has the scalar dot product's bits, for
//! one token or many. On AVX2 a step's 32 bits become 32 sign bytes
//! (`bits_to_bytes`), one step register for the 8 rows, read once per
//! tile of tokens.

use super::layout::q1;
use crate::blocks::BlockQ1_0;

/// Packs row `r` of a Q1_0 group block from its GGUF block `b`.
pub(crate) fn encode(dst: &mut [u8], r: usize, b: &[u8; BlockQ1_0::BYTES]) {
    dst[q1::D + 2 * r..q1::D + 2 * r + 2].copy_from_slice(&b[..2]);
    for e in 0..BlockQ1_0::ELEMS {
        let bit = u32::from((b[2 + e / 8] >> (e % 8)) & 1);
        let (k, j, i) = (e / 32, (e % 32) / 4, e % 4);
        let at = q1::BITS + 4 * (8 * k + j);
        let word = u32::from_le_bytes([dst[at], dst[at + 1], dst[at + 2], dst[at + 3]]);
        let word = word | (bit << (4 * r + i));
        dst[at..at + 4].copy_from_slice(&word.to_le_bytes());
    }
}

/// Row `r`'s GGUF block back from a group block `g`.
pub(crate) fn decode(g: &[u8], r: usize) -> [u8; BlockQ1_0::BYTES] {
    let mut b = [0u8; BlockQ1_0::BYTES];
    b[..2].copy_from_slice(&g[q1::D + 2 * r..q1::D + 2 * r + 2]);
    for e in 0..BlockQ1_0::ELEMS {
        let (k, j, i) = (e / 32, (e % 32) / 4, e % 4);
        let at = q1::BITS + 4 * (8 * k + j);
        let word = u32::from_le_bytes([g[at], g[at + 1], g[at + 2], g[at + 3]]);
        b[2 + e / 8] |= (((word >> (4 * r + i)) & 1) as u8) << (e % 8);
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_come_back_as_packed() {
        let blocks: Vec<[u8; 18]> = (0..8)
            .map(|r| std::array::from_fn(|i| (i * 29 + r * 7 + 3) as u8))
            .collect();
        let mut g = vec![0u8; q1::BYTES];
        for (r, b) in blocks.iter().enumerate() {
            encode(&mut g, r, b);
        }
        for (r, b) in blocks.iter().enumerate() {
            assert_eq!(&decode(&g, r), b, "row {r}");
        }
    }
}
