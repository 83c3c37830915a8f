// The request fields' readers (request_fields.h).
#include "ai/request_fields.h"

#include <cmath>
#include <limits>
#include <mutex>
#include <random>

#include "core/json_input.h"

namespace gizml::ai {

using Json = nlohmann::ordered_json;

Json parseBody(const std::string& text) {
  Json body;
  try {
    body = parseJson(text);
  } catch (const JsonTooDeep& e) {
    tooDeep(e.path);
  } catch (const Json::exception& e) {
    throw ApiError(400, std::string("the body is not valid JSON: ") + e.what());
  }
  if (!body.is_object()) throw ApiError(400, "the body must be a JSON object, not " + typeName(body));
  return body;
}

std::string typeName(const Json& v) {
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_array()) return "a list";
  if (v.is_object()) return "an object";
  return "null";
}

[[noreturn]] void bad(const std::string& param, const std::string& message, const std::string& code) {
  throw ApiError(400, param + ": " + message, param, code);
}

[[noreturn]] void tooDeep(const std::string& param) {
  bad(param, "nested deeper than " + std::to_string(kMaxJsonDepth) + " levels (the server's limit for JSON)");
}

const Json* field(const Json& body, const char* name) {
  const auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

std::optional<double> number(const Json& body, const char* name, double low, double high) {
  const Json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number()) bad(name, "expected a number, got " + typeName(*v));
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < low || x > high) {
    const auto show = [](double d) {
      if (std::isinf(d)) return std::string(d > 0 ? "inf" : "-inf");
      std::string s = std::to_string(d);
      s.erase(s.find_last_not_of('0') + 1);
      if (!s.empty() && s.back() == '.') s.pop_back();
      return s;
    };
    bad(name, show(x) + " is outside [" + show(low) + ", " + show(high) + "]");
  }
  return x;
}

std::optional<int64_t> integer(const Json& body, const char* name, int64_t low, int64_t high) {
  const Json* v = field(body, name);
  if (!v) return std::nullopt;
  int64_t x = 0;
  if (v->is_number_integer()) {
    if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      bad(name, "is too large");
    x = v->get<int64_t>();
  } else if (v->is_number_float() && std::nearbyint(v->get<double>()) == v->get<double>() &&
             std::fabs(v->get<double>()) < 9e15) {
    x = static_cast<int64_t>(v->get<double>());
  } else {
    bad(name, "expected a whole number, got " + (v->is_number() ? v->dump() : typeName(*v)));
  }
  if (x < low || x > high)
    bad(name, std::to_string(x) + " is outside [" + std::to_string(low) + ", " + std::to_string(high) + "]");
  return x;
}

std::optional<bool> boolean(const Json& body, const char* name) {
  const Json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) bad(name, "expected a boolean, got " + typeName(*v));
  return v->get<bool>();
}

uint64_t freshSeed() {
  static std::mutex mutex;
  static std::mt19937_64 engine{std::random_device{}()};
  std::lock_guard lock(mutex);
  return engine();
}

}  // namespace gizml::ai
