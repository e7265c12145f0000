#!/usr/bin/env python3
"""How far two compact goldens' logits lie apart, prompt by prompt.

``golden.py --compact`` (and ``--gemma3``) writes, per prompt and step of
llama.cpp's greedy path, the top-16 ``[id, logit]`` pairs and the step's
``[min, max]`` logit. Given two such files for one model (say flash
attention on and off, ``golden.py --gemma3 --flash-attn off --out-dir
DIR``), this prints for each prompt the worst difference of a logit both
files list at a step, over the step's range in the first file, along the
steps where both greedy paths still agree, and the mean error of the
logit gaps: over each step's 8 best ids in the first file, ``|(l_a(i) -
l_a(top)) - (l_b(i) - l_b(top))|`` with ``top`` the first file's best id
(what decides a greedy choice, free of a shift of every logit)::

    python3 bench/peers/compact_spread.py \\
        crates/fak-model/tests/golden/gemma-3-270m-q4_k_m.json DIR/gemma-3-270m-q4_k_m.json

Standard library only.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


# Best ids per step whose logit gaps to the best one are compared.
GAP_IDS = 8


def spread(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    """Per prompt of ``a`` (by name, also in ``b``): the worst relative
    logit difference, its step, the steps compared, and whether the two
    greedy paths are the same."""
    others = {p["name"]: p for p in b["prompts"]}
    out = []
    for p in a["prompts"]:
        q = others.get(p["name"])
        if q is None:
            continue
        ga, gb = p["greedy_ids"], q["greedy_ids"]
        worst, at, steps = 0.0, None, 0
        gap_sum, gaps = 0.0, 0
        for s, (ta, tb) in enumerate(zip(p["top_logits"], q["top_logits"])):
            if ga[:s] != gb[:s]:
                break
            la, lb = dict((i, v) for i, v in ta), dict((i, v) for i, v in tb)
            lo, hi = p["ranges"][s]
            shared = set(la) & set(lb)
            steps += 1
            if not shared or hi <= lo:
                continue
            e = max(abs(la[i] - lb[i]) for i in shared) / (hi - lo)
            if e > worst:
                worst, at = e, s
            top = ta[0][0]
            if top in lb:
                for i, v in ta[:GAP_IDS]:
                    if i in lb:
                        gap_sum += abs((v - la[top]) - (lb[i] - lb[top]))
                        gaps += 1
        out.append({
            "name": p["name"], "worst": worst, "step": at, "steps": steps, "same_path": ga == gb,
            "mean_gap": gap_sum / gaps if gaps else 0.0,
        })
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a", type=Path)
    ap.add_argument("b", type=Path)
    args = ap.parse_args()
    try:
        a, b = (json.loads(p.read_text()) for p in (args.a, args.b))
    except (OSError, ValueError) as e:
        print(f"compact_spread: {e}", file=sys.stderr)
        return 1
    for r in spread(a, b):
        step = "-" if r["step"] is None else r["step"]
        print(f"{r['name']:13s} steps {r['steps']:3d}  same path {str(r['same_path']):5s}  "
              f"worst rel {r['worst']:.4f} at step {step}  mean gap error {r['mean_gap']:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
