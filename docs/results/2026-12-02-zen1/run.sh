#!/usr/bin/env bash
# The commands of this directory's runs (2026-12-02, AMD EPYC Zen 1 "Naples",
# family 23 model 1, AVX2 in 128-bit halves, 2 vCPUs), fak at fe6c4d3
# (copied to $TMPDIR/fak-main-bin), each step alone under .
# The files these commands wrote are kept in this folder: the ones a page names
# as they were written, the rest as keys of runs.json (a subfolder's as
# folder/file); python3 bench/unbundle.py FOLDER writes those back as files.
set -euo pipefail
D=docs/results/2026-12-02-zen1
FAK=$TMPDIR/fak-main-bin
LB=bench/.venv/llama.cpp-build/bin/llama-bench
$FAK inspect --system > $D/system.txt
$FAK bench bandwidth -t 2 --json > $D/bandwidth.json
$FAK bench peak -t 2 --json > $D/peak.json
for t in 2 1; do
  python3 bench/single_pairs.py models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf --threads $t --pairs 3 \
    --fak $FAK --llama-bench $LB --out $D/models-1.5b-t$t > $D/models-1.5b-t$t.txt 2>&1
done
env FAK=$FAK FAK_BENCH_OUT=$D/fleet-http FA_MODES=off KVU_MODES=off \
  bench/fleet_http.sh models/smollm2-135m-instruct-q8_0.gguf 2 probe > $D/fleet-http.txt 2>&1
for fa in off auto; do
  bench/.venv/bin/python bench/peers/llamacpp.py fleet --model models/smollm2-135m-instruct-q8_0.gguf --threads 2 \
    --profile probe --kv per-seq --flash-attn $fa --type-kv f16 > $D/fleet/llamacpp-per-seq-fa-$fa.json
done
env FAK=$TMPDIR/fak-serve-bin FAK_BENCH_OUT=$D/serve CONCURRENCY=8 FA_MODES=off bench/serve.sh models/smollm2-135m-instruct-q8_0.gguf 2 > $D/serve.txt 2>&1   # fak at 2a9de34
