#include "llm/template/lexer.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "gizml/error.h"
#include "llm/template/text.h"

namespace gizml::llm::tmpl {

void syntaxError(int line, int column, const std::string& message) {
  throw Error("chat template line " + std::to_string(line) + ", column " + std::to_string(column) + ": " +
              message);
}

namespace {

bool isSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool isNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool isDigit(char c) { return c >= '0' && c <= '9'; }

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {
    for (std::size_t i = 0; i < src_.size(); ++i)
      if (src_[i] == '\n') lineStarts_.push_back(i + 1);
  }

  std::vector<Token> run() {
    bool lineStart = true;  // the next text begins a line (for lstrip_blocks)
    bool stripNext = false;  // a '-' modifier strips the whitespace that follows a tag
    while (pos_ < src_.size()) {
      const std::size_t open = findTagOpen(pos_);
      std::string text = src_.substr(pos_, open - pos_);
      const std::size_t textStart = pos_;
      if (stripNext) {
        const std::size_t keep = std::find_if_not(text.begin(), text.end(), isSpace) - text.begin();
        text.erase(0, keep);
        stripNext = false;
      }
      if (open == src_.size()) {
        emitText(text, textStart);
        break;
      }
      const char kind = src_[open + 1];
      const char modifier = open + 2 < src_.size() ? src_[open + 2] : '\0';
      if (modifier == '-') {
        while (!text.empty() && isSpace(text.back())) text.pop_back();
      } else if (modifier != '+' && kind != '{') {
        lstrip(text, lineStart);
      }
      emitText(text, textStart);
      pos_ = open + 2 + (modifier == '-' || modifier == '+' ? 1 : 0);
      char closeModifier = '\0';
      if (kind == '#') {
        closeModifier = skipComment(open);
      } else if (kind == '%' && isRawTag()) {
        closeModifier = lexRaw(open);
      } else {
        closeModifier = lexTag(kind, open);
      }
      stripNext = closeModifier == '-';
      if (closeModifier == '\0' && kind != '{' && pos_ < src_.size() && src_[pos_] == '\n') ++pos_;  // trim_blocks
      lineStart = pos_ > 0 && src_[pos_ - 1] == '\n';
    }
    tokens_.push_back(make(Tok::End, "", src_.size()));
    return std::move(tokens_);
  }

 private:
  std::size_t findTagOpen(std::size_t from) const {
    for (std::size_t i = from; i + 1 < src_.size(); ++i)
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    return src_.size();
  }

  // lstrip_blocks: spaces and tabs between the line start and a block tag go.
  static void lstrip(std::string& text, bool lineStart) {
    const std::size_t nl = text.rfind('\n');
    const std::size_t from = nl == std::string::npos ? 0 : nl + 1;
    if (nl == std::string::npos && !lineStart) return;
    if (text.find_first_not_of(" \t", from) == std::string::npos) text.erase(from);
  }

  void emitText(const std::string& text, std::size_t offset) {
    if (!text.empty()) tokens_.push_back(make(Tok::Text, text, offset));
  }

  Token make(Tok type, std::string text, std::size_t offset) const {
    Token t{type, std::move(text)};
    const auto it = std::upper_bound(lineStarts_.begin(), lineStarts_.end(), offset);
    t.line = static_cast<int>(it - lineStarts_.begin());
    t.column = static_cast<int>(offset - *(it - 1)) + 1;
    return t;
  }

  [[noreturn]] void fail(std::size_t offset, const std::string& message) const {
    const Token t = make(Tok::End, "", offset);
    syntaxError(t.line, t.column, message);
  }

  // Returns the close modifier ('-', '+' or '\0'); pos_ ends after the comment.
  char skipComment(std::size_t open) {
    const std::size_t close = src_.find("#}", pos_);
    if (close == std::string::npos) fail(open, "unterminated comment");
    pos_ = close + 2;
    return close > open + 2 && (src_[close - 1] == '-' || src_[close - 1] == '+') ? src_[close - 1] : '\0';
  }

  bool isRawTag() const {
    std::size_t i = pos_;
    while (i < src_.size() && isSpace(src_[i])) ++i;
    if (src_.compare(i, 3, "raw") != 0) return false;
    i += 3;
    while (i < src_.size() && isSpace(src_[i])) ++i;
    if (i < src_.size() && (src_[i] == '-' || src_[i] == '+')) ++i;
    return src_.compare(i, 2, "%}") == 0;
  }

  // {% raw %}...{% endraw %}: the body is text, only the tags' own modifiers apply.
  char lexRaw(std::size_t open) {
    std::size_t close = src_.find("%}", pos_);
    const char openClose = src_[close - 1] == '-' || src_[close - 1] == '+' ? src_[close - 1] : '\0';
    std::size_t bodyStart = close + 2;
    if (openClose == '-') {
      while (bodyStart < src_.size() && isSpace(src_[bodyStart])) ++bodyStart;
    } else if (openClose == '\0' && bodyStart < src_.size() && src_[bodyStart] == '\n') {
      ++bodyStart;
    }
    for (std::size_t search = bodyStart;;) {
      const std::size_t tag = src_.find("{%", search);
      if (tag == std::string::npos) fail(open, "missing endraw");
      std::size_t i = tag + 2;
      const bool minus = i < src_.size() && src_[i] == '-';
      if (minus || (i < src_.size() && src_[i] == '+')) ++i;
      while (i < src_.size() && isSpace(src_[i])) ++i;
      if (src_.compare(i, 6, "endraw") != 0) {
        search = tag + 2;
        continue;
      }
      i += 6;
      while (i < src_.size() && isSpace(src_[i])) ++i;
      char endModifier = '\0';
      if (i < src_.size() && (src_[i] == '-' || src_[i] == '+')) endModifier = src_[i++];
      if (src_.compare(i, 2, "%}") != 0) fail(tag, "malformed endraw tag");
      std::string body = src_.substr(bodyStart, tag - bodyStart);
      if (minus) {
        while (!body.empty() && isSpace(body.back())) body.pop_back();
      } else {
        lstrip(body, bodyStart > 0 && src_[bodyStart - 1] == '\n');
      }
      emitText(body, bodyStart);
      pos_ = i + 2;
      return endModifier;
    }
  }

  // Lexes the expression tokens of a {{ }} or {% %} tag; returns its close modifier.
  char lexTag(char kind, std::size_t open) {
    tokens_.push_back(make(kind == '{' ? Tok::VarBegin : Tok::BlockBegin, "", open));
    const char closer = kind == '{' ? '}' : '%';
    int depth = 0;  // brackets open: "}}" inside a dict literal does not end the tag
    while (true) {
      while (pos_ < src_.size() && isSpace(src_[pos_])) ++pos_;
      if (pos_ >= src_.size()) fail(open, kind == '{' ? "unterminated '{{'" : "unterminated '{%'");
      if (depth == 0) {
        for (const char mod : {'-', '+', '\0'}) {
          const std::string end = (mod ? std::string(1, mod) : "") + closer + "}";
          if (src_.compare(pos_, end.size(), end) == 0 && !(mod == '+' && kind == '{')) {
            tokens_.push_back(make(kind == '{' ? Tok::VarEnd : Tok::BlockEnd, "", pos_));
            pos_ += end.size();
            return mod;
          }
        }
      }
      const char c = src_[pos_];
      if (isNameStart(c)) {
        const std::size_t start = pos_;
        while (pos_ < src_.size() && (isNameStart(src_[pos_]) || isDigit(src_[pos_]))) ++pos_;
        tokens_.push_back(make(Tok::Name, src_.substr(start, pos_ - start), start));
      } else if (isDigit(c)) {
        lexNumber();
      } else if (c == '\'' || c == '"') {
        lexString();
      } else {
        static const char* const ops[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                                          ">", "=", "(", ")", "[", "]", "{", "}", ",", ".", ":", "|"};
        bool matched = false;
        for (const char* op : ops) {
          const std::size_t n = std::strlen(op);
          if (src_.compare(pos_, n, op) == 0) {
            if (n == 1 && std::strchr("([{", op[0])) ++depth;
            if (n == 1 && std::strchr(")]}", op[0]) && depth > 0) --depth;
            tokens_.push_back(make(Tok::Op, op, pos_));
            pos_ += n;
            matched = true;
            break;
          }
        }
        if (!matched) fail(pos_, std::string("unexpected character '") + c + "'");
      }
    }
  }

  void lexNumber() {
    const std::size_t start = pos_;
    std::string digits;
    bool isFloat = false;
    const auto eatDigits = [&] {
      while (pos_ < src_.size() && (isDigit(src_[pos_]) || (src_[pos_] == '_' && pos_ + 1 < src_.size() &&
                                                            isDigit(src_[pos_ + 1])))) {
        if (src_[pos_] != '_') digits += src_[pos_];
        ++pos_;
      }
    };
    eatDigits();
    if (pos_ + 1 < src_.size() && src_[pos_] == '.' && isDigit(src_[pos_ + 1])) {
      isFloat = true;
      digits += src_[pos_++];
      eatDigits();
    }
    if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      std::size_t i = pos_ + 1;
      if (i < src_.size() && (src_[i] == '+' || src_[i] == '-')) ++i;
      if (i < src_.size() && isDigit(src_[i])) {
        isFloat = true;
        digits += 'e';
        digits.append(src_, pos_ + 1, i - pos_ - 1);
        pos_ = i;
        eatDigits();
      }
    }
    Token t = make(isFloat ? Tok::Float : Tok::Int, src_.substr(start, pos_ - start), start);
    errno = 0;
    if (isFloat) {
      t.floatValue = std::strtod(digits.c_str(), nullptr);
    } else {
      t.intValue = std::strtoll(digits.c_str(), nullptr, 10);
      if (errno == ERANGE) fail(start, "integer literal too large");
    }
    tokens_.push_back(std::move(t));
  }

  // Python string literal escapes, as Jinja decodes them.
  void lexString() {
    const std::size_t start = pos_;
    const char quote = src_[pos_++];
    std::string value;
    while (true) {
      if (pos_ >= src_.size()) fail(start, "unterminated string");
      const char c = src_[pos_++];
      if (c == quote) break;
      if (c != '\\') {
        value += c;
        continue;
      }
      if (pos_ >= src_.size()) fail(start, "unterminated string");
      const char e = src_[pos_++];
      switch (e) {
        case 'n': value += '\n'; break;
        case 't': value += '\t'; break;
        case 'r': value += '\r'; break;
        case 'b': value += '\b'; break;
        case 'f': value += '\f'; break;
        case 'v': value += '\v'; break;
        case 'a': value += '\a'; break;
        case '0': case '1': case '2': case '3': case '4': case '5': case '6': case '7': {
          unsigned code = static_cast<unsigned>(e - '0');
          for (int i = 0; i < 2 && pos_ < src_.size() && src_[pos_] >= '0' && src_[pos_] <= '7'; ++i)
            code = code * 8 + static_cast<unsigned>(src_[pos_++] - '0');
          appendUtf8(value, code);
          break;
        }
        case 'x': case 'u': case 'U': {
          const int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          char32_t code = 0;
          for (int i = 0; i < n; ++i) {
            const char h = pos_ < src_.size() ? src_[pos_] : '\0';
            const int d = isDigit(h) ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
            if (d < 0) fail(pos_, "truncated \\" + std::string(1, e) + " escape");
            code = code * 16 + static_cast<char32_t>(d);
            ++pos_;
          }
          if (code > 0x10FFFF) fail(pos_, "illegal Unicode character");
          appendUtf8(value, code);
          break;
        }
        case '\n': break;  // a line continuation
        case '\\': case '\'': case '"': value += e; break;
        default: value += '\\', value += e;  // unknown escapes stay as written
      }
    }
    Token t = make(Tok::String, std::move(value), start);
    tokens_.push_back(std::move(t));
  }

  std::string src_;
  std::size_t pos_ = 0;
  std::vector<std::size_t> lineStarts_{0};
  std::vector<Token> tokens_;
};

// Jinja normalizes newlines and drops one trailing newline (keep_trailing_newline=False).
std::string normalize(const std::string& source) {
  std::string out;
  out.reserve(source.size());
  for (std::size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace

std::vector<Token> tokenize(const std::string& source) { return Lexer(normalize(source)).run(); }

}  // namespace gizml::llm::tmpl
