//! Tests of the row buffers: element types, layouts, runs and copies.

use super::*;

#[test]
fn names_round_trip() {
    for t in KvType::ALL {
        assert_eq!(KvType::parse(t.name()), Some(t));
    }
    assert_eq!(KvType::parse("q4_0"), None);
}

/// Sizes whose product overflows, or that no allocator can give, are
/// refused with a typed error before anything is allocated (they used
/// to panic with "capacity overflow" or abort the process).
#[test]
fn impossible_sizes_are_typed_errors() {
    let shape = |segments, seg_rows| KvRowShape {
        segments,
        seg_rows,
        n_kv_dim: 128,
        head_dim: 64,
    };
    for ty in KvType::ALL {
        assert!(matches!(
            KvRowBuf::new(ty, shape(usize::MAX, 2)),
            Err(KvError::TooLarge { .. })
        ));
        // 2^62 bytes: below isize::MAX, beyond any address space.
        let rows = (1usize << 62) / ty.row_bytes(128);
        assert!(
            matches!(
                KvRowBuf::new(ty, shape(1, rows)),
                Err(KvError::AllocFailed { .. })
            ),
            "{ty}"
        );
    }
}

#[test]
fn q8_0_rows_round_trip_within_half_a_step() {
    let n = 128;
    let shape = KvRowShape {
        segments: 1,
        seg_rows: 3,
        n_kv_dim: n,
        head_dim: 64,
    };
    let mut buf = KvRowBuf::new(KvType::Q8_0, shape).expect("rows");
    let mut x: Vec<f32> = (0..n)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
        .collect();
    x[5] = 150.0; // one outlier channel, as in Qwen2's keys
    buf.write(1, &x);
    let mut back = vec![0.0f32; n];
    buf.read(1, &mut back);
    // Stored: H·x per 64-value chunk, each 32-value block rounded to a
    // step of amax/127. H is orthonormal, so the error's norm per chunk
    // is at most half a step times sqrt(64).
    let mut hx = x.clone();
    hadamard_rotate(&mut hx, 64);
    for (c, (xs, ys)) in x.chunks(64).zip(back.chunks(64)).enumerate() {
        let steps: Vec<f32> = hx[c * 64..(c + 1) * 64]
            .chunks(32)
            .map(|b| b.iter().fold(0.0f32, |m, v| m.max(v.abs())) / 127.0)
            .collect();
        let bound: f32 = steps
            .iter()
            .map(|s| 32.0 * (s / 2.0).powi(2))
            .sum::<f32>()
            .sqrt();
        let err: f32 = xs
            .iter()
            .zip(ys)
            .map(|(a, b)| (a - b).powi(2))
            .sum::<f32>()
            .sqrt();
        assert!(
            err <= bound * 1.001 + 1e-4,
            "chunk {c}: error {err} > {bound}"
        );
    }
    // The outlier itself comes back within one unit.
    assert!((back[5] - 150.0).abs() < 1.0);
    buf.copy_rows(1, 2, 1);
    let mut copied = vec![0.0f32; n];
    buf.read(2, &mut copied);
    assert_eq!(back, copied);
    assert_eq!(buf.run(0, 3, 1).rows(64), 3);
    assert_eq!(buf.run(2, 5, 0).rows(64), 1);
    assert_eq!(buf.run(9, 1, 0).rows(64), 0);
    assert_eq!(buf.run(0, 3, 2).rows(64), 0);
    assert_eq!(buf.bytes(), 3 * 4 * 34);
}

/// Value `i` of row `r` in the head-major layout tests: exact in f16.
fn value(r: usize, i: usize) -> f32 {
    (r * 16 + i) as f32 / 4.0
}

#[test]
fn f16_heads_are_contiguous_per_segment_and_rows_round_trip() {
    let (heads, hd, seg) = (3, 4, 5);
    let shape = KvRowShape {
        segments: 2,
        seg_rows: seg,
        n_kv_dim: heads * hd,
        head_dim: hd,
    };
    let mut buf = KvRowBuf::new(KvType::F16, shape).expect("rows");
    for r in 0..2 * seg {
        let x: Vec<f32> = (0..heads * hd).map(|i| value(r, i)).collect();
        buf.write(r, &x);
    }
    for r in 0..2 * seg {
        let mut back = vec![0.0f32; heads * hd];
        buf.read(r, &mut back);
        let want: Vec<f32> = (0..heads * hd).map(|i| value(r, i)).collect();
        assert_eq!(back, want, "row {r}");
    }
    // A run is one head's rows, contiguous, cut at the segment's end.
    let KvRun::F16(run) = buf.run(3, 10, 1) else {
        panic!("f16 store gave a Q8_0 run");
    };
    let got: Vec<f32> = run.iter().map(|x| x.to_f32()).collect();
    let want: Vec<f32> = (3..seg)
        .flat_map(|r| (hd..2 * hd).map(move |i| value(r, i)))
        .collect();
    assert_eq!(got, want);
    assert_eq!(buf.run(seg, 10, 2).rows(hd), seg);
    // Copying rows moves every head; the source segment is unchanged.
    buf.copy_rows(1, seg + 2, 3);
    for (src, dst) in [(1, seg + 2), (2, seg + 3), (3, seg + 4)] {
        let mut a = vec![0.0f32; heads * hd];
        let mut b = vec![0.0f32; heads * hd];
        buf.read(src, &mut a);
        buf.read(dst, &mut b);
        assert_eq!(a, b, "row {src} -> {dst}");
    }
    let mut untouched = vec![0.0f32; heads * hd];
    buf.read(seg + 1, &mut untouched);
    let want: Vec<f32> = (0..heads * hd).map(|i| value(seg + 1, i)).collect();
    assert_eq!(untouched, want);
}
/// A key buffer of f16 rows stores each segment's head in dims-major
/// tiles: a key run reads dim `d` of its rows contiguously and ends at
/// its tile's end, the scores of the dims-major kernel over it are
/// those of the row-major kernel over a row-major buffer of the same
/// rows, bit for bit, and rows read and copy (across tiles, at any
/// alignment) as in a row-major buffer. Segments of 6 rows (one short
/// tile) and of 70 (tiles of 32, 32 and 6).
#[test]
fn f16_keys_are_dims_major_and_score_like_rows() {
    for seg in [6, 70] {
        keys_dims_major(seg);
    }
}

fn keys_dims_major(seg: usize) {
    use fak_kernels::attn::{self, KvCols, QueryGroup};
    let (heads, hd) = (2, 8);
    let shape = KvRowShape {
        segments: 3,
        seg_rows: seg,
        n_kv_dim: heads * hd,
        head_dim: hd,
    };
    let mut keys = KvRowBuf::new_keys(KvType::F16, shape).expect("keys");
    let mut rows = KvRowBuf::new(KvType::F16, shape).expect("rows");
    // Values exact in f16 for every row of this test.
    let val = |r: usize, i: usize| (r * 16 + i) as f32 / 16.0;
    for r in 0..3 * seg {
        let x: Vec<f32> = (0..heads * hd).map(|i| val(r, i)).collect();
        keys.write(r, &x);
        rows.write(r, &x);
    }
    // Dims-major buffers have no row-major runs.
    assert_eq!(keys.run(0, 3, 0).rows(hd), 0);
    let read = |b: &KvRowBuf, r: usize| {
        let mut a = vec![0.0f32; heads * hd];
        b.read(r, &mut a);
        a
    };
    for r in 0..3 * seg {
        assert_eq!(read(&keys, r), read(&rows, r), "seg {seg}, row {r}");
    }
    // Rows from seg + 2 on of head 1 (segment 1): dim d of the run's
    // row j at d * dstride + j; the run ends at its tile's end.
    let tile = seg.min(KEY_TILE_ROWS);
    let KeyRun::Cols {
        data,
        dstride,
        n_rows,
    } = keys.key_run(seg + 2, 99, 1)
    else {
        panic!("f16 keys gave a row-major run");
    };
    assert_eq!((dstride, n_rows), (tile, tile - 2), "seg {seg}");
    for j in 0..n_rows {
        for d in 0..hd {
            assert_eq!(data[d * dstride + j].to_f32(), val(seg + 2 + j, hd + d));
        }
    }
    assert_eq!(keys.key_run(seg + 2, 3, 1).rows(hd), 3);
    assert_eq!(keys.key_run(0, 3, heads).rows(hd), 0);
    assert_eq!(keys.key_run(3 * seg, 3, 0).rows(hd), 0);
    // Scores: the dims-major kernel over each key run against the
    // row-major kernel over the same rows, walking whole segments.
    let q: Vec<f32> = (0..3 * hd).map(|i| (i as f32 * 0.37).sin()).collect();
    let qs = QueryGroup { q: &q, n: hd };
    for head in 0..heads {
        let mut p = 0;
        while p < 3 * seg {
            let KeyRun::Cols { data, dstride, .. } = keys.key_run(p, 3 * seg - p, head) else {
                panic!("row-major key run");
            };
            let m = keys.key_run(p, 3 * seg - p, head).rows(hd);
            assert!(m > 0, "row {p}");
            let KvRun::F16(rr) = rows.run(p, m, head) else {
                panic!("q8 run");
            };
            let (mut a, mut b) = (vec![0.0f32; 3 * m], vec![1.0f32; 3 * m]);
            let kc = KvCols {
                data: half::slice::HalfFloatSliceExt::reinterpret_cast(data),
                dstride,
                n_rows: m,
                width: hd,
            };
            attn::dot_f32_f16_cols_group(qs, kc, &mut a, m);
            let rr: &[u16] = half::slice::HalfFloatSliceExt::reinterpret_cast(rr);
            attn::dot_f32_f16_rows_group(qs, rr, hd, m, &mut b, m);
            assert_eq!(a, b, "seg {seg}, rows {p}.., head {head}");
            p += m;
        }
    }
    // Copies move every dim of every head, tiles aligned or not.
    for (src, dst, n) in [(1, 2 * seg + 1, seg - 2), (0, 2 * seg + 3, seg - 3)] {
        let before: Vec<Vec<f32>> = (src..src + n).map(|r| read(&keys, r)).collect();
        let after_end = read(&keys, 2 * seg);
        keys.copy_rows(src, dst, n);
        for (i, want) in before.iter().enumerate() {
            assert_eq!(
                &read(&keys, dst + i),
                want,
                "seg {seg}: {src} -> {dst}, row {i}"
            );
        }
        assert_eq!(read(&keys, 2 * seg), after_end, "row before dst kept");
    }
}

/// Q8_0 keys stay row-major.
#[test]
fn q8_0_keys_are_row_runs() {
    let shape = KvRowShape {
        segments: 1,
        seg_rows: 4,
        n_kv_dim: 64,
        head_dim: 32,
    };
    let keys = KvRowBuf::new_keys(KvType::Q8_0, shape).expect("keys");
    assert!(matches!(
        keys.key_run(1, 2, 1),
        KeyRun::Rows(KvRun::Q8_0(_))
    ));
    assert_eq!(keys.key_run(1, 9, 1).rows(32), 3);
}
