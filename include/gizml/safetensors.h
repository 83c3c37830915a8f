#pragma once
// safetensors files (huggingface/safetensors), the format of Hugging Face's weights: named
// tensors, read and written whole.
#include <gizml/tensor.h>

#include <map>
#include <string>

namespace gizml::llm {

/// Every tensor of the file by name, each a new host tensor: F32, F16, BF16, I8, U8 and BOOL as
/// stored; I16, U16 and I32 as I32; U32, I64 and U64 as I64; F64 and FP8 as F32. The header is
/// checked as the reference crate checks it; bad input throws gizml::Error naming the file.
std::map<std::string, tensor::Tensor> loadSafetensors(const std::string& path);

/// Writes the tensors into a safetensors file at path (replacing it), each in its own dtype (I4,
/// which the format lacks, is a gizml::Error naming the tensor), their data in name order.
void saveSafetensors(const std::string& path, const std::map<std::string, tensor::Tensor>& tensors);

}  // namespace gizml::llm
