//! Bit-exactness against llama.cpp's own ggml library.
//!
//! `tests/data/quant_fixture.bin` (and `quant_fixture_lowbit.bin`, the
//! low-bit formats' records) is written by
//! `bench/peers/gen_quant_fixture.py` (see `docs/formats.md` for the exact
//! command), which runs ggml's quantizers, dequantizers and generic dot
//! products through ctypes. Format (version 1, little-endian):
//!
//! ```text
//!   magic "FAKQFX01" | u16 len + provenance
//!   u32 n_inputs,  each: u16 len + name | u32 flags (bit 0: finite) | u32 n | n × f32 bits
//!   u32 n_records, each: u8 kind | u32 ggml type id | u32 input index (or u32::MAX)
//!                        | u32 n | u16 len + label | u32 n_blobs | n_blobs × (u32 len + bytes)
//!   kind 1 quantize:   blobs [ggml encoding of the input, ggml dequantization of it (may be empty)]
//!   kind 2 dequantize: blobs [encoded row, ggml f32 output]
//!   kind 3 vec_dot:    blobs [weight row, activation row, ggml result (f32)]
//! ```
//!
//! Quantized bytes and dequantized floats must match bit for bit. ggml's
//! generic dot products are compiled with FMA contraction (and its float
//! dots are SIMD), so dot results must only agree to a relative 1e-5 of
//! `Σ|w_i · a_i|`; the count of exact matches is printed.

use fak_gguf::GgmlType;
use fak_kernels::{can_quantize, dequantize_row, quantize_row, vec_dot};

/// The fixture files: the main one, the low-bit formats' records (Q2_K,
/// Q3_K, IQ4_NL, IQ4_XS), made by a second run of the generator, and the
/// codebook formats' (IQ1_*, IQ2_*, IQ3_*: random blocks and blocks that
/// sweep every codebook entry), made by a third.
const FIXTURES: [(&str, &[u8]); 4] = [
    (
        "quant_fixture.bin",
        include_bytes!("data/quant_fixture.bin"),
    ),
    (
        "quant_fixture_lowbit.bin",
        include_bytes!("data/quant_fixture_lowbit.bin"),
    ),
    (
        "quant_fixture_iq.bin",
        include_bytes!("data/quant_fixture_iq.bin"),
    ),
    (
        "quant_fixture_fp4.bin",
        include_bytes!("data/quant_fixture_fp4.bin"),
    ),
];

struct Input {
    name: String,
    n: usize,
    bits: Vec<u32>,
}

struct Record {
    kind: u8,
    ty: GgmlType,
    input: Option<usize>,
    n: usize,
    label: String,
    blobs: Vec<Vec<u8>>,
}

/// A bounds-checked cursor over the fixture bytes.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn bytes(&mut self, len: usize) -> Result<&'a [u8], String> {
        let end = self.pos.checked_add(len).filter(|&e| e <= self.buf.len());
        let end = end
            .ok_or_else(|| format!("fixture truncated at byte {} (wanted {len} more)", self.pos))?;
        let out = &self.buf[self.pos..end];
        self.pos = end;
        Ok(out)
    }
    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.bytes(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, String> {
        let b = self.bytes(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32, String> {
        let b = self.bytes(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn usize(&mut self) -> Result<usize, String> {
        Ok(self.u32()? as usize)
    }
    fn string(&mut self) -> Result<String, String> {
        let len = self.u16()? as usize;
        String::from_utf8(self.bytes(len)?.to_vec())
            .map_err(|e| format!("bad UTF-8 in fixture: {e}"))
    }
}

fn parse(buf: &[u8]) -> Result<(String, Vec<Input>, Vec<Record>), String> {
    let mut r = Reader { buf, pos: 0 };
    if r.bytes(8)? != b"FAKQFX01" {
        return Err("fixture magic is not FAKQFX01".into());
    }
    let provenance = r.string()?;
    let mut inputs = Vec::new();
    for _ in 0..r.u32()? {
        let name = r.string()?;
        let _flags = r.u32()?;
        let n = r.usize()?;
        let raw = r.bytes(4 * n)?;
        let bits = raw
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        inputs.push(Input { name, n, bits });
    }
    let mut records = Vec::new();
    for _ in 0..r.u32()? {
        let kind = r.u8()?;
        let id = r.u32()?;
        let ty =
            GgmlType::from_id(id).ok_or_else(|| format!("unknown ggml type id {id} in fixture"))?;
        let input = match r.u32()? {
            u32::MAX => None,
            i => Some(i as usize),
        };
        let n = r.usize()?;
        let label = r.string()?;
        let mut blobs = Vec::new();
        for _ in 0..r.u32()? {
            let len = r.usize()?;
            blobs.push(r.bytes(len)?.to_vec());
        }
        records.push(Record {
            kind,
            ty,
            input,
            n,
            label,
            blobs,
        });
    }
    if r.pos != buf.len() {
        return Err(format!(
            "{} trailing bytes after the last record",
            buf.len() - r.pos
        ));
    }
    Ok((provenance, inputs, records))
}

fn floats(bits: &[u32]) -> Vec<f32> {
    bits.iter().map(|&b| f32::from_bits(b)).collect()
}

fn le_f32s(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Describes the first difference between two equally long sequences.
fn first_diff<T: PartialEq + std::fmt::Debug>(what: &str, got: &[T], want: &[T]) -> Option<String> {
    if got.len() != want.len() {
        return Some(format!(
            "{what}: length {} vs ggml {}",
            got.len(),
            want.len()
        ));
    }
    let bad = got.iter().zip(want).filter(|(g, w)| g != w).count();
    let (i, (g, w)) = got
        .iter()
        .zip(want)
        .enumerate()
        .find(|(_, (g, w))| g != w)?;
    Some(format!(
        "{what}: {bad} of {} differ, first at {i}: fak {g:?} vs ggml {w:?}",
        got.len()
    ))
}

fn blob(rec: &Record, i: usize) -> Result<&[u8], String> {
    rec.blobs
        .get(i)
        .map(Vec::as_slice)
        .ok_or_else(|| format!("{}: missing blob {i}", rec.label))
}

/// Checks a dequantization against ggml's output bits.
fn check_dequant(rec: &Record, enc: &[u8], want: &[u8], fails: &mut Vec<String>) {
    let mut out = vec![0.0f32; rec.n];
    match dequantize_row(rec.ty, enc, &mut out) {
        Err(e) => fails.push(format!("{} dequantize: {e}", rec.label)),
        Ok(()) => {
            let got: Vec<u32> = out.iter().map(|v| v.to_bits()).collect();
            if let Some(d) = first_diff("dequantize", &got, &le_f32s(want)) {
                fails.push(format!("{}: {d}", rec.label));
            }
        }
    }
}

/// `Σ|w_i · a_i|` over the dequantized rows: the scale of a dot product's
/// rounding error.
fn dot_magnitude(rec: &Record, w: &[u8], a: &[u8]) -> Result<f64, String> {
    let aty = fak_kernels::vec_dot_type(rec.ty);
    let mut wf = vec![0.0f32; rec.n];
    let mut af = vec![0.0f32; rec.n];
    dequantize_row(rec.ty, w, &mut wf).map_err(|e| format!("{}: {e}", rec.label))?;
    dequantize_row(aty, a, &mut af).map_err(|e| format!("{}: {e}", rec.label))?;
    Ok(wf
        .iter()
        .zip(&af)
        .map(|(&x, &y)| (f64::from(x) * f64::from(y)).abs())
        .sum())
}

/// What one fixture file covered, and where fak disagreed with ggml.
struct Checked {
    quant_types: std::collections::BTreeSet<&'static str>,
    dot_types: std::collections::BTreeSet<&'static str>,
    dequantized: usize,
    dots: usize,
    fails: Vec<String>,
}

#[test]
fn fixture_matches_ggml() -> Result<(), String> {
    let mut fails = Vec::new();
    let mut all = std::collections::BTreeSet::new();
    let mut all_dots = std::collections::BTreeSet::new();
    for (name, buf) in FIXTURES {
        let c = check_fixture(buf)?;
        if name == "quant_fixture.bin" {
            assert!(
                c.dequantized >= 150 && c.dots >= 15,
                "fixture too small: {} dequantizations, {} dots",
                c.dequantized,
                c.dots
            );
        }
        all.extend(c.quant_types);
        all_dots.extend(c.dot_types);
        fails.extend(c.fails.into_iter().map(|f| format!("{name}: {f}")));
    }
    // The fixtures must actually cover every format fak claims to quantize,
    // and the dot product of every weight format fak reads.
    let expected = [
        "bf16", "f16", "iq4_nl", "iq4_xs", "mxfp4", "nvfp4", "q1_0", "q2_k", "q3_k", "q4_0",
        "q4_1", "q4_k", "q5_0", "q5_1", "q5_k", "q6_k", "q8_0", "q8_1", "q8_k", "tq1_0", "tq2_0",
    ];
    assert_eq!(
        all.iter().copied().collect::<Vec<_>>(),
        expected,
        "quantized types covered"
    );
    for ty in [
        "q2_k", "q3_k", "iq4_nl", "iq4_xs", "q4_k", "q6_k", "q8_0", "iq1_s", "iq1_m", "iq2_xxs",
        "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "tq1_0", "tq2_0", "mxfp4", "nvfp4", "q1_0",
    ] {
        assert!(
            all_dots.contains(ty),
            "no dot product of {ty} in the fixtures"
        );
    }
    if fails.is_empty() {
        Ok(())
    } else {
        let shown: Vec<_> = fails.iter().take(25).cloned().collect();
        Err(format!(
            "{} mismatches against ggml:\n{}",
            fails.len(),
            shown.join("\n")
        ))
    }
}

fn check_fixture(buf: &[u8]) -> Result<Checked, String> {
    let (provenance, inputs, records) = parse(buf)?;
    eprintln!(
        "fixture: {provenance}; {} inputs, {} records",
        inputs.len(),
        records.len()
    );
    let mut fails = Vec::new();
    let (mut quantized, mut dequantized, mut dots, mut exact_dots) =
        (0usize, 0usize, 0usize, 0usize);
    let mut quant_types = std::collections::BTreeSet::new();
    let mut dot_types = std::collections::BTreeSet::new();
    for rec in &records {
        match rec.kind {
            1 => {
                let idx = rec
                    .input
                    .ok_or_else(|| format!("{}: quantize record without input", rec.label))?;
                let input = inputs
                    .get(idx)
                    .ok_or_else(|| format!("{}: input {idx} missing", rec.label))?;
                if input.n != rec.n {
                    return Err(format!(
                        "{}: input {} has {} values, record says {}",
                        rec.label, input.name, input.n, rec.n
                    ));
                }
                let want = blob(rec, 0)?;
                if can_quantize(rec.ty) {
                    let mut out = vec![0u8; want.len()];
                    match quantize_row(rec.ty, &floats(&input.bits), &mut out) {
                        Err(e) => fails.push(format!("{} quantize: {e}", rec.label)),
                        Ok(()) => {
                            if let Some(d) = first_diff("quantize bytes", &out, want) {
                                fails.push(format!("{}: {d}", rec.label));
                            }
                        }
                    }
                    quantized += 1;
                    quant_types.insert(rec.ty.name());
                }
                let deq = blob(rec, 1)?;
                if !deq.is_empty() {
                    check_dequant(rec, want, deq, &mut fails);
                    dequantized += 1;
                }
            }
            2 => {
                check_dequant(rec, blob(rec, 0)?, blob(rec, 1)?, &mut fails);
                dequantized += 1;
            }
            3 => {
                let (w, a) = (blob(rec, 0)?, blob(rec, 1)?);
                let s = le_f32s(blob(rec, 2)?);
                let want = f32::from_bits(
                    *s.first()
                        .ok_or_else(|| format!("{}: empty result", rec.label))?,
                );
                match vec_dot(rec.ty, rec.n, w, a) {
                    Err(e) => fails.push(format!("{} vec_dot: {e}", rec.label)),
                    Ok(got) => {
                        let tol = 1e-5 * dot_magnitude(rec, w, a)?;
                        let err = (f64::from(got) - f64::from(want)).abs();
                        if err > tol || !got.is_finite() {
                            fails.push(format!(
                                "{}: vec_dot fak {got} vs ggml {want} (|diff| {err:e} > {tol:e})",
                                rec.label
                            ));
                        }
                        if got.to_bits() == want.to_bits() {
                            exact_dots += 1;
                        }
                        dot_types.insert(rec.ty.name());
                    }
                }
                dots += 1;
            }
            k => return Err(format!("{}: unknown record kind {k}", rec.label)),
        }
    }
    eprintln!(
        "checked {quantized} quantizations ({}), {dequantized} dequantizations, {dots} dot products ({exact_dots} bit-exact)",
        quant_types.iter().copied().collect::<Vec<_>>().join(" ")
    );
    Ok(Checked {
        quant_types,
        dot_types,
        dequantized,
        dots,
        fails,
    })
}
