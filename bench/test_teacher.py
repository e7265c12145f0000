"""Unit tests of bench/peers/teacher.py's comparisons of fak's dumped
logits (``FAK_TEACHER_DUMP``) with llama.cpp's, on synthetic files.

Run from the repository root: ``python3 -m unittest bench/test_teacher.py``.
Standard library only (the comparisons import no numpy).
"""

from __future__ import annotations

import array
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))
import common  # noqa: E402
import teacher  # noqa: E402


def golden(ranges: list[list[float]], top_k: int = 2, samples: int = 1) -> dict:
    """A golden's JSON with one prompt per entry of ``ranges`` (each
    prompt's per-step logit ranges, lo = 0)."""
    return {
        "top_k": top_k,
        "sample_ids": list(range(samples)),
        "steps": len(ranges[0]),
        "prompts": [{"lo": [0.0] * len(r), "hi": r} for r in ranges],
    }


class StepDist(unittest.TestCase):
    def test_max_over_entries_over_range(self):
        # Two steps of 3 entries; ranges 2 and 10.
        x = [0.0, 1.0, 2.0, 5.0, 5.0, 5.0]
        y = [0.5, 1.0, 1.0, 5.0, 4.0, 7.0]
        self.assertEqual(teacher.step_dist(x, y, 3, [2.0, 10.0]), [0.5, 0.2])

    def test_size_mismatch_is_an_error(self):
        with self.assertRaises(common.PeerError):
            teacher.step_dist([0.0] * 6, [0.0] * 5, 3, [1.0, 1.0])
        with self.assertRaises(common.PeerError):
            teacher.step_dist([0.0] * 6, [0.0] * 6, 3, [1.0])

    def test_ranges_are_prompt_major(self):
        g = golden([[1.0, 2.0], [3.0, 4.0]])
        self.assertEqual(teacher.ranges_of(g), [1.0, 2.0, 3.0, 4.0])

    def test_median_is_the_upper_median(self):
        self.assertEqual(teacher.median([4.0, 1.0, 3.0, 2.0]), 3.0)
        self.assertEqual(teacher.median([2.0, 9.0, 1.0]), 2.0)


class ThreeWay(unittest.TestCase):
    def test_counts_steps_within_the_spread(self):
        # 3 steps of 3 entries, range 1 each. Per step (fak-on, fak-off, off-on):
        # step 0: (0.1, 0.1, 0.2) -> both within; step 1: (0.3, 0.1, 0.2) ->
        # only fak-off within; step 2: (0.0, 0.4, 0.4) -> both within.
        g = golden([[1.0, 1.0, 1.0]])
        on = [0.0] * 9
        off = [0.2, 0.0, 0.0, 0.2, 0.0, 0.0, 0.4, 0.0, 0.0]
        fak = [0.1, 0.0, 0.0, 0.3, 0.0, 0.0, 0.0, 0.0, 0.0]
        line = teacher.three_way(g, "m.teacher.json", on, off, fak, "off")
        self.assertIn("fak vs on 0.3000 / 0.1000", line)
        self.assertIn("fak vs off 0.4000 / 0.1000", line)
        self.assertIn("off vs on 0.4000 / 0.2000", line)
        self.assertIn("fak vs off <= off vs on: 3/3", line)
        self.assertIn("<= off vs on: 2/3", line)

    def test_dump_pair(self):
        g = golden([[2.0], [4.0]], top_k=1, samples=1)
        line = teacher.dump_pair(g, "m.teacher.json", [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0])
        self.assertEqual(line, "DUMPS m.teacher.json: steps 2 | rel max 0.5000 median 0.5000")


class ReadF32(unittest.TestCase):
    def test_little_endian_round_trip(self):
        vals = [1.5, -2.25, 0.0, 3.0e-3]
        data = array.array("f", vals)
        if sys.byteorder != "little":
            data.byteswap()
        with tempfile.TemporaryDirectory() as td:
            p = Path(td) / "x.fak.f32"
            p.write_bytes(data.tobytes())
            got = teacher.read_f32(p)
        self.assertEqual(len(got), 4)
        for a, b in zip(got, vals):
            self.assertAlmostEqual(a, b, places=6)


if __name__ == "__main__":
    unittest.main()
