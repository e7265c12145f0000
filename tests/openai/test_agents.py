"""The OpenAI Agents SDK (``openai-agents``) against ``fak serve``'s
Responses API, with Qwen2.5-Coder 0.5B.

An ``agents.Agent`` with one ``@function_tool`` (``get_weather``, which
returns a fixed report and counts its calls) runs through
``OpenAIResponsesModel`` over ``AsyncOpenAI(base_url=.../v1)``, tracing off,
``tool_choice="required"`` for the first turn (the SDK resets it to auto
after a tool call, so the next turn can answer) and a small ``max_turns``:

* non-streamed (``Runner.run``): the tool ran, the model's first response
  holds a ``function_call`` item for it with valid arguments, the tool's
  report went back, and the run ends with a non-empty text answer; the
  second turn resends the history and reuses the first turn's prompt from
  the prefix cache;
* streamed (``Runner.run_streamed``): the same over the SSE events the SDK
  consumes (it fails a run on ``response.incomplete``, so a turn has to end
  within ``max_tokens``);
* ``auto_previous_response_id``: the SDK chains the turns with
  ``previous_response_id`` and sends only the new items.

The Agents SDK sends what real agent programs send: ``include: []``,
strict function tools, user messages without ``type``, and the model's own
output items (ids, status, annotations) back as input.
"""

from __future__ import annotations

import asyncio
import json
import os
import unittest
from pathlib import Path

from openai import AsyncOpenAI

from agents import Agent, ModelSettings, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled

from test_openai_client import ROOT, FakServer

QWEN = Path(os.environ.get("FAK_TEST_TOOLS_MODEL", ROOT / "models" / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"))

REPORT = "22 degrees and sunny (report 7341)"
CALLS: list[str] = []


@function_tool
def get_weather(city: str) -> str:
    """The current weather in a city.

    Args:
        city: The city's name.
    """
    CALLS.append(city)
    return f"{city}: {REPORT}"


class TestAgents(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        set_tracing_disabled(True)
        cls.server = FakServer("--ctx", "2048", model=QWEN).start()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def setUp(self):
        CALLS.clear()

    def agent(self, openai_client: AsyncOpenAI) -> Agent:
        return Agent(
            name="weather",
            instructions=("You answer questions about the weather. "
                          "Use the get_weather tool, then answer in one short sentence."),
            tools=[get_weather],
            model=OpenAIResponsesModel(model=QWEN.stem, openai_client=openai_client),
            model_settings=ModelSettings(tool_choice="required", temperature=0, max_tokens=64),
        )

    def run_agent(self, streamed: bool = False, **kw):
        async def go():
            c = AsyncOpenAI(base_url=self.server.base_url + "/v1", api_key="unused", max_retries=0, timeout=120)
            try:
                agent = self.agent(c)
                question = "What is the weather in Paris?"
                if not streamed:
                    return await Runner.run(agent, question, max_turns=4, **kw), []
                result = Runner.run_streamed(agent, question, max_turns=4, **kw)
                events = [e async for e in result.stream_events()]
                return result, events
            finally:
                await c.close()

        return asyncio.run(go())

    def check_run(self, result):
        self.assertGreaterEqual(len(CALLS), 1, "the tool never ran")
        for city in CALLS:
            self.assertIsInstance(city, str)
            self.assertTrue(city.strip())
        self.assertIsInstance(result.final_output, str)
        self.assertTrue(result.final_output.strip(), "empty final output")
        self.assertGreaterEqual(len(result.raw_responses), 2)
        first = result.raw_responses[0].output
        calls = [o for o in first if o.type == "function_call"]
        self.assertTrue(calls, f"no function_call in the first response: {first}")
        self.assertEqual(calls[0].name, "get_weather")
        self.assertTrue(calls[0].call_id)
        self.assertIsInstance(json.loads(calls[0].arguments)["city"], str)
        outputs = [i for i in result.new_items if i.type == "tool_call_output_item"]
        self.assertTrue(outputs)
        self.assertIn(REPORT, str(outputs[0].output))
        last = result.raw_responses[-1].output
        self.assertTrue([o for o in last if o.type == "message"], f"the run ended without a message: {last}")
        for r in result.raw_responses:
            self.assertTrue(r.response_id)
            self.assertGreater(r.usage.input_tokens, 0)
            self.assertGreater(r.usage.output_tokens, 0)
        return result

    def test_run(self):
        result = self.check_run(self.run_agent()[0])
        # The second turn resends the history: its start comes from the prefix cache.
        self.assertGreater(result.raw_responses[1].usage.input_tokens_details.cached_tokens, 0)

    def test_run_streamed(self):
        result, events = self.run_agent(streamed=True)
        self.check_run(result)
        raw = [e.data.type for e in events if e.type == "raw_response_event"]
        self.assertEqual(raw.count("response.completed"), len(result.raw_responses))
        self.assertIn("response.function_call_arguments.done", raw)
        self.assertIn("response.output_text.delta", raw)

    def test_auto_previous_response_id(self):
        result = self.check_run(self.run_agent(auto_previous_response_id=True)[0])
        first, second = result.raw_responses[0], result.raw_responses[1]
        # Continued from the stored first response: its whole prompt is reused.
        self.assertGreaterEqual(second.usage.input_tokens_details.cached_tokens, first.usage.input_tokens)


if __name__ == "__main__":
    unittest.main()
