#!/usr/bin/env bash
# Run of 2026-12-03, AMD EPYC Zen 3 (family 25 model 1; AVX2/FMA/F16C,
# no AVX-512; `fak inspect --system`: kernel path avx2), 2 threads.
# Every timing ran alone (niced jobs stopped meanwhile).
#   docs/results/2026-12-03-zen3/run.sh STEP
# The files these commands wrote are kept in this folder: the ones a page names
# as they were written, the rest as keys of runs.json (a subfolder's as
# folder/file); python3 bench/unbundle.py FOLDER writes those back as files.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
R=docs/results/2026-12-03-zen3
FAK=${FAK:-target/release/fak}
case "${1:-}" in
  gemma-rss)
    # gemma3's local layers: resident memory with the window's blocks dropped
    # vs every row kept; 8 agents forked from one shared context, f16 cache.
    # c8k-* ran fak at c21778e, c32k-* at da541c9 (same KV code for f16).
    for ctx in 8192 32768; do
      for w in drop keep; do
        /usr/bin/time -v "$FAK" bench model -m models/gemma-3-270m-q4_k_m.gguf -t 2 \
          --contexts $ctx --kv-window $w --json \
          > $R/gemma-rss/c$((ctx / 1024))k-$w.json 2> $R/gemma-rss/c$((ctx / 1024))k-$w.err
      done
    done
    grep -H "Maximum resident" $R/gemma-rss/*.err ;;
  serve-rss)
    # Resident memory of `fak serve` 6 s after start, f16 vs Q8_0 cache
    # (Qwen2.5-Coder-0.5B, default --kv-mem): before da541c9 the Q8_0 pool
    # was written whole at start.
    for t in f16 q8_0; do
      "$FAK" serve -m models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf --kv-type $t --port 18089 &
      p=$!; sleep 6; grep VmRSS /proc/$p/status; kill $p; wait $p || true
    done ;;
  single-1.5b)
    # Qwen2.5-Coder-1.5B, fak (da541c9) and llama-bench back to back, two
    # pairs, with the read bandwidth before and after.
    D=$R/single-1.5b
    "$FAK" bench bandwidth -t 2 --json > $D/bandwidth-before.json
    python3 bench/single_pairs.py models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf \
      --threads 2 --pairs 2 --fak "$FAK" \
      --llama-bench bench/.venv/llama.cpp-build/bin/llama-bench --out $D > $D/pairs.txt
    "$FAK" bench bandwidth -t 2 --json > $D/bandwidth-after.json ;;
  spin)
    # The pool's spin, 2 ms (da541c9) vs 50 us (da541c9 with SPIN =
    # from_micros(50) in crates/fak-kernels/src/pool.rs, not committed):
    # FAK=... FAK_SPIN50=... GOLDEN=... GOLDEN_SPIN50=... run.sh spin
    # (GOLDEN*: `cargo test --release -p fak-model --test golden --no-run`
    # of each tree). Goldens two tests at a time, then decode pairs.
    D=$R/spin
    (cd crates/fak-model && for v in "$GOLDEN" "$GOLDEN_SPIN50" "$GOLDEN" "$GOLDEN_SPIN50"; do
      /usr/bin/time -f "$v %e s" "$v" --test-threads 2 -q; done) 2>&1 | tee $D/golden-times.txt
    for m in smollm2-135m-instruct-q8_0 qwen2.5-coder-0.5b-instruct-q4_k_m qwen2.5-coder-1.5b-instruct-q4_k_m; do
      for i in 1 2; do
        "$FAK" bench model -m models/$m.gguf -t 2 --reps 3 --json > $D/$m-da541c9-$i.json
        "$FAK_SPIN50" bench model -m models/$m.gguf -t 2 --reps 3 --json > $D/$m-spin50-$i.json
      done
    done ;;
  adaptive-spin)
    # The adaptive spin (08dda16) vs the 2 ms spin of the same tree
    # (1435454): FAK_MAIN=... FAK_ADAPT=... GOLDEN_MAIN=... GOLDEN_ADAPT=...
    D=$R/adaptive-spin
    (cd crates/fak-model && for v in "$GOLDEN_MAIN" "$GOLDEN_ADAPT" "$GOLDEN_MAIN" "$GOLDEN_ADAPT" "$GOLDEN_MAIN" "$GOLDEN_ADAPT"; do
      /usr/bin/time -f "$v %e s" "$v" --test-threads 2 -q; done) 2>&1 | tee $D/golden-times.txt
    for m in smollm2-135m-instruct-q8_0 qwen2.5-coder-1.5b-instruct-q4_k_m qwen2.5-coder-0.5b-instruct-q4_k_m; do
      for i in 1 2; do
        "$FAK_MAIN" bench model -m models/$m.gguf -t 2 --reps 3 --json > $D/$m-main-$i.json
        "$FAK_ADAPT" bench model -m models/$m.gguf -t 2 --reps 3 --json > $D/$m-adapt-$i.json
      done
    done
    "$FAK_MAIN" bench fleet -m models/smollm2-135m-instruct-q8_0.gguf -t 2 --profile probe --json > $D/probe-main.json
    "$FAK_ADAPT" bench fleet -m models/smollm2-135m-instruct-q8_0.gguf -t 2 --profile probe --json > $D/probe-adapt.json
    # The probe over HTTP, each side's server and client on an otherwise idle machine.
    http1() {
      "$1" serve --model models/smollm2-135m-instruct-q8_0.gguf --threads 2 --host 127.0.0.1 --port 18091 >/dev/null 2>&1 &
      local p=$!
      for _ in $(seq 60); do curl -sf localhost:18091/health >/dev/null && break; sleep 0.5; done
      python3 bench/fleet_http.py --engine fak --url http://127.0.0.1:18091 --n-vocab 49152 --profile probe --out "$2"
      kill $p; wait $p || true
    }
    export -f http1
    for i in 1 2; do
      bash -c "http1 '$FAK_MAIN' $D/http-probe-main-$i.json"
      bash -c "http1 '$FAK_ADAPT' $D/http-probe-adapt-$i.json"
    done ;;
  *) echo "usage: $0 gemma-rss|serve-rss|single-1.5b|spin|adaptive-spin" >&2; exit 2 ;;
esac
