#pragma once
// giz's --device cpu|gpu|auto: where a model runs. auto (the default) takes the first GPU when
// there is one and the model loads there (its architecture's operations have GPU kernels and its
// weights fit), else the CPU, and says which on stderr.
#include <gizhw/gpu.h>
#include <gizml/llm.h>

#include <optional>
#include <string>

/// The GPU that --device `choice` asks for: none for cpu; the first GPU for gpu (an Error when
/// there is none) and for auto (none when there is none). An Error for another word.
std::optional<gizhw::gpu::Gpu> deviceFor(const std::string& choice);

/// llm::load of `folder` with `options` on the device `choice` names, falling back to the CPU
/// under auto when the model cannot load on the GPU (saying why on stderr).
gizml::llm::Model loadOn(const std::string& choice, const std::string& folder, gizml::llm::LoadOptions options);
