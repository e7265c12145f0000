#!/usr/bin/env python3
"""fak replicas behind vllm-router: agent fleets routed by policy, in one run.

Starts R ``fak serve`` replicas (each ``--threads 1``, publishing its
KV-cache events with ``--kv-events``) and vllm-router in front of them,
once per (API, policy), each time on fresh replicas; then runs the same
agent-fleet workload through the router and reports, per run:

* prompt tokens sent and computed (``prompt_tokens - cached_tokens`` of
  every answer's usage), and the computed ones against one replica's run
  of the same workload (``single``: no router);
* agent-turns/s (every turn of every agent over the wall clock), TTFT p50
  and p99 (request sent to the first streamed token);
* each replica's share of the requests (``vllm:request_success_total``).

The workload: F fleets, each its own system prompt of 1-2k tokens (seeded
words); A agents per fleet, T turns per agent. Each turn an agent sends a
private tool result of 32-256 tokens and gets a reply of D tokens
(``ignore_eos``, greedy, streamed). A fleet's first agent runs its first
turn alone; then the fleet's other agents start (a fleet fans out from a
leader whose prefix exists).

* ``chat``: plain chat completions; each turn resends the agent's whole
  conversation (system prompt, task, every earlier tool result and reply).
  Every call carries ``x-session-id: f<F>-a<A>`` (the agent).
* ``sessions``: fak's session API. The fleet's leader makes the fleet's
  session (the system prompt, computed once); each agent forks it (no
  compute), and its first turn adds its task. A turn sends only the new
  tool result. Every call carries ``x-session-id: f<F>`` (the fleet: its
  sessions live on the replica that made the fleet's session).

``--overhead-pairs N``: instead, the cost of publishing events: N
alternated pairs of one replica (2 threads) serving the chat workload
directly, without and with ``--kv-events`` (vllm-router consuming them);
their median agent-turns/s and the ratio, in ``kv_events_overhead.json``.

``--kill``: one more run (chat, kv_aware) SIGKILLs the last replica after
``--kill-at`` of the turns; an agent retries a failed turn up to twice.
It reports the turns that failed at least once, the router's retries
(``vllm_router_retries_total``), the turns lost (all tries failed), and
the turns sent after the kill that failed.

    python3 bench/scaleout.py --fak target/release/fak --router ROUTER \\
        --model models/smollm2-135m-instruct-q8_0.gguf --out DIR

The report is JSON (``fak-bench-scaleout/1``) in ``DIR/scaleout.json``;
servers' logs beside it. Only the standard library; the pure parts are
tested by ``bench/test_scaleout.py``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCHEMA = "fak-bench-scaleout/1"
POLICIES = {
    "chat": ["round_robin", "cache_aware", "kv_aware"],
    "sessions": ["consistent_hash", "kv_aware"],
}
WORDS = (
    "agent tool result file line error patch test build log value index cache block token "
    "router replica prefix session branch commit review module function struct trait crate "
    "request reply stream event queue thread kernel matrix vector tensor layer weight model"
).split()


class BenchError(Exception):
    """A server did not start, or answered something unexpected."""


# ------------------------------------------------------------ pure parts


@dataclass(frozen=True)
class Shape:
    fleets: int = 4
    agents: int = 8
    turns: int = 6
    decode: int = 32
    prefix_min: int = 1024
    prefix_max: int = 2048
    result_min: int = 32
    result_max: int = 256


def words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def fleet_prefix(shape: Shape, fleet: int, tokens_per_word: float) -> str:
    """Fleet ``fleet``'s system prompt: between prefix_min and prefix_max tokens."""
    rng = random.Random(f"prefix-{fleet}")
    n = rng.randint(shape.prefix_min, shape.prefix_max)
    return f"Fleet {fleet} rules. " + words(rng, max(1, int(n / tokens_per_word)))


def tool_result(shape: Shape, fleet: int, agent: int, turn: int, tokens_per_word: float) -> str:
    rng = random.Random(f"result-{fleet}-{agent}-{turn}")
    n = rng.randint(shape.result_min, shape.result_max)
    return f"Tool result {turn}: " + words(rng, max(1, int(n / tokens_per_word)))


def session_key(fleet: int, agent: int) -> str:
    return f"f{fleet}-a{agent}"


def fleet_key(fleet: int) -> str:
    return f"f{fleet}"


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    v = sorted(values)
    k = (len(v) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def shares(counts: list[float]) -> list[float]:
    total = sum(counts)
    return [c / total if total else 0.0 for c in counts]


def metric(text: str, name: str) -> float:
    """The sum of a metric's samples in a Prometheus text exposition."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and len(line) > len(name) and line[len(name)] in " {":
            total += float(line.rsplit(" ", 1)[1])
    return total


# ------------------------------------------------------------ processes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str, timeout: float = 10) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def wait_health(url: str, proc: subprocess.Popen, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise BenchError(f"{what} exited ({proc.returncode})")
        try:
            get(url + "/health", timeout=2)
            return
        except (urllib.error.URLError, OSError):
            time.sleep(0.2)
    raise BenchError(f"{what} not healthy after {timeout:.0f} s")


@dataclass
class Proc:
    name: str
    proc: subprocess.Popen
    url: str
    events: str = ""
    replay: str = ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_replica(args: argparse.Namespace, name: str, out: Path, events: bool, threads: int = 1) -> Proc:
    port = free_port()
    cmd = [args.fak, "serve", "--model", args.model, "--threads", str(threads), "--host", "127.0.0.1",
           "--port", str(port), "--ctx", str(args.ctx), "--block-size", str(args.block_size)]
    ev = rp = ""
    if events:
        ev, rp = f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}"
        cmd += ["--kv-events", ev, "--kv-events-replay", rp]
    log = open(out / f"{name}.log", "w")
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    r = Proc(name, p, f"http://127.0.0.1:{port}", ev, rp)
    wait_health(r.url, p, name)
    return r


def start_router(args: argparse.Namespace, policy: str, replicas: list[Proc], out: Path, tag: str,
                 model_name: str) -> tuple[Proc, str]:
    port, prom = free_port(), free_port()
    cmd = [args.router, "--host", "127.0.0.1", "--port", str(port), "--policy", policy,
           "--worker-urls", *[r.url for r in replicas], "--prometheus-port", str(prom),
           "--prometheus-host", "127.0.0.1", "--health-check-interval-secs", "1",
           "--health-failure-threshold", "1", "--log-level", "warning"]
    if policy == "kv_aware":
        for r in replicas:
            cmd += ["--kv-event-source", f"{r.url}={r.events}",
                    "--kv-event-replay-source", f"{r.url}={r.replay}"]
        cmd += ["--kv-event-block-size", str(args.block_size), "--kv-event-model", model_name,
                "--kv-aware-session-affinity-ttl-secs", "600"]
    log = open(out / f"{tag}.router.log", "w")
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    r = Proc("router", p, f"http://127.0.0.1:{port}")
    wait_health(r.url, p, "vllm-router", timeout=60)
    return r, f"http://127.0.0.1:{prom}"


# ------------------------------------------------------------ the workload


@dataclass
class Turn:
    ok: bool
    tries: int
    ttft_s: float | None
    prompt: int
    cached: int
    sent_at: float


@dataclass
class Stats:
    turns: list[Turn] = field(default_factory=list)
    creates: list[tuple[int, int]] = field(default_factory=list)  # (tokens, cached)
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def post_stream(base: str, path: str, body: dict, key: str, timeout: float = 600) -> tuple[float | None, dict, str]:
    """POSTs a streamed request; (TTFT, usage, text)."""
    u = urllib.parse.urlsplit(base)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    t0 = time.monotonic()
    try:
        c.request("POST", path, json.dumps(body), {"content-type": "application/json", "x-session-id": key})
        r = c.getresponse()
        if r.status != 200:
            raise BenchError(f"HTTP {r.status}: {r.read()[:300]!r}")
        ttft, usage, text, buf = None, {}, [], b""
        while True:
            chunk = r.read1(65536)
            if not chunk:
                break
            buf += chunk.replace(b"\r\n", b"\n")
            while b"\n\n" in buf:
                ev, buf = buf.split(b"\n\n", 1)
                for line in ev.split(b"\n"):
                    if not line.startswith(b"data:"):
                        continue
                    data = line[5:].strip()
                    if data == b"[DONE]":
                        continue
                    o = json.loads(data)
                    if o.get("usage"):
                        usage = o["usage"]
                    for ch in o.get("choices", []):
                        d = ch.get("delta", {}).get("content")
                        if d:
                            if ttft is None:
                                ttft = time.monotonic() - t0
                            text.append(d)
        return ttft, usage, "".join(text)
    finally:
        c.close()


def post_json(base: str, path: str, body: dict, key: str) -> dict:
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(),
                                 headers={"content-type": "application/json", "x-session-id": key})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.load(r)


def agent(api: str, base: str, shape: Shape, fleet: int, a: int, tpw: float, model: str,
          stats: Stats, turns: range, state: dict, tries: int) -> None:
    # A session lives where the fleet's session was made: every call of the
    # fleet carries the fleet's key. Chat completions carry the agent's.
    key = fleet_key(fleet) if api == "sessions" else session_key(fleet, a)
    system = fleet_prefix(shape, fleet, tpw)
    task = f"You are agent {a} of fleet {fleet}. Read each tool result and reply briefly."
    if "history" not in state:
        state["history"] = [{"role": "system", "content": system}, {"role": "user", "content": task}]
        if api == "sessions":
            # The leader makes the fleet's session (the prefix, computed
            # once); every agent forks it (no compute) and adds its task.
            # A fork claims its parent for a moment (a second fork at the
            # same time gets 409), so a fleet's forks go one at a time.
            root = state["fleet"]
            with root["lock"]:
                if "id" not in root:
                    out = post_json(base, "/v1/sessions", {"messages": state["history"][:1]}, key)
                    root["id"] = out["id"]
                    with stats.lock:
                        stats.creates.append((out.get("tokens", 0), out.get("cached_tokens", 0)))
                fork = post_json(base, f"/v1/sessions/{root['id']}/fork", {}, key)
            state["session"] = fork["id"]
            state["pending"] = [state["history"][1]]
    for t in turns:
        msg = {"role": "user", "content": tool_result(shape, fleet, a, t, tpw)}
        common = {"max_tokens": shape.decode, "temperature": 0, "ignore_eos": True, "stream": True,
                  "stream_options": {"include_usage": True}}
        sent = time.monotonic()
        for k in range(tries):
            try:
                if api == "chat":
                    body = {"model": model, "messages": state["history"] + [msg], **common}
                    ttft, usage, text = post_stream(base, "/v1/chat/completions", body, key)
                else:
                    body = {"messages": state.get("pending", []) + [msg], **common}
                    ttft, usage, text = post_stream(base, f"/v1/sessions/{state['session']}/chat/completions", body, key)
                state.pop("pending", None)
                state["history"] += [msg, {"role": "assistant", "content": text}]
                cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
                with stats.lock:
                    stats.turns.append(Turn(True, k + 1, ttft, usage.get("prompt_tokens", 0), cached, sent))
                break
            except (BenchError, OSError, http.client.HTTPException, json.JSONDecodeError) as e:
                with stats.lock:
                    stats.errors.append(f"{key} turn {t} try {k + 1}: {e}")
        else:
            with stats.lock:
                stats.turns.append(Turn(False, tries, None, 0, 0, sent))
            return


def run_workload(api: str, base: str, shape: Shape, tpw: float, model: str, tries: int,
                 on_progress=None) -> tuple[Stats, float]:
    stats = Stats()
    roots = {f: {"lock": threading.Lock()} for f in range(shape.fleets)}
    states = {(f, a): {"fleet": roots[f]} for f in range(shape.fleets) for a in range(shape.agents)}
    t0 = time.monotonic()

    def fleet(f: int) -> None:
        # The leader's first turn alone, then everyone.
        agent(api, base, shape, f, 0, tpw, model, stats, range(1), states[(f, 0)], tries)
        ths = [threading.Thread(target=agent, args=(api, base, shape, f, a, tpw, model, stats,
                                                    range(1 if a == 0 else 0, shape.turns), states[(f, a)], tries))
               for a in range(shape.agents)]
        for th in ths:
            th.start()
        for th in ths:
            th.join()

    ths = [threading.Thread(target=fleet, args=(f,)) for f in range(shape.fleets)]
    for th in ths:
        th.start()
    if on_progress is not None:
        on_progress(stats, shape.fleets * shape.agents * shape.turns)
    for th in ths:
        th.join()
    return stats, time.monotonic() - t0


def summarize(stats: Stats, wall: float) -> dict[str, Any]:
    ok = [t for t in stats.turns if t.ok]
    ttft = [t.ttft_s for t in ok if t.ttft_s is not None]
    sent = sum(t.prompt for t in ok) + sum(c[0] for c in stats.creates)
    computed = sum(t.prompt - t.cached for t in ok) + sum(c[0] - c[1] for c in stats.creates)
    return {
        "turns_ok": len(ok),
        "turns_lost": sum(1 for t in stats.turns if not t.ok),
        "turns_retried_by_client": sum(1 for t in ok if t.tries > 1),
        "wall_s": round(wall, 3),
        "agent_turns_per_s": round(len(ok) / wall, 3) if wall else None,
        "ttft_ms": {"p50": _ms(percentile(ttft, 0.5)), "p99": _ms(percentile(ttft, 0.99))},
        "prompt_tokens_sent": sent,
        "prompt_tokens_computed": computed,
        "errors": stats.errors[:20],
        "n_errors": len(stats.errors),
    }


def _ms(s: float | None) -> float | None:
    return None if s is None else round(s * 1000, 1)


# ------------------------------------------------------------ runs


def tokens_per_word(base: str) -> float:
    text = words(random.Random("calibrate"), 400)
    out = post_json(base, "/tokenize", {"content": text}, "calibrate")
    return max(0.5, len(out["tokens"]) / 400)


def served(replicas: list[Proc]) -> list[float | None]:
    """Requests each replica finished (None: it does not answer)."""
    out: list[float | None] = []
    for r in replicas:
        try:
            out.append(metric(get(r.url + "/metrics"), "vllm:request_success_total"))
        except (urllib.error.URLError, OSError):
            out.append(None)
    return out


def one_run(args, api: str, policy: str | None, shape: Shape, out: Path, model_name: str,
            kill: bool = False) -> dict[str, Any]:
    tag = f"{api}-{policy or 'single'}{'-kill' if kill else ''}"
    n = 1 if policy is None else args.replicas
    replicas, router = [], None
    try:
        replicas = [start_replica(args, f"{tag}.replica{i}", out, policy == "kv_aware") for i in range(n)]
        base, prom = replicas[0].url, None
        if policy is not None:
            router, prom = start_router(args, policy, replicas, out, tag, model_name)
            base = router.url
        tpw = tokens_per_word(replicas[0].url)
        before = served(replicas)
        killed_at: list[float] = []

        def killer(stats: Stats, total: int) -> None:
            def watch():
                while True:
                    with stats.lock:
                        done = len(stats.turns)
                    if done >= args.kill_at * total:
                        replicas[-1].proc.send_signal(signal.SIGKILL)
                        killed_at.append(time.monotonic())
                        return
                    time.sleep(0.05)
            threading.Thread(target=watch, daemon=True).start()

        print(f"scaleout: {tag} ...", file=sys.stderr, flush=True)
        stats, wall = run_workload(api, base, shape, tpw, model_name, 3 if kill else 1,
                                   killer if kill else None)
        counts = [None if a is None or b is None else a - b for a, b in zip(served(replicas), before)]
        rep = {"api": api, "policy": policy or "single", "replicas": n, **summarize(stats, wall),
               "requests_per_replica": counts, }
        if None not in counts:
            rep["share_per_replica"] = [round(s, 3) for s in shares(counts)]
        if prom is not None:
            try:
                m = get(prom + "/metrics")
                rep["router_retries"] = metric(m, "vllm_router_retries_total")
                rep["router_request_errors"] = metric(m, "vllm_router_request_errors_total")
            except (urllib.error.URLError, OSError):
                pass
        if kill and killed_at:
            after = [t for t in stats.turns if t.sent_at > killed_at[0] + 0.0]
            rep["kill"] = {
                "killed": replicas[-1].name,
                "at_fraction": args.kill_at,
                "turns_sent_after_kill": len(after),
                "turns_sent_after_kill_failed_at_least_once": sum(1 for t in after if t.tries > 1 or not t.ok),
                "turns_sent_after_kill_lost": sum(1 for t in after if not t.ok),
            }
        print(f"scaleout: {tag}: {json.dumps({k: rep[k] for k in ('agent_turns_per_s', 'prompt_tokens_computed', 'requests_per_replica', 'turns_lost')})}",
              file=sys.stderr, flush=True)
        return rep
    finally:
        if router is not None:
            router.stop()
        for r in replicas:
            r.stop()


def overhead_run(args, events: bool, shape: Shape, out: Path, model_name: str, k: int) -> dict[str, Any]:
    """One replica (2 threads), chat completions sent to it directly; with
    `events`, it publishes them and vllm-router (kv_aware) consumes them,
    as in a routed deployment. Without, the same router runs with no
    event source, so both runs share the machine with it alike."""
    tag = f"overhead-{'on' if events else 'off'}-{k}"
    replica = start_replica(args, f"{tag}.replica", out, events, threads=2)
    router = None
    try:
        router, _ = start_router(args, "kv_aware" if events else "round_robin", [replica], out, tag, model_name)
        tpw = tokens_per_word(replica.url)
        stats, wall = run_workload("chat", replica.url, shape, tpw, model_name, 1)
        m = get(replica.url + "/metrics")
        rep = {"events": events, **summarize(stats, wall),
               "kv_events_batches": metric(m, "fak:kv_events_batches_total"),
               "kv_events_dropped": metric(m, "fak:kv_events_dropped_total")}
        print(f"scaleout: {tag}: {rep['agent_turns_per_s']} turns/s, {rep['kv_events_batches']:.0f} batches",
              file=sys.stderr, flush=True)
        return rep
    finally:
        if router is not None:
            router.stop()
        replica.stop()


def overhead(args, shape: Shape, out: Path, model_name: str) -> dict[str, Any]:
    """`--overhead-pairs N`: N alternated (off, on) pairs; the medians and their ratio."""
    runs = []
    for k in range(args.overhead_pairs):
        for events in (False, True):
            runs.append(overhead_run(args, events, shape, out, model_name, k))
    med = {}
    for events in (False, True):
        v = sorted(r["agent_turns_per_s"] for r in runs if r["events"] == events)
        med[events] = v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2
    return {"runs": runs, "median_turns_per_s_off": med[False], "median_turns_per_s_on": med[True],
            "on_vs_off": round(med[True] / med[False], 4) if med[False] else None}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--fak", required=True)
    p.add_argument("--router", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--replicas", type=int, default=2)
    p.add_argument("--apis", default="chat,sessions")
    p.add_argument("--fleets", type=int, default=Shape.fleets)
    p.add_argument("--agents", type=int, default=Shape.agents)
    p.add_argument("--turns", type=int, default=Shape.turns)
    p.add_argument("--decode", type=int, default=Shape.decode)
    p.add_argument("--ctx", type=int, default=4096)
    p.add_argument("--block-size", type=int, default=64)
    p.add_argument("--kill", action="store_true")
    p.add_argument("--kill-at", type=float, default=0.4)
    p.add_argument("--overhead-pairs", type=int, default=0,
                   help="only measure --kv-events' cost: N alternated off/on pairs on one replica")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    shape = Shape(fleets=args.fleets, agents=args.agents, turns=args.turns, decode=args.decode)
    model_name = Path(args.model).stem
    if args.overhead_pairs > 0:
        report = {"schema": SCHEMA, "shape": shape.__dict__, "model": args.model, "block_size": args.block_size,
                  "kv_events_overhead": overhead(args, shape, out, model_name)}
        (out / "kv_events_overhead.json").write_text(json.dumps(report, indent=2) + "\n")
        print(json.dumps(report, indent=2))
        return 0
    runs = []
    for api in args.apis.split(","):
        runs.append(one_run(args, api, None, shape, out, model_name))
        for policy in POLICIES[api]:
            runs.append(one_run(args, api, policy, shape, out, model_name))
    if args.kill:
        runs.append(one_run(args, "chat", "kv_aware", shape, out, model_name, kill=True))
    single = {r["api"]: r["prompt_tokens_computed"] for r in runs if r["policy"] == "single"}
    for r in runs:
        s = single.get(r["api"])
        r["computed_vs_single"] = round(r["prompt_tokens_computed"] / s, 3) if s else None
    report = {"schema": SCHEMA, "shape": shape.__dict__, "model": args.model, "block_size": args.block_size,
              "runs": runs}
    (out / "scaleout.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
