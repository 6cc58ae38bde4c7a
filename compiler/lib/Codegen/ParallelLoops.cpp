//===- ParallelLoops.cpp - Kernel loops shared out on the thread pool -----===//
//
// Outlines marked loops into chunk functions: the values the body uses from
// outside travel in a context array of 8-byte slots, and the loop becomes a
// call of energy_support_parallel_for(chunk, context, count).
//
//===----------------------------------------------------------------------===//

#include "energy/Codegen/ParallelLoops.h"
#include "energy/KernelSupport/KernelSupport.h"
#include "energy/Runtime/ArtifactABI.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/RegionUtils.h"

using namespace mlir;
using namespace mlir::energy;

namespace {
constexpr StringLiteral kParallelAttr = "energy.parallel";

/// A value that fits an 8-byte context slot.
bool fitsSlot(Type type) {
  return isa<IndexType, IntegerType, LLVM::LLVMPointerType>(type) ||
         type.isF32() || type.isF64();
}

/// Scratch from malloc that only `loop` uses (and the kernel frees).
bool isLoopScratch(Value value, scf::ForOp loop) {
  auto call = value.getDefiningOp<func::CallOp>();
  if (!call || call.getCallee() != "malloc")
    return false;
  return llvm::all_of(value.getUsers(), [&](Operation *user) {
    if (loop->isAncestor(user))
      return true;
    auto free = dyn_cast<func::CallOp>(user);
    return free && free.getCallee() == "free";
  });
}

class Outliner {
public:
  explicit Outliner(ModuleOp module)
      : module(module), b(module.getContext()),
        pointerType(LLVM::LLVMPointerType::get(module.getContext())) {
    chunkType =
        b.getFunctionType({pointerType, b.getI64Type(), b.getI64Type()}, {});
  }

  void outline(scf::ForOp loop, unsigned number);

private:
  Value slot(Value context, unsigned position, Location loc) {
    return LLVM::GEPOp::create(
        b, loc, pointerType, b.getI64Type(), context,
        ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(position)});
  }
  Value toI64(Value index, Location loc) {
    return arith::IndexCastOp::create(b, loc, b.getI64Type(), index);
  }

  ModuleOp module;
  OpBuilder b;
  Type pointerType;
  FunctionType chunkType;
};

void Outliner::outline(scf::ForOp loop, unsigned number) {
  Location loc = loop.getLoc();
  loop->removeAttr(kParallelAttr);
  if (loop.getNumResults() != 0 ||
      !isConstantIntValue(loop.getLowerBound(), 0) ||
      !isConstantIntValue(loop.getStep(), 1))
    return;
  llvm::SetVector<Value> used;
  getUsedValuesDefinedAbove(loop.getRegion(), used);
  SmallVector<Value> passed;
  SmallVector<func::CallOp> scratch;
  for (Value value : used) {
    if (isLoopScratch(value, loop)) {
      scratch.push_back(value.getDefiningOp<func::CallOp>());
      continue;
    }
    if (!fitsSlot(value.getType()))
      return;
    passed.push_back(value);
  }
  for (func::CallOp allocation : scratch)
    if (!llvm::is_contained(passed, allocation.getOperand(0)))
      passed.push_back(allocation.getOperand(0));

  // The chunk function: unpack, allocate private scratch, run [begin, end).
  auto parent = loop->getParentOfType<func::FuncOp>();
  b.setInsertionPointAfter(parent);
  auto chunk = func::FuncOp::create(
      b, loc, (parent.getName() + "_chunk" + Twine(number)).str(), chunkType);
  chunk.setPrivate();
  Block *entry = chunk.addEntryBlock();
  b.setInsertionPointToStart(entry);
  IRMapping mapping;
  for (auto [position, value] : llvm::enumerate(passed)) {
    Type type = value.getType();
    Value loaded =
        LLVM::LoadOp::create(b, loc, type.isIndex() ? b.getI64Type() : type,
                             slot(entry->getArgument(0), position, loc));
    if (type.isIndex())
      loaded = arith::IndexCastOp::create(b, loc, type, loaded);
    mapping.map(value, loaded);
  }
  SmallVector<Value> privateScratch;
  for (func::CallOp allocation : scratch)
    privateScratch.push_back(b.clone(*allocation, mapping)->getResult(0));
  for (auto [allocation, copy] : llvm::zip(scratch, privateScratch))
    mapping.map(allocation.getResult(0), copy);
  auto toIndex = [&](Value i64) {
    return arith::IndexCastOp::create(b, loc, b.getIndexType(), i64);
  };
  auto body = scf::ForOp::create(b, loc, toIndex(entry->getArgument(1)),
                                 toIndex(entry->getArgument(2)),
                                 arith::ConstantIndexOp::create(b, loc, 1));
  mapping.map(loop.getInductionVar(), body.getInductionVar());
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(body.getBody()->getTerminator());
    for (Operation &op : loop.getBody()->without_terminator())
      b.clone(op, mapping);
  }
  body->walk([](scf::ForOp nested) { nested->removeAttr(kParallelAttr); });
  auto free = module.lookupSymbol<func::FuncOp>("free");
  for (Value pointer : privateScratch)
    func::CallOp::create(b, loc, free, ValueRange{pointer});
  func::ReturnOp::create(b, loc);

  // The loop becomes: fill the context, call the pool.
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&parent.front());
    Value slots = LLVM::ConstantOp::create(
        b, loc, b.getI64Type(),
        b.getI64IntegerAttr(std::max<int64_t>(passed.size(), 1)));
    Value context =
        LLVM::AllocaOp::create(b, loc, pointerType, b.getI64Type(), slots);
    b.setInsertionPoint(loop);
    for (auto [position, value] : llvm::enumerate(passed))
      LLVM::StoreOp::create(
          b, loc, value.getType().isIndex() ? toI64(value, loc) : value,
          slot(context, position, loc));
    Value function = func::ConstantOp::create(
        b, loc, chunkType, FlatSymbolRefAttr::get(chunk.getSymNameAttr()));
    auto parallelFor =
        module.lookupSymbol<func::FuncOp>(ENERGY_SUPPORT_PARALLEL_FOR);
    func::CallOp::create(
        b, loc, parallelFor,
        ValueRange{function, context, toI64(loop.getUpperBound(), loc)});
  }
  loop.erase();
}
} // namespace

void mlir::energy::markParallel(scf::ForOp loop) {
  loop->setAttr(kParallelAttr, UnitAttr::get(loop.getContext()));
}

void mlir::energy::outlineParallelLoops(ModuleOp module) {
  SmallVector<scf::ForOp> marked;
  module.walk<WalkOrder::PreOrder>([&](scf::ForOp loop) {
    if (!loop->hasAttr(kParallelAttr))
      return WalkResult::advance();
    marked.push_back(loop);
    return WalkResult::skip();
  });
  Outliner outliner(module);
  for (auto [number, loop] : llvm::enumerate(marked))
    outliner.outline(loop, number);

  OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
  Location loc = module.getLoc();
  auto setThreads =
      module.lookupSymbol<func::FuncOp>(ENERGY_SUPPORT_SET_NUM_THREADS);
  auto exported =
      func::FuncOp::create(b, loc, ENERGY_ARTIFACT_SET_THREADS_SYMBOL,
                           b.getFunctionType({b.getI32Type()}, {}));
  Block *entry = exported.addEntryBlock();
  b.setInsertionPointToStart(entry);
  func::CallOp::create(b, loc, setThreads, entry->getArguments());
  func::ReturnOp::create(b, loc);
}
