"""Consistency checks of the Kubernetes manifests in deploy/ (no cluster, stdlib only).

Parses deploy/*.yaml with a small YAML-subset reader (block mappings and
sequences, quoted and plain scalars, one-line flow lists, comments, ``---``)
and checks that the pieces agree with one another: the selectors of the
Deployment, Service and InferencePool match the pod labels; the ports line
up; the probes use ``/health``; the container runs ``fak serve`` with known
flags, listening on 0.0.0.0 on the container port; the mounts name existing
volumes; the InferencePool uses the fields of ``inference.networking.k8s.io/v1``;
the HTTPRoute points at that pool. When PyYAML happens to be installed, the
subset reader is cross-checked against it; when ``target/release/fak`` has a
``serve`` command, the flags are also checked against its ``--help``.

    python3 -m unittest bench/test_deploy.py
"""

from __future__ import annotations

import json
import subprocess
import unittest
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"

# Flags of `fak serve` (the serving flags, plus those the CLI adds).
SERVE_FLAGS = {
    "--model", "-m", "--host", "--port", "--threads", "-t", "--ctx", "--kv-mem", "--api-key",
    "--api-key-file", "--max-waiting", "--max-running", "--served-model-name", "--max-body-bytes",
    "--kv-type", "--block-size", "--kv-events", "--kv-events-replay",
}


class YAMLError(ValueError):
    pass


def _strip_comment(s: str) -> str:
    """``s`` without a trailing ``# comment`` that is outside quotes."""
    quote = None
    for i, c in enumerate(s):
        if quote:
            if c == quote:
                quote = None
        elif c in "\"'":
            quote = c
        elif c == "#" and (i == 0 or s[i - 1] in " \t"):
            return s[:i].rstrip()
    return s.rstrip()


def _scalar(s: str) -> Any:
    s = s.strip()
    if not s:
        return None
    if s[0] == '"':
        if not s.endswith('"') or len(s) < 2:
            raise YAMLError(f"unterminated string {s!r}")
        return json.loads(s)
    if s[0] == "'":
        if not s.endswith("'") or len(s) < 2:
            raise YAMLError(f"unterminated string {s!r}")
        return s[1:-1].replace("''", "'")
    if s[0] == "[":
        if not s.endswith("]"):
            raise YAMLError(f"unterminated flow list {s!r}")
        inner = s[1:-1].strip()
        return [_scalar(x) for x in inner.split(",")] if inner else []
    if s[0] in "{&*!|>":
        raise YAMLError(f"unsupported YAML construct {s!r}")
    if s in ("true", "True"):
        return True
    if s in ("false", "False"):
        return False
    if s in ("null", "~"):
        return None
    try:
        return int(s)
    except ValueError:
        return s


def _split_key(content: str) -> tuple[str, str] | None:
    """(key, rest) when ``content`` is ``key: rest`` or ``key:``; else None."""
    if content[:1] in "\"'[{":
        return None
    for i, c in enumerate(content):
        if c == ":" and (i + 1 == len(content) or content[i + 1] == " "):
            return content[:i].strip(), content[i + 1 :].strip()
    return None


def load_all(text: str) -> list[Any]:
    """The documents of ``text`` (the YAML subset described above)."""
    docs: list[list[tuple[int, str]]] = [[]]
    for raw in text.splitlines():
        if raw.strip() == "---":
            docs.append([])
            continue
        if "\t" in raw[: len(raw) - len(raw.lstrip())]:
            raise YAMLError("tab in indentation")
        content = _strip_comment(raw)
        if content.strip():
            docs[-1].append((len(content) - len(content.lstrip()), content.strip()))
    out = []
    for lines in docs:
        if not lines:
            continue
        value, i = _block(lines, 0, lines[0][0])
        if i != len(lines):
            raise YAMLError(f"unexpected indentation at {lines[i][1]!r}")
        out.append(value)
    return out


def _block(lines: list[tuple[int, str]], i: int, indent: int) -> tuple[Any, int]:
    if lines[i][1].startswith("- ") or lines[i][1] == "-":
        return _sequence(lines, i, indent)
    return _mapping(lines, i, indent)


def _sequence(lines: list[tuple[int, str]], i: int, indent: int) -> tuple[list[Any], int]:
    out: list[Any] = []
    while i < len(lines) and lines[i][0] == indent and (lines[i][1].startswith("- ") or lines[i][1] == "-"):
        rest = lines[i][1][1:].strip()
        if not rest:
            if i + 1 >= len(lines) or lines[i + 1][0] <= indent:
                out.append(None)
                i += 1
            else:
                v, i = _block(lines, i + 1, lines[i + 1][0])
                out.append(v)
        elif _split_key(rest) is not None:
            # "- key: value" opens a mapping whose keys sit where "key" does.
            inner = indent + len(lines[i][1]) - len(rest)
            sub = [(inner, rest)] + lines[i + 1 :]
            v, j = _mapping(sub, 0, inner)
            out.append(v)
            i = i + j
        else:
            out.append(_scalar(rest))
            i += 1
    return out, i


def _mapping(lines: list[tuple[int, str]], i: int, indent: int) -> tuple[dict[str, Any], int]:
    out: dict[str, Any] = {}
    while i < len(lines) and lines[i][0] == indent and not lines[i][1].startswith("- "):
        kv = _split_key(lines[i][1])
        if kv is None:
            raise YAMLError(f"expected 'key: value', got {lines[i][1]!r}")
        key, rest = kv
        if key in out:
            raise YAMLError(f"duplicate key {key!r}")
        i += 1
        if rest:
            out[key] = _scalar(rest)
        elif i < len(lines) and (
            lines[i][0] > indent or (lines[i][0] == indent and lines[i][1].startswith("- "))
        ):
            out[key], i = _block(lines, i, lines[i][0])
        else:
            out[key] = None
    return out, i


def manifests() -> dict[str, dict[str, Any]]:
    """Every object of deploy/*.yaml by ``Kind/name``."""
    objs: dict[str, dict[str, Any]] = {}
    for f in sorted(DEPLOY.glob("*.yaml")):
        for doc in load_all(f.read_text(encoding="utf-8")):
            key = f"{doc['kind']}/{doc['metadata']['name']}"
            if key in objs:
                raise AssertionError(f"{key} defined twice")
            objs[key] = doc
    return objs


def flag_value(args: list[str], flag: str) -> str | None:
    for a, b in zip(args, args[1:]):
        if a == flag:
            return b
    return None


class TestYAMLSubset(unittest.TestCase):
    def test_reader(self):
        text = """
# comment
a: 1
b: "x: y"   # trailing comment
c:
  - one
  - name: n
    port: 80
  -
    - nested
d: [ "ALL", x ]
e:
- same-indent item
f: 'it''s'
g: plain text # c
---
h: true
"""
        self.assertEqual(
            load_all(text),
            [
                {"a": 1, "b": "x: y", "c": ["one", {"name": "n", "port": 80}, ["nested"]],
                 "d": ["ALL", "x"], "e": ["same-indent item"], "f": "it's", "g": "plain text"},
                {"h": True},
            ],
        )

    def test_rejects(self):
        for bad in ("a: 1\n  b: 2\n", "a: 1\na: 2\n", "a: {x: 1}\n", 'a: "x\n'):
            with self.subTest(bad=bad), self.assertRaises(YAMLError):
                load_all(bad)

    def test_matches_pyyaml_if_installed(self):
        try:
            import yaml  # type: ignore[import-not-found]
        except ImportError:
            self.skipTest("PyYAML not installed (optional cross-check)")
        for f in sorted(DEPLOY.glob("*.yaml")):
            text = f.read_text(encoding="utf-8")
            self.assertEqual(load_all(text), [d for d in yaml.safe_load_all(text) if d is not None], f.name)


class TestManifests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.objs = manifests()
        cls.dep = cls.objs["Deployment/fak-serve"]
        cls.pod = cls.dep["spec"]["template"]
        cls.ctr = next(c for c in cls.pod["spec"]["containers"] if c["name"] == "fak")

    def labels_match(self, selector: dict[str, str]):
        labels = self.pod["metadata"]["labels"]
        for k, v in selector.items():
            self.assertEqual(labels.get(k), v, f"pod label {k}")

    def test_kinds(self):
        self.assertEqual(
            sorted(self.objs),
            ["Deployment/fak-serve", "Deployment/vllm-router", "HTTPRoute/fak-smollm2",
             "InferencePool/fak-smollm2", "NetworkPolicy/fak-replica-kv-events", "Service/fak-replica",
             "Service/fak-serve", "Service/vllm-router", "StatefulSet/fak-replica"],
        )

    def test_deployment(self):
        self.assertEqual(self.dep["apiVersion"], "apps/v1")
        self.labels_match(self.dep["spec"]["selector"]["matchLabels"])
        self.assertEqual(self.ctr["command"], ["fak"])
        args = [str(a) for a in self.ctr["args"]]
        self.assertEqual(args[0], "serve")
        self.assertEqual(flag_value(args, "--host"), "0.0.0.0")
        self.assertTrue(flag_value(args, "--model").startswith("/models/"))
        port = int(flag_value(args, "--port"))
        http = next(p for p in self.ctr["ports"] if p["name"] == "http")
        self.assertEqual(http["containerPort"], port)
        for a in args[1:]:
            if a.startswith("-"):
                self.assertIn(a, SERVE_FLAGS)
        threads = int(flag_value(args, "--threads"))
        res = self.ctr["resources"]
        self.assertEqual(res["requests"], res["limits"], "Guaranteed QoS")
        self.assertEqual(int(res["requests"]["cpu"]), threads)
        for probe in ("startupProbe", "readinessProbe"):
            self.assertEqual(self.ctr[probe]["httpGet"]["path"], "/health")
            self.assertEqual(self.ctr[probe]["httpGet"]["port"], "http")
        self.assertIn("tcpSocket", self.ctr["livenessProbe"])
        vols = {v["name"]: v for v in self.pod["spec"]["volumes"]}
        mounts = {m["name"]: m for m in self.ctr["volumeMounts"]}
        self.assertEqual(set(mounts), set(vols))
        self.assertTrue(flag_value(args, "--model").startswith(mounts["models"]["mountPath"] + "/"))
        keyfile = flag_value(args, "--api-key-file")
        if keyfile is not None:
            self.assertEqual(str(Path(keyfile).parent), mounts["api-keys"]["mountPath"])
        ann = self.pod["metadata"]["annotations"]
        self.assertEqual(int(ann["prometheus.io/port"]), port)
        self.assertEqual(ann["prometheus.io/path"], "/metrics")

    def test_service(self):
        svc = self.objs["Service/fak-serve"]
        self.labels_match(svc["spec"]["selector"])
        self.assertEqual(svc["spec"]["ports"][0]["targetPort"], "http")

    def test_inference_pool(self):
        pool = self.objs["InferencePool/fak-smollm2"]
        self.assertEqual(pool["apiVersion"], "inference.networking.k8s.io/v1")
        spec = pool["spec"]
        self.assertEqual(set(spec), {"selector", "targetPorts", "endpointPickerRef"})
        self.assertEqual(set(spec["selector"]), {"matchLabels"})
        self.labels_match(spec["selector"]["matchLabels"])
        port = int(flag_value([str(a) for a in self.ctr["args"]], "--port"))
        self.assertEqual(spec["targetPorts"], [{"number": port}])
        epp = spec["endpointPickerRef"]
        self.assertTrue(epp["name"])
        self.assertEqual(epp.get("kind", "Service"), "Service")
        self.assertIn(epp.get("failureMode", "FailClose"), ("FailOpen", "FailClose"))
        self.assertTrue(1 <= epp.get("portNumber", 9002) <= 65535)

    def test_http_route(self):
        route = self.objs["HTTPRoute/fak-smollm2"]
        self.assertEqual(route["apiVersion"], "gateway.networking.k8s.io/v1")
        refs = [r for rule in route["spec"]["rules"] for r in rule["backendRefs"]]
        self.assertEqual(refs, [{"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": "fak-smollm2"}])

    def test_flags_against_fak_help(self):
        self.check_flags_against_fak_help(self.ctr)
        replica = self.objs["StatefulSet/fak-replica"]["spec"]["template"]["spec"]["containers"][0]
        self.check_flags_against_fak_help(replica)

    def check_flags_against_fak_help(self, ctr):
        fak = ROOT / "target" / "release" / "fak"
        if not fak.exists():
            self.skipTest("target/release/fak not built")
        try:
            p = subprocess.run([str(fak), "serve", "--help"], capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired) as e:
            self.skipTest(f"fak serve --help failed: {e}")
        if p.returncode != 0 or "--model" not in p.stdout:
            self.skipTest("this fak build has no serve command")
        for a in ctr["args"][1:]:
            if str(a).startswith("--"):
                self.assertIn(str(a), p.stdout, f"fak serve --help does not list {a}")


class TestRouterManifest(unittest.TestCase):
    """deploy/vllm-router.yaml: the router's static flags name the
    replicas' stable addresses, their event ports, block size and model
    name exactly as the replicas run them."""

    @classmethod
    def setUpClass(cls):
        objs = manifests()
        cls.sts = objs["StatefulSet/fak-replica"]
        cls.headless = objs["Service/fak-replica"]
        cls.router = objs["Deployment/vllm-router"]
        cls.policy = objs["NetworkPolicy/fak-replica-kv-events"]
        cls.fak = cls.sts["spec"]["template"]["spec"]["containers"][0]
        cls.fak_args = [str(a) for a in cls.fak["args"]]
        cls.r_args = [str(a) for a in cls.router["spec"]["template"]["spec"]["containers"][0]["args"]]

    def values(self, flag: str) -> list[str]:
        """Every value of `flag` (a flag may repeat, and take several values)."""
        out, take = [], False
        for a in self.r_args:
            if a.startswith("--"):
                take = a == flag
            elif take:
                out.append(a)
        return out

    def test_replicas_have_stable_names(self):
        self.assertEqual(self.sts["spec"]["serviceName"], self.headless["metadata"]["name"])
        self.assertEqual(self.headless["spec"]["clusterIP"], "None")
        self.assertEqual(self.fak_args[0], "serve")
        for a in self.fak_args[1:]:
            if a.startswith("-"):
                self.assertIn(a, SERVE_FLAGS)

    def test_router_flags_match_the_replicas(self):
        n = int(self.sts["spec"]["replicas"])
        name, svc = self.sts["metadata"]["name"], self.headless["metadata"]["name"]
        port = flag_value(self.fak_args, "--port")
        hosts = [f"{name}-{i}.{svc}" for i in range(n)]
        workers = [f"http://{h}:{port}" for h in hosts]
        self.assertEqual(self.values("--worker-urls"), workers)
        ev_port = flag_value(self.fak_args, "--kv-events").rsplit(":", 1)[1]
        rp_port = flag_value(self.fak_args, "--kv-events-replay").rsplit(":", 1)[1]
        self.assertEqual(self.values("--kv-event-source"), [f"{w}=tcp://{h}:{ev_port}" for w, h in zip(workers, hosts)])
        self.assertEqual(self.values("--kv-event-replay-source"), [f"{w}=tcp://{h}:{rp_port}" for w, h in zip(workers, hosts)])
        self.assertEqual(self.values("--kv-event-block-size"), [flag_value(self.fak_args, "--block-size")])
        self.assertEqual(self.values("--kv-event-model"), [flag_value(self.fak_args, "--served-model-name")])
        self.assertEqual(self.values("--policy"), ["kv_aware"])
        ports = {p["name"]: p["containerPort"] for p in self.fak["ports"]}
        self.assertEqual(str(ports["kv-events"]), ev_port)
        self.assertEqual(str(ports["kv-replay"]), rp_port)
        self.assertEqual(str(ports["http"]), port)

    def test_only_the_router_reaches_the_events(self):
        spec = self.policy["spec"]
        self.assertEqual(spec["podSelector"]["matchLabels"], self.sts["spec"]["selector"]["matchLabels"])
        router_labels = self.router["spec"]["template"]["metadata"]["labels"]
        for rule in spec["ingress"]:
            rule_ports = {int(p["port"]) for p in rule["ports"]}
            if rule_ports & {5557, 5558}:
                self.assertEqual(len(rule["from"]), 1)
                for k, v in rule["from"][0]["podSelector"]["matchLabels"].items():
                    self.assertEqual(router_labels.get(k), v)


if __name__ == "__main__":
    unittest.main()
