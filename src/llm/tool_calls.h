#pragma once
// Model::calls' probe: the format in which a chat template writes tool calls.
#include <gizml/chat_template.h>
#include <gizml/llm.h>

#include <nlohmann/json.hpp>

namespace gizml::llm {

/// Renders a user message and an assistant message with one call of a probe tool through the
/// template (variables: bos_token, eos_token, ...), then reads the rendering with toolCalls: the
/// probe's call read back gives its form; the probe named but not read back, Other; the probe
/// absent or the template failing, None.
CallFormat callFormatOf(const ChatTemplate& chat, const nlohmann::ordered_json& variables);

}  // namespace gizml::llm
