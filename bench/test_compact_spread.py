"""Unit tests of bench/peers/compact_spread.py on hand-made compact goldens.

Run from the repository root: ``python3 -m unittest bench/test_compact_spread.py``.
"""

from __future__ import annotations

import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))
import compact_spread  # noqa: E402


def prompt(name: str, greedy: list[int], tops: list[list[list[float]]], ranges: list[list[float]]) -> dict:
    return {"name": name, "greedy_ids": greedy, "top_logits": tops, "ranges": ranges}


class SpreadTest(unittest.TestCase):
    def test_worst_shared_logit_over_the_range(self) -> None:
        a = {"prompts": [prompt("p", [1, 2], [[[1, 5.0], [2, 4.0]], [[2, 6.0], [3, 1.0]]], [[0.0, 10.0], [0.0, 20.0]])]}
        b = {"prompts": [prompt("p", [1, 2], [[[1, 4.5], [7, 4.0]], [[2, 4.0], [3, 1.0]]], [[0.0, 10.0], [0.0, 20.0]])]}
        (r,) = compact_spread.spread(a, b)
        self.assertEqual(r["step"], 1)
        self.assertAlmostEqual(r["worst"], 0.1)
        self.assertTrue(r["same_path"])

    def test_steps_after_the_paths_part_are_left_out(self) -> None:
        a = {"prompts": [prompt("p", [1, 2], [[[1, 5.0]], [[2, 9.0]]], [[0.0, 10.0], [0.0, 10.0]])]}
        b = {"prompts": [prompt("p", [4, 2], [[[1, 5.0]], [[2, 0.0]]], [[0.0, 10.0], [0.0, 10.0]])]}
        (r,) = compact_spread.spread(a, b)
        self.assertEqual(r["steps"], 1)
        self.assertEqual(r["worst"], 0.0)
        self.assertFalse(r["same_path"])

    def test_gap_error_ignores_a_shift_of_every_logit(self) -> None:
        # b is a shifted by +1, except id 3, whose gap to the best id moves
        # by 0.5 at step 0: one of the four gaps compared (two per step).
        a = {"prompts": [prompt("p", [1, 2], [[[1, 5.0], [3, 4.0]], [[2, 6.0], [3, 1.0]]], [[0.0, 10.0], [0.0, 20.0]])]}
        b = {"prompts": [prompt("p", [1, 2], [[[1, 6.0], [3, 5.5]], [[2, 7.0], [3, 2.0]]], [[0.0, 10.0], [0.0, 20.0]])]}
        (r,) = compact_spread.spread(a, b)
        self.assertAlmostEqual(r["mean_gap"], 0.5 / 4)


if __name__ == "__main__":
    unittest.main()
