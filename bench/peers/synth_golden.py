#!/usr/bin/env python3
"""Teacher-forced llama.cpp goldens for fak's synthetic GGUF models.

The models (``fak_model::synth``: qwen3 and llama 3.2 head geometry and
metadata keys, random weights, a few MB each) are written by fak's own
example, so fak's tests can rebuild the same bytes in-process and check
the SHA-256 recorded here::

    cargo run --release -p fak-model --example synth_gguf -- MODEL OUT.gguf

For each model, llama.cpp (llama-cpp-python 0.3.30, 2 threads, f16 K/V,
flash attention "auto", which is enabled on CPU) is fed one fixed token
sequence of ``N_PROMPT + N_DECODE`` ids from a seeded LCG, teacher-forced:

    ids[0..N_PROMPT]       --decode(one batch, logits on last)--> row 0
    ids[N_PROMPT]          --decode(1 token)-------------------> row 1
    ...
    ids[N_PROMPT+N_DECODE-1] --decode(1 token)-----------------> row N_DECODE

The fed tokens never depend on the logits, so the rows compare the math
alone (random weights give near-ties everywhere; greedy ids would not).
Output, in ``crates/fak-model/tests/golden/``:

* ``synth-MODEL.json``: model name, file SHA-256, the token ids, N_PROMPT,
  the number of rows, the peer and its settings;
* ``synth-MODEL.logits.f32``: the rows, raw little-endian f32,
  ``rows x n_vocab``.

Two peers make the same llama.cpp calls on the same llama.cpp source:

* ``--peer python`` (default): llama-cpp-python 0.3.30's low-level
  bindings, run under the peer interpreter (``bench/.venv/bin/python``);
* ``--peer static``: ``synth_logits.cpp`` compiled against the static
  libllama that ``build-server.sh`` builds from the same 0.3.30 sdist (the
  stand-in where llama-cpp-python is not importable, as for
  ``gen_vocab_golden.py``); stdlib Python only.

The golden's ``peer`` field says which one wrote it. ``--check`` compares
everything else (the file's SHA-256, the token ids, the settings) and every
logit bit for bit: on the committed goldens (written by the static tool)
the Python peer gives the same bytes.

Usage::

    bench/.venv/bin/python bench/peers/synth_golden.py            # all models
    python3 bench/peers/synth_golden.py --peer static
    bench/.venv/bin/python bench/peers/synth_golden.py --model qwen3 --check
"""

from __future__ import annotations

import argparse
import array
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

HERE = Path(__file__).resolve().parent
MODELS = ["qwen3", "llama3.2", "iq-grids"]
N_PROMPT = 960
N_DECODE = 32
N_THREADS = 2
SEED = 0x5EED_0024


def token_ids(n: int, n_vocab: int, seed: int = SEED) -> list[int]:
    """``n`` ids below ``n_vocab`` from Knuth's MMIX LCG (top bits)."""
    out = []
    s = seed
    for _ in range(n):
        s = (s * 6364136223846793005 + 1442695040888963407) & ((1 << 64) - 1)
        out.append((s >> 33) % n_vocab)
    return out


def write_model(name: str, path: Path, synth_bin: str | None) -> None:
    """Writes the synthetic file with fak's example (or a built binary)."""
    if synth_bin:
        cmd = [synth_bin, name, str(path)]
    else:
        cmd = ["cargo", "run", "--quiet", "--release", "-p", "fak-model", "--example", "synth_gguf", "--", name, str(path)]
    r = subprocess.run(cmd, cwd=common.ROOT, env=dict(os.environ), capture_output=True, text=True)
    if r.returncode != 0:
        raise common.PeerError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr}")


def decode(L: Any, ctx: Any, batch: Any, tokens: list[int], start: int, n_vocab: int) -> Any:
    """Decodes ``tokens`` at positions ``start..`` in sequence 0 and returns
    the last one's logits (float32 [n_vocab])."""
    import numpy as np  # noqa: PLC0415

    batch.n_tokens = len(tokens)
    for i, t in enumerate(tokens):
        batch.token[i] = t
        batch.pos[i] = start + i
        batch.n_seq_id[i] = 1
        batch.seq_id[i][0] = 0
        batch.logits[i] = 1 if i == len(tokens) - 1 else 0
    rc = L.llama_decode(ctx, batch)
    if rc != 0:
        raise common.PeerError(f"llama_decode returned {rc} ({len(tokens)} tokens at pos {start})")
    ptr = L.llama_get_logits_ith(ctx, -1)
    if not ptr:
        raise common.PeerError("llama_get_logits_ith(-1) returned NULL")
    v = np.ctypeslib.as_array(ptr, shape=(n_vocab,)).astype(np.float32, copy=True)
    if not np.all(np.isfinite(v)):
        raise common.PeerError("non-finite logits from llama.cpp")
    return v


FLASH_ATTN = {
    "auto": "LLAMA_FLASH_ATTN_TYPE_AUTO",
    "on": "LLAMA_FLASH_ATTN_TYPE_ENABLED",
    "off": "LLAMA_FLASH_ATTN_TYPE_DISABLED",
}


def run_python(L: Any, path: Path, flash_attn: str = "auto") -> tuple[int, list[int], bytes]:
    """(n_vocab, ids, rows as little-endian f32) through llama-cpp-python."""
    import numpy as np  # noqa: PLC0415

    mp = L.llama_model_default_params()
    mp.n_gpu_layers = 0
    model = L.llama_model_load_from_file(str(path).encode(), mp)
    if not model:
        raise common.PeerError(f"{path}: llama_model_load_from_file failed:\n" + "\n".join(common.llama_log_lines()[-15:]))
    try:
        vocab = L.llama_model_get_vocab(model)
        n_vocab = int(L.llama_vocab_n_tokens(vocab))
        ids = token_ids(N_PROMPT + N_DECODE, n_vocab)
        cp = L.llama_context_default_params()
        cp.n_ctx = 2048
        cp.n_batch = 2048
        cp.n_seq_max = 1
        cp.n_threads = N_THREADS
        cp.n_threads_batch = N_THREADS
        cp.flash_attn_type = int(getattr(L, FLASH_ATTN[flash_attn]))
        ctx = L.llama_init_from_model(model, cp)
        if not ctx:
            raise common.PeerError(f"{path}: llama_init_from_model failed")
        batch = L.llama_batch_init(N_PROMPT, 0, 1)
        try:
            rows = [decode(L, ctx, batch, ids[:N_PROMPT], 0, n_vocab)]
            for i in range(N_PROMPT, N_PROMPT + N_DECODE):
                rows.append(decode(L, ctx, batch, [ids[i]], i, n_vocab))
        finally:
            L.llama_batch_free(batch)
            L.llama_free(ctx)
    finally:
        L.llama_model_free(model)
    return n_vocab, ids, b"".join(np.asarray(r, dtype="<f4").tobytes() for r in rows)


def compile_static(tmp: Path) -> Path:
    """synth_logits.cpp against build-server.sh's static libllama."""
    b = Path(os.environ.get("FAK_LLAMA_BUILD", common.ROOT / "bench" / ".venv" / "llama.cpp-build"))
    stamp = b / "fak-build-stamp"
    if not stamp.exists() or stamp.read_text().strip() != common.PEER:
        raise common.PeerError(f"{b}: no llama.cpp built from {common.PEER}; run bench/peers/build-server.sh")
    src = b / "src" / f"llama_cpp_python-{common.PEER_VERSION}" / "vendor" / "llama.cpp"
    libs = [b / "obj" / p for p in ("src/libllama.a", "ggml/src/libggml.a", "ggml/src/libggml-cpu.a", "ggml/src/libggml-base.a")]
    for lib in libs:
        if not lib.exists():
            raise common.PeerError(f"{lib} is missing; run bench/peers/build-server.sh")
    exe = tmp / "synth_logits"
    cmd = ["c++", "-O1", "-std=c++17", f"-I{src / 'include'}", f"-I{src / 'ggml' / 'include'}",
           str(HERE / "synth_logits.cpp"), *map(str, libs), "-fopenmp", "-lpthread", "-ldl", "-o", str(exe)]
    subprocess.run(cmd, check=True)
    return exe


def run_static(exe: Path, path: Path, tmp: Path, flash_attn: str = "auto") -> tuple[int, list[int], bytes]:
    """(n_vocab, ids, rows) through the static-libllama tool."""
    meta = {m.key: m.value for m in common.read_gguf(path).metadata}
    n_vocab = len(meta["tokenizer.ggml.tokens"])
    ids = token_ids(N_PROMPT + N_DECODE, n_vocab)
    ids_file, out_file = tmp / "ids.u32", tmp / "rows.f32"
    ids_file.write_bytes(struct.pack(f"<{len(ids)}I", *ids))
    r = subprocess.run([str(exe), str(path), str(ids_file), str(N_PROMPT), str(out_file), flash_attn], capture_output=True, text=True)
    if r.returncode != 0:
        raise common.PeerError(f"synth_logits failed ({r.returncode}): {r.stderr.strip()}")
    if int(r.stdout.strip()) != n_vocab:
        raise common.PeerError(f"llama.cpp reports n_vocab {r.stdout.strip()}, the file has {n_vocab} tokens")
    return n_vocab, ids, out_file.read_bytes()


def render(name: str, sha: str, peer: str, n_vocab: int, ids: list[int], logits_file: str, n_rows: int) -> str:
    head = {
        "model": name,
        "model_sha256": sha,
        "peer": peer,
        "n_threads": N_THREADS,
        "kv_type": "f16",
        "flash_attn": "auto",
        "n_vocab": n_vocab,
        "n_prompt": N_PROMPT,
        "rows": n_rows,
        "logits_file": logits_file,
    }
    lines = ["{"] + [f"  {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()]
    lines.append(f'  "tokens": {json.dumps(ids)}')
    return "\n".join(lines) + "\n}\n"


def worst_rel(a: array.array, b: array.array, n_vocab: int) -> float:
    """Largest per-row max |a - b| relative to ``b``'s range."""
    worst = 0.0
    for i in range(len(b) // n_vocab):
        ra, rb = a[i * n_vocab : (i + 1) * n_vocab], b[i * n_vocab : (i + 1) * n_vocab]
        worst = max(worst, max(abs(x - y) for x, y in zip(ra, rb)) / (max(rb) - min(rb)))
    return worst


def emit(peer: Any, name: str, out_dir: Path, check: bool, synth_bin: str | None, spread: bool) -> list[str]:
    """``peer``: the llama_cpp module, or the path of the static tool. With
    ``spread``, also runs flash attention off and on and prints how far
    llama.cpp's own logits move (the scale of legitimate differences)."""
    with tempfile.TemporaryDirectory(prefix="fak-synth-") as td:
        path = Path(td) / f"{name}.gguf"
        write_model(name, path, synth_bin)
        sha = common.sha256_file(path)

        def run(fa: str) -> tuple[int, list[int], bytes]:
            if isinstance(peer, Path):
                return run_static(peer, path, Path(td), fa)
            common.llama_log_clear()
            return run_python(peer, path, fa)

        n_vocab, ids, blob = run("auto")
        if isinstance(peer, Path):
            peer_name = common.PEER + " (static libllama, bench/peers/synth_logits.cpp)"
        else:
            peer_name = common.PEER
        if spread:
            ref = array.array("f")
            ref.frombytes(blob)
            for fa in ("off", "on"):
                other = array.array("f")
                other.frombytes(run(fa)[2])
                print(f"synth: {name}: flash attention {fa} vs auto: max rel logit diff {worst_rel(other, ref, n_vocab):.5f}", file=sys.stderr)
    stem = f"synth-{name}"
    logits_file = f"{stem}.logits.f32"
    rows = array.array("f")
    rows.frombytes(blob)
    n_rows = len(rows) // n_vocab
    if n_rows != 1 + N_DECODE:
        raise common.PeerError(f"{name}: {n_rows} rows of logits, expected {1 + N_DECODE}")
    text = render(name, sha, peer_name, n_vocab, ids, logits_file, n_rows)
    ranges = [max(rows[i * n_vocab:(i + 1) * n_vocab]) - min(rows[i * n_vocab:(i + 1) * n_vocab]) for i in range(n_rows)]
    print(
        f"synth: {name}: sha256 {sha[:16]}..., n_vocab {n_vocab}, {n_rows} rows, "
        f"logit range {min(ranges):.2f}..{max(ranges):.2f} ({peer_name})",
        file=sys.stderr,
    )
    json_path = out_dir / f"{stem}.json"
    bin_path = out_dir / logits_file
    if check:
        diffs = []
        if not json_path.exists():
            diffs.append(f"{json_path.name} is missing")
        else:
            on_disk = json.loads(json_path.read_text(encoding="utf-8"))
            fresh = json.loads(text)
            # The two peers run the same llama.cpp calls on the same
            # source, so their rows are compared bit for bit; only the
            # `peer` field, which names the one that wrote the file, may
            # differ.
            if on_disk.get("peer") != fresh["peer"]:
                print(f"synth: {name}: committed golden written by {on_disk.get('peer')!r}, checked with {fresh['peer']!r}", file=sys.stderr)
            on_disk.pop("peer", None)
            fresh.pop("peer")
            if on_disk != fresh:
                keys = sorted(k for k in set(on_disk) | set(fresh) if on_disk.get(k) != fresh.get(k))
                diffs.append(f"{json_path.name} differs in {', '.join(keys)}")
        if not bin_path.exists() or bin_path.read_bytes() != blob:
            diffs.append(f"{bin_path.name} differs")
        return diffs
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path.write_text(text, encoding="utf-8")
    bin_path.write_bytes(blob)
    print(f"synth:   wrote {common.rel(json_path)} and {common.rel(bin_path)}", file=sys.stderr)
    return []


def main() -> int:
    static = "--peer=static" in sys.argv or any(
        a == "--peer" and i + 1 < len(sys.argv) and sys.argv[i + 1] == "static" for i, a in enumerate(sys.argv)
    )
    if not static:
        common.ensure_peer_python()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--peer", choices=["python", "static"], default="python", help="llama-cpp-python, or the static-libllama tool")
    ap.add_argument("--model", action="append", choices=MODELS, help="one model (repeatable; default: all)")
    ap.add_argument("--out-dir", type=Path, default=common.MODEL_GOLDEN_DIR)
    ap.add_argument("--check", action="store_true", help="regenerate in memory and compare with the files on disk")
    ap.add_argument("--synth-bin", help="a built synth_gguf example binary instead of `cargo run`")
    ap.add_argument("--spread", action="store_true", help="also print llama.cpp's own flash-attention on/off spread")
    args = ap.parse_args()
    diffs: list[str] = []
    with tempfile.TemporaryDirectory(prefix="fak-synth-tool-") as td:
        peer: Any = compile_static(Path(td)) if args.peer == "static" else common.llama_init()
        for name in args.model or MODELS:
            diffs += emit(peer, name, args.out_dir, args.check, args.synth_bin, args.spread)
    if args.check:
        for d in diffs:
            print(f"synth: DIFF {d}", file=sys.stderr)
        print(f"synth: check {'failed' if diffs else 'passed'}", file=sys.stderr)
        return 1 if diffs else 0
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except common.PeerError as e:
        print(f"synth: error: {e}", file=sys.stderr)
        sys.exit(1)
