#!/usr/bin/env python3
"""Reads the IQ1/IQ2/IQ3 codebooks out of ggml's dequantizers.

The grid formats (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S)
store, per group of 8 (or 4) weights, an index into a codebook of
magnitudes: the format is its codebook. Nothing but ggml defines those
codebooks, so this script measures them through ggml's public
``dequantize_row_*`` functions: it builds blocks whose indices run through
every codebook entry, with scale 1 and no signs, dequantizes them and
reads each entry back from the values.

Each entry's values come from a handful of levels (IQ2: 8, 25, 43; IQ3_XXS:
4 ... 62; IQ3_S: 1 ... 15; IQ1: -1, 0, 1), so the generated Rust module
stores each entry as its level codes, 2 or 3 bits per value in one ``u16``,
and expands them into byte images at compile time.

Usage (from the repository root, with the peer built by ``bench/peers/setup.sh``)::

    python3 bench/peers/gen_iq_grids.py [bench/.venv/lib/python3.11/site-packages/llama_cpp/lib/libggml-base.so] \
        [--out crates/fak-kernels/src/blocks/iq_grids.rs]

Standard library only. ``crates/fak-kernels/tests/fixture.rs`` checks the
result independently: ggml's dequantizations of blocks that sweep every
index, and of random blocks, against fak's, bit for bit.
"""

from __future__ import annotations

import argparse
import ctypes
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_LIB = ROOT / "bench" / ".venv" / "lib" / "python3.11" / "site-packages" / "llama_cpp" / "lib" / "libggml-base.so"
DEFAULT_OUT = ROOT / "crates" / "fak-kernels" / "src" / "blocks" / "iq_grids.rs"
ONE = 0x3C00  # f16 1.0


class GridError(Exception):
    """A measurement that does not fit the expected codebook shape."""


def dequant(lib: ctypes.CDLL, fn: str, blocks: bytes, n: int) -> list[float]:
    f = getattr(lib, fn)
    f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    f.restype = None
    inp = ctypes.create_string_buffer(blocks, len(blocks))
    out = ctypes.create_string_buffer(4 * n)
    f(inp, out, n)
    return list(struct.unpack(f"<{n}f", out.raw))


def iq2_xxs_blocks(entries: int) -> bytes:
    """32 indices per block: 8 sub-blocks of 4 index bytes, signs and scale 0."""
    out = bytearray()
    for blk in range(entries // 32):
        b = bytearray(struct.pack("<H", ONE))
        for ib in range(8):
            b += bytes(32 * blk + 4 * ib + l for l in range(4)) + b"\0\0\0\0"
        out += b
    return bytes(out)


def iq2_xs_blocks(entries: int) -> bytes:
    """32 indices per block: 9-bit indices in u16s, signs and scales 0."""
    out = bytearray()
    for blk in range(entries // 32):
        b = bytearray(struct.pack("<H", ONE))
        b += struct.pack("<32H", *(32 * blk + i for i in range(32)))
        b += bytes(8)
        out += b
    return bytes(out)


def iq2_s_blocks(entries: int) -> bytes:
    """32 indices per block: low bytes in qs, 2 high bits each in qh."""
    out = bytearray()
    for blk in range(entries // 32):
        idx = [32 * blk + i for i in range(32)]
        qs = bytes(i & 0xFF for i in idx) + bytes(32)  # grid low bits, then signs (0)
        qh = bytes(sum(((idx[4 * ib + l] >> 8) & 3) << (2 * l) for l in range(4)) for ib in range(8))
        out += struct.pack("<H", ONE) + qs + qh + bytes(8)
    return bytes(out)


def iq3_xxs_blocks(entries: int) -> bytes:
    """64 indices per block, then 8 scale-and-sign words of 0."""
    out = bytearray()
    for blk in range(entries // 64):
        out += struct.pack("<H", ONE) + bytes(64 * blk + i for i in range(64)) + bytes(32)
    return bytes(out)


def iq3_s_blocks(entries: int) -> bytes:
    """64 indices per block: low bytes in qs, one high bit each in qh."""
    out = bytearray()
    for blk in range(entries // 64):
        idx = [64 * blk + i for i in range(64)]
        qs = bytes(i & 0xFF for i in idx)
        qh = bytes(sum(((idx[8 * sb + k] >> 8) & 1) << k for k in range(8)) for sb in range(8))
        out += struct.pack("<H", ONE) + qs + qh + bytes(32) + bytes(4)
    return bytes(out)


def iq1_s_blocks(entries: int) -> bytes:
    """32 indices per block: low bytes in qs, 3 high bits each in qh; scale
    code 0 (scale 1), shift +1/8."""
    out = bytearray()
    for blk in range(entries // 32):
        idx = [32 * blk + i for i in range(32)]
        qs = bytes(i & 0xFF for i in idx)
        qh = [sum(((idx[4 * ib + l] >> 8) & 7) << (3 * l) for l in range(4)) for ib in range(8)]
        out += struct.pack("<H", ONE) + qs + struct.pack("<8H", *qh)
    return bytes(out)


# name, entries, values per entry, dequantizer, block builder, value -> level
GRIDS = [
    ("IQ2XXS", 256, 8, "dequantize_row_iq2_xxs", iq2_xxs_blocks, lambda y: y * 8),
    ("IQ2XS", 512, 8, "dequantize_row_iq2_xs", iq2_xs_blocks, lambda y: y * 8),
    ("IQ2S", 1024, 8, "dequantize_row_iq2_s", iq2_s_blocks, lambda y: y * 8),
    ("IQ3XXS", 256, 4, "dequantize_row_iq3_xxs", iq3_xxs_blocks, lambda y: y * 4),
    ("IQ3S", 512, 4, "dequantize_row_iq3_s", iq3_s_blocks, lambda y: y),
    ("IQ1S", 2048, 8, "dequantize_row_iq1_s", iq1_s_blocks, lambda y: y - 0.125),
]


def measure(lib: ctypes.CDLL, name: str, entries: int, per: int, fn: str, build, to_level) -> list[list[int]]:
    values = dequant(lib, fn, build(entries), entries * per)
    rows = []
    for e in range(entries):
        row = []
        for v in values[per * e: per * e + per]:
            level = to_level(v)
            if level != int(level):
                raise GridError(f"{name} entry {e}: value {v} is not a whole level")
            row.append(int(level))
        rows.append(row)
    return rows


def render(grids: list[tuple[str, int, int, list[int], list[int]]]) -> str:
    out = [
        "//! The IQ1/IQ2/IQ3 codebooks, as ggml's dequantizers give them.",
        "//!",
        "//! Generated by `bench/peers/gen_iq_grids.py` (which reads every entry",
        "//! back through ggml's `dequantize_row_*`); do not edit by hand.",
        "//! Each entry is stored as level codes, `BITS` bits per value, value 0 in",
        "//! the low bits; `expand8` and `expand4` (in `iq_grid`) turn the codes into the",
        "//! entries' byte images at compile time.",
        "",
    ]
    for name, entries, per, levels, codes in grids:
        bits = 2 if len(levels) <= 4 else 3
        ty = "i8" if min(levels) < 0 else "u8"
        out.append(f"/// The {len(levels)} levels of the {name} codebook's values.")
        out.append(f"pub(crate) const {name}_LEVELS: [{ty}; {len(levels)}] = {levels};")
        out.append(f"/// Level codes of the {entries} {name} entries ({per} values, {bits} bits each).")
        out.append(f"pub(crate) const {name}_CODES: [u16; {entries}] = [")
        for i in range(0, entries, 12):
            out.append("    " + " ".join(f"0x{c:04x}," for c in codes[i:i + 12]))
        out.append("];")
        out.append("")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("lib", nargs="?", type=Path, default=DEFAULT_LIB, help="path to libggml-base.so")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args()
    if not args.lib.is_file():
        print(f"gen_iq_grids: ggml library not found: {args.lib}", file=sys.stderr)
        return 2
    lib = ctypes.CDLL(str(args.lib))
    grids = []
    try:
        for name, entries, per, fn, build, to_level in GRIDS:
            rows = measure(lib, name, entries, per, fn, build, to_level)
            levels = sorted({v for r in rows for v in r})
            bits = 2 if len(levels) <= 4 else 3
            if len(levels) > 8:
                raise GridError(f"{name}: {len(levels)} levels")
            codes = [sum(levels.index(v) << (bits * j) for j, v in enumerate(r)) for r in rows]
            grids.append((name, entries, per, levels, codes))
    except GridError as e:
        print(f"gen_iq_grids: {e}", file=sys.stderr)
        return 1
    args.out.write_text(render(grids))
    print(f"gen_iq_grids: wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
