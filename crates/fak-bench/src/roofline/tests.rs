//! The roofline's byte and MAC counts against hand arithmetic.

use super::*;

/// A made-up model: 2 layers, q_dim 4 (so 2·4·2 = 16 attention MACs per
/// query token per key row), 1000 weight bytes and 100 MACs per token in
/// the layers, a 300-byte, 30-MAC output head, 16 KV bytes per position.
fn tiny() -> ModelShape {
    ModelShape {
        n_layer: 2,
        q_dim: 4,
        layer_weight_bytes: 1000,
        layer_macs_per_token: 100,
        output_weight_bytes: 300,
        output_macs_per_token: 30,
        kv_bytes_per_pos: 16,
    }
}

/// 1000 bytes/s, 100 int8 MAC/s, 400 f32 FLOP/s = 200 FMA/s.
fn slow_machine(f32_gflops: f64) -> Machine {
    Machine {
        threads: 1,
        read_gb_per_s: 1e-6,
        bandwidth_source: "test".into(),
        int8_gmacs_per_s: 1e-7,
        peak_source: "test".into(),
        f32_gflops,
        f32_source: "test".into(),
    }
}

/// P=4 T=2 A=2 D=3 R=2, budget 3.
fn params() -> RooflineParams {
    RooflineParams {
        shape: tiny(),
        workload: Workload {
            prefix: 4,
            turns: 2,
            agents: 2,
            decode: 3,
            result: 2,
        },
        budget: 3,
    }
}

#[test]
fn prefix_counts_match_hand_arithmetic() {
    let c = prefix_cost(&tiny(), 4, 3);
    // ceil(4 / 3) = 2 passes, each reading the 1000 weight bytes.
    assert_eq!(c.passes, 2);
    assert_eq!(c.weight_bytes, 2000);
    // pass 1 reads rows 0..3 (3 rows), pass 2 rows 0..4 (4): 7 · 16 = 112.
    assert_eq!(c.kv_shared_read_bytes, 112);
    assert_eq!(c.kv_private_read_bytes, 0);
    // 4 rows written: 64 bytes. 4 tokens · 100 MACs; no logits.
    assert_eq!(c.kv_write_bytes, 64);
    assert_eq!(c.matmul_macs, 400);
    // tokens attend 1, 2, 3, 4 rows = 10 rows · 16 = 160.
    assert_eq!(c.attention_macs, 160);
}

#[test]
fn fleet_counts_match_hand_arithmetic() {
    let r = fleet_roofline(&params(), &slow_machine(4e-7));
    // Turn 0: each agent feeds R = 2 tokens over c = P = 4 rows.
    //   4 tokens, ceil(4/3) = 2 passes: 2·1000 + 300 (output once) = 2300 B
    //   shared 4 rows = 64 B; private 2 agents · 2 new rows = 4 rows = 64 B
    //   written 4 rows = 64 B; matmul 4·100 + 2 logits·30 = 460
    //   attention per agent 5 + 6 = 11 rows, · 2 agents · 16 = 352
    // Turn 1: after turn 0 an agent holds 4 + 2 + (3 − 1) = 8 rows; it
    //   feeds 1 + 2 = 3 tokens: 6 tokens, 2 passes, 2300 B of weights
    //   shared 64 B; private 2 · (8 − 4 + 3) = 14 rows = 224 B
    //   written 6 rows = 96 B; matmul 6·100 + 2·30 = 660
    //   attention per agent 9 + 10 + 11 = 30 rows, · 2 · 16 = 960
    let i = &r.result_ingest.cost;
    assert_eq!((i.units, i.passes, i.tokens), (2, 4, 10));
    assert_eq!(i.weight_bytes, 2300 + 2300);
    assert_eq!(i.kv_shared_read_bytes, 64 + 64);
    assert_eq!(i.kv_private_read_bytes, 64 + 224);
    assert_eq!(i.kv_write_bytes, 64 + 96);
    assert_eq!(i.matmul_macs, 460 + 660);
    assert_eq!(i.attention_macs, 352 + 960);
    // Decode, D − 1 = 2 steps per turn, 2 tokens each, 1300 B of weights.
    //   turn 0: 6 then 7 rows cached; a token attends 7, then 8 rows
    //     private 2·(7 − 4) = 6 rows = 96 B, then 2·(8 − 4) = 8 rows = 128 B
    //     attention 2·7·16 = 224, then 2·8·16 = 256
    //   turn 1: 11 then 12 rows cached; attends 12, then 13
    //     private 2·8 = 16 rows = 256 B, then 2·9 = 18 rows = 288 B
    //     attention 2·12·16 = 384, then 2·13·16 = 416
    let d = &r.decode.cost;
    assert_eq!((d.units, d.passes, d.tokens), (4, 4, 8));
    assert_eq!(d.weight_bytes, 4 * 1300);
    assert_eq!(d.kv_shared_read_bytes, 4 * 64);
    assert_eq!(d.kv_private_read_bytes, 96 + 128 + 256 + 288);
    assert_eq!(d.kv_write_bytes, 4 * 32);
    assert_eq!(d.matmul_macs, 4 * 2 * 130);
    assert_eq!(d.attention_macs, 224 + 256 + 384 + 416);
    let last = r.last_decode_step.expect("steps").cost;
    assert_eq!(last.attention_macs, 416);
    assert_eq!(r.first_decode_step.expect("steps").cost.attention_macs, 224);

    // Bounds: prefix 2176 B → 2.176 s; compute 400/100 + 160/200 = 4.8 s.
    assert!((r.prefix.memory_s - 2.176).abs() < 1e-9);
    assert!((r.prefix.bound_s - 4.8).abs() < 1e-9);
    assert_eq!(r.prefix.limit(), Limit::Compute);
    // Ingest turn 0: max(2492 B → 2.492 s, 4.6 + 1.76 = 6.36 s);
    // turn 1: max(2684 B → 2.684 s, 6.6 + 4.8 = 11.4 s).
    assert!((r.result_ingest.bound_s - (6.36 + 11.4)).abs() < 1e-9);
    assert!(
        (r.total_s - (r.prefix.bound_s + r.result_ingest.bound_s + r.decode.bound_s)).abs() < 1e-12
    );
}

/// Decode on the slow machine is compute bound, and its attention (f32
/// FMAs at 200/s) adds to its matmuls (int8 MACs at 100/s) in every step.
#[test]
fn the_attention_term_is_in_the_decode_bound() {
    let r = fleet_roofline(&params(), &slow_machine(4e-7));
    // Steps (counts as in fleet_counts_match_hand_arithmetic):
    //   bytes 1300 + 64 + private + 32 → 1.492, 1.524, 1.652, 1.684 s
    //   matmul 260 MACs → 2.6 s each; attention 224, 256, 384, 416 FMAs
    //   → 1.12, 1.28, 1.92, 2.08 s; compute 3.72, 3.88, 4.52, 4.68 s
    let d = &r.decode;
    assert!((d.memory_s - (1.492 + 1.524 + 1.652 + 1.684)).abs() < 1e-9);
    assert!((d.matmul_s - 4.0 * 2.6).abs() < 1e-9);
    assert!((d.attention_s - 6.4).abs() < 1e-9);
    // Σ max(memory, matmul + attention); 10.4 s without the attention term.
    assert!((d.bound_s - (3.72 + 3.88 + 4.52 + 4.68)).abs() < 1e-9);
    assert_eq!(d.limit(), Limit::Compute);
    let first = r.first_decode_step.expect("steps");
    assert!((first.bound_s - 3.72).abs() < 1e-9);
    assert!((r.last_decode_step.expect("steps").bound_s - 4.68).abs() < 1e-9);
}

#[test]
fn a_faster_f32_peak_lowers_only_the_attention_term() {
    let slow = fleet_roofline(&params(), &slow_machine(4e-7));
    let fast = fleet_roofline(&params(), &slow_machine(8e-7));
    assert_eq!(slow.result_ingest.cost, fast.result_ingest.cost);
    assert_eq!(slow.decode.matmul_s, fast.decode.matmul_s);
    assert!((fast.decode.attention_s - slow.decode.attention_s / 2.0).abs() < 1e-9);
    // Prefix: max(2.176 s memory, 4.0 s matmul + 0.4 s attention).
    assert!((fast.prefix.bound_s - 4.4).abs() < 1e-9);
    assert!(fast.total_s < slow.total_s);
}

#[test]
fn a_fast_core_makes_decode_memory_bound() {
    let m = Machine {
        int8_gmacs_per_s: 1.0,
        f32_gflops: 1.0,
        ..slow_machine(4e-7)
    };
    let r = fleet_roofline(&params(), &m);
    assert_eq!(r.decode.limit(), Limit::Memory);
    // Every step is memory bound: the bound is bytes / bandwidth.
    assert!((r.decode.bound_s - r.decode.memory_s).abs() < 1e-12);
    assert_eq!(r.decode.memory_bound_units, 4);
}

/// SmolLM2-135M (30 layers, n_embd 576, 9 heads and 3 KV heads of 64,
/// n_ff 1536, 49152 tokens, tied embeddings), every matrix Q8_0 (34 bytes
/// per 32 elements).
#[test]
fn smollm2_shape_from_its_gguf() {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../models/smollm2-135m-instruct-q8_0.gguf");
    assert!(
        p.exists(),
        "{} is missing: run scripts/fetch-models.sh",
        p.display()
    );
    let s = ModelShape::from_gguf(&p, KvType::F16).expect("shape");
    // per layer: q, o 576·576; k, v 576·192; gate, up, down 576·1536
    //   = 2·331776 + 2·110592 + 3·884736 = 3538944; · 30 = 106168320
    assert_eq!(s.layer_macs_per_token, 106_168_320);
    assert_eq!(s.layer_weight_bytes, 106_168_320 / 32 * 34);
    // output = token_embd: 49152 · 576 = 28311552
    assert_eq!(s.output_macs_per_token, 28_311_552);
    assert_eq!(s.output_weight_bytes, 28_311_552 / 32 * 34);
    assert_eq!(s.q_dim, 576);
    // K and V · 30 layers · 192 elements · 2 bytes (f16)
    assert_eq!(s.kv_bytes_per_pos, 2 * 30 * 192 * 2);
    let q8 = ModelShape::from_gguf(&p, KvType::Q8_0).expect("shape");
    // Q8_0 rows: 192 / 32 = 6 blocks of 34 bytes
    assert_eq!(q8.kv_bytes_per_pos, 2 * 30 * 6 * 34);
}
