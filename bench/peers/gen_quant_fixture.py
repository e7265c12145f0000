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

What is computed with which ggml function
-----------------------------------------

* quantize:   ``ggml_quantize_chunk(type, src, dst, 0, 1, n, NULL)`` (which
  runs ``quantize_row_*_ref``, or ``quantize_iq4_*`` without an importance
  matrix) for F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K,
  Q5_K, Q6_K, IQ4_NL, IQ4_XS; ``quantize_row_q8_1_ref`` and ``quantize_row_q8_K_ref``
  for the activation formats Q8_1 and Q8_K, which ggml_quantize_chunk lacks.
* dequantize: ``dequantize_row_*`` (``ggml_fp16_to_fp32_row`` and
  ``ggml_bf16_to_fp32_row`` for F16/BF16). ggml has none for Q8_1.
* vec_dot:    ``ggml_vec_dot_*_generic`` from libggml-cpu (the scalar
  kernels; compiled with FMA contraction, so fak's results may differ in the
  last bits: the test allows a small tolerance there), and
  ``ggml_vec_dot_f32/f16/bf16`` (SIMD, different summation order).

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
}
# The codebook formats: ggml quantizes them only with an importance matrix
# (and a codebook search), so their records are ggml's dequantizations and
# dot products of random blocks, plus blocks that sweep every codebook entry
# (bench/peers/gen_iq_grids.py builds those).
GRID_TYPES = ["iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq1_s", "iq1_m"]
VEC_DOT_TYPE = {
    "q4_0": "q8_0", "q5_0": "q8_0", "q8_0": "q8_0",
    "q4_1": "q8_1", "q5_1": "q8_1",
    "q4_k": "q8_k", "q5_k": "q8_k", "q6_k": "q8_k",
    "q2_k": "q8_k", "q3_k": "q8_k", "iq4_xs": "q8_k", "iq4_nl": "q8_0",
    "f32": "f32", "f16": "f16", "bf16": "bf16",
    **{t: "q8_k" for t in GRID_TYPES},
}
# Types quantized through ggml_quantize_chunk; q8_1/q8_k use their _ref.
CHUNK_TYPES = [
    "f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q4_k", "q5_k", "q6_k",
    "q2_k", "q3_k", "iq4_nl", "iq4_xs",
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
        for name in DOT_FN.values():
            fn = getattr(self.cpu, name)
            fn.argtypes = [
                ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p,
                ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
            ]
            fn.restype = None

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
        getattr(self.cpu, DOT_FN[ty])(n, s, 0, wb, 0, ab, 0, 1)
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
        out += blk
    return bytes(out)


# --------------------------------------------------------------------------
# Assembly
# --------------------------------------------------------------------------


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

    for idx, (name, finite, bits) in enumerate(inputs):
        src = bits_to_bytes(bits)
        for ty in filter(keep, CHUNK_TYPES + REF_TYPES):
            if not finite and ty not in ("f16", "bf16"):
                continue
            enc = g.quantize(ty, src)
            deq = b""
            if ty in DEQUANT_FN and (ty not in ("f16", "bf16") or not finite):
                deq = g.dequantize(ty, enc, N)
            records.append(pack_record(KIND_QUANTIZE, ty, idx, N, f"{ty}/{name}", [enc, deq]))

    rng = SplitMix64(0xDE0)
    for ty in filter(keep, [
        "f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q4_k", "q5_k", "q6_k", "q8_k",
        "q2_k", "q3_k", "iq4_nl", "iq4_xs", *GRID_TYPES,
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
