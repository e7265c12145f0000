#!/usr/bin/env python3
"""Plot serving reports of bench/serve.py against concurrency.

``plot_serve.py --out serve.svg REPORT.json...`` reads ``fak-bench-serve/1``
reports and writes one SVG with two panels, x = concurrency (one category per
value, in order):

* left: output tokens/s, one line per server (its report ``label``);
* right: TTFT p50 (solid) and p95 (dashed), in seconds, log scale, one colour
  per server.

The SVG is written by hand: only the standard library is used.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

SCHEMA = "fak-bench-serve/1"
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"]
WIDTH, HEIGHT = 1000, 460
PANEL_W, PANEL_H = 330, 320
TOP, LEFTS = 60, (80, 520)


def load(path: Path) -> dict[str, Any]:
    """One report, schema checked."""
    r = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(r, dict) or r.get("schema") != SCHEMA:
        raise SystemExit(f"plot_serve: {path}: not a {SCHEMA} report")
    return r


def concurrency(r: dict[str, Any]) -> int:
    p = r.get("parameters", {})
    return int(p.get("concurrency") or 0)


def series(reports: list[dict[str, Any]]) -> dict[str, dict[int, dict[str, float]]]:
    """label → concurrency → {tok_s, ttft50, ttft95} (seconds for TTFT)."""
    out: dict[str, dict[int, dict[str, float]]] = {}
    for r in reports:
        res = r["results"]
        out.setdefault(str(r.get("label", "?")), {})[concurrency(r)] = {
            "tok_s": float(res["output_tok_s"]),
            "ttft50": float(res["ttft_ms"]["p50"]) / 1000,
            "ttft95": float(res["ttft_ms"]["p95"]) / 1000,
        }
    return out


def render(data: dict[str, dict[int, dict[str, float]]], title: str) -> str:
    """The SVG document."""
    cs = sorted({c for pts in data.values() for c in pts})
    e = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        f'<text x="{WIDTH / 2}" y="24" text-anchor="middle" font-size="15">{escape(title)}</text>',
    ]

    def px(left: int, c: int) -> float:
        return left + (cs.index(c) + 0.5) / len(cs) * PANEL_W

    # Left: tok/s, linear from 0.
    ymax = max((p["tok_s"] for pts in data.values() for p in pts.values()), default=1.0) * 1.1
    step = 10 ** math.floor(math.log10(ymax / 5))
    step *= next(m for m in (1, 2, 5, 10) if m * step >= ymax / 6)

    def py_lin(v: float) -> float:
        return TOP + PANEL_H - v / ymax * PANEL_H

    # Right: TTFT seconds, log scale.
    vals = [p[k] for pts in data.values() for p in pts.values() for k in ("ttft50", "ttft95") if p[k] > 0]
    lo = 10 ** math.floor(math.log10(min(vals, default=0.1)))
    hi = 10 ** math.ceil(math.log10(max(vals, default=1.0)))

    def py_log(v: float) -> float:
        return TOP + PANEL_H - (math.log10(max(v, lo)) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)) * PANEL_H

    for left, name in zip(LEFTS, ("output tokens/s", "TTFT p50 (solid), p95 (dashed), s")):
        e.append(f'<rect x="{left}" y="{TOP}" width="{PANEL_W}" height="{PANEL_H}" fill="none" stroke="black"/>')
        e.append(f'<text x="{left + PANEL_W / 2}" y="{TOP - 8}" text-anchor="middle">{escape(name)}</text>')
        for c in cs:
            e.append(f'<text x="{px(left, c):.1f}" y="{TOP + PANEL_H + 18}" text-anchor="middle">{c}</text>')
        e.append(f'<text x="{left + PANEL_W / 2}" y="{TOP + PANEL_H + 36}" text-anchor="middle">concurrency</text>')
    v = 0.0
    while v <= ymax:
        y = py_lin(v)
        e.append(f'<line x1="{LEFTS[0]}" y1="{y:.1f}" x2="{LEFTS[0] + PANEL_W}" y2="{y:.1f}" stroke="#ddd"/>')
        e.append(f'<text x="{LEFTS[0] - 6}" y="{y + 4:.1f}" text-anchor="end">{v:g}</text>')
        v += step
    d = lo
    while d <= hi * 1.0001:
        y = py_log(d)
        e.append(f'<line x1="{LEFTS[1]}" y1="{y:.1f}" x2="{LEFTS[1] + PANEL_W}" y2="{y:.1f}" stroke="#ddd"/>')
        e.append(f'<text x="{LEFTS[1] - 6}" y="{y + 4:.1f}" text-anchor="end">{d:g}</text>')
        d *= 10
    for i, (label, pts) in enumerate(data.items()):
        col = COLORS[i % len(COLORS)]
        order = sorted(pts)
        for left, key, py, dash in (
            (LEFTS[0], "tok_s", py_lin, ""),
            (LEFTS[1], "ttft50", py_log, ""),
            (LEFTS[1], "ttft95", py_log, ' stroke-dasharray="6,4"'),
        ):
            line = " ".join(f"{px(left, c):.1f},{py(pts[c][key]):.1f}" for c in order)
            e.append(
                f'<polyline class="series" data-label="{escape(label)} {key}" points="{line}" '
                f'fill="none" stroke="{col}" stroke-width="2"{dash}/>'
            )
            for c in order:
                e.append(
                    f'<circle cx="{px(left, c):.1f}" cy="{py(pts[c][key]):.1f}" r="3" fill="{col}">'
                    f"<title>{escape(f'{label} C={c} {key}={pts[c][key]:.4g}')}</title></circle>"
                )
        y = TOP + PANEL_H + 60 + 0 * i
        x = 80 + 300 * i
        e.append(f'<rect x="{x}" y="{y - 9}" width="14" height="10" fill="{col}"/>')
        e.append(f'<text x="{x + 20}" y="{y}">{escape(label)}</text>')
    e.append("</svg>")
    return "\n".join(e) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--title", default=None)
    ap.add_argument("reports", nargs="+", type=Path)
    a = ap.parse_args(argv)
    reports = [load(p) for p in a.reports]
    model = reports[0].get("parameters", {}).get("model", "?")
    title = a.title or f"Shared-system-prompt chat over HTTP: {model}"
    a.out.write_text(render(series(reports), title), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
