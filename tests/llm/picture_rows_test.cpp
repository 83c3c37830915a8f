// Pictures in a language model's feed (Feed::pictures): rows in place of their placeholder
// tokens and multimodal RoPE positions, against transformers' Qwen3_5ForConditionalGeneration on
// a tiny random model (tests/reference/make_vision_fixtures.py) given the same pictures' rows
// (its own vision tower's, so that this checks the language model alone; tests/vision checks the
// tower). Unquantized, on the CPU and on a GPU (the emulator in CI).
#include <gtest/gtest.h>

#include <cstdio>

#include "common/expect_error.h"
#include "common/gpu_checks.h"
#include "model_reference.h"

namespace {

struct PictureReference {
  explicit PictureReference(std::string arch = "qwen3_5_vl") : arch(std::move(arch)) {}
  std::string arch;
  nlohmann::json json = nlohmann::json::parse(std::ifstream(modelData(arch) + "/vision.json"));
  std::map<std::string, tensor::Tensor> tensors = loadSafetensors(modelData(arch) + "/vision.safetensors");
  std::vector<int32_t> prompt = json["prompt"].get<std::vector<int32_t>>();
  std::vector<int32_t> greedy = json["greedy"].get<std::vector<int32_t>>();

  // Each picture at its run of image tokens, its grid over the tower's merge size (2).
  std::vector<Picture> pictures() const {
    std::vector<Picture> out;
    const int32_t pad = json["image_token"].get<int32_t>();
    for (size_t i = 0, at = 0; i < json["grids"].size(); ++i) {
      while (prompt[at] != pad) ++at;
      const auto& g = json["grids"][i];
      out.push_back({static_cast<int64_t>(at), tensors.at("rows_" + std::to_string(i)), g[0].get<int64_t>(),
                     g[1].get<int64_t>() / 2, g[2].get<int64_t>() / 2});
      for (size_t l = 0; tensors.count(deepstackName(i, l)); ++l) out.back().deepstack.push_back(tensors.at(deepstackName(i, l)));
      at += static_cast<size_t>(out.back().rows.size(0));
    }
    return out;
  }
  static std::string deepstackName(size_t picture, size_t layer) {
    return "deepstack_" + std::to_string(picture) + "_" + std::to_string(layer);
  }
};

const ConvertedModel& visionModel() { return converted("qwen3_5_vl", kUnquantized); }

// The prompt's logits with its pictures, fed in parts cut at `cuts` (each part gets every
// picture, placed relative to it, as an engine's prompt parts do).
std::vector<float> pictureLogits(LanguageModel& model, const PictureReference& ref, SequenceState& state,
                                 const std::vector<int64_t>& cuts = {}) {
  std::vector<float> all;
  int64_t from = 0;
  std::vector<int64_t> ends = cuts;
  ends.push_back(static_cast<int64_t>(ref.prompt.size()));
  for (int64_t end : ends) {
    Feed feed{&state, std::vector<int32_t>(ref.prompt.begin() + from, ref.prompt.begin() + end), true};
    for (Picture p : ref.pictures()) {
      p.first -= from;
      if (p.first < end - from && p.first + p.rows.size(0) > 0) feed.pictures.push_back(p);
    }
    const std::vector<float> part = model.forward({feed})[0].toFloats();
    all.insert(all.end(), part.begin(), part.end());
    from = end;
  }
  return all;
}

// The greedy continuation after the prompt, a token a pass (text positions after the pictures').
std::vector<int32_t> greedyAfter(LanguageModel& model, SequenceState& state, const std::vector<float>& promptLogits,
                                 size_t count) {
  const int64_t vocab = model.config().vocabSize;
  std::vector<int32_t> got = {static_cast<int32_t>(argmax(promptLogits.data() + promptLogits.size() - vocab, vocab))};
  while (got.size() < count) {
    const std::vector<float> logits = model.forward({{&state, {got.back()}}})[0].toFloats();
    got.push_back(static_cast<int32_t>(argmax(logits.data(), vocab)));
  }
  return got;
}

class PictureRowsOf : public ::testing::TestWithParam<std::string> {};

// Qwen 3.5 and Qwen3-VL with deepstack rows (added after the first two layers).
TEST_P(PictureRowsOf, LogitsAndGreedyMatchTransformers) {
  const PictureReference ref(GetParam());
  const std::unique_ptr<LanguageModel> model = buildLanguageModel(converted(GetParam(), kUnquantized));
  const std::unique_ptr<SequenceState> state = model->newState(128);
  const std::vector<float> logits = pictureLogits(*model, ref, *state);
  const std::vector<float> expected = ref.tensors.at("logits").toFloats();
  const double error = relativeMaxError(logits, expected);
  std::printf("%s, pictures in the feed: max logit error %.2e of the range\n", GetParam().c_str(), error);
  EXPECT_LT(error, 1e-5);
  EXPECT_EQ(greedyAfter(*model, *state, logits, ref.greedy.size()), ref.greedy);
}

INSTANTIATE_TEST_SUITE_P(Qwen, PictureRowsOf, ::testing::Values("qwen3_5_vl", "qwen3_vl_deepstack"));

// Without its deepstack rows the Qwen3-VL model answers otherwise: they are read.
TEST(PictureRows, DeepstackRowsAreRead) {
  const PictureReference ref("qwen3_vl_deepstack");
  const std::unique_ptr<LanguageModel> model = buildLanguageModel(converted(ref.arch, kUnquantized));
  Feed feed{model->newState(128).release(), ref.prompt, true};
  const std::unique_ptr<SequenceState> owned(feed.state);
  feed.pictures = ref.pictures();
  for (Picture& p : feed.pictures) p.deepstack.clear();
  EXPECT_GT(relativeMaxError(model->forward({feed})[0].toFloats(), ref.tensors.at("logits").toFloats()), 1e-3);
}

// Without the pictures' positions (their rows as text, one after another) the logits differ:
// the test above checks the positions, not only the rows.
TEST(PictureRows, TextPositionsWouldNotMatch) {
  const PictureReference ref;
  const std::unique_ptr<LanguageModel> model = buildLanguageModel(visionModel());
  const std::unique_ptr<SequenceState> state = model->newState(128);
  // Each row a picture of its own: 1 x 1 grids advance the positions by one a row, as text.
  Feed feed{state.get(), ref.prompt, true};
  for (const Picture& p : ref.pictures())
    for (int64_t r = 0; r < p.rows.size(0); ++r) feed.pictures.push_back({p.first + r, p.rows.slice(0, r, r + 1), 1, 1, 1});
  const std::vector<float> asText = model->forward({feed})[0].toFloats();
  EXPECT_GT(relativeMaxError(asText, ref.tensors.at("logits").toFloats()), 1e-3);
}

TEST(PictureRows, PartsCutThroughAPictureGiveTheWhole) {
  const PictureReference ref;
  const std::unique_ptr<LanguageModel> model = buildLanguageModel(visionModel());
  const std::unique_ptr<SequenceState> whole = model->newState(128), parts = model->newState(128);
  const std::vector<float> once = pictureLogits(*model, ref, *whole);
  // 8: inside the first picture (tokens 6-11); 20: inside the second (17-36); 30: inside it too.
  const std::vector<float> cut = pictureLogits(*model, ref, *parts, {8, 20, 30});
  EXPECT_LT(relativeMaxError(cut, once), 1e-5);
  EXPECT_EQ(greedyAfter(*model, *parts, cut, ref.greedy.size()), ref.greedy);
}

TEST(PictureRows, AStateKeepsNoPrefixThatCutsItsPictures) {
  const PictureReference ref;
  const std::unique_ptr<LanguageModel> model = buildLanguageModel(visionModel());
  const std::unique_ptr<SequenceState> state = model->newState(128);
  pictureLogits(*model, ref, *state);
  const int64_t n = state->length();
  EXPECT_EQ(state->reusable(n), n);
  EXPECT_EQ(state->reusable(n - 3), 0);  // before the second picture's end (token 37)
  // A copy keeps the positions: its continuation is the same.
  const std::unique_ptr<SequenceState> copy = model->newState(128);
  ASSERT_TRUE(copy->copyFrom(*state));
  const std::vector<float> a = model->forward({{state.get(), {7}}})[0].toFloats();
  const std::vector<float> b = model->forward({{copy.get(), {7}}})[0].toFloats();
  EXPECT_EQ(a, b);
}

TEST(PictureRows, BadPicturesAreErrors) {
  const PictureReference ref;
  const std::unique_ptr<LanguageModel> model = buildLanguageModel(visionModel());
  const std::unique_ptr<SequenceState> state = model->newState(128);
  Picture p = ref.pictures()[0];
  Feed feed{state.get(), ref.prompt, true, {}, true, {p}};
  feed.pictures[0].h = 2;  // 2 x 2 rows, not the 6 given
  expectError([&] { model->forward({feed}); }, {"picture 0", "rows [6, 64]", "expected F32 [4, 64]"});
  feed.pictures[0] = p;
  feed.pictures[0].first = static_cast<int64_t>(ref.prompt.size());
  expectError([&] { model->forward({feed}); }, {"picture 0", "do not fall in the feed's 41 tokens"});
  feed.pictures = {ref.pictures()[1], ref.pictures()[0]};
  expectError([&] { model->forward({feed}); }, {"picture 1", "after the pictures before it"});
  EXPECT_EQ(state->length(), 0);
  // A model whose RoPE has no (time, height, width) sections reads no pictures.
  const std::unique_ptr<LanguageModel> qwen3 = buildLanguageModel(converted("qwen3", kUnquantized));
  const std::unique_ptr<SequenceState> textState = qwen3->newState(8);
  Picture small = {0, tensor::zeros({1, qwen3->config().hiddenSize}), 1, 1, 1};
  expectError([&] { qwen3->forward({{textState.get(), {5, 6}, false, {}, true, {small}}}); },
              {"not multimodal"});
}

// Through an Engine: Request::pictures read in the prompt's parts, beside other requests.
Request pictureRequest(const PictureReference& ref, size_t limit) {
  Request r;
  r.prompt = ref.prompt;
  r.limit = static_cast<int64_t>(limit);
  r.sampling = greedy();
  r.pictures = ref.pictures();
  return r;
}

TEST(PictureRows, AnEngineGivesTransformersGreedyTokens) {
  const PictureReference ref;
  Engine engine(buildLanguageModel(visionModel()), nullptr, {}, 2, 128);
  // Beside a request of the same tokens whose pictures are other rows: no slot shares them.
  Request other = pictureRequest(ref, ref.greedy.size());
  for (Picture& p : other.pictures) p.rows = (tensor::lazy(p.rows) * tensor::lazy(tensor::scalar(-1.0f))).eval();
  const std::vector<Result> both = engine.generate({pictureRequest(ref, ref.greedy.size()), other});
  EXPECT_EQ(both[0].tokens, ref.greedy);
  EXPECT_NE(both[1].tokens, ref.greedy);
  // Again after them (the slots hold their tokens): the same answers, not the other's.
  const std::vector<Result> again = engine.generate({other, pictureRequest(ref, ref.greedy.size())});
  EXPECT_EQ(again[0].tokens, both[1].tokens);
  EXPECT_EQ(again[1].tokens, ref.greedy);
}

TEST(PictureRows, AnEngineRefusesBadPictures) {
  const PictureReference ref;
  Engine engine(buildLanguageModel(visionModel()), nullptr, {}, 1, 128);
  Request r = pictureRequest(ref, 4);
  r.pictures[1].first = r.pictures[0].first + 2;  // overlapping the first
  expectError([&] { engine.generate({r}); }, {"picture 1", "after the pictures before it"});
  r = pictureRequest(ref, 4);
  r.pictures[0].rows = tensor::zeros({6, 8});
  expectError([&] { engine.generate({r}); }, {"picture 0", "expected F32 [6, 64]"});
  r = pictureRequest(ref, 4);
  r.head = 10;
  expectError([&] { engine.generate({r}); }, {"head 10 ends past the first picture's start"});
}

class GpuPictureRows : public test::GpuTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(GpuPictureRows, LogitsAndGreedyMatchTransformers) {
  const PictureReference ref(GetParam());
  const std::unique_ptr<LanguageModel> model =
      buildLanguageModel(converted(GetParam(), kUnquantized), {.kvCache = DType::F32, .gpu = gpu()});
  const std::unique_ptr<SequenceState> state = model->newState(128);
  const std::vector<float> logits = pictureLogits(*model, ref, *state, {20});
  const double error = relativeMaxError(logits, ref.tensors.at("logits").toFloats());
  std::printf("%s, pictures in the feed on %s: max logit error %.2e of the range\n", GetParam().c_str(),
              gpu().describe().c_str(), error);
  EXPECT_LT(error, 1e-4);
  EXPECT_EQ(greedyAfter(*model, *state, logits, ref.greedy.size()), ref.greedy);
}

INSTANTIATE_TEST_SUITE_P(Qwen, GpuPictureRows, ::testing::Values("qwen3_5_vl", "qwen3_vl_deepstack"));

}  // namespace
