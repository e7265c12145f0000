"""Unit tests of bench/plot_fleet.py on synthetic fleet reports.

Run from the repository root: ``python3 -m unittest bench/test_plot_fleet.py``.
Standard library only.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import plot_fleet  # noqa: E402

SVG = "{http://www.w3.org/2000/svg}"


def run(a: int, t: int, atps: float, status: str = "ok", **extra: Any) -> dict[str, Any]:
    return {"profile": "long", "prefix": 1024, "turns": t, "agents": a, "decode": 32, "result": 48,
            "agent_turns_per_s": atps, "status": status, **extra}


def report(engine: str, kv: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {"schema": plot_fleet.SCHEMA, "engine": engine, "kv": kv, "model": "smollm2<&>.gguf",
            "threads": 2, "runs": runs}


class PlotFleetTest(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = Path(self.tmp.name)

    def tearDown(self) -> None:
        self.tmp.cleanup()

    def write(self, name: str, r: Any) -> str:
        p = self.dir / name
        p.write_text(json.dumps(r), encoding="utf-8")
        return str(p)

    def plot(self, files: list[str], *extra: str) -> tuple[int, str]:
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            rc = plot_fleet.main(["--out", str(self.dir / "out" / "fleet.svg"), *extra, *files])
        return rc, err.getvalue()

    def test_svg_parses_and_has_one_polyline_per_series(self) -> None:
        runs = lambda k: [run(a, t, k * a / t) for t in (40, 80) for a in (8, 12, 16, 20)]  # noqa: E731
        fak = report("fak", "paged", runs(1.0))
        fak["runs"][0]["ablation"] = {"agent_turns_per_s": 0.1, "status": "ok"}
        uni = report("llama.cpp", "unified", runs(0.5))
        per = report("llama.cpp", "per-seq", runs(0.25)[:-1] + [run(20, 80, 0.0, status="oom")])
        files = [self.write("fak.json", fak), self.write("uni.json", uni), self.write("per.json", per)]
        rc, err = self.plot(files)
        self.assertEqual(rc, 0, err)
        root = ET.parse(self.dir / "out" / "fleet.svg").getroot()
        self.assertEqual(root.tag, f"{SVG}svg")
        lines = root.findall(f"{SVG}polyline")
        # 3 engine configurations x 2 turn counts.
        self.assertEqual(len(lines), 6)
        labels = [ln.get("data-label") for ln in lines]
        self.assertIn("fak (paged) T=40", labels)
        self.assertIn("llama.cpp (kv per-seq) T=80", labels)
        per80 = lines[labels.index("llama.cpp (kv per-seq) T=80")]
        self.assertEqual(len(per80.get("points", "").split()), 3)
        texts = ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]
        self.assertTrue(any("smollm2<&>.gguf" in t and "2 threads" in t for t in texts))
        self.assertIn("agents (A)", texts)
        self.assertIn("agent-turns/s", texts)
        self.assertTrue(any("(1 not ok)" in t for t in texts))
        # One marker per ok run plus one legend marker per series.
        self.assertEqual(len(root.findall(f"{SVG}circle")), 8 + 8 + 7 + 6)

        rc, err = self.plot(files, "--ablation")
        self.assertEqual(rc, 0, err)
        root = ET.parse(self.dir / "out" / "fleet.svg").getroot()
        labels = [ln.get("data-label") for ln in root.findall(f"{SVG}polyline")]
        self.assertEqual(len(labels), 7)
        self.assertIn("fak (paged) no reuse T=40", labels)

    def test_single_group_and_single_point(self) -> None:
        f = self.write("one.json", report("fak", "paged", [run(8, 10, 1.5)]))
        rc, err = self.plot([f])
        self.assertEqual(rc, 0, err)
        root = ET.parse(self.dir / "out" / "fleet.svg").getroot()
        lines = root.findall(f"{SVG}polyline")
        self.assertEqual([ln.get("data-label") for ln in lines], ["fak (paged)"])

    def test_bad_reports_are_one_line_errors(self) -> None:
        bad = self.write("bad.json", {"schema": "fak-bench-batch/1", "runs": []})
        rc, err = self.plot([bad])
        self.assertEqual(rc, 2)
        self.assertIn("fak-bench-fleet/1", err)
        self.assertEqual(len(err.strip().splitlines()), 1)
        none_ok = self.write("none.json", report("fak", "paged", [run(8, 10, 1.0, status="oom")]))
        rc, err = self.plot([none_ok])
        self.assertEqual(rc, 2)
        self.assertIn("no run with status ok", err)
        rc, err = self.plot([str(self.dir / "missing.json")])
        self.assertEqual(rc, 2)
        self.assertIn("missing.json", err)


class Labels(unittest.TestCase):
    def test_peer_settings_are_named_when_not_defaults(self) -> None:
        base = {"engine": "llama.cpp", "kv": "per-seq"}
        self.assertEqual(plot_fleet.engine_label(base), "llama.cpp (kv per-seq)")
        self.assertEqual(plot_fleet.engine_label({**base, "flash_attn": "auto", "type_kv": "f16"}), "llama.cpp (kv per-seq)")
        self.assertEqual(plot_fleet.engine_label({**base, "flash_attn": "off"}), "llama.cpp (kv per-seq, FA off)")
        self.assertEqual(
            plot_fleet.engine_label({**base, "flash_attn": "on", "type_kv": "q8_0"}), "llama.cpp (kv per-seq, FA on, q8_0 KV)"
        )


if __name__ == "__main__":
    unittest.main()
