#include "llm/formats/qwen35_gguf.h"

#include <gizml/error.h>

namespace gizml::llm {
namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

/// Axis `axis` of t, of (perKey * keyHeads) heads of `head` values in tiled order, back in
/// grouped order: position (j, i) of the [perKey, keyHeads] grid holds head i * perKey + j.
tensor::Tensor untile(const tensor::Tensor& t, int64_t axis, int64_t keyHeads, int64_t perKey, int64_t head) {
  tensor::Shape split = t.shape();
  check(split[static_cast<size_t>(axis)] == keyHeads * perKey * head,
        "Qwen 3.5 GGUF: axis " + std::to_string(axis) + " of shape " + tensor::shapeText(t.shape()) + " is not " +
            std::to_string(keyHeads * perKey) + " value heads of " + std::to_string(head));
  split[static_cast<size_t>(axis)] = head;
  split.insert(split.begin() + axis, keyHeads);
  split.insert(split.begin() + axis, perKey);
  tensor::Axes order;
  for (int64_t i = 0; i < static_cast<int64_t>(split.size()); ++i) order.push_back(i);
  std::swap(order[static_cast<size_t>(axis)], order[static_cast<size_t>(axis + 1)]);
  return t.reshape(split).permute(order).contiguous().reshape(t.shape());
}

}  // namespace

tensor::Tensor qwen35FromGguf(const std::string& name, const tensor::Tensor& stored, const ModelConfig& c) {
  tensor::Tensor t = stored;
  if (name.ends_with("norm.weight") && !name.ends_with("linear_attn.norm.weight"))
    t = (tensor::lazy(t) - 1.0).eval();
  if (name.ends_with(".A_log")) t = (-tensor::lazy(t)).log().eval();
  if (name.ends_with("conv1d.weight")) {
    check(t.ndim() == 2, "Qwen 3.5 GGUF: " + name + " of shape " + tensor::shapeText(t.shape()) +
                             " is not [channels, kernel]");
    t = t.reshape({t.shape()[0], 1, t.shape()[1]});
  }
  const int64_t keyHeads = c.linearNumKeyHeads, valueHeads = c.linearNumValueHeads;
  if (!contains(name, "linear_attn.") || keyHeads <= 0 || valueHeads == keyHeads) return t;
  const int64_t perKey = valueHeads / keyHeads, dv = c.linearValueHeadDim;
  const int64_t qk = 2 * keyHeads * c.linearKeyHeadDim;
  if (name.ends_with("in_proj_qkv.weight") || name.ends_with("conv1d.weight")) {
    check(t.shape()[0] == qk + valueHeads * dv,
          "Qwen 3.5 GGUF: " + name + " of shape " + tensor::shapeText(t.shape()) + " is not q, k and v rows");
    const int64_t rows = t.shape()[0];
    return tensor::concat({t.slice(0, 0, qk), untile(t.slice(0, qk, rows), 0, keyHeads, perKey, dv)}, 0);
  }
  if (name.ends_with("in_proj_z.weight")) return untile(t, 0, keyHeads, perKey, dv);
  if (name.ends_with("in_proj_a.weight") || name.ends_with("in_proj_b.weight") || name.ends_with(".A_log") ||
      name.ends_with(".dt_bias"))
    return untile(t, 0, keyHeads, perKey, 1);
  if (name.ends_with("out_proj.weight")) return untile(t, 1, keyHeads, perKey, dv);
  return t;
}

std::vector<std::string> expertProjections(const std::string& stem) {
  if (stem == "ffn_gate_exps") return {"gate_proj"};
  if (stem == "ffn_up_exps") return {"up_proj"};
  if (stem == "ffn_down_exps") return {"down_proj"};
  if (stem == "ffn_gate_up_exps") return {"gate_proj", "up_proj"};
  return {};
}

}  // namespace gizml::llm
