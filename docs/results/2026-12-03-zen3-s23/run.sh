#!/usr/bin/env bash
# Session 23 (2026-12-03), AMD EPYC Zen 3 (family 25 model 1, AVX2 only, 2 vCPUs).
#   docs/results/2026-12-03-zen3-s23/run.sh abfma     # fused score multiply-adds: before/after, alternated 3x
#   docs/results/2026-12-03-zen3-s23/run.sh teacher   # teacher-forced goldens, before/after
#   docs/results/2026-12-03-zen3-s23/run.sh probehttp # the fleet probe over HTTP vs llama-server, 3 rounds
#   docs/results/2026-12-03-zen3-s23/run.sh blhttp    # bounded-long T40 A8 over HTTP, 1 round
#   docs/results/2026-12-03-zen3-s23/run.sh abq6      # six queries per dims-major score pass: before/after, 3x
#   docs/results/2026-12-03-zen3-s23/run.sh probeq6   # one probe round over HTTP after it
# /tmp/fak-base: `cargo build --release -p fak-cli` at 38c3dee; /tmp/fak-fmas: the same with
# the attention scores' multiply-adds fused (every ISA and the scalar twins).
# Timings ran alone under /usr/local/bin/quiet (SIGSTOPs niced processes).
set -euo pipefail
D=docs/results/2026-12-03-zen3-s23
M=models/smollm2-135m-instruct-q8_0.gguf
case "${1:-}" in
abfma)
  O=$D/ab-fma; mkdir -p $O
  for i in 1 2 3; do for b in base fmas; do
    quiet /tmp/fak-$b bench fleet -m $M -t 2 --profile probe --json > $O/probe-$b-$i.json
  done; done
  ;;
probehttp)
  # /tmp/fak-s23: `cargo build --release -p fak-cli` at 0fdcebb.
  export PATH=$PWD/bench/.venv/bin:$PATH
  mkdir -p $D/fleet-http
  for r in 1 2 3; do
    FAK=/tmp/fak-s23 FAK_BENCH_OUT=$D/fleet-http/probe-$r FA_MODES=off KVU_MODES=off \
      quiet bench/fleet_http.sh $M 2 probe > $D/fleet-http/probe-$r.txt 2>&1
  done
  ;;
blhttp)
  # One round of bounded-long T40 A8 over HTTP, same binary.
  export PATH=$PWD/bench/.venv/bin:$PATH
  mkdir -p $D/fleet-http
  FAK=/tmp/fak-s23 FAK_BENCH_OUT=$D/fleet-http/bl-1 FA_MODES=off KVU_MODES=off SHAPE="1024 40 8 32 48" \
    quiet bench/fleet_http.sh $M 2 bounded-long > $D/fleet-http/bl-1.txt 2>&1
  ;;
abq6)
  # /tmp/fak-s23 (0fdcebb) against /tmp/fak-q6 (six queries per dims-major score pass).
  O=$D/ab-q6; mkdir -p $O
  for i in 1 2 3; do for b in s23 q6; do
    quiet /tmp/fak-$b bench fleet -m $M -t 2 --profile probe --json > $O/probe-$b-$i.json
  done; done
  ;;
probeq6)
  # One probe round over HTTP with /tmp/fak-q6 (the six-query score pass).
  export PATH=$PWD/bench/.venv/bin:$PATH
  FAK=/tmp/fak-q6 FAK_BENCH_OUT=$D/fleet-http/probe-q6-1 FA_MODES=off KVU_MODES=off \
    quiet bench/fleet_http.sh $M 2 probe > $D/fleet-http/probe-q6-1.txt 2>&1
  ;;
teacher)
  # At 38c3dee (teacher-38c3dee.txt) and with the change (teacher-fused-scores.txt).
  cargo test --release -p fak-model --test teacher -- --nocapture 2>&1 | grep -E "^TEACHER|test result"
  ;;
*)
  echo "usage: $0 abfma|abq6|teacher|probehttp|probeq6|blhttp" >&2
  exit 2
  ;;
esac
