#!/usr/bin/env bash
# Measurements on an AMD EPYC Zen 3 (/proc/cpuinfo
# family 25 model 1, AVX2 only, 2 vCPUs, 24 GiB): fak at 41121f2 (row-major
# f16 keys; $TMPDIR/fak-base) against the dims-major key layout in 32-row tiles
# of this commit ($TMPDIR/fak-tiled), each piece alone on an idle machine (every
# niced process stopped while it runs). `run.sh STEP` runs one step;
# times.txt logs them.
# The files these commands wrote are kept in this folder: the ones a page names
# as they were written, the rest as keys of runs.json (a subfolder's as
# folder/file); python3 bench/unbundle.py FOLDER writes those back as files.
set -u
cd .
BASE=$TMPDIR/fak-base
NEW=$TMPDIR/fak-tiled
PY=bench/.venv/bin/python
export PATH=bench/.venv/bin:$PATH
O=docs/results/2026-12-02-zen3; mkdir -p $O
SMOL=models/smollm2-135m-instruct-q8_0.gguf
QWEN=models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
BL="--prefix 1024 --turns 40 --agents 8 --decode 32 --result 48"   # bounded-long T40 A8
step() { echo "$1 $(date -u +%H:%M:%S)" >> $O/times.txt; }
case "${1:-all}" in
probes|all)
  step probes
  $NEW inspect --system > $O/system.txt
  $NEW bench bandwidth --threads 2 --json > $O/bandwidth.json
  $NEW bench peak --threads 2 --json > $O/peak.json
  ;;&
# ab-untiled/ holds a first try ($TMPDIR/fak-kcols: keys dims-major over a
# whole segment, i.e. dims 512 bytes apart in a fleet's 256-row blocks),
# measured with this script's `ab` step: probe pairs 1-3 and bounded-long
# pair 1 (pair 2 was cut off).
kernels|all)
  # The score kernels alone, one thread: row-major vs dims-major keys in
  # cache (attn_cols_speed) and over DRAM (attn_mem).
  step kernels
  target/release/examples/attn_cols_speed > $O/attn_cols_speed.txt
  target/release/examples/attn_mem > $O/attn_mem.txt
  ;;&
ab|all)
  # Issue 22: row-major (41121f2) vs dims-major f16 keys, the probe alternated
  # three times, bounded-long T40 A8 twice, with the roofline.
  step ab
  mkdir -p $O/ab
  for r in 1 2 3; do
    for b in base new; do
      if [[ $b == base ]]; then bin=$BASE; else bin=$NEW; fi
      $bin bench fleet -m $SMOL -t 2 --profile probe --bandwidth $O/bandwidth.json --peak $O/peak.json \
        --json > $O/ab/probe-$b-$r.json 2> $O/ab/probe-$b-$r.err
    done
  done
  for r in 1 2; do
    for b in base new; do
      if [[ $b == base ]]; then bin=$BASE; else bin=$NEW; fi
      $bin bench fleet -m $SMOL -t 2 $BL --bandwidth $O/bandwidth.json --peak $O/peak.json \
        --json > $O/ab/bl-$b-$r.json 2> $O/ab/bl-$b-$r.err
    done
  done
  ;;&
single|all)
  # Single-stream prefill and decode through the flat store (64-row
  # segments, f16 keys dims-major now), alternated twice.
  step single
  mkdir -p $O/single
  for r in 1 2; do
    for b in base new; do
      if [[ $b == base ]]; then bin=$BASE; else bin=$NEW; fi
      for m in $SMOL $QWEN; do
        $bin bench model -m $m -t 2 --json > $O/single/$(basename $m .gguf)-$b-$r.json 2> /dev/null
      done
    done
  done
  ;;&
peer|all)
  # The probe against llama.cpp per-seq, flash attention off (the fastest
  # setting on every CPU so far), once.
  step peer
  mkdir -p $O/peer
  $PY bench/peers/llamacpp.py fleet --model $SMOL --threads 2 --profile probe --kv per-seq \
    --flash-attn off --type-kv f16 --out $O/peer/llamacpp-per-seq-fa-off.json > $O/peer/llamacpp-off.err 2>&1
  ;;
esac
step "done-${1:-all}"
# After `peer`, one fak probe run right after it for the pair (the same run):
#   $TMPDIR/fak-tiled bench fleet -m $SMOL -t 2 --profile probe --bandwidth $O/bandwidth.json \
#     --peak $O/peak.json --json > $O/peer/fak.json 2> $O/peer/fak.err
