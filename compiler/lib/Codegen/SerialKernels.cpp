//===- SerialKernels.cpp - Host work on GPU memory as one-thread kernels --===//
//
// A loop along time or a factorisation on the host reads and writes GPU
// memory, so the host waits for the GPU before it and the memory moves
// between them; as a kernel of one thread on the stream it does neither.
//
//===----------------------------------------------------------------------===//

#include "SerialKernels.h"
#include "DeviceScalars.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace mlir::energy;

namespace {
/// How a host op takes part in a run.
enum class Part {
  /// Ends a run: calls, host memory, anything a GPU cannot run.
  Barrier,
  /// Arithmetic without memory: on the host, or in the kernel where it uses
  /// what the kernel computes.
  Arithmetic,
  /// Reads or writes GPU memory and nothing else: in the kernel.
  Device,
};

bool gpuDialect(Operation *op) {
  StringRef dialect =
      op->getDialect() ? op->getDialect()->getNamespace() : StringRef();
  return llvm::is_contained({"arith", "math", "scf", "vector", "llvm"},
                            dialect) &&
         !isa<LLVM::CallOp, LLVM::AddressOfOp, LLVM::AllocaOp>(op);
}

Part partOf(Operation *op) {
  if (op->hasTrait<OpTrait::IsTerminator>() || !gpuDialect(op))
    return Part::Barrier;
  if (op->getNumRegions() == 0 && isMemoryEffectFree(op))
    return Part::Arithmetic;
  bool touchesMemory = false;
  WalkResult walk = op->walk([&](Operation *inner) {
    if (!gpuDialect(inner))
      return WalkResult::interrupt();
    Value address;
    if (auto load = dyn_cast<LLVM::LoadOp>(inner))
      address = load.getAddr();
    else if (auto store = dyn_cast<LLVM::StoreOp>(inner))
      address = store.getAddr();
    else if (auto update = dyn_cast<LLVM::AtomicRMWOp>(inner))
      address = update.getPtr();
    if (address) {
      touchesMemory = true;
      return codegen::intoGpuMemory(address) ? WalkResult::advance()
                                             : WalkResult::interrupt();
    }
    if (inner->hasTrait<OpTrait::HasRecursiveMemoryEffects>() ||
        isMemoryEffectFree(inner))
      return WalkResult::advance();
    return WalkResult::interrupt();
  });
  return walk.wasInterrupted() || !touchesMemory ? Part::Barrier : Part::Device;
}

/// Wraps what of `run` (consecutive ops of one block, none a barrier) can
/// be a kernel, adding the loops to `wrapped`: the ops that touch GPU
/// memory and the arithmetic on their results, unless a result is used
/// after the run; then that op stays on the host and the ops before and
/// after it are runs of their own.
void wrapRun(ArrayRef<Operation *> run, SmallVectorImpl<scf::ForOp> &wrapped) {
  llvm::SetVector<Operation *> moved;
  for (Operation *op : run)
    if (partOf(op) == Part::Device ||
        llvm::any_of(op->getOperands(), [&](Value operand) {
          return moved.contains(operand.getDefiningOp());
        }))
      moved.insert(op);
  if (moved.empty() || llvm::none_of(moved, [](Operation *op) {
        return partOf(op) == Part::Device;
      }))
    return;
  Block *block = run.front()->getBlock();
  for (auto [position, op] : llvm::enumerate(run)) {
    if (!moved.contains(op))
      continue;
    bool usedAfter = llvm::any_of(op->getUsers(), [&](Operation *user) {
      return !moved.contains(block->findAncestorOpInBlock(*user));
    });
    if (!usedAfter)
      continue;
    wrapRun(run.take_front(position), wrapped);
    wrapRun(run.drop_front(position + 1), wrapped);
    return;
  }
  Operation *last = moved.back();
  OpBuilder b(last->getContext());
  b.setInsertionPointAfter(last);
  Location loc = last->getLoc();
  auto loop =
      scf::ForOp::create(b, loc, arith::ConstantIndexOp::create(b, loc, 0),
                         arith::ConstantIndexOp::create(b, loc, 1),
                         arith::ConstantIndexOp::create(b, loc, 1));
  for (Operation *op : moved)
    op->moveBefore(loop.getBody()->getTerminator());
  wrapped.push_back(loop);
}

void wrapRunsIn(Block &block, SmallVectorImpl<scf::ForOp> &wrapped) {
  SmallVector<SmallVector<Operation *>> runs(1);
  for (Operation &op : llvm::make_early_inc_range(block)) {
    if (partOf(&op) != Part::Barrier) {
      runs.back().push_back(&op);
      continue;
    }
    runs.emplace_back();
    for (Region &region : op.getRegions())
      for (Block &inner : region)
        wrapRunsIn(inner, wrapped);
  }
  for (ArrayRef<Operation *> run : runs)
    if (!run.empty())
      wrapRun(run, wrapped);
}
} // namespace

SmallVector<scf::ForOp> codegen::wrapSerialRuns(func::FuncOp function) {
  SmallVector<scf::ForOp> wrapped;
  for (Block &block : function.getBody())
    wrapRunsIn(block, wrapped);
  return wrapped;
}
