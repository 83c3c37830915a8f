// The schema compiler's bounds, for library callers as for the server: nesting (in the JSON and
// through $ref chains), rule count, left recursion, and long property lists built without
// recursion. Each is an Error naming what is wrong, never a deep C++ stack.
#include <gizml/error.h>
#include <gizml/grammar.h>
#include <gtest/gtest.h>

#include <string>

using gizml::Error;
using gizml::grammar::Grammar;
using gizml::grammar::Matcher;

namespace {

std::string nestedArraySchema(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += R"({"type":"array","items":)";
  return s + R"({"type":"integer"})" + std::string(static_cast<size_t>(n), '}');
}

std::string errorOf(const std::string& schema) {
  try {
    Grammar::fromSchema(schema);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SchemaLimits, NestingUpToTheLimitCompilesAndMatches) {
  const int n = 63;  // with the innermost schema: 64 levels, the limit
  Matcher m(Grammar::fromSchema(nestedArraySchema(n)));
  EXPECT_TRUE(m.advance(std::string(n, '[') + "7" + std::string(n, ']')));
  EXPECT_TRUE(m.complete());
}

TEST(SchemaLimits, DeeperJsonIsRefusedWhereItIs) {
  const std::string e = errorOf(nestedArraySchema(5000));
  EXPECT_NE(e.find("items.items.items"), std::string::npos) << e;
  EXPECT_NE(e.find("nested deeper than 64 levels"), std::string::npos) << e;
}

TEST(SchemaLimits, DeepReferenceChainsAreRefused) {
  std::string defs;
  for (int i = 0; i < 3000; ++i) {
    if (i) defs += ',';
    defs += "\"d" + std::to_string(i) + "\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/d" + std::to_string(i + 1) + "\"}}";
  }
  const std::string e = errorOf(R"({"$ref":"#/$defs/d0","$defs":{)" + defs + R"(,"d3000":{}}})");
  EXPECT_NE(e.find("nests deeper than 64 levels"), std::string::npos) << e;
}

TEST(SchemaLimits, LeftRecursionIsRefusedWhenBuilt) {
  EXPECT_NE(errorOf(R"({"$ref":"#"})").find("left recursion"), std::string::npos);
  // Reached only after a byte: the matcher would have met it mid-answer.
  const std::string e = errorOf(R"({"type":"array","items":{"$ref":"#/$defs/a"},
                                    "$defs":{"a":{"anyOf":[{"type":"null"},{"$ref":"#/$defs/a"}]}}})");
  EXPECT_NE(e.find("left recursion"), std::string::npos) << e;
  // Recursion behind a byte is fine: a tree of lists.
  Matcher tree(Grammar::fromSchema(R"({"type":"array","items":{"$ref":"#"}})"));
  EXPECT_TRUE(tree.advance("[[],[[]]]"));
  EXPECT_TRUE(tree.complete());
}

TEST(SchemaLimits, TooManyRulesAreRefused) {
  std::string props;
  for (int i = 0; i < 205; ++i) props += (i ? "," : "") + std::string("\"p") + std::to_string(i) + R"(":{"type":"string","maxLength":1000})";
  const std::string e = errorOf(R"({"type":"object","properties":{)" + props + "}}");
  EXPECT_NE(e.find("more than 200000 rules"), std::string::npos) << e;
}

TEST(SchemaLimits, ThousandsOfPropertiesNeedNoRecursion) {
  std::string props;
  for (int i = 0; i < 2000; ++i) props += (i ? "," : "") + std::string("\"p") + std::to_string(i) + R"(":{"type":"integer"})";
  Matcher m(Grammar::fromSchema(R"({"type":"object","properties":{)" + props + R"(},"required":["p1999"]})"));
  EXPECT_TRUE(m.advance(R"({"p3": 1, "p1999": 2})"));
  EXPECT_TRUE(m.complete());
  EXPECT_FALSE(Matcher(Grammar::fromSchema(R"({"type":"object","properties":{)" + props + R"(},"required":["p1999"]})"))
                   .advance(R"({"p3": 1})"));
}

}  // namespace
