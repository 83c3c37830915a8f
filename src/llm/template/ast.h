#pragma once
// The syntax tree: one generic node type for expressions and one for statements, since most
// nodes are just a kind plus children.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "llm/template/value.h"

namespace gizml::llm::tmpl {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class ExprKind {
  Const,     // value
  Name,      // name
  List,      // items
  Tuple,     // items
  Dict,      // items: key, value, key, value, ...
  Unary,     // op ("not", "-", "+"), a
  Binary,    // op, a, b ("and", "or", "in", "not in", "==", "+", "~", ...)
  Cond,      // a if b else c (c may be null)
  GetAttr,   // a.name
  GetItem,   // a[b]
  Slice,     // a[b:c:d], each bound may be null
  Call,      // a(items, kwargs)
  Filter,    // a | name(items, kwargs); a is null at the head of a filter block's chain
  Test,      // a is name(items, kwargs)
  Compare,   // a chain like x < y <= z: operands in items, operators in ops
};

struct Expr {
  ExprKind kind;
  int line = 0;
  Value value;
  std::string name;  // name, operator, attribute, filter or test
  ExprPtr a, b, c, d;
  std::vector<ExprPtr> items;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
  int height = 1;  // of the subtree, bounded by the parser so evaluation cannot overflow the stack
};

struct Param {
  std::string name;
  ExprPtr defaultValue;  // may be null
};

enum class StmtKind {
  Text,         // text
  Print,        // expr
  If,           // conds[i] -> bodies[i]; elseBody
  For,          // targets in expr [if cond] body [else elseBody]
  Set,          // target = expr
  SetBlock,     // target, optional filter chain in expr, body
  Macro,        // text = name, params, body
  CallBlock,    // expr = the call, params = caller's, body
  FilterBlock,  // expr = filter chain, body
  With,         // targets/values in sets, body
  Break,
  Continue,
};

struct Stmt {
  StmtKind kind;
  int line = 0;
  std::string text;
  ExprPtr expr, target, cond;
  std::vector<ExprPtr> conds;
  std::vector<Body> bodies;
  Body body, elseBody;
  std::vector<Param> params;
  std::vector<std::pair<ExprPtr, ExprPtr>> sets;
};

struct Template {
  Body body;
};

}  // namespace gizml::llm::tmpl
