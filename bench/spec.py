"""Speculative decoding, fak against llama-server, in one run.

Workloads (chat requests one at a time, greedy):

* ``edit``: a 200-line source file in the prompt (about 1,950 tokens),
  "rename X to Y and output the whole file": the answer re-emits the file
  with the three lines that name X changed;
* ``edit+prediction``: the same request with OpenAI's ``prediction`` set to
  the original file (fak only; llama-server has no Predicted Outputs);
* ``tools``: five tool-call turns of ``bench/tools_workload.py`` (one per
  scenario) with ``tool_choice: required``, so the call is held to its
  schema (fak drafts what the grammar forces; fak only);
* ``chat``: a natural-language answer (drafts rarely hit);
* ``fleet``: six agents of one fleet (one tenant) in turn, the same tools
  and scenario, each its own task under ``tool_choice: auto``: later
  agents' answers resemble earlier ones (fak's fleet index drafts them).

Configurations, each a fresh server, alternated ``--reps`` times in one
run: fak ``--speculative off|lookup|auto`` and llama-server plain,
``--spec-type ngram-simple`` and ``--spec-type ngram-mod``; with
``--draft-model``, also fak ``--speculative draft`` and llama-server
``-md`` with that model.

Requests are streamed. For every workload run: wall seconds, completion
tokens, tokens/s over the wall time, decode tokens/s (the tokens after
each answer's first over the time after it, leaving out the prompt's
prefill, which speculation does not change). For fak the first token's
time is the engine's own (its ``vllm:time_to_first_token_seconds`` sum,
read before and after each request): a tool call's first delta waits
for the function's whole name, so the first delta a client sees comes
several tokens late, and those tokens would count as decoded in no time.
For a peer it is the first content or tool-call delta, and an answer
that came in fewer than 4 deltas (a reply that may be a bare JSON call
under ``tool_choice: auto``) is left out. Then the
SHA-256 of the answers (text and tool calls; every fak configuration must
print the same digest as fak plain: speculation is exact; the exit status
is 1 if one does not), and for fak the draft tokens verified and accepted
(``/metrics``, before and after). The report (``--out``, JSON) has every
run and, per workload and configuration, the median tokens/s and its ratio
to fak plain on the same requests without a prediction.

    bench/spec.sh --model models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf \
        --draft-model models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf --reps 3
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
from tools_workload import SYSTEM, make_task  # noqa: E402

# The file the edit workload re-emits: a frozen copy of the first 200 lines
# of a real source file of this project (`bench/peers/common.py` as it was
# when the workload was written), so that editing that file does not change
# the workload; the report pins the text's SHA-256.
EDIT_FILE = ROOT / "bench" / "spec-edit-source.txt"
EDIT_LINES = 200
# Long enough for the whole file (about 1,950 tokens) and its fence.
EDIT_MAX_TOKENS = 2560

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


def draft_configs(draft: Path) -> dict[str, tuple[str, list[str]]]:
    """The draft-model configurations for ``draft``."""
    return {
        "fak-draft": ("fak", ["--speculative", "draft", "--draft-model", str(draft)]),
        # llama.cpp's draft model with its defaults (up to 3 tokens).
        "llama-draft": ("llama-server", ["-md", str(draft), "--spec-type", "draft-simple"]),
    }


def tool_turn(i: int, choice: str) -> dict:
    task = make_task(1, i)
    return {
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task.user}],
        "tools": task.tools,
        "tool_choice": choice,
        "max_tokens": 160,
    }


def workloads(source: str) -> dict[str, dict]:
    """Each workload: its requests (``bodies``), run in order."""
    edit_msgs = [
        {
            "role": "user",
            "content": "Rename the function `llama_log_lines` to `captured_llama_log` everywhere in this file. "
            "Output the whole file and nothing else.\n\n```python\n" + source + "```",
        }
    ]
    chat_msgs = [
        {
            "role": "user",
            "content": "Explain in a few paragraphs why the sky is blue, for a curious ten-year-old.",
        }
    ]
    prediction = {"type": "content", "content": "```python\n" + source + "```"}
    return {
        "edit": {"bodies": [{"messages": edit_msgs, "max_tokens": EDIT_MAX_TOKENS}]},
        "edit+prediction": {
            "bodies": [{"messages": edit_msgs, "max_tokens": EDIT_MAX_TOKENS, "prediction": prediction}],
            "fak_only": True,
        },
        # fak only: llama-server's `tool_choice: required` on this template
        # ran every turn to max_tokens without a call (its tok/s would
        # time other text).
        "tools": {"bodies": [tool_turn(i, "required") for i in range(5)], "fak_only": True},
        "chat": {"bodies": [{"messages": chat_msgs, "max_tokens": 256}]},
        # Scenario i % 5 == 0 (weather) for every agent.
        "fleet": {"bodies": [tool_turn(5 * k, "auto") for k in range(6)]},
    }


def spec_counters(url: str) -> dict[str, float]:
    """fak's speculation counters (``/metrics``; empty for a peer)."""
    try:
        with urllib.request.urlopen(url + "/metrics", timeout=30) as r:
            text = r.read().decode()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        for name in ("num_draft_tokens", "num_accepted_tokens"):
            if line.startswith(f"vllm:spec_decode_{name}_total"):
                out[name] = float(line.split()[-1])
        if line.startswith("vllm:time_to_first_token_seconds_sum"):
            out[FIRST_TOKEN] = float(line.split()[-1])
    return out


# The engine's summed seconds from arrival to first token (fak's /metrics).
FIRST_TOKEN = "first_token_seconds_sum"


def decode_span(r: dict, engine_first: float | None) -> tuple[float, int] | None:
    """One answer's decoding: the seconds after its first token and the
    tokens after it. ``engine_first``: the engine's own seconds to that
    token (None for a peer, which is timed by its first delta, and only
    when at least 4 deltas streamed: see the module docs)."""
    n = r["completion_tokens"]
    if n <= 1:
        return None
    if engine_first is not None:
        return r["seconds"] - engine_first, n - 1
    if r["first_token_seconds"] is None or r["deltas"] < 4:
        return None
    return r["seconds"] - r["first_token_seconds"], n - 1


def run_workload(url: str, bodies: list[dict], tenant: str) -> dict:
    """Runs ``bodies`` in order: the totals and one digest over every
    answer."""
    before = spec_counters(url)
    h = hashlib.sha256()
    secs, n, accepted, rejected = 0.0, 0, 0, 0
    # Decode: the tokens after each answer's first, over the time after it.
    decode_secs, decode_n = 0.0, 0
    finish = []
    for b in bodies:
        first_before = spec_counters(url).get(FIRST_TOKEN)
        r = ask(url, {**b, "model": "m", "temperature": 0, "user": tenant})
        first_after = spec_counters(url).get(FIRST_TOKEN)
        engine_first = None
        if first_before is not None and first_after is not None:
            engine_first = first_after - first_before
        secs += r["seconds"]
        n += r["completion_tokens"]
        span = decode_span(r, engine_first)
        if span is not None:
            decode_secs += span[0]
            decode_n += span[1]
        h.update(r["answer"].encode())
        accepted += r["accepted_prediction_tokens"] or 0
        rejected += r["rejected_prediction_tokens"] or 0
        finish.append(r["finish_reason"])
    after = spec_counters(url)
    drafted = {k: after[k] - before.get(k, 0.0) for k in after if k != FIRST_TOKEN}
    return {
        "requests": len(bodies),
        "seconds": secs,
        "completion_tokens": n,
        "tokens_per_s": n / secs if secs > 0 else 0.0,
        "decode_tokens_per_s": decode_n / decode_secs if decode_secs > 0 else None,
        "sha256": h.hexdigest(),
        "accepted_prediction_tokens": accepted,
        "rejected_prediction_tokens": rejected,
        "draft_tokens": drafted.get("num_draft_tokens"),
        "accepted_draft_tokens": drafted.get("num_accepted_tokens"),
        "finish_reasons": finish,
    }


def ask(url: str, body: dict) -> dict:
    """One streamed chat request: the answer, its usage, and its times
    (wall seconds, and seconds to the first content or tool-call delta:
    the prompt's prefill, which both engines pay alike)."""
    req = urllib.request.Request(
        url + "/v1/chat/completions",
        data=json.dumps({**body, "stream": True, "stream_options": {"include_usage": True}}).encode(),
        headers={"Content-Type": "application/json"},
    )
    t = time.perf_counter()
    first = None
    deltas = 0
    content: list[str] = []
    calls: dict[int, list[str]] = {}
    usage: dict = {}
    finish = None
    with urllib.request.urlopen(req, timeout=1800) as r:
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data:"):
                continue
            data = line[len("data:"):].strip()
            if data == "[DONE]":
                break
            chunk = json.loads(data)
            usage = chunk.get("usage") or usage
            for choice in chunk.get("choices") or []:
                finish = choice.get("finish_reason") or finish
                delta = choice.get("delta") or {}
                got = False
                if delta.get("content"):
                    content.append(delta["content"])
                    got = True
                for c in delta.get("tool_calls") or []:
                    call = calls.setdefault(c.get("index", 0), ["", ""])
                    f = c.get("function") or {}
                    call[0] += f.get("name") or ""
                    call[1] += f.get("arguments") or ""
                    got = True
                if got:
                    deltas += 1
                    if first is None:
                        first = time.perf_counter() - t
    secs = time.perf_counter() - t
    answer = json.dumps(["".join(content), [tuple(calls[i]) for i in sorted(calls)]])
    details = usage.get("completion_tokens_details") or {}
    n = usage.get("completion_tokens", 0)
    return {
        "seconds": secs,
        "first_token_seconds": first,
        "completion_tokens": n,
        "tokens_per_s": n / secs if secs > 0 else 0.0,
        "answer": answer,
        "deltas": deltas,
        "accepted_prediction_tokens": details.get("accepted_prediction_tokens"),
        "rejected_prediction_tokens": details.get("rejected_prediction_tokens"),
        "finish_reason": finish,
    }


def summarize(rows: list[dict]) -> dict:
    out: dict = {}
    for wl in sorted({r["workload"] for r in rows}):
        # The plain baseline: fak-off on the same request without a
        # prediction (edit+prediction is compared with plain edit).
        plain_wl = "edit" if wl == "edit+prediction" else wl
        base = [r for r in rows if r["workload"] == plain_wl and r["config"] == "fak-off"]
        b = statistics.median(r["tokens_per_s"] for r in base) if base else None
        bd = [r["decode_tokens_per_s"] for r in base if r.get("decode_tokens_per_s")]
        bd = statistics.median(bd) if bd else None
        plain = {r["sha256"] for r in rows if r["workload"] == plain_wl and r["config"] == "fak-off"}
        out[wl] = {}
        for cfg in dict.fromkeys(r["config"] for r in rows):
            mine = [r for r in rows if r["workload"] == wl and r["config"] == cfg]
            if not mine:
                continue
            med = statistics.median(r["tokens_per_s"] for r in mine)
            dec = [r["decode_tokens_per_s"] for r in mine if r.get("decode_tokens_per_s")]
            dec = statistics.median(dec) if dec else None
            digests = sorted({r["sha256"] for r in mine})
            drafted = [r.get("draft_tokens") for r in mine if r.get("draft_tokens")]
            kept = [r.get("accepted_draft_tokens") or 0 for r in mine if r.get("draft_tokens")]
            out[wl][cfg] = {
                "median_tokens_per_s": med,
                "vs_fak_off_plain": med / b if b else None,
                "median_decode_tokens_per_s": dec,
                "decode_vs_fak_off_plain": dec / bd if dec and bd else None,
                "runs": len(mine),
                "sha256": digests,
                "same_as_fak_off": (set(digests) == plain) if cfg.startswith("fak") and plain else None,
                "acceptance": sum(kept) / sum(drafted) if drafted else None,
            }
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=ROOT / "models" / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=8192)
    ap.add_argument("--draft-model", type=Path, default=None)
    ap.add_argument("--configs", default=None, help="comma-separated (default: all)")
    ap.add_argument("--workloads", default=None, help="comma-separated (default: all)")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    source = edit_source()
    wls = workloads(source)
    known = dict(CONFIGS)
    if a.draft_model:
        known.update(draft_configs(a.draft_model))
    configs = [c for c in (a.configs or ",".join(known)).split(",") if c]
    for c in configs:
        if c not in known:
            print(f"spec.py: unknown configuration {c} (known: {', '.join(known)})", file=sys.stderr)
            return 2
    if a.workloads:
        pick = [w for w in a.workloads.split(",") if w]
        if any(w not in wls for w in pick):
            print(f"spec.py: unknown workload in {a.workloads} (known: {', '.join(wls)})", file=sys.stderr)
            return 2
        wls = {w: wls[w] for w in pick}
    rows = []
    log = tempfile.TemporaryFile()
    for rep in range(a.reps):
        for cfg in configs:
            kind, extra = known[cfg]
            proc, url = start_engine(kind, a.model, a.ctx, a.threads, log, tuple(extra))
            try:
                for wl, w in wls.items():
                    if w.get("fak_only") and kind != "fak":
                        continue
                    # Each workload its own tenant (`user`), so fak's fleet
                    # index of recent outputs does not draft one workload's
                    # answer from another's.
                    r = run_workload(url, w["bodies"], f"spec-bench-{wl}")
                    r.update({"rep": rep, "config": cfg, "workload": wl})
                    rows.append(r)
                    acc = ""
                    if r["draft_tokens"]:
                        acc = f"  drafts {r['accepted_draft_tokens']:.0f}/{r['draft_tokens']:.0f} accepted"
                    dec = f"{r['decode_tokens_per_s']:7.2f}" if r["decode_tokens_per_s"] else "      -"
                    print(f"rep {rep} {cfg:20} {wl:16} {r['completion_tokens']:4} tok {r['seconds']:7.2f} s "
                          f"{r['tokens_per_s']:7.2f} tok/s (decode {dec})  {r['sha256'][:12]}{acc}",
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
        "draft_model": a.draft_model.name if a.draft_model else None,
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
            dvs = f"{s['decode_vs_fak_off_plain']:.2f}x" if s["decode_vs_fak_off_plain"] else "-"
            dec = f"{s['median_decode_tokens_per_s']:7.2f}" if s["median_decode_tokens_per_s"] else "      -"
            same = {True: "same ids as fak-off", False: "DIFFERENT from fak-off", None: ""}[s["same_as_fak_off"]]
            acc = f"  acceptance {s['acceptance']:.0%}" if s["acceptance"] is not None else ""
            print(f"{wl:16} {cfg:20} {s['median_tokens_per_s']:7.2f} tok/s  {vs:>6}  "
                  f"decode {dec} tok/s {dvs:>6}  {same}{acc}")
    bad = [(wl, c) for wl, per in summary.items() for c, s in per.items() if s["same_as_fak_off"] is False]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
