#pragma once
// How a language model keeps the keys and values of its sequences (the engine's kv setting).
#include <gizml/dtype.h>

#include <cstdint>
#include <optional>
#include <string>

namespace gizml::llm {

/// Keys and values each as F32, F16 or BF16 elements, or as codes of 8, 4 or 2 bits: every
/// head's vector of one token in integers q with a scale and an offset (F16), x ~ scale q +
/// offset, the pair that gives the vector back with the least squared error.
struct KvFormat {
  enum class Store : uint8_t { F32, F16, BF16, Bits8, Bits4, Bits2 };
  Store keys = Store::F32, values = Store::F32;

  KvFormat() = default;
  /// Both as elements of `dtype` (F32, F16 or BF16; others are an Error).
  KvFormat(DType dtype);  // NOLINT(google-explicit-constructor): a dtype names a format
  KvFormat(Store keys, Store values) : keys(keys), values(values) {}

  /// From text: "f32", "f16", "bf16", "16" (F16), "8", "4" or "2" for both, or keys and values
  /// apart as "K/V" ("4/2", "16/8"). Anything else is an Error naming the text.
  static KvFormat parse(const std::string& text);
  /// parse's forms, or "auto": nullopt, an engine's automatic choice (Engine: 8 bits, else 4,
  /// else keys in 4 and values in 2, the first in which its KV pool fits the memory there is).
  static std::optional<KvFormat> parseSetting(const std::string& text);
  /// The text parse reads back ("8", "4/2", "f32").
  std::string text() const;
  /// Bits of one stored key (or value) element, scale and offset not counted: 32, 16, 8, 4, 2.
  static int bits(Store s);
  bool operator==(const KvFormat&) const = default;
};

}  // namespace gizml::llm
