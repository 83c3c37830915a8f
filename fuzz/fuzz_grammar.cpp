// gizml::grammar on arbitrary bytes: a JSON Schema, a zero byte, then a text. Building the
// grammar may only throw gizml::Error; a text it takes whole must be JSON (nlohmann parses it),
// and so must any text anyObject takes whole.
// Run from the repository root: build/fuzz/fuzz/fuzz_grammar -max_total_time=60 fuzz/corpus/fuzz_grammar
#include <gizml/error.h>
#include <gizml/grammar.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

namespace {

void takeWhole(const gizml::grammar::Grammar& g, const std::string& text) {
  gizml::grammar::Matcher m(g);
  if (m.advance(text) && m.complete() && !nlohmann::json::accept(text)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t zero = input.find('\0');
  const std::string schema = input.substr(0, zero), text = zero == std::string::npos ? "" : input.substr(zero + 1);
  static const gizml::grammar::Grammar anyObject = gizml::grammar::Grammar::anyObject();
  takeWhole(anyObject, text);
  try {
    takeWhole(gizml::grammar::Grammar::fromSchema(schema), text);
  } catch (const gizml::Error&) {
  }
  return 0;
}
