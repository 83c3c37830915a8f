#pragma once
// gizml::llm: language models. This part: converting a Hugging Face folder or a GGUF file into
// our quantized format (docs/format.md), once, before loading.
#include <gizml/error.h>

#include <cstdint>
#include <string>
#include <vector>

namespace gizml::llm {

/// Widths of the stored weights: `layers` for every linear layer, `head` for the output layer
/// (and the embedding when it is tied to it); group: values per scale along the input dimension.
struct Bits {
  int layers = 4;
  int head = 6;
  int64_t group = 32;
};

struct TensorReport {
  std::string name;
  std::string format;      // "f32", "q4", ...
  double bitsPerWeight;    // stored bits over values, scales included
  double relativeRmsError; // ||stored - source|| / ||source||
};

struct ConvertReport {
  std::vector<TensorReport> tensors;
  double bitsPerWeight = 0;  // of the whole model
  /// A table, one line per tensor, and the totals.
  std::string text() const;
};

/// Converts source (a Hugging Face folder or a .gguf file) into the folder destination:
/// manifest.json, weights.bin, the tokenizer files and report.json. loraFolder, when not empty,
/// is a PEFT LoRA adapter merged into the weights before they are quantized. Shows a progress
/// bar on stderr when it is a terminal. Throws gizml::Error naming the file and field at fault.
ConvertReport convert(const std::string& source, const std::string& destination, const Bits& bits = {},
                      const std::string& loraFolder = "");

}  // namespace gizml::llm
