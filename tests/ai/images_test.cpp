// POST /v1/images/generations on the tiny Z-Image of tests/data/diffusion (zimage_tiny.h) beside
// the scripted language model: the pictures as the pipeline paints them directly, and OpenAI's
// errors for what the endpoint refuses.
#include <gizml/image.h>
#include <gtest/gtest.h>

#include "ai/images.h"
#include "ai/painter.h"
#include "diffusion/zimage_tiny.h"
#include "serve_fixture.h"

using namespace gizml;
using namespace gizml::ai::servetest;
using nlohmann::json;

namespace {

std::vector<uint8_t> unbase64(const std::string& text) {
  const std::string digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<uint8_t> out;
  uint32_t bits = 0;
  int count = 0;
  for (char c : text) {
    if (c == '=') break;
    const size_t v = digits.find(c);
    EXPECT_NE(v, std::string::npos) << c;
    bits = bits << 6 | static_cast<uint32_t>(v);
    if ((count += 6) >= 8) out.push_back(static_cast<uint8_t>(bits >> (count -= 8)));
  }
  return out;
}

struct ImagesTest : ::testing::Test {
  TestModel test;
  std::unique_ptr<ai::Server> server;
  int port = 0;
  void SetUp() override {
    std::vector<ai::Served> served;
    served.push_back(test.served("fake", 1, 64));
    std::vector<ai::ServedPainter> painters;
    painters.push_back({"tiny", test::zimage::pipeline(), 128});
    ai::ServeOptions options;
    options.port = 0;
    server = std::make_unique<ai::Server>(std::move(served), std::move(painters), ai::Listener("127.0.0.1", 0), options);
    port = server->port();
  }
  // A 400 whose OpenAI error names param and says `says`.
  void expectRefused(const json& body, const std::string& param, const std::string& says, int status = 400,
                     const std::string& path = "/v1/images/generations") {
    const Response r = post(port, path, body);
    EXPECT_EQ(r.status, status) << body.dump() << " -> " << r.body;
    const json error = json::parse(r.body, nullptr, false)["error"];
    EXPECT_EQ(error["type"], "invalid_request_error") << r.body;
    EXPECT_EQ(error["param"], param) << r.body;
    EXPECT_NE(error["message"].get<std::string>().find(says), std::string::npos) << r.body;
  }
};

}  // namespace

TEST(Base64, Rfc4648Vectors) {
  const auto of = [](const std::string& s) { return ai::base64({reinterpret_cast<const uint8_t*>(s.data()), s.size()}); };
  EXPECT_EQ(of(""), "");
  EXPECT_EQ(of("f"), "Zg==");
  EXPECT_EQ(of("fo"), "Zm8=");
  EXPECT_EQ(of("foo"), "Zm9v");
  EXPECT_EQ(of("foob"), "Zm9vYg==");
  EXPECT_EQ(of("fooba"), "Zm9vYmE=");
  EXPECT_EQ(of("foobar"), "Zm9vYmFy");
}

TEST_F(ImagesTest, PaintsAsThePipeline) {
  const Response r = post(port, "/v1/images/generations",
                          {{"model", "tiny"}, {"prompt", test::zimage::kPrompt}, {"size", "64x48"}, {"n", 2},
                           {"seed", 42}, {"response_format", "b64_json"}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json body = r.json();
  EXPECT_GT(body["created"].get<int64_t>(), 0);
  ASSERT_EQ(body["data"].size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const image::Image got = image::decode(unbase64(body["data"][i]["b64_json"]));
    const image::Image want = test::zimage::pipeline().paint(test::zimage::kPrompt, 42 + i, 64, 48);
    EXPECT_EQ(got.width, 64);
    EXPECT_EQ(got.height, 48);
    EXPECT_EQ(got.pixels, want.pixels) << "image " << i;
  }
  // The default model is the first image model, the default size its largest square up to 1024.
  const Response plain = post(port, "/v1/images/generations", {{"prompt", "a fox"}});
  ASSERT_EQ(plain.status, 200) << plain.body;
  EXPECT_EQ(image::decode(unbase64(plain.json()["data"][0]["b64_json"])).width, 128);
  const Response models = call(port, "GET", "/v1/models");
  ASSERT_EQ(models.status, 200);
  EXPECT_EQ(models.json()["data"].size(), 2u);
  EXPECT_EQ(models.json()["data"][1]["id"], "tiny");
  EXPECT_EQ(call(port, "GET", "/v1/models/tiny").status, 200);
}

TEST_F(ImagesTest, RefusesWhatItCannotPaint) {
  const json good = {{"prompt", "a fox"}, {"size", "64x64"}};
  const auto with = [&](const char* key, const json& value) {
    json b = good;
    b[key] = value;
    return b;
  };
  expectRefused(with("size", "72x64"), "size", "72x64 is not a multiple of 16 each way");
  expectRefused(with("size", "0x64"), "size", "multiple of 16");
  expectRefused(with("size", "256x256"), "size", "too large; 'tiny' takes multiples of 16 up to 128 each way");
  expectRefused(with("size", "64"), "size", "not WIDTHxHEIGHT");
  expectRefused(with("size", 64), "size", "expected a string");
  expectRefused(with("response_format", "url"), "response_format", "only b64_json");
  expectRefused(with("n", 5), "n", "outside [1, 4]");
  expectRefused(with("n", "2"), "n", "expected a whole number");
  expectRefused(with("seed", 1.5), "seed", "expected a whole number");
  expectRefused(with("prompt", 3), "prompt", "expected a string");
  expectRefused({{"size", "64x64"}}, "prompt", "is required");
  std::string longPrompt;  // more tokens than the tiny encoder's 512 positions
  for (int i = 0; i < 600; ++i) longPrompt += "fox ";
  expectRefused(with("prompt", longPrompt), "prompt", "exceed the text encoder's 512");
  expectRefused(with("model", "fake"), "model", "'fake' is a language model");
  expectRefused(with("model", "nope"), "model", "'nope' does not exist", 404);
  // An image model asked for chat, a completion or a chat model's images: named.
  expectRefused({{"model", "tiny"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}}, "model",
                "'tiny' is an image model", 400, "/v1/chat/completions");
  expectRefused({{"model", "tiny"}, {"prompt", "hi"}}, "model", "'tiny' is an image model", 400, "/v1/completions");
  const Response bad = call(port, "POST", "/v1/images/generations", "{\"prompt\": ");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("not valid JSON"), std::string::npos) << bad.body;
  EXPECT_EQ(call(port, "GET", "/v1/images/generations").status, 405);
}

TEST(ImagesAlone, ServesWithoutALanguageModel) {
  std::vector<ai::ServedPainter> painters;
  painters.push_back({"tiny", test::zimage::pipeline(), 64});
  ai::Server server({}, std::move(painters), ai::Listener("127.0.0.1", 0));
  const Response r = post(server.port(), "/v1/images/generations", {{"prompt", "a fox"}, {"size", "32x32"}});
  EXPECT_EQ(r.status, 200) << r.body;
  const Response chat = post(server.port(), "/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}}});
  EXPECT_EQ(chat.status, 404) << chat.body;
  EXPECT_NE(chat.body.find("no language model"), std::string::npos) << chat.body;
}

TEST(Painter, CancelledJobsEndWithoutPictures) {
  ai::Painter painter(test::zimage::pipeline());
  ai::ImageRequest request;
  request.prompt = "a fox";
  request.width = request.height = 32;
  request.n = 2;
  const auto cancelled = std::make_shared<ai::PaintJob>(request);
  cancelled->cancel();  // before it starts: it stops at its first check
  const auto painted = std::make_shared<ai::PaintJob>(request);
  painter.submit(cancelled);
  painter.submit(painted);
  ASSERT_TRUE(cancelled->wait(std::chrono::minutes(5)));
  EXPECT_EQ(cancelled->error(), "cancelled");
  EXPECT_TRUE(cancelled->pngs().empty());
  ASSERT_TRUE(painted->wait(std::chrono::minutes(5)));
  EXPECT_EQ(painted->error(), "");
  EXPECT_EQ(painted->pngs().size(), 2u);
}
