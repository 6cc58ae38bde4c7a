//===- DimDefaults.cpp - Sizes a model is planned at ----------------------===//
//
// The dims' defaults set from named sizes (DimDefaults.h).
//
//===----------------------------------------------------------------------===//

#include "energy/Transforms/DimDefaults.h"
#include "energy/IR/EnergyOps.h"

using namespace mlir;
using namespace mlir::energy;

LogicalResult
mlir::energy::setDimDefaults(ModuleOp module,
                             ArrayRef<std::pair<std::string, int64_t>> sizes,
                             UnsetDims unset, StringRef option) {
  for (const auto &entry : sizes) {
    StringRef name = entry.first;
    int64_t size = entry.second;
    std::string setting = (option + " " + name + "=" + Twine(size)).str();
    DimOp dim;
    module.walk([&](DimOp op) {
      if (op.getSymName() == name)
        dim = op;
    });
    if (unset == UnsetDims::Skipped && (size <= 0 || !dim || dim.getDerived()))
      continue;
    if (size <= 0)
      return emitError(module.getLoc())
             << setting << ": expected NAME=VALUE with a positive integer "
             << "VALUE";
    if (!dim)
      return emitError(module.getLoc())
             << setting << ": the model has no dim '" << name << "'";
    if (dim.getDerived())
      return dim.emitError() << setting << ": dim '" << name
                             << "' is derived from other dims and cannot be "
                                "set";
    dim.setDefaultValueAttr(
        IntegerAttr::get(IntegerType::get(module.getContext(), 64), size));
  }
  return success();
}
