// The server in process on 127.0.0.1 (an ephemeral port) with the scripted model: the routes,
// whole and streamed answers, stops, limits, concurrency, disconnects and bad requests.
#include <gtest/gtest.h>

#include <future>

#include "serve_fixture.h"

using namespace gizml;
using namespace gizml::ai::servetest;
using nlohmann::json;
using nlohmann::ordered_json;

namespace {

ai::ServeOptions ephemeral() {
  ai::ServeOptions o;
  o.port = 0;
  return o;
}

json userChat(const std::string& text, int maxTokens) {
  return {{"messages", {{{"role", "user"}, {"content", text}}}}, {"max_tokens", maxTokens}};
}

struct ServerTest : ::testing::Test {
  TestModel test;
  std::unique_ptr<ai::Server> server;
  int port = 0;

  void start(int slots = 2, int64_t context = 256, ai::ServeOptions options = ephemeral()) {
    std::vector<ai::Served> served;
    served.push_back(test.served("fake", slots, context));
    served.push_back(test.served("other", 1, 64));
    server = std::make_unique<ai::Server>(std::move(served), options);
    port = server->port();
  }
  void SetUp() override { start(); }

  // The engine's own greedy answer to a one-message chat, decoded.
  std::string reference(const std::string& text, int64_t limit, size_t* tokens = nullptr) {
    llm::Engine engine = test.model->engine(1, 256);
    llm::Request r;
    r.prompt = test.model->chatTokens(ordered_json::array({{{"role", "user"}, {"content", text}}})).ids;
    r.limit = limit;
    const llm::Result out = engine.generate({r})[0];
    if (tokens) *tokens = out.tokens.size();
    return test.tokenizer->decode(out.tokens, true);
  }

  // The concatenated content deltas of a stream, checking its shape.
  std::string streamed(const Response& r, std::string* finish = nullptr, json* usage = nullptr) {
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.headers.at("content-type"), "text/event-stream");
    const std::vector<std::string> events = r.events();
    EXPECT_GE(events.size(), 2u);
    if (events.empty()) return "";
    EXPECT_EQ(events.back(), "[DONE]");
    std::string text;
    for (size_t i = 0; i + 1 < events.size(); ++i) {
      const json c = json::parse(events[i]);
      if (c.contains("usage") && c["choices"].empty()) {
        if (usage) *usage = c["usage"];
        continue;
      }
      const json& choice = c["choices"][0];
      if (c["object"] == "chat.completion.chunk") {
        if (choice["delta"].contains("content") && choice["delta"]["content"].is_string())
          text += choice["delta"]["content"].get<std::string>();
      } else {
        EXPECT_EQ(c["object"], "text_completion");
        text += choice["text"].get<std::string>();
      }
      if (!choice["finish_reason"].is_null() && finish) *finish = choice["finish_reason"];
    }
    return text;
  }
};

}  // namespace

TEST_F(ServerTest, ListsItsModelsTheFirstFirst) {
  EXPECT_EQ(server->url(), "http://127.0.0.1:" + std::to_string(port));
  const Response r = call(port, "GET", "/v1/models");
  ASSERT_EQ(r.status, 200);
  const json body = r.json();
  EXPECT_EQ(body["object"], "list");
  ASSERT_EQ(body["data"].size(), 2u);
  EXPECT_EQ(body["data"][0]["id"], "fake");
  EXPECT_EQ(body["data"][1]["id"], "other");
  EXPECT_EQ(body["data"][0]["object"], "model");
  EXPECT_EQ(call(port, "GET", "/v1/models/other").json()["id"], "other");
  EXPECT_EQ(call(port, "GET", "/v1/models/none").status, 404);
}

TEST_F(ServerTest, ChatWholeIsTheEnginesAnswerWithUsage) {
  size_t tokens = 0;
  const std::string expected = reference("Hello", 12, &tokens);
  const Response r = post(port, "/v1/chat/completions", userChat("Hello", 12));
  ASSERT_EQ(r.status, 200) << r.body;
  const json body = r.json();
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["model"], "fake");
  EXPECT_EQ(body["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_TRUE(body["created"].is_number_integer());
  const json& choice = body["choices"][0];
  EXPECT_EQ(choice["index"], 0);
  EXPECT_EQ(choice["message"]["role"], "assistant");
  EXPECT_EQ(choice["message"]["content"], expected);
  EXPECT_EQ(choice["finish_reason"], "length");
  const size_t prompt = test.model->chatTokens(ordered_json::array({{{"role", "user"}, {"content", "Hello"}}})).ids.size();
  EXPECT_EQ(body["usage"]["prompt_tokens"], prompt);
  EXPECT_EQ(body["usage"]["completion_tokens"], 12);
  EXPECT_EQ(body["usage"]["total_tokens"], prompt + 12);
}

TEST_F(ServerTest, StreamedDeltasConcatenateToTheWholeAnswer) {
  const json whole = post(port, "/v1/chat/completions", userChat("Stream me", 20)).json();
  json request = userChat("Stream me", 20);
  request["stream"] = true;
  request["stream_options"] = {{"include_usage", true}};
  const Response r = post(port, "/v1/chat/completions", request);
  std::string finish;
  json usage;
  EXPECT_EQ(streamed(r, &finish, &usage), whole["choices"][0]["message"]["content"]);
  EXPECT_EQ(finish, "length");
  // The same counts; the stream read the prompt from the slot the first request left.
  for (const char* count : {"prompt_tokens", "completion_tokens", "total_tokens"}) EXPECT_EQ(usage[count], whole["usage"][count]);
  EXPECT_EQ(whole["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(usage["prompt_tokens_details"]["cached_tokens"], usage["prompt_tokens"].get<int>() - 1);
  // The first chunk names the role.
  EXPECT_EQ(json::parse(r.events()[0])["choices"][0]["delta"]["role"], "assistant");
}

TEST_F(ServerTest, CompletionsWholeAndStreamed) {
  const std::vector<TokenId> prompt = test.tokenizer->encode("Once upon a time", true);
  llm::Engine engine = test.model->engine(1, 256);
  llm::Request req;
  req.prompt = prompt;
  req.limit = 9;
  const std::string expected = test.tokenizer->decode(engine.generate({req})[0].tokens, true);

  const Response r = post(port, "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 9}, {"model", "fake"}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json body = r.json();
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["choices"][0]["text"], expected);
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["usage"]["prompt_tokens"], prompt.size());

  const Response s = post(port, "/v1/completions", {{"prompt", {"Once upon a time"}}, {"max_tokens", 9}, {"stream", true}});
  EXPECT_EQ(streamed(s), expected);
  // Token ids as the prompt give the same.
  const Response ids = post(port, "/v1/completions", {{"prompt", prompt}, {"max_tokens", 9}});
  EXPECT_EQ(ids.json()["choices"][0]["text"], expected);
}

TEST_F(ServerTest, LogprobsOfEachToken) {
  json chat = userChat("Hi", 4);
  chat["logprobs"] = true;
  chat["top_logprobs"] = 2;
  const json c = post(port, "/v1/chat/completions", chat).json();
  const json& content = c["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 4u);
  std::string joined;
  for (const json& t : content) {
    joined += t["token"].get<std::string>();
    EXPECT_LE(t["logprob"].get<double>(), 0.0);
    EXPECT_EQ(t["top_logprobs"].size(), 2u);
  }
  EXPECT_EQ(joined, c["choices"][0]["message"]["content"]);
  const json p = post(port, "/v1/completions", {{"prompt", "Hi"}, {"max_tokens", 3}, {"logprobs", 1}}).json();
  EXPECT_EQ(p["choices"][0]["logprobs"]["tokens"].size(), 3u);
  EXPECT_EQ(p["choices"][0]["logprobs"]["top_logprobs"][0].size(), 1u);
}

TEST_F(ServerTest, StopStringsCutTheAnswerAndNeverLeakIntoTheStream) {
  const std::string free = reference("Stop here", 30);
  ASSERT_GE(free.size(), 12u);
  const std::string stop = free.substr(7, 3);
  const std::string expected = free.substr(0, free.find(stop));
  json request = userChat("Stop here", 30);
  request["stop"] = {"never there", stop};
  const json whole = post(port, "/v1/chat/completions", request).json();
  EXPECT_EQ(whole["choices"][0]["message"]["content"], expected);
  EXPECT_EQ(whole["choices"][0]["finish_reason"], "stop");
  request["stream"] = true;
  std::string finish;
  EXPECT_EQ(streamed(post(port, "/v1/chat/completions", request), &finish), expected);
  EXPECT_EQ(finish, "stop");
  // A single string works too.
  request["stream"] = false;
  request["stop"] = stop;
  EXPECT_EQ(post(port, "/v1/chat/completions", request).json()["choices"][0]["message"]["content"], expected);
}

TEST_F(ServerTest, EndOfTurnFinishesWithStop) {
  server.reset();
  test.fake->endAfter = 5;
  start();
  const json body = post(port, "/v1/chat/completions", userChat("Short", 50)).json();
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(body["choices"][0]["message"]["content"].get<std::string>().size(), 5u);
  EXPECT_EQ(body["usage"]["completion_tokens"], 6);  // the end-of-turn token counts
}

TEST_F(ServerTest, ConcurrentRequestsEqualTheirAnswersAlone) {
  test.fake->stepDelayMs = 2;
  const std::vector<std::string> prompts = {"first question", "second, longer question", "third"};
  std::vector<std::string> alone;
  for (const std::string& p : prompts) alone.push_back(reference(p, 16));
  std::vector<std::future<Response>> answers;
  for (size_t i = 0; i < prompts.size(); ++i) {
    json request = userChat(prompts[i], 16);
    if (i == 1) request["stream"] = true;
    answers.push_back(std::async(std::launch::async, [&, request] { return post(port, "/v1/chat/completions", request); }));
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    const Response r = answers[i].get();
    ASSERT_EQ(r.status, 200) << r.body;
    if (i == 1) EXPECT_EQ(streamed(r), alone[i]);
    else EXPECT_EQ(r.json()["choices"][0]["message"]["content"], alone[i]) << i;
  }
}

TEST_F(ServerTest, AClientThatLeavesMidStreamIsCancelled) {
  server.reset();
  start(1, 2048);  // one slot: the next request runs only once the first is cancelled
  test.fake->stepDelayMs = 5;
  const int fd = connectTo(port);
  json request = userChat("long", 1000);
  request["stream"] = true;
  const std::string body = request.dump();
  sendText(fd, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) +
                   "\r\n\r\n" + body);
  char buffer[4096];
  pollfd p{fd, POLLIN, 0};
  ASSERT_GT(::poll(&p, 1, 5000), 0);
  ASSERT_GT(::recv(fd, buffer, sizeof buffer, 0), 0);  // the stream has begun
  ::close(fd);
  const auto start = std::chrono::steady_clock::now();
  const Response r = post(port, "/v1/chat/completions", userChat("next", 3));
  EXPECT_EQ(r.status, 200);
  // 1000 steps of 5 ms would take 5 s; the slot frees within a few steps.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(2000));
  EXPECT_LT(test.fake->passes.load(), 400);
}

TEST_F(ServerTest, KeepAliveServesRequestsInTurnOnOneConnection) {
  const std::string get = "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::string body = json{{"prompt", "a"}, {"max_tokens", 2}}.dump();
  const std::string postReq = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                              std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
  const std::string raw = rawExchange(port, get + postReq);  // pipelined
  const size_t second = raw.find("HTTP/1.1 200", 5);
  ASSERT_NE(second, std::string::npos) << raw;
  EXPECT_EQ(parseResponse(raw.substr(0, second)).status, 200);
  EXPECT_EQ(parseResponse(raw.substr(second)).json()["object"], "text_completion");
}

TEST_F(ServerTest, Http10StreamsWithoutChunksAndCloses) {
  const std::string body = json{{"prompt", "a"}, {"max_tokens", 3}, {"stream", true}}.dump();
  const std::string raw = rawExchange(port, "POST /v1/completions HTTP/1.0\r\nContent-Length: " +
                                                std::to_string(body.size()) + "\r\n\r\n" + body);
  const Response r = parseResponse(raw);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers.count("transfer-encoding"), 0u);
  EXPECT_EQ(r.headers.at("connection"), "close");
  EXPECT_EQ(r.events().back(), "[DONE]");
}

TEST_F(ServerTest, ExpectContinueGetsAnInterimAnswer) {
  const int fd = connectTo(port);
  const std::string body = json{{"prompt", "a"}, {"max_tokens", 1}}.dump();
  sendText(fd, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nConnection: close\r\nContent-Length: " +
                   std::to_string(body.size()) + "\r\n\r\n");
  char buffer[256];
  pollfd p{fd, POLLIN, 0};
  ASSERT_GT(::poll(&p, 1, 5000), 0);
  const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
  EXPECT_EQ(std::string(buffer, static_cast<size_t>(std::max<ssize_t>(n, 0))), "HTTP/1.1 100 Continue\r\n\r\n");
  sendText(fd, body);
  EXPECT_EQ(parseResponse(readAll(fd)).status, 200);
  ::close(fd);
}

TEST_F(ServerTest, MalformedHttpGetsItsStatusAndTheConnectionCloses) {
  const auto statusOf = [&](const std::string& bytes) { return parseResponse(rawExchange(port, bytes)).status; };
  EXPECT_EQ(statusOf("GARBAGE\r\n\r\n"), 400);
  EXPECT_EQ(statusOf("GET /v1/models HTTP/1.1\r\n\r\n"), 400);  // no Host
  EXPECT_EQ(statusOf("GET /v1/models HTTP/2.0\r\nHost: x\r\n\r\n"), 505);
  EXPECT_EQ(statusOf("GET /v1/models HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n"), 400);
  EXPECT_EQ(statusOf("GET /" + std::string(9000, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n"), 414);
  EXPECT_EQ(statusOf("GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(40000, 'b') + "\r\n\r\n"), 431);
  std::string many = "GET / HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 200; ++i) many += "X-" + std::to_string(i) + ": y\r\n";
  EXPECT_EQ(statusOf(many + "\r\n"), 431);
  EXPECT_EQ(statusOf("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 999999999\r\n\r\n"), 413);
  EXPECT_EQ(statusOf("POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"), 411);
  EXPECT_EQ(statusOf("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"), 400);
  EXPECT_EQ(statusOf("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n"), 400);
  EXPECT_EQ(statusOf(std::string("GET / HTTP/1.1\r\nHost: x\0y\r\n\r\n", 29)), 400);
  // The server still serves.
  EXPECT_EQ(call(port, "GET", "/v1/models").status, 200);
}

TEST_F(ServerTest, ASlowClientTimesOut) {
  server.reset();
  ai::ServeOptions options = ephemeral();
  options.requestTimeoutMs = 300;
  start(1, 256, options);
  const auto begin = std::chrono::steady_clock::now();
  const std::string raw = rawExchange(port, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nab");
  EXPECT_EQ(parseResponse(raw).status, 408);
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(3));
}

namespace {

// The error of a request: status, and the message and param of its JSON.
struct ApiFailure {
  int status;
  std::string message, param, code;
};

ApiFailure failure(const Response& r) {
  ApiFailure f{r.status, "", "", ""};
  const json body = json::parse(r.body, nullptr, false);
  if (body.is_discarded() || !body.contains("error")) return f;
  const json& e = body["error"];
  f.message = e.value("message", "");
  if (e["param"].is_string()) f.param = e["param"];
  if (e["code"].is_string()) f.code = e["code"];
  EXPECT_TRUE(e["type"].is_string());
  return f;
}

}  // namespace

TEST_F(ServerTest, BadRequestsNameWhatIsWrong) {
  const auto chatWith = [&](const char* field, const json& value) {
    json r = userChat("x", 4);
    r[field] = value;
    return failure(post(port, "/v1/chat/completions", r));
  };
  for (const auto& [field, value] : std::vector<std::pair<const char*, json>>{
           {"temperature", "hot"}, {"temperature", -1}, {"top_p", 2}, {"n", 9}, {"max_tokens", 0},
           {"max_tokens", 1.5}, {"stop", 3}, {"stop", json::array({""})}, {"top_k", "many"},
           {"presence_penalty", 5}, {"logit_bias", {{"x", 2}}}, {"logit_bias", {{"1", 101}}}, {"logit_bias", {{"99999999", 1}}},
           {"tools", "none"}, {"tool_choice", "required"}, {"tool_choice", "sometimes"},
           {"reasoning_effort", "extreme"}, {"top_logprobs", 3}, {"response_format", {{"type", "yaml"}}},
           {"response_format", {{"type", "json_schema"}, {"json_schema", {{"schema", {{"type", "string"}, {"pattern", "a"}}}}}}},
           {"response_format", "json"},
           {"messages", "hi"}, {"messages", json::array()}}) {
    const ApiFailure f = chatWith(field, value);
    EXPECT_EQ(f.status, 400) << field << " " << value;
    EXPECT_EQ(f.param, field) << value;
    EXPECT_NE(f.message.find(field), std::string::npos) << f.message;
  }
  const ApiFailure role = failure(post(port, "/v1/chat/completions",
                                       {{"messages", {{{"role", "robot"}, {"content", "x"}}}}}));
  EXPECT_EQ(role.param, "messages[0].role");
  const ApiFailure image = failure(post(port, "/v1/chat/completions",
      {{"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}, {"image_url", {{"url", "x"}}}}}}}}}}));
  EXPECT_EQ(image.param, "messages[0].content[0].image_url.url");  // tests/ai/pictures_test.cpp: pictures
  EXPECT_EQ(failure(post(port, "/v1/chat/completions", json::object())).param, "messages");
  EXPECT_EQ(failure(post(port, "/v1/completions", json::object())).param, "prompt");

  const ApiFailure model = failure(post(port, "/v1/chat/completions", {{"model", "gpt-9"}, {"messages", userChat("x", 1)["messages"]}}));
  EXPECT_EQ(model.status, 404);
  EXPECT_EQ(model.code, "model_not_found");
  EXPECT_NE(model.message.find("gpt-9"), std::string::npos);

  const ApiFailure notJson = failure(call(port, "POST", "/v1/chat/completions", "{\"messages\": ["));
  EXPECT_EQ(notJson.status, 400);
  EXPECT_NE(notJson.message.find("JSON"), std::string::npos);
  EXPECT_EQ(failure(call(port, "POST", "/v1/chat/completions", "[1, 2]")).status, 400);

  const Response wrongMethod = call(port, "GET", "/v1/chat/completions");
  EXPECT_EQ(wrongMethod.status, 405);
  EXPECT_EQ(wrongMethod.headers.at("allow"), "POST");
  EXPECT_EQ(call(port, "DELETE", "/v1/models").status, 405);
  const ApiFailure route = failure(call(port, "GET", "/v1/nothing"));
  EXPECT_EQ(route.status, 404);
  EXPECT_NE(route.message.find("/v1/nothing"), std::string::npos);

  // "other" holds 64 tokens per slot.
  const ApiFailure longPrompt = failure(post(port, "/v1/completions",
                                             {{"model", "other"}, {"prompt", std::string(300, '7')}}));
  EXPECT_EQ(longPrompt.status, 400);
  EXPECT_EQ(longPrompt.param, "prompt");
  EXPECT_EQ(longPrompt.code, "context_length_exceeded");
  // max_tokens past the context ends with length.
  const json clipped = post(port, "/v1/completions", {{"model", "other"}, {"prompt", "Hi"}, {"max_tokens", 1000}}).json();
  EXPECT_EQ(clipped["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(clipped["usage"]["total_tokens"], 64);
}

TEST_F(ServerTest, ResponseFormatHoldsTheAnswerToItsGrammar) {
  const json schema = json::parse(R"({"type": "object", "properties": {"city": {"type": "string"},
      "days": {"type": "integer"}}, "required": ["city", "days"], "additionalProperties": false})");
  const json format = {{"type", "json_schema"}, {"json_schema", {{"name", "trip"}, {"schema", schema}}}};
  // An answer the schema admits comes back as the model wrote it.
  test.setScript("{\"city\": \"Paris\", \"days\": 3}");
  json request = userChat("Plan a trip", 60);
  request["response_format"] = format;
  json body = post(port, "/v1/chat/completions", request).json();
  EXPECT_EQ(body["choices"][0]["message"]["content"], "{\"city\": \"Paris\", \"days\": 3}");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  // One it does not admit is steered: the text begins as the grammar requires.
  test.setScript("Sure! Here it is: {\"city\": \"Paris\"}");
  body = post(port, "/v1/chat/completions", request).json();
  const std::string content = body["choices"][0]["message"]["content"];
  EXPECT_EQ(content.rfind("{", 0), 0u) << content;
  if (body["choices"][0]["finish_reason"] == "stop") {
    const json value = json::parse(content);
    EXPECT_TRUE(value["city"].is_string() && value["days"].is_number_integer()) << content;
  }
  // json_object and text.
  request["response_format"] = {{"type", "json_object"}};
  test.setScript("[1, 2]");
  body = post(port, "/v1/chat/completions", request).json();
  EXPECT_EQ(body["choices"][0]["message"]["content"].get<std::string>().rfind("{", 0), 0u);
  request["response_format"] = {{"type", "text"}};
  body = post(port, "/v1/chat/completions", request).json();
  EXPECT_EQ(body["choices"][0]["message"]["content"], "[1, 2]");
}

TEST_F(ServerTest, ToolsReachTheTemplateAndCallsComeBack) {
  const json tools = json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "description": "The weather in a city", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}}])");
  test.setScript("Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>");
  json request = userChat("Weather in Paris?", 100);
  request["tools"] = tools;
  const json body = post(port, "/v1/chat/completions", request).json();
  const json& choice = body["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_EQ(choice["message"]["content"], "Let me look.");
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
  const json& call0 = choice["message"]["tool_calls"][0];
  EXPECT_EQ(call0["type"], "function");
  EXPECT_EQ(call0["id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_EQ(call0["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(call0["function"]["arguments"].get<std::string>()), json({{"city", "Paris"}}));
  // The prompt held the tools as the template writes them.
  const ordered_json messages = ordered_json::array({{{"role", "user"}, {"content", "Weather in Paris?"}}});
  const std::vector<TokenId> withTools =
      test.model->chatTokens(messages, ordered_json(tools), ordered_json{{"enable_thinking", false}}).ids;
  EXPECT_EQ(body["usage"]["prompt_tokens"], withTools.size());
  EXPECT_NE(test.model->chatPrompt(messages, ordered_json(tools), ordered_json::object()).find("get_weather"),
            std::string::npos);

  // Streamed: the content as it comes, the calls at the end.
  request["stream"] = true;
  const Response s = post(port, "/v1/chat/completions", request);
  std::string finish;
  EXPECT_EQ(streamed(s, &finish), "Let me look.\n");
  EXPECT_EQ(finish, "tool_calls");
  bool sawCall = false;
  for (const std::string& e : s.events()) {
    if (e == "[DONE]") continue;
    const json c = json::parse(e);
    if (c["choices"][0]["delta"].contains("tool_calls") && !sawCall) {  // the first delta of the call
      sawCall = true;
      EXPECT_EQ(c["choices"][0]["delta"]["tool_calls"][0]["function"]["name"], "get_weather");
      EXPECT_EQ(c["choices"][0]["delta"]["tool_calls"][0]["index"], 0);
    }
  }
  EXPECT_TRUE(sawCall);

  // The next turn: the assistant's call and the tool's answer go back into the prompt.
  json next = request;
  next["stream"] = false;
  next["messages"].push_back({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", {call0}}});
  next["messages"].push_back({{"role", "tool"}, {"tool_call_id", call0["id"]}, {"content", "sunny"}});
  test.setScript("It is sunny.");
  const json answer = post(port, "/v1/chat/completions", next).json();
  EXPECT_EQ(answer["choices"][0]["message"]["content"], "It is sunny.");
  EXPECT_EQ(answer["choices"][0]["finish_reason"], "stop");
}

TEST_F(ServerTest, QwenFunctionFormCallsAreTypedByTheSchema) {
  const json tools = json::parse(R"([{"type": "function", "function": {"name": "forecast", "parameters": {
      "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}])");
  test.setScript("<tool_call>\n<function=forecast>\n<parameter=city>\n1984\n</parameter>\n<parameter=days>\n3\n"
                 "</parameter>\n</function>\n</tool_call>");
  json request = userChat("Forecast?", 100);
  request["tools"] = tools;
  const json choice = post(port, "/v1/chat/completions", request).json()["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_TRUE(choice["message"]["content"].is_null());
  EXPECT_EQ(json::parse(choice["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>()),
            json({{"city", "1984"}, {"days", 3}}));
}

TEST_F(ServerTest, ReasoningIsSeparatedAndReasoningEffortTurnsThinkingOn) {
  test.setScript("<think>\nLet me think.\n</think>\n\nThe answer.");
  json request = userChat("Think?", 100);
  request["reasoning_effort"] = "high";
  const json body = post(port, "/v1/chat/completions", request).json();
  const json& message = body["choices"][0]["message"];
  EXPECT_EQ(message["content"], "The answer.");
  EXPECT_EQ(message["reasoning_content"], "\nLet me think.\n");
  // Thinking on: Qwen3's template leaves out the empty <think></think> it writes otherwise.
  const ordered_json messages = ordered_json::array({{{"role", "user"}, {"content", "Think?"}}});
  EXPECT_EQ(body["usage"]["prompt_tokens"], test.model->chatTokens(messages, true).ids.size());

  request["stream"] = true;
  const Response s = post(port, "/v1/chat/completions", request);
  std::string reasoning;
  for (const std::string& e : s.events()) {
    if (e == "[DONE]") continue;
    const json d = json::parse(e)["choices"][0]["delta"];
    if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
  }
  EXPECT_EQ(reasoning, "\nLet me think.\n");
  EXPECT_EQ(streamed(s), "The answer.");
}

TEST_F(ServerTest, ContentPartsAndSystemMessages) {
  test.setScript("ok");
  const json body = post(port, "/v1/chat/completions",
                         {{"messages", {{{"role", "system"}, {"content", "Be brief."}},
                                        {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "Hi"}}}}}}}})
                        .json();
  EXPECT_EQ(body["choices"][0]["message"]["content"], "ok");
  const ordered_json messages = ordered_json::parse(
      R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}])");
  EXPECT_EQ(body["usage"]["prompt_tokens"], test.model->chatTokens(messages).ids.size());
}

TEST_F(ServerTest, StopEndsRunningStreamsPromptly) {
  test.fake->stepDelayMs = 5;
  json request = userChat("forever", 5000);
  request["stream"] = true;
  auto pending = std::async(std::launch::async, [&] { return post(port, "/v1/chat/completions", request); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto begin = std::chrono::steady_clock::now();
  server->stop();
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(3));
  pending.get();
  EXPECT_LT(connectTo(port), 0);  // no longer listening
}

TEST(Serve, RefusesNoModelsAndDuplicateNames) {
  EXPECT_THROW(ai::Server({}, ephemeral()), Error);
  TestModel test;
  std::vector<ai::Served> two;
  two.push_back(test.served("same", 1, 64));
  two.push_back(test.served("same", 1, 64));
  EXPECT_THROW(ai::Server(std::move(two), ephemeral()), Error);
}
