// giz convert SOURCE DEST [--bits N] [--head-bits N] [--group N] [--lora DIR] | [--z-image-text |
// --klein-text | --h3-text]
#include <gizml/diffusion.h>
#include <gizml/llm.h>

#include <algorithm>
#include <iostream>
#include <string>

#include "command_line.h"

namespace {

constexpr const char* kUsage =
    "usage: giz convert SOURCE DEST [--bits 4] [--head-bits 6] [--group 32] [--lora DIR]\n"
    "       giz convert SOURCE DEST --z-image-text | --klein-text | --h3-text\n"
    "  SOURCE: a Hugging Face folder (config.json + safetensors) or a .gguf file\n"
    "  bits: 2..8 (grouped), or 16 (F16); the head gets at least the layers' bits\n"
    "  --z-image-text: Z-Image's text encoder from Qwen3-4B (its first 35 layers at 16 bits, no head),\n"
    "  for giz paint's MODEL/text_encoders/; --klein-text: klein's, from Qwen3-4B or Qwen3-VL-4B (the first 27\n"
    "  layers, for hidden states 9, 18 and 27); --h3-text: MiniMax H3's, from its Qwen3-VL (the first 50 layers,\n"
    "  for hidden state 50), for giz video's MODEL/text_encoders/\n";

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
  bool headGiven = false, bitsGiven = false;
  std::string textEncoder;  // --z-image-text, --klein-text or --h3-text
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool hasValue = i + 1 < argc;
    if (arg == "--z-image-text" || arg == "--klein-text" || arg == "--h3-text") {
      if (!textEncoder.empty() && textEncoder != arg) throw gizml::Error(textEncoder + " and " + arg + ": one text encoder");
      textEncoder = arg;
    }
    else if (arg == "--bits" && hasValue) bits.layers = parseInt(arg, argv[++i]), bitsGiven = true;
    else if (arg == "--head-bits" && hasValue) {
      bits.head = parseInt(arg, argv[++i]);
      headGiven = true;
    }
    else if (arg == "--group" && hasValue) bits.group = parseInt(arg, argv[++i]), bitsGiven = true;
    else if (arg == "--lora" && hasValue) lora = argv[++i], bitsGiven = true;
    else if (arg.rfind("--", 0) == 0) return usageReply(kUsage, false);
    else if (source.empty()) source = arg;
    else if (dest.empty()) dest = arg;
    else return usageReply(kUsage, false);
  }
  if (source.empty() || dest.empty()) return usageReply(kUsage, false);
  if (!textEncoder.empty()) {
    // Their widths are fixed (convertZImageText says why): no bits, group or LoRA to choose.
    if (bitsGiven || headGiven) throw gizml::Error(textEncoder + " takes no --bits, --head-bits, --group or --lora");
    const gizml::llm::ConvertReport report =
        textEncoder == "--z-image-text" ? gizml::diffusion::convertZImageText(source, dest)
        : textEncoder == "--klein-text" ? gizml::diffusion::convertTextEncoder(source, dest)
                                        : gizml::diffusion::convertTextEncoder(source, dest, {gizml::diffusion::kH3TextLayer});
    std::cout << report.text();
    return 0;
  }
  // The output layer is the most sensitive: unless told, never narrower than the layers.
  if (!headGiven) bits.head = std::max(bits.head, bits.layers);
  const gizml::llm::ConvertReport report = gizml::llm::convert(source, dest, bits, lora);
  std::cout << report.text();
  return 0;
}
