#pragma once
// A field of this process's mapping that holds an address, from /proc/self/smaps.
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

namespace gizml::test {

/// The line of /proc/self/smaps starting with `field` ("VmFlags:", "Rss:") in the mapping that
/// holds address p ("" if none is found).
inline std::string smapsLine(const void* p, const std::string& field) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  std::ifstream smaps("/proc/self/smaps");
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> begin >> dash >> end && dash == '-') inside = begin <= address && address < end;
    if (inside && line.rfind(field, 0) == 0) return line;
  }
  return "";
}

}  // namespace gizml::test
