//===- EnergyTypes.cpp - Types of the energy dialect ----------------------===//
//
// The array type: construction from dim names, syntax `!energy.array<N, D>`.
//
//===----------------------------------------------------------------------===//

#include "energy/IR/EnergyTypes.h"
#include "energy/IR/EnergyDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::energy;

#define GET_TYPEDEF_CLASSES
#include "energy/IR/EnergyTypes.cpp.inc"

void EnergyDialect::registerTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "energy/IR/EnergyTypes.cpp.inc"
      >();
}

ArrayType ArrayType::get(MLIRContext *context, ArrayRef<StringRef> dims) {
  SmallVector<StringAttr> names;
  for (StringRef dim : dims)
    names.push_back(StringAttr::get(context, dim));
  return ArrayType::get(context, names);
}

ArrayType ArrayType::getScalar(MLIRContext *context) {
  return ArrayType::get(context, ArrayRef<StringAttr>{});
}

ArrayType ArrayType::dropFront(unsigned count) const {
  return ArrayType::get(getContext(), getShape().drop_front(count));
}

std::string ArrayType::shapeString() const {
  std::string text = "[";
  llvm::interleave(
      getShape(), [&](StringAttr dim) { text += dim.getValue().str(); },
      [&] { text += ", "; });
  return text + "]";
}

Type ArrayType::parse(AsmParser &parser) {
  SmallVector<StringAttr> dims;
  if (parser.parseLess())
    return {};
  if (succeeded(parser.parseOptionalGreater()))
    return ArrayType::get(parser.getContext(), dims);
  if (parser.parseCommaSeparatedList([&]() -> ParseResult {
        std::string name;
        if (parser.parseKeywordOrString(&name))
          return failure();
        dims.push_back(StringAttr::get(parser.getContext(), name));
        return success();
      }) ||
      parser.parseGreater())
    return {};
  return ArrayType::get(parser.getContext(), dims);
}

void ArrayType::print(AsmPrinter &printer) const {
  printer << '<';
  llvm::interleaveComma(getShape(), printer, [&](StringAttr dim) {
    printer.printKeywordOrString(dim.getValue());
  });
  printer << '>';
}
