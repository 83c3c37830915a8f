// The OpenAI features clients send, on the scripted model: n choices on one read of the prompt,
// logit_bias, fresh seeds, tool_choice and parallel_tool_calls forced through the grammar,
// streamed tool-call deltas, refusal, cached tokens, system_fingerprint, and the generic tool
// prompt for a template that writes no tools (SmolLM2's).
#include <gtest/gtest.h>

#include <future>
#include <set>

#include "ai/tools_prompt.h"
#include "serve_fixture.h"

using namespace gizml;
using namespace gizml::ai::servetest;
using nlohmann::json;
using nlohmann::ordered_json;

namespace {

json userChat(const std::string& text, int maxTokens) {
  return {{"messages", {{{"role", "user"}, {"content", text}}}}, {"max_tokens", maxTokens}};
}

const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
   "parameters": {"type": "object", "properties": {"unit": {"enum": ["c", "f"]}}, "required": ["unit"],
                  "additionalProperties": false}}},
  {"type": "function", "function": {"name": "get_time",
   "parameters": {"type": "object", "properties": {"zone": {"enum": ["utc"]}}, "required": ["zone"],
                  "additionalProperties": false}}}])");

// SmolLM2-135M-Instruct's chat template, as its GGUF's tokenizer.chat_template holds it: it
// writes neither tools nor tool calls.
const char* kSmolTemplate =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

struct FeaturesTest : ::testing::Test {
  TestModel test;
  std::unique_ptr<ai::Server> server;
  int port = 0;

  void start(int slots = 4) {
    std::vector<ai::Served> served;
    served.push_back(test.served("fake", slots, 1024));
    ai::ServeOptions o;
    o.port = 0;
    server = std::make_unique<ai::Server>(std::move(served), o);
    port = server->port();
  }
  void SetUp() override { start(); }

  std::vector<json> chunks(const Response& r) {
    EXPECT_EQ(r.status, 200) << r.body;
    std::vector<json> out;
    for (const std::string& e : r.events())
      if (e != "[DONE]") out.push_back(json::parse(e));
    EXPECT_FALSE(r.events().empty() || r.events().back() != "[DONE]");
    return out;
  }

  // The engine's own answer to a one-message chat with this sampling, decoded.
  std::string alone(const std::string& text, int64_t limit, const llm::Sampling& s) {
    llm::Engine engine = test.model->engine(1, 256);
    llm::Request r;
    r.prompt = test.model->chatTokens(ordered_json::array({{{"role", "user"}, {"content", text}}})).ids;
    r.limit = limit;
    r.sampling = s;
    return test.tokenizer->decode(engine.generate({r})[0].tokens, true);
  }
};

}  // namespace

TEST_F(FeaturesTest, NChoicesReadThePromptOnceAndEachSamplesItsOwnSeed) {
  json request = userChat("Tell me", 8);
  request["n"] = 3;
  request["temperature"] = 1.0;
  request["top_k"] = 32;  // the wave's tokens; a full sort of the vocabulary per token costs time
  request["seed"] = 5;
  const int64_t fedBefore = test.fake->fed;
  const json body = post(port, "/v1/chat/completions", request).json();
  ASSERT_EQ(body["choices"].size(), 3u) << body.dump();
  const size_t prompt = test.model->chatTokens(ordered_json::array({{{"role", "user"}, {"content", "Tell me"}}})).ids.size();
  EXPECT_EQ(body["usage"]["prompt_tokens"], prompt);
  EXPECT_EQ(body["usage"]["completion_tokens"], 24);
  // The prompt once, then each choice's tokens but its last.
  EXPECT_EQ(test.fake->fed - fedBefore, static_cast<int64_t>(prompt) + 3 * 7);
  std::set<std::string> distinct;
  for (size_t i = 0; i < 3; ++i) {
    const json& choice = body["choices"][i];
    EXPECT_EQ(choice["index"], i);
    // Choice i is what the request alone gives with seed 5 + i.
    EXPECT_EQ(choice["message"]["content"], alone("Tell me", 8, llm::sample(1.0, 32, 1.0, 5 + i))) << i;
    distinct.insert(choice["message"]["content"]);
  }
  EXPECT_GT(distinct.size(), 1u);

  // Streamed: chunks of every index, each index's pieces its whole choice.
  request["stream"] = true;
  request["stream_options"] = {{"include_usage", true}};
  std::vector<std::string> text(3);
  std::vector<std::string> finish(3);
  json usage;
  for (const json& c : chunks(post(port, "/v1/chat/completions", request))) {
    if (c["choices"].empty()) {
      usage = c["usage"];
      continue;
    }
    ASSERT_EQ(c["choices"].size(), 1u);
    const size_t i = c["choices"][0]["index"];
    ASSERT_LT(i, 3u);
    const json& delta = c["choices"][0]["delta"];
    if (delta.contains("content")) text[i] += delta["content"].get<std::string>();
    if (!c["choices"][0]["finish_reason"].is_null()) finish[i] = c["choices"][0]["finish_reason"];
  }
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(text[i], body["choices"][i]["message"]["content"]) << i;
    EXPECT_EQ(finish[i], "length");
  }
  EXPECT_EQ(usage["completion_tokens"], 24);
  EXPECT_EQ(usage["prompt_tokens"], prompt);
  // The second request found the prompt in the slot the first's choice 0 left.
  EXPECT_EQ(usage["prompt_tokens_details"]["cached_tokens"], prompt - 1);

  // More choices than slots, or than the limit: 400.
  request["stream"] = false;
  request.erase("stream_options");
  request["n"] = 5;
  const Response tooMany = post(port, "/v1/chat/completions", request);
  EXPECT_EQ(tooMany.status, 400);
  EXPECT_EQ(tooMany.json()["error"]["param"], "n");
  EXPECT_NE(tooMany.body.find("'fake' has 4"), std::string::npos) << tooMany.body;
  request["n"] = 9;
  EXPECT_EQ(post(port, "/v1/chat/completions", request).json()["error"]["param"], "n");
}

// A client that resends its history gets it from the cache, and a system prompt another chat
// sent is read once: the second chat starts from the first one's slot without cutting that
// slot's own turn away, so the first chat's follow-up still finds all of it.
TEST_F(FeaturesTest, ASharedSystemPromptAndAFollowUpTurnComeFromTheCache) {
  const json system = {{"role", "system"}, {"content", "You answer questions about rivers and lakes."}};
  const auto chat = [&](json messages) {
    const Response r = post(port, "/v1/chat/completions", {{"messages", messages}, {"max_tokens", 6}});
    EXPECT_EQ(r.status, 200) << r.body;
    return r.json();
  };
  const json ask = {system, {{"role", "user"}, {"content", "Name a river."}}};
  const json first = chat(ask);
  EXPECT_EQ(first["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  const json other = chat({system, {{"role", "user"}, {"content", "Name a lake."}}});
  const int shared = other["usage"]["prompt_tokens_details"]["cached_tokens"];
  EXPECT_GT(shared, 0);
  EXPECT_LT(shared, other["usage"]["prompt_tokens"].get<int>());
  json follow = ask;
  follow.push_back({{"role", "assistant"}, {"content", first["choices"][0]["message"]["content"]}});
  follow.push_back({{"role", "user"}, {"content", "And another?"}});
  const json next = chat(follow);
  // Its question survived the other chat: more than the system prompt comes from the cache (up
  // to where Qwen3's template rewrites the earlier assistant turn, dropping its empty thinking).
  EXPECT_GT(next["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), shared);
}

// Four chats at once after one long system prompt (the head, 256+ tokens): it is read once, and
// every other request starts from it, whether it waited for the head or found it in a slot.
TEST_F(FeaturesTest, ALongSharedSystemPromptIsReadOnce) {
  std::string rules;
  for (int i = 0; i < 40; ++i) rules += "Rule " + std::to_string(i) + ": answer about rivers only. ";
  const json system = {{"role", "system"}, {"content", rules}};
  std::vector<std::future<Response>> answers;
  for (int i = 0; i < 4; ++i) {
    const json body = {{"messages", {system, {{"role", "user"}, {"content", "River " + std::to_string(i) + "?"}}}},
                       {"max_tokens", 4}};
    answers.push_back(std::async(std::launch::async, [&, body] { return post(port, "/v1/chat/completions", body); }));
  }
  int readWhole = 0;
  for (auto& a : answers) {
    const Response r = a.get();
    ASSERT_EQ(r.status, 200) << r.body;
    const json usage = r.json()["usage"];
    const int cached = usage["prompt_tokens_details"]["cached_tokens"];
    if (cached == 0) ++readWhole;
    else EXPECT_GE(cached, 256) << usage.dump();
  }
  EXPECT_EQ(readWhole, 1);
}

TEST_F(FeaturesTest, NChoicesOfCompletions) {
  const json body = post(port, "/v1/completions", {{"prompt", "Once"}, {"max_tokens", 5}, {"n", 2},
                                                  {"temperature", 0}}).json();
  ASSERT_EQ(body["choices"].size(), 2u);
  EXPECT_EQ(body["choices"][0]["text"], body["choices"][1]["text"]);  // greedy: the same
  EXPECT_EQ(body["choices"][1]["index"], 1);
  EXPECT_EQ(body["usage"]["completion_tokens"], 10);
}

TEST_F(FeaturesTest, SeedlessRequestsSampleAfreshSeededOnesRepeat) {
  json request = userChat("Tell me", 12);
  request["temperature"] = 1.0;
  request["top_k"] = 32;
  const auto content = [&] { return post(port, "/v1/chat/completions", request).json()["choices"][0]["message"]["content"]; };
  EXPECT_NE(content(), content());
  request["seed"] = 42;
  EXPECT_EQ(content(), content());
  EXPECT_EQ(content(), alone("Tell me", 12, llm::sample(1.0, 32, 1.0, 42)));
}

TEST_F(FeaturesTest, LogitBiasShiftsTheLogitsBeforeSamplingAndLogprobs) {
  test.setScript("Hello world");
  const TokenId first = test.fake->script[0];
  json request = userChat("Hi", 3);
  request["logit_bias"] = {{std::to_string(first), -100}};
  request["logprobs"] = true;
  json body = post(port, "/v1/chat/completions", request).json();
  // -20 everywhere else: the lowest id, 0 ('!'), wins the first token.
  EXPECT_EQ(body["choices"][0]["logprobs"]["content"][0]["token"], "!") << body.dump();
  // +100 on id 5 ('&'): every token, with a log probability of about 0.
  request["logit_bias"] = {{"5", 100}};
  body = post(port, "/v1/chat/completions", request).json();
  EXPECT_EQ(body["choices"][0]["message"]["content"], "&&&");
  EXPECT_GT(body["choices"][0]["logprobs"]["content"][0]["logprob"].get<double>(), -1e-3);
  EXPECT_TRUE(body["choices"][0]["logprobs"]["refusal"].is_null());
  EXPECT_TRUE(body["choices"][0]["logprobs"].contains("refusal"));
}

TEST_F(FeaturesTest, RefusalAndSystemFingerprintOnEveryResponse) {
  test.setScript("Hello");
  const json body = post(port, "/v1/chat/completions", userChat("Hi", 4)).json();
  EXPECT_TRUE(body["choices"][0]["message"].contains("refusal"));
  EXPECT_TRUE(body["choices"][0]["message"]["refusal"].is_null());
  const std::string fingerprint = body["system_fingerprint"];
  EXPECT_EQ(fingerprint.rfind("fp_", 0), 0u);
  EXPECT_NE(fingerprint.find("_parts"), std::string::npos);  // a model made in code, not loaded
  json request = userChat("Hi", 4);
  request["stream"] = true;
  const std::vector<json> all = chunks(post(port, "/v1/chat/completions", request));
  ASSERT_FALSE(all.empty());
  for (const json& c : all) EXPECT_EQ(c["system_fingerprint"], fingerprint);
  EXPECT_TRUE(all[0]["choices"][0]["delta"]["refusal"].is_null());
  EXPECT_EQ(post(port, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 1}}).json()["system_fingerprint"], fingerprint);
}

TEST_F(FeaturesTest, ToolChoiceRequiredAndNamedAreForcedThroughTheGrammar) {
  test.setScript("I would rather not call anything.");
  json request = userChat("Weather?", 120);
  request["tools"] = kTools;
  request["tool_choice"] = "required";
  request["parallel_tool_calls"] = false;
  json body = post(port, "/v1/chat/completions", request).json();
  json choice = body["choices"][0];
  ASSERT_EQ(choice["finish_reason"], "tool_calls") << body.dump();
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
  const std::string name = choice["message"]["tool_calls"][0]["function"]["name"];
  EXPECT_TRUE(name == "get_weather" || name == "get_time") << name;
  const json args = json::parse(choice["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>());
  EXPECT_TRUE(args == json({{"unit", "c"}}) || args == json({{"unit", "f"}}) || args == json({{"zone", "utc"}})) << args;

  request["tool_choice"] = {{"type", "function"}, {"function", {{"name", "get_time"}}}};
  body = post(port, "/v1/chat/completions", request).json();
  choice = body["choices"][0];
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << body.dump();
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["name"], "get_time");
  EXPECT_EQ(json::parse(choice["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>()),
            json({{"zone", "utc"}}));

  // The grammar itself: one call of the named tool, nothing else.
  ai::ToolChoice named{ai::ToolChoice::Named, "get_time", false};
  grammar::Matcher m(*ai::toolCallGrammar(ordered_json(kTools), named));
  EXPECT_TRUE(m.accepts("<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"utc\"}}\n</tool_call>"));
  EXPECT_FALSE(m.accepts("<tool_call>\n{\"name\": \"get_weather\""));
  EXPECT_FALSE(m.accepts("Sure"));
  ASSERT_TRUE(m.advance("<tool_call>\n{\"name\":\"get_time\",\"arguments\":{\"zone\":\"utc\"}}\n</tool_call>"));
  EXPECT_TRUE(m.complete());
  EXPECT_FALSE(m.accepts("<tool_call>"));  // parallel_tool_calls false: one at most
  grammar::Matcher several(*ai::toolCallGrammar(ordered_json(kTools), {ai::ToolChoice::Required, "", true}));
  EXPECT_TRUE(several.advance("<tool_call>\n{\"name\":\"get_time\",\"arguments\":{\"zone\":\"utc\"}}\n</tool_call>\n"
                              "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"unit\":\"f\"}}\n</tool_call>"));
  EXPECT_TRUE(several.complete());

  // Unknown names and forced calls without tools: 400.
  request["tool_choice"] = {{"type", "function"}, {"function", {{"name", "get_mood"}}}};
  const json unknown = post(port, "/v1/chat/completions", request).json();
  EXPECT_EQ(unknown["error"]["param"], "tool_choice.function.name");
  EXPECT_NE(unknown["error"]["message"].get<std::string>().find("get_mood"), std::string::npos);
  request.erase("tools");
  request["tool_choice"] = "required";
  EXPECT_EQ(post(port, "/v1/chat/completions", request).json()["error"]["param"], "tool_choice");
}

TEST_F(FeaturesTest, ToolCallsStreamAsOpenAIsDeltas) {
  test.setScript("Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"unit\": \"c\"}}\n</tool_call>\n"
                 "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"utc\"}}\n</tool_call>");
  json request = userChat("Weather and time?", 200);
  request["tools"] = kTools;
  const json whole = post(port, "/v1/chat/completions", request).json();
  ASSERT_EQ(whole["choices"][0]["message"]["tool_calls"].size(), 2u) << whole.dump();
  request["stream"] = true;
  // Accumulated as the openai client does: a delta with an id starts a call at its index,
  // later ones append their argument pieces.
  std::vector<json> calls;
  std::string content, finish;
  for (const json& c : chunks(post(port, "/v1/chat/completions", request))) {
    const json& d = c["choices"][0]["delta"];
    if (d.contains("content")) content += d["content"].get<std::string>();
    if (!c["choices"][0]["finish_reason"].is_null()) finish = c["choices"][0]["finish_reason"];
    if (!d.contains("tool_calls")) continue;
    ASSERT_EQ(d["tool_calls"].size(), 1u);
    const json& t = d["tool_calls"][0];
    const size_t index = t["index"];
    if (t.contains("id")) {
      ASSERT_EQ(index, calls.size());
      EXPECT_EQ(t["type"], "function");
      EXPECT_EQ(t["function"]["arguments"], "");
      calls.push_back(t);
    } else {
      ASSERT_LT(index, calls.size());
      EXPECT_FALSE(t["function"].contains("name"));
      calls[index]["function"]["arguments"] = calls[index]["function"]["arguments"].get<std::string>() +
                                              t["function"]["arguments"].get<std::string>();
    }
  }
  EXPECT_EQ(finish, "tool_calls");
  EXPECT_EQ(content, "Checking.\n");
  ASSERT_EQ(calls.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const json& w = whole["choices"][0]["message"]["tool_calls"][i];
    EXPECT_EQ(calls[i]["function"]["name"], w["function"]["name"]);
    EXPECT_EQ(calls[i]["function"]["arguments"], w["function"]["arguments"]);
  }
  // parallel_tool_calls false keeps the first call.
  request["stream"] = false;
  request["parallel_tool_calls"] = false;
  const json one = post(port, "/v1/chat/completions", request).json();
  ASSERT_EQ(one["choices"][0]["message"]["tool_calls"].size(), 1u);
  EXPECT_EQ(one["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "get_weather");
}

TEST(GenericTools, ATemplateWithoutToolsGetsTheGenericPromptAndItsCallsParse) {
  TestModel qwen;  // the Qwen3 tokenizer; SmolLM2's template in place of Qwen3's
  llm::Model smol(qwen.fake, qwen.tokenizer, kSmolTemplate);
  EXPECT_EQ(smol.calls(), llm::CallFormat::None);
  EXPECT_FALSE(ai::templateTakesTools(smol));
  EXPECT_TRUE(ai::templateTakesTools(*qwen.model));

  std::vector<ai::Served> served;
  served.push_back({"smol", smol, smol.engine(2, 1024)});
  ai::ServeOptions o;
  o.port = 0;
  ai::Server server(std::move(served), o);
  qwen.fake->script = qwen.tokenizer->encode(
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"unit\": \"f\"}}\n</tool_call>", false);
  json request = {{"messages", {{{"role", "user"}, {"content", "Weather?"}}}}, {"tools", kTools}, {"max_tokens", 100}};
  const json body = post(server.port(), "/v1/chat/completions", request).json();
  const json& choice = body["choices"][0];
  ASSERT_EQ(choice["finish_reason"], "tool_calls") << body.dump();
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["name"], "get_weather");

  // The prompt the model read: the preamble with the tools as JSON and the call format, in the
  // template's own system message (SmolLM2's default one is replaced, as with any system message).
  // Two calls in the assistant's turn (the answer's and one more), each answered by a tool message
  // naming it (OpenAI's rule).
  json calls = choice["message"]["tool_calls"];
  calls.push_back({{"id", "call_2"}, {"type", "function"}, {"function", {{"name", "get_time"}, {"arguments", "{}"}}}});
  json next = request;
  next["messages"].push_back({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", calls}});
  next["messages"].push_back({{"role", "tool"}, {"tool_call_id", calls[0]["id"]}, {"content", "40F"}});
  next["messages"].push_back({{"role", "tool"}, {"tool_call_id", "call_2"}, {"content", "windy"}});
  qwen.fake->script = qwen.tokenizer->encode("Cold.", false);
  const json answer = post(server.port(), "/v1/chat/completions", next).json();
  EXPECT_EQ(answer["choices"][0]["message"]["content"], "Cold.");
  const ordered_json rendered = ai::genericToolMessages(
      ordered_json::parse(R"([{"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"unit": "f"}}},
                                                           {"type": "function", "function": {"name": "get_time", "arguments": {}}}]},
        {"role": "tool", "content": "40F"}, {"role": "tool", "content": "windy"}])"),
      ordered_json(kTools), {});
  const std::string prompt = smol.chatPrompt(rendered, ordered_json::array(), ordered_json::object());
  EXPECT_EQ(answer["usage"]["prompt_tokens"], qwen.tokenizer->encode(prompt, false).size());
  for (const char* part : {"<|im_start|>system\nYou can call these tools", "\"name\":\"get_time\"",
                           "\"enum\":[\"c\",\"f\"]", "<tool_call>\n{\"name\":\"TOOL_NAME\"",
                           "<|im_start|>assistant\n<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"unit\":\"f\"}}\n</tool_call>\n"
                           "<tool_call>\n{\"name\":\"get_time\",\"arguments\":{}}\n</tool_call><|im_end|>",
                           "<|im_start|>user\n<tool_response>\n40F\n</tool_response>\n<tool_response>\nwindy\n</tool_response><|im_end|>"})
    EXPECT_NE(prompt.find(part), std::string::npos) << part << "\n" << prompt;
  EXPECT_EQ(prompt.find("<|im_start|>tool"), std::string::npos);

  // tool_choice none: no preamble, calls are not read.
  request["tool_choice"] = "none";
  const std::string plain = smol.chatPrompt(
      ai::genericToolMessages(ordered_json(request["messages"]), ordered_json::array(), {ai::ToolChoice::None, "", true}),
      ordered_json::array(), ordered_json::object());
  EXPECT_EQ(plain.find("You can call"), std::string::npos);
  server.stop();
}
