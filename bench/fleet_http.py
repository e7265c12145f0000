#!/usr/bin/env python3
"""The ``fak bench fleet`` workload over HTTP: A agents as A concurrent clients.

Same workload and token stream as ``fak bench fleet`` and
``bench/peers/llamacpp.py fleet`` (``bench/peers/workloads.py`` is the
reference): a shared P-token prefix, then T turns per agent; each turn an
agent sends R result ids (``stream[P + (t*A + a)*R + 1 ..]``, turn-major)
and decodes D tokens greedily (``ignore_eos``). Agents never wait for each
other: each client runs its T turns back to back.

fak (``--engine fak``), through sessions::

    POST /v1/sessions {"prompt": prefix ids}          the prefix, computed once
    POST /v1/sessions/{root}/fork   x A               copy-on-write, no compute
    POST /v1/sessions/{agent}/completions             per turn: {"prompt": R ids,
         "max_tokens": D, "temperature": 0, "ignore_eos": true, "stream": true}
    the last generated token of a turn is fed at the start of the next

llama-server (``--engine llama-server``; start it with ``--parallel A`` and
the same context per slot), one slot per agent::

    POST /completion {"prompt": history + R ids, "id_slot": a, "cache_prompt": true,
         "n_predict": D, "temperature": 0, "ignore_eos": true, "stream": true,
         "return_tokens": true}
    history = prefix + every earlier turn's R ids and D generated ids; the slot's
    cache holds the history, so a turn computes its new tokens only (the prefix
    is computed once per slot: llama-server cannot share it between slots)

Measured: wall clock from the first request to the last turn's end
(prefix and forks included), agent-turns/s = A*T / wall, TTFT per turn
(request sent -> first streamed chunk carrying text or a token) and turn
time, and the SHA-256 of every generated id as ``fak bench fleet`` and
the llama.cpp peer compute it (fak's ids come from ``GET
/v1/sessions/{id}?include=tokens`` after the clock stops; llama-server's
from ``return_tokens``). The report is JSON (``fak-bench-fleet-http/1``)
on stdout or ``--out``.

llama-server 0.3.30 parses every result's text as a chat message, also on
``/completion``, and fails the *last* event of a turn whose output ends
inside a UTF-8 sequence with HTTP 500 ("The model produced output that
does not match the expected Content-only format"), after the tokens
before that sequence were streamed (it holds back the partial events of
incomplete UTF-8) and the slot's cache was updated. Such a turn counts as
done with the ids that arrived; the agent's history goes on without the
held-back ids, so its next turn recomputes them (a few tokens), the run's
``generated_sha256`` is null, and ``turns_final_error`` / ``final_error``
in the report say how often and why. Every other error fails the run.

    python3 bench/fleet_http.py --engine fak --url http://127.0.0.1:8080 \\
        --n-vocab 49152 --prefix 1024 --turns 10 --agents 8 --decode 32 --result 64

Only the standard library; the pure parts are tested by
``bench/test_fleet_http.py``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import sys
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))

import workloads as wl  # noqa: E402

SCHEMA = "fak-bench-fleet-http/1"
ENGINES = ("fak", "llama-server")


class BenchError(Exception):
    """A request failed or a server answered something unexpected."""


# ------------------------------------------------------------ pure parts


def turn_ids(shape: wl.FleetShape, ids: list[int], turn: int, agent: int) -> list[int]:
    """The R result ids agent ``agent`` sends at ``turn``."""
    return shape.result_ids(ids, turn, agent)


def fak_turn_body(shape: wl.FleetShape, ids: list[int], turn: int, agent: int) -> dict[str, Any]:
    """Body of one fak session turn (``/v1/sessions/{id}/completions``)."""
    return {
        "prompt": turn_ids(shape, ids, turn, agent),
        "max_tokens": shape.decode,
        "temperature": 0,
        "ignore_eos": True,
        "stream": True,
        # The last event then carries usage: prompt_tokens (the session's
        # tokens plus the new ones) and cached_tokens (those already in the
        # session), so the turn's computed prompt tokens are the difference.
        "stream_options": {"include_usage": True},
    }


def llama_turn_body(
    shape: wl.FleetShape, ids: list[int], history: list[int], turn: int, agent: int
) -> dict[str, Any]:
    """Body of one llama-server turn: the agent's whole history plus its new ids."""
    return {
        "prompt": history + turn_ids(shape, ids, turn, agent),
        "id_slot": agent,
        "cache_prompt": True,
        "n_predict": shape.decode,
        "temperature": 0,
        "ignore_eos": True,
        "stream": True,
        "return_tokens": True,
    }


def fak_generated(shape: wl.FleetShape, tokens: list[int]) -> list[list[int]]:
    """An agent's generated ids per turn, from its session's token ids
    (``prefix, then per turn R result ids and D generated ids``; the last
    generated id, not fed yet, is the session's last token)."""
    want = shape.prefix + shape.turns * (shape.result + shape.decode)
    if len(tokens) != want:
        raise BenchError(f"the session holds {len(tokens)} tokens, expected {want}")
    out = []
    for t in range(shape.turns):
        o = shape.prefix + t * (shape.result + shape.decode) + shape.result
        out.append(tokens[o : o + shape.decode])
    return out


def sse_events(chunks: Iterator[bytes]) -> Iterator[str]:
    """The ``data:`` payloads of a server-sent-event byte stream."""
    buf = b""
    for c in chunks:
        buf += c.replace(b"\r\n", b"\n")
        while b"\n\n" in buf:
            ev, buf = buf.split(b"\n\n", 1)
            data = [ln[5:].lstrip() for ln in ev.split(b"\n") if ln.startswith(b"data:")]
            if data:
                yield b"\n".join(data).decode()
    tail = buf.strip()
    if tail.startswith(b"data:"):
        yield tail[5:].lstrip().decode()


@dataclass
class Chunk:
    """What one streamed event carried."""

    text: str = ""
    tokens: list[int] = field(default_factory=list)
    done: bool = False
    error: str | None = None
    # Prompt tokens of the turn as the server counted them: all of them, and
    # those it computed (not found in its cache). Only the event that
    # reports them sets them: fak's usage event, llama-server's last event.
    prompt_tokens: int | None = None
    prompt_computed: int | None = None


def parse_chunk(engine: str, data: str) -> Chunk:
    """One event of either server's stream."""
    if data == "[DONE]":
        return Chunk(done=True)
    try:
        obj = json.loads(data)
    except json.JSONDecodeError as e:
        raise BenchError(f"bad event {data[:80]!r}: {e}") from e
    if "error" in obj:
        return Chunk(error=json.dumps(obj["error"]), done=True)
    if engine == "fak":
        choices = obj.get("choices") or []
        text = "".join(c.get("text") or "" for c in choices)
        done = any(c.get("finish_reason") for c in choices)
        c = Chunk(text=text, done=done)
        usage = obj.get("usage")
        if isinstance(usage, dict) and isinstance(usage.get("prompt_tokens"), int):
            cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
            c.prompt_tokens = usage["prompt_tokens"]
            c.prompt_computed = usage["prompt_tokens"] - cached
        return c
    toks = obj.get("tokens") or []
    c = Chunk(text=obj.get("content") or "", tokens=list(toks), done=bool(obj.get("stop")))
    # llama-server's last event: timings.prompt_n = prompt tokens processed,
    # timings.cache_n = prompt tokens reused from the slot's cache.
    timings = obj.get("timings")
    if isinstance(timings, dict) and isinstance(timings.get("prompt_n"), int):
        c.prompt_computed = timings["prompt_n"]
        c.prompt_tokens = timings["prompt_n"] + (timings.get("cache_n") or 0)
    return c


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); 0.0 for no values."""
    v = sorted(values)
    if not v:
        return 0.0
    rank = min(max(math.ceil(q / 100.0 * len(v)), 1), len(v))
    return v[rank - 1]


def summary(values: list[float]) -> dict[str, float]:
    """n / min / p50 / p95 / max / mean of ``values``."""
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "min": min(values),
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "max": max(values),
        "mean": sum(values) / len(values),
    }


def summary_ms(values_s: list[float]) -> dict[str, float]:
    """:func:`summary` of seconds, in milliseconds."""
    return summary([x * 1e3 for x in values_s])


@dataclass
class Turn:
    """One agent turn as measured."""

    agent: int
    turn: int
    ttft_s: float
    turn_s: float
    generated: list[int]
    # The server's count of the turn's prompt tokens, all and computed
    # (None when it reported none).
    prompt_tokens: int | None = None
    prompt_computed: int | None = None
    # The error of the turn's last event (llama-server, see the module docs).
    final_error: str | None = None


def prompt_summary(turns: list[Turn]) -> dict[str, Any] | None:
    """Prompt tokens the server reported, summed and per turn, over the
    turns that reported them (None when none did)."""
    counted = [t for t in turns if t.prompt_computed is not None and t.prompt_tokens is not None]
    if not counted:
        return None
    computed = [float(t.prompt_computed or 0) for t in counted]
    return {
        "turns_counted": len(counted),
        "total_sent": sum(t.prompt_tokens or 0 for t in counted),
        "total_computed": int(sum(computed)),
        "computed_per_turn": summary(computed),
    }


def report(
    engine: str,
    url: str,
    shape: wl.FleetShape,
    n_vocab: int,
    turns: list[Turn],
    wall_s: float,
    prefix_s: float,
) -> dict[str, Any]:
    """The run's JSON report; a generated-ids hash when the server gave ids."""
    by_agent: list[list[list[int]]] = [[[] for _ in range(shape.turns)] for _ in range(shape.agents)]
    for t in turns:
        by_agent[t.agent][t.turn] = t.generated
    have_ids = all(len(g) == shape.decode for per in by_agent for g in per)
    done = len(turns)
    return {
        "schema": SCHEMA,
        "engine": engine,
        "url": url,
        "workload": shape.as_dict(),
        "n_vocab": n_vocab,
        "token_stream": wl.FLEET_TOKEN_STREAM,
        "turns_done": done,
        "wall_s": wall_s,
        "prefix_s": prefix_s,
        "agent_turns_per_s": done / wall_s if wall_s > 0 else 0.0,
        "ttft_ms": summary_ms([t.ttft_s for t in turns]),
        "turn_ms": summary_ms([t.turn_s for t in turns]),
        # Prompt tokens per turn as each server counted them: the whole
        # prompt (fak: the session so far plus the new ids; llama-server:
        # the history it was sent) and the part it really computed.
        "prompt_tokens": prompt_summary(turns),
        "generated_sha256": wl.generated_sha256(by_agent) if have_ids else None,
        # Turns whose last event failed after their streamed ids
        # (llama-server, see the module docs), and the first message.
        "turns_final_error": sum(1 for t in turns if t.final_error),
        "final_error": next((t.final_error for t in turns if t.final_error), None),
    }


# -------------------------------------------------------------- HTTP side


class Client:
    """One keep-alive HTTP/1.1 connection to the server."""

    def __init__(self, url: str, api_key: str | None, timeout: float) -> None:
        u = urllib.parse.urlsplit(url)
        if u.scheme != "http" or not u.hostname:
            raise BenchError(f"--url must be http://host:port, got {url!r}")
        self.host, self.port, self.timeout = u.hostname, u.port or 80, timeout
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        self.last: http.client.HTTPResponse | None = None
        self.base = u.path.rstrip("/")
        self.headers = {"Content-Type": "application/json"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"

    def send(self, method: str, path: str, body: str | None) -> http.client.HTTPResponse:
        """Sends one request, first reopening the connection when the last
        response asked to close it (llama-server closes after a stream) or
        was left unread (a stream the caller stopped reading)."""
        last = self.last
        if last is not None and (last.will_close or not last.isclosed()):
            self.reopen()
        try:
            self.conn.request(method, self.base + path, body, self.headers)
            self.last = self.conn.getresponse()
        except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
            # A kept-alive connection the server closed after its last reply
            # without saying so: nothing of this request was answered, so
            # send it once more on a new connection (as urllib3 does).
            if last is None:
                raise
            self.reopen()
            self.conn.request(method, self.base + path, body, self.headers)
            self.last = self.conn.getresponse()
        return self.last

    def reopen(self) -> None:
        self.conn.close()
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        r = self.send("POST", path, json.dumps(body))
        raw = r.read()
        if r.status != 200:
            raise BenchError(f"POST {path}: HTTP {r.status}: {raw[:200]!r}")
        return json.loads(raw)

    def get(self, path: str) -> dict[str, Any]:
        r = self.send("GET", path, None)
        raw = r.read()
        if r.status != 200:
            raise BenchError(f"GET {path}: HTTP {r.status}: {raw[:200]!r}")
        return json.loads(raw)

    def stream(self, path: str, body: dict[str, Any]) -> Iterator[bytes]:
        r = self.send("POST", path, json.dumps(body))
        if r.status != 200:
            raise BenchError(f"POST {path}: HTTP {r.status}: {r.read()[:200]!r}")
        while True:
            piece = r.read1(65536)
            if not piece:
                return
            yield piece


@dataclass
class TurnRead:
    """What reading one streamed turn gave."""

    ttft_s: float
    generated: list[int]
    prompt_tokens: int | None = None
    prompt_computed: int | None = None
    # The error of a failed last event that the turn survived.
    final_error: str | None = None


# llama-server's message for a result text its chat parser refuses (see the
# module docs): the only error a turn survives.
LLAMA_FINAL_PARSE_ERROR = "does not match the expected"


def run_turn(engine: str, chunks: Iterator[bytes], t_sent: float, clock: Callable[[], float]) -> TurnRead:
    """Reads one streamed turn: TTFT, the generated ids (if given) and the
    server's prompt-token counts (if reported). An error event fails the
    turn, except llama-server's chat-parse error of a last event, which
    ends it with the ids streamed so far and the error in `final_error`."""
    ttft = None
    gen: list[int] = []
    counts: tuple[int | None, int | None] = (None, None)
    for data in sse_events(chunks):
        c = parse_chunk(engine, data)
        if c.error:
            if engine == "llama-server" and LLAMA_FINAL_PARSE_ERROR in c.error:
                if ttft is None:
                    ttft = clock() - t_sent
                return TurnRead(ttft, gen, counts[0], counts[1], c.error)
            raise BenchError(f"the server failed the turn: {c.error}")
        if ttft is None and (c.text or c.tokens):
            ttft = clock() - t_sent
        gen.extend(c.tokens)
        if c.prompt_computed is not None:
            counts = (c.prompt_tokens, c.prompt_computed)
        if c.done and engine == "llama-server":
            break
    if ttft is None:
        ttft = clock() - t_sent
    return TurnRead(ttft, gen, counts[0], counts[1])


def agent_loop(
    engine: str, cl: Client, shape: wl.FleetShape, ids: list[int], agent: int, session: str | None, out: list[Turn]
) -> None:
    history = list(shape.prefix_ids(ids))
    for t in range(shape.turns):
        t0 = time.perf_counter()
        if engine == "fak":
            chunks = cl.stream(f"/v1/sessions/{session}/completions", fak_turn_body(shape, ids, t, agent))
        else:
            chunks = cl.stream("/completion", llama_turn_body(shape, ids, history, t, agent))
        r = run_turn(engine, chunks, t0, time.perf_counter)
        turn_s = time.perf_counter() - t0
        out.append(
            Turn(agent, t, r.ttft_s, turn_s, r.generated, r.prompt_tokens, r.prompt_computed, r.final_error)
        )
        history += turn_ids(shape, ids, t, agent) + r.generated


def run(args: argparse.Namespace) -> dict[str, Any]:
    shape = wl.FleetShape(args.prefix, args.turns, args.agents, args.decode, args.result)
    shape.check()
    ids = wl.lcg_ids(args.n_vocab, shape.stream_len())
    mk = lambda: Client(args.url, args.api_key, args.timeout)  # noqa: E731
    t_start = time.perf_counter()
    sessions: list[str | None] = [None] * shape.agents
    prefix_s = 0.0
    if args.engine == "fak":
        cl = mk()
        root = cl.post("/v1/sessions", {"prompt": shape.prefix_ids(ids)})["id"]
        prefix_s = time.perf_counter() - t_start
        sessions = [cl.post(f"/v1/sessions/{root}/fork", {})["id"] for _ in range(shape.agents)]
    results: list[list[Turn]] = [[] for _ in range(shape.agents)]
    errors: list[BaseException] = []

    def worker(a: int) -> None:
        try:
            agent_loop(args.engine, mk(), shape, ids, a, sessions[a], results[a])
        except BaseException as e:  # noqa: BLE001 (reported after the join)
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(a,)) for a in range(shape.agents)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall_s = time.perf_counter() - t_start
    if errors:
        raise BenchError(f"{len(errors)} agent(s) failed; first: {errors[0]}")
    turns = [t for per in results for t in per]
    if args.engine == "fak":
        # The generated ids, from the sessions (after the clock stopped).
        cl = mk()
        for a, sid in enumerate(sessions):
            info = cl.get(f"/v1/sessions/{sid}?include=tokens")
            for t, g in enumerate(fak_generated(shape, info["token_ids"])):
                for turn in results[a]:
                    if turn.turn == t:
                        turn.generated = g
    return report(args.engine, args.url, shape, args.n_vocab, turns, wall_s, prefix_s)


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engine", choices=ENGINES, required=True)
    ap.add_argument("--url", required=True, help="http://host:port of the running server")
    ap.add_argument("--api-key", default=None)
    ap.add_argument("--n-vocab", type=int, required=True, help="the model's vocabulary (49152: SmolLM2)")
    ap.add_argument("--profile", choices=sorted(wl.PROFILES), default=None,
                    help="the first shape of a fak bench fleet profile (flags below override)")
    for name in ("prefix", "turns", "agents", "decode", "result"):
        ap.add_argument(f"--{name}", type=int, default=None)
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per request")
    ap.add_argument("--out", default=None, help="write the JSON report here (default: stdout)")
    a = ap.parse_args(argv)
    base = wl.PROFILES[a.profile][0] if a.profile else wl.PROFILES["probe"][0]
    for name in ("prefix", "turns", "agents", "decode", "result"):
        if getattr(a, name) is None:
            setattr(a, name, getattr(base, name))
    if a.n_vocab < 1:
        ap.error("--n-vocab must be positive")
    return a


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        rep = run(args)
    except (BenchError, OSError, wl.WorkloadError) as e:
        print(f"fleet_http: error: {e}", file=sys.stderr)
        return 1
    text = json.dumps(rep, indent=2)
    if args.out:
        Path(args.out).write_text(text + "\n")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
