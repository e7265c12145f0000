//! End-to-end tests of the `fak` binary, run as a user would.

use std::path::Path;
use std::process::Command;

use serde_json::Value;
use sha2::{Digest, Sha256};

mod run;
use run::{assert_clean_error, fak, model, root, stderr, tmpdir};

fn golden_prompt(stem: &str, name: &str) -> Value {
    let p = root()
        .join("crates/fak-model/tests/golden")
        .join(format!("{stem}.json"));
    let g: Value = serde_json::from_str(&std::fs::read_to_string(&p).expect("golden file"))
        .expect("golden json");
    g["prompts"]
        .as_array()
        .expect("prompts")
        .iter()
        .find(|x| x["name"] == name)
        .expect("prompt")
        .clone()
}

fn ids(v: &Value) -> Vec<u64> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|x| x.as_u64().expect("id"))
        .collect()
}

/// Checks `fak generate --json` output against a golden prompt: equal prompt
/// ids, and equal greedy ids up to llama.cpp's first near tie.
fn check_generate(stem: &str, file: &str, prompt_name: &str, n: usize) {
    let g = golden_prompt(stem, prompt_name);
    let text = g["text"].as_str().expect("text");
    let o = fak(&[
        "generate",
        "--model",
        &model(file),
        "--prompt",
        text,
        "-n",
        &n.to_string(),
        "--json",
        "--ignore-eos",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out: Value =
        serde_json::from_slice(&o.stdout).expect("generate --json prints one JSON object");
    assert_eq!(ids(&out["prompt_ids"]), ids(&g["prompt_ids"]));
    let want = ids(&g["greedy_ids"]);
    let margins: Vec<f64> = g["margins"]
        .as_array()
        .expect("margins")
        .iter()
        .map(|m| m.as_f64().expect("f"))
        .collect();
    let checked = margins
        .iter()
        .position(|&m| m < 0.1)
        .unwrap_or(margins.len())
        .min(n);
    let got = ids(&out["generated_ids"]);
    assert_eq!(
        got[..checked],
        want[..checked],
        "greedy ids differ from llama.cpp"
    );
    assert!(out["text"].is_string());
}

#[test]
fn generate_json_matches_llama_cpp_smollm2_q8_0() {
    check_generate(
        "smollm2-135m-instruct-q8_0",
        "smollm2-135m-instruct-q8_0.gguf",
        "capital",
        16,
    );
}

#[test]
fn generate_json_matches_llama_cpp_qwen() {
    check_generate(
        "qwen2.5-coder-0.5b-instruct-q4_k_m",
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        "code",
        12,
    );
}

#[test]
fn generate_prompt_file_equals_prompt() {
    let dir = tmpdir("pf");
    let f = dir.join("p.txt");
    std::fs::write(&f, "Hello, my name is").expect("write");
    let m = model("smollm2-135m-instruct-q8_0.gguf");
    let a = fak(&[
        "generate",
        "--model",
        &m,
        "--prompt-file",
        f.to_str().expect("utf8"),
        "-n",
        "4",
        "--json",
    ]);
    let b = fak(&[
        "generate",
        "--model",
        &m,
        "--prompt",
        "Hello, my name is",
        "-n",
        "4",
        "--json",
    ]);
    assert!(
        a.status.success() && b.status.success(),
        "{} {}",
        stderr(&a),
        stderr(&b)
    );
    assert_eq!(a.stdout, b.stdout);
}

#[test]
fn sampling_is_seeded() {
    let m = model("smollm2-135m-instruct-q8_0.gguf");
    let run = |seed: &str| {
        let o = fak(&[
            "generate",
            "--model",
            &m,
            "--prompt",
            "Once upon a time",
            "-n",
            "12",
            "--temp",
            "1.0",
            "--seed",
            seed,
            "--json",
            "--ignore-eos",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let v: Value = serde_json::from_slice(&o.stdout).expect("json");
        ids(&v["generated_ids"])
    };
    assert_eq!(run("3"), run("3"));
    assert_ne!(run("3"), run("4"));
}

#[test]
fn inspect_json_reports_types() {
    let o = fak(&[
        "inspect",
        &model("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"),
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["architecture"], "qwen2");
    assert_eq!(v["file_type"]["name"], "MOSTLY_Q4_K_M");
    assert_eq!(v["config"]["n_layer"], 24);
    assert_eq!(v["tensors"].as_array().expect("tensors").len(), 291);
    let o = fak(&["inspect", &model("smollm2-135m-instruct-q4_1.gguf")]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("token_embd.weight"));
}

#[test]
fn tokenize_json() {
    let o = fak(&[
        "tokenize",
        "--model",
        &model("smollm2-135m-instruct-q8_0.gguf"),
        "<|im_start|>user\nhi",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).expect("json");
    let got = ids(&v["ids"]);
    assert_eq!(got[0], 1, "<|im_start|> is parsed as one special token");
    assert_eq!(v["n_tokens"].as_u64(), Some(got.len() as u64));
}

#[test]
fn hostile_files_fail_cleanly() {
    let dir = tmpdir("hostile");
    let real = std::fs::read(model("smollm2-135m-instruct-q4_1.gguf")).expect("read model");
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty", vec![], "magic"),
        ("bad-magic", b"GGUX\x03\x00\x00\x00".to_vec(), "magic"),
        (
            "bad-version",
            [b"GGUF".as_slice(), &9u32.to_le_bytes(), &[0u8; 16]].concat(),
            "version",
        ),
        (
            "huge-counts",
            [
                b"GGUF".as_slice(),
                &3u32.to_le_bytes(),
                &u64::MAX.to_le_bytes(),
                &0u64.to_le_bytes(),
            ]
            .concat(),
            "tensor",
        ),
        ("truncated-header", real[..4096].to_vec(), ""),
        ("truncated-data", real[..real.len() / 2].to_vec(), ""),
    ];
    for (name, bytes, needle) in cases {
        let p = dir.join(format!("{name}.gguf"));
        std::fs::write(&p, &bytes).expect("write");
        let path = p.to_str().expect("utf8");
        for args in [
            vec!["inspect", path],
            vec!["generate", "--model", path, "--prompt", "hi", "-n", "1"],
            vec!["tokenize", "--model", path, "hi"],
        ] {
            let o = fak(&args);
            assert_clean_error(&o, needle);
        }
    }
}

#[test]
fn usage_errors_are_one_line() {
    let o = fak(&["generate", "--model", "/nonexistent.gguf", "--prompt", "x"]);
    assert_clean_error(&o, "nonexistent");
    // The OS error once, not once per link of the error chain (it read
    // "...: No such file or directory (os error 2): No such file or
    // directory (os error 2)").
    assert_eq!(
        stderr(&o).matches("os error 2").count(),
        1,
        "{}",
        stderr(&o)
    );
    // An unknown name; a codebook type, refused with its reason, not as an
    // unknown name; so is MXFP4's mixture-of-experts file type; and the
    // types fak reads but llama.cpp writes only per tensor.
    for (ty, reason) in [
        ("q3_zz", "q3_zz"),
        ("IQ2_XXS", "importance matrix"),
        ("mxfp4_moe", "mixture-of-experts"),
        ("nvfp4", "--tensor-type"),
    ] {
        let q4_1 = model("smollm2-135m-instruct-q4_1.gguf");
        let o = fak(&["quantize", &q4_1, "/tmp/x.gguf", ty]);
        assert_clean_error(&o, reason);
    }
    // A KV-event endpoint that cannot be bound fails at start, in one line.
    let o = fak(&[
        "serve",
        "-m",
        &model("smollm2-135m-instruct-q8_0.gguf"),
        "--port",
        "0",
        "--kv-events",
        "nonsense",
    ]);
    assert_clean_error(&o, "--kv-events nonsense");
    // Argument-parsing errors: clap's message in one line with a hint,
    // exit 2 (they used to print clap's multi-line usage).
    let m = model("smollm2-135m-instruct-q8_0.gguf");
    for (args, needle) in [
        (&["generate", "-m", &m, "-p", "x", "-n", "-1"][..], "'-1'"),
        (&["generate", "-m", &m, "-p", "x", "-n", "abc"], "'abc'"),
        (&["generate", "-m", &m, "-p", "x", "--bogus"], "--bogus"),
        (
            &["generate", "-m", &m, "-p", "x", "--kv-type", "q9"],
            "q8_0",
        ),
        (&["generate", "-m", &m, "-p", "x", "-t", "0"], "1..=1024"),
        (
            &["generate", "-m", &m, "-p", "x", "-t", "99999999999"],
            "1..=1024",
        ),
        (&["tokenize", "-m", &m, "-t", "2", "x"], "'-t'"),
        (&["bench", "evict", "-m", &m, "--at", "x"], "--at"),
        (&["bench"], "subcommand"),
        (
            &["serve", "-m", &m, "--kv-events-replay", "tcp://127.0.0.1:1"],
            "--kv-events",
        ),
    ] {
        let o = fak(args);
        assert_clean_error(&o, needle);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("--help"), "{args:?}: a hint");
    }
    for args in [&["--help"][..], &["--version"], &["generate", "--help"]] {
        let o = fak(args);
        assert_eq!(o.status.code(), Some(0), "{args:?}");
        assert!(!o.stdout.is_empty(), "{args:?} prints on stdout");
    }
    assert!(
        String::from_utf8_lossy(&fak(&["--help"]).stdout)
            .lines()
            .count()
            > 5
    );
}

fn sha_hex(b: &[u8]) -> String {
    Sha256::digest(b)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

/// `fak quantize` of the Q4_1 file gives tensor data byte-identical to
/// llama.cpp's own requantization (per-tensor SHA-256 from
/// `bench/peers/requant_golden.py`).
fn check_requant(ty: &str) {
    let golden_path = root().join(format!(
        "crates/fak-cli/tests/golden/requant-smollm2-q4_1-to-{ty}.json"
    ));
    let golden: Value =
        serde_json::from_str(&std::fs::read_to_string(&golden_path).expect("golden"))
            .expect("json");
    let dir = tmpdir(&format!("requant-{ty}"));
    let out = dir.join(format!("out-{ty}.gguf"));
    let o = fak(&[
        "quantize",
        &model("smollm2-135m-instruct-q4_1.gguf"),
        out.to_str().expect("utf8"),
        ty,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let f = fak_gguf::GgufFile::open(&out).expect("quantized file opens");
    let want = golden["tensors"].as_array().expect("tensors");
    assert_eq!(f.tensors().len(), want.len());
    let mut mismatches = Vec::new();
    for w in want {
        let name = w["name"].as_str().expect("name");
        let Some(t) = f.tensor(name) else {
            mismatches.push(format!("{name}: missing"));
            continue;
        };
        let got_ty = t.ty.name();
        let got_sha = sha_hex(f.tensor_data(t));
        let dims: Vec<u64> = w["dims"]
            .as_array()
            .expect("dims")
            .iter()
            .map(|d| d.as_u64().expect("dim"))
            .collect();
        if got_ty != w["type"].as_str().expect("type")
            || got_sha != w["data_sha256"].as_str().expect("sha")
            || dims != t.dims
        {
            mismatches.push(format!("{name}: fak {got_ty} vs llama.cpp {}", w["type"]));
        }
    }
    assert_eq!(
        f.get_uint("general.file_type").expect("ok"),
        golden["file_type"].as_u64()
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        mismatches.is_empty(),
        "{} tensors differ: {:?}",
        mismatches.len(),
        &mismatches[..mismatches.len().min(5)]
    );
}

#[test]
fn quantize_q8_0_is_byte_identical_to_llama_cpp() {
    check_requant("q8_0");
}

#[test]
fn quantize_f16_is_byte_identical_to_llama_cpp() {
    check_requant("f16");
}

#[test]
fn quantize_bf16_is_byte_identical_to_llama_cpp() {
    check_requant("bf16");
}

#[test]
fn quantize_q4_0_is_byte_identical_to_llama_cpp() {
    check_requant("q4_0");
}

#[test]
fn quantize_q4_1_is_byte_identical_to_llama_cpp() {
    check_requant("q4_1");
}

/// The low-bit mixtures: llama.cpp's per-tensor choices (Q3_K on
/// ffn_down, Q4_0/Q5_0/Q5_1 fallbacks for SmolLM2's 576-wide rows, Q5_K on
/// the first ffn_down layers, IQ4_NL for IQ4_XS rows of 576) and ggml's
/// quantizers, tensor for tensor.
#[test]
fn quantize_low_bit_mixtures_are_byte_identical_to_llama_cpp() {
    for ty in ["q2_k", "q3_k_s", "q3_k_m", "q3_k_l", "iq4_nl", "iq4_xs"] {
        check_requant(ty);
    }
}

/// `--threads` changes how fast, never what: one thread and three write
/// the same file (and `--threads 0` is refused in one line).
#[test]
fn quantize_writes_the_same_file_for_any_thread_count() {
    let dir = tmpdir("requant-threads");
    let src = model("smollm2-135m-instruct-q4_1.gguf");
    let quantize = |out: &Path, threads: &str| {
        let out = out.to_str().expect("utf8");
        fak(&["quantize", &src, out, "q3_k_m", "--threads", threads])
    };
    let mut files = Vec::new();
    for t in ["1", "3"] {
        let out = dir.join(format!("q3_k_m-t{t}.gguf"));
        let o = quantize(&out, t);
        assert!(o.status.success(), "{}", stderr(&o));
        files.push(std::fs::read(&out).expect("output"));
    }
    assert!(
        files[0] == files[1],
        "--threads 1 and 3 wrote different files"
    );
    let o = quantize(&dir.join("never.gguf"), "0");
    assert_clean_error(&o, "1..=1024");
}

/// The ternary files: TQ1_0/TQ2_0 where rows are whole 256-value blocks
/// (SmolLM2's 1536-wide `ffn_down`), Q4_0 on the 576-wide rows, Q8_0 for
/// the tied output, tensor for tensor.
#[test]
fn quantize_ternary_files_are_byte_identical_to_llama_cpp() {
    for ty in ["tq1_0", "tq2_0"] {
        check_requant(ty);
    }
}

/// Q5_K_S and Q5_K_M: Q5_K matrices (Q5_1 where SmolLM2's rows are 576
/// wide), and for Q5_K_M Q6_K (Q8_0 when 576 wide) on the attn_v and
/// ffn_down layers of llama.cpp's `use_more_bits`, tensor for tensor.
#[test]
fn quantize_q5_k_mixtures_are_byte_identical_to_llama_cpp() {
    for ty in ["q5_k_s", "q5_k_m"] {
        check_requant(ty);
    }
}

/// Q4_K_S and Q4_K_M: Q4_K matrices (Q5_0 where SmolLM2's rows are 576
/// wide); Q5_K on the first four attn_v and the first eighth of ffn_down
/// (Q4_K_S), Q6_K on the attn_v and ffn_down layers of llama.cpp's
/// `use_more_bits` (Q4_K_M; Q8_0 when 576 wide), tensor for tensor.
#[test]
fn quantize_q4_k_mixtures_are_byte_identical_to_llama_cpp() {
    for ty in ["q4_k_s", "q4_k_m"] {
        check_requant(ty);
    }
}

/// Q5_0, Q5_1 and Q6_K files: one type for every matrix but the output
/// (and Q6_K's fallback to Q8_0 on 576-wide rows).
#[test]
fn quantize_q5_0_q5_1_q6_k_are_byte_identical_to_llama_cpp() {
    for ty in ["q5_0", "q5_1", "q6_k"] {
        check_requant(ty);
    }
}

#[test]
fn chat_answers_with_the_template_applied() {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_fak"))
        .args([
            "chat",
            "--model",
            &model("smollm2-135m-instruct-q8_0.gguf"),
            "-n",
            "8",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"What is the capital of France?\nAnd of Italy?\n")
        .expect("write");
    let o = child.wait_with_output().expect("wait");
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let replies: Vec<&str> = out.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(replies.len(), 2, "two replies expected, got {out:?}");
    assert!(
        !out.contains("<|im_"),
        "template tokens must not leak into replies: {out:?}"
    );
    // The first reply is the greedy continuation of the rendered template
    // (SmolLM2's template adds its default system prompt).
    let rendered = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n";
    let g = fak(&[
        "generate",
        "--model",
        &model("smollm2-135m-instruct-q8_0.gguf"),
        "--prompt",
        rendered,
        "-n",
        "8",
        "--json",
    ]);
    assert!(g.status.success(), "{}", stderr(&g));
    let v: Value = serde_json::from_slice(&g.stdout).expect("json");
    assert_eq!(replies[0], v["text"].as_str().expect("text").trim_end());
}

#[test]
fn inspect_system_honours_fak_isa() {
    let o = Command::new(env!("CARGO_BIN_EXE_fak"))
        .args(["inspect", "--system", "--json"])
        .env("FAK_ISA", "scalar")
        .output()
        .expect("run");
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["isa"], "scalar");
    assert!(v["threads"].as_u64().unwrap_or(0) >= 1);
    let o = fak(&["inspect", "--system"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("kernel path:"));
}

/// `--prompts-json`: the ragged batch (together) and one-by-one (alone)
/// give every prompt the same tokens and the same per-step logits digest,
/// and a prompt run on its own through `--prompt` (flat, unpaged cache)
/// has that digest too. The same holds with a Q8_0 cache (`--kv-type
/// q8_0`), whose digests differ from the f16 cache's.
#[test]
fn prompts_json_is_batch_invariant_from_outside() {
    let m = model("smollm2-135m-instruct-q8_0.gguf");
    let dir = tmpdir("prompts");
    let file = dir.join("prompts.json");
    let prompts = [
        "The capital of France is",
        "def fib(n):",
        "<|im_start|>user\nName three colours.<|im_end|>\n<|im_start|>assistant\n",
        "1, 2, 3, 4,",
    ];
    std::fs::write(&file, serde_json::to_string(&prompts).expect("json")).expect("write");
    let run_kv = |mode: &str, kv: &str| -> Vec<Value> {
        let o = fak(&[
            "generate",
            "-m",
            &m,
            "--prompts-json",
            file.to_str().expect("utf-8 path"),
            "-n",
            "8",
            "--json",
            "--logits-digest",
            "--batch-mode",
            mode,
            "--block-size",
            "4",
            "--kv-type",
            kv,
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let v: Value = serde_json::from_slice(&o.stdout).expect("json list");
        v.as_array().expect("list").clone()
    };
    let run = |mode: &str| run_kv(mode, "f16");
    let together = run("together");
    let alone = run("alone");
    assert_eq!(together.len(), 4);
    for (t, a) in together.iter().zip(&alone) {
        assert_eq!(t["generated_ids"], a["generated_ids"]);
        assert_eq!(t["logits_digest"], a["logits_digest"]);
        assert_eq!(t["logits_digest"].as_str().map(str::len), Some(64));
        assert!(t["text"].is_string() && t["prompt_ids"].is_array());
    }
    // One prompt through `--prompt` (flat cache).
    let single = |kv: &str| -> Value {
        let o = fak(&[
            "generate",
            "-m",
            &m,
            "-p",
            prompts[1],
            "-n",
            "8",
            "--json",
            "--logits-digest",
            "--kv-type",
            kv,
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        serde_json::from_slice(&o.stdout).expect("json")
    };
    assert_eq!(single("f16")["logits_digest"], together[1]["logits_digest"]);
    let (q8_together, q8_alone) = (run_kv("together", "q8_0"), run_kv("alone", "q8_0"));
    for ((t, a), f) in q8_together.iter().zip(&q8_alone).zip(&together) {
        assert_eq!(t["logits_digest"], a["logits_digest"]);
        assert_ne!(t["logits_digest"], f["logits_digest"]);
    }
    assert_eq!(
        single("q8_0")["logits_digest"],
        q8_together[1]["logits_digest"]
    );
    // A malformed list is one clean error line.
    std::fs::write(&file, "{\"not\": \"a list\"}").expect("write");
    let o = fak(&[
        "generate",
        "-m",
        &m,
        "--prompts-json",
        file.to_str().expect("path"),
    ]);
    assert_clean_error(&o, "list of prompt strings");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `fak bench model --contexts` adds decode step times of 8 agents forked
/// from a shared context of each length (the input of `fak project`'s
/// attention term) to the shared-schema report.
#[test]
fn bench_model_json_has_the_shared_schema_and_context_points() {
    let m = model("smollm2-135m-instruct-q8_0.gguf");
    let o = fak(&[
        "bench",
        "model",
        "-m",
        &m,
        "--reps",
        "1",
        "--json",
        "-t",
        "2",
        "--contexts",
        "96,32",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["schema"], "fak-bench-single/1");
    assert_eq!(v["prefill"].as_array().expect("prefill").len(), 3);
    assert!(v["decode"]["tok_s"].as_f64().expect("decode") > 0.0);
    let c = v["decode_at_context"].as_array().expect("context points");
    assert_eq!(c.len(), 2);
    // Ascending; each context is the middle of its 8 timed steps.
    assert_eq!(c[0]["context"], 32 + 1 + 4);
    assert_eq!(c[1]["context"], 96 + 1 + 4);
    for p in c {
        assert_eq!(p["batch"], 8);
        assert!(p["step_ms"].as_f64().expect("ms") > 0.0);
    }
}

/// `fak bench batch` reports every batch size with the shared schema.
#[test]
fn bench_batch_json_has_the_shared_schema() {
    let m = model("smollm2-135m-instruct-q8_0.gguf");
    let o = fak(&[
        "bench",
        "batch",
        "-m",
        &m,
        "--batch",
        "1,3",
        "--json",
        "-t",
        "2",
        "--kv-type",
        "q8_0",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["schema"], "fak-bench-batch/1");
    assert_eq!(v["kv"], "paged");
    assert_eq!(v["kv_type"], "q8_0");
    let r = v["results"].as_array().expect("results");
    assert_eq!(r.len(), 2);
    assert_eq!(r[1]["batch"], 3);
    assert!(r[1]["decode_tok_s"].as_f64().expect("rate") > 0.0);
}

/// `fak bench fleet` runs a tiny fleet and its no-reuse ablation with the
/// shared schema; both give the same greedy tokens, reuse is counted, and
/// the KV blocks are `fak_engine::FLEET_BLOCK_SIZE` tokens by default.
#[test]
fn bench_fleet_json_counts_reuse() {
    let m = model("smollm2-135m-instruct-q8_0.gguf");
    let o = fak(&[
        "bench",
        "fleet",
        "-m",
        &m,
        "--prefix",
        "16",
        "--turns",
        "2",
        "--agents",
        "2",
        "--decode",
        "2",
        "--result",
        "4",
        "--ablation",
        "--json",
        "-t",
        "2",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["schema"], "fak-bench-fleet/1");
    // Fleets default to their own, longer KV blocks.
    assert_eq!(v["block_size"], fak_engine::FLEET_BLOCK_SIZE);
    let r = &v["runs"][0];
    assert_eq!(r["prefix_evaluations"], 1);
    assert_eq!(r["tokens_reused"], 2 * 16);
    assert_eq!(r["ablation"]["prefix_evaluations"], 2);
    assert_eq!(r["ablation"]["tokens_reused"], 0);
    assert_eq!(r["generated_sha256"], r["ablation"]["generated_sha256"]);
    assert!(r["agent_turns_per_s"].as_f64().expect("rate") > 0.0);
    // The measured phases: 2 agents × 2 turns × 2 decode steps, the
    // prefix and each turn's results in ingest passes; the passes' time
    // plus the time outside them is the wall time.
    let ph = &r["phases"];
    let secs = |k: &Value| k.as_f64().expect("seconds");
    assert!(ph["ingest"]["passes"].as_u64().expect("passes") >= 1);
    assert!(ph["decode"]["passes"].as_u64().expect("passes") >= 1);
    assert_eq!(
        ph["ingest"]["tokens"].as_u64().expect("tokens")
            + ph["decode"]["tokens"].as_u64().expect("tokens"),
        r["tokens_computed"].as_u64().expect("computed")
    );
    for kind in ["ingest", "decode"] {
        let p = &ph[kind];
        let parts = secs(&p["matmul_s"]) + secs(&p["attention_s"]) + secs(&p["other_s"]);
        assert!((parts - secs(&p["total_s"])).abs() < 1e-6, "{kind}: {p}");
        assert!(secs(&p["matmul_s"]) > 0.0, "{kind}: {p}");
    }
    let inside = secs(&ph["ingest"]["total_s"]) + secs(&ph["decode"]["total_s"]);
    let wall = secs(&r["wall_s"]);
    assert!(inside <= wall + 1e-6, "passes {inside} s > wall {wall} s");
    assert!((inside + secs(&ph["outside_forward_s"]) - wall).abs() < 1e-6);
    let o = fak(&["bench", "fleet", "-m", &m, "--profile", "nope"]);
    assert_clean_error(&o, "unknown profile");
}

/// `fak bench evict` times exact eviction, re-ingest, shift and the span's
/// own ingest.
#[test]
fn bench_evict_json_reports_every_operation() {
    let m = model("smollm2-135m-instruct-q8_0.gguf");
    let o = fak(&[
        "bench", "evict", "-m", &m, "--len", "40", "--span", "8", "--at", "20", "--reps", "1",
        "--json", "-t", "2",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["schema"], "fak-bench-evict/1");
    assert_eq!(v["tail_tokens"], 12);
    for k in [
        "exact_s",
        "reingest_s",
        "shift_s",
        "full_recompute_s",
        "span_ingest_s",
    ] {
        assert!(v["times"][k].as_f64().expect(k) > 0.0, "{k}");
    }
    let o = fak(&["bench", "evict", "-m", &m, "--len", "10", "--span", "20"]);
    assert_clean_error(&o, "span");
}

/// `fak bench verify --json` times a plain step and each pass width, and
/// bad widths and rates fail in one line.
#[test]
fn bench_verify_json_reports_every_width() {
    let m = model("smollm2-135m-instruct-q8_0.gguf");
    let o = fak(&[
        "bench",
        "verify",
        "-m",
        &m,
        "--context",
        "40",
        "--widths",
        "4,2",
        "--reps",
        "1",
        "--acceptance",
        "0.9",
        "--json",
        "-t",
        "2",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["schema"], "fak-bench-verify/1");
    let tokens: Vec<u64> = v["widths"]
        .as_array()
        .expect("widths")
        .iter()
        .map(|w| w["tokens"].as_u64().expect("tokens"))
        .collect();
    assert_eq!(tokens, [1, 2, 4]);
    assert_eq!(v["widths"][0]["cost"], 1.0);
    assert!(v["weight_bytes"].as_u64().unwrap_or(0) > 100_000_000);
    assert_eq!(v["modeled"][0]["acceptance"], 0.9);
    for (args, flag) in [
        (["--widths", "0"], "--widths"),
        (["--widths", "600"], "--widths"),
        (["--acceptance", "2"], "--acceptance"),
        (["--context", "0"], "--context"),
    ] {
        let mut a = vec!["bench", "verify", "-m", &m];
        a.extend(args);
        assert_clean_error(&fak(&a), flag);
    }
}

/// `fak bench peak --json` reports positive int8 and f32 rates for the
/// chosen ISA; the checksums and the f32 FMA count are the same under
/// every forced ISA (the SIMD loops did the work the scalar twins do), and
/// bad arguments fail cleanly.
#[test]
fn bench_peak_reports_a_rate_and_an_isa_independent_checksum() {
    let mut sums = Vec::new();
    let mut f32_sums = Vec::new();
    for isa in ["scalar", "avx2", "avx512", "auto"] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_fak"));
        cmd.args([
            "bench", "peak", "-t", "2", "--rounds", "20000", "--reps", "2", "--json",
        ]);
        if isa != "auto" {
            cmd.env("FAK_ISA", isa);
        }
        let o = cmd.output().expect("run fak");
        assert!(o.status.success(), "{}", stderr(&o));
        let v: Value = serde_json::from_slice(&o.stdout).expect("json");
        assert_eq!(v["schema"], "fak-bench-peak/1");
        assert_eq!(v["threads"], 2);
        assert!(v["int8_gmacs_per_s_median"].as_f64().unwrap_or(0.0) > 0.0);
        assert_eq!(v["int8_gmacs_per_s_runs"].as_array().map(Vec::len), Some(2));
        sums.push(v["checksum"].clone());
        let f32_rate = v["f32_gflops_median"].as_f64().unwrap_or(0.0);
        assert!(f32_rate.is_finite() && f32_rate > 0.0, "{isa}: {f32_rate}");
        assert_eq!(v["f32_gflops_runs"].as_array().map(Vec::len), Some(2));
        // 2 threads × 20000 rounds × 192 FMAs, as the kernels counted them.
        assert_eq!(v["f32_fmas_per_pass"], 2 * 20000 * 192, "{isa}");
        f32_sums.push(v["f32_checksum"].clone());
    }
    assert!(sums.iter().all(|s| *s == sums[0]), "{sums:?}");
    assert!(f32_sums.iter().all(|s| *s == f32_sums[0]), "{f32_sums:?}");
    assert_clean_error(&fak(&["bench", "peak", "--rounds", "0"]), "--rounds");
}

#[test]
fn a_draft_model_changes_nothing_but_the_passes() {
    let m = model("smollm2-135m-instruct-q8_0.gguf");
    let d = model("smollm2-135m-instruct-q4_1.gguf");
    let run = |extra: &[&str]| {
        let mut args = vec![
            "generate",
            "-m",
            &m,
            "-p",
            "The three primary colours are",
            "-n",
            "32",
            "--json",
            "--logits-digest",
        ];
        args.extend_from_slice(extra);
        let o = fak(&args);
        assert!(o.status.success(), "{extra:?}: {}", stderr(&o));
        serde_json::from_slice::<Value>(&o.stdout).expect("json")
    };
    let plain = run(&[]);
    let drafted = run(&["--speculative", "draft", "--draft-model", &d]);
    assert_eq!(plain["generated_ids"], drafted["generated_ids"]);
    assert_eq!(plain["logits_digest"], drafted["logits_digest"]);
    let s = &drafted["speculation"];
    let accepted = s["by_source"]["draft_model"]["accepted_tokens"]
        .as_u64()
        .expect("accepted");
    assert!(accepted > 0, "{s}");
    assert!(s["forward_passes"].as_u64() < Some(32), "{s}");

    let p = ["generate", "-m", &m, "-p", "x"];
    let with = |extra: &[&'static str]| [&p[..], extra].concat();
    assert_clean_error(
        &fak(&with(&["--speculative", "draft"])),
        "needs --draft-model",
    );
    let lookup = [&p[..], &["--speculative", "lookup", "--draft-model", &d]].concat();
    assert_clean_error(&fak(&lookup), "--speculative draft or auto");
    let qwen = model("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
    let other = [&p[..], &["--speculative", "draft", "--draft-model", &qwen]].concat();
    assert_clean_error(&fak(&other), "cannot draft for this model");
}
