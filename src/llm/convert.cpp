// convert: source weights (LoRA merged) -> our format, one tensor at a time so that memory holds
// at most one tensor in F32 and its quantized bytes.
#include <gizml/llm.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

#include "core/progress.h"
#include "llm/convert_source.h"
#include "llm/quant/converted_model.h"
#include "llm/quant/lora.h"

namespace gizml::llm {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }
bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Linear layers (and the embedding) are quantized; norms, biases, convolutions, MoE routers and
// gates stay F32: they are small and their errors reach every token.
bool quantizable(const std::string& name, const tensor::Shape& shape, int64_t group) {
  if (shape.size() < 2 || shape.back() % group != 0 || !endsWith(name, ".weight")) return false;
  return !contains(name, "norm") && !contains(name, "conv1d") && !endsWith(name, ".mlp.gate.weight") &&
         !contains(name, "shared_expert_gate");
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
                      const std::string& loraFolder) {
  const GroupFormat layerFormat{bits.layers, bits.group}, headFormat{bits.head, bits.group};
  checkGroupFormat(layerFormat, "convert: layer bits");
  checkGroupFormat(headFormat, "convert: head bits");
  const std::unique_ptr<WeightSource> src = openWeightSource(source);
  std::optional<LoraAdapter> lora;
  if (!loraFolder.empty()) lora.emplace(loraFolder);
  const ModelConfig& config = src->config();
  const std::vector<std::string> names = src->names();
  const std::set<std::string> known(names.begin(), names.end());
  if (lora)
    for (const std::string& target : lora->targets())
      check(known.count(target) != 0, loraFolder + ": the adapter changes " + target + ", which " +
                                          src->description() + " does not hold");
  // A tied embedding is the output layer too, so it takes the output layer's width.
  const bool tiedEmbedding = config.tieWordEmbeddings && known.count("lm_head.weight") == 0;

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
    if (quantizable(name, w.shape(), bits.group)) {
      const bool head = name == "lm_head.weight" || (tiedEmbedding && name == "model.embed_tokens.weight");
      entry.quantized = true;
      entry.format = head ? headFormat : layerFormat;
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
  Json manifest = {
      {"format", "gizml-llm"}, {"version", kFormatVersion},
      {"architecture", architectureName(config.architecture)}, {"config", configToJson(config)},
      {"source", src->description()}, {"lora", loraFolder},
      {"bits", {{"layers", bits.layers}, {"head", bits.head}, {"group", bits.group}}},
      {"tokenizer_files", tokenizerFiles}, {"chat_template", chatTemplate},
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
