#pragma once
// Reading the fields of an OpenAI API request body, each checked and named when it is wrong
// (ApiError 400 with the field as param): what the completion and the image requests share.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "ai/openai.h"

namespace gizml::ai {

/// The body as a JSON object (depth-bounded, so that the readers may walk it recursively).
nlohmann::ordered_json parseBody(const std::string& text);

/// "a number", "a string", ... for messages.
std::string typeName(const nlohmann::ordered_json& v);

/// Throws ApiError(400, "param: message", param, code).
[[noreturn]] void bad(const std::string& param, const std::string& message, const std::string& code = "");
/// The error for JSON nested beyond kMaxJsonDepth at param.
[[noreturn]] void tooDeep(const std::string& param);

/// body[name], or nullptr when absent or null.
const nlohmann::ordered_json* field(const nlohmann::ordered_json& body, const char* name);
/// The field as a number in [low, high]; nullopt when absent.
std::optional<double> number(const nlohmann::ordered_json& body, const char* name, double low, double high);
/// The field as a whole number in [low, high]; nullopt when absent.
std::optional<int64_t> integer(const nlohmann::ordered_json& body, const char* name, int64_t low, int64_t high);
std::optional<bool> boolean(const nlohmann::ordered_json& body, const char* name);

/// A seed for a request that gives none, so that each such request samples afresh (OpenAI's).
uint64_t freshSeed();

}  // namespace gizml::ai
