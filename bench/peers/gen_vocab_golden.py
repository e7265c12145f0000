#!/usr/bin/env python3
"""Tokenizer goldens for llama.cpp's vocab-only GGUFs (SPM and Llama 3 BPE).

The sibling of ``gen_tokenizer_golden.py`` for vocabularies fak has no model
file for: the ``ggml-vocab-*.gguf`` files that ``scripts/fetch-vocabs.sh``
extracts into ``models/llama-vocab/``. Same corpus (``CORPUS`` plus the 300
seeded random strings of ``random_corpus()``), same recorded fields per case
(``ids``: ``llama_tokenize(add_special=True, parse_special=True)``,
``ids_plain``: ``parse_special=False``, ``detok_hex``:
``llama_detokenize(ids, remove_special=False, unparse_special=True)``).

llama-cpp-python is not needed: a small C++ tool, ``vocab_tokenize.cpp``,
is compiled against the static libllama/ggml that
``bench/peers/build-server.sh`` builds from the same llama-cpp-python 0.3.30
sdist (``$FAK_LLAMA_BUILD``, default ``bench/.venv/llama.cpp-build``).

Usage::

    bench/peers/build-server.sh && scripts/fetch-vocabs.sh
    python3 bench/peers/gen_vocab_golden.py            # write
    python3 bench/peers/gen_vocab_golden.py --check    # compare, write nothing

Output: ``crates/fak-tokenizer/tests/data/vocab-golden-{llama-spm,phi-3,llama-bpe}.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
import gen_tokenizer_golden as tg  # noqa: E402

HERE = Path(__file__).resolve().parent
VOCAB_DIR = common.ROOT / "models" / "llama-vocab"
OUT_DIR = common.ROOT / "crates" / "fak-tokenizer" / "tests" / "data"
VOCABS = ["llama-spm", "phi-3", "llama-bpe"]


def build_dir() -> Path:
    return Path(os.environ.get("FAK_LLAMA_BUILD", common.ROOT / "bench" / ".venv" / "llama.cpp-build"))


def compile_tool(tmp: Path) -> Path:
    b = build_dir()
    stamp = b / "fak-build-stamp"
    if not stamp.exists() or stamp.read_text().strip() != common.PEER:
        raise common.PeerError(f"{b}: no llama.cpp built from {common.PEER}; run bench/peers/build-server.sh")
    src = b / "src" / f"llama_cpp_python-{common.PEER_VERSION}" / "vendor" / "llama.cpp"
    libs = [b / "obj" / p for p in ("src/libllama.a", "ggml/src/libggml.a", "ggml/src/libggml-cpu.a", "ggml/src/libggml-base.a")]
    for lib in libs:
        if not lib.exists():
            raise common.PeerError(f"{lib} is missing; run bench/peers/build-server.sh")
    exe = tmp / "vocab_tokenize"
    cmd = ["c++", "-O1", "-std=c++17", f"-I{src / 'include'}", f"-I{src / 'ggml' / 'include'}",
           str(HERE / "vocab_tokenize.cpp"), *map(str, libs), "-fopenmp", "-lpthread", "-ldl", "-o", str(exe)]
    subprocess.run(cmd, check=True)
    return exe


def run_vocab(exe: Path, tmp: Path, name: str) -> dict[str, Any]:
    path = VOCAB_DIR / f"ggml-vocab-{name}.gguf"
    if not path.exists():
        raise common.PeerError(f"{path} is missing: run scripts/fetch-vocabs.sh")
    corpus = tg.CORPUS + tg.random_corpus()
    cases_file = tmp / f"{name}.cases"
    out_file = tmp / f"{name}.out"
    with open(cases_file, "wb") as f:
        for _, text in corpus:
            b = text.encode("utf-8")
            f.write(struct.pack("<I", len(b)) + b)
    subprocess.run([str(exe), str(path), str(cases_file), str(out_file)], check=True)
    lines = out_file.read_text().split("\n")
    if len(lines) < 3 * len(corpus):
        raise common.PeerError(f"{name}: {len(lines)} output lines for {len(corpus)} cases")
    ids = lambda s: [int(x) for x in s.split()]  # noqa: E731
    cases = []
    for i, (case_name, text) in enumerate(corpus):
        a, b, d = lines[3 * i : 3 * i + 3]
        cases.append({"name": case_name, "text": text, "ids": ids(a), "ids_plain": ids(b), "detok_hex": d})
    return {
        "generator": "bench/peers/gen_vocab_golden.py",
        "peer": common.PEER + " (static libllama, bench/peers/vocab_tokenize.cpp)",
        "vocab_file": path.name,
        "vocab_sha256": common.sha256_file(path),
        "cases": cases,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare with the files on disk, write nothing")
    ap.add_argument("--out-dir", type=Path, default=OUT_DIR)
    args = ap.parse_args()
    failed = False
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        exe = compile_tool(tmp)
        for name in VOCABS:
            data = run_vocab(exe, tmp, name)
            text = json.dumps(data, ensure_ascii=False, indent=1) + "\n"
            out = args.out_dir / f"vocab-golden-{name}.json"
            if args.check:
                same = out.exists() and out.read_text(encoding="utf-8") == text
                failed |= not same
                print(f"{common.rel(out)}: {'same' if same else 'DIFFERENT'}")
            else:
                out.write_text(text, encoding="utf-8")
                print(f"wrote {common.rel(out)} ({len(data['cases'])} cases)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
