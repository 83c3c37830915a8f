// OpenAI's error responses (error_response.h).
#include "ai/error_response.h"

#include "ai/http.h"
#include "ai/openai.h"
#include "core/json_text.h"

namespace gizml::ai {

std::string errorResponse(int status, const std::string& message, bool keepAlive, const std::string& param,
                          const std::string& code, const std::vector<std::pair<std::string, std::string>>& headers) {
  const std::string type = status >= 500 ? "server_error" : status == 404 && param.empty() ? "not_found_error"
                                                                                           : "invalid_request_error";
  return http::response(status, "application/json", jsonText(errorBody(message, type, param, code)), keepAlive, headers);
}

}  // namespace gizml::ai
