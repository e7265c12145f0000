#!/usr/bin/env bash
# The fleet benchmark over HTTP, fak against llama-server, in one run:
#
#   bench/fleet_http.sh MODEL THREADS [PROFILE]      (PROFILE: probe, the default)
#
# Runs, back to back, on the same model file and thread count:
#   1. fak bench fleet (in process), the reference for "HTTP costs little";
#   2. fak serve + bench/fleet_http.py --engine fak (sessions: one prefix, A forks);
#   3. llama-server --parallel A, one slot per agent (id_slot, cache_prompt), for
#      every setting in FA_MODES (default "off on") x KVU_MODES (default "off on":
#      --no-kv-unified / --kv-unified), + bench/fleet_http.py --engine llama-server.
# Reports (JSON) and server logs go to $FAK_BENCH_OUT (default
# /tmp/fak-bench/fleet-http-<model>-t<threads>-<profile>); compare them with
#   python3 bench/fleet_http.py --help      (the report schema)
# Environment: FAK (a fak binary; built if unset), LLAMA_SERVER (built with
# bench/peers/build-server.sh if unset), ENGINES (default "fak llama-server").
set -euo pipefail

if [[ $# -lt 2 || $# -gt 3 ]]; then
    echo "usage: $0 MODEL THREADS [PROFILE]" >&2
    exit 2
fi
model=$1
threads=$2
profile=${3:-probe}
[[ -f "$model" ]] || { echo "fleet_http.sh: no model file $model" >&2; exit 2; }
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
name=$(basename "$model" .gguf)
out=${FAK_BENCH_OUT:-${TMPDIR:-/tmp}/fak-bench/fleet-http-$name-t$threads-$profile}
mkdir -p "$out"
engines=${ENGINES:-fak llama-server}
fa_modes=${FA_MODES:-off on}
kvu_modes=${KVU_MODES:-off on}

log() { printf 'fleet_http.sh: %s\n' "$*" >&2; }

# The profile's first shape (bench/peers/workloads.py, as fak bench fleet and
# bench/fleet_http.py read it); SHAPE="P T A D R" overrides it.
if [[ -n "${SHAPE:-}" ]]; then
    read -r P T A D R <<<"$SHAPE"
else
    read -r P T A D R < <(python3 - "$root" "$profile" <<'PY'
import sys
sys.path.insert(0, sys.argv[1] + "/bench/peers")
import workloads
if sys.argv[2] not in workloads.PROFILES:
    sys.exit(f"fleet_http.sh: unknown profile {sys.argv[2]!r} ({', '.join(sorted(workloads.PROFILES))})")
s = workloads.PROFILES[sys.argv[2]][0]
print(s.prefix, s.turns, s.agents, s.decode, s.result)
PY
) || exit 2
fi
slot_ctx=$(( P + T * (R + D) + 64 ))
shape_args=(--prefix "$P" --turns "$T" --agents "$A" --decode "$D" --result "$R")

# shellcheck source=bench/server_lib.sh
source "$root/bench/server_lib.sh"

server_setup "$root" "$engines"
n_vocab=$(python3 -c 'import json,subprocess,sys; print(json.loads(subprocess.check_output([sys.argv[1], "inspect", "--json", sys.argv[2]]))["config"]["n_vocab"])' "${fak:-$root/target/release/fak}" "$model")
env_report "$out/env.txt" "$fak" "$llama" \
    "model: $(model_id "$model")  n_vocab: $n_vocab" \
    "threads: $threads  profile: $profile  P=$P T=$T A=$A D=$D R=$R  slot ctx: $slot_ctx"

status=0
# run_http TAG ENGINE CMD...: start the server CMD on $port, run the fleet
# over HTTP against it, stop it.
run_http() {
    local tag=$1 engine=$2
    shift 2
    local url="http://127.0.0.1:$port"
    log "$tag: $*"
    "$@" >"$out/$tag.server.log" 2>&1 &
    server_pid=$!
    if ! wait_health "$url" "$server_pid"; then
        tail -20 "$out/$tag.server.log" >&2 || true
        cleanup
        status=1
        return 0
    fi
    python3 "$root/bench/fleet_http.py" --engine "$engine" --url "$url" --n-vocab "$n_vocab" \
        "${shape_args[@]}" --out "$out/$tag.json" || { log "$tag failed"; status=1; }
    cleanup
}

for engine in $engines; do
    case $engine in
    fak)
        log "fak bench fleet (in process)"
        "$fak" bench fleet --model "$model" --threads "$threads" "${shape_args[@]}" --json \
            >"$out/fak-inprocess.json" || status=1
        port=$(free_port)
        run_http fak-http fak "$fak" serve --model "$model" --threads "$threads" \
            --host 127.0.0.1 --port "$port" ${FAK_ARGS:-}
        ;;
    llama-server)
        for fa in $fa_modes; do
            for kvu in $kvu_modes; do
                port=$(free_port)
                if [[ $kvu == on ]]; then kvu_flag=--kv-unified; else kvu_flag=--no-kv-unified; fi
                # shellcheck disable=SC2086
                run_http "llama-server-fa-$fa-kvu-$kvu" llama-server \
                    "$llama" -m "$model" -t "$threads" -tb "$threads" --parallel "$A" \
                    -c $(( A * slot_ctx )) -fa "$fa" "$kvu_flag" --host 127.0.0.1 --port "$port" \
                    ${LLAMA_ARGS:-}
            done
        done
        ;;
    *)
        log "unknown engine $engine (fak, llama-server)"
        exit 2
        ;;
    esac
done
date -u +"finished: %Y-%m-%dT%H:%M:%SZ" | tee -a "$out/env.txt" >&2
exit $status
