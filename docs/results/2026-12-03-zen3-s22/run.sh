#!/usr/bin/env bash
# Run of 2026-12-03 (AMD EPYC Zen 3, AVX2): the commands behind the
# reports beside this file. Run from the repository root:
#   docs/results/2026-12-03-zen3-s22/run.sh blhttp   # fak serve sessions vs llama-server, bounded-long T40 A8, 3 rounds
#   docs/results/2026-12-03-zen3-s22/run.sh cacheram # llama-server with and without its RAM prompt cache, probe, alternated 2x
#   docs/results/2026-12-03-zen3-s22/run.sh blpeer   # llama-server's other settings on bounded-long T40 A8: -fa on; --cache-ram 0
#   docs/results/2026-12-03-zen3-s22/run.sh abtile   # the Q8_0 tile driver without from_fn and the per-product memset: before/after, alternated
#   docs/results/2026-12-03-zen3-s22/run.sh abscratch # products' row-split scratch kept per thread, not allocated and zeroed per product
# $TMPDIR/fak-s22 is `cargo build --release -p fak-cli` at 76c0057 (b9c3119's forward
# pass plus two /metrics counters); `blhttp`, `cacheram` and `blpeer` ran it, and
# `abtile` compares it with 546baeb's build ($TMPDIR/fak-tile).
# Timings ran alone (niced processes stopped meanwhile).
# The files these commands wrote are kept in this folder: the ones a page names
# as they were written, the rest as keys of runs.json (a subfolder's as
# folder/file); python3 bench/unbundle.py FOLDER writes those back as files.
set -euo pipefail
D=docs/results/2026-12-03-zen3-s22
M=models/smollm2-135m-instruct-q8_0.gguf
case "${1:-}" in
blhttp)
  export PATH=$PWD/bench/.venv/bin:$PATH
  mkdir -p $D/fleet-http
  for r in 1 2 3; do
    FAK=$TMPDIR/fak-s22 FAK_BENCH_OUT=$D/fleet-http/bl-$r FA_MODES=off KVU_MODES=off SHAPE="1024 40 8 32 48" \
      bench/fleet_http.sh $M 2 bounded-long > $D/fleet-http/bl-$r.txt 2>&1
  done
  ;;
cacheram)
  # llama-server 0.3.30 saves idle slots to a RAM prompt cache (on by default,
  # 8 GiB); `--cache-ram 0` turns it off. Is either setting faster?
  export PATH=$PWD/bench/.venv/bin:$PATH
  mkdir -p $D/cache-ram
  for r in 1 2; do
    FAK=$TMPDIR/fak-s22 ENGINES=llama-server FAK_BENCH_OUT=$D/cache-ram/default-$r FA_MODES=off KVU_MODES=off \
      bench/fleet_http.sh $M 2 probe > $D/cache-ram/default-$r.txt 2>&1
    FAK=$TMPDIR/fak-s22 ENGINES=llama-server FAK_BENCH_OUT=$D/cache-ram/off-$r FA_MODES=off KVU_MODES=off LLAMA_ARGS="--cache-ram 0" \
      bench/fleet_http.sh $M 2 probe > $D/cache-ram/off-$r.txt 2>&1
  done
  ;;
blpeer)
  export PATH=$PWD/bench/.venv/bin:$PATH
  FAK=$TMPDIR/fak-s22 ENGINES=llama-server FAK_BENCH_OUT=$D/fleet-http/bl-fa-on FA_MODES=on KVU_MODES=off \
    SHAPE="1024 40 8 32 48" bench/fleet_http.sh $M 2 bounded-long > $D/fleet-http/bl-fa-on.txt 2>&1
  FAK=$TMPDIR/fak-s22 ENGINES=llama-server FAK_BENCH_OUT=$D/fleet-http/bl-cache-ram-0 FA_MODES=off KVU_MODES=off \
    LLAMA_ARGS="--cache-ram 0" SHAPE="1024 40 8 32 48" bench/fleet_http.sh $M 2 bounded-long \
    > $D/fleet-http/bl-cache-ram-0.txt 2>&1
  ;;
abtile)
  # $TMPDIR/fak-s22: the binary before the change; $TMPDIR/fak-tile: `cargo build --release -p fak-cli` with it.
  O=$D/ab-tile; mkdir -p $O
  for i in 1 2 3 4; do for b in s22 tile; do
    $TMPDIR/fak-$b bench batch -m $M -t 2 --batch 8 --reps 9 --json > $O/batch-$b-$i.json
  done; done
  for i in 1 2 3; do for b in s22 tile; do
    $TMPDIR/fak-$b bench fleet -m $M -t 2 --profile probe --json > $O/probe-$b-$i.json
  done; done
  ;;
abscratch)
  # $TMPDIR/fak-tile: 546baeb's build; $TMPDIR/fak-scratch: the same with the row-split
  # products' scratch kept per thread (a thread_local Vec<f32> of at most 16 MiB,
  # never zeroed, in fak-model's matmul.rs). Not kept: docs/PERFORMANCE.md,
  # its "tried" list.
  O=$D/ab-scratch; mkdir -p $O
  for i in 1 2 3; do for b in tile scratch; do
    $TMPDIR/fak-$b bench fleet -m $M -t 2 --profile probe --json > $O/probe-$b-$i.json
  done; done
  ;;
*)
  echo "usage: $0 blhttp|cacheram|blpeer|abtile|abscratch" >&2
  exit 2
  ;;
esac
