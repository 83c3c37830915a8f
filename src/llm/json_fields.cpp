#include "llm/json_fields.h"

#include <gizml/error.h>

#include <fstream>
#include <sstream>

#include "core/json_input.h"

namespace gizml::llm {

using Json = nlohmann::json;

JsonFields JsonFields::parse(const std::string& text, const std::string& file) {
  auto owned = std::make_shared<Json>();
  try {
    *owned = parseJson<Json>(text);
  } catch (const Json::exception& e) {
    throw Error(file + ": not valid JSON: " + e.what());
  } catch (const JsonTooDeep& e) {
    throw Error(file + ": " + e.what());
  }
  check(owned->is_object(), file + ": expected a JSON object");
  JsonFields f(*owned, file);
  f.owner_ = owned;
  return f;
}

JsonFields JsonFields::read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  check(static_cast<bool>(in), "cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  return parse(text.str(), path);
}

JsonFields::JsonFields(const Json& object, std::string file, std::string prefix)
    : object_(&object), file_(std::move(file)), prefix_(std::move(prefix)) {}

std::string JsonFields::where(const std::string& key) const { return file_ + ": " + prefix_ + key; }

bool JsonFields::isNull(const std::string& key) const { return !has(key) || (*object_)[key].is_null(); }
bool JsonFields::hasObject(const std::string& key) const { return has(key) && (*object_)[key].is_object(); }
bool JsonFields::isArray(const std::string& key) const { return has(key) && (*object_)[key].is_array(); }

JsonFields JsonFields::child(const std::string& key) const {
  const Json& v = at(key);
  check(v.is_object(), where(key) + " is not an object");
  JsonFields f(v, file_, prefix_ + key + ".");
  f.owner_ = owner_;
  return f;
}

const Json& JsonFields::at(const std::string& key) const {
  check(has(key), where(key) + " is missing");
  return (*object_)[key];
}

int64_t JsonFields::getInt(const std::string& key) const {
  const Json& v = at(key);
  if (v.is_number_integer()) return v.get<int64_t>();
  // 1e6 and 32768.0 are integers too, as Python writes them.
  if (v.is_number_float() && v.get<double>() == static_cast<double>(static_cast<int64_t>(v.get<double>())))
    return static_cast<int64_t>(v.get<double>());
  throw Error(where(key) + " is not an integer");
}

double JsonFields::getFloat(const std::string& key) const {
  const Json& v = at(key);
  check(v.is_number(), where(key) + " is not a number");
  return v.get<double>();
}

bool JsonFields::getBool(const std::string& key) const {
  const Json& v = at(key);
  check(v.is_boolean(), where(key) + " is not true or false");
  return v.get<bool>();
}

std::string JsonFields::getString(const std::string& key) const {
  const Json& v = at(key);
  check(v.is_string(), where(key) + " is not a string");
  return v.get<std::string>();
}

std::vector<int64_t> JsonFields::getInts(const std::string& key) const {
  const Json& v = at(key);
  check(v.is_array(), where(key) + " is not an array");
  std::vector<int64_t> out;
  for (const Json& e : v) {
    check(e.is_number_integer(), where(key) + " holds a non-integer");
    out.push_back(e.get<int64_t>());
  }
  return out;
}

std::vector<std::string> JsonFields::getStrings(const std::string& key) const {
  const Json& v = at(key);
  check(v.is_array(), where(key) + " is not an array");
  std::vector<std::string> out;
  for (const Json& e : v) {
    check(e.is_string(), where(key) + " holds a non-string");
    out.push_back(e.get<std::string>());
  }
  return out;
}

int64_t JsonFields::getInt(const std::string& key, int64_t fallback) const {
  return isNull(key) ? fallback : getInt(key);
}
double JsonFields::getFloat(const std::string& key, double fallback) const {
  return isNull(key) ? fallback : getFloat(key);
}
bool JsonFields::getBool(const std::string& key, bool fallback) const {
  return isNull(key) ? fallback : getBool(key);
}
std::string JsonFields::getString(const std::string& key, const std::string& fallback) const {
  return isNull(key) ? fallback : getString(key);
}

}  // namespace gizml::llm
