#pragma once
// JSON written out as the server and the tool-call reader send it: compact, and text that is no
// valid UTF-8 (a model's or a client's) written with U+FFFD instead of throwing.
#include <nlohmann/json.hpp>
#include <string>

namespace gizml {

inline std::string jsonText(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace gizml
