#!/usr/bin/env python3
"""Cases for gizml::grammar (tests/grammar): JSON Schemas, and texts labelled by the `json`
module and the `jsonschema` package (PyPI), not by us.

Each schema gets documents made by a generator that follows the schema, written in the schema's
property order as json.dumps writes them (compact, default and indented): our grammar must
accept every one that jsonschema calls valid ("canonical"). Then mutations of them (cut short,
a character changed, a key dropped or added, a value of another type): every one that json or
jsonschema rejects, our grammar must reject too. Writes tests/data/grammar/cases.json.
    .venv/bin/python tests/reference/make_grammar_fixtures.py
"""
import json
import random
from pathlib import Path

import jsonschema

OUT = Path(__file__).resolve().parent.parent / "data" / "grammar" / "cases.json"

SCHEMAS = [
    {"type": "object",
     "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                    "email": {"type": "string", "maxLength": 12}, "tags": {"type": "array", "items": {"type": "string"}}},
     "required": ["name", "age"], "additionalProperties": False},
    {"type": "object",
     "properties": {"kind": {"enum": ["circle", "square", 3, None]}, "size": {"type": "number"},
                    "filled": {"type": "boolean"}, "note": {"type": ["string", "null"]}},
     "required": ["kind", "size", "filled", "note"]},
    {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 4},
    {"anyOf": [{"type": "string", "minLength": 2, "maxLength": 5}, {"type": "integer"}, {"const": {"a": [1, 2]}}]},
    {"$defs": {"node": {"type": "object", "properties": {"value": {"type": "integer"},
                                                       "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                        "required": ["value", "children"], "additionalProperties": False}},
     "$ref": "#/$defs/node"},
    {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"],
     "additionalProperties": {"type": "number"}},
    {"type": "object", "title": "any members", "description": "an object of anything"},
    {"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"type": "null"}, "c": {"type": "string"}},
     "additionalProperties": False},
]

rng = random.Random(7)
WORDS = ["", "a", "hé", "日本", "x\"y", "tab\there", "back\\slash", "emoji 😀", "line\nbreak", "ok"]


def any_value(depth=0):
    kinds = ["str", "int", "num", "bool", "null"] + (["obj", "arr"] if depth < 2 else [])
    k = rng.choice(kinds)
    if k == "str":
        return rng.choice(WORDS)
    if k == "int":
        return rng.randint(-10**6, 10**6)
    if k == "num":
        return round(rng.uniform(-1e3, 1e3), rng.randint(0, 6))
    if k == "bool":
        return rng.random() < 0.5
    if k == "null":
        return None
    if k == "obj":
        return {rng.choice(["k", "name", "é", "z z"]) + str(i): any_value(depth + 1) for i in range(rng.randint(0, 3))}
    return [any_value(depth + 1) for _ in range(rng.randint(0, 3))]


def resolve(schema, root):
    while "$ref" in schema:
        ref = schema["$ref"]
        schema = root if ref == "#" else root[ref.split("/")[1]][ref.split("/")[2]]
    return schema


def instance(schema, root, depth=0):
    schema = resolve(schema, root)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return rng.choice(schema["enum"])
    if "anyOf" in schema:
        return instance(rng.choice(schema["anyOf"]), root, depth)
    t = schema.get("type")
    if t is None:
        t = "object" if "properties" in schema else None
    if isinstance(t, list):
        t = rng.choice(t)
    if t == "string":
        lo, hi = schema.get("minLength", 0), schema.get("maxLength", 8)
        return "".join(rng.choice("abcé日\"\\\n") for _ in range(rng.randint(lo, hi)))
    if t == "integer":
        return rng.randint(-10**9, 10**9)
    if t == "number":
        return rng.choice([rng.randint(-99, 99), round(rng.uniform(-1e4, 1e4), rng.randint(1, 8)), 1.5e-7, -2e20])
    if t == "boolean":
        return rng.random() < 0.5
    if t == "null":
        return None
    if t == "array":
        lo, hi = schema.get("minItems", 0), schema.get("maxItems", 3 if depth < 2 else 0)
        return [instance(schema.get("items", {}), root, depth + 1) for _ in range(rng.randint(lo, max(lo, hi)))]
    if t == "object":
        props, required = schema.get("properties", {}), set(schema.get("required", []))
        out = {}
        for name, sub in props.items():
            if name in required or rng.random() < 0.6:
                out[name] = instance(sub, root, depth + 1)
        extra = schema.get("additionalProperties", not props)
        if extra is not False and rng.random() < 0.5:
            sub = {} if extra is True else extra
            for i in range(rng.randint(1, 2)):
                out["extra" + str(i)] = instance(sub, root, depth + 1) if sub else any_value(depth + 1)
        return out
    return any_value(depth)


def writings(value):
    return [json.dumps(value, ensure_ascii=False, separators=(",", ":")),
            json.dumps(value, ensure_ascii=False),
            json.dumps(value, ensure_ascii=True, indent=2)]


def mutations(text):
    out = []
    if len(text) > 1:
        out.append(text[: rng.randint(1, len(text) - 1)])  # cut short
    for _ in range(4):
        i = rng.randrange(len(text))
        out.append(text[:i] + rng.choice("{}[],:\"0a- tn\\") + text[i + 1:])
    out += [text + ",", text + "}", "," + text, text.replace(":", "", 1), text.replace(",", ",,", 1), "x" + text]
    return out


def valid(schema, text):
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return False
    try:
        jsonschema.validate(value, schema)
        return True
    except jsonschema.ValidationError:
        return False


def main():
    cases = []
    for schema in SCHEMAS:
        docs = []
        for _ in range(5):
            value = instance(schema, schema)
            for text in writings(value):
                assert valid(schema, text), (schema, text)
                docs.append({"text": text, "valid": True, "canonical": True})
                for m in mutations(text):
                    docs.append({"text": m, "valid": valid(schema, m), "canonical": False})
        # Values of other schemas: mostly wrong here.
        for other in SCHEMAS:
            if other is not schema:
                text = json.dumps(instance(other, other), ensure_ascii=False)
                docs.append({"text": text, "valid": valid(schema, text), "canonical": False})
        cases.append({"schema": schema, "documents": docs})
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(cases, ensure_ascii=False, indent=0) + "\n")
    print(OUT, sum(len(c["documents"]) for c in cases), "documents")


if __name__ == "__main__":
    main()
