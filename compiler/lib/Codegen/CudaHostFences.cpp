//===- CudaHostFences.cpp - Where CUDA host code waits for its kernels ----===//
//
// energy_support_cuda_launch returns before its kernel is done, so that
// kernels follow each other on the GPU without a wait between them. The host
// code around them waits (energy_support_cuda_fence) only where it must:
// before it touches memory a kernel (or the work queued before the call)
// may write, before a call that may touch it, and before an artifact
// function returns.
//
//===----------------------------------------------------------------------===//

#include "energy/Codegen/CudaHostFences.h"
#include "DeviceScalars.h"
#include "energy/Codegen/ParallelLoops.h"
#include "energy/KernelSupport/KernelSupport.h"
#include "energy/KernelSupport/MatrixProduct.h"
#include "energy/KernelSupport/QuadraticContract.h"
#include "energy/KernelSupport/SoftmaxContract.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <functional>

using namespace mlir;
using namespace mlir::energy;

namespace {

/// The support functions that queue their work on the GPU after the
/// kernels launched before them and return without waiting for it, as
/// energy_support_cuda_launch does (cuBLAS's products, the softmax and the
/// quadratic contractions' kernels, cuDNN's fused attention; where they run
/// on the host instead, they wait first).
bool queuesWithoutWaiting(StringRef callee) {
  return llvm::is_contained(
      {StringRef(ENERGY_SUPPORT_CUDA_LAUNCH),
       StringRef(ENERGY_SUPPORT_CUDA_MATMUL_F32),
       StringRef(ENERGY_SUPPORT_CUDA_MATMUL_F64),
       StringRef(ENERGY_SUPPORT_CUDA_MATMUL_BF16),
       StringRef(ENERGY_SUPPORT_CUDA_MATMUL_BATCH_F32),
       StringRef(ENERGY_SUPPORT_CUDA_MATMUL_BATCH_F64),
       StringRef(ENERGY_SUPPORT_CUDA_MATMUL_BATCH_BF16),
       StringRef(ENERGY_SUPPORT_CUDA_SOFTMAX_CONTRACT_F32),
       StringRef(ENERGY_SUPPORT_CUDA_SOFTMAX_CONTRACT_F64),
       StringRef(ENERGY_SUPPORT_CUDA_SOFTMAX_CONTRACT_BF16),
       StringRef(ENERGY_SUPPORT_CUDA_QUADRATIC_CONTRACT_F32),
       StringRef(ENERGY_SUPPORT_CUDA_QUADRATIC_CONTRACT_F64),
       StringRef(ENERGY_SUPPORT_CUDA_FUSED_ATTENTION_BF16)},
      callee);
}

/// What an operation (with what it holds) does that matters to the fences:
/// may it leave kernels running, and must the host have them done before
/// it runs.
struct HostEffects {
  bool launches = false;
  bool touchesDeviceMemory = false;
};

class FenceInsertion {
public:
  FenceInsertion(ModuleOp module, func::FuncOp fence)
      : module(module), fence(fence) {}

  void run();

private:
  /// The functions' arguments that are the runtime's host tables (buffers,
  /// dims, consts: read by kernels, never written): an artifact function's
  /// first three, and an internal function's that every call passes one.
  void findTableArguments();
  bool isTable(Value pointer) const;
  /// Memory no pending kernel reaches: the stack, globals, the tables, and
  /// blocks allocated since the last launch or whose address no launch can
  /// have had (the allocator hands out again what pending kernels may use
  /// only after the next fence).
  bool isHostPrivate(Value pointer, const DenseSet<Value> &fresh) const;
  /// Takes out of `fresh` the blocks whose address `op` (or what it holds)
  /// hands on: as a call's argument, a value stored outside the fresh
  /// blocks, anything but the address of a load, store or copy; a launch
  /// after it may reach them. A block whose address is stored in another
  /// fresh one (`contents`) goes with it.
  using FreshContents = DenseMap<Value, SmallVector<Value, 2>>;
  void dropEscaping(Operation *op, DenseSet<Value> &fresh,
                    FreshContents &contents) const;
  bool isSupportCall(func::CallOp call, StringRef name) const {
    return call.getCallee() == name;
  }
  HostEffects effectsOf(Operation *op, const DenseSet<Value> &fresh);
  /// The effects of what `op` holds, with the blocks of `fresh` that
  /// nothing in it hands on host-private.
  HostEffects effectsWithin(Operation *op, const DenseSet<Value> &fresh);
  /// What holds at the end of a block: whether kernels may be pending,
  /// and the host-private blocks with what they hold.
  struct BlockEnd {
    bool pending;
    DenseSet<Value> fresh;
    FreshContents contents;
  };
  /// Inserts fences into `block`, where kernels may be pending at its
  /// start and the blocks of `fresh` (holding `contents`) are
  /// host-private; what holds at its end.
  BlockEnd placeFences(Block &block, bool pending,
                       DenseSet<Value> fresh = DenseSet<Value>(),
                       FreshContents contents = FreshContents());
  void insertFence(Operation *before);

  ModuleOp module;
  func::FuncOp fence;
  DenseMap<func::FuncOp, SmallVector<bool>> tableArguments;
  DenseSet<func::FuncOp> called;
};

void FenceInsertion::findTableArguments() {
  SmallVector<func::FuncOp> functions;
  module.walk([&](func::FuncOp function) {
    if (function.isExternal())
      return;
    functions.push_back(function);
    tableArguments[function].assign(function.getNumArguments(),
                                    function.isPublic());
  });
  for (func::FuncOp function : functions)
    if (function.isPublic())
      for (unsigned i = 3; i < function.getNumArguments(); ++i)
        tableArguments[function][i] = false;
  module.walk([&](func::CallOp call) {
    if (auto callee = module.lookupSymbol<func::FuncOp>(call.getCallee()))
      called.insert(callee);
  });
  // An internal function's argument is a table while every call passes one;
  // shrinking from "all" to a fixed point.
  for (func::FuncOp function : functions)
    if (!function.isPublic())
      for (auto &&flag : tableArguments[function])
        flag = called.contains(function);
  bool changed = true;
  while (changed) {
    changed = false;
    module.walk([&](func::CallOp call) {
      auto callee = module.lookupSymbol<func::FuncOp>(call.getCallee());
      if (!callee || callee.isExternal())
        return;
      SmallVector<bool> &flags = tableArguments[callee];
      for (auto [index, operand] : llvm::enumerate(call.getOperands()))
        if (flags[index] && !isTable(operand)) {
          flags[index] = false;
          changed = true;
        }
    });
  }
}

bool FenceInsertion::isTable(Value pointer) const {
  auto argument = dyn_cast<BlockArgument>(pointer);
  if (!argument || !argument.getOwner()->isEntryBlock())
    return false;
  auto function = dyn_cast<func::FuncOp>(argument.getOwner()->getParentOp());
  auto found = function ? tableArguments.find(function) : tableArguments.end();
  return found != tableArguments.end() &&
         argument.getArgNumber() < found->second.size() &&
         found->second[argument.getArgNumber()];
}

bool FenceInsertion::isHostPrivate(Value pointer,
                                   const DenseSet<Value> &fresh) const {
  pointer = codegen::baseAddress(pointer);
  if (pointer.getDefiningOp<LLVM::AllocaOp>() ||
      pointer.getDefiningOp<LLVM::AddressOfOp>())
    return true;
  return fresh.contains(pointer) || isTable(pointer);
}

void FenceInsertion::dropEscaping(Operation *op, DenseSet<Value> &fresh,
                                  FreshContents &contents) const {
  if (fresh.empty())
    return;
  std::function<void(Value)> escape = [&](Value block) {
    if (!fresh.erase(block))
      return;
    for (Value held : contents.lookup(block))
      escape(held);
  };
  op->walk([&](Operation *inner) {
    for (OpOperand &use : inner->getOpOperands()) {
      Value base = codegen::baseAddress(use.get());
      if (!fresh.contains(base))
        continue;
      unsigned index = use.getOperandNumber();
      if (auto store = dyn_cast<LLVM::StoreOp>(inner);
          store && index == LLVM::StoreOp::odsIndex_value) {
        if (Value into = codegen::baseAddress(store.getAddr());
            fresh.contains(into))
          contents[into].push_back(base);
        else
          escape(base);
        continue;
      }
      // An address loaded back, or copied elsewhere, may be any the block
      // holds.
      auto load = dyn_cast<LLVM::LoadOp>(inner);
      if ((load && isa<LLVM::LLVMPointerType>(load.getType())) ||
          isa<LLVM::MemcpyOp, LLVM::MemmoveOp>(inner))
        for (Value held : SmallVector<Value, 2>(contents.lookup(base)))
          escape(held);
      bool addressOnly =
          isa<LLVM::GEPOp, LLVM::LoadOp, LLVM::StoreOp>(inner) ||
          isa<LLVM::MemcpyOp, LLVM::MemmoveOp, LLVM::MemsetOp>(inner) ||
          (isa<func::CallOp>(inner) &&
           isSupportCall(cast<func::CallOp>(inner), ENERGY_SUPPORT_CUDA_FREE));
      if (!addressOnly)
        escape(base);
    }
  });
}

HostEffects FenceInsertion::effectsOf(Operation *op,
                                      const DenseSet<Value> &fresh) {
  HostEffects effects;
  if (auto call = dyn_cast<func::CallOp>(op)) {
    auto callee = module.lookupSymbol<func::FuncOp>(call.getCallee());
    if (queuesWithoutWaiting(call.getCallee())) {
      effects.launches = true;
    } else if (isSupportCall(call, ENERGY_SUPPORT_CUDA_FENCE) ||
               isSupportCall(call, ENERGY_SUPPORT_CUDA_ALLOC) ||
               isSupportCall(call, ENERGY_SUPPORT_CUDA_FREE)) {
    } else if (callee && !callee.isExternal()) {
      // A function of the artifact waits where it must itself, and may
      // return with its kernels running.
      effects.launches = true;
    } else {
      // The support library's other functions finish their own GPU work
      // before they return; they reach memory through pointers.
      effects.touchesDeviceMemory =
          llvm::any_of(call.getOperandTypes(), [](Type type) {
            return isa<LLVM::LLVMPointerType>(type);
          });
    }
    return effects;
  }
  if (op->getNumRegions() > 0)
    return effectsWithin(op, fresh);
  if (isMemoryEffectFree(op))
    return effects;
  // The LLVM dialect's memory operations, by their addresses (an atomic's
  // ordering makes its effects the whole memory's).
  SmallVector<Value, 2> addresses;
  if (auto load = dyn_cast<LLVM::LoadOp>(op))
    addresses.push_back(load.getAddr());
  else if (auto store = dyn_cast<LLVM::StoreOp>(op))
    addresses.push_back(store.getAddr());
  else if (auto atomic = dyn_cast<LLVM::AtomicRMWOp>(op))
    addresses.push_back(atomic.getPtr());
  else if (auto exchange = dyn_cast<LLVM::AtomicCmpXchgOp>(op))
    addresses.push_back(exchange.getPtr());
  else if (auto copy = dyn_cast<LLVM::MemcpyOp>(op))
    addresses.append({copy.getDst(), copy.getSrc()});
  else if (auto move = dyn_cast<LLVM::MemmoveOp>(op))
    addresses.append({move.getDst(), move.getSrc()});
  else if (auto fill = dyn_cast<LLVM::MemsetOp>(op))
    addresses.push_back(fill.getDst());
  if (!addresses.empty()) {
    effects.touchesDeviceMemory = llvm::any_of(addresses, [&](Value address) {
      return !isHostPrivate(address, fresh);
    });
    return effects;
  }
  auto interface = dyn_cast<MemoryEffectOpInterface>(op);
  if (!interface) {
    effects.touchesDeviceMemory = true;
    return effects;
  }
  SmallVector<MemoryEffects::EffectInstance> instances;
  interface.getEffects(instances);
  for (const MemoryEffects::EffectInstance &instance : instances) {
    if (isa<MemoryEffects::Allocate, MemoryEffects::Free>(instance.getEffect()))
      continue;
    Value value = instance.getValue();
    if (!value || !isHostPrivate(value, fresh))
      effects.touchesDeviceMemory = true;
  }
  return effects;
}

HostEffects FenceInsertion::effectsWithin(Operation *op,
                                          const DenseSet<Value> &fresh) {
  HostEffects effects;
  DenseSet<Value> inside = fresh;
  FreshContents contents;
  dropEscaping(op, inside, contents);
  op->walk([&](Operation *inner) {
    if (inner == op || inner->getNumRegions() > 0)
      return;
    HostEffects own = effectsOf(inner, inside);
    effects.launches |= own.launches;
    effects.touchesDeviceMemory |= own.touchesDeviceMemory;
  });
  return effects;
}

void FenceInsertion::insertFence(Operation *before) {
  OpBuilder b(before);
  Location loc = before->getLoc();
  Value code = func::CallOp::create(b, loc, fence).getResult(0);
  if (auto result = dyn_cast<func::ReturnOp>(before)) {
    if (result.getNumOperands() == 1 &&
        result.getOperand(0).getType().isInteger(32))
      result->setOperand(
          0, arith::MaxSIOp::create(b, loc, result.getOperand(0), code));
    return;
  }
  foldIntoKernelStatus(b, loc, code);
}

FenceInsertion::BlockEnd FenceInsertion::placeFences(Block &block, bool pending,
                                                     DenseSet<Value> fresh,
                                                     FreshContents contents) {
  for (Operation &op : llvm::make_early_inc_range(block)) {
    if (auto result = dyn_cast<func::ReturnOp>(op)) {
      // What the runtime calls returns with its kernels done; an internal
      // function leaves that to its caller.
      auto function = result->getParentOfType<func::FuncOp>();
      if (pending && (function.isPublic() || !called.contains(function)))
        insertFence(&op);
      continue;
    }
    if (auto call = dyn_cast<func::CallOp>(op);
        call && isSupportCall(call, ENERGY_SUPPORT_CUDA_ALLOC)) {
      fresh.insert(call.getResult(0));
      continue;
    }
    if (op.getNumRegions() > 0 && !isa<func::FuncOp>(op)) {
      HostEffects within = effectsWithin(&op, fresh);
      if (!within.launches) {
        if (pending && within.touchesDeviceMemory) {
          insertFence(&op);
          pending = false;
        }
        dropEscaping(&op, fresh, contents);
        continue;
      }
      // A loop's next iteration follows its launches: every block inside
      // starts with kernels possibly running (a branch's, as before it). A
      // block that nothing in a loop hands on stays host-private in every
      // iteration and after it; a branch's blocks start with what is
      // host-private before it.
      bool loop = isa<LoopLikeOpInterface>(op);
      DenseSet<Value> inside = fresh;
      FreshContents insideContents = contents;
      if (loop)
        dropEscaping(&op, inside, insideContents);
      for (Region &region : op.getRegions())
        for (Block &inner : region)
          placeFences(inner, pending || loop, inside, insideContents);
      pending = true;
      dropEscaping(&op, fresh, contents);
      continue;
    }
    HostEffects effects = effectsOf(&op, fresh);
    if (effects.touchesDeviceMemory && pending) {
      insertFence(&op);
      pending = false;
    }
    dropEscaping(&op, fresh, contents);
    if (effects.launches)
      pending = true;
  }
  return {pending, std::move(fresh), std::move(contents)};
}

void FenceInsertion::run() {
  findTableArguments();
  module.walk([&](func::FuncOp function) {
    if (function.isExternal())
      return;
    // The runtime calls an artifact function with work possibly queued on
    // the stream before it (the application's, the runtime's copies:
    // energy_support_cuda_set_stream), another function of the artifact
    // with its kernels possibly running, the thread pool a body with
    // nothing of its thread pending.
    bool pending = function.isPublic() || called.contains(function);
    DenseMap<Block *, BlockEnd> ends;
    for (Block &block : function.getBody()) {
      // A block whose one predecessor came before it (a kernel's body
      // after the entry's allocations) starts where that one ends; others
      // may follow any block.
      Block *before = block.getSinglePredecessor();
      auto end = before ? ends.find(before) : ends.end();
      if (block.isEntryBlock())
        ends[&block] = placeFences(block, pending);
      else if (end != ends.end())
        ends[&block] = placeFences(block, end->second.pending,
                                   end->second.fresh, end->second.contents);
      else
        ends[&block] = placeFences(block, /*pending=*/true);
    }
  });
}
} // namespace

LogicalResult mlir::energy::insertCudaHostFences(ModuleOp module) {
  auto fence = module.lookupSymbol<func::FuncOp>(ENERGY_SUPPORT_CUDA_FENCE);
  if (!fence)
    return module.emitError()
           << "energy-cuda-host-fences: the module does not declare "
           << ENERGY_SUPPORT_CUDA_FENCE
           << ": run it on the kernels' module after "
              "energy-outline-parallel-loops{gpu=true}";
  FenceInsertion(module, fence).run();
  return success();
}
