"""Unit tests of bench/plot_fleet_http.py, on committed and synthetic reports.

Run from the repository root: ``python3 -m unittest bench/test_plot_fleet_http.py``.
Standard library only.
"""

from __future__ import annotations

import contextlib
import io
import json
import statistics
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import plot_fleet_http as pfh  # noqa: E402

SVG = "{http://www.w3.org/2000/svg}"
ROOT = Path(__file__).resolve().parent.parent
ZEN5 = ROOT / "docs/results/2026-12-02-zen5/fleet-http"
PROBE = (1024, 10, 8, 32, 64)


def http_report(engine: str, atps: float, shape: tuple[int, ...] = PROBE, **extra: Any) -> dict[str, Any]:
    """A fak-bench-fleet-http/1 report, with the fields bench/fleet_http.py writes."""
    return {
        "schema": pfh.HTTP_SCHEMA,
        "engine": engine,
        "url": "http://127.0.0.1:1",
        "workload": dict(zip(pfh.SHAPE_KEYS, shape)),
        "n_vocab": 49152,
        "turns_done": shape[1] * shape[2],
        "wall_s": shape[1] * shape[2] / atps if atps else 0.0,
        "prefix_s": 0.5,
        "agent_turns_per_s": atps,
        "ttft_ms": {"n": 0},
        "turn_ms": {"n": 0},
        "prompt_tokens": None,
        "generated_sha256": None,
        "turns_final_error": 0,
        "final_error": None,
        **extra,
    }


def inprocess_report(atps: float, shape: tuple[int, ...] = PROBE, status: str = "ok") -> dict[str, Any]:
    """A fak-bench-fleet/1 report of one run, as fleet_http.sh writes it."""
    run = {**dict(zip(pfh.SHAPE_KEYS, shape)), "profile": None, "agent_turns_per_s": atps, "status": status}
    return {"schema": pfh.FLEET_SCHEMA, "engine": "fak", "threads": 2, "model": "m.gguf", "kv": "paged", "runs": [run]}


class Base(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = Path(self.tmp.name)
        self.out = self.dir / "out" / "fleet-http.svg"

    def tearDown(self) -> None:
        self.tmp.cleanup()

    def round_dir(self, name: str, reports: dict[str, Any], env: str | None = None) -> str:
        d = self.dir / name
        d.mkdir()
        for file, r in reports.items():
            (d / file).write_text(r if isinstance(r, str) else json.dumps(r), encoding="utf-8")
        if env is not None:
            (d / "env.txt").write_text(env, encoding="utf-8")
        return str(d)

    def plot(self, *args: str) -> tuple[int, str]:
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            rc = pfh.main(["--out", str(self.out), *args])
        return rc, err.getvalue()

    def svg(self) -> ET.Element:
        return ET.parse(self.out).getroot()


class CommittedReports(Base):
    """The Zen 5 rounds of docs/results, whose figures FLEET.md and its Zen 5 notes quote."""

    def test_zen5_probe_and_bounded_long(self) -> None:
        dirs = [str(ZEN5 / f"{s}-{i}") for s in ("probe", "bl") for i in (1, 2, 3)]
        rc, err = self.plot("--cpu", "AMD Zen 5", *dirs)
        self.assertEqual(rc, 0, err)
        root = self.svg()
        panels = root.findall(f"{SVG}g")
        self.assertEqual([p.get("data-shape") for p in panels], ["P1024 T10 A8 D32 R64", "P1024 T40 A8 D32 R48"])
        for panel, shape in zip(panels, ("probe", "bl")):
            bars = {b.get("data-config"): float(b.get("data-median", "nan")) for b in panel.iter(f"{SVG}rect")
                    if b.get("class") == "bar"}
            self.assertEqual(list(bars), [pfh.INPROCESS, pfh.HTTP, "llama-server-fa-off-kvu-off"])
            # Each bar is the median of the three rounds' reports, read here
            # independently of the plotter.
            for config, median in bars.items():
                vals = []
                for i in (1, 2, 3):
                    r = json.loads((ZEN5 / f"{shape}-{i}" / f"{config}.json").read_text())
                    vals.append(r["runs"][0]["agent_turns_per_s"] if config == pfh.INPROCESS else r["agent_turns_per_s"])
                self.assertAlmostEqual(median, statistics.median(vals), places=4)
            dots = [c for c in panel.iter(f"{SVG}circle") if c.get("class") == "round"]
            self.assertEqual(len(dots), 9)
        probe = ["".join(t.itertext()) for t in panels[0].iter(f"{SVG}text")]
        # docs/journal/2026-12-02-zen5-fleet.md, "Over HTTP on the Zen 5": probe
        # 3.44, 3.71, 3.52 -> 3.52x (the ratio of the medians would be 3.71);
        # HTTP / in process 0.88, 0.80, 0.80 -> 0.80.
        self.assertIn("fak serve / fastest llama-server: 3.52×", probe)
        self.assertIn("fak serve / fak in process: 0.80", probe)
        bl = [("".join(t.itertext())) for t in panels[1].iter(f"{SVG}text")]
        self.assertIn("fak serve / fastest llama-server: 2.28×", bl)
        self.assertIn("fak serve / fak in process: 0.79", bl)
        # Every bounded-long llama-server round had one turn whose last event failed.
        self.assertIn("* 3 of 960 turns ended in an error event", bl)
        self.assertIn("1.694*", bl)
        title = "".join(root.find(f"{SVG}text").itertext())  # type: ignore[union-attr]
        self.assertEqual(title, "Agent fleet over HTTP: smollm2-135m-instruct-q8_0.gguf, 2 threads")
        self.assertIn("3.52x (3 rounds)", err)


class Synthetic(Base):
    def test_medians_fastest_setting_and_paired_ratios(self) -> None:
        # Two rounds: even count, so a median is the mean of the two. The
        # fastest llama-server setting is the one with the higher median
        # (kvu-on here), and the ratio pairs rounds: median(10/4, 12/2) =
        # 4.25, not median(fak) / median(kvu-on) = 11/3.
        r1 = self.round_dir("r1", {
            "fak-http.json": http_report("fak", 10.0),
            "fak-inprocess.json": inprocess_report(20.0),
            "llama-server-fa-off-kvu-off.json": http_report("llama-server", 2.5),
            "llama-server-fa-off-kvu-on.json": http_report("llama-server", 4.0),
        }, env="model: models/x.gguf (abc...)  n_vocab: 9\nthreads: 4  profile: probe  P=1024\n")
        r2 = self.round_dir("r2", {
            "fak-http.json": http_report("fak", 12.0),
            "fak-inprocess.json": inprocess_report(12.0),
            "llama-server-fa-off-kvu-off.json": http_report("llama-server", 2.9),
            "llama-server-fa-off-kvu-on.json": http_report("llama-server", 2.0),
            "notes.json": {"anything": 1},
        })
        panels = pfh.build_panels([("cpu", [Path(r1), Path(r2)])])
        self.assertEqual(len(panels), 1)
        p = panels[0]
        self.assertEqual(p.median(pfh.HTTP), 11.0)
        self.assertEqual(p.median("llama-server-fa-off-kvu-off"), 2.7)
        self.assertEqual(p.fastest_llama(), "llama-server-fa-off-kvu-on")
        self.assertEqual(p.llama_ratio(), (4.25, 2))
        self.assertEqual(p.http_ratio(), (0.75, 2))
        rc, err = self.plot("--cpu", "cpu", r1, r2)
        self.assertEqual(rc, 0, err)
        texts = ["".join(t.itertext()) for t in self.svg().iter(f"{SVG}text")]
        self.assertIn("fak serve / fastest llama-server: 4.25×", texts)
        self.assertIn("Agent fleet over HTTP: x.gguf, 4 threads", texts)
        self.assertIn("cpu, probe", texts)
        bars = [b for b in self.svg().iter(f"{SVG}rect") if b.get("class") == "bar"]
        self.assertEqual([b.get("data-median") for b in bars], ["16", "11", "2.7", "3"])

    def test_panels_per_cpu_and_shape_and_missing_reports(self) -> None:
        bl = (1024, 40, 8, 32, 48)
        a = self.round_dir("a", {"fak-http.json": http_report("fak", 3.0)})
        b = self.round_dir("b", {"fak-http.json": http_report("fak", 2.0, bl),
                                 "llama-server-fa-on-kvu-off.json": http_report("llama-server", 1.0, bl)})
        c = self.round_dir("c", {"fak-inprocess.json": inprocess_report(5.0)})
        rc, err = self.plot("--cpu", "one", a, b, "--cpu", "two", c)
        self.assertEqual(rc, 0, err)
        panels = self.svg().findall(f"{SVG}g")
        self.assertEqual([(p.get("data-cpu"), p.get("data-shape")) for p in panels],
                         [("one", "P1024 T10 A8 D32 R64"), ("one", "P1024 T40 A8 D32 R48"), ("two", "P1024 T10 A8 D32 R64")])
        classes = [[t.get("class") for t in p.iter(f"{SVG}text") if t.get("class")] for p in panels]
        # A ratio is drawn only where both of its reports exist.
        self.assertEqual(classes, [[], ["ratio-llama"], []])
        self.assertIn("2.00x (1 rounds)", err)


class BadInput(Base):
    def assert_error(self, args: list[str], *needles: str) -> None:
        rc, err = self.plot(*args)
        self.assertEqual(rc, 2, err)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertTrue(err.startswith("plot_fleet_http.py: error: "), err)
        for n in needles:
            self.assertIn(n, err)
        self.assertFalse(self.out.exists())

    def test_errors_name_the_file(self) -> None:
        cases: list[tuple[str, dict[str, Any], tuple[str, ...]]] = [
            ("schema", {"fak-http.json": {**http_report("fak", 1.0), "schema": "fak-bench-serve/1"}},
             ("fak-http.json", "fak-bench-fleet-http/1")),
            ("json", {"fak-http.json": "{not json"}, ("fak-http.json",)),
            ("engine", {"llama-server-fa-off-kvu-off.json": http_report("fak", 1.0)},
             ("llama-server-fa-off-kvu-off.json", "engine 'fak'")),
            ("nan", {"fak-http.json": http_report("fak", float("nan"))}, ("fak-http.json", "agent_turns_per_s")),
            ("zero", {"fak-http.json": http_report("fak", 0.0)}, ("fak-http.json", "not a positive number")),
            ("short", {"fak-http.json": {**http_report("fak", 1.0), "turns_done": 79}}, ("fak-http.json", "turns_done 79")),
            ("noshape", {"fak-http.json": {**http_report("fak", 1.0), "workload": {"prefix": 1}}},
             ("fak-http.json", "workload has no integer")),
            ("oom", {"fak-inprocess.json": inprocess_report(1.0, status="oom")}, ("fak-inprocess.json", "'oom'")),
            ("runs", {"fak-inprocess.json": {**inprocess_report(1.0), "runs": []}}, ("fak-inprocess.json", "0 runs")),
            ("mixed", {"fak-http.json": http_report("fak", 1.0),
                       "fak-inprocess.json": inprocess_report(1.0, (1024, 40, 8, 32, 48))},
             ("fak-inprocess.json", "P1024 T40 A8 D32 R48", "fak-http.json's P1024 T10 A8 D32 R64")),
            ("empty", {"other.json": {}}, ("empty", "no fleet_http.sh report")),
        ]
        for name, reports, needles in cases:
            with self.subTest(name):
                d = self.round_dir(name, reports)
                self.assert_error(["--cpu", "x", d], *needles)
        self.assert_error(["--cpu", "x", str(self.dir / "missing")], "missing: not a directory")
        self.assert_error(["--cpu", "x"], "--cpu 'x': no report directory")


if __name__ == "__main__":
    unittest.main()
