//===- LateHostReads.cpp - Host reads of GPU memory as late as they can be ===//
//
// The host waits for the GPU before it reads GPU memory. Reads moved past the
// kernels that do not write what they read, next to where their values are
// used, share one wait instead of each waiting between kernels.
//
//===----------------------------------------------------------------------===//

#include "LateHostReads.h"
#include "DeviceScalars.h"
#include "energy/Codegen/ParallelLoops.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;
using namespace mlir::energy;

namespace {
/// Whether stores through `base` may reach what is at `other`.
bool mayAlias(Value base, Value other) {
  return base == other ||
         (!codegen::isOwnAllocation(base) && !codegen::isOwnAllocation(other));
}

/// The base addresses `op` reads, or nothing when it may write memory or do
/// anything else but arithmetic and loads of GPU memory.
std::optional<SmallVector<Value>> readBases(Operation *op) {
  SmallVector<Value> bases;
  WalkResult walk = op->walk([&](Operation *inner) {
    if (!codegen::runsOnGpu(inner))
      return WalkResult::interrupt();
    if (auto load = dyn_cast<LLVM::LoadOp>(inner)) {
      if (load.getVolatile_() || !codegen::intoGpuMemory(load.getAddr()))
        return WalkResult::interrupt();
      if (!load->hasAttr(kUnchangedLoadAttr))
        bases.push_back(codegen::baseAddress(load.getAddr()));
      return WalkResult::advance();
    }
    if (inner->hasTrait<OpTrait::HasRecursiveMemoryEffects>() ||
        isMemoryEffectFree(inner))
      return WalkResult::advance();
    return WalkResult::interrupt();
  });
  if (walk.wasInterrupted())
    return std::nullopt;
  return bases;
}

void sinkIn(Block &block) {
  for (Operation &op : block)
    for (Region &region : op.getRegions())
      for (Block &inner : region)
        sinkIn(inner);
  SmallVector<Operation *> ops;
  for (Operation &op : block.without_terminator())
    ops.push_back(&op);
  // From the last op up, so that each op moves next to its users, which
  // moved before it.
  for (Operation *op : llvm::reverse(ops)) {
    if (op->getNumResults() == 0 || op->hasTrait<OpTrait::ConstantLike>())
      continue;
    std::optional<SmallVector<Value>> bases = readBases(op);
    if (!bases)
      continue;
    Operation *firstUser = nullptr;
    for (Operation *user : op->getUsers()) {
      Operation *inBlock = block.findAncestorOpInBlock(*user);
      if (inBlock && (!firstUser || inBlock->isBeforeInBlock(firstUser)))
        firstUser = inBlock;
    }
    if (!firstUser)
      continue;
    Operation *before = op->getNextNode();
    while (before != firstUser &&
           !codegen::mayWrite(before, [&](Value written) {
             return llvm::any_of(
                 *bases, [&](Value base) { return mayAlias(written, base); });
           }))
      before = before->getNextNode();
    if (before != op->getNextNode())
      op->moveBefore(before);
  }
}
} // namespace

void codegen::sinkHostReads(func::FuncOp function) {
  for (Block &block : function.getBody())
    sinkIn(block);
}
