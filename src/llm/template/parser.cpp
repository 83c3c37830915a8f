#include "llm/template/parser.h"

#include <algorithm>
#include <initializer_list>
#include <string_view>

#include "llm/template/builtins.h"
#include "llm/template/lexer.h"

namespace gizml::llm::tmpl {
namespace {

constexpr int kMaxParseNesting = 100;  // blocks and parenthesised expressions inside each other
constexpr int kMaxTreeHeight = 256;    // also bounds left-leaning chains like 1+1+...+1

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  Template run() {
    Template t;
    std::string end;
    t.body = parseBody({}, end);
    if (!unknownNames_.empty()) {
      const UnknownName& first = unknownNames_.front();
      syntaxError(first.line, first.column, first.message);
    }
    return t;
  }

 private:
  // ---- token helpers
  const Token& cur() const { return toks_[p_]; }
  const Token& peek(std::size_t k = 1) const { return toks_[std::min(p_ + k, toks_.size() - 1)]; }
  bool isOp(std::string_view op) const { return cur().type == Tok::Op && cur().text == op; }
  bool isName(std::string_view name) const { return cur().type == Tok::Name && cur().text == name; }
  [[noreturn]] void fail(const std::string& message) const { syntaxError(cur().line, cur().column, message); }
  [[noreturn]] void unexpected(const std::string& wanted) const {
    std::string got;
    switch (cur().type) {
      case Tok::End: got = "end of template"; break;
      case Tok::BlockEnd: got = "end of statement block"; break;
      case Tok::VarEnd: got = "end of print statement"; break;
      case Tok::Text: got = "template text"; break;
      default: got = "'" + cur().text + "'";
    }
    fail("expected " + wanted + ", got " + got);
  }
  void expectOp(std::string_view op) {
    if (!isOp(op)) unexpected("'" + std::string(op) + "'");
    ++p_;
  }
  void expect(Tok type, const char* what) {
    if (cur().type != type) unexpected(what);
    ++p_;
  }
  std::string expectName() {
    if (cur().type != Tok::Name) unexpected("a name");
    return toks_[p_++].text;
  }

  // jinja2 resolves filter and test names when it compiles, except in an if statement's own
  // tests and bodies and in conditional expressions (its "soft frames"), where an unknown name
  // only fails when reached. Unknown names elsewhere are failures kept until the end of parsing.
  struct UnknownName {
    int line, column;
    std::string message;
  };
  void checkName(bool known, const char* kind, const std::string& name, int line, int column) {
    if (!known && !soft_) unknownNames_.push_back({line, column, std::string("No ") + kind + " named '" + name + "'"});
  }
  struct Soft {
    Soft(Parser& p, bool soft) : p(p), saved(std::exchange(p.soft_, soft)) {}
    ~Soft() { p.soft_ = saved; }
    Parser& p;
    bool saved;
  };

  struct Nest {
    explicit Nest(Parser& p) : p(p) {
      if (++p.nesting_ > kMaxParseNesting) p.fail("nesting deeper than " + std::to_string(kMaxParseNesting));
    }
    ~Nest() { --p.nesting_; }
    Parser& p;
  };

  ExprPtr node(ExprKind kind, int line, std::string name = {}, ExprPtr a = {}, ExprPtr b = {}, ExprPtr c = {}) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    e->name = std::move(name);
    e->a = std::move(a);
    e->b = std::move(b);
    e->c = std::move(c);
    return e;
  }
  // Sets e's height from its children once they are all attached.
  ExprPtr seal(ExprPtr e) {
    int h = 0;
    for (const ExprPtr* child : {&e->a, &e->b, &e->c, &e->d})
      if (*child) h = std::max(h, (*child)->height);
    for (const auto& item : e->items)
      if (item) h = std::max(h, item->height);
    for (const auto& kw : e->kwargs) h = std::max(h, kw.second->height);
    e->height = h + 1;
    if (e->height > kMaxTreeHeight) fail("expression nested deeper than " + std::to_string(kMaxTreeHeight));
    return e;
  }
  ExprPtr make(ExprKind kind, int line, std::string name = {}, ExprPtr a = {}, ExprPtr b = {}, ExprPtr c = {}) {
    return seal(node(kind, line, std::move(name), std::move(a), std::move(b), std::move(c)));
  }

  // ---- statements
  // Parses until a block tag named in `ends`; leaves p_ after that tag's name.
  Body parseBody(std::initializer_list<std::string_view> ends, std::string& endFound) {
    Nest nest(*this);
    Body body;
    while (true) {
      const Token& t = cur();
      if (t.type == Tok::End) {
        if (ends.size() == 0) return body;
        fail("missing '" + std::string(*(ends.end() - 1)) + "'");
      }
      if (t.type == Tok::Text) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::Text;
        s->line = t.line;
        s->text = t.text;
        body.push_back(std::move(s));
        ++p_;
      } else if (t.type == Tok::VarBegin) {
        ++p_;
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::Print;
        s->line = t.line;
        s->expr = parseTuple();
        expect(Tok::VarEnd, "'}}'");
        body.push_back(std::move(s));
      } else if (t.type == Tok::BlockBegin) {
        ++p_;
        if (cur().type != Tok::Name) unexpected("a statement name");
        if (std::find(ends.begin(), ends.end(), cur().text) != ends.end()) {
          endFound = toks_[p_++].text;
          return body;
        }
        body.push_back(parseStatement());
      } else {
        unexpected("template text or a tag");
      }
    }
  }

  void endTag() { expect(Tok::BlockEnd, "'%}'"); }

  StmtPtr parseStatement() {
    auto s = std::make_unique<Stmt>();
    s->line = cur().line;
    const std::string tag = expectName();
    std::string end;
    if (tag == "if") {
      Soft soft(*this, true);
      s->kind = StmtKind::If;
      s->conds.push_back(parseExpression());
      endTag();
      while (true) {
        s->bodies.push_back(parseBody({"elif", "else", "endif"}, end));
        if (end == "elif") {
          s->conds.push_back(parseExpression());
          endTag();
          continue;
        }
        endTag();
        if (end == "else") {
          s->elseBody = parseBody({"endif"}, end);
          endTag();
        }
        break;
      }
    } else if (tag == "for") {
      s->kind = StmtKind::For;
      s->target = parseTarget(false);
      if (!isName("in")) unexpected("'in'");
      ++p_;
      s->expr = parseTuple(false);
      Soft inner(*this, false);
      if (isName("if")) {
        ++p_;
        s->cond = parseExpression();
      }
      if (isName("recursive")) fail("recursive loops are not supported");
      endTag();
      ++loops_;
      s->body = parseBody({"else", "endfor"}, end);
      --loops_;
      endTag();
      if (end == "else") {
        s->elseBody = parseBody({"endfor"}, end);
        endTag();
      }
    } else if (tag == "set") {
      s->target = parseTarget(true);
      if (isOp("=")) {
        ++p_;
        s->kind = StmtKind::Set;
        s->expr = parseTuple();
        endTag();
      } else {
        s->kind = StmtKind::SetBlock;
        Soft inner(*this, false);
        if (s->target->kind != ExprKind::Name) fail("a block set assigns one name");
        if (isOp("|")) s->expr = parseFilterChain();
        endTag();
        s->body = parseBody({"endset"}, end);
        endTag();
      }
    } else if (tag == "macro") {
      s->kind = StmtKind::Macro;
      Soft inner(*this, false);
      s->text = expectName();
      s->params = parseParams();
      endTag();
      const int outerLoops = std::exchange(loops_, 0);
      s->body = parseBody({"endmacro"}, end);
      loops_ = outerLoops;
      if (cur().type == Tok::Name) ++p_;  // {% endmacro name %}
      endTag();
    } else if (tag == "call") {
      s->kind = StmtKind::CallBlock;
      if (isOp("(")) s->params = parseParams();
      s->expr = parseExpression();
      if (s->expr->kind != ExprKind::Call) fail("expected a call after 'call'");
      endTag();
      Soft inner(*this, false);
      const int outerLoops = std::exchange(loops_, 0);
      s->body = parseBody({"endcall"}, end);
      loops_ = outerLoops;
      endTag();
    } else if (tag == "filter") {
      s->kind = StmtKind::FilterBlock;
      Soft inner(*this, false);
      s->expr = parseFilterChain();
      endTag();
      s->body = parseBody({"endfilter"}, end);
      endTag();
    } else if (tag == "with" || tag == "generation") {
      // transformers' {% generation %} only marks assistant text; it renders its body.
      s->kind = StmtKind::With;
      while (tag == "with" && cur().type != Tok::BlockEnd) {
        if (!s->sets.empty()) expectOp(",");
        ExprPtr target = parseTarget(false);
        expectOp("=");
        s->sets.emplace_back(std::move(target), parseExpression());
      }
      endTag();
      Soft inner(*this, false);
      // {% generation %} is a call block in transformers: its body is a macro's, outside any loop.
      const int outerLoops = tag == "generation" ? std::exchange(loops_, 0) : loops_;
      s->body = parseBody({tag == "with" ? "endwith" : "endgeneration"}, end);
      loops_ = outerLoops;
      endTag();
    } else if (tag == "break" || tag == "continue") {
      if (loops_ == 0) fail("'" + tag + "' outside of a loop");
      s->kind = tag == "break" ? StmtKind::Break : StmtKind::Continue;
      endTag();
    } else {
      --p_;
      fail("unknown or unsupported tag '" + tag + "'");
    }
    return s;
  }

  // Macro and caller parameters: (a, b=default, ...).
  std::vector<Param> parseParams() {
    std::vector<Param> params;
    expectOp("(");
    while (!isOp(")")) {
      if (!params.empty()) expectOp(",");
      if (isOp(")")) break;
      Param param{expectName(), nullptr};
      if (isOp("=")) {
        ++p_;
        param.defaultValue = parseExpression();
      }
      params.push_back(std::move(param));
    }
    ++p_;
    return params;
  }

  // A name, a tuple of names, or (for set) name.attribute.
  ExprPtr parseTarget(bool allowAttr) {
    const int line = cur().line;
    const auto one = [&]() -> ExprPtr {
      if (isOp("(")) {
        ++p_;
        ExprPtr t = parseTarget(false);
        expectOp(")");
        return t;
      }
      ExprPtr name = make(ExprKind::Name, cur().line, expectName());
      if (allowAttr && isOp(".")) {
        ++p_;
        return make(ExprKind::GetAttr, line, expectName(), std::move(name));
      }
      return name;
    };
    ExprPtr first = one();
    if (!isOp(",")) return first;
    auto tuple = node(ExprKind::Tuple, line);
    tuple->items.push_back(std::move(first));
    while (isOp(",")) {
      ++p_;
      if (cur().type != Tok::Name && !isOp("(")) break;
      tuple->items.push_back(one());
    }
    for (const auto& item : tuple->items)
      if (item->kind == ExprKind::GetAttr) fail("cannot unpack into an attribute");
    return seal(std::move(tuple));
  }

  // ---- expressions
  // An expression, or a tuple when commas follow (as in {{ a, b }} and set x = a, b).
  ExprPtr parseTuple(bool condExpr = true) {
    const int line = cur().line;
    ExprPtr first = condExpr ? parseExpression() : parseOr();
    if (!isOp(",")) return first;
    auto tuple = node(ExprKind::Tuple, line);
    tuple->items.push_back(std::move(first));
    while (isOp(",")) {
      ++p_;
      if (cur().type == Tok::BlockEnd || cur().type == Tok::VarEnd || isOp(")") || isName("if")) break;
      tuple->items.push_back(condExpr ? parseExpression() : parseOr());
    }
    return seal(std::move(tuple));
  }

  ExprPtr parseExpression() {
    Nest nest(*this);
    const int line = cur().line;
    const std::size_t unknownBefore = unknownNames_.size();
    ExprPtr expr = parseOr();
    // A conditional expression is soft throughout, its first operand too.
    if (isName("if")) unknownNames_.resize(unknownBefore);
    while (isName("if")) {
      Soft soft(*this, true);
      ++p_;
      ExprPtr cond = parseOr();
      ExprPtr otherwise;
      if (isName("else")) {
        ++p_;
        otherwise = parseExpression();
      }
      expr = make(ExprKind::Cond, line, {}, std::move(expr), std::move(cond), std::move(otherwise));
    }
    return expr;
  }

  // jinja2 folds `false and x` and `true or x` to a constant before compiling, so unknown names
  // in x never fail.
  ExprPtr shortCircuit(const std::string& op, ExprPtr left, ExprPtr (Parser::*next)()) {
    const std::size_t unknownBefore = unknownNames_.size();
    const int line = toks_[p_++].line;
    ExprPtr right = (this->*next)();
    if (left->kind == ExprKind::Const && left->value.truthy() == (op == "or")) unknownNames_.resize(unknownBefore);
    return make(ExprKind::Binary, line, op, std::move(left), std::move(right));
  }

  ExprPtr parseOr() {
    ExprPtr left = parseAnd();
    while (isName("or")) left = shortCircuit("or", std::move(left), &Parser::parseAnd);
    return left;
  }

  ExprPtr parseAnd() {
    ExprPtr left = parseNot();
    while (isName("and")) left = shortCircuit("and", std::move(left), &Parser::parseNot);
    return left;
  }

  ExprPtr parseNot() {
    if (isName("not")) {
      Nest nest(*this);
      const int line = toks_[p_++].line;
      return make(ExprKind::Unary, line, "not", parseNot());
    }
    return parseCompare();
  }

  ExprPtr parseCompare() {
    const int line = cur().line;
    ExprPtr first = parseMath1();
    std::vector<std::string> ops;
    std::vector<ExprPtr> operands;
    while (true) {
      std::string op;
      if (cur().type == Tok::Op && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                    cur().text == ">" || cur().text == "<=" || cur().text == ">=")) {
        op = toks_[p_++].text;
      } else if (isName("in")) {
        ++p_;
        op = "in";
      } else if (isName("not") && peek().type == Tok::Name && peek().text == "in") {
        p_ += 2;
        op = "not in";
      } else {
        break;
      }
      ops.push_back(op);
      operands.push_back(parseMath1());
    }
    if (ops.empty()) return first;
    if (ops.size() == 1) return make(ExprKind::Binary, line, ops[0], std::move(first), std::move(operands[0]));
    auto chain = node(ExprKind::Compare, line);
    chain->items.push_back(std::move(first));
    for (auto& operand : operands) chain->items.push_back(std::move(operand));
    chain->ops = std::move(ops);
    return seal(std::move(chain));
  }

  template <typename Next>
  ExprPtr parseLeftAssoc(std::initializer_list<std::string_view> ops, Next next) {
    ExprPtr left = (this->*next)();
    while (cur().type == Tok::Op && std::find(ops.begin(), ops.end(), cur().text) != ops.end()) {
      const Token& op = toks_[p_++];
      left = make(ExprKind::Binary, op.line, op.text, std::move(left), (this->*next)());
    }
    return left;
  }
  ExprPtr parseMath1() { return parseLeftAssoc({"+", "-"}, &Parser::parseConcat); }
  ExprPtr parseConcat() { return parseLeftAssoc({"~"}, &Parser::parseMath2); }
  ExprPtr parseMath2() { return parseLeftAssoc({"*", "/", "//", "%"}, &Parser::parsePow); }
  ExprPtr parsePow() { return parseLeftAssoc({"**"}, &Parser::parseUnaryWithFilters); }
  ExprPtr parseUnaryWithFilters() { return parseUnary(true); }

  ExprPtr parseUnary(bool withFilter) {
    Nest nest(*this);
    const int line = cur().line;
    ExprPtr expr;
    if (isOp("-") || isOp("+")) {
      const std::string op = toks_[p_++].text;
      expr = make(ExprKind::Unary, line, op, parseUnary(false));
    } else {
      expr = parsePrimary();
    }
    expr = parsePostfix(std::move(expr));
    return withFilter ? parseFilterExpr(std::move(expr)) : std::move(expr);
  }

  ExprPtr constant(Value v, int line) {
    ExprPtr e = make(ExprKind::Const, line);
    e->value = std::move(v);
    return e;
  }

  ExprPtr parsePrimary() {
    const Token& t = cur();
    const int line = t.line;
    switch (t.type) {
      case Tok::Name: {
        ++p_;
        if (t.text == "true" || t.text == "True") return constant(Value(true), line);
        if (t.text == "false" || t.text == "False") return constant(Value(false), line);
        if (t.text == "none" || t.text == "None") return constant(Value(None{}), line);
        return make(ExprKind::Name, line, t.text);
      }
      case Tok::String: {
        std::string s;
        while (cur().type == Tok::String) s += toks_[p_++].text;  // adjacent literals join
        return constant(Value(std::move(s)), line);
      }
      case Tok::Int: ++p_; return constant(Value(t.intValue), line);
      case Tok::Float: ++p_; return constant(Value(t.floatValue), line);
      case Tok::Op:
        if (t.text == "(") {
          ++p_;
          if (isOp(")")) {
            ++p_;
            return seal(node(ExprKind::Tuple, line));
          }
          ExprPtr inner = parseTuple();
          expectOp(")");
          return inner;
        }
        if (t.text == "[") {
          ++p_;
          auto list = node(ExprKind::List, line);
          while (!isOp("]")) {
            if (!list->items.empty()) expectOp(",");
            if (isOp("]")) break;
            list->items.push_back(parseExpression());
          }
          ++p_;
          return seal(std::move(list));
        }
        if (t.text == "{") {
          ++p_;
          auto dict = node(ExprKind::Dict, line);
          while (!isOp("}")) {
            if (!dict->items.empty()) expectOp(",");
            if (isOp("}")) break;
            dict->items.push_back(parseExpression());
            expectOp(":");
            dict->items.push_back(parseExpression());
          }
          ++p_;
          return seal(std::move(dict));
        }
        break;
      default: break;
    }
    unexpected("an expression");
  }

  ExprPtr parsePostfix(ExprPtr expr) {
    while (true) {
      const int line = cur().line;
      if (isOp(".")) {
        ++p_;
        if (cur().type == Tok::Int) {
          ExprPtr index = constant(Value(toks_[p_++].intValue), line);
          expr = make(ExprKind::GetItem, line, {}, std::move(expr), std::move(index));
        } else {
          expr = make(ExprKind::GetAttr, line, expectName(), std::move(expr));
        }
      } else if (isOp("[")) {
        ++p_;
        expr = parseSubscript(std::move(expr), line);
      } else if (isOp("(")) {
        expr = parseCall(std::move(expr));
      } else {
        return expr;
      }
    }
  }

  ExprPtr parseSubscript(ExprPtr target, int line) {
    ExprPtr start, stop, step;
    if (!isOp(":")) {
      start = parseExpression();
      if (isOp("]")) {
        ++p_;
        return make(ExprKind::GetItem, line, {}, std::move(target), std::move(start));
      }
    }
    expectOp(":");
    if (!isOp("]") && !isOp(":")) stop = parseExpression();
    if (isOp(":")) {
      ++p_;
      if (!isOp("]")) step = parseExpression();
    }
    expectOp("]");
    auto slice = node(ExprKind::Slice, line, {}, std::move(target), std::move(start), std::move(stop));
    slice->d = std::move(step);
    return seal(std::move(slice));
  }

  // Arguments in parentheses, into e->items and e->kwargs.
  void parseArgs(Expr& e) {
    expectOp("(");
    while (!isOp(")")) {
      if (!e.items.empty() || !e.kwargs.empty()) expectOp(",");
      if (isOp(")")) break;
      if (isOp("*") || isOp("**")) fail("*args and **kwargs in calls are not supported");
      if (cur().type == Tok::Name && peek().type == Tok::Op && peek().text == "=") {
        std::string name = toks_[p_].text;
        p_ += 2;
        e.kwargs.emplace_back(std::move(name), parseExpression());
      } else {
        if (!e.kwargs.empty()) fail("positional argument after keyword argument");
        e.items.push_back(parseExpression());
      }
    }
    ++p_;
  }

  ExprPtr parseCall(ExprPtr callee) {
    auto call = node(ExprKind::Call, cur().line, {}, std::move(callee));
    parseArgs(*call);
    return seal(std::move(call));
  }

  std::string dottedName() {
    std::string name = expectName();
    while (isOp(".")) {
      ++p_;
      name += '.';
      name += expectName();
    }
    return name;
  }

  ExprPtr parseFilter(ExprPtr input) {
    auto f = node(ExprKind::Filter, cur().line, {}, std::move(input));
    const Token at = cur();
    f->name = dottedName();
    checkName(findFilter(f->name) != nullptr, "filter", f->name, at.line, at.column);
    if (isOp("(")) parseArgs(*f);
    return seal(std::move(f));
  }

  // "| f | g(...)" with no input: the head of a filter block or block set.
  ExprPtr parseFilterChain() {
    if (isOp("|")) ++p_;
    ExprPtr chain = parseFilter(nullptr);
    while (isOp("|")) {
      ++p_;
      chain = parseFilter(std::move(chain));
    }
    return chain;
  }

  ExprPtr parseFilterExpr(ExprPtr expr) {
    while (true) {
      if (isOp("|")) {
        ++p_;
        expr = parseFilter(std::move(expr));
      } else if (isName("is")) {
        const int line = toks_[p_++].line;
        const bool negated = isName("not");
        if (negated) ++p_;
        auto test = node(ExprKind::Test, line, {}, std::move(expr));
        const Token at = cur();
        test->name = dottedName();
        checkName(findTest(test->name) != nullptr, "test", test->name, at.line, at.column);
        const Tok next = cur().type;
        if (isOp("(")) {
          parseArgs(*test);
        } else if ((next == Tok::Name || next == Tok::String || next == Tok::Int || next == Tok::Float ||
                    isOp("[") || isOp("{")) &&
                   !isName("else") && !isName("or") && !isName("and")) {
          if (isName("is")) fail("cannot chain tests with 'is'");
          test->items.push_back(parsePostfix(parsePrimary()));
        }
        expr = seal(std::move(test));
        if (negated) expr = make(ExprKind::Unary, line, "not", std::move(expr));
      } else if (isOp("(")) {
        expr = parseCall(std::move(expr));
      } else {
        return expr;
      }
    }
  }

  std::vector<Token> toks_;
  std::size_t p_ = 0;
  int nesting_ = 0;
  int loops_ = 0;
  bool soft_ = false;
  std::vector<UnknownName> unknownNames_;
};

}  // namespace

std::shared_ptr<const Template> parseTemplate(const std::string& source) {
  return std::make_shared<const Template>(Parser(tokenize(source)).run());
}

}  // namespace gizml::llm::tmpl
