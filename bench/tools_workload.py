"""The tool-calling agent workload of ``bench/tools_bench.py``: declared
tools (OpenAI function definitions), the user tasks that should lead to a
call, the canned tool results, and a validator for the JSON-schema features
the tools use.

Five scenarios, two tools each; their parameter schemas use a nested object
(``search_flights.passengers``, ``create_event.start``), enums (units,
cabins, currencies), number bounds (``minimum``/``maximum`` on integers and
numbers), required fields, arrays (``create_event.attendees`` of strings,
``add_to_cart.items`` of objects, with ``minItems``/``maxItems``), string
lengths and ``additionalProperties: false``. Task ``i`` of a run is drawn
from scenario ``i % 5`` with parameters from ``random.Random(seed * 1000003
+ i)``, so a run's prompts depend only on ``--seed`` and each task names the
tool it expects.

Only the standard library; tested by ``bench/test_tools_bench.py``.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from typing import Any

SYSTEM = "You are a helpful assistant. When a tool can do what the user asks, call it."


def _fn(name: str, description: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": params}}


def _obj(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


STR = {"type": "string", "minLength": 1, "maxLength": 80}
UNITS = ["celsius", "fahrenheit"]
CABINS = ["economy", "premium_economy", "business", "first"]
CURRENCIES = ["USD", "EUR", "GBP", "JPY", "CHF"]

TOOLS: dict[str, list[dict[str, Any]]] = {
    "weather": [
        _fn(
            "get_weather",
            "Weather forecast for a city.",
            _obj(
                {
                    "location": STR,
                    "unit": {"type": "string", "enum": UNITS},
                    "days": {"type": "integer", "minimum": 1, "maximum": 7},
                },
                ["location", "unit"],
            ),
        ),
        _fn("get_air_quality", "Current air quality index of a city.", _obj({"location": STR}, ["location"])),
    ],
    "travel": [
        _fn(
            "search_flights",
            "Search flights between two cities on a date (YYYY-MM-DD).",
            _obj(
                {
                    "origin": STR,
                    "destination": STR,
                    "date": STR,
                    "passengers": _obj(
                        {
                            "adults": {"type": "integer", "minimum": 1, "maximum": 9},
                            "children": {"type": "integer", "minimum": 0, "maximum": 8},
                        },
                        ["adults"],
                    ),
                    "cabin": {"type": "string", "enum": CABINS},
                },
                ["origin", "destination", "date", "passengers"],
            ),
        ),
        _fn(
            "book_hotel",
            "Book a hotel room.",
            _obj(
                {
                    "city": STR,
                    "check_in": STR,
                    "nights": {"type": "integer", "minimum": 1, "maximum": 30},
                },
                ["city", "check_in", "nights"],
            ),
        ),
    ],
    "calendar": [
        _fn(
            "create_event",
            "Create a calendar event.",
            _obj(
                {
                    "title": STR,
                    "start": _obj({"date": STR, "time": STR}, ["date", "time"]),
                    "duration_minutes": {"type": "number", "minimum": 5, "maximum": 480},
                    "attendees": {"type": "array", "items": STR, "minItems": 1, "maxItems": 10},
                },
                ["title", "start", "duration_minutes", "attendees"],
            ),
        ),
        _fn("list_events", "List the events of a day (YYYY-MM-DD).", _obj({"date": STR}, ["date"])),
    ],
    "shop": [
        _fn(
            "add_to_cart",
            "Add products to the shopping cart.",
            _obj(
                {
                    "items": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": 10,
                        "items": _obj(
                            {"sku": STR, "quantity": {"type": "integer", "minimum": 1, "maximum": 100}},
                            ["sku", "quantity"],
                        ),
                    }
                },
                ["items"],
            ),
        ),
        _fn("apply_coupon", "Apply a coupon code to the cart.", _obj({"code": STR}, ["code"])),
    ],
    "finance": [
        _fn(
            "convert_currency",
            "Convert an amount of money between currencies.",
            _obj(
                {
                    "amount": {"type": "number", "minimum": 0},
                    "from_currency": {"type": "string", "enum": CURRENCIES},
                    "to_currency": {"type": "string", "enum": CURRENCIES},
                },
                ["amount", "from_currency", "to_currency"],
            ),
        ),
        _fn("get_stock_price", "Latest price of a stock ticker.", _obj({"ticker": STR}, ["ticker"])),
    ],
}
SCENARIOS = tuple(TOOLS)

CITIES = ["Paris", "Tokyo", "Lisbon", "Nairobi", "Toronto", "Oslo", "Lima", "Seoul", "Cairo", "Denver"]
NAMES = ["Alice", "Bob", "Chen", "Dana", "Emil", "Fatima", "Goran", "Hana"]
TITLES = ["Budget review", "Design sync", "Hiring panel", "Release retro", "Team lunch"]

# What each tool "returns" to the final-answer turn (the content of the
# `role: tool` message).
RESULTS: dict[str, dict[str, Any]] = {
    "get_weather": {"forecast": [{"day": 1, "high": 21, "low": 12, "sky": "sunny"}]},
    "get_air_quality": {"aqi": 42, "category": "good"},
    "search_flights": {"flights": [{"flight": "FK 101", "depart": "08:15", "price_usd": 412}]},
    "book_hotel": {"confirmation": "H-5521", "total_usd": 690},
    "create_event": {"event_id": "evt_77", "status": "created"},
    "list_events": {"events": []},
    "add_to_cart": {"cart_items": 2, "subtotal_usd": 58.5},
    "apply_coupon": {"applied": True, "discount_pct": 10},
    "convert_currency": {"converted": 1234.56, "rate": 1.08},
    "get_stock_price": {"price": 187.3, "currency": "USD"},
}


@dataclass(frozen=True)
class Task:
    """One agent's job: its tools, the user's request, the tool expected."""

    scenario: str
    user: str
    expected_tool: str

    @property
    def tools(self) -> list[dict[str, Any]]:
        return TOOLS[self.scenario]


def make_task(seed: int, i: int) -> Task:
    """Task ``i`` of a run with ``seed`` (scenario ``i % 5``)."""
    rng = random.Random(seed * 1000003 + i)
    sc = SCENARIOS[i % len(SCENARIOS)]
    date = f"2027-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    if sc == "weather":
        city, days, unit = rng.choice(CITIES), rng.randint(2, 6), rng.choice(UNITS)
        return Task(sc, f"What will the weather be in {city} over the next {days} days? Give me {unit}.", "get_weather")
    if sc == "travel":
        a, b = rng.sample(CITIES, 2)
        adults, kids, cabin = rng.randint(1, 4), rng.randint(0, 3), rng.choice(CABINS)
        who = f"{adults} adults" + (f" and {kids} children" if kids else "")
        return Task(sc, f"Find {cabin.replace('_', ' ')} flights from {a} to {b} on {date} for {who}.", "search_flights")
    if sc == "calendar":
        mins, title = rng.choice([15, 30, 45, 60, 90]), rng.choice(TITLES)
        people = rng.sample(NAMES, rng.randint(1, 3))
        hour = rng.randint(8, 17)
        return Task(
            sc,
            f"Schedule a {mins}-minute meeting called '{title}' on {date} at {hour}:00 with {', '.join(people)}.",
            "create_event",
        )
    if sc == "shop":
        q1, q2 = rng.randint(1, 5), rng.randint(1, 5)
        s1, s2 = f"SKU-{rng.randint(100, 999)}", f"SKU-{rng.randint(100, 999)}"
        return Task(sc, f"Add {q1} of product {s1} and {q2} of product {s2} to my cart.", "add_to_cart")
    amount = rng.choice([25, 80, 150, 1200, 99.5])
    a, b = rng.sample(CURRENCIES, 2)
    return Task(sc, f"How much is {amount} {a} in {b}?", "convert_currency")


# ------------------------------------------------------------ schema check


def _type_ok(value: Any, t: str) -> bool:
    if t == "object":
        return isinstance(value, dict)
    if t == "array":
        return isinstance(value, list)
    if t == "string":
        return isinstance(value, str)
    if t == "boolean":
        return isinstance(value, bool)
    if t == "integer":
        # JSON 3.0 is an integer to JSON Schema; a bool is not a number.
        if isinstance(value, bool):
            return False
        return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value) and value.is_integer())
    if t == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if t == "null":
        return value is None
    raise ValueError(f"schema type {t!r} is not supported by this validator")


SUPPORTED = {
    "type", "properties", "required", "additionalProperties", "enum", "minimum", "maximum",
    "items", "minItems", "maxItems", "minLength", "maxLength", "description",
}


def validate(value: Any, schema: dict[str, Any], path: str = "$") -> list[str]:
    """The violations of ``value`` against ``schema`` (empty: valid), each
    as ``"<json path>: <what>"``. Covers the keywords in ``SUPPORTED``; any
    other keyword in the schema is a ``ValueError`` (so a tool added with a
    keyword this does not check cannot pass silently)."""
    unknown = set(schema) - SUPPORTED
    if unknown:
        raise ValueError(f"schema keywords not supported: {sorted(unknown)}")
    errs: list[str] = []
    t = schema.get("type")
    if t is not None and not _type_ok(value, t):
        return [f"{path}: expected {t}, got {type(value).__name__}"]
    if "enum" in schema and value not in schema["enum"]:
        errs.append(f"{path}: {value!r} not in enum {schema['enum']}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errs.append(f"{path}: {value} < minimum {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errs.append(f"{path}: {value} > maximum {schema['maximum']}")
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            errs.append(f"{path}: shorter than {schema['minLength']}")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errs.append(f"{path}: longer than {schema['maxLength']}")
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            errs.append(f"{path}: fewer than {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errs.append(f"{path}: more than {schema['maxItems']} items")
        if "items" in schema:
            for k, v in enumerate(value):
                errs += validate(v, schema["items"], f"{path}[{k}]")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for r in schema.get("required", []):
            if r not in value:
                errs.append(f"{path}: missing required {r!r}")
        for k, v in value.items():
            if k in props:
                errs += validate(v, props[k], f"{path}.{k}")
            elif schema.get("additionalProperties", True) is False:
                errs.append(f"{path}: unexpected property {k!r}")
    return errs


def tool_result(name: str) -> str:
    """The content of the ``role: tool`` message answering a call of ``name``."""
    return json.dumps(RESULTS.get(name, {"ok": True}))
