// giz convert SOURCE DEST [--bits N] [--head-bits N] [--group N] [--lora DIR]
#include <gizml/llm.h>

#include <algorithm>
#include <iostream>
#include <string>

#include "command_line.h"

namespace {

constexpr const char* kUsage =
    "usage: giz convert SOURCE DEST [--bits 4] [--head-bits 6] [--group 32] [--lora DIR]\n"
    "  SOURCE: a Hugging Face folder (config.json + safetensors) or a .gguf file\n"
    "  bits: 2..8 (grouped), or 16 (F16); the head gets at least the layers' bits\n";

int parseInt(const std::string& flag, const std::string& text) {
  const int64_t v = parseCount(flag, text);
  if (v < INT32_MIN || v > INT32_MAX) throw gizml::Error(flag + ": " + text + " is out of range");
  return static_cast<int>(v);
}

}  // namespace

int convertCommand(int argc, char** argv) {
  if (asksHelp(argc, argv, 2)) return usageReply(kUsage, true);
  std::string source, dest, lora;
  gizml::llm::Bits bits;
  bool headGiven = false;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool hasValue = i + 1 < argc;
    if (arg == "--bits" && hasValue) bits.layers = parseInt(arg, argv[++i]);
    else if (arg == "--head-bits" && hasValue) {
      bits.head = parseInt(arg, argv[++i]);
      headGiven = true;
    }
    else if (arg == "--group" && hasValue) bits.group = parseInt(arg, argv[++i]);
    else if (arg == "--lora" && hasValue) lora = argv[++i];
    else if (arg.rfind("--", 0) == 0) return usageReply(kUsage, false);
    else if (source.empty()) source = arg;
    else if (dest.empty()) dest = arg;
    else return usageReply(kUsage, false);
  }
  if (source.empty() || dest.empty()) return usageReply(kUsage, false);
  // The output layer is the most sensitive: unless told, never narrower than the layers.
  if (!headGiven) bits.head = std::max(bits.head, bits.layers);
  const gizml::llm::ConvertReport report = gizml::llm::convert(source, dest, bits, lora);
  std::cout << report.text();
  return 0;
}
