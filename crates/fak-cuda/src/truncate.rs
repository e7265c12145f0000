//! Cutting a GGUF model down to its first layers.
//!
//! A model's first `n` blocks are a smaller model of the same widths: the
//! same per-layer kernels at a fraction of the file size, for runs where
//! the whole file cannot travel or need not be read. The result is a
//! [`GgufWriter`] to write or serialize:
//!
//! ```text
//! kv:      every key copied, {arch}.block_count = n (same integer type)
//! tensors: blk.N.* with N >= n dropped; the rest copied byte for byte, in order
//! ```
//!
//! Metadata that depends on the depth in other ways is copied unchanged:
//! per-layer arrays, if a file has any, keep their full length, and gemma3
//! derives its query scale from a 62-layer block count.

use fak_gguf::{GgufFile, GgufWriter, MetaValue};

use crate::CudaError;

/// A copy of `file` with only its first `n_layer` blocks: every `blk.N.*` tensor with N >= n_layer dropped, `{arch}.block_count` set to n_layer, every other key and tensor copied byte for byte.
pub fn truncate_layers(file: &GgufFile, n_layer: usize) -> Result<GgufWriter, CudaError> {
    let arch = file
        .get_str("general.architecture")?
        .ok_or_else(|| CudaError::Spec("the file has no general.architecture".into()))?;
    let count_key = format!("{arch}.block_count");
    let have = file
        .get_uint(&count_key)?
        .ok_or_else(|| CudaError::Spec(format!("the file has no {count_key}")))?;
    if n_layer == 0 || n_layer as u64 > have {
        return Err(CudaError::Spec(format!(
            "cannot keep {n_layer} layers of a {have}-layer model (1..={have})"
        )));
    }
    let mut w = GgufWriter::new();
    w.set_version(file.version())?;
    for (key, value) in file.metadata() {
        let value = if *key == count_key {
            same_int_type(value, n_layer)
                .ok_or_else(|| CudaError::Spec(format!("{count_key} cannot hold {n_layer}")))?
        } else {
            value.clone()
        };
        w.add_kv(key, value)?;
    }
    for t in file.tensors() {
        if layer_of(&t.name).is_some_and(|i| i >= n_layer) {
            continue;
        }
        w.add_tensor(&t.name, &t.dims, t.ty, file.tensor_data(t).to_vec())?;
    }
    Ok(w)
}

/// The block number of a `blk.N.*` tensor name.
fn layer_of(name: &str) -> Option<usize> {
    name.strip_prefix("blk.")?.split('.').next()?.parse().ok()
}

/// `n` as a value of `like`'s integer type (`None` if it is not an integer
/// type or `n` does not fit).
fn same_int_type(like: &MetaValue, n: usize) -> Option<MetaValue> {
    Some(match like {
        MetaValue::U8(_) => MetaValue::U8(n.try_into().ok()?),
        MetaValue::I8(_) => MetaValue::I8(n.try_into().ok()?),
        MetaValue::U16(_) => MetaValue::U16(n.try_into().ok()?),
        MetaValue::I16(_) => MetaValue::I16(n.try_into().ok()?),
        MetaValue::U32(_) => MetaValue::U32(n.try_into().ok()?),
        MetaValue::I32(_) => MetaValue::I32(n.try_into().ok()?),
        MetaValue::U64(_) => MetaValue::U64(n.try_into().ok()?),
        MetaValue::I64(_) => MetaValue::I64(n.try_into().ok()?),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::{gguf_bytes, SynthSpec};

    #[test]
    fn keeps_the_first_layer() {
        let spec = SynthSpec::parse("qwen2.5-1.5b:q8_0@2").expect("spec");
        let file = GgufFile::from_bytes(gguf_bytes(&spec).expect("bytes")).expect("parses");
        assert!(file.tensor("blk.1.attn_q.weight").is_some());
        let cut = truncate_layers(&file, 1)
            .and_then(|w| Ok(w.to_bytes()?))
            .expect("truncates");
        let cut = GgufFile::from_bytes(cut).expect("result parses");
        assert_eq!(cut.get("qwen2.block_count"), Some(&MetaValue::U32(1)));
        assert!(cut.tensors().iter().all(|t| !t.name.starts_with("blk.1.")));
        assert_eq!(cut.tensors().len(), file.tensors().len() - 12);
        let name = "blk.0.attn_q.weight";
        assert_eq!(
            cut.tensor_data_by_name(name).expect("kept"),
            file.tensor_data_by_name(name).expect("original")
        );
        assert_eq!(cut.metadata().len(), file.metadata().len());
        let cfg = fak_gguf::model_config(&cut).expect("validates");
        assert_eq!(cfg.n_layer, 1);

        // Keeping every layer reproduces the file.
        let all = truncate_layers(&file, 2)
            .and_then(|w| Ok(w.to_bytes()?))
            .expect("keeps all");
        assert_eq!(all, file.bytes());
        for bad in [0, 3] {
            assert!(matches!(
                truncate_layers(&file, bad),
                Err(CudaError::Spec(_))
            ));
        }
    }

    #[test]
    fn layer_numbers() {
        assert_eq!(layer_of("blk.12.ffn_up.weight"), Some(12));
        assert_eq!(layer_of("blk.x.ffn_up.weight"), None);
        assert_eq!(layer_of("output.weight"), None);
        assert_eq!(layer_of("token_embd.weight"), None);
    }
}
