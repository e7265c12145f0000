#!/usr/bin/env bash
# The test command: fetch the models and llama.cpp's vocab test files if
# absent, then run the whole suite
# (the Rust workspace, the benchmark scripts' unit tests, then the official
# `openai` Python client against `fak serve`, in a venv it creates).
#   scripts/test.sh            # extra args go to cargo test
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/fetch-models.sh
scripts/fetch-vocabs.sh
cargo test --workspace --release "$@"
python3 -m unittest discover -s bench -p 'test_*.py'
scripts/test-openai.sh
