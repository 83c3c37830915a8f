#pragma once
// multipart/form-data bodies (RFC 7578 on RFC 2046's multipart syntax), as POST /v1/images/edits
// takes its pictures: the boundary from the Content-Type, then each part's Content-Disposition
// name and filename, its Content-Type and its bytes. Bounded, and every malformed input a
// MultipartError saying what is wrong and where.
#include <gizml/error.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gizml::ai::multipart {

class MultipartError : public Error {
 public:
  using Error::Error;
};

/// One part of the form.
struct Part {
  std::string name;                     // Content-Disposition's name
  std::optional<std::string> filename;  // its filename, when the part is a file
  std::string contentType;              // the part's Content-Type; empty when absent (text/plain)
  std::string body;
};

struct Limits {
  size_t parts = 64;          // the most parts a body may hold
  size_t headerBytes = 4096;  // the most bytes of one part's header lines
};

/// The boundary parameter of a Content-Type of multipart/form-data (token or quoted string, 1 to
/// 70 characters as RFC 2046 allows). Another media type, or a missing or bad boundary, throws.
std::string boundary(std::string_view contentType);

/// The parts of body between its delimiters (--boundary, CRLF before each but the first,
/// --boundary-- last; preamble and epilogue skipped). Each part needs a Content-Disposition of
/// form-data with a name. Throws MultipartError naming the part (1-based) and what is wrong.
std::vector<Part> parse(std::string_view body, std::string_view boundary, const Limits& limits = {});

}  // namespace gizml::ai::multipart
