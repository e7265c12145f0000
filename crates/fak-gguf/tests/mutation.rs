//! Mutation testing: byte flips, field overwrites and truncations of small
//! valid model files. Parsing and `model_config` must return `Ok` or `Err`,
//! never panic, and every accessor of an accepted file must stay in bounds.

mod common;

use common::Tiny;
use fak_gguf::{model_config, GgufFile};
use proptest::prelude::*;

/// Outcome counts, so the test can check that mutations were both accepted
/// and rejected (a harness that rejects everything proves nothing).
#[derive(Default, Debug)]
struct Tally {
    parsed: usize,
    rejected: usize,
    model_ok: usize,
}

/// Runs the reader, the validator and every accessor on `bytes`.
fn exercise(bytes: Vec<u8>, tally: &mut Tally) {
    let len = bytes.len() as u64;
    let f = match GgufFile::from_bytes(bytes) {
        Ok(f) => f,
        Err(e) => {
            assert!(!e.to_string().is_empty());
            tally.rejected += 1;
            return;
        }
    };
    tally.parsed += 1;
    for (k, _) in f.metadata() {
        let _ = f.get_str(k);
        let _ = f.get_uint(k);
        let _ = f.get_f32(k);
        let _ = f.get_bool(k);
        let _ = f.get_str_array(k);
        let _ = f.get_i32_array(k);
        let _ = f.get_f32_array(k);
    }
    for t in f.tensors() {
        let data = f.tensor_data(t);
        assert_eq!(
            data.len() as u64,
            t.n_bytes,
            "tensor '{}' data length",
            t.name
        );
        assert!(f.data_offset() + t.offset + t.n_bytes <= len);
        assert_eq!(t.n_bytes, t.n_rows() * t.row_bytes());
    }
    if model_config(&f).is_ok() {
        tally.model_ok += 1;
    }
}

fn tiny_files() -> Vec<(&'static str, Vec<u8>, u64)> {
    [("llama", Tiny::llama()), ("qwen2", Tiny::qwen2())]
        .into_iter()
        .map(|(name, t)| {
            let bytes = t.writer().to_bytes().expect("tiny model");
            let f = GgufFile::from_bytes(bytes.clone()).expect("tiny model parses");
            model_config(&f).expect("tiny model validates");
            (name, bytes, f.data_offset())
        })
        .collect()
}

#[test]
fn every_header_byte_mutated() {
    for (name, bytes, data_offset) in tiny_files() {
        let mut tally = Tally::default();
        for pos in 0..data_offset as usize {
            let orig = bytes[pos];
            for new in [0x00, 0xff, orig ^ 0x01, orig ^ 0x80, orig.wrapping_add(1)] {
                if new == orig {
                    continue;
                }
                let mut m = bytes.clone();
                m[pos] = new;
                exercise(m, &mut tally);
            }
        }
        assert!(
            tally.rejected > 0 && tally.parsed > 0 && tally.model_ok > 0,
            "{name}: {tally:?}"
        );
    }
}

#[test]
fn every_header_word_overwritten() {
    let words: [&[u8]; 5] = [
        &u64::MAX.to_le_bytes(),
        &(1u64 << 63).to_le_bytes(),
        &(u32::MAX as u64).to_le_bytes(),
        &0x8000_0000u32.to_le_bytes(),
        &1u32.to_le_bytes(),
    ];
    for (_, bytes, data_offset) in tiny_files() {
        let mut tally = Tally::default();
        for pos in 0..data_offset as usize {
            for w in words {
                let mut m = bytes.clone();
                let end = (pos + w.len()).min(m.len());
                m[pos..end].copy_from_slice(&w[..end - pos]);
                exercise(m, &mut tally);
            }
        }
        assert!(tally.rejected > 0);
    }
}

#[test]
fn every_truncation_of_a_model_file() {
    for (name, bytes, data_offset) in tiny_files() {
        let f = GgufFile::from_bytes(bytes.clone()).expect("parses");
        let needed = f
            .tensors()
            .iter()
            .map(|t| data_offset + t.offset + t.n_bytes)
            .max()
            .unwrap_or(data_offset) as usize;
        for len in 0..bytes.len() {
            let r = GgufFile::from_bytes(bytes[..len].to_vec());
            if len < needed {
                assert!(r.is_err(), "{name}: prefix of {len} bytes parsed");
            } else {
                // Only trailing padding was cut.
                assert!(r.is_ok(), "{name}: prefix of {len} bytes rejected");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    /// Random multi-byte corruption plus an optional truncation.
    #[test]
    fn random_corruption_never_panics(
        which in 0usize..2,
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), any::<bool>()), 1..8),
        cut in prop::option::of(any::<prop::sample::Index>()),
    ) {
        let files = tiny_files();
        let (_, bytes, data_offset) = &files[which];
        let mut m = bytes.clone();
        for (at, value, in_header) in flips {
            // Mostly hit the header, where structure lives.
            let span = if in_header { *data_offset as usize } else { m.len() };
            let i = at.index(span);
            m[i] = value;
        }
        if let Some(c) = cut {
            let len = c.index(m.len());
            m.truncate(len);
        }
        exercise(m, &mut Tally::default());
    }
}
