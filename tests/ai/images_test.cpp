// POST /v1/images/generations on the tiny Z-Image of tests/data/diffusion (zimage_tiny.h) beside
// the scripted language model, and generations and POST /v1/images/edits on the tiny klein
// (klein_tiny.h): the pictures as the pipelines paint them directly, and OpenAI's errors for what
// the endpoints refuse.
#include <gizml/diffusion.h>
#include <gizml/image.h>
#include <gtest/gtest.h>

#include <tuple>

#include "ai/base64.h"
#include "ai/images.h"
#include "ai/painter.h"
#include "diffusion/klein_tiny.h"
#include "diffusion/upsampler_tiny.h"
#include "diffusion/zimage_tiny.h"
#include "serve_fixture.h"

using namespace gizml;
using namespace gizml::ai::servetest;
using nlohmann::json;

namespace {

std::vector<uint8_t> unbase64(const std::string& text) {
  std::optional<std::vector<uint8_t>> bytes = ai::fromBase64(text);
  EXPECT_TRUE(bytes.has_value()) << text.substr(0, 40);
  return bytes.value_or(std::vector<uint8_t>{});
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
    expectOpenAiError(port, path, body, param, says, status);
  }
};

}  // namespace

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

// ---- klein (klein_tiny.h) beside the tiny Z-Image: generations and POST /v1/images/edits ----

namespace {

// A multipart/form-data body of text fields and files (name, filename, bytes), as clients send it.
struct Form {
  std::vector<std::pair<std::string, std::string>> fields;
  std::vector<std::tuple<std::string, std::string, std::vector<uint8_t>>> files;
  std::string body(const std::string& boundary) const {
    std::string out;
    for (const auto& [name, value] : fields)
      out += "--" + boundary + "\r\nContent-Disposition: form-data; name=\"" + name + "\"\r\n\r\n" + value + "\r\n";
    for (const auto& [name, filename, bytes] : files)
      out += "--" + boundary + "\r\nContent-Disposition: form-data; name=\"" + name + "\"; filename=\"" + filename +
             "\"\r\nContent-Type: image/png\r\n\r\n" + std::string(bytes.begin(), bytes.end()) + "\r\n";
    return out + "--" + boundary + "--\r\n";
  }
};

Response postRaw(int port, const std::string& contentType, const std::string& body) {
  return parseResponse(rawExchange(port, "POST /v1/images/edits HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" +
                                             (contentType.empty() ? "" : "Content-Type: " + contentType + "\r\n") +
                                             "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body,
                                         120000));
}

Response postForm(int port, const Form& form) {
  return postRaw(port, "multipart/form-data; boundary=\"gizml form\"", form.body("gizml form"));
}

const std::vector<uint8_t>& picturePng() {
  static const std::vector<uint8_t> png = image::encodePng(test::klein::picture());
  return png;
}

image::Image onlyPicture(const Response& r) {
  const json body = r.json();
  EXPECT_EQ(body["data"].size(), 1u) << r.body;
  return image::decode(unbase64(body["data"][0]["b64_json"]));
}

struct KleinImagesTest : ImagesTest {
  void SetUp() override {
    std::vector<ai::ServedPainter> painters;
    painters.push_back({"tiny", test::zimage::pipeline(), 128});
    painters.push_back({"klein", test::klein::pipeline(), 128});
    std::vector<ai::Served> served;
    served.push_back(test.served("fake", 1, 64));
    server = std::make_unique<ai::Server>(std::move(served), std::move(painters), ai::Listener("127.0.0.1", 0));
    port = server->port();
  }
  // An edit's 400 whose OpenAI error names param (none: the body as a whole) and says `says`.
  void expectFormRefused(const Response& r, const std::string& param, const std::string& says) {
    EXPECT_EQ(r.status, 400) << r.body;
    const json error = json::parse(r.body, nullptr, false)["error"];
    EXPECT_EQ(error["type"], "invalid_request_error") << r.body;
    EXPECT_EQ(error["param"], param.empty() ? json(nullptr) : json(param)) << r.body;
    EXPECT_NE(error["message"].get<std::string>().find(says), std::string::npos) << r.body;
  }
};

}  // namespace

TEST_F(KleinImagesTest, GenerationsPaintAsThePipeline) {
  const Response r = post(port, "/v1/images/generations",
                          {{"model", "klein"}, {"prompt", test::klein::kTextPrompt}, {"size", "48x32"}, {"seed", 42}});
  ASSERT_EQ(r.status, 200) << r.body;
  const image::Image got = onlyPicture(r);
  EXPECT_EQ(got.width, 48);
  EXPECT_EQ(got.height, 32);
  EXPECT_EQ(got.pixels, test::klein::pipeline().paint(test::klein::kTextPrompt, 42, {}, 48, 32).pixels);
}

// "layout": FLUX 3's bounding boxes, a list in a JSON body, its JSON text in an edit's form; the
// prompt painted is fluxLayout's. A bad layout is a 400 naming it.
TEST_F(KleinImagesTest, LayoutsPaintAsThePipeline) {
  const json layout = json::array({{{"id", "fox_1"}, {"bbox", {300, 100, 900, 600}}, {"desc", "A red fox."}}});
  const std::string prompt = diffusion::fluxLayout(test::klein::kTextPrompt, diffusion::fluxElements(layout));
  const Response r = post(port, "/v1/images/generations",
                          {{"model", "klein"}, {"prompt", test::klein::kTextPrompt}, {"size", "48x32"}, {"seed", 42},
                           {"layout", layout}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(onlyPicture(r).pixels, test::klein::pipeline().paint(prompt, 42, {}, 48, 32).pixels);

  const json moved = json::array({{{"id", "fox_1"}, {"from", "ref_image_1"}, {"src_bbox", {0, 0, 500, 500}},
                                   {"tgt_bbox", {500, 500, 1000, 1000}}, {"desc", "The fox."}}});
  const Response e = postForm(port, {{{"model", "klein"}, {"prompt", "night"}, {"size", "40x36"}, {"seed", "42"},
                                      {"layout", moved.dump()}},
                                     {{"image", "fox.png", picturePng()}}});
  ASSERT_EQ(e.status, 200) << e.body;
  const std::string editPrompt = diffusion::fluxLayout("night", diffusion::fluxElements(moved));
  EXPECT_EQ(onlyPicture(e).pixels, test::klein::pipeline().paint(editPrompt, 42, {test::klein::picture()}, 40, 36).pixels);

  const json base = {{"model", "klein"}, {"prompt", "night"}, {"size", "32x32"}};
  const auto with = [&](const json& l) {
    json b = base;
    b["layout"] = l;
    return b;
  };
  expectRefused(with(7), "layout", "expected a list of elements");
  expectRefused(with("[{"), "layout", "the layout is not JSON");
  expectRefused(with(json::array({{{"id", "a_1"}, {"bbox", {0, 0, 9}}, {"desc", "d"}}})), "layout",
                "bbox is not a list of 4 numbers");
  expectRefused(with(json::array({{{"id", "A"}, {"bbox", {0, 0, 9, 9}}, {"desc", "d"}}})), "layout", "'A'");
}

// "upsample": true rewrites the prompt with the model's upsampler (the tiny one, 24 new tokens),
// sampled with the request's seed, before the layout is appended; refused where there is none.
TEST(KleinUpsampledImages, PaintAsThePipelineOfTheCaption) {
  const auto upsampler = std::make_shared<const diffusion::Upsampler>(
      diffusion::Upsampler::load(test::upsampler::modelFolder(), {.limit = 24}));
  std::vector<ai::ServedPainter> painters;
  painters.push_back({"klein", test::klein::pipeline(), 128, upsampler});
  painters.push_back({"plain", test::klein::pipeline(), 128});
  ai::Server server({}, std::move(painters), ai::Listener("127.0.0.1", 0));
  const json layout = json::array({{{"id", "fox_1"}, {"bbox", {300, 100, 900, 600}}, {"desc", "A red fox."}}});
  const Response r = post(server.port(), "/v1/images/generations",
                          {{"model", "klein"}, {"prompt", "a fox"}, {"size", "48x32"}, {"seed", 42},
                           {"upsample", true}, {"layout", layout}});
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string caption = upsampler->caption("a fox", {}, 42);
  EXPECT_NE(caption, "a fox");
  const std::string prompt = diffusion::fluxLayout(caption, diffusion::fluxElements(layout));
  EXPECT_EQ(onlyPicture(r).pixels, test::klein::pipeline().paint(prompt, 42, {}, 48, 32).pixels);

  const Response e = postForm(server.port(), {{{"model", "klein"}, {"prompt", "night"}, {"size", "40x36"},
                                               {"seed", "7"}, {"upsample", "true"}},
                                              {{"image", "fox.png", picturePng()}}});
  ASSERT_EQ(e.status, 200) << e.body;
  const std::vector<image::Image> pictures = {test::klein::picture()};
  EXPECT_EQ(onlyPicture(e).pixels,
            test::klein::pipeline().paint(upsampler->caption("night", pictures, 7), 7, pictures, 40, 36).pixels);

  const Response refused = post(server.port(), "/v1/images/generations",
                                {{"model", "plain"}, {"prompt", "a fox"}, {"size", "32x32"}, {"upsample", true}});
  EXPECT_EQ(refused.status, 400) << refused.body;
  EXPECT_NE(refused.body.find("'plain' has no prompt upsampler"), std::string::npos) << refused.body;
  const Response notABoolean = post(server.port(), "/v1/images/generations",
                                    {{"model", "klein"}, {"prompt", "a fox"}, {"upsample", "yes"}});
  EXPECT_EQ(notABoolean.status, 400) << notABoolean.body;
  EXPECT_NE(notABoolean.body.find("upsample"), std::string::npos) << notABoolean.body;
}

TEST_F(KleinImagesTest, EditsPaintAsThePipeline) {
  const std::string prompt = "A lighthouse at night";
  Form form{{{"model", "klein"}, {"prompt", prompt}, {"size", "40x36"}, {"seed", "42"}, {"response_format", "b64_json"}},
            {{"image", "fox.png", picturePng()}}};
  const Response one = postForm(port, form);
  ASSERT_EQ(one.status, 200) << one.body;
  const image::Image got = onlyPicture(one);
  EXPECT_EQ(got.width, 40);
  EXPECT_EQ(got.height, 36);
  EXPECT_EQ(got.pixels, test::klein::pipeline().paint(prompt, 42, {test::klein::picture()}, 40, 36).pixels);

  // image[] of two pictures, n = 2: seeds 42 and 43.
  form.fields.emplace_back("n", "2");
  form.files = {{"image[]", "a.png", picturePng()}, {"image[]", "b.png", picturePng()}};
  const Response two = postForm(port, form);
  ASSERT_EQ(two.status, 200) << two.body;
  ASSERT_EQ(two.json()["data"].size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const image::Image want =
        test::klein::pipeline().paint(prompt, 42 + i, {test::klein::picture(), test::klein::picture()}, 40, 36);
    EXPECT_EQ(image::decode(unbase64(two.json()["data"][i]["b64_json"])).pixels, want.pixels) << "image " << i;
  }
}

TEST_F(KleinImagesTest, AnEditWithoutASizeKeepsThePicturesAspect) {
  // editSize of 70 x 66 is 1052 x 992 (klein_pipeline_test.cpp); scaled down to the largest side,
  // 128: 128 x 120 (multiples of 4).
  const Response r = postForm(port, {{{"model", "klein"}, {"prompt", "night"}, {"seed", "5"}},
                                     {{"image", "fox.png", picturePng()}}});
  ASSERT_EQ(r.status, 200) << r.body;
  const image::Image got = onlyPicture(r);
  EXPECT_EQ(got.width, 128);
  EXPECT_EQ(got.height, 120);
  EXPECT_EQ(got.pixels, test::klein::pipeline().paint("night", 5, {test::klein::picture()}, 128, 120).pixels);
}

TEST_F(KleinImagesTest, EditsRefuseWhatTheyCannotPaint) {
  const Form good{{{"model", "klein"}, {"prompt", "night"}, {"size", "32x32"}}, {{"image", "fox.png", picturePng()}}};
  const auto withField = [&](const std::string& name, const std::string& value) {
    Form f = good;
    f.fields.emplace_back(name, value);
    return f;
  };
  Form zImage = good;
  zImage.fields[0].second = "tiny";
  expectFormRefused(postForm(port, zImage), "model", "'tiny' paints from text alone: it takes no pictures");
  Form chat = good;
  chat.fields[0].second = "fake";
  expectFormRefused(postForm(port, chat), "model", "'fake' is a language model");
  Form none = good;
  none.files.clear();
  expectFormRefused(postForm(port, none), "image", "is required: one picture or more");
  Form notAPicture = good;
  notAPicture.files = {{"image[]", "notes.txt", {'h', 'i'}}};
  expectFormRefused(postForm(port, notAPicture), "image[]", "picture 1 ('notes.txt') is not a picture");
  Form tiny = good;
  tiny.files = {{"image", "dot.png", image::encodePng({2, 2, std::vector<uint8_t>(12, 9)})}};
  expectFormRefused(postForm(port, tiny), "image", "picture 1 (2 x 2) is smaller than 4 a side");
  Form masked = good;
  masked.files.emplace_back("mask", "mask.png", picturePng());
  expectFormRefused(postForm(port, masked), "mask", "masks are not served");
  Form fileAsText = good;
  fileAsText.files.emplace_back("prompt", "p.txt", std::vector<uint8_t>{'x'});
  expectFormRefused(postForm(port, fileAsText), "prompt", "expected a text field, got a file");
  expectFormRefused(postForm(port, withField("prompt", "again")), "prompt", "given twice");
  expectFormRefused(postForm(port, withField("n", "two")), "n", "expected a whole number");
  expectFormRefused(postForm(port, withField("n", "9")), "n", "outside [1, 4]");
  expectFormRefused(postForm(port, withField("seed", "1.5")), "seed", "expected a whole number");
  Form badSize = good;
  badSize.fields[2].second = "30x30";
  expectFormRefused(postForm(port, badSize), "size", "not a multiple of 4");
  expectFormRefused(postForm(port, withField("response_format", "url")), "response_format", "only b64_json");
  // Not a form: named.
  expectFormRefused(postRaw(port, "", good.body("b")), "", "no Content-Type");
  expectFormRefused(postRaw(port, "application/json", "{}"), "", "'application/json' is not multipart/form-data");
  expectFormRefused(postRaw(port, "multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data\r\n\r\nx\r\n--b--"),
                    "", "the multipart/form-data body: part 1: Content-Disposition has no name");
  expectFormRefused(postRaw(port, "multipart/form-data; boundary=b", good.body("b").substr(0, 60)), "",
                    "ends before its closing boundary");
  EXPECT_EQ(call(port, "GET", "/v1/images/edits").status, 405);
}

TEST(ImagesAlone, EditsNeedAnImageModel) {
  TestModel test;
  std::vector<ai::Served> served;
  served.push_back(test.served("fake", 1, 64));
  ai::Server server(std::move(served), {}, ai::Listener("127.0.0.1", 0));
  const Response r = postForm(server.port(), {{{"prompt", "night"}}, {{"image", "fox.png", picturePng()}}});
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_NE(r.body.find("no image model is served here"), std::string::npos) << r.body;
}
