// convert: source weights (LoRA merged) -> our format, one tensor at a time so that memory holds
// at most one tensor in F32 and its quantized bytes; a multimodal model's vision tower is copied
// as stored into a folder of its own.
#include <gizml/llm.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

#include "core/progress.h"
#include "cpu/convert.h"
#include "llm/convert_source.h"
#include "llm/quant/converted_model.h"
#include "llm/quant/lora.h"

namespace gizml::llm {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }
// Linear layers (and the embedding) take the chosen width; norms, biases, convolutions, MoE
// routers and gates stay F32: they are small and their errors reach every token.
bool isLayerWeight(const std::string& name, const tensor::Shape& shape) {
  if (shape.size() < 2 || !name.ends_with(".weight")) return false;
  return !contains(name, "norm") && !contains(name, "conv1d") && !name.ends_with(".mlp.gate.weight") &&
         !contains(name, "shared_expert_gate");
}

// What a conversion of the first `layers` layers keeps: the embedding and those layers; not the
// later layers, the final norm, the output layer or the MTP layers, which read the last layer.
bool keptInFirstLayers(const std::string& name, int64_t layers) {
  const std::string prefix = "model.layers.";
  if (name.rfind(prefix, 0) == 0) return std::stoll(name.substr(prefix.size())) < layers;
  return name != "model.norm.weight" && name != "lm_head.weight" && name.rfind("mtp.", 0) != 0;
}

constexpr int kHalfBits = 16;
// The vision tower's folder in the destination: a Hugging Face folder for vision::Tower::load.
constexpr const char* kVisionFolder = "vision";

void checkBits(int bits, int64_t group, const char* what) {
  check(bits == kHalfBits || (bits >= 2 && bits <= 8),
        std::string(what) + ": bits must be 2..8 or 16, not " + std::to_string(bits));
  if (bits != kHalfBits) checkGroupFormat({bits, group}, what);
}

// F16 keeps 3 more mantissa bits than BF16, so it is the 16-bit format unless a value is beyond
// its range (65504), where BF16, with F32's range, takes the whole tensor.
DType halfTypeFor(const float* values, int64_t n) {
  constexpr float kF16Max = 65504.0f;
  for (int64_t i = 0; i < n; ++i)
    if (!(std::abs(values[i]) <= kF16Max)) return DType::BF16;
  return DType::F16;
}

double relativeRmsError(const float* ref, const float* got, int64_t n) {
  double err = 0, norm = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(got[i]) - ref[i];
    err += d * d;
    norm += static_cast<double>(ref[i]) * ref[i];
  }
  return norm > 0 ? std::sqrt(err / norm) : std::sqrt(err);
}

void writeJson(const fs::path& path, const Json& json) {
  std::ofstream out(path, std::ios::binary);
  out << json.dump(1) << "\n";
  check(static_cast<bool>(out), "cannot write " + path.string());
}

}  // namespace

std::string ConvertReport::text() const {
  std::string out;
  char line[256];
  for (const TensorReport& t : tensors) {
    std::snprintf(line, sizeof line, "%-60s %-4s %6.3f bits/weight  rel. RMS error %.5f\n", t.name.c_str(),
                  t.format.c_str(), t.bitsPerWeight, t.relativeRmsError);
    out += line;
  }
  std::snprintf(line, sizeof line, "%zu tensors, %.3f bits/weight\n", tensors.size(), bitsPerWeight);
  return out + line;
}

ConvertReport convert(const std::string& source, const std::string& destination, const Bits& bits,
                      const std::string& loraFolder, int64_t layers) {
  checkBits(bits.layers, bits.group, "convert: layer bits");
  checkBits(bits.head, bits.group, "convert: head bits");
  const std::unique_ptr<WeightSource> src = openWeightSource(source);
  std::optional<LoraAdapter> lora;
  if (!loraFolder.empty()) lora.emplace(loraFolder);
  const ModelConfig& config = src->config();
  check(layers >= 0 && layers <= config.numLayers, src->description() + ": convert: layers " + std::to_string(layers) +
                                                       " is not between 1 and the model's " +
                                                       std::to_string(config.numLayers) + " (0: all)");
  const bool firstLayers = layers > 0 && layers < config.numLayers;
  std::vector<std::string> names = src->names();
  const std::set<std::string> known(names.begin(), names.end());
  if (firstLayers) std::erase_if(names, [&](const std::string& name) { return !keptInFirstLayers(name, layers); });
  if (lora)
    for (const std::string& target : lora->targets())
      check(known.count(target) != 0, loraFolder + ": the adapter changes " + target + ", which " +
                                          src->description() + " does not hold");
  // A tied embedding is the output layer too, so it takes the output layer's width (unless the
  // output layer is not kept).
  const bool tiedEmbedding = !firstLayers && config.tieWordEmbeddings && known.count("lm_head.weight") == 0;

  fs::create_directories(destination);
  const fs::path dataPath = fs::path(destination) / kDataName;
  std::ofstream data(dataPath, std::ios::binary | std::ios::trunc);
  check(static_cast<bool>(data), "cannot write " + dataPath.string());

  ConvertReport report;
  Json table = Json::array();
  uint64_t offset = 0, totalBits = 0, totalValues = 0;
  core::ProgressBar progress("convert", static_cast<int64_t>(names.size()));
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string& name = names[i];
    progress.update(static_cast<int64_t>(i), name);
    tensor::Tensor w = src->load(name);
    if (lora && lora->changes(name)) w = lora->merge(name, w);

    StoredTensor entry;
    entry.name = name;
    entry.shape = w.shape();
    entry.offset = offset;
    std::vector<uint8_t> bytes;
    double error = 0;
    const float* values = w.data<float>();
    const bool head = name == "lm_head.weight" || (tiedEmbedding && name == "model.embed_tokens.weight");
    const int width = head ? bits.head : bits.layers;
    const bool layerWeight = isLayerWeight(name, w.shape());
    if (layerWeight && width == kHalfBits) {
      entry.dtype = halfTypeFor(values, w.numel());
      bytes.resize(static_cast<size_t>(w.numel()) * 2);
      cpu::storeF32(entry.dtype, values, w.numel(), bytes.data());
      std::vector<float> back(static_cast<size_t>(w.numel()));
      cpu::loadF32(entry.dtype, bytes.data(), 1, w.numel(), back.data());
      error = relativeRmsError(values, back.data(), w.numel());
    } else if (layerWeight && w.shape().back() % bits.group == 0) {
      entry.quantized = true;
      entry.format = {width, bits.group};
      const int64_t cols = w.shape().back(), rows = w.numel() / cols;
      bytes.resize(static_cast<size_t>(rows * groupRowBytes(entry.format, cols)));
      entry.scaleBase = quantizeGroups(entry.format, values, rows, cols, bytes.data());
      std::vector<float> back(static_cast<size_t>(w.numel()));
      dequantizeGroups(entry.format, entry.scaleBase, bytes.data(), rows, cols, back.data());
      error = relativeRmsError(values, back.data(), w.numel());
    } else {
      const auto* raw = reinterpret_cast<const uint8_t*>(values);
      bytes.assign(raw, raw + w.numel() * 4);
    }
    entry.bytes = bytes.size();
    data.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    const uint64_t padded = (entry.bytes + kBlobAlignment - 1) / kBlobAlignment * kBlobAlignment;
    const std::string zeros(padded - entry.bytes, '\0');
    data.write(zeros.data(), static_cast<std::streamsize>(zeros.size()));
    offset += padded;

    const double bpw = w.numel() > 0 ? 8.0 * static_cast<double>(entry.bytes) / static_cast<double>(w.numel()) : 0;
    report.tensors.push_back({name, entry.formatName(), bpw, error});
    totalBits += 8 * entry.bytes;
    totalValues += static_cast<uint64_t>(w.numel());
    table.push_back(storedTensorToJson(entry));
  }
  progress.update(static_cast<int64_t>(names.size()), "done");
  data.close();
  check(static_cast<bool>(data), "cannot write " + dataPath.string());
  report.bitsPerWeight = totalValues > 0 ? static_cast<double>(totalBits) / static_cast<double>(totalValues) : 0;

  std::string chatTemplate;
  const std::vector<std::string> tokenizerFiles = src->exportTokenizer(destination, chatTemplate);
  // A text encoder (the first layers) reads no pictures. The folder is emptied first, so that
  // an earlier conversion's tower does not outlive it.
  const fs::path visionFolder = fs::path(destination) / kVisionFolder;
  fs::remove_all(visionFolder);
  const bool visionTower = !firstLayers && !src->exportVisionTower(visionFolder.string()).empty();
  Json manifest = {
      {"format", "gizml-llm"}, {"version", kFormatVersion},
      {"architecture", architectureName(config.architecture)}, {"config", configToJson(config)},
      {"source", src->description()}, {"lora", loraFolder},
      {"bits", {{"layers", bits.layers}, {"head", bits.head}, {"group", bits.group}}},
      {"kept_layers", firstLayers ? layers : 0},
      {"tokenizer_files", tokenizerFiles}, {"chat_template", chatTemplate},
      {"vision_tower", visionTower ? kVisionFolder : ""},
      {"data_file", kDataName}, {"data_bytes", offset}, {"tensors", table}};
  writeJson(fs::path(destination) / kManifestName, manifest);

  Json reportJson = {{"bits_per_weight", report.bitsPerWeight}, {"tensors", Json::array()}};
  for (const TensorReport& t : report.tensors)
    reportJson["tensors"].push_back({{"name", t.name}, {"format", t.format}, {"bits_per_weight", t.bitsPerWeight},
                                     {"relative_rms_error", t.relativeRmsError}});
  writeJson(fs::path(destination) / "report.json", reportJson);
  return report;
}

}  // namespace gizml::llm
