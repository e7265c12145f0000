#!/usr/bin/env bash
# The files these commands wrote are kept in this folder: the ones a page names
# as they were written, the rest as keys of runs.json (a subfolder's as
# folder/file); python3 bench/unbundle.py FOLDER writes those back as files.
set -u
cd "$(git rev-parse --show-toplevel)"
M=models/smollm2-135m-instruct-q8_0.gguf
O=$OUT/ttft-sweep2
mkdir -p $O
for round in 1 2; do
  FAK=$TMPDIR/fak-ttft-c2 ENGINES=fak CONCURRENCY=8 FAK_BENCH_OUT=$O/r$round-fak bench/serve.sh $M 2 > $O/r$round-fak.log 2>&1
  ENGINES=llama-server FA_MODES=off CONCURRENCY=8 FAK_BENCH_OUT=$O/r$round-llama-off bench/serve.sh $M 2 > $O/r$round-llama-off.log 2>&1
done
FAK=$TMPDIR/fak-ttft-c2 ENGINES=fak CONCURRENCY="1 32" FAK_BENCH_OUT=$O/fak-c1-c32 bench/serve.sh $M 2 > $O/fak-c1-c32.log 2>&1
echo done > $O/DONE
