// The names of the elementwise operations (gizml/ops.h), as errors and printed IR show them.
#include <gizml/ops.h>

namespace gizml::tensor {

const char* opName(UnaryOp op) {
  static const char* names[] = {"neg",     "abs",  "exp",      "log",       "sqrt",  "rsqrt", "sin",
                                "cos",     "tanh", "sigmoid",  "relu",      "silu",  "gelu",  "geluTanh",
                                "floor",   "ceil", "round",    "sign",      "not"};
  return names[static_cast<int>(op)];
}

const char* opName(BinaryOp op) {
  static const char* names[] = {"add", "sub", "mul", "div", "pow", "min", "max", "mod",
                                "eq",  "ne",  "lt",  "le",  "gt",  "ge",  "and", "or"};
  return names[static_cast<int>(op)];
}

}  // namespace gizml::tensor
