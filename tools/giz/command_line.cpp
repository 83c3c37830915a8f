#include "command_line.h"

#include <gizml/error.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

int usageReply(const char* usage, bool asked) {
  (asked ? std::cout : std::cerr) << usage << std::flush;
  return asked ? 0 : 2;
}

bool asksHelp(int argc, char** argv, int first) {
  for (int i = first; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") return true;
  }
  return false;
}

double parseNumber(const std::string& flag, const std::string& text) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size()) throw gizml::Error(flag + ": '" + text + "' is not a number");
  return value;
}

int64_t parseCount(const std::string& flag, const std::string& text) {
  const double v = parseNumber(flag, text);
  // 2^53: past it a double no longer holds every whole number.
  if (v != std::floor(v) || std::fabs(v) > 9007199254740992.0)
    throw gizml::Error(flag + ": '" + text + "' is not a whole number");
  return static_cast<int64_t>(v);
}

void requireOutputFolder(const std::string& flag, const std::string& path) {
  const std::filesystem::path parent = std::filesystem::absolute(std::filesystem::path(path)).parent_path();
  if (!std::filesystem::is_directory(parent)) throw gizml::Error(flag + " " + path + ": no folder " + parent.string());
}

uint64_t parseSeed(const std::string& flag, const std::string& text) {
  const int64_t s = parseCount(flag, text);
  if (s < 0) throw gizml::Error(flag + ": " + std::to_string(s) + " is below 0");
  return static_cast<uint64_t>(s);
}

void drawProgress(const char* label, int64_t done, int64_t total, double seconds) {
  constexpr int kWidth = 24;
  const int filled = static_cast<int>(kWidth * done / std::max<int64_t>(total, 1));
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kWidth, '.');
  std::fprintf(stderr, "\r%s [%s] %lld/%lld  %.2f s/step", label, bar.c_str(), static_cast<long long>(done),
               static_cast<long long>(total), seconds);
  if (done == total) std::fputc('\n', stderr);
  std::fflush(stderr);
}

std::string fileBytes(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw gizml::Error(flag + " " + path + ": cannot be read");
  return std::string(std::istreambuf_iterator<char>(in), {});
}

gizml::image::Image readPicture(const std::string& flag, const std::string& path) {
  const std::string bytes = fileBytes(flag, path);
  try {
    return gizml::image::decode({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()});
  } catch (const gizml::Error& e) {
    throw gizml::Error(flag + " " + path + ": " + e.what());
  }
}
