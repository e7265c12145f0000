#!/usr/bin/env bash
# Plain against prompt-lookup speculative decoding on a copy-a-file prompt
# (copy_prompt.txt: 40 lines of crates/fak-engine/src/spec.rs, then the
# start of a copy), alternated three times; the ids' SHA-256 must match.
set -euo pipefail
here=docs/results/2026-12-04-xeon-spec
for i in 1 2 3; do
  for m in off lookup; do
    target/release/fak generate --model models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf \
      --prompt-file "$here/copy_prompt.txt" -n 200 --ignore-eos --threads 2 \
      --speculative "$m" --json >"$here/$m.json"
    python3 -c "import json,hashlib,sys; v=json.load(open(sys.argv[1])); print(sys.argv[2], len(v['generated_ids']), hashlib.sha256(str(v['generated_ids']).encode()).hexdigest()[:12])" "$here/$m.json" "$m"
  done
done
