// Parsing and checking a GGUF file, and access to its tensors.
#include "llm/formats/gguf.h"

#include <gizml/error.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "llm/formats/byte_reader.h"
#include "llm/formats/gguf_value.h"
#include "llm/quant/ggml_dequant.h"

namespace gizml::llm {
namespace {

using namespace gguf_detail;

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint32_t kMaxDims = 4;         // GGML_MAX_DIMS
constexpr int kMaxNesting = 8;           // arrays of arrays: deeper ones are not real files
// Fewest bytes one entry can take, to reject absurd counts before allocating for them.
constexpr uint64_t kMinKeyValueBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;
constexpr uint64_t kMinStringBytes = 8;
constexpr uint64_t kMinArrayBytes = 4 + 8;

std::string readString(ByteReader& r, const char* what) {
  const uint64_t length = r.read<uint64_t>(what);
  const uint8_t* p = r.bytes(length, what);
  return std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(length));
}

void checkCount(ByteReader& r, uint64_t count, uint64_t minBytes, const std::string& what) {
  if (count > r.remaining() / minBytes) {
    r.fail(what + " claims " + std::to_string(count) + " entries, more than the " +
           std::to_string(r.remaining()) + " bytes left can hold");
  }
}

GgufValue readValue(ByteReader& r, uint32_t type, int depth, const std::string& key);

void readArray(ByteReader& r, GgufValue& v, int depth, const std::string& key) {
  const uint32_t elementType = r.read<uint32_t>("array element type");
  const int size = scalarSize(elementType);
  if (size < 0) r.fail(key + ": unknown array element type " + std::to_string(elementType));
  v.elementType = static_cast<GgufValueType>(elementType);
  v.count = r.read<uint64_t>("array length");
  if (size > 0) {
    checkCount(r, v.count, static_cast<uint64_t>(size), key);
    const uint8_t* p = r.bytes(v.count * size, "array elements");
    v.raw.assign(p, p + v.count * size);
    if (v.elementType == GgufValueType::Bool &&
        std::any_of(v.raw.begin(), v.raw.end(), [](uint8_t b) { return b > 1; })) {
      r.fail(key + ": bool array element is neither 0 nor 1");
    }
  } else if (v.elementType == GgufValueType::String) {
    checkCount(r, v.count, kMinStringBytes, key);
    v.strings.reserve(v.count);
    for (uint64_t i = 0; i < v.count; ++i) v.strings.push_back(readString(r, "array string"));
  } else {
    if (depth >= kMaxNesting) r.fail(key + ": arrays nested deeper than " + std::to_string(kMaxNesting));
    checkCount(r, v.count, kMinArrayBytes, key);
    v.arrays.reserve(v.count);
    for (uint64_t i = 0; i < v.count; ++i) {
      v.arrays.push_back(readValue(r, static_cast<uint32_t>(GgufValueType::Array), depth + 1, key));
    }
  }
}

GgufValue readValue(ByteReader& r, uint32_t type, int depth, const std::string& key) {
  const int size = scalarSize(type);
  if (size < 0) r.fail(key + ": unknown value type " + std::to_string(type));
  GgufValue v;
  v.type = static_cast<GgufValueType>(type);
  if (size > 0) {
    std::memcpy(&v.bits, r.bytes(size, "metadata value"), size);
    if (v.type == GgufValueType::Bool && v.bits > 1) r.fail(key + ": bool is neither 0 nor 1");
  } else if (v.type == GgufValueType::String) {
    v.string = readString(r, "metadata string");
  } else {
    readArray(r, v, depth, key);
  }
  return v;
}

// out = a * b for non-negative a, b, unless the product exceeds int64.
bool multiplyFits(int64_t a, int64_t b, int64_t& out) {
  if (a != 0 && b > std::numeric_limits<int64_t>::max() / a) return false;
  out = a * b;
  return true;
}

GgufTensorInfo readTensorInfo(ByteReader& r) {
  GgufTensorInfo info;
  info.name = readString(r, "tensor name");
  const std::string what = "tensor '" + info.name + "'";
  const uint32_t dims = r.read<uint32_t>("tensor dimension count");
  if (dims > kMaxDims) r.fail(what + " has " + std::to_string(dims) + " dimensions, at most 4 allowed");
  info.numel = 1;
  for (uint32_t i = 0; i < dims; ++i) {
    const uint64_t n = r.read<uint64_t>("tensor dimension");
    if (n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        !multiplyFits(info.numel, static_cast<int64_t>(n), info.numel)) {
      r.fail(what + ": element count overflows");
    }
    info.ne.push_back(static_cast<int64_t>(n));
  }
  const uint32_t type = r.read<uint32_t>("tensor type");
  const GgmlTypeTraits* traits = ggmlTypeTraits(type);
  if (!traits) r.fail(what + " has unknown type " + std::to_string(type));
  info.type = static_cast<GgmlType>(type);
  const int64_t rowLength = info.ne.empty() ? 1 : info.ne[0];
  if (rowLength % traits->blockSize != 0) {
    r.fail(what + ": row length " + std::to_string(rowLength) + " is not a multiple of " +
           traits->name + "'s block size " + std::to_string(traits->blockSize));
  }
  int64_t bytes = 0;
  if (!multiplyFits(info.numel / traits->blockSize, traits->typeSize, bytes)) {
    r.fail(what + ": byte size overflows");
  }
  info.bytes = static_cast<uint64_t>(bytes);
  info.offset = r.read<uint64_t>("tensor offset");
  return info;
}

}  // namespace

tensor::Shape GgufTensorInfo::shape() const { return tensor::Shape(ne.rbegin(), ne.rend()); }

GgufFile::GgufFile(const std::string& path) : source_(ByteSource::map(path)) { parse(); }

GgufFile::GgufFile(std::vector<uint8_t> bytes, const std::string& name)
    : source_(ByteSource::own(std::move(bytes), name)) {
  parse();
}

void GgufFile::parse() {
  ByteReader r(source_.data(), source_.size(), path());
  const uint32_t magic = r.read<uint32_t>("magic");
  if (magic != kMagic) r.fail("not a GGUF file (no GGUF magic)");
  version_ = r.read<uint32_t>("version");
  if (version_ == 0x02000000 || version_ == 0x03000000) r.fail("big-endian GGUF is not supported");
  if (version_ != 2 && version_ != 3) {
    r.fail("GGUF version " + std::to_string(version_) + " is not supported (2 and 3 are)");
  }
  const uint64_t tensorCount = r.read<uint64_t>("tensor count");
  const uint64_t keyCount = r.read<uint64_t>("metadata count");

  checkCount(r, keyCount, kMinKeyValueBytes, "metadata");
  metadata_.reserve(keyCount);
  for (uint64_t i = 0; i < keyCount; ++i) {
    std::string key = readString(r, "metadata key");
    if (metadataIndex_.count(key)) r.fail("duplicate metadata key " + key);
    const uint32_t type = r.read<uint32_t>("metadata value type");
    GgufValue value = readValue(r, type, 0, key);
    metadataIndex_.emplace(key, metadata_.size());
    metadata_.push_back({std::move(key), std::move(value)});
  }

  if (const GgufValue* v = find("general.alignment")) {
    const int64_t a = v->asInt(where("general.alignment"));
    if (a <= 0 || (a & (a - 1)) != 0 || a > (1 << 30)) {
      r.fail("general.alignment " + std::to_string(a) + " is not a power of two");
    }
    alignment_ = static_cast<uint64_t>(a);
  }

  checkCount(r, tensorCount, kMinTensorInfoBytes, "tensor infos");
  tensors_.reserve(tensorCount);
  for (uint64_t i = 0; i < tensorCount; ++i) {
    GgufTensorInfo info = readTensorInfo(r);
    if (tensorIndex_.count(info.name)) r.fail("duplicate tensor name '" + info.name + "'");
    tensorIndex_.emplace(info.name, tensors_.size());
    tensors_.push_back(std::move(info));
  }

  // The data section starts at the next multiple of the alignment.
  dataOffset_ = (r.position() + alignment_ - 1) / alignment_ * alignment_;
  const uint64_t dataSize = dataOffset_ <= source_.size() ? source_.size() - dataOffset_ : 0;
  std::vector<const GgufTensorInfo*> byOffset;
  for (const GgufTensorInfo& t : tensors_) {
    const std::string what = path() + ": tensor '" + t.name + "'";
    check(t.offset % alignment_ == 0, what + ": offset " + std::to_string(t.offset) +
                                          " is not a multiple of the alignment " +
                                          std::to_string(alignment_));
    check(t.offset <= dataSize && t.bytes <= dataSize - t.offset,
          what + ": its " + std::to_string(t.bytes) + " bytes at offset " +
              std::to_string(t.offset) + " run past the end of the data section (" +
              std::to_string(dataSize) + " bytes)");
    if (t.bytes > 0) byOffset.push_back(&t);
  }
  std::sort(byOffset.begin(), byOffset.end(),
            [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < byOffset.size(); ++i) {
    check(byOffset[i - 1]->offset + byOffset[i - 1]->bytes <= byOffset[i]->offset,
          path() + ": tensors '" + byOffset[i - 1]->name + "' and '" + byOffset[i]->name +
              "' overlap");
  }
}

const GgufValue* GgufFile::find(const std::string& key) const {
  const auto it = metadataIndex_.find(key);
  return it == metadataIndex_.end() ? nullptr : &metadata_[it->second].value;
}

const GgufValue& GgufFile::value(const std::string& key) const {
  const GgufValue* v = find(key);
  check(v != nullptr, path() + ": no metadata key " + key);
  return *v;
}

std::string GgufFile::getString(const std::string& key) const {
  return value(key).asString(where(key));
}
int64_t GgufFile::getInt(const std::string& key) const { return value(key).asInt(where(key)); }
double GgufFile::getFloat(const std::string& key) const {
  return value(key).asFloat(where(key));
}
bool GgufFile::getBool(const std::string& key) const { return value(key).asBool(where(key)); }
std::vector<std::string> GgufFile::getStrings(const std::string& key) const {
  return value(key).asStrings(where(key));
}
std::vector<int64_t> GgufFile::getInts(const std::string& key) const {
  return value(key).asInts(where(key));
}
std::vector<double> GgufFile::getFloats(const std::string& key) const {
  return value(key).asFloats(where(key));
}

std::string GgufFile::getString(const std::string& key, const std::string& fallback) const {
  return has(key) ? getString(key) : fallback;
}
int64_t GgufFile::getInt(const std::string& key, int64_t fallback) const {
  return has(key) ? getInt(key) : fallback;
}
double GgufFile::getFloat(const std::string& key, double fallback) const {
  return has(key) ? getFloat(key) : fallback;
}
bool GgufFile::getBool(const std::string& key, bool fallback) const {
  return has(key) ? getBool(key) : fallback;
}

const GgufTensorInfo* GgufFile::findTensor(const std::string& name) const {
  const auto it = tensorIndex_.find(name);
  return it == tensorIndex_.end() ? nullptr : &tensors_[it->second];
}

const GgufTensorInfo& GgufFile::tensor(const std::string& name) const {
  const GgufTensorInfo* t = findTensor(name);
  check(t != nullptr, path() + ": no tensor named '" + name + "'");
  return *t;
}

std::span<const uint8_t> GgufFile::tensorBytes(const GgufTensorInfo& info) const {
  // parse() checked that the bytes lie inside the file.
  if (info.bytes == 0) return {};
  return {source_.data() + dataOffset_ + info.offset, static_cast<size_t>(info.bytes)};
}

tensor::Tensor GgufFile::dequantize(const GgufTensorInfo& info) const {
  check(canDequantize(info.type), path() + ": tensor '" + info.name + "' has type " +
                                      ggmlTypeName(static_cast<uint32_t>(info.type)) +
                                      ", which cannot be dequantized yet");
  tensor::Tensor out = tensor::empty(info.shape(), DType::F32);
  llm::dequantize(info.type, tensorBytes(info).data(), out.data<float>(), info.numel);
  return out;
}

}  // namespace gizml::llm
