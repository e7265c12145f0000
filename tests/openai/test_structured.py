"""``response_format`` through the official ``openai`` client: outputs of
seeded random JSON schemas (nested objects, arrays, enums, bounded
integers, required fields, patterns) parse and validate under the
``jsonschema`` package; ``json_object`` gives an object; a schema that does
not compile is a 400 (``openai.BadRequestError``) naming response_format.
"""

from __future__ import annotations

import json
import random
import unittest

import jsonschema
import openai

from test_openai_client import SERVED_NAME, FakServer, client

MESSAGES = [{"role": "user", "content": "Reply with a JSON object."}]


def leaf(r: random.Random) -> dict:
    k = r.randrange(6)
    if k == 0:
        lo = r.randrange(-20, 30)
        return {"type": "integer", "minimum": lo, "maximum": lo + 1 + r.randrange(200)}
    if k == 1:
        return {"type": "string", "maxLength": 1 + r.randrange(12)}
    if k == 2:
        return {"type": "string", "pattern": "^[a-z]{2,6}$"}
    if k == 3:
        return {"enum": ["red", "green", "blue", 3, None]}
    if k == 4:
        return {"type": "boolean"}
    return {"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 1, "maxItems": 3}


def schema(r: random.Random, depth: int) -> dict:
    if depth >= 2 or r.random() < 0.5:
        return leaf(r)
    if r.random() < 0.5:
        return {"type": "array", "items": schema(r, depth + 1), "maxItems": 1 + r.randrange(3)}
    return obj(r, depth + 1)


def obj(r: random.Random, depth: int) -> dict:
    n = 1 + r.randrange(4)
    props = {f"k{i}_{r.choice(['id', 'name', 'tags', 'size'])}": schema(r, depth) for i in range(n)}
    names = list(props)
    required = [names[0]] + [k for k in names[1:] if r.random() < 0.5]
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


class TestStructuredOutputs(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = FakServer().start()
        cls.client = client(cls.server)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_random_schemas_validate(self):
        for seed in range(24):
            s = obj(random.Random(seed), 0)
            r = self.client.chat.completions.create(
                model=SERVED_NAME,
                messages=MESSAGES,
                max_tokens=300,
                temperature=0.7,
                seed=seed,
                response_format={"type": "json_schema", "json_schema": {"name": f"s{seed}", "schema": s, "strict": True}},
            )
            c = r.choices[0]
            self.assertEqual(c.finish_reason, "stop", f"seed {seed}: {c.message.content!r}")
            jsonschema.validate(json.loads(c.message.content), s)

    def test_json_object(self):
        r = self.client.chat.completions.create(
            model=SERVED_NAME, messages=MESSAGES, max_tokens=200, temperature=0, response_format={"type": "json_object"}
        )
        if r.choices[0].finish_reason == "stop":
            self.assertIsInstance(json.loads(r.choices[0].message.content), dict)
        else:
            self.assertTrue(r.choices[0].message.content.lstrip().startswith("{"))

    def test_uncompilable_schema_is_400(self):
        bad = {"type": "integer", "minimum": 5, "maximum": 1}
        with self.assertRaises(openai.BadRequestError) as cm:
            self.client.chat.completions.create(
                model=SERVED_NAME,
                messages=MESSAGES,
                max_tokens=4,
                response_format={"type": "json_schema", "json_schema": {"name": "bad", "schema": bad}},
            )
        self.assertEqual(cm.exception.status_code, 400)
        self.assertIn("response_format", str(cm.exception.body))


if __name__ == "__main__":
    unittest.main()
