#!/usr/bin/env python3
"""Golden descriptions of llama.cpp's own requantization of the SmolLM2 file.

For each target type this asks llama.cpp's quantizer
(``llama_model_quantize`` with ``llama_model_quantize_default_params()``,
``allow_requantize = True``, ``nthread = 2``) to turn
``models/smollm2-135m-instruct-q4_1.gguf`` into a temporary GGUF, then
parses that file with the independent reader in ``common.py`` and writes
``crates/fak-cli/tests/golden/requant-smollm2-q4_1-to-<target>.json``::

    {"source_file", "source_sha256", "peer", "target", "llama_ftype", "nthread",
     "output_sha256", "output_size", "gguf_version", "alignment",
     "file_type",                       # general.file_type in the output
     "metadata_keys": [...],            # output keys, file order
     "metadata_changes": {"added": [...], "removed": [...], "changed": {...}},
     "tensor_types": {"q8_0": n, ...},
     "tensors": [{"name", "type", "dims", "data_sha256"}, ...]}   # file order

``type`` is the lower-case ggml name (``q8_0``, ``q6_k``), ``dims`` are in
ggml order (fastest-varying first).

Usage::

    bench/.venv/bin/python bench/peers/requant_golden.py            # all targets
    python3 bench/peers/requant_golden.py --python /tmp/peervenv/bin/python q8_0 f16
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

SOURCE = "smollm2-135m-instruct-q4_1.gguf"
NTHREAD = 2


def summarize(type_name: str, value: Any) -> Any:
    """A metadata value as it appears in the change report: scalars as is,
    arrays as their type and length."""
    if type_name.startswith("array"):
        return f"{type_name} x{len(value)}"
    return value


def metadata_changes(src: common.Gguf, out: common.Gguf) -> dict[str, Any]:
    """Keys added, removed, and changed (value or GGUF type) by the quantizer."""
    s = {m.key: m for m in src.metadata}
    o = {m.key: m for m in out.metadata}
    changed = {}
    for k, m in o.items():
        if k in s and (s[k].type_name != m.type_name or s[k].value != m.value):
            changed[k] = {
                "from": summarize(s[k].type_name, s[k].value),
                "to": summarize(m.type_name, m.value),
            }
    return {
        "added": [{"key": k, "type": m.type_name, "value": summarize(m.type_name, m.value)} for k, m in o.items() if k not in s],
        "removed": [k for k in s if k not in o],
        "changed": changed,
        "order_kept": [k for k in o if k in s] == [k for k in s if k in o],
    }


def describe(src_path: Path, out_path: Path, target: str, ftype: int) -> dict[str, Any]:
    src = common.read_gguf(src_path)
    out = common.read_gguf(out_path)
    tensors = [
        {
            "name": t.name,
            "type": t.type_name,
            "dims": t.dims,
            "data_sha256": common.tensor_sha256(out_path, out, t),
        }
        for t in out.tensors
    ]
    return {
        "source_file": src_path.name,
        "source_sha256": common.sha256_file(src_path),
        "peer": common.PEER,
        "target": target,
        "llama_ftype": ftype,
        "nthread": NTHREAD,
        "output_sha256": common.sha256_file(out_path),
        "output_size": out_path.stat().st_size,
        "gguf_version": out.version,
        "alignment": out.alignment,
        "file_type": out.get("general.file_type"),
        "metadata_keys": [m.key for m in out.metadata],
        "metadata_changes": metadata_changes(src, out),
        "tensor_types": dict(sorted(Counter(t.type_name for t in out.tensors).items())),
        "tensors": tensors,
    }


def render(d: dict[str, Any]) -> str:
    """Pretty JSON with one tensor per line."""
    lines = ["{"]
    items = list(d.items())
    for i, (k, v) in enumerate(items):
        comma = "," if i + 1 < len(items) else ""
        if k == "tensors":
            body = ",\n".join("    " + json.dumps(t) for t in v)
            lines.append(f'  "tensors": [\n{body}\n  ]{comma}')
        elif k == "metadata_keys":
            body = ",\n".join("    " + json.dumps(x) for x in v)
            lines.append(f'  "metadata_keys": [\n{body}\n  ]{comma}')
        else:
            lines.append(f"  {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}{comma}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main() -> int:
    common.ensure_peer_python()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("targets", nargs="*", default=list(common.QUANT_TARGETS), help="default: all of " + " ".join(common.QUANT_TARGETS))
    ap.add_argument("--out-dir", type=Path, default=common.CLI_GOLDEN_DIR)
    ap.add_argument("--check", action="store_true", help="regenerate in memory and compare with the files on disk")
    args = ap.parse_args()
    src = common.MODELS / SOURCE
    if not src.exists():
        raise common.PeerError(f"{src} is missing: run scripts/fetch-models.sh")
    L = common.llama_init()
    diffs = []
    with tempfile.TemporaryDirectory(prefix="fak-peer-requant-") as td:
        for target in args.targets:
            out = Path(td) / f"smollm2-135m-instruct-{target}.gguf"
            print(f"requant: llama.cpp quantize {SOURCE} -> {target}", file=sys.stderr)
            common.llama_log_clear()
            ftype = common.llama_quantize(L, src, out, target, NTHREAD)
            d = describe(src, out, target, ftype)
            out.unlink()
            text = render(d)
            path = args.out_dir / f"requant-smollm2-q4_1-to-{target}.json"
            print(
                f"  {target}: file_type {d['file_type']}, {d['output_size']} bytes, tensors {d['tensor_types']}, "
                f"metadata +{[a['key'] for a in d['metadata_changes']['added']]} "
                f"-{d['metadata_changes']['removed']} ~{list(d['metadata_changes']['changed'])}"
            )
            if args.check:
                if not path.exists() or json.loads(path.read_text(encoding="utf-8")) != json.loads(text):
                    diffs.append(f"{path.name} differs from a fresh run")
                continue
            args.out_dir.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"requant:   wrote {common.rel(path)}", file=sys.stderr)
    if args.check:
        for x in diffs:
            print(f"requant: DIFF {x}", file=sys.stderr)
        print(f"requant: check {'failed' if diffs else 'passed'}", file=sys.stderr)
        return 1 if diffs else 0
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except common.PeerError as e:
        print(f"requant: error: {e}", file=sys.stderr)
        sys.exit(1)
