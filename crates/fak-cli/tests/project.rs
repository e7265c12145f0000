//! End-to-end tests of `fak project`: projection, packet validation and
//! calibration, on small synthetic rates files that carry the real model's
//! sha256 (no model is run).

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

mod run;
use run::{assert_clean_error, fak, stderr, tmpdir};

const MODEL: &str = "smollm2-135m-instruct-q8_0.gguf";

fn model_path() -> String {
    run::model(MODEL)
}

fn model_sha() -> String {
    let bytes = std::fs::read(model_path()).expect("model bytes");
    Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Synthetic rates: prefill 100/200/300 tok/s at 16/64/256 tokens; batched
/// decode 50/200/400 tok/s at B = 1/8/32 (and a failed B = 64 row).
struct Rates {
    dir: PathBuf,
    single: String,
    batch: String,
}

fn write(dir: &Path, name: &str, v: &Value) -> String {
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_string_pretty(v).unwrap()).unwrap();
    p.display().to_string()
}

fn rates(tag: &str, sha: &str) -> Rates {
    let dir = tmpdir(tag);
    let single = json!({
        "schema": "fak-bench-single/1", "engine": "fak", "threads": 2,
        "model": MODEL, "model_sha256": sha, "n_vocab": 49152, "reps": 3,
        "prefill": [
            {"n_tokens": 16, "tok_s": 100.0, "tok_s_reps": [100.0], "seconds_reps": [0.16]},
            {"n_tokens": 64, "tok_s": 200.0, "tok_s_reps": [200.0], "seconds_reps": [0.32]},
            {"n_tokens": 256, "tok_s": 300.0, "tok_s_reps": [300.0], "seconds_reps": [0.85]}
        ],
        "decode": {"prompt_tokens": 16, "steps": 32, "tok_s": 50.0}
    });
    let row = |b: usize, status: &str, tok_s: f64| {
        json!({"batch": b, "status": status, "prefill_s": 1.0, "prefill_tok_s": 1.0,
               "decode_s": 1.0, "decode_tok_s": tok_s, "decode_step_ms_median": 1.0,
               "decode_tok_s_reps": [tok_s]})
    };
    let batch = json!({
        "schema": "fak-bench-batch/1", "engine": "fak", "threads": 2,
        "model": MODEL, "model_sha256": sha,
        "results": [row(1, "ok", 50.0), row(8, "ok", 200.0), row(32, "ok", 400.0),
                    row(64, "oom", 9999.0)]
    });
    Rates {
        single: write(&dir, "single.json", &single),
        batch: write(&dir, "batch.json", &batch),
        dir,
    }
}

/// The model's wall time, written out independently of the implementation.
fn expected_wall(a: f64, t: f64, p: f64, d: f64, r: f64, rp: impl Fn(f64) -> f64, rd: f64) -> f64 {
    let ingest = a * (r + 1.0);
    p / rp(p) + t * (ingest / rp(ingest) + d * (a / rd))
}

fn synthetic_rp(n: f64) -> f64 {
    // Linear in ln(n) between (16,100), (64,200), (256,300); clamped.
    let n = n.clamp(16.0, 256.0);
    if n <= 64.0 {
        100.0 + 100.0 * (n.ln() - 16f64.ln()) / (64f64.ln() - 16f64.ln())
    } else {
        200.0 + 100.0 * (n.ln() - 64f64.ln()) / (256f64.ln() - 64f64.ln())
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

fn project(r: &Rates, extra: &[&str]) -> (Output, PathBuf) {
    let out = r.dir.join("packet.json");
    let m = model_path();
    let mut args = vec![
        "project", "--model", &m, "--rates", &r.single, "--rates", &r.batch,
    ];
    args.extend_from_slice(extra);
    let o_s = out.display().to_string();
    args.extend_from_slice(&["--out", &o_s, "--json"]);
    (fak(&args), out)
}

/// The `rests_on` list of output figure `key`.
fn rests_on<'a>(outputs: &'a Value, key: &str) -> Vec<&'a str> {
    outputs[key]["rests_on"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect()
}

fn read(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn validate(p: &Path) -> Output {
    fak(&["project", "validate", &p.display().to_string()])
}

#[test]
fn projection_matches_the_formulas_and_labels_every_figure() {
    let r = rates("proj", &model_sha());
    let shape = [
        "--agents", "4", "--turns", "10", "--prefix", "32", "--decode", "8", "--result", "7",
    ];
    let (run, out) = project(&r, &shape);
    assert!(run.status.success(), "{}", stderr(&run));
    let stdout: Value = serde_json::from_slice(&run.stdout).expect("--json prints the packet");
    let p = read(&out);
    assert_eq!(stdout, p);
    assert_eq!(p["schema"], "fak-project/1");
    assert_eq!(p["label"], "MODELED");

    // A=4: decode rate linear in ln B between B=1 (50) and B=8 (200): 150.
    let rd = 50.0 + 150.0 * 4f64.ln() / 8f64.ln();
    let wall = expected_wall(4.0, 10.0, 32.0, 8.0, 7.0, synthetic_rp, rd);
    let o = &p["outputs"];
    assert!(close(o["wall_s"]["value"].as_f64().unwrap(), wall));
    assert!(close(
        o["agent_turns_per_s"]["value"].as_f64().unwrap(),
        40.0 / wall
    ));
    assert!(close(
        o["ttft_ms"]["value"].as_f64().unwrap(),
        1e3 * 32.0 / synthetic_rp(32.0)
    ));
    // smollm2-135m: 30 layers, 3 KV heads of 64: 4·30·192 bytes per token.
    let kv_tok = 4.0 * 30.0 * 192.0;
    assert_eq!(
        o["kv_bytes"]["value"].as_f64().unwrap(),
        kv_tok * (32.0 + 4.0 * 10.0 * 15.0)
    );
    assert_eq!(
        o["no_reuse_kv_bytes"]["value"].as_f64().unwrap(),
        kv_tok * 4.0 * (32.0 + 10.0 * 15.0)
    );
    let nr_wall = wall + 3.0 * 32.0 / synthetic_rp(32.0);
    assert!(close(
        o["no_reuse_wall_s"]["value"].as_f64().unwrap(),
        nr_wall
    ));

    // Every figure is MODELED and rests on named inputs.
    for (k, f) in o.as_object().unwrap() {
        assert_eq!(f["label"], "MODELED", "{k}");
        let on = f["rests_on"].as_array().unwrap();
        assert!(!on.is_empty(), "{k} rests on nothing");
        if k != "kv_bytes" && k != "no_reuse_kv_bytes" {
            assert!(
                on.iter()
                    .all(|s| s.as_str().unwrap().contains(".json (sha256 ")),
                "{k}: {on:?}"
            );
        }
    }
    let on = rests_on(o, "agent_turns_per_s");
    assert!(on.iter().any(|s| s.starts_with("batch_decode_tok_s@8=200")));
    assert!(on.iter().any(|s| s.starts_with("prefill_tok_s@16=100")));
    // Inputs: files, their sha256, the model sha256; the failed row is skipped.
    assert_eq!(p["model"]["sha256"], model_sha());
    let src = &p["inputs"]["batch_decode_tok_s"]["source"];
    assert_eq!(src["file"], r.batch.as_str());
    assert_eq!(src["sha256"].as_str().unwrap().len(), 64);
    assert_eq!(
        p["inputs"]["batch_decode_tok_s"]["points"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    assert!(p["limitations"]
        .as_array()
        .unwrap()
        .iter()
        .any(|l| l.as_str().unwrap().contains("attention")));
    assert!(!p["formulas"].as_array().unwrap().is_empty());
    assert_eq!(p["packet_sha256"].as_str().unwrap().len(), 64);
    // The table went to stderr.
    assert!(stderr(&run).contains("agent_turns_per_s"));
}

/// With `decode_at_context` points in the single-stream file, attention
/// over each turn's contexts is charged from the measured step times
/// (piecewise linear in the context, per agent token); without them the
/// packet says it is not modeled.
#[test]
fn context_points_add_the_attention_term() {
    let sha = model_sha();
    let r = rates("attn", &sha);
    let mut single: Value = read(Path::new(&r.single));
    single["decode_at_context"] = json!([
        {"context": 1029, "batch": 8, "step_ms": 60.0},
        {"context": 69, "batch": 8, "step_ms": 40.0},
        {"context": 2053, "batch": 8, "step_ms": 100.0}
    ]);
    let with = Rates {
        single: write(&r.dir, "single-ctx.json", &single),
        batch: r.batch.clone(),
        dir: r.dir.clone(),
    };
    // Contexts run from 1000 to past 2053: both segments and the
    // extrapolation past the longest measured context are used.
    let shape = [
        "--agents", "4", "--turns", "80", "--prefix", "1000", "--decode", "8", "--result", "7",
    ];
    let (run, out) = project(&with, &shape);
    assert!(run.status.success(), "{}", stderr(&run));
    let p = read(&out);
    // Extra ms at context c over the shortest, then seconds per agent token.
    let g = |c: f64| -> f64 {
        if c <= 69.0 {
            40.0
        } else if c <= 1029.0 {
            40.0 + 20.0 * (c - 69.0) / 960.0
        } else {
            60.0 + 40.0 * (c - 1029.0) / 1024.0
        }
    };
    let f = |c: f64| (g(c) - 40.0) / 1e3 / 8.0;
    let (a, t, pf, d, rr) = (4.0, 80.0, 1000.0, 8.0, 7.0);
    let rd = 50.0 + 150.0 * 4f64.ln() / 8f64.ln();
    let ingest = a * (rr + 1.0);
    let mut wall = pf / synthetic_rp(pf) + pf * f(pf / 2.0);
    let mut attn = pf * f(pf / 2.0);
    for k in 0..80 {
        let base = pf + k as f64 * (rr + 1.0 + d);
        let (ai, ad) = (
            ingest * f(base + (rr + 1.0) / 2.0),
            a * f(base + rr + 1.0 + d / 2.0),
        );
        wall += ingest / synthetic_rp(ingest) + ai + d * (a / rd + ad);
        attn += ai + d * ad;
    }
    let o = &p["outputs"];
    assert!(close(o["wall_s"]["value"].as_f64().unwrap(), wall));
    assert!(close(o["attention_s"]["value"].as_f64().unwrap(), attn));
    assert!(close(
        o["agent_turns_per_s"]["value"].as_f64().unwrap(),
        a * t / wall
    ));
    let on = rests_on(o, "agent_turns_per_s");
    for pt in ["69x8=40", "1029x8=60", "2053x8=100"] {
        let want = format!("decode_step_ms@context{pt}");
        assert!(on.iter().any(|s| s.starts_with(&want)), "{want}: {on:?}");
    }
    assert_eq!(
        p["inputs"]["decode_at_context"]["points"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    assert!(validate(&out).status.success());
    // The same shape without context points: lower wall time, and a note.
    let (run, out) = project(&r, &shape);
    assert!(run.status.success(), "{}", stderr(&run));
    let p = read(&out);
    assert!(p["outputs"]["wall_s"]["value"].as_f64().unwrap() < wall);
    assert!(p["outputs"].get("attention_s").is_none());
    assert!(p["notes"].as_array().unwrap().iter().any(|n| n
        .as_str()
        .unwrap()
        .contains("attention growth with context is not modeled")));
}

#[test]
fn out_of_range_rates_are_clamped_and_noted() {
    let r = rates("clamp", &model_sha());
    let (o, out) = project(&r, &["--agents", "64", "--turns", "2", "--prefix", "1024"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let p = read(&out);
    let notes: Vec<&str> = p["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert!(notes
        .iter()
        .any(|n| n.contains("batch_decode_tok_s at 64") && n.contains("clamped")));
    assert!(notes.iter().any(|n| n.contains("prefill_tok_s at 1024")));
    assert_eq!(
        p["outputs"]["batch_decode_tok_s_at_agents"]["value"]
            .as_f64()
            .unwrap(),
        400.0
    );
}

#[test]
fn validate_accepts_a_packet_and_rejects_tampering() {
    let r = rates("validate", &model_sha());
    let (o, out) = project(&r, &["--agents", "8", "--turns", "3", "--prefix", "100"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = validate(&out);
    assert!(v.status.success(), "{}", stderr(&v));
    assert!(String::from_utf8_lossy(&v.stdout).starts_with("OK"));

    let good = read(&out);
    let tamper = |name: &str, f: &dyn Fn(&mut Value), needle: &str| {
        let mut p = good.clone();
        f(&mut p);
        let path = r.dir.join(name);
        std::fs::write(&path, serde_json::to_string_pretty(&p).unwrap()).unwrap();
        assert_clean_error(&validate(&path), needle);
    };
    tamper(
        "out.json",
        &|p| {
            let x = p["outputs"]["agent_turns_per_s"]["value"].as_f64().unwrap();
            p["outputs"]["agent_turns_per_s"]["value"] = json!(x * 1.01);
        },
        "outputs.agent_turns_per_s.value",
    );
    tamper(
        "in.json",
        &|p| p["inputs"]["prefill_tok_s"]["points"][2]["tok_s"] = json!(333.0),
        "mismatch",
    );
    tamper(
        "workload.json",
        &|p| p["workload"]["agents"] = json!(9),
        "mismatch",
    );
    tamper(
        "sha.json",
        &|p| p["packet_sha256"] = json!("0".repeat(64)),
        "packet_sha256",
    );
    tamper(
        "meta.json",
        &|p| p["meta"]["command"] = json!("fak project --edited"),
        "packet_sha256",
    );
    tamper(
        "label.json",
        &|p| p["outputs"]["wall_s"]["label"] = json!("MEASURED"),
        "outputs.wall_s.label",
    );
    tamper(
        "nosha.json",
        &|p| {
            p.as_object_mut().unwrap().remove("packet_sha256");
        },
        "packet_sha256",
    );
    let junk = r.dir.join("junk.json");
    std::fs::write(&junk, "{\"schema\": \"other\"}").unwrap();
    assert_clean_error(&validate(&junk), "fak-project/1");
}

fn fleet_json(sha: &str, runs: &[(usize, usize, f64, &str)]) -> Value {
    let runs: Vec<Value> = runs
        .iter()
        .map(|&(a, t, atps, status)| {
            json!({"profile": null, "prefix": 32, "turns": t, "agents": a, "decode": 8,
                   "result": 7, "agent_turns_per_s": atps, "wall_s": 1.0, "prefix_s": 0.1,
                   "ttft_ms_p50": 1.0, "ttft_ms_p95": 1.0, "status": status})
        })
        .collect();
    json!({"schema": "fak-bench-fleet/1", "engine": "fak", "threads": 2, "model": MODEL,
           "model_sha256": sha, "kv": "paged", "runs": runs})
}

#[test]
fn calibration_reports_relative_errors() {
    let sha = model_sha();
    let r = rates("calib", &sha);
    let proj =
        |a: f64, t: f64, rd: f64| a * t / expected_wall(a, t, 32.0, 8.0, 7.0, synthetic_rp, rd);
    // A=8 (rate 200 measured) and A=32 (400); measured 20% below and 10% above.
    let p8 = proj(8.0, 10.0, 200.0);
    let p32 = proj(32.0, 5.0, 400.0);
    let m8 = p8 / 1.25;
    let m32 = p32 / 0.9;
    let fleet = fleet_json(
        &sha,
        &[
            (8, 10, m8, "ok"),
            (32, 5, m32, "ok"),
            (16, 5, 1.0, "timeout"),
        ],
    );
    let fleet = write(&r.dir, "fleet.json", &fleet);
    let m = model_path();
    let o = fak(&[
        "project",
        "calibrate",
        "--model",
        &m,
        "--rates",
        &r.single,
        "--rates",
        &r.batch,
        "--fleet",
        &fleet,
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let c: Value = serde_json::from_slice(&o.stdout).unwrap();
    let c = &c["calibration"];
    assert_eq!(c["n_runs"], 2);
    let runs = c["runs"].as_array().unwrap();
    let rel0 = runs[0]["rel_err"].as_f64().unwrap();
    let rel1 = runs[1]["rel_err"].as_f64().unwrap();
    assert!(close(rel0, 0.25), "{rel0}");
    assert!(close(rel1, -0.1), "{rel1}");
    assert!(close(c["mean_abs_rel_err"].as_f64().unwrap(), 0.175));
    assert_eq!(runs[0]["projected_agent_turns_per_s"]["label"], "MODELED");
    assert_eq!(runs[0]["measured_agent_turns_per_s"]["label"], "MEASURED");

    // The table form, and the same section inside a projection packet.
    let t = fak(&[
        "project",
        "calibrate",
        "--model",
        &m,
        "--rates",
        &r.single,
        "--rates",
        &r.batch,
        "--fleet",
        &fleet,
    ]);
    assert!(t.status.success(), "{}", stderr(&t));
    assert!(String::from_utf8_lossy(&t.stdout).contains("25.0%"));
    let (o, out) = project(
        &r,
        &[
            "--agents", "8", "--turns", "10", "--prefix", "32", "--decode", "8", "--result", "7",
            "--fleet", &fleet,
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let p = read(&out);
    assert!(close(
        p["calibration"]["mean_abs_rel_err"].as_f64().unwrap(),
        0.175
    ));
    let v = validate(&out);
    assert!(v.status.success(), "{}", stderr(&v));
    // Tampering with a measured fleet input is caught too.
    let mut bad = p.clone();
    bad["inputs"]["fleet"]["points"][0]["agent_turns_per_s"] = json!(m8 * 2.0);
    let path = r.dir.join("bad-fleet.json");
    std::fs::write(&path, serde_json::to_string(&bad).unwrap()).unwrap();
    assert_clean_error(&validate(&path), "calibration");
}

#[test]
fn mismatched_model_sha_is_a_one_line_error() {
    let r = rates("sha", &"ab".repeat(32));
    let (o, _) = project(&r, &["--agents", "8", "--turns", "3", "--prefix", "100"]);
    assert_clean_error(&o, "sha256");
    let good = rates("sha-fleet", &model_sha());
    let fleet = write(
        &good.dir,
        "fleet.json",
        &fleet_json(&"cd".repeat(32), &[(8, 1, 1.0, "ok")]),
    );
    let m = model_path();
    let o = fak(&[
        "project",
        "calibrate",
        "--model",
        &m,
        "--rates",
        &good.single,
        "--rates",
        &good.batch,
        "--fleet",
        &fleet,
    ]);
    assert_clean_error(&o, "sha256");
}

#[test]
fn bad_invocations_are_one_line_errors() {
    let r = rates("bad", &model_sha());
    let m = model_path();
    let shape = ["--agents", "8", "--turns", "3", "--prefix", "100"];
    let mut args = vec![
        "project", "--model", &m, "--rates", &r.single, "--rates", &r.single,
    ];
    args.extend_from_slice(&shape);
    assert_clean_error(&fak(&args), "two fak-bench-single/1");
    let mut args = vec![
        "project",
        "--model",
        &m,
        "--rates",
        &r.batch,
        "--threads",
        "7",
    ];
    args.extend_from_slice(&shape);
    assert_clean_error(&fak(&args), "threads");
    let missing = r.dir.join("nope.json").display().to_string();
    let mut args = vec!["project", "--model", &m, "--rates", &missing];
    args.extend_from_slice(&shape);
    assert_clean_error(&fak(&args), "nope.json");
    let (o, _) = project(&r, &["--agents", "0", "--turns", "3", "--prefix", "100"]);
    assert_clean_error(&o, "at least 1");
    let fleet_as_rates = write(
        &r.dir,
        "f.json",
        &fleet_json(&model_sha(), &[(8, 1, 1.0, "ok")]),
    );
    let mut args = vec!["project", "--model", &m, "--rates", &fleet_as_rates];
    args.extend_from_slice(&shape);
    assert_clean_error(&fak(&args), "not a rates file");
}

/// `fak project roofline` reads the machine figures from `fak bench
/// bandwidth` / `fak bench peak` reports, names them, and labels its
/// table and JSON MODELED; a report of other threads is refused. The f32
/// peak comes from the peak report, from `--f32-gflops`, or (a report
/// from before the f32 probe) is measured in-process; attention is in
/// every phase's bound.
#[test]
fn roofline_reads_machine_reports_and_is_labelled_modeled() {
    let m = model_path();
    let dir = tmpdir("roofline");
    let bw = dir.join("bw.json");
    let pk = dir.join("peak.json");
    std::fs::write(
        &bw,
        json!({"schema": "fak-bench-bandwidth/1", "threads": 2, "read_gb_per_s_median": 20.0})
            .to_string(),
    )
    .expect("write");
    std::fs::write(
        &pk,
        json!({"schema": "fak-bench-peak/1", "threads": 2, "int8_gmacs_per_s_median": 100.0})
            .to_string(),
    )
    .expect("write");
    let (bw_s, pk_s) = (bw.display().to_string(), pk.display().to_string());
    let args = [
        "project",
        "roofline",
        "-m",
        &m,
        "-t",
        "2",
        "--agents",
        "8",
        "--turns",
        "2",
        "--prefix",
        "1024",
        "--bandwidth",
        &bw_s,
        "--peak",
        &pk_s,
    ];
    let o = fak(&[&args[..], &["--json"]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["schema"], "fak-roofline/1");
    assert_eq!(v["label"], "MODELED");
    assert_eq!(v["machine"]["read_gb_per_s"], 20.0);
    assert!(v["machine"]["peak_source"]
        .as_str()
        .expect("source")
        .contains("peak.json"));
    // A decode step of 8 agents reads the weights (135 MB of Q8_0 and the
    // tied head) once: at 20 GB/s that alone is several ms.
    let step = &v["first_decode_step"];
    assert!(step["memory_s"].as_f64().expect("s") > 0.005, "{step}");
    assert_eq!(step["tokens"], 8);
    assert!(v["machine"]["f32_gflops"].as_f64().expect("f32") > 0.0);
    assert!(v["machine"]["f32_source"]
        .as_str()
        .expect("source")
        .contains("has no f32_gflops_median"));
    for k in ["prefix", "result_ingest", "decode"] {
        assert!(v[k]["attention_s"].as_f64().expect("s") > 0.0, "{k}");
    }
    let pk32 = dir.join("peak-f32.json");
    std::fs::write(
        &pk32,
        json!({"schema": "fak-bench-peak/1", "threads": 2, "int8_gmacs_per_s_median": 100.0,
               "f32_gflops_median": 40.0})
        .to_string(),
    )
    .expect("write");
    let pk32_s = pk32.display().to_string();
    let mut with_f32 = args.to_vec();
    // The last argument is the --peak file.
    *with_f32.last_mut().expect("args") = &pk32_s;
    let o = fak(&[&with_f32[..], &["--json"]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    let v32: Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v32["machine"]["f32_gflops"], 40.0);
    assert!(v32["machine"]["f32_source"]
        .as_str()
        .expect("source")
        .contains("peak-f32.json"));
    // 40 GFLOP/s = 20 G FMA/s over the prefix's attention multiply-adds.
    let att = v32["prefix"]["attention_macs"].as_f64().expect("macs");
    let att_s = v32["prefix"]["attention_s"].as_f64().expect("s");
    assert!(
        (att_s - att / 20e9).abs() < 1e-12 * att_s.max(1.0),
        "{att_s}"
    );
    let o = fak(&[&with_f32[..], &["--f32-gflops", "10", "--json"]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    let v10: Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v10["machine"]["f32_gflops"], 10.0);
    assert!(v10["machine"]["f32_source"]
        .as_str()
        .expect("source")
        .contains("--f32-gflops"));
    let total = |v: &Value| v["total_s"].as_f64().expect("total");
    assert!(total(&v10) > total(&v32));
    let o = fak(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.starts_with("MODELED roofline"), "{text}");
    assert!(text.contains("result ingest"), "{text}");
    let o = fak(&[
        "project",
        "roofline",
        "-m",
        &m,
        "-t",
        "1",
        "--agents",
        "8",
        "--turns",
        "2",
        "--prefix",
        "64",
        "--bandwidth",
        &bw_s,
        "--peak",
        &pk_s,
    ]);
    assert_clean_error(&o, "measured with 2 threads");
}
