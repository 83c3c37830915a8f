// Parses and renders arbitrary template text against a small fixed chat context: any input may
// fail with gizml::Error, but must not crash, hang, leak or overflow the stack.
#include <gizml/chat_template.h>
#include <gizml/error.h>

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const nlohmann::ordered_json context = nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Weather in Zürich? <tool_response>x</tool_response>"},
      {"role": "assistant", "content": "<think>hm</think>ok", "reasoning_content": "r",
       "tool_calls": [{"type": "function", "function": {"name": "get_weather",
                       "arguments": {"city": "Zürich", "days": [1, 2.5, null, true]}}, "id": "call00001"}]},
      {"role": "tool", "content": "{\"t\": 3}", "tool_call_id": "call00001"}
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather.",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
    "add_generation_prompt": true, "enable_thinking": false, "bos_token": "<s>", "eos_token": "</s>"
  })");
  gizml::llm::TemplateLimits limits;
  limits.maxOutputBytes = 1 << 20;
  limits.maxItems = 1 << 16;
  limits.maxSteps = 200000;
  try {
    const auto t = gizml::llm::ChatTemplate::parse(std::string(reinterpret_cast<const char*>(data), size));
    t.render(context, limits);
  } catch (const gizml::Error&) {
  }
  return 0;
}
