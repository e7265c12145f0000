#!/usr/bin/env python3
"""Write the reports merged into a results folder's runs.json back as files.

``unbundle.py docs/results/<run> [--out DIR]``

A run folder under docs/results keeps the reports that no page needs as a
file of its own in ``runs.json``: an object from each original file name
(relative to the folder) to its content, parsed JSON for a ``.json`` report
and a string for a text file (docs/results/README.md). This writes every
entry back under DIR (default: the folder itself), so the commands that the
docs quote, which name the original files, run as printed. A JSON report is
written with two-space indents; a text file byte for byte. ``bundle.json``
is read the same way where a folder has one. Existing files are left alone
unless ``--force``.

Standard library only.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path, PurePosixPath
from typing import Any

BUNDLES = ("runs.json", "bundle.json")


def entries(folder: Path) -> dict[str, Any]:
    """Every entry of the folder's bundles, by file name relative to it."""
    out: dict[str, Any] = {}
    for name in BUNDLES:
        path = folder / name
        if path.is_file():
            for key, value in json.loads(path.read_text(encoding="utf-8")).items():
                if key in out:
                    raise ValueError(f"{path}: {key} is also in another bundle")
                out[key] = value
    return out


def safe(key: str) -> PurePosixPath:
    """The key as a relative path that stays inside the folder."""
    rel = PurePosixPath(key)
    if rel.is_absolute() or ".." in rel.parts or not rel.parts:
        raise ValueError(f"{key!r} is not a file name inside the folder")
    return rel


def content(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def unbundle(folder: Path, out: Path, force: bool = False) -> list[Path]:
    """Write every entry under ``out``; returns the files written."""
    written = []
    for key, value in sorted(entries(folder).items()):
        path = out / safe(key)
        if path.exists() and not force:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content(value), encoding="utf-8")
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path, help="a run folder under docs/results")
    ap.add_argument("--out", type=Path, help="where to write the files (default: the folder)")
    ap.add_argument("--force", action="store_true", help="overwrite files that exist")
    args = ap.parse_args(argv)
    if not any((args.folder / name).is_file() for name in BUNDLES):
        print(f"{args.folder}: no {' or '.join(BUNDLES)}", file=sys.stderr)
        return 1
    written = unbundle(args.folder, args.out or args.folder, args.force)
    print(f"{len(written)} files written under {args.out or args.folder}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
