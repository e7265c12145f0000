"""Unit tests of bench/spec.py's report (no server needed)."""

import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import spec  # noqa: E402


def row(cfg, wl, tps, sha):
    return {"config": cfg, "workload": wl, "tokens_per_s": tps, "sha256": sha}


class TestSummary(unittest.TestCase):
    def test_ratios_and_digests(self):
        rows = [
            row("fak-off", "edit", 10.0, "a"),
            row("fak-off", "edit", 12.0, "a"),
            row("fak-off", "edit", 11.0, "a"),
            row("fak-auto", "edit", 30.0, "a"),
            row("fak-off", "edit+prediction", 20.0, "a"),
            row("fak-lookup", "edit", 25.0, "b"),
            row("llama-plain", "edit", 9.0, "c"),
        ]
        s = spec.summarize(rows)
        self.assertAlmostEqual(s["edit"]["fak-auto"]["vs_fak_off_plain"], 30.0 / 11.0)
        self.assertTrue(s["edit"]["fak-auto"]["same_as_fak_off"])
        # A fak configuration with other ids is flagged; a peer is not judged.
        self.assertFalse(s["edit"]["fak-lookup"]["same_as_fak_off"])
        self.assertIsNone(s["edit"]["llama-plain"]["same_as_fak_off"])
        # With a prediction, the baseline is plain fak on the same request
        # without one.
        self.assertAlmostEqual(s["edit+prediction"]["fak-off"]["vs_fak_off_plain"], 20.0 / 11.0)
        self.assertTrue(s["edit+prediction"]["fak-off"]["same_as_fak_off"])

    def test_workloads_have_the_file(self):
        src = spec.edit_source()
        w = spec.workloads(src)
        self.assertIn(src, w["edit"]["bodies"][0]["messages"][0]["content"])
        self.assertIn(src, w["edit+prediction"]["bodies"][0]["prediction"]["content"])
        self.assertTrue(w["edit+prediction"]["fak_only"])

    def test_tool_and_fleet_workloads(self):
        w = spec.workloads(spec.edit_source())
        tools = w["tools"]["bodies"]
        self.assertEqual(len(tools), 5)
        self.assertTrue(all(b["tool_choice"] == "required" and b["tools"] for b in tools))
        # One scenario per turn: five different tool sets.
        names = {b["tools"][0]["function"]["name"] for b in tools}
        self.assertEqual(len(names), 5)
        fleet = w["fleet"]["bodies"]
        self.assertEqual(len(fleet), 6)
        self.assertEqual({b["tools"][0]["function"]["name"] for b in fleet}, {"get_weather"})
        self.assertEqual(len({b["messages"][1]["content"] for b in fleet}), 6, "each agent its own task")

    def test_acceptance_per_configuration(self):
        rows = [
            {**row("fak-off", "chat", 10.0, "a"), "draft_tokens": None},
            {**row("fak-lookup", "chat", 12.0, "a"), "draft_tokens": 40.0, "accepted_draft_tokens": 10.0},
            {**row("fak-lookup", "chat", 12.0, "a"), "draft_tokens": 60.0, "accepted_draft_tokens": 40.0},
        ]
        s = spec.summarize(rows)
        self.assertAlmostEqual(s["chat"]["fak-lookup"]["acceptance"], 0.5)
        self.assertIsNone(s["chat"]["fak-off"]["acceptance"])

    def test_decode_starts_at_the_engines_first_token(self):
        # A tool call: 38 tokens, the first delta after the name (2.5 s),
        # the engine's first token at 2.0 s.
        r = {"seconds": 3.0, "first_token_seconds": 2.5, "completion_tokens": 38, "deltas": 21}
        self.assertEqual(spec.decode_span(r, 2.0), (1.0, 37))
        # A peer: its first delta; too few deltas, not timed.
        self.assertEqual(spec.decode_span(r, None), (0.5, 37))
        self.assertIsNone(spec.decode_span({**r, "deltas": 3}, None))
        self.assertIsNone(spec.decode_span({**r, "completion_tokens": 1}, 2.0))

    def test_draft_configs_name_the_model(self):
        d = spec.draft_configs(Path("models/d.gguf"))
        self.assertIn("models/d.gguf", d["fak-draft"][1])
        self.assertIn("-md", d["llama-draft"][1])


if __name__ == "__main__":
    unittest.main()
