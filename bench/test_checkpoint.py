"""Tests of bench/peers/checkpoint.py (resumable llama.cpp fleet runs).

Run from the repository root: ``python3 -m unittest bench/test_checkpoint.py``.
The bookkeeping tests use the standard library only. ``EndToEnd`` runs the
llama.cpp peer itself (a small fleet, uninterrupted vs. stopped after every
turn and resumed) and is skipped unless a peer interpreter (see
bench/peers/common.py) and the SmolLM2 model are present.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench" / "peers"))
import checkpoint as ck  # noqa: E402

KEY = {"peer": "llama-cpp-python 0.3.30", "model_sha256": "ab", "threads": 2, "kv": "unified"}


def progress(turn: int, agents: int = 2) -> ck.Progress:
    return ck.Progress(
        turn=turn,
        pos=[100 + turn] * agents,
        last=[7] * agents,
        gen=[[[1, 2]] * turn for _ in range(agents)],
        ttft_s=[0.5] * (agents * turn),
        fed=42,
        prefix_s=0.25,
        segments_s=[3.0],
    )


class Bookkeeping(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = Path(self.tmp.name) / "ck"

    def tearDown(self) -> None:
        self.tmp.cleanup()

    def make(self, key: dict | None = None, segment_s: float | None = 10.0) -> ck.Checkpoint:
        return ck.Checkpoint(self.dir, "run", key or KEY, segment_s)

    def write_state(self, c: ck.Checkpoint, p: ck.Progress) -> None:
        c.state_path(p).write_bytes(b"state of turn %d" % p.turn)

    def test_nothing_saved_means_a_fresh_run(self) -> None:
        c = self.make()
        self.assertIsNone(c.progress())
        self.assertIsNone(c.finished())

    def test_partial_round_trip_keeps_only_the_newest_state(self) -> None:
        c = self.make()
        for turn in (1, 2):
            p = progress(turn)
            self.write_state(c, p)
            c.save_partial(p)
        got = c.progress()
        assert got is not None
        p, state = got
        self.assertEqual(p, progress(2))
        self.assertEqual(state.read_bytes(), b"state of turn 2")
        self.assertEqual(sorted(f.name for f in self.dir.iterdir()), ["run.json", "run.turn2.state"])
        self.assertIsNone(c.finished())

    def test_finished_run_is_reused_and_states_removed(self) -> None:
        c = self.make()
        p = progress(1)
        self.write_state(c, p)
        c.save_partial(p)
        c.save_finished({"status": "ok", "wall_s": 5.0}, [[[1]], [[2]]])
        self.assertEqual(c.finished(), ({"status": "ok", "wall_s": 5.0}, [[[1]], [[2]]]))
        self.assertIsNone(c.progress())
        self.assertEqual([f.name for f in self.dir.iterdir()], ["run.json"])

    def test_another_runs_checkpoint_is_refused(self) -> None:
        c = self.make()
        p = progress(1)
        self.write_state(c, p)
        c.save_partial(p)
        other = self.make(key={**KEY, "threads": 1})
        with self.assertRaisesRegex(ck.CheckpointError, "belongs to another run"):
            other.progress()

    def test_missing_state_file_is_an_error(self) -> None:
        c = self.make()
        p = progress(1)
        with self.assertRaisesRegex(ck.CheckpointError, "was not written"):
            c.save_partial(p)
        self.write_state(c, p)
        c.save_partial(p)
        c.state_path(p).unlink()
        with self.assertRaisesRegex(ck.CheckpointError, "missing"):
            c.progress()

    def test_foreign_file_is_an_error(self) -> None:
        self.dir.mkdir()
        (self.dir / "run.json").write_text('{"schema": "other"}')
        with self.assertRaisesRegex(ck.CheckpointError, "not a"):
            self.make().progress()
        (self.dir / "run.json").write_text("{not json")
        with self.assertRaisesRegex(ck.CheckpointError, "unreadable"):
            self.make().progress()

    def test_progress_check(self) -> None:
        progress(2).check(agents=2, turns=5)
        with self.assertRaisesRegex(ck.CheckpointError, "agents"):
            progress(2, agents=3).check(agents=2, turns=5)
        with self.assertRaisesRegex(ck.CheckpointError, "outside"):
            progress(6).check(agents=2, turns=5)
        bad = progress(2)
        bad.ttft_s.pop()
        with self.assertRaisesRegex(ck.CheckpointError, "TTFTs"):
            bad.check(agents=2, turns=5)
        bad = progress(2)
        bad.segments_s = []
        with self.assertRaisesRegex(ck.CheckpointError, "segment"):
            bad.check(agents=2, turns=5)

    def test_should_stop(self) -> None:
        c = self.make(segment_s=10.0)
        self.assertFalse(c.should_stop(9.9, turns_left=3))
        self.assertTrue(c.should_stop(10.0, turns_left=3))
        self.assertFalse(c.should_stop(99.0, turns_left=0))
        self.assertFalse(self.make(segment_s=None).should_stop(1e9, turns_left=3))
        with self.assertRaises(ck.CheckpointError):
            self.make(segment_s=-1.0)

    def test_run_name(self) -> None:
        shape = {"prefix": 1024, "turns": 80, "agents": 20, "decode": 32, "result": 48}
        self.assertEqual(ck.run_name("per-seq", shape, 2), "fleet-per-seq-P1024-T80-A20-D32-R48-t2")


def peer_python() -> str | None:
    explicit = os.environ.get("FAK_PEER_PYTHON")
    for cand in ([explicit] if explicit else []) + [str(ROOT / "bench" / ".venv" / "bin" / "python")]:
        if cand and Path(cand).exists():
            return cand
    return None


MODEL = ROOT / "models" / "smollm2-135m-instruct-q8_0.gguf"


@unittest.skipUnless(peer_python() and MODEL.exists(), "needs the llama.cpp peer (bench/peers/setup.sh) and SmolLM2")
class EndToEnd(unittest.TestCase):
    """A run stopped after every turn and resumed generates the same ids,
    feeds the same tokens and reports one segment per turn."""

    SHAPE = ["--prefix", "64", "--turns", "3", "--agents", "3", "--decode", "4", "--result", "8"]

    def peer(self, kv: str, out: Path, *extra: str) -> int:
        cmd = [sys.executable, str(ROOT / "bench" / "peers" / "llamacpp.py"), "--python", str(peer_python())]
        cmd += ["fleet", "--model", str(MODEL), "--threads", "2", "--kv", kv, *self.SHAPE, "--out", str(out), *extra]
        return subprocess.run(cmd, capture_output=True, text=True, check=False).returncode

    def test_segmented_run_matches_uninterrupted(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            for kv in ("unified", "per-seq"):
                whole, parts, ckdir = Path(tmp, f"{kv}-whole.json"), Path(tmp, f"{kv}-parts.json"), Path(tmp, kv)
                self.assertEqual(self.peer(kv, whole), 0)
                seg = ("--checkpoint", str(ckdir), "--segment-s", "0")
                codes = [self.peer(kv, parts, *seg) for _ in range(3)]
                self.assertEqual(codes, [ck.EXIT_CHECKPOINTED, ck.EXIT_CHECKPOINTED, 0], kv)
                a = json.loads(whole.read_text())["runs"][0]
                b = json.loads(parts.read_text())["runs"][0]
                for k in ("status", "generated_sha256", "tokens_computed", "tokens_reused"):
                    self.assertEqual(a[k], b[k], f"{kv} {k}")
                self.assertEqual(len(a["segments_s"]), 1)
                self.assertEqual(len(b["segments_s"]), 3)
                self.assertAlmostEqual(b["wall_s"], sum(b["segments_s"]))
                # A finished run is reported again without running.
                again = Path(tmp, f"{kv}-again.json")
                self.assertEqual(self.peer(kv, again, *seg), 0)
                self.assertEqual(json.loads(again.read_text())["runs"][0], b)
                self.assertEqual([f.suffix for f in ckdir.iterdir()], [".json"])


if __name__ == "__main__":
    unittest.main()
