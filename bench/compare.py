#!/usr/bin/env python3
"""Side-by-side table of two single-stream benchmark reports.

``compare.py A.json B.json [--json]`` reads two reports of schema
``fak-bench-single/1`` (from ``fak bench model --json`` and
``bench/peers/llamacpp.py single``; either order) and prints, per metric,
fak's value, llama.cpp's value and the ratio fak / llama.cpp (above 1 means
fak is faster). Metrics are the median tokens per second of each prefill
length and of decode. ``--json`` prints the rows as JSON instead.

Only the standard library is used.
"""

from __future__ import annotations

import argparse
import json
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


def main() -> int:
    ap = argparse.ArgumentParser(description="Compare a fak and a llama.cpp single-stream benchmark report.")
    ap.add_argument("a", type=Path, help="first report (JSON)")
    ap.add_argument("b", type=Path, help="second report (JSON)")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = ap.parse_args()
    try:
        fak, peer = pick((args.a, load(args.a)), (args.b, load(args.b)))
        table = rows(fak, peer)
    except CompareError as e:
        print(f"compare.py: error: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({"fak": str(fak[0]), "llama.cpp": str(peer[0]), "rows": table}, indent=2))
    else:
        sys.stdout.write(render(header(fak[1], peer[1]), table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
