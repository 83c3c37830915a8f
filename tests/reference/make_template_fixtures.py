#!/usr/bin/env python3
"""Golden renderings of chat templates, made with Python jinja2 exactly as transformers renders them
(tests/llm/test_template_reference.cpp checks gizml::llm::ChatTemplate against them, byte for byte).

Run:  .venv/bin/python tests/reference/make_template_fixtures.py
Writes tests/data/templates/conversations.json (the render contexts, in order) and one
tests/data/templates/<template>.json per template: {"template": file, "cases": [{"conversation":
name, "output": text} or {"conversation": name, "error": message, "raised": true when it came from
raise_exception}]}. Templates: /work/shared/data/templates/*.jinja and the chat_template fields of
/work/shared/data/tokenizers/*/tokenizer_config.json (as tokenizer-<name>, unless a duplicate).
No case uses strftime_now's clock, so the output is deterministic.
"""
import json
import pathlib

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "data"
OUT = ROOT / "tests" / "data" / "templates"


# ---- the environment of transformers' _compile_jinja_template
def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(format):
    raise AssertionError("fixtures must not depend on the clock")


def make_env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


# ---- the battery
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city.\n",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name, e.g. Paris"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Unit"}},
        "required": ["city"]}}}
SEARCH = {"type": "function", "function": {
    "name": "search", "description": "Search the web.",
    "parameters": {"type": "object", "properties": {
        "query": {"type": "string"},
        "filters": {"type": "object", "properties": {"site": {"type": "string"}, "year": {"type": "integer", "minimum": 1990}},
                    "additionalProperties": False},
        "limit": {"type": "integer", "default": 10},
        "tags": {"type": "array", "items": {"type": "string"}}},
        "required": ["query"]},
    "return": {"type": "array", "description": "results"}}}
CALC = {"type": "function", "function": {
    "name": "calc", "description": "Évalue une expression — 计算",
    "parameters": {"type": "object", "properties": {"expr": {"type": "string", "description": "e.g. \"2*(3+4)\""}}}}}
BARE = {"name": "lookup", "description": "  Look up a key.  ", "parameters": {
    "type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}}

SYS = {"role": "system", "content": "You are a helpful assistant."}


def user(text):
    return {"role": "user", "content": text}


def assistant(text, **extra):
    return {"role": "assistant", "content": text, **extra}


def call(name, arguments, id=None, wrap=True):
    fn = {"name": name, "arguments": arguments}
    c = {"type": "function", "function": fn} if wrap else dict(fn)
    if id is not None:
        c["id"] = id
    return c


def tool(content, id=None, name=None):
    m = {"role": "tool", "content": content}
    if id is not None:
        m["tool_call_id"] = id
    if name is not None:
        m["name"] = name
    return m


TOKENS = {"bos_token": "<s>", "eos_token": "</s>"}

CONVERSATIONS = [
    ("user_only", [user("Hello!")], None, True, TOKENS),
    ("user_only_no_prompt", [user("Hello!")], None, False, TOKENS),
    ("system_user", [SYS, user("What is 2+2?")], None, True, TOKENS),
    ("system_user_assistant", [SYS, user("What is 2+2?"), assistant("4")], None, False, TOKENS),
    ("multi_turn", [SYS, user("Hi"), assistant("Hello! How can I help?"), user("Tell me a joke."),
                    assistant("Why did the chicken cross the road?"), user("Why?")], None, True, TOKENS),
    ("no_tokens", [user("Hi"), assistant("Hello"), user("Bye")], None, True, {}),
    ("tools_user", [user("Weather in Paris?")], [WEATHER, SEARCH], True, TOKENS),
    ("tools_system_user", [SYS, user("Weather in Paris?")], [WEATHER], True, TOKENS),
    ("tool_call_dict", [SYS, user("Weather in Paris?"),
                        assistant("", tool_calls=[call("get_weather", {"city": "Paris", "unit": "celsius"}, "call00001")]),
                        tool('{"temperature": 21.5, "sky": "clear"}', "call00001", "get_weather"),
                        assistant("It is 21.5 °C and clear in Paris.")], [WEATHER], False, TOKENS),
    ("tool_call_string_args", [user("Weather in Oslo?"),
                               assistant("", tool_calls=[call("get_weather", '{"city": "Oslo"}', "call00002")]),
                               tool("-3 and snowing", "call00002")], [WEATHER], True, TOKENS),
    ("tool_call_nested_args", [user("Search for llamas"),
                               assistant(None, tool_calls=[call("search", {"query": "llamas", "filters": {"site": "wikipedia.org", "year": 2024},
                                                                            "limit": 5, "tags": ["animals", "andes"], "exact": True,
                                                                            "score": 0.75, "tiny": 1e-05, "big": 1e20, "whole": 3.0,
                                                                            "nothing": None, "neg": -42}, "call00003")]),
                               tool('[{"title": "Llama"}]', "call00003")], [SEARCH], True, TOKENS),
    ("parallel_tool_calls", [user("Weather in Paris and Rome?"),
                             assistant("Let me check both.", tool_calls=[call("get_weather", {"city": "Paris"}, "call00004"),
                                                                         call("get_weather", {"city": "Rome"}, "call00005")]),
                             tool("18", "call00004"), tool("25", "call00005"),
                             assistant("Paris 18, Rome 25.")], [WEATHER], False, TOKENS),
    ("three_tool_responses", [SYS, user("Compute things"),
                              assistant("", tool_calls=[call("calc", {"expr": "1+1"}, "call00006")]),
                              tool("2", "call00006"), tool("4", "call00006"), tool("6", "call00006"),
                              user("Thanks"), assistant("You're welcome.")], [CALC], True, TOKENS),
    ("reasoning_content", [user("Is 17 prime?"),
                           assistant("Yes, 17 is prime.", reasoning_content="Check divisors up to 4: none divide 17.")],
     None, False, TOKENS),
    ("reasoning_in_history", [user("Is 17 prime?"), assistant("Yes.", reasoning_content="No divisor up to 4."),
                              user("And 21?")], None, True, TOKENS),
    ("think_in_content", [user("Q?"), assistant("<think>\nLet me think.\n</think>\n\nThe answer is 42.")], None, False, TOKENS),
    ("think_in_old_content", [user("Q1"), assistant("<think>old thoughts</think>A1"), user("Q2")], None, True, TOKENS),
    ("reasoning_with_tool_calls", [user("Weather in Paris?"),
                                   assistant("", reasoning_content="I should call the tool.",
                                             tool_calls=[call("get_weather", {"city": "Paris"}, "call00007")]),
                                   tool("sunny", "call00007"),
                                   assistant("Sunny.", reasoning_content="The tool said sunny.")], [WEATHER], False, TOKENS),
    ("reasoning_none", [user("Hi"), assistant("Hello", reasoning_content=None)], None, False, TOKENS),
    ("thinking_off", [user("Quick answer: 3*7?")], None, True, {**TOKENS, "enable_thinking": False}),
    ("thinking_on", [user("Quick answer: 3*7?")], None, True, {**TOKENS, "enable_thinking": True}),
    ("thinking_off_tools", [SYS, user("Weather?")], [WEATHER], True, {**TOKENS, "enable_thinking": False}),
    ("unicode", [{"role": "system", "content": "Réponds en français 🇫🇷"}, user("こんにちは — ¿qué tal? Ελληνικά ✓ 😀"),
                 assistant("مرحبا 👋 — naïve café"), user("Ünïcödé\u00a0test")], None, True, TOKENS),
    ("unicode_tool_args", [user("Weather in Zürich?"),
                           assistant("", tool_calls=[call("get_weather", {"city": "Zürich 🏔", "note": "温度"}, "call00008")]),
                           tool("Sonnig ☀", "call00008")], [WEATHER, CALC], True, TOKENS),
    ("escapes", [user("Quotes \" and ' and backslash \\ and\ttab\nnewline \u0001 control"),
                 assistant("", tool_calls=[call("calc", {"expr": "a \"quoted\" \\ path\nline\u0007"}, "call00009")]),
                 tool("ok", "call00009")], [CALC], True, TOKENS),
    ("empty_content", [user(""), assistant(""), user("  ")], None, True, TOKENS),
    ("whitespace_content", [{"role": "system", "content": "  padded system  \n"}, user("\n  hello  \n"),
                            assistant("  spaced  ")], None, False, TOKENS),
    ("system_in_middle", [user("Hi"), {"role": "system", "content": "Late system."}, user("Again")], None, True, TOKENS),
    ("not_alternating", [user("One"), user("Two")], None, True, TOKENS),
    ("assistant_first", [assistant("I start."), user("OK")], None, True, TOKENS),
    ("no_user", [SYS, assistant("Hi")], None, True, TOKENS),
    ("empty_messages", [], None, True, TOKENS),
    ("tool_content_dict", [user("Weather?"), assistant("", tool_calls=[call("get_weather", {"city": "Lima"}, "call00010")]),
                           tool({"temperature": 19, "humid": True}, "call00010")], [WEATHER], True, TOKENS),
    ("user_tool_response_text", [user("Start"), assistant("", tool_calls=[call("calc", {"expr": "2"}, "call00011")]),
                                 user("<tool_response>\n2\n</tool_response>")], [CALC], True, TOKENS),
    ("unwrapped_tool_calls", [user("Look up x"), assistant("", tool_calls=[call("lookup", {"key": "x"}, wrap=False)]),
                              tool("42")], [BARE], True, TOKENS),
    ("multimodal_content", [user([{"type": "text", "text": "What is in"}, {"type": "image", "image": "a.png"},
                                  {"type": "text", "text": " this picture?"}])], None, True, TOKENS),
    ("vision_ids", [user([{"type": "image"}, {"type": "video"}, {"type": "text", "text": "Compare."}])],
     None, True, {**TOKENS, "add_vision_id": True}),
    ("prefill_assistant", [user("Write a haiku"), assistant("Autumn moonlight—")], None, False, TOKENS),
    ("llama_options", [SYS, user("Weather?")], [WEATHER], True,
     {**TOKENS, "date_string": "01 Jan 2025", "tools_in_user_message": False}),
    ("llama_builtin_tools", [user("Search the news"), assistant("", tool_calls=[call("brave_search", {"query": "news"})]),
                             {"role": "ipython", "content": "headlines"}], [WEATHER], True,
     {**TOKENS, "builtin_tools": ["brave_search", "wolfram_alpha", "code_interpreter"]}),
    ("long_conversation", [SYS] + [m for i in range(8) for m in (user(f"Question {i}?"), assistant(f"Answer {i}."))]
     + [user("Last question?")], None, True, TOKENS),
    ("tool_call_bad_id", [user("Weather?"), assistant("", tool_calls=[call("get_weather", {"city": "Kyiv"}, "short")]),
                          tool("cold", "short")], [WEATHER], True, TOKENS),
    ("key_order", [user("Order?"), assistant("", tool_calls=[call("search", {"zeta": 1, "alpha": 2, "mid": {"b": 1, "a": 2}},
                                                                   "call00012")]),
                   tool("done", "call00012")], [SEARCH], False, TOKENS),
]


def render(env, source, context):
    try:
        return {"output": env.from_string(source).render(**context)}
    except jinja2.exceptions.TemplateError as e:
        case = {"error": str(e)}
        if type(e) is jinja2.exceptions.TemplateError:
            case["raised"] = True  # raise_exception's message, which gizml must pass through unchanged
        return case
    except (TypeError, ValueError, KeyError, IndexError, AttributeError) as e:
        return {"error": f"{type(e).__name__}: {e}"}


def templates():
    found = {p.name: p.read_text() for p in sorted((SHARED / "templates").glob("*.jinja"))}
    for config in sorted((SHARED / "tokenizers").glob("*/tokenizer_config.json")):
        source = json.loads(config.read_text()).get("chat_template")
        if isinstance(source, str) and source not in found.values():
            found[f"tokenizer-{config.parent.name}.jinja"] = source
    return found


def main():
    env = make_env()
    OUT.mkdir(parents=True, exist_ok=True)
    contexts = []
    for name, messages, tools, add_generation_prompt, extra in CONVERSATIONS:
        context = {"messages": messages}
        if tools:
            context["tools"] = tools
        context["add_generation_prompt"] = add_generation_prompt
        context.update(extra)
        contexts.append({"name": name, "context": context})
    # Round-trip through JSON so Python renders exactly what the C++ test reads.
    text = json.dumps(contexts, ensure_ascii=False, indent=1)
    contexts = json.loads(text)
    (OUT / "conversations.json").write_text(text + "\n")
    total = errors = 0
    for file, source in templates().items():
        cases = []
        for c in contexts:
            case = {"conversation": c["name"], **render(env, source, c["context"])}
            errors += "error" in case
            cases.append(case)
        total += len(cases)
        doc = {"template": file, "cases": cases}
        (OUT / (file.removesuffix(".jinja") + ".json")).write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n")
    print(f"{len(contexts)} conversations, {total} cases ({errors} expected errors)")


if __name__ == "__main__":
    main()
