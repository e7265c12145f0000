//! `model_config` on tiny llama / qwen2 / qwen3 files: valid ones produce the right
//! hyperparameters, broken ones an error naming the key or tensor.

mod common;

use common::{assert_mentions, validate, Tiny};
use fak_gguf::{Arch, GgmlType, MetaArray, MetaValue, QkNorm, RopeStyle};

#[track_caller]
fn err_of(w: &fak_gguf::GgufWriter) -> String {
    match validate(w) {
        Ok(cfg) => panic!("expected an error, got {cfg:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn tiny_llama_validates() {
    let cfg = validate(&Tiny::llama().writer()).expect("valid tiny llama");
    assert_eq!(cfg.arch, Arch::Llama);
    assert_eq!(
        (
            cfg.n_vocab,
            cfg.n_embd,
            cfg.n_layer,
            cfg.n_head,
            cfg.n_head_kv
        ),
        (12, 8, 2, 2, 1)
    );
    assert_eq!(
        (cfg.head_dim, cfg.rope_dim, cfg.n_ff, cfg.n_ctx_train),
        (4, 4, 16, 64)
    );
    assert_eq!(cfg.rope_style, RopeStyle::Normal);
    assert_eq!(cfg.rope_theta, 10000.0);
    assert_eq!(cfg.rms_eps, 1e-5);
    assert!(cfg.tied_embeddings);
    assert!(!cfg.qkv_bias);
    assert_eq!((cfg.n_embd_q(), cfg.n_embd_kv()), (8, 4));
}

#[test]
fn tiny_qwen2_validates() {
    let cfg = validate(&Tiny::qwen2().writer()).expect("valid tiny qwen2");
    assert_eq!(cfg.arch, Arch::Qwen2);
    assert_eq!(cfg.rope_style, RopeStyle::Neox);
    assert!(cfg.qkv_bias);
    assert!(!cfg.tied_embeddings);
}

#[test]
fn tiny_qwen3_validates_and_needs_its_qk_norms() {
    let cfg = validate(&Tiny::qwen3().writer()).expect("valid tiny qwen3");
    assert_eq!(cfg.arch, Arch::Qwen3);
    assert_eq!(cfg.rope_style, RopeStyle::Neox);
    assert_eq!(cfg.qk_norm, QkNorm::PerHead);
    assert!(!cfg.qkv_bias);
    assert_eq!(cfg.rope_freq_factors, None);
    let mut w = Tiny::qwen3().writer();
    w.remove_tensor("blk.1.attn_k_norm.weight");
    assert_mentions(&err_of(&w), &["blk.1.attn_k_norm.weight", "[4]"]);
    // One weight per query row instead of per head.
    Tiny::replace_tensor(&mut w, "blk.1.attn_k_norm.weight", &[8]);
    assert_mentions(&err_of(&w), &["blk.1.attn_k_norm.weight", "[4]", "[8]"]);
    // qwen2 and llama carry no q/k norm: fak would ignore it.
    let mut w = Tiny::qwen2().writer();
    Tiny::replace_tensor(&mut w, "blk.0.attn_q_norm.weight", &[4]);
    assert_mentions(&err_of(&w), &["unexpected tensor", "attn_q_norm", "qwen2"]);
    assert_eq!(
        validate(&Tiny::llama().writer()).expect("llama").qk_norm,
        QkNorm::None
    );
}

#[test]
fn llama_rope_freqs_are_read_and_checked() {
    let with = |dims: &[u64], ty: GgmlType, data: Vec<u8>| {
        let mut w = Tiny::llama().writer();
        w.add_tensor("rope_freqs.weight", dims, ty, data)
            .expect("tensor");
        w
    };
    let f32s = |v: &[f32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    // head_dim 4: two rotated pairs, two factors.
    let cfg = validate(&with(&[2], GgmlType::F32, f32s(&[1.0, 8.0]))).expect("factors");
    assert_eq!(cfg.rope_freq_factors, Some(vec![1.0, 8.0]));
    assert_mentions(
        &err_of(&with(&[4], GgmlType::F32, f32s(&[1.0; 4]))),
        &["rope_freqs.weight", "[2]", "[4]"],
    );
    assert_mentions(
        &err_of(&with(&[2], GgmlType::F16, vec![0, 0x3c, 0, 0x48])),
        &["rope_freqs.weight", "f16", "not f32"],
    );
    for bad in [0.0f32, -1.0, f32::NAN, f32::INFINITY] {
        assert_mentions(
            &err_of(&with(&[2], GgmlType::F32, f32s(&[1.0, bad]))),
            &["rope_freqs.weight", "factor 1", "finite positive"],
        );
    }
    // Only llama takes them (llama.cpp loads rope_freqs for llama only).
    let mut w = Tiny::qwen2().writer();
    w.add_tensor("rope_freqs.weight", &[2], GgmlType::F32, f32s(&[1.0; 2]))
        .expect("tensor");
    assert_mentions(&err_of(&w), &["unexpected tensor", "rope_freqs", "qwen2"]);
}

#[test]
fn defaults_apply_when_optional_keys_are_absent() {
    let mut w = Tiny::llama().writer();
    w.remove_kv("llama.rope.freq_base");
    w.remove_kv("llama.attention.head_count_kv");
    // Without head_count_kv, k/v are full width.
    Tiny::replace_tensor(&mut w, "blk.0.attn_k.weight", &[8, 8]);
    Tiny::replace_tensor(&mut w, "blk.0.attn_v.weight", &[8, 8]);
    Tiny::replace_tensor(&mut w, "blk.1.attn_k.weight", &[8, 8]);
    Tiny::replace_tensor(&mut w, "blk.1.attn_v.weight", &[8, 8]);
    let cfg = validate(&w).expect("defaults");
    assert_eq!(cfg.rope_theta, 10000.0);
    assert_eq!(cfg.n_head_kv, 2);
}

#[test]
fn explicit_key_length_and_rope_dims() {
    let mut w = Tiny::llama().writer();
    w.set_kv("llama.attention.key_length", MetaValue::U32(4));
    assert_eq!(validate(&w).expect("explicit key length").head_dim, 4);
    // A head size of 2 makes the q projection [8, 4], but the file has [8, 8].
    w.set_kv("llama.attention.key_length", MetaValue::U32(2));
    assert_mentions(
        &err_of(&w),
        &["tensor 'blk.0.attn_q.weight'", "[8, 8]", "[8, 4]"],
    );
    w.set_kv("llama.attention.key_length", MetaValue::U32(3));
    assert_mentions(&err_of(&w), &["llama.attention.key_length", "odd"]);
    w.remove_kv("llama.attention.key_length");
    w.set_kv("llama.rope.dimension_count", MetaValue::U32(2));
    assert_eq!(validate(&w).expect("partial rope").rope_dim, 2);
    w.set_kv("llama.rope.dimension_count", MetaValue::U32(6));
    assert_mentions(&err_of(&w), &["llama.rope.dimension_count", "6"]);
    w.set_kv("llama.rope.dimension_count", MetaValue::U32(3));
    assert_mentions(&err_of(&w), &["llama.rope.dimension_count", "even"]);
    w.remove_kv("llama.rope.dimension_count");
    w.set_kv("llama.attention.value_length", MetaValue::U32(2));
    assert_mentions(
        &err_of(&w),
        &["llama.attention.value_length", "not supported"],
    );
}

#[test]
fn special_token_id_out_of_range() {
    let mut w = Tiny::llama().writer();
    w.set_kv("tokenizer.ggml.eos_token_id", MetaValue::U32(12));
    assert_mentions(
        &err_of(&w),
        &["tokenizer.ggml.eos_token_id", "12", "12 tokens"],
    );
    let mut w = Tiny::llama().writer();
    w.set_kv(
        "tokenizer.ggml.seperator_token_id",
        MetaValue::U64(u64::MAX),
    );
    assert_mentions(&err_of(&w), &["tokenizer.ggml.seperator_token_id"]);
    let mut w = Tiny::llama().writer();
    w.set_kv("tokenizer.ggml.padding_token_id", MetaValue::I32(-1));
    assert_mentions(
        &err_of(&w),
        &["tokenizer.ggml.padding_token_id", "negative"],
    );
    let mut w = Tiny::llama().writer();
    w.set_kv("tokenizer.ggml.eot_token_id", MetaValue::from("2"));
    assert_mentions(&err_of(&w), &["tokenizer.ggml.eot_token_id", "integer"]);
    let mut w = Tiny::llama().writer();
    w.set_kv(
        "tokenizer.ggml.eos_token_ids",
        MetaValue::Array(MetaArray::U32(vec![2, 11, 40])),
    );
    assert_mentions(&err_of(&w), &["tokenizer.ggml.eos_token_ids", "40"]);
    // The last valid id is fine.
    let mut w = Tiny::llama().writer();
    w.set_kv("tokenizer.ggml.unknown_token_id", MetaValue::U32(11));
    assert!(validate(&w).is_ok());
}

#[test]
fn absurd_block_count() {
    for n in [0u32, 513, 100_000] {
        let mut w = Tiny::llama().writer();
        w.set_kv("llama.block_count", MetaValue::U32(n));
        assert_mentions(&err_of(&w), &["llama.block_count", &n.to_string()]);
    }
    // Allowed by the bound but more layers than tensors in the file.
    let mut w = Tiny::llama().writer();
    w.set_kv("llama.block_count", MetaValue::U32(200));
    assert_mentions(&err_of(&w), &["llama.block_count", "200 layers", "tensors"]);
    // Plausible count: the first missing layer is named.
    let mut w = Tiny::llama().writer();
    w.set_kv("llama.block_count", MetaValue::U32(3));
    assert_mentions(&err_of(&w), &["missing tensor 'blk.2.attn_norm.weight'"]);
}

#[test]
fn missing_tensor() {
    let mut w = Tiny::llama().writer();
    assert!(w.remove_tensor("blk.1.ffn_up.weight"));
    assert_mentions(
        &err_of(&w),
        &["missing tensor 'blk.1.ffn_up.weight'", "[8, 16]"],
    );
    let mut w = Tiny::qwen2().writer();
    assert!(w.remove_tensor("blk.0.attn_v.bias"));
    assert_mentions(&err_of(&w), &["missing tensor 'blk.0.attn_v.bias'", "[4]"]);
    let mut w = Tiny::llama().writer();
    assert!(w.remove_tensor("token_embd.weight"));
    assert_mentions(&err_of(&w), &["'token_embd.weight'"]);
}

#[test]
fn shape_mismatch() {
    let mut w = Tiny::llama().writer();
    Tiny::replace_tensor(&mut w, "blk.1.attn_k.weight", &[8, 8]);
    assert_mentions(
        &err_of(&w),
        &["tensor 'blk.1.attn_k.weight'", "[8, 8]", "[8, 4]"],
    );
    let mut w = Tiny::llama().writer();
    Tiny::replace_tensor(&mut w, "token_embd.weight", &[12, 8]);
    assert_mentions(
        &err_of(&w),
        &["tensor 'token_embd.weight'", "[12, 8]", "[8, 12]"],
    );
    let mut w = Tiny::qwen2().writer();
    Tiny::replace_tensor(&mut w, "output.weight", &[8, 11]);
    assert_mentions(&err_of(&w), &["tensor 'output.weight'", "[8, 11]"]);
    let mut w = Tiny::llama().writer();
    Tiny::replace_tensor(&mut w, "blk.0.ffn_down.weight", &[8, 16]);
    assert_mentions(&err_of(&w), &["tensor 'blk.0.ffn_down.weight'", "[16, 8]"]);
}

#[test]
fn unexpected_tensors_are_rejected() {
    let mut w = Tiny::llama().writer();
    Tiny::replace_tensor(&mut w, "blk.0.attn_output.bias", &[8]);
    assert_mentions(
        &err_of(&w),
        &["unexpected tensor 'blk.0.attn_output.bias'", "llama"],
    );
    let mut w = Tiny::llama().writer();
    Tiny::replace_tensor(&mut w, "rope_freqs.weight", &[2]);
    assert_mentions(&err_of(&w), &["'rope_freqs.weight'"]);
}

#[test]
fn llama_with_qkv_bias() {
    let mut w = Tiny::llama().writer();
    for i in 0..2 {
        Tiny::replace_tensor(&mut w, &format!("blk.{i}.attn_q.bias"), &[8]);
        Tiny::replace_tensor(&mut w, &format!("blk.{i}.attn_k.bias"), &[4]);
        Tiny::replace_tensor(&mut w, &format!("blk.{i}.attn_v.bias"), &[4]);
    }
    assert!(validate(&w).expect("llama with biases").qkv_bias);
    w.remove_tensor("blk.1.attn_k.bias");
    assert_mentions(&err_of(&w), &["missing tensor 'blk.1.attn_k.bias'"]);
}

#[test]
fn architecture_and_required_keys() {
    let mut w = Tiny::llama().writer();
    w.set_kv("general.architecture", MetaValue::from("gpt2"));
    assert_mentions(&err_of(&w), &["general.architecture", "'gpt2'"]);
    let mut w = Tiny::llama().writer();
    w.remove_kv("general.architecture");
    assert_mentions(
        &err_of(&w),
        &["missing required key 'general.architecture'"],
    );
    for key in [
        "llama.embedding_length",
        "llama.feed_forward_length",
        "llama.attention.head_count",
        "llama.context_length",
        "llama.attention.layer_norm_rms_epsilon",
    ] {
        let mut w = Tiny::llama().writer();
        w.remove_kv(key);
        assert_mentions(&err_of(&w), &["missing required key", key]);
    }
    let mut w = Tiny::llama().writer();
    w.set_kv("llama.embedding_length", MetaValue::from("8"));
    assert_mentions(
        &err_of(&w),
        &["llama.embedding_length", "integer", "string"],
    );
}

#[test]
fn bad_hyperparameter_values() {
    let cases: [(&str, MetaValue, &str); 7] = [
        ("llama.attention.head_count_kv", MetaValue::U32(3), "divide"),
        (
            "llama.attention.head_count_kv",
            MetaValue::U32(0),
            "outside",
        ),
        ("llama.attention.head_count", MetaValue::U32(3), "divide"),
        (
            "llama.attention.layer_norm_rms_epsilon",
            MetaValue::F32(-1.0),
            "positive",
        ),
        (
            "llama.attention.layer_norm_rms_epsilon",
            MetaValue::F32(f32::NAN),
            "positive",
        ),
        (
            "llama.rope.freq_base",
            MetaValue::F32(f32::INFINITY),
            "positive",
        ),
        ("llama.embedding_length", MetaValue::U64(1 << 40), "outside"),
    ];
    for (key, value, needle) in cases {
        let mut w = Tiny::llama().writer();
        w.set_kv(key, value);
        assert_mentions(&err_of(&w), &[key, needle]);
    }
}

#[test]
fn vocabulary_size_sources_must_agree() {
    let mut w = Tiny::llama().writer();
    w.set_kv("llama.vocab_size", MetaValue::U32(12));
    assert_eq!(validate(&w).expect("agreeing vocab").n_vocab, 12);
    w.set_kv("llama.vocab_size", MetaValue::U32(13));
    assert_mentions(&err_of(&w), &["llama.vocab_size", "13", "12 entries"]);
    let mut w = Tiny::llama().writer();
    w.remove_kv("tokenizer.ggml.tokens");
    w.remove_kv("tokenizer.ggml.token_type");
    assert_mentions(
        &err_of(&w),
        &["missing required key 'tokenizer.ggml.tokens'"],
    );
    let mut w = Tiny::llama().writer();
    w.set_kv(
        "tokenizer.ggml.token_type",
        MetaValue::Array(MetaArray::I32(vec![1; 5])),
    );
    assert_mentions(&err_of(&w), &["tokenizer.ggml.token_type", "5 entries"]);
    let mut w = Tiny::llama().writer();
    w.set_kv(
        "tokenizer.ggml.tokens",
        MetaValue::Array(MetaArray::U32(vec![1; 12])),
    );
    assert_mentions(&err_of(&w), &["tokenizer.ggml.tokens", "array of string"]);
}

#[test]
fn unsupported_features() {
    let mut w = Tiny::llama().writer();
    w.set_kv("llama.rope.scaling.type", MetaValue::from("yarn"));
    assert_mentions(&err_of(&w), &["llama.rope.scaling.type", "yarn"]);
    w.set_kv("llama.rope.scaling.type", MetaValue::from("none"));
    assert!(validate(&w).is_ok());
    w.set_kv("llama.rope.scaling.factor", MetaValue::F32(4.0));
    assert_mentions(&err_of(&w), &["llama.rope.scaling.factor"]);
    let mut w = Tiny::llama().writer();
    w.set_kv("llama.expert_count", MetaValue::U32(8));
    assert_mentions(&err_of(&w), &["llama.expert_count", "experts"]);
}

#[test]
fn quantized_tensors_validate_by_shape() {
    // A q8_0 token embedding of a wider model: shapes, not types, matter.
    let t = Tiny {
        n_embd: 32,
        n_head: 4,
        n_head_kv: 2,
        ..Tiny::llama()
    };
    let mut w = t.writer();
    w.remove_tensor("token_embd.weight");
    w.add_tensor(
        "token_embd.weight",
        &[32, 12],
        GgmlType::Q8_0,
        vec![0; 34 * 12],
    )
    .expect("q8_0 embedding");
    let cfg = validate(&w).expect("quantized embedding");
    assert_eq!(cfg.head_dim, 8);
}
