#!/usr/bin/env bash
# The agent-harness runs behind docs/SERVING.md, "Agent harnesses", from
# the repository root. Each writes its report next to this file.
set -euo pipefail
here=docs/results/2026-12-04-xeon-harness
case "${1:-all}" in
  q05|all)
    bench/harness.sh models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf --tasks create,fix \
      --timeout 400 --json "$here/harness-qwen0.5b.json" --dump $TMPDIR/harness-dump05 ;;&
  q15|all)
    scripts/fetch-models.sh --agent
    bench/harness.sh models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf --tasks create,fix,rename \
      --timeout 480 --json "$here/harness-qwen1.5b.json" --dump $TMPDIR/harness-dump15 ;;&
  billing|all)
    # Claude Code's billing line: two runs replayed with and without it.
    python3 bench/billing_replay.py --model models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf \
      --dump $TMPDIR/harness-dump05/fak-claude-create $TMPDIR/harness-dump05/fak-claude-fix \
      --json "$here/billing-cross-project.json"
    # Two Claude Code sessions of one project (same directory), recorded then replayed.
    python3 bench/billing_replay.py --model models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf \
      --record $TMPDIR/harness-billing --json "$here/billing-same-project.json" ;;
esac
