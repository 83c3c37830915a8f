// Tokenizer::fromJson: the subset of Hugging Face's tokenizer.json that the supported models
// use; anything else is refused by name rather than tokenized differently.
#include <gizml/error.h>
#include <gizml/tokenizer.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <cstdio>

#include "llm/tokenizer/byte_level.h"
#include "llm/tokenizer/load_gguf.h"
#include "llm/tokenizer/tokenizer_impl.h"
#include "llm/tokenizer/unicode.h"

namespace gizml::llm {
namespace {

using nlohmann::json;
using Impl = Tokenizer::Impl;

json readJson(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  check(in.good(), "cannot open " + path.string());
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    throw Error("cannot parse " + path.string() + ": " + e.what());
  }
}

std::string str(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}
bool flag(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}
[[noreturn]] void unsupported(const std::string& what, const json& j) {
  throw Error("tokenizer.json: unsupported " + what + ": " + j.dump().substr(0, 200));
}

void loadNormalizer(Impl& m, const json& n) {
  if (n.is_null()) return;
  const std::string type = str(n, "type");
  auto isSpaceReplace = [](const json& r) {
    return str(r, "type") == "Replace" && r.contains("pattern") && str(r["pattern"], "String") == " " &&
           str(r, "content") == kSentencePieceSpace;
  };
  if (type == "NFC") {
    m.normalizer = Impl::Normalizer::nfc;
  } else if (isSpaceReplace(n)) {
    m.normalizer = Impl::Normalizer::spaceToMeta;
  } else if (type == "Sequence" && n["normalizers"].size() == 2 && str(n["normalizers"][0], "type") == "Prepend" &&
             str(n["normalizers"][0], "prepend") == kSentencePieceSpace && isSpaceReplace(n["normalizers"][1])) {
    m.normalizer = Impl::Normalizer::prependSpaceToMeta;
  } else {
    unsupported("normalizer", n);
  }
}

void loadPreTokenizer(Impl& m, const json& p) {
  if (p.is_null()) return;
  const std::string type = str(p, "type");
  if (m.model == Impl::Model::byteLevelBpe) {
    // Split(regex, Isolated) followed by ByteLevel without its own regex.
    const json& steps = p["pretokenizers"];
    if (type == "Sequence" && steps.size() == 2 && str(steps[0], "type") == "Split" &&
        str(steps[0], "behavior") == "Isolated" && !flag(steps[0], "invert") &&
        str(steps[1], "type") == "ByteLevel" && !flag(steps[1], "use_regex") && !flag(steps[1], "add_prefix_space") &&
        splitPatternFromRegex(str(steps[0]["pattern"], "Regex"), m.pattern))
      return;
    unsupported("pre_tokenizer", p);
  }
  // Splitting on spaces that the normalizer has already turned into U+2581 does nothing (Gemma).
  if (type == "Split" && p.contains("pattern") && str(p["pattern"], "String") == " " &&
      m.normalizer != Impl::Normalizer::none && m.normalizer != Impl::Normalizer::nfc)
    return;
  unsupported("pre_tokenizer", p);
}

// The special tokens TemplateProcessing puts around a single sequence.
void loadPostProcessor(Impl& m, const json& p) {
  if (p.is_null()) return;
  const std::string type = str(p, "type");
  if (type == "ByteLevel") return;  // offsets only
  if (type == "Sequence") {
    for (const json& step : p["processors"]) loadPostProcessor(m, step);
    return;
  }
  if (type != "TemplateProcessing") unsupported("post_processor", p);
  bool afterSequence = false;
  for (const json& item : p["single"]) {
    if (item.contains("Sequence")) {
      afterSequence = true;
      continue;
    }
    const std::string name = str(item["SpecialToken"], "id");
    const json& special = p["special_tokens"][name];
    for (const json& id : special["ids"]) (afterSequence ? m.suffix : m.prefix).push_back(id.get<int32_t>());
  }
}

void loadDecoder(Impl& m, const json& d) {
  if (d.is_null()) return;
  const std::string type = str(d, "type");
  if (m.model == Impl::Model::byteLevelBpe) {
    if (type != "ByteLevel") unsupported("decoder", d);
    return;
  }
  if (type != "Sequence") unsupported("decoder", d);
  for (const json& step : d["decoders"]) {
    const std::string t = str(step, "type");
    if (t == "Strip" && str(step, "content") == " " && step.value("start", 0) == 1 && step.value("stop", 0) == 0) {
      m.leadingSpace = Impl::LeadingSpace::stripFirst;
    } else if (!(t == "ByteFallback" || t == "Fuse" ||
                 (t == "Replace" && str(step["pattern"], "String") == kSentencePieceSpace && str(step, "content") == " "))) {
      unsupported("decoder", d);
    }
  }
}

// What an SentencePiece-style token decodes to: U+2581 as a space, <0xNN> as the byte.
std::string metaPiece(const std::string& token) {
  if (token.size() == 6 && token.compare(0, 3, "<0x") == 0 && token[5] == '>') {
    return std::string(1, static_cast<char>(std::stoi(token.substr(3, 2), nullptr, 16)));
  }
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

void loadModel(Impl& m, const json& model) {
  if (str(model, "type") != "BPE") unsupported("model", json(str(model, "type")));
  if (!str(model, "continuing_subword_prefix").empty() || !str(model, "end_of_word_suffix").empty() ||
      !(model.value("dropout", json()).is_null()))
    unsupported("BPE option", model.value("continuing_subword_prefix", json()));
  m.byteFallback = flag(model, "byte_fallback");
  m.fuseUnk = flag(model, "fuse_unk");
  m.ignoreMerges = flag(model, "ignore_merges");
  for (const auto& [token, id] : model["vocab"].items()) {
    const auto i = id.get<int64_t>();
    check(i >= 0 && i < (int64_t{1} << 24), "tokenizer.json: bad token id for " + token);
    if (static_cast<size_t>(i) >= m.vocab.tokens.size()) m.vocab.resize(static_cast<size_t>(i) + 1);
    m.vocab.tokens[static_cast<size_t>(i)] = token;
    m.vocab.ids[token] = static_cast<int32_t>(i);
  }
  const json& merges = model["merges"];
  m.merges.reserve(merges.size());
  uint32_t rank = 0;
  for (const json& merge : merges) {
    std::string left, right;
    if (merge.is_string()) {
      const std::string s = merge.get<std::string>();
      const size_t space = s.find(' ');
      check(space != std::string::npos, "tokenizer.json: bad merge " + s);
      left = s.substr(0, space), right = s.substr(space + 1);
    } else {
      left = merge.at(0).get<std::string>(), right = merge.at(1).get<std::string>();
    }
    const int32_t a = lookup(m.vocab.ids, left), b = lookup(m.vocab.ids, right);
    const int32_t merged = lookup(m.vocab.ids, left + right);
    check(a >= 0 && b >= 0 && merged >= 0, "tokenizer.json: merge of unknown tokens " + left + " " + right);
    m.merges.insert(a, b, rank++, merged);
  }
  if (const std::string unk = str(model, "unk_token"); !unk.empty()) m.unk = lookup(m.vocab.ids, unk);
}

int32_t configToken(const Impl& m, const json& config, const char* key) {
  const auto it = config.find(key);
  if (it == config.end()) return -1;
  const std::string name = it->is_object() ? str(*it, "content") : it->is_string() ? it->get<std::string>() : "";
  return name.empty() ? -1 : lookup(m.vocab.ids, name);
}

}  // namespace

Tokenizer Tokenizer::fromJson(const std::string& folderOrPath) {
  std::filesystem::path path(folderOrPath);
  // A folder converted from a GGUF file holds tokenizer_gguf.json instead of tokenizer.json.
  if (std::filesystem::is_directory(path))
    path /= std::filesystem::exists(path / "tokenizer.json") || !std::filesystem::exists(path / "tokenizer_gguf.json")
                ? "tokenizer.json"
                : "tokenizer_gguf.json";
  const json doc = readJson(path);
  // tokenizer.json's "model" is an object; the GGUF export's is the vocabulary kind ("llama", "gpt2").
  if (doc.is_object() && doc.contains("model") && doc.at("model").is_string())
    return Tokenizer(loadGgufJsonTokenizer(doc, path.string()));
  auto m = std::make_unique<Impl>();
  try {
    const json& pre = doc.value("pre_tokenizer", json());
    m->model = pre.dump().find("\"ByteLevel\"") != std::string::npos ? Impl::Model::byteLevelBpe : Impl::Model::bpe;
    loadModel(*m, doc.at("model"));
    loadNormalizer(*m, doc.value("normalizer", json()));
    loadPreTokenizer(*m, pre);
    loadPostProcessor(*m, doc.value("post_processor", json()));
    loadDecoder(*m, doc.value("decoder", json()));

    std::vector<AddedToken> addedTokens;
    for (const json& a : doc.value("added_tokens", json::array())) {
      AddedToken t{a.at("content").get<std::string>(), a.at("id").get<int32_t>(), flag(a, "special"),
                   flag(a, "lstrip"), flag(a, "rstrip"), flag(a, "single_word"), flag(a, "normalized")};
      check(t.id >= 0 && t.id < (1 << 24), "tokenizer.json: bad added token id");
      if (static_cast<size_t>(t.id) >= m->vocab.tokens.size()) m->vocab.resize(static_cast<size_t>(t.id) + 1);
      m->vocab.tokens[static_cast<size_t>(t.id)] = t.content;
      m->vocab.ids[t.content] = t.id;
      m->vocab.special[static_cast<size_t>(t.id)] = t.special;
      addedTokens.push_back(t);
    }
    m->added.assign(m->vocab.tokens.size(), false);
    for (const AddedToken& t : addedTokens) {
      m->added[static_cast<size_t>(t.id)] = true;
      (t.normalized && m->normalizer != Impl::Normalizer::none ? m->normalizedTokens : m->rawTokens).add(t);
    }

    std::fill(std::begin(m->byteIds), std::end(m->byteIds), -1);
    const auto table = byteToUnicode();
    for (int b = 0; b < 256; ++b) {
      if (m->model == Impl::Model::byteLevelBpe) {
        std::string ch;
        unicode::appendUtf8(ch, table[static_cast<size_t>(b)]);
        m->byteIds[b] = lookup(m->vocab.ids, ch);
      } else {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        m->byteIds[b] = lookup(m->vocab.ids, name);
      }
    }
    for (size_t i = 0; i < m->vocab.tokens.size(); ++i) {
      const std::string& token = m->vocab.tokens[i];
      m->vocab.pieces[i] = m->model == Impl::Model::byteLevelBpe ? byteLevelDecode(token) : metaPiece(token);
    }
  } catch (const json::exception& e) {
    throw Error("tokenizer.json " + path.string() + ": " + e.what());
  }

  const std::filesystem::path configPath = path.parent_path() / "tokenizer_config.json";
  if (std::filesystem::exists(configPath)) {
    const json config = readJson(configPath);
    m->bos = configToken(*m, config, "bos_token");
    m->eos = configToken(*m, config, "eos_token");
  }
  m->finish();
  return Tokenizer(std::move(m));
}

}  // namespace gizml::llm
