"""Claude Code's billing line and the prefix cache, measured: replays the
Messages API requests of recorded Claude Code runs (``bench/harness.py
--dump DIR``; several runs, one after the other, as successive tasks or a
fleet of Claude Code processes send them to one server) against a fresh
``fak serve`` twice, and reports the share of prompt tokens found in the
prefix cache each time:

* ``as sent``: fak leaves the ``x-anthropic-billing-header`` system block
  out of the prompt (what it does);
* ``billing line rendered``: the same requests with that block's text
  prefixed so that fak does not recognise it, as an engine that renders
  every system block would see them.

Each request is replayed non-streamed with ``max_tokens`` 1: the replies
the harness got in its run are already in the later requests, so only the
prompts matter. (The original run's generated tokens were also in the
cache; here they are not, so both shares are lower bounds, alike.)

    python3 bench/billing_replay.py --model M --dump DIR [DIR ...] [--json out.json]
    python3 bench/billing_replay.py --model M --record DIR --bin BIN [--json out.json]

``--record DIR`` first runs Claude Code (``BIN/claude``, from
``bench/harness.sh``) twice, with two short prompts, in one git repository
against ``fak serve``, saving its requests under DIR/run1 and DIR/run2,
then replays those: two sessions of one project, as a developer or a
fleet of agents on one repository would run them.

Claude Code 2.1.332 writes one billing line per process (its
``cc_version=…`` suffix differs between runs, not between the requests of
one run), so the line costs the prefix cache its whole long system prompt
and tool list at the start of every run after the first.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import BILLING, Proxy, harness_cmd, start_engine  # noqa: E402


def replay(url: str, bodies: list[dict], keep_billing: bool) -> dict:
    sent = reused = 0
    lines = set()
    for b in bodies:
        b = json.loads(json.dumps(b))
        b["stream"] = False
        b["max_tokens"] = 1
        for blk in b.get("system") or []:
            if isinstance(blk, dict) and str(blk.get("text", "")).startswith(BILLING):
                lines.add(blk["text"])
                if keep_billing:
                    blk["text"] = "billing: " + blk["text"]
        req = urllib.request.Request(url + "/v1/messages", data=json.dumps(b).encode(),
                                     headers={"content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=1800) as r:
            u = json.load(r)["usage"]
        sent += u["input_tokens"] + u["cache_read_input_tokens"]
        reused += u["cache_read_input_tokens"]
    return {"requests": len(bodies), "prompt_tokens": sent, "reused": reused,
            "reused_share": round(reused / sent, 4) if sent else None,
            "distinct_billing_lines": len(lines)}


def record(model: Path, bin_dir: Path, out: Path) -> list[Path]:
    """Two Claude Code runs in one repository, their requests saved."""
    import subprocess
    work = Path(tempfile.mkdtemp(prefix="fak-billing-"))
    repo = work / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "-c", "user.email=bench@localhost", "-c", "user.name=bench", "commit", "-q",
                    "--allow-empty", "-m", "start"], cwd=repo, check=True)
    dirs = []
    with tempfile.TemporaryFile() as log:
        proc, url = start_engine("fak", model, 32768, 2, log)
        proxy = Proxy(url)
        try:
            for i, ask in enumerate(["Say hello in one short sentence.", "Say goodbye in one short sentence."]):
                proxy.dump = out / f"run{i + 1}"
                dirs.append(proxy.dump)
                cmd, env = harness_cmd("claude", bin_dir, ask, f"http://127.0.0.1:{proxy.port}", work / "home",
                                       model.stem)
                subprocess.run(cmd, cwd=repo, env=env, capture_output=True, timeout=900, stdin=subprocess.DEVNULL)
        finally:
            proxy.close()
            proc.terminate()
            proc.wait(timeout=30)
    return dirs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--dump", type=Path, nargs="+",
                    help="harness.py --dump folders of Claude Code runs, replayed in this order")
    ap.add_argument("--record", type=Path, help="record two Claude Code runs of one project here first")
    ap.add_argument("--bin", type=Path, default=Path(__file__).resolve().parent / ".harness" / "node_modules" / ".bin")
    ap.add_argument("--ctx", type=int, default=32768)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    if a.record:
        a.dump = record(a.model.resolve(), a.bin.resolve(), a.record)
    if not a.dump:
        ap.error("give --dump DIR [DIR ...] or --record DIR")
    bodies = [json.loads(p.read_text()) for d in a.dump for p in sorted(d.glob("*v1_messages.json"))]
    if not bodies:
        print(f"billing_replay: no v1_messages requests under {a.dump}", file=sys.stderr)
        return 2
    out = {"model": a.model.name, "runs": [d.name for d in a.dump]}
    for name, keep in [("as_sent", False), ("billing_line_rendered", True)]:
        with tempfile.TemporaryFile() as log:
            proc, url = start_engine("fak", a.model.resolve(), a.ctx, 2, log)
            try:
                out[name] = replay(url, bodies, keep)
            finally:
                proc.terminate()
                proc.wait(timeout=30)
        print(json.dumps({name: out[name]}), file=sys.stderr, flush=True)
    text = json.dumps(out, indent=1)
    if a.json:
        a.json.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
