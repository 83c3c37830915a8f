// The Jinja interpreter beyond the model templates: syntax, semantics the templates rely on,
// errors with locations, and the limits that keep hostile templates bounded.
#include <gizml/chat_template.h>
#include <gizml/error.h>
#include <gtest/gtest.h>

#include <string>

namespace {

using gizml::llm::ChatTemplate;
using gizml::llm::TemplateLimits;
using nlohmann::ordered_json;

std::string render(const std::string& source, const ordered_json& context = ordered_json::object()) {
  return ChatTemplate::parse(source).render(context);
}

std::string errorOf(const std::string& source, const ordered_json& context = ordered_json::object(),
                    const TemplateLimits& limits = {}) {
  try {
    ChatTemplate::parse(source).render(context, limits);
  } catch (const gizml::Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Template, Expressions) {
  EXPECT_EQ(render("{{ 1 + 2 * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 7 / 2 }} {{ 4 / 2 }}"),
            "7 3 -4 2 1024 3.5 2.0");
  EXPECT_EQ(render("{{ 1e-5 }} {{ 1e16 }} {{ 0.1 + 0.2 }} {{ 2.5|round }} {{ 3|round }} {{ -0.0 }}"),
            "1e-05 1e+16 0.30000000000000004 2.0 3 -0.0");
  EXPECT_EQ(render("{{ 'a' ~ 1 ~ none ~ true }}|{{ 'ab' * 2 }}|{{ [1, 2] + [3] }}|{{ (1, 'x') }}"),
            "a1NoneTrue|abab|[1, 2, 3]|(1, 'x')");
  EXPECT_EQ(render("{{ 'abc'[::-1] }}{{ 'héllo'|length }}{{ 'héllo'[1] }}{{ [1,2,3,4][1:3] }}{{ [1,2,3][-1] }}"),
            "cba5é[2, 3]3");
  EXPECT_EQ(render("{{ 'y' if x else 'n' }}{{ 'never' if false }}{{ 1 < 2 < 3 }}{{ 3 in [1, 3] }}{{ 'b' not in 'abc' }}"),
            "nTrueTrueFalse");
  EXPECT_EQ(render("{{ {'k': [1, 'v\\n', none]} }}{{ \"it's\" ~ [\"it's\"] }}"), "{'k': [1, 'v\\n', None]}it's[\"it's\"]");
  EXPECT_EQ(render("{{ 'a,b,,c'.split(',') }}{{ ' a  b '.split() }}{{ '--x--'.strip('-') }}{{ 'ab'.startswith(('x', 'a')) }}"),
            "['a', 'b', '', 'c']['a', 'b']xTrue");
  EXPECT_EQ(render("{{ d.get('a') }}{{ d.get('z', 3) }}{{ d.items()|list }}{{ d['items'] }}",
                   ordered_json::parse(R"({"d": {"a": 1, "items": 2}})")),
            "13[('a', 1), ('items', 2)]2");
}

TEST(Template, Filters) {
  const ordered_json ctx = ordered_json::parse(
      R"({"xs": [{"n": "b", "v": 2}, {"n": "a", "v": 1}, {"n": "c"}], "d": {"z": 1, "é": "ü"}})");
  EXPECT_EQ(render("{{ xs|map(attribute='n')|join(',') }}|{{ xs|selectattr('v')|list|length }}|"
                   "{{ xs|rejectattr('n', 'equalto', 'a')|map(attribute='n')|list }}|{{ xs|sort(attribute='n')|first }}",
                   ctx),
            "b,a,c|2|['b', 'c']|{'n': 'a', 'v': 1}");
  EXPECT_EQ(render("{{ d|tojson }}|{{ d|tojson(indent=2) }}|{{ d|dictsort }}|{{ [3,1,3]|unique|list }}", ctx),
            "{\"z\": 1, \"é\": \"ü\"}|{\n  \"z\": 1,\n  \"é\": \"ü\"\n}|[('z', 1), ('é', 'ü')]|[3, 1]");
  EXPECT_EQ(render("{{ '  x  '|trim }}|{{ x|default('d') }}|{{ ''|default('e', true) }}|{{ '3.7'|int }}|{{ 'q'|int }}|"
                   "{{ '4'|float }}|{{ -3|abs }}|{{ 'hi there'|title }}|{{ 'hELLO'|capitalize }}|{{ [1,2,3]|sum }}|"
                   "{{ [3,1]|min }}{{ [3,1]|max }}|{{ [1,2,3,4]|batch(3)|list }}|{{ 'a\nb'|indent(2) }}|{{ 'a b'|wordcount }}"),
            "x|d|e|3|0|4.0|3|Hi There|Hello|6|13|[[1, 2, 3], [4]]|a\n  b|2");
  EXPECT_EQ(render("{{ [1,2,3,4]|select('even')|list }}{{ [1,2]|map('string')|join }}{{ 'aXa'|replace('a', 'b') }}"),
            "[2, 4]12bXb");
}

TEST(Template, Statements) {
  EXPECT_EQ(render("{% for x in [1,2,3] if x > 1 %}{{ loop.index }}/{{ loop.length }}{{ loop.first }}{% else %}E{% endfor %}"),
            "1/2True2/2False");
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for x in [1,2,3] %}{{ loop.previtem }}|{{ loop.nextitem }}|{{ loop.revindex }};{% endfor %}"),
            "|2|3;1|3|2;2||1;");
  EXPECT_EQ(render("{% for x in range(10) %}{% if x == 3 %}{% break %}{% endif %}{% if x == 1 %}{% continue %}{% endif %}"
                   "{{ x }}{% endfor %}"),
            "02");
  EXPECT_EQ(render("{% for k, v in d|items %}{{ k }}={{ v }};{% endfor %}", ordered_json::parse(R"({"d": {"b": 1, "a": 2}})")),
            "b=1;a=2;");
  // Loops scope their sets; namespaces carry values out.
  EXPECT_EQ(render("{% set x = 1 %}{% set ns = namespace(n=0) %}{% for i in [1,2] %}{% set x = i %}{% set ns.n = ns.n + i %}"
                   "{% endfor %}{{ x }} {{ ns.n }}"),
            "1 3");
  EXPECT_EQ(render("{% macro m(a, b=2) %}{{ a }}{{ b }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 3, 4, z=5) }}"),
            "13(4,){'z': 5}");
  EXPECT_EQ(render("{% macro wrap(tag) %}<{{ tag }}>{{ caller('x') }}</{{ tag }}>{% endmacro %}"
                   "{% call(v) wrap('b') %}in {{ v }}{% endcall %}"),
            "<b>in x</b>");
  EXPECT_EQ(render("{% filter upper %}shout{% endfilter %}{% set s | trim %}  block  {% endset %}[{{ s }}]"),
            "SHOUT[block]");
  EXPECT_EQ(render("{% raw %}{{ not evaluated }}{% endraw %}{# comment #}"), "{{ not evaluated }}");
  EXPECT_EQ(render("{% with a = 5 %}{{ a }}{% endwith %}{{ a }}"), "5");
}

TEST(Template, WhitespaceControlAsTransformers) {
  // trim_blocks and lstrip_blocks on; '-' strips, '+' keeps; one trailing newline goes.
  EXPECT_EQ(render("  {% if true %}\n  x\n  {% endif %}\n  {{ 'y' }}\n"), "  x\n  y");
  EXPECT_EQ(render("a  {%- if true -%}  b  {%- endif -%}  c"), "abc");
  EXPECT_EQ(render("a\n{{- 'b' -}}\nc"), "abc");
  EXPECT_EQ(render("{% if true +%}\nkeep{% endif %}"), "\nkeep");
  EXPECT_EQ(render("x\n  {#- c #}\ny"), "xy");
  EXPECT_EQ(render("x\n  {# c #}\ny"), "x\ny");
  EXPECT_EQ(render("a\n  {%+ if true %}b{% endif %}"), "a\n  b");
}

TEST(Template, UndefinedBehavesAsJinjaDefault) {
  EXPECT_EQ(render("[{{ missing }}]{{ missing is defined }}{{ missing|length }}{% for x in missing %}x{% endfor %}"
                   "{{ 'a' in missing }}{{ d.nokey is defined }}",
                   ordered_json::parse(R"({"d": {}})")),
            "[]False0False" "False");
  EXPECT_NE(errorOf("{{ missing.attr }}").find("'missing' is undefined"), std::string::npos);
  EXPECT_NE(errorOf("{{ missing + 1 }}").find("'missing' is undefined"), std::string::npos);
  EXPECT_NE(errorOf("{{ 1 < 'a' }}").find("not supported"), std::string::npos);
}

TEST(Template, ParseErrorsNameLineAndColumn) {
  EXPECT_NE(errorOf("ok\n{% if x %}\nunterminated").find("line 3"), std::string::npos);
  EXPECT_NE(errorOf("{{ 1 +* 2 }}").find("line 1, column 7"), std::string::npos);
  EXPECT_NE(errorOf("a\nb {% frobnicate %}").find("line 2, column 6: unknown or unsupported tag 'frobnicate'"),
            std::string::npos);
  EXPECT_NE(errorOf("{{ x|nosuchfilter }}").find("No filter named 'nosuchfilter'"), std::string::npos);
  EXPECT_NE(errorOf("{{ 'open }}").find("unterminated string"), std::string::npos);
  EXPECT_NE(errorOf("{% break %}").find("outside of a loop"), std::string::npos);
  EXPECT_THROW(ChatTemplate::parse("{% for x in y %}"), gizml::Error);
}

TEST(Template, RaiseExceptionPassesTheMessage) {
  EXPECT_EQ(errorOf("{% if true %}{{ raise_exception('Roles must alternate!') }}{% endif %}"), "Roles must alternate!");
  EXPECT_NE(errorOf("line1\n{{ [1][0].x.y }}").find("chat template line 2"), std::string::npos);
}

TEST(Template, StrftimeNow) {
  const std::string year = render("{{ strftime_now('%Y') }}");
  EXPECT_EQ(year.size(), 4u);
  EXPECT_EQ(year.substr(0, 2), "20");
}

TEST(Template, HostileTemplatesAreBounded) {
  TemplateLimits small;
  small.maxOutputBytes = 1 << 16;
  small.maxSteps = 100000;
  EXPECT_NE(errorOf("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}").find("nesting deeper"), std::string::npos);
  EXPECT_NE(errorOf("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}", ordered_json::object(), small)
                .find("steps"),
            std::string::npos);
  EXPECT_NE(errorOf("{% for i in range(100000) %}xxxxxxxx{% endfor %}", ordered_json::object(), small).find("output longer"),
            std::string::npos);
  EXPECT_NE(errorOf("{{ 'x' * 1000000000000 }}").find("string longer"), std::string::npos);
  EXPECT_NE(errorOf("{{ range(1000000000000)|length }}").find("list longer"), std::string::npos);
  EXPECT_NE(errorOf("{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}")
                .find("string longer"),
            std::string::npos);
  EXPECT_NE(errorOf("{{ 9223372036854775807 + 1 }}").find("integer overflow"), std::string::npos);
  EXPECT_NE(errorOf("{{ " + std::string(5000, '(') + std::string(5000, ')') + " }}").find("nesting deeper"),
            std::string::npos);
  std::string chain = "{{ 0";
  for (int i = 0; i < 5000; ++i) chain += " + 1";
  EXPECT_NE(errorOf(chain + " }}").find("nested deeper"), std::string::npos);
  // A namespace holding itself prints shallowly and is freed (no leak under ASan).
  EXPECT_NE(render("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}").find("<Namespace"), std::string::npos);
}

// Values from a request (messages, tools, chat_template_kwargs) and hostile template text fail
// with an error naming the limit, never by exhausting the stack.
TEST(Template, DeepInputsHitNamedLimits) {
  const auto deepJson = [](int levels, bool objects) {
    ordered_json v = 1;
    for (int i = 0; i < levels; ++i) {
      ordered_json outer = objects ? ordered_json::object() : ordered_json::array();
      objects ? void(outer["k"] = std::move(v)) : outer.push_back(std::move(v));
      v = std::move(outer);
    }
    return v;
  };
  const ChatTemplate t = ChatTemplate::parse("{{ messages|length }}");
  for (const bool objects : {false, true}) {
    ordered_json context = ordered_json::object();
    context["x"] = deepJson(100000, objects);  // moved in: nlohmann's copies recurse
    const std::string error = errorOf("{{ x }}", context);
    EXPECT_NE(error.find("template values nested deeper than 256 levels"), std::string::npos) << error;
    ordered_json deepList = ordered_json::array(), kwargs = ordered_json::object();
    deepList.push_back(deepJson(30000, objects));
    kwargs["kwarg"] = deepJson(30000, objects);
    EXPECT_THROW(t.renderChat(deepList, ordered_json(), true), gizml::Error);        // messages
    EXPECT_THROW(t.renderChat(ordered_json::array(), deepList, true), gizml::Error);  // tools
    EXPECT_THROW(t.renderChat(ordered_json::array(), ordered_json(), true, kwargs), gizml::Error);  // kwargs
  }
  EXPECT_EQ(render("{{ x|tojson }}", {{"x", deepJson(200, true)}}).size(), 200 * 7 + 1);  // {"k": ...}
  // Deep values built by a template stop at the same bound, so tojson, repr and == stay shallow.
  EXPECT_NE(errorOf("{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}"
                    "{{ ns.x|tojson }}")
                .find("values nested deeper than 256"),
            std::string::npos);
  EXPECT_NE(errorOf("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns|tojson }}").find("not JSON serializable"),
            std::string::npos);
  // The parser bounds nesting of every kind of bracket, block and operator (20000 levels: far
  // beyond the limits, and quick to lex).
  const auto repeat = [](const std::string& s, int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += s;
    return out;
  };
  for (const std::string& source :
       {"{{ " + repeat("(", 20000) + "1" + repeat(")", 20000) + " }}",
        "{{ " + repeat("[", 20000) + repeat("]", 20000) + " }}",
        "{{ " + repeat("{'a': ", 20000) + "1" + repeat("}", 20000) + " }}", "{{ " + repeat("not ", 20000) + "x }}",
        "{{ " + repeat("-", 20000) + "1 }}", "{{ 1" + repeat(" if x else 1", 20000) + " }}",
        repeat("{% if x %}", 20000), repeat("{% for x in y %}", 20000), repeat("{% macro m() %}", 20000),
        "{{ x" + repeat("|trim", 20000) + " }}", "{{ x" + repeat(".a", 20000) + " }}",
        "{{ f" + repeat("()", 20000) + " }}", "{{ x" + repeat("[0]", 20000) + " }}",
        "{{ 1" + repeat(" ~ 1", 20000) + " }}"}) {
    const std::string error = errorOf(source);
    EXPECT_TRUE(error.find("nesting deeper than 100") != std::string::npos ||
                error.find("expression nested deeper than 256") != std::string::npos)
        << source.substr(0, 40) << ": " << error;
  }
  // Recursion at run time: a macro calling itself, two macros calling each other, a caller loop.
  for (const std::string source :
       {"{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",
        "{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}{{ a() }}{% endmacro %}{{ a() }}",
        "{% macro f() %}{% call f() %}x{% endcall %}{% endmacro %}{{ f() }}",
        "{% macro f(n) %}{{ f(n + 1) if n < 100000 }}{% endmacro %}{{ f(0) }}"}) {
    const std::string error = errorOf(source);
    EXPECT_NE(error.find("nesting deeper than 200 (runaway recursion?)"), std::string::npos) << source << ": " << error;
  }
}

TEST(Template, RenderChatBuildsTheContext) {
  const ChatTemplate t = ChatTemplate::parse(
      "{{ bos_token }}{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}"
      "{{ tools is defined }}{{ add_generation_prompt }}{{ enable_thinking }}");
  const ordered_json messages = ordered_json::parse(R"([{"role": "user", "content": "hi"}])");
  EXPECT_EQ(t.renderChat(messages, ordered_json::array(), true, {{"bos_token", "<s>"}, {"enable_thinking", false}}),
            "<s>user:hi;FalseTrueFalse");
  EXPECT_EQ(t.renderChat(messages, ordered_json::parse(R"([{"name": "f"}])"), false), "user:hi;TrueFalse");
}

}  // namespace
