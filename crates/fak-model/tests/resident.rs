//! A KV row buffer takes physical memory only as its rows are written, for
//! both cache types: a `fak serve` pool sized to its budget must not be
//! resident at start. (Regression: the Q8_0 buffer was built with
//! `vec![zero_block; n]`, which writes every block, so `fak serve
//! --kv-type q8_0` held its whole 3 GiB pool from the first second while
//! the f16 one held none of it.)
//!
//! Linux only (reads `/proc/self/statm`); one test in this file, so no
//! other test's allocations run beside it in the process.

use fak_model::{KvRowBuf, KvRowShape, KvType};

/// Resident bytes of this process.
#[cfg(target_os = "linux")]
fn resident() -> usize {
    let s = std::fs::read_to_string("/proc/self/statm").expect("statm");
    let pages: usize = s
        .split_whitespace()
        .nth(1)
        .and_then(|f| f.parse().ok())
        .expect("statm's resident field");
    pages * 4096
}

#[cfg(target_os = "linux")]
#[test]
fn a_fresh_row_buffer_is_not_resident() {
    const MIB: usize = 1 << 20;
    // 512 MiB of rows per buffer: 4096 segments of 64 rows, 1024 values.
    let shape = KvRowShape {
        segments: 4096,
        seg_rows: 64,
        n_kv_dim: 1024,
        head_dim: 64,
    };
    for ty in [KvType::F16, KvType::Q8_0] {
        for keys in [false, true] {
            let before = resident();
            let buf = if keys {
                KvRowBuf::new_keys(ty, shape)
            } else {
                KvRowBuf::new(ty, shape)
            }
            .expect("allocates");
            let grew = resident().saturating_sub(before);
            assert!(
                grew < 32 * MIB,
                "{ty:?} (keys: {keys}): a fresh buffer made {} MiB resident",
                grew / MIB
            );
            drop(buf);
        }
    }
}
