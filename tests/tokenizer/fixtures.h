#pragma once
// Reads the fixtures that tests/reference/make_tokenizer_fixtures.py writes (varint files).
#include <cstdint>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace tokenizer_fixtures {

class VarintReader {
 public:
  explicit VarintReader(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot open " + path);
    std::stringstream s;
    s << in.rdbuf();
    data_ = s.str();
  }
  uint64_t next() {
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      const auto b = static_cast<unsigned char>(data_.at(pos_++));
      v |= uint64_t{b & 0x7Fu} << shift;
      if (!(b & 0x80)) return v;
    }
  }
  std::string bytes(size_t n) {
    std::string s = data_.substr(pos_, n);
    pos_ += n;
    return s;
  }

 private:
  std::string data_;
  size_t pos_ = 0;
};

inline std::vector<std::string> readCorpus(const std::string& path) {
  VarintReader r(path);
  std::vector<std::string> docs(r.next());
  for (auto& d : docs) d = r.bytes(r.next());
  return docs;
}

struct Expected {
  std::vector<int32_t> ids;
  std::optional<std::string> decoded;  // what `tokenizers` decodes the ids to, when not the text
};

inline std::vector<Expected> readIds(const std::string& path) {
  VarintReader r(path);
  std::vector<Expected> out(r.next());
  for (auto& e : out) {
    e.ids.resize(r.next());
    for (auto& id : e.ids) id = static_cast<int32_t>(r.next());
    if (const uint64_t n = r.next()) e.decoded = r.bytes(n - 1);
  }
  return out;
}

}  // namespace tokenizer_fixtures
