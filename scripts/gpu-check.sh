#!/usr/bin/env bash
# The CUDA backend's GPU check: everything a GPU run proves, in one run.
#
#   scripts/gpu-check.sh prepare        # here (no GPU): build and pack what travels
#   scripts/gpu-check.sh run OUT        # on the GPU machine: the checks, JSON into OUT
#   scripts/gpu-check.sh dry-run        # here: prepare, then `run`'s CPU side
#
# `prepare` fills .gpu/ (git-ignored; about 45 MB, under the 64 MiB a GPU
# run can carry):
#   fak.xz                      fak built with --features cuda, stripped, xz-compressed
#   smollm2-135m-q8_0-2l.gguf   SmolLM2-135M-Instruct Q8_0 cut to its first 2 blocks (fak cuda truncate)
#   smollm2-ref.json            that model's CPU logits for the check batch (fak cuda reference)
# The GPU machine has the CUDA driver and NVRTC but no Rust toolchain and no
# network, so the binary is built here and the kernels are compiled there at
# run time for the device's own architecture.
#
# `run` writes, in this order (each step runs even if one before it failed):
#   system.json          fak inspect --system (CPU, device, driver, memory)
#   kernels.json         every CUDA kernel against its CPU scalar twin
#   logits.jsonl         truncated SmolLM2 (CPU reference from here), then
#                        synthetic Qwen2.5-7B-shaped 2-block models in Q4_K
#                        and Q8_0 (CPU reference computed there)
#   bench-q4_k.json      speed runs, Qwen2.5-7B shapes, Q4_K
#   bench-q8_0.json      the same in Q8_0
#   nvidia-smi.txt, log.txt, and ncu.txt (Nsight Compute's speed-of-light and
#   occupancy sections for a few decode kernels, where ncu is installed)
# and exits non-zero if any check failed.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Paths relative to the repository root, so reports name no machine's paths.
cd "$ROOT"
PACK=".gpu"
SMOL="models/smollm2-135m-instruct-q8_0.gguf"
CUT="$PACK/smollm2-135m-q8_0-2l.gguf"
REF="$PACK/smollm2-ref.json"

prepare() {
  set -e
  [[ -f "$SMOL" ]] || scripts/fetch-models.sh
  echo "== build fak --features cuda (release)" >&2
  cargo build --release -q -p fak-cli --features cuda
  local bin="${CARGO_TARGET_DIR:-target}/release/fak"
  mkdir -p "$PACK"
  strip -o "$PACK/fak" "$bin"
  xz -T0 -6 -f "$PACK/fak"
  echo "== truncate SmolLM2 to 2 blocks, CPU reference" >&2
  "$bin" cuda truncate "$SMOL" "$CUT" --layers 2
  "$bin" cuda reference "$CUT" --out "$REF"
  local size
  size=$(du -sb "$PACK" | cut -f1)
  echo "== .gpu holds $((size / 1048576)) MiB" >&2
  if (( size > 60 * 1048576 )); then
    echo "gpu-check: .gpu is over 60 MiB; it must travel in 64 MiB with the tree" >&2
    exit 1
  fi
  set +e
}

# Adds the directories holding libcuda and libnvrtc to LD_LIBRARY_PATH.
find_cuda_libs() {
  local d dirs=()
  for lib in libcuda.so.1 libnvrtc.so.13 libnvrtc.so.12; do
    d=$(find /usr/local/nvidia /usr/local/cuda* /usr/lib/x86_64-linux-gnu /opt /usr/lib64 \
          -name "$lib" -print -quit 2>/dev/null | xargs -r dirname)
    [[ -n "$d" ]] && dirs+=("$d")
  done
  local IFS=:
  export LD_LIBRARY_PATH="${dirs[*]:-}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

run() {
  local out="$1" fak="$2" rc=0
  mkdir -p "$out"
  local log="$out/log.txt"
  step() { # name, command...
    local name="$1"; shift
    echo "== $name: ${*//$fak/fak}" | tee -a "$log" >&2
    local t0=$SECONDS
    "$@" 2>>"$log"
    local r=$?
    echo "== $name: exit $r in $((SECONDS - t0)) s" | tee -a "$log" >&2
    (( r == 0 )) || rc=1
    return 0
  }
  step system "$fak" inspect --system --json >"$out/system.json"
  step kernels "$fak" cuda check --json >"$out/kernels.json"
  : >"$out/logits.jsonl"
  step logits-smollm2 "$fak" cuda logits --model "$CUT" --reference "$REF" --json >>"$out/logits.jsonl"
  step logits-q4_k "$fak" cuda logits --synthetic qwen2.5-7b:q4_k@2 --json >>"$out/logits.jsonl"
  step logits-q8_0 "$fak" cuda logits --synthetic qwen2.5-7b:q8_0@2 --json >>"$out/logits.jsonl"
  step bench-q4_k "$fak" cuda bench --synthetic qwen2.5-7b:q4_k --json >"$out/bench-q4_k.json"
  step bench-q8_0 "$fak" cuda bench --synthetic qwen2.5-7b:q8_0 --json >"$out/bench-q8_0.json"
  if command -v nvidia-smi >/dev/null; then nvidia-smi >"$out/nvidia-smi.txt" 2>&1; fi
  # Hardware counters of a few decode-step kernels (where Nsight Compute
  # runs; informational, never fails the check).
  local ncu
  ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
  if [[ -n "$ncu" ]]; then
    echo "== ncu: $ncu" | tee -a "$log" >&2
    timeout 150 "$ncu" --clock-control none --section SpeedOfLight --section Occupancy \
      --kernel-name 'regex:^(matmul_q4_k|attention_chunks|rms_norm)$' --launch-skip 300 --launch-count 6 \
      "$fak" cuda bench --synthetic qwen2.5-7b:q4_k@4 --steps 4 --batch 8 --context 512 \
      >"$out/ncu.txt" 2>&1 || echo "== ncu: exit $?" | tee -a "$log" >&2
  fi
  return $rc
}

case "${1:-}" in
  prepare)
    prepare
    ;;
  run)
    out="${2:-${OUT:-}}"
    [[ -n "$out" ]] || { echo "usage: $0 run OUT" >&2; exit 2; }
    find_cuda_libs
    echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH" >&2
    xz -dc "$PACK/fak.xz" >/tmp/fak && chmod +x /tmp/fak
    run "$out" /tmp/fak
    ;;
  dry-run)
    prepare
    out=$(mktemp -d)
    xz -dc "$PACK/fak.xz" >"$out/fak" && chmod +x "$out/fak"
    # Here the device steps fail with one line ("no CUDA device"); the
    # point is that every command and file the GPU run needs is in place.
    run "$out/result" "$out/fak"
    echo "dry run: $out/result" >&2
    # Every device step must have failed for want of a device, and only so.
    errors=$(grep -c "^fak: error" "$out/result/log.txt")
    nodev=$(grep -c "^fak: error: opening the CUDA device: no CUDA device" "$out/result/log.txt")
    echo "dry run: $nodev of $errors errors are 'no CUDA device' (6 device steps)" >&2
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("system.json cuda:", d["cuda"])' "$out/result/system.json"
    if [[ "$errors" != 6 || "$nodev" != 6 ]]; then
      grep "^fak: error" "$out/result/log.txt" >&2
      exit 1
    fi
    ;;
  *)
    echo "usage: $0 prepare | run OUT | dry-run" >&2
    exit 2
    ;;
esac
