"""Tool calling through the official ``openai`` client, with Qwen2.5-Coder
0.5B (its template's Hermes ``<tool_call>`` syntax): ``tool_choice``
required, named and auto, streamed and not; streamed ``delta.tool_calls``
reassembled by the client's own stream helper and by hand, each call's
arguments parsed and validated against the tool's schema with
``jsonschema``; the agent loop (call, tool result, answer); and the 400s
(``openai.BadRequestError``): a schema that does not compile, an unknown
``tool_choice`` function, a tool message answering no call.
"""

from __future__ import annotations

import json
import os
import unittest
from pathlib import Path

import jsonschema
import openai

from test_openai_client import ROOT, FakServer, client

QWEN = Path(os.environ.get("FAK_TEST_TOOLS_MODEL", ROOT / "models" / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"))

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 40},
                "unit": {"enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "The local time in a time zone.",
        "parameters": {
            "type": "object",
            "properties": {"zone": {"type": "string", "maxLength": 40}},
            "required": ["zone"],
        },
    },
}
TOOLS = [WEATHER, TIME]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
ASK = [{"role": "user", "content": "What is the weather in Paris, in celsius?"}]


def check(name: str, arguments: str) -> dict:
    """The arguments parse and validate under the tool's schema."""
    args = json.loads(arguments)
    jsonschema.validate(args, SCHEMAS[name])
    return args


class TestToolCalls(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = FakServer("--ctx", "2048", model=QWEN).start()
        cls.client = client(cls.server)
        cls.model = QWEN.stem

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def create(self, **kw):
        kw.setdefault("messages", ASK)
        kw.setdefault("max_tokens", 96)
        return self.client.chat.completions.create(model=self.model, tools=TOOLS, temperature=0, **kw)

    def stream_calls(self, **kw):
        """Calls reassembled from the deltas: (name, arguments) per index."""
        calls: dict[int, list[str]] = {}
        finish = None
        for chunk in self.create(stream=True, **kw):
            if not chunk.choices:
                continue
            c = chunk.choices[0]
            finish = c.finish_reason or finish
            for d in c.delta.tool_calls or []:
                if d.index not in calls:
                    self.assertTrue(d.id and d.id.startswith("call_"))
                    self.assertEqual(d.type, "function")
                    calls[d.index] = [d.function.name, ""]
                calls[d.index][1] += d.function.arguments or ""
        return [tuple(calls[i]) for i in sorted(calls)], finish

    def test_required_named_and_auto_streamed_or_not(self):
        named = {"type": "function", "function": {"name": "get_time"}}
        for choice in ["required", named, "auto"]:
            with self.subTest(choice=choice):
                r = self.create(tool_choice=choice)
                m = r.choices[0].message
                whole = [(c.function.name, c.function.arguments) for c in m.tool_calls or []]
                for c in m.tool_calls or []:
                    self.assertEqual(c.type, "function")
                    self.assertTrue(c.id.startswith("call_"))
                for name, args in whole:
                    check(name, args)
                if choice != "auto":
                    self.assertEqual(r.choices[0].finish_reason, "tool_calls")
                    self.assertIsNone(m.content)
                    self.assertTrue(whole)
                if choice == named:
                    self.assertTrue(all(n == "get_time" for n, _ in whole))
                streamed, finish = self.stream_calls(tool_choice=choice)
                self.assertEqual(streamed, whole)
                self.assertEqual(finish, r.choices[0].finish_reason)

    def test_client_stream_helper_reassembles_the_call(self):
        # openai's own accumulator (chat.completions.stream) over fak's deltas.
        with self.client.chat.completions.stream(
            model=self.model, messages=ASK, tools=TOOLS, tool_choice="required",
            temperature=0, max_tokens=96,
        ) as s:
            final = s.get_final_completion()
        calls = final.choices[0].message.tool_calls
        self.assertTrue(calls)
        for c in calls:
            check(c.function.name, c.function.arguments)

    def test_agent_loop(self):
        r = self.create(tool_choice="auto")
        m = r.choices[0].message
        self.assertEqual(r.choices[0].finish_reason, "tool_calls")
        call = m.tool_calls[0]
        self.assertEqual(call.function.name, "get_weather")
        check(call.function.name, call.function.arguments)
        messages = ASK + [
            {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
            {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temperature": 22, "sky": "sunny"})},
        ]
        r = self.create(messages=messages, tool_choice="auto", max_tokens=64)
        # Under auto the 0.5B model may call again; a text answer uses the result.
        if r.choices[0].finish_reason == "tool_calls":
            for c in r.choices[0].message.tool_calls:
                check(c.function.name, c.function.arguments)
        else:
            self.assertEqual(r.choices[0].finish_reason, "stop")
            self.assertIn("22", r.choices[0].message.content)

    def test_bad_requests(self):
        bad = {"type": "function", "function": {"name": "f", "parameters": {
            "type": "object", "properties": {"n": {"type": "integer", "minimum": 5, "maximum": 1}}, "required": ["n"]}}}
        with self.assertRaises(openai.BadRequestError) as e:
            self.client.chat.completions.create(
                model=self.model, messages=ASK, tools=[WEATHER, bad], tool_choice="required", max_tokens=8)
        self.assertIn("tools[1] (f)", str(e.exception))
        with self.assertRaises(openai.BadRequestError):
            self.create(tool_choice={"type": "function", "function": {"name": "nope"}}, max_tokens=8)
        with self.assertRaises(openai.BadRequestError):
            self.create(messages=ASK + [{"role": "tool", "tool_call_id": "call_x", "content": "1"}], max_tokens=8)


if __name__ == "__main__":
    unittest.main()
