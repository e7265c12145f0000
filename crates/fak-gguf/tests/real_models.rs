//! The reference model files (smollm2, qwen2.5, gemma3) open, validate, and agree with facts read
//! independently by the `gguf` Python package (offsets, counts, sha256 of
//! tensor bytes). Requires the files under `models/` (or `$FAK_MODELS_DIR`).

use std::path::PathBuf;

use fak_gguf::{model_config, Arch, GgmlType, GgufFile, GgufWriter, RopeStyle};
use sha2::{Digest, Sha256};

const SMOLLM: &str = "smollm2-135m-instruct-q4_1.gguf";
const QWEN: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";

fn model_path(name: &str) -> PathBuf {
    let dir = std::env::var_os("FAK_MODELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models"));
    let path = dir.join(name);
    assert!(
        path.is_file(),
        "model file {} is missing: run scripts/fetch-models.sh (or set FAK_MODELS_DIR)",
        path.display()
    );
    path
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// (name, dims, type, relative offset, sha256 of the data)
type TensorFact = (&'static str, [u64; 2], GgmlType, u64, &'static str);

fn check_tensor(f: &GgufFile, (name, dims, ty, offset, sha): TensorFact) {
    let t = f.tensor(name).unwrap_or_else(|| panic!("tensor {name}"));
    let want: Vec<u64> = dims.iter().copied().filter(|&d| d != 0).collect();
    assert_eq!(t.dims, want, "{name} dims");
    assert_eq!(t.ty, ty, "{name} type");
    assert_eq!(t.offset, offset, "{name} offset");
    assert_eq!(sha256_hex(f.tensor_data(t)), sha, "{name} data");
}

#[test]
fn smollm2_opens_and_validates() {
    let f = GgufFile::open(&model_path(SMOLLM)).expect("open smollm2");
    assert_eq!(
        (f.version(), f.alignment(), f.data_offset()),
        (3, 32, 1_785_664)
    );
    assert_eq!((f.metadata().len(), f.tensors().len()), (33, 272));
    assert_eq!(
        f.get_str("tokenizer.ggml.pre").ok().flatten(),
        Some("smollm")
    );
    let tokens = f
        .get_str_array("tokenizer.ggml.tokens")
        .ok()
        .flatten()
        .expect("tokens");
    assert_eq!(tokens.first().map(String::as_str), Some("<|endoftext|>"));
    assert_eq!(
        f.get_i32_array("tokenizer.ggml.token_type")
            .ok()
            .flatten()
            .map(<[i32]>::len),
        Some(49152)
    );
    check_tensor(
        &f,
        (
            "output_norm.weight",
            [576, 0],
            GgmlType::F32,
            96_574_464,
            "3b87f8e27335e67fc08f159cabfd2d18f205d6c5b225a6f978153552bf01d559",
        ),
    );
    check_tensor(
        &f,
        (
            "blk.0.attn_q.weight",
            [576, 576],
            GgmlType::Q4_1,
            32_020_992,
            "a8a1da23623a60216a214d68aca681284f4188cafcfe40664d8d025d3838038f",
        ),
    );
    assert_eq!(
        f.tensor("token_embd.weight").map(|t| t.ty),
        Some(GgmlType::Q8_0)
    );

    let cfg = model_config(&f).expect("smollm2 validates");
    assert_eq!(cfg.arch, Arch::Llama);
    assert_eq!(
        (cfg.n_vocab, cfg.n_embd, cfg.n_layer, cfg.n_ff),
        (49152, 576, 30, 1536)
    );
    assert_eq!(
        (cfg.n_head, cfg.n_head_kv, cfg.head_dim, cfg.rope_dim),
        (9, 3, 64, 64)
    );
    assert_eq!(cfg.n_ctx_train, 8192);
    assert_eq!(cfg.rope_theta, 100_000.0);
    assert_eq!(cfg.rms_eps, 1e-5);
    assert_eq!(cfg.rope_style, RopeStyle::Normal);
    assert!(cfg.tied_embeddings && !cfg.qkv_bias);
}

#[test]
fn qwen2_5_coder_opens_and_validates() {
    let f = GgufFile::open(&model_path(QWEN)).expect("open qwen2.5");
    assert_eq!(
        (f.version(), f.alignment(), f.data_offset()),
        (3, 32, 5_947_776)
    );
    assert_eq!((f.metadata().len(), f.tensors().len()), (26, 291));
    assert_eq!(
        f.get_str("tokenizer.ggml.pre").ok().flatten(),
        Some("qwen2")
    );
    let tokens = f
        .get_str_array("tokenizer.ggml.tokens")
        .ok()
        .flatten()
        .expect("tokens");
    assert_eq!(tokens.last().map(String::as_str), Some("[PAD151935]"));
    check_tensor(
        &f,
        (
            "output_norm.weight",
            [896, 0],
            GgmlType::F32,
            485_448_704,
            "f8fa0ac93ef31395f0a899e6f56c3c0f8feb6eb6a62f1eb1991c4c4c1cda32d7",
        ),
    );
    check_tensor(
        &f,
        (
            "blk.0.attn_q.weight",
            [896, 896],
            GgmlType::Q5_0,
            248_445_184,
            "660ff72238d1dd6eff843b05f520cf782f59b4c6ce40767089592a9e56a6db55",
        ),
    );
    assert_eq!(
        f.tensor("output.weight").map(|t| t.ty),
        Some(GgmlType::Q8_0)
    );
    assert_eq!(
        f.tensor("blk.0.ffn_down.weight").map(|t| t.ty),
        Some(GgmlType::Q6_K)
    );

    let cfg = model_config(&f).expect("qwen2.5 validates");
    assert_eq!(cfg.arch, Arch::Qwen2);
    assert_eq!(
        (cfg.n_vocab, cfg.n_embd, cfg.n_layer, cfg.n_ff),
        (151_936, 896, 24, 4864)
    );
    assert_eq!(
        (cfg.n_head, cfg.n_head_kv, cfg.head_dim, cfg.rope_dim),
        (14, 2, 64, 64)
    );
    assert_eq!(cfg.n_ctx_train, 32768);
    assert_eq!(cfg.rope_theta, 1_000_000.0);
    assert_eq!(cfg.rms_eps, 1e-6);
    assert_eq!(cfg.rope_style, RopeStyle::Neox);
    assert!(!cfg.tied_embeddings && cfg.qkv_bias);
}

/// Copying every key and tensor through the writer reproduces the file
/// byte for byte (both use 32-byte alignment and file order).
#[test]
fn smollm2_rewrites_identically() {
    let f = GgufFile::open(&model_path(SMOLLM)).expect("open smollm2");
    let mut w = GgufWriter::new();
    for (k, v) in f.metadata() {
        w.add_kv(k, v.clone()).expect("kv");
    }
    for t in f.tensors() {
        w.add_tensor(&t.name, &t.dims, t.ty, f.tensor_data(t).to_vec())
            .expect("tensor");
    }
    let out = w.to_bytes().expect("write");
    assert_eq!(out.len(), f.bytes().len());
    assert!(
        out == f.bytes(),
        "rewritten smollm2 differs from the original"
    );
}

/// Releasing a tensor's mapped pages (after a caller repacked it) leaves
/// its data readable and unchanged: the pages fault back in from the file.
#[test]
fn released_tensor_pages_read_back_unchanged() {
    let f = GgufFile::open(&model_path(QWEN)).unwrap();
    let before: Vec<String> = f
        .tensors()
        .iter()
        .map(|t| sha256_hex(f.tensor_data(t)))
        .collect();
    for t in f.tensors() {
        f.release_tensor_pages(t);
    }
    for (t, want) in f.tensors().iter().zip(&before) {
        assert_eq!(&sha256_hex(f.tensor_data(t)), want, "{}", t.name);
    }
}

/// Gemma 3 270M: the hyperparameters llama.cpp derives from the file
/// (window 512, period 6 by default: layers 5, 11, 17 global; local RoPE
/// base 10000 by default; query scale 1/√256; no soft-cap; tied output).
#[test]
fn gemma3_270m_validates_with_llama_cpp_hparams() {
    use fak_gguf::model::{LayerAttn, SlidingWindow};
    let f = GgufFile::open(&model_path("gemma-3-270m-q4_k_m.gguf")).expect("open gemma3");
    let cfg = model_config(&f).expect("gemma3 validates");
    assert_eq!(cfg.arch, Arch::Gemma3);
    assert_eq!(
        (cfg.n_vocab, cfg.n_embd, cfg.n_layer, cfg.n_ff),
        (262_144, 640, 18, 2048)
    );
    assert_eq!(
        (cfg.n_head, cfg.n_head_kv, cfg.head_dim, cfg.rope_dim),
        (4, 1, 256, 256)
    );
    assert_eq!(cfg.rope_style, RopeStyle::Neox);
    assert!(cfg.tied_embeddings && !cfg.qkv_bias);
    let g = cfg.gemma3.as_ref().expect("gemma3 params");
    let global = [5, 11, 17];
    let layers: Vec<LayerAttn> = (0..18)
        .map(|l| {
            if global.contains(&l) {
                LayerAttn::Global
            } else {
                LayerAttn::Local
            }
        })
        .collect();
    assert_eq!(
        g.sliding,
        Some(SlidingWindow {
            window: 512,
            layers
        })
    );
    assert_eq!(g.attn_scale, 1.0 / 16.0);
    assert_eq!(g.final_logit_softcap, None);
    assert_eq!(cfg.rope_theta_at(0), 10_000.0);
    assert_eq!(cfg.rope_theta_at(5), 1_000_000.0);
    assert_eq!((cfg.window(4), cfg.window(5)), (Some(512), None));
    assert_eq!(cfg.sliding_window(), Some(512));
}
