#!/usr/bin/env python3
"""Plot the fleet benchmark over HTTP: fak serve, fak in process, llama-server.

``plot_fleet_http.py --out fleet-http.svg --cpu LABEL DIR [DIR ...] [--cpu LABEL DIR ...]``
reads the report directories that ``bench/fleet_http.sh`` writes (one
directory per run, ``$FAK_BENCH_OUT``) and draws one SVG:

* a directory is one round; it holds any of ``fak-inprocess.json`` (``fak
  bench fleet --json``, ``fak-bench-fleet/1``), ``fak-http.json`` and
  ``llama-server-fa-{off,on}-kvu-{off,on}.json`` (``bench/fleet_http.py``,
  ``fak-bench-fleet-http/1``; the llama-server setting comes from the file
  name, as the script names it) and, optionally, ``env.txt`` (model,
  threads, profile); other files are ignored;
* one panel per CPU label and workload shape (P T A D R, which every report
  of a directory must share), panels in the order given; each panel has its
  own y axis (agent-turns/s, from 0);
* one bar per engine configuration: the median over the panel's rounds,
  with one dot per round;
* above each panel, the ratio of fak serve (HTTP) to the fastest
  llama-server setting (the one with the highest median), and of fak serve
  to fak in process: each the median of the per-round ratios, over the
  rounds that have both reports;
* a llama-server turn whose last event failed (``turns_final_error``, see
  ``bench/fleet_http.py``; the script counts it done) marks its bar with
  ``*`` and is counted in a note under the panel ("3 of 960 turns ended in
  an error event"; ``**`` for a second such bar).

Every number drawn comes from the reports; nothing is filled in. The SVG is
written by hand: only the standard library is used.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from plot_fleet import fmt, nice_step

HTTP_SCHEMA = "fak-bench-fleet-http/1"
FLEET_SCHEMA = "fak-bench-fleet/1"
INPROCESS, HTTP = "fak-inprocess", "fak-http"
LLAMA_RE = re.compile(r"^llama-server-fa-(off|on|auto)-kvu-(off|on)$")
# Fixed colours so that a configuration looks the same in every panel.
CONFIG_COLORS = {
    INPROCESS: "#9ecae1",
    HTTP: "#1f77b4",
    "llama-server-fa-off-kvu-off": "#d62728",
    "llama-server-fa-on-kvu-off": "#ff7f0e",
    "llama-server-fa-off-kvu-on": "#9467bd",
    "llama-server-fa-on-kvu-on": "#8c564b",
    "llama-server-fa-auto-kvu-off": "#e377c2",
    "llama-server-fa-auto-kvu-on": "#7f7f7f",
}
CONFIG_ORDER = list(CONFIG_COLORS)
SHAPE_KEYS = ("prefix", "turns", "agents", "decode", "result")

BAR_SLOT, BAR_W = 54, 40
PANEL_PAD_L, PANEL_PAD_R, PANEL_MIN_W, PANEL_GAP = 52, 16, 250, 24
MARGIN, MAX_ROW_W = 20, 880
HEADER_H, PLOT_H, NOTE_H = 96, 260, 40
TITLE_H, LEGEND_ROW_H = 64, 20


class PlotError(Exception):
    """A report problem whose message names the file and what was wrong."""


@dataclass
class Round:
    """One ``bench/fleet_http.sh`` directory: agent-turns/s per configuration."""

    path: Path
    shape: tuple[int, ...]
    values: dict[str, float] = field(default_factory=dict)
    final_errors: dict[str, int] = field(default_factory=dict)
    turns: dict[str, int] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class Panel:
    """One CPU and shape: its rounds and what is drawn from them."""

    cpu: str
    shape: tuple[int, ...]
    rounds: list[Round] = field(default_factory=list)

    def configs(self) -> list[str]:
        """The configurations any round has, in drawing order."""
        have = {c for r in self.rounds for c in r.values}
        return [c for c in CONFIG_ORDER if c in have]

    def values(self, config: str) -> list[float]:
        """That configuration's value in each round that has it, in round order."""
        return [r.values[config] for r in self.rounds if config in r.values]

    def median(self, config: str) -> float:
        return statistics.median(self.values(config))

    def fastest_llama(self) -> str | None:
        """The llama-server setting with the highest median (the first on a tie)."""
        llama = [c for c in self.configs() if c.startswith("llama-server")]
        return max(llama, key=self.median) if llama else None

    def ratio(self, num: str, den: str | None) -> tuple[float, int] | None:
        """Median over rounds with both of num / den, and how many rounds."""
        if den is None:
            return None
        per = [r.values[num] / r.values[den] for r in self.rounds if num in r.values and den in r.values]
        return (statistics.median(per), len(per)) if per else None

    def llama_ratio(self) -> tuple[float, int] | None:
        """fak serve / the fastest llama-server setting."""
        return self.ratio(HTTP, self.fastest_llama())

    def http_ratio(self) -> tuple[float, int] | None:
        """fak serve / fak in process."""
        return self.ratio(HTTP, INPROCESS)

    def profile(self) -> str | None:
        names = {r.env.get("profile") for r in self.rounds} - {None}
        return names.pop() if len(names) == 1 else None


def config_label(config: str) -> str:
    """``fak serve, sessions (HTTP)``, ``llama-server -fa off --no-kv-unified``, ..."""
    if config == INPROCESS:
        return "fak bench fleet (in process)"
    if config == HTTP:
        return "fak serve, sessions (HTTP)"
    m = LLAMA_RE.match(config)
    if not m:
        return config
    kvu = "--kv-unified" if m.group(2) == "on" else "--no-kv-unified"
    return f"llama-server -fa {m.group(1)} {kvu}"


def shape_label(shape: tuple[int, ...]) -> str:
    return " ".join(f"{k}{v}" for k, v in zip("PTADR", shape))


def read_json(path: Path) -> dict[str, Any]:
    try:
        r = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise PlotError(f"{path}: {e}") from e
    if not isinstance(r, dict):
        raise PlotError(f"{path}: not a JSON object")
    return r


def rate(path: Path, obj: dict[str, Any], where: str = "") -> float:
    """A positive, finite ``agent_turns_per_s``."""
    v = obj.get("agent_turns_per_s")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
        raise PlotError(f"{path}: {where}agent_turns_per_s is {v!r}, not a positive number")
    return float(v)


def shape_of(path: Path, obj: Any, where: str = "") -> tuple[int, ...]:
    if not isinstance(obj, dict) or not all(
        isinstance(obj.get(k), int) and not isinstance(obj.get(k), bool) for k in SHAPE_KEYS
    ):
        raise PlotError(f"{path}: {where}no integer {'/'.join(SHAPE_KEYS)}")
    return tuple(obj[k] for k in SHAPE_KEYS)


def load_http(path: Path, engine: str) -> tuple[tuple[int, ...], float, int, int]:
    """A ``fak-bench-fleet-http/1`` report: shape, rate, final errors, turns done."""
    r = read_json(path)
    if r.get("schema") != HTTP_SCHEMA:
        raise PlotError(f"{path}: schema {r.get('schema')!r} is not {HTTP_SCHEMA}")
    if r.get("engine") != engine:
        raise PlotError(f"{path}: engine {r.get('engine')!r}, expected {engine!r} from the file name")
    shape = shape_of(path, r.get("workload"), "workload has ")
    want = shape[1] * shape[2]
    if r.get("turns_done") != want:
        raise PlotError(f"{path}: turns_done {r.get('turns_done')!r}, expected T*A = {want}")
    errors = r.get("turns_final_error") or 0
    if not isinstance(errors, int) or errors < 0:
        raise PlotError(f"{path}: turns_final_error is {errors!r}")
    return shape, rate(path, r), errors, want


def load_inprocess(path: Path) -> tuple[tuple[int, ...], float]:
    """A ``fak-bench-fleet/1`` report of one run (as fleet_http.sh writes it)."""
    r = read_json(path)
    if r.get("schema") != FLEET_SCHEMA:
        raise PlotError(f"{path}: schema {r.get('schema')!r} is not {FLEET_SCHEMA}")
    runs = r.get("runs")
    if not isinstance(runs, list) or len(runs) != 1:
        n = len(runs) if isinstance(runs, list) else "no"
        raise PlotError(f"{path}: {n} runs, expected the one run fleet_http.sh makes")
    run = runs[0]
    shape = shape_of(path, run, "runs[0] has ")
    if run.get("status") != "ok":
        raise PlotError(f"{path}: runs[0] status is {run.get('status')!r}, not 'ok'")
    return shape, rate(path, run, "runs[0] ")


def read_env(path: Path) -> dict[str, str]:
    """model (file name), threads and profile from fleet_http.sh's env.txt."""
    env: dict[str, str] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise PlotError(f"{path}: {e}") from e
    for key, pat in (("model", r"^model: (\S+)"), ("threads", r"^threads: (\S+)"), ("profile", r"\bprofile: (\S+)")):
        m = re.search(pat, text, re.M)
        if m:
            env[key] = Path(m.group(1)).name if key == "model" else m.group(1)
    return env


def load_round(d: Path) -> Round:
    """Reads one report directory; every report in it must share one shape."""
    if not d.is_dir():
        raise PlotError(f"{d}: not a directory")
    found: dict[str, tuple[Path, tuple[int, ...]]] = {}
    rnd = Round(path=d, shape=())
    for p in sorted(d.glob("*.json")):
        config = p.stem
        if config == INPROCESS:
            shape, v = load_inprocess(p)
        elif config == HTTP or LLAMA_RE.match(config):
            shape, v, errors, turns = load_http(p, "fak" if config == HTTP else "llama-server")
            rnd.final_errors[config], rnd.turns[config] = errors, turns
        else:
            continue
        for other, (op, oshape) in found.items():
            if oshape != shape:
                raise PlotError(f"{p}: workload {shape_label(shape)} differs from {op.name}'s {shape_label(oshape)}")
        found[config] = (p, shape)
        rnd.values[config] = v
        rnd.shape = shape
    if not found:
        raise PlotError(
            f"{d}: no fleet_http.sh report (fak-inprocess.json, fak-http.json, llama-server-fa-*-kvu-*.json)"
        )
    if (d / "env.txt").is_file():
        rnd.env = read_env(d / "env.txt")
    return rnd


def build_panels(groups: list[tuple[str, list[Path]]]) -> list[Panel]:
    """One panel per (CPU label, shape), in the order first seen."""
    panels: list[Panel] = []
    for cpu, dirs in groups:
        for d in dirs:
            rnd = load_round(d)
            panel = next((p for p in panels if p.cpu == cpu and p.shape == rnd.shape), None)
            if panel is None:
                panel = Panel(cpu=cpu, shape=rnd.shape)
                panels.append(panel)
            panel.rounds.append(rnd)
    return panels


def title_of(panels: list[Panel]) -> str:
    envs = [r.env for p in panels for r in p.rounds]
    models = list(dict.fromkeys(e["model"] for e in envs if "model" in e))
    threads = list(dict.fromkeys(e["threads"] for e in envs if "threads" in e))
    parts = ["Agent fleet over HTTP"]
    if models:
        parts.append(", ".join(models))
    if threads:
        parts.append(f"{'/'.join(threads)} threads")
    return ": ".join(parts[:2]) + (f", {parts[2]}" if len(parts) > 2 else "")


def panel_width(p: Panel) -> int:
    return max(PANEL_MIN_W, PANEL_PAD_L + BAR_SLOT * len(p.configs()) + PANEL_PAD_R)


def layout(panels: list[Panel]) -> list[list[Panel]]:
    """Panels in rows no wider than MAX_ROW_W (at least one per row)."""
    rows: list[list[Panel]] = [[]]
    w = 0
    for p in panels:
        pw = panel_width(p)
        if rows[-1] and w + PANEL_GAP + pw > MAX_ROW_W:
            rows.append([])
            w = 0
        w += (PANEL_GAP if rows[-1] else 0) + pw
        rows[-1].append(p)
    return rows


def render_panel(p: Panel, x0: float, y0: float) -> list[str]:
    """One panel: header with the ratios, y axis, bars, round dots, note."""
    e: list[str] = [f'<g class="panel" data-cpu={quoteattr(p.cpu)} data-shape={quoteattr(shape_label(p.shape))}>']
    w = panel_width(p)
    n = len(p.rounds)
    prof = p.profile()
    e.append(f'<text x="{x0 + w / 2:.1f}" y="{y0 + 14}" text-anchor="middle" font-size="13" font-weight="bold">'
             f"{escape(p.cpu)}, {escape(prof) if prof else 'shape'}</text>")
    e.append(f'<text x="{x0 + w / 2:.1f}" y="{y0 + 30}" text-anchor="middle">'
             f"{escape(shape_label(p.shape))}, {n} round{'s' if n != 1 else ''}</text>")
    lr, hr = p.llama_ratio(), p.http_ratio()
    if lr:
        e.append(f'<text class="ratio-llama" x="{x0 + w / 2:.1f}" y="{y0 + 50}" text-anchor="middle" '
                 f'font-weight="bold">fak serve / fastest llama-server: {lr[0]:.2f}×</text>')
    if hr:
        e.append(f'<text class="ratio-http" x="{x0 + w / 2:.1f}" y="{y0 + 68}" text-anchor="middle">'
                 f"fak serve / fak in process: {hr[0]:.2f}</text>")
    configs = p.configs()
    top = y0 + HEADER_H
    ymax = max(v for c in configs for v in p.values(c))
    ystep = nice_step(ymax * 1.12, target=5)
    ytop = ystep * math.ceil(ymax * 1.12 / ystep)
    px0 = x0 + PANEL_PAD_L

    def py(v: float) -> float:
        return top + PLOT_H - v / ytop * PLOT_H

    for i in range(round(ytop / ystep) + 1):
        v = i * ystep
        e.append(f'<line x1="{px0:.1f}" y1="{py(v):.1f}" x2="{x0 + w - PANEL_PAD_R:.1f}" y2="{py(v):.1f}" stroke="#e4e4e4"/>')
        e.append(f'<text x="{px0 - 5:.1f}" y="{py(v) + 4:.1f}" text-anchor="end" font-size="11">{fmt(v)}</text>')
    e.append(f'<line x1="{px0:.1f}" y1="{top}" x2="{px0:.1f}" y2="{top + PLOT_H}" stroke="black"/>')
    e.append(f'<line x1="{px0:.1f}" y1="{top + PLOT_H}" x2="{x0 + w - PANEL_PAD_R:.1f}" y2="{top + PLOT_H}" stroke="black"/>')
    e.append(f'<text x="{x0 + 14:.1f}" y="{top + PLOT_H / 2:.1f}" text-anchor="middle" font-size="11" '
             f'transform="rotate(-90 {x0 + 14:.1f} {top + PLOT_H / 2:.1f})">agent-turns/s</text>')
    inner = w - PANEL_PAD_L - PANEL_PAD_R
    bx0 = px0 + (inner - BAR_SLOT * len(configs)) / 2
    fastest = p.fastest_llama()
    notes: list[str] = []
    for i, c in enumerate(configs):
        vals = p.values(c)
        med = p.median(c)
        bx = bx0 + i * BAR_SLOT + (BAR_SLOT - BAR_W) / 2
        label = config_label(c)
        errors = sum(r.final_errors.get(c, 0) for r in p.rounds)
        star = "*" * (len(notes) + 1) if errors else ""
        if errors:
            turns = sum(r.turns.get(c, 0) for r in p.rounds if c in r.values)
            notes.append(f"{star} {errors} of {turns} turns ended in an error event")
        tip = f"{label}: median {med:.4g} agent-turns/s over {len(vals)} round(s)"
        if c == fastest:
            tip += " (fastest llama-server setting)"
        e.append(f'<rect class="bar" data-config={quoteattr(c)} data-median="{med:.6g}" x="{bx:.1f}" '
                 f'y="{py(med):.1f}" width="{BAR_W}" height="{top + PLOT_H - py(med):.1f}" '
                 f'fill="{CONFIG_COLORS.get(c, "#bbbbbb")}"><title>{escape(tip)}</title></rect>')
        for j, (rnd, v) in enumerate(((r, r.values[c]) for r in p.rounds if c in r.values)):
            cx = bx + BAR_W * (j + 1) / (len(vals) + 1)
            e.append(f'<circle class="round" data-config={quoteattr(c)} cx="{cx:.1f}" cy="{py(v):.1f}" r="3" '
                     f'fill="white" stroke="black" stroke-width="1.2">'
                     f"<title>{escape(f'{label}, {rnd.path}: {v:.4g} agent-turns/s')}</title></circle>")
        ylab = py(max(vals)) - 6
        e.append(f'<text x="{bx + BAR_W / 2:.1f}" y="{ylab:.1f}" text-anchor="middle" font-size="11">'
                 f"{med:.3f}{star}</text>")
    for k, note in enumerate(notes):
        e.append(f'<text class="note" x="{x0 + 4:.1f}" y="{top + PLOT_H + 18 + 13 * k:.1f}" font-size="10">'
                 f"{escape(note)}</text>")
    e.append("</g>")
    return e


def render(panels: list[Panel]) -> str:
    """The SVG document: title, the panels in rows, one legend for all."""
    rows = layout(panels)
    row_h = HEADER_H + PLOT_H + NOTE_H
    width = MARGIN * 2 + max(sum(panel_width(p) for p in r) + PANEL_GAP * (len(r) - 1) for r in rows)
    configs = [c for c in CONFIG_ORDER if any(c in p.configs() for p in panels)]
    legend_cols = max(1, min(len(configs), int((width - 2 * MARGIN) // 290)))
    legend_rows = math.ceil(len(configs) / legend_cols)
    height = TITLE_H + row_h * len(rows) + LEGEND_ROW_H * legend_rows + MARGIN
    e: list[str] = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2:.1f}" y="24" text-anchor="middle" font-size="15">{escape(title_of(panels))}</text>',
        f'<text x="{width / 2:.1f}" y="44" text-anchor="middle" font-size="11" fill="#444">'
        "bars: median over rounds (value above); dots: each round; "
        "ratios: median of the per-round ratios</text>",
    ]
    y = TITLE_H
    for r in rows:
        x = MARGIN
        for p in r:
            e.extend(render_panel(p, x, y))
            x += panel_width(p) + PANEL_GAP
        y += row_h
    for i, c in enumerate(configs):
        lx = MARGIN + (i % legend_cols) * 290
        ly = y + LEGEND_ROW_H * (i // legend_cols)
        e.append(f'<rect x="{lx}" y="{ly - 10}" width="14" height="12" fill="{CONFIG_COLORS.get(c, "#bbbbbb")}"/>')
        e.append(f'<text x="{lx + 20}" y="{ly}">{escape(config_label(c))}</text>')
    e.append("</svg>")
    return "\n".join(e) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="SVG file to write")
    ap.add_argument("--cpu", nargs="+", action="append", required=True, metavar="LABEL_THEN_DIRS",
                    help="a CPU label, then its bench/fleet_http.sh report directories (one round each); repeatable")
    a = ap.parse_args(argv)
    try:
        groups: list[tuple[str, list[Path]]] = []
        for g in a.cpu:
            if len(g) < 2:
                raise PlotError(f"--cpu {g[0]!r}: no report directory after the label")
            groups.append((g[0], [Path(d) for d in g[1:]]))
        panels = build_panels(groups)
        svg = render(panels)
        try:
            a.out.parent.mkdir(parents=True, exist_ok=True)
            a.out.write_text(svg, encoding="utf-8")
        except OSError as e:
            raise PlotError(f"{a.out}: {e}") from e
    except PlotError as e:
        print(f"plot_fleet_http.py: error: {e}", file=sys.stderr)
        return 2
    for p in panels:
        lr, hr = p.llama_ratio(), p.http_ratio()
        parts = [f"{config_label(c)} {p.median(c):.3f}" for c in p.configs()]
        if lr:
            parts.append(f"fak serve / fastest llama-server {lr[0]:.2f}x ({lr[1]} rounds)")
        if hr:
            parts.append(f"fak serve / in process {hr[0]:.2f} ({hr[1]} rounds)")
        print(f"{p.cpu} {shape_label(p.shape)}: " + "; ".join(parts), file=sys.stderr)
    print(f"wrote {a.out} ({len(panels)} panels)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
