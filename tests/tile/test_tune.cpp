// Tile::tune on the CPU: it times every configuration once per key and keeps the fastest, later
// calls run that one only; saveTunings/loadTunings round-trip the table through a folder, and a
// damaged file is an Error naming the file and line.
#include <gizhw/gpu.h>
#include <gizml/tile.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "programs.h"
#include "gpu/tunings.h"

using namespace gizml;
namespace fs = std::filesystem;

namespace {

// The guide's product in bm x bn blocks with k blocks of bk.
T::Tensor product(const T::Tensor& a, const T::Tensor& b, const Tile::Config& c) {
  return Tile::run(tileprog::productGrid(a, b, c["bm"], c["bn"]), tileprog::product(a, b, c["bm"], c["bn"], c["bk"]))[0];
}

const std::vector<Tile::Config> kConfigs = {
    {{"bm", 128}, {"bn", 128}, {"bk", 32}}, {{"bm", 64}, {"bn", 32}, {"bk", 16}}, {{"bm", 16}, {"bn", 128}, {"bk", 64}}};

void expectNear(const T::Tensor& got, const T::Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const auto g = got.toFloats(), w = want.toFloats();
  for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(g[i], w[i], 1e-4) << what << " element " << i;
}

// A fresh folder under the system's temporary folder, removed at the end of the test.
struct TempFolder {
  fs::path path = fs::temp_directory_path() /
                  ("gizml_tune_" + std::to_string(::getpid()) + "_" + std::to_string(std::random_device{}()));
  TempFolder() { fs::create_directories(path); }
  ~TempFolder() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  void write(const std::string& text) const { std::ofstream(path / "tunings.txt", std::ios::binary) << text; }
  std::string read() const {
    std::ostringstream s;
    s << std::ifstream(path / "tunings.txt", std::ios::binary).rdbuf();
    return s.str();
  }
};

class TileTune : public ::testing::Test {
 protected:
  void SetUp() override { gizhw::gpu::clearTunings(); }
  void TearDown() override { gizhw::gpu::clearTunings(); }
};

}  // namespace

TEST_F(TileTune, TimesEveryConfigOnceThenRunsTheKeptOne) {
  const auto a = T::uniform(T::Key(1), {200, 96}, -1, 1), b = T::uniform(T::Key(2), {96, 150}, -1, 1);
  const auto want = T::matmul(a, b);
  std::map<std::string, int> calls;
  const auto runWith = [&](const Tile::Config& c) {
    ++calls[c.text()];
    const auto out = product(a, b, c);
    expectNear(out, want, c.text());  // every configuration gives the product
    return std::vector<T::Tensor>{out};
  };
  EXPECT_FALSE(Tile::tuned("product", {a, b}));
  const uint64_t measured = gizhw::gpu::tuningsMeasured();
  const auto first = Tile::tune("product", kConfigs, {a, b}, runWith);
  EXPECT_EQ(gizhw::gpu::tuningsMeasured(), measured + 1);
  ASSERT_EQ(first.size(), 1u);
  expectNear(first[0], want, "first call");
  for (const auto& c : kConfigs) EXPECT_EQ(calls[c.text()], 4) << c.text();  // a warm-up and 3 timed runs
  const auto kept = Tile::tuned("product", {a, b});
  ASSERT_TRUE(kept);
  EXPECT_NE(std::find(kConfigs.begin(), kConfigs.end(), *kept), kConfigs.end());

  // The second call runs the kept configuration once, and times nothing.
  const auto before = calls;
  const auto second = Tile::tune("product", kConfigs, {a, b}, runWith);
  expectNear(second[0], want, "second call");
  EXPECT_EQ(gizhw::gpu::tuningsMeasured(), measured + 1);
  for (const auto& c : kConfigs) EXPECT_EQ(calls[c.text()], before.at(c.text()) + (c == *kept ? 1 : 0)) << c.text();

  // Another shape, dtype or layout of the key is tuned on its own.
  const auto a2 = T::uniform(T::Key(3), {40, 96}, -1, 1);
  Tile::tune("product", kConfigs, {a2, b}, [&](const Tile::Config& c) {
    ++calls["other " + c.text()];
    return std::vector<T::Tensor>{product(a2, b, c)};
  });
  EXPECT_EQ(calls["other " + kConfigs[0].text()], 4);
  EXPECT_TRUE(Tile::tuned("product", {a2, b}));
  EXPECT_FALSE(Tile::tuned("product", {a.transpose(0, 1), b}));
  EXPECT_FALSE(Tile::tuned("product", {a.cast(DType::BF16), b}));
  EXPECT_FALSE(Tile::tuned("other", {a, b}));

  // A kept configuration no longer among the choices is tuned again.
  calls.clear();
  const std::vector<Tile::Config> others = {{{"bm", 32}, {"bn", 32}, {"bk", 32}}};
  expectNear(Tile::tune("product", others, {a, b}, runWith)[0], want, "new choices");
  EXPECT_EQ(calls[others[0].text()], 4);
  EXPECT_EQ(*Tile::tuned("product", {a, b}), others[0]);
}

TEST_F(TileTune, ConfigurationsThatFailAreSkipped) {
  const auto a = T::uniform(T::Key(4), {8, 8}), b = T::uniform(T::Key(5), {8, 8});
  // bk = 0 is not a block shape: that configuration throws, the other is kept.
  const std::vector<Tile::Config> configs = {{{"bm", 8}, {"bn", 8}, {"bk", 0}}, {{"bm", 8}, {"bn", 8}, {"bk", 4}}};
  const auto out = Tile::tune("product", configs, {a, b}, [&](const Tile::Config& c) {
    return std::vector<T::Tensor>{product(a, b, c)};
  });
  expectNear(out[0], T::matmul(a, b), "product");
  EXPECT_EQ(*Tile::tuned("product", {a, b}), configs[1]);
  // When every one fails, the first one's error says which it was.
  try {
    Tile::tune("failing", {configs[0]}, {a, b},
               [&](const Tile::Config& c) { return std::vector<T::Tensor>{product(a, b, c)}; });
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tile tune failing {bk=0,bm=8,bn=8}: tile read"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(Tile::tuned("failing", {a, b}));
  // Misuse.
  EXPECT_THROW(Tile::tune("product", {}, {a, b}, [](const Tile::Config&) { return std::vector<T::Tensor>{}; }), Error);
  EXPECT_THROW(Tile::tune("two words", configs, {a, b}, [](const Tile::Config&) { return std::vector<T::Tensor>{}; }),
               Error);
  EXPECT_THROW(Tile::tune("x", {{{"9lives", 1}}}, {a, b}, [](const Tile::Config&) { return std::vector<T::Tensor>{}; }),
               Error);
  try {
    (void)configs[0]["warps"];
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "tile config: no value \"warps\" in {bk=0,bm=8,bn=8}");
  }
}

TEST_F(TileTune, SaveAndLoadRoundTrip) {
  const auto a = T::uniform(T::Key(6), {64, 32}), b = T::uniform(T::Key(7), {32, 48});
  int calls = 0;
  const auto runWith = [&](const Tile::Config& c) {
    ++calls;
    return std::vector<T::Tensor>{product(a, b, c)};
  };
  Tile::tune("product", kConfigs, {a, b}, runWith);
  Tile::tune("product", kConfigs, {b.transpose(0, 1), a.transpose(0, 1)}, runWith);
  const auto kept = *Tile::tuned("product", {a, b});
  const TempFolder folder;
  const fs::path nested = folder.path / "new" / "folder";
  gizhw::gpu::saveTunings(nested.string());  // made when missing
  std::ostringstream text;
  text << std::ifstream(nested / "tunings.txt").rdbuf();
  EXPECT_EQ(text.str().rfind("gizml tile tunings 1\nproduct\t", 0), 0u) << text.str();
  EXPECT_NE(text.str().find("product\tf32[64,32]@cpu f32[32,48]@cpu\t" + kept.text() + "\n"), std::string::npos)
      << text.str();
  EXPECT_NE(text.str().find("product\tf32[48,32]s1,48@cpu f32[32,64]s1,32@cpu\t"), std::string::npos) << text.str();
  // Nothing but the file: the temporary file was renamed into place.
  EXPECT_EQ(std::distance(fs::directory_iterator(nested), fs::directory_iterator()), 1);

  gizhw::gpu::clearTunings();
  EXPECT_FALSE(Tile::tuned("product", {a, b}));
  EXPECT_EQ(gizhw::gpu::loadTunings(nested.string()), 2u);
  EXPECT_EQ(*Tile::tuned("product", {a, b}), kept);
  calls = 0;
  Tile::tune("product", kConfigs, {a, b}, runWith);
  EXPECT_EQ(calls, 1);  // loaded: nothing timed

  // Saving again replaces the file; a folder without one loads nothing.
  gizhw::gpu::saveTunings(nested.string());
  std::ostringstream again;
  again << std::ifstream(nested / "tunings.txt").rdbuf();
  EXPECT_EQ(again.str(), text.str());
  EXPECT_EQ(gizhw::gpu::loadTunings((folder.path / "none").string()), 0u);
}

TEST_F(TileTune, DamagedFilesAreErrorsNamingFileAndLine) {
  const TempFolder folder;
  const std::string file = (folder.path / "tunings.txt").string();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", ":1: not a tunings file (it is empty)"},
      {"gizml tile tunings 2\n", ":1: not a tunings file"},
      {"\x89PNG\r\n\x1a\n", ":1: not a tunings file"},
      {"gizml tile tunings 1\nproduct f32[2]@cpu bm=1\n", ":2: an entry is three fields separated by tabs"},
      {"gizml tile tunings 1\n# note\n\nproduct\tk\tbm=1\ta\n", ":4: an entry is three fields"},
      {"gizml tile tunings 1\nproduct\tk\tbm=x\n", ":2: the value of bm, \"x\", is not a 64-bit integer"},
      {"gizml tile tunings 1\nproduct\tk\tbm=99999999999999999999\n", ":2: the value of bm"},
      {"gizml tile tunings 1\nproduct\tk\tbm=1 \n", ":2: the value of bm, \"1 \""},
      {"gizml tile tunings 1\nproduct\tk\tbm=1,bm=2\n", ":2: value bm given twice"},
      {"gizml tile tunings 1\nproduct\tk\tbm=1,\n", ":2: the configuration ends with a comma"},
      {"gizml tile tunings 1\nproduct\tk\tbm\n", ":2: configuration item \"bm\" is not name=value"},
      {"gizml tile tunings 1\nproduct\tk\t=1\n", ":2: an empty value name"},
      {"gizml tile tunings 1\nproduct\tk\tb-m=1\n", ":2: value name \"b-m\""},
      {"gizml tile tunings 1\n\tk\tbm=1\n", ":2: an empty kernel name"},
      {"gizml tile tunings 1\nproduct\t\tbm=1\n", ":2: an empty key"},
      {"gizml tile tunings 1\nproduct\tk\x01\tbm=1\n", ":2: a control character in the key"},
  };
  for (const auto& [text, message] : cases) {
    folder.write(text);
    try {
      gizhw::gpu::loadTunings(folder.path.string());
      ADD_FAILURE() << "no error for " << text;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind(file + message, 0), 0u) << e.what();
    }
  }
  // A damaged file adds nothing, not even its good entries before the damage.
  folder.write("gizml tile tunings 1\nproduct\tf32[3]@cpu\tbm=1\nbad\n");
  EXPECT_THROW(gizhw::gpu::loadTunings(folder.path.string()), Error);
  EXPECT_FALSE(Tile::tuned("product", {T::zeros({3})}));
  folder.write("gizml tile tunings 1\nproduct\tf32[3]@cpu\tbm=1\n");
  EXPECT_EQ(gizhw::gpu::loadTunings(folder.path.string()), 1u);
  EXPECT_EQ(*Tile::tuned("product", {T::zeros({3})}), (Tile::Config{{"bm", 1}}));
  gizhw::gpu::clearTunings();
  // Unknown kernels and keys load (they are never asked for), CRLF line ends too; an empty
  // configuration is one with no values.
  folder.write("gizml tile tunings 1\r\nsomething\tf32[1]@cuda:7 (A GPU)\tx=-3\r\nother\tk\t\n");
  EXPECT_EQ(gizhw::gpu::loadTunings(folder.path.string()), 2u);
  gizhw::gpu::saveTunings(folder.path.string());
  EXPECT_EQ(folder.read(), "gizml tile tunings 1\nother\tk\t\nsomething\tf32[1]@cuda:7 (A GPU)\tx=-3\n");
}

TEST(TileTuneFile, FormatThenParseIsTheSame) {
  const std::vector<gizhw::gpu::tuning::Entry> entries = {
      {"a", "f32[3]@cpu", {{"bm", 64}, {"warps", -1}}},
      {"b.c/d", "bf16[1,2]s0,1@cuda:0 (NVIDIA H200)", {}},
      {"e", "k", {{"x", INT64_MIN}, {"y", INT64_MAX}}},
  };
  const auto back = gizhw::gpu::tuning::parse(gizhw::gpu::tuning::format(entries), "mem");
  ASSERT_EQ(back.size(), entries.size());
  for (size_t i = 0; i < back.size(); ++i) {
    EXPECT_EQ(back[i].name, entries[i].name);
    EXPECT_EQ(back[i].key, entries[i].key);
    EXPECT_EQ(back[i].config, entries[i].config);
  }
}
