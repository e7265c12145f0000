"""Unit tests of bench/scaleout.py's pure parts (no server, no router)."""

from __future__ import annotations

import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scaleout as so  # noqa: E402


class TestWorkload(unittest.TestCase):
    def test_texts_are_seeded_and_sized(self):
        shape = so.Shape()
        a = so.fleet_prefix(shape, 0, 1.0)
        self.assertEqual(a, so.fleet_prefix(shape, 0, 1.0))
        self.assertNotEqual(a, so.fleet_prefix(shape, 1, 1.0))
        for f in range(8):
            n = len(so.fleet_prefix(shape, f, 1.0).split())
            self.assertGreaterEqual(n, shape.prefix_min)
            self.assertLessEqual(n, shape.prefix_max + 3)
            # Two tokens a word: half the words.
            self.assertLess(abs(len(so.fleet_prefix(shape, f, 2.0).split()) - n / 2), 4)
        r = so.tool_result(shape, 1, 2, 3, 1.0)
        self.assertEqual(r, so.tool_result(shape, 1, 2, 3, 1.0))
        self.assertNotEqual(r, so.tool_result(shape, 1, 2, 4, 1.0))
        self.assertTrue(shape.result_min <= len(r.split()) - 3 <= shape.result_max)

    def test_keys_name_fleet_and_agent(self):
        self.assertEqual(so.session_key(3, 7), "f3-a7")


class TestReport(unittest.TestCase):
    def test_percentile_and_shares(self):
        self.assertIsNone(so.percentile([], 0.5))
        self.assertEqual(so.percentile([3.0, 1.0, 2.0], 0.5), 2.0)
        self.assertAlmostEqual(so.percentile([0.0, 10.0], 0.99), 9.9)
        self.assertEqual(so.shares([1, 3]), [0.25, 0.75])
        self.assertEqual(so.shares([0, 0]), [0.0, 0.0])

    def test_metric_sums_labelled_samples_only_of_that_name(self):
        text = (
            "# TYPE vllm:request_success counter\n"
            'vllm:request_success_total{finished_reason="stop"} 3\n'
            'vllm:request_success_total{finished_reason="length"} 4\n'
            "vllm:request_success_created 17\n"
            "vllm:request_success_total_other 99\n"
        )
        self.assertEqual(so.metric(text, "vllm:request_success_total"), 7.0)

    def test_summary_counts_computed_tokens_and_losses(self):
        st = so.Stats()
        st.turns = [
            so.Turn(True, 1, 0.1, 100, 60, 0.0),
            so.Turn(True, 2, 0.3, 50, 0, 1.0),
            so.Turn(False, 3, None, 0, 0, 2.0),
        ]
        st.creates = [(40, 10)]
        s = so.summarize(st, 2.0)
        self.assertEqual(s["prompt_tokens_sent"], 190)
        self.assertEqual(s["prompt_tokens_computed"], 40 + 50 + 30)
        self.assertEqual((s["turns_ok"], s["turns_lost"], s["turns_retried_by_client"]), (2, 1, 1))
        self.assertEqual(s["agent_turns_per_s"], 1.0)
        self.assertEqual(s["ttft_ms"]["p50"], 200.0)


if __name__ == "__main__":
    unittest.main()
