#!/usr/bin/env bash
# Build llama.cpp's `llama-server` (and `llama-bench`) from the llama.cpp
# source vendored in the llama-cpp-python 0.3.30 sdist: the same llama.cpp/ggml
# as the Python peer that bench/peers/setup.sh builds.
#
#   bench/peers/build-server.sh                 # -> bench/.venv/llama.cpp-build/bin/
#   FAK_LLAMA_BUILD=/path/to/dir bench/peers/build-server.sh
#   FAK_LLAMA_TARGETS="llama-server" bench/peers/build-server.sh   # skip llama-bench
#
# CPU only, Release, no curl (-DLLAMA_CURL=OFF), static, native ISA (GGML_NATIVE=ON,
# like llama-cpp-python's default build). cmake comes from PyPI (a small
# tools venv, bench/.venv/build-tools); ninja is used when PyPI gives it,
# else make. The sdist is fetched with `pip download --no-binary llama-cpp-python
# --no-deps` into $FAK_SDIST_CACHE (default ~/.cache/fak/sdist) and reused.
# (`--no-binary llama-cpp-python`, not `:all:`: with `:all:` pip would also
# build the sdist's build dependencies, cmake included, from source just to
# read its metadata.)
# The vendored llama.cpp of 0.3.30 deprecates LLAMA_CURL (HTTP downloads now go
# through cpp-httplib, with LLAMA_OPENSSL for HTTPS): both are turned off, as
# is the embedded web UI (it would need npm or a download), so the build
# needs no network beyond PyPI. The sdist carries no git metadata, so the
# build is labelled with -DLLAMA_BUILD_COMMIT=llama-cpp-python-0.3.30:
# `llama-server --version` prints "version: 0 (llama-cpp-python-0.3.30)".
# About 8-12 minutes on 2 cores the first time.
#
# Idempotent: when $BUILD/bin/llama-server exists and `--version` runs, and
# the stamp file says it was built from the same sdist, it does nothing.
# Prints the path of llama-server on stdout when done (log lines go to stderr).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
WANT="0.3.30"
BUILD="${FAK_LLAMA_BUILD:-$ROOT/bench/.venv/llama.cpp-build}"
SDIST_CACHE="${FAK_SDIST_CACHE:-$HOME/.cache/fak/sdist}"
TOOLS="${FAK_BUILD_TOOLS_VENV:-$ROOT/bench/.venv/build-tools}"
BASE_PY="${FAK_PEER_BASE_PYTHON:-python3}"
TARGETS="${FAK_LLAMA_TARGETS:-llama-server llama-bench}"
JOBS="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}"
SDIST="$SDIST_CACHE/llama_cpp_python-$WANT.tar.gz"

log() { printf 'peers/build-server: %s\n' "$*" >&2; }
die() { printf 'peers/build-server: error: %s\n' "$*" >&2; exit 1; }

STAMP="$BUILD/fak-build-stamp"
if [[ -x "$BUILD/bin/llama-server" && -f "$STAMP" ]] \
   && grep -qx "llama-cpp-python $WANT" "$STAMP" \
   && "$BUILD/bin/llama-server" --version >/dev/null 2>&1; then
  log "llama-server from llama-cpp-python $WANT already built in $BUILD: nothing to do"
  echo "$BUILD/bin/llama-server"
  exit 0
fi

command -v "$BASE_PY" >/dev/null 2>&1 || die "$BASE_PY not found (set FAK_PEER_BASE_PYTHON)"
command -v c++ >/dev/null 2>&1 || die "no C++ compiler (c++) on PATH"

# 1. cmake (and ninja if available) from PyPI, in a small venv of its own.
if [[ ! -x "$TOOLS/bin/cmake" ]]; then
  log "installing cmake (and ninja) from PyPI into $TOOLS"
  [[ -x "$TOOLS/bin/python" ]] || "$BASE_PY" -m venv "$TOOLS" || die "python -m venv $TOOLS failed"
  "$TOOLS/bin/python" -m pip install -q --disable-pip-version-check cmake \
    || die "pip install cmake failed"
  "$TOOLS/bin/python" -m pip install -q --disable-pip-version-check ninja \
    || log "ninja not installed; falling back to make"
fi
CMAKE="$TOOLS/bin/cmake"
GEN=()
if [[ -x "$TOOLS/bin/ninja" ]]; then
  GEN=(-G Ninja "-DCMAKE_MAKE_PROGRAM=$TOOLS/bin/ninja")
fi

# 2. The sdist (kept in the cache; setup.sh lets pip build it in a temp dir).
if [[ ! -f "$SDIST" ]]; then
  log "downloading the llama-cpp-python $WANT sdist into $SDIST_CACHE"
  mkdir -p "$SDIST_CACHE"
  "$TOOLS/bin/python" -m pip download -q --disable-pip-version-check \
    --no-binary llama-cpp-python --no-deps -d "$SDIST_CACHE" "llama-cpp-python==$WANT" \
    || die "pip download of the llama-cpp-python $WANT sdist failed"
  [[ -f "$SDIST" ]] || die "expected $SDIST after pip download (found: $(ls "$SDIST_CACHE"))"
fi
log "sdist: $SDIST (sha256 $(sha256sum "$SDIST" | cut -c1-16)...)"

# 3. Unpack the vendored llama.cpp.
SRC_PARENT="$BUILD/src"
SRC="$SRC_PARENT/llama_cpp_python-$WANT/vendor/llama.cpp"
if [[ ! -f "$SRC/CMakeLists.txt" ]]; then
  rm -rf "$SRC_PARENT"
  mkdir -p "$SRC_PARENT"
  tar -xzf "$SDIST" -C "$SRC_PARENT" "llama_cpp_python-$WANT/vendor/llama.cpp" \
    || die "could not unpack vendor/llama.cpp from $SDIST"
fi
[[ -f "$SRC/CMakeLists.txt" ]] || die "no $SRC/CMakeLists.txt in the sdist"

# 4. Configure and build.
OBJ="$BUILD/obj"
log "configuring ($("$CMAKE" --version | head -1), ${GEN[*]:-default generator})"
"$CMAKE" -S "$SRC" -B "$OBJ" "${GEN[@]}" \
  -DCMAKE_BUILD_TYPE=Release \
  -DBUILD_SHARED_LIBS=OFF \
  -DLLAMA_CURL=OFF \
  -DLLAMA_OPENSSL=OFF \
  -DLLAMA_BUILD_SERVER=ON \
  -DLLAMA_BUILD_UI=OFF \
  -DLLAMA_USE_PREBUILT_UI=OFF \
  -DLLAMA_BUILD_APP=OFF \
  -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF \
  -DGGML_NATIVE=ON \
  -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DGGML_OPENCL=OFF \
  -DGGML_BLAS=OFF \
  "-DLLAMA_BUILD_COMMIT=llama-cpp-python-$WANT" \
  >"$BUILD/configure.log" 2>&1 \
  || { tail -30 "$BUILD/configure.log" >&2; die "cmake configure failed (log: $BUILD/configure.log)"; }

t0=$(date +%s)
# shellcheck disable=SC2086  # TARGETS is a word list on purpose
log "building $TARGETS with $JOBS jobs (several minutes; log: $BUILD/build.log)"
"$CMAKE" --build "$OBJ" --config Release -j "$JOBS" --target $TARGETS \
  >"$BUILD/build.log" 2>&1 \
  || { tail -40 "$BUILD/build.log" >&2; die "build failed (log: $BUILD/build.log)"; }
t1=$(date +%s)

# llama.cpp puts executables in $OBJ/bin; copy them next to the stamp.
mkdir -p "$BUILD/bin"
for t in $TARGETS; do
  cp -f "$OBJ/bin/$t" "$BUILD/bin/$t" || die "no $OBJ/bin/$t after the build"
done
"$BUILD/bin/llama-server" --version >/dev/null 2>&1 \
  || die "$BUILD/bin/llama-server --version failed after the build"
echo "llama-cpp-python $WANT" >"$STAMP"
v=$("$BUILD/bin/llama-server" --version 2>&1 || true)
log "built in $((t1 - t0)) s: ${v%%$'\n'*}"
echo "$BUILD/bin/llama-server"
