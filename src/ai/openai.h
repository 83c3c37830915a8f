#pragma once
// The OpenAI API's request bodies read into engine requests, with errors that name the field at
// fault as OpenAI's do ({"error": {"message", "type", "param", "code"}}).
#include <gizml/error.h>
#include <gizml/llm.h>
#include <gizml/vision.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ai/tools_prompt.h"

namespace gizml::ai {

using llm::TokenId;
using llm::Tokenizer;

/// A request the server refuses: its HTTP status and OpenAI's error fields.
class ApiError : public Error {
 public:
  ApiError(int status, const std::string& message, std::string param = "", std::string code = "",
           std::string type = "invalid_request_error")
      : Error(message), status(status), param(std::move(param)), code(std::move(code)), type(std::move(type)) {}
  int status;
  std::string param, code, type;
};

/// {"error": {...}} of an error.
nlohmann::ordered_json errorBody(const std::string& message, const std::string& type, const std::string& param,
                                 const std::string& code);

/// What a served model offers to the parser.
struct Target {
  std::string name;
  const llm::Model* model = nullptr;
  int64_t context = 0;  // the engine's tokens per slot
  bool writesTools = true;  // its chat template takes tools (templateTakesTools; else: the generic prompt)
  int slots = 1;            // the engine's: at most this many choices (n) at once
  const vision::Tower* tower = nullptr;  // shows a chat's pictures to the model; null: it reads none
  int64_t picturePixels = 0;             // pictures above this many pixels are scaled down to it
};

/// The most choices a request may ask for (n).
inline constexpr int kMaxChoices = 8;

/// A completion request, read.
struct Generation {
  size_t target = 0;  // index into the targets
  bool chat = false;
  bool stream = false;
  bool includeUsage = false;
  llm::Request request;
  int choices = 1;                    // n: each samples with seed + its index
  ToolChoice toolChoice;
  int logprobs = -1;                  // -1: none; else the top alternatives per token
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();  // passed to the template
  bool reasoning = false;             // split <think> sections into reasoning_content
  bool inReasoning = false;           // the prompt ends inside a <think>
};

/// Reads a body of POST /v1/chat/completions (chat) or /v1/completions. A model that is one of
/// imageModels is refused (400, naming it). Throws ApiError.
Generation parseGeneration(const std::string& body, bool chat, const std::vector<Target>& targets, bool thinking,
                           const std::vector<std::string>& imageModels = {});

}  // namespace gizml::ai
