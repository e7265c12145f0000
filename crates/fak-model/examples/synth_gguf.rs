//! Writes one synthetic GGUF model (random weights, real head geometry and
//! metadata keys; see `fak_model::synth`) for the llama.cpp peer
//! (`bench/peers/synth_golden.py`) to the given path.
//!
//! ```text
//! cargo run --release -p fak-model --example synth_gguf -- MODEL OUT.gguf [--drop-feature]
//!   MODEL: qwen3 | llama3.2 | iq-grids
//! ```
//!
//! The bytes are the ones `fak_model::synth::bytes` builds in-process, so
//! the Rust tests rebuild the same file and check the SHA-256 the golden
//! records.

use std::path::PathBuf;
use std::process::ExitCode;

use fak_model::synth::{self, Ablation, SynthModel};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let names: Vec<&str> = SynthModel::ALL.iter().map(|m| m.name()).collect();
    let usage = format!(
        "usage: synth_gguf MODEL OUT.gguf [--drop-feature]   (MODEL: {})",
        names.join(" | ")
    );
    let (model, out, ablation) = match args.as_slice() {
        [m, o] => (m, o, Ablation::None),
        [m, o, flag] if flag == "--drop-feature" => (m, o, Ablation::DropFeature),
        _ => {
            eprintln!("{usage}");
            return ExitCode::from(2);
        }
    };
    let Some(model) = SynthModel::from_name(model) else {
        eprintln!("unknown model '{model}'\n{usage}");
        return ExitCode::from(2);
    };
    let result =
        synth::writer(&model.spec(), ablation).and_then(|w| Ok(w.write_file(&PathBuf::from(out))?));
    match result {
        Ok(()) => {
            println!("{}: {} written", model.name(), out);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{out}: {e}");
            ExitCode::FAILURE
        }
    }
}
