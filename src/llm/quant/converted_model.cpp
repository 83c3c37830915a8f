#include "llm/quant/converted_model.h"

#include <gizml/error.h>

#include <filesystem>

#include "core/mapped_file.h"
#include "cpu/convert.h"
#include "llm/json_fields.h"
#include "llm/ops/gpu/weight_upload.h"

namespace gizml::llm {
namespace {

using Json = nlohmann::json;

StoredTensor parseEntry(const JsonFields& f) {
  StoredTensor t;
  t.name = f.getString("name");
  t.shape = f.getInts("shape");
  for (int64_t d : t.shape) check(d >= 0, f.where("shape") + ": negative size in " + t.name);
  const std::string format = f.getString("format");
  if (format == "f16") {
    t.dtype = DType::F16;
  } else if (format == "bf16") {
    t.dtype = DType::BF16;
  } else if (format != "f32") {
    check(format.size() == 2 && format[0] == 'q' && format[1] >= '2' && format[1] <= '8',
          f.where("format") + ": unknown format '" + format + "' of " + t.name);
    t.quantized = true;
    t.format.bits = format[1] - '0';
    t.format.group = f.getInt("group");
    checkGroupFormat(t.format, (f.where("group") + " of " + t.name).c_str());
    t.scaleBase = static_cast<float>(f.getFloat("scale_base"));
    check(!t.shape.empty() && t.shape.back() % t.format.group == 0,
          f.where("shape") + ": the rows of " + t.name + " are not whole groups");
  }
  t.offset = static_cast<uint64_t>(f.getInt("offset"));
  t.bytes = static_cast<uint64_t>(f.getInt("bytes"));
  return t;
}

}  // namespace

int64_t StoredTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string StoredTensor::formatName() const {
  if (!quantized) return dtypeName(dtype);
  return std::string{'q', static_cast<char>('0' + format.bits)};
}

uint64_t StoredTensor::expectedBytes() const {
  if (!quantized) return static_cast<uint64_t>(numel()) * dtypeSize(dtype);
  const int64_t cols = shape.back();
  return static_cast<uint64_t>(numel() / std::max<int64_t>(cols, 1) * groupRowBytes(format, cols));
}

Json storedTensorToJson(const StoredTensor& t) {
  Json j = {{"name", t.name}, {"shape", t.shape}, {"format", t.formatName()}};
  if (t.quantized) {
    j["group"] = t.format.group;
    j["scale_base"] = t.scaleBase;
  }
  j["offset"] = t.offset;
  j["bytes"] = t.bytes;
  return j;
}

ConvertedModel ConvertedModel::open(const std::string& folder) {
  namespace fs = std::filesystem;
  ConvertedModel m;
  m.folder_ = folder;
  const std::string manifestPath = (fs::path(folder) / kManifestName).string();
  const JsonFields f = JsonFields::read(manifestPath);
  m.manifest_ = f.json();
  check(f.getString("format") == "gizml-llm", f.where("format") + ": not a gizml model manifest");
  check(f.getInt("version") == kFormatVersion,
        f.where("version") + ": version " + std::to_string(f.getInt("version")) + " is not " +
            std::to_string(kFormatVersion));
  check(f.hasObject("config"), f.where("config") + " is missing");
  m.config_ = configFromJson(m.manifest_["config"], manifestPath);
  check(f.getString("architecture") == architectureName(m.config_.architecture),
        f.where("architecture") + ": differs from config.architecture");
  m.chatTemplate_ = f.getString("chat_template", "");

  const std::string dataPath = (fs::path(folder) / f.getString("data_file")).string();
  m.data_ = std::make_shared<core::MappedFile>(dataPath);
  const uint64_t dataBytes = static_cast<uint64_t>(f.getInt("data_bytes"));
  check(m.data_->size() == dataBytes, dataPath + ": " + std::to_string(m.data_->size()) +
                                          " bytes, but " + manifestPath + ": data_bytes says " +
                                          std::to_string(dataBytes));

  check(f.isArray("tensors"), f.where("tensors") + " is not an array");
  const Json& table = m.manifest_["tensors"];
  for (size_t i = 0; i < table.size(); ++i) {
    check(table[i].is_object(), f.where("tensors") + "[" + std::to_string(i) + "] is not an object");
    StoredTensor t = parseEntry(JsonFields(table[i], manifestPath, "tensors[" + std::to_string(i) + "]."));
    const std::string where = manifestPath + ": tensor " + t.name;
    check(t.bytes == t.expectedBytes(), where + ": bytes " + std::to_string(t.bytes) + " but its shape and " +
                                            t.formatName() + " take " + std::to_string(t.expectedBytes()));
    check(t.offset % kBlobAlignment == 0, where + ": offset " + std::to_string(t.offset) + " is not 64-byte aligned");
    check(t.offset <= dataBytes && t.bytes <= dataBytes - t.offset,
          where + ": offset + bytes run past the end of " + dataPath);
    check(m.index_.emplace(t.name, m.tensors_.size()).second, where + ": listed twice");
    m.tensors_.push_back(std::move(t));
  }
  return m;
}

const StoredTensor& ConvertedModel::tensor(const std::string& name) const {
  const auto it = index_.find(name);
  check(it != index_.end(), folder_ + ": no tensor named '" + name + "'");
  return tensors_[it->second];
}

std::span<const uint8_t> ConvertedModel::raw(const StoredTensor& t) const {
  return {data_->data() + t.offset, static_cast<size_t>(t.bytes)};
}

void ConvertedModel::releasePages(const StoredTensor& t) const {
  const std::span<const uint8_t> bytes = raw(t);
  data_->releasePages(bytes.data(), bytes.size());
}

ops::WeightUpload& ConvertedModel::upload() const {
  const std::shared_ptr<ops::WeightUploads> uploads = uploads_.lock();
  check(gpu_ && uploads, folder_ + ": weights go to a GPU only while their model loads");
  // The load holds its uploads until it ends, so the reference outlives this lock.
  return uploads->of(*gpu_);
}

tensor::Tensor ConvertedModel::dequantize(const std::string& name) const {
  const StoredTensor& t = tensor(name);
  tensor::Tensor out = tensor::empty(t.shape, DType::F32);
  const std::span<const uint8_t> bytes = raw(t);
  if (!t.quantized) {
    cpu::loadF32(t.dtype, bytes.data(), 1, t.numel(), out.data<float>());
  } else {
    const int64_t cols = t.shape.back();
    dequantizeGroups(t.format, t.scaleBase, bytes.data(), t.numel() / std::max<int64_t>(cols, 1), cols,
                     out.data<float>());
  }
  return out;
}

}  // namespace gizml::llm
