//===- ModelBuildTest.cpp - Building and verifying models in C++ ----------===//
//
// Unit tests that build energy models through the C++ API (as the front end
// does) and check what the verifier accepts and rejects.
//
//===----------------------------------------------------------------------===//

#include "energy/IR/EnergyDialect.h"
#include "energy/IR/EnergyOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include <doctest/doctest.h>

using namespace mlir;
using namespace mlir::energy;

namespace {
/// A model `m` with dims N, D and a state tensor x : [N, D], whose single
/// term reads x at (i) inside a sum over N and squares it.
struct SquaredNormModel {
  MLIRContext context;
  OwningOpRef<ModuleOp> module;
  ModelOp model;
  ReadOp read;

  explicit SquaredNormModel(StringRef readType) {
    context.loadDialect<EnergyDialect>();
    Location loc = UnknownLoc::get(&context);
    OpBuilder builder(&context);
    module = ModuleOp::create(loc);
    builder.setInsertionPointToEnd(module->getBody());
    model = ModelOp::create(builder, loc, "m");
    builder.setInsertionPointToEnd(&model.getBody().front());
    for (StringRef dim : {"N", "D"})
      DimOp::create(builder, loc, dim, IntegerAttr(), DimExprAttr());
    auto dimRef = [&](StringRef name) {
      return FlatSymbolRefAttr::get(&context, name);
    };
    TensorOp::create(builder, loc, "x", Role::state,
                     builder.getArrayAttr({dimRef("N"), dimRef("D")}),
                     InitKindAttr(), DenseF64ArrayAttr(), FlatSymbolRefAttr());
    auto term = TermOp::create(builder, loc, "e");
    Block *termBody = &term.getBody().emplaceBlock();
    builder.setInsertionPointToEnd(termBody);
    ArrayType scalar = ArrayType::getScalar(&context);
    auto sum = ReduceOp::create(
        builder, loc, scalar, ReduceKind::sum,
        builder.getArrayAttr({DimExprAttr::getDim(&context, "N")}), Value());
    Block *body = &sum.getBody().emplaceBlock();
    Value index = body->addArgument(builder.getIndexType(), loc);
    builder.setInsertionPointToEnd(body);
    AffineMap map = AffineMap::get(1, 0, builder.getAffineDimExpr(0));
    read =
        ReadOp::create(builder, loc, ArrayType::get(&context, {readType}),
                       dimRef("x"), AffineMapAttr::get(map), ValueRange{index});
    auto norm = ReduceElementsOp::create(builder, loc, ElementsKind::sqnorm,
                                         read.getResult());
    YieldOp::create(builder, loc, ValueRange{norm.getResult()});
    builder.setInsertionPointToEnd(termBody);
    YieldOp::create(builder, loc, ValueRange{sum.getResult()});
  }

  /// Verifies the module, returning the first error message (empty if none).
  std::string verifyMessage() {
    std::string message;
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
      if (message.empty())
        message = diag.str();
      return success();
    });
    return failed(verify(*module)) ? message : std::string();
  }
};
} // namespace

TEST_CASE("a well-formed model built in C++ verifies") {
  SquaredNormModel model("D");
  CHECK(model.verifyMessage().empty());
  CHECK(cast<ArrayType>(model.read.getType()).getRank() == 1);
  CHECK(cast<ArrayType>(model.read.getType()).shapeString() == "[D]");
}

TEST_CASE("a read whose type does not match its source is rejected") {
  // x[i] has shape [D]; declaring it [N] is an error naming both shapes.
  SquaredNormModel model("N");
  std::string message = model.verifyMessage();
  CHECK(message.find("reads @x as '!energy.array<N>'") != std::string::npos);
  CHECK(message.find("!energy.array<D>") != std::string::npos);
}

TEST_CASE("elementwise type inference broadcasts only scalars") {
  MLIRContext context;
  context.loadDialect<EnergyDialect>();
  ArrayType scalar = ArrayType::getScalar(&context);
  ArrayType vector = ArrayType::get(&context, {"D"});
  ArrayType matrix = ArrayType::get(&context, {"N", "D"});
  SmallVector<Type> types;
  CHECK(succeeded(inferBroadcastType(std::nullopt, scalar, vector, types)));
  CHECK(types.back() == vector);
  CHECK(succeeded(inferBroadcastType(std::nullopt, matrix, scalar, types)));
  CHECK(types.back() == matrix);
  CHECK(failed(inferBroadcastType(std::nullopt, matrix, vector, types)));
}
