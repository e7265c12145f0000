"""``fak serve --kv-events`` against a real subscriber and a real router.

* ``pyzmq`` subscribes to one replica's events: the first batch (seq 0)
  says the replica holds nothing; a chat completion's prompt is stored as
  one chain whose ``token_ids`` are the ids ``/v1/chat/completions/render``
  gives, block by block, each block's parent the one before it; every
  frame has vLLM's shape (empty topic, 8-byte big-endian seq, msgpack
  ``[ts, events, 0]``); and the replay socket answers ``[b"", start]`` with
  every batch from ``start`` and the end marker (seq -1).
* ``vllm-router`` (PyPI, pinned in requirements.txt) with ``--policy
  kv_aware`` in front of two replicas, each publishing its events: each
  replica first takes one long prefix directly (prefix k on replica 1 - k,
  so neither sits where a tie would go); then every request through the
  router that shares a prefix goes to the replica that holds it, and its
  ``cached_tokens`` cover the prefix.

Run with ``scripts/test-openai.sh`` (it installs the pinned router).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest
import urllib.error
import urllib.request
from pathlib import Path

import msgpack
import zmq

from test_openai_client import SERVED_NAME, FakServer, free_port

BLOCK = 16
ROUTER = os.environ.get("FAK_TEST_ROUTER") or shutil.which("vllm-router") or str(
    Path(__file__).resolve().parent / ".venv" / "bin" / "vllm-router"
)


def post(base: str, path: str, body: dict, headers: dict | None = None) -> dict:
    req = urllib.request.Request(
        base + path,
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json", **(headers or {})},
    )
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.load(r)


def metric(base: str, name: str) -> float:
    """The sum of a metric's samples on a replica's /metrics."""
    with urllib.request.urlopen(base + "/metrics", timeout=10) as r:
        text = r.read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and line[len(name)] in " {":
            total += float(line.rsplit(" ", 1)[1])
    return total


def chat(prefix: str, question: str) -> dict:
    return {
        "model": SERVED_NAME,
        "messages": [
            {"role": "system", "content": prefix},
            {"role": "user", "content": question},
        ],
        "max_tokens": 2,
        "temperature": 0,
    }


PREFIX = " ".join(f"rule {i}: keep tool output short and exact." for i in range(40))


class Replica(FakServer):
    """A replica publishing its KV-cache events (and answering replays)."""

    def __init__(self) -> None:
        self.events = f"tcp://127.0.0.1:{free_port()}"
        self.replay = f"tcp://127.0.0.1:{free_port()}"
        super().__init__(
            "--block-size", str(BLOCK), "--kv-events", self.events, "--kv-events-replay", self.replay
        )


def frames_of(sock: zmq.Socket, wait_s: float) -> list[list[bytes]]:
    out = []
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if sock.poll(50):
            out.append(sock.recv_multipart())
    return out


class TestKvEvents(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ctx = zmq.Context()
        cls.sub = cls.ctx.socket(zmq.SUB)
        cls.replica = Replica()
        # Subscribe before the replica starts: no batch is missed.
        cls.sub.connect(cls.replica.events)
        cls.sub.setsockopt(zmq.SUBSCRIBE, b"")
        time.sleep(0.2)
        cls.replica.start()

    @classmethod
    def tearDownClass(cls):
        cls.replica.stop()
        cls.ctx.destroy(linger=0)

    def test_a_prompt_is_stored_as_one_chain_of_the_rendered_ids(self):
        base = self.replica.base_url
        body = chat(PREFIX, "Say yes.")
        ids = post(base, "/v1/chat/completions/render", body)["token_ids"]
        post(base, "/v1/chat/completions", body)
        got = frames_of(self.sub, 1.0)
        self.assertTrue(got, "no batch published")
        seqs = []
        stored = []
        for f in got:
            self.assertEqual(len(f), 3)
            self.assertEqual(f[0], b"")
            self.assertEqual(len(f[1]), 8)
            seqs.append(int.from_bytes(f[1], "big"))
            ts, events, rank = msgpack.unpackb(f[2])
            self.assertGreater(ts, 1.6e9)
            self.assertEqual(rank, 0)
            stored += [e for e in events if e["type"] == "BlockStored"]
        # The first batch (seq 0, sent as the model is ready) may go out
        # before the subscription reaches the replica; the replay below
        # brings it back.
        self.assertEqual(seqs, list(range(seqs[0], seqs[0] + len(seqs))), "seq without gaps")
        hashes, tokens, parent = [], [], None
        for e in stored:
            self.assertEqual(e["parent_block_hash"], parent if hashes else None)
            self.assertEqual(e["block_size"], BLOCK)
            self.assertEqual(e["medium"], "GPU")
            self.assertEqual(len(e["token_ids"]), BLOCK * len(e["block_hashes"]))
            hashes += e["block_hashes"]
            tokens += e["token_ids"]
            parent = hashes[-1]
        self.assertGreaterEqual(len(hashes), len(ids) // BLOCK)
        self.assertEqual(tokens[: len(ids) // BLOCK * BLOCK], ids[: len(ids) // BLOCK * BLOCK])
        self.assertEqual(len(set(hashes)), len(hashes))

        # Replay from 0: every batch again, then the end marker.
        dealer = self.ctx.socket(zmq.DEALER)
        dealer.connect(self.replica.replay)
        dealer.send_multipart([b"", (0).to_bytes(8, "big")])
        replayed = []
        while dealer.poll(2000):
            f = dealer.recv_multipart()
            self.assertEqual(len(f), 4)
            seq = int.from_bytes(f[2], "big", signed=True)
            if seq == -1:
                self.assertEqual((f[1], f[3]), (b"", b""))
                break
            replayed.append((seq, f[3]))
        else:
            self.fail("no end marker")
        self.assertEqual([s for s, _ in replayed], list(range(len(replayed))), "replay from seq 0")
        self.assertEqual(msgpack.unpackb(replayed[0][1])[1][0], {"type": "AllBlocksCleared"})
        self.assertEqual(replayed[seqs[0] : seqs[0] + len(got)], [(s, f[2]) for s, f in zip(seqs, got)])
        dealer.close(linger=0)
        self.assertGreaterEqual(metric(base, "fak:kv_events_replays_total"), 1)
        self.assertEqual(metric(base, "fak:kv_events_dropped_total"), 0)


class Router:
    """vllm-router on a free port in front of `replicas`."""

    def __init__(self, replicas: list[Replica], policy: str) -> None:
        self.port = free_port()
        self.log = tempfile.TemporaryFile()
        block = os.environ.get("FAK_TEST_ROUTER_BLOCK", str(BLOCK))
        cmd = [ROUTER, "--host", "127.0.0.1", "--port", str(self.port), "--policy", policy,
               "--worker-urls", *[r.base_url for r in replicas], "--log-level", "warning"]
        if policy == "kv_aware":
            for r in replicas:
                cmd += ["--kv-event-source", f"{r.base_url}={r.events}",
                        "--kv-event-replay-source", f"{r.base_url}={r.replay}"]
            cmd += ["--kv-event-block-size", block, "--kv-event-model", SERVED_NAME]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.base_url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                with urllib.request.urlopen(self.base_url + "/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                time.sleep(0.2)
        self.stop()
        raise AssertionError(f"vllm-router did not start:\n{self.log_tail()}")

    def log_tail(self) -> str:
        self.log.seek(0)
        return self.log.read().decode("utf-8", "replace")[-4000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


@unittest.skipUnless(Path(ROUTER).exists(), "vllm-router not installed (scripts/test-openai.sh installs it)")
class TestKvAwareRouting(unittest.TestCase):
    def test_a_shared_prefix_goes_to_the_replica_that_holds_it(self):
        replicas = [Replica(), Replica()]
        router = None
        prefixes = [PREFIX, PREFIX.replace("rule", "step")]
        try:
            for r in replicas:
                r.start()
            router = Router(replicas, "kv_aware")
            # Each replica learns one prefix directly (prefix k on replica
            # 1 - k, so neither is where a tie would go by order).
            prompt = []
            for k, p in enumerate(prefixes):
                out = post(replicas[1 - k].base_url, "/v1/chat/completions", chat(p, "Warm up."))
                prompt.append(out["usage"]["prompt_tokens"])
            served = lambda: [metric(r.base_url, "vllm:request_success_total") for r in replicas]
            time.sleep(1.0)  # the events reach the router
            before = served()
            for q in range(3):
                for k, p in enumerate(prefixes):
                    out = post(router.base_url, "/v1/chat/completions", chat(p, f"Question {q}?"))
                    self.assertGreaterEqual(
                        out["usage"]["prompt_tokens_details"]["cached_tokens"],
                        (prompt[k] - 16) // BLOCK * BLOCK,
                        f"prefix {k}, question {q}\n{router.log_tail()}",
                    )
            counts = [d - b for b, d in zip(before, served())]
            self.assertEqual(counts, [3, 3], router.log_tail())
        finally:
            if router is not None:
                router.stop()
            for r in replicas:
                r.stop()


@unittest.skipUnless(Path(ROUTER).exists(), "vllm-router not installed (scripts/test-openai.sh installs it)")
class TestSessionsBehindARouter(unittest.TestCase):
    """Sessions and stored responses live on one replica: with
    ``consistent_hash`` and an ``x-session-id`` header on every call, the
    router sends each agent's calls (any path: the session API, a
    Responses chain) to the replica that holds its state."""

    def test_every_call_of_an_agent_reaches_the_replica_that_holds_it(self):
        replicas = [FakServer(), FakServer()]
        router = None
        try:
            for r in replicas:
                r.start()
            router = Router(replicas, "consistent_hash")
            for agent in ("agent-a", "agent-b", "agent-c"):
                h = {"x-session-id": agent}
                sess = post(router.base_url, "/v1/sessions",
                            {"messages": [{"role": "system", "content": PREFIX}]}, h)
                for q in range(2):
                    turn = {"messages": [{"role": "user", "content": f"Question {q}?"}],
                            "max_tokens": 2, "temperature": 0}
                    out = post(router.base_url, f"/v1/sessions/{sess['id']}/chat/completions", turn, h)
                    self.assertEqual(out["session"]["id"], sess["id"])
                # A stored response, then one that continues it.
                first = post(router.base_url, "/v1/responses",
                             {"model": SERVED_NAME, "input": "Say yes.", "max_output_tokens": 2}, h)
                nxt = post(router.base_url, "/v1/responses",
                           {"model": SERVED_NAME, "input": "Again.", "max_output_tokens": 2,
                            "previous_response_id": first["id"]}, h)
                self.assertEqual(nxt["previous_response_id"], first["id"])
                # Exactly one replica holds the session; the other says so.
                held = []
                for r in replicas:
                    try:
                        with urllib.request.urlopen(f"{r.base_url}/v1/sessions/{sess['id']}", timeout=10):
                            held.append(True)
                    except urllib.error.HTTPError as e:
                        self.assertEqual(e.code, 404)
                        self.assertIn("x-session-id", json.load(e)["error"]["message"])
                        held.append(False)
                self.assertEqual(sorted(held), [False, True], agent)
        finally:
            if router is not None:
                router.stop()
            for r in replicas:
                r.stop()


if __name__ == "__main__":
    unittest.main()
