#!/usr/bin/env bash
# Fetch llama.cpp's tokenizer conformance files: the vocab-only GGUFs
# (models/ggml-vocab-*.gguf) with their .gguf.inp / .gguf.out cases, as
# shipped in the llama-cpp-python 0.3.30 sdist (vendor/llama.cpp/models).
# llama.cpp is MIT, but the vocabularies come from the model vendors under
# their own licences, so they are not copied into this repository.
#
#   scripts/fetch-vocabs.sh          # idempotent; re-running does no work
#
# Network: only `pip download --no-binary --no-deps` from PyPI, cached in
# ${FAK_SDIST_CACHE:-~/.cache/fak/sdist} (shared with bench/peers/build-server.sh).
# Result (git-ignored): models/llama-vocab/ggml-vocab-*.gguf{,.inp,.out}
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WANT="0.3.30"
SDIST_SHA="798c9b42652d2e0bff5fe81e7e762089f425a99e67f66ffe5ae156957876e0d1"
SDIST_CACHE="${FAK_SDIST_CACHE:-$HOME/.cache/fak/sdist}"
SDIST="$SDIST_CACHE/llama_cpp_python-$WANT.tar.gz"
OUT="$ROOT/models/llama-vocab"
STAMP="$OUT/.fak-stamp"
PYTHON="${PYTHON:-python3}"

log() { printf 'fetch-vocabs: %s\n' "$*" >&2; }
die() { printf 'fetch-vocabs: error: %s\n' "$*" >&2; exit 1; }

if [[ -f "$STAMP" ]] && grep -qx "$SDIST_SHA" "$STAMP"; then
  log "models/llama-vocab: present (llama-cpp-python $WANT)"
  exit 0
fi
if [[ ! -f "$SDIST" ]]; then
  log "downloading the llama-cpp-python $WANT sdist into $SDIST_CACHE"
  mkdir -p "$SDIST_CACHE"
  "$PYTHON" -m pip download -q --disable-pip-version-check \
    --no-binary llama-cpp-python --no-deps -d "$SDIST_CACHE" "llama-cpp-python==$WANT" \
    || die "pip download of the llama-cpp-python $WANT sdist failed"
fi
[[ "$(sha256sum "$SDIST" | cut -d' ' -f1)" == "$SDIST_SHA" ]] \
  || die "$SDIST: SHA-256 mismatch (want $SDIST_SHA); delete it and re-run"
rm -rf "$OUT"
mkdir -p "$OUT"
tar -xzf "$SDIST" -C "$OUT" --strip-components=4 --wildcards \
  "llama_cpp_python-$WANT/vendor/llama.cpp/models/ggml-vocab-*" \
  || die "could not extract the vocab files from $SDIST"
echo "$SDIST_SHA" > "$STAMP"
log "models/llama-vocab: $(ls "$OUT" | grep -c '\.gguf$') vocabs extracted"
