#!/usr/bin/env python3
"""Teacher-forced golden files from llama.cpp (through llama-cpp-python).

For each model, K/V type and prompt (``golden.PROMPTS`` plus ``sky``, the
chat prompt of the scalar-vs-AVX2 finding in docs/GOLDENS.md) this runs
llama.cpp greedy for ``STEPS`` = 32 steps, exactly as ``golden.py`` does,
and keeps llama.cpp's logits at *every* step of that sequence. fak's test
(``crates/fak-model/tests/teacher.rs``) feeds the same sequence to fak, one
token per decode step, and compares every step, whatever the near ties.

Full-vocabulary logits for 32 steps x 9 prompts would be 50-160 MB per
file, so each step keeps a compact, fixed subset::

    top_ids[step]    the TOP_K = 32 highest logits' ids, best first (ties: lowest id)
    sample_ids       SAMPLE = 256 vocab ids, one fixed set per file
                     (numpy default_rng(SAMPLE_SEED), sorted, without replacement)
    lo[step], hi[step]  min and max of the full vocabulary's logits
    logits file      per prompt, per step: TOP_K logits of top_ids, then SAMPLE
                     logits of sample_ids; raw little-endian f32

The error fak's test reports for a step is max |fak - llama.cpp| over those
288 entries divided by (hi - lo). Files: ``<stem>[.kv-TYPE].teacher.json``
and ``.teacher.f32`` in crates/fak-model/tests/golden/.

Usage::

    bench/.venv/bin/python bench/peers/teacher.py --all                 # f16 K/V
    bench/.venv/bin/python bench/peers/teacher.py --all --kv-type q8_0
    bench/.venv/bin/python bench/peers/teacher.py --model models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
    bench/.venv/bin/python bench/peers/teacher.py --all --check         # compare, write nothing
    bench/.venv/bin/python bench/peers/teacher.py --all --spread off    # llama.cpp vs itself
    FAK_TEACHER_DUMP=/tmp/t cargo test --release -p fak-model --test teacher   # then:
    bench/.venv/bin/python bench/peers/teacher.py --all --spread off --against /tmp/t
    bench/.venv/bin/python bench/peers/teacher.py --dumps /tmp/t /tmp/u  # two fak dumps
    bench/.venv/bin/python bench/peers/teacher.py --all --add-prompt json  # one more prompt

``--add-prompt NAME`` adds one prompt of the list that a file on disk
lacks, run here, at its place in the list (the JSON entry and its block
of the logits file); the other prompts stay as their machine wrote them.

``--add-cpu-runs`` feeds every prompt's forced ids through llama.cpp here,
flash attention on and (with an f16 cache) off, and adds each run's
argmax and top-1/top-2 gap per step to the file as ``more_runs`` (each
``{"label", "argmax", "gaps"}``, the label naming this CPU; a CPU's
earlier runs are replaced; the logits file is unchanged). llama.cpp's
near-even steps move with the CPU and the attention path, so fak's test
does not hold a step's greedy id where any recorded run calls it even or
picks fak's id::

    bench/.venv/bin/python bench/peers/teacher.py --all --add-cpu-runs

``--spread off`` (or ``on``) writes nothing: it forces the committed
goldens' sequences through llama.cpp with flash attention set that way and
prints the same per-step error against the committed files (golden made
with ``auto`` = on), over the same entries: llama.cpp's own setting
spread, the yardstick for fak's error.
"""

from __future__ import annotations

import argparse
import array
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
import golden  # noqa: E402

STEPS = 32
TOP_K = 32
SAMPLE = 256
SAMPLE_SEED = 20251201
SKY = (
    "sky",
    "<|im_start|>system\nYou are a careful assistant that answers in one sentence.<|im_end|>\n"
    "<|im_start|>user\nWhy is the sky blue?<|im_end|>\n<|im_start|>assistant\n",
)
PROMPTS = golden.PROMPTS + [SKY]


@dataclass
class Forced:
    name: str
    text: str
    prompt_ids: list[int]
    forced_ids: list[int]  # llama.cpp's greedy ids; step s's logits chose forced_ids[s]
    logits: Any  # numpy [STEPS, n_vocab] f32


def new_context(L: Any, model: Any, flash_attn: str, kv_type: str) -> Any:
    cp = L.llama_context_default_params()
    cp.n_ctx = golden.N_CTX
    cp.n_batch = golden.N_BATCH
    cp.n_seq_max = 1
    cp.n_threads = golden.N_THREADS
    cp.n_threads_batch = golden.N_THREADS
    cp.flash_attn_type = int(getattr(L, golden.FLASH_ATTN[flash_attn]))
    cp.type_k = int(getattr(L, golden.KV_TYPES[kv_type]))
    cp.type_v = int(getattr(L, golden.KV_TYPES[kv_type]))
    ctx = L.llama_init_from_model(model, cp)
    if not ctx:
        raise common.PeerError("llama_init_from_model failed")
    return ctx


def run_forced(
    L: Any, model: Any, n_vocab: int, ids: list[int], forced: list[int] | None, flash_attn: str, kv_type: str
) -> tuple[list[int], Any]:
    """Greedy (``forced`` None) or teacher-forced run of STEPS steps: the
    prompt in one batch, then one token per decode. Returns the ids fed
    after each step (the argmax, or ``forced``) and every step's logits."""
    import numpy as np  # noqa: PLC0415

    if len(ids) + STEPS > golden.N_CTX or len(ids) > golden.N_BATCH:
        raise common.PeerError(f"{len(ids)} prompt tokens do not fit n_ctx {golden.N_CTX}")
    ctx = new_context(L, model, flash_attn, kv_type)
    batch = L.llama_batch_init(len(ids), 0, 1)
    rows = []
    fed: list[int] = []
    try:
        logits = golden.decode_step(L, ctx, batch, ids, 0, n_vocab)
        for step in range(STEPS):
            rows.append(logits)
            tok = golden.top2(logits)[0] if forced is None else forced[step]
            fed.append(tok)
            if step + 1 < STEPS:
                logits = golden.decode_step(L, ctx, batch, [tok], len(ids) + step, n_vocab)
    finally:
        L.llama_batch_free(batch)
        L.llama_free(ctx)
    return fed, np.stack(rows)


def top_ids(v: Any) -> list[int]:
    """The TOP_K largest entries' ids, best first, ties to the lowest id."""
    import numpy as np  # noqa: PLC0415

    order = np.lexsort((np.arange(v.size), -v.astype(np.float64)))
    return [int(i) for i in order[:TOP_K]]


def sample_ids(n_vocab: int) -> list[int]:
    import numpy as np  # noqa: PLC0415

    rng = np.random.default_rng(SAMPLE_SEED)
    return sorted(int(i) for i in rng.choice(n_vocab, size=SAMPLE, replace=False))


def load_model(L: Any, path: Path) -> tuple[Any, Any, int]:
    mp = L.llama_model_default_params()
    mp.n_gpu_layers = 0
    model = L.llama_model_load_from_file(str(path).encode(), mp)
    if not model:
        raise common.PeerError(f"{path}: llama_model_load_from_file failed")
    vocab = L.llama_model_get_vocab(model)
    return model, vocab, int(L.llama_vocab_n_tokens(vocab))


def render(head: dict[str, Any], samples: list[int], entries: list[dict[str, Any]]) -> str:
    """The JSON: one top-level key per line, one prompt field per line."""
    lines = ["{"]
    for k, v in head.items():
        lines.append(f"  {json.dumps(k)}: {json.dumps(v)},")
    lines.append(f'  "sample_ids": {json.dumps(samples)},')
    lines.append('  "prompts": [')
    for i, e in enumerate(entries):
        body = ",\n".join(f"      {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}" for k, v in e.items())
        lines.append("    {\n" + body + "\n    }" + ("," if i + 1 < len(entries) else ""))
    lines.append("  ]")
    lines.append("}")
    return "\n".join(lines) + "\n"


@dataclass
class Options:
    out_dir: Path
    kv_type: str
    check: bool
    spread: str | None
    against: Path | None = None
    add_prompt: str | None = None
    add_cpu_runs: bool = False


def stem_of(model_file: str, kv_type: str) -> str:
    return golden.golden_stem(model_file, kv_type)


def forced_prompt(
    L: Any, loaded: tuple[Any, Any, int], prompt: tuple[str, str], samples: list[int], settings: tuple[str, str]
) -> tuple[dict[str, Any], bytes, float]:
    """llama.cpp's greedy run of one prompt (``settings``: flash attention,
    K/V type): its JSON entry, its block of the logits file (per step the
    ``TOP_K`` logits of ``top_ids``, then those of ``samples``) and its
    smallest top-1 gap."""
    import numpy as np  # noqa: PLC0415

    model, vocab, n_vocab = loaded
    name, text = prompt
    ids = golden.tokenize(L, vocab, text)
    fed, rows = run_forced(L, model, n_vocab, ids, None, settings[0], settings[1])
    tops = [top_ids(r) for r in rows]
    entry = {
        "name": name,
        "text": text,
        "prompt_ids": ids,
        "forced_ids": fed,
        "lo": [float(r.min()) for r in rows],
        "hi": [float(r.max()) for r in rows],
        "top_ids": tops,
    }
    block = b"".join(
        np.asarray(r[t], dtype="<f4").tobytes() + np.asarray(r[samples], dtype="<f4").tobytes()
        for r, t in zip(rows, tops)
    )
    return entry, block, min(float(r[t[0]] - r[t[1]]) for r, t in zip(rows, tops))


def add_prompt(L: Any, model: Any, vocab: Any, n_vocab: int, paths: tuple[Path, Path], name: str) -> None:
    """Adds prompt ``name`` of ``PROMPTS`` to a teacher golden on disk, at its
    place in the list: its JSON entry and its block of the logits file."""
    json_path, bin_path = paths
    g = common.read_golden(json_path)
    if any(p["name"] == name for p in g["prompts"]):
        print(f"teacher:   {common.rel(json_path)} already has {name}", file=sys.stderr)
        return
    samples = sample_ids(n_vocab)
    if samples != g["sample_ids"]:
        raise common.PeerError(f"{json_path.name}: sample ids differ from this script's")
    entry, block, gap = forced_prompt(
        L, (model, vocab, n_vocab), (name, dict(PROMPTS)[name]), samples, (g["flash_attn"], g["kv_type"])
    )
    per_prompt = g["steps"] * (g["top_k"] + len(samples)) * 4
    data = bin_path.read_bytes()
    if len(data) != per_prompt * len(g["prompts"]) or len(block) != per_prompt:
        raise common.PeerError(f"{bin_path.name}: {len(data)} bytes, not one block per prompt")
    order = [n for n, _ in PROMPTS]
    entries = sorted(g["prompts"] + [entry], key=lambda e: order.index(e["name"]) if e["name"] in order else len(order))
    at = entries.index(entry) * per_prompt
    head = {k: v for k, v in g.items() if k not in ("sample_ids", "prompts")}
    json_path.write_text(render(head, samples, entries), encoding="utf-8")
    bin_path.write_bytes(data[:at] + block + data[at:])
    print(f"  {json_path.stem}/{name:<12} prompt {len(entry['prompt_ids']):>3} tok, min top-1 gap {gap:.4f}", file=sys.stderr)


def add_cpu_runs(L: Any, model: Any, n_vocab: int, json_path: Path, kv_type: str) -> None:
    """Adds this CPU's teacher-forced runs (flash attention on, and off with
    an f16 cache) to a teacher golden on disk as ``more_runs``: per step,
    llama.cpp's argmax and its top-1/top-2 gap on the file's forced ids."""
    g = common.read_golden(json_path)
    cpu = golden.cpu_label()
    settings = [("auto", "flash attention on")] + ([("off", "flash attention off")] if kv_type == "f16" else [])
    for e in g["prompts"]:
        runs = [r for r in e.get("more_runs", []) if not r["label"].endswith(f", {cpu}")]
        for fa, what in settings:
            _, rows = run_forced(L, model, n_vocab, e["prompt_ids"], e["forced_ids"], fa, kv_type)
            argmax, gaps = [], []
            for r in rows:
                tok, gap = golden.top2(r)
                argmax.append(tok)
                gaps.append(gap)
            runs.append({"label": f"{what}, {cpu}", "argmax": argmax, "gaps": gaps})
            other = [s for s, (a, f) in enumerate(zip(argmax, e["forced_ids"])) if a != f]
            print(f"  {json_path.stem}/{e['name']:<12} {what}: other ids at steps {other}", file=sys.stderr)
        e["more_runs"] = runs
    head = {k: v for k, v in g.items() if k not in ("sample_ids", "prompts")}
    json_path.write_text(render(head, g["sample_ids"], g["prompts"]), encoding="utf-8")
    print(f"teacher:   added the runs of {cpu} to {common.rel(json_path)}", file=sys.stderr)


def emit(L: Any, path: Path, model_file: str, opt: Options) -> list[str]:
    stem = stem_of(model_file, opt.kv_type)
    json_path = opt.out_dir / f"{stem}.teacher.json"
    bin_path = opt.out_dir / f"{stem}.teacher.f32"
    print(f"teacher: {model_file} ({common.rel(path)}), K/V {opt.kv_type}", file=sys.stderr)
    model, vocab, n_vocab = load_model(L, path)
    try:
        if opt.spread:
            return spread(L, model, n_vocab, json_path, bin_path, opt)
        if opt.add_prompt is not None or opt.add_cpu_runs:
            g = common.read_golden(json_path)
            if g["model_sha256"] != common.sha256_file(path):
                raise common.PeerError(f"{json_path.name}: {path} is not the file it was made from")
        if opt.add_cpu_runs:
            add_cpu_runs(L, model, n_vocab, json_path, opt.kv_type)
            return []
        if opt.add_prompt is not None:
            add_prompt(L, model, vocab, n_vocab, (json_path, bin_path), opt.add_prompt)
            return []
        samples = sample_ids(n_vocab)
        entries = []
        blob = []
        for prompt in PROMPTS:
            entry, block, gap = forced_prompt(L, (model, vocab, n_vocab), prompt, samples, ("auto", opt.kv_type))
            entries.append(entry)
            blob.append(block)
            print(f"  {stem}/{prompt[0]:<12} prompt {len(entry['prompt_ids']):>3} tok, min top-1 gap {gap:.4f}", file=sys.stderr)
    finally:
        L.llama_model_free(model)
    head = {
        "model_file": model_file,
        "model_sha256": common.sha256_file(path),
        "peer": common.PEER,
        "n_vocab": n_vocab,
        "n_threads": golden.N_THREADS,
        "kv_type": opt.kv_type,
        "flash_attn": "auto",
        "steps": STEPS,
        "top_k": TOP_K,
        "sample_seed": SAMPLE_SEED,
        "logits_file": bin_path.name,
    }
    text = render(head, samples, entries)
    data = b"".join(blob)
    if opt.check:
        diffs = []
        if not json_path.exists() or json_path.read_text(encoding="utf-8") != text:
            diffs.append(f"{json_path.name} differs")
        if not bin_path.exists() or bin_path.read_bytes() != data:
            diffs.append(f"{bin_path.name} differs")
        return diffs
    opt.out_dir.mkdir(parents=True, exist_ok=True)
    json_path.write_text(text, encoding="utf-8")
    bin_path.write_bytes(data)
    print(f"teacher:   wrote {common.rel(json_path)} ({len(text)} B) and {bin_path.name} ({len(data)} B)", file=sys.stderr)
    return []


def spread(L: Any, model: Any, n_vocab: int, json_path: Path, bin_path: Path, opt: Options) -> list[str]:
    """Per-step error of llama.cpp with flash attention ``opt.spread``
    against the committed golden (flash attention auto = on)."""
    import numpy as np  # noqa: PLC0415

    g = common.read_golden(json_path)
    ref = np.frombuffer(bin_path.read_bytes(), dtype="<f4")
    k, s = g["top_k"], len(g["sample_ids"])
    per = k + s
    subset_errs: list[float] = []
    top5_equal, tie_need, flip_gaps = 0, 0.0, []
    other_rows: list[Any] = []
    for pi, p in enumerate(g["prompts"]):
        _, rows = run_forced(L, model, n_vocab, p["prompt_ids"], p["forced_ids"], opt.spread, opt.kv_type)
        for step, r in enumerate(rows):
            base = (pi * g["steps"] + step) * per
            want = ref[base : base + per]
            top = p["top_ids"][step]
            ids = top + g["sample_ids"]
            other_rows.append(r[ids])
            rng = p["hi"][step] - p["lo"][step]
            subset_errs.append(float(np.max(np.abs(r[ids] - want))) / rng)
            got5 = top_ids(r)[:5]
            if set(got5) == set(top[:5]):
                top5_equal += 1
            else:
                tie_need = max(tie_need, top5_eps(got5, top, want[:k]))
            if got5[0] != p["forced_ids"][step]:
                flip_gaps.append(float(want[0] - want[1]))
        print(
            f"  {p['name']:<12} max rel {max(subset_errs[-g['steps']:]):.4f}  "
            f"median {float(np.median(subset_errs[-g['steps']:])):.4f}",
            file=sys.stderr,
        )
    e = np.asarray(subset_errs)
    if opt.against is not None:
        fak_path = opt.against / json_path.name.replace(".teacher.json", ".fak.f32")
        off = [float(x) for r in other_rows for x in r]
        print(three_way(g, json_path.name, [float(x) for x in ref], off, read_f32(fak_path), opt.spread))
    flips = ", ".join(f"{x:.3f}" for x in sorted(flip_gaps)) or "none"
    print(
        f"SPREAD {json_path.name}: flash attention {opt.spread} vs auto (on) | steps {e.size} | "
        f"rel err max {e.max():.4f} median {np.median(e):.4f} | top-5 set equal {top5_equal}/{e.size}, "
        f"tie eps needed {tie_need:.3f} | greedy flips at llama.cpp gaps: {flips}"
    )
    return []


def read_f32(path: Path) -> list[float]:
    """A raw little-endian f32 file (a golden's logits or a fak dump)."""
    data = array.array("f", path.read_bytes())
    if sys.byteorder != "little":
        data.byteswap()
    return list(data)


def step_dist(x: list[float], y: list[float], per: int, ranges: list[float]) -> list[float]:
    """Per step: max |x - y| over the step's ``per`` entries / the step's range."""
    if len(x) != len(y) or len(x) != per * len(ranges):
        raise common.PeerError(f"{len(x)} and {len(y)} values for {len(ranges)} steps of {per}")
    return [
        max(abs(a - b) for a, b in zip(x[s * per : (s + 1) * per], y[s * per : (s + 1) * per])) / r
        for s, r in enumerate(ranges)
    ]


def ranges_of(g: dict[str, Any]) -> list[float]:
    """The golden's logit range (hi - lo) of every step, prompt-major."""
    return [p["hi"][i] - p["lo"][i] for p in g["prompts"] for i in range(g["steps"])]


def median(v: list[float]) -> float:
    """The upper median (``sorted(v)[n // 2]``), as teacher.rs prints it."""
    return sorted(v)[len(v) // 2]


def three_way(g: dict[str, Any], name: str, on: list[float], off: list[float], fak: list[float], setting: str) -> str:
    """fak's dumped logits (``FAK_TEACHER_DUMP``, teacher.rs) against both
    of llama.cpp's settings, per step, over the golden's entries and
    relative to the golden's range: d(fak, on), d(fak, ``setting``) and
    llama.cpp's own d(``setting``, on). Returns the THREEWAY line."""
    per = g["top_k"] + len(g["sample_ids"])
    rng = ranges_of(g)
    d_on = step_dist(fak, on, per, rng)
    d_off = step_dist(fak, off, per, rng)
    spread = step_dist(off, on, per, rng)
    near = sum(1 for a, s in zip(d_off, spread) if a <= s)
    both = sum(1 for a, b, s in zip(d_on, d_off, spread) if max(a, b) <= s)
    n = len(rng)
    return (
        f"THREEWAY {name}: steps {n} | max / median: fak vs on {max(d_on):.4f} / {median(d_on):.4f}, "
        f"fak vs {setting} {max(d_off):.4f} / {median(d_off):.4f}, "
        f"{setting} vs on {max(spread):.4f} / {median(spread):.4f} | "
        f"steps with fak vs {setting} <= {setting} vs on: {near}/{n}, "
        f"with max(fak vs on, fak vs {setting}) <= {setting} vs on: {both}/{n}"
    )


def dump_pair(g: dict[str, Any], name: str, x: list[float], y: list[float]) -> str:
    """Per-step distance between two fak dumps (``FAK_TEACHER_DUMP``) of
    one golden file, relative to the golden's range: how far a change in
    fak alone moves the logits, on the spread's scale. Returns the DUMPS line."""
    d = step_dist(x, y, g["top_k"] + len(g["sample_ids"]), ranges_of(g))
    return f"DUMPS {name}: steps {len(d)} | rel max {max(d):.4f} median {median(d):.4f}"


def top5_eps(got5: list[int], top: list[int], top_logits: Any) -> float:
    """The tie epsilon that fak's test (``top5_ok`` in teacher.rs) would
    need to accept ``got5`` against the golden's ``top``: the largest
    distance of a differing id from the rank-5/6 edge in the golden's own
    logits (inf for an id outside its top-K)."""
    fifth, sixth = float(top_logits[4]), float(top_logits[5])
    pos = {t: i for i, t in enumerate(top)}
    need = 0.0
    for i in got5:
        if i not in top[:5]:
            need = max(need, fifth - float(top_logits[pos[i]]) if i in pos else float("inf"))
    for i in top[:5]:
        if i not in got5:
            need = max(need, float(top_logits[pos[i]]) - sixth)
    return need


def main() -> int:
    common.ensure_peer_python()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--all", action="store_true", help="the three models of golden.py --all")
    ap.add_argument("--model", action="append", default=[], type=Path, help="a GGUF file (repeatable)")
    ap.add_argument("--out-dir", type=Path, default=common.MODEL_GOLDEN_DIR)
    ap.add_argument("--kv-type", choices=sorted(golden.KV_TYPES), default="f16")
    ap.add_argument("--check", action="store_true", help="regenerate in memory and compare with the files on disk")
    ap.add_argument("--spread", choices=["on", "off"], help="llama.cpp with this flash attention vs the files")
    ap.add_argument(
        "--against",
        type=Path,
        help="with --spread: also compare fak's logits dumped here by teacher.rs (FAK_TEACHER_DUMP) with both settings",
    )
    ap.add_argument(
        "--dumps",
        nargs=2,
        type=Path,
        metavar=("A", "B"),
        help="compare two fak dumps (FAK_TEACHER_DUMP) of every golden file in both; runs no model",
    )
    ap.add_argument("--add-prompt", choices=[n for n, _ in PROMPTS], help="add one prompt of the list to the files on disk")
    ap.add_argument("--add-cpu-runs", action="store_true", help="add this CPU's teacher-forced runs to the files on disk")
    args = ap.parse_args()
    if args.dumps:
        a, b = args.dumps
        for f in sorted(a.glob("*.fak.f32")):
            stem = f.name.removesuffix(".fak.f32")
            if (b / f.name).exists():
                jp = args.out_dir / f"{stem}.teacher.json"
                g = json.loads(jp.read_text(encoding="utf-8"))
                print(dump_pair(g, jp.name, read_f32(f), read_f32(b / f.name)))
        return 0
    if not args.all and not args.model:
        ap.error("give --all or at least one --model")
    if args.against is not None and args.spread is None:
        ap.error("--against needs --spread")
    opt = Options(args.out_dir, args.kv_type, args.check, args.spread, args.against, args.add_prompt, args.add_cpu_runs)
    L = common.llama_init()
    diffs: list[str] = []
    for m in args.model:
        if not m.exists():
            raise common.PeerError(f"{m}: no such model file")
        diffs += emit(L, m, m.name, opt)
    if args.all:
        for name in (golden.QWEN, golden.SMOL_Q41):
            p = common.MODELS / name
            if not p.exists():
                raise common.PeerError(f"{p} is missing: run scripts/fetch-models.sh")
            diffs += emit(L, p, name, opt)
        with tempfile.TemporaryDirectory(prefix="fak-peer-") as td:
            q8 = Path(td) / golden.SMOL_Q80
            common.llama_quantize(L, common.MODELS / golden.SMOL_Q41, q8, "q8_0")
            diffs += emit(L, q8, golden.SMOL_Q80, opt)
    if args.check:
        for d in diffs:
            print(f"teacher: DIFF {d}", file=sys.stderr)
        print(f"teacher: check {'failed' if diffs else 'passed'}", file=sys.stderr)
        return 1 if diffs else 0
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except common.PeerError as e:
        print(f"teacher: error: {e}", file=sys.stderr)
        sys.exit(1)
