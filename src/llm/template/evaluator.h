#pragma once
// Renders a parsed template: scopes, statements, expressions, macros, and the limits that keep
// hostile templates bounded.
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "gizml/chat_template.h"
#include "gizml/error.h"
#include "llm/template/ast.h"

namespace gizml::llm::tmpl {

/// Variables of one block level: Jinja scopes for-loop iterations, macros, call and with blocks.
struct Scope {
  std::shared_ptr<Scope> parent;
  std::unordered_map<std::string, Value> vars;
};

class Evaluator {
 public:
  Evaluator(const TemplateLimits& limits, const DictData& context);
  ~Evaluator();
  std::string render(const Template& t);

  // ---- services for filters, tests and methods
  const TemplateLimits& limits() const { return limits_; }
  /// Counts one unit of work (an iteration, a call, a filtered item) against maxSteps.
  void step();
  /// Throws unless a string of n bytes / a list of n items is within the limits.
  void checkSize(std::size_t bytes) const;
  void checkItems(std::size_t n) const;
  Value call(const Value& callee, CallArgs& args);

 private:
  enum class Flow { Normal, Break, Continue };
  struct Depth;

  Flow execBody(const Body& body);
  Flow exec(const Stmt& s);
  void execFor(const Stmt& s);
  void execCallBlock(const Stmt& s);
  void assign(const Expr& target, const Value& value);
  std::string capture(const Body& body);
  void write(const std::string& text);

  Value eval(const Expr& e);
  Value applyFilter(const Expr& f, const Value& input);
  Value applyFilterChain(const Expr& chain, const Value& input);
  CallArgs evalArgs(const Expr& e);
  Value lookup(const std::string& name) const;
  std::shared_ptr<Callable> makeMacro(const std::string& name, const std::vector<Param>& params,
                                      const Body& body);

  const TemplateLimits& limits_;
  std::shared_ptr<Scope> scope_;
  std::string* out_ = nullptr;
  std::size_t steps_ = 0;
  int depth_ = 0;
  std::vector<std::weak_ptr<Namespace>> namespaces_;  // cleared at the end to break cycles
};

/// Errors that already carry their location (or are raise_exception's own message).
class TemplateError : public Error {
 public:
  using Error::Error;
};

}  // namespace gizml::llm::tmpl
