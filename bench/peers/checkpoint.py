"""Resumable llama.cpp fleet runs: progress between turns, kept on disk.

Some fleet shapes take the llama.cpp peer hours on this machine (bounded-long
T = 80, A = 20 is estimated at several hours for the unified cache alone),
longer than one working session. ``llamacpp.py fleet --checkpoint DIR
--segment-s S`` therefore runs a shape in *segments*: after any turn that
ends at least ``S`` timed seconds into the current segment, it saves

* llama.cpp's whole context state (every sequence's KV cells, with their
  positions; ``llama_state_save_file``) to ``DIR/<run>.turn<t>.state``, and
* the harness's progress (next turn, positions, last tokens, generated ids,
  TTFTs, tokens fed, each finished segment's timed seconds) to
  ``DIR/<run>.json``,

then stops with exit status 75 (``EX_TEMPFAIL``). Running the same command
again loads both and continues with the next turn. Timing is per segment
and summed: a segment's clock starts after the context is made and the state
loaded, and stops before the state is saved, so saves and loads are never
counted. When the last turn finishes, ``DIR/<run>.json`` holds the finished
run's report fields (``"status": "ok"``) and the state files are deleted;
rerunning the command then reuses that report instead of running again.

```text
  segment 1          save   segment 2          save   segment 3
  |prefix t0 t1 ..tk| ---> |tk+1 ........ tm| ---> |tm+1 .. tT-1|
  '------ s1 ------'        '------ s2 ------'       '---- s3 ---'
  wall_s = s1 + s2 + s3     (segments_s = [s1, s2, s3] in the report)
```

Every checkpoint records a *key* (peer version, model SHA-256, threads, KV
layout, the shape and the context sizes). A checkpoint whose key differs
from the command's is an error, never silently resumed or overwritten.

Standard library only: ``llamacpp.py`` does the llama.cpp calls, this module
the bookkeeping (and ``bench/test_checkpoint.py`` tests it without
llama.cpp).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

SCHEMA = "fak-peer-fleet-checkpoint/1"

# Exit status of a run that stopped at a checkpoint (sysexits.h EX_TEMPFAIL).
EXIT_CHECKPOINTED = 75


class CheckpointError(Exception):
    """A checkpoint that cannot be used; the message names why."""


@dataclass
class Progress:
    """A fleet run between turns: everything but the KV cache.

    ``turn`` is the next turn to run; ``pos[a]`` the next position of agent
    ``a``; ``last[a]`` its last generated token (fed first at the next
    turn); ``gen[a][t]`` its generated ids; ``ttft_s`` one entry per
    finished agent-turn; ``fed`` tokens given to ``llama_decode`` so far;
    ``segments_s`` the timed seconds of each finished segment.
    """

    turn: int
    pos: list[int]
    last: list[int]
    gen: list[list[list[int]]]
    ttft_s: list[float] = field(default_factory=list)
    fed: int = 0
    prefix_s: float = 0.0
    segments_s: list[float] = field(default_factory=list)
    peak_rss_mb: float = 0.0

    def check(self, agents: int, turns: int) -> None:
        """Raises ``CheckpointError`` unless the fields fit A agents, T turns."""
        if not 0 < self.turn <= turns:
            raise CheckpointError(f"checkpoint turn {self.turn} is outside 1..{turns}")
        for name in ("pos", "last", "gen"):
            if len(getattr(self, name)) != agents:
                raise CheckpointError(f"checkpoint {name} has {len(getattr(self, name))} agents, expected {agents}")
        if any(len(g) != self.turn for g in self.gen):
            raise CheckpointError(f"checkpoint holds generated ids for other than {self.turn} turns")
        if len(self.ttft_s) != agents * self.turn:
            raise CheckpointError(f"checkpoint holds {len(self.ttft_s)} TTFTs, expected {agents * self.turn}")
        if not self.segments_s:
            raise CheckpointError("checkpoint has no finished segment")


def run_name(kv: str, shape: dict[str, int], threads: int) -> str:
    """File stem of one run's checkpoint, e.g. ``fleet-unified-P1024-T80-A20-D32-R48-t2``."""
    s = shape
    return f"fleet-{kv}-P{s['prefix']}-T{s['turns']}-A{s['agents']}-D{s['decode']}-R{s['result']}-t{threads}"


class Checkpoint:
    """One run's checkpoint files in ``directory`` (created on first save).

    ``key`` identifies the run (see the module overview); ``segment_s`` is
    the timed seconds after which a segment stops at the next turn end
    (``None``: never stop, but still resume a saved run and record the
    finished report).
    """

    def __init__(self, directory: Path, name: str, key: dict[str, Any], segment_s: float | None) -> None:
        if segment_s is not None and segment_s < 0:
            raise CheckpointError(f"--segment-s must be at least 0, got {segment_s}")
        self.dir = directory
        self.name = name
        self.json_path = directory / f"{name}.json"
        self.key = key
        self.segment_s = segment_s

    def should_stop(self, segment_elapsed_s: float, turns_left: int) -> bool:
        """Whether to stop after this turn: turns remain and the segment
        has run its seconds."""
        return self.segment_s is not None and turns_left > 0 and segment_elapsed_s >= self.segment_s

    def _read(self) -> dict[str, Any] | None:
        if not self.json_path.exists():
            return None
        try:
            doc = json.loads(self.json_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise CheckpointError(f"{self.json_path}: unreadable checkpoint ({e})") from e
        if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
            raise CheckpointError(f"{self.json_path}: not a {SCHEMA} file")
        if doc.get("key") != self.key:
            raise CheckpointError(
                f"{self.json_path} belongs to another run (its key {doc.get('key')!r}, this run's {self.key!r}); "
                "move it away or choose another --checkpoint directory"
            )
        return doc

    def finished(self) -> tuple[dict[str, Any], list[list[list[int]]]] | None:
        """The saved report fields and generated ids of a finished run, if
        there is one."""
        doc = self._read()
        if doc is None or doc.get("status") != "ok":
            return None
        report, gen = doc.get("report"), doc.get("generated")
        if not isinstance(report, dict) or not isinstance(gen, list):
            raise CheckpointError(f"{self.json_path}: finished checkpoint without its report")
        return report, gen

    def progress(self) -> tuple[Progress, Path] | None:
        """The saved progress of an unfinished run and its state file, if
        there is one."""
        doc = self._read()
        if doc is None or doc.get("status") != "partial":
            return None
        state = self.dir / str(doc.get("state_file", ""))
        if not doc.get("state_file") or not state.is_file():
            raise CheckpointError(f"{self.json_path}: its state file {doc.get('state_file')!r} is missing")
        try:
            return Progress(**doc["progress"]), state
        except (KeyError, TypeError) as e:
            raise CheckpointError(f"{self.json_path}: malformed progress ({e})") from e

    def _write(self, doc: dict[str, Any]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.json_path.with_name(self.json_path.name + ".tmp")
        tmp.write_text(json.dumps({"schema": SCHEMA, "key": self.key, **doc}) + "\n", encoding="utf-8")
        os.replace(tmp, self.json_path)

    def _states(self) -> list[Path]:
        return sorted(self.dir.glob(f"{self.name}.turn*.state"))

    def state_path(self, p: Progress) -> Path:
        """Where the caller writes the llama.cpp state of progress ``p``
        before ``save_partial(p)``; one file per turn, so that the progress
        file never names a state from another turn."""
        self.dir.mkdir(parents=True, exist_ok=True)
        return self.dir / f"{self.name}.turn{p.turn}.state"

    def save_partial(self, p: Progress) -> None:
        """Records progress ``p`` (its state file already written), then
        deletes older state files."""
        state = self.state_path(p)
        if not state.is_file():
            raise CheckpointError(f"state file {state} was not written")
        self._write({"status": "partial", "state_file": state.name, "progress": asdict(p)})
        for old in self._states():
            if old != state:
                old.unlink(missing_ok=True)

    def save_finished(self, report: dict[str, Any], generated: list[list[list[int]]]) -> None:
        """Records a finished run's report fields and generated ids, and
        deletes its state files."""
        self._write({"status": "ok", "report": report, "generated": generated})
        for old in self._states():
            old.unlink(missing_ok=True)
