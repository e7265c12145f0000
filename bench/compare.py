#!/usr/bin/env python3
"""Side-by-side tables of fak and llama.cpp benchmark reports.

``compare.py A.json B.json [--json]`` reads two reports of schema
``fak-bench-single/1`` (from ``fak bench model --json`` and
``bench/peers/llamacpp.py single``; either order) and prints, per metric,
fak's value, llama.cpp's value and the ratio fak / llama.cpp (above 1 means
fak is faster). Metrics are the median tokens per second of each prefill
length and of decode. ``--json`` prints the rows as JSON instead.

``compare.py batch FAK.json PEER.json... [--json]`` folds
``fak-bench-batch/1`` reports (fak, and llama.cpp configurations: ``kv``
unified or per-seq, ``flash_attn`` auto/on/off, ``type_kv`` f16/q8_0; a
report without the last two ran the library defaults, auto and f16): per
batch size, decode tok/s of each, the best peer and fak / best; then the
peak row (each side's best over all batch sizes).

``compare.py fleet FAK.json PEER.json... [--json]`` folds
``fak-bench-fleet/1`` reports: per run, agent-turns/s of fak and of each
llama.cpp configuration; the reference, the fastest llama.cpp run among
{unified, per-seq} × flash attention {auto, off} at f16 KV (``fastest_llamacpp``;
``reference_tried`` lists the configurations of that grid that were given,
``reference_not_tried`` the missing ones); ``fak_vs_fastest_llamacpp`` =
fak / that; when fak ran a q8_0 cache, the fastest q8_0-KV llama.cpp run
beside it (``fastest_llamacpp_q8_0``, ``fak_vs_fastest_llamacpp_q8_0``);
and TTFT p50/p95. A per-run ``ablation`` object in fak's report is passed
through in ``--json`` only (``internal.fak_ablation``).

``compare.py serve REPORT.json... [--json]`` hands ``fak-bench-serve/1``
reports of ``bench/serve.py`` to ``bench/compare_serve.py``: ratios of
output tok/s and TTFT p50 to the fastest llama-server report of each load.

Without the mode word, two batch or fleet reports are folded by their schema.
Report files may come in any order. Only the standard library is used.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

SCHEMA = "fak-bench-single/1"


class CompareError(Exception):
    """A report problem whose message names the file and what was wrong."""


def load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise CompareError(f"{path}: cannot read: {e}") from e
    except json.JSONDecodeError as e:
        raise CompareError(f"{path}: not JSON: {e}") from e
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise CompareError(f"{path}: schema is {data.get('schema') if isinstance(data, dict) else None!r}, want {SCHEMA!r}")
    for key in ("engine", "prefill", "decode"):
        if key not in data:
            raise CompareError(f"{path}: missing key {key!r}")
    return data


def metrics(report: dict[str, Any], path: Path) -> dict[str, float]:
    """``{"prefill 16 tok/s": v, ..., "decode tok/s": v}`` from one report."""
    out: dict[str, float] = {}
    try:
        for p in report["prefill"]:
            out[f"prefill {int(p['n_tokens'])} tok/s"] = float(p["tok_s"])
        out["decode tok/s"] = float(report["decode"]["tok_s"])
        out["decode step median ms"] = float(report["decode"]["step_ms"]["median"])
    except (KeyError, TypeError, ValueError) as e:
        raise CompareError(f"{path}: malformed metric entry: {e!r}") from e
    return out


def pick(a: tuple[Path, dict[str, Any]], b: tuple[Path, dict[str, Any]]) -> tuple[tuple[Path, dict[str, Any]], tuple[Path, dict[str, Any]]]:
    """Returns (fak, llama.cpp) whatever the argument order."""
    engines = {a[1]["engine"], b[1]["engine"]}
    if engines != {"fak", "llama.cpp"}:
        raise CompareError(f"need one 'fak' and one 'llama.cpp' report, got engines {sorted(engines)}")
    return (a, b) if a[1]["engine"] == "fak" else (b, a)


def rows(fak: tuple[Path, dict[str, Any]], peer: tuple[Path, dict[str, Any]]) -> list[dict[str, Any]]:
    mf = metrics(fak[1], fak[0])
    mp = metrics(peer[1], peer[0])
    out = []
    for name, fv in mf.items():
        pv = mp.get(name)
        if pv is None:
            continue
        ratio = fv / pv if pv > 0 else None
        out.append({"metric": name, "fak": fv, "llama.cpp": pv, "ratio": ratio})
    return out


def header(fak: dict[str, Any], peer: dict[str, Any]) -> list[str]:
    lines = []
    for key in ("model", "model_sha256", "threads", "reps", "cpu"):
        fv, pv = fak.get(key), peer.get(key)
        if fv == pv:
            lines.append(f"{key}: {fv}")
        else:
            lines.append(f"{key}: fak {fv} / llama.cpp {pv}  (MISMATCH)")
    lines.append(f"isa: fak {fak.get('isa')} / llama.cpp {peer.get('isa')}")
    return lines


def render(head: list[str], table: list[dict[str, Any]]) -> str:
    out = list(head)
    out.append(f"{'metric':<24} {'fak':>12} {'llama.cpp':>12} {'fak/llama.cpp':>14}")
    for r in table:
        ratio = "n/a" if r["ratio"] is None else f"{r['ratio']:.2f}x"
        out.append(f"{r['metric']:<24} {r['fak']:>12.2f} {r['llama.cpp']:>12.2f} {ratio:>14}")
    out.append("(ratio > 1: fak higher; for 'step median ms' lower is better)")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------
# Multi-sequence reports: batch and fleet
# --------------------------------------------------------------------------

BATCH_SCHEMA = "fak-bench-batch/1"
FLEET_SCHEMA = "fak-bench-fleet/1"
MODE_SCHEMA = {"single": SCHEMA, "batch": BATCH_SCHEMA, "fleet": FLEET_SCHEMA}
# Display order of llama.cpp configurations; unknown values sort after.
PEER_KV_ORDER = ("unified", "per-seq")
PEER_FA_ORDER = ("auto", "off", "on")
PEER_TYPE_ORDER = ("f16", "q8_0")
# The fleet reference: the fastest of these llama.cpp settings, f16 KV.
REFERENCE_KV = ("unified", "per-seq")
REFERENCE_FA = ("auto", "off")
REFERENCE_TYPE = "f16"
MAX_PEERS = 8
FLEET_KEYS = ("profile", "prefix", "turns", "agents", "decode", "result")

Report = tuple[Path, dict[str, Any]]


def load_any(path: Path) -> dict[str, Any]:
    """A report of any known schema (single, batch or fleet)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise CompareError(f"{path}: cannot read: {e}") from e
    except json.JSONDecodeError as e:
        raise CompareError(f"{path}: not JSON: {e}") from e
    if not isinstance(data, dict):
        raise CompareError(f"{path}: top level is not an object")
    if data.get("schema") not in MODE_SCHEMA.values():
        raise CompareError(f"{path}: schema is {data.get('schema')!r}, want one of {sorted(MODE_SCHEMA.values())}")
    if "engine" not in data:
        raise CompareError(f"{path}: missing key 'engine'")
    return data


def peer_settings(data: dict[str, Any]) -> tuple[str, str, str]:
    """(kv, flash_attn, type_kv) of a llama.cpp report; reports written
    before the peer had ``--flash-attn`` / ``--type-kv`` ran the library
    defaults (auto, f16)."""
    return (str(data.get("kv")), str(data.get("flash_attn", "auto")), str(data.get("type_kv", "f16")))


def config_name(kv: str, fa: str, ty: str) -> str:
    """e.g. ``per-seq fa=off f16``."""
    return f"{kv} fa={fa} {ty}"


def peer_config(data: dict[str, Any]) -> str:
    """The configuration name of a llama.cpp report."""
    return config_name(*peer_settings(data))


def _rank(v: str, order: tuple[str, ...]) -> int:
    return order.index(v) if v in order else len(order)


def split_engines(reports: list[Report], schema: str) -> tuple[Report, list[Report]]:
    """(fak, [llama.cpp peers in display order]); one fak, 1..MAX_PEERS peers
    of distinct configurations, every report of ``schema``."""
    for path, data in reports:
        if data.get("schema") != schema:
            raise CompareError(f"{path}: schema is {data.get('schema')!r}, want {schema!r}")
    faks = [r for r in reports if r[1]["engine"] == "fak"]
    peers = [r for r in reports if r[1]["engine"] == "llama.cpp"]
    if len(faks) != 1 or not 1 <= len(peers) <= MAX_PEERS or len(faks) + len(peers) != len(reports):
        engines = sorted(str(r[1]["engine"]) for r in reports)
        raise CompareError(f"need one 'fak' report and 1 to {MAX_PEERS} 'llama.cpp' reports, got engines {engines}")
    cfgs = [peer_config(p[1]) for p in peers]
    dup = sorted({c for c in cfgs if cfgs.count(c) > 1})
    if dup:
        raise CompareError(f"the llama.cpp reports share configuration {dup[0]!r}: give one per configuration")

    def order(r: Report) -> tuple[int, int, int, str]:
        kv, fa, ty = peer_settings(r[1])
        return (_rank(kv, PEER_KV_ORDER), _rank(fa, PEER_FA_ORDER), _rank(ty, PEER_TYPE_ORDER), peer_config(r[1]))

    return faks[0], sorted(peers, key=order)


_LCG = re.compile(r"state0=(\d+) mul=(\d+) inc=(\d+)")


def stream_params(text: Any) -> Any:
    """The LCG constants named in a ``token_stream`` description (engines
    word the rest differently), or the text itself when it names none."""
    m = _LCG.search(str(text))
    return m.groups() if m else text


def multi_header(fak: Report, peers: list[Report]) -> list[str]:
    """Shared facts, or every engine's value with MISMATCH when they differ
    (``token_stream`` compared by its LCG constants)."""
    lines = []
    everyone = [("fak", fak[1])] + [(f"llama.cpp {peer_config(p[1])}", p[1]) for p in peers]
    for key in ("model", "model_sha256", "threads", "cpu", "token_stream"):
        vals = [(name, d.get(key)) for name, d in everyone]
        first = vals[0][1]
        if key == "token_stream":
            lcg = stream_params(first)
            if all(stream_params(v) == lcg for _, v in vals):
                if isinstance(lcg, tuple):
                    lines.append("token_stream: the same LCG in every report (state0 {}, mul {}, inc {})".format(*lcg))
                else:
                    lines.append(f"token_stream: {first}")
                continue
        elif all(v == first for _, v in vals):
            lines.append(f"{key}: {first}")
            continue
        lines.append(f"{key}: " + " / ".join(f"{n} {v}" for n, v in vals) + "  (MISMATCH)")
    return lines


def _num(entry: dict[str, Any], key: str, path: Path) -> float:
    try:
        return float(entry[key])
    except (KeyError, TypeError, ValueError) as e:
        raise CompareError(f"{path}: malformed entry {entry!r}: {key}: {e!r}") from e


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b is not None and b > 0 else None


def _cell(v: float | None, status: str) -> dict[str, Any]:
    return {"value": v, "status": status}


# ---- batch ------------------------------------------------------------------


def batch_results(rep: Report) -> dict[int, dict[str, Any]]:
    """``{B: {"value": decode tok/s or None, "status": ...}}`` of one report."""
    path, data = rep
    out: dict[int, dict[str, Any]] = {}
    results = data.get("results")
    if not isinstance(results, list):
        raise CompareError(f"{path}: 'results' is not a list")
    for r in results:
        if not isinstance(r, dict) or "batch" not in r:
            raise CompareError(f"{path}: result without 'batch': {r!r}")
        try:
            b = int(r["batch"])
        except (TypeError, ValueError) as e:
            raise CompareError(f"{path}: batch {r['batch']!r} is not an integer") from e
        if b in out:
            raise CompareError(f"{path}: batch {b} appears twice")
        status = str(r.get("status", "ok"))
        v = _num(r, "decode_tok_s", path) if status == "ok" else None
        out[b] = _cell(v, status)
    return out


def batch_table(fak: Report, peers: list[Report]) -> dict[str, Any]:
    """Rows per batch size plus the peak row; see the module doc."""
    fres = batch_results(fak)
    pres = [(peer_config(p[1]), batch_results(p)) for p in peers]
    sizes = sorted(set(fres).union(*(set(r) for _, r in pres)))
    absent = _cell(None, "absent")
    rows = []
    for b in sizes:
        f = fres.get(b, absent)
        cfg = {kv: r.get(b, absent) for kv, r in pres}
        ok = [(c["value"], kv) for kv, c in cfg.items() if c["value"] is not None]
        best = max(ok, key=lambda x: x[0]) if ok else None
        rows.append(
            {
                "batch": b,
                "fak": f,
                "llama.cpp": cfg,
                "best_peer": None if best is None else {"config": best[1], "value": best[0]},
                "ratio": _ratio(f["value"], None if best is None else best[0]),
            }
        )
    fak_ok = [(c["value"], b) for b, c in fres.items() if c["value"] is not None]
    peer_ok = [(c["value"], b, kv) for kv, r in pres for b, c in r.items() if c["value"] is not None]
    fpk = max(fak_ok, key=lambda x: x[0]) if fak_ok else None
    ppk = max(peer_ok, key=lambda x: x[0]) if peer_ok else None
    peak = {
        "fak": None if fpk is None else {"value": fpk[0], "batch": fpk[1]},
        "best_peer": None if ppk is None else {"value": ppk[0], "batch": ppk[1], "config": ppk[2]},
        "ratio": _ratio(None if fpk is None else fpk[0], None if ppk is None else ppk[0]),
    }
    return {"metric": "decode_tok_s", "configs": [kv for kv, _ in pres], "rows": rows, "peak": peak}


def _fmt(c: dict[str, Any], width: int) -> str:
    if c["value"] is None:
        text = c["status"].split(":")[0] if c["status"] else "n/a"
        return f"{text:>{width}}"
    return f"{c['value']:>{width}.2f}"


def _fmt_ratio(r: float | None, width: int) -> str:
    return f"{'n/a' if r is None else f'{r:.2f}x':>{width}}"


def render_batch(head: list[str], t: dict[str, Any]) -> str:
    out = list(head)
    cols = [f"llama.cpp {kv}" for kv in t["configs"]]
    out.append("decode tok/s (aggregate over B sequences)")
    out.append(f"{'B':>6} {'fak':>10} " + " ".join(f"{c:>28}" for c in cols) + f" {'best peer':>30} {'fak/best':>9}")
    for r in t["rows"]:
        best = r["best_peer"]
        best_s = "n/a" if best is None else f"{best['value']:.2f} ({best['config']})"
        cells = " ".join(_fmt(r["llama.cpp"][kv], 28) for kv in t["configs"])
        out.append(f"{r['batch']:>6} {_fmt(r['fak'], 10)} {cells} {best_s:>30} {_fmt_ratio(r['ratio'], 9)}")
    pk = t["peak"]
    f = "n/a" if pk["fak"] is None else f"{pk['fak']['value']:.2f} (B={pk['fak']['batch']})"
    p = "n/a" if pk["best_peer"] is None else f"{pk['best_peer']['value']:.2f} ({pk['best_peer']['config']}, B={pk['best_peer']['batch']})"
    out.append(f"peak: fak {f} vs llama.cpp {p}: {_fmt_ratio(pk['ratio'], 0).strip()}")
    notes = sorted({c["status"] for r in t["rows"] for c in [r["fak"], *r["llama.cpp"].values()] if c["value"] is None})
    for n in notes:
        out.append(f"  {n}")
    out.append("(ratio > 1: fak faster)")
    return "\n".join(out) + "\n"


# ---- fleet ------------------------------------------------------------------


def fleet_runs(rep: Report) -> dict[tuple[Any, ...], dict[str, Any]]:
    """``{(profile, P, T, A, D, R): run}`` of one report."""
    path, data = rep
    runs = data.get("runs")
    if not isinstance(runs, list):
        raise CompareError(f"{path}: 'runs' is not a list")
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in runs:
        if not isinstance(r, dict) or any(k not in r for k in FLEET_KEYS):
            raise CompareError(f"{path}: run without {list(FLEET_KEYS)}: {r!r}")
        key = tuple(_profile(r) if k == "profile" else r[k] for k in FLEET_KEYS)
        if key in out:
            raise CompareError(f"{path}: run {key} appears twice")
        out[key] = r
    return out


def fleet_cell(run: dict[str, Any] | None, path: Path) -> dict[str, Any]:
    if run is None:
        return {"status": "absent", "agent_turns_per_s": None, "ttft_ms_p50": None, "ttft_ms_p95": None, "generated_sha256": None}
    status = str(run.get("status", "ok"))
    ok = status == "ok"
    return {
        "status": status,
        "agent_turns_per_s": _num(run, "agent_turns_per_s", path) if ok else None,
        "ttft_ms_p50": _num(run, "ttft_ms_p50", path) if ok else None,
        "ttft_ms_p95": _num(run, "ttft_ms_p95", path) if ok else None,
        "generated_sha256": run.get("generated_sha256") if ok else None,
    }


def fastest(cfg: dict[str, dict[str, Any]], eligible: list[str]) -> dict[str, Any] | None:
    """``{"config", "agent_turns_per_s"}`` of the fastest ok run among the
    ``eligible`` configurations, or None."""
    ok = [(cfg[c]["agent_turns_per_s"], c) for c in eligible if cfg[c]["agent_turns_per_s"] is not None]
    if not ok:
        return None
    v, c = max(ok, key=lambda x: x[0])
    return {"config": c, "agent_turns_per_s": v}


def reference_grid() -> list[str]:
    """The configurations the fleet reference is the fastest of."""
    return [config_name(kv, fa, REFERENCE_TYPE) for kv in REFERENCE_KV for fa in REFERENCE_FA]


def fleet_table(fak: Report, peers: list[Report]) -> dict[str, Any]:
    """Rows per run (fak's runs first in their order, then peer-only runs)."""
    fruns = fleet_runs(fak)
    pruns = [(peer_config(p[1]), p[0], fleet_runs(p)) for p in peers]
    grid = reference_grid()
    tried = [c for c, _, _ in pruns if c in grid]
    q8 = [config_name(*peer_settings(p[1])) for p in peers if peer_settings(p[1])[2] == "q8_0"]
    fak_q8 = str(fak[1].get("kv_type", "f16")) == "q8_0"
    keys = list(fruns)
    for _, _, r in pruns:
        keys.extend(k for k in r if k not in keys)
    rows = []
    for key in keys:
        frun = fruns.get(key)
        f = fleet_cell(frun, fak[0])
        cfg = {kv: fleet_cell(r.get(key), path) for kv, path, r in pruns}
        ref = fastest(cfg, tried)
        row: dict[str, Any] = dict(zip(FLEET_KEYS, key))
        row["fak"] = f
        row["llama.cpp"] = cfg
        row["fastest_llamacpp"] = ref
        row["fak_vs_fastest_llamacpp"] = _ratio(f["agent_turns_per_s"], None if ref is None else ref["agent_turns_per_s"])
        if fak_q8 and q8:
            ref8 = fastest(cfg, q8)
            row["fastest_llamacpp_q8_0"] = ref8
            row["fak_vs_fastest_llamacpp_q8_0"] = _ratio(f["agent_turns_per_s"], None if ref8 is None else ref8["agent_turns_per_s"])
        row["generated_sha256_match"] = {
            kv: (None if c["generated_sha256"] is None or f["generated_sha256"] is None else c["generated_sha256"] == f["generated_sha256"])
            for kv, c in cfg.items()
        }
        if frun is not None and isinstance(frun.get("ablation"), dict):
            row["internal"] = {"fak_ablation": frun["ablation"]}
        rows.append(row)
    return {
        "metric": "agent_turns_per_s",
        "configs": [kv for kv, _, _ in pruns],
        "reference": "fastest llama.cpp of {unified, per-seq} x flash attention {auto, off}, f16 KV",
        "reference_tried": tried,
        "reference_not_tried": [c for c in grid if c not in tried],
        "rows": rows,
    }


def _profile(r: dict[str, Any]) -> Any:
    """A run's profile name; explicit shapes are ``custom`` in both engines
    (fak reports ``null``, the peer ``"custom"``)."""
    return "custom" if r.get("profile") is None else r["profile"]


def _run_name(r: dict[str, Any]) -> str:
    return f"{_profile(r)} P{r['prefix']} T{r['turns']} A{r['agents']} D{r['decode']} R{r['result']}"


def _fv(v: float | None, status: str, width: int, prec: int = 3) -> str:
    if v is None:
        return f"{status.split(':')[0]:>{width}}"
    return f"{v:>{width}.{prec}f}"


def render_fleet(head: list[str], t: dict[str, Any]) -> str:
    out = list(head)
    cfgs = t["configs"]
    w = max([len(_run_name(r)) for r in t["rows"]] + [3])
    out.append("agent-turns/s (wall includes the prefix setup)")
    out.append(f"reference: {t['reference']}; tried: {', '.join(t['reference_tried']) or 'none'}")
    if t["reference_not_tried"]:
        out.append(f"  not tried (the reference may be slower than llama.cpp's best): {', '.join(t['reference_not_tried'])}")
    out.append(f"{'run':<{w}} {'fak':>9} " + " ".join(f"{kv:>22}" for kv in cfgs) + f" {'fastest llama.cpp':>30} {'fak/fastest':>11}")
    for r in t["rows"]:
        tr = r["fastest_llamacpp"]
        tr_s = "n/a" if tr is None else f"{tr['agent_turns_per_s']:.3f} ({tr['config']})"
        cells = " ".join(_fv(r["llama.cpp"][kv]["agent_turns_per_s"], r["llama.cpp"][kv]["status"], 22) for kv in cfgs)
        out.append(
            f"{_run_name(r):<{w}} {_fv(r['fak']['agent_turns_per_s'], r['fak']['status'], 9)} {cells} {tr_s:>30} "
            f"{_fmt_ratio(r['fak_vs_fastest_llamacpp'], 11)}"
        )
        if "fastest_llamacpp_q8_0" in r:
            q = r["fastest_llamacpp_q8_0"]
            q_s = "n/a" if q is None else f"{q['agent_turns_per_s']:.3f} ({q['config']})"
            out.append(f"{'':<{w}}   q8_0 KV like for like: {q_s}, fak/that {_fmt_ratio(r['fak_vs_fastest_llamacpp_q8_0'], 0).strip()}")
    out.append("TTFT ms p50 / p95")
    out.append(f"{'run':<{w}} {'fak':>17} " + " ".join(f"{kv:>22}" for kv in cfgs))

    def pair(c: dict[str, Any], width: int = 22) -> str:
        if c["ttft_ms_p50"] is None:
            return f"{c['status'].split(':')[0]:>{width}}"
        text = f"{c['ttft_ms_p50']:.1f}/{c['ttft_ms_p95']:.1f}"
        return f"{text:>{width}}"

    for r in t["rows"]:
        out.append(f"{_run_name(r):<{w}} {pair(r['fak'], 17)} " + " ".join(pair(r["llama.cpp"][kv]) for kv in cfgs))
    diff = [f"{_run_name(r)} vs {kv}" for r in t["rows"] for kv, m in r["generated_sha256_match"].items() if m is False]
    if diff:
        out.append("greedy output differs from fak: " + "; ".join(diff))
    out.append("(fak/fastest > 1: fak faster than the fastest llama.cpp configuration tried)")
    return "\n".join(out) + "\n"


# ---- command line -----------------------------------------------------------


def fold(mode: str, paths: list[Path]) -> tuple[dict[str, Any], str]:
    """(JSON object, text table) for ``mode`` over ``paths``."""
    reports = [(p, load_any(p)) for p in paths]
    if mode == "single":
        if len(reports) != 2:
            raise CompareError("single mode takes exactly two reports")
        fak, peer = pick((paths[0], load(paths[0])), (paths[1], load(paths[1])))
        table = rows(fak, peer)
        return {"fak": str(fak[0]), "llama.cpp": str(peer[0]), "rows": table}, render(header(fak[1], peer[1]), table)
    fak, peers = split_engines(reports, MODE_SCHEMA[mode])
    head = multi_header(fak, peers)
    files = {"fak": str(fak[0]), "llama.cpp": {peer_config(p[1]): str(p[0]) for p in peers}}
    if mode == "batch":
        t = batch_table(fak, peers)
        return {"mode": mode, "files": files, **t}, render_batch(head, t)
    t = fleet_table(fak, peers)
    return {"mode": mode, "files": files, **t}, render_fleet(head, t)


def detect_mode(paths: list[Path]) -> str:
    """The mode whose schema the first report has."""
    if not paths:
        raise CompareError("no report files given")
    schema = load_any(paths[0]).get("schema")
    for mode, s in MODE_SCHEMA.items():
        if s == schema:
            return mode
    raise CompareError(f"{paths[0]}: unknown schema {schema!r}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["serve"]:
        # Serving reports (bench/serve.py) have their own comparison.
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import compare_serve

        return compare_serve.main(argv[1:])
    ap = argparse.ArgumentParser(
        description="Compare fak and llama.cpp benchmark reports.",
        usage="compare.py [single|batch|fleet] FAK.json PEER.json [PEER.json...] [--json] | compare.py serve REPORT.json... [--json]",
    )
    ap.add_argument("items", nargs="+", help="optional mode word, then report files (JSON, any order)")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = ap.parse_args(argv)
    items = list(args.items)
    mode = items.pop(0) if items[0] in MODE_SCHEMA else None
    paths = [Path(x) for x in items]
    try:
        if mode is None:
            mode = detect_mode(paths)
        if mode == "single" and len(paths) != 2:
            raise CompareError("single-stream comparison takes exactly two reports")
        if mode != "single" and not 2 <= len(paths) <= 1 + MAX_PEERS:
            raise CompareError(f"{mode} comparison takes FAK.json and 1 to {MAX_PEERS} llama.cpp reports")
        obj, text = fold(mode, paths)
    except CompareError as e:
        print(f"compare.py: error: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(obj, indent=2))
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
