#pragma once
// A safetensors file's tensors under one name prefix, taken by name from the memory-mapped file:
// each checked and copied out as it is taken (its mapped pages then given back, so that loading
// holds one tensor of the file at a time), so that what remains under the prefix afterwards is
// what the model does not use. Errors name the file and the tensor. A file in other names
// (diffusers') reads through rename, which maps a name (with the prefix) to the file's.
//
// FP8 weights (F8_E4M3, F8_E5M2) are taken as ComfyUI's files store them: plain, or "scaled"
// with a per-tensor F32 scale beside the weight, the value being the code times the scale. Both
// of ComfyUI's layouts (comfy/utils.py convert_old_quants, comfy/ops.py): `X.scale_weight` with
// an optional `X.scale_input` and the file's `scaled_fp8` marker; or `X.weight_scale` with an
// optional `X.input_scale` and `X.comfy_quant` (the JSON {"format": "float8_e4m3fn", ...} as
// bytes). The input scales, which ComfyUI's FP8 products read, are accepted and unused: the
// weights are dequantized.
//
// INT8 weights as ComfyUI's "int8_tensorwise" layer format (comfy_kitchen's TensorWiseINT8Layout)
// stores them: I8 codes, `X.weight_scale` (one per output channel or one for the tensor) and
// `X.comfy_quant` {"format": "int8_tensorwise", "convrot": true, "convrot_groupsize": 256}, the
// codes' rows rotated over groups of that many inputs (ConvRot) or, without convrot, not rotated.
// They are kept as codes (StoredWeight::int8) for the INT8 linears, or read in F32 by f32().
// ComfyUI's 4-bit "asym_w4a8_int8" layers (comfy_kitchen's AsymW4A8Int8Layout) become such codes
// too: kept at 4 bits with their group scales (6 bits: their INT8 grid), the channel scales and
// the ConvRot (w4a8Weight).
#include <gizml/tensor.h>

#include <cmath>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "int8_linear.h"
#include "llm/formats/safetensors.h"

namespace gizml::diffusion {

/// A weight as stored: F32, F16 or BF16 (FP8 as BF16, which holds every E4M3 and E5M2 value
/// exactly), and the per-tensor scale its values are multiplied by (1 but for scaled FP8); or
/// ComfyUI's INT8 codes (values then empty).
struct StoredWeight {
  T::Tensor values;
  float scale = 1.0f;
  std::optional<Int8Codes> int8 = std::nullopt;

  /// The weight in F32: values times scale rounded once to F32, as torch's q.float() * scale;
  /// INT8 codes dequantized and rotated back.
  T::Tensor f32() const {
    if (int8) return dequantized(*int8);
    if (scale == 1.0f) return values.cast(DType::F32).contiguous();
    return (T::lazy(values).cast(DType::F32) * T::lazy(T::scalar(scale, DType::F32))).eval();
  }
};

class WeightFile {
 public:
  /// model: what the file should hold, for the errors ("a FLUX.1 VAE").
  WeightFile(std::string path, std::string prefix, std::string model)
      : path_(std::move(path)), prefix_(std::move(prefix)), model_(std::move(model)), file_(path_) {
    ignore("scaled_fp8");  // ComfyUI's marker of a scaled FP8 file
  }

  bool has(const std::string& name) const { return file_.findTensor(stored(name)) != nullptr; }

  void renameWith(std::function<std::string(const std::string&)> rename) { rename_ = std::move(rename); }

  // The tensor, when the file has it, counted as used without being read.
  void ignore(const std::string& name) {
    if (has(name)) taken_.insert(stored(name));
  }

  // Names are under prefix from now on (for a file whose prefix is told by its names).
  void setPrefix(std::string prefix) {
    prefix_ = std::move(prefix);
    ignore("scaled_fp8");
  }

  // The tensor's shape as stored (before any check of its size).
  T::Shape shapeOf(const std::string& name) const { return find(name).shape; }

  /// The tensor in F32 (FP8 times its scale).
  T::Tensor take(const std::string& name, const T::Shape& shape) { return takeStored(name, shape).f32(); }

  /// The tensor as stored (StoredWeight), its scale and FP8 or INT8 markers taken with it.
  StoredWeight takeStored(const std::string& name, const T::Shape& shape) {
    const llm::SafetensorsTensorInfo& info = find(name);
    const std::string layer = name.size() > 7 && name.ends_with(".weight") ? name.substr(0, name.size() - 7) : "";
    const nlohmann::json quant = layer.empty() ? nlohmann::json() : takeQuantConfig(layer);
    const std::string format = quant.is_null() ? "" : quant["format"].get<std::string>();
    if (info.dtype == llm::SafetensorsDType::I8 && format == "asym_w4a8_int8" && shape.size() == 2) {
      StoredWeight w = w4a8Weight(name, layer, quant, shape);  // stored packed: not `shape`
      taken_.insert(stored(name));
      return w;
    }
    if (info.shape != shape)
      fail(name, "has shape " + T::shapeText(info.shape) + ", expected " + T::shapeText(shape));
    const llm::SafetensorsDType d = info.dtype;
    const bool fp8 = d == llm::SafetensorsDType::F8_E4M3 || d == llm::SafetensorsDType::F8_E5M2;
    const bool int8 = d == llm::SafetensorsDType::I8;
    if (!fp8 && !int8 && d != llm::SafetensorsDType::F32 && d != llm::SafetensorsDType::F16 &&
        d != llm::SafetensorsDType::BF16)
      fail(name, std::string("is ") + llm::safetensorsDTypeName(d) + ", expected F32, F16, BF16, FP8 or INT8");
    StoredWeight w;
    w.values = file_.load(info);  // a copy: FP8 as F32
    file_.releasePages(info);
    taken_.insert(stored(name));
    if (int8) return int8Weight(name, layer, quant, std::move(w.values));
    const std::string scaleName = layer.empty() ? "" : has(layer + ".scale_weight") ? layer + ".scale_weight"
                                                   : has(layer + ".weight_scale") ? layer + ".weight_scale" : "";
    if (!fp8) {
      if (!scaleName.empty() || !format.empty())
        fail(name, std::string("is ") + llm::safetensorsDTypeName(d) + " but has " +
                       (scaleName.empty() ? "a comfy_quant" : "a scale (" + stored(scaleName) + ")") +
                       ": only FP8 and INT8 weights are scaled");
      return w;
    }
    const std::string fp8Format = d == llm::SafetensorsDType::F8_E4M3 ? "float8_e4m3fn" : "float8_e5m2";
    if (!format.empty() && format != fp8Format)
      fail(layer + ".comfy_quant", "says format " + format + ", but " + stored(name) + " is " + fp8Format);
    w.values = w.values.cast(DType::BF16);
    if (!scaleName.empty()) {
      w.scale = takeScalar(scaleName);
      for (const char* input : {".scale_input", ".input_scale"})
        if (has(layer + input)) takeScalar(layer + input);
    }
    return w;
  }

  // The tensors under the prefix (and then `under`) that were never taken.
  void requireAllTaken(const std::string& under = "") const {
    for (const llm::SafetensorsTensorInfo& t : file_.tensors())
      if (t.name.rfind(prefix_ + under, 0) == 0 && taken_.count(t.name) == 0)
        throw Error(path_ + ": tensor " + t.name + " is not part of " + model_);
  }

  [[noreturn]] void fail(const std::string& name, const std::string& what) const {
    throw Error(path_ + ": tensor " + stored(name) + " " + what);
  }

 private:
  std::string stored(const std::string& name) const { return rename_ ? rename_(prefix_ + name) : prefix_ + name; }

  const llm::SafetensorsTensorInfo& find(const std::string& name) const {
    const llm::SafetensorsTensorInfo* t = file_.findTensor(stored(name));
    if (!t) throw Error(path_ + ": no tensor " + stored(name) + " (not " + model_ + "?)");
    return *t;
  }

  // A per-tensor scale: one finite float.
  float takeScalar(const std::string& name) {
    const llm::SafetensorsTensorInfo& info = find(name);
    const llm::SafetensorsDType d = info.dtype;
    if (info.numel != 1 || (d != llm::SafetensorsDType::F32 && d != llm::SafetensorsDType::F16 &&
                            d != llm::SafetensorsDType::BF16))
      fail(name, std::string("is ") + llm::safetensorsDTypeName(d) + " " + T::shapeText(info.shape) +
                     ", expected one float (a per-tensor scale)");
    const float v = file_.load(info).cast(DType::F32).toFloats()[0];
    if (!std::isfinite(v)) fail(name, "is " + std::to_string(v) + ", not a finite scale");
    taken_.insert(stored(name));
    return v;
  }

  // layer's comfy_quant (taken): a JSON object with a format ComfyUI's files use, or null when
  // the layer has none.
  nlohmann::json takeQuantConfig(const std::string& layer) {
    const std::string name = layer + ".comfy_quant";
    if (!has(name)) return nullptr;
    const llm::SafetensorsTensorInfo& info = find(name);
    if (info.dtype != llm::SafetensorsDType::U8 || info.shape.size() != 1)
      fail(name, "is not a vector of U8 (JSON bytes)");
    const auto bytes = file_.tensorBytes(info);
    const nlohmann::json conf = nlohmann::json::parse(bytes.begin(), bytes.end(), nullptr, false);
    if (!conf.is_object() || !conf.contains("format") || !conf["format"].is_string())
      fail(name, "is not the JSON of a layer's quantization ({\"format\": ...})");
    const std::string format = conf["format"].get<std::string>();
    if (format != "float8_e4m3fn" && format != "float8_e5m2" && format != "int8_tensorwise" &&
        format != "asym_w4a8_int8")
      fail(name, "says format " + format +
                     ", which is not read (float8_e4m3fn, float8_e5m2, int8_tensorwise and asym_w4a8_int8 are)");
    taken_.insert(stored(name));
    return conf;
  }

  // A whole number of layer.comfy_quant, or `fallback` where it has none.
  int64_t quantInteger(const std::string& layer, const nlohmann::json& quant, const char* key, int64_t fallback) const {
    if (!quant.contains(key)) return fallback;
    if (!quant[key].is_number_integer() || quant[key].get<int64_t>() < 1 || quant[key].get<int64_t>() > 65536)
      fail(layer + ".comfy_quant", std::string("has ") + key + " " + quant[key].dump() + ", not a whole number from 1");
    return quant[key].get<int64_t>();
  }

  // A layer's companion tensor of one of `dtypes` and this shape, loaded in F32 (U8: FP8 E4M3's
  // bytes, as older tools store a W4A8 group scale) and counted as taken.
  T::Tensor companion(const std::string& name, const T::Shape& shape, bool fp8Bytes) {
    const llm::SafetensorsTensorInfo& info = find(name);
    if (info.shape != shape)
      fail(name, "has shape " + T::shapeText(info.shape) + ", expected " + T::shapeText(shape));
    const llm::SafetensorsDType d = info.dtype;
    const bool fp8 = d == llm::SafetensorsDType::F8_E4M3 || (fp8Bytes && d == llm::SafetensorsDType::U8);
    if (!fp8 && d != llm::SafetensorsDType::F32 && d != llm::SafetensorsDType::F16 && d != llm::SafetensorsDType::BF16)
      fail(name, std::string("is ") + llm::safetensorsDTypeName(d) + ", expected F32, F16, BF16 or FP8 E4M3");
    llm::SafetensorsTensorInfo asRead = info;
    if (fp8) asRead.dtype = llm::SafetensorsDType::F8_E4M3;  // the same bytes
    T::Tensor t = file_.load(asRead).cast(DType::F32).contiguous();
    for (float v : t.toFloats())
      if (!std::isfinite(v)) fail(name, "holds " + std::to_string(v) + ", not a finite value");
    taken_.insert(stored(name));
    return t;
  }

  // ComfyUI's W4A8 layer (comfy_kitchen's AsymW4A8Int8Layout, "asym_w4a8_int8") of a weight
  // [out, in]: X.weight I8 [out, in / 2] (6 bits: [out, 3 in / 4]), X.weight_s_rel [out, in /
  // group_size] FP8 (or its bytes as U8), X.weight_s_channel [out], optional X.weight_codebook
  // [16] and X.weight_correction [in / group_size, out]. As INT8 codes on the grid its product
  // runs on (w4a8Grid) with s_channel the channel scale and the comfy_quant's convrot_groupsize
  // (256 by default) the rotation; with a correction (comfy_kitchen then runs a float linear)
  // dequantized to F32: (grid s_channel + correction) rotated back.
  StoredWeight w4a8Weight(const std::string& name, const std::string& layer, const nlohmann::json& quant,
                          const T::Shape& shape) {
    const int64_t out = shape[0], in = shape[1];
    const llm::SafetensorsTensorInfo& info = find(name);
    const int bits = info.shape.size() == 2 && info.shape[0] == out && info.shape[1] * 2 == in       ? 4
                     : info.shape.size() == 2 && info.shape[0] == out && info.shape[1] * 4 == 3 * in ? 6
                                                                                                   : 0;
    if (bits == 0 || in % 16 != 0)
      fail(name, "is W4A8 of shape " + T::shapeText(info.shape) + ", expected [" + std::to_string(out) + ", " +
                     std::to_string(in / 2) + "] (4 bits) or [" + std::to_string(out) + ", " +
                     std::to_string(3 * in / 4) + "] (6 bits) for a weight [" + std::to_string(out) + ", " +
                     std::to_string(in) + "] (inputs a multiple of 16)");
    const int64_t group = quantInteger(layer, quant, "group_size", 16);
    const int64_t rotation = quantInteger(layer, quant, "convrot_groupsize", 256);
    if (group < 4 || (16 % group != 0 && group % 16 != 0) || in % group != 0 || (bits == 6 && (group % 16 || in % 32)))
      fail(layer + ".comfy_quant", "has group_size " + std::to_string(group) + ", which does not fit " +
                                       std::to_string(in) + " inputs at " + std::to_string(bits) + " bits");
    const int64_t groups = in / group;
    const T::Tensor sRel = companion(layer + ".weight_s_rel", {out, groups}, true);
    const T::Tensor sChannel = companion(layer + ".weight_s_channel", {out}, false);
    std::optional<T::Tensor> codebook;
    if (has(layer + ".weight_codebook")) {
      if (bits == 6) fail(layer + ".weight_codebook", "is there, but 6-bit W4A8 codes are uniform");
      codebook = companion(layer + ".weight_codebook", {16}, false);
    }
    // 4 bits stay 4 bits (their grid made at each product); 6 bits are held as their grid.
    StoredWeight w;
    T::Tensor packed = file_.load(info);
    file_.releasePages(info);
    if (bits == 4) {
      const T::Tensor halves = sRel.cast(DType::F16).contiguous();
      const bool exact = halves.cast(DType::F32).toFloats() == sRel.toFloats();
      w.int8 = Int8Codes{{}, sChannel, rotation,
                         FourBitCodes{std::move(packed), exact ? halves : sRel, w4a8Levels(codebook, 4), group}};
    } else {
      w.int8 = Int8Codes{w4a8Grid(packed, sRel, codebook, in, group, bits), sChannel, rotation};
    }
    try {
      checkCodes(*w.int8);
    } catch (const Error& e) {
      fail(name, std::string("is not usable as stored: ") + e.what());
    }
    if (has(layer + ".weight_correction")) {
      const T::Tensor correction = companion(layer + ".weight_correction", {groups, out}, false);
      T::Tensor values = (T::lazy(w.int8->grid()).cast(DType::F32) * T::lazy(sChannel.reshape({out, 1}))).eval().contiguous();
      float* v = values.data<float>();
      const float* c = correction.data<float>();
      for (int64_t n = 0; n < out; ++n)
        for (int64_t k = 0; k < in; ++k) v[n * in + k] += c[(k / group) * out + n];
      rotateBack(values, rotation);
      return StoredWeight{std::move(values)};
    }
    return w;
  }

  // An I8 weight [out, in] of ComfyUI's int8_tensorwise format: its codes, the scales of
  // layer.weight_scale (one, or one per output channel) and the rotation its comfy_quant names.
  StoredWeight int8Weight(const std::string& name, const std::string& layer, const nlohmann::json& quant,
                          T::Tensor codes) {
    if (quant.is_null() || quant["format"] != "int8_tensorwise")
      fail(name, "is I8, which is read only as ComfyUI's int8_tensorwise layer format (a comfy_quant saying so)");
    if (codes.ndim() != 2) fail(name, "is I8 of shape " + T::shapeText(codes.shape()) + ", expected [out, in]");
    const int64_t out = codes.size(0);
    int64_t rotation = 1;
    if (quant.contains("convrot") && !quant["convrot"].is_boolean())
      fail(layer + ".comfy_quant", "has a convrot that is not true or false");
    if (quant.value("convrot", false)) {
      const nlohmann::json g = quant.value("convrot_groupsize", nlohmann::json(256));
      if (!g.is_number_integer() || g.get<int64_t>() < 1 || g.get<int64_t>() > 256)
        fail(layer + ".comfy_quant", "has convrot_groupsize " + g.dump() + ", expected 4, 16, 64 or 256");
      rotation = g.get<int64_t>();
    }
    const std::string scaleName = layer + ".weight_scale";
    const llm::SafetensorsTensorInfo& s = find(scaleName);
    const bool perTensor = s.numel == 1 && out != 1;
    if (s.numel != out && !perTensor)
      fail(scaleName, "has shape " + T::shapeText(s.shape) + ", expected one scale or one per output channel (" +
                          std::to_string(out) + ")");
    if (s.dtype != llm::SafetensorsDType::F32 && s.dtype != llm::SafetensorsDType::F16 &&
        s.dtype != llm::SafetensorsDType::BF16)
      fail(scaleName, std::string("is ") + llm::safetensorsDTypeName(s.dtype) + ", expected F32, F16 or BF16");
    T::Tensor scales = file_.load(s).cast(DType::F32).reshape({s.numel});
    for (float v : scales.toFloats())
      if (!std::isfinite(v)) fail(scaleName, "holds " + std::to_string(v) + ", not a finite scale");
    if (perTensor) scales = T::full({out}, scales.toFloats()[0]);
    taken_.insert(stored(scaleName));
    StoredWeight w;
    w.int8 = Int8Codes{std::move(codes), scales.contiguous(), rotation};
    try {
      checkCodes(*w.int8);
    } catch (const Error& e) {
      fail(name, std::string("is not usable as stored: ") + e.what());
    }
    return w;
  }

  std::string path_, prefix_, model_;
  llm::SafetensorsFile file_;
  std::set<std::string> taken_;
  std::function<std::string(const std::string&)> rename_;
};

}  // namespace gizml::diffusion
