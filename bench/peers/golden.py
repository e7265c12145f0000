#!/usr/bin/env python3
"""Greedy-decode golden files from llama.cpp (through llama-cpp-python).

For each model and each prompt in ``PROMPTS`` this runs llama.cpp exactly
like a plain CLI greedy run would, and records what fak must reproduce:

* ``prompt_ids``: ``llama_tokenize(vocab, text, add_special=True,
  parse_special=True)`` (BOS only if the vocab asks for it);
* ``greedy_ids``: ``STEPS`` ids, argmax of the last position's logits after
  each decode (ties -> lowest id), never stopping at EOS/EOG;
* ``margins``: top-1 minus top-2 logit at the step that chose each id;
* ``greedy_ids_fa_off`` and ``margins_fa_off``: the same run with flash
  attention off. llama.cpp's two attention paths round differently, and
  on near-even steps they pick different ids; fak's tests accept either
  path, each up to its own first near tie (f16 K/V only: llama.cpp runs a
  quantized V cache only with flash attention);
* the whole first-step logits vector, in a side file of raw little-endian
  f32 (prompts concatenated in order, ``n_vocab`` floats each).

Decode loop, one fresh context per prompt (n_ctx 1024, n_batch 1024,
2 threads, library defaults otherwise: f16 K/V cache, flash attention
"auto", which llama.cpp resolves to enabled on CPU)::

    prompt p0..pn-1 --decode(batch, logits on last)--> L0 -> argmax g0
    g0 at pos n     --decode(1 token)------------------> L1 -> argmax g1
    ...                                                   ... g31

Usage (see bench/peers/README.md)::

    bench/.venv/bin/python bench/peers/golden.py --all
    python3 bench/peers/golden.py --python /tmp/peervenv/bin/python --all
    python3 bench/peers/golden.py --model models/x.gguf [--out-dir DIR]
    python3 bench/peers/golden.py --all --check   # compare, write nothing
    python3 bench/peers/golden.py --all --kv-type q8_0   # Q8_0 K/V cache

With ``--compact`` (gemma3: a 262k vocabulary makes the full vectors
7 MB) the first-logits side file is left out; instead every step's
``TOPK`` highest logits (``[id, logit]``, ids ascending on ties) and the
logit range (``[min, max]``) go into the JSON (``top_logits``,
``ranges``). Since each step feeds llama.cpp's own greedy id, these are
teacher-forced per-step logits: fak feeds the same ids and compares. The
gemma3 goldens add a ``long`` prompt (the paragraph five times, about
700 tokens) that crosses its 512-position sliding window::

    bench/.venv/bin/python bench/peers/golden.py --gemma3

With ``--add-fa-off`` the files on disk keep every field and gain only
the flash-attention-off path (``greedy_ids_fa_off``, ``margins_fa_off``),
run here: llama.cpp's logits move with the CPU it runs on (its build
picks the machine's ISA), so regenerating a file on another machine than
the one that wrote it would change every field::

    bench/.venv/bin/python bench/peers/golden.py --all --gemma3 --add-fa-off

With ``--add-cpu-paths`` the files on disk keep every field and gain
this CPU's greedy paths in ``more_paths`` (flash attention on, and off
with an f16 cache; each ``{"label", "greedy_ids", "margins"}``, the label
naming the CPU). llama.cpp's margins at a near-even step move with the
CPU as much as with its attention path, so fak's tests accept any
recorded path, each up to its own first near tie. A path of a CPU
already in the file is replaced::

    bench/.venv/bin/python bench/peers/golden.py --all --gemma3 --add-cpu-paths

With ``--add-prompt NAME`` the files on disk keep every field and gain
one prompt of ``PROMPTS`` that they lack (its results, both attention
paths, and its first-step logits or compact top logits), run here; the
other prompts stay as their machine wrote them::

    bench/.venv/bin/python bench/peers/golden.py --all --gemma3 --add-prompt json

With ``--kv-type q8_0`` llama.cpp stores K and V as Q8_0 (``type_k`` and
``type_v``); the files get a ``.kv-q8_0`` suffix and a ``kv_type`` field,
and are the reference for fak's ``--kv-type q8_0``.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

STEPS = 32
N_CTX = 1024
N_BATCH = 1024
N_THREADS = 2
# --flash-attn choices -> llama_context_params.flash_attn_type constant name.
# The committed goldens use "auto" (llama.cpp's default; enabled on CPU).
FLASH_ATTN = {
    "auto": "LLAMA_FLASH_ATTN_TYPE_AUTO",
    "on": "LLAMA_FLASH_ATTN_TYPE_ENABLED",
    "off": "LLAMA_FLASH_ATTN_TYPE_DISABLED",
}

# --kv-type choices -> ggml type constant name of llama_context_params.type_k/v.
KV_TYPES = {"f16": "GGML_TYPE_F16", "q8_0": "GGML_TYPE_Q8_0"}

# The prompt list shared by every model. `capital` must stay first; fak's
# tests look prompts up by name (`capital`, `code`, ...).
_PARAGRAPH = (
    "Lighthouses were once the most important machines on any rocky coast. Before radio "
    "beacons and satellite navigation, a ship approaching land at night had little more than "
    "a chart, a compass, and the hope that someone ashore had kept the lamp burning. Keepers "
    "lived in small stone cottages at the foot of each tower, trimming wicks, polishing brass "
    "lenses, and winding the clockwork that turned the light. The work was lonely and "
    "repetitive, but a single missed night could cost dozens of lives. Over the twentieth "
    "century, electric lamps and automatic timers replaced most of the keepers, and many "
    "towers became museums. Even so, sailors still speak of the comfort of seeing a familiar "
    "beam sweep across dark water, and"
)
PROMPTS: list[tuple[str, str]] = [
    ("capital", "The capital of France is"),
    (
        "chat",
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\nWrite a haiku about the sea.<|im_end|>\n"
        "<|im_start|>assistant\n",
    ),
    (
        "code",
        'def is_prime(n: int) -> bool:\n    """Return True if n is a prime number."""\n',
    ),
    (
        "multilingual",
        "北京是中国的首都。東京は日本の首都です。Москва — столица России. 🙂🚀 The three capitals are",
    ),
    ("numbers", "1, 1, 2, 3, 5, 8, 13, 21,"),
    (
        "whitespace",
        "    \t\t  leading spaces and tabs\n\n\n\t\tafter blank lines    then   wide   gaps\n \n  Next:",
    ),
    ("paragraph", _PARAGRAPH),
    (
        "json",
        'Tool call: {"name": "read_file", "arguments": {"path": "src/main.rs", "lines": [1, 40]}}\n'
        'Result: {"ok": true, "bytes": 1834, "truncated": false}\n'
        'Tool call: {"name": "',
    ),
]

# Extra prompts of the gemma3 goldens: past its 512-position window.
LONG_PROMPTS: list[tuple[str, str]] = [("long", " ".join([_PARAGRAPH] * 5))]
TOPK = 16

SMOL_Q41 = "smollm2-135m-instruct-q4_1.gguf"
SMOL_Q80 = "smollm2-135m-instruct-q8_0.gguf"
QWEN = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
GEMMA3 = "gemma-3-270m-q4_k_m.gguf"


@dataclass
class PromptResult:
    name: str
    text: str
    prompt_ids: list[int]
    greedy_ids: list[int]
    margins: list[float]
    first_logits: Any  # numpy float32 array, n_vocab
    greedy_text: str
    top_logits: list[list[list[float]]]  # per step: TOPK [id, logit]
    ranges: list[list[float]]  # per step: [min, max]
    # The same prompt with flash attention off (None: not run).
    greedy_ids_fa_off: list[int] | None = None
    margins_fa_off: list[float] | None = None
    # Greedy paths recorded on other CPUs or settings (``--add-cpu-paths``).
    more_paths: list[dict[str, Any]] | None = None


def tokenize(L: Any, vocab: Any, text: str) -> list[int]:
    """llama.cpp CLI tokenization: add_special=True, parse_special=True."""
    b = text.encode("utf-8")
    cap = len(b) + 16
    arr = (L.llama_token * cap)()
    n = L.llama_tokenize(vocab, b, len(b), arr, cap, True, True)
    if n < 0:
        raise common.PeerError(f"llama_tokenize needs {-n} tokens, buffer had {cap}")
    return [int(x) for x in arr[:n]]


def piece(L: Any, vocab: Any, tok: int) -> bytes:
    buf = (ctypes.c_char * 256)()
    n = L.llama_token_to_piece(vocab, tok, buf, len(buf), 0, True)
    if n < 0:
        raise common.PeerError(f"token {tok}: piece longer than {len(buf)} bytes")
    return bytes(buf[:n])


def decode_step(L: Any, ctx: Any, batch: Any, tokens: list[int], start: int, n_vocab: int) -> Any:
    """Decodes ``tokens`` at positions ``start..`` in sequence 0, asking for
    logits of the last one only; returns them as a float32 array [n_vocab]."""
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
        raise common.PeerError(f"llama_decode returned {rc} (tokens {len(tokens)} at pos {start})")
    ptr = L.llama_get_logits_ith(ctx, -1)
    if not ptr:
        raise common.PeerError("llama_get_logits_ith(-1) returned NULL")
    v = np.ctypeslib.as_array(ptr, shape=(n_vocab,)).astype(np.float32, copy=True)
    if not np.all(np.isfinite(v)):
        raise common.PeerError("non-finite logits from llama.cpp")
    return v


def top2(v: Any) -> tuple[int, float]:
    """(argmax with ties -> lowest id, top-1 minus top-2 value as f32)."""
    import numpy as np  # noqa: PLC0415

    best = int(np.argmax(v))  # first occurrence on ties
    hi2 = np.partition(v, -2)[-2:]
    margin = np.float32(hi2.max()) - np.float32(hi2.min())
    return best, float(margin)


def topk(v: Any) -> tuple[list[list[float]], list[float]]:
    """The ``TOPK`` highest ``[id, logit]`` (descending; ids ascending on
    ties) and ``[min, max]`` of one logits vector."""
    import numpy as np  # noqa: PLC0415

    order = np.lexsort((np.arange(v.size), -v))[:TOPK]
    return [[int(i), float(v[i])] for i in order], [float(v.min()), float(v.max())]


def run_prompt(
    L: Any, model: Any, vocab: Any, n_vocab: int, name: str, text: str, flash_attn: str, kv_type: str
) -> PromptResult:
    ids = tokenize(L, vocab, text)
    if not ids or len(ids) + STEPS > N_CTX or len(ids) > N_BATCH:
        raise common.PeerError(f"prompt {name}: {len(ids)} tokens does not fit n_ctx {N_CTX}")
    cp = L.llama_context_default_params()
    cp.n_ctx = N_CTX
    cp.n_batch = N_BATCH
    cp.n_seq_max = 1
    cp.n_threads = N_THREADS
    cp.n_threads_batch = N_THREADS
    cp.flash_attn_type = int(getattr(L, FLASH_ATTN[flash_attn]))
    cp.type_k = int(getattr(L, KV_TYPES[kv_type]))
    cp.type_v = int(getattr(L, KV_TYPES[kv_type]))
    ctx = L.llama_init_from_model(model, cp)
    if not ctx:
        raise common.PeerError(f"prompt {name}: llama_init_from_model failed")
    batch = L.llama_batch_init(len(ids), 0, 1)
    try:
        logits = decode_step(L, ctx, batch, ids, 0, n_vocab)
        first = logits
        greedy: list[int] = []
        margins: list[float] = []
        tops: list[list[list[float]]] = []
        ranges: list[list[float]] = []
        for step in range(STEPS):
            top, rng = topk(logits)
            tops.append(top)
            ranges.append(rng)
            tok, margin = top2(logits)
            greedy.append(tok)
            margins.append(margin)
            if step + 1 < STEPS:
                logits = decode_step(L, ctx, batch, [tok], len(ids) + step, n_vocab)
    finally:
        L.llama_batch_free(batch)
        L.llama_free(ctx)
    text_out = b"".join(piece(L, vocab, t) for t in greedy).decode("utf-8", "replace")
    return PromptResult(name, text, ids, greedy, margins, first, text_out, tops, ranges)


def load_model(L: Any, path: Path) -> tuple[Any, Any, int]:
    """A GGUF file loaded on the CPU: the model, its vocab and the vocab's
    size. The caller frees the model (``llama_model_free``)."""
    mp = L.llama_model_default_params()
    mp.n_gpu_layers = 0
    model = L.llama_model_load_from_file(str(path).encode(), mp)
    if not model:
        raise common.PeerError(f"{path}: llama_model_load_from_file failed")
    vocab = L.llama_model_get_vocab(model)
    return model, vocab, int(L.llama_vocab_n_tokens(vocab))


def run_model(
    L: Any, path: Path, model_file: str, flash_attn: str, kv_type: str, prompts: list[tuple[str, str]]
) -> tuple[dict[str, Any], list[PromptResult]]:
    """Golden dict (without first_logits_file) and per-prompt results."""
    model, vocab, n_vocab = load_model(L, path)
    try:
        results = [run_prompt(L, model, vocab, n_vocab, n, t, flash_attn, kv_type) for n, t in prompts]
        # llama.cpp needs flash attention for a quantized V cache, so the
        # off path exists only with an f16 cache.
        if flash_attn != "off" and kv_type == "f16":
            for r, (n, t) in zip(results, prompts):
                off = run_prompt(L, model, vocab, n_vocab, n, t, "off", kv_type)
                r.greedy_ids_fa_off, r.margins_fa_off = off.greedy_ids, off.margins
    finally:
        L.llama_model_free(model)
    head = {
        "model_file": model_file,
        "model_sha256": common.sha256_file(path),
        "peer": common.PEER,
        "n_vocab": n_vocab,
        "n_threads": N_THREADS,
    }
    if kv_type != "f16":
        head["kv_type"] = kv_type
    return head, results


def render_json(head: dict[str, Any], logits_file: str | None, results: list[PromptResult]) -> str:
    """The golden JSON: one top-level key per line, one prompt field per line
    (``logits_file`` None: compact, with per-step top logits and ranges)."""
    lines = ["{"]
    for k, v in head.items():
        lines.append(f"  {json.dumps(k)}: {json.dumps(v)},")
    if logits_file is not None:
        lines.append(f'  "first_logits_file": {json.dumps(logits_file)},')
    lines.append('  "prompts": [')
    for i, r in enumerate(results):
        fields = [
            ("name", r.name),
            ("text", r.text),
            ("prompt_ids", r.prompt_ids),
            ("greedy_ids", r.greedy_ids),
            ("margins", r.margins),
        ]
        if r.greedy_ids_fa_off is not None:
            fields += [("greedy_ids_fa_off", r.greedy_ids_fa_off), ("margins_fa_off", r.margins_fa_off)]
        if r.more_paths:
            fields.append(("more_paths", r.more_paths))
        if logits_file is None:
            fields += [("top_logits", r.top_logits), ("ranges", r.ranges)]
        body = ",\n".join(f"      {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}" for k, v in fields)
        lines.append("    {\n" + body + "\n    }" + ("," if i + 1 < len(results) else ""))
    lines.append("  ]")
    lines.append("}")
    return "\n".join(lines) + "\n"


def logits_bytes(results: list[PromptResult]) -> bytes:
    import numpy as np  # noqa: PLC0415

    return b"".join(np.asarray(r.first_logits, dtype="<f4").tobytes() for r in results)


def compare(json_path: Path, bin_path: Path, text: str, blob: bytes) -> list[str]:
    """Differences between fresh output and the files on disk (for --check)."""
    import numpy as np  # noqa: PLC0415

    diffs = []
    if not json_path.exists() or (blob and not bin_path.exists()):
        return [f"{json_path.name}: missing on disk"]
    old = json.loads(json_path.read_text(encoding="utf-8"))
    new = json.loads(text)
    if old != new:
        for k in new:
            if k != "prompts" and old.get(k) != new[k]:
                diffs.append(f"{json_path.name}: {k} {old.get(k)!r} -> {new[k]!r}")
        for po, pn in zip(old.get("prompts", []), new["prompts"]):
            for k in pn:
                if po.get(k) != pn[k]:
                    diffs.append(f"{json_path.name}/{pn['name']}: {k} differs")
    if not blob:
        return diffs
    ob = bin_path.read_bytes()
    if ob != blob:
        a = np.frombuffer(ob, dtype="<f4")
        b = np.frombuffer(blob, dtype="<f4")
        if a.shape != b.shape:
            diffs.append(f"{bin_path.name}: {a.size} floats on disk vs {b.size} now")
        else:
            diffs.append(f"{bin_path.name}: max abs diff {float(np.max(np.abs(a - b))):.3g}")
    return diffs


@dataclass
class Options:
    out_dir: Path
    check: bool
    flash_attn: str
    kv_type: str = "f16"
    compact: bool = False
    prompts: list[tuple[str, str]] | None = None
    add_fa_off: bool = False
    add_prompt: str | None = None
    add_cpu_paths: bool = False


def golden_stem(model_file: str, kv_type: str) -> str:
    """File stem of a model's goldens: the model's stem, plus ``.kv-TYPE``
    for a K/V cache type other than f16."""
    stem = Path(model_file).stem
    return stem if kv_type == "f16" else f"{stem}.kv-{kv_type}"


def old_results(old: dict[str, Any]) -> list[PromptResult]:
    """A golden file's prompts as results, every field as on disk."""
    return [
        PromptResult(
            p["name"], p["text"], p["prompt_ids"], p["greedy_ids"], p["margins"], None, "",
            p.get("top_logits", []), p.get("ranges", []), p.get("greedy_ids_fa_off"), p.get("margins_fa_off"),
            p.get("more_paths"),
        )
        for p in old["prompts"]
    ]


def add_fa_off(L: Any, path: Path, json_path: Path, kv_type: str) -> None:
    """Adds llama.cpp's flash-attention-off path to a golden file on disk,
    keeping its other fields as they are."""
    if kv_type != "f16":
        raise common.PeerError("llama.cpp runs a quantized V cache only with flash attention: no off path to add")
    old = common.read_golden(json_path)
    model, vocab, n_vocab = load_model(L, path)
    try:
        results = old_results(old)
        for r in results:
            off = run_prompt(L, model, vocab, n_vocab, r.name, r.text, "off", kv_type)
            if off.prompt_ids != r.prompt_ids:
                raise common.PeerError(f"{json_path.name}/{r.name}: prompt ids differ from the file's")
            r.greedy_ids_fa_off, r.margins_fa_off = off.greedy_ids, off.margins
            same = next((i for i, (a, b) in enumerate(zip(r.greedy_ids, off.greedy_ids)) if a != b), None)
            print(
                f"  {json_path.stem}/{r.name:<12} flash attention off: "
                + ("same ids" if same is None else f"parts at step {same} (on-path margin {r.margins[same]:.4f})")
            )
    finally:
        L.llama_model_free(model)
    head = {k: v for k, v in old.items() if k not in ("prompts", "first_logits_file")}
    json_path.write_text(render_json(head, old.get("first_logits_file"), results), encoding="utf-8")
    print(f"golden:   added the flash-attention-off path to {common.rel(json_path)}", file=sys.stderr)


def cpu_label() -> str:
    """This CPU as a golden path's label names it: model name, family and
    model numbers, and the widest vector ISA llama.cpp's build can use."""
    info: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            k, _, v = line.partition(":")
            info.setdefault(k.strip(), v.strip())
    except OSError:
        return "an unknown CPU"
    flags = set(info.get("flags", "").split())
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    return f"{info.get('model name', 'CPU')} (family {info.get('cpu family', '?')} model {info.get('model', '?')}, {isa})"


def add_cpu_paths(L: Any, path: Path, json_path: Path, kv_type: str) -> None:
    """Adds this CPU's greedy paths (flash attention on, and off with an f16
    cache) to a golden file on disk as ``more_paths``, keeping its other
    fields as they are."""
    old = common.read_golden(json_path)
    if old["model_sha256"] != common.sha256_file(path):
        raise common.PeerError(f"{json_path.name}: {path} is not the file it was made from")
    cpu = cpu_label()
    settings = [("auto", "flash attention on")] + ([("off", "flash attention off")] if kv_type == "f16" else [])
    model, vocab, n_vocab = load_model(L, path)
    try:
        results = old_results(old)
        for r in results:
            paths = [q for q in (r.more_paths or []) if not q["label"].endswith(f", {cpu}")]
            for fa, what in settings:
                run = run_prompt(L, model, vocab, n_vocab, r.name, r.text, fa, kv_type)
                if run.prompt_ids != r.prompt_ids:
                    raise common.PeerError(f"{json_path.name}/{r.name}: prompt ids differ from the file's")
                paths.append({"label": f"{what}, {cpu}", "greedy_ids": run.greedy_ids, "margins": run.margins})
                same = next((i for i, (a, b) in enumerate(zip(r.greedy_ids, run.greedy_ids)) if a != b), None)
                print(
                    f"  {json_path.stem}/{r.name:<12} {what}: "
                    + ("the file's ids" if same is None else f"parts at step {same} (file's margin {r.margins[same]:.4f})")
                )
            r.more_paths = paths
    finally:
        L.llama_model_free(model)
    head = {k: v for k, v in old.items() if k not in ("prompts", "first_logits_file")}
    json_path.write_text(render_json(head, old.get("first_logits_file"), results), encoding="utf-8")
    print(f"golden:   added the paths of {cpu} to {common.rel(json_path)}", file=sys.stderr)


def add_prompt(L: Any, path: Path, json_path: Path, opt: Options, name: str) -> None:
    """Adds prompt ``name`` of ``PROMPTS`` to a golden file on disk (and its
    first-step logits to the side file), keeping the other prompts as they
    are."""
    old = common.read_golden(json_path)
    if any(p["name"] == name for p in old["prompts"]):
        print(f"golden:   {common.rel(json_path)} already has {name}", file=sys.stderr)
        return
    if old["model_sha256"] != common.sha256_file(path):
        raise common.PeerError(f"{json_path.name}: {path} is not the file it was made from")
    text = dict(PROMPTS)[name]
    _, (r,) = run_model(L, path, old["model_file"], opt.flash_attn, opt.kv_type, [(name, text)])
    # In the list's order (gemma3's `long` stays last).
    order = [n for n, _ in PROMPTS + LONG_PROMPTS]
    results = sorted(old_results(old) + [r], key=lambda x: order.index(x.name) if x.name in order else len(order))
    logits_file = old.get("first_logits_file")
    if logits_file is not None:
        if results[-1] is not r:
            raise common.PeerError(f"{json_path.name}: {name} would not be the side file's last vector")
        bin_path = json_path.parent / logits_file
        blob = bin_path.read_bytes()
        if len(blob) != 4 * old["n_vocab"] * len(old["prompts"]):
            raise common.PeerError(f"{bin_path.name}: {len(blob)} bytes, not one vector per prompt")
        bin_path.write_bytes(blob + logits_bytes([r]))
    head = {k: v for k, v in old.items() if k not in ("prompts", "first_logits_file")}
    json_path.write_text(render_json(head, logits_file, results), encoding="utf-8")
    off = "" if r.greedy_ids_fa_off is None else f", off path {min(r.margins_fa_off or [0.0]):.4f}"
    print(
        f"  {json_path.stem}/{name:<12} prompt {len(r.prompt_ids):>3} tok  min margin "
        f"{min(r.margins):8.4f}{off}  -> {r.greedy_text!r}"
    )
    print(f"golden:   added {name} to {common.rel(json_path)}", file=sys.stderr)


def emit(L: Any, path: Path, model_file: str, opt: Options) -> list[str]:
    stem = golden_stem(model_file, opt.kv_type)
    if opt.add_fa_off:
        add_fa_off(L, path, opt.out_dir / f"{stem}.json", opt.kv_type)
        return []
    if opt.add_cpu_paths:
        add_cpu_paths(L, path, opt.out_dir / f"{stem}.json", opt.kv_type)
        return []
    if opt.add_prompt is not None:
        add_prompt(L, path, opt.out_dir / f"{stem}.json", opt, opt.add_prompt)
        return []
    print(f"golden: {model_file} ({common.rel(path)}), K/V {opt.kv_type}", file=sys.stderr)
    common.llama_log_clear()
    prompts = opt.prompts if opt.prompts is not None else PROMPTS
    head, results = run_model(L, path, model_file, opt.flash_attn, opt.kv_type, prompts)
    fa = [ln.strip() for ln in common.llama_log_lines() if "Flash Attention" in ln]
    if fa:
        print(f"golden:   llama.cpp: {fa[-1]}", file=sys.stderr)
    logits_file = f"{stem}.first-logits.f32"
    text = render_json(head, None if opt.compact else logits_file, results)
    blob = b"" if opt.compact else logits_bytes(results)
    for r in results:
        print(
            f"  {stem}/{r.name:<12} prompt {len(r.prompt_ids):>3} tok  min margin "
            f"{min(r.margins):8.4f}  -> {r.greedy_text!r}"
        )
    json_path = opt.out_dir / f"{stem}.json"
    bin_path = opt.out_dir / logits_file
    if opt.check:
        return compare(json_path, bin_path, text, blob)
    opt.out_dir.mkdir(parents=True, exist_ok=True)
    json_path.write_text(text, encoding="utf-8")
    if blob:
        bin_path.write_bytes(blob)
    print(f"golden:   wrote {common.rel(json_path)}" + ("" if not blob else f" and {common.rel(bin_path)}"), file=sys.stderr)
    return []


def main() -> int:
    common.ensure_peer_python()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--all", action="store_true", help=f"{QWEN}, {SMOL_Q41} and {SMOL_Q80} (llama.cpp-quantized)")
    ap.add_argument("--gemma3", action="store_true", help=f"{GEMMA3}: compact goldens, plus the long prompt")
    ap.add_argument("--compact", action="store_true", help="per-step top logits in the JSON instead of the first-logits file")
    ap.add_argument("--model", action="append", default=[], type=Path, help="a GGUF file (repeatable)")
    ap.add_argument("--out-dir", type=Path, default=common.MODEL_GOLDEN_DIR)
    ap.add_argument("--check", action="store_true", help="regenerate in memory and compare with the files on disk")
    ap.add_argument(
        "--flash-attn", choices=sorted(FLASH_ATTN), default="auto", help="llama.cpp flash attention (goldens: auto)"
    )
    ap.add_argument("--kv-type", choices=sorted(KV_TYPES), default="f16", help="llama.cpp K/V cache type (goldens: f16)")
    ap.add_argument(
        "--add-fa-off", action="store_true", help="add only the flash-attention-off path to the files on disk"
    )
    ap.add_argument(
        "--add-cpu-paths", action="store_true", help="add this CPU's greedy paths to the files on disk"
    )
    ap.add_argument(
        "--add-prompt", choices=[n for n, _ in PROMPTS], help="add one prompt of the list to the files on disk"
    )
    args = ap.parse_args()
    if not args.all and not args.model and not args.gemma3:
        ap.error("give --all, --gemma3 or at least one --model")
    opt = Options(
        args.out_dir, args.check, args.flash_attn, args.kv_type, args.compact,
        add_fa_off=args.add_fa_off, add_prompt=args.add_prompt, add_cpu_paths=args.add_cpu_paths,
    )
    L = common.llama_init()
    diffs: list[str] = []
    for m in args.model:
        if not m.exists():
            raise common.PeerError(f"{m}: no such model file")
        diffs += emit(L, m, m.name, opt)
    if args.gemma3:
        p = common.MODELS / GEMMA3
        if not p.exists():
            raise common.PeerError(f"{p} is missing: run scripts/fetch-models.sh")
        g_opt = Options(
            opt.out_dir, opt.check, opt.flash_attn, opt.kv_type, True, PROMPTS + LONG_PROMPTS,
            opt.add_fa_off, opt.add_prompt, opt.add_cpu_paths,
        )
        diffs += emit(L, p, GEMMA3, g_opt)
    if args.all:
        for name in (QWEN, SMOL_Q41):
            p = common.MODELS / name
            if not p.exists():
                raise common.PeerError(f"{p} is missing: run scripts/fetch-models.sh")
            diffs += emit(L, p, name, opt)
        with tempfile.TemporaryDirectory(prefix="fak-peer-") as td:
            q8 = Path(td) / SMOL_Q80
            print(f"golden: llama.cpp quantize {SMOL_Q41} -> q8_0", file=sys.stderr)
            common.llama_quantize(L, common.MODELS / SMOL_Q41, q8, "q8_0")
            diffs += emit(L, q8, SMOL_Q80, opt)
    if args.check:
        for d in diffs:
            print(f"golden: DIFF {d}", file=sys.stderr)
        print(f"golden: check {'failed' if diffs else 'passed'}", file=sys.stderr)
        return 1 if diffs else 0
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except common.PeerError as e:
        print(f"golden: error: {e}", file=sys.stderr)
        sys.exit(1)
