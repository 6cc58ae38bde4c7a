//===- LateHostReads.cpp - Host reads of GPU memory as late as they can be ===//
//
// The host waits for the GPU before it reads GPU memory. Reads moved past the
// kernels that do not write what they read, next to where their values are
// used, share one wait instead of each waiting between kernels.
//
//===----------------------------------------------------------------------===//

#include "DeviceScalars.h"
#include "energy/Codegen/ParallelLoops.h"
#include "energy/KernelSupport/KernelSupport.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;
using namespace mlir::energy;

namespace {
/// Whether `base` (an address no offset is taken of) is a block of scratch
/// or device memory of its own, which no other address reaches.
bool ownAllocation(Value base) {
  auto call = base.getDefiningOp<func::CallOp>();
  return call && (call.getCallee() == ENERGY_SUPPORT_SCRATCH_ALLOC ||
                  call.getCallee() == ENERGY_SUPPORT_CUDA_ALLOC);
}

bool mayAlias(Value base, Value other) {
  if (base == other)
    return true;
  if (base.getDefiningOp<LLVM::AllocaOp>() ||
      other.getDefiningOp<LLVM::AllocaOp>())
    return false;
  return !ownAllocation(base) && !ownAllocation(other);
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

/// Whether `op` may write what is at `bases`: it stores through an address
/// that may reach one, or does something other than arithmetic and memory
/// access (a call).
bool mayWriteAny(Operation *op, ArrayRef<Value> bases) {
  WalkResult walk = op->walk([&](Operation *inner) {
    if (!codegen::runsOnGpu(inner))
      return WalkResult::interrupt();
    if (isa<LLVM::StoreOp, LLVM::AtomicRMWOp>(inner)) {
      Value written = codegen::baseAddress(codegen::accessedAddress(inner));
      return llvm::any_of(bases,
                          [&](Value base) { return mayAlias(base, written); })
                 ? WalkResult::interrupt()
                 : WalkResult::advance();
    }
    if (isa<LLVM::LoadOp>(inner) ||
        inner->hasTrait<OpTrait::HasRecursiveMemoryEffects>() ||
        isMemoryEffectFree(inner))
      return WalkResult::advance();
    return WalkResult::interrupt();
  });
  return walk.wasInterrupted();
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
    while (before != firstUser && !mayWriteAny(before, *bases))
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
