//! Fuzz target: arbitrary bytes through the GGUF reader and the model
//! validator. Any panic, abort, or out-of-memory is a bug; `Ok` and `Err`
//! are both fine. Accepted files also have every accessor exercised, and
//! each tensor's data slice must have exactly its declared length.
#![no_main]

use fak_gguf::{model_config, GgufFile};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(file) = GgufFile::from_bytes(data.to_vec()) else {
        return;
    };
    for (key, _) in file.metadata() {
        let _ = file.get_str(key);
        let _ = file.get_uint(key);
        let _ = file.get_f32(key);
        let _ = file.get_bool(key);
        let _ = file.get_str_array(key);
        let _ = file.get_i32_array(key);
        let _ = file.get_f32_array(key);
    }
    for t in file.tensors() {
        assert_eq!(
            file.tensor_data(t).len() as u64,
            t.n_bytes,
            "tensor '{}'",
            t.name
        );
    }
    let _ = model_config(&file);
});
