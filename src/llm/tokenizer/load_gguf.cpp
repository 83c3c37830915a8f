// Tokenizer::fromGguf: llama.cpp's SentencePiece ("llama") and byte-level BPE ("gpt2")
// vocabularies, with llama.cpp's defaults for the options a file leaves out.
#include "llm/tokenizer/load_gguf.h"

#include <gizml/error.h>

#include <cstdio>
#include <optional>

#include "llm/tokenizer/byte_level.h"
#include "llm/tokenizer/tokenizer_impl.h"
#include "llm/tokenizer/unicode.h"

namespace gizml::llm {
namespace {

using Impl = Tokenizer::Impl;
enum TokenType { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

std::string unescapeMeta(const std::string& token) {
  std::string out;
  for (size_t i = 0; i < token.size(); ++i) {
    if (token.compare(i, kSentencePieceSpace.size(), kSentencePieceSpace) == 0) {
      out.push_back(' ');
      i += kSentencePieceSpace.size() - 1;
    } else {
      out.push_back(token[i]);
    }
  }
  return out;
}

SplitPattern patternOf(const std::string& pre, const std::string& path) {
  if (pre == "qwen2" || pre == "deepseek-r1-qwen") return SplitPattern::qwen2;
  if (pre == "llama3" || pre == "llama-v3" || pre == "llama-bpe") return SplitPattern::llama3;
  if (pre == "qwen35") return SplitPattern::qwen35;
  if (pre == "smollm") return SplitPattern::smollm;
  throw Error(path + ": unsupported tokenizer.ggml.pre \"" + pre + "\"");
}

// The tokenizer.ggml.* fields; absent ones are empty so that the loader applies llama.cpp's defaults.
struct GgufVocab {
  std::string model;  // "llama" (SentencePiece), "gpt2" (byte-level BPE)
  std::string pre;    // the pre-tokenizer of a byte-level BPE
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int64_t> tokenTypes;  // TokenType
  std::vector<std::string> merges;  // "left right"
  std::optional<int64_t> bos, eos;
  std::optional<bool> addBos, addEos, addSpacePrefix;
};

GgufVocab readVocab(const GgufFile& file) {
  const auto key = [](const char* name) { return std::string("tokenizer.ggml.") + name; };
  const auto optionalInt = [&](const char* name) -> std::optional<int64_t> {
    if (!file.has(key(name))) return std::nullopt;
    return file.getInt(key(name));
  };
  const auto optionalBool = [&](const char* name) -> std::optional<bool> {
    if (!file.has(key(name))) return std::nullopt;
    return file.getBool(key(name));
  };
  const auto strings = [&](const char* name) {
    return file.has(key(name)) ? file.getStrings(key(name)) : std::vector<std::string>{};
  };
  GgufVocab v;
  v.model = file.getString(key("model"), "");
  v.pre = file.getString(key("pre"), "");
  v.tokens = strings("tokens");
  v.merges = strings("merges");
  if (file.has(key("scores"))) {
    const std::vector<double> scores = file.getFloats(key("scores"));
    v.scores.assign(scores.begin(), scores.end());
  }
  if (file.has(key("token_type"))) v.tokenTypes = file.getInts(key("token_type"));
  v.bos = optionalInt("bos_token_id");
  v.eos = optionalInt("eos_token_id");
  v.addBos = optionalBool("add_bos_token");
  v.addEos = optionalBool("add_eos_token");
  v.addSpacePrefix = optionalBool("add_space_prefix");
  return v;
}

// The same fields from the JSON that convert writes beside a model converted from a GGUF file
// (tokenizer_gguf.json: each tokenizer.ggml.* key without its prefix).
GgufVocab readVocab(const nlohmann::json& doc, const std::string& path) {
  GgufVocab v;
  try {
    const auto optionalInt = [&](const char* name) -> std::optional<int64_t> {
      if (!doc.contains(name)) return std::nullopt;
      return doc.at(name).get<int64_t>();
    };
    const auto optionalBool = [&](const char* name) -> std::optional<bool> {
      if (!doc.contains(name)) return std::nullopt;
      return doc.at(name).get<bool>();
    };
    v.model = doc.value("model", "");
    v.pre = doc.value("pre", "");
    v.tokens = doc.value("tokens", std::vector<std::string>{});
    v.merges = doc.value("merges", std::vector<std::string>{});
    v.scores = doc.value("scores", std::vector<float>{});
    v.tokenTypes = doc.value("token_type", std::vector<int64_t>{});
    v.bos = optionalInt("bos_token_id");
    v.eos = optionalInt("eos_token_id");
    v.addBos = optionalBool("add_bos_token");
    v.addEos = optionalBool("add_eos_token");
    v.addSpacePrefix = optionalBool("add_space_prefix");
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": " + e.what());
  }
  return v;
}

std::unique_ptr<Impl> build(GgufVocab v, const std::string& path) {

  auto m = std::make_unique<Impl>();
  const size_t n = v.tokens.size();
  check(n > 0 && n < (size_t{1} << 24), path + ": no tokenizer.ggml.tokens");
  check(v.tokenTypes.empty() || v.tokenTypes.size() == n, path + ": token_type and tokens differ in length");
  v.tokenTypes.resize(n, kNormal);
  m->vocab.resize(n);
  m->added.assign(n, false);
  std::fill(std::begin(m->byteIds), std::end(m->byteIds), -1);

  if (v.model == "llama") {
    check(v.scores.size() == n, path + ": scores and tokens differ in length");
    m->model = Impl::Model::spm;
    m->scores = std::move(v.scores);
    m->spacePrefix = v.addSpacePrefix.value_or(true);
    m->leadingSpace = m->spacePrefix ? Impl::LeadingSpace::stripAfterSpecial : Impl::LeadingSpace::keep;
    if (v.addBos.value_or(true)) m->prefix.push_back(static_cast<int32_t>(v.bos.value_or(1)));
    if (v.addEos.value_or(false)) m->suffix.push_back(static_cast<int32_t>(v.eos.value_or(2)));
    m->bos = static_cast<int32_t>(v.bos.value_or(1));
    m->eos = static_cast<int32_t>(v.eos.value_or(2));
  } else if (v.model == "gpt2") {
    m->model = Impl::Model::byteLevelBpe;
    m->pattern = patternOf(v.pre, path);
    const bool nfc = m->pattern != SplitPattern::llama3 && m->pattern != SplitPattern::smollm;
    m->normalizer = nfc ? Impl::Normalizer::nfc : Impl::Normalizer::none;
    m->ignoreMerges = m->pattern == SplitPattern::llama3;
    if (v.addBos.value_or(m->pattern == SplitPattern::llama3) && v.bos)
      m->prefix.push_back(static_cast<int32_t>(*v.bos));
    m->bos = static_cast<int32_t>(v.bos.value_or(-1));
    m->eos = static_cast<int32_t>(v.eos.value_or(-1));
  } else {
    throw Error(path + ": unsupported tokenizer.ggml.model \"" + v.model + "\"");
  }

  for (size_t i = 0; i < n; ++i) {
    const std::string& token = v.tokens[i];
    const int64_t type = v.tokenTypes[i];
    const auto id = static_cast<int32_t>(i);
    m->vocab.tokens[i] = token;
    m->vocab.ids.emplace(token, id);
    m->vocab.special[i] = type == kControl || type == kUnknown;
    if (type == kControl || type == kUnknown || type == kUserDefined) {
      m->added[i] = true;
      m->rawTokens.add({token, id, type != kUserDefined});
      m->vocab.pieces[i] = token;
    } else if (m->model == Impl::Model::spm) {
      m->vocab.pieces[i] = type == kByte && token.size() == 6
                               ? std::string(1, static_cast<char>(std::strtol(token.c_str() + 3, nullptr, 16)))
                               : unescapeMeta(token);
    } else {
      m->vocab.pieces[i] = byteLevelDecode(token);
    }
  }

  if (m->model == Impl::Model::spm) {
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      m->byteIds[b] = lookup(m->vocab.ids, name);
      if (m->byteIds[b] < 0) m->byteIds[b] = lookup(m->vocab.ids, std::string(1, static_cast<char>(b)));
    }
  } else {
    const auto table = byteToUnicode();
    for (int b = 0; b < 256; ++b) {
      std::string ch;
      unicode::appendUtf8(ch, table[static_cast<size_t>(b)]);
      m->byteIds[b] = lookup(m->vocab.ids, ch);
    }
    m->merges.reserve(v.merges.size());
    uint32_t rank = 0;
    for (const std::string& merge : v.merges) {
      const size_t space = merge.find(' ', 1);
      check(space != std::string::npos, path + ": bad merge " + merge);
      const std::string left = merge.substr(0, space), right = merge.substr(space + 1);
      const int32_t a = lookup(m->vocab.ids, left), b = lookup(m->vocab.ids, right);
      const int32_t merged = lookup(m->vocab.ids, left + right);
      check(a >= 0 && b >= 0 && merged >= 0, path + ": merge of unknown tokens " + merge);
      m->merges.insert(a, b, rank++, merged);
    }
  }
  m->finish();
  return m;
}

}  // namespace

std::unique_ptr<Impl> loadGgufTokenizer(const GgufFile& file) { return build(readVocab(file), file.path()); }

std::unique_ptr<Impl> loadGgufJsonTokenizer(const nlohmann::json& doc, const std::string& path) {
  return build(readVocab(doc, path), path);
}

Tokenizer Tokenizer::fromGguf(const std::string& path) {
  return Tokenizer(loadGgufTokenizer(GgufFile(path)));
}

}  // namespace gizml::llm
