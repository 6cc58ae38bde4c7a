//===- KernelLowering.cpp - The driver of kernel lowering -----------------===//
//
// Walks a kernel's blocks and hands each op to the pattern of highest
// benefit that matches it (KernelLowering.h); loops over index domains with
// their predicates, and comprehensions, which every family uses.
//
//===----------------------------------------------------------------------===//

#include "KernelLowering.h"
#include "energy/Codegen/ParallelLoops.h"

#include "mlir/Dialect/Affine/Utils.h"

using namespace mlir;
using namespace mlir::energy;
using namespace mlir::energy::codegen;

void KernelLoweringPatterns::addPattern(std::optional<OperationName> root,
                                        unsigned benefit,
                                        KernelLoweringPattern::Match match,
                                        KernelLoweringPattern::Lower lower) {
  patterns.push_back(std::make_unique<KernelLoweringPattern>(
      root, benefit, std::move(match), std::move(lower)));
  byName.clear();
}

ArrayRef<const KernelLoweringPattern *>
KernelLoweringPatterns::patternsFor(Operation *op) const {
  std::unique_ptr<SmallVector<const KernelLoweringPattern *>> &entry =
      byName[op->getName()];
  if (!entry) {
    entry = std::make_unique<SmallVector<const KernelLoweringPattern *>>();
    for (const auto &pattern : patterns)
      if (!pattern->root || *pattern->root == op->getName())
        entry->push_back(pattern.get());
    llvm::stable_sort(*entry, [](const KernelLoweringPattern *lhs,
                                 const KernelLoweringPattern *rhs) {
      return lhs->benefit > rhs->benefit;
    });
  }
  return *entry;
}

void codegen::populateKernelLowerings(KernelLoweringPatterns &patterns) {
  populateProgramLowerings(patterns);
  populateFusedLaneLowerings(patterns);
  populateArrayOpLowerings(patterns);
  populateMatrixProductLowerings(patterns);
  populateReductionLowerings(patterns);
  populateContractionLowerings(patterns);
  populatePluginCallLowerings(patterns);
}

LogicalResult KernelLowering::emitOp(Operation *op) {
  for (const KernelLoweringPattern *pattern : state.patterns.patternsFor(op))
    if (!pattern->match || pattern->match(op, *this))
      return pattern->lower(op, *this);
  return op->emitOpError("is not supported by the CPU code generator");
}

FailureOr<SmallVector<Value>>
KernelLowering::emitBlock(Block &block, ValueRange arguments,
                          const llvm::SmallPtrSetImpl<Operation *> *leftOut) {
  for (auto [argument, value] : llvm::zip(block.getArguments(), arguments))
    state.integers.map(argument, value);
  auto isLeftOut = [&](Operation *op) {
    return op && leftOut && leftOut->contains(op);
  };
  for (Operation &op : block) {
    if (auto yield = dyn_cast<YieldOp>(op)) {
      SmallVector<Value> values;
      for (Value value : yield.getValues()) {
        if (isLeftOut(value.getDefiningOp())) {
          values.push_back(Value());
        } else if (isa<ArrayType>(value.getType())) {
          Lowered lowered = get(value);
          values.push_back(lowered.data ? lowered.data : lowered.scalar);
        } else {
          values.push_back(state.integers.lookup(value));
        }
      }
      return values;
    }
    if (isLeftOut(&op))
      continue;
    loc = op.getLoc();
    if (frame.loopDepth == 0) {
      frame.statementAnchor = arith::ConstantIndexOp::create(b, loc, 0);
      frame.anchors.push_back(frame.statementAnchor);
    }
    if (failed(emitOp(&op)))
      return failure();
  }
  return SmallVector<Value>();
}

FailureOr<SmallVector<Value>> KernelLowering::forDomain(
    ArrayAttr sizes, Region &predicate, ValueRange carried,
    function_ref<FailureOr<SmallVector<Value>>(ValueRange, ValueRange)> body,
    FirstAxis first) {
  SmallVector<Value> extents = extentsOf(sizes);
  if (first.end)
    extents.front() = first.end;
  SmallVector<Value> indices;
  ++frame.loopDepth;
  FailureOr<SmallVector<Value>> result =
      forDomainLevel(extents, indices, predicate, carried, body, first);
  --frame.loopDepth;
  return result;
}

FailureOr<SmallVector<Value>> KernelLowering::forDomainLevel(
    ArrayRef<Value> extents, SmallVector<Value> &indices, Region &predicate,
    ValueRange carried,
    function_ref<FailureOr<SmallVector<Value>>(ValueRange, ValueRange)> body,
    FirstAxis first) {
  if (extents.empty()) {
    if (predicate.empty())
      return body(indices, carried);
    FailureOr<SmallVector<Value>> admitted =
        emitBlock(predicate.front(), indices);
    if (failed(admitted))
      return failure();
    auto branch = scf::IfOp::create(b, loc, carried.getTypes(),
                                    admitted->front(), /*withElse=*/true);
    for (Block *block : {branch.thenBlock(), branch.elseBlock()})
      if (!block->empty())
        block->back().erase();
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(branch.thenBlock());
      FailureOr<SmallVector<Value>> next = body(indices, carried);
      if (failed(next))
        return failure();
      scf::YieldOp::create(b, loc, *next);
      b.setInsertionPointToStart(branch.elseBlock());
      scf::YieldOp::create(b, loc, carried);
    }
    return SmallVector<Value>(branch.getResults());
  }
  auto loop = scf::ForOp::create(b, loc, first.start ? first.start : index(0),
                                 extents.front(), index(1), carried);
  if (first.parallel() && carried.empty())
    markParallel(loop);
  dropImplicitYield(loop);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToEnd(loop.getBody());
  indices.push_back(loop.getInductionVar());
  FailureOr<SmallVector<Value>> next =
      forDomainLevel(extents.drop_front(), indices, predicate,
                     loop.getRegionIterArgs(), body, first.next());
  indices.pop_back();
  if (failed(next))
    return failure();
  scf::YieldOp::create(b, loc, *next);
  return SmallVector<Value>(loop.getResults());
}

FailureOr<SmallVector<Value>>
KernelLowering::indicesOf(Operation *op, AffineMap map, ValueRange operands) {
  SmallVector<Value> values;
  for (Value operand : operands)
    values.push_back(state.integers.lookup(operand));
  std::optional<SmallVector<Value, 8>> expanded =
      affine::expandAffineMap(b, loc, map, values);
  if (!expanded)
    return op->emitOpError("has indices the code generator cannot expand");
  return SmallVector<Value>(expanded->begin(), expanded->end());
}

LogicalResult KernelLowering::emitComprehension(ArrayAttr domain,
                                                ArrayType elementType,
                                                Block &body,
                                                Value destination) {
  // The element is computed in its row where what yields it can be.
  Value element = body.getTerminator()->getNumOperands() == 1
                      ? body.getTerminator()->getOperand(0)
                      : Value();
  auto store = [&](Value value, Value at) {
    if (value == at)
      return;
    Lowered lowered = elementType.isScalar() ? Lowered{value, Value()}
                                             : Lowered{Value(), value};
    copyInto(lowered, elementType, at, /*accumulate=*/false);
  };
  if (domain.empty()) {
    // One value (a whole array: an output's table), computed as a
    // statement, outside any loop.
    Operation *producer =
        element ? computeInto(body, element, [&] { return destination; })
                : nullptr;
    FailureOr<SmallVector<Value>> value = emitBlock(body, {});
    computedInto(producer);
    if (failed(value))
      return failure();
    store(value->front(), destination);
    return success();
  }
  Value elementSize = elementCount(elementType);
  SmallVector<Value> extents;
  for (Attribute size : domain)
    extents.push_back(dimExpr(cast<DimExprAttr>(size)));
  Region none;
  return forDomain(
      domain, none, {},
      [&](ValueRange indices, ValueRange) -> FailureOr<SmallVector<Value>> {
        Value row;
        auto rowAt = [&] {
          if (!row) {
            Value offset = sliceOffset(SmallVector<Value>(indices), extents);
            offset = arith::MulIOp::create(b, loc, offset, elementSize);
            row = offsetPointer(destination, offset);
          }
          return row;
        };
        Operation *producer =
            element ? computeInto(body, element, rowAt) : nullptr;
        FailureOr<SmallVector<Value>> value = emitBlock(body, indices);
        computedInto(producer);
        if (failed(value))
          return failure();
        store(value->front(), rowAt());
        return SmallVector<Value>();
      },
      FirstAxis::levels(frame.loopDepth == 0 ? domain.size() : 0));
}
