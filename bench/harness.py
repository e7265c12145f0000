"""Real agent harnesses against real servers: Codex CLI (the Responses API)
and Claude Code (the Messages API), each on a few small coding tasks in a
temporary git repository, against ``fak serve`` and against llama-server
(which serves both endpoints), one engine after the other in the same run.

Every request goes through a recording proxy on 127.0.0.1, so the report
counts what the harness sent and what the server answered, whatever the
harness prints:

* protocol errors: answers with an HTTP status >= 400, and SSE ``error``,
  ``response.failed`` events (goal: 0);
* turns: model requests; tool calls: ``function_call`` items and
  ``tool_use`` blocks the server answered with;
* prompt tokens sent (the whole prompt of every request) against computed
  (sent minus those the server reports as reused: ``cached_tokens``,
  ``cache_read_input_tokens``, or llama-server's ``timings.cache_n``);
* task success (a check command run in the repository afterwards) and wall
  time.

Run it through ``bench/harness.sh`` (which installs the pinned harnesses).
The harnesses run the model's shell commands in the task's temporary
directory without a sandbox (Codex: ``--dangerously-bypass-approvals-and-
sandbox``; Claude Code: ``--permission-mode bypassPermissions``): run it on
a machine where that is acceptable.
"""

from __future__ import annotations

import argparse
import http.server
import itertools
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Claude Code's per-request billing line (a system block fak leaves out).
BILLING = "x-anthropic-billing-header"

# name -> (files, prompt, check command)
TASKS = {
    "create": (
        {},
        "Create a file named hello.py that prints exactly: hello world",
        ["python3", "hello.py"],
        "hello world",
    ),
    "fix": (
        {
            "calc.py": "def add(a, b):\n    return a - b\n",
            "test_calc.py": (
                "import unittest\nfrom calc import add\n\n\n"
                "class T(unittest.TestCase):\n    def test_add(self):\n"
                "        self.assertEqual(add(2, 3), 5)\n\n\n"
                "if __name__ == '__main__':\n    unittest.main()\n"
            ),
        },
        "The test in test_calc.py fails. Fix the bug in calc.py so that `python3 test_calc.py` passes.",
        ["python3", "test_calc.py"],
        None,
    ),
    "rename": (
        {
            "util.py": "def old_name(x):\n    return x * 2\n",
            "main.py": "from util import old_name\n\nprint(old_name(21))\n",
        },
        "Rename the function old_name to new_name in util.py and everywhere it is used.",
        ["sh", "-c", "! grep -rq old_name --include=*.py . && python3 main.py"],
        "42",
    ),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Tally:
    requests: int = 0
    errors: int = 0
    error_samples: list = field(default_factory=list)
    tool_calls: int = 0
    sent: int = 0
    computed: int = 0
    sent_after_first: int = 0
    computed_after_first: int = 0
    reuse_reported: bool = False


def usage_of(kind: str, body: bytes, stream: bool) -> tuple[int, int | None, int, int]:
    """(prompt tokens, reused tokens or None, tool calls, error events) of one answer."""
    events = []
    if stream:
        for line in body.decode("utf-8", "replace").splitlines():
            if line.startswith("data:"):
                try:
                    events.append(json.loads(line[5:].strip()))
                except ValueError:
                    pass
    else:
        try:
            events.append(json.loads(body))
        except ValueError:
            return 0, None, 0, 1
    prompt, reused, calls, errors = 0, None, 0, 0
    for e in events:
        if not isinstance(e, dict):
            continue
        t = e.get("type", "")
        if t in ("error", "response.failed") or ("error" in e and e.get("error")):
            errors += 1
        if t == "response.output_item.done" and e.get("item", {}).get("type") == "function_call":
            calls += 1
        if t == "content_block_start" and e.get("content_block", {}).get("type") == "tool_use":
            calls += 1
        msg = e.get("response") or e.get("message") or e
        if not stream:
            out = msg.get("output") or msg.get("content") or []
            calls += sum(1 for o in out if isinstance(o, dict) and o.get("type") in ("function_call", "tool_use"))
        u = msg.get("usage") if isinstance(msg, dict) else None
        if not u and t == "message_delta":
            u = e.get("usage")
        if isinstance(u, dict):
            if "input_tokens_details" in u or kind == "responses":
                p = u.get("input_tokens") or 0
                c = (u.get("input_tokens_details") or {}).get("cached_tokens")
                if p:
                    prompt, reused = p, c if c is not None else reused
            elif "cache_read_input_tokens" in u or "input_tokens" in u:
                c = u.get("cache_read_input_tokens")
                p = (u.get("input_tokens") or 0) + (c or 0) + (u.get("cache_creation_input_tokens") or 0)
                if p:
                    prompt, reused = p, c if c is not None else reused
        tm = e.get("timings") or (msg.get("timings") if isinstance(msg, dict) else None)
        if isinstance(tm, dict) and "prompt_n" in tm:
            n, cache = tm.get("prompt_n") or 0, tm.get("cache_n") or 0
            prompt, reused = n + cache, cache
    return prompt, reused, calls, errors


class Proxy:
    """A recording reverse proxy in front of one server."""

    def __init__(self, upstream: str, dump: Path | None = None) -> None:
        self.upstream = upstream
        self.dump = dump
        self.seq = itertools.count()
        self.port = free_port()
        self.lock = threading.Lock()
        self.tally = Tally()
        proxy = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def relay(self, method: str) -> None:
                n = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(n) if n else None
                req = urllib.request.Request(proxy.upstream + self.path, data=body, method=method)
                for h in ("content-type", "authorization", "x-api-key", "anthropic-version", "accept"):
                    if self.headers.get(h):
                        req.add_header(h, self.headers[h])
                try:
                    r = urllib.request.urlopen(req, timeout=1800)
                    status = r.status
                except urllib.error.HTTPError as e:
                    r, status = e, e.code
                except OSError as e:
                    self.send_error(502, str(e))
                    proxy.record(self.path, body, 502, b"", False)
                    return
                ctype = r.headers.get("content-type", "application/json")
                self.send_response(status)
                self.send_header("content-type", ctype)
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                parts = []
                try:
                    while True:
                        chunk = r.read1(65536)
                        if not chunk:
                            break
                        parts.append(chunk)
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                except OSError:
                    pass
                proxy.record(self.path, body, status, b"".join(parts), "event-stream" in ctype)

            def do_POST(self):
                self.relay("POST")

            def do_GET(self):
                self.relay("GET")

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), H)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def record(self, path: str, body: bytes | None, status: int, answer: bytes, stream: bool) -> None:
        if self.dump is not None and body:
            self.dump.mkdir(parents=True, exist_ok=True)
            name = path.split("?")[0].strip("/").replace("/", "_")
            (self.dump / f"{next(self.seq):05d}-{name}.json").write_bytes(body)
        kind = "responses" if "/responses" in path else "messages" if "/messages" in path else None
        if kind is None or "count_tokens" in path:
            if status >= 400:
                with self.lock:
                    self.tally.errors += 1
                    self.tally.error_samples.append(f"{status} {path}: {answer[:200]!r}")
            return
        prompt, reused, calls, errors = usage_of(kind, answer, stream)
        with self.lock:
            t = self.tally
            first = t.requests == 0
            t.requests += 1
            if status >= 400 or errors:
                t.errors += 1
                if len(t.error_samples) < 5:
                    t.error_samples.append(f"{status} {path}: {answer[:300]!r}")
            t.tool_calls += calls
            computed = prompt - (reused or 0)
            t.reuse_reported |= reused is not None
            t.sent += prompt
            t.computed += computed
            if not first:
                t.sent_after_first += prompt
                t.computed_after_first += computed

    def reset(self) -> Tally:
        with self.lock:
            t, self.tally = self.tally, Tally()
        return t

    def close(self) -> None:
        self.server.shutdown()


def wait_health(url: str, proc: subprocess.Popen, timeout: float = 300) -> None:
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as r:
                if r.status == 200:
                    return
        except (OSError, urllib.error.URLError):
            pass
        time.sleep(0.5)
    raise RuntimeError("the server did not become healthy")


def start_engine(engine: str, model: Path, ctx: int, threads: int, log, extra: tuple[str, ...] = ()) -> tuple[subprocess.Popen, str]:
    port = free_port()
    if engine == "fak":
        fak = Path(os.environ.get("FAK_BIN", ROOT / "target" / "release" / "fak"))
        cmd = [str(fak), "serve", "--model", str(model), "--port", str(port), "--threads", str(threads),
               "--ctx", str(ctx), "--accept-any-model"]
    else:
        server = os.environ.get("LLAMA_SERVER", str(ROOT / "bench" / ".venv" / "llama.cpp-build" / "bin" / "llama-server"))
        cmd = [server, "-m", str(model), "--port", str(port), "-t", str(threads), "-c", str(ctx),
               "--jinja", "-np", "1"]
        # On CPUs with AMX, llama.cpp's AMX matrix product crashed at its
        # first forward pass here (SIGSEGV in ggml_backend_amx_mul_mat);
        # --no-repack keeps it on its AVX-512 kernels.
        if "amx" in Path("/proc/cpuinfo").read_text():
            cmd.append("--no-repack")
    cmd.extend(extra)
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    wait_health(url, proc)
    return proc, url


def harness_cmd(harness: str, bin_dir: Path, prompt: str, base: str, home: Path, model_name: str) -> tuple[list, dict]:
    env = dict(os.environ)
    if harness == "codex":
        home.mkdir(parents=True, exist_ok=True)
        (home / "config.toml").write_text(
            f'model = "{model_name}"\nmodel_provider = "local"\n'
            f'[model_providers.local]\nname = "local"\nbase_url = "{base}/v1"\nwire_api = "responses"\n'
        )
        env["CODEX_HOME"] = str(home)
        return [str(bin_dir / "codex"), "exec", "--skip-git-repo-check",
                "--dangerously-bypass-approvals-and-sandbox", prompt], env
    env.update({
        "ANTHROPIC_BASE_URL": base,
        "ANTHROPIC_API_KEY": "unused",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "IS_SANDBOX": "1",
        "HOME": str(home),
    })
    home.mkdir(parents=True, exist_ok=True)
    return [str(bin_dir / "claude"), "-p", prompt, "--output-format", "json",
            "--permission-mode", "bypassPermissions", "--max-turns", "12"], env


def run_task(harness, task, bin_dir, base, model_name, timeout, workdir: Path) -> dict:
    files, prompt, check, expect = TASKS[task]
    repo = workdir / f"{harness}-{task}"
    repo.mkdir(parents=True)
    for name, text in files.items():
        (repo / name).write_text(text)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "-c", "user.email=bench@localhost", "-c", "user.name=bench", "commit", "-q",
                    "--allow-empty", "-m", "start"], cwd=repo, check=True)
    cmd, env = harness_cmd(harness, bin_dir, prompt, base, workdir / f"home-{harness}-{task}", model_name)
    t0 = time.time()
    try:
        p = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
        rc, out = p.returncode, (p.stdout + p.stderr).decode("utf-8", "replace")
    except subprocess.TimeoutExpired as e:
        rc, out = "timeout", ((e.stdout or b"") + (e.stderr or b"")).decode("utf-8", "replace")
    wall = time.time() - t0
    c = subprocess.run(check, cwd=repo, capture_output=True, timeout=60)
    ok = c.returncode == 0 and (expect is None or expect in c.stdout.decode("utf-8", "replace"))
    return {"exit": rc, "wall_s": round(wall, 1), "success": ok, "tail": out[-600:]}


def smoke(bin_dir: Path, model: Path, timeout: float) -> int:
    """Codex ``exec`` once against ``fak serve``: it must exit 0 with an
    answer, after at least one request, with no protocol error."""
    work = Path(tempfile.mkdtemp(prefix="fak-harness-smoke-"))
    log = open(work / "fak.log", "wb")
    proc, url = start_engine("fak", model, 8192, 2, log)
    proxy = Proxy(url)
    try:
        cmd, env = harness_cmd("codex", bin_dir, "Say hello in one short sentence.",
                               f"http://127.0.0.1:{proxy.port}", work / "home", model.stem)
        cmd[cmd.index("--dangerously-bypass-approvals-and-sandbox")] = "--sandbox=read-only"
        p = subprocess.run(cmd, cwd=work, env=env, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
        t = proxy.reset()
        out = p.stdout.decode("utf-8", "replace").strip()
        print(json.dumps({"exit": p.returncode, "answer": out[-200:], **asdict(t)}))
        if p.returncode != 0 or t.errors or t.requests < 1 or not out:
            print(p.stderr.decode("utf-8", "replace")[-2000:], file=sys.stderr)
            print("harness smoke: FAILED", file=sys.stderr)
            return 1
        print("harness smoke: codex exec against fak serve: 1 passed, 0 failed", file=sys.stderr)
        return 0
    finally:
        proxy.close()
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
        shutil.rmtree(work, ignore_errors=True)


def share_after_first_request(rows: list[dict]) -> float | None:
    """Prompt tokens computed over those sent, leaving out the very first
    request of the rows (in run order)."""
    if not rows:
        return None
    first = rows[0]
    sent = sum(r["sent"] for r in rows) - (first["sent"] - first["sent_after_first"])
    computed = sum(r["computed"] for r in rows) - (first["computed"] - first["computed_after_first"])
    return round(computed / sent, 4) if sent else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, default=ROOT / "models" / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")
    ap.add_argument("--smoke", action="store_true", help="Codex exec once against fak serve, then stop")
    ap.add_argument("--engines", default="fak,llama-server")
    ap.add_argument("--harnesses", default="codex,claude")
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--bin", type=Path, default=ROOT / "bench" / ".harness" / "node_modules" / ".bin")
    ap.add_argument("--ctx", type=int, default=32768)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=900, help="seconds per harness run")
    ap.add_argument("--json", type=Path, help="write the report here too")
    ap.add_argument("--dump", type=Path, help="save every request body under DIR/ENGINE-HARNESS-TASK/")
    a = ap.parse_args()
    a.bin = a.bin.resolve()
    a.model = a.model.resolve()
    if a.smoke:
        return smoke(a.bin, a.model, a.timeout)
    report = {"model": a.model.name, "runs": []}
    work = Path(tempfile.mkdtemp(prefix="fak-harness-"))
    try:
        for engine in a.engines.split(","):
            log = open(work / f"{engine}.log", "wb")
            proc, url = start_engine(engine, a.model, a.ctx, a.threads, log)
            proxy = Proxy(url)
            try:
                for harness in a.harnesses.split(","):
                    for task in a.tasks.split(","):
                        if a.dump:
                            proxy.dump = a.dump / f"{engine}-{harness}-{task}"
                        print(f"harness: {engine} {harness} {task} ...", file=sys.stderr, flush=True)
                        r = run_task(harness, task, a.bin, f"http://127.0.0.1:{proxy.port}", a.model.stem,
                                     a.timeout, work / engine)
                        t = proxy.reset()
                        row = {"engine": engine, "harness": harness, "task": task, **r, **asdict(t)}
                        row["computed_share_after_first"] = (
                            round(t.computed_after_first / t.sent_after_first, 4) if t.sent_after_first else None)
                        report["runs"].append(row)
                        print(json.dumps({k: v for k, v in row.items() if k != "tail"}), file=sys.stderr, flush=True)
            finally:
                proxy.close()
                proc.terminate()
                proc.wait(timeout=30)
                log.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    summary = {}
    for engine in a.engines.split(","):
        for harness in a.harnesses.split(","):
            rows = [r for r in report["runs"] if r["engine"] == engine and r["harness"] == harness]
            sent = sum(r["sent_after_first"] for r in rows)
            summary[f"{engine}/{harness}"] = {
                "protocol_errors": sum(r["errors"] for r in rows),
                "successes": sum(r["success"] for r in rows),
                "tasks": len(rows),
                "turns": sum(r["requests"] for r in rows),
                "tool_calls": sum(r["tool_calls"] for r in rows),
                "wall_s": round(sum(r["wall_s"] for r in rows), 1),
                "computed_share_after_first": round(sum(r["computed_after_first"] for r in rows) / sent, 4) if sent else None,
                # The run's first request computes the shared prefix; every
                # later one (other tasks' first turns included) should find it.
                "computed_share_after_first_request": share_after_first_request(rows),
                "reuse_reported": all(r["reuse_reported"] for r in rows if r["requests"]),
            }
    for harness in a.harnesses.split(","):
        f, l = summary.get(f"fak/{harness}"), summary.get(f"llama-server/{harness}")
        if f and l and l["wall_s"]:
            summary[f"wall_ratio_fak_over_llama/{harness}"] = round(f["wall_s"] / l["wall_s"], 3)
    report["summary"] = summary
    text = json.dumps(report, indent=1)
    if a.json:
        a.json.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
