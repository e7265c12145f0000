//! NVFP4 in [`crate::packed`]: 8 rows per group block of one 64-value GGUF
//! block, its codes in Q4_0's nibble chunks and its four sub-block scales
//! as f16s, against the two Q8_0 activation blocks under it, in ggml's
//! float order.
//!
//! ```text
//!   group block (320 B):  d: sub-block s, row r: f16 at 16s + 2r      64 B
//!     nibbles: chunk c (0..8), byte p = 4·row + i:
//!       code of value 8c + i | code of value 8c + 4 + i << 4        256 B
//!
//!   per row r, token t, block b, sub-block s (16 values, steps 4s..4s+4;
//!   Q8_0 block 2b + s/2: d_x, quants x):
//!     sumi = Σ M[code] · x                                 exact i32
//!     acc  = acc + (d_x · d_s) · f32(sumi)
//! ```
//!
//! UE4M3's halved values (`fp::ue4m3_to_f32_half`: 3 mantissa bits,
//! 2^-10 to 240) are all exact f16s, so the f16 scales are the GGUF
//! block's values. This is [`crate::scalar::vec_dot_nvfp4_q8_0`]'s
//! arithmetic step for step, lane by lane, without fused multiply-adds:
//! every element has the scalar dot product's bits.

use super::layout::nv;
use crate::blocks::BlockNVFP4;
use crate::fp::{f16_to_f32, f32_to_f16, ue4m3_to_f32_half};

/// Packs row `r` of an NVFP4 group block from its GGUF block `b`.
pub(crate) fn encode(dst: &mut [u8], r: usize, b: &[u8; BlockNVFP4::BYTES]) {
    let blk = BlockNVFP4::from_bytes(b);
    for (s, &d) in blk.d.iter().enumerate() {
        let at = nv::D + 16 * s + 2 * r;
        dst[at..at + 2].copy_from_slice(&f32_to_f16(ue4m3_to_f32_half(d)).to_le_bytes());
    }
    for e in 0..BlockNVFP4::ELEMS {
        // Value e of sub-block s = e / 16: low nibble of qs[8s + e % 8]
        // for e % 16 < 8, else its high nibble.
        let byte = blk.qs[8 * (e / 16) + e % 8];
        let code = if e % 16 < 8 { byte & 15 } else { byte >> 4 };
        let (k, i) = (e / 4, e % 4);
        dst[nv::NIB + 32 * (k / 2) + 4 * r + i] |= code << (4 * (k % 2));
    }
}

/// Row `r`'s GGUF block back from a group block `g` (each scale as the
/// first UE4M3 byte of its value, which is all the dot product reads;
/// 240 only 0xFF spells).
pub(crate) fn decode(g: &[u8], r: usize) -> [u8; BlockNVFP4::BYTES] {
    let mut b = [0u8; BlockNVFP4::BYTES];
    for (s, bs) in b.iter_mut().take(4).enumerate() {
        let at = nv::D + 16 * s + 2 * r;
        let v = f16_to_f32(u16::from_le_bytes([g[at], g[at + 1]]));
        *bs = (0..=0xFFu8)
            .find(|&x| ue4m3_to_f32_half(x).to_bits() == v.to_bits())
            .unwrap_or(0);
    }
    for e in 0..BlockNVFP4::ELEMS {
        let (k, i) = (e / 4, e % 4);
        let code = (g[nv::NIB + 32 * (k / 2) + 4 * r + i] >> (4 * (k % 2))) & 15;
        let at = 4 + 8 * (e / 16) + e % 8;
        b[at] |= if e % 16 < 8 { code } else { code << 4 };
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_come_back_with_their_values() {
        let blocks: Vec<[u8; 36]> = (0..8)
            .map(|r| {
                std::array::from_fn(|i| {
                    if i < 4 {
                        (i * 23 + r * 5 + 9) as u8 & 0x7E
                    } else {
                        (i * 29 + r * 7 + 3) as u8
                    }
                })
            })
            .collect();
        let mut g = vec![0u8; nv::BYTES];
        for (r, b) in blocks.iter().enumerate() {
            encode(&mut g, r, b);
        }
        for (r, b) in blocks.iter().enumerate() {
            let back = decode(&g, r);
            assert_eq!(back[4..], b[4..], "row {r} codes");
            for s in 0..4 {
                assert_eq!(
                    ue4m3_to_f32_half(back[s]),
                    ue4m3_to_f32_half(b[s]),
                    "row {r} scale {s}"
                );
            }
        }
    }
}
