"""Unit tests of bench/peers/golden.py's file round trip: a golden file's
prompts read back as results (``old_results``) and written again
(``render_json``) keep every recorded greedy path, ``more_paths``
included, so ``--add-cpu-paths`` and ``--add-prompt`` change nothing
else in a file.

Run from the repository root: ``python3 -m unittest bench/test_golden_paths.py``.
Standard library only.
"""

from __future__ import annotations

import json
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))
import common  # noqa: E402
import golden  # noqa: E402


def prompt(name: str, more: list[dict] | None) -> dict:
    p = {
        "name": name,
        "text": "The capital of France is",
        "prompt_ids": [1, 2, 3],
        "greedy_ids": [4, 5],
        "margins": [0.5, 0.02],
        "greedy_ids_fa_off": [4, 6],
        "margins_fa_off": [0.4, 0.03],
    }
    if more is not None:
        p["more_paths"] = more
    return p


class RoundTrip(unittest.TestCase):
    def round_trip(self, file: dict, logits_file: str | None) -> dict:
        head = {k: v for k, v in file.items() if k not in ("prompts", "first_logits_file")}
        return json.loads(golden.render_json(head, logits_file, golden.old_results(file)))

    def test_more_paths_survive(self):
        more = [{"label": "flash attention on, CPU X (family 1 model 2, AVX2)", "greedy_ids": [4, 7], "margins": [0.3, 0.01]}]
        file = {
            "model_file": "m.gguf",
            "n_vocab": 8,
            "first_logits_file": "m.first-logits.f32",
            "prompts": [prompt("capital", more), prompt("code", None)],
        }
        self.assertEqual(self.round_trip(file, "m.first-logits.f32"), file)

    def test_compact_files_keep_their_top_logits(self):
        p = prompt("capital", [])
        p["top_logits"] = [[[4, 1.5], [5, 1.0]], [[5, 2.0], [6, 1.98]]]
        p["ranges"] = [[-3.0, 1.5], [-2.0, 2.0]]
        file = {"model_file": "g.gguf", "n_vocab": 8, "prompts": [p]}
        back = self.round_trip(file, None)
        # An empty list is not written.
        del p["more_paths"]
        self.assertEqual(back, file)


class CpuLabel(unittest.TestCase):
    def test_names_family_model_and_isa(self):
        label = golden.cpu_label()
        self.assertRegex(label, r"\(family \S+ model \S+, (AVX-512|AVX2|no AVX2)\)$|^an unknown CPU$")


class ReadGolden(unittest.TestCase):
    def test_missing_and_malformed_files_are_one_line_errors(self):
        with tempfile.TemporaryDirectory() as d:
            missing = Path(d) / "none.json"
            with self.assertRaisesRegex(common.PeerError, "does not exist"):
                common.read_golden(missing)
            bad = Path(d) / "bad.json"
            bad.write_text("{", encoding="utf-8")
            with self.assertRaises(common.PeerError):
                common.read_golden(bad)
            good = Path(d) / "good.json"
            good.write_text('{"prompts": []}', encoding="utf-8")
            self.assertEqual(common.read_golden(good), {"prompts": []})


if __name__ == "__main__":
    unittest.main()
