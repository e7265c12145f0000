#!/usr/bin/env bash
# C=8 shared-system-prompt: fak serve --prefill serial / fill, llama-server FA off / on, alternated.
# The files these commands wrote are kept in this folder: the ones a page names
# as they were written, the rest as keys of runs.json (a subfolder's as
# folder/file); python3 bench/unbundle.py FOLDER writes those back as files.
set -u
cd "$(git rev-parse --show-toplevel)"
M=models/smollm2-135m-instruct-q8_0.gguf
O=$OUT/ttft-sweep
mkdir -p $O
for round in 1 2; do
  for mix in serial fill; do
    FAK_ARGS="--prefill $mix" FAK=$TMPDIR/fak-ttft-c1 ENGINES=fak CONCURRENCY=8 FAK_BENCH_OUT=$O/r$round-$mix bench/serve.sh $M 2 > $O/r$round-$mix.log 2>&1
  done
  for fa in off on; do
    ENGINES=llama-server FA_MODES=$fa CONCURRENCY=8 FAK_BENCH_OUT=$O/r$round-llama-$fa bench/serve.sh $M 2 > $O/r$round-llama-$fa.log 2>&1
  done
done
echo done > $O/DONE
