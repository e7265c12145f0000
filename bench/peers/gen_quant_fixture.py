#!/usr/bin/env python3
"""Generates the ggml bit-exactness fixture for fak-kernels.

llama.cpp's own ggml libraries (as installed by llama-cpp-python) are loaded
through ctypes; deterministic f32 rows (seeded, with edge cases) are pushed
through ggml's quantizers, dequantizers and generic dot products, and the
inputs and outputs are written to one small binary file that
``crates/fak-kernels/tests/fixture.rs`` replays against fak's kernels.

Usage (from the repository root)::

    python3 bench/peers/gen_quant_fixture.py \
        [/tmp/peervenv/lib/python3.11/site-packages/llama_cpp/lib/libggml-base.so] \
        [--cpu-lib PATH] [--out crates/fak-kernels/tests/data/quant_fixture.bin]

Only the standard library is used. ``--cpu-lib`` defaults to
``libggml-cpu.so`` next to the base library (needed for the dot products).
``--types q2_k,q3_k`` writes only those types' records (fixture.rs reads
every ``tests/data/quant_fixture*.bin``): the low-bit formats' records are
in ``quant_fixture_lowbit.bin``. They were made on an Intel Xeon where this
build's ``ggml_vec_dot_q5_0_q8_0_generic`` and ``ggml_vec_dot_f16`` gave
results outside the test's tolerance of fak's (and of the main fixture's),
so the main fixture was kept as it was. The codebook formats' records
(``--types iq2_xxs,iq2_xs,iq2_s,iq3_xxs,iq3_s,iq1_s,iq1_m --out
crates/fak-kernels/tests/data/quant_fixture_iq.bin``) are ggml's
dequantizations of random blocks and of blocks that run through every
codebook entry (``gen_iq_grids.py``), and its generic dot products of
random blocks: ggml quantizes these formats only with an importance matrix.
The ternary, 4-bit float and 1-bit formats' records (``--types
tq1_0,tq2_0,mxfp4,nvfp4,q1_0 --out
crates/fak-kernels/tests/data/quant_fixture_fp4.bin``) are ggml's
quantization of every finite row plus six rows of scale edges
(``edge_inputs``: MXFP4 blocks whose absolute max is a power of two or the
f32 just below one, from 2^-125 to FLT_MAX, 1e30 next to 1e-38, all-zero
blocks; NVFP4 sub-blocks on every UE4M3 rounding, saturation and subnormal
edge; TQ rounding ties), random blocks, blocks that run through every
MXFP4 exponent, every NVFP4 scale byte and every TQ1_0 byte value, and
generic dot products of quantized and random rows (MXFP4 also with
subnormal and with large scales).

What is computed with which ggml function
-----------------------------------------

* quantize:   ``ggml_quantize_chunk(type, src, dst, 0, 1, n, NULL)`` (which
  runs ``quantize_row_*_ref``, or ``quantize_iq4_*`` without an importance
  matrix) for F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K,
  Q5_K, Q6_K, IQ4_NL, IQ4_XS, TQ1_0, TQ2_0, MXFP4, NVFP4, Q1_0 (the last
  five run their ``quantize_row_*_ref`` with or without an importance
  matrix); ``quantize_row_q8_1_ref`` and ``quantize_row_q8_K_ref``
  for the activation formats Q8_1 and Q8_K, which ggml_quantize_chunk lacks.
* dequantize: ``dequantize_row_*`` (``ggml_fp16_to_fp32_row`` and
  ``ggml_bf16_to_fp32_row`` for F16/BF16). ggml has none for Q8_1.
* vec_dot:    ``ggml_vec_dot_*_generic`` from libggml-cpu (the scalar
  kernels; compiled with FMA contraction, so fak's results may differ in the
  last bits: the test allows a small tolerance there), and
  ``ggml_vec_dot_f32/f16/bf16`` (SIMD, different summation order). The
  activations are Q8_K for the k-quants, IQ4_XS, the codebook formats,
  TQ1_0 and TQ2_0, Q8_1 for Q4_1/Q5_1, Q8_0 for the rest. Where ggml has
  no SIMD kernel for an architecture it exports the generic one under the
  plain name (x86: ``ggml_vec_dot_nvfp4_q8_0``), which is then used.

File format (version 1, all integers little-endian)
----------------------------------------------------

::

    magic        8 bytes   b"FAKQFX01"
    provenance   u16 len + UTF-8   (library file names and SHA-256 prefixes)
    n_inputs     u32
      input:     u16 len + UTF-8 name
                 u32 flags           bit 0: all values finite
                 u32 n               number of f32 values
                 n * 4 bytes         the values (raw f32 bits)
    n_records    u32
      record:    u8  kind            1 quantize, 2 dequantize, 3 vec_dot
                 u32 ggml type id    target type / encoded type / weight type
                 u32 input index     quantize: the input row; else 0xFFFFFFFF
                 u32 n               elements in the row
                 u16 len + UTF-8 label
                 u32 n_blobs, then per blob: u32 len + bytes
        kind 1 blobs: [ggml's encoded row, ggml's dequantization of it as f32
                       (empty for F16/BF16 of finite rows and for Q8_1)]
        kind 2 blobs: [encoded row, ggml's f32 output]
        kind 3 blobs: [weight row, activation row in vec_dot_type,
                       ggml's result as one f32]

Inputs are generated from integer bit patterns (splitmix64, Irwin-Hall
normals from exact 24-bit uniforms) so that no platform libm is involved.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_LIB = Path("/tmp/peervenv/lib/python3.11/site-packages/llama_cpp/lib/libggml-base.so")
DEFAULT_OUT = ROOT / "crates" / "fak-kernels" / "tests" / "data" / "quant_fixture.bin"

MAGIC = b"FAKQFX01"
KIND_QUANTIZE, KIND_DEQUANTIZE, KIND_VEC_DOT = 1, 2, 3
NO_INPUT = 0xFFFFFFFF
N = 256  # elements per input row (one k-quant super-block, eight 32-blocks)
N_DOT = 512  # elements per vec_dot row (two super-blocks)

# ggml type ids (enum ggml_type) with block size and bytes per block.
TYPES = {
    "f32": (0, 1, 4),
    "f16": (1, 1, 2),
    "q4_0": (2, 32, 18),
    "q4_1": (3, 32, 20),
    "q5_0": (6, 32, 22),
    "q5_1": (7, 32, 24),
    "q8_0": (8, 32, 34),
    "q8_1": (9, 32, 36),
    "q2_k": (10, 256, 84),
    "q3_k": (11, 256, 110),
    "q4_k": (12, 256, 144),
    "q5_k": (13, 256, 176),
    "q6_k": (14, 256, 210),
    "q8_k": (15, 256, 292),
    "iq4_nl": (20, 32, 18),
    "iq4_xs": (23, 256, 136),
    "bf16": (30, 1, 2),
    "iq2_xxs": (16, 256, 66),
    "iq2_xs": (17, 256, 74),
    "iq3_xxs": (18, 256, 98),
    "iq1_s": (19, 256, 50),
    "iq3_s": (21, 256, 110),
    "iq2_s": (22, 256, 82),
    "iq1_m": (29, 256, 56),
    "tq1_0": (34, 256, 54),
    "tq2_0": (35, 256, 66),
    "mxfp4": (39, 32, 17),
    "nvfp4": (40, 64, 36),
    "q1_0": (41, 128, 18),
}
# The codebook formats: ggml quantizes them only with an importance matrix
# (and a codebook search), so their records are ggml's dequantizations and
# dot products of random blocks, plus blocks that sweep every codebook entry
# (bench/peers/gen_iq_grids.py builds those).
GRID_TYPES = ["iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq1_s", "iq1_m"]
# The ternary (TQ1_0, TQ2_0), 4-bit float (MXFP4: E8M0 scale per 32 values;
# NVFP4: UE4M3 scale per 16 values in 64-value blocks) and 1-bit (Q1_0)
# formats. They come last in every list below, so that a run for the other
# types draws the same random numbers as before they were added; the rows of
# edge_inputs() (scale extremes) are written only when one of them is asked
# for, and quantized only to them.
TERNARY_FP4_TYPES = ["tq1_0", "tq2_0", "mxfp4", "nvfp4", "q1_0"]
VEC_DOT_TYPE = {
    "q4_0": "q8_0", "q5_0": "q8_0", "q8_0": "q8_0",
    "q4_1": "q8_1", "q5_1": "q8_1",
    "q4_k": "q8_k", "q5_k": "q8_k", "q6_k": "q8_k",
    "q2_k": "q8_k", "q3_k": "q8_k", "iq4_xs": "q8_k", "iq4_nl": "q8_0",
    "f32": "f32", "f16": "f16", "bf16": "bf16",
    **{t: "q8_k" for t in GRID_TYPES},
    "tq1_0": "q8_k", "tq2_0": "q8_k", "mxfp4": "q8_0", "nvfp4": "q8_0", "q1_0": "q8_0",
}
# Types quantized through ggml_quantize_chunk; q8_1/q8_k use their _ref.
CHUNK_TYPES = [
    "f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q4_k", "q5_k", "q6_k",
    "q2_k", "q3_k", "iq4_nl", "iq4_xs", *TERNARY_FP4_TYPES,
]
REF_TYPES = ["q8_1", "q8_k"]
DEQUANT_FN = {
    "f16": "ggml_fp16_to_fp32_row", "bf16": "ggml_bf16_to_fp32_row",
    "q4_0": "dequantize_row_q4_0", "q4_1": "dequantize_row_q4_1",
    "q5_0": "dequantize_row_q5_0", "q5_1": "dequantize_row_q5_1",
    "q8_0": "dequantize_row_q8_0", "q4_k": "dequantize_row_q4_K",
    "q5_k": "dequantize_row_q5_K", "q6_k": "dequantize_row_q6_K",
    "q8_k": "dequantize_row_q8_K",
    "q2_k": "dequantize_row_q2_K", "q3_k": "dequantize_row_q3_K",
    "iq4_nl": "dequantize_row_iq4_nl", "iq4_xs": "dequantize_row_iq4_xs",
    **{t: f"dequantize_row_{t}" for t in GRID_TYPES},
    **{t: f"dequantize_row_{t}" for t in TERNARY_FP4_TYPES},
}
DOT_FN = {
    "q4_0": "ggml_vec_dot_q4_0_q8_0_generic", "q4_1": "ggml_vec_dot_q4_1_q8_1_generic",
    "q5_0": "ggml_vec_dot_q5_0_q8_0_generic", "q5_1": "ggml_vec_dot_q5_1_q8_1_generic",
    "q8_0": "ggml_vec_dot_q8_0_q8_0_generic", "q4_k": "ggml_vec_dot_q4_K_q8_K_generic",
    "q5_k": "ggml_vec_dot_q5_K_q8_K_generic", "q6_k": "ggml_vec_dot_q6_K_q8_K_generic",
    "q2_k": "ggml_vec_dot_q2_K_q8_K_generic", "q3_k": "ggml_vec_dot_q3_K_q8_K_generic",
    "iq4_nl": "ggml_vec_dot_iq4_nl_q8_0_generic", "iq4_xs": "ggml_vec_dot_iq4_xs_q8_K_generic",
    "f32": "ggml_vec_dot_f32", "f16": "ggml_vec_dot_f16", "bf16": "ggml_vec_dot_bf16",
    **{t: f"ggml_vec_dot_{t}_q8_K_generic" for t in GRID_TYPES},
    "tq1_0": "ggml_vec_dot_tq1_0_q8_K_generic", "tq2_0": "ggml_vec_dot_tq2_0_q8_K_generic",
    "mxfp4": "ggml_vec_dot_mxfp4_q8_0_generic", "nvfp4": "ggml_vec_dot_nvfp4_q8_0_generic",
    "q1_0": "ggml_vec_dot_q1_0_q8_0_generic",
}


class FixtureError(Exception):
    """A generation failure whose message names what was wrong."""


# --------------------------------------------------------------------------
# Deterministic values
# --------------------------------------------------------------------------


class SplitMix64:
    """splitmix64: a tiny, fully specified PRNG (no dependence on Python's)."""

    def __init__(self, seed: int) -> None:
        self.state = seed & 0xFFFFFFFFFFFFFFFF

    def next_u64(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
        return z ^ (z >> 31)

    def uniform(self) -> float:
        """Exact multiple of 2^-24 in [0, 1)."""
        return (self.next_u64() >> 40) / 16777216.0

    def normal(self) -> float:
        """Irwin-Hall approximation of N(0, 1): pure +/- arithmetic."""
        return sum(self.uniform() for _ in range(12)) - 6.0

    def byte_string(self, n: int) -> bytes:
        return bytes(self.next_u64() & 0xFF for _ in range(n))


def f32_bits(x: float) -> int:
    """Rounds a Python float to f32 (nearest even) and returns its bits."""
    return struct.unpack("<I", struct.pack("<f", x))[0]


def f16_bits(x: float) -> int:
    return struct.unpack("<H", struct.pack("<e", x))[0]


def bits_to_bytes(bits: list[int]) -> bytes:
    return struct.pack(f"<{len(bits)}I", *bits)


def make_inputs() -> list[tuple[str, bool, list[int]]]:
    """Returns (name, all_finite, f32 bit patterns) for every input row."""
    rows: list[tuple[str, bool, list[int]]] = []

    def add(name: str, values: list[float]) -> None:
        if len(values) != N:
            raise FixtureError(f"input {name}: {len(values)} values, expected {N}")
        rows.append((name, True, [f32_bits(v) for v in values]))

    rng = SplitMix64(0x5EED_F00D)
    add("gauss", [rng.normal() for _ in range(N)])

    rng = SplitMix64(2)
    v = [0.02 * rng.normal() for _ in range(N)]
    for i in (5, 77, 130, 200, 255):
        v[i] = (1.0 + 3.0 * rng.uniform()) * (1 if i % 2 else -1)
    add("gauss_outliers", v)

    rng = SplitMix64(3)
    add("uniform", [2.0 * rng.uniform() - 1.0 for _ in range(N)])
    add("zeros", [0.0] * N)
    add("constant", [0.3] * N)
    consts = [0.3, -1.75, 0.0, 1e-3, -0.0, 7.0, -65504.0, 2.0**-20]
    add("block_constants", [consts[i // 32] for i in range(N)])

    rng = SplitMix64(4)
    add("negative", [-(0.1 + 1.9 * rng.uniform()) for _ in range(N)])
    rng = SplitMix64(5)
    add("positive", [0.05 + 2.95 * rng.uniform() for _ in range(N)])

    rng = SplitMix64(6)
    v = [3.0e4 * rng.normal() for _ in range(N)]
    for i in range(96, 128):  # block 3: q4_0's d = max/-8 overflows f16
        v[i] = 2.0e6 * rng.normal()
    add("huge", v)

    rng = SplitMix64(7)
    v = [1e-6 * rng.normal() for _ in range(N)]
    for i in range(64, 96):  # block 2: f16-subnormal scales
        v[i] = 1e-9 * rng.normal()
    for i in range(160, 192):  # block 5: below ggml's GROUP_MAX_EPS
        v[i] = 1e-20 * rng.normal()
    add("tiny", v)

    v = []
    # block 0, Q8_0 ties: amax 127 gives d = 1, id = 1; x = k + 0.5
    v += [127.0] + [k + 0.5 for k in range(-15, 16)]
    # block 1, Q4_0 truncation edges: max -8 gives d = 1; x + 8.5 integer or .5
    v += [-8.0] + [k - 0.5 for k in range(-7, 9)] + [k + 0.0 for k in range(-7, 8)]
    # block 2, Q4_1: min 0, max 15 gives d = 1; x + 0.5 integer or .5
    v += [0.0, 15.0] + [k + 0.5 for k in range(0, 15)] + [k + 0.0 for k in range(1, 16)]
    # block 3, Q5_0: max -16 gives d = 1
    v += [-16.0] + [k - 0.5 for k in range(-15, 16)]
    # block 4, Q5_1: min 0, max 31 gives d = 1
    v += [0.0, 31.0] + [k + 0.5 for k in range(0, 30)]
    # block 5, f16 and bf16 rounding ties and range edges
    f16_edges = [
        1.0 + 2.0**-11, 1.0 + 3 * 2.0**-11, -(1.0 + 2.0**-11), 2049.0, 2051.0, 65504.0,
        65519.99609375, 65520.0, 2.0**-24, 2.0**-25, 3 * 2.0**-25, 2.0**-14 - 2.0**-25,
        1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8, -(1.0 + 2.0**-8), 2.0**-126, 2.0**-133,
    ]
    v += f16_edges + [0.25 * k for k in range(32 - len(f16_edges))]
    # block 6, Q8_0 with an inexact scale: amax 1, x = (k + 0.5) / 127
    v += [1.0] + [(k + 0.5) / 127.0 for k in range(-15, 16)]
    # block 7, f32 subnormals next to normal values
    v += [2.0**-149 * (k + 1) for k in range(16)] + [1e-3 * (k - 8) for k in range(16)]
    add("midpoints", v)

    # Q8_K / Q6_K ties: amax -127 gives iscale = 1, x = k + 0.5
    add("midpoints_k", [-127.0] + [((k * 37) % 253) - 126 + 0.5 for k in range(N - 1)])

    rng = SplitMix64(8)
    v = [0.0] * N
    for i in range(0, N, 19):
        v[i] = 4.0 * rng.normal()
    add("sparse", v)

    rng = SplitMix64(9)
    add("alternating", [(1 if i % 2 else -1) * (0.5 + rng.uniform()) for i in range(N)])
    add("ramp", [-1.0 + 2.0 * i / (N - 1) for i in range(N)])

    rng = SplitMix64(10)
    add("gauss2", [0.1 * rng.normal() + 0.05 for _ in range(N)])

    # Non-finite values and exotic bit patterns: only for F16/BF16.
    rng = SplitMix64(11)
    specials = [
        0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7FA00001, 0x7F800001, 0xFFC00123,
        0x80000000, 0x00000000, 0x7F7FFFFF, 0xFF7FFFFF, 0x00000001, 0x807FFFFF, 0x477FF000,
        0x477FEFFF, 0x38800000, 0x387FFFFF, 0x33800000, 0x33800001, 0x337FFFFF,
        0x3F808000, 0x3F818000, 0x3F808001, 0x7F7F8000, 0x7F7F7FFF,
    ]
    bits = specials + [f32_bits(rng.normal()) for _ in range(N - len(specials))]
    rows.append(("specials", False, bits))
    return rows


def f32_below(x: float) -> float:
    """The largest f32 below the positive f32 x (FLT_MAX below 2^128)."""
    bits = 0x7F800000 if x >= 2.0**128 else f32_bits(x)
    return struct.unpack("<f", struct.pack("<I", bits - 1))[0]


FLT_MAX = struct.unpack("<f", struct.pack("<I", 0x7F7FFFFF))[0]
# ggml's MXFP4 quantizer computes the block exponent as
# (uint8_t)(floorf(log2f(amax)) - 2 + 127): negative, hence undefined in C,
# when 0 < amax < 2^-125, so no row has such a 32-value block.
MXFP4_MIN_AMAX = 2.0**-125


def edge_inputs() -> list[tuple[str, bool, list[int]]]:
    """Rows for the ternary, 4-bit float and 1-bit formats' scale edges.

    MXFP4 derives its power-of-two scale from floorf(log2f(amax)), so the
    rows hold blocks whose absolute max is exactly a power of two and the
    largest f32 below one (where log2f rounds up to the integer), from
    2^-125 up to FLT_MAX, next to blocks that mix 1e30 with 1e-38,
    subnormals and all-zero blocks. NVFP4's UE4M3 sub-block scale
    (amax / 6) saturates at 448 above 240, rounds its mantissa half up (and
    carries into the exponent), has a subnormal range below 2^-6 and is 0
    below 2^-10: each 16-value sub-block of nv_scales sits on one of those
    edges. ternary_ties holds lroundf's half-way cases for TQ1_0/TQ2_0 and
    +-0 for Q1_0's sign bit.
    """
    rows: list[tuple[str, bool, list[int]]] = []

    def add(name: str, values: list[float]) -> None:
        if len(values) != N:
            raise FixtureError(f"input {name}: {len(values)} values, expected {N}")
        rows.append((name, True, [f32_bits(v) for v in values]))

    def block(rng: SplitMix64, amax: float, size: int, fill: list[float] | None = None) -> list[float]:
        """`size` values: +-amax first, then `fill`, then uniform in (-amax, amax)."""
        v = [amax if rng.next_u64() & 1 else -amax] + list(fill or [])
        while len(v) < size:
            v.append(amax * (2.0 * rng.uniform() - 1.0))
        return v[:size]

    # E2M1 levels (doubled: kvalues_mxfp4) are 0 1 2 3 4 6 8 12: with
    # amax 8 the scale is 1, and these are the midpoints between levels.
    mids = [0.5, 1.5, 2.5, 3.5, 5.0, 7.0]
    mids = mids + [-m for m in mids] + [0.25, -0.25, 0.75, -0.75, 6.0, -4.0, 1.0, -0.0]

    rng = SplitMix64(12)
    v = block(rng, 1e30, 32, [-7e29, 1e-38, -1e-38, 5e-39, -1e-45, 3.0, -2.5e10, 1e20, -1e25])
    v += [0.0, -0.0] * 16
    v += block(rng, 8.0, 32, mids)
    v += block(rng, f32_below(8.0), 32, mids)
    v += block(rng, f32_below(2.0**20), 32, [m * 2.0**17 for m in mids])
    v += block(rng, FLT_MAX, 32, [3e38, -1e38, 1e30, 1.0, -1e-38])
    v += block(rng, MXFP4_MIN_AMAX, 32, [2.0**-126, -(2.0**-127), 2.0**-128, 3 * 2.0**-130, 1e-38, -5e-39, 2.0**-149])
    v += block(rng, 1e30, 32, [1.0, -2.0, 1e-38, 1e25, -1e28])
    add("mx_extremes", v)

    rng = SplitMix64(13)
    v = []
    for k in (-125, -100, -1, 0, 1, 2, 64, 127):
        v += block(rng, 2.0**k, 32, [m * 2.0 ** (k - 3) for m in mids])
    add("mx_pow2", v)

    rng = SplitMix64(14)
    v = []
    for k in (-124, -60, -1, 0, 1, 3, 20, 128):
        v += block(rng, f32_below(2.0**k), 32, [m * 2.0 ** (k - 4) for m in mids])
    add("mx_below_pow2", v)

    # NVFP4 sub-blocks: amax / 6 on the UE4M3 edges (1440 / 6 = 240, the
    # largest scale below the saturation; 6 * 15.5: the mantissa carries;
    # 6 * 1.0625: half-way, rounds up; 6 * 2^-10 * 0.99: scale 0).
    rng = SplitMix64(15)
    v = [0.0] * 16
    for amax in (
        1440.0, 1500.0, 1536.0, 2688.0, 1e30, FLT_MAX, 6 * 2.0**-6, 6 * f32_below(2.0**-6),
        6 * 2.0**-7, 6 * 7.5 * 2.0**-9, 6 * 2.0**-10, 6 * 0.99 * 2.0**-10, 93.0, 6.375,
    ):
        v += block(rng, amax, 16)
    v += [6.0] + [m / 2 for m in mids[:15]]  # scale 0.5: E2M1 midpoints
    add("nv_scales", v)

    rng = SplitMix64(16)
    v = block(rng, 1.0, 16, [1e-38, -1e-38, 5e-39, 2.0**-149, 1e-30])
    v += [-(0.1 + rng.uniform()) for _ in range(16)]
    v += block(rng, 1e30, 16, [1.0, 1e-38, -1e20])
    v += block(rng, 3.0 * 2.0**-12, 16)
    for k in range(12):
        v += block(rng, 2.0 ** (k * 3 - 18) * (1.0 + rng.uniform()), 16)
    add("nv_mixed", v)

    # TQ: amax 3, so id = 1/3 rounds and x * id lands next to 0.5.
    v = [3.0, -3.0, 1.5, -1.5, f32_below(1.5), -f32_below(1.5), 1.5000001, -1.5000001, 0.0, -0.0]
    v += [1e-38, -1e-38, 2.9999998, -0.75, 0.7499999, 2.25]
    rng = SplitMix64(17)
    v += [3.0 * (2.0 * rng.uniform() - 1.0) for _ in range(112)]
    v += [0.0, -0.0] * 8 + [(-1.0) ** k * 1e-3 * k for k in range(112)]  # Q1_0: +-0 signs
    add("ternary_ties", v)
    return rows


def check_mxfp4_amax(name: str, bits: list[int]) -> None:
    """Refuses a row whose MXFP4 block exponent would be undefined in ggml."""
    vals = struct.unpack(f"<{len(bits)}f", bits_to_bytes(bits))
    for b in range(0, len(vals), 32):
        amax = max(abs(x) for x in vals[b:b + 32])
        if 0.0 < amax < MXFP4_MIN_AMAX:
            raise FixtureError(f"input {name}: MXFP4 block {b // 32} has amax {amax:g} < 2^-125")


# --------------------------------------------------------------------------
# ggml through ctypes
# --------------------------------------------------------------------------


class Ggml:
    def __init__(self, base_path: Path, cpu_path: Path) -> None:
        for p in (base_path, cpu_path):
            if not p.is_file():
                raise FixtureError(f"ggml library not found: {p}")
        # RTLD_GLOBAL so that libggml-cpu resolves its symbols from this base.
        self.base = ctypes.CDLL(str(base_path), mode=ctypes.RTLD_GLOBAL)
        self.cpu = ctypes.CDLL(str(cpu_path), mode=ctypes.RTLD_GLOBAL)
        self.cpu.ggml_cpu_init.restype = None
        self.cpu.ggml_cpu_init()
        b = self.base
        b.ggml_quantize_init.argtypes = [ctypes.c_int]
        b.ggml_quantize_init.restype = None
        b.ggml_quantize_chunk.argtypes = [
            ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
            ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p,
        ]
        b.ggml_quantize_chunk.restype = ctypes.c_size_t
        for name in ["quantize_row_q8_1_ref", "quantize_row_q8_K_ref", *DEQUANT_FN.values()]:
            fn = getattr(b, name)
            fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
            fn.restype = None
        self.dot_fns = {}
        for ty, name in DOT_FN.items():
            fn = self.dot_symbol(name)
            fn.argtypes = [
                ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p,
                ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
            ]
            fn.restype = None
            self.dot_fns[ty] = fn

    def dot_symbol(self, name: str):
        """A dot product kernel of libggml-cpu by name.

        Where an architecture has no SIMD kernel for a type, ggml-cpu's
        arch-fallback.h compiles the generic one under the plain name (on
        x86: ``ggml_vec_dot_nvfp4_q8_0``), and no ``_generic`` symbol
        exists; that plain symbol is then the generic kernel.
        """
        try:
            return getattr(self.cpu, name)
        except AttributeError:
            if not name.endswith("_generic"):
                raise
            return getattr(self.cpu, name.removesuffix("_generic"))

    def quantize(self, ty: str, src: bytes) -> bytes:
        tid, bs, ts = TYPES[ty]
        n = len(src) // 4
        if n % bs:
            raise FixtureError(f"{ty}: {n} values is not a multiple of {bs}")
        inp = ctypes.create_string_buffer(src, len(src))
        out = ctypes.create_string_buffer(n // bs * ts)
        if ty in REF_TYPES:
            fn = {"q8_1": self.base.quantize_row_q8_1_ref, "q8_k": self.base.quantize_row_q8_K_ref}[ty]
            fn(inp, out, n)
        else:
            self.base.ggml_quantize_init(tid)
            got = self.base.ggml_quantize_chunk(tid, inp, out, 0, 1, n, None)
            if got != len(out.raw):
                raise FixtureError(f"{ty}: ggml_quantize_chunk wrote {got} bytes, expected {len(out.raw)}")
        return out.raw

    def dequantize(self, ty: str, enc: bytes, n: int) -> bytes:
        inp = ctypes.create_string_buffer(enc, len(enc))
        out = ctypes.create_string_buffer(4 * n)
        getattr(self.base, DEQUANT_FN[ty])(inp, out, n)
        return out.raw

    def vec_dot(self, ty: str, w: bytes, a: bytes, n: int) -> bytes:
        wb = ctypes.create_string_buffer(w, len(w))
        ab = ctypes.create_string_buffer(a, len(a))
        s = ctypes.create_string_buffer(4)
        self.dot_fns[ty](n, s, 0, wb, 0, ab, 0, 1)
        return s.raw


# --------------------------------------------------------------------------
# Random but valid encoded rows (for dequantize and vec_dot)
# --------------------------------------------------------------------------


def sane_f16(rng: SplitMix64) -> bytes:
    """A random f16 scale in +-[2^-10, 2^2)."""
    mag = 2.0 ** (-10 + 12 * rng.uniform())
    return struct.pack("<H", f16_bits(mag if rng.next_u64() & 1 else -mag))


def random_row(ty: str, n: int, rng: SplitMix64) -> bytes:
    """Random block bytes with every float scale field replaced by a sane value."""
    _, bs, ts = TYPES[ty]
    out = bytearray()
    for _ in range(n // bs):
        blk = bytearray(rng.byte_string(ts))
        f16_fields = {
            "q4_0": [0], "q5_0": [0], "q8_0": [0], "q4_1": [0, 2], "q5_1": [0, 2],
            "q8_1": [0, 2], "q4_k": [0, 2], "q5_k": [0, 2], "q6_k": [208],
            "q2_k": [80, 82], "q3_k": [108], "iq4_nl": [0], "iq4_xs": [0],
            **{t: [0] for t in GRID_TYPES if t != "iq1_m"},
            "tq1_0": [52], "tq2_0": [64], "q1_0": [0],
        }.get(ty, [])
        for off in f16_fields:
            blk[off:off + 2] = sane_f16(rng)
        if ty == "iq1_m":
            # The f16 scale lives in the top nibbles of the four scale words.
            (d,) = struct.unpack("<H", sane_f16(rng))
            for k in range(4):
                w = struct.unpack_from("<H", blk, 48 + 2 * k)[0] & 0x0FFF
                struct.pack_into("<H", blk, 48 + 2 * k, w | (((d >> (4 * k)) & 0xF) << 12))
        if ty == "q8_k":
            blk[0:4] = struct.pack("<f", struct.unpack("<e", sane_f16(rng))[0])
        if ty == "mxfp4":
            # E8M0 exponent: d = 2^(e - 128) in [2^-10, 2^6) (every e: mxfp4/e_sweep).
            blk[0] = 118 + rng.next_u64() % 16
        out += blk
    return bytes(out)


# --------------------------------------------------------------------------
# Assembly
# --------------------------------------------------------------------------


def scale_sweeps() -> list[tuple[str, str, bytes]]:
    """Encoded rows through every scale code (MXFP4's 256 E8M0 exponents,
    NVFP4's 256 UE4M3 bytes, whose top bit ggml ignores but for 0x7F and
    0xFF) and through every byte value of TQ1_0's base-3 packed digits."""
    out = []
    mx = bytearray()
    for e in range(256):
        mx.append(e)
        mx += bytes(((j + e) & 15) | (((15 - j + 3 * e) & 15) << 4) for j in range(16))
    out.append(("mxfp4", "e_sweep", bytes(mx)))
    nv = bytearray()
    for b in range(64):
        nv += bytes(range(4 * b, 4 * b + 4))
        nv += bytes(((j + b) & 15) | (((31 - j + 5 * b) & 15) << 4) for j in range(32))
    out.append(("nvfp4", "scale_sweep", bytes(nv)))
    tq = bytearray()
    qh_vals = [0, 1, 2, 3, 26, 27, 80, 81, 82, 121, 122, 161, 162, 163, 200, 241, 242, 243, 244, 250, 254, 255, 128, 64]
    for b in range(6):
        tq += bytes((48 * b + j) & 0xFF for j in range(48))
        tq += bytes(qh_vals[4 * b:4 * b + 4])
        tq += struct.pack("<H", f16_bits(0.5 + 0.25 * b))
    out.append(("tq1_0", "byte_sweep", bytes(tq)))
    return out


def grid_sweeps() -> list[tuple[str, bytes, int]]:
    """Blocks whose indices run through every entry of each codebook."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import gen_iq_grids  # noqa: E402

    out = []
    for name, entries, per, fn, build, _ in gen_iq_grids.GRIDS:
        ty = fn.removeprefix("dequantize_row_")
        out.append((ty, build(entries), entries * per))
    return out


def pack_str(s: str) -> bytes:
    b = s.encode()
    return struct.pack("<H", len(b)) + b


def pack_record(kind: int, ty: str, input_idx: int, n: int, label: str, blobs: list[bytes]) -> bytes:
    out = struct.pack("<BIII", kind, TYPES[ty][0], input_idx, n) + pack_str(label)
    out += struct.pack("<I", len(blobs))
    for blob in blobs:
        out += struct.pack("<I", len(blob)) + blob
    return out


def sha_prefix(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()[:16]


def build(g: Ggml, provenance: str, only: set[str] | None = None) -> bytes:
    """The fixture's bytes; `only`: the types whose records it holds (all if None)."""
    inputs = make_inputs()
    records: list[bytes] = []
    keep = (lambda ty: True) if only is None else (lambda ty: ty in only)
    n_common = len(inputs)
    if any(map(keep, TERNARY_FP4_TYPES)):
        inputs += edge_inputs()

    for idx, (name, finite, bits) in enumerate(inputs):
        src = bits_to_bytes(bits)
        for ty in filter(keep, CHUNK_TYPES + REF_TYPES):
            if not finite and ty not in ("f16", "bf16"):
                continue
            if idx >= n_common and ty not in TERNARY_FP4_TYPES:
                continue
            if ty == "mxfp4":
                check_mxfp4_amax(name, bits)
            enc = g.quantize(ty, src)
            deq = b""
            if ty in DEQUANT_FN and (ty not in ("f16", "bf16") or not finite):
                deq = g.dequantize(ty, enc, N)
            records.append(pack_record(KIND_QUANTIZE, ty, idx, N, f"{ty}/{name}", [enc, deq]))

    rng = SplitMix64(0xDE0)
    for ty in filter(keep, [
        "f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q4_k", "q5_k", "q6_k", "q8_k",
        "q2_k", "q3_k", "iq4_nl", "iq4_xs", *GRID_TYPES, *TERNARY_FP4_TYPES,
    ]):
        n = N * (8 if ty in GRID_TYPES else 1)
        enc = random_row(ty, n, rng)
        records.append(
            pack_record(KIND_DEQUANTIZE, ty, NO_INPUT, n, f"{ty}/random", [enc, g.dequantize(ty, enc, n)])
        )
    for ty, enc, n in filter(lambda r: keep(r[0]), grid_sweeps()):
        records.append(
            pack_record(KIND_DEQUANTIZE, ty, NO_INPUT, n, f"{ty}/sweep", [enc, g.dequantize(ty, enc, n)])
        )
    for ty, label, enc in filter(lambda r: keep(r[0]), scale_sweeps()):
        n = len(enc) // TYPES[ty][2] * TYPES[ty][1]
        records.append(
            pack_record(KIND_DEQUANTIZE, ty, NO_INPUT, n, f"{ty}/{label}", [enc, g.dequantize(ty, enc, n)])
        )

    rng = SplitMix64(0xD07)
    for ty, vt in ((t, v) for t, v in VEC_DOT_TYPE.items() if keep(t)):
        acts = bits_to_bytes([f32_bits(rng.normal()) for _ in range(N_DOT)])
        a = acts if vt == "f32" else g.quantize(vt, acts)
        weights = bits_to_bytes([f32_bits(0.05 * rng.normal()) for _ in range(N_DOT)])
        if ty in GRID_TYPES:
            rows = [(f"random{k}", random_row(ty, N_DOT, rng)) for k in range(4)]
        else:
            rows = [("quantized", weights if ty == "f32" else g.quantize(ty, weights))]
        if ty not in ("f32", "f16", "bf16", *GRID_TYPES):
            rows.append(("random", random_row(ty, N_DOT, rng)))
        if ty == "mxfp4":
            # Subnormal and tiny scales (e 0..7), and large ones (e 200..239:
            # the dot stays finite).
            for label, lo in (("low_scales", 0), ("high_scales", 200)):
                w = bytearray(random_row(ty, N_DOT, rng))
                for b in range(0, len(w), 17):
                    w[b] = lo + (b // 17 * 5) % (8 if lo == 0 else 40)
                rows.append((label, bytes(w)))
        for kind, w in rows:
            s = g.vec_dot(ty, w, a, N_DOT)
            records.append(pack_record(KIND_VEC_DOT, ty, NO_INPUT, N_DOT, f"{ty}.{vt}/{kind}", [w, a, s]))

    out = bytearray(MAGIC) + pack_str(provenance)
    out += struct.pack("<I", len(inputs))
    for name, finite, bits in inputs:
        out += pack_str(name) + struct.pack("<II", 1 if finite else 0, len(bits)) + bits_to_bytes(bits)
    out += struct.pack("<I", len(records))
    for r in records:
        out += r
    return bytes(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("lib", nargs="?", type=Path, default=DEFAULT_LIB, help="path to libggml-base.so")
    ap.add_argument("--cpu-lib", type=Path, help="path to libggml-cpu.so (default: next to lib)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="fixture file to write")
    ap.add_argument("--types", help="comma-separated types whose records to write (default: all)")
    args = ap.parse_args()
    only = set(args.types.split(",")) if args.types else None
    if only is not None and not only <= set(TYPES):
        print(f"gen_quant_fixture: unknown types {sorted(only - set(TYPES))}", file=sys.stderr)
        return 2
    cpu = args.cpu_lib or args.lib.with_name("libggml-cpu.so")
    try:
        g = Ggml(args.lib, cpu)
        provenance = (
            f"gen_quant_fixture.py v1; {args.lib.name} sha256:{sha_prefix(args.lib)}; "
            f"{cpu.name} sha256:{sha_prefix(cpu)}"
        )
        data = build(g, provenance, only)
    except (FixtureError, OSError, AttributeError) as e:
        print(f"gen_quant_fixture: {e}", file=sys.stderr)
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(data)
    print(f"wrote {args.out} ({len(data)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
