"""Unit tests of bench/compare.py's folding logic on synthetic reports.

Run from the repository root: ``python3 -m unittest bench/test_compare.py``.
Standard library only.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tempfile
import unittest
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))
import compare  # noqa: E402
import workloads  # noqa: E402

COMMON = {"model": "m.gguf", "model_sha256": "ab", "threads": 2, "cpu": "cpu"}


def settings(fa: str | None, ty: str | None) -> dict[str, str]:
    """A peer report's attention settings; None leaves the key out, as
    reports written before --flash-attn / --type-kv did."""
    out = {}
    if fa is not None:
        out["flash_attn"] = fa
    if ty is not None:
        out["type_kv"] = ty
    return out


def batch_report(engine: str, kv: str, results: list[dict[str, Any]], fa: str | None = None, ty: str | None = None) -> dict[str, Any]:
    return {"schema": compare.BATCH_SCHEMA, "engine": engine, "kv": kv, **settings(fa, ty), "token_stream": "s", **COMMON, "results": results}


def ok(b: int, tok_s: float) -> dict[str, Any]:
    return {"batch": b, "status": "ok", "decode_tok_s": tok_s}


def skip(b: int) -> dict[str, Any]:
    return {"batch": b, "status": "skipped: n_seq_max cap 256"}


def fleet_run(profile: str, agents: int, rate: float | None, sha: str = "x", **extra: Any) -> dict[str, Any]:
    run: dict[str, Any] = {"profile": profile, "prefix": 1024, "turns": 10, "agents": agents, "decode": 32, "result": 64}
    if rate is None:
        run["status"] = "skipped: n_seq_max cap 256"
    else:
        run.update(
            status="ok", agent_turns_per_s=rate, ttft_ms_p50=10.0 * rate, ttft_ms_p95=20.0 * rate, generated_sha256=sha
        )
    run.update(extra)
    return run


def fleet_report(engine: str, kv: str, runs: list[dict[str, Any]], fa: str | None = None, ty: str | None = None) -> dict[str, Any]:
    return {"schema": compare.FLEET_SCHEMA, "engine": engine, "kv": kv, **settings(fa, ty), "token_stream": "s", **COMMON, "runs": runs}


def single_report(engine: str, decode: float) -> dict[str, Any]:
    return {
        "schema": compare.SCHEMA,
        "engine": engine,
        **COMMON,
        "reps": 3,
        "isa": "avx2",
        "prefill": [{"n_tokens": 16, "tok_s": 100.0}],
        "decode": {"tok_s": decode, "step_ms": {"median": 1000.0 / decode}},
    }


class Files:
    """Writes reports into a temporary directory; returns their paths."""

    def __init__(self) -> None:
        self.dir = tempfile.TemporaryDirectory()

    def __enter__(self) -> "Files":
        return self

    def __exit__(self, *exc: object) -> None:
        self.dir.cleanup()

    def write(self, name: str, obj: dict[str, Any]) -> Path:
        p = Path(self.dir.name) / name
        p.write_text(json.dumps(obj), encoding="utf-8")
        return p


def run_main(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = compare.main(args)
    return rc, out.getvalue(), err.getvalue()


class BatchFold(unittest.TestCase):
    def test_rows_best_peer_and_peak(self) -> None:
        fak = (Path("f"), batch_report("fak", "paged", [ok(1, 100.0), ok(8, 400.0), ok(512, 900.0)]))
        uni = (Path("u"), batch_report("llama.cpp", "unified", [ok(1, 90.0), ok(8, 500.0), skip(512)]))
        per = (Path("p"), batch_report("llama.cpp", "per-seq", [ok(1, 120.0), ok(8, 300.0), skip(512)]))
        f, peers = compare.split_engines([per, fak, uni], compare.BATCH_SCHEMA)
        self.assertEqual([p[1]["kv"] for p in peers], ["unified", "per-seq"])
        t = compare.batch_table(f, peers)
        rows = {r["batch"]: r for r in t["rows"]}
        self.assertEqual(sorted(rows), [1, 8, 512])
        self.assertEqual(rows[1]["best_peer"], {"config": "per-seq fa=auto f16", "value": 120.0})
        self.assertAlmostEqual(rows[1]["ratio"], 100.0 / 120.0)
        self.assertEqual(rows[8]["best_peer"]["config"], "unified fa=auto f16")
        self.assertAlmostEqual(rows[8]["ratio"], 0.8)
        self.assertIsNone(rows[512]["best_peer"])
        self.assertIsNone(rows[512]["ratio"])
        self.assertEqual(rows[512]["llama.cpp"]["unified fa=auto f16"]["status"], "skipped: n_seq_max cap 256")
        self.assertEqual(t["peak"]["fak"], {"value": 900.0, "batch": 512})
        self.assertEqual(t["peak"]["best_peer"], {"value": 500.0, "batch": 8, "config": "unified fa=auto f16"})
        self.assertAlmostEqual(t["peak"]["ratio"], 1.8)

    def test_batch_missing_in_one_report_is_absent(self) -> None:
        fak = (Path("f"), batch_report("fak", "paged", [ok(1, 100.0), ok(32, 300.0)]))
        uni = (Path("u"), batch_report("llama.cpp", "unified", [ok(1, 50.0)]))
        t = compare.batch_table(fak, [uni])
        r32 = [r for r in t["rows"] if r["batch"] == 32][0]
        self.assertEqual(r32["llama.cpp"]["unified fa=auto f16"]["status"], "absent")
        self.assertIsNone(r32["ratio"])
        self.assertEqual(t["configs"], ["unified fa=auto f16"])

    def test_engine_checks(self) -> None:
        a = (Path("a"), batch_report("llama.cpp", "unified", [ok(1, 1.0)]))
        b = (Path("b"), batch_report("llama.cpp", "unified", [ok(1, 1.0)]))
        f = (Path("f"), batch_report("fak", "paged", [ok(1, 1.0)]))
        with self.assertRaises(compare.CompareError):
            compare.split_engines([a, b], compare.BATCH_SCHEMA)  # no fak
        with self.assertRaises(compare.CompareError):
            compare.split_engines([f, a, b], compare.BATCH_SCHEMA)  # same configuration twice
        # an old report (no settings) is the library defaults: auto, f16
        c = (Path("c"), batch_report("llama.cpp", "unified", [ok(1, 1.0)], fa="auto", ty="f16"))
        with self.assertRaises(compare.CompareError):
            compare.split_engines([f, a, c], compare.BATCH_SCHEMA)
        d = (Path("d"), batch_report("llama.cpp", "unified", [ok(1, 1.0)], fa="off"))
        _, peers = compare.split_engines([f, d, a], compare.BATCH_SCHEMA)
        self.assertEqual([compare.peer_config(p[1]) for p in peers], ["unified fa=auto f16", "unified fa=off f16"])
        with self.assertRaises(compare.CompareError):
            fl = (Path("x"), fleet_report("llama.cpp", "unified", []))
            compare.split_engines([f, fl], compare.BATCH_SCHEMA)  # schema mix

    def test_duplicate_batch_rejected(self) -> None:
        with self.assertRaises(compare.CompareError):
            compare.batch_results((Path("d"), batch_report("fak", "paged", [ok(1, 1.0), ok(1, 2.0)])))

    def test_cli_text_and_json(self) -> None:
        with Files() as fs:
            f = fs.write("f.json", batch_report("fak", "paged", [ok(1, 100.0), ok(512, 900.0)]))
            u = fs.write("u.json", batch_report("llama.cpp", "unified", [ok(1, 50.0), skip(512)]))
            p = fs.write("p.json", batch_report("llama.cpp", "per-seq", [ok(1, 80.0), skip(512)]))
            rc, out, _ = run_main(["batch", str(u), str(f), str(p)])
            self.assertEqual(rc, 0)
            self.assertIn("peak: fak 900.00 (B=512) vs llama.cpp 80.00 (per-seq fa=auto f16, B=1)", out)
            self.assertIn("skipped", out)
            rc, out, _ = run_main(["batch", str(f), str(u), "--json"])
            self.assertEqual(rc, 0)
            obj = json.loads(out)
            self.assertEqual(obj["mode"], "batch")
            self.assertAlmostEqual(obj["rows"][0]["ratio"], 2.0)
            # without the mode word the schema decides
            rc, out2, _ = run_main([str(f), str(u), "--json"])
            self.assertEqual(rc, 0)
            self.assertEqual(json.loads(out2), obj)

    def test_mismatch_header(self) -> None:
        fak = batch_report("fak", "paged", [ok(1, 1.0)])
        peer = batch_report("llama.cpp", "unified", [ok(1, 1.0)])
        peer["threads"] = 4
        head = compare.multi_header((Path("f"), fak), [(Path("u"), peer)])
        self.assertTrue(any("threads" in h and "MISMATCH" in h for h in head))
        self.assertIn("model: m.gguf", head)

    def test_token_streams_compare_by_lcg_constants(self) -> None:
        fak = batch_report("fak", "paged", [ok(1, 1.0)])
        peer = batch_report("llama.cpp", "unified", [ok(1, 1.0)])
        fak["token_stream"] = "lcg state0=1 mul=2 inc=3 id_n=(state_n>>33)%n_vocab; prefix first"
        peer["token_stream"] = "lcg state0=1 mul=2 inc=3 stream[n]=(state_n>>33)%n_vocab, worded otherwise"
        head = compare.multi_header((Path("f"), fak), [(Path("u"), peer)])
        self.assertIn("token_stream: the same LCG in every report (state0 1, mul 2, inc 3)", head)
        peer["token_stream"] = "lcg state0=1 mul=2 inc=4"
        head = compare.multi_header((Path("f"), fak), [(Path("u"), peer)])
        self.assertTrue(any(h.startswith("token_stream:") and "MISMATCH" in h for h in head))
        fak["token_stream"] = peer["token_stream"] = "s"
        head = compare.multi_header((Path("f"), fak), [(Path("u"), peer)])
        self.assertIn("token_stream: s", head)


class FleetFold(unittest.TestCase):
    def test_fastest_llamacpp_and_ratio(self) -> None:
        abl = {"agent_turns_per_s": 0.5, "tokens_reused": 0}
        fak = (Path("f"), fleet_report("fak", "paged", [fleet_run("probe", 8, 3.0, "g", ablation=abl)]))
        uni = (Path("u"), fleet_report("llama.cpp", "unified", [fleet_run("probe", 8, 1.5, "g")]))
        per = (Path("p"), fleet_report("llama.cpp", "per-seq", [fleet_run("probe", 8, 2.0, "h")]))
        f, peers = compare.split_engines([fak, per, uni], compare.FLEET_SCHEMA)
        t = compare.fleet_table(f, peers)
        self.assertEqual(len(t["rows"]), 1)
        r = t["rows"][0]
        self.assertEqual(r["fastest_llamacpp"], {"config": "per-seq fa=auto f16", "agent_turns_per_s": 2.0})
        self.assertAlmostEqual(r["fak_vs_fastest_llamacpp"], 1.5)
        self.assertEqual(r["llama.cpp"]["unified fa=auto f16"]["ttft_ms_p50"], 15.0)
        self.assertEqual(r["fak"]["ttft_ms_p95"], 60.0)
        self.assertEqual(r["generated_sha256_match"], {"unified fa=auto f16": True, "per-seq fa=auto f16": False})
        self.assertEqual(t["reference_tried"], ["unified fa=auto f16", "per-seq fa=auto f16"])
        self.assertEqual(t["reference_not_tried"], ["unified fa=off f16", "per-seq fa=off f16"])
        self.assertEqual(r["internal"], {"fak_ablation": abl})
        text = compare.render_fleet([], t)
        self.assertNotIn("ablation", text)
        self.assertIn("1.50x", text)
        self.assertIn("not tried", text)
        self.assertNotIn("tuned", text)

    def test_reference_is_the_fastest_of_the_grid_at_f16(self) -> None:
        fak = (Path("f"), fleet_report("fak", "paged", [fleet_run("probe", 8, 4.0)]))
        peers = [
            (Path("ua"), fleet_report("llama.cpp", "unified", [fleet_run("probe", 8, 1.4)], fa="auto", ty="f16")),
            (Path("uo"), fleet_report("llama.cpp", "unified", [fleet_run("probe", 8, 1.1)], fa="off", ty="f16")),
            (Path("pa"), fleet_report("llama.cpp", "per-seq", [fleet_run("probe", 8, 2.0)], fa="auto", ty="f16")),
            (Path("po"), fleet_report("llama.cpp", "per-seq", [fleet_run("probe", 8, 2.1)], fa="off", ty="f16")),
            # faster, but outside the reference grid: FA on, and a q8_0 cache
            (Path("pn"), fleet_report("llama.cpp", "per-seq", [fleet_run("probe", 8, 9.0)], fa="on", ty="f16")),
            (Path("p8"), fleet_report("llama.cpp", "per-seq", [fleet_run("probe", 8, 8.0)], fa="auto", ty="q8_0")),
        ]
        f, ps = compare.split_engines([fak, *reversed(peers)], compare.FLEET_SCHEMA)
        self.assertEqual(
            [compare.peer_config(p[1]) for p in ps],
            [
                "unified fa=auto f16",
                "unified fa=off f16",
                "per-seq fa=auto f16",
                "per-seq fa=auto q8_0",
                "per-seq fa=off f16",
                "per-seq fa=on f16",
            ],
        )
        t = compare.fleet_table(f, ps)
        r = t["rows"][0]
        self.assertEqual(r["fastest_llamacpp"], {"config": "per-seq fa=off f16", "agent_turns_per_s": 2.1})
        self.assertAlmostEqual(r["fak_vs_fastest_llamacpp"], 4.0 / 2.1)
        self.assertEqual(t["reference_not_tried"], [])
        # fak ran f16: no q8_0 row
        self.assertNotIn("fastest_llamacpp_q8_0", r)
        fak8 = (Path("f"), {**fak[1], "kv_type": "q8_0"})
        r8 = compare.fleet_table(fak8, ps)["rows"][0]
        self.assertEqual(r8["fastest_llamacpp_q8_0"], {"config": "per-seq fa=auto q8_0", "agent_turns_per_s": 8.0})
        self.assertAlmostEqual(r8["fak_vs_fastest_llamacpp_q8_0"], 0.5)
        self.assertIn("q8_0 KV like for like", compare.render_fleet([], compare.fleet_table(fak8, ps)))

    def test_runs_matched_by_shape_and_skips(self) -> None:
        fak = (Path("f"), fleet_report("fak", "paged", [fleet_run("long", 8, 1.0), fleet_run("long", 300, 0.5)]))
        uni = (Path("u"), fleet_report("llama.cpp", "unified", [fleet_run("long", 300, None), fleet_run("long", 8, 2.0)]))
        t = compare.fleet_table(fak, [uni])
        by_a = {r["agents"]: r for r in t["rows"]}
        self.assertAlmostEqual(by_a[8]["fak_vs_fastest_llamacpp"], 0.5)
        self.assertIsNone(by_a[300]["fastest_llamacpp"])
        self.assertIsNone(by_a[300]["fak_vs_fastest_llamacpp"])
        self.assertTrue(by_a[300]["llama.cpp"]["unified fa=auto f16"]["status"].startswith("skipped"))
        self.assertNotIn("internal", by_a[8])

    def test_explicit_shape_runs_match_across_engines(self) -> None:
        # Regression: fak reports an explicit-shape run with profile null,
        # the peer with "custom"; they are the same run.
        fak = (Path("f"), fleet_report("fak", "paged", [fleet_run(None, 8, 1.2)]))  # type: ignore[arg-type]
        per = (Path("p"), fleet_report("llama.cpp", "per-seq", [fleet_run("custom", 8, 0.6)]))
        t = compare.fleet_table(fak, [per])
        self.assertEqual(len(t["rows"]), 1)
        self.assertAlmostEqual(t["rows"][0]["fak_vs_fastest_llamacpp"], 2.0)
        self.assertIn("custom P1024", compare.render_fleet([], t))

    def test_peer_only_run_is_listed(self) -> None:
        fak = (Path("f"), fleet_report("fak", "paged", [fleet_run("probe", 8, 1.0)]))
        uni = (Path("u"), fleet_report("llama.cpp", "unified", [fleet_run("probe", 8, 1.0), fleet_run("probe", 12, 1.0)]))
        t = compare.fleet_table(fak, [uni])
        self.assertEqual([r["agents"] for r in t["rows"]], [8, 12])
        self.assertEqual(t["rows"][1]["fak"]["status"], "absent")

    def test_cli_json_has_fak_vs_fastest_llamacpp(self) -> None:
        with Files() as fs:
            f = fs.write("f.json", fleet_report("fak", "paged", [fleet_run("probe", 8, 3.0)]))
            u = fs.write("u.json", fleet_report("llama.cpp", "unified", [fleet_run("probe", 8, 1.0)]))
            p = fs.write("p.json", fleet_report("llama.cpp", "per-seq", [fleet_run("probe", 8, 2.0)]))
            rc, out, _ = run_main(["fleet", str(f), str(u), str(p), "--json"])
            self.assertEqual(rc, 0)
            obj = json.loads(out)
            for r in obj["rows"]:
                self.assertIn("fak_vs_fastest_llamacpp", r)
            self.assertAlmostEqual(obj["rows"][0]["fak_vs_fastest_llamacpp"], 1.5)
            rc, out, _ = run_main(["fleet", str(f), str(u), str(p)])
            self.assertEqual(rc, 0)
            self.assertIn("probe P1024 T10 A8 D32 R64", out)
            rc, _, err = run_main(["fleet", str(f)])
            self.assertEqual(rc, 1)
            self.assertIn("1 to 8 llama.cpp reports", err)


class SingleUnchanged(unittest.TestCase):
    def test_two_positional_single_reports(self) -> None:
        with Files() as fs:
            a = fs.write("a.json", single_report("llama.cpp", 50.0))
            b = fs.write("b.json", single_report("fak", 100.0))
            rc, out, _ = run_main([str(a), str(b), "--json"])
            self.assertEqual(rc, 0)
            obj = json.loads(out)
            self.assertEqual(obj["fak"], str(b))
            dec = [r for r in obj["rows"] if r["metric"] == "decode tok/s"][0]
            self.assertAlmostEqual(dec["ratio"], 2.0)
            rc, out, _ = run_main([str(a), str(b)])
            self.assertEqual(rc, 0)
            self.assertIn("decode tok/s", out)

    def test_schema_mismatch_is_an_error(self) -> None:
        with Files() as fs:
            a = fs.write("a.json", single_report("llama.cpp", 50.0))
            b = fs.write("b.json", batch_report("fak", "paged", []))
            rc, _, err = run_main([str(a), str(b)])
            self.assertEqual(rc, 1)
            self.assertIn("schema", err)


class Workloads(unittest.TestCase):
    def test_batch_layout(self) -> None:
        w = workloads.BatchWorkload.make(1000, 3)
        ids = workloads.lcg_ids(1000, 96)
        self.assertEqual(w.prompt(1), ids[16:32])  # stream[17..32]
        self.assertEqual(w.step(0), ids[48:51])  # stream[16B+1 ..]
        self.assertEqual(w.step(15), ids[48 + 45 : 51 + 45])

    def test_fleet_counts(self) -> None:
        s = workloads.FleetShape(64, 2, 3, 4, 8)
        self.assertEqual(s.final_context(), 64 + 2 * 12 - 1)
        # P + ingest (3*8 + 3*9) + decode steps (2 turns * 3 agents * 3)
        self.assertEqual(s.tokens_computed(), 64 + 24 + 27 + 18)
        ids = workloads.lcg_ids(1000, s.stream_len())
        self.assertEqual(s.result_ids(ids, 1, 0), ids[64 + 24 : 64 + 32])
        self.assertEqual([len(v) for v in workloads.PROFILES.values()], [1, 8, 8, 4])

    def test_generated_sha_order(self) -> None:
        a = workloads.generated_sha256([[[1, 2]], [[3]]])
        b = workloads.generated_sha256([[[3]], [[1, 2]]])
        self.assertNotEqual(a, b)
        self.assertEqual(workloads.nearest_rank([1.0, 2.0, 3.0, 4.0], 0.5), 2.0)
        self.assertEqual(workloads.nearest_rank([1.0, 2.0, 3.0, 4.0], 0.95), 4.0)


if __name__ == "__main__":
    unittest.main()
