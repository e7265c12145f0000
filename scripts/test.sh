#!/usr/bin/env bash
# The test command: fetch the models and llama.cpp's vocab test files if
# absent, then run the whole suite (the Rust workspace, the thread pool's
# loom model check, the benchmark scripts' unit tests, then the official
# `openai` Python client against `fak serve`, in a venv it creates).
#   scripts/test.sh            # extra args go to cargo test
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/fetch-models.sh
scripts/fetch-vocabs.sh
# One test at a time within each test binary (unless the caller sets it):
# most tests run a model on a 2-thread pool, and two such tests side by
# side on a 2-core machine contend for the cores. Before the pool's spin
# adapted to contention they spun against each other: fak-model's goldens took
# 111-233 s two at a time vs 31 s one at a time (AMD Zen 3;
# docs/PERFORMANCE.md, "More threads than cores").
export RUST_TEST_THREADS="${RUST_TEST_THREADS:-1}"
cargo test --workspace --release "$@"
# Model check of the thread pool's handshake with loom (fak-kernels' `pool`
# module docs): a build with `--cfg loom`, in its own target directory so it
# leaves the normal build's cache alone.
RUSTFLAGS="${RUSTFLAGS:-} --cfg loom" CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}/loom" \
    cargo test --release -p fak-kernels --lib pool::loom_tests
python3 -m unittest discover -s bench -p 'test_*.py'
scripts/test-openai.sh
