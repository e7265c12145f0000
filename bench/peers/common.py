"""Shared helpers for the llama.cpp peer scripts (golden.py, requant_golden.py).

What lives here:

* ``ensure_peer_python``: re-executes the calling script under the peer
  interpreter (``--python PATH``, else ``$FAK_PEER_PYTHON``, else the
  running one if it has ``llama_cpp``, else ``bench/.venv/bin/python``)
  before anything imports ``llama_cpp``.
* ``Llama``-free access to llama.cpp through llama-cpp-python's low-level
  ctypes bindings: quiet logging, model loading, quantization.
* A small, dependency-free GGUF reader (header, metadata, tensor infos) used
  to describe quantizer output without trusting llama.cpp's own view of it.
* ``sha256_file`` and repository paths.

Only the standard library is imported at module level, so the re-exec step
works under any Python 3.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import struct
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "models"
MODEL_GOLDEN_DIR = ROOT / "crates" / "fak-model" / "tests" / "golden"
CLI_GOLDEN_DIR = ROOT / "crates" / "fak-cli" / "tests" / "golden"
DEFAULT_VENV_PYTHON = ROOT / "bench" / ".venv" / "bin" / "python"

PEER_PACKAGE = "llama-cpp-python"
PEER_VERSION = "0.3.30"
PEER = f"{PEER_PACKAGE} {PEER_VERSION}"

# Guard against an exec loop when the target interpreter re-runs the script.
_REEXEC_ENV = "FAK_PEER_REEXECED"


class PeerError(Exception):
    """A peer-harness failure whose message names what was wrong."""


# --------------------------------------------------------------------------
# Interpreter selection
# --------------------------------------------------------------------------


def _pop_python_flag(argv: list[str]) -> tuple[str | None, list[str]]:
    """Removes ``--python PATH`` / ``--python=PATH`` from argv (script args)."""
    out: list[str] = []
    chosen: str | None = None
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--python":
            if i + 1 >= len(argv):
                raise PeerError("--python needs a path to a Python interpreter")
            chosen = argv[i + 1]
            i += 2
            continue
        if a.startswith("--python="):
            chosen = a.split("=", 1)[1]
            i += 1
            continue
        out.append(a)
        i += 1
    return chosen, out


def ensure_peer_python() -> None:
    """Re-executes this script under the peer interpreter if needed.

    An explicit choice wins: ``--python PATH`` on the command line, else
    ``$FAK_PEER_PYTHON``. Without one, the running interpreter is kept when
    it can import ``llama_cpp``; otherwise ``bench/.venv/bin/python`` (made
    by ``bench/peers/setup.sh``) is used. The flag is removed from
    ``sys.argv`` so argparse never sees it. Paths are compared without
    resolving symlinks, because a venv's ``bin/python`` is a symlink to the
    base interpreter.
    """
    flag, rest = _pop_python_flag(sys.argv[1:])
    sys.argv[1:] = rest
    explicit = flag or os.environ.get("FAK_PEER_PYTHON")
    if not explicit and importlib.util.find_spec("llama_cpp") is not None:
        return
    target = explicit or str(DEFAULT_VENV_PYTHON)
    target_abs = os.path.abspath(target)
    if os.path.abspath(sys.executable) == target_abs or os.environ.get(_REEXEC_ENV) == target_abs:
        return
    if not os.path.exists(target_abs):
        raise PeerError(
            f"peer Python {target_abs} does not exist: run bench/peers/setup.sh, "
            "or pass --python PATH / set FAK_PEER_PYTHON"
        )
    env = dict(os.environ)
    env[_REEXEC_ENV] = target_abs
    env["FAK_PEER_PYTHON"] = target_abs  # the child sees the same choice
    print(f"peers: re-running under {target_abs}", file=sys.stderr)
    os.execve(target_abs, [target_abs, sys.argv[0], *rest], env)


# --------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a whole file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_golden(path: Path) -> Any:
    """A golden file on disk, parsed; a missing or malformed one is a
    ``PeerError`` naming it (the modes that add to a file need it made
    first)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PeerError(f"{rel(path)} does not exist (make it first)") from None
    except (OSError, ValueError) as e:
        raise PeerError(f"{rel(path)}: {e}") from None


def rel(path: Path) -> str:
    """``path`` relative to the repository root when inside it."""
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


# --------------------------------------------------------------------------
# llama.cpp through llama-cpp-python's low-level bindings
# --------------------------------------------------------------------------

_LOG_KEEP: list[str] = []
_LOG_CB: Any = None  # the ctypes callback must outlive every llama.cpp call


def llama_init(keep_log: bool = True) -> Any:
    """Imports ``llama_cpp``, checks its version, silences llama.cpp's
    logging (lines are kept in memory, see ``llama_log_lines``) and
    initialises the backend. Returns the module."""
    global _LOG_CB
    try:
        import llama_cpp  # noqa: PLC0415 (import after the re-exec on purpose)
    except ImportError as e:
        raise PeerError(f"cannot import llama_cpp under {sys.executable}: {e}") from e
    if llama_cpp.__version__ != PEER_VERSION:
        raise PeerError(
            f"llama_cpp is version {llama_cpp.__version__} under {sys.executable}, need {PEER_VERSION}"
        )

    def _log(_level: int, text: bytes, _user: Any) -> None:
        if keep_log and text:
            _LOG_KEEP.append(text.decode("utf-8", "replace"))

    _LOG_CB = llama_cpp.llama_log_callback(_log)
    llama_cpp.llama_log_set(_LOG_CB, None)
    llama_cpp.llama_backend_init()
    return llama_cpp


def llama_log_lines() -> list[str]:
    """Everything llama.cpp logged since ``llama_init`` (joined, re-split)."""
    return "".join(_LOG_KEEP).splitlines()


def llama_log_clear() -> None:
    _LOG_KEEP.clear()


# File types this harness knows how to ask llama.cpp's quantizer for, by the
# lower-case name that fak's CLI also takes.
QUANT_TARGETS = {
    "q8_0": "LLAMA_FTYPE_MOSTLY_Q8_0",
    "f16": "LLAMA_FTYPE_MOSTLY_F16",
    "bf16": "LLAMA_FTYPE_MOSTLY_BF16",
    "q4_0": "LLAMA_FTYPE_MOSTLY_Q4_0",
    "q4_1": "LLAMA_FTYPE_MOSTLY_Q4_1",
    "q2_k": "LLAMA_FTYPE_MOSTLY_Q2_K",
    "q3_k_s": "LLAMA_FTYPE_MOSTLY_Q3_K_S",
    "q3_k_m": "LLAMA_FTYPE_MOSTLY_Q3_K_M",
    "q3_k_l": "LLAMA_FTYPE_MOSTLY_Q3_K_L",
    "q5_0": "LLAMA_FTYPE_MOSTLY_Q5_0",
    "q5_1": "LLAMA_FTYPE_MOSTLY_Q5_1",
    "q4_k_s": "LLAMA_FTYPE_MOSTLY_Q4_K_S",
    "q4_k_m": "LLAMA_FTYPE_MOSTLY_Q4_K_M",
    "q6_k": "LLAMA_FTYPE_MOSTLY_Q6_K",
    "q5_k_s": "LLAMA_FTYPE_MOSTLY_Q5_K_S",
    "q5_k_m": "LLAMA_FTYPE_MOSTLY_Q5_K_M",
    "iq4_nl": "LLAMA_FTYPE_MOSTLY_IQ4_NL",
    "iq4_xs": "LLAMA_FTYPE_MOSTLY_IQ4_XS",
    "tq1_0": "LLAMA_FTYPE_MOSTLY_TQ1_0",
    "tq2_0": "LLAMA_FTYPE_MOSTLY_TQ2_0",
    # The codebook mixtures llama.cpp makes without an importance matrix.
    "iq3_xxs": "LLAMA_FTYPE_MOSTLY_IQ3_XXS",
    "iq3_s": "LLAMA_FTYPE_MOSTLY_IQ3_S",
    "iq3_m": "LLAMA_FTYPE_MOSTLY_IQ3_M",
}


def llama_quantize(llama_cpp: Any, src: Path, dst: Path, target: str, nthread: int = 2) -> int:
    """Runs ``llama_model_quantize(src -> dst)`` with the library defaults,
    ``allow_requantize = True``, ``nthread`` threads and the file type named
    ``target`` (a key of ``QUANT_TARGETS``). Returns the ftype number used."""
    const = QUANT_TARGETS.get(target)
    if const is None or not hasattr(llama_cpp, const):
        raise PeerError(f"quantize target {target!r} is not available (known: {sorted(QUANT_TARGETS)})")
    ftype = int(getattr(llama_cpp, const))
    params = llama_cpp.llama_model_quantize_default_params()
    params.nthread = nthread
    params.ftype = ftype
    params.allow_requantize = True
    rc = llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), params)
    if rc != 0 or not dst.exists():
        tail = "; ".join(llama_log_lines()[-5:])
        raise PeerError(f"llama_model_quantize {src} -> {dst} ({target}) failed with {rc}: {tail}")
    return ftype


# --------------------------------------------------------------------------
# Minimal GGUF reader
# --------------------------------------------------------------------------

# ggml type id -> (lower-case name, elements per block, bytes per block)
GGML_TYPES: dict[int, tuple[str, int, int]] = {
    0: ("f32", 1, 4),
    1: ("f16", 1, 2),
    2: ("q4_0", 32, 18),
    3: ("q4_1", 32, 20),
    6: ("q5_0", 32, 22),
    7: ("q5_1", 32, 24),
    8: ("q8_0", 32, 34),
    9: ("q8_1", 32, 36),
    10: ("q2_k", 256, 84),
    11: ("q3_k", 256, 110),
    12: ("q4_k", 256, 144),
    13: ("q5_k", 256, 176),
    14: ("q6_k", 256, 210),
    15: ("q8_k", 256, 292),
    16: ("iq2_xxs", 256, 66),
    17: ("iq2_xs", 256, 74),
    18: ("iq3_xxs", 256, 98),
    19: ("iq1_s", 256, 50),
    20: ("iq4_nl", 32, 18),
    21: ("iq3_s", 256, 110),
    22: ("iq2_s", 256, 82),
    23: ("iq4_xs", 256, 136),
    24: ("i8", 1, 1),
    25: ("i16", 1, 2),
    26: ("i32", 1, 4),
    27: ("i64", 1, 8),
    28: ("f64", 1, 8),
    29: ("iq1_m", 256, 56),
    30: ("bf16", 1, 2),
    34: ("tq1_0", 256, 54),
    35: ("tq2_0", 256, 66),
    39: ("mxfp4", 32, 17),
    40: ("nvfp4", 64, 36),
    41: ("q1_0", 128, 18),
}

# GGUF metadata value type id -> (name, struct format or None)
_GGUF_SCALARS: dict[int, tuple[str, str]] = {
    0: ("u8", "<B"),
    1: ("i8", "<b"),
    2: ("u16", "<H"),
    3: ("i16", "<h"),
    4: ("u32", "<I"),
    5: ("i32", "<i"),
    6: ("f32", "<f"),
    7: ("bool", "<?"),
    10: ("u64", "<Q"),
    11: ("i64", "<q"),
    12: ("f64", "<d"),
}
_GGUF_STRING = 8
_GGUF_ARRAY = 9


@dataclass
class GgufTensor:
    """One tensor info entry. ``dims`` are in ggml order (fastest first)."""

    name: str
    dims: list[int]
    type_id: int
    offset: int  # relative to the data section

    @property
    def type_name(self) -> str:
        return GGML_TYPES[self.type_id][0]

    def nbytes(self) -> int:
        _, blck, size = GGML_TYPES[self.type_id]
        n0 = self.dims[0] if self.dims else 1
        if n0 % blck:
            raise PeerError(f"tensor {self.name}: first dim {n0} is not a multiple of block size {blck}")
        rows = 1
        for d in self.dims[1:]:
            rows *= d
        return n0 // blck * size * rows


@dataclass
class GgufMeta:
    """One metadata entry: key, GGUF type name (``array[T]`` for arrays), value."""

    key: str
    type_name: str
    value: Any


@dataclass
class Gguf:
    version: int
    metadata: list[GgufMeta]
    tensors: list[GgufTensor]
    alignment: int
    data_offset: int

    def get(self, key: str) -> Any:
        for m in self.metadata:
            if m.key == key:
                return m.value
        return None


class _Reader:
    def __init__(self, f: BinaryIO, path: Path) -> None:
        self.f = f
        self.path = path

    def take(self, n: int) -> bytes:
        b = self.f.read(n)
        if len(b) != n:
            raise PeerError(f"{self.path}: truncated at byte {self.f.tell()} (wanted {n} more)")
        return b

    def unpack(self, fmt: str) -> Any:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        n = self.unpack("<Q")
        if n > 1 << 30:
            raise PeerError(f"{self.path}: string length {n} is implausible")
        return self.take(n).decode("utf-8", "replace")

    def value(self, vtype: int) -> tuple[str, Any]:
        if vtype in _GGUF_SCALARS:
            name, fmt = _GGUF_SCALARS[vtype]
            return name, self.unpack(fmt)
        if vtype == _GGUF_STRING:
            return "string", self.string()
        if vtype == _GGUF_ARRAY:
            et = self.unpack("<I")
            n = self.unpack("<Q")
            if et == _GGUF_ARRAY:
                raise PeerError(f"{self.path}: nested arrays are not supported")
            items = [self.value(et)[1] for _ in range(n)]
            ename = "string" if et == _GGUF_STRING else _GGUF_SCALARS.get(et, (f"type{et}", ""))[0]
            return f"array[{ename}]", items
        raise PeerError(f"{self.path}: unknown metadata value type {vtype}")


def read_gguf(path: Path) -> Gguf:
    """Parses a GGUF v2/v3 header: metadata in file order and tensor infos."""
    with open(path, "rb") as f:
        r = _Reader(f, path)
        if r.take(4) != b"GGUF":
            raise PeerError(f"{path}: not a GGUF file (bad magic)")
        version = r.unpack("<I")
        if version not in (2, 3):
            raise PeerError(f"{path}: unsupported GGUF version {version}")
        n_tensors = r.unpack("<Q")
        n_kv = r.unpack("<Q")
        meta = []
        for _ in range(n_kv):
            key = r.string()
            tname, val = r.value(r.unpack("<I"))
            meta.append(GgufMeta(key, tname, val))
        tensors = []
        for _ in range(n_tensors):
            name = r.string()
            nd = r.unpack("<I")
            dims = [r.unpack("<Q") for _ in range(nd)]
            tid = r.unpack("<I")
            if tid not in GGML_TYPES:
                raise PeerError(f"{path}: tensor {name} has unknown ggml type {tid}")
            tensors.append(GgufTensor(name, dims, tid, r.unpack("<Q")))
        g = Gguf(version, meta, tensors, 32, 0)
        align = g.get("general.alignment")
        if align is not None:
            g.alignment = int(align)
        pos = f.tell()
        g.data_offset = (pos + g.alignment - 1) // g.alignment * g.alignment
        return g


def tensor_sha256(path: Path, g: Gguf, t: GgufTensor) -> str:
    """Hex SHA-256 of one tensor's data bytes (exactly ``t.nbytes()``)."""
    n = t.nbytes()
    with open(path, "rb") as f:
        f.seek(g.data_offset + t.offset)
        b = f.read(n)
    if len(b) != n:
        raise PeerError(f"{path}: tensor {t.name} data runs past the end of the file")
    return hashlib.sha256(b).hexdigest()
