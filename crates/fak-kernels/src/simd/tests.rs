//! `Kernel::rows_fit` agrees with the general length check for every
//! kernel type, on valid and invalid lengths.

use fak_gguf::GgmlType;

use super::Kernel;
use crate::dot_rows::{check_dot, vec_dot_type};

#[test]
fn rows_fit_agrees_with_check_dot() {
    let types = [
        GgmlType::Q8_0,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q4_K,
        GgmlType::Q5_K,
        GgmlType::Q6_K,
        GgmlType::F16,
        GgmlType::Q5_1,
        GgmlType::Q8_K,
        GgmlType::F32,
        GgmlType::BF16,
    ];
    let buf = vec![0u8; 4 * 292 + 8];
    for ty in types {
        let Some(kernel) = Kernel::for_type(ty) else {
            panic!("{ty} has no SIMD kernel");
        };
        let aty = vec_dot_type(ty);
        for n in [0, 1, 2, 31, 32, 33, 64, 255, 256, 257, 512, 768, 1024] {
            let (wb, ab) = (
                ty.row_bytes(n as u64).map(|b| b as usize),
                aty.row_bytes(n as u64).map(|b| b as usize),
            );
            for dw in [0usize, 1, 2] {
                for da in [0usize, 1] {
                    let wl = wb.unwrap_or(n) + dw;
                    let al = ab.unwrap_or(n) + da;
                    if wl > buf.len() || al > buf.len() {
                        continue;
                    }
                    let (w, a) = (&buf[..wl], &buf[..al]);
                    assert_eq!(
                        kernel.rows_fit(n, w, a),
                        check_dot(ty, n, w, a).is_ok(),
                        "{ty} n={n} w={wl} a={al}"
                    );
                }
            }
        }
    }
}
