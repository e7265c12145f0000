//! What the tests that run the `fak` binary share: running it, finding
//! the repository's model files, a scratch directory, and the check that
//! a failure is one clean line.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs `fak` with `args` and waits for it.
pub fn fak(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fak"))
        .args(args)
        .output()
        .expect("run fak")
}

/// The repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The path of `models/<name>`, which must exist.
pub fn model(name: &str) -> String {
    let p = root().join("models").join(name);
    assert!(
        p.exists(),
        "{} is missing: run scripts/fetch-models.sh (and scripts/fetch-vocabs.sh for llama-vocab/)",
        p.display()
    );
    p.display().to_string()
}

/// A process's stderr as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A fresh directory for one test (removed first if an earlier run of the
/// same process id left it).
pub fn tmpdir(tag: &str) -> PathBuf {
    let d = tmppath(tag);
    std::fs::create_dir_all(&d).expect("tmp dir");
    d
}

/// [`tmpdir`]'s path, not created: for commands that must create it.
pub fn tmppath(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fak-test-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Asserts a clean failure: non-zero exit, exactly one line on stderr that
/// mentions `needle` (in any case), and no panic.
pub fn assert_clean_error(o: &Output, needle: &str) {
    let err = stderr(o);
    assert!(
        !o.status.success(),
        "expected failure, got success; stderr: {err}"
    );
    assert_ne!(
        o.status.code(),
        Some(101),
        "exit code 101 means a panic: {err}"
    );
    assert!(!err.contains("panicked"), "panic: {err}");
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "error must be one line: {err:?}"
    );
    assert!(
        err.to_lowercase().contains(&needle.to_lowercase()),
        "error {err:?} should mention {needle:?}"
    );
}
