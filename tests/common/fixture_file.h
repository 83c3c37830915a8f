#pragma once
// The GZFX fixture file written by tests/reference/make_*_fixtures.py (format at the top of
// make_tensor_fixtures.py): named cases of integer attributes and arrays, read with bounds checks.
#include <gizml/dtype.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace fixture {

using gizml::DType;
using Shape = std::vector<int64_t>;

static_assert(std::endian::native == std::endian::little, "the fixtures are little-endian");

constexpr uint8_t kF64 = 8;  // fixture-only dtype code

struct Array {
  std::string name;
  uint8_t dtype = 0;
  Shape shape;
  std::vector<uint8_t> data;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

struct Case {
  std::string name, op;
  std::map<std::string, std::vector<int64_t>> attrs;
  std::vector<Array> arrays;

  const Array* find(const std::string& n) const {
    for (const Array& a : arrays)
      if (a.name == n) return &a;
    return nullptr;
  }
  const Array& array(const std::string& n) const {
    const Array* a = find(n);
    if (!a) throw std::runtime_error("case " + name + " has no array " + n);
    return *a;
  }
  bool has(const std::string& key) const { return attrs.count(key) != 0; }
  const std::vector<int64_t>& list(const std::string& key) const {
    auto it = attrs.find(key);
    if (it == attrs.end()) throw std::runtime_error("case " + name + " has no attribute " + key);
    return it->second;
  }
  int64_t attr(const std::string& key) const {
    const auto& v = list(key);
    if (v.size() != 1) throw std::runtime_error("case " + name + ": attribute " + key + " is not one value");
    return v[0];
  }
};

inline size_t fixtureDtypeSize(uint8_t code) {
  if (code == kF64) return 8;
  if (code > static_cast<uint8_t>(DType::Bool)) throw std::runtime_error("unknown dtype code " + std::to_string(code));
  return gizml::dtypeSize(static_cast<DType>(code));
}

// A bounds-checked little-endian reader.
class Reader {
 public:
  explicit Reader(const std::vector<uint8_t>& bytes) : bytes_(bytes) {}
  template <class T>
  T get() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string str() {
    const uint16_t n = get<uint16_t>();
    need(n);
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), n);
    pos_ += n;
    return s;
  }
  std::vector<uint8_t> bytes(uint64_t n) {
    need(n);
    std::vector<uint8_t> v(bytes_.begin() + static_cast<std::ptrdiff_t>(pos_),
                           bytes_.begin() + static_cast<std::ptrdiff_t>(pos_ + n));
    pos_ += n;
    return v;
  }
  bool atEnd() const { return pos_ == bytes_.size(); }
  size_t pos() const { return pos_; }

 private:
  void need(uint64_t n) const {
    if (n > bytes_.size() - pos_)
      throw std::runtime_error("fixture truncated at byte " + std::to_string(pos_) + " (need " +
                               std::to_string(n) + " more)");
  }
  const std::vector<uint8_t>& bytes_;
  size_t pos_ = 0;
};

inline std::vector<Case> parseFixtures(const std::vector<uint8_t>& bytes) {
  Reader r(bytes);
  const uint32_t magic = r.get<uint32_t>();
  if (std::memcmp(&magic, "GZFX", 4) != 0) throw std::runtime_error("not a GZFX fixture file");
  const uint32_t version = r.get<uint32_t>();
  if (version != 1) throw std::runtime_error("fixture version " + std::to_string(version) + ", expected 1");
  const uint32_t count = r.get<uint32_t>();
  if (count > 100000) throw std::runtime_error("implausible case count " + std::to_string(count));
  std::vector<Case> cases;
  cases.reserve(count);
  for (uint32_t c = 0; c < count; ++c) {
    Case k;
    k.name = r.str();
    k.op = r.str();
    const uint32_t attrCount = r.get<uint32_t>();
    if (attrCount > 64) throw std::runtime_error(k.name + ": implausible attribute count");
    for (uint32_t a = 0; a < attrCount; ++a) {
      std::string key = r.str();
      const uint32_t n = r.get<uint32_t>();
      if (n > 64) throw std::runtime_error(k.name + ": attribute " + key + " too long");
      std::vector<int64_t> values(n);
      for (auto& v : values) v = r.get<int64_t>();
      k.attrs[key] = std::move(values);
    }
    const uint32_t arrayCount = r.get<uint32_t>();
    if (arrayCount > 64) throw std::runtime_error(k.name + ": implausible array count");
    for (uint32_t a = 0; a < arrayCount; ++a) {
      Array arr;
      arr.name = r.str();
      arr.dtype = r.get<uint8_t>();
      const uint8_t ndim = r.get<uint8_t>();
      if (ndim > 16) throw std::runtime_error(k.name + "/" + arr.name + ": rank " + std::to_string(ndim));
      uint64_t numel = 1;
      for (uint8_t d = 0; d < ndim; ++d) {
        const int64_t dim = r.get<int64_t>();
        if (dim < 0 || dim > (int64_t{1} << 32)) throw std::runtime_error(k.name + "/" + arr.name + ": bad dimension");
        arr.shape.push_back(dim);
        numel *= static_cast<uint64_t>(dim);
        if (numel > (uint64_t{1} << 32)) throw std::runtime_error(k.name + "/" + arr.name + ": too many elements");
      }
      const uint64_t nbytes = r.get<uint64_t>();
      if (nbytes != numel * fixtureDtypeSize(arr.dtype))
        throw std::runtime_error(k.name + "/" + arr.name + ": " + std::to_string(nbytes) + " bytes for " +
                                 std::to_string(numel) + " elements");
      arr.data = r.bytes(nbytes);
      k.arrays.push_back(std::move(arr));
    }
    cases.push_back(std::move(k));
  }
  if (!r.atEnd()) throw std::runtime_error("trailing bytes after the last case at " + std::to_string(r.pos()));
  return cases;
}

/// The cases of a fixture file on disk.
inline std::vector<Case> loadFixtures(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open fixture file " + path);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parseFixtures(bytes);
}

}  // namespace fixture
