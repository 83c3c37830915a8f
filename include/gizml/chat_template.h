#pragma once
// Chat templates: a Jinja2 interpreter that renders Hugging Face chat templates the way transformers
// does (trim_blocks, lstrip_blocks, loop controls, tojson as json.dumps, raise_exception,
// strftime_now). Contexts are ordered JSON so dicts keep their input order, as Python's do.
#include <cstddef>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace gizml::llm {

namespace tmpl {
struct Template;
}

/// Bounds that keep hostile templates from hanging or exhausting memory or the stack.
struct TemplateLimits {
  std::size_t maxOutputBytes = std::size_t{32} << 20;  ///< the rendering and any one string
  std::size_t maxItems = std::size_t{1} << 20;         ///< items of any one list
  std::size_t maxSteps = 10'000'000;                   ///< loop iterations, macro calls, filter items
  int maxDepth = 200;                                  ///< nesting of expressions, blocks and calls
};

class ChatTemplate {
 public:
  /// Parses Jinja source; syntax errors throw gizml::Error naming line and column.
  static ChatTemplate parse(const std::string& source);

  /// Renders with the given variables (a JSON object). Errors, raise_exception(msg) included,
  /// throw gizml::Error; raise_exception's message is passed through unchanged.
  std::string render(const nlohmann::ordered_json& context, const TemplateLimits& limits = {}) const;

  /// Sets `messages`, `tools` (omitted when empty), `add_generation_prompt`, then extraVars
  /// (e.g. bos_token, eos_token, enable_thinking) and renders.
  std::string renderChat(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                         bool addGenerationPrompt,
                         const nlohmann::ordered_json& extraVars = nlohmann::ordered_json::object()) const;

 private:
  std::shared_ptr<const tmpl::Template> template_;
};

}  // namespace gizml::llm
