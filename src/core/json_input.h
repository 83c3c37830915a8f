#pragma once
// JSON from outside the process (request bodies, tool-call arguments, model output, schemas,
// model files) parsed with a bound on its nesting, checked while it is read. nlohmann's parser
// is iterative, but what it builds is walked recursively afterwards (dump, copies, comparisons,
// our own walks, template values): bounding the depth first keeps every one of them shallow.
#include <gizml/error.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gizml {

/// Arrays and objects inside one another allowed in outside JSON: far beyond real requests and
/// files (a request's deepest part, a tool's JSON Schema, nests a few levels), far below what
/// the recursive walks could take on a small stack.
inline constexpr int kMaxJsonDepth = 64;

/// JSON nested deeper than the bound. path: where (tools[0].function.parameters.items..., its
/// first levels only).
class JsonTooDeep : public Error {
 public:
  JsonTooDeep(const std::string& path, int limit)
      : Error(path + ": nested deeper than " + std::to_string(limit) + " levels"), path(path), limit(limit) {}
  std::string path;
  int limit;
};

namespace detail {

// Follows the parse's containers, keys and indices so that the error can say where it is.
template <class Json>
class DepthBound {
 public:
  explicit DepthBound(int limit) : limit_(limit) {}
  bool operator()(int, typename Json::parse_event_t event, Json& parsed) {
    using Event = typename Json::parse_event_t;
    switch (event) {
      case Event::object_start:
      case Event::array_start:
        if (static_cast<int>(levels_.size()) >= limit_) throw JsonTooDeep(path(), limit_);
        levels_.push_back({event == Event::array_start, {}, 0});
        break;
      case Event::key:
        levels_.back().key = parsed.template get<std::string>();
        break;
      case Event::object_end:
      case Event::array_end:
        levels_.pop_back();
        nextItem();
        break;
      case Event::value:
        nextItem();
        break;
    }
    return true;
  }

 private:
  static constexpr size_t kPathLevels = 8;  // named in errors; "..." for the rest
  struct Level {
    bool array;
    std::string key;
    size_t index;
  };
  void nextItem() {
    if (!levels_.empty() && levels_.back().array) ++levels_.back().index;
  }
  std::string path() const {
    std::string out;
    for (size_t i = 0; i < levels_.size() && i < kPathLevels; ++i) {
      if (levels_[i].array) {
        out += '[';
        out += std::to_string(levels_[i].index);
        out += ']';
      } else {
        if (!out.empty()) out += '.';
        out += levels_[i].key;
      }
    }
    if (levels_.size() > kPathLevels) out += "...";
    return out.empty() ? "the value" : out;
  }
  int limit_;
  std::vector<Level> levels_;
};

}  // namespace detail

/// Parses text from outside. Throws JsonTooDeep past maxDepth levels, Json::parse_error when it
/// is not JSON.
template <class Json = nlohmann::ordered_json>
Json parseJson(std::string_view text, int maxDepth = kMaxJsonDepth) {
  detail::DepthBound<Json> bound(maxDepth);
  return Json::parse(text, [&bound](int depth, typename Json::parse_event_t event, Json& parsed) {
    return bound(depth, event, parsed);
  });
}

/// As parseJson, with no value when the text is not JSON or nests too deep (model output, where
/// such text is just text).
template <class Json = nlohmann::ordered_json>
std::optional<Json> tryParseJson(std::string_view text, int maxDepth = kMaxJsonDepth) {
  try {
    return parseJson<Json>(text, maxDepth);
  } catch (const typename Json::exception&) {
    return std::nullopt;
  } catch (const JsonTooDeep&) {
    return std::nullopt;
  }
}

}  // namespace gizml
