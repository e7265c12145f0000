#!/usr/bin/env bash
# Run of 2026-12-03, AMD EPYC Zen 3 (family 25 model 1, AVX2 only, 2 vCPUs).
#   docs/results/2026-12-03-zen3-s23/run.sh abfma     # fused score multiply-adds: before/after, alternated 3x
#   docs/results/2026-12-03-zen3-s23/run.sh teacher   # teacher-forced goldens, before/after
#   docs/results/2026-12-03-zen3-s23/run.sh probehttp # the fleet probe over HTTP vs llama-server, 3 rounds
#   docs/results/2026-12-03-zen3-s23/run.sh blhttp    # bounded-long T40 A8 over HTTP, 1 round
#   docs/results/2026-12-03-zen3-s23/run.sh abq6      # six queries per dims-major score pass: before/after, 3x
#   docs/results/2026-12-03-zen3-s23/run.sh probeq6   # one probe round over HTTP after it
# $TMPDIR/fak-base: `cargo build --release -p fak-cli` at 38c3dee; $TMPDIR/fak-fmas: the same with
# the attention scores' multiply-adds fused (every ISA and the scalar twins).
# Timings ran alone (niced processes stopped meanwhile).
# The files these commands wrote are kept in this folder: the ones a page names
# as they were written, the rest as keys of runs.json (a subfolder's as
# folder/file); python3 bench/unbundle.py FOLDER writes those back as files.
set -euo pipefail
D=docs/results/2026-12-03-zen3-s23
M=models/smollm2-135m-instruct-q8_0.gguf
# ab OUT A B: the probe in process, $TMPDIR/fak-A then $TMPDIR/fak-B, three times.
ab() {
  mkdir -p $D/$1
  for i in 1 2 3; do for b in $2 $3; do
    $TMPDIR/fak-$b bench fleet -m $M -t 2 --profile probe --json > $D/$1/probe-$b-$i.json
  done; done
}
# http BIN NAME PROFILE: one round of bench/fleet_http.sh (llama-server -fa off
# --no-kv-unified) with $TMPDIR/fak-BIN, reports in fleet-http/NAME/; SHAPE passes through.
http() {
  mkdir -p $D/fleet-http
  PATH=$PWD/bench/.venv/bin:$PATH FAK=$TMPDIR/fak-$1 FAK_BENCH_OUT=$D/fleet-http/$2 FA_MODES=off KVU_MODES=off \
    bench/fleet_http.sh $M 2 $3 > $D/fleet-http/$2.txt 2>&1
}
case "${1:-}" in
abfma) ab ab-fma base fmas ;;
# $TMPDIR/fak-s23: `cargo build --release -p fak-cli` at 0fdcebb.
probehttp) for r in 1 2 3; do http s23 probe-$r probe; done ;;
blhttp) SHAPE="1024 40 8 32 48" http s23 bl-1 bounded-long ;;
# $TMPDIR/fak-q6: the same with six queries per dims-major score pass (399a2dd's kernel).
abq6) ab ab-q6 s23 q6 ;;
probeq6) http q6 probe-q6-1 probe ;;
teacher)
  # At 38c3dee (teacher-38c3dee.txt) and with the change (teacher-fused-scores.txt).
  cargo test --release -p fak-model --test teacher -- --nocapture 2>&1 | grep -E "^TEACHER|test result"
  ;;
*)
  echo "usage: $0 abfma|abq6|teacher|probehttp|probeq6|blhttp" >&2
  exit 2
  ;;
esac
