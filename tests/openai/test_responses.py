"""The official ``openai`` Python client against ``fak serve``'s Responses
API (``POST /v1/responses``, ``GET`` and ``DELETE /v1/responses/{id}``).

SmolLM2 for text, Qwen2.5-Coder 0.5B for function tools:

* ``input`` as a string or as items: messages of every role (string content
  or ``input_text`` / ``output_text`` parts, with or without ``type``),
  ``function_call`` and ``function_call_output``; ``instructions``, a system
  message and a developer message render the same prompt;
* the output: a ``message`` with ``output_text`` (``response.output_text``),
  ``function_call`` items whose arguments are valid under the tool's schema,
  status ``completed`` or ``incomplete`` (``max_output_tokens``), usage with
  cached tokens;
* streaming: the event sequence (created, in_progress, output_item.added,
  content_part.added, output_text.delta..., output_text.done,
  content_part.done, output_item.done, completed or incomplete; the
  function_call_arguments events for calls), ``sequence_number`` counting
  from 0, the greedy streamed text equal to the non-streamed text, and the
  SDK's ``responses.stream`` accumulator;
* ``text.format`` json_schema / json_object / text; fields accepted and
  ignored (reasoning, include, prompt_cache_key, verbosity, metadata, store);
* stored responses: ``previous_response_id`` continues from the stored
  conversation's KV (its cached tokens cover the earlier prompt) and answers
  as the explicit history does; retrieve, delete, ``store=False``, and one
  API key cannot see another's responses;
* errors in OpenAI's shape (``openai.BadRequestError`` naming the field);
  the server stays healthy after them.
"""

from __future__ import annotations

import json
import os
import unittest
import urllib.request
from pathlib import Path

import jsonschema
import openai

from test_openai_client import ROOT, SERVED_NAME, FakServer, client

QWEN = Path(os.environ.get("FAK_TEST_TOOLS_MODEL", ROOT / "models" / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"))

SYSTEM = "You are a helpful assistant."
QUESTION = "What is the capital of France? Answer in one sentence."

YESNO = {
    "type": "object",
    "properties": {"answer": {"enum": ["yes", "no"]}},
    "required": ["answer"],
    "additionalProperties": False,
}
YESNO_TEXT = {"format": {"type": "json_schema", "name": "yesno", "schema": YESNO, "strict": True}}
YESNO_ASK = "Is Paris in France? Reply in JSON."

WEATHER = {
    "type": "function",
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
    "strict": True,
}
TIME = {
    "type": "function",
    "name": "get_time",
    "description": "The local time in a time zone.",
    "parameters": {
        "type": "object",
        "properties": {"zone": {"type": "string", "maxLength": 40}},
        "required": ["zone"],
        "additionalProperties": False,
    },
    "strict": True,
}
TOOLS = [WEATHER, TIME]
SCHEMAS = {t["name"]: t["parameters"] for t in TOOLS}
WEATHER_ASK = [{"role": "user", "content": "What is the weather in Paris, in celsius?"}]

TEXT_EVENTS = [
    "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
    "response.output_text.delta", "response.output_text.done", "response.content_part.done",
    "response.output_item.done",
]


def collapse(types: list[str]) -> list[str]:
    """Runs of the same event type as one."""
    return [t for i, t in enumerate(types) if i == 0 or t != types[i - 1]]


def messages_of(r) -> list:
    return [o for o in r.output if o.type == "message"]


def calls_of(r) -> list:
    return [o for o in r.output if o.type == "function_call"]


class ResponsesChecks:
    """Assertions shared by the test classes."""

    def check_usage(self, r, limit: int | None = None):
        u = r.usage
        self.assertIsNotNone(u, "no usage")
        self.assertGreater(u.input_tokens, 0)
        self.assertGreater(u.output_tokens, 0)
        self.assertEqual(u.total_tokens, u.input_tokens + u.output_tokens)
        cached = u.input_tokens_details.cached_tokens
        self.assertIsInstance(cached, int)
        self.assertGreaterEqual(cached, 0)
        self.assertLessEqual(cached, u.input_tokens)
        if limit is not None:
            self.assertLessEqual(u.output_tokens, limit)
            if r.status == "incomplete":
                self.assertEqual(r.incomplete_details.reason, "max_output_tokens")
                self.assertEqual(u.output_tokens, limit)
            else:
                self.assertEqual(r.status, "completed")

    def check_text_response(self, r, limit: int):
        self.assertEqual(r.object, "response")
        self.assertTrue(r.id, "empty id")
        self.assertIn(r.status, ("completed", "incomplete"))
        msgs = messages_of(r)
        self.assertEqual(len(msgs), 1, r.output)
        m = msgs[0]
        self.assertEqual(m.role, "assistant")
        self.assertTrue(m.id, "message item without id")
        self.assertEqual([c.type for c in m.content], ["output_text"])
        self.assertTrue(m.content[0].text, "empty text")
        self.assertEqual(r.output_text, m.content[0].text)
        self.check_usage(r, limit)

    def check_calls(self, r) -> list:
        calls = calls_of(r)
        for c in calls:
            self.assertTrue(c.call_id, "function_call without call_id")
            self.assertIn(c.name, SCHEMAS)
            jsonschema.validate(json.loads(c.arguments), SCHEMAS[c.name])
        self.assertEqual(len({c.call_id for c in calls}), len(calls), "call_ids repeat")
        return calls

    def check_stream(self, events, final_type: str):
        """Sequence numbers 0, 1, ...; one response id; the terminal event last."""
        self.assertEqual([e.sequence_number for e in events], list(range(len(events))))
        self.assertEqual(events[0].type, "response.created")
        self.assertEqual(events[0].response.status, "in_progress")
        self.assertEqual(events[-1].type, final_type)
        ids = {e.response.id for e in events if e.type.startswith("response.") and hasattr(e, "response")}
        self.assertEqual(len(ids), 1, ids)
        return events[-1].response

    def assert_healthy(self):
        with urllib.request.urlopen(self.server.base_url + "/health", timeout=5) as r:
            self.assertEqual(r.status, 200)


class TestResponses(ResponsesChecks, unittest.TestCase):
    """Text paths with SmolLM2; one server for the class."""

    @classmethod
    def setUpClass(cls):
        cls.server = FakServer().start()
        cls.client = client(cls.server)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def create(self, **kw):
        kw.setdefault("input", QUESTION)
        kw.setdefault("instructions", SYSTEM)
        kw.setdefault("max_output_tokens", 24)
        kw.setdefault("temperature", 0)
        kw = {k: v for k, v in kw.items() if v is not None}
        return self.client.responses.create(model=SERVED_NAME, **kw)

    def test_resent_history_is_found_in_the_prefix_cache(self):
        """Codex CLI's pattern: ``store: false``, the whole history resent
        every turn. The rendering must be stable across turns: turn n+1's
        prompt starts with turn n's prompt and reply, token for token, so
        every whole KV block of them (64 tokens) is found again; the
        reply's last token was never fed, so it is not counted."""
        instructions = " ".join([SYSTEM, "Answer every question in one short sentence."] * 10)
        history = []
        previous = None
        for question in ["What is the capital of France?", "And of Italy?", "And of Spain?"]:
            history.append({"role": "user", "content": question})
            r = self.create(input=list(history), instructions=instructions, store=False, max_output_tokens=16)
            if previous is not None:
                fed = previous.usage.input_tokens + previous.usage.output_tokens - 1
                self.assertGreaterEqual(r.usage.input_tokens_details.cached_tokens, fed // 64 * 64,
                                        (previous.usage, r.usage))
                self.assertGreater(r.usage.input_tokens, fed)
            history.append({"role": "assistant", "content": r.output_text})
            previous = r

    def test_string_input(self):
        r = self.create()
        self.check_text_response(r, 24)
        self.assertEqual(r.model, SERVED_NAME)

    def test_item_forms_render_alike(self):
        base = self.create()
        forms = {
            "message items": [
                {"type": "message", "role": "system", "content": SYSTEM},
                {"type": "message", "role": "user", "content": QUESTION},
            ],
            "without type": [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": QUESTION},
            ],
            "developer, input_text parts": [
                {"role": "developer", "content": [{"type": "input_text", "text": SYSTEM}]},
                {"role": "user", "content": [{"type": "input_text", "text": QUESTION}]},
            ],
        }
        for name, items in forms.items():
            with self.subTest(name):
                r = self.create(input=items, instructions=None)
                self.assertEqual(r.output_text, base.output_text)
                self.assertEqual(r.usage.input_tokens, base.usage.input_tokens)
        with_instructions = self.create(input=[{"role": "user", "content": QUESTION}])
        self.assertEqual(with_instructions.output_text, base.output_text)

    def test_history_with_output_text(self):
        base = self.create()
        history = [
            {"role": "user", "content": QUESTION},
            {"type": "message", "role": "assistant", "content": [
                {"type": "output_text", "text": "The capital of France is Paris.", "annotations": []}]},
            {"role": "user", "content": "And of Germany?"},
        ]
        r = self.create(input=history)
        self.check_text_response(r, 24)
        self.assertGreater(r.usage.input_tokens, base.usage.input_tokens)

    def test_max_output_tokens_incomplete(self):
        r = self.create(max_output_tokens=4)
        self.assertEqual(r.status, "incomplete")
        self.assertEqual(r.incomplete_details.reason, "max_output_tokens")
        self.assertEqual(r.usage.output_tokens, 4)
        self.assertTrue(self.create().output_text.startswith(r.output_text))

    def test_stream_events_incomplete(self):
        full = self.create(max_output_tokens=4)
        self.assertEqual(full.status, "incomplete")
        events = list(self.create(max_output_tokens=4, stream=True))
        final = self.check_stream(events, "response.incomplete")
        self.assertEqual(collapse([e.type for e in events]), TEXT_EVENTS + ["response.incomplete"])
        self.check_text_events(events, full)
        self.assertEqual(final.incomplete_details.reason, "max_output_tokens")

    def test_stream_events_completed(self):
        full = self.create(input=YESNO_ASK, text=YESNO_TEXT)
        self.assertEqual(full.status, "completed", full.output_text)
        events = list(self.create(input=YESNO_ASK, text=YESNO_TEXT, stream=True))
        self.check_stream(events, "response.completed")
        self.assertEqual(collapse([e.type for e in events]), TEXT_EVENTS + ["response.completed"])
        self.check_text_events(events, full)

    def check_text_events(self, events, full):
        """The text events of one message agree with each other and with ``full``."""
        added = [e for e in events if e.type == "response.output_item.added"][0]
        self.assertEqual(added.output_index, 0)
        self.assertEqual(added.item.type, "message")
        self.assertEqual(added.item.role, "assistant")
        self.assertEqual(added.item.content, [])
        item_id = added.item.id
        self.assertTrue(item_id)
        part = [e for e in events if e.type == "response.content_part.added"][0]
        self.assertEqual((part.item_id, part.output_index, part.content_index), (item_id, 0, 0))
        self.assertEqual(part.part.type, "output_text")
        self.assertEqual(part.part.text, "")
        deltas = [e for e in events if e.type == "response.output_text.delta"]
        for d in deltas:
            self.assertEqual((d.item_id, d.output_index, d.content_index), (item_id, 0, 0))
        text = "".join(d.delta for d in deltas)
        self.assertEqual(text, full.output_text)
        done = [e for e in events if e.type == "response.output_text.done"][0]
        self.assertEqual(done.text, text)
        self.assertEqual([e for e in events if e.type == "response.content_part.done"][0].part.text, text)
        item_done = [e for e in events if e.type == "response.output_item.done"][0]
        self.assertEqual(item_done.item.id, item_id)
        self.assertEqual(item_done.item.content[0].text, text)
        final = events[-1].response
        self.assertEqual(final.output_text, text)
        self.assertEqual(final.status, full.status)
        self.assertEqual(final.usage.output_tokens, full.usage.output_tokens)
        self.assertEqual(final.usage.input_tokens, full.usage.input_tokens)

    def test_stream_helper(self):
        full = self.create(input=YESNO_ASK, text=YESNO_TEXT)
        with self.client.responses.stream(
            model=SERVED_NAME, input=YESNO_ASK, instructions=SYSTEM, text=YESNO_TEXT,
            max_output_tokens=24, temperature=0,
        ) as s:
            snapshots = [e.snapshot for e in s if e.type == "response.output_text.delta"]
            final = s.get_final_response()
        self.assertTrue(snapshots)
        self.assertEqual(snapshots[-1], full.output_text)
        self.assertEqual(final.output_text, full.output_text)
        self.assertEqual(final.status, "completed")
        jsonschema.validate(json.loads(final.output_text), YESNO)

    def test_text_formats(self):
        r = self.create(input=YESNO_ASK, text=YESNO_TEXT)
        self.assertEqual(r.status, "completed", r.output_text)
        jsonschema.validate(json.loads(r.output_text), YESNO)
        obj = self.create(input=YESNO_ASK, text={"format": {"type": "json_object"}}, max_output_tokens=48)
        if obj.status == "completed":
            self.assertIsInstance(json.loads(obj.output_text), dict)
        else:
            self.assertTrue(obj.output_text.lstrip().startswith("{"), obj.output_text)
        plain = self.create(text={"format": {"type": "text"}, "verbosity": "low"})
        self.assertEqual(plain.output_text, self.create().output_text)

    def test_ignored_fields(self):
        base = self.create()
        r = self.create(
            reasoning={"effort": "low"},
            include=["reasoning.encrypted_content"],
            prompt_cache_key="fak-test",
            metadata={"suite": "responses"},
            store=False,
            top_p=0.5,
            truncation="disabled",
            parallel_tool_calls=True,
        )
        self.assertEqual(r.output_text, base.output_text)
        self.assertEqual(r.usage.input_tokens, base.usage.input_tokens)

    def test_previous_response_id(self):
        r1 = self.create(input=[{"role": "user", "content": YESNO_ASK}], instructions=None, text=YESNO_TEXT)
        self.assertEqual(r1.status, "completed", r1.output_text)
        follow = [{"role": "user", "content": "Why? Answer briefly."}]
        r2 = self.create(previous_response_id=r1.id, input=follow, instructions=None, max_output_tokens=12)
        self.check_text_response(r2, 12)
        self.assertEqual(r2.previous_response_id, r1.id)
        # The stored conversation's KV is forked: r1's whole prompt comes from cache.
        self.assertGreaterEqual(r2.usage.input_tokens_details.cached_tokens, r1.usage.input_tokens)
        self.assertGreater(r2.usage.input_tokens, r1.usage.input_tokens + r1.usage.output_tokens)
        # The same conversation sent explicitly (r1's output items as they came back).
        explicit = self.create(
            input=[{"role": "user", "content": YESNO_ASK}, *r1.output, *follow],
            instructions=None, max_output_tokens=12,
        )
        self.assertEqual(r2.output_text, explicit.output_text)
        # Re-tokenizing r1's text may merge a token or two differently.
        self.assertLessEqual(abs(r2.usage.input_tokens - explicit.usage.input_tokens), 2)
        # A chain of two.
        r3 = self.create(previous_response_id=r2.id, input="Thank you.", instructions=None, max_output_tokens=8)
        self.assertGreaterEqual(r3.usage.input_tokens_details.cached_tokens, r2.usage.input_tokens)

    def test_retrieve_and_delete(self):
        r = self.create(max_output_tokens=8)
        got = self.client.responses.retrieve(r.id)
        self.assertEqual(got.id, r.id)
        self.assertEqual(got.status, r.status)
        self.assertEqual(got.output_text, r.output_text)
        self.assertEqual(got.usage.output_tokens, r.usage.output_tokens)
        self.client.responses.delete(r.id)
        with self.assertRaises(openai.NotFoundError):
            self.client.responses.retrieve(r.id)
        with self.assertRaises(openai.NotFoundError):
            self.create(previous_response_id=r.id, input="And then?", max_output_tokens=4)
        with self.assertRaises(openai.NotFoundError):
            self.client.responses.delete(r.id)

    def test_store_false_is_not_kept(self):
        r = self.create(max_output_tokens=4, store=False)
        self.assertTrue(r.output_text)
        with self.assertRaises(openai.NotFoundError):
            self.client.responses.retrieve(r.id)
        with self.assertRaises(openai.NotFoundError):
            self.create(previous_response_id=r.id, input="And then?", max_output_tokens=4)
        with self.assertRaises(openai.NotFoundError):
            self.client.responses.retrieve("resp_doesnotexist")

    def test_bad_requests(self):
        cases = {
            "bogus": dict(input=[{"type": "bogus"}]),
            "input": dict(input=3),
            "max_output_tokens": dict(max_output_tokens="x"),
            "temperature": dict(temperature="hot"),
        }
        for name, kw in cases.items():
            with self.subTest(name):
                with self.assertRaises(openai.BadRequestError) as cm:
                    self.create(**kw)
                self.assertEqual(cm.exception.status_code, 400)
                self.assertIn(name, str(cm.exception.body))
        # background mode (a queued job to poll) is not served: a 400, or a finished answer.
        try:
            r = self.create(background=True, max_output_tokens=4)
        except openai.BadRequestError as e:
            self.assertIn("background", str(e.body))
        else:
            self.assertIn(r.status, ("queued", "in_progress", "completed", "incomplete"))
        with self.assertRaises(openai.NotFoundError):
            self.client.responses.create(model="no-such-model", input=QUESTION, max_output_tokens=4)
        self.assert_healthy()
        self.assertTrue(self.create(max_output_tokens=4).output_text)


class TestResponsesTools(ResponsesChecks, unittest.TestCase):
    """Function tools with Qwen2.5-Coder 0.5B."""

    @classmethod
    def setUpClass(cls):
        cls.server = FakServer("--ctx", "2048", model=QWEN).start()
        cls.client = client(cls.server)
        cls.model = QWEN.stem

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def create(self, **kw):
        kw.setdefault("input", WEATHER_ASK)
        kw.setdefault("max_output_tokens", 96)
        kw.setdefault("tools", TOOLS)
        return self.client.responses.create(model=self.model, temperature=0, **kw)

    def test_custom_tool_with_a_regex_grammar(self):
        """A custom tool (free-text input, Codex's apply_patch kind) with a
        regex format: the call is a ``custom_tool_call`` item whose input
        matches the regex, streamed or not; its output goes back as a
        ``custom_tool_call_output`` item."""
        import re
        pattern = "(add|remove) [a-z]{1,12}"
        tool = {"type": "custom", "name": "edit_list", "description": "Edit the shopping list.",
                "format": {"type": "grammar", "syntax": "regex", "definition": pattern}}
        ask = [{"role": "user", "content": "Put milk on the shopping list."}]
        r = self.create(input=ask, tools=[tool], tool_choice={"type": "custom", "name": "edit_list"})
        calls = [o for o in r.output if o.type == "custom_tool_call"]
        self.assertEqual(len(calls), 1, r.output)
        self.assertEqual(calls[0].name, "edit_list")
        self.assertRegex(calls[0].input, f"^{pattern}$")
        events = list(self.client.responses.create(model=self.model, temperature=0, input=ask, tools=[tool],
                                                   tool_choice={"type": "custom", "name": "edit_list"},
                                                   max_output_tokens=96, stream=True))
        kinds = [e.type for e in events]
        self.assertIn("response.custom_tool_call_input.done", kinds)
        done = [e for e in events if e.type == "response.custom_tool_call_input.done"][0]
        self.assertEqual(done.input, calls[0].input)
        # The call and its output go back as items; the model answers.
        follow = ask + [
            {"type": "custom_tool_call", "call_id": calls[0].call_id, "name": "edit_list", "input": calls[0].input},
            {"type": "custom_tool_call_output", "call_id": calls[0].call_id, "output": "done"},
        ]
        r2 = self.create(input=follow, tools=[tool], tool_choice="none", max_output_tokens=24)
        self.assertTrue(r2.output_text.strip(), r2.output)
        self.assertTrue(re.fullmatch(pattern, calls[0].input))

    def test_tool_choice(self):
        choices = {
            "required": "required",
            "named": {"type": "function", "name": "get_time"},
            "auto": "auto",
            "none": "none",
            "one call": "required",
        }
        for name, choice in choices.items():
            with self.subTest(name):
                extra = {"parallel_tool_calls": False} if name == "one call" else {}
                r = self.create(tool_choice=choice, **extra)
                calls = self.check_calls(r)
                if name == "none":
                    self.assertEqual(calls, [])
                    self.assertTrue(r.output_text)
                elif name != "auto":
                    self.assertEqual(r.status, "completed")
                    self.assertTrue(calls)
                if name == "named":
                    self.assertEqual({c.name for c in calls}, {"get_time"})
                if name == "one call":
                    self.assertEqual(len(calls), 1)

    def test_streamed_call(self):
        whole = self.create(tool_choice="required")
        want = [(c.name, c.arguments) for c in self.check_calls(whole)]
        events = list(self.create(tool_choice="required", stream=True))
        final = self.check_stream(events, "response.completed")
        items: dict[int, dict] = {}
        for e in events:
            if e.type == "response.output_item.added":
                self.assertNotIn(e.output_index, items)
                items[e.output_index] = {"item": e.item, "args": "", "done": None}
                if e.item.type == "function_call":
                    self.assertTrue(e.item.id, "the argument deltas name the item by its id")
                    self.assertTrue(e.item.call_id)
                    self.assertIn(e.item.name, SCHEMAS)
                    self.assertEqual(e.item.arguments, "")
            elif e.type == "response.function_call_arguments.delta":
                it = items[e.output_index]
                self.assertEqual(e.item_id, it["item"].id)
                it["args"] += e.delta
            elif e.type == "response.function_call_arguments.done":
                it = items[e.output_index]
                self.assertEqual(e.item_id, it["item"].id)
                self.assertEqual(e.arguments, it["args"])
            elif e.type == "response.output_item.done":
                it = items[e.output_index]
                self.assertEqual(e.item.id, it["item"].id)
                it["done"] = e.item
        self.assertTrue(all(it["done"] is not None for it in items.values()))
        got = [(it["done"].name, it["args"]) for _, it in sorted(items.items()) if it["item"].type == "function_call"]
        self.assertEqual(got, want)
        for it in items.values():
            if it["item"].type == "function_call":
                self.assertEqual(it["done"].arguments, it["args"])
                self.assertEqual(it["done"].call_id, it["item"].call_id)
        self.assertEqual([(c.name, c.arguments) for c in calls_of(final)], want)
        # The SDK's accumulator; strict tools come back with parsed arguments.
        with self.client.responses.stream(
            model=self.model, input=WEATHER_ASK, tools=TOOLS, tool_choice="required",
            max_output_tokens=96, temperature=0,
        ) as s:
            helper = s.get_final_response()
        calls = calls_of(helper)
        self.assertEqual([(c.name, c.arguments) for c in calls], want)
        for c in calls:
            self.assertEqual(c.parsed_arguments, json.loads(c.arguments))

    def test_round_trip_with_previous_response_id(self):
        r1 = self.create(tool_choice={"type": "function", "name": "get_weather"})
        call = self.check_calls(r1)[0]
        self.assertEqual(call.name, "get_weather")
        output = [{"type": "function_call_output", "call_id": call.call_id,
                   "output": json.dumps({"temperature": 22, "sky": "sunny"})}]
        r2 = self.create(previous_response_id=r1.id, input=output, tool_choice="auto", max_output_tokens=48)
        self.assertGreaterEqual(r2.usage.input_tokens_details.cached_tokens, r1.usage.input_tokens)
        self.check_answer(r2)

    def test_round_trip_with_whole_history(self):
        r1 = self.create(tool_choice={"type": "function", "name": "get_weather"})
        call = self.check_calls(r1)[0]
        items = WEATHER_ASK + [
            {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
            {"type": "function_call_output", "call_id": call.call_id,
             "output": json.dumps({"temperature": 22, "sky": "sunny"})},
        ]
        r2 = self.create(input=items, tool_choice="auto", max_output_tokens=48)
        self.check_answer(r2)
        # A function_call_output answering no call is refused.
        with self.assertRaises(openai.BadRequestError):
            self.create(input=WEATHER_ASK + [{"type": "function_call_output", "call_id": "call_nope", "output": "1"}],
                        max_output_tokens=8)

    def check_answer(self, r):
        """After the tool result: an answer, or (under auto, the 0.5B model) another valid call."""
        calls = self.check_calls(r)
        if calls:
            return
        self.assertIn(r.status, ("completed", "incomplete"))
        self.assertTrue(messages_of(r), r.output)
        self.assertTrue(r.output_text)
        if r.status == "completed":
            self.assertIn("22", r.output_text)


class TestResponsesAPIKeys(unittest.TestCase):
    """A server started with --api-key k1,k2: each key sees only its own responses."""

    @classmethod
    def setUpClass(cls):
        cls.server = FakServer("--api-key", "k1,k2").start()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_keys_do_not_share_responses(self):
        one, two = client(self.server, "k1"), client(self.server, "k2")
        r = one.responses.create(model=SERVED_NAME, input=QUESTION, max_output_tokens=4, temperature=0)
        self.assertEqual(one.responses.retrieve(r.id).id, r.id)
        with self.assertRaises(openai.NotFoundError):
            two.responses.retrieve(r.id)
        with self.assertRaises(openai.NotFoundError):
            two.responses.create(model=SERVED_NAME, previous_response_id=r.id, input="And?", max_output_tokens=4)
        with self.assertRaises(openai.NotFoundError):
            two.responses.delete(r.id)
        # Still there for its owner.
        r2 = one.responses.create(model=SERVED_NAME, previous_response_id=r.id, input="And?",
                                  max_output_tokens=4, temperature=0)
        self.assertEqual(r2.previous_response_id, r.id)
        with self.assertRaises(openai.AuthenticationError):
            client(self.server, "wrong").responses.create(model=SERVED_NAME, input=QUESTION, max_output_tokens=4)
        with self.assertRaises(openai.AuthenticationError):
            client(self.server, "wrong").responses.retrieve(r.id)


if __name__ == "__main__":
    unittest.main()
