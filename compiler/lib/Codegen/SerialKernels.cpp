//===- SerialKernels.cpp - Host work on GPU memory as one-thread kernels --===//
//
// A loop along time or a factorisation on the host reads and writes GPU
// memory, so the host waits for the GPU before it and the memory moves
// between them; as a kernel of one thread on the stream it does neither.
//
//===----------------------------------------------------------------------===//

#include "SerialKernels.h"
#include "DeviceScalars.h"
#include "energy/Codegen/ParallelLoops.h"
#include "energy/KernelSupport/KernelSupport.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace mlir::energy;

namespace {
/// How a host op takes part in a run.
enum class Part {
  /// Ends a run: calls, host memory, anything a GPU cannot run.
  Barrier,
  /// Arithmetic without memory (or with memory nothing in the call writes):
  /// on the host, or in the kernel where it uses what the kernel computes.
  Arithmetic,
  /// Reads or writes GPU memory and nothing else: in the kernel.
  Device,
};

/// Whether `type` is a scalar a kernel can hand the host through memory.
bool spillable(Type type) {
  return type.isF32() || type.isF64() || type.isIndex() ||
         type.isSignlessInteger(1) || type.isSignlessInteger(32) ||
         type.isSignlessInteger(64);
}

class RunWrapper {
public:
  RunWrapper(func::FuncOp function,
             function_ref<bool(scf::ForOp)> becomesKernel)
      : function(function), becomesKernel(becomesKernel) {}

  /// Wraps the runs of `block` and of the blocks in its barriers.
  void wrapRunsIn(Block &block);

  SmallVector<scf::ForOp> wrapped;

private:
  Part partOf(Operation *op);
  /// Whether what uses `value` (through arithmetic on the host) is GPU work:
  /// a loop that becomes a kernel, or an op of a run.
  bool onlyGpuUses(Value value, llvm::SmallPtrSetImpl<Value> &seen);
  /// Wraps what of `run` (consecutive ops of one block, none a barrier) can
  /// be a kernel: the ops that touch GPU memory and the arithmetic on their
  /// results. A result used after the run goes through a slot of GPU memory
  /// where onlyGpuUses holds; otherwise the op computing it stays on the
  /// host, and the ops before and after it are runs of their own.
  void wrap(ArrayRef<Operation *> run);
  /// 8 bytes of GPU scratch for the whole call of the function.
  Value slot(Location loc);

  func::FuncOp function;
  function_ref<bool(scf::ForOp)> becomesKernel;
  /// The slots' block (null until one is needed), its size and use.
  Value slots;
  arith::ConstantIntOp slotBytes;
  unsigned slotCount = 0;
};

Part RunWrapper::partOf(Operation *op) {
  if (op->hasTrait<OpTrait::IsTerminator>() || !codegen::runsOnGpu(op))
    return Part::Barrier;
  if (op->getNumRegions() == 0 && isMemoryEffectFree(op))
    return Part::Arithmetic;
  // A kernel that uses the value loads it itself (computeOnDevice).
  if (auto load = dyn_cast<LLVM::LoadOp>(op);
      load && load->hasAttr(kUnchangedLoadAttr) &&
      codegen::intoGpuMemory(load.getAddr()))
    return Part::Arithmetic;
  bool touchesMemory = false;
  WalkResult walk = op->walk([&](Operation *inner) {
    if (!codegen::runsOnGpu(inner))
      return WalkResult::interrupt();
    if (auto loop = dyn_cast<scf::ForOp>(inner); loop && becomesKernel(loop))
      return WalkResult::interrupt();
    if (Value address = codegen::accessedAddress(inner)) {
      touchesMemory = true;
      return codegen::intoGpuMemory(address) ? WalkResult::advance()
                                             : WalkResult::interrupt();
    }
    if (inner->hasTrait<OpTrait::HasRecursiveMemoryEffects>() ||
        isMemoryEffectFree(inner))
      return WalkResult::advance();
    return WalkResult::interrupt();
  });
  if (walk.wasInterrupted())
    return Part::Barrier;
  // A loop of arithmetic alone (a sum of one element) is arithmetic too.
  return touchesMemory ? Part::Device : Part::Arithmetic;
}

/// Whether `op` or an op inside it uses a result of an op `computing`
/// holds for.
static bool usesAnyOf(Operation *op,
                      function_ref<bool(Operation *)> computing) {
  WalkResult walk = op->walk([&](Operation *inner) {
    for (Value operand : inner->getOperands())
      if (Operation *definition = operand.getDefiningOp();
          definition && computing(definition))
        return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return walk.wasInterrupted();
}
static bool usesAnyOf(Operation *op, const llvm::SetVector<Operation *> &ops) {
  return usesAnyOf(
      op, [&](Operation *definition) { return ops.contains(definition); });
}

bool RunWrapper::onlyGpuUses(Value value, llvm::SmallPtrSetImpl<Value> &seen) {
  if (!seen.insert(value).second)
    return true;
  for (Operation *user : value.getUsers()) {
    bool onGpu = false;
    for (Operation *at = user; at && at != function.getOperation();
         at = at->getParentOp()) {
      auto loop = dyn_cast<scf::ForOp>(at);
      if ((loop && becomesKernel(loop)) || partOf(at) == Part::Device) {
        onGpu = true;
        break;
      }
    }
    if (onGpu)
      continue;
    // A use inside a loop of arithmetic goes on through the loop's results.
    Operation *computing = user;
    if (Operation *inBlock =
            value.getParentBlock()->findAncestorOpInBlock(*user))
      computing = inBlock;
    if (partOf(computing) != Part::Arithmetic)
      return false;
    for (Value result : computing->getResults())
      if (!onlyGpuUses(result, seen))
        return false;
  }
  return true;
}

Value RunWrapper::slot(Location loc) {
  OpBuilder b(function.getContext());
  if (!slots) {
    // One block for every slot, allocated at the entry, freed on return.
    auto module = function->getParentOfType<ModuleOp>();
    b.setInsertionPointToStart(&function.getBody().front());
    slotBytes = arith::ConstantIntOp::create(b, loc, b.getI64Type(), 8);
    slots = func::CallOp::create(
                b, loc,
                module.lookupSymbol<func::FuncOp>(ENERGY_SUPPORT_SCRATCH_ALLOC),
                ValueRange{slotBytes.getResult()})
                .getResult(0);
    function.walk([&](func::ReturnOp exit) {
      b.setInsertionPoint(exit);
      func::CallOp::create(
          b, loc,
          module.lookupSymbol<func::FuncOp>(ENERGY_SUPPORT_SCRATCH_FREE),
          ValueRange{slots});
    });
  }
  b.setInsertionPointAfter(slots.getDefiningOp());
  slotBytes.setValueAttr(b.getI64IntegerAttr(8 * (slotCount + 1)));
  return LLVM::GEPOp::create(
      b, loc, LLVM::LLVMPointerType::get(b.getContext()), b.getI64Type(), slots,
      ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(slotCount++)});
}

void RunWrapper::wrap(ArrayRef<Operation *> run) {
  llvm::SetVector<Operation *> moved;
  for (Operation *op : run)
    if (partOf(op) == Part::Device || usesAnyOf(op, moved))
      moved.insert(op);
  if (llvm::none_of(moved,
                    [&](Operation *op) { return partOf(op) == Part::Device; }))
    return;
  Block *block = run.front()->getBlock();
  // Arithmetic on scalars of GPU memory (a slot's, a param's) whose results
  // only the kernel uses goes into it too: on the host, its loads would make
  // the host wait.
  llvm::SetVector<Operation *> onDeviceScalars;
  auto onDevice = [&](Operation *op) {
    return onDeviceScalars.contains(op) ||
           (isa<LLVM::LoadOp>(op) && partOf(op) == Part::Arithmetic);
  };
  for (Operation *op : run)
    if (onDevice(op) || usesAnyOf(op, onDevice))
      onDeviceScalars.insert(op);
  for (Operation *op : llvm::reverse(run))
    if (onDeviceScalars.contains(op) && !moved.contains(op) &&
        partOf(op) == Part::Arithmetic &&
        llvm::all_of(op->getUsers(), [&](Operation *user) {
          return moved.contains(block->findAncestorOpInBlock(*user));
        }))
      moved.insert(op);
  moved = llvm::SetVector<Operation *>(
      llvm::from_range, llvm::make_filter_range(run, [&](Operation *op) {
        return moved.contains(op);
      }));
  SmallVector<Value> spilled;
  for (auto [position, op] : llvm::enumerate(run)) {
    if (!moved.contains(op))
      continue;
    bool stays = false;
    for (Value result : op->getResults()) {
      bool usedAfter = llvm::any_of(result.getUsers(), [&](Operation *user) {
        return !moved.contains(block->findAncestorOpInBlock(*user));
      });
      if (!usedAfter)
        continue;
      llvm::SmallPtrSet<Value, 8> seen;
      if (spillable(result.getType()) && onlyGpuUses(result, seen))
        spilled.push_back(result);
      else
        stays = true;
    }
    if (!stays)
      continue;
    wrap(run.take_front(position));
    wrap(run.drop_front(position + 1));
    return;
  }
  // What the kernel right after the run alone uses and computes itself
  // (codegen::deviceComputation) needs no kernel of its own.
  auto next = dyn_cast_or_null<scf::ForOp>(run.back()->getNextNode());
  if (next && becomesKernel(next) && !spilled.empty() &&
      llvm::all_of(spilled, [&](Value value) {
        return llvm::all_of(value.getUsers(), [&](Operation *user) {
          return moved.contains(block->findAncestorOpInBlock(*user)) ||
                 next->isAncestor(user);
        });
      })) {
    llvm::SetVector<Operation *> inNext;
    for (Value value : spilled) {
      llvm::SetVector<Operation *> ops =
          codegen::deviceComputation(value, next);
      inNext.insert(ops.begin(), ops.end());
    }
    if (llvm::all_of(moved, [&](Operation *op) { return inNext.contains(op); }))
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
  // Each scalar the host uses after the kernel: stored by the kernel,
  // loaded after it.
  b.setInsertionPointAfter(loop);
  for (Value value : spilled) {
    Value at = slot(value.getLoc());
    Type stored = value.getType().isIndex() ? b.getI64Type() : value.getType();
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointAfterValue(value);
      Value bits = value.getType().isIndex()
                       ? arith::IndexCastOp::create(b, loc, stored, value)
                       : value;
      LLVM::StoreOp::create(b, loc, bits, at);
    }
    auto loaded = LLVM::LoadOp::create(b, loc, stored, at);
    loaded->setAttr(kUnchangedLoadAttr, b.getUnitAttr());
    Value result = loaded;
    if (value.getType().isIndex())
      result = arith::IndexCastOp::create(b, loc, value.getType(), result);
    value.replaceUsesWithIf(result, [&](OpOperand &use) {
      return !loop->isAncestor(use.getOwner());
    });
  }
  wrapped.push_back(loop);
}

void RunWrapper::wrapRunsIn(Block &block) {
  SmallVector<SmallVector<Operation *>> runs(1);
  for (Operation &op : block) {
    if (partOf(&op) != Part::Barrier) {
      runs.back().push_back(&op);
      continue;
    }
    runs.emplace_back();
    // A loop that becomes a kernel is GPU work already.
    if (auto loop = dyn_cast<scf::ForOp>(op); loop && becomesKernel(loop))
      continue;
    for (Region &region : op.getRegions())
      for (Block &inner : region)
        wrapRunsIn(inner);
  }
  for (ArrayRef<Operation *> run : runs)
    if (!run.empty())
      wrap(run);
}
} // namespace

SmallVector<scf::ForOp>
codegen::wrapSerialRuns(func::FuncOp function,
                        function_ref<bool(scf::ForOp)> becomesKernel) {
  RunWrapper wrapper(function, becomesKernel);
  for (Block &block : function.getBody())
    wrapper.wrapRunsIn(block);
  return wrapper.wrapped;
}
