//===- Builtins.cpp - Builtin functions and their shape rules -------------===//
//
// The single table of builtin functions and the shape rule of each.
//
//===----------------------------------------------------------------------===//

#include "energy/Frontend/Builtins.h"

#include "llvm/ADT/STLExtras.h"

using namespace energy::frontend;

static const BuiltinFunction kBuiltins[] = {
    {"exp", BuiltinId::Exp, 1, ShapeRule::Elementwise},
    {"log", BuiltinId::Log, 1, ShapeRule::Elementwise},
    {"tanh", BuiltinId::Tanh, 1, ShapeRule::Elementwise},
    {"sigmoid", BuiltinId::Sigmoid, 1, ShapeRule::Elementwise},
    {"silu", BuiltinId::Silu, 1, ShapeRule::Elementwise},
    {"softplus", BuiltinId::Softplus, 1, ShapeRule::Elementwise},
    {"gelu", BuiltinId::Gelu, 1, ShapeRule::Elementwise},
    {"relu", BuiltinId::Relu, 1, ShapeRule::Elementwise},
    {"sqrt", BuiltinId::Sqrt, 1, ShapeRule::Elementwise},
    {"abs", BuiltinId::Abs, 1, ShapeRule::Elementwise},
    {"silu_int", BuiltinId::SiluInt, 1, ShapeRule::Elementwise},
    {"sum", BuiltinId::Sum, 1, ShapeRule::ReduceAll},
    {"mean", BuiltinId::Mean, 1, ShapeRule::ReduceAll},
    {"maxabs", BuiltinId::Maxabs, 1, ShapeRule::ReduceAll},
    {"lse", BuiltinId::Lse, 1, ShapeRule::ReduceAll},
    {"sqnorm", BuiltinId::Sqnorm, 1, ShapeRule::ReduceAll},
    {"norm", BuiltinId::Norm, 1, ShapeRule::ReduceAll},
    {"softmax", BuiltinId::Softmax, 1, ShapeRule::LastAxis},
    {"log_softmax", BuiltinId::LogSoftmax, 1, ShapeRule::LastAxis},
    {"rmsnorm", BuiltinId::Rmsnorm, 1, ShapeRule::LastAxis},
    {"layernorm", BuiltinId::Layernorm, 1, ShapeRule::LastAxis},
    {"softmax_rows", BuiltinId::SoftmaxRows, 1, ShapeRule::Rows},
    {"dot", BuiltinId::Dot, 2, ShapeRule::Dot},
    {"quad", BuiltinId::Quad, 2, ShapeRule::Quad},
    {"outer", BuiltinId::Outer, 2, ShapeRule::Outer},
    {"diag", BuiltinId::Diag, 1, ShapeRule::Diag},
    {"eye", BuiltinId::Eye, 1, ShapeRule::Eye},
    {"logdet", BuiltinId::Logdet, 1, ShapeRule::SquareToScalar},
    {"inverse", BuiltinId::Inverse, 1, ShapeRule::Square},
};

const BuiltinFunction *energy::frontend::lookupBuiltin(llvm::StringRef name) {
  for (const BuiltinFunction &function : kBuiltins)
    if (function.name == name)
      return &function;
  return nullptr;
}

static bool isSquareMatrix(const Shape &shape) {
  return shape.getRank() == 2 && shape.dims[0] == shape.dims[1];
}

std::optional<Shape>
energy::frontend::inferBuiltinShape(const BuiltinFunction &function,
                                    llvm::ArrayRef<Shape> args,
                                    std::string &error) {
  std::string name = "`" + function.name.str() + "`";
  auto expectation = [&](llvm::StringRef what, const Shape &got) {
    error = name + " expects " + what.str() + ", got " + got.str();
    return std::nullopt;
  };
  auto mismatch = [&](const Shape &lhs, const Shape &rhs) {
    error = "shape mismatch in " + name + ": " + lhs.str() + " vs " + rhs.str();
    return std::nullopt;
  };
  switch (function.rule) {
  case ShapeRule::Elementwise:
    return args[0];
  case ShapeRule::ReduceAll:
    if (args[0].isScalar())
      return expectation("a vector or matrix", args[0]);
    return Shape();
  case ShapeRule::LastAxis:
    if (args[0].isScalar())
      return expectation("a vector or matrix", args[0]);
    return args[0];
  case ShapeRule::Rows:
    if (args[0].getRank() != 2)
      return expectation("a matrix", args[0]);
    return args[0];
  case ShapeRule::Dot:
    if (args[0].getRank() != 1)
      return expectation("vectors", args[0]);
    if (args[1].getRank() != 1)
      return expectation("vectors", args[1]);
    if (args[0] != args[1])
      return mismatch(args[0], args[1]);
    return Shape();
  case ShapeRule::Quad:
    if (args[0].getRank() != 1)
      return expectation("a vector as its first argument", args[0]);
    if (args[1].getRank() != 2)
      return expectation("a matrix as its second argument", args[1]);
    if (args[1].dims[0] != args[0].dims[0] ||
        args[1].dims[1] != args[0].dims[0])
      return mismatch(args[0], args[1]);
    return Shape();
  case ShapeRule::Outer:
    if (args[0].getRank() != 1)
      return expectation("vectors", args[0]);
    if (args[1].getRank() != 1)
      return expectation("vectors", args[1]);
    return Shape({args[0].dims[0], args[1].dims[0]});
  case ShapeRule::Diag:
    if (args[0].getRank() != 1)
      return expectation("a vector", args[0]);
    return Shape({args[0].dims[0], args[0].dims[0]});
  case ShapeRule::Eye:
    return Shape({args[0].dims[0], args[0].dims[0]});
  case ShapeRule::SquareToScalar:
    if (!isSquareMatrix(args[0]))
      return expectation("a square matrix", args[0]);
    return Shape();
  case ShapeRule::Square:
    if (!isSquareMatrix(args[0]))
      return expectation("a square matrix", args[0]);
    return args[0];
  }
  return std::nullopt;
}
