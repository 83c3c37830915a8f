// image::decode, resize, encodePng and the tensor conversions against Pillow's pixels
// (tests/reference/make_image_fixtures.py, tests/data/image/expected.txt).
#include <gizml/image.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "formats/file_bytes.h"
#include "image/codecs.h"
#include "common/test_paths.h"

using namespace gizml;
using namespace gizml::image;

namespace {

std::string dataPath(const std::string& name) { return test_paths::testData() + "/image/" + name; }

Image decodeFile(const std::string& name, int64_t maxPixels = kMaxPixels) {
  return decode(readFileBytes(dataPath(name)), maxPixels);
}

// One line of expected.txt.
struct Case {
  std::string kind, file;
  int64_t maxPixels = 0, width = 0, height = 0;
  std::string expected;
};

std::vector<Case> cases() {
  std::ifstream in(dataPath("expected.txt"));
  std::vector<Case> all;
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    Case c;
    fields >> c.kind >> c.file;
    if (c.kind == "decode") fields >> c.maxPixels;
    fields >> c.width >> c.height >> c.expected;
    all.push_back(c);
  }
  return all;
}

// Pixels equal to Pillow's, naming the first that differs.
void expectPixels(const Image& got, const Case& c) {
  ASSERT_EQ(got.width, c.width) << c.file;
  ASSERT_EQ(got.height, c.height) << c.file;
  const std::vector<uint8_t> expected = readFileBytes(dataPath(c.expected));
  ASSERT_EQ(got.pixels.size(), expected.size()) << c.file;
  for (size_t i = 0; i < expected.size(); ++i)
    ASSERT_EQ(int(got.pixels[i]), int(expected[i]))
        << c.kind << " " << c.file << " -> " << c.expected << ": pixel (" << i / 3 % c.width << ", "
        << i / 3 / c.width << ") channel " << i % 3;
}

void expectError(const std::vector<uint8_t>& bytes, const std::string& part) {
  try {
    decode(bytes);
    FAIL() << "no error; expected one naming \"" << part << "\"";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

}  // namespace

// PNG (every colour type and depth the fixtures hold) and JPEG (baseline 4:4:4, 4:2:2, 4:2:0,
// progressive, grey, CMYK) the same bytes as Pillow's convert("RGB"), turned upright by EXIF
// orientations 2 to 8 as its exif_transpose turns them: both JPEG decoders are libjpeg-turbo with
// its defaults (islow IDCT, fancy upsampling), so no tolerance is needed.
TEST(Image, DecodesAsPillow) {
  int checked = 0;
  for (const Case& c : cases()) {
    if (c.kind != "decode") continue;
    SCOPED_TRACE(c.file + " max " + std::to_string(c.maxPixels));
    expectPixels(decodeFile(c.file, c.maxPixels), c);
    ++checked;
  }
  EXPECT_EQ(checked, 26);
}

// Pillow's resize(LANCZOS) byte for byte: up, down, one side only, down to 1 x 1, and a height
// that shrinks far more than the width (which Pillow 13 resamples along y first).
TEST(Image, ResizesAsPillowLanczos) {
  int checked = 0;
  for (const Case& c : cases()) {
    if (c.kind != "resize") continue;
    expectPixels(resize(decodeFile(c.file), c.width, c.height), c);
    ++checked;
  }
  EXPECT_EQ(checked, 5);
}

// Pillow's resize(BICUBIC) byte for byte (Qwen's image processors resize with it): up, down,
// height only, width only, and the width up with the height down (along y first).
TEST(Image, ResizesAsPillowBicubic) {
  int checked = 0;
  for (const Case& c : cases()) {
    if (c.kind != "bicubic") continue;
    expectPixels(resize(decodeFile(c.file), c.width, c.height, Filter::Bicubic), c);
    ++checked;
  }
  EXPECT_EQ(checked, 5);
}

// The spec's budget: at most maxPixels, the aspect kept by diffusers' int(side * scale); a side
// that would be 0 is 1, and the other then keeps within the budget.
TEST(Image, DecodeScalesToTheBudget) {
  const Image big = decodeFile("big.png");
  EXPECT_EQ(big.width * big.height, 97 * 61);
  const Image same = decodeFile("big.png", 97 * 61);
  EXPECT_EQ(same.pixels, big.pixels);
  const Image thin = decode(encodePng(resize(big, 97, 1)), 10);
  EXPECT_EQ(thin.width, 10);
  EXPECT_EQ(thin.height, 1);
  EXPECT_THROW(decodeFile("big.png", 0), Error);
}

TEST(Image, EncodePngRoundTrips) {
  const Image image = decodeFile("rgb.png");
  const std::vector<uint8_t> png = encodePng(image);
  const Image back = decode(png);
  EXPECT_EQ(back.width, image.width);
  EXPECT_EQ(back.height, image.height);
  EXPECT_EQ(back.pixels, image.pixels);
  // For Pillow to read back (ctest image_pillow_reads_encoded_png).
  std::filesystem::create_directories(test_paths::buildDir() + "/image");
  std::ofstream(test_paths::buildDir() + "/image/encoded_rgb.png", std::ios::binary)
      .write(reinterpret_cast<const char*>(png.data()), std::streamsize(png.size()));

  EXPECT_THROW(encodePng(Image{2, 2, std::vector<uint8_t>(11)}), Error);
  EXPECT_THROW(encodePng(Image{}), Error);
}

TEST(Image, RefusesBadFiles) {
  expectError({}, "neither PNG nor JPEG");
  expectError({'G', 'I', 'F', '8', '9', 'a', 1, 0, 1, 0}, "neither PNG nor JPEG");
  expectError({0x89, 'P', 'N', 'G'}, "neither PNG nor JPEG");  // a signature cut short
  expectError(readFileBytes(dataPath("bad_truncated.png")), "PNG: the file is truncated");
  expectError(readFileBytes(dataPath("bad_truncated.jpg")), "JPEG: Premature end of JPEG file");
  expectError(readFileBytes(dataPath("bad_huge.png")), "PNG: 60000 x 60000 pixels is not a size gizml decodes");
  expectError(readFileBytes(dataPath("bad_tall.png")), "PNG: the file is truncated: its 1 x 60000 pixels are 240000 bytes");
  expectError(readFileBytes(dataPath("bad_wide.png")), "PNG: Invalid IHDR data (libpng's last warning: Image width exceeds user limit");
  expectError(readFileBytes(dataPath("bad_zero.png")), "PNG: Invalid IHDR data (libpng's last warning: Image width is zero");
  expectError(readFileBytes(dataPath("bad_huge.jpg")), "JPEG: 65000 x 65000 pixels is not a size gizml decodes");
  expectError(readFileBytes(dataPath("bad_zero.jpg")), "JPEG:");
  // A PNG or JPEG signature and nothing after it.
  expectError({0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'}, "PNG: the file is truncated");
  expectError({0xff, 0xd8, 0xff}, "JPEG:");
  // The formats' readers on their own, given nothing.
  EXPECT_THROW(decodePng({}), Error);
  EXPECT_THROW(decodeJpeg({}), Error);
}

// A scan whose data runs into a marker other than a restart marker (here the end of the image, or
// another frame's header) before its last row of blocks is a truncated or damaged file, though
// libjpeg (and Pillow) would pad the rest with grey; found by fuzz_image as files of a few hundred
// bytes claiming 2109 x 64811 pixels, whose decode and resize took seconds
// (fuzz/corpus/fuzz_image/timeout_scan_*.jpg). Within the last row of blocks it is read as libjpeg
// reads it.
TEST(Image, RefusesJpegWhoseScanEndsEarly) {
  const std::vector<uint8_t> whole = readFileBytes(dataPath("q420.jpg"));  // 61 x 43, 4:2:0: 3 rows of blocks
  const std::vector<uint8_t> sos = {0xff, 0xda}, eoi = {0xff, 0xd9};
  const auto at = std::search(whole.begin(), whole.end(), sos.begin(), sos.end());
  ASSERT_NE(at, whole.end());
  const size_t data = size_t(at - whole.begin()) + 2 + (size_t(at[2]) << 8 | at[3]);  // after the scan header
  ASSERT_TRUE(std::equal(eoi.begin(), eoi.end(), whole.end() - 2));
  std::vector<uint8_t> cut(whole.begin(), whole.begin() + std::ptrdiff_t(data + 16));
  cut.insert(cut.end(), eoi.begin(), eoi.end());
  expectError(cut, "JPEG: the file is truncated or damaged: a scan's data ends at the marker 0xffd9 with 3 of its 3 "
                   "rows of blocks to go (61 x 43 pixels)");
  cut.back() = 0xc0;  // another frame's header
  expectError(cut, "a scan's data ends at the marker 0xffc0 with 3 of its 3 rows of blocks to go");
  cut.back() = 0xd9;
  // The same header claiming 4000 x 60000 pixels: refused as soon as the data ends.
  const std::vector<uint8_t> sof = {0xff, 0xc0};
  const size_t size = size_t(std::search(cut.begin(), cut.end(), sof.begin(), sof.end()) - cut.begin()) + 5;
  ASSERT_LT(size + 4, data);
  cut[size] = 60000 >> 8, cut[size + 1] = 60000 & 0xff, cut[size + 2] = 4000 >> 8, cut[size + 3] = 4000 & 0xff;
  expectError(cut, "with 3750 of its 3750 rows of blocks to go (4000 x 60000 pixels)");

  // Two bytes short of the end: the last row of blocks loses its last bits, and the first row of
  // blocks (16 rows of pixels) is that of the whole file.
  std::vector<uint8_t> nearly(whole.begin(), whole.end() - 4);
  nearly.insert(nearly.end(), eoi.begin(), eoi.end());
  const Image expected = decode(whole), got = decode(nearly);
  ASSERT_EQ(got.width, expected.width);
  ASSERT_EQ(got.height, expected.height);
  const auto upper = std::ptrdiff_t(16 * expected.width * 3);
  EXPECT_TRUE(std::equal(got.pixels.begin(), got.pixels.begin() + upper, expected.pixels.begin()));
}

// ComfyUI's LoadImage (/ 255 in f32) and its VAE's process_input (x * 2 - 1).
TEST(Image, ToTensor) {
  const Image image{2, 1, {0, 128, 255, 1, 2, 254}};
  const tensor::Tensor zeroOne = toTensor(image);
  ASSERT_EQ(zeroOne.shape(), (tensor::Shape{3, 1, 2}));
  const std::vector<float> v = zeroOne.toFloats();  // channel planes: R of both pixels, then G, then B
  const std::vector<float> expected = {0.0f, 1.0f / 255.0f, 128.0f / 255.0f, 2.0f / 255.0f, 1.0f, 254.0f / 255.0f};
  EXPECT_EQ(v, expected);
  const std::vector<float> m = toTensor(image, Range::MinusOneOne).toFloats();
  for (size_t i = 0; i < m.size(); ++i) EXPECT_EQ(m[i], expected[i] * 2.0f - 1.0f);
  EXPECT_THROW(toTensor(Image{2, 2, std::vector<uint8_t>(3)}), Error);
}

// SaveImage truncates: uint8(clip(255 * x)), after the VAE's clamp((x + 1) / 2) for [-1, 1]. The
// values are NumPy's on float32 arrays (np.clip(np.float32(255.) * x, 0, 255).astype(np.uint8)).
TEST(Image, FromTensorTruncatesAsComfyUI) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  // x, then the byte for [0, 1] and for [-1, 1].
  const std::vector<std::array<float, 3>> table = {
      {0.0f, 0, 127},        {1.0f, 255, 255},      {0.999f, 254, 254},   {0.5f, 127, 191},
      {-0.5f, 0, 63},        {2.0f, 255, 255},      {-3.0f, 0, 0},        {1.0f / 255.0f, 1, 128},
      {0.00392f, 0, 127},    {0.9961f, 254, 254},   {nan, 0, 0},          {inf, 255, 255},
      {-inf, 0, 0},          {-0.99f, 0, 1},        {0.0039215f, 0, 127}, {0.996079f, 254, 254}};
  std::vector<double> values;
  for (const auto& row : table) values.push_back(row[0]);
  const int64_t n = int64_t(table.size());
  // The three planes: the values in R, their negations in G, zeros in B.
  std::vector<double> planes = values;
  for (double x : values) planes.push_back(-x);
  planes.insert(planes.end(), size_t(n), 0.0);
  const tensor::Tensor t = tensor::tensor({3, 1, n}, planes);
  const Image zeroOne = fromTensor(t);
  const Image minusOneOne = fromTensor(t, Range::MinusOneOne);
  ASSERT_EQ(zeroOne.width, n);
  ASSERT_EQ(zeroOne.height, 1);
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(int(zeroOne.pixels[size_t(i * 3)]), int(table[size_t(i)][1])) << "x = " << values[size_t(i)];
    EXPECT_EQ(int(minusOneOne.pixels[size_t(i * 3)]), int(table[size_t(i)][2])) << "x = " << values[size_t(i)];
    EXPECT_EQ(int(minusOneOne.pixels[size_t(i * 3 + 2)]), 127);  // clamp((0 + 1) / 2) = 0.5: 127.5 truncated
  }
  EXPECT_THROW(fromTensor(tensor::zeros({1, 3, 2, 2})), Error);
  EXPECT_THROW(fromTensor(tensor::zeros({4, 2, 2})), Error);
}

// Bytes through the tensor and back: [0, 1] keeps every byte; through [-1, 1], bytes 1 to 63 come
// back one lower, as in ComfyUI (NumPy on float32: x * 2 - 1, then (x + 1) / 2, rounds them
// below b / 255 and the truncation drops them).
TEST(Image, TensorRoundTrips) {
  Image all{256, 1, {}};
  for (int b = 0; b < 256; ++b) all.pixels.insert(all.pixels.end(), {uint8_t(b), uint8_t(255 - b), uint8_t(b)});
  EXPECT_EQ(fromTensor(toTensor(all)).pixels, all.pixels);
  const Image back = fromTensor(toTensor(all, Range::MinusOneOne), Range::MinusOneOne);
  for (size_t i = 0; i < all.pixels.size(); ++i) {
    const int b = all.pixels[i];
    EXPECT_EQ(int(back.pixels[i]), b >= 1 && b <= 63 ? b - 1 : b) << "byte " << b;
  }
}
