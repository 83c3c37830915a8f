// The multipart/form-data parser (src/ai/multipart.h): RFC 7578's forms as clients write them
// (curl's and Python's, the openai client's through httpx), RFC 2046's corners (preamble,
// epilogue, transport padding, no headers, empty bodies, CRLF inside a body), and every
// malformed input a MultipartError naming what is wrong.
#include "ai/multipart.h"

#include <gtest/gtest.h>

#include <string>

#include "common/expect_error.h"

using namespace gizml::ai;

namespace {

const std::string kCrlf = "\r\n";

std::string twoFields() {
  return "--XyZ\r\n"
         "Content-Disposition: form-data; name=\"prompt\"\r\n"
         "\r\n"
         "a fox\r\n"
         "--XyZ\r\n"
         "content-disposition: form-data; name=\"image[]\"; filename=\"fox.png\"\r\n"
         "Content-Type: image/png\r\n"
         "\r\n"
         "\x89PNG\r\n--X\r\n\r\n"
         "\r\n--XyZ--\r\n";
}

}  // namespace

TEST(Multipart, BoundaryFromTheContentType) {
  EXPECT_EQ(multipart::boundary("multipart/form-data; boundary=XyZ"), "XyZ");
  EXPECT_EQ(multipart::boundary("Multipart/Form-Data;boundary=\"a b:c\"; charset=utf-8"), "a b:c");
  EXPECT_EQ(multipart::boundary("multipart/form-data; BOUNDARY=----WebKitFormBoundary7MA4YWxkTrZu0gW"),
            "----WebKitFormBoundary7MA4YWxkTrZu0gW");
  EXPECT_EQ(multipart::boundary("multipart/form-data; boundary=\"q\\:x\""), "q:x");  // a quoted pair
  expectError([] { multipart::boundary("application/json"); }, {"'application/json' is not multipart/form-data"});
  expectError([] { multipart::boundary("multipart/form-data"); }, {"no boundary"});
  expectError([] { multipart::boundary("multipart/form-data; boundary="); }, {"boundary", "has no value"});
  expectError([] { multipart::boundary("multipart/form-data; boundary=\"\""); }, {"1 to 70"});
  expectError([] { multipart::boundary("multipart/form-data; boundary=\"ends \""); }, {"1 to 70"});
  expectError([] { multipart::boundary("multipart/form-data; boundary=" + std::string(71, 'a')); }, {"1 to 70"});
  expectError([] { multipart::boundary("multipart/form-data; boundary=\"a\x01\""); }, {"1 to 70"});
  expectError([] { multipart::boundary("multipart/form-data; boundary=\"q\\\"x\""); }, {"'q\"x'", "1 to 70"});
  expectError([] { multipart::boundary("multipart/form-data; boundary=\"open"); }, {"not closed"});
  expectError([] { multipart::boundary("multipart/form-data; boundary"); }, {"has no '='"});
  expectError([] { multipart::boundary("multipart/form-data; boundary=a b"); }, {"unexpected 'b'"});
  expectError([] { multipart::boundary("multipart/form-data; boundary=a; boundary=b"); }, {"boundary given twice"});
}

TEST(Multipart, ReadsTheParts) {
  const auto parts = multipart::parse(twoFields(), "XyZ");
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].name, "prompt");
  EXPECT_FALSE(parts[0].filename);
  EXPECT_EQ(parts[0].contentType, "");
  EXPECT_EQ(parts[0].body, "a fox");
  EXPECT_EQ(parts[1].name, "image[]");
  EXPECT_EQ(parts[1].filename, "fox.png");
  EXPECT_EQ(parts[1].contentType, "image/png");
  EXPECT_EQ(parts[1].body, "\x89PNG\r\n--X\r\n\r\n");  // CRLF and a near-boundary inside the body kept
}

TEST(Multipart, Rfc2046Corners) {
  // A preamble and an epilogue, transport padding after a boundary, an empty body, no epilogue CRLF.
  const std::string body =
      "This is the preamble.\r\n--b  \t\r\nContent-Disposition: form-data; name=empty\r\n\r\n\r\n"
      "--b\r\nContent-Disposition: form-data; name=\"x\"; filename=\"\"\r\n\r\nv\r\n--b--epilogue\r\n--b\r\n";
  const auto parts = multipart::parse(body, "b");
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].name, "empty");
  EXPECT_EQ(parts[0].body, "");
  EXPECT_EQ(parts[1].filename, "");
  EXPECT_EQ(parts[1].body, "v");
  // No parts at all.
  EXPECT_TRUE(multipart::parse("--b--", "b").empty());
}

TEST(Multipart, MalformedBodiesAreNamed) {
  const std::string disposition = "Content-Disposition: form-data; name=\"a\"\r\n";
  expectError([] { multipart::parse("", "b"); }, {"no boundary '--b'"});
  expectError([] { multipart::parse("--bx", "b"); }, {"part 1", "does not end in CRLF"});
  expectError([] { multipart::parse("--b", "b"); }, {"part 1", "does not end in CRLF"});
  expectError([&] { multipart::parse("--b\r\n" + disposition, "b"); }, {"part 1", "do not end in an empty line"});
  expectError([&] { multipart::parse("--b\r\n" + disposition + "\r\nvalue", "b"); },
              {"part 1 ('a')", "ends before its closing boundary '--b--'"});
  expectError([&] { multipart::parse("--b\r\n" + disposition + "\r\nv\r\n--b", "b"); },
              {"part 2", "does not end in CRLF"});
  expectError([] { multipart::parse("--b\r\n\r\nv\r\n--b--", "b"); }, {"part 1: no Content-Disposition"});
  expectError([] { multipart::parse("--b\r\nContent-Disposition form-data\r\n\r\nv\r\n--b--", "b"); }, {"has no ':'"});
  expectError([&] { multipart::parse("--b\r\n" + disposition + " folded\r\n\r\nv\r\n--b--", "b"); }, {"folded"});
  expectError([] { multipart::parse("--b\r\nContent-Disposition: attachment; name=a\r\n\r\nv\r\n--b--", "b"); },
              {"part 1", "'attachment' is not form-data"});
  expectError([] { multipart::parse("--b\r\nContent-Disposition: form-data\r\n\r\nv\r\n--b--", "b"); },
              {"part 1", "has no name"});
  expectError([] { multipart::parse("--b\r\nContent-Disposition: form-data; name=\"a\r\n\r\nv\r\n--b--", "b"); },
              {"not closed"});
  expectError([&] { multipart::parse("--b\r\n" + disposition + disposition + "\r\nv\r\n--b--", "b"); },
              {"Content-Disposition given twice"});
  expectError([] { multipart::parse("--b\r\nContent-Disposition: form-data; name=a; name=b\r\n\r\nv\r\n--b--", "b"); },
              {"name given twice"});
}

TEST(Multipart, Limits) {
  multipart::Limits limits;
  limits.parts = 2;
  limits.headerBytes = 64;
  const std::string part = "--b\r\nContent-Disposition: form-data; name=a\r\n\r\nv\r\n";
  EXPECT_EQ(multipart::parse(part + part + "--b--", "b", limits).size(), 2u);
  expectError([&] { multipart::parse(part + part + part + "--b--", "b", limits); }, {"more than 2 parts"});
  const std::string longHeader = "--b\r\nX-Long: " + std::string(80, 'x') + "\r\n\r\nv\r\n--b--";
  expectError([&] { multipart::parse(longHeader, "b", limits); }, {"part 1", "headers exceed 64 bytes"});
}
