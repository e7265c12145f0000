//! Writer → reader round trips, including v2 files and random metadata.

mod common;

use common::assert_mentions;
use fak_gguf::{GgmlType, GgufError, GgufFile, GgufWriter, MetaArray, MetaValue};
use proptest::prelude::*;

fn sample_writer() -> GgufWriter {
    let mut w = GgufWriter::new();
    w.add_kv("general.name", MetaValue::from("round trip"))
        .expect("kv");
    w.add_kv("a.u8", MetaValue::U8(200)).expect("kv");
    w.add_kv("a.i64", MetaValue::I64(-5)).expect("kv");
    w.add_kv("a.f64", MetaValue::F64(0.25)).expect("kv");
    w.add_kv("a.flag", MetaValue::Bool(true)).expect("kv");
    let nested = MetaArray::Array(vec![
        MetaArray::U16(vec![1, 2]),
        MetaArray::Str(vec!["x".into()]),
    ]);
    w.add_kv("a.nested", MetaValue::Array(nested)).expect("kv");
    w.add_tensor("v", &[3], GgmlType::F32, vec![1; 12])
        .expect("tensor");
    w.add_tensor("m", &[32, 2, 1], GgmlType::Q8_0, (0..68).collect())
        .expect("tensor");
    w.add_tensor("k", &[256], GgmlType::Q4_K, vec![9; 144])
        .expect("tensor");
    w
}

#[test]
fn round_trip_preserves_everything() {
    let w = sample_writer();
    let f = GgufFile::from_bytes(w.to_bytes().expect("write")).expect("read");
    assert_eq!(f.version(), 3);
    assert_eq!(f.alignment(), 32);
    assert_eq!(f.data_offset() % 32, 0);
    assert_eq!(f.metadata().len(), 6);
    assert_eq!(f.get_str("general.name").ok().flatten(), Some("round trip"));
    assert_eq!(f.get_uint("a.u8").ok().flatten(), Some(200));
    assert_eq!(f.get("a.i64"), Some(&MetaValue::I64(-5)));
    assert_eq!(f.get_f32("a.f64").ok().flatten(), Some(0.25));
    assert_eq!(f.get_bool("a.flag").ok().flatten(), Some(true));
    let names: Vec<&str> = f.tensors().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["v", "m", "k"]);
    let m = f.tensor("m").expect("m");
    assert_eq!(
        (m.row_len(), m.n_rows(), m.n_elements(), m.n_bytes),
        (32, 2, 64, 68)
    );
    assert_eq!(f.tensor_data(m), (0..68).collect::<Vec<u8>>().as_slice());
    assert_eq!(f.tensor_data_by_name("k"), Some(&[9u8; 144][..]));
}

#[test]
fn version_2_files_read_back() {
    let mut w = sample_writer();
    w.set_version(2).expect("v2");
    let bytes = w.to_bytes().expect("write");
    assert_eq!(&bytes[4..8], &2u32.to_le_bytes());
    let f = GgufFile::from_bytes(bytes).expect("read v2");
    assert_eq!(f.version(), 2);
    assert_eq!(f.tensors().len(), 3);
    assert!(matches!(
        w.set_version(1),
        Err(GgufError::UnsupportedWriteVersion { version: 1 })
    ));
}

#[test]
fn custom_alignment_is_written_and_honoured() {
    let mut w = sample_writer();
    w.set_alignment(4096).expect("alignment");
    let f = GgufFile::from_bytes(w.to_bytes().expect("write")).expect("read");
    assert_eq!(f.alignment(), 4096);
    assert_eq!(f.get("general.alignment"), Some(&MetaValue::U32(4096)));
    for t in f.tensors() {
        assert_eq!((f.data_offset() + t.offset) % 4096, 0, "{}", t.name);
    }
    // Back to the default: the key stays (it was set) but holds 32.
    w.set_alignment(32).expect("default");
    assert_eq!(w.get("general.alignment"), Some(&MetaValue::U32(32)));
    // On a fresh writer the default adds no key.
    let mut fresh = GgufWriter::new();
    fresh.set_alignment(32).expect("default");
    assert_eq!(fresh.get("general.alignment"), None);
    assert_eq!(fresh.alignment(), 32);
}

#[test]
fn writer_refuses_bad_input() {
    let mut w = sample_writer();
    let e = w.add_kv("a.u8", MetaValue::U8(1)).expect_err("duplicate");
    assert_mentions(&e.to_string(), &["duplicate", "a.u8"]);
    let e = w
        .add_tensor("v", &[3], GgmlType::F32, vec![0; 12])
        .expect_err("dup tensor");
    assert_mentions(&e.to_string(), &["duplicate tensor", "'v'"]);
    let e = w
        .add_tensor("w", &[3, 2], GgmlType::F32, vec![0; 12])
        .expect_err("size");
    assert_mentions(&e.to_string(), &["tensor 'w'", "12 bytes", "needs 24"]);
    let e = w
        .add_tensor("q", &[48], GgmlType::Q8_0, vec![0; 51])
        .expect_err("block");
    assert_mentions(&e.to_string(), &["tensor 'q'", "row length 48"]);
    let e = w
        .add_tensor("z", &[0], GgmlType::F32, vec![])
        .expect_err("zero");
    assert_mentions(&e.to_string(), &["tensor 'z'", "zero"]);
    let e = w
        .add_tensor("d", &[1, 1, 1, 1, 1], GgmlType::F32, vec![0; 4])
        .expect_err("dims");
    assert_mentions(&e.to_string(), &["tensor 'd'", "n_dims = 5"]);
    for a in [0u64, 13, 1 << 21, 1 << 40] {
        let e = w.set_alignment(a).expect_err("alignment");
        assert_mentions(&e.to_string(), &["general.alignment", &a.to_string()]);
    }
    let e = w.add_kv("", MetaValue::U8(1)).expect_err("empty key");
    assert_mentions(&e.to_string(), &["empty"]);
    let mut deep = MetaArray::U8(vec![1]);
    for _ in 0..fak_gguf::MAX_ARRAY_DEPTH {
        deep = MetaArray::Array(vec![deep]);
    }
    let e = w
        .add_kv("deep", MetaValue::Array(deep))
        .expect_err("too deep");
    assert_mentions(&e.to_string(), &["key 'deep'", "nested"]);
    // set_kv defers validation to write time.
    w.set_kv("general.alignment", MetaValue::from("32"));
    let e = w.to_bytes().expect_err("bad alignment type");
    assert_mentions(&e.to_string(), &["general.alignment", "string"]);
}

#[test]
fn set_kv_replaces_in_place() {
    let mut w = GgufWriter::new();
    w.add_kv("first", MetaValue::U8(1)).expect("kv");
    w.add_kv("second", MetaValue::U8(2)).expect("kv");
    w.set_kv("first", MetaValue::from("replaced"));
    let f = GgufFile::from_bytes(w.to_bytes().expect("write")).expect("read");
    let keys: Vec<&str> = f.metadata().iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["first", "second"]);
    assert_eq!(f.get_str("first").ok().flatten(), Some("replaced"));
}

#[test]
fn write_file_is_atomic_and_readable() {
    let dir = std::env::temp_dir().join(format!("fak-gguf-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("out.gguf");
    sample_writer().write_file(&path).expect("write file");
    let f = GgufFile::open(&path).expect("open written file");
    assert_eq!(f.tensors().len(), 3);
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .expect("list")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name())
        .filter(|n| n != "out.gguf")
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
    let e = sample_writer()
        .write_file(&dir.join("missing-dir").join("x.gguf"))
        .expect_err("no such directory");
    assert_mentions(&e.to_string(), &["missing-dir"]);
    std::fs::remove_dir_all(&dir).expect("cleanup");
}

#[test]
fn empty_file_round_trips() {
    let f = GgufFile::from_bytes(GgufWriter::new().to_bytes().expect("write")).expect("read");
    assert!(f.metadata().is_empty() && f.tensors().is_empty());
}

fn finite_f32() -> impl Strategy<Value = f32> {
    -1.0e6f32..1.0e6f32
}

fn leaf_array() -> impl Strategy<Value = MetaArray> {
    let n = 0..6usize;
    prop_oneof![
        prop::collection::vec(any::<u8>(), n.clone()).prop_map(MetaArray::U8),
        prop::collection::vec(any::<i16>(), n.clone()).prop_map(MetaArray::I16),
        prop::collection::vec(any::<u32>(), n.clone()).prop_map(MetaArray::U32),
        prop::collection::vec(any::<i32>(), n.clone()).prop_map(MetaArray::I32),
        prop::collection::vec(finite_f32(), n.clone()).prop_map(MetaArray::F32),
        prop::collection::vec(any::<bool>(), n.clone()).prop_map(MetaArray::Bool),
        prop::collection::vec("[a-z<>|\u{e9}\u{4e2d} ]{0,6}", n.clone()).prop_map(MetaArray::Str),
        prop::collection::vec(any::<i64>(), n.clone()).prop_map(MetaArray::I64),
        prop::collection::vec(-1.0e12f64..1.0e12, n).prop_map(MetaArray::F64),
    ]
}

fn meta_value() -> impl Strategy<Value = MetaValue> {
    let array = leaf_array().prop_recursive(3, 24, 4, |inner| {
        prop::collection::vec(inner, 0..4).prop_map(MetaArray::Array)
    });
    prop_oneof![
        any::<u8>().prop_map(MetaValue::U8),
        any::<i8>().prop_map(MetaValue::I8),
        any::<u16>().prop_map(MetaValue::U16),
        any::<i16>().prop_map(MetaValue::I16),
        any::<u32>().prop_map(MetaValue::U32),
        any::<i32>().prop_map(MetaValue::I32),
        finite_f32().prop_map(MetaValue::F32),
        any::<bool>().prop_map(MetaValue::Bool),
        "[ -~]{0,12}".prop_map(MetaValue::Str),
        any::<u64>().prop_map(MetaValue::U64),
        any::<i64>().prop_map(MetaValue::I64),
        (-1.0e12f64..1.0e12).prop_map(MetaValue::F64),
        array.prop_map(MetaValue::Array),
    ]
}

/// (type, row length in blocks, rows)
fn tensor_spec() -> impl Strategy<Value = (GgmlType, u64, Vec<u64>)> {
    let ty = prop::sample::select(vec![
        GgmlType::F32,
        GgmlType::F16,
        GgmlType::Q4_0,
        GgmlType::Q5_1,
        GgmlType::Q8_0,
        GgmlType::Q4_K,
        GgmlType::Q6_K,
        GgmlType::I8,
    ]);
    (ty, 1..4u64, prop::collection::vec(1..4u64, 0..4))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Whatever the writer accepts, the reader returns unchanged.
    #[test]
    fn random_files_round_trip(
        kvs in prop::collection::btree_map("[a-z]{1,6}(\\.[a-z_]{1,8}){0,2}", meta_value(), 0..8),
        specs in prop::collection::vec(tensor_spec(), 0..5),
        align_log2 in 0u32..13,
        version in 2u32..4,
    ) {
        let mut w = GgufWriter::new();
        w.set_version(version).expect("version");
        for (k, v) in &kvs {
            // A random key could collide with the alignment key only by
            // spelling it; keep the generated alignment authoritative.
            prop_assume!(k != "general.alignment");
            w.add_kv(k, v.clone()).expect("valid kv");
        }
        w.set_alignment(1 << align_log2).expect("alignment");
        let mut expected_data = Vec::new();
        for (i, (ty, blocks, rows)) in specs.iter().enumerate() {
            let mut dims = vec![blocks * ty.block_size() as u64];
            dims.extend(rows);
            let n_rows: u64 = rows.iter().product();
            let len = blocks * ty.type_size() as u64 * n_rows;
            let data: Vec<u8> = (0..len).map(|b| (b as u8) ^ (i as u8)).collect();
            let name = format!("t{i}");
            w.add_tensor(&name, &dims, *ty, data.clone()).expect("valid tensor");
            expected_data.push((name, dims, *ty, data));
        }
        let f = GgufFile::from_bytes(w.to_bytes().expect("write")).expect("read back");
        prop_assert_eq!(f.version(), version);
        prop_assert_eq!(f.alignment(), 1u64 << align_log2);
        let mut expected_kv: Vec<(String, MetaValue)> = kvs.into_iter().collect();
        if align_log2 != 5 {
            expected_kv.push(("general.alignment".into(), MetaValue::U32(1 << align_log2)));
        }
        prop_assert_eq!(f.metadata(), expected_kv.as_slice());
        prop_assert_eq!(f.tensors().len(), expected_data.len());
        for (t, (name, dims, ty, data)) in f.tensors().iter().zip(&expected_data) {
            prop_assert_eq!(&t.name, name);
            prop_assert_eq!(&t.dims, dims);
            prop_assert_eq!(t.ty, *ty);
            prop_assert_eq!(f.tensor_data(t), data.as_slice());
        }
        // And re-serializing the parsed file reproduces the bytes.
        let mut again = GgufWriter::new();
        again.set_version(version).expect("version");
        for (k, v) in f.metadata() {
            again.add_kv(k, v.clone()).expect("kv");
        }
        for t in f.tensors() {
            again.add_tensor(&t.name, &t.dims, t.ty, f.tensor_data(t).to_vec()).expect("tensor");
        }
        prop_assert_eq!(again.to_bytes().expect("rewrite"), f.bytes().to_vec());
    }
}
