#!/usr/bin/env bash
# Build ik_llama.cpp's `llama-bench`: the llama.cpp fork whose CPU kernels
# (ggml/src/iqk/, run-time repacking with -rtr) are the fastest CPU peer we
# know. bench/single_pairs.py --ik-bench runs it beside llama.cpp.
#
#   bench/peers/build-ik-llama.sh                      # clone the pinned commit
#   IK_LLAMA_SRC=/path/to/ik_llama.cpp bench/peers/build-ik-llama.sh
#   -> bench/.venv/ik_llama-build/bin/llama-bench (path printed on stdout)
#
# The source is ik_llama.cpp's public repository at the commit below (it is
# not on a package registry); with IK_LLAMA_SRC, an existing checkout of it
# is built instead, and its commit is what the stamp records. CPU only,
# Release, static, native ISA (GGML_NATIVE=ON: the peer's best build on the
# machine it runs on), no curl, no server. cmake comes from the tools venv
# that bench/peers/build-server.sh makes (bench/.venv/build-tools), or PATH.
# About 15 minutes on 2 cores (its iqk kernels are large).
#
# Idempotent: when the binary runs and the stamp names the same commit, it
# does nothing.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
REPO="https://github.com/ikawrakow/ik_llama.cpp"
COMMIT="8337e4cd3861406fc04e0854b1409cd1b027fbc9"
BUILD="${FAK_IK_BUILD:-$ROOT/bench/.venv/ik_llama-build}"
TOOLS="${FAK_BUILD_TOOLS_VENV:-$ROOT/bench/.venv/build-tools}"
JOBS="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}"

log() { printf 'peers/build-ik-llama: %s\n' "$*" >&2; }
die() { printf 'peers/build-ik-llama: error: %s\n' "$*" >&2; exit 1; }

if [[ -n "${IK_LLAMA_SRC:-}" ]]; then
  SRC="$IK_LLAMA_SRC"
  [[ -f "$SRC/CMakeLists.txt" && -d "$SRC/ggml/src/iqk" ]] \
    || die "$SRC does not look like an ik_llama.cpp checkout (no ggml/src/iqk)"
  WANT="$(git -C "$SRC" rev-parse HEAD 2>/dev/null || echo "unversioned source at $SRC")"
else
  SRC="$BUILD/src"
  WANT="$COMMIT"
fi

STAMP="$BUILD/fak-build-stamp"
if [[ -x "$BUILD/bin/llama-bench" && -f "$STAMP" ]] && grep -qxF "ik_llama.cpp $WANT" "$STAMP" \
   && "$BUILD/bin/llama-bench" --help >/dev/null 2>&1; then
  log "ik_llama.cpp $WANT already built in $BUILD: nothing to do"
  echo "$BUILD/bin/llama-bench"
  exit 0
fi

command -v c++ >/dev/null 2>&1 || die "no C++ compiler (c++) on PATH"
CMAKE="$TOOLS/bin/cmake"
[[ -x "$CMAKE" ]] || CMAKE="$(command -v cmake || true)"
[[ -n "$CMAKE" ]] || die "no cmake: run bench/peers/build-server.sh first (it installs cmake from PyPI), or put cmake on PATH"

if [[ -z "${IK_LLAMA_SRC:-}" ]]; then
  command -v git >/dev/null 2>&1 || die "git is needed to fetch $REPO"
  if [[ "$(git -C "$SRC" rev-parse HEAD 2>/dev/null || true)" != "$COMMIT" ]]; then
    log "fetching $REPO at $COMMIT into $SRC"
    rm -rf "$SRC"
    mkdir -p "$SRC"
    git -C "$SRC" init -q
    git -C "$SRC" fetch -q --depth 1 "$REPO" "$COMMIT" || die "could not fetch $REPO $COMMIT"
    git -C "$SRC" checkout -q FETCH_HEAD
  fi
fi

log "building llama-bench from $SRC ($JOBS jobs)"
"$CMAKE" -S "$SRC" -B "$BUILD/cmake" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
  -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TESTS=OFF >&2
"$CMAKE" --build "$BUILD/cmake" --target llama-bench -j "$JOBS" >&2
mkdir -p "$BUILD/bin"
cp "$BUILD/cmake/bin/llama-bench" "$BUILD/bin/llama-bench"
"$BUILD/bin/llama-bench" --help >/dev/null 2>&1 || die "the built llama-bench does not run"
echo "ik_llama.cpp $WANT" > "$STAMP"
log "built $BUILD/bin/llama-bench"
echo "$BUILD/bin/llama-bench"
