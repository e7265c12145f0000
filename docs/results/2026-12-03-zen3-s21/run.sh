#!/usr/bin/env bash
# Run of 2026-12-03 (AMD EPYC Zen 3, AVX2): the commands behind the
# reports beside this file. Run from the repository root:
#   docs/results/2026-12-03-zen3-s21/run.sh bound   # per-kernel best rates, the fleet's work, the bound
#   docs/results/2026-12-03-zen3-s21/run.sh peer    # fak vs llama.cpp's fleet peer, probe, alternated 3x
#   docs/results/2026-12-03-zen3-s21/run.sh http    # fak serve sessions vs llama-server, probe, 3 rounds
#   docs/results/2026-12-03-zen3-s21/run.sh abpf    # Q8_0 prefetch on every product: before/after, alternated 3x
# `peer` and `http` ran the fak binary built at 6911b14 (copied to $TMPDIR/fak-s21).
# Timings ran alone (niced processes stopped meanwhile).
# The files these commands wrote are kept in this folder: the ones a page names
# as they were written, the rest as keys of runs.json (a subfolder's as
# folder/file); python3 bench/unbundle.py FOLDER writes those back as files.
set -euo pipefail
D=docs/results/2026-12-03-zen3-s21
M=models/smollm2-135m-instruct-q8_0.gguf
case "${1:-}" in
bound)
  cargo build --release -p fak-cli -p fak-kernels --examples
  { target/release/fak inspect --system; grep -m1 -E "^cpu family" /proc/cpuinfo;
    grep -m1 -E "^model\s" /proc/cpuinfo; lscpu | grep -E "L1d|L2|L3"; } > $D/system.txt
  # The gemm_q8 8-token tile's inner loop (one step of 8 rows x 4 values,
  # 8 tokens), as compiled at this commit (perf annotate), on the Zen 3 model.
  llvm-mca -mcpu=znver3 -iterations=200 $D/gemm_q8_tile8_loop.s > $D/gemm_q8_tile8_loop.mca.txt
  # Best single-thread rates of each kernel the fleet runs.
  GEMM_SPEED_ONLY=q8_0 GEMM_SPEED_SHAPE="1536,576,512;576,1536,512;576,576,512;49152,576,8" \
    target/release/examples/gemm_speed > $D/gemm_speed.txt
  target/release/examples/attn_mem > $D/attn_mem.txt
  target/release/examples/ops_speed > $D/ops_speed.txt
  target/release/fak bench peak -t 1 --json > $D/peak-t1.json
  # The fleet's work (roofline MACs) and phase times at this commit.
  target/release/fak bench fleet -m $M -t 2 --profile probe --json > $D/probe.json
  target/release/fak bench fleet -m $M -t 2 --prefix 1024 --turns 40 --agents 8 \
    --decode 32 --result 48 --json > $D/bl.json
  python3 $D/bound.py $D > $D/bound.txt
  ;;
peer)
  PY=bench/.venv/bin/python F=$TMPDIR/fak-s21 O=$D/fleet; mkdir -p $O
  for r in 1 2 3; do
    $F bench fleet -m $M -t 2 --profile probe --json > $O/fak-$r.json 2> $O/fak-$r.err
    $PY bench/peers/llamacpp.py fleet --model $M --threads 2 --profile probe --kv per-seq \
      --flash-attn off --type-kv f16 --out $O/llamacpp-per-seq-fa-off-$r.json > $O/llamacpp-off-$r.err 2>&1
  done
  $PY bench/peers/llamacpp.py fleet --model $M --threads 2 --profile probe --kv per-seq \
    --flash-attn auto --type-kv f16 --out $O/llamacpp-per-seq-fa-auto.json > $O/llamacpp-auto.err 2>&1
  $PY bench/peers/llamacpp.py fleet --model $M --threads 2 --profile probe --kv unified \
    --flash-attn off --type-kv f16 --out $O/llamacpp-unified-fa-off.json > $O/llamacpp-unified-off.err 2>&1
  ;;
http)
  export PATH=$PWD/bench/.venv/bin:$PATH
  for r in 1 2 3; do
    FAK=$TMPDIR/fak-s21 FAK_BENCH_OUT=$D/fleet-http/probe-$r FA_MODES=off KVU_MODES=off bench/fleet_http.sh \
      $M 2 probe > $D/fleet-http/probe-$r.txt 2>&1
  done
  ;;
abpf)
  # $TMPDIR/fak-base: `cargo build --release -p fak-cli` at 6911b14; $TMPDIR/fak-pf: the same with
  # packed_q8_avx2's PREFETCH_MIN_BYTES = 0 (the change, committed as its removal).
  O=$D/ab-prefetch; mkdir -p $O
  for i in 1 2 3; do for b in base pf; do
    $TMPDIR/fak-$b bench batch -m $M -t 2 --batch 8 --reps 3 --json > $O/batch-$b-$i.json
  done; done
  for i in 1 2 3; do for b in base pf; do
    $TMPDIR/fak-$b bench fleet -m $M -t 2 --profile probe --json --bandwidth $O/bandwidth.json \
      --peak $O/peak.json > $O/probe-$b-$i.json
  done; done
  ;;
*)
  echo "usage: $0 bound|peer|http|abpf" >&2
  exit 2
  ;;
esac
