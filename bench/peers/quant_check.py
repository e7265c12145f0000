#!/usr/bin/env python3
"""Compares ``fak quantize`` with llama.cpp's ``llama_model_quantize`` on
any GGUF file, tensor for tensor.

For each target file type this quantizes ``MODEL`` twice, with llama.cpp
(library defaults, ``allow_requantize``, 2 threads, no importance matrix;
``common.llama_quantize``) and with ``fak quantize``, into a temporary
directory, and prints how many tensors differ in type or data (SHA-256 of
each tensor's bytes) and the type counts of llama.cpp's file::

    bench/.venv/bin/python bench/peers/quant_check.py models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf q4_k_s q6_k
    bench/.venv/bin/python bench/peers/quant_check.py MODEL q4_k_m --fak target/release/fak

Exit status 1 if any tensor differs. The committed goldens of
``requant_golden.py`` hold the same comparison for SmolLM2 in the tests;
this one checks other models on request.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402


def compare(L: object, src: Path, target: str, fak: Path) -> int:
    """Quantizes ``src`` to ``target`` both ways; returns the number of
    tensors that differ."""
    with tempfile.TemporaryDirectory(prefix="fak-peer-qcheck-") as td:
        a, b = Path(td) / "llama.gguf", Path(td) / "fak.gguf"
        common.llama_quantize(L, src, a, target, 2)
        run = subprocess.run([str(fak), "quantize", str(src), str(b), target], capture_output=True, text=True)
        if run.returncode != 0:
            raise common.PeerError(f"fak quantize {target}: {run.stderr.strip()}")
        ga, gb = common.read_gguf(a), common.read_gguf(b)
        tb = {t.name: t for t in gb.tensors}
        differ = [
            t.name
            for t in ga.tensors
            if t.name not in tb
            or t.type_name != tb[t.name].type_name
            or common.tensor_sha256(a, ga, t) != common.tensor_sha256(b, gb, tb[t.name])
        ]
        if len(gb.tensors) != len(ga.tensors):
            differ.append(f"tensor count {len(gb.tensors)} vs {len(ga.tensors)}")
        types: dict[str, int] = {}
        for t in ga.tensors:
            types[t.type_name] = types.get(t.type_name, 0) + 1
        print(f"{src.name} -> {target}: {len(ga.tensors)} tensors, {len(differ)} differ {differ[:3]}; llama.cpp's types {types}")
        return len(differ)


def main() -> int:
    common.ensure_peer_python()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", type=Path)
    ap.add_argument("targets", nargs="+", help="file types, as `fak quantize` names them")
    ap.add_argument("--fak", type=Path, default=common.ROOT / "target" / "release" / "fak")
    args = ap.parse_args()
    if not args.model.exists():
        raise common.PeerError(f"{args.model}: no such file")
    L = common.llama_init()
    bad = sum(compare(L, args.model, t, args.fak) for t in args.targets)
    return 1 if bad else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except common.PeerError as e:
        print(f"quant_check: error: {e}", file=sys.stderr)
        sys.exit(1)
