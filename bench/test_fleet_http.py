"""Tests of bench/fleet_http.py (the fleet workload over HTTP).

The pure parts (request bodies, the token layout, SSE parsing, statistics,
the report) are checked directly; a tiny in-process fake server (both
APIs: fak's sessions and llama-server's /completion) checks that each
agent's turns send the right ids and that llama-server prompts carry the
whole history. No model, no network beyond 127.0.0.1; a few seconds:

    python3 -m unittest bench/test_fleet_http.py
"""

from __future__ import annotations

import io
import json
import sys
import threading
import unittest
from contextlib import redirect_stderr
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fleet_http as fh  # noqa: E402

wl = fh.wl
SHAPE = wl.FleetShape(prefix=6, turns=3, agents=2, decode=4, result=5)
IDS = wl.lcg_ids(1000, SHAPE.stream_len())


class PureParts(unittest.TestCase):
    def test_turn_ids_are_turn_major(self) -> None:
        # stream[P + (t*A + a)*R + 1 ..]: turn 1, agent 0 follows turn 0, agent 1.
        self.assertEqual(fh.turn_ids(SHAPE, IDS, 0, 0), IDS[6:11])
        self.assertEqual(fh.turn_ids(SHAPE, IDS, 0, 1), IDS[11:16])
        self.assertEqual(fh.turn_ids(SHAPE, IDS, 1, 0), IDS[16:21])
        self.assertEqual(fh.turn_ids(SHAPE, IDS, 2, 1), IDS[31:36])
        self.assertEqual(len(IDS), 36)

    def test_lcg_matches_the_rust_stream(self) -> None:
        # The first ids of fak_bench::LcgIds for n_vocab 49152.
        state, out = wl.LCG_STATE0, []
        for _ in range(3):
            state = (state * wl.LCG_MUL + wl.LCG_INC) & wl.MASK64
            out.append((state >> 33) % 49152)
        self.assertEqual(wl.lcg_ids(49152, 3), out)

    def test_bodies(self) -> None:
        b = fh.fak_turn_body(SHAPE, IDS, 1, 1)
        self.assertEqual(b["prompt"], IDS[21:26])
        self.assertEqual((b["max_tokens"], b["temperature"], b["ignore_eos"], b["stream"]), (4, 0, True, True))
        hist = [1, 2, 3]
        b = fh.llama_turn_body(SHAPE, IDS, hist, 1, 1)
        self.assertEqual(b["prompt"], [1, 2, 3] + IDS[21:26])
        self.assertEqual((b["id_slot"], b["cache_prompt"], b["n_predict"], b["return_tokens"]), (1, True, 4, True))
        self.assertEqual(hist, [1, 2, 3], "the history is not changed")

    def test_fak_generated_from_session_tokens(self) -> None:
        toks = list(range(6 + 3 * (5 + 4)))
        g = fh.fak_generated(SHAPE, toks)
        self.assertEqual(g, [[11, 12, 13, 14], [20, 21, 22, 23], [29, 30, 31, 32]])
        with self.assertRaises(fh.BenchError):
            fh.fak_generated(SHAPE, toks[:-1])

    def test_sse_events_across_pieces(self) -> None:
        stream = [b'data: {"a": 1}\n', b"\ndata: [DO", b"NE]\r\n\r\n", b'data: {"tail": 2}']
        self.assertEqual(list(fh.sse_events(iter(stream))), ['{"a": 1}', "[DONE]", '{"tail": 2}'])

    def test_parse_chunk(self) -> None:
        c = fh.parse_chunk("fak", json.dumps({"choices": [{"text": "hi", "finish_reason": None}]}))
        self.assertEqual((c.text, c.done), ("hi", False))
        c = fh.parse_chunk("fak", json.dumps({"choices": [{"text": "", "finish_reason": "length"}]}))
        self.assertTrue(c.done)
        c = fh.parse_chunk("llama-server", json.dumps({"content": "x", "tokens": [7], "stop": False}))
        self.assertEqual((c.text, c.tokens, c.done), ("x", [7], False))
        self.assertTrue(fh.parse_chunk("fak", "[DONE]").done)
        self.assertIsNotNone(fh.parse_chunk("fak", json.dumps({"error": {"message": "no"}})).error)
        with self.assertRaises(fh.BenchError):
            fh.parse_chunk("fak", "{not json")

    def test_prompt_counts_from_each_server(self) -> None:
        # fak: the usage event after the finish (stream_options.include_usage).
        usage = {"choices": [], "usage": {"prompt_tokens": 1189, "completion_tokens": 32,
                                          "prompt_tokens_details": {"cached_tokens": 1124}}}
        c = fh.parse_chunk("fak", json.dumps(usage))
        self.assertEqual((c.prompt_tokens, c.prompt_computed), (1189, 65))
        self.assertIsNone(fh.parse_chunk("fak", json.dumps({"choices": [], "usage": None})).prompt_computed)
        # llama-server: timings of the last event.
        last = {"content": "", "stop": True, "timings": {"prompt_n": 97, "cache_n": 1120}}
        c = fh.parse_chunk("llama-server", json.dumps(last))
        self.assertEqual((c.prompt_tokens, c.prompt_computed, c.done), (1217, 97, True))
        events = [b'data: {"choices": [{"text": "a", "finish_reason": "length"}]}\n\n',
                  ("data: " + json.dumps(usage) + "\n\n").encode(), b"data: [DONE]\n\n"]
        r = fh.run_turn("fak", iter(events), 0.0, lambda: 1.0)
        self.assertEqual((r.prompt_tokens, r.prompt_computed), (1189, 65))
        self.assertEqual(fh.fak_turn_body(SHAPE, list(range(10_000)), 0, 0)["stream_options"],
                         {"include_usage": True})

    def test_report_sums_prompt_counts_over_the_turns_that_have_them(self) -> None:
        turns = [fh.Turn(0, t, 0.01, 0.02, [], 100 + t, 10 + t) for t in range(3)]
        r = fh.report("fak", "http://x", SHAPE, 1000, turns, 1.0, 0.0)
        p = r["prompt_tokens"]
        self.assertEqual((p["turns_counted"], p["total_sent"], p["total_computed"]), (3, 303, 33))
        self.assertEqual((p["computed_per_turn"]["min"], p["computed_per_turn"]["max"]), (10, 12))
        self.assertEqual((r["turns_final_error"], r["final_error"]), (0, None))
        turns[1].prompt_computed = None
        turns[1].final_error = "boom"
        r = fh.report("fak", "http://x", SHAPE, 1000, turns, 1.0, 0.0)
        p = r["prompt_tokens"]
        self.assertEqual((p["turns_counted"], p["total_sent"], p["total_computed"]), (2, 202, 22))
        self.assertEqual((r["turns_final_error"], r["final_error"]), (1, "boom"))
        for t in turns:
            t.prompt_computed = None
        self.assertIsNone(fh.report("fak", "http://x", SHAPE, 1000, turns, 1.0, 0.0)["prompt_tokens"])

    def test_llama_server_chat_parse_error_of_the_last_event_ends_the_turn(self) -> None:
        # Regression: llama-server 0.3.30 fails the last event of a turn whose
        # text ends inside a UTF-8 sequence (bounded-long T40 A8, SmolLM2).
        toks = [b'data: {"content": "a", "tokens": [5, 6], "stop": false}\n\n']
        err = [b'data: {"error": {"code": 500, "message": "The model produced output that does not '
               b'match the expected Content-only format", "type": "server_error"}}\n\n']
        r = fh.run_turn("llama-server", iter(toks + err), 0.0, lambda: 1.0)
        self.assertEqual(r.generated, [5, 6])
        self.assertIn("Content-only", r.final_error or "")
        self.assertEqual((r.prompt_tokens, r.prompt_computed), (None, None))
        # Any other error, or the same one from fak, fails the run.
        other = [b'data: {"error": {"code": 500, "message": "boom"}}\n\n']
        with self.assertRaises(fh.BenchError):
            fh.run_turn("llama-server", iter(toks + other), 0.0, lambda: 1.0)
        with self.assertRaises(fh.BenchError):
            fh.run_turn("fak", iter(err), 0.0, lambda: 1.0)

    def test_run_turn_measures_the_first_chunk(self) -> None:
        times = iter([1.5, 9.0])
        events = [b'data: {"choices": [{"text": ""}]}\n\n', b'data: {"choices": [{"text": "a"}]}\n\n', b"data: [DONE]\n\n"]
        r = fh.run_turn("fak", iter(events), 1.0, lambda: next(times))
        ttft, gen = r.ttft_s, r.generated
        self.assertEqual((ttft, gen), (0.5, []))
        err = [b'data: {"error": {"message": "boom"}}\n\n']
        with self.assertRaises(fh.BenchError):
            fh.run_turn("fak", iter(err), 0.0, lambda: 0.0)

    def test_percentile_and_summary(self) -> None:
        self.assertEqual(fh.percentile([], 50), 0.0)
        self.assertEqual(fh.percentile([3, 1, 2, 4], 50), 2)
        self.assertEqual(fh.percentile([3, 1, 2, 4], 95), 4)
        s = fh.summary_ms([0.001, 0.003])
        self.assertEqual((s["n"], s["min"], s["max"], s["mean"]), (2, 1.0, 3.0, 2.0))
        self.assertEqual(fh.summary_ms([]), {"n": 0})

    def test_report(self) -> None:
        turns = [fh.Turn(a, t, 0.01, 0.02, [a, t, 0, 1]) for a in range(2) for t in range(3)]
        r = fh.report("llama-server", "http://x", SHAPE, 1000, turns, 2.0, 0.0)
        self.assertEqual(r["schema"], fh.SCHEMA)
        self.assertEqual(r["agent_turns_per_s"], 3.0)
        gen = [[[a, t, 0, 1] for t in range(3)] for a in range(2)]
        self.assertEqual(r["generated_sha256"], wl.generated_sha256(gen))
        no_ids = [fh.Turn(t.agent, t.turn, t.ttft_s, t.turn_s, []) for t in turns]
        self.assertIsNone(fh.report("fak", "http://x", SHAPE, 1000, no_ids, 2.0, 0.1)["generated_sha256"])


class Fake(BaseHTTPRequestHandler):
    """fak's session endpoints and llama-server's /completion; generated
    ids are 900 + turn number of the agent's slot/session."""

    bodies: list[tuple[str, dict]] = []
    gets: list[tuple[str, None]] = []
    lock = threading.Lock()
    n_sessions = 0

    def log_message(self, *a: object) -> None:
        pass

    def _json(self, obj: dict) -> None:
        raw = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def _sse(self, events: list[dict]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        for e in events:
            self.wfile.write(f"data: {json.dumps(e)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")
        self.close_connection = True

    def do_GET(self) -> None:
        # A session after the run: prefix, then per turn R ids and D generated.
        toks = list(range(SHAPE.prefix + SHAPE.turns * (SHAPE.result + SHAPE.decode)))
        Fake.gets.append((self.path, None))
        self._json({"id": self.path, "token_ids": toks})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with Fake.lock:
            Fake.bodies.append((self.path, body))
            Fake.n_sessions += 1
            sid = f"sess_{Fake.n_sessions:032x}"
        if self.path == "/v1/sessions" or self.path.endswith("/fork"):
            self._json({"id": sid, "tokens": 6})
        elif self.path.endswith("/completions"):
            self._sse([{"choices": [{"text": "t", "finish_reason": None}]}] * body["max_tokens"])
        elif self.path == "/completion":
            n = body["n_predict"]
            evs = [{"content": "t", "tokens": [900 + k], "stop": False} for k in range(n - 1)]
            self._sse(evs + [{"content": "t", "tokens": [900 + n - 1], "stop": True}])
        else:
            self.send_error(404)


class KeepAliveFake(Fake):
    """llama-server's way of ending a stream, as seen on a real one: HTTP/1.1
    chunked SSE with no `Connection: close`, bytes after the last event (so
    a client that stops at `stop` leaves the response unread), then the
    socket is closed. Reusing that connection failed with a broken pipe."""

    protocol_version = "HTTP/1.1"

    def _sse(self, events: list[dict]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for e in events:
            piece = f"data: {json.dumps(e)}\n\n".encode()
            self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
        self.wfile.flush()
        tail = b"data: [DONE]\n\n"
        self.wfile.write(f"{len(tail):x}\r\n".encode() + tail + b"\r\n0\r\n\r\n")
        self.close_connection = True


class SilentCloseFake(Fake):
    """Keep-alive HTTP/1.1 whose JSON replies say nothing of closing, after
    which the server closes the connection anyway (what hyper did to a fork
    whose `{}` body its handler never read): the client's next request on
    it hits a closed socket."""

    protocol_version = "HTTP/1.1"

    def _json(self, obj: dict) -> None:
        super()._json(obj)
        self.close_connection = True


class AgainstFakeServer(unittest.TestCase):
    def setUp(self) -> None:
        Fake.bodies = []
        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), Fake)
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}"

    def tearDown(self) -> None:
        self.srv.shutdown()
        self.srv.server_close()

    def args(self, engine: str) -> list[str]:
        return ["--engine", engine, "--url", self.url, "--n-vocab", "1000", "--prefix", "6", "--turns", "3",
                "--agents", "2", "--decode", "4", "--result", "5"]

    def test_fak_sessions(self) -> None:
        rep = fh.run(fh.parse_args(self.args("fak")))
        self.assertEqual(rep["turns_done"], 6)
        paths = [p for p, _ in Fake.bodies]
        self.assertEqual(paths[0], "/v1/sessions")
        self.assertEqual(Fake.bodies[0][1]["prompt"], IDS[:6])
        self.assertEqual(sum(p.endswith("/fork") for p in paths), 2)
        turns = [(p, b) for p, b in Fake.bodies if p.endswith("/completions")]
        self.assertEqual(len(turns), 6)
        sent = sorted(tuple(b["prompt"]) for _, b in turns)
        want = sorted(tuple(fh.turn_ids(SHAPE, IDS, t, a)) for t in range(3) for a in range(2))
        self.assertEqual(sent, want)
        self.assertTrue(any(p.endswith("?include=tokens") for p, _ in Fake.gets))
        self.assertIsNotNone(rep["generated_sha256"])

    def test_llama_server_history(self) -> None:
        rep = fh.run(fh.parse_args(self.args("llama-server")))
        self.assertEqual(rep["turns_done"], 6)
        agent1 = [b for p, b in Fake.bodies if p == "/completion" and b["id_slot"] == 1]
        self.assertEqual(len(agent1), 3)
        gen = [900, 901, 902, 903]
        r = [fh.turn_ids(SHAPE, IDS, t, 1) for t in range(3)]
        self.assertEqual(agent1[0]["prompt"], IDS[:6] + r[0])
        self.assertEqual(agent1[2]["prompt"], IDS[:6] + r[0] + gen + r[1] + gen + r[2])
        self.assertIsNotNone(rep["generated_sha256"])

    def test_a_closed_stream_connection_is_reopened(self) -> None:
        srv = ThreadingHTTPServer(("127.0.0.1", 0), KeepAliveFake)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        try:
            self.url = f"http://127.0.0.1:{srv.server_address[1]}"
            rep = fh.run(fh.parse_args(self.args("llama-server")))
            self.assertEqual(rep["turns_done"], 6)
        finally:
            srv.shutdown()
            srv.server_close()

    def test_a_connection_closed_after_a_reply_is_reopened_once(self) -> None:
        srv = ThreadingHTTPServer(("127.0.0.1", 0), SilentCloseFake)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        try:
            self.url = f"http://127.0.0.1:{srv.server_address[1]}"
            rep = fh.run(fh.parse_args(self.args("fak")))
            self.assertEqual(rep["turns_done"], 6)
        finally:
            srv.shutdown()
            srv.server_close()

    def test_a_failing_server_is_an_error(self) -> None:
        argv = ["--engine", "fak", "--url", self.url + "/nowhere", "--n-vocab", "10", "--turns", "1",
                "--agents", "1", "--prefix", "2", "--decode", "1", "--result", "1"]
        err = io.StringIO()
        with redirect_stderr(err):
            self.assertEqual(fh.main(argv), 1)
        self.assertIn("HTTP 404", err.getvalue())

if __name__ == "__main__":
    unittest.main()
