#!/usr/bin/env python3
"""A tool-calling agent workload over HTTP against an OpenAI-compatible
server (``fak serve``, ``llama-server --jinja``), with every answer checked.

    bench/tools_bench.py run --base-url http://127.0.0.1:8080 --engine fak \\
        --tool-choice auto --stream --concurrency 8 --num-requests 40 --out r.json
    bench/tools_bench.py table r1.json r2.json ...     (markdown, stdout)

An *episode* is one agent's job (``bench/tools_workload.py``: five
scenarios with two declared tools each, one user task that asks for one of
them):

1. the call turn: ``POST /v1/chat/completions`` with the system prompt, the
   task, ``tools`` and ``tool_choice`` (``auto`` or ``required``: one run
   each), ``temperature: 0``, ``max_tokens`` (``--max-tokens``, 256);
2. when that answer holds well-formed calls, the final turn: the same
   messages plus the assistant's message with its ``tool_calls``, one
   ``role: tool`` message per call (``tool_call_id``, a canned JSON
   result), ``tool_choice: auto``, ``--final-max-tokens`` (64).

``--stream`` streams both turns (``delta.tool_calls`` reassembled by
``index``, ``stream_options.include_usage``); without it the answers are
whole. ``--concurrency C`` agents run at once (closed loop) until
``--num-requests`` episodes are done, after ``--warmup`` untimed ones.

Each call turn is classified (:func:`classify`):

* ``well_formed``: ``tool_calls`` present and every call names a declared
  tool and has arguments that parse as a JSON object valid against that
  tool's ``parameters`` schema;
* ``unknown_name``, ``bad_json``, ``schema_violation``: the first call
  that is not (in this order of checks);
* ``truncated``: no ``tool_calls`` and ``finish_reason: "length"``;
* ``call_in_content``: no ``tool_calls`` but the text holds a call
  (``<tool_call>``, or a JSON object with ``name`` and
  ``arguments``/``parameters``): the server did not read it;
* ``no_call``: text only; ``error``: the request failed (HTTP status,
  broken stream).

The final turn is ``answer`` (text, no calls), ``call_again``, ``empty`` or
``error``. The report (``fak-bench-tools/1``, JSON): the counts of each
class, the well-formed share of call turns and the share that called the
task's expected tool, requests/s (HTTP requests, both turns) and
episodes/s over the wall time (first request sent -> last answer read),
output tokens (``usage.completion_tokens``) per second, latency p50/p95 of
call turns, final turns and episodes, up to three examples of each failure,
and every episode's outcome.

Only the standard library (the HTTP client is ``bench/fleet_http.py``'s);
tested by ``bench/test_tools_bench.py``.
"""

from __future__ import annotations

import argparse
import json
import queue
import re
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent))

import tools_workload as tw  # noqa: E402
from fleet_http import BenchError, Client, sse_events, summary_ms  # noqa: E402

SCHEMA = "fak-bench-tools/1"
CALL_CLASSES = (
    "well_formed",
    "unknown_name",
    "bad_json",
    "schema_violation",
    "truncated",
    "call_in_content",
    "no_call",
    "error",
)
FINAL_CLASSES = ("answer", "call_again", "empty", "error")
EXAMPLES_PER_CLASS = 3


# ------------------------------------------------------------ answers


@dataclass
class Call:
    """One tool call as the server returned it."""

    name: str
    arguments: str
    id: str = ""


@dataclass
class Answer:
    """One chat answer, whole or reassembled from a stream."""

    content: str = ""
    calls: list[Call] = field(default_factory=list)
    finish_reason: str | None = None
    completion_tokens: int | None = None
    error: str | None = None


def answer_from_json(obj: dict[str, Any]) -> Answer:
    """A whole (non-streamed) chat completion."""
    if "error" in obj:
        return Answer(error=json.dumps(obj["error"])[:300])
    choices = obj.get("choices") or []
    if not choices:
        return Answer(error="no choices in the answer")
    ch = choices[0]
    msg = ch.get("message") or {}
    calls = []
    for c in msg.get("tool_calls") or []:
        fn = c.get("function") or {}
        calls.append(Call(str(fn.get("name") or ""), _args_text(fn.get("arguments")), str(c.get("id") or "")))
    usage = obj.get("usage") or {}
    return Answer(
        content=msg.get("content") or "",
        calls=calls,
        finish_reason=ch.get("finish_reason"),
        completion_tokens=usage.get("completion_tokens"),
    )


def _args_text(a: Any) -> str:
    """Arguments as text: OpenAI sends a string; an object is re-encoded."""
    if a is None:
        return ""
    return a if isinstance(a, str) else json.dumps(a)


def answer_from_events(events: Iterable[str]) -> Answer:
    """A streamed chat completion from its SSE ``data`` payloads: content
    deltas concatenated, ``delta.tool_calls`` merged by ``index`` (id and
    name from the first fragment that has them, arguments concatenated),
    the last ``finish_reason`` and the usage chunk's ``completion_tokens``."""
    ans = Answer()
    parts: list[str] = []
    by_index: dict[int, Call] = {}
    args: dict[int, list[str]] = {}
    for data in events:
        if data == "[DONE]":
            break
        try:
            obj = json.loads(data)
        except json.JSONDecodeError:
            ans.error = f"bad event {data[:80]!r}"
            break
        if "error" in obj:
            ans.error = json.dumps(obj["error"])[:300]
            break
        usage = obj.get("usage")
        if isinstance(usage, dict) and usage.get("completion_tokens") is not None:
            ans.completion_tokens = usage["completion_tokens"]
        for ch in obj.get("choices") or []:
            d = ch.get("delta") or {}
            if d.get("content"):
                parts.append(d["content"])
            for tc in d.get("tool_calls") or []:
                i = int(tc.get("index", 0))
                c = by_index.setdefault(i, Call("", ""))
                args.setdefault(i, [])
                if tc.get("id") and not c.id:
                    c.id = tc["id"]
                fn = tc.get("function") or {}
                if fn.get("name") and not c.name:
                    c.name = fn["name"]
                if fn.get("arguments"):
                    args[i].append(_args_text(fn["arguments"]))
            if ch.get("finish_reason"):
                ans.finish_reason = ch["finish_reason"]
    ans.content = "".join(parts)
    for i in sorted(by_index):
        by_index[i].arguments = "".join(args[i])
        ans.calls.append(by_index[i])
    return ans


# ------------------------------------------------------------ classifier


@dataclass
class Verdict:
    """The class of one call turn, and why."""

    cls: str
    reason: str = ""
    tools_called: list[str] = field(default_factory=list)


_CALL_IN_TEXT = re.compile(r"<tool_call>|\"name\"\s*:\s*\"[^\"]+\"\s*,\s*\"(arguments|parameters)\"")


def classify(ans: Answer, tools: list[dict[str, Any]]) -> Verdict:
    """The class of a call-turn answer against the declared ``tools``."""
    if ans.error is not None:
        return Verdict("error", ans.error)
    schemas = {t["function"]["name"]: t["function"].get("parameters", {}) for t in tools}
    if ans.calls:
        names = [c.name for c in ans.calls]
        for c in ans.calls:
            if c.name not in schemas:
                return Verdict("unknown_name", f"tool {c.name!r} is not declared", names)
            try:
                args = json.loads(c.arguments)
            except json.JSONDecodeError as e:
                return Verdict("bad_json", f"{c.name}: {e.msg} in {c.arguments[:120]!r}", names)
            if not isinstance(args, dict):
                return Verdict("bad_json", f"{c.name}: arguments are a {type(args).__name__}, not an object", names)
            errs = tw.validate(args, schemas[c.name])
            if errs:
                return Verdict("schema_violation", f"{c.name}: " + "; ".join(errs[:3]), names)
        return Verdict("well_formed", "", names)
    if ans.finish_reason == "length":
        return Verdict("truncated", f"max_tokens reached with no call: {ans.content[:120]!r}")
    if _CALL_IN_TEXT.search(ans.content):
        return Verdict("call_in_content", ans.content[:200])
    return Verdict("no_call", ans.content[:120])


def classify_final(ans: Answer) -> str:
    """The class of a final-turn answer."""
    if ans.error is not None:
        return "error"
    if ans.calls:
        return "call_again"
    return "answer" if ans.content.strip() else "empty"


# ------------------------------------------------------------ requests


@dataclass
class Settings:
    """What every request of a run shares."""

    model: str
    tool_choice: str
    stream: bool
    max_tokens: int
    final_max_tokens: int


def call_body(s: Settings, task: tw.Task) -> dict[str, Any]:
    """The call turn's request body."""
    return _body(s, _first_messages(task), task, s.tool_choice, s.max_tokens)


def _first_messages(task: tw.Task) -> list[dict[str, Any]]:
    return [{"role": "system", "content": tw.SYSTEM}, {"role": "user", "content": task.user}]


def _body(s: Settings, messages: list[dict[str, Any]], task: tw.Task, choice: str, max_tokens: int) -> dict[str, Any]:
    b: dict[str, Any] = {
        "model": s.model,
        "messages": messages,
        "tools": task.tools,
        "tool_choice": choice,
        "temperature": 0,
        "max_tokens": max_tokens,
    }
    if s.stream:
        b["stream"] = True
        b["stream_options"] = {"include_usage": True}
    return b


def final_body(s: Settings, task: tw.Task, ans: Answer) -> dict[str, Any]:
    """The final turn's body: the call turn's messages, the assistant's
    calls (an id made up as ``call_<k>`` when the server gave none) and one
    tool result per call, under ``tool_choice: auto``."""
    calls = []
    results = []
    for k, c in enumerate(ans.calls):
        cid = c.id or f"call_{k}"
        calls.append({"id": cid, "type": "function", "function": {"name": c.name, "arguments": c.arguments}})
        results.append({"role": "tool", "tool_call_id": cid, "content": tw.tool_result(c.name)})
    msgs = _first_messages(task) + [{"role": "assistant", "content": ans.content or None, "tool_calls": calls}]
    return _body(s, msgs + results, task, "auto", s.final_max_tokens)


def send(cl: Client, s: Settings, body: dict[str, Any]) -> Answer:
    """One chat completion; a failure becomes an ``Answer`` with ``error``."""
    try:
        if s.stream:
            return answer_from_events(sse_events(cl.stream("/v1/chat/completions", body)))
        return answer_from_json(cl.post("/v1/chat/completions", body))
    except (BenchError, OSError, ValueError) as e:
        # The connection may be mid-stream: the next request opens a new one.
        cl.reopen()
        cl.last = None
        return Answer(error=str(e)[:300])


# ------------------------------------------------------------ episodes


@dataclass
class Episode:
    """One agent's job as run and judged."""

    index: int
    scenario: str
    expected_tool: str
    call_class: str
    reason: str
    tools_called: list[str]
    call_s: float
    call_tokens: int | None
    call_content: str
    call_arguments: list[str]
    final_class: str | None = None
    final_s: float | None = None
    final_tokens: int | None = None
    final_content: str = ""
    episode_s: float = 0.0


def run_episode(
    cl: Client, s: Settings, task: tw.Task, index: int, clock: Callable[[], float] = time.perf_counter
) -> Episode:
    t0 = clock()
    ans = send(cl, s, call_body(s, task))
    t1 = clock()
    v = classify(ans, task.tools)
    ep = Episode(
        index, task.scenario, task.expected_tool, v.cls, v.reason, v.tools_called, t1 - t0,
        ans.completion_tokens, ans.content[:300], [c.arguments[:300] for c in ans.calls],
    )
    if v.cls == "well_formed":
        fin = send(cl, s, final_body(s, task, ans))
        t2 = clock()
        ep.final_class, ep.final_s, ep.final_tokens = classify_final(fin), t2 - t1, fin.completion_tokens
        ep.final_content = (fin.content or (fin.error or ""))[:200]
    ep.episode_s = clock() - t0
    return ep


# ------------------------------------------------------------ report


def report(meta: dict[str, Any], episodes: list[Episode], wall_s: float) -> dict[str, Any]:
    """The run's JSON report."""
    n = len(episodes)
    calls = {c: 0 for c in CALL_CLASSES}
    finals = {c: 0 for c in FINAL_CLASSES}
    examples: dict[str, list[dict[str, Any]]] = {}
    expected = 0
    for e in episodes:
        calls[e.call_class] += 1
        if e.final_class is not None:
            finals[e.final_class] += 1
        if e.call_class == "well_formed" and e.tools_called == [e.expected_tool]:
            expected += 1
        if e.call_class != "well_formed":
            ex = examples.setdefault(e.call_class, [])
            if len(ex) < EXAMPLES_PER_CLASS:
                ex.append({"index": e.index, "scenario": e.scenario, "reason": e.reason,
                           "arguments": e.call_arguments})
    requests = n + sum(1 for e in episodes if e.final_class is not None)
    toks = [e.call_tokens for e in episodes] + [e.final_tokens for e in episodes if e.final_class is not None]
    out_tokens = sum(t for t in toks if t is not None)
    return {
        "schema": SCHEMA,
        **meta,
        "episodes": n,
        "wall_s": wall_s,
        "calls": {
            "classes": calls,
            "well_formed_share": calls["well_formed"] / n if n else 0.0,
            "expected_tool_share": expected / n if n else 0.0,
        },
        "final": finals,
        "requests": requests,
        "requests_per_s": requests / wall_s if wall_s > 0 else 0.0,
        "episodes_per_s": n / wall_s if wall_s > 0 else 0.0,
        "output_tokens": out_tokens,
        "usage_missing": sum(1 for t in toks if t is None),
        "output_tok_per_s": out_tokens / wall_s if wall_s > 0 else 0.0,
        "latency_ms": {
            "call_turn": summary_ms([e.call_s for e in episodes]),
            "final_turn": summary_ms([e.final_s for e in episodes if e.final_s is not None]),
            "episode": summary_ms([e.episode_s for e in episodes]),
        },
        "examples": examples,
        "per_episode": [asdict(e) for e in episodes],
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    s = Settings(args.model, args.tool_choice, args.stream, args.max_tokens, args.final_max_tokens)
    mk = lambda: Client(args.base_url, None, args.timeout)  # noqa: E731
    cl = mk()
    for w in range(args.warmup):
        # Untimed, with tasks of their own (indices past the timed ones).
        run_episode(cl, s, tw.make_task(args.seed, args.num_requests + w), -1 - w)
    todo: queue.Queue[int] = queue.Queue()
    for i in range(args.num_requests):
        todo.put(i)
    done: list[Episode] = []
    lock = threading.Lock()

    def worker() -> None:
        c = mk()
        while True:
            try:
                i = todo.get_nowait()
            except queue.Empty:
                c.conn.close()
                return
            ep = run_episode(c, s, tw.make_task(args.seed, i), i)
            with lock:
                done.append(ep)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(args.concurrency)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.perf_counter() - t0
    cl.conn.close()
    done.sort(key=lambda e: e.index)
    meta = {
        "engine": args.engine,
        "label": args.label or args.engine,
        "url": args.base_url,
        "model": args.model,
        "tool_choice": args.tool_choice,
        "stream": args.stream,
        "concurrency": args.concurrency,
        "seed": args.seed,
        "max_tokens": args.max_tokens,
        "final_max_tokens": args.final_max_tokens,
        "warmup": args.warmup,
        "round": args.round,
        "argv": sys.argv,
    }
    return report(meta, done, wall)


# ------------------------------------------------------------ table


def _key(r: dict[str, Any]) -> tuple[Any, ...]:
    return (r["concurrency"], r["tool_choice"], r["stream"], r["engine"])


def table(reports: list[dict[str, Any]]) -> str:
    """A markdown table, one row per (concurrency, tool_choice, stream,
    engine): rounds pooled for the classes (counts summed), req/s and tok/s
    the mean over rounds (min-max in brackets when more than one), and each
    engine's req/s and tok/s over llama-server's in the same setting."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in reports:
        groups.setdefault(_key(r), []).append(r)
    head = ("| C | tool_choice | stream | engine | rounds | episodes | well-formed | expected tool | "
            "failures | final answers | req/s | out tok/s | call p50/p95 ms | req/s ratio | tok/s ratio |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]

    def mean(rs: list[dict[str, Any]], k: str) -> float:
        return sum(r[k] for r in rs) / len(rs)

    for key in sorted(groups):
        rs = groups[key]
        c, choice, stream, engine = key
        n = sum(r["episodes"] for r in rs)
        cls = {k: sum(r["calls"]["classes"][k] for r in rs) for k in CALL_CLASSES}
        wf = cls["well_formed"]
        exp = sum(round(r["calls"]["expected_tool_share"] * r["episodes"]) for r in rs)
        fails = ", ".join(f"{k} {v}" for k, v in cls.items() if v and k != "well_formed") or "none"
        fin = {k: sum(r["final"][k] for r in rs) for k in FINAL_CLASSES}
        fin_s = f"{fin['answer']}/{sum(fin.values())}"

        def spread(k: str, rs: list[dict[str, Any]] = rs) -> str:
            m = mean(rs, k)
            if len(rs) == 1:
                return f"{m:.2f}"
            return f"{m:.2f} ({min(r[k] for r in rs):.2f}-{max(r[k] for r in rs):.2f})"

        p50 = sum(r["latency_ms"]["call_turn"].get("p50", 0.0) for r in rs) / len(rs)
        p95 = sum(r["latency_ms"]["call_turn"].get("p95", 0.0) for r in rs) / len(rs)
        peer = groups.get((c, choice, stream, "llama-server"))
        if peer and engine != "llama-server":
            ratio_r = f"{mean(rs, 'requests_per_s') / mean(peer, 'requests_per_s'):.2f}x"
            ratio_t = f"{mean(rs, 'output_tok_per_s') / mean(peer, 'output_tok_per_s'):.2f}x"
        else:
            ratio_r = ratio_t = "-"
        lines.append(
            f"| {c} | {choice} | {'yes' if stream else 'no'} | {engine} | {len(rs)} | {n} | "
            f"{wf}/{n} ({wf / n:.0%}) | {exp}/{n} | {fails} | {fin_s} | {spread('requests_per_s')} | "
            f"{spread('output_tok_per_s')} | {p50:.0f}/{p95:.0f} | {ratio_r} | {ratio_t} |"
        )
    return "\n".join(lines)


# ------------------------------------------------------------ CLI


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run the workload against one server")
    r.add_argument("--base-url", required=True, help="http://host:port")
    r.add_argument("--engine", required=True, help="fak, llama-server, ... (recorded; llama-server rows are the ratios' base)")
    r.add_argument("--label", default=None)
    r.add_argument("--model", default="qwen2.5-coder-0.5b-instruct-q4_k_m", help="the model name sent")
    r.add_argument("--tool-choice", choices=("auto", "required"), default="auto")
    r.add_argument("--stream", action="store_true", help="stream both turns")
    r.add_argument("--concurrency", type=int, default=1)
    r.add_argument("--num-requests", type=int, default=40, help="episodes (each a call turn and maybe a final turn)")
    r.add_argument("--warmup", type=int, default=1)
    r.add_argument("--max-tokens", type=int, default=256)
    r.add_argument("--final-max-tokens", type=int, default=64)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--round", type=int, default=0, help="recorded in the report (A B A B rounds)")
    r.add_argument("--timeout", type=float, default=600.0)
    r.add_argument("--out", default=None, help="JSON report here (default stdout)")
    t = sub.add_parser("table", help="markdown table of reports")
    t.add_argument("reports", nargs="+")
    a = ap.parse_args(argv)
    if a.cmd == "run":
        for k in ("concurrency", "num_requests", "max_tokens", "final_max_tokens"):
            if getattr(a, k) < 1:
                ap.error(f"--{k.replace('_', '-')} must be at least 1")
        if a.warmup < 0:
            ap.error("--warmup must be at least 0")
    return a


def summary_line(rep: dict[str, Any]) -> str:
    c = rep["calls"]
    return (f"{rep['label']} choice={rep['tool_choice']} stream={rep['stream']} C={rep['concurrency']}: "
            f"well-formed {c['classes']['well_formed']}/{rep['episodes']}, "
            f"{rep['requests_per_s']:.2f} req/s, {rep['output_tok_per_s']:.1f} tok/s, "
            f"classes {json.dumps({k: v for k, v in c['classes'].items() if v})}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.cmd == "table":
        try:
            reps = [json.loads(Path(p).read_text()) for p in args.reports]
        except (OSError, json.JSONDecodeError) as e:
            print(f"tools_bench: error: {e}", file=sys.stderr)
            return 1
        print(table(reps))
        return 0
    try:
        rep = run(args)
    except (BenchError, OSError) as e:
        print(f"tools_bench: error: {e}", file=sys.stderr)
        return 1
    text = json.dumps(rep, indent=2)
    if args.out:
        Path(args.out).write_text(text + "\n")
    else:
        print(text)
    print(summary_line(rep), file=sys.stderr)
    return 1 if rep["calls"]["classes"]["error"] else 0


if __name__ == "__main__":
    sys.exit(main())
