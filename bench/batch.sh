#!/usr/bin/env bash
# Batched decode benchmark of fak against llama.cpp on one model.
#
#   bench/batch.sh MODEL THREADS [BATCHES]
#
# BATCHES is a comma-separated list of batch sizes (default
# 1,8,32,128,256,512,1024). Builds fak (release), runs
# `fak bench batch --json`, then `bench/peers/llamacpp.py batched` with the
# unified and the per-sequence KV cache, all back to back (never
# concurrently) with the same thread count, and prints the table of
# `bench/compare.py batch`. Reports are kept in $FAK_BENCH_OUT (default
# ${TMPDIR:-/tmp}/fak-bench); REPS (default 1) sets the llama.cpp repetitions.
# The llama.cpp peer's interpreter is chosen as described in
# bench/peers/common.py (--python / $FAK_PEER_PYTHON / bench/.venv).
set -euo pipefail

if [[ $# -lt 2 || $# -gt 3 ]]; then
    echo "usage: $0 MODEL THREADS [BATCHES]" >&2
    exit 2
fi
model=$1
threads=$2
batches=${3:-1,8,32,128,256,512,1024}
reps=${REPS:-1}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${FAK_BENCH_OUT:-${TMPDIR:-/tmp}/fak-bench}
mkdir -p "$out"
name=$(basename "$model" .gguf)
fak_json="$out/batch-fak-$name-t$threads.json"
uni_json="$out/batch-llamacpp-unified-$name-t$threads.json"
per_json="$out/batch-llamacpp-per-seq-$name-t$threads.json"

cargo build --release -p fak-cli --manifest-path "$root/Cargo.toml" >&2
fak="${CARGO_TARGET_DIR:-$root/target}/release/fak"
"$fak" bench batch --model "$model" --threads "$threads" --batch "$batches" --json >"$fak_json"
python3 "$root/bench/peers/llamacpp.py" batched --model "$model" --threads "$threads" --batch "$batches" \
    --reps "$reps" --kv unified --out "$uni_json"
python3 "$root/bench/peers/llamacpp.py" batched --model "$model" --threads "$threads" --batch "$batches" \
    --reps "$reps" --kv per-seq --out "$per_json"
echo "reports: $fak_json $uni_json $per_json" >&2
python3 "$root/bench/compare.py" batch "$fak_json" "$uni_json" "$per_json"
