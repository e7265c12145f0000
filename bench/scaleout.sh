#!/usr/bin/env bash
# fak replicas behind vllm-router, every routing policy in one run:
#
#   bench/scaleout.sh [MODEL]        (default: models/smollm2-135m-instruct-q8_0.gguf)
#
# Installs vllm-router (pinned, from PyPI) into bench/.router-venv on first
# use, builds fak, then runs bench/scaleout.py: 2 replicas with one thread
# each, 4 fleets x 8 agents x 6 turns, over chat completions (round_robin,
# cache_aware, kv_aware fed by fak's --kv-events) and over the session API
# (consistent_hash, kv_aware with session affinity), each beside one
# replica alone; then a run that SIGKILLs a replica mid-way.
# Report: $FAK_BENCH_OUT (default /tmp/fak-bench/scaleout)/scaleout.json,
# with every server's log beside it. SCALEOUT_ARGS adds bench/scaleout.py
# flags (e.g. "--fleets 2 --agents 4" for a quick look).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
model=${1:-models/smollm2-135m-instruct-q8_0.gguf}
out=${FAK_BENCH_OUT:-${TMPDIR:-/tmp}/fak-bench/scaleout}
venv=bench/.router-venv
router_pin="vllm-router==0.1.17"

[[ -f "$model" ]] || scripts/fetch-models.sh
if [[ ! -x "$venv/bin/vllm-router" ]] || ! "$venv/bin/python" -m pip show vllm-router 2>/dev/null | grep -q "^Version: ${router_pin#*==}$"; then
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check "$router_pin"
fi
cargo build --release -q -p fak-cli
fak="${CARGO_TARGET_DIR:-target}/release/fak"
mkdir -p "$out"
{
    echo "model: $model ($(sha256sum "$model" | cut -c1-16)...)"
    echo "fak: $("$fak" --version)  router: $router_pin"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')  nproc: $(nproc)"
    date -u +"started: %Y-%m-%dT%H:%M:%SZ"
} | tee "$out/env.txt" >&2
# shellcheck disable=SC2086
python3 bench/scaleout.py --fak "$fak" --router "$venv/bin/vllm-router" --model "$model" \
    --out "$out" --kill ${SCALEOUT_ARGS:-} >/dev/null
date -u +"finished: %Y-%m-%dT%H:%M:%SZ" | tee -a "$out/env.txt" >&2
python3 - "$out/scaleout.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"{'api':9} {'policy':16} {'turns/s':>8} {'computed':>9} {'vs 1':>6} {'ttft p50':>9} {'p99':>8}  share")
for x in r["runs"]:
    t = x["ttft_ms"]
    print(f"{x['api']:9} {x['policy'] + (' +kill' if 'kill' in x else ''):16} {x['agent_turns_per_s']:8.2f} "
          f"{x['prompt_tokens_computed']:9d} {x['computed_vs_single'] or 0:6.2f} {t['p50'] or 0:9.0f} {t['p99'] or 0:8.0f}  "
          f"{x.get('share_per_replica')}")
PY
