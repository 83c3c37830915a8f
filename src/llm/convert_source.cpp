#include "llm/convert_source.h"

#include <gizml/error.h>
#include <gizml/safetensors.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "llm/formats/gguf.h"
#include "llm/formats/llama_permute.h"
#include "llm/formats/qwen35_gguf.h"
#include "llm/formats/safetensors_checkpoint.h"
#include "llm/json_fields.h"

namespace gizml::llm {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

bool startsWith(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }

// Qwen's vision tower: the tensors vision::Tower reads.
bool inVisionTower(const std::string& name) { return startsWith(name, "model.visual.") || startsWith(name, "visual."); }

// The text model's name of a checkpoint tensor; empty for vision towers and projectors.
std::string textName(const std::string& name) {
  if (inVisionTower(name)) return "";
  for (const char* skip : {"model.vision_tower.", "vision_tower.", "model.multi_modal_projector.",
                           "multi_modal_projector."})
    if (startsWith(name, skip)) return "";
  for (const auto& [from, to] : std::initializer_list<std::pair<const char*, const char*>>{
           {"model.language_model.", "model."}, {"language_model.model.", "model."},
           {"language_model.lm_head.", "lm_head."}})
    if (startsWith(name, from)) return to + name.substr(std::string(from).size());
  return name;
}

class HfSource : public WeightSource {
 public:
  explicit HfSource(const std::string& folder)
      : folder_(folder), config_(readHfConfig(folder)), checkpoint_(folder) {
    for (const std::string& n : checkpoint_.names()) {
      if (inVisionTower(n)) towerNames_.push_back(n);
      const std::string t = textName(n);
      if (!t.empty()) original_[t] = n;
    }
  }
  const ModelConfig& config() const override { return config_; }
  std::vector<std::string> names() const override {
    std::vector<std::string> out;
    for (const auto& entry : original_) out.push_back(entry.first);
    return out;
  }
  tensor::Shape shape(const std::string& name) const override { return checkpoint_.tensor(original_.at(name)).shape; }
  tensor::Tensor load(const std::string& name) const override {
    return checkpoint_.load(original_.at(name)).cast(DType::F32).contiguous();
  }
  std::vector<std::string> exportTokenizer(const std::string& dest, std::string& chatTemplate) const override {
    std::vector<std::string> copied;
    for (const char* file : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                             "generation_config.json", "chat_template.jinja", "chat_template.json"})
      if (copyIfPresent(file, dest)) copied.push_back(file);
    // The template lives in chat_template.jinja in newer checkpoints, else in tokenizer_config.
    const fs::path jinja = fs::path(folder_) / "chat_template.jinja";
    const fs::path tokConfig = fs::path(folder_) / "tokenizer_config.json";
    if (fs::exists(jinja)) {
      std::ifstream in(jinja, std::ios::binary);
      chatTemplate.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    } else if (fs::exists(tokConfig)) {
      const JsonFields f = JsonFields::read(tokConfig.string());
      if (f.has("chat_template") && f.json()["chat_template"].is_string()) chatTemplate = f.getString("chat_template");
    }
    return copied;
  }
  // The tower as vision::Tower::load reads it: the config (with its vision_config), the
  // preprocessor's, and the tower's tensors under their own names in the dtype load() gives (the
  // stored one for F32, F16 and BF16): the tower is not quantized. It is held whole while written,
  // a small part of the model.
  std::vector<std::string> exportVisionTower(const std::string& dest) const override {
    const std::string configPath = (fs::path(folder_) / "config.json").string();
    if (towerNames_.empty() || !JsonFields::read(configPath).hasObject("vision_config")) return {};
    fs::create_directories(dest);
    std::vector<std::string> written;
    for (const char* file : {"config.json", "preprocessor_config.json"})
      if (copyIfPresent(file, dest)) written.push_back(file);
    std::map<std::string, tensor::Tensor> tower;
    for (const std::string& name : towerNames_) tower.emplace(name, checkpoint_.load(name));
    const char* weights = "model.safetensors";
    saveSafetensors((fs::path(dest) / weights).string(), tower);
    written.push_back(weights);
    return written;
  }
  std::string description() const override { return folder_; }

 private:
  // Copies the source's `file` into folder dest, when the source has it.
  bool copyIfPresent(const char* file, const std::string& dest) const {
    const fs::path from = fs::path(folder_) / file;
    if (!fs::exists(from)) return false;
    fs::copy_file(from, fs::path(dest) / file, fs::copy_options::overwrite_existing);
    return true;
  }

  std::string folder_;
  ModelConfig config_;
  SafetensorsCheckpoint checkpoint_;
  std::map<std::string, std::string> original_;  // text name -> checkpoint name
  std::vector<std::string> towerNames_;          // the vision tower's checkpoint names
};

class GgufSource : public WeightSource {
 public:
  explicit GgufSource(const std::string& path) : file_(path), config_(configFromGguf(file_)) {
    const Architecture a = config_.architecture;
    for (const GgufTensorInfo& t : file_.tensors()) {
      // Stacked experts ("blk.3.ffn_up_exps.weight") become one tensor per expert.
      const size_t layerEnd = startsWith(t.name, "blk.") ? t.name.find('.', 4) : std::string::npos;
      const size_t suffix = t.name.rfind('.');
      const std::vector<std::string> projections =
          layerEnd != std::string::npos && suffix > layerEnd
              ? expertProjections(t.name.substr(layerEnd + 1, suffix - layerEnd - 1))
              : std::vector<std::string>{};
      if (!projections.empty()) {
        const tensor::Shape s = t.shape();
        check(s.size() == 3 && s[1] % static_cast<int64_t>(projections.size()) == 0,
              path + ": tensor " + t.name + " of shape " + tensor::shapeText(s) + " is not [experts, rows, cols]");
        const std::string prefix = "model.layers." + t.name.substr(4, layerEnd - 4) + ".mlp.experts.";
        for (int64_t e = 0; e < s[0]; ++e)
          for (size_t part = 0; part < projections.size(); ++part)
            original_[prefix + std::to_string(e) + "." + projections[part] + ".weight"] = {
                t.name, e, static_cast<int64_t>(part), static_cast<int64_t>(projections.size())};
        continue;
      }
      const std::string hf = hfNameOfGguf(t.name, a, config_.numLayers);
      check(!hf.empty(), path + ": tensor " + t.name + " has no Hugging Face name");
      original_[hf] = {t.name};
    }
  }
  const ModelConfig& config() const override { return config_; }
  std::vector<std::string> names() const override {
    std::vector<std::string> out;
    for (const auto& entry : original_) out.push_back(entry.first);
    return out;
  }
  tensor::Shape shape(const std::string& name) const override {
    const Piece& p = original_.at(name);
    tensor::Shape s = file_.tensor(p.tensor).shape();
    if (p.expert >= 0) return {s[1] / p.parts, s[2]};
    if (name.find("conv1d.weight") != std::string::npos && s.size() == 2) return {s[0], 1, s[1]};
    return s;
  }
  tensor::Tensor load(const std::string& name) const override {
    const Piece& p = original_.at(name);
    const std::string& g = p.tensor;
    tensor::Tensor t;
    if (p.expert >= 0) {
      // Each expert reads the stacked tensor: keep its last dequantization for the next ones.
      if (stackedName_ != g) stacked_ = file_.dequantize(g), stackedName_ = g;
      const int64_t rows = stacked_.shape()[1] / p.parts;
      t = stacked_.slice(0, p.expert, p.expert + 1).slice(1, p.part * rows, (p.part + 1) * rows)
              .reshape({rows, stacked_.shape()[2]}).contiguous();
    } else {
      t = file_.dequantize(g);
    }
    if (config_.architecture == Architecture::Qwen3_5Text || config_.architecture == Architecture::Qwen3_5MoeText)
      return qwen35FromGguf(name, t, config_);
    const bool llama = config_.architecture == Architecture::Llama || config_.architecture == Architecture::Mistral;
    if (llama && name.find("self_attn.q_proj.") != std::string::npos)
      t = unpermuteLlamaRows(t, config_.numHeads, file_.path() + ": " + g);
    if (llama && name.find("self_attn.k_proj.") != std::string::npos)
      t = unpermuteLlamaRows(t, config_.numKvHeads, file_.path() + ": " + g);
    // llama.cpp stores Gemma's (1 + w) norm weights with the 1 added.
    if (config_.architecture == Architecture::Gemma3Text && name.find("norm.weight") != std::string::npos)
      t = (tensor::lazy(t) - 1.0).eval();
    return t;
  }
  std::vector<std::string> exportTokenizer(const std::string& dest, std::string& chatTemplate) const override {
    Json tok = Json::object();
    for (const GgufKeyValue& kv : file_.metadata()) {
      if (kv.key == "tokenizer.chat_template") {
        chatTemplate = kv.value.asString(kv.key);
        continue;
      }
      if (!startsWith(kv.key, "tokenizer.ggml.")) continue;
      tok[kv.key.substr(std::string("tokenizer.ggml.").size())] = toJson(kv.value);
    }
    const char* name = "tokenizer_gguf.json";
    std::ofstream out(fs::path(dest) / name, std::ios::binary);
    out << tok.dump();
    check(static_cast<bool>(out), dest + ": cannot write " + name);
    return {name};
  }
  std::string description() const override { return file_.path(); }

 private:
  static Json toJson(const GgufValue& v) {
    using T = GgufValueType;
    switch (v.type) {
      case T::String: return v.string;
      case T::Bool: return v.asBool();
      case T::F32: case T::F64: return v.asFloat();
      case T::Array:
        if (v.elementType == T::String) return v.strings;
        if (v.elementType == T::F32 || v.elementType == T::F64) return v.asFloats();
        if (v.elementType == T::Array) {
          Json items = Json::array();
          for (const GgufValue& item : v.arrays) items.push_back(toJson(item));
          return items;
        }
        if (v.elementType == T::Bool) {
          Json items = Json::array();
          for (uint8_t b : v.raw) items.push_back(b != 0);
          return items;
        }
        return v.asInts();
      default: return v.asInt();
    }
  }

  /// Where a Hugging Face tensor lies in the GGUF file: a tensor, or one expert's share of one.
  struct Piece {
    std::string tensor;
    int64_t expert = -1;
    int64_t part = 0, parts = 1;  // gate then up in ffn_gate_up_exps
  };

  GgufFile file_;
  ModelConfig config_;
  std::map<std::string, Piece> original_;  // Hugging Face name -> GGUF piece
  mutable std::string stackedName_;
  mutable tensor::Tensor stacked_;
};

}  // namespace

std::string hfNameOfGguf(const std::string& g, Architecture arch, int64_t layers) {
  static const std::map<std::string, std::string> kGlobal = {
      {"token_embd", "model.embed_tokens"}, {"output_norm", "model.norm"},
      {"output", "lm_head"}, {"rope_freqs", "rope_freqs"}};
  // Qwen 3.5's DeltaNet, MoE and MTP tensors (A_log and dt_bias have no suffix in either).
  static const std::map<std::string, std::string> kQwen35 = {
      {"attn_qkv.weight", "linear_attn.in_proj_qkv.weight"}, {"attn_gate.weight", "linear_attn.in_proj_z.weight"},
      {"ssm_conv1d.weight", "linear_attn.conv1d.weight"}, {"ssm_dt.bias", "linear_attn.dt_bias"},
      {"ssm_a", "linear_attn.A_log"}, {"ssm_norm.weight", "linear_attn.norm.weight"},
      {"ssm_beta.weight", "linear_attn.in_proj_b.weight"}, {"ssm_alpha.weight", "linear_attn.in_proj_a.weight"},
      {"ssm_out.weight", "linear_attn.out_proj.weight"}, {"ffn_gate_inp.weight", "mlp.gate.weight"},
      {"ffn_gate_inp_shexp.weight", "mlp.shared_expert_gate.weight"},
      {"ffn_gate_shexp.weight", "mlp.shared_expert.gate_proj.weight"},
      {"ffn_up_shexp.weight", "mlp.shared_expert.up_proj.weight"},
      {"ffn_down_shexp.weight", "mlp.shared_expert.down_proj.weight"},
      {"nextn.eh_proj.weight", "fc.weight"}, {"nextn.enorm.weight", "pre_fc_norm_embedding.weight"},
      {"nextn.hnorm.weight", "pre_fc_norm_hidden.weight"}, {"nextn.shared_head_norm.weight", "norm.weight"}};
  if (arch == Architecture::Qwen3_5Text || arch == Architecture::Qwen3_5MoeText) {
    const size_t second = startsWith(g, "blk.") ? g.find('.', 4) : std::string::npos;
    if (second != std::string::npos) {
      const std::string layer = g.substr(4, second - 4), rest = g.substr(second + 1);
      if (!layer.empty() && std::all_of(layer.begin(), layer.end(), ::isdigit)) {
        const int64_t index = std::stoll(layer);
        const auto it = kQwen35.find(rest);
        // Blocks past the main stack are the MTP layers (Hugging Face's mtp.*).
        if (index >= layers) {
          if (it != kQwen35.end() && startsWith(rest, "nextn.")) return "mtp." + it->second;
          const std::string inner = hfNameOfGguf("blk.0." + rest, arch, 1);
          return inner.empty() ? "" : "mtp.layers." + std::to_string(index - layers) + inner.substr(std::string("model.layers.0").size());
        }
        if (it != kQwen35.end()) return "model.layers." + layer + "." + it->second;
      }
    }
  }
  const bool gemma = arch == Architecture::Gemma3Text;
  const std::map<std::string, std::string> kBlock = {
      {"attn_norm", "input_layernorm"},
      {"attn_q", "self_attn.q_proj"}, {"attn_k", "self_attn.k_proj"}, {"attn_v", "self_attn.v_proj"},
      {"attn_output", "self_attn.o_proj"}, {"attn_q_norm", "self_attn.q_norm"},
      {"attn_k_norm", "self_attn.k_norm"},
      {"ffn_norm", gemma ? "pre_feedforward_layernorm" : "post_attention_layernorm"},
      {"post_attention_norm", "post_attention_layernorm"}, {"post_ffw_norm", "post_feedforward_layernorm"},
      {"ffn_gate", "mlp.gate_proj"}, {"ffn_up", "mlp.up_proj"}, {"ffn_down", "mlp.down_proj"}};
  const size_t dot = g.rfind('.');
  if (dot == std::string::npos) return "";
  const std::string stem = g.substr(0, dot), suffix = g.substr(dot);  // ".weight" / ".bias"
  if (const auto it = kGlobal.find(stem); it != kGlobal.end()) return it->second + suffix;
  if (!startsWith(stem, "blk.")) return "";
  const size_t second = stem.find('.', 4);
  if (second == std::string::npos) return "";
  const std::string layer = stem.substr(4, second - 4);
  if (layer.empty() || !std::all_of(layer.begin(), layer.end(), ::isdigit)) return "";
  const auto it = kBlock.find(stem.substr(second + 1));
  if (it == kBlock.end()) return "";
  return "model.layers." + layer + "." + it->second + suffix;
}

std::unique_ptr<WeightSource> openWeightSource(const std::string& path) {
  check(fs::exists(path), path + ": no such file or folder");
  if (fs::is_directory(path)) {
    check(fs::exists(fs::path(path) / "config.json"), path + ": no config.json (a Hugging Face folder needs one)");
    return std::make_unique<HfSource>(path);
  }
  return std::make_unique<GgufSource>(path);
}

}  // namespace gizml::llm
