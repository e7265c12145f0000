#!/usr/bin/env bash
# Codex CLI and Claude Code, as released on npm, against `fak serve` and
# against llama-server on a few small coding tasks (bench/harness.py).
#
#   bench/harness.sh MODEL [harness.py flags]
#   bench/harness.sh models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf --json out.json
#   bench/harness.sh --smoke            # Codex `exec` once against fak serve (CI)
#
# Installs the pinned harnesses into bench/.harness (git-ignored; npm,
# first use only), builds target/release/fak, and, unless --engines leaves
# it out, llama-server (bench/peers/build-server.sh, several minutes the
# first time). The report (JSON) goes to stdout; progress to stderr.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
CODEX_VERSION=0.169.0
CLAUDE_VERSION=2.1.332
dir=bench/.harness
bin="$dir/node_modules/.bin"

want="codex:$CODEX_VERSION claude:$CLAUDE_VERSION"
if [[ "$(cat "$dir/.versions" 2>/dev/null || true)" != "$want" ]]; then
    mkdir -p "$dir"
    echo "harness: installing @openai/codex@$CODEX_VERSION and @anthropic-ai/claude-code@$CLAUDE_VERSION" >&2
    npm install --prefix "$dir" --no-audit --no-fund --loglevel=error \
        "@openai/codex@$CODEX_VERSION" "@anthropic-ai/claude-code@$CLAUDE_VERSION" >&2
    echo "$want" >"$dir/.versions"
fi
cargo build --release -q -p fak-cli

if [[ "${1:-}" == "--smoke" ]]; then
    # Codex `exec` against fak serve: one short answer, zero protocol errors.
    scripts/fetch-models.sh
    exec python3 bench/harness.py --smoke --bin "$bin"
fi

[[ $# -ge 1 ]] || { echo "usage: bench/harness.sh MODEL [flags] | --smoke" >&2; exit 2; }
model="$1"; shift
if [[ " $* " != *" --engines fak "* ]]; then
    export LLAMA_SERVER="${LLAMA_SERVER:-$(FAK_LLAMA_TARGETS=llama-server bench/peers/build-server.sh)}"
fi
exec python3 bench/harness.py --model "$model" --bin "$bin" "$@"
