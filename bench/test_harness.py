"""Unit tests of bench/harness.py's reading of answers (no server, no
harness): prompt tokens, reused tokens, tool calls and error events, from
Responses and Messages answers, streamed or whole, and llama-server's
timings."""

from __future__ import annotations

import json
import unittest

import harness


def sse(events: list[dict]) -> bytes:
    return "".join(f"event: {e.get('type', 'x')}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


class UsageOf(unittest.TestCase):
    def test_responses_whole_and_streamed(self):
        resp = {"output": [{"type": "function_call"}, {"type": "message"}],
                "usage": {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 64}}}
        self.assertEqual(harness.usage_of("responses", json.dumps(resp).encode(), False), (100, 64, 1, 0))
        body = sse([{"type": "response.created", "response": {"usage": None}},
                    {"type": "response.output_item.done", "item": {"type": "function_call"}},
                    {"type": "response.completed", "response": {**resp, "output": []}}])
        self.assertEqual(harness.usage_of("responses", body, True), (100, 64, 1, 0))
        failed = sse([{"type": "response.failed", "response": {"error": {"message": "x"}}}])
        self.assertEqual(harness.usage_of("responses", failed, True)[3], 1)

    def test_messages_count_cache_reads_in_the_prompt(self):
        msg = {"content": [{"type": "tool_use"}],
               "usage": {"input_tokens": 10, "cache_read_input_tokens": 90, "cache_creation_input_tokens": 0}}
        self.assertEqual(harness.usage_of("messages", json.dumps(msg).encode(), False), (100, 90, 1, 0))
        body = sse([{"type": "message_start", "message": {"usage": {"input_tokens": 10, "cache_read_input_tokens": 90}}},
                    {"type": "content_block_start", "content_block": {"type": "tool_use"}},
                    {"type": "message_delta", "usage": {"input_tokens": 10, "cache_read_input_tokens": 90,
                                                        "output_tokens": 5}},
                    {"type": "error", "error": {"type": "overloaded_error"}}])
        self.assertEqual(harness.usage_of("messages", body, True), (100, 90, 1, 1))

    def test_llama_server_timings(self):
        body = json.dumps({"usage": {"input_tokens": 7}, "timings": {"prompt_n": 30, "cache_n": 70}}).encode()
        self.assertEqual(harness.usage_of("messages", body, False)[:2], (100, 70))

    def test_share_after_the_first_request(self):
        rows = [{"sent": 1000, "computed": 1000, "sent_after_first": 0, "computed_after_first": 0},
                {"sent": 2000, "computed": 300, "sent_after_first": 1000, "computed_after_first": 100}]
        self.assertEqual(harness.share_after_first_request(rows), 0.15)
        self.assertIsNone(harness.share_after_first_request([]))


if __name__ == "__main__":
    unittest.main()
