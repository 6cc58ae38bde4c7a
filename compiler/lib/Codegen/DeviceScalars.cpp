//===- DeviceScalars.cpp - Host scalars a GPU kernel computes itself ------===//
//
// A value the host computes from GPU memory costs a wait for the GPU where
// it is read; a kernel that uses it can read the memory itself, after the
// work queued before it, as the host would have after its wait.
//
//===----------------------------------------------------------------------===//

#include "DeviceScalars.h"

#include "energy/Codegen/ParallelLoops.h"
#include "energy/KernelSupport/KernelSupport.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"

using namespace mlir;
using namespace mlir::energy;

namespace {
/// Whether `loop` runs on one GPU thread.
bool oneThread(scf::ForOp loop) {
  return isConstantIntValue(loop.getLowerBound(), 0) &&
         isConstantIntValue(loop.getUpperBound(), 1);
}

/// Whether the kernel may read what `load` reads instead of the host.
bool kernelMayLoad(LLVM::LoadOp load, scf::ForOp loop) {
  if (load->hasAttr(kUnchangedLoadAttr))
    return true;
  if (!oneThread(loop) || !codegen::intoGpuMemory(load.getAddr()) ||
      load->getBlock() != loop->getBlock())
    return false;
  for (Operation *op = load->getNextNode(); op && op != loop.getOperation();
       op = op->getNextNode())
    if (codegen::mayWrite(op, [](Value) { return true; }))
      return false;
  return true;
}

/// Whether every thread of the kernel of `loop` may compute `op` again: it
/// reads no memory, and where it holds a loop of arithmetic (a sum of a
/// scalar), the kernel is one thread, or that loop's trip counts are
/// constants whose product is at most kRepeatedTrips.
bool kernelMayRepeat(Operation *op, scf::ForOp loop) {
  constexpr int64_t kRepeatedTrips = 16;
  if (!isMemoryEffectFree(op) || !codegen::runsOnGpu(op))
    return false;
  if (op->getNumRegions() == 0)
    return true;
  int64_t trips = 1;
  WalkResult walk = op->walk([&](Operation *inner) {
    if (!codegen::runsOnGpu(inner) || !isMemoryEffectFree(inner))
      return WalkResult::interrupt();
    if (auto nested = dyn_cast<scf::ForOp>(inner)) {
      std::optional<APInt> count = nested.getStaticTripCount();
      trips = count && count->getZExtValue() <= kRepeatedTrips
                  ? trips * std::max<int64_t>(count->getZExtValue(), 1)
                  : kRepeatedTrips + 1;
    }
    return WalkResult::advance();
  });
  return !walk.wasInterrupted() && (oneThread(loop) || trips <= kRepeatedTrips);
}

/// Adds the ops computing `value` to `ops` (operands first); whether one of
/// them is a load.
bool collect(Value value, scf::ForOp loop, llvm::SetVector<Operation *> &ops) {
  Operation *op = value.getDefiningOp();
  if (!op || op->hasTrait<OpTrait::ConstantLike>())
    return false;
  // Only ops that load are collected.
  if (ops.contains(op))
    return true;
  if (auto load = dyn_cast<LLVM::LoadOp>(op)) {
    if (load.getVolatile_() || !kernelMayLoad(load, loop))
      return false;
    collect(load.getAddr(), loop, ops);
    ops.insert(op);
    return true;
  }
  if (!kernelMayRepeat(op, loop))
    return false;
  bool loads = false;
  for (Value operand : codegen::usedValues(op))
    loads |= collect(operand, loop, ops);
  if (!loads)
    return false;
  ops.insert(op);
  return true;
}
} // namespace

llvm::SetVector<Value> codegen::usedValues(Operation *op) {
  llvm::SetVector<Value> used(op->operand_begin(), op->operand_end());
  getUsedValuesDefinedAbove(op->getRegions(), used);
  return used;
}

Value codegen::baseAddress(Value pointer) {
  while (auto offset = pointer.getDefiningOp<LLVM::GEPOp>())
    pointer = offset.getBase();
  return pointer;
}

Value codegen::accessedAddress(Operation *op) {
  if (auto load = dyn_cast<LLVM::LoadOp>(op))
    return load.getAddr();
  if (auto store = dyn_cast<LLVM::StoreOp>(op))
    return store.getAddr();
  if (auto update = dyn_cast<LLVM::AtomicRMWOp>(op))
    return update.getPtr();
  return Value();
}

bool codegen::runsOnGpu(Operation *op) {
  StringRef dialect =
      op->getDialect() ? op->getDialect()->getNamespace() : StringRef();
  return llvm::is_contained({"arith", "math", "scf", "vector", "llvm"},
                            dialect) &&
         !isa<LLVM::CallOp, LLVM::AddressOfOp, LLVM::AllocaOp>(op);
}

bool codegen::intoGpuMemory(Value pointer) {
  // A kernel function (energy_kernel_fn, ArtifactABI.h) takes its buffers'
  // addresses first, then dims, consts, the step and its result; a gradient
  // function then the buffers it adds into.
  constexpr unsigned kKernelArguments = 5;
  auto argumentOfKernel = [](Value value) -> std::optional<unsigned> {
    auto argument = dyn_cast<BlockArgument>(value);
    auto function =
        argument ? dyn_cast<func::FuncOp>(argument.getOwner()->getParentOp())
                 : nullptr;
    if (!function || function.getNumArguments() < kKernelArguments)
      return std::nullopt;
    return argument.getArgNumber();
  };
  Value base = baseAddress(pointer);
  if (auto address = base.getDefiningOp<LLVM::LoadOp>()) {
    auto slot = address.getAddr().getDefiningOp<LLVM::GEPOp>();
    return slot && slot.getDynamicIndices().empty() &&
           argumentOfKernel(slot.getBase()) == 0u;
  }
  if (std::optional<unsigned> argument = argumentOfKernel(base))
    return *argument >= kKernelArguments;
  return isOwnAllocation(base) &&
         !base.getDefiningOp()->hasAttr(kHostSlotsAttr);
}

bool codegen::isOwnAllocation(Value base) {
  auto call = base.getDefiningOp<func::CallOp>();
  return call && (call.getCallee() == ENERGY_SUPPORT_SCRATCH_ALLOC ||
                  call.getCallee() == ENERGY_SUPPORT_CUDA_ALLOC);
}

bool codegen::mayWrite(Operation *op, function_ref<bool(Value)> reaches) {
  WalkResult walk = op->walk([&](Operation *inner) {
    if (isa<LLVM::StoreOp, LLVM::AtomicRMWOp>(inner)) {
      Value base = baseAddress(accessedAddress(inner));
      return !base.getDefiningOp<LLVM::AllocaOp>() && reaches(base)
                 ? WalkResult::interrupt()
                 : WalkResult::advance();
    }
    auto effects = dyn_cast<MemoryEffectOpInterface>(inner);
    if (!effects)
      return inner->hasTrait<OpTrait::HasRecursiveMemoryEffects>()
                 ? WalkResult::advance()
                 : WalkResult::interrupt();
    return effects.hasEffect<MemoryEffects::Write>() ? WalkResult::interrupt()
                                                     : WalkResult::advance();
  });
  return walk.wasInterrupted();
}

llvm::SetVector<Operation *> codegen::deviceComputation(Value value,
                                                        scf::ForOp loop) {
  llvm::SetVector<Operation *> ops;
  if (!collect(value, loop, ops))
    ops.clear();
  return ops;
}
