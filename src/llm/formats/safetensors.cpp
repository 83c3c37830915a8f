// Parsing and checking a safetensors header, and loading its tensors (one by one, or all of them:
// loadSafetensors).
#include "llm/formats/safetensors.h"

#include <gizml/error.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <unordered_set>

namespace gizml::llm {
namespace {

using Json = nlohmann::json;

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the reference crate's limit
constexpr int kMaxJsonNesting = 16;  // real headers nest 3 deep; this bounds the parser's work

constexpr SafetensorsDType kAllDTypes[] = {
    SafetensorsDType::Bool, SafetensorsDType::U8,   SafetensorsDType::I8,
    SafetensorsDType::F8_E5M2, SafetensorsDType::F8_E4M3, SafetensorsDType::I16,
    SafetensorsDType::U16,  SafetensorsDType::F16,  SafetensorsDType::BF16,
    SafetensorsDType::I32,  SafetensorsDType::U32,  SafetensorsDType::F32,
    SafetensorsDType::I64,  SafetensorsDType::U64,  SafetensorsDType::F64,
};

// Deepest bracket nesting outside strings: rejecting deep input before nlohmann parses it.
int jsonNesting(std::string_view text) {
  int depth = 0, deepest = 0;
  bool inString = false, escaped = false;
  for (char c : text) {
    if (inString) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') inString = false;
    } else if (c == '"') {
      inString = true;
    } else if (c == '{' || c == '[') {
      deepest = std::max(deepest, ++depth);
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return deepest;
}

uint64_t unsignedField(const Json& v, const std::string& what) {
  check(v.is_number_unsigned(), what + " is not a non-negative integer");
  return v.get<uint64_t>();
}

SafetensorsTensorInfo parseTensor(const std::string& name, const Json& entry,
                                  const std::string& file) {
  const std::string what = file + ": tensor '" + name + "'";
  check(entry.is_object(), what + " is not an object");
  SafetensorsTensorInfo info;
  info.name = name;

  const auto dtype = entry.find("dtype");
  check(dtype != entry.end() && dtype->is_string(), what + " has no dtype string");
  const std::string dtypeName = dtype->get<std::string>();
  const auto* known = std::find_if(std::begin(kAllDTypes), std::end(kAllDTypes),
                                   [&](SafetensorsDType t) { return dtypeName == safetensorsDTypeName(t); });
  check(known != std::end(kAllDTypes), what + " has unsupported dtype " + dtypeName);
  info.dtype = *known;

  const auto shape = entry.find("shape");
  check(shape != entry.end() && shape->is_array(), what + " has no shape array");
  info.numel = 1;
  for (const Json& dim : *shape) {
    const uint64_t n = unsignedField(dim, what + ": a dimension");
    check(n <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) &&
              (info.numel == 0 || n <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max() / info.numel)),
          what + ": element count overflows");
    info.numel *= static_cast<int64_t>(n);
    info.shape.push_back(static_cast<int64_t>(n));
  }

  const auto offsets = entry.find("data_offsets");
  check(offsets != entry.end() && offsets->is_array() && offsets->size() == 2,
        what + " has no data_offsets pair");
  info.begin = unsignedField((*offsets)[0], what + ": data_offsets[0]");
  info.end = unsignedField((*offsets)[1], what + ": data_offsets[1]");
  check(info.begin <= info.end, what + ": data_offsets end before they begin");
  const uint64_t size = safetensorsDTypeSize(info.dtype);
  check(static_cast<uint64_t>(info.numel) <= std::numeric_limits<uint64_t>::max() / size &&
            info.end - info.begin == static_cast<uint64_t>(info.numel) * size,
        what + ": " + std::to_string(info.end - info.begin) + " bytes for shape " +
            tensor::shapeText(info.shape) + " of " + dtypeName);
  return info;
}

template <class Src, class Dst>
void convertEach(const uint8_t* src, Dst* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    Src v;
    std::memcpy(&v, src + i * sizeof(Src), sizeof(Src));
    dst[i] = static_cast<Dst>(v);
  }
}

// IEEE rounding of a double to float, spelled out for magnitudes beyond FLT_MAX (where a plain
// cast is undefined behaviour): below FLT_MAX + half an ulp they round to FLT_MAX, else to inf.
float doubleToFloat(double v) {
  constexpr double kMax = std::numeric_limits<float>::max();
  if (!(std::abs(v) > kMax)) return static_cast<float>(v);  // also NaN
  const double halfwayToInf = std::ldexp(1.0, 128) - std::ldexp(1.0, 103);
  const float magnitude = std::abs(v) >= halfwayToInf ? std::numeric_limits<float>::infinity()
                                                      : std::numeric_limits<float>::max();
  return std::copysign(magnitude, static_cast<float>(v > 0 ? 1 : -1));
}

// OCP FP8 E4M3 ("fn": no infinities; S.1111.111 is NaN), exponent bias 7.
float e4m3ToFloat(uint8_t b) {
  const float sign = (b & 0x80) ? -1.0f : 1.0f;
  const int exponent = (b >> 3) & 0x0F, mantissa = b & 0x07;
  if (exponent == 15 && mantissa == 7) return std::copysign(std::numeric_limits<float>::quiet_NaN(), sign);
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -9);
  return sign * std::ldexp(static_cast<float>(8 + mantissa), exponent - 10);
}

// E5M2 is the top byte of an IEEE half.
float e5m2ToFloat(uint8_t b) { return halfToFloat(static_cast<uint16_t>(b << 8)); }

}  // namespace

const char* safetensorsDTypeName(SafetensorsDType dtype) {
  switch (dtype) {
    case SafetensorsDType::Bool: return "BOOL";
    case SafetensorsDType::U8: return "U8";
    case SafetensorsDType::I8: return "I8";
    case SafetensorsDType::F8_E5M2: return "F8_E5M2";
    case SafetensorsDType::F8_E4M3: return "F8_E4M3";
    case SafetensorsDType::I16: return "I16";
    case SafetensorsDType::U16: return "U16";
    case SafetensorsDType::F16: return "F16";
    case SafetensorsDType::BF16: return "BF16";
    case SafetensorsDType::I32: return "I32";
    case SafetensorsDType::U32: return "U32";
    case SafetensorsDType::F32: return "F32";
    case SafetensorsDType::I64: return "I64";
    case SafetensorsDType::U64: return "U64";
    case SafetensorsDType::F64: return "F64";
  }
  return "unknown";
}

size_t safetensorsDTypeSize(SafetensorsDType dtype) {
  switch (dtype) {
    case SafetensorsDType::Bool: case SafetensorsDType::U8: case SafetensorsDType::I8:
    case SafetensorsDType::F8_E5M2: case SafetensorsDType::F8_E4M3: return 1;
    case SafetensorsDType::I16: case SafetensorsDType::U16: case SafetensorsDType::F16:
    case SafetensorsDType::BF16: return 2;
    case SafetensorsDType::I32: case SafetensorsDType::U32: case SafetensorsDType::F32: return 4;
    case SafetensorsDType::I64: case SafetensorsDType::U64: case SafetensorsDType::F64: return 8;
  }
  return 1;
}

DType loadedDType(SafetensorsDType dtype) {
  switch (dtype) {
    case SafetensorsDType::Bool: return DType::Bool;
    case SafetensorsDType::U8: return DType::U8;
    case SafetensorsDType::I8: return DType::I8;
    case SafetensorsDType::F16: return DType::F16;
    case SafetensorsDType::BF16: return DType::BF16;
    case SafetensorsDType::I16: case SafetensorsDType::U16: case SafetensorsDType::I32:
      return DType::I32;
    case SafetensorsDType::U32: case SafetensorsDType::I64: case SafetensorsDType::U64:
      return DType::I64;
    case SafetensorsDType::F8_E5M2: case SafetensorsDType::F8_E4M3: case SafetensorsDType::F32:
    case SafetensorsDType::F64: return DType::F32;
  }
  return DType::F32;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : source_(ByteSource::map(path)) {
  parse();
}

SafetensorsFile::SafetensorsFile(std::vector<uint8_t> bytes, const std::string& name)
    : source_(ByteSource::own(std::move(bytes), name)) {
  parse();
}

void SafetensorsFile::parse() {
  const std::string& file = path();
  check(source_.size() >= 8, file + ": too short for a safetensors header length");
  uint64_t headerBytes;
  std::memcpy(&headerBytes, source_.data(), 8);
  check(headerBytes <= kMaxHeaderBytes && headerBytes <= source_.size() - 8,
        file + ": header length " + std::to_string(headerBytes) + " exceeds the file or the " +
            std::to_string(kMaxHeaderBytes) + "-byte limit");
  dataOffset_ = 8 + headerBytes;
  const std::string_view text(reinterpret_cast<const char*>(source_.data() + 8), headerBytes);
  check(!text.empty() && text[0] == '{', file + ": header is not a JSON object");
  check(jsonNesting(text) <= kMaxJsonNesting, file + ": header JSON nests too deeply");

  // nlohmann keeps the last of duplicate keys; the callback sees them all.
  std::unordered_set<std::string> names;
  std::string duplicate;
  const Json::parser_callback_t noteKeys = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::key && depth == 1 && !names.insert(parsed.get<std::string>()).second) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  Json header;
  try {
    header = Json::parse(text, noteKeys);
  } catch (const Json::exception& e) {
    throw Error(file + ": header is not valid JSON: " + e.what());
  }
  check(header.is_object(), file + ": header is not a JSON object");
  check(duplicate.empty(), file + ": header names '" + duplicate + "' twice");

  for (const auto& [key, entry] : header.items()) {
    if (key == "__metadata__") {
      check(entry.is_object(), file + ": __metadata__ is not an object");
      for (const auto& [mkey, mvalue] : entry.items()) {
        check(mvalue.is_string(), file + ": __metadata__ value of " + mkey + " is not a string");
        metadata_[mkey] = mvalue.get<std::string>();
      }
      continue;
    }
    tensors_.push_back(parseTensor(key, entry, file));
  }

  // The data must be exactly the tensors, back to back (zero-size ones anywhere).
  std::stable_sort(tensors_.begin(), tensors_.end(), [](const auto& a, const auto& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expected = 0;
  for (const SafetensorsTensorInfo& t : tensors_) {
    check(t.begin == expected, file + ": tensor '" + t.name + "' starts at data byte " +
                                   std::to_string(t.begin) + ", not " + std::to_string(expected) +
                                   " (gap or overlap)");
    expected = t.end;
  }
  const uint64_t dataBytes = source_.size() - dataOffset_;
  check(expected == dataBytes, file + ": tensors cover " + std::to_string(expected) +
                                   " data bytes but the file holds " + std::to_string(dataBytes));
  for (size_t i = 0; i < tensors_.size(); ++i) index_.emplace(tensors_[i].name, i);
}

const SafetensorsTensorInfo* SafetensorsFile::findTensor(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const SafetensorsTensorInfo& SafetensorsFile::tensor(const std::string& name) const {
  const SafetensorsTensorInfo* t = findTensor(name);
  check(t != nullptr, path() + ": no tensor named '" + name + "'");
  return *t;
}

std::span<const uint8_t> SafetensorsFile::tensorBytes(const SafetensorsTensorInfo& info) const {
  // parse() checked that the offsets lie inside the file.
  if (info.end == info.begin) return {};
  return {source_.data() + dataOffset_ + info.begin, static_cast<size_t>(info.end - info.begin)};
}

tensor::Tensor SafetensorsFile::load(const SafetensorsTensorInfo& info) const {
  tensor::Tensor out = tensor::empty(info.shape, loadedDType(info.dtype));
  const uint8_t* src = tensorBytes(info).data();
  const int64_t n = info.numel;
  switch (info.dtype) {
    case SafetensorsDType::Bool: {  // any non-zero byte is true; gizml keeps 0 and 1
      uint8_t* dst = out.data<uint8_t>();
      for (int64_t i = 0; i < n; ++i) dst[i] = src[i] != 0;
      break;
    }
    case SafetensorsDType::F8_E4M3:
      for (int64_t i = 0; i < n; ++i) out.data<float>()[i] = e4m3ToFloat(src[i]);
      break;
    case SafetensorsDType::F8_E5M2:
      for (int64_t i = 0; i < n; ++i) out.data<float>()[i] = e5m2ToFloat(src[i]);
      break;
    case SafetensorsDType::I16: convertEach<int16_t>(src, out.data<int32_t>(), n); break;
    case SafetensorsDType::U16: convertEach<uint16_t>(src, out.data<int32_t>(), n); break;
    case SafetensorsDType::U32: convertEach<uint32_t>(src, out.data<int64_t>(), n); break;
    case SafetensorsDType::F64:
      for (int64_t i = 0; i < n; ++i) {
        double v;
        std::memcpy(&v, src + 8 * i, 8);
        out.data<float>()[i] = doubleToFloat(v);
      }
      break;
    case SafetensorsDType::U64:
      for (int64_t i = 0; i < n; ++i) {
        uint64_t v;
        std::memcpy(&v, src + 8 * i, 8);
        check(v <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
              path() + ": tensor '" + info.name + "' holds a U64 beyond int64");
        out.data<int64_t>()[i] = static_cast<int64_t>(v);
      }
      break;
    default:  // stored exactly as gizml stores it
      if (n > 0) std::memcpy(out.rawData(), src, info.end - info.begin);
  }
  return out;
}

std::map<std::string, tensor::Tensor> loadSafetensors(const std::string& path) {
  const SafetensorsFile file(path);
  std::map<std::string, tensor::Tensor> out;
  for (const SafetensorsTensorInfo& info : file.tensors()) out.emplace(info.name, file.load(info));
  return out;
}

}  // namespace gizml::llm
