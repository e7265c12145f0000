#!/usr/bin/env bash
# Measurements on an AMD EPYC Zen 4, each piece run with the machine otherwise idle.
# The files these commands wrote are kept in this folder: the ones a page names
# as they were written, the rest as keys of runs.json (a subfolder's as
# folder/file); python3 bench/unbundle.py FOLDER writes those back as files.
set -u
cd .
LB=bench/.venv/llama.cpp-build/bin/llama-bench
export PATH=bench/.venv/bin:$PATH
O=$TMPDIR/zen4; mkdir -p $O
date -u > $O/start.txt
target/release/fak inspect --system > $O/system.txt
target/release/fak bench bandwidth --json > $O/bandwidth.json
for m in qwen2.5-coder-1.5b-instruct-q4_k_m qwen2.5-coder-0.5b-instruct-q4_k_m smollm2-135m-instruct-q8_0; do
  python3 bench/single_pairs.py models/$m.gguf --threads 2 --pairs 3 --fak target/release/fak --llama-bench $LB --out $O/models/$m > $O/models-$m.txt 2>&1
done
echo "models done $(date -u)" >> $O/start.txt
FAK_BENCH_OUT=$O/fleet bench/fleet.sh models/smollm2-135m-instruct-q8_0.gguf 2 probe > $O/fleet-probe.txt 2>&1
echo "fleet done $(date -u)" >> $O/start.txt
mkdir -p $O/fleet15
target/release/fak bench fleet -m models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf -t 2 --profile probe --json > $O/fleet15/fak.json 2> $O/fleet15/fak.err
python3 bench/peers/llamacpp.py fleet --model models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf --threads 2 --profile probe --kv per-seq --flash-attn off --type-kv f16 --out $O/fleet15/llamacpp-per-seq-fa-off.json > $O/fleet15/llamacpp.err 2>&1
python3 bench/compare.py fleet $O/fleet15/fak.json $O/fleet15/llamacpp-per-seq-fa-off.json > $O/fleet15/compare.txt 2>&1
echo "fleet15 done $(date -u)" >> $O/start.txt
FAK_BENCH_OUT=$O/serve CONCURRENCY="8 32" FA_MODES="off" bench/serve.sh models/smollm2-135m-instruct-q8_0.gguf 2 > $O/serve.txt 2>&1
echo "all done $(date -u)" >> $O/start.txt
