//! The library's public API: params in, typed errors or reports out. The
//! commands' flags and printed output are tested end to end in fak-cli
//! (`tests/cli.rs`, `tests/project.rs`).

use std::path::{Path, PathBuf};

use fak_bench::project::{self, ProjectionParams, RatesParams};
use fak_bench::{evict, fleet, peak, Error, ModelSpec, Workload};
use serde_json::{json, Value};

const MODEL: &str = "smollm2-135m-instruct-q8_0.gguf";

fn model_path() -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../models")
        .join(MODEL);
    assert!(
        p.exists(),
        "{} is missing: run scripts/fetch-models.sh",
        p.display()
    );
    p
}

fn spec(path: &str) -> ModelSpec {
    ModelSpec {
        path: path.into(),
        threads: Some(1),
    }
}

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fak-bench-api-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("tmp dir");
    d
}

/// Bad params are [`Error::Params`], found before any model is loaded.
#[test]
fn bad_params_fail_before_loading_the_model() {
    let e = fleet::run(&fleet::Params {
        model: spec("/nonexistent.gguf"),
        workloads: fleet::Workloads::Profile("nope".into()),
        ablation: false,
        budget: 512,
        block_size: 256,
        kv_type: fak_model::KvType::F16,
        machine: Default::default(),
        speculative: fak_engine::Speculative::Off,
    })
    .unwrap_err();
    assert!(matches!(e, Error::Params(_)), "{e:?}");
    assert!(e.to_string().contains("unknown profile"), "{e}");

    let zero = Workload {
        prefix: 1,
        turns: 0,
        agents: 1,
        decode: 1,
        result: 1,
    };
    let e = fleet::run(&fleet::Params {
        model: spec("/nonexistent.gguf"),
        workloads: fleet::Workloads::One(zero),
        ablation: false,
        budget: 512,
        block_size: 256,
        kv_type: fak_model::KvType::F16,
        machine: Default::default(),
        speculative: fak_engine::Speculative::Off,
    })
    .unwrap_err();
    assert!(matches!(e, Error::Params(_)), "{e:?}");

    let e = evict::run(&evict::Params {
        model: spec("/nonexistent.gguf"),
        len: 10,
        span: 20,
        at: None,
        reps: 1,
        ubatch: 512,
    })
    .unwrap_err();
    assert!(matches!(e, Error::Params(_)), "{e:?}");

    // A missing model file is a load error naming the path.
    let e = evict::run(&evict::Params {
        model: spec("/nonexistent.gguf"),
        len: 40,
        span: 8,
        at: Some(20),
        reps: 1,
        ubatch: 512,
    })
    .unwrap_err();
    assert!(matches!(e, Error::Load { .. }), "{e:?}");
    assert!(
        e.to_string().starts_with("loading /nonexistent.gguf"),
        "{e}"
    );
}

/// A probe's report starts with the header's keys it has, in order.
#[test]
fn peak_report_keys_lead_with_the_header() {
    let r = peak::run(&peak::Params {
        threads: Some(1),
        rounds: 1000,
        reps: 1,
    })
    .expect("peak");
    let text = serde_json::to_string(&r).expect("json");
    assert!(
        text.starts_with(r#"{"schema":"fak-bench-peak/1","cpu":"#),
        "{text}"
    );
    let v: Value = serde_json::from_str(&text).expect("json");
    let keys: Vec<&str> = v
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    for k in [
        "isa",
        "threads",
        "rounds",
        "reps",
        "int8_gmacs_per_s_median",
        "checksum",
        "f32_gflops_median",
        "f32_gflops_runs",
        "f32_fmas_per_pass",
        "f32_checksum",
    ] {
        assert!(keys.contains(&k), "{k} missing from {keys:?}");
    }
    assert!(r.f32_gflops_median.is_finite() && r.f32_gflops_median > 0.0);
    // 1 thread × 1000 rounds × 192 FMAs, as the kernel counted them.
    assert_eq!(r.f32_fmas_per_pass, 1000 * 192);
    assert!(r.f32_checksum.is_finite());
    for k in ["engine", "engine_version", "model", "model_sha256"] {
        assert!(!keys.contains(&k), "{k} should not be written");
    }
}

/// A packet made from rates files validates from its file; a tampered one
/// is [`Error::NotValid`] with the first mismatch.
#[test]
fn packets_validate_and_tampering_is_not_valid() {
    let model = model_path();
    let sha = fak_bench::sha256_file(&model).expect("sha");
    let dir = tmpdir("packet");
    let single = json!({
        "schema": "fak-bench-single/1", "threads": 2, "model_sha256": sha,
        "prefill": [{"n_tokens": 16, "tok_s": 100.0}, {"n_tokens": 256, "tok_s": 300.0}],
    });
    let batch = json!({
        "schema": "fak-bench-batch/1", "threads": 2, "model_sha256": sha,
        "results": [{"batch": 1, "status": "ok", "decode_tok_s": 50.0},
                    {"batch": 32, "status": "ok", "decode_tok_s": 400.0}],
    });
    let write = |name: &str, v: &Value| {
        let p = dir.join(name);
        std::fs::write(&p, v.to_string()).expect("write");
        p
    };
    let rates = vec![write("single.json", &single), write("batch.json", &batch)];
    let params = ProjectionParams {
        rates: RatesParams {
            model,
            rates,
            threads: Some(2),
        },
        workload: Workload {
            prefix: 100,
            turns: 3,
            agents: 4,
            decode: 8,
            result: 16,
        },
        fleet: None,
        command: "test".into(),
    };
    let packet = project::projection(&params).expect("packet");
    assert_eq!(packet["schema"], "fak-project/1");
    assert_eq!(packet["workload"]["agents"], 4);
    assert!(project::packet_table(&packet).starts_with("MODELED projection for"));
    let good = write("packet.json", &packet);
    project::validate_file(&good).expect("valid");

    let mut bad = packet.clone();
    bad["outputs"]["wall_s"]["value"] = json!(1.0);
    let bad = write("bad.json", &bad);
    let e = project::validate_file(&bad).unwrap_err();
    assert!(matches!(e, Error::NotValid { .. }), "{e:?}");
    let chain = format!("{e}: {}", std::error::Error::source(&e).expect("source"));
    assert!(
        chain.contains("mismatch at outputs.wall_s.value"),
        "{chain}"
    );

    // A threads mismatch with the rates files is an input error.
    let mut p = params.clone();
    p.rates.threads = Some(3);
    let e = project::projection(&p).unwrap_err();
    assert!(matches!(e, Error::Input(_)), "{e:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A real fleet run reports, beside its measured phases, the MODELED
/// bound of each phase on the machine measured in-process, and achieved
/// fractions of that roofline in (0, 1.5].
#[test]
fn fleet_reports_its_roofline_and_achieved_fraction() {
    let m = model_path();
    let r = fleet::run(&fleet::Params {
        model: ModelSpec {
            path: m,
            threads: Some(2),
        },
        workloads: fleet::Workloads::One(Workload {
            prefix: 32,
            turns: 2,
            agents: 2,
            decode: 3,
            result: 4,
        }),
        ablation: false,
        budget: 512,
        block_size: 256,
        kv_type: fak_model::KvType::F16,
        machine: Default::default(),
        speculative: fak_engine::Speculative::Off,
    })
    .expect("fleet run");
    let v = serde_json::to_value(&r).expect("json");
    let mach = &v["machine"];
    assert_eq!(mach["threads"], 2);
    assert!(mach["read_gb_per_s"].as_f64().expect("bandwidth") > 0.0);
    assert!(mach["int8_gmacs_per_s"].as_f64().expect("peak") > 0.0);
    assert!(mach["f32_gflops"].as_f64().expect("f32 peak") > 0.0);
    assert!(mach["f32_source"]
        .as_str()
        .expect("source")
        .starts_with("measured in-process"));
    assert!(mach["bandwidth_source"]
        .as_str()
        .expect("source")
        .starts_with("measured in-process"));
    let run = &v["runs"][0];
    let rl = &run["roofline"];
    assert_eq!(rl["label"], "MODELED");
    // 2 turns × (3 − 1) decode steps of 2 agents.
    assert_eq!(rl["decode"]["units"], 4);
    assert_eq!(rl["decode"]["tokens"], 8);
    assert!(rl["decode"]["bound_s"].as_f64().expect("bound") > 0.0);
    // The attention arithmetic is in every phase's bound.
    for k in ["prefix", "result_ingest", "decode"] {
        assert!(
            rl[k]["attention_s"].as_f64().expect("attention") > 0.0,
            "{k}"
        );
    }
    for k in ["prefix", "ingest", "decode", "overall"] {
        let f = rl["achieved_fraction"][k].as_f64().expect("fraction");
        assert!(f > 0.0 && f <= 1.5, "{k}: {f} ({rl})");
    }
    for k in [
        "ingest_matmul_gmacs_per_s",
        "decode_matmul_gmacs_per_s",
        "decode_attention_gmacs_per_s",
    ] {
        assert!(rl["achieved_rates"][k].as_f64().expect("rate") > 0.0, "{k}");
    }
    assert!(r.table().contains("achieved fraction of the roofline"));
}

/// `--speculative lookup` on a fleet: the same generated ids as plain
/// decoding, and the report counts the drafts and the accepted ones.
#[test]
fn a_speculative_fleet_run_generates_the_same_ids_and_reports_acceptance() {
    let run = |speculative| {
        fleet::run(&fleet::Params {
            model: ModelSpec {
                path: model_path(),
                threads: Some(2),
            },
            workloads: fleet::Workloads::One(Workload {
                prefix: 32,
                turns: 3,
                agents: 2,
                decode: 24,
                result: 4,
            }),
            ablation: false,
            budget: 512,
            block_size: 256,
            kv_type: fak_model::KvType::F16,
            machine: Default::default(),
            speculative,
        })
        .expect("fleet run")
    };
    let off = run(fak_engine::Speculative::Off);
    let on = run(fak_engine::Speculative::Lookup(
        fak_engine::LookupParams::default(),
    ));
    let (a, b) = (&off.runs[0].result, &on.runs[0].result);
    assert_eq!(a.generated_sha256, b.generated_sha256);
    assert_eq!((a.draft_tokens, off.speculative), (0, "off"));
    assert_eq!(on.speculative, "lookup");
    assert!(
        b.draft_tokens > 0 && b.accepted_draft_tokens <= b.draft_tokens,
        "{} drafted, {} accepted",
        b.draft_tokens,
        b.accepted_draft_tokens
    );
    assert!(b.accepted_draft_tokens > 0, "no draft accepted");
    assert!(on.table().contains("draft tokens accepted"));
}
