"""Tests of bench/serve.py (the serving load generator) and bench/compare_serve.py.

A tiny fake OpenAI-compatible server runs in-process (http.server in a thread,
ephemeral port on 127.0.0.1) and streams server-sent events with fixed delays,
so the generator's SSE parsing, timing, percentiles, failure handling and
report come out as expected. No network, no model; runs in a few seconds:

    python3 -m unittest bench/test_serve.py
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import sys
import tempfile
import threading
import time
import unittest
from contextlib import redirect_stderr
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import compare_serve  # noqa: E402
import serve  # noqa: E402

FIRST_DELAY = 0.040  # fake server: request -> first content chunk
GAP = 0.008  # fake server: between content chunks


class FakeServer:
    """An OpenAI-ish streaming server. ``mode`` picks the framing and
    behaviour; ``fail_marker`` makes requests whose user message contains it
    fail with HTTP 500. Every request body received is kept in ``bodies``."""

    def __init__(self, mode: str = "chunked", fail_marker: str | None = None, usage: bool = True) -> None:
        self.mode = mode
        self.fail_marker = fail_marker
        self.usage = usage
        self.bodies: list[dict] = []
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if mode == "chunked" else "HTTP/1.0"

            def log_message(self, *a):  # quiet
                pass

            def send_json(self, code: int, obj: dict) -> None:
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path == "/v1/models":
                    self.send_json(200, {"object": "list", "data": [{"id": "fake-model", "object": "model"}]})
                else:
                    self.send_json(404, {"error": {"message": "no", "type": "not_found", "code": 404}})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fake.lock:
                    fake.bodies.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
                user = body["messages"][-1]["content"] if "messages" in body else body["prompt"]
                if fake.fail_marker and fake.fail_marker in user:
                    self.send_json(500, {"error": {"message": "boom", "type": "server_error", "code": 500}})
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                if fake.mode == "chunked":
                    self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                chat = "messages" in body
                n = body["max_tokens"]

                def emit(text: str) -> None:
                    data = text.encode()
                    if fake.mode == "chunked":
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                    else:
                        self.wfile.write(data)
                    self.wfile.flush()

                def chunk(content: str | None, finish: str | None = None, role: bool = False) -> str:
                    if chat:
                        delta = {"role": "assistant"} if role else {}
                        if content is not None:
                            delta["content"] = content
                        ch = {"index": 0, "delta": delta, "finish_reason": finish}
                    else:
                        ch = {"index": 0, "text": content or "", "finish_reason": finish}
                    return "data: " + json.dumps({"object": "chunk", "choices": [ch]}) + "\n\n"

                if chat:
                    emit(chunk(None, role=True))  # role-only delta: not a token
                time.sleep(FIRST_DELAY)
                if fake.mode == "error-event":
                    emit("data: " + json.dumps({"error": {"message": "engine failed", "code": 500}}) + "\n\n")
                    return
                for i in range(n):
                    if i:
                        time.sleep(GAP)
                    # A comment line and CRLF endings on some events.
                    if i == 1:
                        emit(": keep-alive\r\n\r\n")
                    emit(chunk(f" w{i}").replace("\n\n", "\r\n\r\n") if i % 2 else chunk(f" w{i}"))
                    if fake.mode == "truncated" and i == 2:
                        return  # no finish_reason, no [DONE]
                emit(chunk(None, finish="length") if chat else chunk("", finish="length"))
                if fake.usage:
                    usage = {
                        "prompt_tokens": 1000 + len(user.split()),
                        "completion_tokens": n,
                        "total_tokens": 1000 + len(user.split()) + n,
                        "prompt_tokens_details": {"cached_tokens": 990},
                    }
                    emit("data: " + json.dumps({"object": "chunk", "choices": [], "usage": usage}) + "\n\n")
                if fake.mode == "no-done":
                    return
                emit("data: [DONE]\n\n")
                if fake.mode == "chunked":
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def __enter__(self) -> "FakeServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def run_cli(argv: list[str]) -> tuple[int, dict, str]:
    """Runs serve.main with --out to a temp file; (exit code, report, stderr)."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        err = io.StringIO()
        with redirect_stderr(err):
            rc = serve.main(argv + ["--out", out])
        with open(out, encoding="utf-8") as f:
            return rc, json.load(f), err.getvalue()


class TestSSEParser(unittest.TestCase):
    def test_split_anywhere(self):
        stream = (
            b"data: {\"a\": 1}\n\n"
            b": comment\r\n\r\n"
            b"event: x\r\ndata: two\r\ndata: lines\r\n\r\n"
            b"data:nospace\r\r"
            b"id: 7\ndata: [DONE]\n\n"
        )
        want = ['{"a": 1}', "two\nlines", "nospace", "[DONE]"]
        for step in (1, 2, 3, 5, 7, len(stream)):
            p = serve.SSEParser()
            got = []
            for i in range(0, len(stream), step):
                got += p.feed(stream[i : i + step])
            got += p.close()
            self.assertEqual(got, want, f"step {step}")

    def test_last_event_without_blank_line(self):
        p = serve.SSEParser()
        self.assertEqual(p.feed(b"data: x\n"), [])
        self.assertEqual(p.close(), ["x"])

    def test_utf8_split_across_chunks(self):
        raw = 'data: {"t": "é🙂"}\n\n'.encode()
        p = serve.SSEParser()
        got = []
        for b in raw:
            got += p.feed(bytes([b]))
        self.assertEqual(got, ['{"t": "é🙂"}'])


class TestStats(unittest.TestCase):
    def test_percentile_matches_numpy_linear(self):
        xs = [4.0, 1.0, 3.0, 2.0]
        self.assertEqual(serve.percentile(xs, 0), 1.0)
        self.assertEqual(serve.percentile(xs, 100), 4.0)
        self.assertAlmostEqual(serve.percentile(xs, 50), 2.5)
        self.assertAlmostEqual(serve.percentile(xs, 95), 3.85)
        self.assertAlmostEqual(serve.percentile(xs, 99), 3.97)
        self.assertEqual(serve.percentile([7.0], 99), 7.0)
        self.assertIsNone(serve.percentile([], 50))
        with self.assertRaises(ValueError):
            serve.percentile(xs, 101)

    def test_summary_ms(self):
        s = serve.summary_ms([0.001, 0.002, 0.003])
        self.assertEqual(s["count"], 3)
        self.assertEqual((s["min"], s["p50"], s["max"], s["mean"]), (1.0, 2.0, 3.0, 2.0))
        self.assertIsNone(serve.summary_ms([])["p99"])

    def test_aggregate(self):
        ok = serve.Result(index=0, ok=True, ttft=0.1, e2e=0.5, itl=[0.1, 0.1, 0.2], output_tokens=5,
                          output_tokens_source="usage", prompt_tokens=1100, cached_tokens=1000)
        ok2 = serve.Result(index=1, ok=True, ttft=0.3, e2e=0.7, itl=[0.1], output_tokens=3,
                           output_tokens_source="chunks")
        bad = serve.Result(index=2, ok=False, error="HTTP 500: x")
        a = serve.aggregate([ok, ok2, bad], wall_s=2.0, max_tokens=5)
        self.assertEqual((a["completed"], a["failed"]), (2, 1))
        self.assertEqual(a["errors"], {"HTTP 500: x": 1})
        self.assertEqual(a["total_output_tokens"], 8)
        self.assertEqual(a["output_tok_s"], 4.0)
        self.assertEqual(a["requests_per_s"], 1.0)
        self.assertEqual(a["total_prompt_tokens"], 1100)
        self.assertEqual(a["total_cached_tokens"], 1000)
        self.assertEqual(a["output_tokens_source"], ["chunks", "usage"])
        self.assertEqual(a["output_tokens_not_max"], 1)
        self.assertEqual(a["ttft_ms"]["p50"], 200.0)
        self.assertEqual(a["itl_ms"]["count"], 4)
        self.assertEqual(a["itl_ms"]["p50"], 100.0)
        # TPOT: (0.5-0.1)/4 = 100 ms and (0.7-0.3)/2 = 200 ms.
        self.assertEqual(a["tpot_ms"]["mean"], 150.0)
        self.assertEqual(a["e2e_ms"]["max"], 700.0)


class TestWorkload(unittest.TestCase):
    def test_deterministic_and_shaped(self):
        a = serve.make_workload(7, 1024, 32, 64, 20, 1)
        b = serve.make_workload(7, 1024, 32, 64, 20, 1)
        c = serve.make_workload(8, 1024, 32, 64, 20, 1)
        self.assertEqual((a.system, a.users), (b.system, b.users))
        self.assertNotEqual(a.users, c.users)
        self.assertEqual(len(a.system.split()), 1024)
        self.assertEqual(len(a.users), 21)
        self.assertEqual(len(set(a.users)), 21)
        for u in a.users:
            self.assertTrue(32 <= len(u.split()) <= 64, u)
        self.assertTrue(a.users[0].startswith("Warmup 0."))
        self.assertTrue(a.users[1].startswith("Request 0."))
        words = set(serve.WORDS)
        for w in a.system.split():
            self.assertIn(w.rstrip(".").lower(), words)
        d = a.describe()
        self.assertEqual(d["system_words"], 1024)
        self.assertEqual(d["user_words_min"] >= 32 and d["user_words_max"] <= 64, True)

    def test_poisson_offsets(self):
        xs = serve.poisson_offsets(2000, 50.0, 1)
        self.assertEqual(xs, serve.poisson_offsets(2000, 50.0, 1))
        self.assertEqual(xs[0], 0.0)
        self.assertTrue(all(b >= a for a, b in zip(xs, xs[1:])))
        mean_gap = xs[-1] / (len(xs) - 1)
        self.assertAlmostEqual(mean_gap, 1 / 50.0, delta=0.003)
        self.assertEqual(serve.poisson_offsets(3, float("inf"), 1), [0.0, 0.0, 0.0])

    def test_redacted_argv(self):
        self.assertEqual(serve.redacted_argv(["x", "--api-key", "k", "--api-key=z", "--model", "m"]),
                         ["x", "--api-key", "***", "--api-key=***", "--model", "m"])

    def test_base_url(self):
        self.assertEqual(serve.parse_base_url("http://127.0.0.1:8080"), ("127.0.0.1", 8080, ""))
        self.assertEqual(serve.parse_base_url("http://h:1/v1/"), ("h", 1, ""))
        self.assertEqual(serve.parse_base_url("http://h/x/v1"), ("h", 80, "/x"))
        with self.assertRaises(ValueError):
            serve.parse_base_url("https://h")


class TestAgainstFakeServer(unittest.TestCase):
    def base(self, srv: FakeServer) -> list[str]:
        return ["--base-url", f"http://127.0.0.1:{srv.port}", "--system-tokens", "50",
                "--max-tokens", "6", "--quiet"]

    def test_chat_concurrency_with_a_failure(self):
        with FakeServer("chunked", fail_marker="Request 2.") as srv:
            rc, rep, _ = run_cli(self.base(srv) + ["--concurrency", "3", "--num-requests", "7",
                                                    "--api-key", "sekret", "--label", "fake", "--engine", "fake"])
        self.assertEqual(rc, 1)  # a failure makes the exit code 1
        self.assertEqual(rep["schema"], "fak-bench-serve/1")
        self.assertEqual((rep["label"], rep["engine"]), ("fake", "fake"))
        self.assertEqual(rep["served_models"], ["fake-model"])
        self.assertEqual(rep["parameters"]["model"], "fake-model")  # from GET /v1/models
        self.assertEqual(rep["parameters"]["api_key"], "set")
        self.assertNotIn("sekret", json.dumps(rep))
        self.assertIn("--api-key '***'", rep["command"])
        r = rep["results"]
        self.assertEqual((r["completed"], r["failed"]), (6, 1))
        self.assertEqual(len(r["errors"]), 1)
        self.assertTrue(next(iter(r["errors"])).startswith("HTTP 500"), r["errors"])
        self.assertEqual(r["total_output_tokens"], 36)
        self.assertEqual(r["output_tokens_source"], ["usage"])
        self.assertEqual(r["output_tokens_not_max"], 0)
        self.assertEqual(r["total_cached_tokens"], 6 * 990)
        self.assertGreater(r["prompt_tokens_min"], 1000)
        # Timing: TTFT >= the server's first delay, ITL about the gap.
        self.assertGreaterEqual(r["ttft_ms"]["p50"], FIRST_DELAY * 1000 * 0.95)
        self.assertLess(r["ttft_ms"]["p50"], FIRST_DELAY * 1000 + 150)
        self.assertEqual(r["itl_ms"]["count"], 6 * 5)
        self.assertGreaterEqual(r["itl_ms"]["p50"], GAP * 1000 * 0.8)
        self.assertLess(r["itl_ms"]["p50"], GAP * 1000 + 40)
        self.assertGreaterEqual(r["e2e_ms"]["min"], (FIRST_DELAY + 5 * GAP) * 1000 * 0.95)
        self.assertAlmostEqual(r["output_tok_s"], 36 / r["wall_s"], delta=0.01)
        rows = rep["requests"]
        self.assertEqual([x["index"] for x in rows], list(range(7)))
        self.assertFalse(rows[2]["ok"])
        self.assertEqual(rows[2]["status"], 500)
        self.assertEqual(rows[0]["finish_reason"], "length")
        self.assertTrue(rows[0]["done"])
        self.assertEqual(rows[0]["content_chunks"], 6)
        # What the server received: 1 warm-up + 7, one system prompt, distinct users.
        self.assertEqual(len(srv.bodies), 8)
        systems = {b["messages"][0]["content"] for b in srv.bodies}
        users = {b["messages"][1]["content"] for b in srv.bodies}
        self.assertEqual(len(systems), 1)
        self.assertEqual(len(users), 8)
        for b in srv.bodies:
            self.assertEqual(b["path"], "/v1/chat/completions")
            self.assertEqual(b["auth"], "Bearer sekret")
            self.assertIs(b["stream"], True)
            self.assertEqual(b["stream_options"], {"include_usage": True})
            self.assertEqual(b["temperature"], 0)
            self.assertEqual(b["max_tokens"], 6)
            self.assertIs(b["ignore_eos"], True)
            self.assertEqual(b["model"], "fake-model")

    def test_concurrency_is_honoured(self):
        # 8 requests of ~0.08 s each: one at a time takes >= 8x, 4 at once ~2x.
        with FakeServer("chunked") as srv:
            _, one, _ = run_cli(self.base(srv) + ["--concurrency", "1", "--num-requests", "8", "--warmup", "0"])
            _, four, _ = run_cli(self.base(srv) + ["--concurrency", "4", "--num-requests", "8", "--warmup", "0"])
        self.assertGreater(one["results"]["wall_s"], 8 * (FIRST_DELAY + 5 * GAP) * 0.95)
        self.assertLess(four["results"]["wall_s"], one["results"]["wall_s"] * 0.6)

    def test_completions_close_delimited_without_usage(self):
        # HTTP/1.0-style body (no length, no chunking: read to EOF), no usage:
        # output tokens fall back to the chunk count.
        with FakeServer("close", usage=False) as srv:
            rc, rep, err = run_cli(self.base(srv)[:-1] + ["--endpoint", "completions", "--model", "m",
                                                          "--request-rate", "200", "--num-requests", "5",
                                                          "--no-ignore-eos"])
        self.assertEqual(rc, 0, err)
        r = rep["results"]
        self.assertEqual((r["completed"], r["failed"]), (5, 0))
        self.assertEqual(r["output_tokens_source"], ["chunks"])
        self.assertEqual(r["total_output_tokens"], 30)
        self.assertIsNone(r["total_cached_tokens"])
        self.assertIn("serve:", err)  # the stderr table
        self.assertIn("ttft", err)
        for b in srv.bodies:
            self.assertEqual(b["path"], "/v1/completions")
            self.assertNotIn("ignore_eos", b)
            self.assertIn("prompt", b)
            self.assertEqual(b["model"], "m")

    def test_stream_failures(self):
        for mode, want in (("truncated", "without [DONE]"), ("error-event", "error event: engine failed")):
            with self.subTest(mode=mode), FakeServer(mode) as srv:
                rc, rep, _ = run_cli(self.base(srv) + ["--num-requests", "2", "--warmup", "0"])
                self.assertEqual(rc, 1)
                self.assertEqual(rep["results"]["failed"], 2)
                self.assertIn(want, next(iter(rep["results"]["errors"])))

    def test_no_done_but_finish_reason_is_ok(self):
        with FakeServer("no-done") as srv:
            rc, rep, _ = run_cli(self.base(srv) + ["--num-requests", "2", "--warmup", "0"])
        self.assertEqual(rc, 0)
        self.assertEqual(rep["results"]["completed"], 2)
        self.assertFalse(rep["requests"][0]["done"])

    def test_connection_refused_is_a_failure(self):
        with FakeServer() as srv:
            port = srv.port
        res = asyncio.run(serve.run_one(0, {"x": 1}, serve.Config("127.0.0.1", port, "/v1/completions", {}, 5.0)))
        self.assertFalse(res.ok)
        self.assertIn("Error", res.error)


def serve_report(engine: str, label: str, conc: int, tok_s: float, ttft: float) -> dict:
    return {
        "schema": "fak-bench-serve/1", "engine": engine, "label": label,
        "parameters": {"concurrency": conc, "request_rate": None, "endpoint": "chat", "max_tokens": 64,
                       "system_tokens": 1024, "num_requests": 32, "model": "m"},
        "results": {"output_tok_s": tok_s, "requests_per_s": tok_s / 64, "completed": 32, "failed": 0,
                    "ttft_ms": {"p50": ttft, "p95": ttft * 2}, "itl_ms": {"p50": 10.0}, "e2e_ms": {"p50": 900.0}},
    }


class TestCompareServe(unittest.TestCase):
    def test_ratios_vs_fastest_llama_server(self):
        reps = [
            ("fak-c8.json", serve_report("fak", "fak", 8, 300.0, 50.0)),
            ("ls-on-c8.json", serve_report("llama-server", "llama-server -fa on", 8, 100.0, 200.0)),
            ("ls-off-c8.json", serve_report("llama-server", "llama-server -fa off", 8, 120.0, 150.0)),
            ("fak-c1.json", serve_report("fak", "fak", 1, 80.0, 20.0)),
            ("ls-on-c1.json", serve_report("llama-server", "llama-server -fa on", 1, 40.0, 60.0)),
        ]
        with tempfile.TemporaryDirectory() as d:
            paths = []
            for name, r in reps:
                p = Path(d) / name
                p.write_text(json.dumps(r))
                paths.append(p)
            table = compare_serve.compare([compare_serve.load(p) for p in paths])
            out = io.StringIO()
            from contextlib import redirect_stdout
            with redirect_stdout(out):
                rc = compare_serve.main([str(p) for p in paths])
        self.assertEqual(rc, 0)
        groups = {g["concurrency"]: g for g in table["groups"]}
        self.assertEqual(groups[8]["reference"], "llama-server -fa off")
        rows8 = {r["label"]: r for r in groups[8]["rows"]}
        self.assertAlmostEqual(rows8["fak"]["output_tok_s_ratio"], 2.5)
        self.assertAlmostEqual(rows8["fak"]["ttft_p50_ratio"], 50.0 / 150.0)
        self.assertAlmostEqual(rows8["llama-server -fa on"]["output_tok_s_ratio"], 100 / 120)
        self.assertAlmostEqual(groups[1]["rows"][0]["output_tok_s_ratio"], 2.0)
        text = out.getvalue()
        self.assertIn("concurrency 8", text)
        self.assertIn("2.50", text)

    def test_compare_py_serve_mode(self):
        import compare
        from contextlib import redirect_stdout
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "a.json"
            p.write_text(json.dumps(serve_report("llama-server", "llama-server -fa on", 8, 100.0, 200.0)))
            out = io.StringIO()
            with redirect_stdout(out):
                rc = compare.main(["serve", str(p), "--json"])
        self.assertEqual(rc, 0)
        self.assertEqual(json.loads(out.getvalue())["groups"][0]["reference"], "llama-server -fa on")

    def test_no_llama_server_reference(self):
        t = compare_serve.compare([(Path("a.json"), serve_report("fak", "fak", 8, 300.0, 50.0))])
        self.assertIsNone(t["groups"][0]["reference"])
        self.assertIsNone(t["groups"][0]["rows"][0]["output_tok_s_ratio"])

    def test_bad_report(self):
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "x.json"
            p.write_text('{"schema": "other"}')
            with self.assertRaises(compare_serve.CompareError):
                compare_serve.load(p)


if __name__ == "__main__":
    unittest.main()
