"""``fak export-tokenizer`` against the real Hugging Face ``tokenizers``
package (pinned in requirements.txt).

Each model present is exported to a temporary directory and its
``tokenizer.json`` loaded with ``tokenizers.Tokenizer.from_file``; the ids
must equal fak's, special tokens parsed, with ``add_special_tokens`` true
(BOS/EOS as the GGUF says) and false. The texts are the corpora of
``crates/fak-tokenizer/tests/data/`` (tokenizer-golden-*.json and
vocab-golden-*.json: the same 365 cases, prose, code, whitespace runs,
Unicode classes, special-token text, NUL bytes), and runs of spaces, tabs
and newlines of every length up to 40.

* Models with weights (SmolLM2, Qwen2.5-Coder, Gemma 3) run under ``fak
  serve``: ``/tokenize`` gives fak's ids for each text, ``/detokenize`` its
  text for them (equal to HF's ``decode``), and
  ``/v1/chat/completions/render`` the ids of chat prompts rendered with the
  GGUF's template: HF decodes them to the rendered text (the golden
  rendering where one exists) and encodes that text back to the same ids.
* llama.cpp's vocab-only GGUFs (``scripts/fetch-vocabs.sh``) have no
  weights to serve: ``fak tokenize`` runs once on all texts joined by a
  special token none of them holds. fak cuts special tokens out before
  anything else, so each text between two is tokenized on its own: the
  joined ids equal HF's for the joined text, and each text's slice equals
  HF's for that text. Texts with a NUL byte cannot be an argument; they are
  checked against the golden ids (llama.cpp's, which fak's own tests
  match). HF's decode gives each plain text back.
* Phi-3's vocabulary is refused with one line (its special tokens strip the
  whitespace after them, which HF does for Unicode whitespace and fak for
  ASCII whitespace only).
* ``tokenizer_config.json`` holds the GGUF's chat template verbatim and its
  context length (read from the file here, not through fak).

Run with ``scripts/test-openai.sh``; a model that is absent is skipped.
"""

from __future__ import annotations

import json
import struct
import subprocess
import tempfile
import unittest
import urllib.request
from pathlib import Path

from tokenizers import Tokenizer

from test_openai_client import FAK, ROOT, FakServer

DATA = ROOT / "crates" / "fak-tokenizer" / "tests" / "data"
MODELS = ROOT / "models"
VOCABS = MODELS / "llama-vocab"


def corpus() -> list[str]:
    """Every case text of the golden corpora, once, in file order."""
    seen: dict[str, None] = {}
    for f in sorted(DATA.glob("*-golden-*.json")):
        for case in json.loads(f.read_text())["cases"]:
            seen.setdefault(case["text"], None)
    return list(seen)


def runs() -> list[str]:
    """Runs of spaces, tabs and newlines of every length up to 40 between
    words: code indentation, and the run tokens of SentencePiece vocabs
    (llama's "▁▁"..., Gemma's user-defined "\t\t"...)."""
    around = [("", ""), ("x", "y"), ("a.", "the"), ("\n", "def")]
    out = [left + " " * n + right for n in range(1, 41) for left, right in around]
    out += [f"x{c * n}y" for n in range(1, 41) for c in ("\t", "\n")]
    return out


TEXTS = corpus() + runs()

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}

# Conversations rendered by /v1/chat/completions/render besides the golden
# ones: code, tools, a tool round trip.
CHATS = [
    {"messages": [
        {"role": "system", "content": "You write Python."},
        {"role": "user", "content": "def add(a, b):\n    return a + b\n\n# test it\tplease  "},
    ]},
    {"messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": [WEATHER_TOOL]},
    {"messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp_c\": 21}"},
    ], "tools": [WEATHER_TOOL]},
]


def gguf_metadata(path: Path) -> dict:
    """A GGUF file's scalar and string metadata (arrays skipped), read here
    rather than through fak so the check does not trust fak's reader."""
    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
    with path.open("rb") as f:
        data = f.read(64 << 20)
    pos = 0

    def take(fmt: str):
        nonlocal pos
        (v,) = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return v

    def string() -> str:
        nonlocal pos
        n = take("Q")
        pos += n
        return data[pos - n: pos].decode("utf-8", "replace")

    def value(t: int):
        nonlocal pos
        if t == 8:
            return string()
        if t == 9:
            item, n = take("I"), take("Q")
            for _ in range(n):
                value(item)
            return None
        return take(scalar[t])

    assert data[:4] == b"GGUF", path
    pos = 8
    _, n_kv = take("Q"), take("Q")
    meta = {}
    for _ in range(n_kv):
        key = string()
        meta[key] = value(take("I"))
    return meta


def post(base: str, path: str, body: dict):
    req = urllib.request.Request(
        base + path, data=json.dumps(body).encode(), headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.load(r)


def fak(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(FAK), *args], capture_output=True, text=True, timeout=120)


class TestExportTokenizer(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not FAK.exists():
            raise unittest.SkipTest(f"{FAK} not built (cargo build --release -p fak-cli)")
        cls.tmp = tempfile.TemporaryDirectory()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    # ------------------------------------------------------------ helpers

    def model(self, path: Path) -> Path:
        if not path.exists():
            self.skipTest(f"{path} missing (scripts/fetch-models.sh, scripts/fetch-vocabs.sh)")
        return path

    def export(self, model: Path) -> tuple[Tokenizer, dict, dict]:
        """Exports `model`; its tokenizer, tokenizer_config.json and summary."""
        out = Path(self.tmp.name) / model.stem
        r = fak("export-tokenizer", str(model), str(out), "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        summary = json.loads(r.stdout)
        tok = Tokenizer.from_file(str(out / "tokenizer.json"))
        config = json.loads((out / "tokenizer_config.json").read_text())
        self.assertEqual(tok.get_vocab_size(with_added_tokens=True), summary["n_vocab"])
        meta = gguf_metadata(model)
        self.assertEqual(config.get("chat_template"), meta.get("tokenizer.chat_template"))
        arch = meta["general.architecture"]
        self.assertEqual(config.get("model_max_length"), meta.get(f"{arch}.context_length"))
        self.assertEqual(config["add_bos_token"], summary["add_bos"])
        return tok, config, summary

    def assert_ids(self, tok: Tokenizer, text: str, want: list[int], add: bool) -> None:
        got = tok.encode(text, add_special_tokens=add).ids
        self.assertEqual(got, want, f"add_special_tokens={add} on {text!r}")

    # ------------------------------------------------------ served models

    def check_served(self, model: Path, golden: str | None) -> None:
        tok, config, _ = self.export(self.model(model))
        server = FakServer(model=model).start()
        try:
            base = server.base_url
            for text in TEXTS:
                with_special = post(base, "/tokenize", {"content": text, "add_special": True})["tokens"]
                plain = post(base, "/tokenize", {"content": text, "add_special": False})["tokens"]
                self.assert_ids(tok, text, with_special, True)
                self.assert_ids(tok, text, plain, False)
                fak_text = post(base, "/detokenize", {"tokens": with_special})["content"]
                self.assertEqual(tok.decode(with_special, skip_special_tokens=False), fak_text, repr(text))
            if "chat_template" not in config:
                return
            chats = [dict(c) for c in CHATS if "tools" in config["chat_template"] or "tools" not in c]
            rendered = {}
            if golden:
                for c in json.loads((DATA / golden).read_text())["chat"]:
                    chats.append({"messages": c["messages"]})
                    if c["add_generation_prompt"]:
                        rendered[len(chats) - 1] = c["rendered"]
            for i, chat in enumerate(chats):
                ids = post(base, "/v1/chat/completions/render", chat)["token_ids"]
                text = tok.decode(ids, skip_special_tokens=False)
                if i in rendered:
                    self.assertEqual(text, rendered[i])
                self.assert_ids(tok, text, ids, True)
                fak_ids = post(base, "/tokenize", {"content": text})["tokens"]
                self.assertEqual(fak_ids, ids, "the decoded prompt is the rendered one")
        finally:
            server.stop()
            server.log.close()

    def test_smollm2(self):
        self.check_served(MODELS / "smollm2-135m-instruct-q8_0.gguf", "tokenizer-golden-smollm2.json")

    def test_qwen2_5_coder(self):
        self.check_served(MODELS / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "tokenizer-golden-qwen2.json")

    def test_gemma3(self):
        self.check_served(MODELS / "gemma-3-270m-q4_k_m.gguf", None)

    # -------------------------------------------------- vocab-only files

    def check_vocab_only(self, model: Path, golden: str) -> None:
        tok, config, summary = self.export(self.model(model))
        added = {int(k): v for k, v in config["added_tokens_decoder"].items()}
        ends = (config.get("bos_token"), config.get("eos_token"))
        sep_id, sep = max(
            ((i, a["content"]) for i, a in added.items()
             if a["special"] and a["content"] not in ends and not any(a["content"] in t for t in TEXTS)),
            key=lambda s: len(s[1]),
        )
        texts = [t for t in TEXTS if "\0" not in t]
        joined = sep.join(texts)
        r = fak("tokenize", "--model", str(model), "--json", "--", joined)
        self.assertEqual(r.returncode, 0, r.stderr)
        ids = json.loads(r.stdout)["ids"]
        self.assert_ids(tok, joined, ids, True)
        bos = [tok.token_to_id(config["bos_token"])] if summary["add_bos"] else []
        eos = [tok.token_to_id(config["eos_token"])] if summary["add_eos"] else []
        self.assertEqual(ids[: len(bos)], bos)
        body = ids[len(bos): len(ids) - len(eos)]
        parts: list[list[int]] = [[]]
        for i in body:
            if i == sep_id:
                parts.append([])
            else:
                parts[-1].append(i)
        self.assertEqual(len(parts), len(texts))
        for text, part in zip(texts, parts):
            self.assert_ids(tok, text, part, False)
            self.assert_ids(tok, text, bos + part + eos, True)
        cases = json.loads((DATA / golden).read_text())["cases"]
        for case in cases:
            self.assert_ids(tok, case["text"], case["ids"], True)
        self.assertTrue(any("\0" in c["text"] for c in cases))
        spm = summary["family"] == "spm"
        for text in TEXTS:
            if any(a["content"] in text for a in added.values()) or (spm and "\u2581" in text):
                continue
            ids = tok.encode(text, add_special_tokens=False).ids
            self.assertEqual(tok.decode(ids, skip_special_tokens=False), text)

    def test_llama_spm(self):
        self.check_vocab_only(VOCABS / "ggml-vocab-llama-spm.gguf", "vocab-golden-llama-spm.json")

    def test_llama_bpe(self):
        self.check_vocab_only(VOCABS / "ggml-vocab-llama-bpe.gguf", "vocab-golden-llama-bpe.json")

    def test_phi3_is_refused_in_one_line(self):
        model = self.model(VOCABS / "ggml-vocab-phi-3.gguf")
        out = Path(self.tmp.name) / "phi-3"
        r = fak("export-tokenizer", str(model), str(out))
        self.assertNotEqual(r.returncode, 0)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertIn("cannot export", r.stderr)
        self.assertIn("whitespace", r.stderr)
        self.assertFalse(out.exists(), "nothing is written")


if __name__ == "__main__":
    unittest.main()
