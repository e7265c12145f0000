#!/usr/bin/env bash
# Make the codebook-format test files (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_M,
# IQ3_XXS, IQ3_M) with llama.cpp's own tools, from the fetched Qwen2.5-Coder
# Q4_K_M files:
#
#   bench/peers/make_codebook_files.sh            # -> models/qwen2.5-coder-*-instruct-iq*.gguf
#
# llama.cpp makes these types only with an importance matrix. The matrix
# comes from `llama-imatrix` over bench/spec-edit-source.txt (a fixed
# 7.5 KB Python text shipped here, three 512-token chunks), on the same
# Q4_K_M file; `llama-quantize --allow-requantize --imatrix` then writes the
# mixture with 2 threads. Both tools are built from the llama-cpp-python
# 0.3.30 sdist (bench/peers/build-server.sh; llama-quantize is built on
# demand in its tree). The 1.5B files take about 7 minutes each on 2 cores,
# the 0.5B files about 2.
#
# On the 0.5B model (rows 896 wide, not whole 256-value super-blocks) only
# `ffn_down` takes the codebook type; llama.cpp falls back to IQ4_NL for the
# rest. The SHA-256 of each output is printed; docs/GOLDENS.md records them.
# Idempotent: an existing output file is kept.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
BUILD="${FAK_LLAMA_BUILD:-$ROOT/bench/.venv/llama.cpp-build}"
MODELS="$ROOT/models"
TEXT="$ROOT/bench/spec-edit-source.txt"
WORK="${FAK_CODEBOOK_WORK:-$ROOT/bench/.venv/codebook}"

log() { printf 'peers/make_codebook_files: %s\n' "$*" >&2; }
die() { printf 'peers/make_codebook_files: error: %s\n' "$*" >&2; exit 1; }

[[ -x "$BUILD/bin/llama-imatrix" ]] || FAK_LLAMA_TARGETS="llama-server llama-bench llama-imatrix" "$HERE/build-server.sh" >/dev/null
QUANTIZE="$BUILD/obj/bin/llama-quantize"
if [[ ! -x "$QUANTIZE" ]]; then
  NINJA="$ROOT/bench/.venv/build-tools/bin/ninja"
  [[ -x "$NINJA" ]] || NINJA=ninja
  log "building llama-quantize in $BUILD/obj"
  "$NINJA" -C "$BUILD/obj" llama-quantize >&2 || die "could not build llama-quantize"
fi
[[ -x "$BUILD/bin/llama-imatrix" ]] || die "llama-imatrix missing in $BUILD/bin"
mkdir -p "$WORK"

# size: the Qwen2.5-Coder size; types: llama.cpp's file types for it.
make_files() {
  local size="$1"; shift
  local src="$MODELS/qwen2.5-coder-$size-instruct-q4_k_m.gguf"
  [[ -f "$src" ]] || die "$src missing: run scripts/fetch-models.sh --agent"
  local imatrix="$WORK/imatrix-qwen2.5-coder-$size.gguf"
  if [[ ! -f "$imatrix" ]]; then
    log "imatrix of $(basename "$src") over $(basename "$TEXT")"
    "$BUILD/bin/llama-imatrix" -m "$src" -f "$TEXT" -o "$imatrix" -c 512 -t 2 >"$WORK/imatrix-$size.log" 2>&1 \
      || die "llama-imatrix failed (log: $WORK/imatrix-$size.log)"
  fi
  local t lt out
  for t in "$@"; do
    lt="$(tr 'A-Z' 'a-z' <<<"$t")"
    out="$MODELS/qwen2.5-coder-$size-instruct-$lt.gguf"
    if [[ ! -f "$out" ]]; then
      log "$(basename "$out") ($t)"
      "$QUANTIZE" --allow-requantize --imatrix "$imatrix" "$src" "$out.part" "$t" 2 >"$WORK/quantize-$size-$lt.log" 2>&1 \
        || { rm -f "$out.part"; die "llama-quantize $t failed (log: $WORK/quantize-$size-$lt.log)"; }
      mv "$out.part" "$out"
    fi
    printf '%s  %s\n' "$(sha256sum "$out" | cut -d' ' -f1)" "$(basename "$out")"
  done
}

make_files 1.5b IQ3_XXS IQ2_XXS
make_files 0.5b IQ1_M IQ1_S IQ2_XS IQ2_M IQ3_M
