#!/usr/bin/env python3
"""Replays one greedy answer through prompt-lookup rules: how many drafts
each rule would have had accepted, and how many verifying passes the
answer would have taken, without running the model again.

    bench/lookup_replay.py [--model M] [--workload edit]

Starts ``fak serve --speculative off``, asks ``bench/spec.py``'s request of
the workload (greedy), and tokenizes the prompt's text and the answer with
the server's ``/tokenize``. A rule proposes a draft after every pass; the
replay accepts draft tokens while they equal the answer's next tokens and
then emits one more (the token the pass samples), as verification does.
Rules, each with drafts of 7 tokens (one tile with the sampled token):

* ``suffix2-4``: the latest earlier occurrence of the longest suffix of
  4, 3 or 2 tokens (prompt lookup before the longest-match rule);
* ``longest-N``: the earlier occurrence matching the context's end for the
  most tokens, counted up to N, the latest of equals
  (``spec::longest_match``); ``+long`` drafts 15 tokens after a match of
  N tokens.

The prompt is tokenized without the chat template's tokens, so positions
differ from the engine's by a few tokens; the matches do not.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import spec  # noqa: E402
from harness import start_engine  # noqa: E402


def suffix_rule(ctx: list[int]) -> tuple[int | None, int]:
    n_ctx = len(ctx)
    for n in range(min(4, n_ctx - 1), 1, -1):
        tail = ctx[n_ctx - n :]
        for i in range(n_ctx - n - 1, -1, -1):
            if ctx[i : i + n] == tail:
                return i + n, n
    return None, 0


def longest_rule(ctx: list[int], cap: int) -> tuple[int | None, int]:
    n_ctx = len(ctx)
    best, best_m = None, 0
    for end in range(n_ctx - 1, 1, -1):
        if ctx[end - 2 : end] != ctx[n_ctx - 2 :]:
            continue
        m = 2
        while m < cap and m < end and ctx[end - m - 1] == ctx[n_ctx - m - 1]:
            m += 1
        if m > best_m:
            best, best_m = end, m
            if m == cap:
                break
    return best, best_m


def replay(prompt: list[int], answer: list[int], rule, long_after: int | None) -> dict:
    ctx, pos, passes, drafted, kept = list(prompt), 0, 0, 0, 0
    while pos < len(answer):
        start, matched = rule(ctx)
        k = 15 if long_after is not None and matched >= long_after else 7
        draft = ctx[start : start + k] if start is not None else []
        n = 0
        while n < len(draft) and pos + n < len(answer) and draft[n] == answer[pos + n]:
            n += 1
        passes += 1
        drafted += len(draft)
        kept += n
        take = min(n + 1, len(answer) - pos)
        ctx += answer[pos : pos + take]
        pos += take
    return {"passes": passes, "drafted": drafted, "accepted": kept,
            "acceptance": kept / drafted if drafted else 0.0, "tokens_per_pass": len(answer) / passes}


def post(url: str, path: str, body: dict) -> dict:
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=1800) as r:
        return json.loads(r.read())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=ROOT / "models" / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
    ap.add_argument("--workload", default="edit", choices=["edit", "chat"])
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    body = spec.workloads(spec.edit_source())[a.workload]["bodies"][0]
    with tempfile.TemporaryFile() as log:
        proc, url = start_engine("fak", a.model, 8192, a.threads, log, ("--speculative", "off"))
        try:
            out = post(url, "/v1/chat/completions", {**body, "model": "m", "temperature": 0})
            text = out["choices"][0]["message"]["content"]
            prompt = post(url, "/tokenize", {"content": body["messages"][-1]["content"]})["tokens"]
            answer = post(url, "/tokenize", {"content": text})["tokens"]
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    print(f"{a.workload}: prompt {len(prompt)} tokens, answer {len(answer)} tokens")
    rules = [("suffix2-4", suffix_rule, None)]
    for cap in (8, 16, 64):
        rules.append((f"longest-{cap}", lambda c, cap=cap: longest_rule(c, cap), None))
        rules.append((f"longest-{cap}+long", lambda c, cap=cap: longest_rule(c, cap), cap))
    for name, rule, long_after in rules:
        r = replay(prompt, answer, rule, long_after)
        print(f"{name:18} passes {r['passes']:4}  drafted {r['drafted']:5}  accepted {r['accepted']:5} "
              f"({r['acceptance']:.1%})  {r['tokens_per_pass']:.2f} tokens per pass")
    return 0


if __name__ == "__main__":
    sys.exit(main())
