#!/usr/bin/env bash
# Speculative decoding, fak (off / lookup / auto / draft, Predicted Outputs)
# against llama-server (plain, ngram-simple, ngram-mod, -md), alternated in one
# run: bench/spec.py's docstring says what runs.
#   bench/spec.sh --model models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf --reps 3 --out report.json
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
[[ -x target/release/fak ]] || cargo build --release -q -p fak-cli
[[ -x bench/.venv/llama.cpp-build/bin/llama-server ]] || FAK_LLAMA_TARGETS=llama-server bench/peers/build-server.sh
exec python3 bench/spec.py "$@"
