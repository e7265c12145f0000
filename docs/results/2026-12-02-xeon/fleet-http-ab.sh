#!/usr/bin/env bash
# fak over HTTP against fak in process on the probe, alternated: serve's
# default serial prefill vs --prefill fill (Fleet's mix), two rounds.
# The files these commands wrote are kept in this folder: the ones a page names
# as they were written, the rest as keys of runs.json (a subfolder's as
# folder/file); python3 bench/unbundle.py FOLDER writes those back as files.
set -u
cd .
O=docs/results/2026-12-02-xeon/fleet-http-ab
for r in 1 2; do
  for mix in serial fill; do
    FAK=$TMPDIR/fak-bench-bin ENGINES=fak FAK_ARGS="--prefill $mix" FAK_BENCH_OUT=$O/$mix-$r \
      bench/fleet_http.sh models/smollm2-135m-instruct-q8_0.gguf 2 probe > $O/$mix-$r.txt 2>&1
  done
done
