#!/usr/bin/env python3
"""A small multi-agent loop over ``fak serve``'s sessions.

Three agents (planner, coder, reviewer) share one system prompt. It is
computed once, as a session; each agent is a copy-on-write fork of it, so
no agent pays for the prompt again. Each turn sends an agent only its new
message (the previous agent's answer): the rest of its conversation is
already in its session's KV cache.

* Session endpoints (create, fork, inspect, evict, delete) are plain HTTP
  (``urllib``).
* Turns go through the official ``openai`` client, pointed at the session:
  ``OpenAI(base_url=f"{url}/v1/sessions/{id}")`` makes
  ``chat.completions.create`` post to ``/v1/sessions/{id}/chat/completions``.

Run a server, then this script:

    target/release/fak serve --model models/smollm2-135m-instruct-q8_0.gguf --port 8080 &
    tests/openai/.venv/bin/python examples/agents.py --url http://127.0.0.1:8080 --rounds 2

With ``--api-key KEY`` both clients send the key (sessions belong to it).
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.request

from openai import OpenAI

SYSTEM = (
    "You are one agent of a small software team building a Rust HTTP service. "
    "Answer in at most two sentences and address the next agent directly."
)
ROLES = {
    "planner": "You are the planner: break the task into the next concrete step.",
    "coder": "You are the coder: say exactly what code you write for the step.",
    "reviewer": "You are the reviewer: point out one risk in what the coder wrote.",
}


def call(url: str, method: str, path: str, key: str | None, body: dict | None = None):
    """One JSON request to a session endpoint; returns the decoded body (None for 204)."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("Authorization", f"Bearer {key}")
    with urllib.request.urlopen(req, timeout=300) as r:
        raw = r.read()
    return json.loads(raw) if raw else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--api-key", default=None)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=48)
    a = ap.parse_args()

    root = call(a.url, "POST", "/v1/sessions", a.api_key,
                {"messages": [{"role": "system", "content": SYSTEM}]})
    print(f"shared prefix: {root['id']} ({root['tokens']} tokens, "
          f"{root['cached_tokens']} from the prefix cache)")

    agents = {}
    for name, brief in ROLES.items():
        fork = call(a.url, "POST", f"/v1/sessions/{root['id']}/fork", a.api_key, {})
        client = OpenAI(base_url=f"{a.url}/v1/sessions/{fork['id']}",
                        api_key=a.api_key or "none")
        agents[name] = (fork["id"], client, brief)
        print(f"{name}: fork {fork['id']} shares all {fork['tokens']} tokens")

    message = "Task: add a /health endpoint that reports whether the model is loaded."
    for rnd in range(a.rounds):
        for name, (sid, client, brief) in agents.items():
            content = f"{brief}\n\n{message}" if rnd == 0 else message
            r = client.chat.completions.create(
                model="",
                messages=[{"role": "user", "content": content}],
                max_tokens=a.max_tokens,
                temperature=0,
            )
            message = r.choices[0].message.content.strip()
            cached = r.usage.prompt_tokens_details.cached_tokens
            session = (r.model_extra or {}).get("session", {})
            print(f"[round {rnd + 1}] {name} ({cached} of {r.usage.prompt_tokens} prompt "
                  f"tokens cached, session now {session.get('tokens')}): {message}")

    # Inspect one agent, then forget its first exchange exactly.
    sid = agents["coder"][0]
    info = call(a.url, "GET", f"/v1/sessions/{sid}", a.api_key)
    print("coder lineage:", ", ".join(
        f"[{g['start']},{g['end']}) {g.get('parent_origin', g['origin'])}"
        for g in info["lineage"]))
    ev = call(a.url, "POST", f"/v1/sessions/{sid}/evict", a.api_key, {"message": 1})
    print(f"evicted message 1: {ev['removed']} tokens gone, {ev['recomputed']} recomputed, "
          f"{ev['tokens']} left")

    for s in [root["id"]] + [v[0] for v in agents.values()]:
        call(a.url, "DELETE", f"/v1/sessions/{s}", a.api_key)
    print("sessions deleted")
    return 0


if __name__ == "__main__":
    sys.exit(main())
