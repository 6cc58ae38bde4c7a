//===- PluginCalls.cpp - Kernels calling plugins' run-time code -----------===//
//
// A plugin's element-wise function, similarity or aggregation runs as its
// run-time code (RuntimeCode.h), called through a pointer slot of the
// artifact that the runtime fills when it loads the plugin's library.
//
//===----------------------------------------------------------------------===//

#include "KernelLowering.h"
#include "energy/IR/PluginCode.h"
#include "energy/Plugin/FunctionTable.h"
#include "energy/Runtime/ArtifactABI.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::energy;
using namespace mlir::energy::codegen;
namespace plugin = ::energy::plugin;

namespace {
class PluginCallLowering : public KernelLowering {
public:
  explicit PluginCallLowering(KernelLowering &kernel)
      : KernelLowering(kernel) {}

  /// A plugin's function or aggregation: a call of its run-time code
  /// through the artifact's pointer slot.
  FailureOr<Lowered> emitPluginOp(Operation *op);

private:
  Value callPluginCode(StringRef symbol, Type result, ValueRange arguments);
  /// `value` as doubles: itself in f64 kernels, a converted copy in f32.
  Value asDoubles(Lowered value, Value count);
  /// Doubles back as the kernel's elements (in place in f64 kernels).
  Value fromDoubles(Value doubles, Value count);
};
} // namespace

Value PluginCallLowering::callPluginCode(StringRef symbol, Type result,
                                         ValueRange arguments) {
  std::string slot = (ENERGY_ARTIFACT_PLUGIN_SLOT_PREFIX + symbol).str();
  auto global = context.target.lookupSymbol<LLVM::GlobalOp>(slot);
  if (!global) {
    OpBuilder top = OpBuilder::atBlockBegin(context.target.getBody());
    global = LLVM::GlobalOp::create(top, loc, pointerType(),
                                    /*isConstant=*/false,
                                    LLVM::Linkage::External, slot, Attribute());
    Block *init = top.createBlock(&global.getInitializerRegion());
    top.setInsertionPointToStart(init);
    LLVM::ReturnOp::create(top, loc,
                           LLVM::ZeroOp::create(top, loc, pointerType()));
  }
  Value address = LLVM::LoadOp::create(
      b, loc, pointerType(), LLVM::AddressOfOp::create(b, loc, global));
  SmallVector<Type> types;
  for (Value argument : arguments)
    types.push_back(argument.getType());
  Type returned = result ? result : LLVM::LLVMVoidType::get(b.getContext());
  SmallVector<Value> operands = {address};
  llvm::append_range(operands, arguments);
  auto call = LLVM::CallOp::create(
      b, loc, LLVM::LLVMFunctionType::get(returned, types), operands);
  return result ? call.getResult() : Value();
}

Value PluginCallLowering::asDoubles(Lowered value, Value count) {
  if (!singlePrecision())
    return value.data;
  Value doubles = allocateElements(count, /*elementBytes=*/8);
  forRange(count, [&](Value i) {
    Value slot = LLVM::GEPOp::create(b, loc, pointerType(), b.getF64Type(),
                                     doubles, ValueRange{toI64(i)});
    LLVM::StoreOp::create(b, loc, toF64(load(value.data, i)), slot);
  });
  return doubles;
}

Value PluginCallLowering::fromDoubles(Value doubles, Value count) {
  if (!singlePrecision())
    return doubles;
  Value data = allocateElements(count);
  forRange(count, [&](Value i) {
    Value slot = LLVM::GEPOp::create(b, loc, pointerType(), b.getF64Type(),
                                     doubles, ValueRange{toI64(i)});
    Value wide = LLVM::LoadOp::create(b, loc, b.getF64Type(), slot);
    store(arith::TruncFOp::create(b, loc, context.elementType, wide), data, i);
  });
  return data;
}

FailureOr<Lowered> PluginCallLowering::emitPluginOp(Operation *op) {
  auto type = cast<ArrayType>(op->getResult(0).getType());
  auto operandType = cast<ArrayType>(op->getOperand(0).getType());
  Type f64 = b.getF64Type();
  auto narrow = [&](Value wide) -> Value {
    return singlePrecision()
               ? arith::TruncFOp::create(b, loc, context.elementType, wide)
               : wide;
  };
  const plugin::RuntimeCode &code = *getPluginCode(op);
  using Result = FailureOr<Lowered>;
  return llvm::TypeSwitch<Operation *, Result>(op)
      .Case([&](ApplyOp apply) -> Result {
        StringRef symbol = code.symbols[apply.getOrder()];
        Lowered operand = get(apply.getOperand());
        auto at = [&](Value x) {
          return narrow(callPluginCode(symbol, f64, {toF64(x)}));
        };
        if (type.isScalar())
          return Lowered{at(operand.scalar), Value()};
        return build(type, [&](Value position) {
          return at(elementAt(operand, position));
        });
      })
      .Case([&](SimilarityOp similarity) -> Result {
        Value n = elementCount(operandType);
        Value value =
            callPluginCode(code.symbols[0], f64,
                           {toI64(n), asDoubles(get(similarity.getLhs()), n),
                            asDoubles(get(similarity.getRhs()), n)});
        return Lowered{narrow(value), Value()};
      })
      .Case([&](SimilarityGradientOp gradient) -> Result {
        Value n = elementCount(operandType);
        Value lhsGradient = allocateElements(n, 8);
        Value rhsGradient = allocateElements(n, 8);
        callPluginCode(code.symbols[1], Type(),
                       {toI64(n), asDoubles(get(gradient.getLhs()), n),
                        asDoubles(get(gradient.getRhs()), n), lhsGradient,
                        rhsGradient});
        Value wanted = gradient.getArgument() == 0 ? lhsGradient : rhsGradient;
        return Lowered{Value(), fromDoubles(wanted, n)};
      })
      .Case([&](AggregateOp aggregate) -> Result {
        Value n = elementCount(operandType);
        Value value = callPluginCode(
            code.symbols[0], f64,
            {toI64(n), asDoubles(get(aggregate.getOperand()), n)});
        return Lowered{narrow(value), Value()};
      })
      .Case([&](AggregateWeightsOp weights) -> Result {
        Value n = elementCount(operandType);
        Value out = allocateElements(n, 8);
        callPluginCode(
            code.symbols[1], Type(),
            {toI64(n), asDoubles(get(weights.getOperand()), n), out});
        return Lowered{Value(), fromDoubles(out, n)};
      })
      .Default([&](Operation *) -> Result {
        return op->emitOpError("is not a plugin's function");
      });
}

void codegen::populatePluginCallLowerings(KernelLoweringPatterns &patterns) {
  patterns.addArrayOps<PluginCallLowering, ApplyOp, SimilarityOp,
                       SimilarityGradientOp, AggregateOp, AggregateWeightsOp>(
      &PluginCallLowering::emitPluginOp);
}
