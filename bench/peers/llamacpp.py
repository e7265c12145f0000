#!/usr/bin/env python3
"""llama.cpp benchmark peer for fak's ``fak bench model`` protocol.

``llamacpp.py single --model M --threads T [--reps 3] --out FILE.json``
measures single-stream prefill and decode throughput through
llama-cpp-python 0.3.30's low-level batch API (``llama_batch_init`` /
``llama_decode``) and writes a report with the same schema as
``fak bench model --json`` (engine ``"llama.cpp"``), so that
``bench/compare.py`` can put the two side by side.

Protocol (identical to fak's, see ``crates/fak-bench/src/single.rs``)::

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

``batched`` and ``fleet`` also take ``--flash-attn auto|on|off``
(``flash_attn_type``) and ``--type-kv f16|q8_0`` (``type_k`` and
``type_v``; q8_0 needs flash attention auto or on); their reports carry
``flash_attn`` and ``type_kv``. The fleet context has ``n_ubatch =
n_batch``, so a whole turn's ingest is one micro-batch.

``llamacpp.py batched`` and ``llamacpp.py fleet`` run the multi-sequence
workloads of ``workloads.py`` (schemas ``fak-bench-batch/1`` and
``fak-bench-fleet/1``) with llama.cpp's KV cache either unified (one cell
pool, ``kv_unified = true``) or split per sequence (``kv_unified = false``,
one stream of ``n_ctx / n_seq_max`` cells per sequence). See
``bench/peers/README.md`` for the exact protocols and JSON keys.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import platform
import struct
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import checkpoint as ck  # noqa: E402
import common  # noqa: E402
import workloads as wl  # noqa: E402

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


# --------------------------------------------------------------------------
# Multi-sequence workloads: batched and fleet
# --------------------------------------------------------------------------

# LLAMA_MAX_SEQ in src/llama-cparams.h of the llama.cpp bundled with
# llama-cpp-python 0.3.30: llama_init_from_model rejects a larger n_seq_max.
LLAMA_MAX_SEQ = 256
# llama.cpp pads n_ctx (and, without kv_unified, every sequence's share
# n_ctx / n_seq_max) up to a multiple of 256 cells.
CTX_PAD = 256
KV_MODES = ("unified", "per-seq")
# --flash-attn: llama_context_params.flash_attn_type (enum llama_flash_attn_type).
FLASH_ATTN = {"auto": -1, "on": 1, "off": 0}
# --type-kv: llama_context_params.type_k and type_v (enum ggml_type).
KV_TYPES = {"f16": 1, "q8_0": 8}
DEFAULT_SETTINGS = {"flash_attn": "auto", "type_kv": "f16"}


def context_settings(flash_attn: str, type_kv: str) -> dict[str, str]:
    """The attention settings of a context, checked before llama.cpp sees
    them: llama.cpp refuses a quantized V cache without flash attention
    (``llama_init_from_model``: "V cache quantization requires flash_attn")."""
    if flash_attn not in FLASH_ATTN:
        raise common.PeerError(f"--flash-attn {flash_attn!r}: want one of {', '.join(FLASH_ATTN)}")
    if type_kv not in KV_TYPES:
        raise common.PeerError(f"--type-kv {type_kv!r}: want one of {', '.join(KV_TYPES)}")
    if type_kv != "f16" and flash_attn == "off":
        raise common.PeerError(f"--type-kv {type_kv} needs flash attention (llama.cpp quantizes V only with it): use --flash-attn auto or on")
    return {"flash_attn": flash_attn, "type_kv": type_kv}


def settings_label(kv: str, settings: dict[str, str]) -> str:
    """Checkpoint name part: the KV layout, plus the settings when they are
    not the library defaults (so earlier checkpoints keep their names)."""
    if settings == DEFAULT_SETTINGS:
        return kv
    return f"{kv}-fa-{settings['flash_attn']}-kv-{settings['type_kv']}"


# First bytes of a per-sequence state file (see ``Context.save_state``).
SEQ_STATE_MAGIC = b"FAKSEQS1"


def pad_ctx(n: int) -> int:
    return (n + CTX_PAD - 1) // CTX_PAD * CTX_PAD


class Model:
    """A loaded model (CPU only) that many contexts share."""

    def __init__(self, L: Any, path: Path) -> None:
        self.L = L
        self.path = path
        mp = L.llama_model_default_params()
        mp.n_gpu_layers = 0
        self.ptr = L.llama_model_load_from_file(str(path).encode(), mp)
        if not self.ptr:
            raise common.PeerError(f"{path}: llama_model_load_from_file failed")
        self.n_vocab = int(L.llama_vocab_n_tokens(L.llama_model_get_vocab(self.ptr)))

    def close(self) -> None:
        self.L.llama_model_free(self.ptr)


class Context:
    """One llama.cpp context plus a token batch of ``n_batch`` entries.

    ``kv`` is ``"unified"`` (``kv_unified = true``: one pool of ``n_ctx``
    cells that every sequence draws from; ``llama_memory_seq_cp`` only tags
    cells) or ``"per-seq"`` (``kv_unified = false``: ``n_seq_max`` streams of
    ``n_ctx / n_seq_max`` cells; ``llama_memory_seq_cp`` copies a whole
    stream's buffers, queued until the next ``llama_decode``).
    """

    def __init__(
        self,
        model: Model,
        *,
        n_ctx: int,
        n_batch: int,
        n_ubatch: int,
        n_seq_max: int,
        kv: str,
        threads: int,
        settings: dict[str, str] | None = None,
    ) -> None:
        L = model.L
        self.L = L
        st = settings or DEFAULT_SETTINGS
        cp = L.llama_context_default_params()
        cp.n_ctx = n_ctx
        cp.n_batch = n_batch
        cp.n_ubatch = n_ubatch
        cp.n_seq_max = n_seq_max
        cp.kv_unified = kv == "unified"
        cp.flash_attn_type = FLASH_ATTN[st["flash_attn"]]
        cp.type_k = KV_TYPES[st["type_kv"]]
        cp.type_v = KV_TYPES[st["type_kv"]]
        cp.n_threads = threads
        cp.n_threads_batch = threads
        common.llama_log_clear()
        self.ctx = L.llama_init_from_model(model.ptr, cp)
        if not self.ctx:
            tail = "; ".join(common.llama_log_lines()[-3:])
            raise common.PeerError(
                f"llama_init_from_model failed (n_ctx {n_ctx}, n_seq_max {n_seq_max}, kv {kv}, {st}): {tail}"
            )
        self.n_batch = n_batch
        self.n_ctx = int(L.llama_n_ctx(self.ctx))
        self.batch = L.llama_batch_init(n_batch, 0, 1)
        self.mem = L.llama_get_memory(self.ctx)
        self.smpl = L.llama_sampler_init_greedy()

    def close(self) -> None:
        self.L.llama_sampler_free(self.smpl)
        self.L.llama_batch_free(self.batch)
        self.L.llama_free(self.ctx)

    def clear(self) -> None:
        self.L.llama_memory_clear(self.mem, True)

    def seq_cp(self, src: int, dst: int) -> None:
        self.L.llama_memory_seq_cp(self.mem, src, dst, -1, -1)

    def decode(self, tokens: list[int], pos: list[int], seqs: list[int], logits: list[bool]) -> float:
        """One ``llama_decode`` of parallel lists (token, position, sequence,
        wants logits), at most ``n_batch`` long; returns its wall time (s)."""
        n = len(tokens)
        if n > self.n_batch:
            raise common.PeerError(f"batch of {n} tokens exceeds n_batch {self.n_batch}")
        b = self.batch
        b.n_tokens = n
        for i in range(n):
            b.token[i] = tokens[i]
            b.pos[i] = pos[i]
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = seqs[i]
            b.logits[i] = 1 if logits[i] else 0
        t0 = time.perf_counter()
        rc = self.L.llama_decode(self.ctx, b)
        self.L.llama_synchronize(self.ctx)
        dt = time.perf_counter() - t0
        if rc != 0:
            tail = "; ".join(common.llama_log_lines()[-3:])
            raise common.PeerError(f"llama_decode returned {rc} ({n} tokens, n_ctx {self.n_ctx}): {tail}")
        return dt

    def decode_chunked(self, tokens: list[int], pos: list[int], seqs: list[int], logits: list[bool]) -> float:
        """``decode`` in consecutive slices of at most ``n_batch``; total seconds."""
        total = 0.0
        for o in range(0, len(tokens), self.n_batch):
            e = o + self.n_batch
            total += self.decode(tokens[o:e], pos[o:e], seqs[o:e], logits[o:e])
        return total

    def save_state(self, path: Path, seqs: list[int] | None) -> None:
        """Writes the KV state to ``path``: the whole context
        (``llama_state_save_file``) when ``seqs`` is None, else each listed
        sequence's cells (``llama_state_seq_get_data``) in a small container
        (``SEQ_STATE_MAGIC``, count u32, then per sequence: id i32, size u64,
        bytes). The per-seq layout needs the latter: in llama-cpp-python
        0.3.30 a whole-context state of a ``kv_unified = false`` context
        reloads to different greedy output (bench/test_checkpoint.py)."""
        L = self.L
        if seqs is None:
            none = (L.llama_token * 1)()
            if not L.llama_state_save_file(self.ctx, str(path).encode(), none, 0):
                raise common.PeerError(f"llama_state_save_file failed for {path}")
            return
        with open(path, "wb") as f:
            f.write(SEQ_STATE_MAGIC + struct.pack("<I", len(seqs)))
            for q in seqs:
                size = int(L.llama_state_seq_get_size(self.ctx, q))
                buf = (ctypes.c_uint8 * size)()
                got = int(L.llama_state_seq_get_data(self.ctx, buf, size, q))
                if got != size:
                    raise common.PeerError(f"llama_state_seq_get_data wrote {got} of {size} bytes for sequence {q}")
                f.write(struct.pack("<iQ", q, size))
                f.write(memoryview(buf).cast("B"))

    def load_state(self, path: Path, seqs: list[int] | None) -> None:
        """Restores a state written by ``save_state(path, seqs)`` into this
        (same-sized, empty) context."""
        L = self.L
        common.llama_log_clear()
        if seqs is None:
            toks = (L.llama_token * 1)()
            n = ctypes.c_size_t(0)
            if not L.llama_state_load_file(self.ctx, str(path).encode(), toks, 1, ctypes.byref(n)):
                tail = "; ".join(common.llama_log_lines()[-3:])
                raise common.PeerError(f"llama_state_load_file failed for {path}: {tail}")
            return
        with open(path, "rb") as f:
            head = f.read(len(SEQ_STATE_MAGIC) + 4)
            if head[: len(SEQ_STATE_MAGIC)] != SEQ_STATE_MAGIC or len(head) != len(SEQ_STATE_MAGIC) + 4:
                raise common.PeerError(f"{path}: not a per-sequence state file")
            (count,) = struct.unpack("<I", head[len(SEQ_STATE_MAGIC) :])
            found = []
            for _ in range(count):
                q, size = struct.unpack("<iQ", f.read(12))
                data = f.read(size)
                if len(data) != size:
                    raise common.PeerError(f"{path}: sequence {q} is truncated")
                buf = (ctypes.c_uint8 * size).from_buffer_copy(data)
                if int(L.llama_state_seq_set_data(self.ctx, buf, size, q)) != size:
                    tail = "; ".join(common.llama_log_lines()[-3:])
                    raise common.PeerError(f"llama_state_seq_set_data failed for sequence {q} of {path}: {tail}")
                found.append(q)
        if found != seqs:
            raise common.PeerError(f"{path} holds sequences {found}, expected {seqs}")

    def greedy(self, idx: int) -> int:
        """Argmax (ties -> lowest id: llama.cpp's greedy sampler keeps the
        first maximum) of the logits of batch entry ``idx`` of the last decode."""
        if not self.L.llama_get_logits_ith(self.ctx, idx):
            raise common.PeerError(f"no logits for batch entry {idx}")
        return int(self.L.llama_sampler_sample(self.smpl, self.ctx, idx))


def progress_line(text: str) -> None:
    if sys.stderr.isatty():
        print(f"\r{text}   ", end="", file=sys.stderr, flush=True)


def progress_done(text: str) -> None:
    if sys.stderr.isatty():
        print(f"\r{text}   ", file=sys.stderr, flush=True)
    else:
        print(text, file=sys.stderr, flush=True)


# ---- batched ----------------------------------------------------------------


def batch_ctx_size(b: int, kv: str) -> int:
    """Cells to ask for: every sequence needs 16 + 16 = 32 cells."""
    need = wl.BATCH_PROMPT + wl.BATCH_STEPS
    return b * pad_ctx(need) if kv == "per-seq" else pad_ctx(need * b)


def batched_once(c: Context, w: wl.BatchWorkload) -> tuple[float, list[float]]:
    """Prefill + 16 decode steps into an emptied cache; (prefill s, step s)."""
    b = w.batch
    c.clear()
    toks: list[int] = []
    pos: list[int] = []
    seqs: list[int] = []
    want: list[bool] = []
    for i in range(b):
        p = w.prompt(i)
        toks.extend(p)
        pos.extend(range(wl.BATCH_PROMPT))
        seqs.extend([i] * wl.BATCH_PROMPT)
        want.extend([False] * (wl.BATCH_PROMPT - 1) + [True])
    prefill_s = c.decode_chunked(toks, pos, seqs, want)
    seq_ids = list(range(b))
    all_out = [True] * b
    steps = []
    for s in range(wl.BATCH_STEPS):
        steps.append(c.decode(w.step(s), [wl.BATCH_PROMPT + s] * b, seq_ids, all_out))
        if not c.L.llama_get_logits_ith(c.ctx, b - 1):
            raise common.PeerError(f"batch {b} step {s}: no logits for the last sequence")
    return prefill_s, steps


def batched_one(m: Model, b: int, kv: str, threads: int, reps: int, settings: dict[str, str] | None = None) -> dict[str, Any]:
    """Runs one batch size ``reps`` times (fresh stream each time) in a fresh
    context sized for it; medians over the runs."""
    if b > LLAMA_MAX_SEQ:
        return {"batch": b, "status": f"skipped: n_seq_max cap {LLAMA_MAX_SEQ}"}
    n_batch = max(512, b)
    c = Context(m, n_ctx=batch_ctx_size(b, kv), n_batch=n_batch, n_ubatch=n_batch, n_seq_max=b, kv=kv, threads=threads, settings=settings)
    try:
        pre, dec, tok_s, step_ms = [], [], [], []
        for _ in range(reps):
            w = wl.BatchWorkload.make(m.n_vocab, b)  # the stream restarts every rep
            p, steps = batched_once(c, w)
            d = sum(steps)
            pre.append(p)
            dec.append(d)
            tok_s.append(b * wl.BATCH_STEPS / max(d, 1e-12))
            step_ms.extend(s * 1e3 for s in steps)
        n_ctx = c.n_ctx
    finally:
        c.close()
    prefill_s = median(pre)
    return {
        "batch": b,
        "status": "ok",
        "n_ctx": n_ctx,
        "n_batch": n_batch,
        "n_ubatch": n_batch,
        "prefill_s": prefill_s,
        "prefill_tok_s": wl.BATCH_PROMPT * b / max(prefill_s, 1e-12),
        "decode_s": median(dec),
        "decode_tok_s": median(tok_s),
        "decode_step_ms_median": median(step_ms),
        "decode_tok_s_reps": tok_s,
    }


def batched(args: argparse.Namespace) -> int:
    if args.reps < 1:
        raise common.PeerError("--reps must be at least 1")
    if args.threads < 1:
        raise common.PeerError("--threads must be at least 1")
    sizes = wl.parse_batches(args.batch)
    st = context_settings(args.flash_attn, args.type_kv)
    path = Path(args.model)
    if not path.is_file():
        raise common.PeerError(f"model file {path} does not exist")
    L = common.llama_init()
    m = Model(L, path)
    try:
        progress_line("llama.cpp batched warm-up (B=1)")
        batched_one(m, 1, args.kv, args.threads, 1, st)
        results = []
        for k, b in enumerate(sizes):
            progress_line(f"llama.cpp batched {args.kv} {k + 1}/{len(sizes)} B={b}")
            r = batched_one(m, b, args.kv, args.threads, args.reps, st)
            results.append(r)
            if r["status"] == "ok":
                progress_done(f"llama.cpp batched {args.kv} B={b}: decode {r['decode_tok_s']:.1f} tok/s, prefill {r['prefill_tok_s']:.1f} tok/s")
            else:
                progress_done(f"llama.cpp batched {args.kv} B={b}: {r['status']}")
        report = {
            "schema": wl.BATCH_SCHEMA,
            "engine": "llama.cpp",
            "engine_version": common.PEER,
            "cpu": cpu_model(),
            "isa": isa_string(L),
            "threads": args.threads,
            "model": path.name,
            "model_sha256": common.sha256_file(path),
            "n_vocab": m.n_vocab,
            "prompt_tokens": wl.BATCH_PROMPT,
            "decode_steps": wl.BATCH_STEPS,
            "reps": args.reps,
            "kv": args.kv,
            **st,
            "token_stream": wl.BATCH_TOKEN_STREAM,
            "results": results,
        }
    finally:
        m.close()
    write_report(report, args.out)
    return 0


def write_report(report: dict[str, Any], out: str | None) -> None:
    text = json.dumps(report, indent=2) + "\n"
    if out:
        Path(out).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)


# ---- fleet ------------------------------------------------------------------


def fleet_ctx_size(s: wl.FleetShape, kv: str) -> int:
    """unified: P shared + T*(R+D) per agent; per-seq: (A+1) equal streams."""
    per_agent = s.turns * (s.result + s.decode)
    if kv == "per-seq":
        return (s.agents + 1) * pad_ctx(s.prefix + per_agent)
    return pad_ctx(s.prefix + s.agents * per_agent)


def fleet_n_batch(s: wl.FleetShape) -> int:
    """Large enough for a whole turn's ingest in one llama_decode."""
    return max(2048, s.agents * (s.result + 1))


def peak_rss_mb() -> float:
    import resource  # noqa: PLC0415 (POSIX only; imported where used)

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def fleet_one(
    m: Model,
    s: wl.FleetShape,
    kv: str,
    threads: int,
    label: str,
    ckpt: ck.Checkpoint | None,
    settings: dict[str, str] | None = None,
) -> tuple[dict[str, Any], list[list[list[int]]]]:
    """One fleet run (see README), or one segment of it when ``ckpt`` is
    given (see ``checkpoint.py``); returns the run's report fields (status
    ``"checkpointed: ..."`` when it stopped early) and the generated ids
    ``[agent][turn][k]``."""
    s.check()
    A = s.agents
    if A + 1 > LLAMA_MAX_SEQ:
        return {"status": f"skipped: n_seq_max cap {LLAMA_MAX_SEQ} (needs {A + 1})"}, []
    ids = wl.lcg_ids(m.n_vocab, s.stream_len())
    n_batch = fleet_n_batch(s)
    # n_ubatch = n_batch: a whole turn's ingest is one micro-batch, as fak
    # runs it in one pass (up to its token budget).
    c = Context(m, n_ctx=fleet_ctx_size(s, kv), n_batch=n_batch, n_ubatch=n_batch, n_seq_max=A + 1, kv=kv, threads=threads, settings=settings)
    # What a checkpoint saves: the whole context (unified: the agents share
    # the prefix cells), or each agent's own stream (per-seq; the spare
    # prefix sequence A is never read again).
    state_seqs = None if kv == "unified" else list(range(A))
    try:
        saved = ckpt.progress() if ckpt else None
        if saved:
            p, state = saved
            p.check(A, s.turns)
            c.load_state(state, state_seqs)
            progress_done(f"{label}: resuming at turn {p.turn + 1}/{s.turns} from {state}")
            t_start = time.perf_counter()
        else:
            c.clear()
            p = ck.Progress(turn=0, pos=[s.prefix] * A, last=[0] * A, gen=[[] for _ in range(A)])
            t_start = time.perf_counter()
            # Setup: the prefix once into spare sequence A, then copied to every agent.
            pre = s.prefix_ids(ids)
            p.fed += len(pre)
            c.decode_chunked(pre, list(range(s.prefix)), [A] * s.prefix, [i == s.prefix - 1 for i in range(s.prefix)])
            for a in range(A):
                c.seq_cp(A, a)
            p.prefix_s = time.perf_counter() - t_start
        pos, last, gen = p.pos, p.last, p.gen
        while p.turn < s.turns:
            t = p.turn
            progress_line(f"{label} turn {t + 1}/{s.turns}")
            t0 = time.perf_counter()
            toks: list[int] = []
            tpos: list[int] = []
            seqs: list[int] = []
            want: list[bool] = []
            out_idx = []
            for a in range(A):
                ing = ([last[a]] if t > 0 else []) + s.result_ids(ids, t, a)
                toks.extend(ing)
                tpos.extend(range(pos[a], pos[a] + len(ing)))
                seqs.extend([a] * len(ing))
                want.extend([False] * (len(ing) - 1) + [True])
                pos[a] += len(ing)
                out_idx.append(len(toks) - 1)
            p.fed += len(toks)
            c.decode(toks, tpos, seqs, want)  # n_batch holds a whole turn
            g = [c.greedy(i) for i in out_idx]
            t1 = time.perf_counter()
            p.ttft_s.extend([t1 - t0] * A)
            turn_gen = [[x] for x in g]
            agents = list(range(A))
            for _ in range(s.decode - 1):
                c.decode(g, list(pos), agents, [True] * A)
                p.fed += A
                for a in range(A):
                    pos[a] += 1
                g = [c.greedy(a) for a in range(A)]
                for a in range(A):
                    turn_gen[a].append(g[a])
            for a in range(A):
                gen[a].append(turn_gen[a])
                last[a] = g[a]
            p.turn = t + 1
            elapsed = time.perf_counter() - t_start
            if ckpt and ckpt.should_stop(elapsed, s.turns - p.turn):
                p.segments_s.append(elapsed)
                p.peak_rss_mb = max(p.peak_rss_mb, peak_rss_mb())
                c.save_state(ckpt.state_path(p), state_seqs)
                ckpt.save_partial(p)
                return {"status": f"checkpointed: turn {p.turn}/{s.turns} saved in {ckpt.dir}"}, []
        p.segments_s.append(time.perf_counter() - t_start)
        n_ctx = c.n_ctx
        for a in range(A):
            got = int(c.L.llama_memory_seq_pos_max(c.mem, a)) + 1
            if got != s.final_context():
                raise common.PeerError(f"agent {a} holds {got} positions, expected {s.final_context()}")
    finally:
        c.close()
    if p.fed != s.tokens_computed():
        raise common.PeerError(f"fed {p.fed} tokens, expected {s.tokens_computed()}")
    wall_s = sum(p.segments_s)
    ms = [x * 1e3 for x in p.ttft_s]
    report = {
        "status": "ok",
        "agent_turns_per_s": A * s.turns / max(wall_s, 1e-12),
        "wall_s": wall_s,
        "segments_s": p.segments_s,
        "prefix_s": p.prefix_s,
        "ttft_ms_p50": wl.nearest_rank(ms, 0.50),
        "ttft_ms_p95": wl.nearest_rank(ms, 0.95),
        "prefix_evaluations": 1,
        "tokens_computed": p.fed,
        "tokens_reused": s.tokens_reused(),
        "peak_rss_mb": max(p.peak_rss_mb, peak_rss_mb()),
        "generated_sha256": wl.generated_sha256(gen),
        "n_ctx": n_ctx,
        "n_batch": n_batch,
        "n_ubatch": n_batch,
    }
    if ckpt:
        ckpt.save_finished(report, gen)
    return report, gen


def fleet_shapes(args: argparse.Namespace) -> list[tuple[str, wl.FleetShape]]:
    custom = [args.prefix, args.turns, args.agents, args.decode, args.result]
    if args.profile:
        if any(v is not None for v in custom):
            raise common.PeerError("--profile excludes --prefix/--turns/--agents/--decode/--result")
        if args.profile not in wl.PROFILES:
            raise common.PeerError(f"unknown profile {args.profile!r} (known: {', '.join(wl.PROFILES)})")
        return [(args.profile, s) for s in wl.PROFILES[args.profile]]
    if any(v is None for v in custom):
        raise common.PeerError("give --profile NAME, or all of --prefix --turns --agents --decode --result")
    shape = wl.FleetShape(args.prefix, args.turns, args.agents, args.decode, args.result)
    shape.check()
    return [("custom", shape)]


def fleet_checkpoint(args: argparse.Namespace, s: wl.FleetShape, model_sha: str, isa: str, settings: dict[str, str]) -> ck.Checkpoint | None:
    """The run's checkpoint under ``--checkpoint DIR`` (None without it)."""
    if not args.checkpoint:
        if args.segment_s is not None:
            raise common.PeerError("--segment-s needs --checkpoint DIR")
        return None
    key = {
        "peer": common.PEER,
        "cpu": cpu_model(),
        "isa": isa,
        "model_sha256": model_sha,
        "threads": args.threads,
        "kv": args.kv,
        "shape": s.as_dict(),
        "n_ctx": fleet_ctx_size(s, args.kv),
        "n_batch": fleet_n_batch(s),
        "n_ubatch": fleet_n_batch(s),
    }
    if settings != DEFAULT_SETTINGS:
        key.update(settings)
    name = ck.run_name(settings_label(args.kv, settings), s.as_dict(), args.threads)
    return ck.Checkpoint(Path(args.checkpoint), name, key, args.segment_s)


def fleet(args: argparse.Namespace) -> int:
    if args.threads < 1:
        raise common.PeerError("--threads must be at least 1")
    shapes = fleet_shapes(args)
    st = context_settings(args.flash_attn, args.type_kv)
    path = Path(args.model)
    if not path.is_file():
        raise common.PeerError(f"model file {path} does not exist")
    model_sha = common.sha256_file(path)
    L = common.llama_init()
    m = Model(L, path)
    try:
        runs = []
        dumps = []
        for k, (name, s) in enumerate(shapes):
            label = f"llama.cpp fleet {args.kv} fa={st['flash_attn']} kv={st['type_kv']} run {k + 1}/{len(shapes)} {name} T={s.turns} A={s.agents}"
            ckpt = fleet_checkpoint(args, s, model_sha, isa_string(L), st)
            done = ckpt.finished() if ckpt else None
            if done is not None:
                r, gen = done
                progress_done(f"{label}: finished earlier, report taken from {ckpt.json_path}")
            else:
                r, gen = fleet_one(m, s, args.kv, args.threads, label, ckpt, st)
            if r["status"].startswith("checkpointed"):
                progress_done(f"{label}: {r['status']}; run the same command again to continue")
                return ck.EXIT_CHECKPOINTED
            runs.append({"profile": name, **s.as_dict(), **r})
            dumps.append({"profile": name, **s.as_dict(), "generated": gen})
            if r["status"] == "ok":
                progress_done(f"{label}: {r['agent_turns_per_s']:.3f} agent-turns/s, wall {r['wall_s']:.1f} s")
            else:
                progress_done(f"{label}: {r['status']}")
        report = {
            "schema": wl.FLEET_SCHEMA,
            "engine": "llama.cpp",
            "engine_version": common.PEER,
            "cpu": cpu_model(),
            "isa": isa_string(L),
            "threads": args.threads,
            "model": path.name,
            "model_sha256": model_sha,
            "n_vocab": m.n_vocab,
            "kv": args.kv,
            **st,
            "token_stream": wl.FLEET_TOKEN_STREAM,
            "runs": runs,
        }
    finally:
        m.close()
    write_report(report, args.out)
    if args.dump_generated:
        Path(args.dump_generated).write_text(json.dumps({"kv": args.kv, **st, "runs": dumps}) + "\n", encoding="utf-8")
    return 0


def add_settings_args(p: Any) -> None:
    """--flash-attn and --type-kv, shared by batched and fleet."""
    p.add_argument(
        "--flash-attn",
        choices=tuple(FLASH_ATTN),
        default="auto",
        help="flash attention: auto (library default), on or off (llama_context_params.flash_attn_type)",
    )
    p.add_argument(
        "--type-kv",
        choices=tuple(KV_TYPES),
        default="f16",
        help="K and V cache element type (type_k, type_v); q8_0 needs flash attention auto or on",
    )


def add_multiseq_subcommands(sub: Any) -> None:
    b = sub.add_parser("batched", help="B sequences: batched prefill, then 16 decode steps of B tokens")
    b.add_argument("--model", required=True, help="GGUF model file")
    b.add_argument("--threads", type=int, required=True, help="llama.cpp threads (n_threads and n_threads_batch)")
    b.add_argument("--batch", default=",".join(map(str, wl.DEFAULT_BATCHES)), help="comma-separated batch sizes")
    b.add_argument("--kv", choices=KV_MODES, required=True, help="unified KV cache or one stream per sequence")
    b.add_argument("--reps", type=int, default=1, help="measured runs per batch size (median reported)")
    b.add_argument("--out", help="write the JSON report here (default: stdout)")
    add_settings_args(b)
    f = sub.add_parser("fleet", help="agents sharing a prefix: turns of ingest + greedy decode")
    f.add_argument("--model", required=True, help="GGUF model file")
    f.add_argument("--threads", type=int, required=True, help="llama.cpp threads (n_threads and n_threads_batch)")
    f.add_argument("--profile", help=f"named workload ({', '.join(wl.PROFILES)}); every combination is run")
    f.add_argument("--prefix", type=int, help="shared prefix tokens P")
    f.add_argument("--turns", type=int, help="turns T")
    f.add_argument("--agents", type=int, help="agents A")
    f.add_argument("--decode", type=int, help="greedy tokens per agent per turn D")
    f.add_argument("--result", type=int, help="result tokens ingested per agent per turn R")
    f.add_argument("--kv", choices=KV_MODES, required=True, help="unified KV cache or one stream per sequence")
    f.add_argument("--out", help="write the JSON report here (default: stdout)")
    f.add_argument("--dump-generated", metavar="FILE", help="also write every run's generated ids [agent][turn][k] as JSON")
    f.add_argument(
        "--checkpoint",
        metavar="DIR",
        help="resumable runs: keep progress and llama.cpp state in DIR and continue a saved run (see checkpoint.py)",
    )
    f.add_argument(
        "--segment-s",
        type=float,
        metavar="S",
        help="with --checkpoint: stop (exit 75) after the first turn ending S timed seconds into this segment",
    )
    add_settings_args(f)


def build_parser() -> argparse.ArgumentParser:
    """The command line of every subcommand."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("single", help="single-stream prefill and decode throughput")
    s.add_argument("--model", required=True, help="GGUF model file")
    s.add_argument("--threads", type=int, required=True, help="llama.cpp threads (n_threads and n_threads_batch)")
    s.add_argument("--reps", type=int, default=3, help="measured runs per workload after one warm-up")
    s.add_argument("--out", help="write the JSON report here (default: stdout)")
    add_multiseq_subcommands(sub)
    return ap


def main() -> int:
    common.ensure_peer_python()
    args = build_parser().parse_args()
    try:
        if args.cmd == "single":
            return single(args)
        if args.cmd == "batched":
            return batched(args)
        return fleet(args)
    except (common.PeerError, wl.WorkloadError, ck.CheckpointError) as e:
        print(f"llamacpp.py: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
