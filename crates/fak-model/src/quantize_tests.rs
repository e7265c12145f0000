//! Unit tests of the tensor type rules (`quantize.rs`).

use super::*;

/// SmolLM2-135M's shape: 30 layers, 9 query heads over 3 K/V heads, tied
/// embeddings.
const SMOL: ModelShape = ModelShape {
    has_output: false,
    n_layer: 30,
    n_gqa: 3,
};

fn t(name: &str, dims: &[u64], ftype: FileType, m: ModelShape) -> GgmlType {
    target_type(name, dims, GgmlType::Q8_0, ftype, m)
}

#[test]
fn norms_and_vectors_stay() {
    assert_eq!(
        target_type(
            "blk.0.attn_norm.weight",
            &[576],
            GgmlType::F32,
            FileType::Q8_0,
            SMOL
        ),
        GgmlType::F32
    );
    assert_eq!(
        target_type(
            "blk.0.attn_q.bias",
            &[896],
            GgmlType::F32,
            FileType::Q4_0,
            SMOL
        ),
        GgmlType::F32
    );
}

#[test]
fn output_rules() {
    let out = ModelShape {
        has_output: true,
        ..SMOL
    };
    // Tied embeddings act as the output matrix.
    assert_eq!(
        t("token_embd.weight", &[576, 49152], FileType::Q4_0, SMOL),
        GgmlType::Q8_0
    );
    assert_eq!(
        t("token_embd.weight", &[512, 49152], FileType::Q4_1, SMOL),
        GgmlType::Q6_K
    );
    assert_eq!(
        t("token_embd.weight", &[512, 49152], FileType::Q4_1, out),
        GgmlType::Q4_1
    );
    assert_eq!(
        t("output.weight", &[512, 49152], FileType::Q8_0, out),
        GgmlType::Q8_0
    );
    assert_eq!(
        t("output.weight", &[512, 49152], FileType::F16, out),
        GgmlType::F16
    );
    assert_eq!(
        t("blk.0.ffn_up.weight", &[576, 1536], FileType::F16, SMOL),
        GgmlType::F16
    );
    // IQ4_NL's blocks are 32 wide: a 576-wide output is Q6_K, which falls
    // back to Q8_0.
    assert_eq!(
        t("token_embd.weight", &[576, 49152], FileType::IQ4_NL, SMOL),
        GgmlType::Q8_0
    );
}

#[test]
fn mixtures_follow_llama_cpp() {
    use GgmlType::*;
    let q = |name: &str, nx: u64, f: FileType| t(name, &[nx, 1536], f, SMOL);
    // IQ4_XS: 576-wide rows fall back to IQ4_NL; the first eighth of
    // ffn_down is Q5_K.
    assert_eq!(q("blk.0.attn_q.weight", 576, FileType::IQ4_XS), IQ4_NL);
    assert_eq!(q("blk.2.ffn_down.weight", 1536, FileType::IQ4_XS), Q5_K);
    assert_eq!(q("blk.3.ffn_down.weight", 1536, FileType::IQ4_XS), IQ4_XS);
    assert_eq!(q("blk.3.ffn_down.weight", 1536, FileType::IQ4_NL), IQ4_NL);
    // gqa 3: attn_v keeps the default; gqa 4 gets Q5_K.
    assert_eq!(q("blk.0.attn_v.weight", 576, FileType::IQ4_NL), IQ4_NL);
    let gqa4 = ModelShape { n_gqa: 4, ..SMOL };
    assert_eq!(
        t("blk.0.attn_v.weight", &[1536, 256], FileType::IQ4_XS, gqa4),
        Q5_K
    );
    // Q2_K: ffn_down and attn_output Q3_K; attn_v Q3_K (gqa < 4); Q2_K
    // and Q3_K rows that are not whole 256-blocks become Q4_0.
    assert_eq!(q("blk.9.ffn_down.weight", 1536, FileType::Q2_K), Q3_K);
    assert_eq!(q("blk.9.attn_output.weight", 576, FileType::Q2_K), Q4_0);
    assert_eq!(q("blk.9.ffn_gate.weight", 1536, FileType::Q2_K), Q2_K);
    assert_eq!(q("blk.9.ffn_gate.weight", 576, FileType::Q2_K), Q4_0);
    assert_eq!(q("blk.9.attn_v.weight", 1536, FileType::Q2_K), Q3_K);
    // Q3_K_M: attn_v Q5_K in layers 0-1 then Q4_K; ffn_down Q5_K below
    // n/16 then Q4_K; attn_output Q4_K (Q5_0 when 576 wide).
    assert_eq!(q("blk.1.attn_v.weight", 1536, FileType::Q3_K_M), Q5_K);
    assert_eq!(q("blk.2.attn_v.weight", 1536, FileType::Q3_K_M), Q4_K);
    assert_eq!(q("blk.0.ffn_down.weight", 1536, FileType::Q3_K_M), Q5_K);
    assert_eq!(q("blk.1.ffn_down.weight", 1536, FileType::Q3_K_M), Q4_K);
    assert_eq!(q("blk.5.attn_output.weight", 576, FileType::Q3_K_M), Q5_0);
    assert_eq!(q("blk.5.ffn_up.weight", 1536, FileType::Q3_K_S), Q3_K);
    assert_eq!(q("blk.5.ffn_down.weight", 1536, FileType::Q3_K_L), Q5_K);
    // Q5_K_M: attn_v and ffn_down Q6_K in llama.cpp's use_more_bits
    // layers (of 30: 0-2, 26-29 and 5, 8, ..., 23), else Q5_K; Q5_K rows
    // that are not whole 256-blocks become Q5_1, Q6_K ones Q8_0. Q5_K_S:
    // Q5_K throughout.
    let more: Vec<u32> = (0..30)
        .filter(|&i| q(&format!("blk.{i}.ffn_down.weight"), 1536, FileType::Q5_K_M) == Q6_K)
        .collect();
    assert_eq!(
        more,
        [0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 26, 27, 28, 29].to_vec()
    );
    for i in 0..30 {
        let v = q(&format!("blk.{i}.attn_v.weight"), 1536, FileType::Q5_K_M);
        assert_eq!(v == Q6_K, more.contains(&i), "layer {i}");
        assert_eq!(
            q(&format!("blk.{i}.ffn_down.weight"), 1536, FileType::Q5_K_S),
            Q5_K
        );
    }
    assert_eq!(q("blk.3.ffn_down.weight", 1536, FileType::Q5_K_M), Q5_K);
    assert_eq!(q("blk.3.attn_v.weight", 576, FileType::Q5_K_M), Q5_1);
    assert_eq!(q("blk.2.attn_v.weight", 576, FileType::Q5_K_M), Q8_0);
    assert_eq!(q("blk.2.attn_q.weight", 1536, FileType::Q5_K_M), Q5_K);
    assert_eq!(q("blk.2.attn_output.weight", 1536, FileType::Q5_K_M), Q5_K);
    assert_eq!(q("blk.2.attn_output.weight", 576, FileType::Q5_K_S), Q5_1);
    // A fused attn_qkv follows attn_v's rules.
    assert_eq!(q("blk.2.attn_qkv.weight", 1536, FileType::Q5_K_M), Q6_K);
    assert_eq!(q("blk.3.attn_qkv.weight", 1536, FileType::Q5_K_M), Q5_K);
    assert_eq!(q("blk.2.attn_qkv.weight", 1536, FileType::Q3_K_M), Q4_K);
    // 80 layers: attn_v Q3_K/Q4_K become Q5_K.
    let big = ModelShape {
        n_layer: 80,
        ..SMOL
    };
    assert_eq!(
        t("blk.40.attn_v.weight", &[1536, 256], FileType::Q2_K, big),
        Q5_K
    );
}

#[test]
fn names_round_trip() {
    for f in FileType::ALL {
        assert_eq!(FileType::from_name(f.name()), Some(f));
        assert_eq!(FileType::from_name(&f.name().to_ascii_uppercase()), Some(f));
    }
    assert_eq!(FileType::from_name("q3_k"), None);
}

/// Rows split across threads come out as one thread's, row for row: a
/// tensor large enough for three threads, its rows not a multiple of
/// three, against each row quantized on its own.
#[test]
fn requantize_is_the_same_for_any_thread_count() {
    let (row_len, n_rows) = (256usize, 801usize);
    let values: Vec<f32> = (0..row_len * n_rows)
        .map(|i| ((i as f32) * 0.618).sin() * (1.0 + (i % 97) as f32 / 13.0))
        .collect();
    let src: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let rows = Rows {
        from: GgmlType::F32,
        to: GgmlType::IQ4_XS,
        row_len,
        n_rows,
    };
    let out_row = GgmlType::IQ4_XS.row_bytes(row_len as u64).expect("row") as usize;
    let mut want = vec![0u8; out_row * n_rows];
    for (x, d) in values
        .chunks_exact(row_len)
        .zip(want.chunks_exact_mut(out_row))
    {
        fak_kernels::quantize_row(GgmlType::IQ4_XS, x, d).expect("quantize");
    }
    assert!(row_len * n_rows >= 3 * MIN_VALUES_PER_THREAD);
    for threads in [1, 2, 3, 8, 1000] {
        let got = requantize("t", &src, rows, threads).expect("requantize");
        assert!(got == want, "{threads} threads");
    }
}
