#!/usr/bin/env bash
# Serving benchmark: `fak serve` against llama-server over HTTP.
#
#   bench/serve.sh MODEL THREADS
#
# For each concurrency C (default 1 8 32), one server at a time, back to back:
#   1. fak:          target/release/fak serve --model MODEL --threads THREADS
#   2. llama-server: -m MODEL --alias <model stem> -t THREADS -tb THREADS --parallel C
#                    -c C*SLOT -fa on
#      (the alias is fak's default served name, so both servers get
#      byte-identical request bodies; SLOT = (SYSTEM_TOKENS + 64 + MAX_TOKENS)
#      * 5/4 + 128 tokens per slot, room for the chat template and for words
#      that are more than one token)
#   3. llama-server: the same with -fa off
# Each server is started fresh on 127.0.0.1, waited for (GET /health = 200),
# driven by bench/serve.py (workload shared-system-prompt: a SYSTEM_TOKENS-word
# system prompt shared by every request plus a distinct 32-64-word user
# message, MAX_TOKENS streamed tokens with ignore_eos, concurrency C,
# NUM_REQUESTS requests after one warm-up) and stopped. Then
# bench/compare_serve.py prints output tok/s and TTFT p50 of each against the
# faster llama-server setting. Before the sweep, `fak bench model` records
# fak's single-stream decode speed (the baseline of the concurrency-1 target).
#
# Environment:
#   FAK_BENCH_OUT   results dir (default ${TMPDIR:-/tmp}/fak-bench/serve-<model>-t<threads>)
#   CONCURRENCY     list of concurrencies (default "1 8 32")
#   NUM_REQUESTS    requests per run (default: 4*C, at least 16)
#   MAX_TOKENS      (default 64)   SYSTEM_TOKENS (default 1024)
#   FA_MODES        llama-server flash-attention settings (default "on off")
#   ENGINES         which servers (default "fak llama-server")
#   LLAMA_SERVER    llama-server binary (default: bench/peers/build-server.sh's,
#                   built on first use)
#   FAK             fak binary (default target/release/fak, built with cargo)
#   PORT            port of the servers (default: a free one)
#   SERVE_ARGS      extra arguments for bench/serve.py
#   FAK_ARGS, LLAMA_ARGS   extra arguments for each server
#
# In the results dir: <server>-c<C>.json (bench/serve.py reports),
# <server>-c<C>.server.log, env.txt (model hash, binaries, CPU, times),
# fak-bench-model.json and baseline.txt (fak serve at C=1 against it), and
# compare.txt (the table printed at the end). Exit status: 0 when
# every run completed without failed requests, 1 otherwise (the comparison is
# still printed).
set -euo pipefail

if [[ $# -ne 2 ]]; then
    echo "usage: $0 MODEL THREADS" >&2
    exit 2
fi
model=$1
threads=$2
[[ -f "$model" ]] || { echo "serve.sh: no model file $model" >&2; exit 2; }
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
name=$(basename "$model" .gguf)
out=${FAK_BENCH_OUT:-${TMPDIR:-/tmp}/fak-bench/serve-$name-t$threads}
mkdir -p "$out"
concurrency=${CONCURRENCY:-1 8 32}
max_tokens=${MAX_TOKENS:-64}
system_tokens=${SYSTEM_TOKENS:-1024}
fa_modes=${FA_MODES:-on off}
engines=${ENGINES:-fak llama-server}
user_max=64
# Per-slot context of llama-server: system + user + generated, plus room for
# the chat template and tokens that are not one per word.
slot_ctx=$(( (system_tokens + user_max + max_tokens) * 5 / 4 + 128 ))

log() { printf 'serve.sh: %s\n' "$*" >&2; }

# shellcheck source=bench/server_lib.sh
source "$root/bench/server_lib.sh"

server_setup "$root" "$engines"

env_report "$out/env.txt" "$fak" "$llama" \
    "model: $(model_id "$model")" \
    "threads: $threads  concurrency: $concurrency  max_tokens: $max_tokens  system_tokens: $system_tokens"

if [[ -n "$fak" ]]; then
    log "fak bench model (single-stream decode baseline)"
    "$fak" bench model --model "$model" --threads "$threads" --json >"$out/fak-bench-model.json" \
        || log "fak bench model failed (no baseline)"
fi

status=0
reports=()
# run_one NAME C CMD...: starts the server CMD (its --port is $port), waits,
# benchmarks at concurrency C, stops it.
run_one() {
    local tag=$1 c=$2 engine=$3 label=$4
    shift 4
    local n=${NUM_REQUESTS:-$(( 4 * c > 16 ? 4 * c : 16 ))}
    local url="http://127.0.0.1:$port"
    local report="$out/$tag-c$c.json"
    log "$label, concurrency $c, $n requests: $*"
    "$@" >"$out/$tag-c$c.server.log" 2>&1 &
    server_pid=$!
    if ! wait_health "$url" "$server_pid"; then
        tail -20 "$out/$tag-c$c.server.log" >&2 || true
        cleanup
        status=1
        return 0
    fi
    # shellcheck disable=SC2086  # SERVE_ARGS is a word list on purpose
    if python3 "$root/bench/serve.py" --base-url "$url" --concurrency "$c" --num-requests "$n" \
        --max-tokens "$max_tokens" --system-tokens "$system_tokens" --seed 0 \
        --engine "$engine" --label "$label" --out "$report" ${SERVE_ARGS:-}; then
        :
    else
        log "$label c=$c: some requests failed (see $report)"
        status=1
    fi
    if [[ -f "$report" ]]; then reports+=("$report"); fi
    cleanup
}

for c in $concurrency; do
    port=${PORT:-$(free_port)}
    for engine in $engines; do
        case $engine in
        fak)
            # shellcheck disable=SC2086
            run_one fak "$c" fak "fak serve" \
                "$fak" serve --model "$model" --threads "$threads" --host 127.0.0.1 --port "$port" ${FAK_ARGS:-}
            ;;
        llama-server)
            for fa in $fa_modes; do
                # shellcheck disable=SC2086
                run_one "llama-server-fa-$fa" "$c" llama-server "llama-server -fa $fa" \
                    "$llama" -m "$model" --alias "$name" -t "$threads" -tb "$threads" --parallel "$c" \
                    -c $(( c * slot_ctx )) -fa "$fa" --host 127.0.0.1 --port "$port" ${LLAMA_ARGS:-}
            done
            ;;
        *)
            log "unknown engine $engine (fak, llama-server)"
            exit 2
            ;;
        esac
    done
done

if [[ -f "$out/fak-bench-model.json" ]]; then
    python3 - "$out/fak-bench-model.json" "$out"/fak-c1.json <<'PY' | tee "$out/baseline.txt" >&2 || true
import json, sys
bm = json.load(open(sys.argv[1]))
dec = bm.get("decode", {}).get("tok_s")
print(f"fak bench model decode: {dec} tok/s (single stream, {bm.get('threads')} threads)")
try:
    r = json.load(open(sys.argv[2]))["results"]
    tpot = r["tpot_ms"]["mean"]
    print(f"fak serve c=1: {1000 / tpot:.1f} tok/s per request from TPOT mean {tpot} ms"
          f" ({1000 / tpot / dec:.3f} of bench model decode)")
except (OSError, KeyError, TypeError, ZeroDivisionError):
    pass
PY
fi
date -u +"finished: %Y-%m-%dT%H:%M:%SZ" | tee -a "$out/env.txt" >&2
echo "reports in $out" >&2
if ((${#reports[@]})); then
    python3 "$root/bench/compare_serve.py" "${reports[@]}" | tee "$out/compare.txt"
fi
exit $status
