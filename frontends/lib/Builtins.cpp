//===- Builtins.cpp - Builtin functions and their shape rules -------------===//
//
// The shape rule of each function of the function table.
//
//===----------------------------------------------------------------------===//

#include "energy/Frontend/Builtins.h"

#include "llvm/ADT/STLExtras.h"

using namespace energy::frontend;

const BuiltinFunction *energy::frontend::lookupBuiltin(llvm::StringRef name) {
  return plugin::getFunctionTable().lookup(name);
}

static bool isSquareMatrix(const Shape &shape) {
  return shape.getRank() == 2 && shape.dims[0] == shape.dims[1];
}

std::optional<Shape>
energy::frontend::inferBuiltinShape(const BuiltinFunction &function,
                                    llvm::ArrayRef<Shape> args,
                                    std::string &error) {
  std::string name = "`" + function.name + "`";
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
  case ShapeRule::ElementwiseWithScalar:
    if (!args[1].isScalar())
      return expectation("a scalar as its second argument", args[1]);
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
