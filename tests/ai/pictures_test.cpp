// Chats that show pictures (OpenAI's image_url parts with data: URLs) on the tiny Qwen 3.5 with
// its vision tower (diffusion/upsampler_tiny.h) beside the scripted text-only model: the answer
// of tests/reference/make_upsampler_vision_fixtures.py's first case (transformers' greedy answer
// to diffusers' upsampler chat), the pixel budget, and OpenAI's errors naming each bad part.
#include <gizml/diffusion.h>
#include <gizml/image.h>
#include <gizml/vision.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>
#include <vector>

#include "ai/base64.h"
#include "diffusion/upsampler_tiny.h"
#include "serve_fixture.h"
#include "common/test_paths.h"

using namespace gizml;
using namespace gizml::ai::servetest;
using nlohmann::json;

namespace {

// The first case of tests/data/diffusion/upsampler_vl_case.json: one picture, "make it night".
const json& visionCase() {
  static const json c = json::parse(std::ifstream(test::zimage::data("upsampler_vl_case.json")))[0];
  return c;
}

std::vector<uint8_t> casePictureFile() {
  std::ifstream in(test_paths::testData() + "/vision/" + visionCase()["pictures"][0].get<std::string>(),
                   std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string dataUrl(std::span<const uint8_t> file, const std::string& type = "image/png") {
  return "data:" + type + ";base64," + ai::base64(file);
}

json pictureItem(const std::string& url) { return {{"type", "image_url"}, {"image_url", {{"url", url}}}}; }

// diffusers' upsampler chat (diffusion::Upsampler::messages: the edit's system prompt, a user
// turn showing the picture, the prompt as the next user turn) as an OpenAI request.
json upsamplerChat(const std::string& url) {
  const std::string prompt = visionCase()["prompt"];
  const json system = diffusion::Upsampler::messages(prompt, true, true)[0];
  return {{"model", "vl"},
          {"temperature", 0},
          {"max_tokens", 12},
          {"messages",
           {{{"role", "system"}, {"content", system["content"]}},
            {{"role", "user"}, {"content", json::array({pictureItem(url)})}},
            {{"role", "user"}, {"content", prompt}}}}};
}

struct PicturesTest : ::testing::Test {
  static inline std::unique_ptr<llm::Model> model;
  static inline std::shared_ptr<const vision::Tower> tower;
  TestModel text;  // the scripted model, served without a tower
  std::unique_ptr<ai::Server> server;
  int port = 0;

  static void SetUpTestSuite() {
    model = std::make_unique<llm::Model>(llm::load(test::upsampler::visionModelFolder()));
    tower = std::make_shared<const vision::Tower>(vision::Tower::load(test::upsampler::visionModelFolder() + "/vision"));
  }
  static void TearDownTestSuite() { model.reset(), tower.reset(); }

  void start(ai::ServeOptions options = {}) {
    std::vector<ai::Served> served;
    served.push_back({"vl", *model, model->engine(2, 512), tower});
    served.push_back(text.served("fake", 1, 128));
    options.port = 0;
    server = std::make_unique<ai::Server>(std::move(served), options);
    port = server->port();
  }
  void SetUp() override { start(); }

  // A 400 with OpenAI's error shape whose param is `param` and whose message says `says`.
  void expectRefused(const json& body, const std::string& param, const std::string& says) {
    expectOpenAiError(port, "/v1/chat/completions", body, param, says);
  }
};

}  // namespace

TEST_F(PicturesTest, AnswersAsTransformers) {
  const Response r = post(port, "/v1/chat/completions", upsamplerChat(dataUrl(casePictureFile())));
  ASSERT_EQ(r.status, 200) << r.body;
  const json body = r.json();
  EXPECT_EQ(body["choices"][0]["message"]["content"], visionCase()["answer"]);
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  // The prompt is the fixture's: its picture's rows in place of one <|image_pad|>.
  EXPECT_EQ(body["usage"]["prompt_tokens"], visionCase()["tokens"].size());

  // Streamed, and as two choices (each reads the prompt: Qwen 3.5's state cannot be copied).
  json streamed = upsamplerChat(dataUrl(casePictureFile(), "image/jpeg"));  // the bytes tell the format
  streamed["stream"] = true;
  std::string text;
  for (const std::string& event : post(port, "/v1/chat/completions", streamed).events()) {
    if (event == "[DONE]") continue;
    const json delta = json::parse(event)["choices"][0]["delta"];
    if (delta.contains("content") && delta["content"].is_string()) text += delta["content"].get<std::string>();
  }
  EXPECT_EQ(text, visionCase()["answer"]);
  json two = upsamplerChat(dataUrl(casePictureFile()));
  two["n"] = 2;
  two["messages"][1]["content"][0]["image_url"]["detail"] = "low";
  const Response both = post(port, "/v1/chat/completions", two);
  ASSERT_EQ(both.status, 200) << both.body;
  const json choices = both.json()["choices"];  // (a copy: the loop would outlive the parsed body)
  ASSERT_EQ(choices.size(), 2u);
  for (const json& choice : choices) EXPECT_EQ(choice["message"]["content"], visionCase()["answer"]);
}

// Requests with pictures at once: each decodes its pictures in turn (towerPictures takes one call
// at a time) and answers as alone.
TEST_F(PicturesTest, RequestsWithPicturesAtOnce) {
  const json chat = upsamplerChat(dataUrl(casePictureFile()));
  std::vector<Response> answers(4);
  std::vector<std::thread> clients;
  for (Response& answer : answers) clients.emplace_back([&] { answer = post(port, "/v1/chat/completions", chat); });
  for (std::thread& client : clients) client.join();
  for (const Response& r : answers) {
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.json()["choices"][0]["message"]["content"], visionCase()["answer"]);
  }
}

// Tools and template variables go to the template with the pictures: Qwen3.5's add_vision_id
// writes "Picture 1: " before the picture, its tools a system block.
TEST_F(PicturesTest, ToolsAndTemplateVariablesWithPictures) {
  const std::string png = dataUrl(casePictureFile());
  const int64_t plain = post(port, "/v1/chat/completions", upsamplerChat(png)).json()["usage"]["prompt_tokens"];
  json named = upsamplerChat(png);
  named["chat_template_kwargs"] = {{"add_vision_id", true}};
  const Response r = post(port, "/v1/chat/completions", named);
  ASSERT_EQ(r.status, 200) << r.body;
  const auto picture1 = static_cast<int64_t>(model->tokenizer().encode("Picture 1: ", false).size());
  EXPECT_EQ(r.json()["usage"]["prompt_tokens"], plain + picture1);
  json tools = upsamplerChat(png);
  tools["tools"] = {{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", {{"type", "object"}}}}}}};
  const Response withTools = post(port, "/v1/chat/completions", tools);
  ASSERT_EQ(withTools.status, 200) << withTools.body;
  EXPECT_GT(withTools.json()["usage"]["prompt_tokens"], plain);
}

// Above the pixel budget a picture is scaled down as image::decode does before the tower sees it.
TEST_F(PicturesTest, ScalesPicturesToThePixelBudget) {
  ai::ServeOptions options;
  options.picturePixels = 20000;
  start(options);
  // 400 x 300 pixels: the tower reads it at 384 x 288 (108 rows), within the budget at 320 x 224 (70).
  image::Image picture{400, 300, {}};
  for (int64_t i = 0; i < 400 * 300 * 3; ++i) picture.pixels.push_back(static_cast<uint8_t>(i * 7 % 251));
  const std::vector<uint8_t> file = image::encodePng(picture);
  const Response r = post(port, "/v1/chat/completions", upsamplerChat(dataUrl(file)));
  ASSERT_EQ(r.status, 200) << r.body;

  const auto request = [&](const image::Image& shown) {
    llm::Request out;
    out.pictures = {tower->picture(shown)};
    out.prompt = model->chatTokens(diffusion::Upsampler::messages(visionCase()["prompt"], true, true), out.pictures).ids;
    out.limit = 12;
    out.sampling = llm::greedy();
    return out;
  };
  const llm::Request scaled = request(image::decode(file, options.picturePixels));
  EXPECT_EQ(r.json()["usage"]["prompt_tokens"], scaled.prompt.size());
  EXPECT_LT(scaled.prompt.size(), request(picture).prompt.size());
  EXPECT_EQ(r.json()["choices"][0]["message"]["content"], model->engine(1, 512).generate({scaled}).at(0).text);
}

TEST_F(PicturesTest, RefusesPicturesAModelCannotRead) {
  json chat = upsamplerChat(dataUrl(casePictureFile()));
  chat["model"] = "fake";
  expectRefused(chat, "messages[1].content[0]", "'fake' reads no pictures");
  // The text-only model still answers.
  EXPECT_EQ(post(port, "/v1/chat/completions", {{"model", "fake"}, {"max_tokens", 2},
                                               {"messages", {{{"role", "user"}, {"content", "hi"}}}}}).status, 200);
}

TEST_F(PicturesTest, NamesEachBadPart) {
  const std::string png = dataUrl(casePictureFile());
  const std::string url = "messages[1].content[0].image_url.url";
  const auto withPart = [&](const json& part) {
    json chat = upsamplerChat(png);
    chat["messages"][1]["content"] = json::array({part});
    return chat;
  };
  const auto withUrl = [&](const std::string& u) { return withPart(pictureItem(u)); };
  const std::string hello = "aGVsbG8gd29ybGQh";  // "hello world!"
  const image::Image thin{300, 1, std::vector<uint8_t>(900, 128)};

  expectRefused(withUrl("https://example.com/fox.png"), url, "fetches no URLs");
  expectRefused(withUrl("HTTP://example.com/fox.png"), url, "fetches no URLs");
  expectRefused(withUrl("file:///etc/passwd"), url, "expected a data URL");
  expectRefused(withUrl("data:image/png;base64"), url, "no ','");
  expectRefused(withUrl("data:image/png," + hello), url, "not base64");
  expectRefused(withUrl("data:image/png;base64,aGVsbG8"), url, "not base64");
  expectRefused(withUrl("data:image/png;base64,aGVs bG8="), url, "not base64");
  expectRefused(withUrl("data:image/png;base64," + hello), url, "not a picture");
  const std::vector<uint8_t> file = casePictureFile();
  expectRefused(withUrl(dataUrl(std::span(file).first(file.size() / 2))), url, "not a picture");  // truncated
  expectRefused(withUrl(dataUrl(image::encodePng(thin))), url, "cannot be shown");      // 300:1
  expectRefused(withPart({{"type", "image_url"}}), "messages[1].content[0].image_url", "expected an object");
  expectRefused(withPart({{"type", "image_url"}, {"image_url", {{"url", 7}}}}), url, "expected a data URL");
  expectRefused(withPart({{"type", "image_url"}, {"image_url", {{"url", png}, {"detail", "ultra"}}}}),
                "messages[1].content[0].image_url.detail", "auto, low or high");
  expectRefused(withPart({{"type", "input_audio"}}), "messages[1].content[0].type", "'input_audio' parts");
  expectRefused(withPart({{"text", "no type"}}), "messages[1].content[0].type", "is missing");

  json system = upsamplerChat(png);
  system["messages"][0]["content"] = json::array({pictureItem(png)});
  expectRefused(system, "messages[0].content[0]", "user messages only");
  json assistant = upsamplerChat(png);
  assistant["messages"].push_back({{"role", "assistant"}, {"content", json::array({pictureItem(png)})}});
  assistant["messages"].push_back({{"role", "user"}, {"content", "again"}});
  expectRefused(assistant, "messages[3].content[0]", "user messages only");

  json many = upsamplerChat(png);
  for (int i = 0; i < 16; ++i) many["messages"][1]["content"].push_back(pictureItem(png));
  expectRefused(many, "messages[1].content[16]", "more than 16 pictures");


  // A user typing the placeholder makes the template's count of pictures disagree.
  json typed = upsamplerChat(png);
  typed["messages"][2]["content"] = "<|vision_start|><|image_pad|><|vision_end|>";
  expectRefused(typed, "messages", "pictures");

  // The server answers on.
  EXPECT_EQ(post(port, "/v1/chat/completions", upsamplerChat(png)).status, 200);
}

// The tiny model's folder and diffusers' upsampler chat for giz serve against the openai client
// (tests/CMakeLists.txt: openai_client_check.py --vision) under $GIZML_VISION_SERVE_FOLDER:
// model/ (converted, with vision/), picture.png, and chat.json with the system prompt, the prompt,
// the prompt's length and the answer: transformers' greedy tokens, as many as giz serve's slot
// holds after the prompt (it keeps to the model's trained 256 positions), decoded. Skipped when
// the variable is unset.
TEST(VisionServeFolder, Write) {
  const char* root = std::getenv("GIZML_VISION_SERVE_FOLDER");
  if (!root) GTEST_SKIP() << "GIZML_VISION_SERVE_FOLDER is not set";
  namespace fs = std::filesystem;
  const fs::path folder(root);
  fs::remove_all(folder);
  fs::create_directories(folder);
  fs::copy(test::upsampler::visionModelFolder(), folder / "model", fs::copy_options::recursive);
  const std::vector<uint8_t> file = casePictureFile();
  std::ofstream(folder / "picture.png", std::ios::binary)
      .write(reinterpret_cast<const char*>(file.data()), static_cast<std::streamsize>(file.size()));
  const llm::Model model = llm::load(test::upsampler::visionModelFolder());
  const auto promptTokens = static_cast<int64_t>(visionCase()["tokens"].size());
  std::vector<llm::TokenId> generated = visionCase()["generated"];
  ASSERT_LT(promptTokens, model.contextLength());
  generated.resize(std::min<size_t>(generated.size(), static_cast<size_t>(model.contextLength() - promptTokens)));
  const json chat = upsamplerChat("");
  std::ofstream(folder / "chat.json") << json{{"system", chat["messages"][0]["content"]},
                                              {"prompt", visionCase()["prompt"]},
                                              {"prompt_tokens", promptTokens},
                                              {"answer", model.tokenizer().decode(generated, true)}}
                                             .dump(1);
}
