#!/usr/bin/env bash
# Agent-fleet benchmark of fak against llama.cpp on one model.
#
#   bench/fleet.sh MODEL THREADS PROFILE
#
# PROFILE is one of probe, interactive, long, bounded-long (see
# bench/peers/workloads.py; every combination of the profile is run).
# Builds fak (release), runs `fak bench fleet --json`, then
# `bench/peers/llamacpp.py fleet` at every setting of the reference grid:
# the unified and the per-sequence KV cache, each with flash attention auto
# and off, f16 KV; all back to back (never concurrently) with the same
# thread count, and prints the table of `bench/compare.py fleet` (fak / the
# fastest of those four llama.cpp configurations per run). Reports are kept in $FAK_BENCH_OUT
# (default ${TMPDIR:-/tmp}/fak-bench). The llama.cpp peer's interpreter is
# chosen as described in bench/peers/common.py. Extra arguments for fak's
# run go in $FAK_FLEET_ARGS (e.g. FAK_FLEET_ARGS=--ablation adds the
# no-reuse run, kept as an internal field of the comparison), and extra
# arguments for both llama.cpp runs in $FAK_PEER_FLEET_ARGS (e.g.
# "--checkpoint DIR --segment-s 3000" for runs too long for one sitting: the
# script then stops with status 75 when a peer run checkpoints; run it again
# to continue, see bench/peers/README.md).
# `python3 bench/plot_fleet.py --out FILE.svg FAK.json PEER...json` draws
# agent-turns/s against agents from the reports.
set -euo pipefail

if [[ $# -ne 3 ]]; then
    echo "usage: $0 MODEL THREADS PROFILE" >&2
    exit 2
fi
model=$1
threads=$2
profile=$3
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${FAK_BENCH_OUT:-${TMPDIR:-/tmp}/fak-bench}
mkdir -p "$out"
name=$(basename "$model" .gguf)
fak_json="$out/fleet-$profile-fak-$name-t$threads.json"

cargo build --release -p fak-cli --manifest-path "$root/Cargo.toml" >&2
fak="${CARGO_TARGET_DIR:-$root/target}/release/fak"
"$fak" bench fleet --model "$model" --profile "$profile" --threads "$threads" ${FAK_FLEET_ARGS:-} --json >"$fak_json"
peers=()
for kv in unified per-seq; do
    for fa in auto off; do
        json="$out/fleet-$profile-llamacpp-$kv-fa-$fa-$name-t$threads.json"
        python3 "$root/bench/peers/llamacpp.py" fleet --model "$model" --threads "$threads" --profile "$profile" \
            --kv "$kv" --flash-attn "$fa" --type-kv f16 ${FAK_PEER_FLEET_ARGS:-} --out "$json"
        peers+=("$json")
    done
done
echo "reports: $fak_json ${peers[*]}" >&2
python3 "$root/bench/compare.py" fleet "$fak_json" "${peers[@]}"
