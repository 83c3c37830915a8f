// giz convert SOURCE DEST [--bits N] [--head-bits N] [--group N] [--lora DIR]
#include <gizml/llm.h>

#include <algorithm>
#include <iostream>
#include <string>

namespace {

int convertUsage() {
  std::cerr << "usage: giz convert SOURCE DEST [--bits 4] [--head-bits 6] [--group 32] [--lora DIR]\n"
               "  SOURCE: a Hugging Face folder (config.json + safetensors) or a .gguf file\n"
               "  bits: 2..8 (grouped), or 16 (F16); the head gets at least the layers' bits\n";
  return 2;
}

int parseInt(const std::string& flag, const std::string& text) {
  size_t used = 0;
  int value = 0;
  try {
    value = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty()) throw gizml::Error(flag + ": '" + text + "' is not a number");
  return value;
}

}  // namespace

int convertCommand(int argc, char** argv) {
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
    else if (arg.rfind("--", 0) == 0) return convertUsage();
    else if (source.empty()) source = arg;
    else if (dest.empty()) dest = arg;
    else return convertUsage();
  }
  if (source.empty() || dest.empty()) return convertUsage();
  // The output layer is the most sensitive: unless told, never narrower than the layers.
  if (!headGiven) bits.head = std::max(bits.head, bits.layers);
  const gizml::llm::ConvertReport report = gizml::llm::convert(source, dest, bits, lora);
  std::cout << report.text();
  return 0;
}
