// GgufValue's conversions to C++ types.
#include "llm/formats/gguf_value.h"

#include <gizml/error.h>

#include <cstring>
#include <limits>

namespace gizml::llm {
namespace gguf_detail {

int scalarSize(uint32_t type) {
  switch (static_cast<GgufValueType>(type)) {
    case GgufValueType::U8: case GgufValueType::I8: case GgufValueType::Bool: return 1;
    case GgufValueType::U16: case GgufValueType::I16: return 2;
    case GgufValueType::U32: case GgufValueType::I32: case GgufValueType::F32: return 4;
    case GgufValueType::U64: case GgufValueType::I64: case GgufValueType::F64: return 8;
    case GgufValueType::String: case GgufValueType::Array: return 0;
  }
  return -1;
}

bool isIntegerType(GgufValueType type) {
  switch (type) {
    case GgufValueType::U8: case GgufValueType::I8: case GgufValueType::U16:
    case GgufValueType::I16: case GgufValueType::U32: case GgufValueType::I32:
    case GgufValueType::U64: case GgufValueType::I64: return true;
    default: return false;
  }
}

bool isFloatType(GgufValueType type) {
  return type == GgufValueType::F32 || type == GgufValueType::F64;
}

}  // namespace gguf_detail

namespace {

using namespace gguf_detail;

[[noreturn]] void wrongType(const GgufValue& v, const std::string& what, const char* wanted) {
  throw Error(what + " is " + v.typeText() + ", not " + wanted);
}

// The bits of a scalar of `type` as a signed integer; `what` names it for a u64 overflow.
int64_t intFromBits(GgufValueType type, uint64_t bits, const std::string& what) {
  switch (type) {
    case GgufValueType::I8: return static_cast<int8_t>(bits);
    case GgufValueType::I16: return static_cast<int16_t>(bits);
    case GgufValueType::I32: return static_cast<int32_t>(bits);
    case GgufValueType::I64: return static_cast<int64_t>(bits);
    case GgufValueType::U64:
      check(bits <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
            what + " = " + std::to_string(bits) + " does not fit a signed 64-bit integer");
      return static_cast<int64_t>(bits);
    default: return static_cast<int64_t>(bits);  // u8, u16, u32 are zero-extended
  }
}

double floatFromBits(GgufValueType type, uint64_t bits, const std::string& what) {
  if (type == GgufValueType::F32) {
    float f;
    const uint32_t b = static_cast<uint32_t>(bits);
    std::memcpy(&f, &b, 4);
    return f;
  }
  if (type == GgufValueType::F64) {
    double d;
    std::memcpy(&d, &bits, 8);
    return d;
  }
  return static_cast<double>(intFromBits(type, bits, what));
}

uint64_t elementBits(const GgufValue& v, uint64_t i) {
  const int size = scalarSize(static_cast<uint32_t>(v.elementType));
  uint64_t bits = 0;
  std::memcpy(&bits, v.raw.data() + i * size, size);
  return bits;
}

}  // namespace

const char* ggufValueTypeName(GgufValueType type) {
  switch (type) {
    case GgufValueType::U8: return "u8";
    case GgufValueType::I8: return "i8";
    case GgufValueType::U16: return "u16";
    case GgufValueType::I16: return "i16";
    case GgufValueType::U32: return "u32";
    case GgufValueType::I32: return "i32";
    case GgufValueType::F32: return "f32";
    case GgufValueType::Bool: return "bool";
    case GgufValueType::String: return "string";
    case GgufValueType::Array: return "array";
    case GgufValueType::U64: return "u64";
    case GgufValueType::I64: return "i64";
    case GgufValueType::F64: return "f64";
  }
  return "unknown";
}

std::string GgufValue::typeText() const {
  if (type != GgufValueType::Array) return ggufValueTypeName(type);
  return std::string("array of ") + ggufValueTypeName(elementType);
}

int64_t GgufValue::asInt(const std::string& what) const {
  if (!isIntegerType(type)) wrongType(*this, what, "an integer");
  return intFromBits(type, bits, what);
}

double GgufValue::asFloat(const std::string& what) const {
  if (!isIntegerType(type) && !isFloatType(type)) wrongType(*this, what, "a number");
  return floatFromBits(type, bits, what);
}

bool GgufValue::asBool(const std::string& what) const {
  if (type != GgufValueType::Bool) wrongType(*this, what, "a bool");
  return bits != 0;
}

const std::string& GgufValue::asString(const std::string& what) const {
  if (type != GgufValueType::String) wrongType(*this, what, "a string");
  return string;
}

std::vector<int64_t> GgufValue::asInts(const std::string& what) const {
  if (type != GgufValueType::Array || !isIntegerType(elementType)) {
    wrongType(*this, what, "an array of integers");
  }
  std::vector<int64_t> out(count);
  for (uint64_t i = 0; i < count; ++i) out[i] = intFromBits(elementType, elementBits(*this, i), what);
  return out;
}

std::vector<double> GgufValue::asFloats(const std::string& what) const {
  if (type != GgufValueType::Array || !(isIntegerType(elementType) || isFloatType(elementType))) {
    wrongType(*this, what, "an array of numbers");
  }
  std::vector<double> out(count);
  for (uint64_t i = 0; i < count; ++i) {
    out[i] = floatFromBits(elementType, elementBits(*this, i), what);
  }
  return out;
}

const std::vector<std::string>& GgufValue::asStrings(const std::string& what) const {
  if (type != GgufValueType::Array || elementType != GgufValueType::String) {
    wrongType(*this, what, "an array of strings");
  }
  return strings;
}

}  // namespace gizml::llm
