#!/usr/bin/env python3
"""llama.cpp benchmark peer for fak's ``fak bench model`` protocol.

``llamacpp.py single --model M --threads T [--reps 3] --out FILE.json``
measures single-stream prefill and decode throughput through
llama-cpp-python 0.3.30's low-level batch API (``llama_batch_init`` /
``llama_decode``) and writes a report with the same schema as
``fak bench model --json`` (engine ``"llama.cpp"``), so that
``bench/compare.py`` can put the two side by side.

Protocol (identical to fak's, see ``crates/fak-cli/src/bench.rs``)::

    token ids  LCG state0 = 2463534242,
               state_{n+1} = state_n * 6364136223846793005 + 1442695040888963407 (mod 2**64),
               id_n = (state_n >> 33) % n_vocab for n = 1, 2, ...;
               every workload restarts the stream at state0
    prefill    P in {16, 64, 256}: one llama_decode of id_1..id_P into an
               empty cache, logits for the last token only; tok/s = P / time
    decode     untimed prompt id_1..id_16, then 32 timed single-token steps
               id_17..id_48; tok/s = 1 / median step time
    reps       one warm-up run (discarded) + ``reps`` runs per workload;
               the median over runs is reported with every run's value

The cache is emptied with ``llama_memory_clear`` before every run. The
context uses the library defaults (f16 K/V cache, flash attention "auto")
apart from sizes and thread counts.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

SCHEMA = "fak-bench-single/1"
PREFILL_LENS = (16, 64, 256)
DECODE_PROMPT = 16
DECODE_STEPS = 32
LCG_STATE0 = 2463534242
LCG_MUL = 6364136223846793005
LCG_INC = 1442695040888963407
MASK64 = (1 << 64) - 1
TOKEN_STREAM = (
    "lcg state0=2463534242 mul=6364136223846793005 inc=1442695040888963407 "
    "id_n=(state_n>>33)%n_vocab from state_1; restarted per workload; "
    "prefill P uses id_1..id_P; decode prompt id_1..id_16, steps id_17..id_48"
)


def lcg_ids(n_vocab: int, n: int) -> list[int]:
    """The first ``n`` ids of a fresh protocol stream."""
    if n_vocab < 1:
        raise common.PeerError(f"n_vocab must be positive, got {n_vocab}")
    state = LCG_STATE0
    out = []
    for _ in range(n):
        state = (state * LCG_MUL + LCG_INC) & MASK64
        out.append((state >> 33) % n_vocab)
    return out


def median(xs: list[float]) -> float:
    """Median (mean of the middle two for even lengths); 0.0 when empty."""
    v = sorted(xs)
    n = len(v)
    if n == 0:
        return 0.0
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2.0


def stats(xs: list[float]) -> dict[str, float]:
    """min, median, mean, nearest-rank p90 and max, like fak's report."""
    v = sorted(xs)
    n = len(v)
    if n == 0:
        return {"min": 0.0, "median": 0.0, "mean": 0.0, "p90": 0.0, "max": 0.0}
    rank = min(max(math.ceil(0.9 * n), 1), n)
    return {"min": v[0], "median": median(v), "mean": sum(v) / n, "p90": v[rank - 1], "max": v[-1]}


def cpu_model() -> str:
    """The first ``model name`` of /proc/cpuinfo, else platform's guess."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, sep, val = line.partition(":")
                if sep and key.strip() == "model name":
                    return val.strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def isa_string(L: Any) -> str:
    """The CPU features llama.cpp reports as enabled (``X = 1``), joined."""
    info = L.llama_print_system_info()
    text = info.decode("utf-8", "replace") if isinstance(info, bytes) else str(info)
    on = []
    for part in text.replace("|", "\n").splitlines():
        key, sep, val = part.partition("=")
        if sep and val.strip() == "1":
            name = key.split(":")[-1].strip()
            if name and name not in on:
                on.append(name)
    return ",".join(on) or "unknown"


class Runner:
    """One model, one context and one batch, reused by every run."""

    def __init__(self, L: Any, path: Path, threads: int) -> None:
        self.L = L
        mp = L.llama_model_default_params()
        mp.n_gpu_layers = 0
        self.model = L.llama_model_load_from_file(str(path).encode(), mp)
        if not self.model:
            raise common.PeerError(f"{path}: llama_model_load_from_file failed")
        self.n_vocab = int(L.llama_vocab_n_tokens(L.llama_model_get_vocab(self.model)))
        n_ctx = max(max(PREFILL_LENS), DECODE_PROMPT + DECODE_STEPS)
        cp = L.llama_context_default_params()
        cp.n_ctx = n_ctx
        cp.n_batch = n_ctx
        cp.n_ubatch = n_ctx
        cp.n_seq_max = 1
        cp.n_threads = threads
        cp.n_threads_batch = threads
        self.ctx = L.llama_init_from_model(self.model, cp)
        if not self.ctx:
            L.llama_model_free(self.model)
            raise common.PeerError(f"{path}: llama_init_from_model failed (n_ctx {n_ctx}, {threads} threads)")
        self.batch = L.llama_batch_init(n_ctx, 0, 1)
        self.mem = L.llama_get_memory(self.ctx)

    def close(self) -> None:
        self.L.llama_batch_free(self.batch)
        self.L.llama_free(self.ctx)
        self.L.llama_model_free(self.model)

    def clear(self) -> None:
        self.L.llama_memory_clear(self.mem, True)

    def decode(self, ids: list[int], start: int) -> float:
        """One ``llama_decode`` of ``ids`` at positions ``start..`` (logits
        for the last only); returns its wall time in seconds."""
        b = self.batch
        b.n_tokens = len(ids)
        for i, t in enumerate(ids):
            b.token[i] = t
            b.pos[i] = start + i
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = 0
            b.logits[i] = 1 if i == len(ids) - 1 else 0
        t0 = time.perf_counter()
        rc = self.L.llama_decode(self.ctx, b)
        self.L.llama_synchronize(self.ctx)
        dt = time.perf_counter() - t0
        if rc != 0:
            raise common.PeerError(f"llama_decode returned {rc} ({len(ids)} tokens at pos {start})")
        if not self.L.llama_get_logits_ith(self.ctx, -1):
            raise common.PeerError("llama_get_logits_ith(-1) returned NULL")
        return dt


def bench(r: Runner, reps: int, progress: bool) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    runs = reps + 1
    total = (len(PREFILL_LENS) + 1) * runs
    done = 0

    def tick(what: str) -> None:
        nonlocal done
        done += 1
        if progress:
            print(f"\rllama.cpp bench {done}/{total} {what}   ", end="", file=sys.stderr, flush=True)

    prefill = []
    for p in PREFILL_LENS:
        ids = lcg_ids(r.n_vocab, p)
        secs = []
        for run in range(runs):
            r.clear()
            s = r.decode(ids, 0)
            if run > 0:
                secs.append(s)
            tick(f"prefill {p}")
        tok_s = [p / max(s, 1e-12) for s in secs]
        prefill.append({"n_tokens": p, "tok_s": median(tok_s), "tok_s_reps": tok_s, "seconds_reps": secs})

    ids = lcg_ids(r.n_vocab, DECODE_PROMPT + DECODE_STEPS)
    prompt, steps = ids[:DECODE_PROMPT], ids[DECODE_PROMPT:]
    tok_s_reps = []
    all_ms = []
    for run in range(runs):
        r.clear()
        r.decode(prompt, 0)
        times = [r.decode([t], DECODE_PROMPT + i) for i, t in enumerate(steps)]
        if run > 0:
            tok_s_reps.append(1.0 / max(median(times), 1e-12))
            all_ms.extend(t * 1e3 for t in times)
        tick(f"decode {DECODE_STEPS}")
    if progress:
        print(file=sys.stderr)
    decode = {
        "prompt_tokens": DECODE_PROMPT,
        "steps": DECODE_STEPS,
        "tok_s": median(tok_s_reps),
        "tok_s_reps": tok_s_reps,
        "step_ms": stats(all_ms),
    }
    return prefill, decode


def single(args: argparse.Namespace) -> int:
    if args.reps < 1:
        raise common.PeerError("--reps must be at least 1")
    if args.threads < 1:
        raise common.PeerError("--threads must be at least 1")
    path = Path(args.model)
    if not path.is_file():
        raise common.PeerError(f"model file {path} does not exist")
    L = common.llama_init()
    r = Runner(L, path, args.threads)
    try:
        prefill, decode = bench(r, args.reps, sys.stderr.isatty())
        report = {
            "schema": SCHEMA,
            "engine": "llama.cpp",
            "engine_version": common.PEER,
            "cpu": cpu_model(),
            "isa": isa_string(L),
            "threads": args.threads,
            "model": path.name,
            "model_sha256": common.sha256_file(path),
            "n_vocab": r.n_vocab,
            "reps": args.reps,
            "token_stream": TOKEN_STREAM,
            "prefill": prefill,
            "decode": decode,
        }
    finally:
        r.close()
    text = json.dumps(report, indent=2) + "\n"
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


def main() -> int:
    common.ensure_peer_python()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("single", help="single-stream prefill and decode throughput")
    s.add_argument("--model", required=True, help="GGUF model file")
    s.add_argument("--threads", type=int, required=True, help="llama.cpp threads (n_threads and n_threads_batch)")
    s.add_argument("--reps", type=int, default=3, help="measured runs per workload after one warm-up")
    s.add_argument("--out", help="write the JSON report here (default: stdout)")
    args = ap.parse_args()
    try:
        return single(args)
    except common.PeerError as e:
        print(f"llamacpp.py: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
