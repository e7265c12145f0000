#!/usr/bin/env bash
# Measurements on an AMD EPYC Zen 5 (/proc/cpuinfo
# family 26, AVX-512 VNNI/BF16, 2 vCPUs, 24 GiB), fak at e5f9867 (binary
# copied to $TMPDIR/fak-main-bin), the 38c041b build at $TMPDIR/fak-38c041b; each
# piece alone on an idle machine (every niced process stopped
# while it runs). `run.sh STEP` runs one step; times.txt logs them.
# The files these commands wrote are kept in this folder: the ones a page names
# as they were written, the rest as keys of runs.json (a subfolder's as
# folder/file); python3 bench/unbundle.py FOLDER writes those back as files.
set -u
cd .
F=$TMPDIR/fak-main-bin
OLD=$TMPDIR/fak-38c041b
LB=bench/.venv/llama.cpp-build/bin/llama-bench
PY=bench/.venv/bin/python
export PATH=bench/.venv/bin:$PATH
O=docs/results/2026-12-02-zen5; mkdir -p $O
SMOL=models/smollm2-135m-instruct-q8_0.gguf
Q15=models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
BL="--prefix 1024 --turns 40 --agents 8 --decode 32 --result 48"   # bounded-long T40 A8
step() { echo "$1 $(date -u +%H:%M:%S)" >> $O/times.txt; }
case "${1:-all}" in
probes|all)
  step probes
  $F inspect --system > $O/system.txt
  $F bench bandwidth --threads 2 --json > $O/bandwidth.json
  $F bench peak --threads 2 --json > $O/peak.json
  ;;&
models|all)
  step models
  mkdir -p $O/models
  for m in smollm2-135m-instruct-q8_0 qwen2.5-coder-0.5b-instruct-q4_k_m gemma-3-270m-q4_k_m qwen2.5-coder-1.5b-instruct-q4_k_m; do
    python3 bench/single_pairs.py models/$m.gguf --threads 2 --pairs 3 --fak $F --llama-bench $LB \
      --out $O/models/$m-t2 > $O/models/$m-t2.txt 2>&1
  done
  python3 bench/single_pairs.py $Q15 --threads 1 --pairs 3 --fak $F --llama-bench $LB \
    --out $O/models/qwen2.5-coder-1.5b-instruct-q4_k_m-t1 > $O/models/qwen2.5-coder-1.5b-instruct-q4_k_m-t1.txt 2>&1
  ;;&
fleet|all)
  # The probe, fak and llama.cpp per-seq FA off alternated three times, plus
  # llama.cpp per-seq FA auto and unified FA off once.
  step fleet
  mkdir -p $O/fleet
  for r in 1 2 3; do
    $F bench fleet -m $SMOL -t 2 --profile probe --bandwidth $O/bandwidth.json --peak $O/peak.json \
      --json > $O/fleet/fak-$r.json 2> $O/fleet/fak-$r.err
    $PY bench/peers/llamacpp.py fleet --model $SMOL --threads 2 --profile probe --kv per-seq \
      --flash-attn off --type-kv f16 --out $O/fleet/llamacpp-per-seq-fa-off-$r.json > $O/fleet/llamacpp-off-$r.err 2>&1
  done
  $PY bench/peers/llamacpp.py fleet --model $SMOL --threads 2 --profile probe --kv per-seq \
    --flash-attn auto --type-kv f16 --out $O/fleet/llamacpp-per-seq-fa-auto.json > $O/fleet/llamacpp-auto.err 2>&1
  $PY bench/peers/llamacpp.py fleet --model $SMOL --threads 2 --profile probe --kv unified \
    --flash-attn off --type-kv f16 --out $O/fleet/llamacpp-unified-fa-off.json > $O/fleet/llamacpp-unified-off.err 2>&1
  ;;&
old|all)
  # Issue 22: this build against 38c041b, alternated three times, probe and bounded-long T40 A8.
  step old
  mkdir -p $O/vs-38c041b
  for r in 1 2 3; do
    for b in old new; do
      if [[ $b == old ]]; then bin=$OLD; else bin=$F; fi
      $bin bench fleet -m $SMOL -t 2 --profile probe --json > $O/vs-38c041b/probe-$b-$r.json 2> $O/vs-38c041b/probe-$b-$r.err
      $bin bench fleet -m $SMOL -t 2 $BL --json > $O/vs-38c041b/bl-$b-$r.json 2> $O/vs-38c041b/bl-$b-$r.err
    done
  done
  ;;&
bl|all)
  # bounded-long T40 A8 in process with the roofline, against llama.cpp per-seq FA off.
  step bl
  mkdir -p $O/bl
  $F bench fleet -m $SMOL -t 2 $BL --bandwidth $O/bandwidth.json --peak $O/peak.json \
    --json > $O/bl/fak.json 2> $O/bl/fak.err
  $PY bench/peers/llamacpp.py fleet --model $SMOL --threads 2 $BL --kv per-seq \
    --flash-attn off --type-kv f16 --out $O/bl/llamacpp-per-seq-fa-off.json > $O/bl/llamacpp-off.err 2>&1
  ;;&
fleethttp|all)
  # Issue 21: the probe and bounded-long T40 A8 over HTTP, fak and llama-server -fa off --no-kv-unified,
  # alternated (three rounds of the probe, then bounded-long).
  step fleethttp
  for r in 1 2 3; do
    FAK=$F FAK_BENCH_OUT=$O/fleet-http/probe-$r FA_MODES=off KVU_MODES=off bench/fleet_http.sh \
      $SMOL 2 probe > $O/fleet-http/probe-$r.txt 2>&1
  done
  for r in 1 2 3; do
    FAK=$F FAK_BENCH_OUT=$O/fleet-http/bl-$r FA_MODES=off KVU_MODES=off SHAPE="1024 40 8 32 48" bench/fleet_http.sh \
      $SMOL 2 bounded-long > $O/fleet-http/bl-$r.txt 2>&1
  done
  ;;&
blllama|all)
  # llama-server's bounded-long rounds again with bench/fleet_http.py keeping turns whose
  # last event failed after every token (llama-server 0.3.30's HTTP 500 on output that ends
  # inside a UTF-8 sequence); the fak rounds above stand (same dirs; env.txt rewritten).
  step blllama
  for r in 1 2 3; do
    FAK=$F ENGINES=llama-server FAK_BENCH_OUT=$O/fleet-http/bl-$r FA_MODES=off KVU_MODES=off SHAPE="1024 40 8 32 48" \
      bench/fleet_http.sh $SMOL 2 bounded-long > $O/fleet-http/bl-llama-$r.txt 2>&1
  done
  ;;&
prefill|all)
  # fak serve's default serial prefill against --prefill fill (Fleet's mix) over HTTP, probe,
  # alternated twice (fak only; each run also runs fak bench fleet in process first).
  step prefill
  for r in 1 2; do
    for mix in serial fill; do
      FAK=$F ENGINES=fak FAK_ARGS="--prefill $mix" FAK_BENCH_OUT=$O/fleet-http-ab/$mix-$r bench/fleet_http.sh \
        $SMOL 2 probe > $O/fleet-http-ab/$mix-$r.txt 2>&1
    done
  done
  ;;&
serve|all)
  step serve
  FAK=$F FAK_BENCH_OUT=$O/serve CONCURRENCY=8 FA_MODES=off bench/serve.sh $SMOL 2 > $O/serve.txt 2>&1
  ;;&
fleet15|all)
  step fleet15
  mkdir -p $O/fleet15
  $F bench fleet -m $Q15 -t 2 --profile probe --bandwidth $O/bandwidth.json --peak $O/peak.json \
    --json > $O/fleet15/fak.json 2> $O/fleet15/fak.err
  $PY bench/peers/llamacpp.py fleet --model $Q15 --threads 2 --profile probe --kv per-seq \
    --flash-attn off --type-kv f16 --out $O/fleet15/llamacpp-per-seq-fa-off.json > $O/fleet15/llamacpp-off.err 2>&1
  ;;
esac
step "done-${1:-all}"
