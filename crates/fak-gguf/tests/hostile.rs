//! Hostile files, built byte by byte: each must be rejected with an error
//! that names the field at fault, and none may panic.

mod common;

use common::{assert_mentions, parse_err, small_valid, vt, Raw};
use fak_gguf::{GgufError, GgufFile};

#[test]
fn small_valid_file_parses() {
    let f = GgufFile::from_bytes(small_valid()).expect("valid file");
    assert_eq!(f.version(), 3);
    assert_eq!(f.alignment(), 32);
    assert_eq!(f.tensors().len(), 2);
    let b = f.tensor("b").expect("tensor b");
    assert_eq!(b.n_bytes, 68);
    assert_eq!(f.tensor_data(b), &[0x22; 68][..]);
    assert_eq!(f.tensor_data_by_name("a"), Some(&[0x11; 16][..]));
}

#[test]
fn bad_magic() {
    let mut bytes = small_valid();
    bytes[..4].copy_from_slice(b"GGML");
    assert_mentions(&parse_err(bytes), &["magic"]);
    assert_mentions(&parse_err(b"PK\x03\x04".to_vec()), &["magic"]);
}

#[test]
fn bad_version() {
    for v in [0u32, 1, 4, 99] {
        let msg = parse_err(Raw::header(v, 0, 0).0);
        assert_mentions(&msg, &["version", &format!("= {v} ")]);
    }
    let msg = parse_err(Raw::header(3u32.swap_bytes(), 0, 0).0);
    assert_mentions(&msg, &["version", "big-endian"]);
}

#[test]
fn huge_tensor_count_is_rejected_before_allocating() {
    let msg = parse_err(Raw::header(3, u64::MAX, 0).0);
    assert_mentions(&msg, &["n_tensors", &u64::MAX.to_string()]);
    // Plausible-looking but still impossible for the bytes present.
    let msg = parse_err(Raw::header(3, 1000, 0).zeros(64).0);
    assert_mentions(&msg, &["'n_tensors' = 1000"]);
}

#[test]
fn huge_kv_count_is_rejected_before_allocating() {
    let msg = parse_err(Raw::header(3, 0, u64::MAX).0);
    assert_mentions(&msg, &["n_kv", &u64::MAX.to_string()]);
    let msg = parse_err(Raw::header(3, 0, 1 << 40).kv_u32("a", 1).0);
    assert_mentions(&msg, &["n_kv"]);
}

#[test]
fn string_length_past_eof() {
    // Key length.
    let msg = parse_err(Raw::header(3, 0, 1).u64(1 << 60).bytes(b"abc").zeros(16).0);
    assert_mentions(&msg, &["metadata key #0", "truncated"]);
    // Value length.
    let msg = parse_err(
        Raw::header(3, 0, 1)
            .kv("general.name", vt::STR)
            .u64(500)
            .bytes(b"short")
            .0,
    );
    assert_mentions(&msg, &["key 'general.name'", "500"]);
    // Tensor name length.
    let msg = parse_err(Raw::header(3, 1, 0).u64(u64::MAX).zeros(40).0);
    assert_mentions(&msg, &["tensor #0 name"]);
}

#[test]
fn array_length_past_eof() {
    let msg = parse_err(
        Raw::header(3, 0, 1)
            .kv("tokenizer.ggml.scores", vt::ARRAY)
            .u32(vt::F32)
            .u64(u64::MAX / 2)
            .f32(1.0)
            .0,
    );
    assert_mentions(&msg, &["key 'tokenizer.ggml.scores'", "array length"]);
    // Strings need at least their 8-byte length each.
    let msg = parse_err(
        Raw::header(3, 0, 1)
            .kv("tokenizer.ggml.tokens", vt::ARRAY)
            .u32(vt::STR)
            .u64(10)
            .zeros(40)
            .0,
    );
    assert_mentions(&msg, &["key 'tokenizer.ggml.tokens'", "array length = 10"]);
}

/// `levels` arrays nested inside each other, innermost holding one u8.
fn nested(levels: usize) -> Vec<u8> {
    let mut r = Raw::header(3, 0, 1).kv("deep", vt::ARRAY);
    for _ in 1..levels {
        r = r.u32(vt::ARRAY).u64(1);
    }
    r.u32(vt::U8).u64(1).u8(7).0
}

#[test]
fn deeply_nested_arrays() {
    let f = GgufFile::from_bytes(nested(fak_gguf::MAX_ARRAY_DEPTH)).expect("allowed depth");
    let fak_gguf::MetaValue::Array(a) = f.get("deep").expect("key") else {
        panic!("not an array")
    };
    assert_eq!(a.depth(), fak_gguf::MAX_ARRAY_DEPTH);
    let msg = parse_err(nested(fak_gguf::MAX_ARRAY_DEPTH + 1));
    assert_mentions(&msg, &["key 'deep'", "nested"]);
    // Far deeper than the bound: no stack overflow, same error.
    assert_mentions(&parse_err(nested(100_000)), &["key 'deep'", "nested"]);
}

#[test]
fn wrong_array_element_type_via_typed_getter() {
    let bytes = Raw::header(3, 0, 2)
        .kv("tokenizer.ggml.tokens", vt::ARRAY)
        .u32(vt::I32)
        .u64(2)
        .i32(5)
        .i32(6)
        .kv("tokenizer.ggml.scores", vt::ARRAY)
        .u32(vt::U32)
        .u64(1)
        .u32(1)
        .0;
    let f = GgufFile::from_bytes(bytes).expect("structurally valid");
    let e = f
        .get_str_array("tokenizer.ggml.tokens")
        .expect_err("wrong element type");
    assert_mentions(
        &e.to_string(),
        &["tokenizer.ggml.tokens", "array of i32", "array of string"],
    );
    assert_eq!(
        f.get_i32_array("tokenizer.ggml.tokens").ok().flatten(),
        Some(&[5, 6][..])
    );
    let e = f
        .get_f32_array("tokenizer.ggml.scores")
        .expect_err("u32 is not f32");
    assert_mentions(&e.to_string(), &["tokenizer.ggml.scores", "array of u32"]);
    let e = f
        .get_i32_array("tokenizer.ggml.scores")
        .expect_err("u32 is not i32");
    assert_mentions(&e.to_string(), &["tokenizer.ggml.scores"]);
    let e = f
        .get_str("tokenizer.ggml.scores")
        .expect_err("array is not a string");
    assert_mentions(
        &e.to_string(),
        &["tokenizer.ggml.scores", "expected string"],
    );
    assert!(matches!(f.get_str_array("absent"), Ok(None)));
}

#[test]
fn scalar_getters_check_types_and_signs() {
    let bytes = Raw::header(3, 0, 4)
        .kv_str("s", "x")
        .kv("neg", vt::I32)
        .i32(-3)
        .kv("pos", vt::I8)
        .u8(5)
        .kv("flag", vt::BOOL)
        .u8(1)
        .0;
    let f = GgufFile::from_bytes(bytes).expect("valid");
    assert_mentions(
        &f.get_uint("neg").expect_err("negative").to_string(),
        &["key 'neg'", "-3"],
    );
    assert_mentions(
        &f.get_uint("s").expect_err("string").to_string(),
        &["key 's'", "found string"],
    );
    assert_mentions(
        &f.get_f32("pos").expect_err("int").to_string(),
        &["key 'pos'", "found i8"],
    );
    assert_mentions(
        &f.get_bool("pos").expect_err("int").to_string(),
        &["key 'pos'"],
    );
    assert_eq!(f.get_uint("pos").ok().flatten(), Some(5));
    assert_eq!(f.get_bool("flag").ok().flatten(), Some(true));
}

#[test]
fn invalid_bool_and_utf8() {
    let msg = parse_err(Raw::header(3, 0, 1).kv("b", vt::BOOL).u8(2).0);
    assert_mentions(&msg, &["key 'b'", "bool byte 2"]);
    let msg = parse_err(
        Raw::header(3, 0, 1)
            .kv("k", vt::STR)
            .u64(2)
            .bytes(&[0xc3, 0x28])
            .0,
    );
    assert_mentions(&msg, &["key 'k'", "UTF-8"]);
    let msg = parse_err(
        Raw::header(3, 0, 1)
            .u64(1)
            .bytes(&[0xff])
            .u32(vt::U8)
            .u8(0)
            .0,
    );
    assert_mentions(&msg, &["metadata key #0", "UTF-8"]);
}

#[test]
fn empty_key_and_bad_tensor_names() {
    let msg = parse_err(Raw::header(3, 0, 1).kv_u32("", 1).0);
    assert_mentions(&msg, &["metadata key", "empty"]);
    let long = "x".repeat(64);
    let msg = parse_err(
        Raw::header(3, 1, 0)
            .tensor(&long, &[4], 0, 0)
            .pad(32)
            .zeros(16)
            .0,
    );
    assert_mentions(&msg, &["tensor #0", "63 bytes"]);
    let msg = parse_err(
        Raw::header(3, 1, 0)
            .tensor("", &[4], 0, 0)
            .pad(32)
            .zeros(16)
            .0,
    );
    assert_mentions(&msg, &["tensor #0", "empty"]);
}

#[test]
fn duplicate_key() {
    let msg = parse_err(
        Raw::header(3, 0, 2)
            .kv_u32("llama.block_count", 1)
            .kv_u32("llama.block_count", 2)
            .0,
    );
    assert_mentions(&msg, &["duplicate", "'llama.block_count'"]);
}

#[test]
fn duplicate_tensor() {
    let msg = parse_err(
        Raw::header(3, 2, 0)
            .tensor("w", &[4], 0, 0)
            .tensor("w", &[4], 0, 32)
            .pad(32)
            .zeros(48)
            .0,
    );
    assert_mentions(&msg, &["duplicate tensor", "'w'"]);
}

fn with_alignment_value(type_id: u32, value: &[u8]) -> Vec<u8> {
    Raw::header(3, 1, 1)
        .kv("general.alignment", type_id)
        .bytes(value)
        .tensor("a", &[4], 0, 0)
        .pad(64)
        .zeros(16)
        .0
}

#[test]
fn bad_alignment() {
    for a in [0u32, 13, 1 << 31, 3 << 20] {
        let msg = parse_err(with_alignment_value(vt::U32, &a.to_le_bytes()));
        assert_mentions(&msg, &["general.alignment", &a.to_string()]);
    }
    let msg = parse_err(with_alignment_value(vt::STR, &Raw::default().str("32").0));
    assert_mentions(&msg, &["general.alignment", "u32", "string"]);
    let msg = parse_err(with_alignment_value(vt::U64, &32u64.to_le_bytes()));
    assert_mentions(&msg, &["general.alignment", "u64"]);
    // The accepted edge cases.
    assert!(GgufFile::from_bytes(with_alignment_value(vt::U32, &64u32.to_le_bytes())).is_ok());
    assert!(GgufFile::from_bytes(with_alignment_value(vt::U32, &1u32.to_le_bytes())).is_ok());
}

#[test]
fn bad_dim_counts() {
    for n_dims in [0u64, 5, 1 << 31] {
        let msg = parse_err(
            Raw::header(3, 1, 0)
                .str("t")
                .u32(n_dims as u32)
                .zeros(8 * 6)
                .0,
        );
        assert_mentions(&msg, &["tensor 't'", &format!("n_dims = {n_dims}")]);
    }
}

#[test]
fn zero_dimension() {
    let msg = parse_err(
        Raw::header(3, 1, 0)
            .tensor("z", &[4, 0], 0, 0)
            .pad(32)
            .zeros(16)
            .0,
    );
    assert_mentions(&msg, &["tensor 'z'", "dimension 1", "zero"]);
}

#[test]
fn element_count_overflow() {
    for dims in [
        &[1u64 << 32, 1 << 32][..],
        &[u64::MAX],
        &[1 << 20, 1 << 20, 1 << 20, 1 << 20],
    ] {
        let msg = parse_err(
            Raw::header(3, 1, 0)
                .tensor("big", dims, 0, 0)
                .pad(32)
                .zeros(64)
                .0,
        );
        assert_mentions(&msg, &["tensor 'big'", "overflows"]);
    }
    // Element count fits but the f32 byte count does not.
    let msg = parse_err(
        Raw::header(3, 1, 0)
            .tensor("big", &[1 << 62], 0, 0)
            .pad(32)
            .zeros(64)
            .0,
    );
    assert_mentions(&msg, &["tensor 'big'", "overflows"]);
}

#[test]
fn unknown_tensor_type() {
    // 4, 5, 31 and 36: ids ggml retired; 42 is past ggml's last type.
    for id in [4u32, 5, 31, 36, 42, 99, u32::MAX] {
        let msg = parse_err(
            Raw::header(3, 1, 0)
                .tensor("t", &[32], id, 0)
                .pad(32)
                .zeros(256)
                .0,
        );
        assert_mentions(&msg, &["tensor 't'", &format!("type id {id}")]);
    }
}

#[test]
fn row_not_a_block_multiple() {
    // q4_k (id 12) needs rows of 256.
    let msg = parse_err(
        Raw::header(3, 1, 0)
            .tensor("q", &[100, 2], 12, 0)
            .pad(32)
            .zeros(512)
            .0,
    );
    assert_mentions(&msg, &["tensor 'q'", "row length 100", "256"]);
}

#[test]
fn unknown_value_type() {
    for id in [13u32, 99, u32::MAX] {
        let msg = parse_err(Raw::header(3, 0, 1).kv("weird", id).zeros(16).0);
        assert_mentions(&msg, &["key 'weird'", &format!("value type {id}")]);
    }
    let msg = parse_err(Raw::header(3, 0, 1).kv("arr", vt::ARRAY).u32(77).u64(0).0);
    assert_mentions(&msg, &["key 'arr'", "value type 77"]);
}

#[test]
fn misaligned_offset() {
    let msg = parse_err(
        Raw::header(3, 1, 0)
            .tensor("m", &[4], 0, 8)
            .pad(32)
            .zeros(64)
            .0,
    );
    assert_mentions(&msg, &["tensor 'm'", "offset 8", "aligned to 32"]);
}

#[test]
fn out_of_file_offset() {
    for offset in [64u64, 1 << 40, u64::MAX - 31] {
        let msg = parse_err(
            Raw::header(3, 1, 0)
                .tensor("o", &[4], 0, offset)
                .pad(32)
                .zeros(64)
                .0,
        );
        assert_mentions(&msg, &["tensor 'o'", "outside"]);
    }
}

#[test]
fn overlapping_tensors() {
    let msg = parse_err(
        Raw::header(3, 2, 0)
            .tensor("first", &[16], 0, 0)
            .tensor("second", &[8], 0, 32)
            .pad(32)
            .zeros(64)
            .0,
    );
    assert_mentions(&msg, &["'first'", "'second'", "overlap"]);
    // Identical placement, listed in reverse order.
    let msg = parse_err(
        Raw::header(3, 2, 0)
            .tensor("x", &[4], 0, 32)
            .tensor("y", &[4], 0, 32)
            .pad(32)
            .zeros(64)
            .0,
    );
    assert_mentions(&msg, &["overlap"]);
}

#[test]
fn data_section_past_eof() {
    // Tensor infos end mid-block and the padding is missing.
    let bytes = Raw::header(3, 1, 0).tensor("t", &[1], 0, 0).0;
    assert_mentions(&parse_err(bytes), &["data section"]);
}

#[test]
fn every_truncation_is_an_error() {
    let full = small_valid();
    assert!(GgufFile::from_bytes(full.clone()).is_ok());
    for len in 0..full.len() {
        let r = GgufFile::from_bytes(full[..len].to_vec());
        assert!(r.is_err(), "prefix of {len} bytes parsed");
    }
}

#[test]
fn open_reports_the_path() {
    let missing = std::path::Path::new("/nonexistent/fak/model.gguf");
    let e = GgufFile::open(missing).expect_err("missing file");
    assert!(matches!(e, GgufError::Io { .. }));
    assert_mentions(&e.to_string(), &["/nonexistent/fak/model.gguf"]);
}

#[test]
fn foreign_tensor_info_yields_empty_data() {
    let f = GgufFile::from_bytes(small_valid()).expect("valid");
    let mut t = f.tensor("b").expect("b").clone();
    t.offset = u64::MAX - 4;
    assert!(f.tensor_data(&t).is_empty());
}
