"""Unit tests of bench/plot_serve.py on synthetic serve reports."""

import json
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import plot_serve  # noqa: E402


def report(label: str, c: int, tok_s: float, p50: float, p95: float) -> dict:
    return {
        "schema": plot_serve.SCHEMA,
        "label": label,
        "parameters": {"concurrency": c, "model": "m"},
        "results": {"output_tok_s": tok_s, "ttft_ms": {"p50": p50, "p95": p95}},
    }


class PlotServeTest(unittest.TestCase):
    def test_one_line_per_server_and_metric(self):
        rs = [report("fak", c, 10.0 * c, 100.0 * c, 200.0 * c) for c in (1, 8)]
        rs += [report("peer", c, 5.0, 300.0, 900.0) for c in (1, 8)]
        svg = plot_serve.render(plot_serve.series(rs), "t")
        self.assertEqual(svg.count('class="series"'), 6)
        self.assertIn('data-label="fak tok_s"', svg)
        self.assertIn("fak C=8 tok_s=80", svg)

    def test_rejects_other_schemas(self):
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "r.json"
            p.write_text(json.dumps({"schema": "x"}), encoding="utf-8")
            with self.assertRaises(SystemExit):
                plot_serve.load(p)


if __name__ == "__main__":
    unittest.main()
