// Requests the server must refuse without harm: JSON nested past the depth limit in every field
// the request path walks (issue 17's reproductions, which crashed the process with a stack
// overflow), and OpenAI's ranges and required fields. Each refusal is OpenAI's error object
// naming the field, and the server answers the next request.
#include <gtest/gtest.h>

#include "ai/answer.h"
#include "core/json_input.h"
#include "serve_fixture.h"

using namespace gizml;
using namespace gizml::ai::servetest;
using nlohmann::json;

namespace {

// n arrays inside one another around `inner` (built as text: the library would recurse).
std::string nestedArrays(int n, const std::string& inner = "1") {
  return std::string(static_cast<size_t>(n), '[') + inner + std::string(static_cast<size_t>(n), ']');
}

// A JSON Schema of n arrays of arrays.
std::string nestedSchema(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += R"({"type":"array","items":)";
  s += "{}";
  s += std::string(static_cast<size_t>(n), '}');
  return s;
}

const std::string kUser = R"({"role":"user","content":"hi"})";

std::string chatBody(const std::string& messages, const std::string& more = "") {
  return R"({"max_tokens":2,"messages":[)" + messages + "]" + (more.empty() ? "" : "," + more) + "}";
}

struct Failure {
  int status = 0;
  std::string message, param;
};

Failure failureOf(const Response& r) {
  Failure f{r.status, "", ""};
  const json body = json::parse(r.body, nullptr, false);
  if (body.is_discarded() || !body.contains("error")) return f;
  f.message = body["error"].value("message", "");
  if (body["error"]["param"].is_string()) f.param = body["error"]["param"];
  return f;
}

struct RequestLimitsTest : ::testing::Test {
  TestModel test;
  std::unique_ptr<ai::Server> server;
  int port = 0;

  void SetUp() override {
    ai::ServeOptions options;
    options.port = 0;
    std::vector<ai::Served> served;
    served.push_back(test.served("fake", 1, 256));
    server = std::make_unique<ai::Server>(std::move(served), options);
    port = server->port();
  }
  Response chat(const std::string& body) { return call(port, "POST", "/v1/chat/completions", body); }

  // A refusal naming the field (param begins with `param`) and the limit; then a good request.
  void expectRefused(const Response& r, const std::string& param, const std::string& why) {
    const Failure f = failureOf(r);
    EXPECT_EQ(f.status, 400) << r.body.substr(0, 300);
    EXPECT_EQ(f.param.rfind(param, 0), 0u) << f.param;
    EXPECT_NE(f.message.find(why), std::string::npos) << f.message;
    EXPECT_EQ(call(port, "GET", "/health").status, 200);
    EXPECT_EQ(chat(chatBody(kUser)).status, 200);
  }
  void expectTooDeep(const Response& r, const std::string& param) {
    expectRefused(r, param, "deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  }
};

TEST_F(RequestLimitsTest, DeepSchemaInResponseFormat) {
  const std::string format = R"("response_format":{"type":"json_schema","json_schema":{"name":"x","schema":)" +
                             nestedSchema(5000) + "}}";
  expectTooDeep(chat(chatBody(kUser, format)), "response_format.json_schema.schema.items.items");
}

TEST_F(RequestLimitsTest, DeepToolParameters) {
  const std::string tools = R"("tools":[{"type":"function","function":{"name":"f","parameters":)" +
                            nestedSchema(5000) + "}}]";  // 10,000 levels
  expectTooDeep(chat(chatBody(kUser, tools)), "tools[0].function.parameters.items");
}

TEST_F(RequestLimitsTest, DeepToolCallArgumentsString) {
  // The arguments are a string of JSON: parsed (for the template) with the same limit.
  const std::string assistant = R"({"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function",)"
                                R"("function":{"name":"f","arguments":")" + nestedArrays(30000) + R"("}}]})";
  const std::string tool = R"({"role":"tool","tool_call_id":"c1","content":"ok"})";
  expectTooDeep(chat(chatBody(kUser + "," + assistant + "," + tool)), "messages[1].tool_calls[0].function.arguments");
}

TEST_F(RequestLimitsTest, DeepChatTemplateKwargs) {
  expectTooDeep(chat(chatBody(kUser, R"("chat_template_kwargs":{"x":)" + nestedArrays(30000) + "}")),
                "chat_template_kwargs.x[0][0]");
}

TEST_F(RequestLimitsTest, DeepUnknownKeyInAMessage) {
  const std::string message = R"({"role":"user","content":"hi","extra":)" + nestedArrays(100000) + "}";
  expectTooDeep(chat(chatBody(message)), "messages[0].extra[0][0]");
}

TEST_F(RequestLimitsTest, DeepPromptOfACompletion) {
  expectTooDeep(call(port, "POST", "/v1/completions", R"({"prompt":)" + nestedArrays(1000) + "}"), "prompt[0][0]");
}

TEST_F(RequestLimitsTest, TheLimitItselfIsAccepted) {
  // The body is level 1, chat_template_kwargs level 2: its value may nest to the limit.
  const int inside = kMaxJsonDepth - 2;
  EXPECT_EQ(chat(chatBody(kUser, R"("chat_template_kwargs":{"x":)" + nestedArrays(inside) + "}")).status, 200);
  expectTooDeep(chat(chatBody(kUser, R"("chat_template_kwargs":{"x":)" + nestedArrays(inside + 1) + "}")),
                "chat_template_kwargs.x");
}

TEST_F(RequestLimitsTest, DeepSchemaReferencesHitTheCompilersLimit) {
  // Shallow JSON, deep schema: a chain of $defs each referring to the next.
  std::string defs;
  const int n = 2000;
  for (int i = 0; i < n; ++i) {
    if (i) defs += ',';
    defs += "\"d" + std::to_string(i) + "\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/d" + std::to_string(i + 1) + "\"}}";
  }
  defs += ",\"d" + std::to_string(n) + "\":{\"type\":\"integer\"}";
  const std::string schema = R"({"$ref":"#/$defs/d0","$defs":{)" + defs + "}}";
  const std::string format = R"("response_format":{"type":"json_schema","json_schema":{"name":"x","schema":)" + schema + "}}";
  expectRefused(chat(chatBody(kUser, format)), "response_format", "nests deeper than");
}

TEST_F(RequestLimitsTest, OpenAIsRangesAndRequiredFields) {
  const std::string user = kUser;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"("temperature":2.5)", "temperature"},
      {R"("temperature":-0.1)", "temperature"},
      {R"("top_p":0)", "top_p"},
      {R"("top_p":1.5)", "top_p"},
      {R"("max_tokens":-5)", "max_tokens"},
      {R"("max_completion_tokens":0)", "max_completion_tokens"},
      {R"("top_logprobs":21,"logprobs":true)", "top_logprobs"},
      {R"("stream_options":{"include_usage":true})", "stream_options"},
      {R"("stream":false,"stream_options":{"include_usage":true})", "stream_options"},
      {R"("tools":[{"type":"function","function":{"name":"a b"}}])", "tools[0].function.name"},
  };
  for (const auto& [more, param] : cases) {
    const Failure f = failureOf(chat(chatBody(user, more)));
    EXPECT_EQ(f.status, 400) << more;
    EXPECT_EQ(f.param, param) << more << ": " << f.message;
    EXPECT_NE(f.message.find(param), std::string::npos) << f.message;
  }
  // The bounds themselves are OpenAI's, accepted.
  for (const std::string more : {R"("temperature":2)", R"("temperature":0)", R"("top_p":1)",
                                 R"("stream":true,"stream_options":{"include_usage":true})"})
    EXPECT_EQ(chat(chatBody(user, more)).status, 200) << more;

  // A tool message answers a call: tool_call_id is required.
  const std::string assistant = R"({"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function",)"
                                R"("function":{"name":"f","arguments":"{}"}}]})";
  const Failure noId = failureOf(chat(chatBody(user + "," + assistant + R"(,{"role":"tool","content":"ok"})")));
  EXPECT_EQ(noId.status, 400);
  EXPECT_EQ(noId.param, "messages[2].tool_call_id");
  const Failure badId =
      failureOf(chat(chatBody(user + "," + assistant + R"(,{"role":"tool","tool_call_id":7,"content":"ok"})")));
  EXPECT_EQ(badId.param, "messages[2].tool_call_id");
  EXPECT_EQ(chat(chatBody(user + "," + assistant + R"(,{"role":"tool","tool_call_id":"c1","content":"ok"})")).status,
            200);
  // ... one of the calls just before it (OpenAI's checks), and a call has its id.
  const Failure otherId =
      failureOf(chat(chatBody(user + "," + assistant + R"(,{"role":"tool","tool_call_id":"c2","content":"ok"})")));
  EXPECT_EQ(otherId.param, "messages[2].tool_call_id");
  const Failure noCall = failureOf(chat(chatBody(user + R"(,{"role":"tool","tool_call_id":"c1","content":"ok"})")));
  EXPECT_EQ(noCall.param, "messages[1].role");
  const Failure afterUser = failureOf(
      chat(chatBody(user + "," + assistant + "," + user + R"(,{"role":"tool","tool_call_id":"c1","content":"ok"})")));
  EXPECT_EQ(afterUser.param, "messages[3].role");
  const Failure callWithoutId = failureOf(chat(chatBody(
      user + R"(,{"role":"assistant","content":null,"tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]})")));
  EXPECT_EQ(callWithoutId.param, "messages[1].tool_calls[0].id");

  // Completions: logprobs is at most 5 there (OpenAI's bound), stream_options needs stream too.
  const auto completion = [&](const std::string& more) {
    return failureOf(call(port, "POST", "/v1/completions", R"({"prompt":"hi","max_tokens":2,)" + more + "}"));
  };
  EXPECT_EQ(completion(R"("logprobs":6)").param, "logprobs");
  EXPECT_EQ(completion(R"("stream_options":{"include_usage":true})").param, "stream_options");
  EXPECT_EQ(completion(R"("temperature":3)").param, "temperature");
}

TEST(JsonInput, NamesWhereItIsTooDeepAndParsesWhatIsNot) {
  EXPECT_EQ(parseJson(nestedArrays(kMaxJsonDepth - 1)).dump(), json::parse(nestedArrays(kMaxJsonDepth - 1)).dump());
  try {
    parseJson(R"({"a":[1,{"b":)" + nestedArrays(10) + "}]}", 4);
    FAIL() << "no error";
  } catch (const JsonTooDeep& e) {
    EXPECT_EQ(e.path, "a[1].b[0]");
    EXPECT_EQ(e.limit, 4);
  }
  EXPECT_FALSE(tryParseJson(nestedArrays(100000)).has_value());
  EXPECT_FALSE(tryParseJson("{\"a\":").has_value());
  EXPECT_THROW(parseJson("[1,"), nlohmann::ordered_json::parse_error);
}

TEST(AnswerLimits, DeepToolCallsInModelOutputAreText) {
  // Model output is outside input too: a call whose arguments nest too deep is no call.
  const std::string deep = nestedArrays(30000);
  const llm::ToolCalls read = llm::toolCalls("<tool_call>\n{\"name\": \"f\", \"arguments\": " + deep + "}\n</tool_call>");
  EXPECT_TRUE(read.calls.empty());
  EXPECT_NE(read.rest.find("<tool_call>"), std::string::npos);
  ASSERT_EQ(read.errors.size(), 1u);
  EXPECT_NE(read.errors[0].find("nested deeper than 64 levels"), std::string::npos) << read.errors[0];
  // In Qwen's function form a too-deep value stays the string it was.
  const auto typed = llm::toolCalls("<tool_call>\n<function=f>\n<parameter=p>\n" + deep +
                                    "\n</parameter>\n</function>\n</tool_call>").calls;
  ASSERT_EQ(typed.size(), 1u);
  EXPECT_EQ(json::parse(typed[0].arguments)["p"], deep);
}

}  // namespace
