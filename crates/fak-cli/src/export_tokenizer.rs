//! `fak export-tokenizer MODEL DIR`: a Hugging Face tokenizer directory
//! (`tokenizer.json`, `tokenizer_config.json`) from a GGUF model's own
//! vocabulary, for tools that load one (a router's tokenizer path). The
//! files tokenize exactly as fak does; a vocabulary that cannot be written
//! that way is refused with one line saying why
//! ([`fak_tokenizer::HfTokenizerFiles`]).

use std::path::{Path, PathBuf};

use anyhow::Context;
use fak_gguf::GgufFile;
use fak_tokenizer::{AddToken, HfTokenizerFiles, VocabKind};
use serde_json::json;

#[derive(clap::Args)]
pub struct ExportTokenizerArgs {
    /// GGUF model file whose tokenizer to export.
    model: PathBuf,
    /// Directory to write tokenizer.json and tokenizer_config.json into
    /// (created if needed).
    dir: PathBuf,
    /// Overwrite files already in DIR.
    #[arg(long)]
    force: bool,
    /// Print a JSON summary on stdout.
    #[arg(long)]
    json: bool,
}

/// Writes `text` to `path` through a temporary file in the same directory,
/// so a reader never sees half a file.
fn write_whole(path: &Path, text: &str) -> anyhow::Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
    let r = std::fs::write(&tmp, text)
        .with_context(|| format!("writing {}", tmp.display()))
        .and_then(|()| {
            std::fs::rename(&tmp, path)
                .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))
        });
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}

pub fn run(a: ExportTokenizerArgs) -> anyhow::Result<()> {
    let f = GgufFile::open(&a.model).with_context(|| format!("reading {}", a.model.display()))?;
    let files = HfTokenizerFiles::from_gguf(&f)
        .with_context(|| format!("tokenizer of {}", a.model.display()))?;
    let out = [
        (a.dir.join("tokenizer.json"), &files.tokenizer_json),
        (
            a.dir.join("tokenizer_config.json"),
            &files.tokenizer_config_json,
        ),
    ];
    if !a.force {
        if let Some((p, _)) = out.iter().find(|(p, _)| p.exists()) {
            anyhow::bail!("{} exists (pass --force to overwrite it)", p.display());
        }
    }
    std::fs::create_dir_all(&a.dir).with_context(|| format!("creating {}", a.dir.display()))?;
    for (path, text) in &out {
        write_whole(path, text)?;
        eprintln!("wrote {} ({} bytes)", path.display(), text.len());
    }
    let s = &files.summary;
    eprintln!(
        "{} vocabulary: {} tokens, {} merges, {} added tokens{}",
        match s.kind {
            VocabKind::Bpe => "byte-level BPE",
            VocabKind::Spm => "SentencePiece",
        },
        s.n_vocab,
        s.n_merges,
        s.n_added_tokens,
        if s.chat_template {
            ", chat template"
        } else {
            ", no chat template"
        }
    );
    if a.json {
        outln!(
            "{}",
            json!({
                "dir": a.dir.display().to_string(),
                "files": out.iter().map(|(p, t)| json!({"path": p.display().to_string(), "bytes": t.len()})).collect::<Vec<_>>(),
                "family": match s.kind { VocabKind::Bpe => "bpe", VocabKind::Spm => "spm" },
                "pre_tokenizer": s.pre_tokenizer.map(|p| format!("{p:?}").to_lowercase()),
                "n_vocab": s.n_vocab,
                "n_merges": s.n_merges,
                "n_added_tokens": s.n_added_tokens,
                "add_bos": s.add_bos == AddToken::Add,
                "add_eos": s.add_eos == AddToken::Add,
                "chat_template": s.chat_template,
            })
        )?;
    }
    Ok(())
}
