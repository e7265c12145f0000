#!/usr/bin/env bash
# The files these commands wrote are kept in this folder: the ones a page names
# as they were written, the rest as keys of runs.json (a subfolder's as
# folder/file); python3 bench/unbundle.py FOLDER writes those back as files.
set -u
cd .
M=models/smollm2-135m-instruct-q8_0.gguf
O=$OUT/fleet-sweep
mkdir -p $O
for round in 1 2; do
  for mix in serial fill; do
    FAK=$TMPDIR/fak-final ENGINES=fak FAK_ARGS="--prefill $mix" FAK_BENCH_OUT=$O/r$round-$mix bench/fleet_http.sh $M 2 probe > $O/r$round-$mix.log 2>&1
  done
  ENGINES=llama-server FA_MODES=off KVU_MODES=off FAK_BENCH_OUT=$O/r$round-llama bench/fleet_http.sh $M 2 probe > $O/r$round-llama.log 2>&1
done
echo done > $O/DONE
