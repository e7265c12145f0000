"""The official ``anthropic`` Python client against ``fak serve``'s Messages
API (``POST /v1/messages``, ``POST /v1/messages/count_tokens``), the API
Claude Code and other Anthropic clients speak.

``anthropic.Anthropic(base_url=<server>)`` (the SDK appends ``/v1/messages``)
drives SmolLM2 for the plain text paths and Qwen2.5-Coder 0.5B for tools:

* non-streamed: the message's id, type, role, text blocks, stop_reason
  (end_turn, max_tokens, stop_sequence with the matched string), usage;
  ``system`` as a string or as text blocks, message content as a string or
  as blocks, all rendering the same prompt;
* streamed: ``messages.stream`` (``text_stream`` and ``get_final_message``)
  and the raw events of ``messages.create(stream=True)`` in their order; the
  greedy streamed text equals the non-streamed text, with and without a stop
  sequence; on the wire every SSE ``event:`` name equals its data's ``type``
  (the SDK drops events without one);
* ``count_tokens`` grows with the prompt and equals the prompt that the
  non-streamed usage reports (``input_tokens`` plus the cache reads, as
  Anthropic counts a prompt partly read from cache);
* ``thinking``, ``metadata`` and the sampling fields are accepted (the SDK
  has no parameters for temperature, top_p, top_k: they go in
  ``extra_body``); ``top_k=1`` is greedy;
* system text blocks starting ``x-anthropic-billing-header`` (Claude Code
  puts a per-request hash there) are left out of the prompt: the same token
  count with or without one, and the prefix cache still hits when it changes;
* tools: ``tool_choice`` any / tool / auto / none, each ``tool_use`` input
  valid under its ``input_schema`` (``jsonschema``), streamed
  ``input_json_delta`` pieces that parse to the same input, and the round
  trip tool_use -> tool_result -> answer;
* errors in Anthropic's shape (``{"type": "error", "error": {"type",
  "message"}}``): 400 ``invalid_request_error`` for malformed bodies, image
  blocks and a missing ``max_tokens``, 404 ``not_found_error`` for an
  unknown model, 401 ``authentication_error`` under ``--api-key``
  (``x-api-key`` and ``Authorization: Bearer`` both carry the key); the
  server stays healthy after each;
* model names: ``--accept-any-model`` answers Claude's model names,
  ``--served-model-name a,b`` answers both names and no third.
"""

from __future__ import annotations

import json
import os
import unittest
import urllib.error
import urllib.request
from pathlib import Path

import anthropic
import jsonschema

from test_openai_client import ROOT, SERVED_NAME, FakServer, client as openai_client

QWEN = Path(os.environ.get("FAK_TEST_TOOLS_MODEL", ROOT / "models" / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"))

SYSTEM = "You are a helpful assistant."
USER = "What is the capital of France? Answer in one sentence."
ASK = [{"role": "user", "content": USER}]
STOP_REASONS = ("end_turn", "max_tokens", "stop_sequence", "tool_use")

WEATHER = {
    "name": "get_weather",
    "description": "The current weather in a city.",
    "input_schema": {
        "type": "object",
        "properties": {
            "city": {"type": "string", "maxLength": 40},
            "unit": {"enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city", "unit"],
        "additionalProperties": False,
    },
}
TIME = {
    "name": "get_time",
    "description": "The local time in a time zone.",
    "input_schema": {
        "type": "object",
        "properties": {"zone": {"type": "string", "maxLength": 40}},
        "required": ["zone"],
    },
}
TOOLS = [WEATHER, TIME]
SCHEMAS = {t["name"]: t["input_schema"] for t in TOOLS}
WEATHER_ASK = [{"role": "user", "content": "What is the weather in Paris, in celsius?"}]


def anthropic_client(server: FakServer, key: str = "unused") -> anthropic.Anthropic:
    # No retries: a failure must show up as it is, not be retried away.
    return anthropic.Anthropic(base_url=server.base_url, api_key=key, max_retries=0, timeout=120)


def sampling(**kw) -> dict:
    """``kw`` with temperature, top_p and top_k moved into ``extra_body``: the
    SDK has no parameters for them, the server takes them in the body."""
    extra = dict(kw.pop("extra_body", None) or {})
    for k in ("temperature", "top_p", "top_k"):
        if k in kw:
            extra[k] = kw.pop(k)
    return {**kw, "extra_body": extra} if extra else kw


def prompt_total(usage) -> int:
    """The whole prompt of a reply: Anthropic's ``input_tokens`` counts only
    the tokens not read from cache, the cache reads and writes come apart."""
    return usage.input_tokens + (usage.cache_read_input_tokens or 0) + (usage.cache_creation_input_tokens or 0)


def text_of(message) -> str:
    return "".join(b.text for b in message.content if b.type == "text")


def raw(server: FakServer, method: str, path: str, body=None, headers: dict | None = None):
    """(status, parsed JSON or text, headers) of a plain HTTP request."""
    data = None
    if body is not None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(server.base_url + path, data=data, method=method)
    req.add_header("content-type", "application/json")
    req.add_header("anthropic-version", "2023-06-01")
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            status, text, hdrs = r.status, r.read().decode(), dict(r.headers)
    except urllib.error.HTTPError as e:
        status, text, hdrs = e.code, e.read().decode(), dict(e.headers)
    try:
        return status, json.loads(text), hdrs
    except ValueError:
        return status, text, hdrs


def sse_events(text: str) -> list[tuple[str | None, dict]]:
    """(event name, data) of each server-sent event of a body."""
    out = []
    for chunk in text.replace("\r\n", "\n").split("\n\n"):
        name, data = None, []
        for line in chunk.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip())
        if data:
            out.append((name, json.loads("\n".join(data))))
    return out


class AnthropicErrorChecks:
    """Assertions on Anthropic's error shape (mixed into the test classes)."""

    def assert_error(self, status, body, want_status: int, want_type: str):
        self.assertEqual(status, want_status, body)
        self.assertIsInstance(body, dict, body)
        self.assertEqual(body.get("type"), "error", body)
        self.assertEqual(body["error"]["type"], want_type, body)
        self.assertIsInstance(body["error"]["message"], str)
        self.assertTrue(body["error"]["message"], "empty error message")

    def assert_healthy(self):
        with urllib.request.urlopen(self.server.base_url + "/health", timeout=5) as r:
            self.assertEqual(r.status, 200)


class TestMessages(AnthropicErrorChecks, unittest.TestCase):
    """Text paths with SmolLM2; one server for the class."""

    @classmethod
    def setUpClass(cls):
        cls.server = FakServer().start()
        cls.client = anthropic_client(cls.server)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def create(self, **kw):
        kw.setdefault("messages", ASK)
        kw.setdefault("system", SYSTEM)
        kw.setdefault("max_tokens", 24)
        kw.setdefault("temperature", 0)
        return self.client.messages.create(**sampling(model=SERVED_NAME, **kw))

    def count(self, **kw):
        kw.setdefault("messages", ASK)
        kw.setdefault("system", SYSTEM)
        return self.client.messages.count_tokens(model=SERVED_NAME, **kw).input_tokens

    def test_non_stream(self):
        r = self.create()
        self.assertTrue(r.id.startswith("msg_"), r.id)
        self.assertEqual(r.type, "message")
        self.assertEqual(r.role, "assistant")
        self.assertEqual(r.model, SERVED_NAME)
        self.assertTrue(r.content, "no content blocks")
        for b in r.content:
            self.assertEqual(b.type, "text")
        self.assertTrue(text_of(r), "empty text")
        self.assertIn(r.stop_reason, ("end_turn", "max_tokens"))
        self.assertIsNone(r.stop_sequence)
        self.assertIsInstance(r.usage.input_tokens, int)
        self.assertIsInstance(r.usage.cache_read_input_tokens, int)
        self.assertGreaterEqual(r.usage.cache_read_input_tokens, 0)
        self.assertGreater(prompt_total(r.usage), 0)
        self.assertGreater(r.usage.output_tokens, 0)
        self.assertLessEqual(r.usage.output_tokens, 24)
        if r.stop_reason == "max_tokens":
            self.assertEqual(r.usage.output_tokens, 24)

    def test_greedy_is_repeatable(self):
        self.assertEqual(text_of(self.create()), text_of(self.create()))

    def test_max_tokens_stop_reason(self):
        r = self.create(max_tokens=3)
        self.assertEqual(r.stop_reason, "max_tokens")
        self.assertEqual(r.usage.output_tokens, 3)
        self.assertTrue(text_of(self.create()).startswith(text_of(r)))

    def test_system_and_content_blocks_render_as_strings(self):
        plain = self.create()
        blocks = self.create(
            system=[{"type": "text", "text": SYSTEM}],
            messages=[{"role": "user", "content": [{"type": "text", "text": USER}]}],
        )
        self.assertEqual(text_of(blocks), text_of(plain))
        self.assertEqual(prompt_total(blocks.usage), prompt_total(plain.usage))
        self.assertEqual(self.count(system=[{"type": "text", "text": SYSTEM}]), self.count())
        # A longer system prompt is a longer prompt.
        self.assertGreater(self.count(system=SYSTEM + " Answer in French."), self.count())

    def test_multi_turn(self):
        first = self.create()
        history = ASK + [
            {"role": "assistant", "content": first.content},
            {"role": "user", "content": "And of Germany?"},
        ]
        r = self.create(messages=history)
        self.assertTrue(text_of(r))
        self.assertGreater(prompt_total(r.usage), prompt_total(first.usage))
        self.assertEqual(self.count(messages=history), prompt_total(r.usage))

    def test_stream_helper_matches_non_stream(self):
        full = self.create()
        with self.client.messages.stream(
            **sampling(model=SERVED_NAME, system=SYSTEM, messages=ASK, max_tokens=24, temperature=0)
        ) as s:
            streamed = "".join(s.text_stream)
            final = s.get_final_message()
        self.assertEqual(streamed, text_of(full))
        self.assertEqual(text_of(final), text_of(full))
        self.assertTrue(final.id.startswith("msg_"))
        self.assertEqual(final.role, "assistant")
        self.assertEqual(final.stop_reason, full.stop_reason)
        self.assertEqual(final.usage.output_tokens, full.usage.output_tokens)
        self.assertEqual(prompt_total(final.usage), prompt_total(full.usage))

    def test_raw_stream_events(self):
        full = self.create()
        events = list(self.create(stream=True))
        types = [e.type for e in events]
        self.assertEqual(types[0], "message_start")
        self.assertEqual(types[-1], "message_stop")
        start = events[0].message
        self.assertTrue(start.id.startswith("msg_"))
        self.assertEqual(start.role, "assistant")
        self.assertEqual(start.content, [])
        self.assertIsNone(start.stop_reason)
        self.assertEqual(start.model, SERVED_NAME)
        # One text block: start, deltas, stop; then message_delta, message_stop.
        collapsed = [t for i, t in enumerate(types) if i == 0 or t != types[i - 1]]
        self.assertEqual(collapsed, ["message_start", "content_block_start", "content_block_delta",
                                     "content_block_stop", "message_delta", "message_stop"])
        block_start = events[1]
        self.assertEqual(block_start.index, 0)
        self.assertEqual(block_start.content_block.type, "text")
        self.assertEqual(block_start.content_block.text, "")
        deltas = [e for e in events if e.type == "content_block_delta"]
        for d in deltas:
            self.assertEqual(d.index, 0)
            self.assertEqual(d.delta.type, "text_delta")
        self.assertEqual("".join(d.delta.text for d in deltas), text_of(full))
        md = [e for e in events if e.type == "message_delta"][0]
        self.assertEqual(md.delta.stop_reason, full.stop_reason)
        self.assertIsNone(md.delta.stop_sequence)
        self.assertEqual(md.usage.output_tokens, full.usage.output_tokens)

    def test_sse_wire_format(self):
        status, body, headers = raw(self.server, "POST", "/v1/messages", {
            "model": SERVED_NAME, "max_tokens": 8, "temperature": 0, "stream": True,
            "system": SYSTEM, "messages": ASK,
        })
        self.assertEqual(status, 200, body)
        ctype = {k.lower(): v for k, v in headers.items()}.get("content-type", "")
        self.assertTrue(ctype.startswith("text/event-stream"), ctype)
        events = sse_events(body)
        self.assertTrue(events)
        for name, data in events:
            self.assertEqual(name, data.get("type"), f"event: {name} carries data of type {data.get('type')}")
        names = [n for n, _ in events if n != "ping"]
        self.assertEqual(names[0], "message_start")
        self.assertEqual(names[-1], "message_stop")
        start = events[[n for n, _ in events].index("message_start")][1]["message"]
        self.assertEqual(start["content"], [])
        for k in ("input_tokens", "output_tokens"):
            self.assertIsInstance(start["usage"][k], int, k)

    def test_stop_sequences(self):
        full = text_of(self.create())
        words = full.split()
        self.assertGreaterEqual(len(words), 3, full)
        stop = " " + words[2]
        cut = full.index(stop)
        r = self.create(stop_sequences=[stop, "\u2603 never"])
        self.assertEqual(r.stop_reason, "stop_sequence", text_of(r))
        self.assertEqual(r.stop_sequence, stop)
        self.assertEqual(text_of(r), full[:cut])
        # Streamed: the same text, none of the stop string leaks out.
        with self.client.messages.stream(**sampling(
            model=SERVED_NAME, system=SYSTEM, messages=ASK, max_tokens=24, temperature=0,
            stop_sequences=[stop, "\u2603 never"],
        )) as s:
            streamed = "".join(s.text_stream)
            final = s.get_final_message()
        self.assertEqual(streamed, full[:cut])
        self.assertEqual(final.stop_reason, "stop_sequence")
        self.assertEqual(final.stop_sequence, stop)

    def test_sampling_fields_thinking_and_metadata(self):
        greedy = text_of(self.create())
        # top_k=1 is greedy whatever the temperature.
        self.assertEqual(text_of(self.create(temperature=1.0, top_k=1)), greedy)
        self.assertEqual(text_of(self.create(top_p=0.5)), greedy)
        r = self.create(
            thinking={"type": "enabled", "budget_tokens": 1024},
            metadata={"user_id": "user-1"},
        )
        self.assertEqual([b.type for b in r.content], ["text"])
        self.assertEqual(text_of(r), greedy)
        # Sampled (temperature 1) still answers within max_tokens.
        s = self.create(temperature=1.0, max_tokens=8)
        self.assertLessEqual(s.usage.output_tokens, 8)

    def test_count_tokens(self):
        n = self.count()
        self.assertGreater(n, 0)
        r = self.create(max_tokens=4)
        self.assertEqual(n, prompt_total(r.usage))
        longer = self.count(messages=[{"role": "user", "content": USER + " Also name the river that runs through it."}])
        self.assertGreater(longer, n)
        # count_tokens takes no max_tokens and generates nothing.
        status, body, _ = raw(self.server, "POST", "/v1/messages/count_tokens",
                              {"model": SERVED_NAME, "system": SYSTEM, "messages": ASK})
        self.assertEqual(status, 200, body)
        self.assertEqual(body, {"input_tokens": n})

    def test_resent_history_is_found_in_the_prefix_cache(self):
        """Claude Code's pattern: the whole history resent every turn. Turn
        n+1's prompt starts with turn n's prompt and reply, token for token,
        so every whole KV block of them (64 tokens) is found again (the
        reply's last token was never fed)."""
        system = " ".join([SYSTEM, "Answer every question in one short sentence."] * 10)
        history = []
        previous = None
        for question in ["What is the capital of France?", "And of Italy?", "And of Spain?"]:
            history.append({"role": "user", "content": question})
            r = self.create(system=system, messages=list(history), max_tokens=16)
            if previous is not None:
                fed = prompt_total(previous.usage) + previous.usage.output_tokens - 1
                self.assertGreaterEqual(r.usage.cache_read_input_tokens, fed // 64 * 64,
                                        (previous.usage, r.usage))
            history.append({"role": "assistant", "content": r.content})
            previous = r

    def test_billing_header_is_left_out(self):
        question = [{"role": "user", "content": "Name three colours of the rainbow."}]

        # Long enough to fill whole KV blocks (the prefix cache shares
        # whole blocks of 64 tokens).
        long_system = " ".join([SYSTEM] * 12)

        def system(cch: str | None):
            blocks = [{"type": "text", "text": long_system}]
            if cch is not None:
                blocks.insert(0, {"type": "text", "text": f"x-anthropic-billing-header: cc_version=2.0.14; cch={cch};"})
            return blocks

        bare = self.count(system=system(None), messages=question)
        self.assertEqual(self.count(system=system("a1b2c"), messages=question), bare)
        self.assertEqual(self.count(system=system("ffff0"), messages=question), bare)
        first = self.create(system=system("0123a"), messages=question, max_tokens=8)
        second = self.create(system=system("9876f"), messages=question, max_tokens=8)
        self.assertEqual(prompt_total(first.usage), bare)
        self.assertEqual(prompt_total(second.usage), bare)
        self.assertEqual(text_of(second), text_of(first))
        # The changed billing line is not in the prompt, so the whole prefix is reused.
        self.assertGreater(second.usage.cache_read_input_tokens, 0)
        self.assertGreaterEqual(second.usage.cache_read_input_tokens, bare // 2)

    def test_image_block_is_400(self):
        png = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")
        with self.assertRaises(anthropic.BadRequestError) as cm:
            self.create(messages=[{"role": "user", "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}},
                {"type": "text", "text": "What is in this picture?"},
            ]}], max_tokens=4)
        self.assertEqual(cm.exception.status_code, 400)
        self.assertEqual(cm.exception.body["type"], "error")
        self.assertEqual(cm.exception.body["error"]["type"], "invalid_request_error")
        self.assert_healthy()

    def test_bad_requests_are_400(self):
        good = {"model": SERVED_NAME, "max_tokens": 4, "messages": ASK}
        cases = {
            "max_tokens a string": {**good, "max_tokens": "ten"},
            "messages a number": {**good, "messages": 3},
            "max_tokens missing": {k: v for k, v in good.items() if k != "max_tokens"},
            "messages missing": {k: v for k, v in good.items() if k != "messages"},
            "unknown role": {**good, "messages": [{"role": "wizard", "content": "hi"}]},
            "unknown block type": {**good, "messages": [{"role": "user", "content": [{"type": "hologram"}]}]},
            "system a number": {**good, "system": 7},
        }
        for name, body in cases.items():
            with self.subTest(name):
                status, resp, _ = raw(self.server, "POST", "/v1/messages", body)
                self.assert_error(status, resp, 400, "invalid_request_error")
        status, resp, _ = raw(self.server, "POST", "/v1/messages", b"{not json")
        self.assert_error(status, resp, 400, "invalid_request_error")
        status, resp, _ = raw(self.server, "POST", "/v1/messages/count_tokens", {"model": SERVED_NAME, "messages": 3})
        self.assert_error(status, resp, 400, "invalid_request_error")
        self.assert_healthy()
        # Still answers after the bad requests.
        self.assertTrue(text_of(self.create(max_tokens=4)))

    def test_unknown_model_is_404(self):
        status, resp, _ = raw(self.server, "POST", "/v1/messages",
                              {"model": "no-such-model", "max_tokens": 4, "messages": ASK})
        self.assert_error(status, resp, 404, "not_found_error")
        with self.assertRaises(anthropic.NotFoundError):
            self.client.messages.create(model="no-such-model", max_tokens=4, messages=ASK)
        with self.assertRaises(anthropic.NotFoundError):
            self.client.messages.count_tokens(model="no-such-model", messages=ASK)
        self.assert_healthy()


class TestMessagesTools(unittest.TestCase):
    """Tool use with Qwen2.5-Coder 0.5B (Hermes <tool_call> syntax)."""

    @classmethod
    def setUpClass(cls):
        cls.server = FakServer("--ctx", "2048", model=QWEN).start()
        cls.client = anthropic_client(cls.server)
        cls.model = QWEN.stem

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def create(self, **kw):
        kw.setdefault("messages", WEATHER_ASK)
        kw.setdefault("max_tokens", 96)
        kw.setdefault("tools", TOOLS)
        return self.client.messages.create(**sampling(model=self.model, temperature=0, **kw))

    def check_calls(self, message) -> list:
        """The tool_use blocks, each input valid under its tool's schema."""
        uses = [b for b in message.content if b.type == "tool_use"]
        for u in uses:
            self.assertTrue(u.id.startswith("toolu_"), u.id)
            self.assertIn(u.name, SCHEMAS)
            self.assertIsInstance(u.input, dict)
            jsonschema.validate(u.input, SCHEMAS[u.name])
        self.assertEqual(len({u.id for u in uses}), len(uses), "tool_use ids repeat")
        return uses

    def test_tool_choice(self):
        choices = {
            "any": {"type": "any"},
            "tool": {"type": "tool", "name": "get_time"},
            "auto": {"type": "auto"},
            "none": {"type": "none"},
            "any, one call": {"type": "any", "disable_parallel_tool_use": True},
        }
        for name, choice in choices.items():
            with self.subTest(name):
                r = self.create(tool_choice=choice)
                uses = self.check_calls(r)
                self.assertIn(r.stop_reason, STOP_REASONS)
                if name == "none":
                    self.assertEqual(uses, [])
                    self.assertNotEqual(r.stop_reason, "tool_use")
                    self.assertTrue(text_of(r))
                elif name == "auto":
                    self.assertEqual(r.stop_reason == "tool_use", bool(uses))
                else:
                    self.assertEqual(r.stop_reason, "tool_use")
                    self.assertTrue(uses)
                if name == "tool":
                    self.assertEqual({u.name for u in uses}, {"get_time"})
                if name == "any, one call":
                    self.assertEqual(len(uses), 1)

    def test_streamed_tool_use(self):
        whole = self.create(tool_choice={"type": "any"})
        want = [(u.name, u.input) for u in self.check_calls(whole)]
        events = list(self.create(tool_choice={"type": "any"}, stream=True))
        self.assertEqual(events[0].type, "message_start")
        self.assertEqual(events[-1].type, "message_stop")
        blocks: dict[int, dict] = {}
        for e in events:
            if e.type == "content_block_start":
                self.assertNotIn(e.index, blocks)
                self.assertEqual(e.index, len(blocks), "block indices run 0, 1, ...")
                blocks[e.index] = {"type": e.content_block.type, "json": "", "stopped": False}
                if e.content_block.type == "tool_use":
                    self.assertTrue(e.content_block.id.startswith("toolu_"))
                    self.assertIn(e.content_block.name, SCHEMAS)
                    self.assertEqual(e.content_block.input, {})
                    blocks[e.index]["name"] = e.content_block.name
            elif e.type == "content_block_delta":
                b = blocks[e.index]
                self.assertFalse(b["stopped"])
                if b["type"] == "tool_use":
                    self.assertEqual(e.delta.type, "input_json_delta")
                    b["json"] += e.delta.partial_json
                else:
                    self.assertEqual(e.delta.type, "text_delta")
            elif e.type == "content_block_stop":
                blocks[e.index]["stopped"] = True
        self.assertTrue(all(b["stopped"] for b in blocks.values()))
        got = [(b["name"], json.loads(b["json"])) for b in blocks.values() if b["type"] == "tool_use"]
        for name, args in got:
            jsonschema.validate(args, SCHEMAS[name])
        self.assertEqual(got, want)
        md = [e for e in events if e.type == "message_delta"]
        self.assertEqual(len(md), 1)
        self.assertEqual(md[0].delta.stop_reason, "tool_use")
        # The SDK's own accumulator rebuilds the same inputs.
        with self.client.messages.stream(**sampling(
            model=self.model, messages=WEATHER_ASK, tools=TOOLS, tool_choice={"type": "any"},
            max_tokens=96, temperature=0,
        )) as s:
            final = s.get_final_message()
        self.assertEqual(final.stop_reason, "tool_use")
        self.assertEqual([(u.name, u.input) for u in self.check_calls(final)], want)

    def test_round_trip(self):
        r = self.create(tool_choice={"type": "tool", "name": "get_weather"})
        self.assertEqual(r.stop_reason, "tool_use")
        use = self.check_calls(r)[0]
        self.assertEqual(use.name, "get_weather")
        result = json.dumps({"temperature": 22, "sky": "sunny"})
        messages = WEATHER_ASK + [
            {"role": "assistant", "content": r.content},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": result}]},
        ]
        final = self.create(messages=messages, tool_choice={"type": "auto"}, max_tokens=48)
        self.assertIn(final.stop_reason, STOP_REASONS)
        if final.stop_reason == "tool_use":
            # Under auto the 0.5B model may call again; the call is still valid.
            self.assertTrue(self.check_calls(final))
        else:
            self.assertIn(final.stop_reason, ("end_turn", "max_tokens"))
            self.assertTrue(text_of(final))
            if final.stop_reason == "end_turn":
                self.assertIn("22", text_of(final))
        # The result given as text blocks renders the same as the string.
        as_blocks = WEATHER_ASK + [
            {"role": "assistant", "content": r.content},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,
                                          "content": [{"type": "text", "text": result}]}]},
        ]
        count = self.client.messages.count_tokens
        self.assertEqual(count(model=self.model, messages=as_blocks, tools=TOOLS).input_tokens,
                         count(model=self.model, messages=messages, tools=TOOLS).input_tokens)
        # A failed tool (is_error) is answered too.
        failed = WEATHER_ASK + [
            {"role": "assistant", "content": r.content},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "is_error": True,
                                          "content": [{"type": "text", "text": "weather service unavailable"}]}]},
        ]
        e = self.create(messages=failed, tool_choice={"type": "none"}, max_tokens=24)
        self.assertIn(e.stop_reason, ("end_turn", "max_tokens"))
        self.assertTrue(text_of(e))

    def test_count_tokens_counts_tools(self):
        count = self.client.messages.count_tokens
        bare = count(model=self.model, messages=WEATHER_ASK).input_tokens
        one = count(model=self.model, messages=WEATHER_ASK, tools=[WEATHER]).input_tokens
        two = count(model=self.model, messages=WEATHER_ASK, tools=TOOLS).input_tokens
        self.assertLess(bare, one)
        self.assertLess(one, two)


class TestMessagesAPIKey(AnthropicErrorChecks, unittest.TestCase):
    """A server started with --api-key k1."""

    @classmethod
    def setUpClass(cls):
        cls.server = FakServer("--api-key", "k1").start()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    BODY = {"model": SERVED_NAME, "max_tokens": 4, "temperature": 0, "messages": ASK}

    def test_missing_or_wrong_key_is_401(self):
        for path, body in [("/v1/messages", self.BODY),
                           ("/v1/messages/count_tokens", {"model": SERVED_NAME, "messages": ASK})]:
            for headers in [{}, {"x-api-key": "wrong"}, {"authorization": "Bearer wrong"}]:
                with self.subTest(path=path, headers=headers):
                    status, resp, _ = raw(self.server, "POST", path, body, headers)
                    self.assert_error(status, resp, 401, "authentication_error")
        with self.assertRaises(anthropic.AuthenticationError):
            anthropic_client(self.server, "wrong").messages.create(**sampling(**self.BODY))
        self.assert_healthy()

    def test_right_key_in_either_header(self):
        for headers in [{"x-api-key": "k1"}, {"authorization": "Bearer k1"}]:
            with self.subTest(headers=headers):
                status, resp, _ = raw(self.server, "POST", "/v1/messages", self.BODY, headers)
                self.assertEqual(status, 200, resp)
                self.assertEqual(resp["type"], "message")
                self.assertLessEqual(resp["usage"]["output_tokens"], 4)
        r = anthropic_client(self.server, "k1").messages.create(**sampling(**self.BODY))
        self.assertEqual(r.role, "assistant")
        self.assertTrue(text_of(r))


class TestAcceptAnyModel(unittest.TestCase):
    """--accept-any-model: Claude Code's own model names are this server's model."""

    @classmethod
    def setUpClass(cls):
        cls.server = FakServer("--accept-any-model").start()
        cls.client = anthropic_client(cls.server)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_claude_names_are_answered(self):
        texts = []
        for name in ["claude-sonnet-4-5", "claude-haiku-4-5", SERVED_NAME]:
            with self.subTest(name):
                r = self.client.messages.create(
                    **sampling(model=name, max_tokens=8, temperature=0, system=SYSTEM, messages=ASK))
                self.assertEqual(r.model, name)
                self.assertTrue(text_of(r))
                texts.append(text_of(r))
                n = self.client.messages.count_tokens(model=name, system=SYSTEM, messages=ASK).input_tokens
                self.assertEqual(n, prompt_total(r.usage))
        # One model behind every name.
        self.assertEqual(len(set(texts)), 1, texts)


class TestServedModelNames(unittest.TestCase):
    """--served-model-name fak-a,fak-b: both names, and no other."""

    @classmethod
    def setUpClass(cls):
        cls.server = FakServer("--served-model-name", "fak-a,fak-b").start()
        cls.client = anthropic_client(cls.server)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_names(self):
        for name in ["fak-a", "fak-b"]:
            with self.subTest(name):
                r = self.client.messages.create(model=name, max_tokens=4, messages=ASK)
                self.assertEqual(r.model, name)
                self.assertTrue(text_of(r))
        with self.assertRaises(anthropic.NotFoundError):
            self.client.messages.create(model="fak-c", max_tokens=4, messages=ASK)
        ids = [m.id for m in openai_client(self.server).models.list()]
        self.assertIn("fak-a", ids)
        self.assertNotIn("fak-c", ids)


if __name__ == "__main__":
    unittest.main()
