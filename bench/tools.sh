#!/usr/bin/env bash
# The tool-calling agent benchmark: `fak serve` against `llama-server --jinja`
# over HTTP, in one run (bench/tools_bench.py is the client and the judge).
#
#   bench/tools.sh --out DIR MODEL THREADS
#
# For each concurrency C (CONCURRENCY, default "1 8"), both servers are started
# on free ports and kept up side by side (an idle one takes no CPU):
#   fak:          FAK serve --model MODEL --threads THREADS
#   llama-server: -m MODEL --alias <model stem> -t THREADS -tb THREADS --parallel C
#                 -c C*SLOT_CTX -fa FA --jinja      (its own chat template and
#                 tool-call grammar; the alias is fak's default served name, so
#                 both get byte-identical request bodies)
# then, for ROUNDS rounds (default 2), for each setting in SETTINGS (default
# "auto:whole required:stream", tool_choice:answers), bench/tools_bench.py runs
# NUM_REQUESTS episodes (default 40) against fak, then against llama-server
# (A B A B ...). Reports: DIR/<engine>-c<C>-<choice>-<whole|stream>-r<round>.json,
# the servers' logs DIR/<engine>-c<C>.server.log, DIR/env.txt (model hash,
# binaries, CPU, times) and DIR/table.md (bench/tools_bench.py table of all
# reports). Run it on an otherwise idle machine for the throughput columns.
#
# Environment: CONCURRENCY, ROUNDS, SETTINGS, NUM_REQUESTS, SEED (the tasks,
# default 0), FA (llama-server's flash attention, default on), TIMEOUT
# (seconds per request, default 600), MAX_TOKENS (call turn, default 256),
# FINAL_MAX_TOKENS (default 64), SLOT_CTX (llama-server context per slot,
# default 2048; llama-server logged prompts of 324-758 tokens with Qwen2.5),
# ENGINES (default "fak llama-server"), FAK (binary; built with cargo if
# unset), LLAMA_SERVER (binary; bench/peers/build-server.sh's if unset),
# FAK_ARGS, LLAMA_ARGS.
# Exit status: 0 when every run finished and no request failed, 1 otherwise.
set -euo pipefail

usage() { echo "usage: $0 --out DIR MODEL THREADS" >&2; exit 2; }
[[ $# -eq 4 && $1 == --out ]] || usage
out=$2
model=$3
threads=$4
[[ -f "$model" ]] || { echo "tools.sh: no model file $model" >&2; exit 2; }
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
name=$(basename "$model" .gguf)
mkdir -p "$out"
concurrency=${CONCURRENCY:-1 8}
rounds=${ROUNDS:-2}
settings=${SETTINGS:-auto:whole required:stream}
num=${NUM_REQUESTS:-40}
max_tokens=${MAX_TOKENS:-256}
final_max_tokens=${FINAL_MAX_TOKENS:-64}
slot_ctx=${SLOT_CTX:-2048}
engines=${ENGINES:-fak llama-server}
seed=${SEED:-0}
timeout=${TIMEOUT:-600}
fa=${FA:-on}

log() { printf 'tools.sh: %s\n' "$*" >&2; }

# shellcheck source=bench/server_lib.sh
source "$root/bench/server_lib.sh"

server_setup "$root" "$engines"
env_report "$out/env.txt" "$fak" "$llama" \
    "model: $(model_id "$model")" \
    "threads: $threads  concurrency: $concurrency  rounds: $rounds  settings: $settings  episodes per run: $num  seed: $seed" \
    "max_tokens: $max_tokens  final_max_tokens: $final_max_tokens  llama-server slot ctx: $slot_ctx  -fa $fa" \
    "commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')"

# Both servers run at once here; server_lib's cleanup stops one pid, so the
# trap stops them all.
pids=()
stop_all() {
    local p
    for p in "${pids[@]}"; do stop "$p"; done
    pids=()
}
trap stop_all EXIT
trap 'stop_all; exit 130' INT TERM

status=0
declare -A url
for c in $concurrency; do
    for engine in $engines; do
        port=$(free_port)
        url[$engine]="http://127.0.0.1:$port"
        case $engine in
        fak)
            # shellcheck disable=SC2086
            cmd=("$fak" serve --model "$model" --threads "$threads" --host 127.0.0.1 --port "$port" ${FAK_ARGS:-})
            ;;
        llama-server)
            # shellcheck disable=SC2086
            cmd=("$llama" -m "$model" --alias "$name" -t "$threads" -tb "$threads" --parallel "$c"
                -c $((c * slot_ctx)) -fa "$fa" --jinja --host 127.0.0.1 --port "$port" ${LLAMA_ARGS:-})
            ;;
        *)
            log "unknown engine $engine (fak, llama-server)"
            exit 2
            ;;
        esac
        log "$engine c=$c: ${cmd[*]}"
        "${cmd[@]}" >"$out/$engine-c$c.server.log" 2>&1 &
        pids+=($!)
        if ! wait_health "${url[$engine]}" "$!"; then
            tail -20 "$out/$engine-c$c.server.log" >&2 || true
            exit 1
        fi
    done
    for ((r = 1; r <= rounds; r++)); do
        for s in $settings; do
            choice=${s%%:*}
            mode=${s#*:}
            stream_flag=()
            [[ $mode == stream ]] && stream_flag=(--stream)
            for engine in $engines; do
                rep="$out/$engine-c$c-$choice-$mode-r$r.json"
                python3 "$root/bench/tools_bench.py" run --base-url "${url[$engine]}" --engine "$engine" \
                    --model "$name" --tool-choice "$choice" "${stream_flag[@]}" --concurrency "$c" \
                    --num-requests "$num" --max-tokens "$max_tokens" --final-max-tokens "$final_max_tokens" \
                    --seed "$seed" --timeout "$timeout" --round "$r" --out "$rep" || { log "$rep: failed requests or no report"; status=1; }
            done
        done
    done
    stop_all
done

date -u +"finished: %Y-%m-%dT%H:%M:%SZ" | tee -a "$out/env.txt" >&2
shopt -s nullglob
reps=("$out"/*-r*.json)
if ((${#reps[@]})); then
    python3 "$root/bench/tools_bench.py" table "${reps[@]}" | tee "$out/table.md"
fi
exit $status
