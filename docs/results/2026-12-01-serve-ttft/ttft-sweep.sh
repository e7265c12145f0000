#!/usr/bin/env bash
# C=8 shared-system-prompt: fak serve --prefill serial / fill, llama-server FA off / on, alternated.
set -u
cd /work/wt-ttft
M=models/smollm2-135m-instruct-q8_0.gguf
O=/work/runs/ttft-sweep
mkdir -p $O
for round in 1 2; do
  for mix in serial fill; do
    FAK_ARGS="--prefill $mix" FAK=/tmp/fak-ttft-c1 ENGINES=fak CONCURRENCY=8 FAK_BENCH_OUT=$O/r$round-$mix quiet bench/serve.sh $M 2 > $O/r$round-$mix.log 2>&1
  done
  for fa in off on; do
    ENGINES=llama-server FA_MODES=$fa CONCURRENCY=8 FAK_BENCH_OUT=$O/r$round-llama-$fa quiet bench/serve.sh $M 2 > $O/r$round-llama-$fa.log 2>&1
  done
done
echo done > $O/DONE
