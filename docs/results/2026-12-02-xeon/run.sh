#!/usr/bin/env bash
# Measurements on an Intel Xeon (AVX-512 VNNI/BF16),
# fak at 5c4e682 (binary copied to $TMPDIR/fak-bench-bin), each piece alone
# on an idle machine (every niced process stopped while it runs).
# The files these commands wrote are kept in this folder: the ones a page names
# as they were written, the rest as keys of runs.json (a subfolder's as
# folder/file); python3 bench/unbundle.py FOLDER writes those back as files.
set -u
cd .
F=$TMPDIR/fak-bench-bin
LB=bench/.venv/llama.cpp-build/bin/llama-bench
export PATH=bench/.venv/bin:$PATH
O=docs/results/2026-12-02-xeon; mkdir -p $O
step() { echo "$1 $(date -u +%H:%M:%S)" >> $O/times.txt; }
case "${1:-all}" in
probes|all)
  step probes
  $F inspect --system > $O/system.txt
  $F bench bandwidth --threads 2 --json > $O/bandwidth.json
  $F bench peak --threads 2 --json > $O/peak.json
  ;;&
serve|all)
  step serve
  FAK=$F FAK_BENCH_OUT=$O/serve bench/serve.sh models/smollm2-135m-instruct-q8_0.gguf 2 > $O/serve.txt 2>&1
  step http-overhead
  FAK=$F bench/http_overhead.sh > $O/http-overhead.txt 2>&1
  ;;&
models|all)
  step models
  for t in 2 1; do
    python3 bench/single_pairs.py models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf --threads $t --pairs 3 \
      --fak $F --llama-bench $LB --out $O/models-1.5b-t$t > $O/models-1.5b-t$t.txt 2>&1
  done
  ;;&
fleet15|all)
  step fleet15
  mkdir -p $O/fleet15
  $F bench fleet -m models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf -t 2 --profile probe \
    --bandwidth $O/bandwidth.json --peak $O/peak.json --json > $O/fleet15/fak.json 2> $O/fleet15/fak.err
  for fa in off auto; do
    python3 bench/peers/llamacpp.py fleet --model models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf --threads 2 \
      --profile probe --kv per-seq --flash-attn $fa --type-kv f16 --out $O/fleet15/llamacpp-per-seq-fa-$fa.json \
      > $O/fleet15/llamacpp-fa-$fa.err 2>&1
  done
  python3 bench/compare.py fleet $O/fleet15/fak.json $O/fleet15/llamacpp-per-seq-fa-*.json > $O/fleet15/compare.txt 2>&1
  ;;&
fleethttp|all)
  step fleethttp
  FAK=$F FAK_BENCH_OUT=$O/fleet-http FA_MODES=off KVU_MODES="off on" bench/fleet_http.sh \
    models/smollm2-135m-instruct-q8_0.gguf 2 probe > $O/fleet-http.txt 2>&1
  ;;
esac
step done
# (after the steps above) the other models' single-stream pairs, 2 threads:
#   for m in smollm2-135m-instruct-q8_0 qwen2.5-coder-0.5b-instruct-q4_k_m gemma-3-270m-q4_k_m; do
#     python3 bench/single_pairs.py models/$m.gguf --threads 2 --pairs 3 --fak $TMPDIR/fak-bench-bin \
#       --llama-bench $LB --out docs/results/2026-12-02-xeon/models/$m > docs/results/2026-12-02-xeon/models-$m.txt 2>&1
#   done
