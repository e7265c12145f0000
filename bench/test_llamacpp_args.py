"""Tests of bench/peers/llamacpp.py's argument handling (no llama.cpp needed).

Run from the repository root: ``python3 -m unittest bench/test_llamacpp_args.py``.
Standard library only: the peer module loads llama-cpp-python lazily.
"""

from __future__ import annotations

import contextlib
import io
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))
import common  # noqa: E402
import llamacpp  # noqa: E402
import workloads as wl  # noqa: E402

FLEET = ["fleet", "--model", "m.gguf", "--threads", "2", "--kv", "per-seq", "--prefix", "64", "--turns", "2", "--agents", "2", "--decode", "4", "--result", "8"]
BATCHED = ["batched", "--model", "m.gguf", "--threads", "2", "--kv", "unified"]


def parse(argv: list[str]) -> object:
    return llamacpp.build_parser().parse_args(argv)


class Flags(unittest.TestCase):
    def test_defaults_are_the_library_defaults(self) -> None:
        for argv in (FLEET, BATCHED):
            a = parse(argv)
            self.assertEqual((a.flash_attn, a.type_kv), ("auto", "f16"))
            self.assertEqual(llamacpp.context_settings(a.flash_attn, a.type_kv), llamacpp.DEFAULT_SETTINGS)

    def test_every_setting_parses_on_both_subcommands(self) -> None:
        for argv in (FLEET, BATCHED):
            for fa in ("auto", "on", "off"):
                for ty in ("f16", "q8_0"):
                    a = parse(argv + ["--flash-attn", fa, "--type-kv", ty])
                    self.assertEqual((a.flash_attn, a.type_kv), (fa, ty))

    def test_unknown_values_are_rejected(self) -> None:
        for bad in (["--flash-attn", "maybe"], ["--type-kv", "q4_0"]):
            with contextlib.redirect_stderr(io.StringIO()), self.assertRaises(SystemExit):
                parse(FLEET + bad)

    def test_llama_cpp_values(self) -> None:
        # enum llama_flash_attn_type and enum ggml_type of llama.cpp
        self.assertEqual(llamacpp.FLASH_ATTN, {"auto": -1, "on": 1, "off": 0})
        self.assertEqual(llamacpp.KV_TYPES, {"f16": 1, "q8_0": 8})

    def test_quantized_v_needs_flash_attention(self) -> None:
        with self.assertRaises(common.PeerError) as e:
            llamacpp.context_settings("off", "q8_0")
        self.assertIn("needs flash attention", str(e.exception))
        self.assertEqual(llamacpp.context_settings("on", "q8_0"), {"flash_attn": "on", "type_kv": "q8_0"})
        self.assertEqual(llamacpp.context_settings("off", "f16"), {"flash_attn": "off", "type_kv": "f16"})
        with self.assertRaises(common.PeerError):
            llamacpp.context_settings("yes", "f16")


class Checkpoints(unittest.TestCase):
    def test_fleet_key_has_n_ubatch_equal_n_batch_and_the_settings(self) -> None:
        shape = wl.FleetShape(64, 2, 2, 4, 8)
        with tempfile.TemporaryDirectory() as d:
            a = parse(FLEET + ["--checkpoint", d])
            ck = llamacpp.fleet_checkpoint(a, shape, "ab", "avx2", llamacpp.DEFAULT_SETTINGS)
            assert ck is not None
            self.assertEqual(ck.key["n_ubatch"], ck.key["n_batch"])
            self.assertEqual(ck.key["n_batch"], llamacpp.fleet_n_batch(shape))
            # default settings: the key and name of earlier checkpoints
            self.assertNotIn("flash_attn", ck.key)
            self.assertTrue(ck.json_path.name.startswith("fleet-per-seq-P64-"), ck.json_path.name)
            off = llamacpp.context_settings("off", "f16")
            ck2 = llamacpp.fleet_checkpoint(a, shape, "ab", "avx2", off)
            assert ck2 is not None
            self.assertEqual((ck2.key["flash_attn"], ck2.key["type_kv"]), ("off", "f16"))
            self.assertTrue(ck2.json_path.name.startswith("fleet-per-seq-fa-off-kv-f16-P64-"), ck2.json_path.name)

    def test_settings_label(self) -> None:
        self.assertEqual(llamacpp.settings_label("unified", llamacpp.DEFAULT_SETTINGS), "unified")
        self.assertEqual(llamacpp.settings_label("unified", {"flash_attn": "on", "type_kv": "q8_0"}), "unified-fa-on-kv-q8_0")


if __name__ == "__main__":
    unittest.main()
