"""Tests of bench/tools_bench.py and bench/tools_workload.py (the
tool-calling agent workload).

The classifier is fed canned answers shaped like each server's (fak
serve's and llama-server's, whole and streamed, including llama-server
leaving a Hermes call in ``content``); the schema validator, the request
bodies, the report and the table are checked directly; a tiny in-process
fake server runs whole episodes through ``run``. No model, no network
beyond 127.0.0.1:

    python3 -m unittest bench/test_tools_bench.py
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import tools_bench as tb  # noqa: E402
import tools_workload as tw  # noqa: E402

WEATHER = tw.TOOLS["weather"]
CAL = tw.TOOLS["calendar"]
GOOD_WEATHER = '{"location": "Paris", "unit": "celsius", "days": 3}'
GOOD_EVENT = {
    "title": "Design sync",
    "start": {"date": "2027-03-04", "time": "10:00"},
    "duration_minutes": 30,
    "attendees": ["Alice", "Bob"],
}


def whole(content: str | None, calls: list[tuple[str, str]] | None, finish: str = "stop", tokens: int = 20) -> dict:
    """A non-streamed chat completion as both servers shape it."""
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    if calls is not None:
        msg["tool_calls"] = [
            {"id": f"call_{k}", "type": "function", "function": {"name": n, "arguments": a}}
            for k, (n, a) in enumerate(calls)
        ]
    return {"choices": [{"index": 0, "message": msg, "finish_reason": finish}],
            "usage": {"prompt_tokens": 300, "completion_tokens": tokens}}


def chunk(delta: dict | None = None, finish: str | None = None, usage: dict | None = None) -> str:
    obj: dict[str, Any] = {"choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage is not None:
        obj["usage"] = usage
    return json.dumps(obj)


def fak_stream(name: str, args: str) -> list[str]:
    """fak serve's streamed call: a first fragment with id, type, name and
    empty arguments, then argument fragments, then the finish, usage, DONE."""
    ev = [chunk({"role": "assistant"})]
    ev.append(chunk({"tool_calls": [{"index": 0, "id": "call_ab12", "type": "function",
                                     "function": {"name": name, "arguments": ""}}]}))
    for k in range(0, len(args), 7):
        ev.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": args[k:k + 7]}}]}))
    ev.append(chunk({}, "tool_calls"))
    ev.append(chunk(None, usage={"prompt_tokens": 300, "completion_tokens": 31}))
    return ev + ["[DONE]"]


def llama_stream(name: str, args: str, content_first: str = "") -> list[str]:
    """llama-server's streamed call: id and name with the whole arguments in
    one delta, usage on the finishing chunk."""
    ev = [chunk({"role": "assistant", "content": None})]
    if content_first:
        ev.append(chunk({"content": content_first}))
    ev.append(chunk({"tool_calls": [{"index": 0, "id": "Xy9", "type": "function",
                                     "function": {"name": name, "arguments": args}}]}))
    ev.append(chunk({}, "tool_calls", usage={"completion_tokens": 28, "prompt_tokens": 310}))
    return ev + ["[DONE]"]


class Classifier(unittest.TestCase):
    def cls(self, ans: tb.Answer, tools: list = WEATHER) -> tb.Verdict:
        return tb.classify(ans, tools)

    def test_well_formed_whole_and_streamed_from_both_servers(self) -> None:
        a = tb.answer_from_json(whole(None, [("get_weather", GOOD_WEATHER)], "tool_calls"))
        v = self.cls(a)
        self.assertEqual((v.cls, v.tools_called), ("well_formed", ["get_weather"]))
        self.assertEqual((a.completion_tokens, a.calls[0].id), (20, "call_0"))
        s = tb.answer_from_events(fak_stream("get_weather", GOOD_WEATHER))
        self.assertEqual(s.calls, [tb.Call("get_weather", GOOD_WEATHER, "call_ab12")])
        self.assertEqual((s.finish_reason, s.completion_tokens, s.content), ("tool_calls", 31, ""))
        self.assertEqual(self.cls(s).cls, "well_formed")
        ll = tb.answer_from_events(llama_stream("get_weather", GOOD_WEATHER))
        self.assertEqual((self.cls(ll).cls, ll.completion_tokens, ll.calls[0].id), ("well_formed", 28, "Xy9"))

    def test_parallel_calls_are_merged_by_index(self) -> None:
        ev = [
            chunk({"tool_calls": [{"index": 0, "id": "a", "function": {"name": "get_weather", "arguments": '{"loc'}}]}),
            chunk({"tool_calls": [{"index": 1, "id": "b", "function": {"name": "get_air_quality", "arguments": ""}}]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'ation": "Oslo", "unit": "celsius"}'}}]}),
            chunk({"tool_calls": [{"index": 1, "function": {"arguments": '{"location": "Oslo"}'}}]}),
            chunk({}, "tool_calls"),
        ]
        a = tb.answer_from_events(ev)
        self.assertEqual([c.name for c in a.calls], ["get_weather", "get_air_quality"])
        self.assertEqual(json.loads(a.calls[0].arguments), {"location": "Oslo", "unit": "celsius"})
        self.assertEqual(self.cls(a).tools_called, ["get_weather", "get_air_quality"])
        self.assertEqual(self.cls(a).cls, "well_formed")
        self.assertIsNone(a.completion_tokens, "no usage chunk: unknown, not zero")

    def test_llama_server_call_left_in_content(self) -> None:
        text = '<tool_call>\n{"name": "get_weather", "arguments": {"location": "Paris"}\n</tool_call>'
        v = self.cls(tb.answer_from_json(whole(text, None)))
        self.assertEqual(v.cls, "call_in_content")
        self.assertIn("<tool_call>", v.reason)
        # A bare JSON call in the text (no tags), streamed.
        bare = '{"name": "get_weather", "arguments": {"location": "Paris", "unit": "kelvin"}}'
        ev = [chunk({"content": bare[:20]}), chunk({"content": bare[20:]}), chunk({}, "stop"), "[DONE]"]
        self.assertEqual(self.cls(tb.answer_from_events(ev)).cls, "call_in_content")
        bare_params = '{"name": "get_weather", "parameters": {"location": "Paris"}}'
        self.assertEqual(self.cls(tb.answer_from_json(whole(bare_params, None))).cls, "call_in_content")

    def test_failure_classes(self) -> None:
        def one(name: str, args: str) -> str:
            return self.cls(tb.answer_from_json(whole(None, [(name, args)], "tool_calls"))).cls

        self.assertEqual(one("get_forecast", GOOD_WEATHER), "unknown_name")
        self.assertEqual(one("get_weather", '{"location": "Paris", "unit": "celsius"'), "bad_json")
        self.assertEqual(one("get_weather", '["Paris"]'), "bad_json")
        self.assertEqual(one("get_weather", ""), "bad_json")
        self.assertEqual(one("get_weather", '{"location": "Paris", "unit": "kelvin"}'), "schema_violation")
        self.assertEqual(one("get_weather", '{"location": "Paris", "unit": "celsius", "days": 9}'), "schema_violation")
        self.assertEqual(one("get_weather", '{"location": "Paris"}'), "schema_violation")
        # The first bad call decides, even after a good one.
        two = whole(None, [("get_weather", GOOD_WEATHER), ("get_air_quality", "{}")], "tool_calls")
        v = self.cls(tb.answer_from_json(two))
        self.assertEqual(v.cls, "schema_violation")
        self.assertIn("get_air_quality", v.reason)

    def test_no_call_truncated_error(self) -> None:
        self.assertEqual(self.cls(tb.answer_from_json(whole("It is sunny.", None))).cls, "no_call")
        self.assertEqual(self.cls(tb.answer_from_json(whole("It is sunny.", []))).cls, "no_call")
        self.assertEqual(self.cls(tb.answer_from_json(whole("<tool_call>\n{\"na", None, "length"))).cls, "truncated")
        self.assertEqual(self.cls(tb.answer_from_json({"error": {"message": "boom"}})).cls, "error")
        self.assertEqual(self.cls(tb.answer_from_json({"choices": []})).cls, "error")
        self.assertEqual(self.cls(tb.answer_from_events([json.dumps({"error": {"message": "x"}})])).cls, "error")
        self.assertEqual(self.cls(tb.answer_from_events(["{not json"])).cls, "error")

    def test_arguments_as_an_object_are_accepted_as_json(self) -> None:
        obj = whole(None, None, "tool_calls")
        obj["choices"][0]["message"]["tool_calls"] = [
            {"id": "x", "function": {"name": "get_weather", "arguments": json.loads(GOOD_WEATHER)}}
        ]
        self.assertEqual(self.cls(tb.answer_from_json(obj)).cls, "well_formed")

    def test_final_classes(self) -> None:
        self.assertEqual(tb.classify_final(tb.answer_from_json(whole("It is 21C in Paris.", None))), "answer")
        self.assertEqual(tb.classify_final(tb.answer_from_json(whole("", None))), "empty")
        self.assertEqual(tb.classify_final(tb.answer_from_json(whole(None, [("get_weather", "{}")]))), "call_again")
        self.assertEqual(tb.classify_final(tb.Answer(error="x")), "error")


class Validator(unittest.TestCase):
    def test_nested_arrays_enums_bounds(self) -> None:
        schema = CAL[0]["function"]["parameters"]
        self.assertEqual(tw.validate(GOOD_EVENT, schema), [])
        bad = json.loads(json.dumps(GOOD_EVENT))
        bad["start"].pop("time")
        bad["attendees"] = []
        bad["duration_minutes"] = 600
        bad["room"] = "B2"
        errs = tw.validate(bad, schema)
        self.assertEqual(len(errs), 4, errs)
        self.assertTrue(any("$.start: missing required 'time'" == e for e in errs), errs)
        self.assertTrue(any("fewer than 1 items" in e for e in errs), errs)
        self.assertTrue(any("600 > maximum 480" in e for e in errs), errs)
        self.assertTrue(any("unexpected property 'room'" in e for e in errs), errs)
        cart = tw.TOOLS["shop"][0]["function"]["parameters"]
        self.assertEqual(tw.validate({"items": [{"sku": "SKU-1", "quantity": 2}]}, cart), [])
        errs = tw.validate({"items": [{"sku": "SKU-1", "quantity": 0}, {"sku": ""}]}, cart)
        self.assertEqual(
            errs,
            ["$.items[0].quantity: 0 < minimum 1", "$.items[1]: missing required 'quantity'",
             "$.items[1].sku: shorter than 1"],
        )

    def test_types(self) -> None:
        self.assertEqual(tw.validate(3.0, {"type": "integer"}), [])
        self.assertNotEqual(tw.validate(3.5, {"type": "integer"}), [])
        self.assertNotEqual(tw.validate(True, {"type": "integer"}), [])
        self.assertNotEqual(tw.validate(True, {"type": "number"}), [])
        self.assertNotEqual(tw.validate("3", {"type": "number"}), [])
        self.assertEqual(tw.validate(2, {"type": "number", "minimum": 0}), [])
        self.assertNotEqual(tw.validate(-0.5, {"type": "number", "minimum": 0}), [])

    def test_unsupported_keyword_is_refused(self) -> None:
        with self.assertRaises(ValueError):
            tw.validate("x", {"type": "string", "pattern": "^x$"})

    def test_every_tool_schema_is_checkable_and_tasks_expect_declared_tools(self) -> None:
        for sc, tools in tw.TOOLS.items():
            for t in tools:
                # Raises on a keyword the validator does not check.
                tw.validate({}, t["function"]["parameters"])
                self.assertIn(t["function"]["name"], tw.RESULTS)
        seen = set()
        for i in range(10):
            task = tw.make_task(0, i)
            self.assertEqual(task, tw.make_task(0, i), "deterministic")
            self.assertIn(task.expected_tool, [t["function"]["name"] for t in task.tools])
            seen.add(task.scenario)
        self.assertEqual(seen, set(tw.SCENARIOS))
        self.assertNotEqual(tw.make_task(0, 0).user, tw.make_task(1, 0).user)


SET = tb.Settings("m", "required", False, 256, 64)


class Bodies(unittest.TestCase):
    def test_call_and_final_bodies(self) -> None:
        task = tw.make_task(0, 0)
        b = tb.call_body(SET, task)
        self.assertEqual((b["tool_choice"], b["max_tokens"], b["temperature"]), ("required", 256, 0))
        self.assertNotIn("stream", b)
        self.assertEqual([m["role"] for m in b["messages"]], ["system", "user"])
        ans = tb.Answer(calls=[tb.Call("get_weather", GOOD_WEATHER, ""), tb.Call("get_air_quality", "{}", "id7")])
        f = tb.final_body(tb.Settings("m", "required", True, 256, 64), task, ans)
        self.assertEqual((f["tool_choice"], f["max_tokens"], f["stream"]), ("auto", 64, True))
        self.assertEqual(f["stream_options"], {"include_usage": True})
        roles = [m["role"] for m in f["messages"]]
        self.assertEqual(roles, ["system", "user", "assistant", "tool", "tool"])
        asst = f["messages"][2]
        self.assertIsNone(asst["content"])
        self.assertEqual([c["id"] for c in asst["tool_calls"]], ["call_0", "id7"])
        self.assertEqual(asst["tool_calls"][0]["function"]["arguments"], GOOD_WEATHER)
        self.assertEqual([m["tool_call_id"] for m in f["messages"][3:]], ["call_0", "id7"])
        self.assertEqual(json.loads(f["messages"][3]["content"]), tw.RESULTS["get_weather"])


def ep(i: int, cls: str, final: str | None, tools: list[str] | None = None, tok: int | None = 10) -> tb.Episode:
    return tb.Episode(i, "weather", "get_weather", cls, "r" if cls != "well_formed" else "",
                      tools if tools is not None else (["get_weather"] if cls == "well_formed" else []),
                      0.1 * (i + 1), tok, "", [], final, 0.05 if final else None, 5 if final else None, "", 0.2)


class Report(unittest.TestCase):
    def rep(self, engine: str, eps: list[tb.Episode], wall: float = 2.0, stream: bool = False) -> dict:
        meta = {"engine": engine, "label": engine, "tool_choice": "auto", "stream": stream, "concurrency": 1}
        return tb.report(meta, eps, wall)

    def test_counts_shares_throughput(self) -> None:
        eps = [ep(0, "well_formed", "answer"), ep(1, "well_formed", "call_again", ["get_air_quality"]),
               ep(2, "call_in_content", None), ep(3, "no_call", None, tok=None)]
        r = self.rep("fak", eps)
        self.assertEqual(r["calls"]["classes"]["well_formed"], 2)
        self.assertEqual(r["calls"]["classes"]["call_in_content"], 1)
        self.assertEqual(r["calls"]["well_formed_share"], 0.5)
        self.assertEqual(r["calls"]["expected_tool_share"], 0.25)
        self.assertEqual(r["final"], {"answer": 1, "call_again": 1, "empty": 0, "error": 0})
        self.assertEqual(r["requests"], 6)
        self.assertEqual(r["requests_per_s"], 3.0)
        self.assertEqual((r["output_tokens"], r["usage_missing"]), (10 * 3 + 5 * 2, 1))
        self.assertEqual(r["output_tok_per_s"], 20.0)
        self.assertEqual(r["latency_ms"]["call_turn"]["n"], 4)
        self.assertEqual(r["latency_ms"]["final_turn"]["n"], 2)
        self.assertEqual(sorted(r["examples"]), ["call_in_content", "no_call"])
        self.assertEqual(len(r["per_episode"]), 4)

    def test_table_pools_rounds_and_divides_by_llama_server(self) -> None:
        f1 = self.rep("fak", [ep(0, "well_formed", "answer")] * 4, wall=1.0)
        f2 = self.rep("fak", [ep(0, "well_formed", "answer")] * 4, wall=2.0)
        l1 = self.rep("llama-server", [ep(0, "well_formed", "answer")] * 2 + [ep(1, "call_in_content", None)] * 2,
                      wall=3.0)
        s1 = self.rep("fak", [ep(0, "no_call", None)], wall=1.0, stream=True)
        t = tb.table([f1, l1, f2, s1]).splitlines()
        self.assertEqual(len(t), 5, t)
        fak = next(ln for ln in t if "| fak |" in ln and "| no |" in ln)
        cells = [c.strip() for c in fak.split("|")[1:-1]]
        self.assertEqual(cells[4:7], ["2", "8", "8/8 (100%)"])
        # fak req/s: 8 and 4 -> mean 6; llama-server 6/3 = 2 -> 3.00x.
        self.assertEqual(cells[10], "6.00 (4.00-8.00)")
        self.assertEqual(cells[13], "3.00x")
        ll = next(ln for ln in t if "| llama-server |" in ln)
        self.assertIn("2/4 (50%)", ll)
        self.assertIn("call_in_content 2", ll)
        self.assertTrue(ll.rstrip().endswith("| - | - |"))
        streamed = next(ln for ln in t if "| yes |" in ln)
        self.assertIn("no_call 1", streamed)
        self.assertTrue(streamed.rstrip().endswith("| - | - |"), "no llama-server row to divide by")


class FakeServer(BaseHTTPRequestHandler):
    """Answers a call turn with get_weather (valid or not by the task text)
    and a final turn with text; whole or streamed as asked."""

    bodies: list[dict] = []

    def log_message(self, *a: Any) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        FakeServer.bodies.append(body)
        final = body["messages"][-1]["role"] == "tool"
        if final:
            events, obj = [chunk({"content": "Done."}, "stop", {"completion_tokens": 2}), "[DONE]"], whole("Done.", None)
        else:
            args = GOOD_WEATHER if "weather" in body["messages"][1]["content"] else '{"oops": 1}'
            events, obj = fak_stream("get_weather", args), whole(None, [("get_weather", args)], "tool_calls")
        if body.get("stream"):
            raw = "".join(f"data: {e}\n\n" for e in events).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
        else:
            raw = json.dumps(obj).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


class EndToEnd(unittest.TestCase):
    def test_run_against_a_fake_server(self) -> None:
        srv = ThreadingHTTPServer(("127.0.0.1", 0), FakeServer)
        th = threading.Thread(target=srv.serve_forever, daemon=True)
        th.start()
        try:
            for stream in (False, True):
                FakeServer.bodies = []
                args = argparse.Namespace(
                    base_url=f"http://127.0.0.1:{srv.server_address[1]}", engine="fake", label=None, model="m",
                    tool_choice="auto", stream=stream, concurrency=2, num_requests=10, warmup=1, max_tokens=256,
                    final_max_tokens=64, seed=0, round=1, timeout=10.0,
                )
                r = tb.run(args)
                # Tasks 0 and 5 of the 10 are weather tasks: only they get a
                # valid get_weather call; the others call a tool not declared
                # for their scenario, or with arguments that break its schema.
                self.assertEqual(r["episodes"], 10)
                self.assertEqual(r["calls"]["classes"]["well_formed"], 2, r["calls"])
                self.assertEqual(r["final"]["answer"], 2)
                self.assertEqual(r["requests"], 12)
                self.assertEqual(len(FakeServer.bodies), 12 + 2, "the warm-up episode is sent but not counted")
                self.assertEqual(r["stream"], stream)
                self.assertEqual(all(b.get("stream", False) == stream for b in FakeServer.bodies), True)
        finally:
            srv.shutdown()


if __name__ == "__main__":
    unittest.main()
