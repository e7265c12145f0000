#!/usr/bin/env python3
"""Load generator for OpenAI-compatible HTTP servers (like ``vllm bench serve``).

Drives ``POST /v1/chat/completions`` (``--endpoint chat``, default) or
``POST /v1/completions`` of any OpenAI-compatible server (``fak serve``,
``llama-server``, vLLM, ...) with streamed requests and measures, per request:

* TTFT: request sent -> first chunk carrying content (a chat delta's
  ``content``, a completion's ``text``; a role-only first delta does not count);
* ITL: the gaps between successive content chunks;
* end-to-end latency: request sent -> stream finished (``[DONE]`` or EOF);
* output tokens: ``usage.completion_tokens`` when the server reports usage
  (requested with ``stream_options.include_usage``), else the number of
  content chunks; prompt tokens and ``usage.prompt_tokens_details.cached_tokens``
  when reported.

It writes one JSON report (schema ``fak-bench-serve/1``): p50/p95/p99 (and
mean/min/max) of TTFT, ITL, TPOT and end-to-end latency in milliseconds,
output tokens/s and requests/s over the wall time (first request sent ->
last request finished), totals, failures, every request's summary, and the
exact command line and parameters (the API key itself is never written).
A short table goes to stderr.

Load: ``--concurrency N`` keeps N requests in flight (closed loop) until
``--num-requests`` have been sent; ``--request-rate R`` sends requests at
Poisson arrival times of R per second (seeded by ``--seed``), optionally
capped at ``--concurrency`` in flight. ``--warmup K`` requests (default 1,
distinct user messages, not counted) run one at a time first.

Workload ``shared-system-prompt`` (the only one): every request carries the
same system prompt of ``--system-tokens`` words (default 1024) and a distinct
user message of 32-64 words (``--user-tokens-min/max``), all drawn from a fixed
list of common English words each of which is one token (with its leading
space) in the SmolLM2 and Qwen2.5 tokenizers, so a word is about one token;
the server's ``usage.prompt_tokens`` gives the true count, recorded per
request. Text depends only on ``--seed``. Requests carry ``stream: true``,
``stream_options: {"include_usage": true}``, ``temperature: 0``,
``max_tokens`` and ``ignore_eos: true`` (an extra field llama-server honours
so every request generates ``max_tokens``; ``--no-ignore-eos`` drops it).

The HTTP client is the standard library's asyncio streams speaking HTTP/1.1
(one connection per request, ``Connection: close``; chunked or
Content-Length bodies). Only ``http://`` URLs. Percentiles are linear
interpolation between closest ranks (numpy's default, as vLLM reports them).

    bench/serve.py --base-url http://127.0.0.1:8080 --concurrency 8 \\
        --num-requests 64 --max-tokens 64 --label fak --out serve-fak-c8.json
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import platform
import random
import shlex
import sys
import time
import urllib.parse
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable

SCHEMA = "fak-bench-serve/1"

# Common English words, each a single token (with its leading space) in the
# SmolLM2 (49152-entry) and Qwen2.5 BPE vocabularies (checked with
# `fak tokenize`). Order matters: the generated text depends on it.
WORDS = tuple(
    """
the of and to in is that for it as was with be by on not he this are or his
from at which but have an they you were her she there been one all we their
has would when if so no will more can who out up into do than only other some
time could them very these two may about then its first any like now my over
such our man me even most made after also did many before must through back
years where much your way well down should because each just those people how
too little state good make world still own see men work long get here between
both life being under never day same another know while last might us great
old year off come since against go came right used take three states himself
few house use during without again place around however home small found
thought went say part once general high upon school every
""".split()
)


# ---------------------------------------------------------------------------
# Workload
# ---------------------------------------------------------------------------


def words_text(rng: random.Random, n: int) -> str:
    """``n`` words from WORDS, space-separated, with a capital and a period
    every 12 words so the text looks like prose to a chat template."""
    out = []
    for i in range(n):
        w = rng.choice(WORDS)
        if i % 12 == 0:
            w = w.capitalize()
        if i % 12 == 11 or i == n - 1:
            w += "."
        out.append(w)
    return " ".join(out)


@dataclass
class Workload:
    """The prompts of one run: one system prompt, one user message per request."""

    name: str
    system: str
    users: list[str]  # warm-up messages first, then the timed ones
    warmup: int

    def describe(self) -> dict[str, Any]:
        lens = [len(u.split()) for u in self.users[self.warmup :]]
        return {
            "name": self.name,
            "system_words": len(self.system.split()),
            "system_sha256": hashlib.sha256(self.system.encode()).hexdigest(),
            "user_words_min": min(lens) if lens else 0,
            "user_words_max": max(lens) if lens else 0,
            "user_words_total": sum(lens),
            "users_sha256": hashlib.sha256("\n".join(self.users).encode()).hexdigest(),
            "word_list_size": len(WORDS),
        }


def make_workload(seed: int, system_tokens: int, user_min: int, user_max: int, n: int, warmup: int) -> Workload:
    """Deterministic from ``seed``: the system prompt, then ``warmup + n``
    distinct user messages of ``user_min..user_max`` words. Each user message
    starts with its request index, so no two are equal."""
    if not 0 < user_min <= user_max:
        raise ValueError(f"need 0 < user-tokens-min <= user-tokens-max, got {user_min}..{user_max}")
    rng = random.Random(seed)
    system = words_text(rng, system_tokens) if system_tokens > 0 else ""
    users = []
    for i in range(warmup + n):
        k = rng.randint(user_min, user_max)
        tag = f"Request {i - warmup}." if i >= warmup else f"Warmup {i}."
        # The tag is 3-4 tokens; the words make up the rest of the length.
        users.append(tag + " " + words_text(rng, max(1, k - 3)))
    return Workload("shared-system-prompt", system, users, warmup)


def request_body(args: argparse.Namespace, wl: Workload, i: int) -> dict[str, Any]:
    """The JSON body of request ``i`` (index into ``wl.users``)."""
    body: dict[str, Any] = {"model": args.model}
    if args.endpoint == "chat":
        msgs = []
        if wl.system:
            msgs.append({"role": "system", "content": wl.system})
        msgs.append({"role": "user", "content": wl.users[i]})
        body["messages"] = msgs
    else:
        body["prompt"] = (wl.system + "\n\n" if wl.system else "") + wl.users[i]
    body.update(
        {
            "max_tokens": args.max_tokens,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    )
    if not args.no_ignore_eos:
        body["ignore_eos"] = True
    if args.extra_body:
        body.update(args.extra_body)
    return body


# ---------------------------------------------------------------------------
# HTTP/1.1 and server-sent events
# ---------------------------------------------------------------------------


class HTTPError(Exception):
    """A protocol-level failure (bad status line, truncated body, ...)."""


class SSEParser:
    """Incremental ``text/event-stream`` parser: ``feed(bytes)`` returns the
    ``data`` payloads of the events completed by those bytes (multi-line data
    joined with newlines; comments and other fields ignored; CRLF, LF or CR
    line ends)."""

    def __init__(self) -> None:
        self._buf = b""
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> list[str]:
        self._buf += chunk
        events: list[str] = []
        while True:
            # Find the earliest line terminator; a lone CR at the end of the
            # buffer may be the first half of CRLF, so wait for more bytes.
            i_n = self._buf.find(b"\n")
            i_r = self._buf.find(b"\r")
            if i_r != -1 and (i_n == -1 or i_r < i_n):
                if i_r == len(self._buf) - 1:
                    break
                end, nxt = i_r, i_r + (2 if self._buf[i_r + 1 : i_r + 2] == b"\n" else 1)
            elif i_n != -1:
                end, nxt = i_n, i_n + 1
            else:
                break
            line = self._buf[:end].decode("utf-8", errors="replace")
            self._buf = self._buf[nxt:]
            if line == "":
                if self._data:
                    events.append("\n".join(self._data))
                    self._data = []
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            if value.startswith(" "):
                value = value[1:]
            if name == "data":
                self._data.append(value)
        return events

    def close(self) -> list[str]:
        """Events still pending at end of stream (a last event without its
        blank line, which some servers send before closing)."""
        events = self.feed(b"\n\n") if self._buf or self._data else []
        return events


async def read_headers(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    """Status code and lower-cased headers of an HTTP/1.x response."""
    line = await reader.readline()
    if not line:
        raise HTTPError("connection closed before the status line")
    parts = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
        raise HTTPError(f"bad status line {line[:80]!r}")
    try:
        status = int(parts[1])
    except ValueError as e:
        raise HTTPError(f"bad status line {line[:80]!r}") from e
    headers: dict[str, str] = {}
    while True:
        h = await reader.readline()
        if not h:
            raise HTTPError("connection closed inside the headers")
        h = h.rstrip(b"\r\n")
        if not h:
            break
        k, _, v = h.decode("latin-1").partition(":")
        headers[k.strip().lower()] = v.strip()
    return status, headers


async def iter_body(reader: asyncio.StreamReader, headers: dict[str, str]):
    """Yields the body's bytes as they arrive: de-chunked for
    ``Transfer-Encoding: chunked``, else up to ``Content-Length``, else to EOF."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        while True:
            size_line = await reader.readline()
            if not size_line:
                raise HTTPError("connection closed inside a chunked body")
            try:
                size = int(size_line.split(b";", 1)[0].strip(), 16)
            except ValueError as e:
                raise HTTPError(f"bad chunk size line {size_line[:40]!r}") from e
            if size == 0:
                while True:  # trailers, then the final CRLF
                    t = await reader.readline()
                    if not t or t in (b"\r\n", b"\n"):
                        return
            data = await reader.readexactly(size)
            await reader.readexactly(2)
            yield data
    elif "content-length" in headers:
        left = int(headers["content-length"])
        while left > 0:
            data = await reader.read(min(left, 65536))
            if not data:
                raise HTTPError(f"connection closed with {left} body bytes missing")
            left -= len(data)
            yield data
    else:
        while True:
            data = await reader.read(65536)
            if not data:
                return
            yield data


def parse_base_url(base_url: str) -> tuple[str, int, str]:
    """(host, port, path prefix) of an ``http://`` base URL; a trailing
    ``/v1`` is dropped (the endpoints add it)."""
    u = urllib.parse.urlsplit(base_url)
    if u.scheme != "http":
        raise ValueError(f"--base-url must be http://HOST[:PORT], got {base_url!r}")
    prefix = u.path.rstrip("/")
    if prefix.endswith("/v1"):
        prefix = prefix[:-3]
    return u.hostname or "127.0.0.1", u.port or 80, prefix


async def http_request(
    host: str, port: int, method: str, path: str, body: bytes | None, headers: dict[str, str]
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, int, dict[str, str]]:
    """Opens a connection, sends one request and reads the response head."""
    reader, writer = await asyncio.open_connection(host, port, limit=1 << 20)
    head = [f"{method} {path} HTTP/1.1", f"Host: {host}:{port}", "Connection: close", "Accept: */*"]
    for k, v in headers.items():
        head.append(f"{k}: {v}")
    if body is not None:
        head.append(f"Content-Length: {len(body)}")
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + (body or b""))
    await writer.drain()
    status, rh = await read_headers(reader)
    return reader, writer, status, rh


async def http_get_json(host: str, port: int, path: str, headers: dict[str, str], timeout: float) -> tuple[int, Any]:
    """GET ``path``; (status, parsed JSON or None)."""

    async def go() -> tuple[int, Any]:
        reader, writer, status, rh = await http_request(host, port, "GET", path, None, headers)
        try:
            data = b"".join([c async for c in iter_body(reader, rh)])
        finally:
            writer.close()
        try:
            return status, json.loads(data)
        except ValueError:
            return status, None

    return await asyncio.wait_for(go(), timeout)


# ---------------------------------------------------------------------------
# One request
# ---------------------------------------------------------------------------


@dataclass
class Result:
    """What one request measured. Times are seconds (perf_counter based);
    the report converts them to milliseconds."""

    index: int
    ok: bool = False
    error: str | None = None
    status: int | None = None
    start: float = 0.0  # perf_counter when the request was sent
    ttft: float | None = None
    e2e: float | None = None
    itl: list[float] = field(default_factory=list)
    content_chunks: int = 0
    output_tokens: int | None = None
    output_tokens_source: str | None = None  # "usage" | "chunks"
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    finish_reason: str | None = None
    done: bool = False  # saw data: [DONE]
    text_chars: int = 0


def chunk_content(obj: dict[str, Any]) -> tuple[str, str | None]:
    """(content text, finish_reason) of one streamed chunk, chat or completions."""
    text = ""
    finish = None
    for ch in obj.get("choices") or []:
        if not isinstance(ch, dict):
            continue
        delta = ch.get("delta")
        if isinstance(delta, dict):
            c = delta.get("content")
            if isinstance(c, str):
                text += c
        t = ch.get("text")
        if isinstance(t, str):
            text += t
        if ch.get("finish_reason"):
            finish = ch["finish_reason"]
    return text, finish


def apply_usage(res: Result, usage: Any) -> None:
    if not isinstance(usage, dict):
        return
    if isinstance(usage.get("completion_tokens"), int):
        res.output_tokens = usage["completion_tokens"]
        res.output_tokens_source = "usage"
    if isinstance(usage.get("prompt_tokens"), int):
        res.prompt_tokens = usage["prompt_tokens"]
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
        res.cached_tokens = details["cached_tokens"]


def handle_event(res: Result, data: str, now: float, last: list[float]) -> None:
    """Folds one SSE data payload into ``res``; ``last`` holds the time of the
    previous content chunk (a one-element list, empty before the first)."""
    if data.strip() == "[DONE]":
        res.done = True
        return
    try:
        obj = json.loads(data)
    except ValueError as e:
        raise HTTPError(f"chunk is not JSON: {data[:80]!r}") from e
    if not isinstance(obj, dict):
        raise HTTPError(f"chunk is not a JSON object: {data[:80]!r}")
    if "error" in obj:
        err = obj["error"]
        msg = err.get("message") if isinstance(err, dict) else err
        raise HTTPError(f"error event: {msg}")
    text, finish = chunk_content(obj)
    if text:
        if res.ttft is None:
            res.ttft = now - res.start
        else:
            res.itl.append(now - last[0])
        if last:
            last[0] = now
        else:
            last.append(now)
        res.content_chunks += 1
        res.text_chars += len(text)
    if finish:
        res.finish_reason = finish
    if obj.get("usage") is not None:
        apply_usage(res, obj["usage"])


async def run_one(index: int, body: dict[str, Any], cfg: "Config") -> Result:
    """Sends one streamed request and measures it. Never raises: failures
    come back as ``ok=False`` with ``error`` set."""
    res = Result(index=index)
    payload = json.dumps(body).encode()
    writer = None
    try:

        async def go() -> None:
            nonlocal writer
            res.start = time.perf_counter()
            reader, writer, status, rh = await http_request(
                cfg.host, cfg.port, "POST", cfg.path, payload, cfg.headers
            )
            res.status = status
            if status != 200:
                data = b"".join([c async for c in iter_body(reader, rh)])
                raise HTTPError(f"HTTP {status}: {data[:200].decode('utf-8', 'replace')}")
            parser = SSEParser()
            last: list[float] = []
            async for chunk in iter_body(reader, rh):
                now = time.perf_counter()
                for ev in parser.feed(chunk):
                    handle_event(res, ev, now, last)
                if res.done:
                    break
            now = time.perf_counter()
            for ev in parser.close():
                handle_event(res, ev, now, last)
            res.e2e = now - res.start

        await asyncio.wait_for(go(), cfg.timeout)
        if not res.done and res.finish_reason is None:
            raise HTTPError("stream ended without [DONE] or a finish_reason")
        if res.content_chunks == 0:
            raise HTTPError("stream carried no content")
        if res.output_tokens is None:
            res.output_tokens = res.content_chunks
            res.output_tokens_source = "chunks"
        res.ok = True
    except asyncio.TimeoutError:
        res.error = f"timeout after {cfg.timeout} s"
    except (OSError, HTTPError, asyncio.IncompleteReadError, ValueError) as e:
        res.error = f"{type(e).__name__}: {e}" if not isinstance(e, HTTPError) else str(e)
    finally:
        if writer is not None:
            writer.close()
    return res


# ---------------------------------------------------------------------------
# Load patterns
# ---------------------------------------------------------------------------


@dataclass
class Config:
    host: str
    port: int
    path: str
    headers: dict[str, str]
    timeout: float


def poisson_offsets(n: int, rate: float, seed: int) -> list[float]:
    """Send times (seconds from the start) of ``n`` Poisson arrivals at
    ``rate`` per second; the first request goes at 0. ``rate`` = inf: all 0."""
    if math.isinf(rate):
        return [0.0] * n
    rng = random.Random(seed ^ 0x5EED)
    t, out = 0.0, []
    for i in range(n):
        out.append(t)
        t += rng.expovariate(rate)
    return out


async def run_load(
    bodies: list[dict[str, Any]], cfg: Config, concurrency: int | None, rate: float | None, seed: int
) -> tuple[list[Result], float, float]:
    """Runs the timed requests; (results in index order, t_start, t_end)."""
    n = len(bodies)
    results: list[Result | None] = [None] * n
    t0 = time.perf_counter()
    if rate is None:
        # Closed loop: `concurrency` workers, each taking the next index.
        nxt = iter(range(n))

        async def worker() -> None:
            for i in nxt:
                results[i] = await run_one(i, bodies[i], cfg)

        await asyncio.gather(*(worker() for _ in range(min(concurrency or 1, n))))
    else:
        sem = asyncio.Semaphore(concurrency) if concurrency else None
        offsets = poisson_offsets(n, rate, seed)

        async def timed(i: int) -> None:
            delay = t0 + offsets[i] - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            if sem is None:
                results[i] = await run_one(i, bodies[i], cfg)
            else:
                async with sem:
                    results[i] = await run_one(i, bodies[i], cfg)

        await asyncio.gather(*(timed(i) for i in range(n)))
    t1 = time.perf_counter()
    return [r for r in results if r is not None], t0, t1


# ---------------------------------------------------------------------------
# Statistics and report
# ---------------------------------------------------------------------------


def percentile(values: Iterable[float], q: float) -> float | None:
    """The q-th percentile (0..100), linear interpolation between closest
    ranks (numpy.percentile's default). None for no values."""
    xs = sorted(values)
    if not xs:
        return None
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} outside 0..100")
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def summary_ms(values_s: list[float]) -> dict[str, Any]:
    """count, mean, min, p50, p90, p95, p99, max in milliseconds (3 decimals)."""
    vals = [v * 1000.0 for v in values_s]
    out: dict[str, Any] = {"count": len(vals)}
    if not vals:
        for k in ("mean", "min", "p50", "p90", "p95", "p99", "max"):
            out[k] = None
        return out
    out["mean"] = round(sum(vals) / len(vals), 3)
    out["min"] = round(min(vals), 3)
    for q in (50, 90, 95, 99):
        out[f"p{q}"] = round(percentile(vals, q), 3)  # type: ignore[arg-type]
    out["max"] = round(max(vals), 3)
    return out


def aggregate(results: list[Result], wall_s: float, max_tokens: int) -> dict[str, Any]:
    """The ``results`` object of the report from the per-request results."""
    ok = [r for r in results if r.ok]
    failed = [r for r in results if not r.ok]
    out_tok = sum(r.output_tokens or 0 for r in ok)
    prompt = [r.prompt_tokens for r in ok if r.prompt_tokens is not None]
    cached = [r.cached_tokens for r in ok if r.cached_tokens is not None]
    tpot = [
        (r.e2e - r.ttft) / (r.output_tokens - 1)
        for r in ok
        if r.e2e is not None and r.ttft is not None and r.output_tokens and r.output_tokens > 1
    ]
    errors: dict[str, int] = {}
    for r in failed:
        key = (r.error or "unknown")[:120]
        errors[key] = errors.get(key, 0) + 1
    return {
        "completed": len(ok),
        "failed": len(failed),
        "errors": errors,
        "wall_s": round(wall_s, 6),
        "requests_per_s": round(len(ok) / wall_s, 4) if wall_s > 0 else None,
        "output_tok_s": round(out_tok / wall_s, 3) if wall_s > 0 else None,
        "total_output_tokens": out_tok,
        "total_prompt_tokens": sum(prompt) if prompt else None,
        "total_cached_tokens": sum(cached) if cached else None,
        "prompt_tokens_min": min(prompt) if prompt else None,
        "prompt_tokens_max": max(prompt) if prompt else None,
        "output_tokens_source": sorted({r.output_tokens_source for r in ok if r.output_tokens_source}),
        "output_tokens_not_max": sum(1 for r in ok if r.output_tokens != max_tokens),
        "ttft_ms": summary_ms([r.ttft for r in ok if r.ttft is not None]),
        "itl_ms": summary_ms([g for r in ok for g in r.itl]),
        "tpot_ms": summary_ms(tpot),
        "e2e_ms": summary_ms([r.e2e for r in ok if r.e2e is not None]),
    }


def request_rows(results: list[Result], t0: float) -> list[dict[str, Any]]:
    """Per-request summaries for the report (no ITL lists, to keep it small)."""

    def ms(v: float | None) -> float | None:
        return None if v is None else round(v * 1000.0, 3)

    rows = []
    for r in results:
        d = asdict(r)
        itl = d.pop("itl")
        d.pop("start")
        d["start_ms"] = ms(r.start - t0) if r.start else None
        d["ttft_ms"] = ms(d.pop("ttft"))
        d["e2e_ms"] = ms(d.pop("e2e"))
        d["itl_ms_p50"] = ms(percentile(itl, 50))
        d["itl_ms_max"] = ms(max(itl)) if itl else None
        rows.append(d)
    return rows


def redacted_argv(argv: list[str]) -> list[str]:
    """argv with the value of --api-key replaced by ***."""
    out, skip = [], False
    for a in argv:
        if skip:
            out.append("***")
            skip = False
        elif a == "--api-key":
            out.append(a)
            skip = True
        elif a.startswith("--api-key="):
            out.append("--api-key=***")
        else:
            out.append(a)
    return out


def render(report: dict[str, Any]) -> str:
    """The short stderr table of one report."""
    r = report["results"]
    p = report["parameters"]
    load = f"concurrency {p['concurrency']}" if p["request_rate"] is None else f"rate {p['request_rate']}/s (max {p['concurrency'] or 'inf'})"
    lines = [
        f"serve: {report['label'] or '-'}  {p['endpoint']}  {load}  {r['completed']}/{p['num_requests']} ok"
        f"  {r['failed']} failed  wall {r['wall_s']:.2f} s",
        f"  output {r['output_tok_s']} tok/s  {r['requests_per_s']} req/s  "
        f"prompt tokens {r['prompt_tokens_min']}..{r['prompt_tokens_max']}  cached total {r['total_cached_tokens']}",
        f"  {'ms':<6}{'p50':>10}{'p95':>10}{'p99':>10}{'mean':>10}",
    ]
    for key in ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms"):
        s = r[key]

        def f(v: Any) -> str:
            return f"{v:>10.2f}" if isinstance(v, (int, float)) else f"{'-':>10}"

        lines.append(f"  {key[:-3]:<6}{f(s['p50'])}{f(s['p95'])}{f(s['p99'])}{f(s['mean'])}")
    for err, n in r["errors"].items():
        lines.append(f"  error x{n}: {err}")
    if r["output_tokens_not_max"]:
        lines.append(f"  note: {r['output_tokens_not_max']} requests did not generate max_tokens (ignore_eos not honoured?)")
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description="Streamed load generator for OpenAI-compatible servers (fak serve, llama-server, ...).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument("--base-url", default="http://127.0.0.1:8080", help="http://HOST:PORT (a trailing /v1 is fine)")
    ap.add_argument("--api-key", default=None, help="sent as Authorization: Bearer KEY (never written to the report)")
    ap.add_argument("--model", default=None, help="model name sent in requests (default: the first id of GET /v1/models)")
    ap.add_argument("--endpoint", choices=("chat", "completions"), default="chat")
    ap.add_argument("--workload", choices=("shared-system-prompt",), default="shared-system-prompt")
    ap.add_argument("--concurrency", type=int, default=None, help="requests in flight (closed loop; a cap with --request-rate)")
    ap.add_argument("--request-rate", type=float, default=None, help="Poisson arrivals per second (inf: all at once)")
    ap.add_argument("--num-requests", type=int, default=64)
    ap.add_argument("--warmup", type=int, default=1, help="untimed requests sent one at a time first")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--system-tokens", type=int, default=1024, help="words (about tokens) of the shared system prompt")
    ap.add_argument("--user-tokens-min", type=int, default=32)
    ap.add_argument("--user-tokens-max", type=int, default=64)
    ap.add_argument("--no-ignore-eos", action="store_true", help="do not send ignore_eos: true")
    ap.add_argument("--extra-body", type=json.loads, default=None, help="JSON object merged into every request body")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per request")
    ap.add_argument("--label", default="", help="free text stored in the report (e.g. 'llama-server -fa on')")
    ap.add_argument("--engine", default="", help="engine name stored in the report (fak, llama-server, ...); compare_serve.py groups by it")
    ap.add_argument("--out", default=None, help="write the JSON report here (default: stdout)")
    ap.add_argument("--quiet", action="store_true", help="no table on stderr")
    args = ap.parse_args(argv)
    if args.concurrency is None and args.request_rate is None:
        args.concurrency = 1
    if args.concurrency is not None and args.concurrency < 1:
        ap.error("--concurrency must be >= 1")
    if args.request_rate is not None and not args.request_rate > 0:
        ap.error("--request-rate must be > 0")
    if args.num_requests < 1 or args.warmup < 0 or args.max_tokens < 1 or args.system_tokens < 0:
        ap.error("--num-requests and --max-tokens must be >= 1, --warmup and --system-tokens >= 0")
    if args.extra_body is not None and not isinstance(args.extra_body, dict):
        ap.error("--extra-body must be a JSON object")
    return args


async def amain(args: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    """Runs the benchmark; returns the report."""
    host, port, prefix = parse_base_url(args.base_url)
    headers = {"Content-Type": "application/json"}
    if args.api_key:
        headers["Authorization"] = f"Bearer {args.api_key}"
    served: Any = None
    try:
        st, models = await http_get_json(host, port, prefix + "/v1/models", headers, 30.0)
        if st == 200 and isinstance(models, dict):
            served = [m.get("id") for m in models.get("data") or [] if isinstance(m, dict)]
    except (OSError, HTTPError, asyncio.TimeoutError, ValueError) as e:
        print(f"serve: GET /v1/models failed: {e}", file=sys.stderr)
    if args.model is None:
        if not served:
            raise SystemExit("serve: error: --model not given and GET /v1/models returned no model")
        args.model = served[0]

    path = prefix + ("/v1/chat/completions" if args.endpoint == "chat" else "/v1/completions")
    cfg = Config(host, port, path, headers, args.timeout)
    wl = make_workload(args.seed, args.system_tokens, args.user_tokens_min, args.user_tokens_max, args.num_requests, args.warmup)
    bodies = [request_body(args, wl, i) for i in range(len(wl.users))]

    warm = []
    for i in range(args.warmup):
        warm.append(await run_one(-1 - i, bodies[i], cfg))
    for w in warm:
        if not w.ok:
            print(f"serve: warm-up request failed: {w.error}", file=sys.stderr)

    results, t0, t1 = await run_load(bodies[args.warmup :], cfg, args.concurrency, args.request_rate, args.seed)
    params = {k: v for k, v in vars(args).items() if k not in ("api_key", "out", "quiet")}
    params["api_key"] = "set" if args.api_key else None
    return {
        "schema": SCHEMA,
        "label": args.label,
        "engine": args.engine,
        "command": shlex.join([sys.executable] + redacted_argv(argv)),
        "argv": redacted_argv(argv),
        "parameters": params,
        "served_models": served,
        "client": {"python": platform.python_version(), "host": platform.node()},
        "started_unix": round(time.time() - (time.perf_counter() - t0), 3),
        "workload": wl.describe(),
        "warmup": {"requests": args.warmup, "ok": sum(1 for w in warm if w.ok)},
        "results": aggregate(results, t1 - t0, args.max_tokens),
        "requests": request_rows(results, t0),
    }


def main(argv: list[str] | None = None) -> int:
    prog = sys.argv[0] if argv is None else "bench/serve.py"
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    try:
        report = asyncio.run(amain(args, [prog] + argv))
    except ValueError as e:
        print(f"serve: error: {e}", file=sys.stderr)
        return 2
    text = json.dumps(report, indent=1) + "\n"
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    if not args.quiet:
        print(render(report), file=sys.stderr)
    return 0 if report["results"]["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
