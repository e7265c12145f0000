"""Speculative decoding, fak against llama-server, in one run.

Workloads (each one chat request at a time, greedy):

* ``edit``: a source file in the prompt, "rename X to Y and output the whole
  file": the answer re-emits the file with a few changed lines;
* ``edit+prediction``: the same request with OpenAI's ``prediction`` set to
  the original file (fak only; llama-server has no Predicted Outputs);
* ``chat``: a natural-language answer (drafts rarely hit).

Configurations, each a fresh server, alternated ``--reps`` times in one
run: fak ``--speculative off|lookup|auto`` and llama-server plain,
``--spec-type ngram-simple`` and ``--spec-type ngram-mod``.

For every request: wall seconds, completion tokens, tokens/s, and the
SHA-256 of the answer's text (every fak configuration must print the same
digest as fak plain: speculation is exact; the exit status is 1 if one
does not). The report (``--out``, JSON) has every request and, per
workload and configuration, the median tokens/s and its ratio to fak plain
on the same request without a prediction.

    bench/spec.sh --model models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf --reps 3
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from harness import start_engine  # noqa: E402

# The file the edit workload re-emits: a real source file of this project
# (stable across runs: the script pins the text it read in the report).
EDIT_FILE = ROOT / "bench" / "peers" / "common.py"
EDIT_LINES = 60

CONFIGS = {
    "fak-off": ("fak", ["--speculative", "off"]),
    "fak-lookup": ("fak", ["--speculative", "lookup"]),
    "fak-auto": ("fak", ["--speculative", "auto"]),
    "llama-plain": ("llama-server", []),
    "llama-ngram-simple": ("llama-server", ["--spec-type", "ngram-simple"]),
    "llama-ngram-mod": ("llama-server", ["--spec-type", "ngram-mod"]),
}


def edit_source() -> str:
    lines = EDIT_FILE.read_text().splitlines()[:EDIT_LINES]
    return "\n".join(lines) + "\n"


def workloads(source: str) -> dict[str, dict]:
    edit_msgs = [
        {
            "role": "user",
            "content": "Rename the function `free_port` to `pick_free_port` everywhere in this file. "
            "Output the whole file and nothing else.\n\n```python\n" + source + "```",
        }
    ]
    chat_msgs = [
        {
            "role": "user",
            "content": "Explain in a few paragraphs why the sky is blue, for a curious ten-year-old.",
        }
    ]
    return {
        "edit": {"messages": edit_msgs, "max_tokens": 768},
        "edit+prediction": {
            "messages": edit_msgs,
            "max_tokens": 768,
            "prediction": {"type": "content", "content": "```python\n" + source + "```"},
            "fak_only": True,
        },
        "chat": {"messages": chat_msgs, "max_tokens": 256},
    }


def ask(url: str, body: dict) -> dict:
    req = urllib.request.Request(
        url + "/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    t = time.perf_counter()
    with urllib.request.urlopen(req, timeout=1800) as r:
        out = json.loads(r.read())
    secs = time.perf_counter() - t
    text = out["choices"][0]["message"]["content"] or ""
    usage = out.get("usage", {})
    details = usage.get("completion_tokens_details") or {}
    n = usage.get("completion_tokens", 0)
    return {
        "seconds": secs,
        "completion_tokens": n,
        "tokens_per_s": n / secs if secs > 0 else 0.0,
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
        "accepted_prediction_tokens": details.get("accepted_prediction_tokens"),
        "rejected_prediction_tokens": details.get("rejected_prediction_tokens"),
        "finish_reason": out["choices"][0].get("finish_reason"),
    }


def summarize(rows: list[dict]) -> dict:
    out: dict = {}
    for wl in sorted({r["workload"] for r in rows}):
        # The plain baseline: fak-off on the same request without a
        # prediction (edit+prediction is compared with plain edit).
        plain_wl = "edit" if wl == "edit+prediction" else wl
        base = [r["tokens_per_s"] for r in rows if r["workload"] == plain_wl and r["config"] == "fak-off"]
        b = statistics.median(base) if base else None
        plain = {r["sha256"] for r in rows if r["workload"] == plain_wl and r["config"] == "fak-off"}
        out[wl] = {}
        for cfg in CONFIGS:
            mine = [r for r in rows if r["workload"] == wl and r["config"] == cfg]
            if not mine:
                continue
            med = statistics.median(r["tokens_per_s"] for r in mine)
            digests = sorted({r["sha256"] for r in mine})
            out[wl][cfg] = {
                "median_tokens_per_s": med,
                "vs_fak_off_plain": med / b if b else None,
                "runs": len(mine),
                "sha256": digests,
                "same_as_fak_off": (set(digests) == plain) if cfg.startswith("fak") and plain else None,
            }
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=ROOT / "models" / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    source = edit_source()
    wls = workloads(source)
    configs = [c for c in a.configs.split(",") if c]
    for c in configs:
        if c not in CONFIGS:
            print(f"spec.py: unknown configuration {c} (known: {', '.join(CONFIGS)})", file=sys.stderr)
            return 2
    rows = []
    log = tempfile.TemporaryFile()
    for rep in range(a.reps):
        for cfg in configs:
            kind, extra = CONFIGS[cfg]
            proc, url = start_engine(kind, a.model, a.ctx, a.threads, log, tuple(extra))
            try:
                for wl, w in wls.items():
                    if w.get("fak_only") and kind != "fak":
                        continue
                    body = {k: v for k, v in w.items() if k != "fak_only"}
                    # Each workload its own tenant (`user`), so fak's fleet
                    # index of recent outputs does not draft one workload's
                    # answer from another's.
                    body.update({"model": "m", "temperature": 0, "user": f"spec-bench-{wl}"})
                    r = ask(url, body)
                    r.update({"rep": rep, "config": cfg, "workload": wl})
                    rows.append(r)
                    print(f"rep {rep} {cfg:20} {wl:16} {r['completion_tokens']:4} tok {r['seconds']:7.2f} s "
                          f"{r['tokens_per_s']:7.2f} tok/s  {r['sha256'][:12]}"
                          + (f"  accepted {r['accepted_prediction_tokens']}" if r["accepted_prediction_tokens"] else ""),
                          file=sys.stderr, flush=True)
            finally:
                proc.terminate()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
    summary = summarize(rows)
    report = {
        "model": str(a.model.name),
        "threads": a.threads,
        "reps": a.reps,
        "cpu": platform.processor() or platform.machine(),
        "edit_file": f"{EDIT_FILE.relative_to(ROOT)} (first {EDIT_LINES} lines)",
        "edit_source_sha256": hashlib.sha256(source.encode()).hexdigest(),
        "summary": summary,
        "rows": rows,
    }
    text = json.dumps(report, indent=1)
    if a.out:
        a.out.write_text(text)
    for wl, per in summary.items():
        for cfg, s in per.items():
            vs = f"{s['vs_fak_off_plain']:.2f}x" if s["vs_fak_off_plain"] else "-"
            same = {True: "same ids as fak-off", False: "DIFFERENT from fak-off", None: ""}[s["same_as_fak_off"]]
            print(f"{wl:16} {cfg:20} {s['median_tokens_per_s']:7.2f} tok/s  {vs:>6}  {same}")
    bad = [(wl, c) for wl, per in summary.items() for c, s in per.items() if s["same_as_fak_off"] is False]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
