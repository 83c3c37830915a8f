#include "llm/template/evaluator.h"

#include <cstdint>

#include "gizml/error.h"
#include "llm/template/builtins.h"

namespace gizml::llm::tmpl {

// Counts nesting of blocks, expressions and calls; hostile templates hit maxDepth, not the stack.
struct Evaluator::Depth {
  explicit Depth(Evaluator& ev) : ev(ev) {
    if (++ev.depth_ > ev.limits_.maxDepth) {
      --ev.depth_;
      throw Error("nesting deeper than " + std::to_string(ev.limits_.maxDepth) + " (runaway recursion?)");
    }
  }
  ~Depth() { --ev.depth_; }
  Evaluator& ev;
};

namespace {

// Makes `scope` current until the end of the C++ block.
struct ScopeGuard {
  ScopeGuard(std::shared_ptr<Scope>& current, std::shared_ptr<Scope> next) : current(current), saved(current) {
    current = std::move(next);
  }
  ~ScopeGuard() { current = saved; }
  std::shared_ptr<Scope>& current;
  std::shared_ptr<Scope> saved;
};

std::shared_ptr<Scope> childOf(const std::shared_ptr<Scope>& parent) {
  auto s = std::make_shared<Scope>();
  s->parent = parent;
  return s;
}

}  // namespace

Evaluator::Evaluator(const TemplateLimits& limits, const DictData& context)
    : limits_(limits), scope_(std::make_shared<Scope>()) {
  addGlobals(*this, scope_->vars, namespaces_);
  for (const auto& [name, value] : context.items) scope_->vars[name.toString()] = value;
}

Evaluator::~Evaluator() {
  for (const auto& weak : namespaces_)
    if (auto ns = weak.lock()) ns->attrs.items.clear();
}

std::string Evaluator::render(const Template& t) {
  std::string out;
  out_ = &out;
  execBody(t.body);
  out_ = nullptr;
  return out;
}

void Evaluator::step() {
  if (++steps_ > limits_.maxSteps) throw Error("more than " + std::to_string(limits_.maxSteps) + " steps");
}

void Evaluator::checkSize(std::size_t bytes) const {
  if (bytes > limits_.maxOutputBytes)
    throw Error("string longer than " + std::to_string(limits_.maxOutputBytes) + " bytes");
}

void Evaluator::checkItems(std::size_t n) const {
  if (n > limits_.maxItems) throw Error("list longer than " + std::to_string(limits_.maxItems) + " items");
}

void Evaluator::write(const std::string& text) {
  if (out_->size() + text.size() > limits_.maxOutputBytes)
    throw Error("output longer than " + std::to_string(limits_.maxOutputBytes) + " bytes");
  *out_ += text;
}

std::string Evaluator::capture(const Body& body) {
  std::string buffer;
  std::string* saved = out_;
  out_ = &buffer;
  try {
    execBody(body);
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return buffer;
}

Value Evaluator::lookup(const std::string& name) const {
  for (const Scope* s = scope_.get(); s; s = s->parent.get()) {
    const auto it = s->vars.find(name);
    if (it != s->vars.end()) return it->second;
  }
  return Value::undefined("'" + name + "' is undefined");
}

// ---------------------------------------------------------------- statements

Evaluator::Flow Evaluator::execBody(const Body& body) {
  Depth depth(*this);
  for (const StmtPtr& s : body) {
    const Flow flow = exec(*s);
    if (flow != Flow::Normal) return flow;
  }
  return Flow::Normal;
}

Evaluator::Flow Evaluator::exec(const Stmt& s) {
  try {
    switch (s.kind) {
      case StmtKind::Text: write(s.text); break;
      case StmtKind::Print: write(eval(*s.expr).toString()); break;
      case StmtKind::If:
        for (std::size_t i = 0; i < s.conds.size(); ++i)
          if (eval(*s.conds[i]).truthy()) return execBody(s.bodies[i]);
        return execBody(s.elseBody);
      case StmtKind::For: execFor(s); break;
      case StmtKind::Set: assign(*s.target, eval(*s.expr)); break;
      case StmtKind::SetBlock: {
        Value text = capture(s.body);
        assign(*s.target, s.expr ? applyFilterChain(*s.expr, text) : text);
        break;
      }
      case StmtKind::Macro: scope_->vars[s.text] = makeMacro(s.text, s.params, s.body); break;
      case StmtKind::CallBlock: execCallBlock(s); break;
      case StmtKind::FilterBlock: write(applyFilterChain(*s.expr, Value(capture(s.body))).toString()); break;
      case StmtKind::With: {
        auto inner = childOf(scope_);
        std::vector<Value> values;
        for (const auto& set : s.sets) values.push_back(eval(*set.second));
        ScopeGuard guard(scope_, inner);
        for (std::size_t i = 0; i < values.size(); ++i) assign(*s.sets[i].first, values[i]);
        return execBody(s.body);
      }
      case StmtKind::Break: return Flow::Break;
      case StmtKind::Continue: return Flow::Continue;
    }
  } catch (const TemplateError&) {
    throw;
  } catch (const Error& e) {
    throw TemplateError("chat template line " + std::to_string(s.line) + ": " + e.what());
  }
  return Flow::Normal;
}

void Evaluator::assign(const Expr& target, const Value& value) {
  if (target.kind == ExprKind::Name) {
    scope_->vars[target.name] = value;
  } else if (target.kind == ExprKind::GetAttr) {
    const Value ns = lookup(target.a->name);
    if (!ns.isNamespace()) throw Error("cannot assign attribute on non-namespace object");
    ns.ns()->attrs.set(target.name, value);
  } else {  // a tuple of targets
    const std::vector<Value> values = iterate(value);
    if (values.size() != target.items.size())
      throw Error("cannot unpack " + std::to_string(values.size()) + " values into " +
                  std::to_string(target.items.size()) + " names");
    for (std::size_t i = 0; i < values.size(); ++i) assign(*target.items[i], values[i]);
  }
}

void Evaluator::execFor(const Stmt& s) {
  const Value iterable = eval(*s.expr);
  if (iterable.isNone()) throw Error("'NoneType' object is not iterable");
  std::vector<Value> items = iterate(iterable);
  const std::shared_ptr<Scope> outer = scope_;
  if (s.cond) {  // `for x in xs if cond` filters before loop.* counts
    std::vector<Value> kept;
    for (Value& item : items) {
      step();
      ScopeGuard guard(scope_, childOf(outer));
      assign(*s.target, item);
      if (eval(*s.cond).truthy()) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    execBody(s.elseBody);
    return;
  }
  const auto n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n; ++i) {
    step();
    ScopeGuard guard(scope_, childOf(outer));
    assign(*s.target, items[static_cast<std::size_t>(i)]);
    DictData loop;
    loop.items = {{"index", i + 1},          {"index0", i},        {"revindex", n - i},
                  {"revindex0", n - i - 1},  {"first", i == 0},    {"last", i == n - 1},
                  {"length", n},             {"depth", 1},         {"depth0", 0}};
    if (i > 0) loop.items.emplace_back("previtem", items[static_cast<std::size_t>(i - 1)]);
    if (i + 1 < n) loop.items.emplace_back("nextitem", items[static_cast<std::size_t>(i + 1)]);
    loop.items.emplace_back("cycle", std::make_shared<Callable>(Callable{"cycle", [i](Evaluator&, CallArgs& args) {
                              if (args.args.empty()) throw Error("no items for cycling given");
                              return args.args[static_cast<std::size_t>(i) % args.args.size()];
                            }}));
    scope_->vars["loop"] = Value(std::move(loop));
    if (execBody(s.body) == Flow::Break) break;
  }
}

std::shared_ptr<Callable> Evaluator::makeMacro(const std::string& name, const std::vector<Param>& params,
                                               const Body& body) {
  // The closure is weak: a macro stored in its own scope must not keep that scope alive.
  const std::weak_ptr<Scope> closure = scope_;
  return std::make_shared<Callable>(Callable{name, [this, closure, &params, &body, name](Evaluator&, CallArgs& args) {
    const std::shared_ptr<Scope> parent = closure.lock();
    if (!parent) throw Error("macro '" + name + "' called after its scope ended");
    auto frame = childOf(parent);
    std::vector<bool> bound(params.size(), false);
    std::vector<Value> varargs;
    for (std::size_t i = 0; i < args.args.size(); ++i) {
      if (i < params.size()) {
        frame->vars[params[i].name] = args.args[i];
        bound[i] = true;
      } else {
        varargs.push_back(args.args[i]);
      }
    }
    DictData kwargs;
    for (const auto& [key, value] : args.kwargs) {
      std::size_t p = 0;
      while (p < params.size() && params[p].name != key) ++p;
      if (p < params.size()) {
        if (bound[p]) throw Error("macro '" + name + "' got multiple values for argument '" + key + "'");
        frame->vars[key] = value;
        bound[p] = true;
      } else if (key == "caller") {
        frame->vars[key] = value;
      } else {
        kwargs.set(key, value);
      }
    }
    ScopeGuard guard(scope_, frame);
    for (std::size_t p = 0; p < params.size(); ++p)
      if (!bound[p])
        frame->vars[params[p].name] = params[p].defaultValue
                                          ? eval(*params[p].defaultValue)
                                          : Value::undefined("parameter '" + params[p].name + "' was not provided");
    frame->vars["varargs"] = Value::list(std::move(varargs), true);
    frame->vars["kwargs"] = Value(std::move(kwargs));
    return Value(capture(body));
  }});
}

void Evaluator::execCallBlock(const Stmt& s) {
  const Value callee = eval(*s.expr->a);
  CallArgs args = evalArgs(*s.expr);
  args.kwargs.emplace_back("caller", makeMacro("caller", s.params, s.body));
  write(call(callee, args).toString());
}

// ---------------------------------------------------------------- expressions

Value Evaluator::call(const Value& callee, CallArgs& args) {
  if (callee.isUndefined()) undefinedError(callee);
  if (!callee.isCallable()) throw Error("'" + callee.typeName() + "' object is not callable");
  step();
  Depth depth(*this);
  return callee.callable().call(*this, args);
}

CallArgs Evaluator::evalArgs(const Expr& e) {
  CallArgs args;
  for (const ExprPtr& item : e.items) args.args.push_back(eval(*item));
  for (const auto& [key, value] : e.kwargs) args.kwargs.emplace_back(key, eval(*value));
  return args;
}

Value Evaluator::applyFilter(const Expr& f, const Value& input) {
  // The parser lets unknown names through only where jinja2 resolves them when reached.
  const FilterFn fn = findFilter(f.name);
  if (!fn) throw Error("No filter named '" + f.name + "' found.");
  CallArgs args = evalArgs(f);
  return fn(*this, input, args);
}

Value Evaluator::applyFilterChain(const Expr& chain, const Value& input) {
  return applyFilter(chain, chain.a ? applyFilterChain(*chain.a, input) : input);
}

Value Evaluator::eval(const Expr& e) {
  Depth depth(*this);
  switch (e.kind) {
    case ExprKind::Const: return e.value;
    case ExprKind::Name: return lookup(e.name);
    case ExprKind::List:
    case ExprKind::Tuple: {
      std::vector<Value> items;
      for (const ExprPtr& item : e.items) items.push_back(eval(*item));
      return Value::list(std::move(items), e.kind == ExprKind::Tuple);
    }
    case ExprKind::Dict: {
      DictData dict;
      for (std::size_t i = 0; i + 1 < e.items.size(); i += 2) {
        Value key = eval(*e.items[i]);
        dict.set(std::move(key), eval(*e.items[i + 1]));
      }
      return Value(std::move(dict));
    }
    case ExprKind::Unary: {
      const Value v = eval(*e.a);
      if (e.name == "not") return !v.truthy();
      if (v.isUndefined()) undefinedError(v);
      if (v.isFloat()) return e.name == "-" ? -v.asDouble() : v.asDouble();
      if (v.isInt() || v.isBool()) {
        if (e.name == "+") return v.asInt();
        if (v.asInt() == INT64_MIN) throw Error("integer overflow");
        return -v.asInt();
      }
      throw Error("bad operand type for unary " + e.name + ": '" + v.typeName() + "'");
    }
    case ExprKind::Binary: {
      if (e.name == "and" || e.name == "or") {
        Value left = eval(*e.a);
        if (left.truthy() == (e.name == "or")) return left;
        return eval(*e.b);
      }
      const Value left = eval(*e.a);
      return binaryOp(*this, e.name, left, eval(*e.b));
    }
    case ExprKind::Compare: {
      Value left = eval(*e.items[0]);
      for (std::size_t i = 0; i < e.ops.size(); ++i) {
        Value right = eval(*e.items[i + 1]);
        if (!binaryOp(*this, e.ops[i], left, right).truthy()) return false;
        left = std::move(right);
      }
      return true;
    }
    case ExprKind::Cond:
      if (eval(*e.b).truthy()) return eval(*e.a);
      if (e.c) return eval(*e.c);
      return Value::undefined("the inline if-expression evaluated to false and no else section was defined");
    case ExprKind::GetAttr: return getAttr(eval(*e.a), e.name);
    case ExprKind::GetItem: {
      const Value obj = eval(*e.a);
      return getItem(obj, eval(*e.b));
    }
    case ExprKind::Slice: {
      const Value obj = eval(*e.a);
      const Value none{None{}};
      const Value start = e.b ? eval(*e.b) : none, stop = e.c ? eval(*e.c) : none, stride = e.d ? eval(*e.d) : none;
      // jinja2 folds a slice of constants at compile time through its getitem, which turns the
      // error of slicing a non-sequence into undefined; at run time the same slice raises.
      const auto constant = [](const ExprPtr& x) { return !x || x->kind == ExprKind::Const; };
      if (constant(e.a) && constant(e.b) && constant(e.c) && constant(e.d)) {
        try {
          return sliceOf(obj, start, stop, stride);
        } catch (const Error& err) {
          return Value::undefined(err.what());
        }
      }
      return sliceOf(obj, start, stop, stride);
    }
    case ExprKind::Call: {
      const Value callee = eval(*e.a);
      CallArgs args = evalArgs(e);
      return call(callee, args);
    }
    case ExprKind::Filter: return applyFilter(e, eval(*e.a));
    case ExprKind::Test: {
      const TestFn fn = findTest(e.name);
      if (!fn) throw Error("No test named '" + e.name + "' found.");
      const Value v = eval(*e.a);
      CallArgs args = evalArgs(e);
      return fn(*this, v, args);
    }
  }
  return Value();
}

}  // namespace gizml::llm::tmpl
