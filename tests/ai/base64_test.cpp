// RFC 4648 base64 both ways (src/ai/base64.h): the images' answers and the pictures of chats.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ai/base64.h"

using namespace gizml;

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

TEST(Base64, DecodesStrictly) {
  for (const std::string text : {"", "f", "fo", "foo", "foob", "fooba", "foobar"}) {
    const std::vector<uint8_t> bytes(text.begin(), text.end());
    EXPECT_EQ(ai::fromBase64(ai::base64(bytes)), bytes) << text;
  }
  EXPECT_EQ(ai::fromBase64("/+8="), (std::vector<uint8_t>{0xff, 0xef}));
  for (const char* bad : {"Zg", "Zg=", "Zg===", "Z===", "====", "Zm 9v", "Zm9v\n", "Zm9-", "Zm_v", "Z=g=", "=Zm9"})
    EXPECT_FALSE(ai::fromBase64(bad).has_value()) << bad;
}
