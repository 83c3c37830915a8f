#pragma once
// Typed reads of a JSON object's fields whose errors name the file and the field's path
// ("config.json: text_config.num_attention_heads is missing").
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace gizml::llm {

class JsonFields {
 public:
  /// Parses text (an object is required); `file` names it in errors.
  static JsonFields parse(const std::string& text, const std::string& file);
  /// Reads a JSON file.
  static JsonFields read(const std::string& path);
  /// Wraps an object already parsed (kept alive by the caller).
  JsonFields(const nlohmann::json& object, std::string file, std::string prefix = "");

  const nlohmann::json& json() const { return *object_; }
  /// "file: prefix.key", for messages.
  std::string where(const std::string& key) const;

  bool has(const std::string& key) const { return object_->contains(key); }
  /// Missing or null.
  bool isNull(const std::string& key) const;
  bool hasObject(const std::string& key) const;
  bool isArray(const std::string& key) const;
  JsonFields child(const std::string& key) const;

  // Required fields: missing or mistyped ones throw.
  int64_t getInt(const std::string& key) const;
  double getFloat(const std::string& key) const;
  bool getBool(const std::string& key) const;
  std::string getString(const std::string& key) const;
  std::vector<int64_t> getInts(const std::string& key) const;
  std::vector<std::string> getStrings(const std::string& key) const;
  // Optional fields: the fallback when missing or null; a wrong type still throws.
  int64_t getInt(const std::string& key, int64_t fallback) const;
  double getFloat(const std::string& key, double fallback) const;
  bool getBool(const std::string& key, bool fallback) const;
  std::string getString(const std::string& key, const std::string& fallback) const;

 private:
  const nlohmann::json& at(const std::string& key) const;

  std::shared_ptr<const nlohmann::json> owner_;  // set when this object parsed the text
  const nlohmann::json* object_;
  std::string file_;
  std::string prefix_;
};

}  // namespace gizml::llm
