#!/usr/bin/env bash
# Single-stream benchmark of fak against llama.cpp on one model.
#
#   bench/single.sh MODEL THREADS [REPS]
#
# Builds fak (release), runs `fak bench model --json` and then
# `bench/peers/llamacpp.py single` back to back (never concurrently) with the
# same thread count and repetitions (default 3), and prints the comparison
# table of bench/compare.py. Reports are kept in $FAK_BENCH_OUT (default
# ${TMPDIR:-/tmp}/fak-bench). The llama.cpp peer's interpreter is chosen as described in
# bench/peers/common.py (--python / $FAK_PEER_PYTHON / bench/.venv).
set -euo pipefail

if [[ $# -lt 2 || $# -gt 3 ]]; then
    echo "usage: $0 MODEL THREADS [REPS]" >&2
    exit 2
fi
model=$1
threads=$2
reps=${3:-3}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${FAK_BENCH_OUT:-${TMPDIR:-/tmp}/fak-bench}
mkdir -p "$out"
name=$(basename "$model" .gguf)
fak_json="$out/single-fak-$name-t$threads.json"
peer_json="$out/single-llamacpp-$name-t$threads.json"

cargo build --release -p fak-cli --manifest-path "$root/Cargo.toml" >&2
"$root/target/release/fak" bench model --model "$model" --threads "$threads" --reps "$reps" --json >"$fak_json"
python3 "$root/bench/peers/llamacpp.py" single --model "$model" --threads "$threads" --reps "$reps" --out "$peer_json"
echo "reports: $fak_json $peer_json" >&2
python3 "$root/bench/compare.py" "$fak_json" "$peer_json"
