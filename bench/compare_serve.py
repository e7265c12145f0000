#!/usr/bin/env python3
"""Compare serving reports of bench/serve.py (schema ``fak-bench-serve/1``).

``compare_serve.py REPORT.json... [--json]`` (also ``compare.py serve ...``)
groups the reports by load (concurrency, request rate) and, in each group,
takes as the reference the llama-server report with the highest output
tokens/s (a report is llama-server's when its ``engine`` is
``llama-server``, or, without an engine, when its label starts with
``llama-server``). For every report it prints output tok/s and its ratio to
the reference (above 1: faster than llama-server), requests/s, TTFT p50 and
its ratio to the reference's (below 1: first token sooner), TTFT p95, ITL
p50, end-to-end p50 and failures. A group without a llama-server report gets
no ratios. Parameters that differ inside a group (model, endpoint,
max_tokens, system_tokens, num_requests) are listed as warnings: such
numbers are not comparable. ``--json`` prints the table as JSON.
Standard library only.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

SCHEMA = "fak-bench-serve/1"
MATCH_KEYS = ("model", "endpoint", "max_tokens", "system_tokens", "num_requests", "workload")


class CompareError(Exception):
    """A report problem whose message names the file."""


def load(path: Path) -> tuple[Path, dict[str, Any]]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise CompareError(f"{path}: cannot read: {e}") from e
    except json.JSONDecodeError as e:
        raise CompareError(f"{path}: not JSON: {e}") from e
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        got = data.get("schema") if isinstance(data, dict) else None
        raise CompareError(f"{path}: schema is {got!r}, want {SCHEMA!r}")
    for key in ("parameters", "results"):
        if not isinstance(data.get(key), dict):
            raise CompareError(f"{path}: missing object {key!r}")
    return Path(path), data


def is_llama_server(rep: dict[str, Any]) -> bool:
    engine = rep.get("engine") or ""
    if engine:
        return engine == "llama-server"
    return str(rep.get("label") or "").startswith("llama-server")


def _get(d: Any, *keys: str) -> Any:
    for k in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def _ratio(a: Any, b: Any) -> float | None:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b > 0:
        return a / b
    return None


def group_key(rep: dict[str, Any]) -> tuple[Any, Any]:
    p = rep["parameters"]
    return (p.get("concurrency"), p.get("request_rate"))


def compare(reports: list[tuple[Path, dict[str, Any]]]) -> dict[str, Any]:
    """``{"groups": [{concurrency, request_rate, reference, warnings, rows}]}``,
    groups in order of (request rate, concurrency), rows in input order."""
    groups: dict[tuple[Any, Any], list[tuple[Path, dict[str, Any]]]] = {}
    for path, rep in reports:
        groups.setdefault(group_key(rep), []).append((path, rep))

    def order(k: tuple[Any, Any]) -> tuple[float, float]:
        conc, rate = k
        return (float("inf") if rate is None else float(rate), float(conc or 0))

    out = []
    for key in sorted(groups, key=order):
        members = groups[key]
        peers = [m for m in members if is_llama_server(m[1])]
        ref = max(peers, key=lambda m: _get(m[1], "results", "output_tok_s") or 0.0) if peers else None
        ref_tok = _get(ref[1], "results", "output_tok_s") if ref else None
        ref_ttft = _get(ref[1], "results", "ttft_ms", "p50") if ref else None
        warnings = []
        for k in MATCH_KEYS:
            vals = {json.dumps(m[1]["parameters"].get(k)) for m in members}
            if len(vals) > 1:
                warnings.append(f"{k} differs: {', '.join(sorted(vals))}")
        rows = []
        for path, rep in members:
            r = rep["results"]
            tok = r.get("output_tok_s")
            ttft = _get(r, "ttft_ms", "p50")
            rows.append(
                {
                    "file": str(path),
                    "label": rep.get("label") or path.stem,
                    "engine": rep.get("engine") or "",
                    "is_reference": ref is not None and path == ref[0],
                    "output_tok_s": tok,
                    "output_tok_s_ratio": _ratio(tok, ref_tok),
                    "requests_per_s": r.get("requests_per_s"),
                    "ttft_ms_p50": ttft,
                    "ttft_p50_ratio": _ratio(ttft, ref_ttft),
                    "ttft_ms_p95": _get(r, "ttft_ms", "p95"),
                    "itl_ms_p50": _get(r, "itl_ms", "p50"),
                    "e2e_ms_p50": _get(r, "e2e_ms", "p50"),
                    "completed": r.get("completed"),
                    "failed": r.get("failed"),
                }
            )
        out.append(
            {
                "concurrency": key[0],
                "request_rate": key[1],
                "reference": (ref[1].get("label") or ref[0].stem) if ref else None,
                "warnings": warnings,
                "rows": rows,
            }
        )
    return {"groups": out}


def _f(v: Any, width: int, prec: int = 1) -> str:
    return f"{v:>{width}.{prec}f}" if isinstance(v, (int, float)) else f"{'-':>{width}}"


def render(table: dict[str, Any]) -> str:
    lines = []
    for g in table["groups"]:
        load = f"concurrency {g['concurrency']}" if g["request_rate"] is None else f"rate {g['request_rate']}/s, max {g['concurrency'] or 'inf'}"
        lines.append(f"{load}: reference {g['reference'] or '(no llama-server report: no ratios)'}")
        for w in g["warnings"]:
            lines.append(f"  warning: {w}")
        width = max([5] + [len(r["label"]) for r in g["rows"]])
        lines.append(
            f"  {'label':<{width}} {'tok/s':>8} {'x ref':>6} {'req/s':>7} {'TTFT50':>8} {'x ref':>6}"
            f" {'TTFT95':>8} {'ITL50':>7} {'e2e50':>8} {'fail':>4}"
        )
        for r in g["rows"]:
            mark = "*" if r["is_reference"] else " "
            lines.append(
                f" {mark}{r['label']:<{width}} {_f(r['output_tok_s'], 8)} {_f(r['output_tok_s_ratio'], 6, 2)}"
                f" {_f(r['requests_per_s'], 7, 2)} {_f(r['ttft_ms_p50'], 8)} {_f(r['ttft_p50_ratio'], 6, 2)}"
                f" {_f(r['ttft_ms_p95'], 8)} {_f(r['itl_ms_p50'], 7)} {_f(r['e2e_ms_p50'], 8)} {r['failed'] if r['failed'] is not None else '-':>4}"
            )
        lines.append("")
    lines.append("times in ms; x ref = value / the reference's (* marks the reference, the fastest llama-server)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Compare bench/serve.py reports against the fastest llama-server report.")
    ap.add_argument("reports", nargs="+", type=Path)
    ap.add_argument("--json", action="store_true", help="print the table as JSON")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        table = compare([load(p) for p in args.reports])
    except CompareError as e:
        print(f"compare_serve: error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(table, indent=1))
    else:
        print(render(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
