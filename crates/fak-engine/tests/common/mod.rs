//! The model and tokenizer the engine's integration tests share
//! (SmolLM2 Q8_0 on a 2-thread pool, loaded once per test binary).

use std::path::Path;
use std::sync::OnceLock;

use fak_model::Model;
use fak_tokenizer::Tokenizer;

/// SmolLM2-135M-Instruct Q8_0 (`scripts/fetch-models.sh`), on 2 threads.
pub fn model() -> &'static Model {
    static M: OnceLock<Model> = OnceLock::new();
    M.get_or_init(|| {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../models/smollm2-135m-instruct-q8_0.gguf");
        assert!(
            p.exists(),
            "{} is missing: run scripts/fetch-models.sh",
            p.display()
        );
        let mut m = Model::load(&p).expect("load");
        m.set_threads(2).expect("threads");
        m
    })
}

/// [`model`]'s tokenizer.
pub fn tok() -> &'static Tokenizer {
    static T: OnceLock<Tokenizer> = OnceLock::new();
    T.get_or_init(|| Tokenizer::from_gguf(model().gguf()).expect("tokenizer"))
}
