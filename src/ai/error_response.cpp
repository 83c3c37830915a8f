// OpenAI's error responses (error_response.h).
#include "ai/error_response.h"

#include "ai/http.h"
#include "ai/openai.h"

namespace gizml::ai {

std::string errorResponse(int status, const std::string& message, bool keepAlive, const std::string& param,
                          const std::string& code, const std::vector<std::pair<std::string, std::string>>& headers) {
  const std::string type = status >= 500 ? "server_error" : status == 404 && param.empty() ? "not_found_error"
                                                                                           : "invalid_request_error";
  const std::string body =
      errorBody(message, type, param, code).dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  return http::response(status, "application/json", body, keepAlive, headers);
}

}  // namespace gizml::ai
