// The kernel tunings table and its folder: Tile::tune keeps what it measures here, and
// saveTunings/loadTunings keep the table in a folder as a text file (docs/tile.md, "Tuning").
#include "gpu/tunings.h"

#include <gizhw/gpu.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <utility>

namespace gizhw::gpu {

using gizml::check;

namespace tuning {
namespace {

constexpr size_t kMaxName = 200;
constexpr size_t kMaxKey = 4096;

bool isNameChar(char c, bool first) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (!first && c >= '0' && c <= '9');
}

// A value name's problem, or "" when it is a valid name.
std::string valueNameProblem(const std::string& name) {
  if (name.empty()) return "an empty value name";
  if (name.size() > kMaxName) return "a value name longer than " + std::to_string(kMaxName) + " characters";
  for (size_t i = 0; i < name.size(); ++i)
    if (!isNameChar(name[i], i == 0))
      return "value name \"" + name + "\" is not letters, digits and _ (starting with a letter or _)";
  return "";
}

// A kernel name's problem, or "".
std::string kernelNameProblem(const std::string& name) {
  if (name.empty()) return "an empty kernel name";
  if (name.size() > kMaxName) return "a kernel name longer than " + std::to_string(kMaxName) + " characters";
  for (char c : name)
    if (c <= ' ' || c > '~') return "kernel name \"" + name + "\" has a space or a character that is not printable ASCII";
  return "";
}

struct Table {
  std::mutex mutex;
  std::map<std::pair<std::string, std::string>, Values> kept;  // (name, key) -> configuration
  std::atomic<uint64_t> measured{0};
};

Table& table() {
  static Table instance;
  return instance;
}

}  // namespace

std::string text(const Values& config) {
  std::string out;
  for (const auto& [name, value] : config) {
    if (!out.empty()) out += ',';
    out += name + '=' + std::to_string(value);
  }
  return out;
}

void checkName(const std::string& name, const std::string& what) {
  const std::string problem = kernelNameProblem(name);
  check(problem.empty(), what + ": " + problem);
}

void checkConfig(const Values& config, const std::string& what) {
  for (const auto& [name, value] : config) {
    const std::string problem = valueNameProblem(name);
    check(problem.empty(), what + ": " + problem);
  }
}

std::string format(const std::vector<Entry>& entries) {
  std::string out = std::string(kHeader) + "\n";
  for (const Entry& e : entries) out += e.name + '\t' + e.key + '\t' + text(e.config) + '\n';
  return out;
}

std::vector<Entry> parse(const std::string& text, const std::string& file) {
  std::vector<Entry> entries;
  size_t at = 0, line = 0;
  bool header = false;
  while (at < text.size()) {
    const size_t end = std::min(text.find('\n', at), text.size());
    std::string row = text.substr(at, end - at);
    at = end + 1;
    ++line;
    if (!row.empty() && row.back() == '\r') row.pop_back();
    const auto fail = [&](const std::string& what) { throw Error(file + ":" + std::to_string(line) + ": " + what); };
    if (!header) {
      if (row != kHeader) fail("not a tunings file (the first line is not \"" + std::string(kHeader) + "\")");
      header = true;
      continue;
    }
    if (row.empty() || row[0] == '#') continue;
    const size_t tab1 = row.find('\t'), tab2 = tab1 == std::string::npos ? tab1 : row.find('\t', tab1 + 1);
    if (tab2 == std::string::npos || row.find('\t', tab2 + 1) != std::string::npos)
      fail("an entry is three fields separated by tabs: name, key, configuration");
    Entry e;
    e.name = row.substr(0, tab1);
    e.key = row.substr(tab1 + 1, tab2 - tab1 - 1);
    const std::string config = row.substr(tab2 + 1);
    if (std::string problem = kernelNameProblem(e.name); !problem.empty()) fail(problem);
    if (e.key.empty() || e.key.size() > kMaxKey) fail("an empty key or one longer than " + std::to_string(kMaxKey));
    for (char c : e.key)
      if (static_cast<unsigned char>(c) < ' ' || c == '\x7f') fail("a control character in the key");
    size_t from = 0;
    while (from < config.size()) {
      const size_t comma = std::min(config.find(',', from), config.size());
      const std::string item = config.substr(from, comma - from);
      from = comma + 1;
      if (comma == config.size() - 1) fail("the configuration ends with a comma");
      const size_t eq = item.find('=');
      if (eq == std::string::npos) fail("configuration item \"" + item + "\" is not name=value");
      const std::string name = item.substr(0, eq), number = item.substr(eq + 1);
      if (std::string problem = valueNameProblem(name); !problem.empty()) fail(problem);
      int64_t value = 0;
      const auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
      if (number.empty() || ec != std::errc() || ptr != number.data() + number.size())
        fail("the value of " + name + ", \"" + number + "\", is not a 64-bit integer");
      if (!e.config.emplace(name, value).second) fail("value " + name + " given twice");
    }
    entries.push_back(std::move(e));
  }
  if (!header) throw Error(file + ":1: not a tunings file (it is empty)");
  return entries;
}

std::optional<Values> kept(const std::string& name, const std::string& key) {
  Table& t = table();
  std::lock_guard lock(t.mutex);
  const auto it = t.kept.find({name, key});
  if (it == t.kept.end()) return std::nullopt;
  return it->second;
}

void keepMeasured(const std::string& name, const std::string& key, const Values& config) {
  Table& t = table();
  std::lock_guard lock(t.mutex);
  t.kept[{name, key}] = config;
  ++t.measured;
}

}  // namespace tuning

void saveTunings(const std::string& folder) {
  namespace fs = std::filesystem;
  std::vector<tuning::Entry> entries;
  {
    tuning::Table& t = tuning::table();
    std::lock_guard lock(t.mutex);
    for (const auto& [key, config] : t.kept) entries.push_back({key.first, key.second, config});
  }
  const std::string text = tuning::format(entries);
  std::error_code ec;
  fs::create_directories(folder, ec);
  check(!ec, "saveTunings: cannot make folder " + folder + ": " + ec.message());
  const fs::path path = fs::path(folder) / tuning::kFileName;
  fs::path temp = path;
  temp += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(std::random_device{}());
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    check(static_cast<bool>(out), "saveTunings: cannot write " + temp.string());
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.close();
    if (!out) {
      fs::remove(temp, ec);
      throw Error("saveTunings: writing " + temp.string() + " failed");
    }
  }
  fs::rename(temp, path, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(temp, ignored);
    throw Error("saveTunings: cannot rename " + temp.string() + " to " + path.string() + ": " + ec.message());
  }
}

size_t loadTunings(const std::string& folder) {
  namespace fs = std::filesystem;
  const fs::path path = fs::path(folder) / tuning::kFileName;
  std::error_code ec;
  if (!fs::exists(path, ec)) return 0;
  std::ifstream in(path, std::ios::binary);
  check(static_cast<bool>(in), "loadTunings: cannot read " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  check(!in.bad(), "loadTunings: reading " + path.string() + " failed");
  const std::vector<tuning::Entry> entries = tuning::parse(text.str(), path.string());
  tuning::Table& t = tuning::table();
  std::lock_guard lock(t.mutex);
  for (const tuning::Entry& e : entries) t.kept[{e.name, e.key}] = e.config;
  return entries.size();
}

void clearTunings() {
  tuning::Table& t = tuning::table();
  std::lock_guard lock(t.mutex);
  t.kept.clear();
}

uint64_t tuningsMeasured() { return tuning::table().measured.load(); }

std::string tuningsDirectory() {
  return (std::filesystem::path(kernelCacheDirectory()).parent_path() / "tunings").string();
}

}  // namespace gizhw::gpu
