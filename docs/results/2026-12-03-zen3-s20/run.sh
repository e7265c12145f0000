#!/usr/bin/env bash
# Run of 2026-12-03 (AMD EPYC Zen 3, AVX2): the commands behind the
# reports beside this file. Run from the repository root, one step at a time:
#   docs/results/2026-12-03-zen3-s20/run.sh ab38      # 38c041b vs 609443b, fleet, alternated 3x
#   docs/results/2026-12-03-zen3-s20/run.sh threeway  # fak vs llama.cpp flash attention on and off
#   docs/results/2026-12-03-zen3-s20/run.sh fma       # a rounding-only change in fak, on the same scale
# Timings ran alone (niced processes stopped meanwhile).
# The files these commands wrote are kept in this folder: the ones a page names
# as they were written, the rest as keys of runs.json (a subfolder's as
# folder/file); python3 bench/unbundle.py FOLDER writes those back as files.
set -euo pipefail
D=docs/results/2026-12-03-zen3-s20
M=models/smollm2-135m-instruct-q8_0.gguf
case "${1:-}" in
ab38)
  # Both binaries built from their commits with `cargo build --release -p fak-cli`:
  # 38c041b in a worktree ($TMPDIR/wt-38c), 609443b here; copied to $TMPDIR/s20/fak-{38c,head}.
  O=$D/ab-38c041b
  target/release/fak bench bandwidth -t 2 --json > $O/bandwidth.json
  target/release/fak bench peak -t 2 --json > $O/peak.json
  for i in 1 2 3; do for b in 38c head; do
    $TMPDIR/s20/fak-$b bench fleet -m $M -t 2 --profile probe --json > $O/probe-$b-$i.json
  done; done
  for i in 1 2 3; do for b in 38c head; do
    $TMPDIR/s20/fak-$b bench fleet -m $M -t 2 --prefix 1024 --turns 40 --agents 8 \
      --decode 32 --result 48 --json > $O/bl-$b-$i.json
  done; done
  ;;
threeway)
  mkdir -p $TMPDIR/s20/dump
  FAK_TEACHER_DUMP=$TMPDIR/s20/dump cargo test --release -p fak-model --test teacher -- --test-threads 1 --nocapture
  bench/.venv/bin/python bench/peers/teacher.py --all --spread off --against $TMPDIR/s20/dump \
    | grep -E "THREEWAY|SPREAD" > $D/teacher/threeway.txt
  ;;
fma)
  # A temporary, uncommitted change: in crates/fak-kernels/src/attn/scalar.rs,
  # `dot_f32_f16` and the dims-major `dot_f32_f16_cols_group` sum with
  # `a.mul_add(b, acc)` instead of `acc += a * b` (one rounding less per
  # term; the same math). Run on the scalar path, which took the change.
  mkdir -p $TMPDIR/s20/dump-fma
  FAK_ISA=scalar FAK_TEACHER_DUMP=$TMPDIR/s20/dump-fma cargo test --release -p fak-model --test teacher -- \
    --test-threads 1 --nocapture 2>&1 | grep TEACHER > $D/teacher/teacher-scalar-fma-scores.txt
  bench/.venv/bin/python bench/peers/teacher.py --dumps $TMPDIR/s20/dump $TMPDIR/s20/dump-fma > $D/teacher/dumps-fma-vs-head.txt
  ;;
*)
  echo "usage: $0 ab38|threeway|fma" >&2
  exit 2
  ;;
esac
