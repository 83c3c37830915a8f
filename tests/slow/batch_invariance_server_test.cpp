// Batch invariance through the server (docs/serve.md): SmolLM2 at 4 bits behind gizml::ai::Server
// on 127.0.0.1, 8 chat completions sent at once over real HTTP (4 the same, 4 different; greedy
// and seeded) each give the text and log probabilities the same request gets sent alone. Skipped
// when the model is not installed.
#include <gizml/ai.h>
#include <gtest/gtest.h>

#include <thread>

#include "ai/serve_fixture.h"
#include "real_models.h"

namespace {

nlohmann::json chat(const std::string& text, const nlohmann::json& sampling) {
  nlohmann::json body = {{"model", "smollm2"},
                         {"messages", {{{"role", "user"}, {"content", text}}}},
                         {"max_tokens", 20},
                         {"logprobs", true},
                         {"top_logprobs", 3}};
  body.update(sampling);
  return body;
}

// What must not change: the text and every log probability (as the server writes them).
nlohmann::json answerOf(const gizml::ai::servetest::Response& r) {
  const nlohmann::json j = nlohmann::json::parse(r.body);
  const nlohmann::json& choice = j.at("choices").at(0);
  return {choice.at("message").at("content"), choice.at("logprobs")};
}

TEST(RealModelServerBatchInvariance, SmolLM2At4BitsAnswersEachRequestAsAlone) {
  const Case smol = {"smollm2", Bits{}};
  const std::string folder = convertedFolder(smol);
  if (folder.empty()) GTEST_SKIP() << notInstalled(smol);
  Model model = load(folder);
  Engine engine = model.engine(8, 512);
  std::vector<gizml::ai::Served> served;
  served.push_back({"smollm2", std::move(model), std::move(engine)});
  gizml::ai::ServeOptions options;
  options.port = 0;  // any free port
  gizml::ai::Server server(std::move(served), options);

  std::vector<nlohmann::json> requests(4, chat("Name three rivers.", {{"temperature", 0}}));
  requests.push_back(chat("Name three rivers and their countries.", {{"temperature", 0}}));
  requests.push_back(chat("What is the capital of France?", {{"temperature", 0.8}, {"seed", 11}}));
  requests.push_back(chat("Write a haiku about the sea.", {{"temperature", 1.0}, {"seed", 12}}));
  requests.push_back(chat("Name three rivers.", {{"temperature", 0.7}, {"top_p", 0.9}, {"seed", 13}}));

  std::vector<nlohmann::json> alone, together(requests.size());
  for (const nlohmann::json& r : requests) {
    const auto response = gizml::ai::servetest::post(server.port(), "/v1/chat/completions", r);
    ASSERT_EQ(response.status, 200) << response.body;
    alone.push_back(answerOf(response));
  }
  std::vector<std::thread> clients;
  std::vector<gizml::ai::servetest::Response> responses(requests.size());
  for (size_t i = 0; i < requests.size(); ++i)
    clients.emplace_back([&, i] { responses[i] = gizml::ai::servetest::post(server.port(), "/v1/chat/completions", requests[i]); });
  for (std::thread& t : clients) t.join();
  for (size_t i = 0; i < requests.size(); ++i) {
    ASSERT_EQ(responses[i].status, 200) << responses[i].body;
    EXPECT_EQ(answerOf(responses[i]), alone[i]) << "request " << i;
  }
  server.stop();
}

}  // namespace
