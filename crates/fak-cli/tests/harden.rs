//! Hostile or careless input to the `fak` binary: huge
//! contexts and thread counts, bad sampling values, ignored flags, a
//! stdout closed by its reader. Each fails cleanly: one line on stderr,
//! non-zero exit, no panic, no abort; or ends normally where it should.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn fak(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fak"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run fak")
}

fn model(name: &str) -> String {
    let p: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../models")
        .join(name);
    assert!(
        p.exists(),
        "{} is missing: run scripts/fetch-models.sh",
        p.display()
    );
    p.display().to_string()
}

fn smol() -> String {
    model("smollm2-135m-instruct-q8_0.gguf")
}

/// Non-zero exit that is not a panic (101) or an abort (a signal), one
/// line on stderr mentioning `needle`.
fn assert_one_line_error(o: &Output, needle: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.code().is_some_and(|c| c != 0 && c != 101),
        "status {:?}: {err}",
        o.status
    );
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err:?}");
    assert!(
        err.to_lowercase().contains(&needle.to_lowercase()),
        "{err:?} should mention {needle:?}"
    );
}

/// A context beyond the model's trained one is refused before anything is
/// allocated (`-n 10000000` used to try ~123 GB on Qwen and abort; larger
/// values panicked with "capacity overflow").
#[test]
fn contexts_beyond_the_trained_one_are_refused() {
    let m = smol();
    for n in ["10000000", "18446744073709551615"] {
        let o = fak(&["generate", "-m", &m, "-p", "hi", "-n", n]);
        assert_one_line_error(&o, "trained context of 8192");
    }
    // The prompt alone longer than n_ctx_train (8192) is refused too.
    let long = "hello ".repeat(9000);
    let o = fak(&["generate", "-m", &m, "-p", &long, "-n", "1"]);
    assert_one_line_error(&o, "trained context");
    let o = fak(&["chat", "-m", &m, "--ctx", "100000"]);
    assert_one_line_error(&o, "--ctx");
    let o = fak(&["chat", "-m", &m, "--ctx", "0"]);
    assert_one_line_error(&o, "at least 1 token");
    // Explicitly allowed (so past the trained-context check), a context no
    // memory can hold is still a clean error: its size is checked and its
    // allocation probed before anything is allocated.
    let o = fak(&[
        "generate",
        "-m",
        &m,
        "-p",
        "hi",
        "--allow-ctx-beyond-train",
        "-n",
        "137438953472",
    ]);
    assert_one_line_error(&o, "allocate");
}

#[test]
fn bad_sampling_values_are_refused_before_loading() {
    // A model path that does not exist: the sampling check comes first.
    for (flag, value, needle) in [
        ("--temp", "nan", "temperature"),
        ("--temp", "-1", "temperature"),
        ("--temp", "1000", "temperature"),
        ("--top-p", "0", "top_p"),
        ("--top-p", "-0.5", "top_p"),
    ] {
        for cmd in ["generate", "chat"] {
            let mut args = vec![cmd, "-m", "/nonexistent.gguf", flag, value];
            if cmd == "generate" {
                args.extend(["-p", "hi"]);
            }
            let o = fak(&args);
            assert_one_line_error(&o, needle);
        }
    }
}

/// Flags that would be ignored are refused.
#[test]
fn ignored_flags_are_refused() {
    let m = smol();
    for (flag, value) in [
        ("--block-size", "16"),
        ("--max-batch-tokens", "8"),
        ("--batch-mode", "alone"),
    ] {
        let o = fak(&["generate", "-m", &m, "-p", "hi", flag, value]);
        assert_one_line_error(&o, &format!("{flag} applies only with --prompts-json"));
    }
    let o = fak(&["tokenize", "-m", &m, "--threads", "2", "hi"]);
    assert_one_line_error(&o, "--threads");
    let dir = std::env::temp_dir().join(format!("fak-harden-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    let prompts = dir.join("prompts.json");
    std::fs::write(&prompts, r#"["hi", "there"]"#).expect("write");
    let p = prompts.display().to_string();
    for flag in ["--block-size", "--max-batch-tokens"] {
        let o = fak(&["generate", "-m", &m, "--prompts-json", &p, flag, "0"]);
        assert_one_line_error(&o, "at least 1");
    }
}

#[test]
fn huge_and_zero_thread_counts_are_refused() {
    let m = smol();
    for t in ["0", "1025", "100000000000"] {
        for args in [
            vec!["generate", "-m", &m, "-p", "hi", "-t", t],
            vec!["bench", "peak", "-t", t],
            vec!["bench", "bandwidth", "-t", t],
        ] {
            let o = fak(&args);
            assert_one_line_error(&o, "1..=1024");
        }
    }
}

#[test]
fn bench_evict_refuses_a_span_past_the_end() {
    let m = smol();
    for at in ["18446744073709551610", "18446744073709551615", "1100"] {
        let o = fak(&["bench", "evict", "-m", &m, "--at", at]);
        assert_one_line_error(&o, "at + span < --len");
    }
}

/// `fak ... | head -1`: the reader closes the pipe; fak ends with exit 0
/// and no panic (printing used to panic on EPIPE, as Rust ignores SIGPIPE).
#[test]
fn a_closed_stdout_is_a_normal_exit() {
    let m = smol();
    let long = "word ".repeat(5000);
    for args in [
        vec!["generate", "-m", &m, "-p", "hi", "-n", "16", "--json"],
        vec!["generate", "-m", &m, "-p", "hi", "-n", "16"],
        vec!["tokenize", "-m", &m, &long],
        vec!["inspect", &m],
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_fak"))
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        // Close the read end before fak writes anything.
        drop(child.stdout.take());
        let mut err = String::new();
        child
            .stderr
            .take()
            .expect("stderr")
            .read_to_string(&mut err)
            .expect("read");
        let status = child.wait().expect("wait");
        assert_eq!(status.code(), Some(0), "{:?}: {err}", &args[..1]);
        assert!(!err.contains("panicked"), "{err}");
    }
}
