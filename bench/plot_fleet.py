#!/usr/bin/env python3
"""Plot agent-turns/s against the number of agents from fleet reports.

``plot_fleet.py --out fleet.svg FAK.json PEER_UNIFIED.json PEER_PERSEQ.json [more]``
reads ``fak-bench-fleet/1`` reports (``fak bench fleet --json`` and
``bench/peers/llamacpp.py fleet``; the peer's report has ``"engine":
"llama.cpp"`` and ``"kv": "unified" | "per-seq"``) and writes one SVG:

* x: agents A, y: agent-turns/s (from 0);
* one line per engine configuration (colour) and workload group (dash
  style): runs are grouped by profile, turns, prefix, decode and result, so a
  profile with several turn counts draws one line per turn count;
* one marker per run with ``status == "ok"``; other runs are left out and
  counted in the legend ("2 not ok");
* ``--ablation`` also draws fak's no-reuse runs (``ablation`` objects);
* the title names the model(s) and thread count(s).

The SVG is written by hand: only the standard library is used.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

SCHEMA = "fak-bench-fleet/1"
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"]
DASHES = ["", "6,4", "2,3", "10,3,2,3", "1,6"]
WIDTH, HEIGHT = 900, 520
LEFT, RIGHT, TOP, BOTTOM = 70, 290, 50, 60


class PlotError(Exception):
    """A report problem whose message names the file and what was wrong."""


@dataclass
class Series:
    """One line: an engine configuration on one workload group."""

    label: str
    color: str
    dash: str
    points: list[tuple[int, float]] = field(default_factory=list)
    not_ok: int = 0


def load(path: Path) -> dict[str, Any]:
    """Reads one fleet report, checking its schema and runs."""
    try:
        r = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise PlotError(f"{path}: {e}") from e
    if not isinstance(r, dict) or r.get("schema") != SCHEMA:
        got = r.get("schema") if isinstance(r, dict) else type(r).__name__
        raise PlotError(f"{path}: schema {got!r} is not {SCHEMA}")
    if not isinstance(r.get("runs"), list):
        raise PlotError(f"{path}: no runs list")
    for i, run in enumerate(r["runs"]):
        if not isinstance(run, dict) or not isinstance(run.get("agents"), int):
            raise PlotError(f"{path}: runs[{i}] has no integer agents")
    return r


def engine_label(r: dict[str, Any]) -> str:
    """``fak (paged)``, ``llama.cpp (kv unified)``, ``llama.cpp (kv per-seq,
    FA off)``, ...: a peer's flash attention and KV type are named when they
    are not the library defaults (auto, f16)."""
    engine = str(r.get("engine", "?"))
    kv = r.get("kv")
    if engine == "llama.cpp":
        extra = []
        if r.get("flash_attn", "auto") != "auto":
            extra.append(f"FA {r['flash_attn']}")
        if r.get("type_kv", "f16") != "f16":
            extra.append(f"{r['type_kv']} KV")
        inner = ", ".join(([f"kv {kv}"] if kv else []) + extra)
        return f"llama.cpp ({inner})" if inner else "llama.cpp"
    return f"{engine} ({kv})" if kv else engine


def group_key(run: dict[str, Any]) -> tuple[Any, ...]:
    return (run.get("profile"), run.get("turns"), run.get("prefix"), run.get("decode"), run.get("result"))


def group_label(key: tuple[Any, ...], keys: list[tuple[Any, ...]]) -> str:
    """Names only what varies between groups (T always, when several)."""
    names = ["profile", "T", "P", "D", "R"]
    varying = [i for i in range(len(names)) if len({k[i] for k in keys}) > 1]
    if not varying:
        return ""
    return " ".join(f"{names[i]}={key[i]}" if i else str(key[i] or "custom") for i in varying)


def build_series(reports: list[dict[str, Any]], ablation: bool = False) -> list[Series]:
    """One series per (engine configuration, workload group), in input order."""
    configs: list[tuple[str, list[dict[str, Any]]]] = []
    for r in reports:
        label = engine_label(r)
        configs.append((label, r["runs"]))
        if ablation and any(isinstance(run.get("ablation"), dict) for run in r["runs"]):
            runs = [dict(run, **run["ablation"]) for run in r["runs"] if isinstance(run.get("ablation"), dict)]
            configs.append((f"{label} no reuse", runs))
    keys: list[tuple[Any, ...]] = []
    for _, runs in configs:
        for run in runs:
            if group_key(run) not in keys:
                keys.append(group_key(run))
    labels = list(dict.fromkeys(label for label, _ in configs))
    out: dict[tuple[str, tuple[Any, ...]], Series] = {}
    for label, runs in configs:
        for run in runs:
            k = group_key(run)
            g = group_label(k, keys)
            s = out.setdefault(
                (label, k),
                Series(
                    label=f"{label} {g}".strip(),
                    color=COLORS[labels.index(label) % len(COLORS)],
                    dash=DASHES[keys.index(k) % len(DASHES)],
                ),
            )
            v = run.get("agent_turns_per_s")
            if run.get("status") == "ok" and isinstance(v, (int, float)) and math.isfinite(v):
                s.points.append((run["agents"], float(v)))
            else:
                s.not_ok += 1
    for s in out.values():
        s.points.sort()
    return list(out.values())


def nice_step(span: float, target: int = 6) -> float:
    """A 1/2/5·10^k step giving about ``target`` ticks over ``span``."""
    if span <= 0:
        return 1.0
    raw = span / target
    mag = 10 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)


def fmt(v: float) -> str:
    return f"{v:g}" if abs(v) >= 1e-3 or v == 0 else f"{v:.1e}"


def title_of(reports: list[dict[str, Any]]) -> str:
    models = list(dict.fromkeys(str(r.get("model", "?")) for r in reports))
    threads = list(dict.fromkeys(str(r.get("threads", "?")) for r in reports))
    return f"Agent fleet throughput: {', '.join(models)}, {'/'.join(threads)} threads"


def render(series: list[Series], title: str) -> str:
    """The SVG document: axes, grid, one polyline and markers per series, legend."""
    pw, ph = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    xs = sorted({a for s in series for a, _ in s.points}) or [1]
    ymax = max((v for s in series for _, v in s.points), default=1.0) or 1.0
    x0, x1 = (xs[0] - 1, xs[-1] + 1) if xs[0] == xs[-1] else (xs[0], xs[-1])
    ystep = nice_step(ymax * 1.05)
    ytop = ystep * math.ceil(ymax * 1.05 / ystep)

    def px(a: float) -> float:
        return LEFT + (a - x0) / (x1 - x0) * pw

    def py(v: float) -> float:
        return TOP + ph - v / ytop * ph

    e: list[str] = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
        f'<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        f'<text x="{WIDTH / 2:.1f}" y="24" text-anchor="middle" font-size="15">{escape(title)}</text>',
    ]
    n_ticks = round(ytop / ystep)
    for i in range(n_ticks + 1):
        v = i * ystep
        y = py(v)
        e.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{LEFT + pw}" y2="{y:.1f}" stroke="#ddd"/>')
        e.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{fmt(v)}</text>')
    for a in xs:
        x = px(a)
        e.append(f'<line x1="{x:.1f}" y1="{TOP + ph}" x2="{x:.1f}" y2="{TOP + ph + 5}" stroke="black"/>')
        e.append(f'<text x="{x:.1f}" y="{TOP + ph + 18}" text-anchor="middle">{a}</text>')
    e.append(f'<line x1="{LEFT}" y1="{TOP + ph}" x2="{LEFT + pw}" y2="{TOP + ph}" stroke="black"/>')
    e.append(f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + ph}" stroke="black"/>')
    e.append(f'<text x="{LEFT + pw / 2:.1f}" y="{HEIGHT - 18}" text-anchor="middle">agents (A)</text>')
    e.append(
        f'<text x="18" y="{TOP + ph / 2:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 18 {TOP + ph / 2:.1f})">agent-turns/s</text>'
    )
    lx, ly = LEFT + pw + 20, TOP + 10
    for i, s in enumerate(series):
        dash = f' stroke-dasharray="{s.dash}"' if s.dash else ""
        pts = " ".join(f"{px(a):.1f},{py(v):.1f}" for a, v in s.points)
        e.append(
            f'<polyline class="series" data-label={quoteattr(s.label)} points="{pts}" '
            f'fill="none" stroke="{s.color}" stroke-width="2"{dash}/>'
        )
        for a, v in s.points:
            e.append(
                f'<circle cx="{px(a):.1f}" cy="{py(v):.1f}" r="3.5" fill="{s.color}">'
                f"<title>{escape(f'{s.label}: A={a} {v:.4g} agent-turns/s')}</title></circle>"
            )
        y = ly + 18 * i
        e.append(f'<line x1="{lx}" y1="{y}" x2="{lx + 28}" y2="{y}" stroke="{s.color}" stroke-width="2"{dash}/>')
        e.append(f'<circle cx="{lx + 14}" cy="{y}" r="3.5" fill="{s.color}"/>')
        note = f" ({s.not_ok} not ok)" if s.not_ok else ""
        e.append(f'<text x="{lx + 36}" y="{y + 4}">{escape(s.label + note)}</text>')
    e.append("</svg>")
    return "\n".join(e) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("reports", nargs="+", type=Path, help="fak-bench-fleet/1 JSON reports")
    ap.add_argument("--out", type=Path, required=True, help="SVG file to write")
    ap.add_argument("--ablation", action="store_true", help="also draw fak's no-reuse runs")
    a = ap.parse_args(argv)
    try:
        reports = [load(p) for p in a.reports]
        series = build_series(reports, a.ablation)
        if not any(s.points for s in series):
            raise PlotError("no run with status ok in any report")
        svg = render(series, title_of(reports))
        try:
            a.out.parent.mkdir(parents=True, exist_ok=True)
            a.out.write_text(svg, encoding="utf-8")
        except OSError as e:
            raise PlotError(f"{a.out}: {e}") from e
    except PlotError as e:
        print(f"plot_fleet.py: error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {a.out} ({len(series)} series)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
