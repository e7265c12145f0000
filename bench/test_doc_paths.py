"""Every results path the docs cite exists.

README.md and every page under docs/ name the files behind their figures
(``docs/results/<run>/<file>``). This walks those pages and checks each
path. A path followed by a placeholder (``…-<engine>.json``,
``…-{a,b}.json``, ``…-*.json``), or one that ends in ``-`` or ``_``, is a
prefix: some file must start with it.
"""

from __future__ import annotations

import glob
import re
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CITED = re.compile(r"docs/results/[A-Za-z0-9_.\-/]+")
PLACEHOLDER_STARTS = "{<*["


def cited_paths(text: str) -> list[tuple[str, bool]]:
    """Each cited results path in ``text``, and whether it is a prefix."""
    out = []
    for m in CITED.finditer(text):
        path = m.group(0).rstrip(".,;:)`'\"")
        after = text[m.end() : m.end() + 1]
        prefix = (after != "" and after in PLACEHOLDER_STARTS) or path.endswith(("-", "_"))
        out.append((path, prefix))
    return out


def missing_paths(root: Path) -> list[str]:
    """``page: path`` for every cited path that names nothing under ``root``."""
    pages = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    missing = []
    for page in pages:
        for path, prefix in cited_paths(page.read_text(encoding="utf-8")):
            found = bool(glob.glob(str(root / path) + "*")) if prefix else (root / path).exists()
            if not found:
                missing.append(f"{page.relative_to(root)}: {path}")
    return missing


class DocPaths(unittest.TestCase):
    def test_every_cited_results_path_exists(self) -> None:
        self.assertEqual(missing_paths(ROOT), [])

    def test_placeholders_and_prefixes_are_read_as_prefixes(self) -> None:
        text = (
            "see docs/results/r/a.json, docs/results/r/b-<engine>.json and "
            "docs/results/r/c-{x,y}.json or docs/results/r/d-"
        )
        self.assertEqual(
            cited_paths(text),
            [
                ("docs/results/r/a.json", False),
                ("docs/results/r/b-", True),
                ("docs/results/r/c-", True),
                ("docs/results/r/d-", True),
            ],
        )

    def test_a_missing_file_is_reported(self) -> None:
        import tempfile

        with tempfile.TemporaryDirectory() as d:
            root = Path(d)
            (root / "docs" / "results" / "r").mkdir(parents=True)
            for name in ("here.json", "run-1.json"):
                (root / "docs" / "results" / "r" / name).write_text("{}")
            (root / "README.md").write_text(
                "docs/results/r/here.json docs/results/r/gone.json docs/results/r/run-\n"
            )
            self.assertEqual(missing_paths(root), ["README.md: docs/results/r/gone.json"])


if __name__ == "__main__":
    unittest.main()
