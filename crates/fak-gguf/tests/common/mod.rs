//! Test helpers: a raw GGUF byte builder (for files the writer refuses to
//! produce) and a tiny but complete llama / qwen2 / qwen3 model built with the writer.

#![allow(dead_code)]

use fak_gguf::{GgmlType, GgufError, GgufWriter, MetaArray, MetaValue};

/// Metadata value type ids, as in the GGUF specification.
pub mod vt {
    pub const U8: u32 = 0;
    pub const I8: u32 = 1;
    pub const U32: u32 = 4;
    pub const I32: u32 = 5;
    pub const F32: u32 = 6;
    pub const BOOL: u32 = 7;
    pub const STR: u32 = 8;
    pub const ARRAY: u32 = 9;
    pub const U64: u32 = 10;
}

/// Appends little-endian GGUF fields to a byte vector, no validation.
#[derive(Clone, Default)]
pub struct Raw(pub Vec<u8>);

impl Raw {
    /// Magic, version and both counts.
    pub fn header(version: u32, n_tensors: u64, n_kv: u64) -> Raw {
        Raw(b"GGUF".to_vec()).u32(version).u64(n_tensors).u64(n_kv)
    }
    pub fn bytes(mut self, b: &[u8]) -> Raw {
        self.0.extend_from_slice(b);
        self
    }
    pub fn u8(self, x: u8) -> Raw {
        self.bytes(&[x])
    }
    pub fn u32(self, x: u32) -> Raw {
        self.bytes(&x.to_le_bytes())
    }
    pub fn i32(self, x: i32) -> Raw {
        self.bytes(&x.to_le_bytes())
    }
    pub fn u64(self, x: u64) -> Raw {
        self.bytes(&x.to_le_bytes())
    }
    pub fn f32(self, x: f32) -> Raw {
        self.bytes(&x.to_le_bytes())
    }
    /// A GGUF string: u64 length then bytes.
    pub fn str(self, s: &str) -> Raw {
        self.u64(s.len() as u64).bytes(s.as_bytes())
    }
    /// A key and a value type id; the value must follow.
    pub fn kv(self, key: &str, type_id: u32) -> Raw {
        self.str(key).u32(type_id)
    }
    pub fn kv_u32(self, key: &str, v: u32) -> Raw {
        self.kv(key, vt::U32).u32(v)
    }
    pub fn kv_str(self, key: &str, v: &str) -> Raw {
        self.kv(key, vt::STR).str(v)
    }
    /// A tensor descriptor with a raw type id.
    pub fn tensor(self, name: &str, dims: &[u64], type_id: u32, offset: u64) -> Raw {
        let mut r = self.str(name).u32(dims.len() as u32);
        for &d in dims {
            r = r.u64(d);
        }
        r.u32(type_id).u64(offset)
    }
    /// Zero bytes up to the next multiple of `align`.
    pub fn pad(self, align: usize) -> Raw {
        let n = (align - self.0.len() % align) % align;
        self.zeros(n)
    }
    pub fn zeros(self, n: usize) -> Raw {
        self.bytes(&vec![0u8; n])
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
}

/// A valid two-tensor file that ends exactly at the last tensor byte:
/// `a` = f32 [4] at 0, `b` = q8_0 [32, 2] at 32.
pub fn small_valid() -> Vec<u8> {
    Raw::header(3, 2, 2)
        .kv_str("general.architecture", "test")
        .kv_u32("general.alignment", 32)
        .tensor("a", &[4], 0, 0)
        .tensor("b", &[32, 2], 8, 32)
        .pad(32)
        .bytes(&[0x11; 16])
        .zeros(16)
        .bytes(&[0x22; 68])
        .0
}

/// Parses `bytes` and returns the error message, panicking if it parsed.
pub fn parse_err(bytes: Vec<u8>) -> String {
    match fak_gguf::GgufFile::from_bytes(bytes) {
        Ok(f) => panic!("expected an error, parsed {f:?}"),
        Err(e) => e.to_string(),
    }
}

/// Asserts that `msg` contains every needle.
#[track_caller]
pub fn assert_mentions(msg: &str, needles: &[&str]) {
    for n in needles {
        assert!(
            msg.contains(n),
            "error message {msg:?} does not mention {n:?}"
        );
    }
}

/// Shape of a tiny test model.
#[derive(Clone, Debug)]
pub struct Tiny {
    pub arch: &'static str,
    pub n_layer: u64,
    pub n_embd: u64,
    pub n_head: u64,
    pub n_head_kv: u64,
    pub n_ff: u64,
    pub n_vocab: u64,
    pub tied: bool,
}

impl Tiny {
    pub fn llama() -> Tiny {
        Tiny {
            arch: "llama",
            n_layer: 2,
            n_embd: 8,
            n_head: 2,
            n_head_kv: 1,
            n_ff: 16,
            n_vocab: 12,
            tied: true,
        }
    }

    pub fn qwen3() -> Tiny {
        Tiny {
            arch: "qwen3",
            ..Tiny::llama()
        }
    }

    pub fn qwen2() -> Tiny {
        Tiny {
            arch: "qwen2",
            tied: false,
            ..Tiny::llama()
        }
    }

    /// Deterministic f32 payload for a tensor of `n` elements.
    fn f32_data(seed: u64, n: u64) -> Vec<u8> {
        (0..n)
            .flat_map(|i| (((seed * 31 + i) % 17) as f32 / 16.0 - 0.5).to_le_bytes())
            .collect()
    }

    fn add(w: &mut GgufWriter, name: &str, dims: &[u64]) -> Result<(), GgufError> {
        let n: u64 = dims.iter().product();
        let seed = name.len() as u64;
        w.add_tensor(name, dims, GgmlType::F32, Tiny::f32_data(seed, n))
    }

    /// A writer holding the full model: hyperparameters, a tokenizer, and
    /// every tensor with the shape the hyperparameters imply.
    pub fn writer(&self) -> GgufWriter {
        self.try_writer().expect("tiny model is valid")
    }

    fn try_writer(&self) -> Result<GgufWriter, GgufError> {
        let mut w = GgufWriter::new();
        let a = self.arch;
        w.add_kv("general.architecture", MetaValue::from(a))?;
        w.add_kv(
            &format!("{a}.block_count"),
            MetaValue::U32(self.n_layer as u32),
        )?;
        w.add_kv(&format!("{a}.context_length"), MetaValue::U32(64))?;
        w.add_kv(
            &format!("{a}.embedding_length"),
            MetaValue::U32(self.n_embd as u32),
        )?;
        w.add_kv(
            &format!("{a}.feed_forward_length"),
            MetaValue::U32(self.n_ff as u32),
        )?;
        w.add_kv(
            &format!("{a}.attention.head_count"),
            MetaValue::U32(self.n_head as u32),
        )?;
        w.add_kv(
            &format!("{a}.attention.head_count_kv"),
            MetaValue::U32(self.n_head_kv as u32),
        )?;
        w.add_kv(&format!("{a}.rope.freq_base"), MetaValue::F32(10000.0))?;
        w.add_kv(
            &format!("{a}.attention.layer_norm_rms_epsilon"),
            MetaValue::F32(1e-5),
        )?;
        w.add_kv("tokenizer.ggml.model", MetaValue::from("gpt2"))?;
        let tokens: Vec<String> = (0..self.n_vocab).map(|i| format!("t{i}")).collect();
        w.add_kv(
            "tokenizer.ggml.tokens",
            MetaValue::Array(MetaArray::Str(tokens)),
        )?;
        let types = vec![1i32; self.n_vocab as usize];
        w.add_kv(
            "tokenizer.ggml.token_type",
            MetaValue::Array(MetaArray::I32(types)),
        )?;
        w.add_kv(
            "tokenizer.ggml.merges",
            MetaValue::Array(MetaArray::Str(vec!["t 1".into()])),
        )?;
        w.add_kv("tokenizer.ggml.bos_token_id", MetaValue::U32(1))?;
        w.add_kv("tokenizer.ggml.eos_token_id", MetaValue::U32(2))?;

        let (e, v, f) = (self.n_embd, self.n_vocab, self.n_ff);
        let hd = self.n_embd / self.n_head;
        let (q, kv) = (self.n_head * hd, self.n_head_kv * hd);
        Tiny::add(&mut w, "token_embd.weight", &[e, v])?;
        Tiny::add(&mut w, "output_norm.weight", &[e])?;
        if !self.tied {
            Tiny::add(&mut w, "output.weight", &[e, v])?;
        }
        for i in 0..self.n_layer {
            let n = |s: &str| format!("blk.{i}.{s}");
            Tiny::add(&mut w, &n("attn_norm.weight"), &[e])?;
            Tiny::add(&mut w, &n("attn_q.weight"), &[e, q])?;
            Tiny::add(&mut w, &n("attn_k.weight"), &[e, kv])?;
            Tiny::add(&mut w, &n("attn_v.weight"), &[e, kv])?;
            if self.arch == "qwen2" {
                Tiny::add(&mut w, &n("attn_q.bias"), &[q])?;
                Tiny::add(&mut w, &n("attn_k.bias"), &[kv])?;
                Tiny::add(&mut w, &n("attn_v.bias"), &[kv])?;
            }
            if self.arch == "qwen3" {
                Tiny::add(&mut w, &n("attn_q_norm.weight"), &[hd])?;
                Tiny::add(&mut w, &n("attn_k_norm.weight"), &[hd])?;
            }
            Tiny::add(&mut w, &n("attn_output.weight"), &[q, e])?;
            Tiny::add(&mut w, &n("ffn_norm.weight"), &[e])?;
            Tiny::add(&mut w, &n("ffn_gate.weight"), &[e, f])?;
            Tiny::add(&mut w, &n("ffn_up.weight"), &[e, f])?;
            Tiny::add(&mut w, &n("ffn_down.weight"), &[f, e])?;
        }
        Ok(w)
    }

    /// Replaces (or adds) tensor `name` with an f32 tensor of shape `dims`.
    pub fn replace_tensor(w: &mut GgufWriter, name: &str, dims: &[u64]) {
        w.remove_tensor(name);
        Tiny::add(w, name, dims).expect("valid replacement tensor");
    }
}

/// Serializes `w` and runs the reader and the model validator on it.
pub fn validate(w: &GgufWriter) -> Result<fak_gguf::ModelConfig, GgufError> {
    let bytes = w.to_bytes()?;
    let f = fak_gguf::GgufFile::from_bytes(bytes)?;
    fak_gguf::model_config(&f)
}
