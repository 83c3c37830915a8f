// gizml::grammar against documents labelled by Python's json and the jsonschema package
// (tests/reference/make_grammar_fixtures.py): every canonical valid document is accepted, every
// invalid one rejected. Then anyObject, the limits on whitespace, the errors, and the token
// masks against a byte-by-byte check of each token.
#include <gizml/grammar.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/expect_error.h"
#include "grammar/token_mask.h"
#include "common/test_paths.h"

using gizml::grammar::Grammar;
using gizml::grammar::Matcher;
using Json = nlohmann::ordered_json;

namespace {

bool whole(const Grammar& g, const std::string& text) {
  Matcher m(g);
  return m.advance(text) && m.complete();
}

Json cases() {
  std::ifstream in(test_paths::testData() + "/grammar/cases.json");
  std::stringstream s;
  s << in.rdbuf();
  return Json::parse(s.str());
}

}  // namespace

TEST(Grammar, SchemasAgainstJsonschema) {
  const Json all = cases();
  ASSERT_GE(all.size(), 8u);
  int canonical = 0, invalid = 0;
  for (const Json& c : all) {
    const Grammar g = Grammar::fromSchema(c.at("schema").dump());
    for (const Json& d : c.at("documents")) {
      const std::string text = d.at("text");
      const bool accepted = whole(g, text);
      if (d.at("canonical").get<bool>()) {
        ++canonical;
        EXPECT_TRUE(accepted) << "schema " << c.at("schema").dump() << "\nrejects the valid " << text;
      } else if (!d.at("valid").get<bool>()) {
        ++invalid;
        EXPECT_FALSE(accepted) << "schema " << c.at("schema").dump() << "\naccepts the invalid " << text;
      }
    }
  }
  EXPECT_GT(canonical, 100);
  EXPECT_GT(invalid, 500);
}

TEST(Grammar, AnyObject) {
  const Grammar g = Grammar::anyObject();
  for (const char* ok : {"{}", " { } ", R"({"a": [1, {"b": null}], "c": -0.5e+3, "d": "\u00e9\n"})", "{\"日本\":true}"})
    EXPECT_TRUE(whole(g, ok)) << ok;
  for (const char* bad : {"[]", "\"x\"", "{\"a\" 1}", "{\"a\":1,}", "{a:1}", "{\"a\":01}", "{\"a\":\"\x01\"}",
                          "{\"a\":\"\xC0\xAF\"}", "{\"a\":\"\xED\xA0\x80\"}", "{}{}"})
    EXPECT_FALSE(whole(g, bad)) << bad;
  Matcher m(g);
  EXPECT_FALSE(m.complete());
  EXPECT_TRUE(m.accepts("{\"a\":"));
  EXPECT_FALSE(m.accepts("{\"a\"}"));
  ASSERT_TRUE(m.advance("{\"a\":1}"));
  EXPECT_TRUE(m.complete());
  EXPECT_FALSE(m.advance("x"));  // a refused advance leaves the matcher where it was
  EXPECT_TRUE(m.complete());
}

TEST(Grammar, WhitespaceAndDigitsAreBounded) {
  const Grammar g = Grammar::fromSchema(R"({"type": "array", "items": {"type": "number"}})");
  EXPECT_TRUE(whole(g, "[" + std::string(20, ' ') + "1]"));
  EXPECT_FALSE(whole(g, "[" + std::string(21, ' ') + "1]"));
  EXPECT_TRUE(whole(g, "[1234567890123456]"));
  EXPECT_FALSE(whole(g, "[12345678901234567]"));
  Matcher m(g);
  ASSERT_TRUE(m.advance("[1]"));
  EXPECT_TRUE(m.complete());
  ASSERT_TRUE(m.advance(std::string(20, '\n')));
  EXPECT_FALSE(m.canContinue());  // nothing may follow the value and its whitespace
}

TEST(Grammar, OptionalPropertiesKeepTheirOrderAndCommas) {
  const Grammar g = Grammar::fromSchema(
      R"({"properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}},
          "required": ["b"], "additionalProperties": false})");
  for (const char* ok : {R"({"b":1})", R"({"a":1,"b":2})", R"({"b":1,"c":2})", R"({"a":1,"b":2,"c":3})"})
    EXPECT_TRUE(whole(g, ok)) << ok;
  for (const char* bad : {"{}", R"({"a":1})", R"({"b":1,"a":2})", R"({,"b":1})", R"({"b":1,})", R"({"b":1,"d":2})"})
    EXPECT_FALSE(whole(g, bad)) << bad;
}

TEST(Grammar, ErrorsNameTheKeywordAndPlace) {
  expectError([] { Grammar::fromSchema("{\"type\": "); }, {"grammar", "not JSON"});
  expectError([] { Grammar::fromSchema(R"({"type": "string", "pattern": "a+"})"); }, {"\"pattern\"", "at #"});
  expectError([] { Grammar::fromSchema(R"({"properties": {"x": {"type": "integer", "minimum": 1}}})"); },
              {"\"minimum\"", "#/properties/x"});
  expectError([] { Grammar::fromSchema(R"({"$ref": "#/$defs/missing"})"); }, {"$ref", "#/$defs/missing"});
  expectError([] { Grammar::fromSchema(R"({"type": "text"})"); }, {"type \"text\"", "not a JSON Schema type"});
  expectError([] { Grammar::fromSchema(R"({"items": false, "type": "array", "minItems": 1})"); }, {"#/items", "false"});
  expectError([] { Grammar::fromSchema(R"({"type": "array", "minItems": 3, "maxItems": 2})"); }, {"minItems exceeds"});
  expectError([] { Grammar::fromSchema(R"([1, 2])"); }, {"at #", "array"});
}

TEST(Grammar, TextShowsTheRules) {
  const std::string text = Grammar::fromSchema(R"({"enum": ["x", 2]})").text();
  EXPECT_NE(text.find("(root) ::="), std::string::npos) << text;
  EXPECT_NE(text.find("enum#"), std::string::npos) << text;
  EXPECT_NE(text.find("[\\x09-\\x0A\\x0D\\x20]"), std::string::npos) << text;  // whitespace
}

TEST(Grammar, TokenMaskMatchesEachTokenChecked) {
  // A vocabulary of JSON-ish pieces, some multi-byte, one empty (a special token).
  const std::vector<std::string> pieces = {"{", "}", "\"", "\":", "name", " \"", "\",", "1", "12", "-", "true",
                                           "tr", "ue", "[", "]", ",", " ", "\n  ", "", "é", "\xC3", "\xA9", "null}",
                                           "\"}", "{\"", "age", "\":1", ":", "0"};
  gizml::grammar::TokenMask mask(pieces);
  const Grammar g = Grammar::fromSchema(
      R"({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name"], "additionalProperties": false})");
  const std::string doc = R"({"name": "é1", "age": 12})";
  for (size_t cut = 0; cut <= doc.size(); ++cut) {
    Matcher m(g);
    ASSERT_TRUE(m.advance(doc.substr(0, cut)));
    const std::vector<bool>& allowed = mask.allowed(m);
    ASSERT_EQ(allowed.size(), pieces.size());
    for (size_t id = 0; id < pieces.size(); ++id)
      EXPECT_EQ(allowed[id], !pieces[id].empty() && m.accepts(pieces[id])) << "after '" << doc.substr(0, cut)
                                                                           << "' token '" << pieces[id] << "'";
  }
}
