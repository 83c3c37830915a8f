#!/usr/bin/env python3
"""Generated Jinja templates rendered by Python jinja2 in transformers' chat-template environment,
for the differential test tests/llm/test_template_cases.cpp (ours must give the same bytes, and
raise where jinja2 raises).

Run:  .venv/bin/python tests/reference/make_template_cases.py
Writes tests/data/templates/generated/cases.json: {"context": {...}, "cases": [{"template": t,
"output": text} or {"template": t, "error": "Class: message" (cut at 60 characters)}]}. The templates are made
systematically (every filter, test and operator on operands of every kind; every str method and
the list/dict methods the sandbox allows or refuses; non-string dict keys; Markup from |safe;
unknown filters and tests in branches taken and not taken; statements and whitespace control)
and randomly from a fixed seed. Nothing reads the clock; cases whose output shows a Python
object address or a bound method's repr are left out, as no other implementation could print them.
"""
import copy
import json
import pathlib
import random

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment

# transformers' globals and tojson, as the conversation fixtures use them (this folder is on sys.path).
from make_template_fixtures import raise_exception, strftime_now, tojson

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "data" / "templates" / "generated" / "cases.json"


# ---- transformers' _compile_jinja_template environment (transformers/utils/chat_template_utils.py)
class AssistantTracker(Extension):
    tags = {"generation"}

    def __init__(self, environment):
        super().__init__(environment)
        environment.extend(activate_tracker=self.activate_tracker)
        self._rendered_blocks = None
        self._generation_indices = None

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

    @jinja2.pass_eval_context
    def _generation_support(self, context, caller):
        return caller()  # the tracker is never active when rendering a prompt

    def activate_tracker(self, rendered_blocks, generation_indices):
        self._rendered_blocks = rendered_blocks
        self._generation_indices = generation_indices


def make_env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[AssistantTracker, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


CONTEXT = {
    "s": "Hello, World", "t": "  padded\ttext \n", "n": 7, "f": 2.5, "neg": -3, "z": 0, "b": True,
    "no": None, "xs": [3, 1, 2], "ws": ["b", "A", "c"], "d": {"b": 1, "a": 2},
    "users": [{"name": "ann", "age": 30}, {"name": "Bob", "age": 25, "admin": True}, {"name": "cy", "age": None}],
    "msg": {"role": "system", "content": "Be brief. /no_think"}, "html": "<b>&'\"</b>", "empty": "", "el": [],
    "ed": {}, "num_s": "42", "csv": "a,b,,c", "lines": "one\ntwo\r\nthree\n", "args": {"city": "Paris", "days": 3},
    "args_s": "{\"city\": \"Paris\"}", "nested": {"a": {"b": [1, {"c": "deep"}]}},
}

# Operands of every kind: literals, context values, none, undefined, Markup.
OPERANDS = ["1", "2.5", "-3", "true", "none", "'ab'", "''", "[1, 2]", "{'a': 1}", "nope", "'<a>'|safe", "xs", "users"]
SMALL_OPERANDS = ["1", "2.5", "true", "none", "'ab'", "[1, 2]", "{'a': 1}", "nope", "'<a>'|safe"]
BINARY = ["+", "-", "*", "/", "//", "%", "**", "==", "!=", "<", "<=", ">", ">=", "in", "not in", "~", "and", "or"]

FILTERS = [
    "abs", "attr('a')", "batch(2)|list", "batch(2, 'x')|list", "capitalize", "center", "center(9)", "count",
    "default('D')", "default('D', true)", "d", "dictsort", "dictsort(by='value', reverse=true)", "e", "escape",
    "first", "float", "float(9.5)", "forceescape", "format", "format(1)", "indent", "indent(2, true)",
    "indent('> ', first=true, blank=true)", "int", "int(9)", "int(base=16)", "items|list", "join", "join(', ')",
    "join('-', attribute='name')", "last", "length", "list", "lower", "map('upper')|list", "map('length')|list",
    "map(attribute='name')|list", "map(attribute='age', default=0)|list", "max", "min", "max(attribute='age')",
    "reject('none')|list", "reject('odd')|list", "rejectattr('admin')|list", "replace('l', 'L')",
    "replace('', '.')", "replace('o', '0', 1)", "reverse|list", "round", "round(1, 'floor')", "round(1, 'ceil')",
    "safe", "select|list", "select('odd')|list", "select('equalto', 2)|list", "selectattr('age')|list",
    "selectattr('age', 'gt', 26)|list", "selectattr('name', 'in', ['ann', 'cy'])|list", "slice(2)|list",
    "slice(2, 0)|list", "sort|list", "sort(reverse=true)|list", "sort(attribute='age')|list", "string", "sum",
    "sum(start=10)", "sum(attribute='age')", "title", "tojson", "tojson(indent=2)", "tojson(sort_keys=true)",
    "tojson(separators=(',', ':'))", "trim", "trim('H!d')", "truncate(5)", "truncate(5, true)",
    "truncate(9, false, '..', 0)", "unique|list", "unique(attribute='name')|list", "upper", "wordcount",
    "list|length", "string|length", "filesizeformat", "filesizeformat(true)", "urlencode", "xmlattr",
    "xmlattr(false)",
]

TESTS = ["boolean", "callable", "defined", "divisibleby(2)", "divisibleby 3", "eq 1", "equalto('ab')", "escaped",
         "even", "false", "filter", "float", "ge 1", "gt(0)", "in([1, 'ab'])", "in 'abc'", "integer", "iterable",
         "le 2", "lower", "lt 2", "mapping", "ne 1", "none", "number", "odd", "sameas(none)", "sameas true",
         "sequence", "string", "test", "true", "undefined", "upper", "== 1", "!= 1", "< 3", "> 0"]

STRINGS = ["s", "t", "''", "' a  b '", "csv", "lines", "'HELLO'", "'-42'", "'abc123'", "' \\t\\n'",
           "\"they're bill's\"", "'<x>'|safe", "num_s"]
STR_METHODS = [
    "replace('l', 'L')", "replace('l', 'L', 1)", "replace('', '|')", "replace('/no_think', '')", "count('l')",
    "count('')", "count('l', 3)", "count('l', 2, 5)", "find('o')", "find('o', 5)", "find('zz')", "rfind('o')",
    "rfind('o', 0, 5)", "index('l')", "index('zz')", "rindex('l')", "startswith('He')", "startswith(('x', 'H'))",
    "startswith('l', 2)", "endswith('d')", "endswith(('x', 'y'))", "isdigit()", "isalpha()", "isalnum()",
    "isspace()", "islower()", "isupper()", "istitle()", "isdecimal()", "isnumeric()", "isascii()", "zfill(6)",
    "title()", "capitalize()", "lower()", "upper()", "swapcase()", "casefold()", "strip()", "lstrip()",
    "rstrip()", "strip('Hd')", "lstrip(' aH')", "rstrip('\\n ')", "split()", "split(',')", "split(',', 1)",
    "split(none, 1)", "rsplit()", "rsplit(',', 1)", "rsplit(none, 1)", "split('')", "splitlines()",
    "splitlines(true)", "center(16)", "center(15, '*')", "ljust(14, '.')", "rjust(14)", "partition(',')",
    "rpartition('o')", "partition('zz')", "removeprefix('He')", "removesuffix('ld')", "join(['x', 'y'])",
    "join('abc')", "format(1, 2)", "upper", "nosuchmethod", "__class__",
]
LISTS = ["xs", "ws", "el", "[1, 'a', none]", "(1, 2, 1)", "users"]
LIST_METHODS = ["index(1)", "index(99)", "count(1)", "copy()", "append(4)", "pop()", "pop(0)", "insert(0, 9)",
                "extend([4])", "remove(1)", "reverse()", "sort()", "clear()", "append", "nosuch"]
DICTS = ["d", "ed", "args", "{1: 'one', 2.0: 'two', true: 'yes', none: 'nil'}", "nested"]
DICT_METHODS = ["keys()", "values()", "items()", "get('a')", "get('zz')", "get('zz', 5)", "get(1)", "copy()",
                "setdefault('q', 1)", "update({'q': 1})", "pop('a')", "popitem()", "clear()", "update", "items",
                "nosuch"]

FORMATS = ["'{}-{}'.format(1, 'a')", "'{0}{1}{0}'.format('x', 'y')", "'{a}/{b}'.format(a=1, b=none)",
           "'{:>6}|{:<6}|{:^6}'.format('ab', 'cd', 'ef')", "'{:*^9}'.format('mid')", "'{:05d}'.format(42)",
           "'{:+d} {: d}'.format(5, 5)", "'{:.2f} {:.0f} {:e}'.format(3.14159, 2.5, 12345.678)",
           "'{:x} {:X} {:o} {:b} {:#x}'.format(255, 255, 8, 5, 255)", "'{:,}'.format(1234567)",
           "'{:.3}'.format('abcdef')", "'{!r} {!s}'.format('q', 'q')", "'{0[name]} {0.name}'.format(users[0])",
           "'{:%}'.format(0.25)", "'{{}} {}'.format(1)", "'{'.format(1)", "'{2}'.format(1)", "'{x}'.format(1)",
           "'%s and %s' % ('a', 1)", "'%d%%' % 50", "'%5.1f|%-4s|%04d' % (3.14159, 'ab', 7)", "'%s' % none",
           "'%(a)s-%(b)d' % {'a': 'x', 'b': 2}", "'%s %s' % ('one',)", "'%s' % (1, 2)", "'%x %o %r' % (255, 8, 'r')",
           "'%s'|format('v')", "'%s-%s'|format(1, 2)", "'%(k)s'|format(k='kw')", "'<%s>'|safe|format('<b>')",
           "('<%s>'|safe) % '<i>'", "'{}'.format('<b>'|safe)", "('<{}>'|safe).format('<i>')"]

MARKUP = ["'<a>'|safe + '<b>'", "'<b>' + '<a>'|safe", "'<a>'|safe ~ '<b>'", "['<a>'|safe]", "'<a>'|safe * 2",
          "'<a>'|e", "'<a>'|e|e", "('<a>'|e).upper()", "'<a>'|safe|upper", "'<a>'|safe|title", "'<a>'|safe|length",
          "('<a>'|safe).replace('a', '<i>')", "('<a>'|safe).split('a')", "('<a>'|safe).join(['<', '>'])",
          "('<a>'|safe)[1]", "('<a>'|safe)[1:]", "'<a>'|safe == '<a>'", "'<a>'|safe is string",
          "'<a>'|safe is escaped", "'<a>' is escaped", "('x'|safe + none)", "('x'|safe + 1)", "no|safe + '<'",
          "nope|safe + '<'", "'<a>'|safe|tojson", "{'k': '<a>'|safe}", "'<a>'|safe|replace('a', 'b') + '<'",
          "'<a>'|safe|join + '<'", "' <a> '|safe|trim + '<'", "'<a>'|safe|string + '<'", "('<a>'|safe).strip('<')",
          "'<a>'|safe|indent + '<'", "'<a>'|safe|center(7)", "(html|e).lower()", "'&amp;'|safe + '&'",
          "'<a>'|safe|list", "'<a>'|safe|first + '<'", "'<a>'|safe|reverse|join", "[1, '<']|join('<b>'|safe)",
          "'<a>'|safe in ['<a>']", "('<'|safe).center(5, '>')", "('a'|safe).format('<')",
          "{'a': '<x>', 'b': none, 'c': 1}|xmlattr", "{'a b': 1}|xmlattr", "'a b/c&d'|urlencode",
          "{'q': 'a b', 'n': 1}|urlencode", "[('k', 'v&w')]|urlencode", "1000|filesizeformat", "1|filesizeformat",
          "123456789|filesizeformat", "2048|filesizeformat(true)", "'12'|filesizeformat", "'x'|filesizeformat",
          "1e30|filesizeformat"]

KEYS = ["{1: 'a', 2: 'b'}", "{1: 'a'}[1]", "{1: 'a'}.get(1)", "{1.0: 'x', true: 'y', none: 3}", "{(1, 2): 'p'}",
        "{(1, 2): 'p'}[(1, 2)]", "{[1]: 2}", "{{'a': 1}: 2}", "1 in {1: 'a'}", "'1' in {1: 'a'}", "1.0 in {1: 'a'}",
        "[1] in {1: 'a'}", "{1: 'a', '1': 'b'}|length", "{1: 'a', '1': 'b'}|tojson", "{2: 'a', 1: 'b'}|dictsort",
        "{2: 'a', 1: 'b'}|tojson(sort_keys=true)", "{1: 'a', 'b': 2}|tojson(sort_keys=true)", "{none: 1, true: 2, 1.5: 3}|tojson",
        "{(1,): 2}|tojson", "{1: 'a'}|items|list", "{1: 'a'}.items()|list", "{1: 'a'}.keys()|list", "{1: 'a'}[2]",
        "{1: 'a'}['1']", "{1: 'a'}.1", "dict({1: 2}, b=3)", "{'a': 1, 'a': 2}", "{1: 1, 1.0: 2}", "{-1: 'm'}[-1]",
        "{0: 'zero'}[false]", "{1: 'x'}|map('upper')|list", "{1: 'x', 2: 'y'}|list", "{1: 'x'}|first",
        "{1: 'x'}|join(',')", "{1: [1, 2]}[1][0]", "{'k': {2: 'v'}}.k[2]"]

UNDEF_NONE = ["no|selectattr('x')|list", "no|map('upper')|list", "no|select|list", "no|reject('odd')|list",
              "no|rejectattr('x')|list", "nope|selectattr('x')|list", "nope|map(attribute='a')|list",
              "no|select('nosuchtest')|list", "no|map('nosuchfilter')|list", "[]|select('nosuchtest')|list",
              "[1]|select('nosuchtest')|list", "[1]|map('nosuchfilter')|list", "no|list", "no|length", "no|first",
              "no|join", "no|default('x')", "nope|default('x')", "no|string", "no|tojson", "nope|tojson",
              "no|items|list", "nope|items|list", "no|dictsort", "no|sort", "no|unique|list", "no|sum",
              "nope|list", "nope|length", "nope|first", "nope|join", "nope|string", "nope|upper",
              "nope.x", "nope['x']", "nope is defined", "no is defined", "nope.x is defined", "nope|e",
              "no.x", "no['x']", "d.zz", "d.zz.y", "d['zz'] is undefined", "d.zz|default('dflt')", "no ~ nope",
              "nope ~ 'x'", "nope + 1", "nope == nope", "nope in [1]", "1 in nope", "nope|int", "no|int",
              "nope|float", "nope|abs", "nope|round", "nope|count", "nope|batch(2)|list", "nope|reverse",
              "(nope)()", "nope()", "s.nope()", "[1].nope()", "xs[9]", "xs[9] is defined", "'ab'[5]",
              "no is none", "nope is none", "no is sameas none", "nope|tojson(indent=1)"]

STATEMENTS = [
    "{% if false %}{{ x|nosuch }}{% endif %}ok",
    "{% if true %}{{ x|nosuch }}{% endif %}ok",
    "{% if false %}{% elif false %}{{ x|nosuch }}{% else %}{{ 1 }}{% endif %}",
    "{% if false %}{% elif true %}{{ x|nosuch }}{% endif %}",
    "{% if x is nosuch %}y{% endif %}",
    "{% if false %}{{ x is nosuch }}{% endif %}ok",
    "{% if false and x is nosuch %}y{% endif %}n",
    "{{ x|nosuch if false else 1 }}",
    "{{ 1 if false else x|nosuch }}",
    "{{ 1 if true else x|nosuch }}",
    "{{ x|nosuch if true else 1 }}",
    "{{ 1 if x|nosuch else 2 }}",
    "{{ false and x|nosuch }}",
    "{{ x|nosuch }}",
    "{% for a in [] %}{{ a|nosuch }}{% endfor %}ok",
    "{% if false %}{% for a in [] %}{{ a|nosuch }}{% endfor %}{% endif %}ok",
    "{% if false %}{% for a in [1]|nosuch %}{% endfor %}{% endif %}ok",
    "{% if false %}{% set y = x|nosuch %}{% endif %}ok",
    "{% if false %}{% set y %}{{ x|nosuch }}{% endset %}{% endif %}ok",
    "{% if false %}{% macro m() %}{{ 1|nosuch }}{% endmacro %}{% endif %}ok",
    "{% macro m() %}{% if false %}{{ 1|nosuch }}{% endif %}{% endmacro %}ok{{ m() }}",
    "{% macro m() %}{{ 1|nosuch }}{% endmacro %}ok",
    "{% if false %}{% filter nosuch %}x{% endfilter %}{% endif %}ok",
    "{% if false %}{% with a = 1|nosuch %}{% endwith %}{% endif %}ok",
    "{% if false %}{% with a = 1 %}{{ a|nosuch }}{% endwith %}{% endif %}ok",
    "{% if false %}{% if true %}{{ 1|nosuch }}{% endif %}{% endif %}ok",
    "{% for i in [1] %}{% if false %}{{ 1|nosuch }}{% endif %}{% endfor %}ok",
    "{% if false %}{% generation %}{{ 1|nosuch }}{% endgeneration %}{% endif %}ok",
    "{% if args is string %}{% set args = args | from_json %}{% endif %}{{ args.city }}",
    "{% if args_s is string %}{% set args = args_s | from_json %}{% endif %}{{ args.city }}",
    "{% if false %}{{ [1]|map('nosuch')|list }}{% endif %}ok",
    "{% set sys = msg.content.replace('/no_think', '').strip() %}[{{ sys }}]",
    "{% for u in users %}{{ loop.index }}:{{ u.name }}{{ ',' if not loop.last }}{% endfor %}",
    "{% for u in users if u.age %}{{ loop.index }}/{{ loop.length }}={{ u.name }} {% else %}none{% endfor %}",
    "{% for k, v in d.items() %}{{ k }}{{ v }}{% endfor %}",
    "{% for k, v in {1: 'a', 2: 'b'}.items() %}{{ k + 1 }}{{ v }}{% endfor %}",
    "{% for x in xs %}{% if x == 1 %}{% continue %}{% endif %}{% if x == 2 %}{% break %}{% endif %}{{ x }}{% endfor %}",
    "{% for x in 'ab' %}{{ loop.cycle('odd', 'even') }}{{ loop.revindex0 }}{{ loop.previtem }}{% endfor %}",
    "{% for a, b in [(1, 2), (3, 4)] %}{{ a * b }};{% endfor %}",
    "{% for i in range(3) %}{% for j in range(i) %}{{ i }}{{ j }} {% endfor %}{% endfor %}",
    "{% for x in no %}{{ x }}{% endfor %}",
    "{% for x in nope %}{{ x }}{% else %}empty{% endfor %}",
    "{% for x in 5 %}{% endfor %}",
    "{% set ns = namespace(total=0, seen=[]) %}{% for x in xs %}{% set ns.total = ns.total + x %}{% set ns.seen = ns.seen + [x] %}{% endfor %}{{ ns.total }}{{ ns.seen }}",
    "{% set ns = namespace(a=1) %}{{ ns.a }}{{ ns.b }}|{{ ns.b is defined }}",
    "{% set x = 1 %}{% for i in [2] %}{% set x = i %}{% endfor %}{{ x }}",
    "{% set x = 1 %}{% if true %}{% set x = 2 %}{% endif %}{{ x }}",
    "{% set a, b = 1, 2 %}{{ a }}{{ b }}",
    "{% set a, b = [1] %}",
    "{% set t %}  block {{ 1 + 1 }}  {% endset %}[{{ t }}]",
    "{% set t | upper %}shout{% endset %}{{ t }}",
    "{% macro m(a, b=2) %}{{ a }}-{{ b }}-{{ varargs }}-{{ kwargs }}{% endmacro %}{{ m(1) }}|{{ m(1, 3, 4, k=5) }}",
    "{% macro m(a) %}{{ a }}{% endmacro %}{{ m() }}|{{ m(1, a=2) }}",
    "{% macro outer() %}[{{ caller() }}]{% endmacro %}{% call outer() %}in{% endcall %}",
    "{% macro li(x) %}<{{ caller(x * 2) }}>{% endmacro %}{% call(v) li(3) %}v={{ v }}{% endcall %}",
    "{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(5) }}",
    "{% filter upper %}up {{ 'x' }}{% endfilter %}",
    "{% filter replace('a', 'b') | title %}a cat{% endfilter %}",
    "{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}{{ a }}",
    "{% generation %}gen {{ 1 }}{% endgeneration %}",
    "{% generation %}{% set q = 1 %}{% endgeneration %}{{ q }}",
    "{% for i in [1, 2] %}{% generation %}{{ loop.index }}{% endgeneration %}{% endfor %}",
    "{% for i in [1, 2] %}{% generation %}{% break %}{% endgeneration %}{% endfor %}",
    "{% break %}",
    "{{ raise_exception('custom failure') }}",
    "{% if not xs %}{{ raise_exception('no') }}{% endif %}fine",
    "{% raw %}{{ not a tag }}{% endraw %}",
    "a\n  {% if true %}\n  b\n  {% endif %}\nc",
    "a\n  {%- if true %}\n  b\n  {%+ endif %}\nc",
    "a {{- ' b ' -}} c",
    "  {# comment #}\nx",
    "{% for x in xs -%}\n  {{ x }}\n{%- endfor %}",
    "line\n{% set x = 1 %}\n{{ x }}\n",
    "{{ '{{' }}{{ '}}' }}",
    "{% if true %}\t  x\n{% endif %}",
    "{{ xs|first }}{{ xs|last }}{{ xs[-1] }}{{ xs[::-1] }}{{ 'abc'[1:] }}{{ s[:5] }}",
    "{{ users|map(attribute='name')|join(', ') }}",
    "{{ users|selectattr('admin')|map(attribute='name')|list }}",
    "{{ users|groupby('age')|list|length }}",
    "{{ nested.a.b[1].c }}{{ nested['a']['b'][0] }}{{ nested.a.b.1.c }}",
    "{{ range(5)|list }}{{ range(1, 10, 3)|list }}{{ range(5, 0, -2)|list }}",
    "{{ dict(a=1, b=2) }}{{ namespace(a=1) }}",
    "{{ (1, 2) }}{{ (1,) }}{{ () }}{{ [] }}{{ {} }}",
    "{{ 1 < 2 < 3 }}{{ 3 > 2 > 2 }}{{ 1 == 1.0 }}{{ 'a' < 'b' }}{{ [1, 2] < [1, 3] }}",
    "{{ 10 // 3 }}{{ -10 // 3 }}{{ 10 % -3 }}{{ 2 ** -1 }}{{ 7 / 2 }}{{ 1e3 }}{{ 1_000 }}",
    "{{ 'a' 'b' }}{{ \"x\\ty\" }}{{ 'it\\'s' }}",
    "{{ msg['role'] }}{{ msg.role|upper }}{{ msg.get('content') }}",
    "{{ xs.0 }}{{ users.1.name }}",
    "{{ s|lower|replace('world', 'there')|title }}",
    "{{ s is string and s|length > 3 }}",
    "{{ not none }}{{ not nope }}{{ -n }}{{ +f }}{{ -(-3) }}",
    "{{ xs|sort|join('+') }}={{ xs|sum }}",
    "{{ 'x' if nope else 'y' }}{{ 'x' if '' }}|",
]


def binary_cases():
    for a in SMALL_OPERANDS:
        for b in SMALL_OPERANDS:
            for op in BINARY:
                yield "{{ (%s) %s (%s) }}" % (a, op, b)


def filter_cases():
    for f in FILTERS:
        for x in OPERANDS:
            yield "{{ (%s)|%s }}" % (x, f)


def test_cases():
    for t in TESTS:
        for x in OPERANDS:
            yield "{{ (%s) is %s }}|{{ (%s) is not %s }}" % (x, t, x, t)


def method_cases():
    for s in STRINGS:
        for m in STR_METHODS:
            yield "{{ (%s).%s }}" % (s, m)
    for l in LISTS:
        for m in LIST_METHODS:
            yield "{{ %s.%s }}" % (l, m)
    for d in DICTS:
        for m in DICT_METHODS:
            yield "{{ %s.%s }}" % (d, m)
    for x in ["1", "none", "nope", "2.5", "true"]:
        for m in ["replace('a', 'b')", "upper()", "keys()", "get(1)"]:
            yield "{{ (%s).%s }}" % (x, m)


def expression_cases():
    for group in (FORMATS, MARKUP, KEYS, UNDEF_NONE):
        for e in group:
            yield "{{ %s }}" % e


def random_cases(rng, count):
    """Random expressions: operands through chains of filters, methods, tests and operators."""
    leaves = OPERANDS + ["n", "f", "neg", "html", "ws", "csv", "msg.content", "users[0]", "d.a", "xs[1]"]
    chains = ["|upper", "|length", "|string", "|list", "|first", "|last", "|join(',')", "|tojson", "|safe", "|e",
              "|default('D')", "|trim", "|reverse|list", "|sort|list", "|unique|list", "|int", "|float", "|abs",
              "|map('string')|list", "|select|list", "|items|list", "|dictsort", "|count", ".upper()",
              ".split(',')", ".replace('a', 'A')", ".strip()", ".items()|list", ".keys()|list", ".get('a')",
              ".count(1)", ".index(1)", "[0]", "[1:]", "['a']", ".a"]
    tests = ["defined", "none", "string", "number", "mapping", "iterable", "sequence", "odd", "even", "integer"]

    def expr(depth):
        if depth == 0 or rng.random() < 0.3:
            return rng.choice(leaves)
        kind = rng.random()
        if kind < 0.45:
            return "(%s)%s" % (expr(depth - 1), rng.choice(chains))
        if kind < 0.75:
            return "(%s %s %s)" % (expr(depth - 1), rng.choice(BINARY), expr(depth - 1))
        if kind < 0.85:
            return "(%s is %s%s)" % (expr(depth - 1), rng.choice(["", "not "]), rng.choice(tests))
        if kind < 0.95:
            return "(%s if %s else %s)" % (expr(depth - 1), expr(depth - 1), expr(depth - 1))
        return "[%s, %s]" % (expr(depth - 1), expr(depth - 1))

    for _ in range(count):
        yield "{{ %s }}" % expr(3)


def random_templates(rng, count):
    """Random statement structure: loops, conditions, sets, namespaces, macros and calls, with
    text, newlines, indentation and whitespace control around the tags."""
    values = ["xs", "ws", "users", "d.items()", "'ab'", "range(3)", "el", "nope", "[1, none, 'x']"]
    conds = ["x", "not x", "loop.first", "loop.last", "x is string", "x is number", "x is mapping", "ns.n > 1",
             "x in xs", "loop.index is even", "x"]
    exprs = ["x", "loop.index", "loop.revindex0", "ns.n", "x|string|upper", "x.name", "x[0]", "x|tojson",
             "m(x)", "loop.length", "x ~ '|'", "(x|string).replace('a', 'A')", "ns.seen|join(',')"]
    texts = ["", " ", "\n", "  ", "\n  ", "a", " b ", "\t", "\n\n"]

    def tag(body):
        left = rng.choice(["{%", "{%-", "{%+", "{%"])
        right = rng.choice(["%}", "-%}", "%}"])
        return rng.choice(texts) + left + " " + body + " " + right + rng.choice(texts)

    def out(e):
        return rng.choice(texts) + rng.choice(["{{ ", "{{- "]) + e + rng.choice([" }}", " -}}"]) + rng.choice(texts)

    def block(depth):
        parts = []
        for _ in range(rng.randint(1, 3)):
            kind = rng.random()
            if depth > 0 and kind < 0.35:
                parts.append(tag("for x in %s" % rng.choice(values)) + block(depth - 1) +
                             (tag("else") + out("'none'") if rng.random() < 0.3 else "") + tag("endfor"))
            elif depth > 0 and kind < 0.6:
                parts.append(tag("if %s" % rng.choice(conds)) + block(depth - 1) +
                             (tag("elif %s" % rng.choice(conds)) + block(depth - 1) if rng.random() < 0.4 else "") +
                             (tag("else") + block(depth - 1) if rng.random() < 0.4 else "") + tag("endif"))
            elif kind < 0.7:
                parts.append(tag("set ns.n = ns.n + 1") + tag("set ns.seen = ns.seen + [%s|string]" % rng.choice(["x", "ns.n"])))
            elif kind < 0.75:
                parts.append(tag("set y = %s" % rng.choice(exprs)) + out("y"))
            else:
                parts.append(out(rng.choice(exprs)))
        return "".join(parts)

    for _ in range(count):
        head = "{% set ns = namespace(n=0, seen=[]) %}{% macro m(v) %}<{{ v }}>{% endmacro %}"
        yield head + rng.choice(texts) + block(2) + out("ns.n") + out("ns.seen")


def render(env, source):
    try:
        # A fresh copy each time: jinja2's |indent extends a list operand in place (s += "\n").
        return {"output": env.from_string(source).render(**copy.deepcopy(CONTEXT))}
    except Exception as e:  # noqa: BLE001 - every error jinja2 raises is an expected "raises" case
        return {"error": f"{type(e).__name__}: {e}"[:60]}  # for the reader; ours need only raise too


def main():
    env = make_env()
    rng = random.Random(17)
    sources = []
    for gen in (binary_cases(), filter_cases(), test_cases(), method_cases(), expression_cases(), iter(STATEMENTS),
                random_cases(rng, 400), random_templates(rng, 100)):
        sources.extend(gen)
    cases, seen, dropped = [], set(), 0
    for source in sources:
        if source in seen:
            continue
        seen.add(source)
        case = {"template": source, **render(env, source)}
        text = case.get("output", case.get("error", ""))
        if " at 0x" in text or "<generator object" in text or "<bound method" in text:
            dropped += 1
            continue
        cases.append(case)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    lines = ",\n".join(json.dumps(c, ensure_ascii=False) for c in cases)  # one case a line, for diffs
    OUT.write_text('{"context": %s,\n"cases": [\n%s\n]}\n' % (json.dumps(CONTEXT, ensure_ascii=False), lines))
    errors = sum("error" in c for c in cases)
    print(f"{len(cases)} cases ({errors} where jinja2 raises, {dropped} left out for object reprs), "
          f"{OUT.stat().st_size // 1024} KiB")


if __name__ == "__main__":
    main()
