"""The official ``openai`` Python client against ``fak serve``.

Starts ``target/release/fak serve --model models/smollm2-135m-instruct-q8_0.gguf
--threads 2`` on a free port of 127.0.0.1 (waiting for ``GET /health`` = 200,
up to 60 s), then drives it with ``openai.OpenAI(base_url=.../v1)``:

* chat, non-streamed: content, finish_reason, usage;
* chat, streamed: the first delta carries the role, the concatenated content
  equals the non-streamed greedy text of the same request, and with
  ``stream_options={"include_usage": True}`` the last chunk carries usage
  equal to the non-streamed usage;
* completions, non-streamed and streamed (same text both ways);
* Predicted Outputs (``prediction``): the same answer with the answer itself,
  an edited copy or text parts as the prediction, usage's
  ``accepted_prediction_tokens``; ``speculative: false`` opts out;
* ``models.list()`` lists the served model (the model file's stem);
* an unknown model is a 404 (``openai.NotFoundError``);
* a server started with ``--api-key k1``: a wrong key raises
  ``openai.AuthenticationError``, the right key works.

Run it with ``scripts/test-openai.sh`` (which makes the venv with the pinned
client), or directly:

    tests/openai/.venv/bin/python -m unittest discover -s tests/openai -v

Environment: ``FAK_BIN`` (default ``target/release/fak``), ``FAK_TEST_MODEL``
(default ``models/smollm2-135m-instruct-q8_0.gguf``),
``FAK_TEST_SERVED_NAME`` (default: the model file's stem, fak's default
served name), ``FAK_TEST_THREADS`` (default 2).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.error
import urllib.request
from pathlib import Path

import openai
from openai import OpenAI

ROOT = Path(__file__).resolve().parents[2]
FAK = Path(os.environ.get("FAK_BIN", ROOT / "target" / "release" / "fak"))
MODEL = Path(os.environ.get("FAK_TEST_MODEL", ROOT / "models" / "smollm2-135m-instruct-q8_0.gguf"))
SERVED_NAME = os.environ.get("FAK_TEST_SERVED_NAME", MODEL.stem)
THREADS = os.environ.get("FAK_TEST_THREADS", "2")
HEALTH_TIMEOUT_S = 60.0

CHAT = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What is the capital of France? Answer in one sentence."},
]
PROMPT = "The capital of France is"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class FakServer:
    """``fak serve`` as a subprocess on a free port; stopped with SIGTERM."""

    def __init__(self, *extra: str, model: Path = MODEL) -> None:
        self.extra = list(extra)
        self.model = model
        self.proc: subprocess.Popen | None = None
        self.log = tempfile.TemporaryFile()
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_tail(self, n: int = 4000) -> str:
        self.log.seek(0)
        return self.log.read().decode("utf-8", "replace")[-n:]

    def start(self) -> "FakServer":
        if not FAK.exists():
            raise unittest.SkipTest(f"{FAK} not built (cargo build --release -p fak-cli)")
        if not self.model.exists():
            raise unittest.SkipTest(f"{self.model} missing (scripts/fetch-models.sh)")
        # The port may be taken between free_port() and bind: retry a few times.
        for attempt in range(3):
            self.port = free_port()
            cmd = [str(FAK), "serve", "--model", str(self.model), "--host", "127.0.0.1",
                   "--port", str(self.port), "--threads", THREADS, *self.extra]
            self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            if self.wait_healthy():
                return self
            if self.proc.poll() is None or attempt == 2:
                break
        self.stop()
        raise AssertionError(f"fak serve did not become healthy within {HEALTH_TIMEOUT_S:.0f} s:\n{self.log_tail()}")

    def wait_healthy(self) -> bool:
        """True once GET /health is 200; False if the process exits or time runs out."""
        deadline = time.monotonic() + HEALTH_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(self.base_url + "/health", timeout=2) as r:
                    if r.status == 200:
                        return True
            except (urllib.error.URLError, OSError):
                pass  # refused while binding, or 503 while loading
            time.sleep(0.1)
        return False

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def client(server: FakServer, key: str = "unused") -> OpenAI:
    # No retries: a failure must show up as it is, not be retried away.
    return OpenAI(base_url=server.base_url + "/v1", api_key=key, max_retries=0, timeout=120)


class TestOpenAIClient(unittest.TestCase):
    """One server without API keys for every test of the class."""

    @classmethod
    def setUpClass(cls):
        cls.server = FakServer().start()
        cls.client = client(cls.server)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def chat(self, **kw):
        return self.client.chat.completions.create(
            model=SERVED_NAME, messages=CHAT, max_tokens=24, temperature=0, **kw
        )

    def complete(self, **kw):
        return self.client.completions.create(model=SERVED_NAME, prompt=PROMPT, max_tokens=12, temperature=0, **kw)

    def test_models_list(self):
        ids = [m.id for m in self.client.models.list()]
        self.assertIn(SERVED_NAME, ids)

    def test_chat_non_stream(self):
        r = self.chat()
        self.assertEqual(len(r.choices), 1)
        c = r.choices[0]
        self.assertEqual(c.message.role, "assistant")
        self.assertIsInstance(c.message.content, str)
        self.assertTrue(c.message.content, "empty content")
        self.assertIn(c.finish_reason, ("stop", "length"))
        self.assertGreater(r.usage.prompt_tokens, 0)
        self.assertGreater(r.usage.completion_tokens, 0)
        self.assertLessEqual(r.usage.completion_tokens, 24)
        if c.finish_reason == "length":
            self.assertEqual(r.usage.completion_tokens, 24)
        self.assertEqual(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens)

    def test_chat_greedy_is_repeatable(self):
        self.assertEqual(self.chat().choices[0].message.content, self.chat().choices[0].message.content)

    def test_chat_stream_matches_non_stream(self):
        full = self.chat()
        chunks = list(self.chat(stream=True, stream_options={"include_usage": True}))
        self.assertTrue(chunks, "no chunks")
        with_choices = [ch for ch in chunks if ch.choices]
        self.assertTrue(with_choices, "no chunk carries a choice")
        self.assertEqual(with_choices[0].choices[0].delta.role, "assistant", "first delta must carry the role")
        text = "".join(ch.choices[0].delta.content or "" for ch in with_choices)
        self.assertEqual(text, full.choices[0].message.content)
        finish = [ch.choices[0].finish_reason for ch in with_choices if ch.choices[0].finish_reason]
        self.assertEqual(finish, [full.choices[0].finish_reason])
        last = chunks[-1]
        self.assertIsNotNone(last.usage, "with include_usage the last chunk carries usage")
        self.assertEqual(last.choices, [])
        self.assertEqual(last.usage.prompt_tokens, full.usage.prompt_tokens)
        self.assertEqual(last.usage.completion_tokens, full.usage.completion_tokens)
        for ch in chunks[:-1]:
            self.assertIsNone(ch.usage, "only the last chunk carries usage")

    def test_predicted_outputs_keep_the_answer(self):
        # OpenAI's Predicted Outputs: the prediction drafts tokens that
        # verification keeps only where the model writes them itself, so
        # the answer is the plain one, and the usage says how much of the
        # prediction was used.
        ask = [{"role": "user", "content": "Count from one to twenty in words, separated by commas."}]
        kw = dict(model=SERVED_NAME, messages=ask, max_tokens=48, temperature=0)
        plain = self.client.chat.completions.create(**kw)
        answer = plain.choices[0].message.content
        details = plain.usage.completion_tokens_details
        self.assertEqual(details.accepted_prediction_tokens, 0)
        self.assertEqual(details.rejected_prediction_tokens, 0)
        edited = answer.replace("seven", "SEVEN").replace("twelve", "zwölf")
        for prediction in (answer, edited, [{"type": "text", "text": answer}]):
            r = self.client.chat.completions.create(
                prediction={"type": "content", "content": prediction}, **kw
            )
            self.assertEqual(r.choices[0].message.content, answer)
            self.assertEqual(r.usage.completion_tokens, plain.usage.completion_tokens)
            d = r.usage.completion_tokens_details
            self.assertGreater(d.accepted_prediction_tokens, r.usage.completion_tokens // 2, d)
        # Opting out (fak's `speculative: false`): no draft at all.
        r = self.client.chat.completions.create(
            prediction={"type": "content", "content": answer}, extra_body={"speculative": False}, **kw
        )
        self.assertEqual(r.choices[0].message.content, answer)
        self.assertEqual(r.usage.completion_tokens_details.accepted_prediction_tokens, 0)
        with self.assertRaises(openai.BadRequestError) as e:
            self.client.chat.completions.create(prediction={"type": "other", "content": answer}, **kw)
        self.assertEqual(e.exception.param, "prediction.type")

    def test_completions_non_stream(self):
        r = self.complete()
        c = r.choices[0]
        self.assertTrue(c.text, "empty text")
        self.assertIn(c.finish_reason, ("stop", "length"))
        self.assertGreater(r.usage.prompt_tokens, 0)
        self.assertGreater(r.usage.completion_tokens, 0)
        self.assertLessEqual(r.usage.completion_tokens, 12)

    def test_completions_stream_matches_non_stream(self):
        full = self.complete()
        chunks = list(self.complete(stream=True, stream_options={"include_usage": True}))
        text = "".join(ch.choices[0].text for ch in chunks if ch.choices)
        self.assertEqual(text, full.choices[0].text)
        self.assertIsNotNone(chunks[-1].usage)
        self.assertEqual(chunks[-1].usage.completion_tokens, full.usage.completion_tokens)
        self.assertEqual(chunks[-1].usage.prompt_tokens, full.usage.prompt_tokens)

    def test_unknown_model_is_404(self):
        with self.assertRaises(openai.NotFoundError):
            self.client.chat.completions.create(model="no-such-model", messages=CHAT, max_tokens=4)


class TestAPIKey(unittest.TestCase):
    """A server started with --api-key k1."""

    @classmethod
    def setUpClass(cls):
        cls.server = FakServer("--api-key", "k1").start()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_wrong_key_is_rejected(self):
        bad = client(self.server, "wrong")
        with self.assertRaises(openai.AuthenticationError):
            bad.chat.completions.create(model=SERVED_NAME, messages=CHAT, max_tokens=4)
        with self.assertRaises(openai.AuthenticationError):
            bad.models.list()

    def test_right_key_works(self):
        good = client(self.server, "k1")
        self.assertIn(SERVED_NAME, [m.id for m in good.models.list()])
        r = good.chat.completions.create(model=SERVED_NAME, messages=CHAT, max_tokens=4, temperature=0)
        self.assertLessEqual(r.usage.completion_tokens, 4)

    def test_health_stays_public(self):
        with urllib.request.urlopen(self.server.base_url + "/health", timeout=5) as r:
            self.assertEqual(r.status, 200)


if __name__ == "__main__":
    unittest.main()
