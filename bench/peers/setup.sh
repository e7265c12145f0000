#!/usr/bin/env bash
# Create the llama.cpp peer environment for bench/peers/*.py.
#
#   bench/peers/setup.sh                       # -> bench/.venv (git-ignored)
#   FAK_PEER_VENV=/path/to/venv bench/peers/setup.sh
#   FAK_PEER_BASE_PYTHON=/usr/bin/python3.11 bench/peers/setup.sh
#
# Idempotent: when the venv already imports llama_cpp 0.3.30 (and numpy) it
# does nothing. Otherwise it creates the venv with Python 3.11 and installs
# bench/peers/requirements.txt, building llama-cpp-python from source
# (about 6 minutes on 2 cores). Network: PyPI only.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
VENV="${FAK_PEER_VENV:-$ROOT/bench/.venv}"
BASE_PY="${FAK_PEER_BASE_PYTHON:-python3.11}"
WANT="0.3.30"

log() { printf 'peers/setup: %s\n' "$*" >&2; }
die() { printf 'peers/setup: error: %s\n' "$*" >&2; exit 1; }

# installed: true when $VENV's python imports llama_cpp $WANT and numpy.
installed() {
  [[ -x "$VENV/bin/python" ]] || return 1
  "$VENV/bin/python" - "$WANT" <<'PY' >/dev/null 2>&1
import sys
import llama_cpp, numpy  # noqa: F401
sys.exit(0 if llama_cpp.__version__ == sys.argv[1] else 1)
PY
}

if installed; then
  log "llama-cpp-python $WANT already importable in $VENV: nothing to do"
  exit 0
fi

if [[ ! -x "$VENV/bin/python" ]]; then
  command -v "$BASE_PY" >/dev/null 2>&1 || die "$BASE_PY not found (set FAK_PEER_BASE_PYTHON to a Python 3.11)"
  "$BASE_PY" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)' \
    || die "$BASE_PY is $("$BASE_PY" -V 2>&1), need Python 3.11"
  log "creating venv $VENV with $("$BASE_PY" -V 2>&1)"
  "$BASE_PY" -m venv "$VENV" || die "python -m venv $VENV failed"
else
  log "venv $VENV exists but lacks llama-cpp-python $WANT: installing into it"
fi

"$VENV/bin/python" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)' \
  || die "$VENV/bin/python is $("$VENV/bin/python" -V 2>&1), need Python 3.11 (remove $VENV and rerun)"

JOBS="$(nproc 2>/dev/null || echo 2)"
log "building llama-cpp-python $WANT from source with $JOBS parallel jobs (several minutes)"
CMAKE_BUILD_PARALLEL_LEVEL="$JOBS" "$VENV/bin/python" -m pip install \
  --no-binary llama-cpp-python -r "$HERE/requirements.txt" \
  || die "pip install of llama-cpp-python $WANT failed (see the output above)"

installed || die "llama-cpp-python $WANT is still not importable in $VENV after installing"
log "ready: $VENV/bin/python (llama-cpp-python $WANT)"
