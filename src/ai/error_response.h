#pragma once
// An error as the OpenAI API answers it: the status and {"error": {"message", "type", "param",
// "code"}}, the type from the status (server_error from 500, not_found_error for a 404 route).
#include <string>
#include <utility>
#include <vector>

namespace gizml::ai {

std::string errorResponse(int status, const std::string& message, bool keepAlive, const std::string& param = "",
                          const std::string& code = "",
                          const std::vector<std::pair<std::string, std::string>>& headers = {});

}  // namespace gizml::ai
