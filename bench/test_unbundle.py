"""Unit tests of bench/unbundle.py, on a synthetic folder and on committed bundles.

Run from the repository root: ``python3 -m unittest bench/test_unbundle.py``.
Standard library only.
"""

from __future__ import annotations

import json
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import unbundle  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


class Unbundle(unittest.TestCase):
    def test_json_and_text_entries_come_back_as_files(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            folder = Path(d)
            report = {"schema": "fak-bench-single/1", "tok_s": 101.25, "reps": [1, 2]}
            (folder / "runs.json").write_text(
                json.dumps({"single-t2.json": report, "sub/table.txt": "a | b\n1 | 2\n"}), encoding="utf-8"
            )
            written = unbundle.unbundle(folder, folder)
            self.assertEqual(sorted(p.relative_to(folder).as_posix() for p in written), ["single-t2.json", "sub/table.txt"])
            self.assertEqual(json.loads((folder / "single-t2.json").read_text()), report)
            self.assertEqual((folder / "sub" / "table.txt").read_text(), "a | b\n1 | 2\n")

    def test_existing_files_are_kept_unless_forced(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            folder = Path(d)
            (folder / "runs.json").write_text(json.dumps({"a.txt": "new"}), encoding="utf-8")
            (folder / "a.txt").write_text("old", encoding="utf-8")
            self.assertEqual(unbundle.unbundle(folder, folder), [])
            self.assertEqual((folder / "a.txt").read_text(), "old")
            unbundle.unbundle(folder, folder, force=True)
            self.assertEqual((folder / "a.txt").read_text(), "new")

    def test_a_key_outside_the_folder_is_refused(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            folder = Path(d)
            (folder / "runs.json").write_text(json.dumps({"../x.txt": "no"}), encoding="utf-8")
            with self.assertRaises(ValueError):
                unbundle.unbundle(folder, folder / "out")

    def test_committed_bundles_parse_and_name_plain_files(self) -> None:
        bundles = sorted((ROOT / "docs" / "results").rglob("runs.json"))
        self.assertTrue(bundles)
        for path in bundles:
            for key in unbundle.entries(path.parent):
                unbundle.safe(key)
                self.assertFalse((path.parent / key).exists(), f"{path}: {key} is both a file and an entry")


if __name__ == "__main__":
    unittest.main()
