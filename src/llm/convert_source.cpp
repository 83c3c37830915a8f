#include "llm/convert_source.h"

#include <gizml/error.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "llm/formats/gguf.h"
#include "llm/formats/llama_permute.h"
#include "llm/formats/safetensors_checkpoint.h"
#include "llm/json_fields.h"

namespace gizml::llm {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

bool startsWith(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }

// The text model's name of a checkpoint tensor; empty for vision towers and projectors.
std::string textName(const std::string& name) {
  for (const char* skip : {"model.visual.", "visual.", "model.vision_tower.", "vision_tower.",
                           "model.multi_modal_projector.", "multi_modal_projector."})
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
                             "generation_config.json", "chat_template.jinja", "chat_template.json"}) {
      const fs::path from = fs::path(folder_) / file;
      if (!fs::exists(from)) continue;
      fs::copy_file(from, fs::path(dest) / file, fs::copy_options::overwrite_existing);
      copied.push_back(file);
    }
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
  std::string description() const override { return folder_; }

 private:
  std::string folder_;
  ModelConfig config_;
  SafetensorsCheckpoint checkpoint_;
  std::map<std::string, std::string> original_;  // text name -> checkpoint name
};

class GgufSource : public WeightSource {
 public:
  explicit GgufSource(const std::string& path) : file_(path), config_(configFromGguf(file_)) {
    const Architecture a = config_.architecture;
    check(a != Architecture::Qwen3_5Text && a != Architecture::Qwen3_5MoeText,
          path + ": converting Qwen 3.5 GGUF tensors is not supported; convert its Hugging Face folder");
    for (const GgufTensorInfo& t : file_.tensors()) {
      const std::string hf = hfNameOfGguf(t.name, a);
      check(!hf.empty(), path + ": tensor " + t.name + " has no Hugging Face name");
      original_[hf] = t.name;
    }
  }
  const ModelConfig& config() const override { return config_; }
  std::vector<std::string> names() const override {
    std::vector<std::string> out;
    for (const auto& entry : original_) out.push_back(entry.first);
    return out;
  }
  tensor::Shape shape(const std::string& name) const override { return file_.tensor(original_.at(name)).shape(); }
  tensor::Tensor load(const std::string& name) const override {
    const std::string& g = original_.at(name);
    tensor::Tensor t = file_.dequantize(g);
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

  GgufFile file_;
  ModelConfig config_;
  std::map<std::string, std::string> original_;  // Hugging Face name -> GGUF name
};

}  // namespace

std::string hfNameOfGguf(const std::string& g, Architecture arch) {
  static const std::map<std::string, std::string> kGlobal = {
      {"token_embd", "model.embed_tokens"}, {"output_norm", "model.norm"},
      {"output", "lm_head"}, {"rope_freqs", "rope_freqs"}};
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
