#!/usr/bin/env bash
# Make the ternary and 4-bit-float test files (TQ1_0, TQ2_0, MXFP4, NVFP4,
# Q1_0) with llama.cpp's own quantizer, from the fetched SmolLM2 F16 and
# Qwen2.5-Coder 0.5B Q4_K_M files:
#
#   bench/peers/make_ternary_fp4_files.sh   # -> models/smollm2-135m-instruct-{tq1_0,tq2_0,mxfp4,nvfp4,q1_0}.gguf
#                                           #    models/qwen2.5-coder-0.5b-instruct-{tq1_0,tq2_0}.gguf
#
# None of these types needs an importance matrix. `llama-quantize` (built
# from the llama-cpp-python 0.3.30 sdist, on demand in its tree, as
# make_codebook_files.sh does) writes each file with 2 threads; each takes
# well under a minute on 2 cores.
#
# TQ1_0 and TQ2_0 are llama.cpp file types. Their blocks are 256 values, so
# only matrices whose rows are a multiple of 256 take them: on SmolLM2 (rows
# 576 wide) and Qwen2.5-Coder 0.5B (896) that is `ffn_down` (1536 and 4864
# wide); llama.cpp falls back to Q4_0 for the other matrices. The token
# embeddings become Q8_0 on SmolLM2 (tied: they are also the output matrix)
# and Q5_0 on Qwen (whose output matrix is Q8_0). The Qwen files are
# requantized from Q4_K_M (--allow-requantize).
#
# MXFP4 and NVFP4 have no dense file type (MXFP4_MOE puts MXFP4 on expert
# tensors only), and the Q1_0 file type stops at SmolLM2's first 576-wide
# matrix, so those files are Q8_0 files whose weight matrices are
# overridden with `--tensor-type NAME=TYPE`: every attention and FFN
# matrix for MXFP4 (32-value blocks) and NVFP4 (64-value blocks); for Q1_0
# (128-value blocks) only `ffn_down`, the one SmolLM2 matrix whose rows are a
# multiple of 128 (llama.cpp has no fallback type for Q1_0 and refuses the
# others: "no tensor type fallback is defined for type q1_0").
#
# The SHA-256 of each output is printed (llama-quantize's output does not
# depend on the thread count).
# Idempotent: an existing output file is kept.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
BUILD="${FAK_LLAMA_BUILD:-$ROOT/bench/.venv/llama.cpp-build}"
MODELS="$ROOT/models"
WORK="${FAK_TERNARY_FP4_WORK:-$ROOT/bench/.venv/ternary-fp4}"

log() { printf 'peers/make_ternary_fp4_files: %s\n' "$*" >&2; }
die() { printf 'peers/make_ternary_fp4_files: error: %s\n' "$*" >&2; exit 1; }

[[ -d "$BUILD/obj" ]] || "$HERE/build-server.sh" >/dev/null
QUANTIZE="$BUILD/obj/bin/llama-quantize"
if [[ ! -x "$QUANTIZE" ]]; then
  NINJA="$ROOT/bench/.venv/build-tools/bin/ninja"
  [[ -x "$NINJA" ]] || NINJA=ninja
  log "building llama-quantize in $BUILD/obj"
  "$NINJA" -C "$BUILD/obj" llama-quantize >&2 || die "could not build llama-quantize"
fi
mkdir -p "$WORK"

# quantize SRC OUT TYPE [llama-quantize options...]: one output file.
quantize() {
  local src="$1" out="$2" type="$3"; shift 3
  [[ -f "$src" ]] || die "$src missing: run scripts/fetch-models.sh --agent"
  local name log_file
  name="$(basename "$out" .gguf)"
  log_file="$WORK/quantize-$name.log"
  if [[ ! -f "$out" ]]; then
    log "$(basename "$out") ($type $*)"
    "$QUANTIZE" "$@" "$src" "$out.part" "$type" 2 >"$log_file" 2>&1 \
      || { rm -f "$out.part"; die "llama-quantize failed for $(basename "$out") (log: $log_file)"; }
    mv "$out.part" "$out"
  fi
  printf '%s  %s\n' "$(sha256sum "$out" | cut -d' ' -f1)" "$(basename "$out")"
}

# overrides TYPE TENSOR...: the --tensor-type options for those matrices.
overrides() {
  local type="$1" t; shift
  for t in "$@"; do printf -- '--tensor-type\n%s=%s\n' "$t" "$type"; done
}

SMOL="$MODELS/smollm2-135m-instruct-f16.gguf"
QWEN="$MODELS/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
MATRICES=(attn_q attn_k attn_v attn_output ffn_gate ffn_up ffn_down)

quantize "$SMOL" "$MODELS/smollm2-135m-instruct-tq1_0.gguf" TQ1_0
quantize "$SMOL" "$MODELS/smollm2-135m-instruct-tq2_0.gguf" TQ2_0
quantize "$QWEN" "$MODELS/qwen2.5-coder-0.5b-instruct-tq1_0.gguf" TQ1_0 --allow-requantize
quantize "$QWEN" "$MODELS/qwen2.5-coder-0.5b-instruct-tq2_0.gguf" TQ2_0 --allow-requantize
mapfile -t opts < <(overrides mxfp4 "${MATRICES[@]}")
quantize "$SMOL" "$MODELS/smollm2-135m-instruct-mxfp4.gguf" Q8_0 "${opts[@]}"
mapfile -t opts < <(overrides nvfp4 "${MATRICES[@]}")
quantize "$SMOL" "$MODELS/smollm2-135m-instruct-nvfp4.gguf" Q8_0 "${opts[@]}"
mapfile -t opts < <(overrides q1_0 ffn_down)
quantize "$SMOL" "$MODELS/smollm2-135m-instruct-q1_0.gguf" Q8_0 "${opts[@]}"
