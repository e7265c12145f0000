"""Workload and token-stream definitions shared by the benchmark peers.

Standard library only, so ``bench/compare.py``, tests and any Python
checker can import it without llama-cpp-python. fak's ``fak bench batch``
and ``fak bench fleet`` implement the same definitions in Rust; this module
is the reference text for both.

Token stream (every workload)::

    state_0 = 2463534242
    state_n = state_{n-1} * 6364136223846793005 + 1442695040888963407  (mod 2**64)
    stream[n] = (state_n >> 33) % n_vocab        for n = 1, 2, 3, ...

``lcg_ids(v, n)`` returns ``[stream[1], ..., stream[n]]`` (Python index
``k`` holds ``stream[k + 1]``).

Batched (one stream per batch size B and per rep)::

    prompt of sequence i     stream[16*i + 1 .. 16*i + 16]        (i = 0..B-1)
    decode step s, seq i     stream[16*B + s*B + i + 1]           (s = 0..15)

    stream: | seq0 prompt | seq1 prompt | ... | seqB-1 prompt | step0: seq0..seqB-1 | step1 ... |
              16 ids        16 ids              16 ids          B ids

Fleet (one stream per run)::

    prefix                   stream[1 .. P]
    result of agent a, turn t  the next R ids, turn-major then agent:
                             stream[P + (t*A + a)*R + 1 .. P + (t*A + a + 1)*R]

    agent a's cache:  [prefix (copied)] [res t0] [g1..gD t0] [res t1] ... ; the
    ingest of turn t > 0 is [gD of turn t-1] + res t, so gD enters the cache.
"""

from __future__ import annotations

import hashlib
import math
import struct
from dataclasses import dataclass

LCG_STATE0 = 2463534242
LCG_MUL = 6364136223846793005
LCG_INC = 1442695040888963407
MASK64 = (1 << 64) - 1

BATCH_SCHEMA = "fak-bench-batch/1"
FLEET_SCHEMA = "fak-bench-fleet/1"

BATCH_PROMPT = 16
BATCH_STEPS = 16
DEFAULT_BATCHES = (1, 8, 32, 128, 256, 512, 1024)

BATCH_TOKEN_STREAM = (
    "lcg state0=2463534242 mul=6364136223846793005 inc=1442695040888963407 "
    "stream[n]=(state_n>>33)%n_vocab for n=1,2,...; one stream per batch size and rep; "
    "sequence i prompt = stream[16i+1..16i+16]; decode step s (0..15) token of sequence i "
    "= stream[16B+sB+i+1], fixed (not sampled)"
)
FLEET_TOKEN_STREAM = (
    "lcg state0=2463534242 mul=6364136223846793005 inc=1442695040888963407 "
    "stream[n]=(state_n>>33)%n_vocab for n=1,2,...; one stream per run; prefix = stream[1..P]; "
    "then for turn t, for agent a (turn-major): that agent's result = the next R ids; "
    "ingest of turn t = result (t=0) or [previous g_D] + result (t>0); D greedy tokens per turn "
    "(argmax, ties -> lowest id)"
)


class WorkloadError(Exception):
    """A workload parameter that cannot describe a run; the message names it."""


def lcg_ids(n_vocab: int, n: int) -> list[int]:
    """``[stream[1], ..., stream[n]]`` of a fresh stream."""
    if n_vocab < 1:
        raise WorkloadError(f"n_vocab must be positive, got {n_vocab}")
    state = LCG_STATE0
    out = []
    for _ in range(n):
        state = (state * LCG_MUL + LCG_INC) & MASK64
        out.append((state >> 33) % n_vocab)
    return out


def median(xs: list[float]) -> float:
    """Median (mean of the middle two for even lengths); 0.0 when empty."""
    v = sorted(xs)
    n = len(v)
    if n == 0:
        return 0.0
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2.0


def nearest_rank(xs: list[float], q: float) -> float:
    """Nearest-rank percentile ``q`` in (0, 1]: sorted[ceil(q*n) - 1]; 0.0 when empty."""
    v = sorted(xs)
    n = len(v)
    if n == 0:
        return 0.0
    rank = min(max(math.ceil(q * n), 1), n)
    return v[rank - 1]


# --------------------------------------------------------------------------
# Batched
# --------------------------------------------------------------------------


def parse_batches(text: str) -> list[int]:
    """``"1,8,32"`` -> ``[1, 8, 32]``; every entry a positive integer."""
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            b = int(part)
        except ValueError as e:
            raise WorkloadError(f"--batch entry {part!r} is not an integer") from e
        if b < 1:
            raise WorkloadError(f"--batch entry {b} must be at least 1")
        out.append(b)
    if not out:
        raise WorkloadError("--batch names no batch size")
    return out


@dataclass(frozen=True)
class BatchWorkload:
    """The token ids of one batched run with ``batch`` sequences."""

    batch: int
    ids: tuple[int, ...]  # stream[1 .. 32*batch]

    @staticmethod
    def make(n_vocab: int, batch: int) -> "BatchWorkload":
        if batch < 1:
            raise WorkloadError(f"batch must be at least 1, got {batch}")
        n = (BATCH_PROMPT + BATCH_STEPS) * batch
        return BatchWorkload(batch, tuple(lcg_ids(n_vocab, n)))

    def prompt(self, i: int) -> list[int]:
        """Sequence ``i``'s 16 prompt ids (positions 0..15)."""
        o = BATCH_PROMPT * i
        return list(self.ids[o : o + BATCH_PROMPT])

    def step(self, s: int) -> list[int]:
        """Decode step ``s``'s B ids, sequence order (positions 16 + s)."""
        o = BATCH_PROMPT * self.batch + s * self.batch
        return list(self.ids[o : o + self.batch])


# --------------------------------------------------------------------------
# Fleet
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class FleetShape:
    """One fleet run: prefix P, turns T, agents A, decode D, result R."""

    prefix: int
    turns: int
    agents: int
    decode: int
    result: int

    def check(self) -> None:
        for name in ("prefix", "turns", "agents", "decode", "result"):
            if getattr(self, name) < 1:
                raise WorkloadError(f"fleet {name} must be at least 1, got {getattr(self, name)}")

    def stream_len(self) -> int:
        return self.prefix + self.turns * self.agents * self.result

    def final_context(self) -> int:
        """Cells per agent at the end: P + T*(R+D) - 1."""
        return self.prefix + self.turns * (self.result + self.decode) - 1

    def ingest_len(self, turn: int) -> int:
        return self.result + (1 if turn > 0 else 0)

    def tokens_computed(self) -> int:
        """P + every ingest token + every decode-step token fed."""
        a, t = self.agents, self.turns
        return self.prefix + a * t * self.result + a * (t - 1) + a * t * (self.decode - 1)

    def tokens_reused(self) -> int:
        return self.agents * self.prefix

    def prefix_ids(self, ids: list[int]) -> list[int]:
        return ids[: self.prefix]

    def result_ids(self, ids: list[int], turn: int, agent: int) -> list[int]:
        o = self.prefix + (turn * self.agents + agent) * self.result
        return ids[o : o + self.result]

    def as_dict(self) -> dict[str, int]:
        return {
            "prefix": self.prefix,
            "turns": self.turns,
            "agents": self.agents,
            "decode": self.decode,
            "result": self.result,
        }


def _grid(prefix: int, turns: tuple[int, ...], agents: tuple[int, ...], decode: int, result: int) -> list[FleetShape]:
    return [FleetShape(prefix, t, a, decode, result) for t in turns for a in agents]


# Every combination of each profile, turns-major then agents.
PROFILES: dict[str, list[FleetShape]] = {
    "probe": _grid(1024, (10,), (8,), 32, 64),
    "interactive": _grid(2048, (10, 20), (8, 12, 16, 20), 64, 256),
    "long": _grid(1024, (40, 80), (8, 12, 16, 20), 32, 48),
    "bounded-long": _grid(1024, (40, 80), (8, 20), 32, 48),
}


def generated_sha256(generated: list[list[list[int]]]) -> str:
    """SHA-256 of ``generated[agent][turn][k]`` as little-endian u32, agent
    order, then turn order, then generation order."""
    h = hashlib.sha256()
    for per_agent in generated:
        for per_turn in per_agent:
            h.update(struct.pack(f"<{len(per_turn)}I", *per_turn))
    return h.hexdigest()
