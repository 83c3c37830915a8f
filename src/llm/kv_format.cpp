#include <gizml/error.h>
#include <gizml/kv_format.h>

namespace gizml::llm {
namespace {

using Store = KvFormat::Store;

bool storeOf(const std::string& text, Store& s) {
  if (text == "f32") s = Store::F32;
  else if (text == "f16" || text == "16") s = Store::F16;
  else if (text == "bf16") s = Store::BF16;
  else if (text == "8") s = Store::Bits8;
  else if (text == "4") s = Store::Bits4;
  else if (text == "2") s = Store::Bits2;
  else return false;
  return true;
}

const char* textOf(Store s) {
  switch (s) {
    case Store::F32: return "f32";
    case Store::F16: return "16";
    case Store::BF16: return "bf16";
    case Store::Bits8: return "8";
    case Store::Bits4: return "4";
    case Store::Bits2: return "2";
  }
  return "?";
}

}  // namespace

KvFormat::KvFormat(DType dtype) {
  check(dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16,
        std::string("KV cache: F32, F16 or BF16 elements, not ") + dtypeName(dtype));
  keys = values = dtype == DType::F32 ? Store::F32 : dtype == DType::F16 ? Store::F16 : Store::BF16;
}

KvFormat KvFormat::parse(const std::string& text) {
  const size_t slash = text.find('/');
  KvFormat f;
  const bool ok = slash == std::string::npos
                      ? storeOf(text, f.keys) && storeOf(text, f.values)
                      : storeOf(text.substr(0, slash), f.keys) && storeOf(text.substr(slash + 1), f.values);
  check(ok, "kv: '" + text + "' is not a format: \"16\", \"8\", \"4\", \"2\", \"f32\", \"f16\", \"bf16\", or keys and "
                             "values apart as \"K/V\" (such as \"4/2\")");
  return f;
}

std::optional<KvFormat> KvFormat::parseSetting(const std::string& text) {
  if (text == "auto") return std::nullopt;
  return parse(text);
}

std::string KvFormat::text() const {
  return keys == values ? textOf(keys) : std::string(textOf(keys)) + "/" + textOf(values);
}

int KvFormat::bits(Store s) {
  switch (s) {
    case Store::F32: return 32;
    case Store::F16:
    case Store::BF16: return 16;
    case Store::Bits8: return 8;
    case Store::Bits4: return 4;
    case Store::Bits2: return 2;
  }
  return 0;
}

}  // namespace gizml::llm
