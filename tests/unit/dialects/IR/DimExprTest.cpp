//===- DimExprTest.cpp - Dim expressions: parse, print, evaluate ----------===//
//
// Unit tests of symbolic dim expressions, which size derived dims, index
// domains and step counts.
//
//===----------------------------------------------------------------------===//

#include "energy/IR/EnergyDialect.h"
#include "energy/IR/EnergyOps.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringMap.h"

#include <doctest/doctest.h>

using namespace mlir;
using namespace mlir::energy;

namespace {
DimExprAttr parse(MLIRContext &context, StringRef text) {
  return dyn_cast_or_null<DimExprAttr>(parseAttribute(text, &context));
}

std::string print(Attribute attr) {
  std::string text;
  llvm::raw_string_ostream os(text);
  attr.print(os);
  return text;
}

FailureOr<int64_t> evaluate(DimExprAttr attr,
                            const llvm::StringMap<int64_t> &values) {
  return attr.evaluate([&](StringRef name) -> std::optional<int64_t> {
    auto it = values.find(name);
    if (it == values.end())
      return std::nullopt;
    return it->second;
  });
}
} // namespace

TEST_CASE("dim expressions round-trip through their syntax") {
  MLIRContext context;
  context.loadDialect<EnergyDialect>();
  for (const char *text :
       {"#energy.dim<@T - 1>", "#energy.dim<@D / @H>", "#energy.dim<12>",
        "#energy.dim<@N * 2 + 1>", "#energy.dim<(@N + 1) / 2>"}) {
    DimExprAttr attr = parse(context, text);
    REQUIRE(attr);
    CHECK(print(attr) == text);
    CHECK(parse(context, print(attr)) == attr);
  }
}

TEST_CASE("dim expressions evaluate with exact division") {
  MLIRContext context;
  context.loadDialect<EnergyDialect>();
  llvm::StringMap<int64_t> dims{{"D", 256}, {"H", 4}, {"T", 10}, {"N", 7}};
  CHECK(*evaluate(parse(context, "#energy.dim<@D / @H>"), dims) == 64);
  CHECK(*evaluate(parse(context, "#energy.dim<@T - 1>"), dims) == 9);
  CHECK(*evaluate(parse(context, "#energy.dim<(@N + 1) / 2>"), dims) == 4);
  // 7 / 2 is not exact: an error when dims are bound, never a truncation.
  CHECK(failed(evaluate(parse(context, "#energy.dim<@N / 2>"), dims)));
  // A dim with no value cannot be evaluated.
  CHECK(failed(evaluate(parse(context, "#energy.dim<@K + 1>"), dims)));
}

TEST_CASE("single-dim expressions name their dim") {
  MLIRContext context;
  context.loadDialect<EnergyDialect>();
  CHECK(DimExprAttr::getDim(&context, "N").getDimName() == "N");
  CHECK(!parse(context, "#energy.dim<@N - 1>").getDimName());
  CHECK(!DimExprAttr::getConstant(&context, 3).getDimName());
}
