#!/usr/bin/env python3
"""Tokenizer golden files from llama.cpp (through llama-cpp-python).

For each model this loads the vocabulary only (``vocab_only``) and records
what ``fak-tokenizer`` must reproduce exactly:

* ``cases``: for every string in ``CORPUS`` the ids of
  ``llama_tokenize(vocab, text, add_special=True, parse_special=True)``
  (llama.cpp CLI behaviour: BOS only when the vocab's ``add_bos`` says so),
  the ids with ``parse_special=False`` (special-token text tokenized as
  plain text, user-defined tokens still matched), and
  ``llama_detokenize(..., remove_special=False, unparse_special=True)`` of
  the CLI ids;
* ``vocab``: n_tokens, bos/eos ids, add_bos/add_eos, the sorted list of
  end-of-generation ids (``llama_vocab_is_eog`` over the whole vocab);
* ``pieces``: ``llama_token_to_piece(special=True)`` for a sample of ids,
  plus a SHA-256 over every id's piece (``u32`` little-endian length then
  the bytes, ids in order), so the Rust side checks all 150k pieces without
  a huge file;
* ``chat``: the model's ``tokenizer.chat_template`` rendered with Jinja2 the
  way Hugging Face ``apply_chat_template`` does (sandboxed, ``trim_blocks``,
  ``lstrip_blocks``, ``raise_exception``, ``tojson`` without ASCII
  escaping) for a few conversations.

Usage::

    python3 bench/peers/gen_tokenizer_golden.py --python /tmp/peervenv/bin/python
    python3 bench/peers/gen_tokenizer_golden.py --check   # compare, write nothing

Output: ``crates/fak-tokenizer/tests/data/tokenizer-golden-{smollm2,qwen2}.json``.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import struct
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

OUT_DIR = common.ROOT / "crates" / "fak-tokenizer" / "tests" / "data"

MODELS: list[tuple[str, str]] = [
    ("smollm2", "smollm2-135m-instruct-q4_1.gguf"),
    ("qwen2", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"),
]

# (name, text). Names are stable: the Rust tests report failures by name.
CORPUS: list[tuple[str, str]] = [
    ("empty", ""),
    ("hello", "Hello, world!"),
    (
        "prose",
        "The quick brown fox jumps over the lazy dog. It was the best of times, it was the "
        "worst of times; it was the age of wisdom, it was the age of foolishness...",
    ),
    ("lead_space", " leading space"),
    ("trail_space", "trailing space "),
    ("lead_spaces", "   three leading spaces"),
    ("both_spaces", "  both ends  "),
    ("only_spaces", "     "),
    ("single_space", " "),
    ("contractions", "don't I'LL we've they're she'd it's YOU'RE I'm he'D 'tis"),
    ("contraction_start", "'s 's 'S 've're'll"),
    ("curly_quotes", "It\u2019s \u201cquoted\u201d and \u2018single\u2019 \u2014 dash \u2013 en"),
    ("numbers_short", "0 7 42 123 4567 89012"),
    ("numbers_long", "1234567890 12345678901234567890 3.14159 -273.15 1e-9 0x1F 1,000,000 2024-06-01"),
    ("digits_run", "1" * 50),
    ("number_words", "abc123def 4th 21st v2.0.1 x86_64"),
    ("tabs", "a\tb\t\tc\t \td"),
    ("newlines", "line1\nline2\n\nline4\n\n\n"),
    ("only_newlines", "\n\n\n"),
    ("ws_mix", "   \t  \n  x"),
    ("ws_mix2", "tabs\t\t\n\t\tmixed  \r\n  end"),
    ("crlf", "one\r\ntwo\r\n\r\nthree\r"),
    ("trailing_newline", "word    \n"),
    ("indent_code", "def f(x):\n    if x:\n        return 1\n    return 0\n"),
    (
        "python",
        'import os\n\nclass Foo(Base):\n    """Doc string."""\n    def __init__(self, n: int = 3) -> None:\n'
        "        self.items = [i ** 2 for i in range(n) if i % 2 == 0]\n        print(f\"{self.items!r}\")\n",
    ),
    (
        "rust",
        "fn main() {\n    let v: Vec<u32> = (0..10).map(|x| x * x).collect();\n"
        '    println!("{:?} {}", v, v.iter().sum::<u32>());\n}\n',
    ),
    (
        "javascript",
        "const add = (a, b) => a + b;\nexport default async function run() {\n"
        "  await fetch('/api?id=42&q=x').then(r => r.json()); // comment\n}\n",
    ),
    (
        "c_code",
        "#include <stdio.h>\nint main(void) {\n\tfor (int i = 0; i < 10; ++i) printf(\"%d\\n\", i);\n\treturn 0;\n}\n",
    ),
    ("sql", "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%son' ORDER BY id DESC;"),
    ("html", '<div class="box"><a href="https://example.com/path?q=1&amp;x=y#frag">link</a></div>'),
    ("shell", "for f in *.txt; do echo \"$f\" | tr 'a-z' 'A-Z' >> out.log 2>&1; done"),
    ("json", '{"name": "fak", "version": [0, 1, 0], "ok": true, "nested": {"k": null}}'),
    ("markdown", "# Title\n\n* item one\n* item two\n\n> quote\n\n```\ncode\n```\n"),
    ("url_email", "Visit https://www.example.org/a/b_c-d.html or mail user.name+tag@example.co.uk"),
    ("chinese", "北京是中国的首都，也是一座历史悠久的城市。我们今天去故宫参观。"),
    ("japanese", "東京は日本の首都です。ひらがなとカタカナ、そして漢字を使います。"),
    ("korean", "안녕하세요. 서울은 한국의 수도입니다."),
    ("arabic", "مرحبا بالعالم. اللغة العربية جميلة ١٢٣"),
    ("hindi", "नमस्ते दुनिया। हिंदी भाषा देवनागरी लिपि में लिखी जाती है।"),
    ("cyrillic", "Привет, мир! Москва — столица России. Ёлка и ЁЖ."),
    ("greek_thai_hebrew", "Καλημέρα κόσμε. สวัสดีครับ שלום עולם"),
    ("emoji", "Great job 👍🏽! 😀😃😄 ok ❤️ ✨"),
    ("emoji_zwj", "family 👨\u200d👩\u200d👧\u200d👦 and 🏳️\u200d🌈 and 👩🏾\u200d💻"),
    ("emoji_flags", "🇯🇵🇫🇷🇺🇸 flags 🏴\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f"),
    ("accented", "Café naïve résumé façade Ångström Zürich São Paulo Øresund ŁÓDŹ"),
    ("combining", "e\u0301 a\u0300 n\u0303 decomposed cafe\u0301"),
    ("mixed_scripts", "English 中文 русский العربية 123 🎉 日本語abcДе"),
    ("math", "∑ x² ≤ ∞ ≠ π ≈ 3.14 √2 ∂f/∂x ½ ⅞ Ⅻ"),
    ("unicode_digits", "٣ ৩ ௩ ３ ¹²³ ①②"),
    ("unicode_spaces", "a\u00a0b\u2003c\u3000d\u202fe \u2028f\u0085g"),
    ("zero_width", "\u200bzero\u200cwidth\u200djoiners\ufeffbom"),
    ("controls", "bell\x07 nul\x00 del\x7f esc\x1b[0m unit\x1f"),
    ("private_unassigned", "pua \ue000\uf8ff unassigned \u0378\u0379 end"),
    ("long_word", "a" * 200),
    ("long_symbols", "=" * 80 + "\n" + "-" * 40),
    ("repeated_words", "the the the the the the the the the the"),
    ("chat_full", "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"),
    ("special_alone", "<|endoftext|>"),
    ("special_inline", "text<|im_end|>more text<|im_start|> spaced <|im_end|>\n"),
    ("special_adjacent", "<|im_start|><|im_end|><|im_start|><|endoftext|>"),
    ("special_partial", "<|im_start <|im_end| |im_end|> <|im_sta rt|>"),
    ("tool_call", "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>"),
    ("fim", "<|fim_prefix|>def f():\n<|fim_suffix|>\n    return 1<|fim_middle|>"),
    ("smol_specials", "<reponame>fak<file_sep>main.rs<filename>x<jupyter_code>print(1)"),
    ("pad_token_text", "[PAD151665] and [PAD151700]"),
    ("eog_named_text", "end</s>tail <|end|> <end_of_turn>"),
]

N_PIECE_SAMPLE = 300

# Seeded random strings over a pool of characters that exercise every
# pre-tokenizer branch (contractions, digit runs, whitespace kinds, letter /
# mark / symbol / unassigned codepoints, special-token fragments).
RANDOM_SEED = 20240601
N_RANDOM = 300
RANDOM_POOL: list[str] = (
    list("aZk'sStTlLdDmMrReEvV") + list("0123456789") + [" ", " ", " ", "\t", "\n", "\r", "\v", "\f"]
    + list(".,;:!?-_()[]{}<>|/\\\"#$%&*+=~^`@")
    + ["\u00a0", "\u2003", "\u3000", "\u0085", "\u200b", "\u00e9", "\u0301", "\u0928", "\u093f",
       "\u4e2d", "\u6587", "\u3042", "\uac00", "\u0416", "\u0661", "\u00bd", "\u2162", "\u20ac",
       "\U0001f642", "\U0001f468", "\u200d", "\U0001f1ef", "\ufe0f", "\u0378", "\ue000", "\x00", "\x1f"]
    + ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "</s>", "<tool_call>", "<|", "|>", "'ll", "'re", " '"]
)


def random_corpus() -> list[tuple[str, str]]:
    import random  # noqa: PLC0415

    rng = random.Random(RANDOM_SEED)
    out = []
    for i in range(N_RANDOM):
        n = rng.randint(1, 24)
        out.append((f"random_{i:03}", "".join(rng.choice(RANDOM_POOL) for _ in range(n))))
    return out


def tokenize(L: Any, vocab: Any, text: str, parse_special: bool) -> list[int]:
    b = text.encode("utf-8")
    cap = len(b) + 16
    arr = (L.llama_token * cap)()
    n = L.llama_tokenize(vocab, b, len(b), arr, cap, True, parse_special)
    if n < 0:
        raise common.PeerError(f"llama_tokenize needs {-n} tokens, buffer had {cap}")
    return [int(x) for x in arr[:n]]


def piece(L: Any, vocab: Any, tok: int) -> bytes:
    buf = (ctypes.c_char * 512)()
    n = L.llama_token_to_piece(vocab, tok, buf, len(buf), 0, True)
    if n < 0:
        raise common.PeerError(f"token {tok}: piece longer than {len(buf)} bytes")
    return bytes(buf[:n])


def detokenize(L: Any, vocab: Any, ids: list[int]) -> bytes:
    arr = (L.llama_token * max(1, len(ids)))(*ids)
    cap = 64 + 64 * len(ids)
    buf = (ctypes.c_char * cap)()
    n = L.llama_detokenize(vocab, arr, len(ids), buf, cap, False, True)
    if n < 0:
        raise common.PeerError(f"llama_detokenize needs {-n} bytes, buffer had {cap}")
    return bytes(buf[:n])


def opt_id(x: int) -> int | None:
    return None if x < 0 else int(x)


# --------------------------------------------------------------------------
# Chat templates, rendered like transformers' apply_chat_template
# --------------------------------------------------------------------------

CONVERSATIONS: list[tuple[str, list[dict[str, str]], bool]] = [
    (
        "system_user_gen",
        [{"role": "system", "content": "You are a terse assistant."}, {"role": "user", "content": "hi"}],
        True,
    ),
    ("user_only_gen", [{"role": "user", "content": "What is 2+2?"}], True),
    (
        "multi_turn_nogen",
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Name a color."},
            {"role": "assistant", "content": "Blue."},
            {"role": "user", "content": "Another, with unicode: café 北京 🙂"},
        ],
        False,
    ),
    (
        "multi_turn_gen",
        [
            {"role": "user", "content": "  padded  "},
            {"role": "assistant", "content": "ok\nline two"},
            {"role": "user", "content": "bye"},
        ],
        True,
    ),
]


def render_chat(template: str, bos: str, eos: str) -> list[dict[str, Any]]:
    import jinja2  # noqa: PLC0415
    from jinja2.sandbox import ImmutableSandboxedEnvironment  # noqa: PLC0415

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None, sort_keys: bool = False) -> str:
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    tmpl = env.from_string(template)
    out = []
    for name, messages, gen in CONVERSATIONS:
        text = tmpl.render(
            messages=messages,
            add_generation_prompt=gen,
            bos_token=bos,
            eos_token=eos,
            tools=None,
        )
        out.append({"name": name, "messages": messages, "add_generation_prompt": gen, "rendered": text})
    return out


# --------------------------------------------------------------------------


def run_model(L: Any, short: str, model_file: str) -> dict[str, Any]:
    path = common.MODELS / model_file
    if not path.exists():
        raise common.PeerError(f"{path} is missing: run scripts/fetch-models.sh")
    mp = L.llama_model_default_params()
    mp.vocab_only = True
    model = L.llama_model_load_from_file(str(path).encode(), mp)
    if not model:
        raise common.PeerError(f"llama_model_load_from_file({path}) failed")
    try:
        vocab = L.llama_model_get_vocab(model)
        n = int(L.llama_vocab_n_tokens(vocab))
        eog = [i for i in range(n) if L.llama_vocab_is_eog(vocab, i)]

        h = hashlib.sha256()
        pieces: dict[int, bytes] = {}
        for i in range(n):
            p = piece(L, vocab, i)
            h.update(struct.pack("<I", len(p)))
            h.update(p)
            pieces[i] = p
        sample_ids = sorted(
            set(range(min(N_PIECE_SAMPLE, n)))
            | set(range(max(0, n - 300), n))
            | {i for i in range(n) if L.llama_vocab_is_control(vocab, i)}
            | set(eog)
        )
        piece_sample = [{"id": i, "hex": pieces[i].hex()} for i in sample_ids]

        cases = []
        for name, text in CORPUS + random_corpus():
            ids = tokenize(L, vocab, text, True)
            plain = tokenize(L, vocab, text, False)
            detok = detokenize(L, vocab, ids)
            cases.append(
                {
                    "name": name,
                    "text": text,
                    "ids": ids,
                    "ids_plain": plain,
                    "detok_hex": detok.hex(),
                }
            )

        g = common.read_gguf(path)
        toks = g.get("tokenizer.ggml.tokens")
        template = g.get("tokenizer.chat_template")
        bos_id = opt_id(L.llama_vocab_bos(vocab))
        eos_id = opt_id(L.llama_vocab_eos(vocab))
        bos_text = toks[bos_id] if bos_id is not None else ""
        eos_text = toks[eos_id] if eos_id is not None else ""
        chat = render_chat(template, bos_text, eos_text) if template else []

        return {
            "generator": "bench/peers/gen_tokenizer_golden.py",
            "peer": common.PEER,
            "model": model_file,
            "model_sha256": common.sha256_file(path),
            "vocab": {
                "n_tokens": n,
                "bos": bos_id,
                "eos": eos_id,
                "add_bos": bool(L.llama_vocab_get_add_bos(vocab)),
                "add_eos": bool(L.llama_vocab_get_add_eos(vocab)),
                "eog": eog,
            },
            "pieces_sha256": h.hexdigest(),
            "piece_sample": piece_sample,
            "cases": cases,
            "chat": chat,
        }
    finally:
        L.llama_model_free(model)


def main() -> int:
    common.ensure_peer_python()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare with the files on disk, write nothing")
    ap.add_argument("--out-dir", type=Path, default=OUT_DIR)
    args = ap.parse_args()

    L = common.llama_init()
    names = [n for n, _ in CORPUS]
    if len(set(names)) != len(names):
        raise common.PeerError("duplicate case names in CORPUS")
    failed = False
    for short, model_file in MODELS:
        data = run_model(L, short, model_file)
        text = json.dumps(data, ensure_ascii=False, indent=1) + "\n"
        out = args.out_dir / f"tokenizer-golden-{short}.json"
        if args.check:
            old = out.read_text(encoding="utf-8") if out.exists() else ""
            same = old == text
            failed |= not same
            print(f"{common.rel(out)}: {'same' if same else 'DIFFERENT'}")
        else:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(text, encoding="utf-8")
            print(f"wrote {common.rel(out)} ({len(data['cases'])} cases, {len(data['chat'])} chats)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
