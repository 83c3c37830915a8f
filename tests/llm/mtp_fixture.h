#pragma once
// The tiny qwen3_5 fixture (tests/data/models/qwen3_5/hf) with an MTP layer added, as a Hugging
// Face folder, for the MTP tests and bench/bench_mtp.cpp. The layer is random, or built to agree:
// every layer's output projection zeroed, so the model maps each token to the next through its
// embedding alone (a bigram table); its MTP layer reads only the embedding of token i + 1
// (fc = [I | 0]) through a layer whose outputs are zeroed and the model's final norm, so it
// predicts token i + 2 as the model will. Public headers only: the benchmark includes it too.
#include <gizml/safetensors.h>
#include <gizml/tensor.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

/// Writes config.json and model.safetensors of the fixture at `fixture` (a model folder holding
/// hf/) with an MTP layer into the folder `out`.
inline void writeQwen35WithMtp(const std::string& fixture, const std::string& out, bool agreeing) {
  using gizml::tensor::Tensor;
  namespace tensor = gizml::tensor;
  nlohmann::json config = nlohmann::json::parse(std::ifstream(fixture + "/hf/config.json"));
  config["mtp_num_hidden_layers"] = 1;
  std::ofstream(out + "/config.json") << config.dump();
  std::map<std::string, Tensor> tensors = gizml::llm::loadSafetensors(fixture + "/hf/model.safetensors");
  for (auto& [name, t] : tensors) t = t.cast(gizml::DType::F32);
  const int64_t h = config["hidden_size"], heads = config["num_attention_heads"], kv = config["num_key_value_heads"],
                d = config["head_dim"], inner = config["intermediate_size"];
  tensor::Key key(7);
  auto random = [&](tensor::Shape shape) { return tensor::normal(key = key.split(1), shape, 0.0, 0.08); };
  const std::string p = "mtp.layers.0.";
  tensors["mtp.fc.weight"] = random({h, 2 * h});
  for (const char* norm : {"mtp.pre_fc_norm_embedding.weight", "mtp.pre_fc_norm_hidden.weight", "mtp.norm.weight"})
    tensors[norm] = random({h});
  tensors[p + "input_layernorm.weight"] = random({h});
  tensors[p + "post_attention_layernorm.weight"] = random({h});
  tensors[p + "self_attn.q_proj.weight"] = random({heads * d * 2, h});
  tensors[p + "self_attn.k_proj.weight"] = random({kv * d, h});
  tensors[p + "self_attn.v_proj.weight"] = random({kv * d, h});
  tensors[p + "self_attn.o_proj.weight"] = random({h, heads * d});
  tensors[p + "self_attn.q_norm.weight"] = random({d});
  tensors[p + "self_attn.k_norm.weight"] = random({d});
  tensors[p + "mlp.gate_proj.weight"] = random({inner, h});
  tensors[p + "mlp.up_proj.weight"] = random({inner, h});
  tensors[p + "mlp.down_proj.weight"] = random({h, inner});
  if (agreeing) {
    for (auto& [name, t] : tensors)
      if (name.ends_with("o_proj.weight") || name.ends_with("out_proj.weight") || name.ends_with("down_proj.weight"))
        t = tensor::zeros(t.shape());
    std::vector<double> fc(static_cast<size_t>(2 * h * h), 0.0);
    for (int64_t i = 0; i < h; ++i) fc[static_cast<size_t>(i * 2 * h + i)] = 1.0;
    tensors["mtp.fc.weight"] = tensor::tensor({h, 2 * h}, fc);
    tensors["mtp.pre_fc_norm_embedding.weight"] = tensor::zeros({h});
    tensors["mtp.norm.weight"] = tensors["model.norm.weight"];
  }
  gizml::llm::saveSafetensors(out + "/model.safetensors", tensors);
}
