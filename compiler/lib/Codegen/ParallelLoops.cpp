//===- ParallelLoops.cpp - Kernel loops shared out on the thread pool -----===//
//
// Outlines marked loops into chunk functions: the values the body uses from
// outside travel in a context array of 8-byte slots, and the loop becomes a
// call of energy_support_parallel_for(chunk, context, count). For CUDA, a
// loop the GPU can run becomes a kernel taking the same slots instead, and
// the loop energy_support_cuda_launch(images, name, cache, slots, n, count).
//
//===----------------------------------------------------------------------===//

#include "energy/Codegen/ParallelLoops.h"
#include "DeviceScalars.h"
#include "LateHostReads.h"
#include "SerialKernels.h"
#include "energy/KernelSupport/KernelSupport.h"
#include "energy/KernelSupport/MatrixProduct.h"
#include "energy/KernelSupport/QuadraticContract.h"
#include "energy/KernelSupport/SoftmaxContract.h"
#include "energy/Runtime/ArtifactABI.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"

using namespace mlir;
using namespace mlir::energy;

namespace {
constexpr StringLiteral kParallelAttr = "energy.parallel";
constexpr StringLiteral kElementwiseAttr = "energy.elementwise";
constexpr StringLiteral kElementwiseTailAttr = "energy.elementwise_tail";

/// A value that fits an 8-byte context slot.
bool fitsSlot(Type type) {
  return isa<IndexType, IntegerType, LLVM::LLVMPointerType>(type) ||
         type.isF32() || type.isF64();
}

/// Scratch (energy_support_scratch_alloc) that only `loop` uses (and the kernel
/// frees).
bool isLoopScratch(Value value, scf::ForOp loop) {
  auto call = value.getDefiningOp<func::CallOp>();
  if (!call || call.getCallee() != ENERGY_SUPPORT_SCRATCH_ALLOC)
    return false;
  return llvm::all_of(value.getUsers(), [&](Operation *user) {
    if (loop->isAncestor(user))
      return true;
    auto free = dyn_cast<func::CallOp>(user);
    return free && free.getCallee() == ENERGY_SUPPORT_SCRATCH_FREE;
  });
}

/// What the body of a loop uses from outside, as the outlined code gets
/// it.
struct LoopInputs {
  /// Constants, defined again in the outlined code (where the compiler
  /// sees them: unit strides, trip counts).
  SmallVector<Value> constants;
  /// Values passed in 8-byte slots.
  SmallVector<Value> passed;
  /// Allocations of scratch only the loop uses (each gets a private copy).
  SmallVector<func::CallOp> scratch;
  /// Host ops a GPU kernel computes again at its start instead of taking
  /// their results (computeOnDevice), in order.
  SmallVector<Operation *> computed;
};

/// The inputs of `loop`, or nothing when a value it uses does not fit a
/// slot.
std::optional<LoopInputs> loopInputs(scf::ForOp loop) {
  llvm::SetVector<Value> used;
  getUsedValuesDefinedAbove(loop.getRegion(), used);
  LoopInputs inputs;
  for (Value value : used) {
    if (Operation *definition = value.getDefiningOp();
        definition && definition->hasTrait<OpTrait::ConstantLike>()) {
      inputs.constants.push_back(value);
      continue;
    }
    if (isLoopScratch(value, loop)) {
      inputs.scratch.push_back(value.getDefiningOp<func::CallOp>());
      continue;
    }
    if (!fitsSlot(value.getType()))
      return std::nullopt;
    inputs.passed.push_back(value);
  }
  for (func::CallOp allocation : inputs.scratch)
    if (!llvm::is_contained(inputs.passed, allocation.getOperand(0)))
      inputs.passed.push_back(allocation.getOperand(0));
  return inputs;
}

/// The bytes of a stack slot (llvm.alloca of a constant count of a scalar
/// type), or nothing.
std::optional<int64_t> stackSlotBytes(LLVM::AllocaOp slot) {
  APInt count;
  if (!matchPattern(slot.getArraySize(), m_ConstantInt(&count)))
    return std::nullopt;
  Type type = slot.getElemType();
  int64_t bytes = 0;
  if (isa<LLVM::LLVMPointerType>(type))
    bytes = 8;
  else if (type.isIntOrFloat() && type.getIntOrFloatBitWidth() % 8 == 0)
    bytes = type.getIntOrFloatBitWidth() / 8;
  else
    return std::nullopt;
  return bytes * count.getSExtValue();
}

/// Whether the GPU can run the body of `loop` with `inputs`: only
/// arithmetic, math, loops, vectors and memory access, and no stack slot
/// of unknown size.
bool gpuCanRun(scf::ForOp loop, const LoopInputs &inputs) {
  for (Value value : inputs.passed)
    if (auto slot = value.getDefiningOp<LLVM::AllocaOp>())
      if (!stackSlotBytes(slot))
        return false;
  WalkResult walk = loop.getBody()->walk([](Operation *op) {
    return codegen::runsOnGpu(op) ? WalkResult::advance()
                                  : WalkResult::interrupt();
  });
  return !walk.wasInterrupted();
}

/// Moves the values passed to a GPU kernel that it can compute itself from
/// GPU memory (codegen::deviceComputation) to `inputs.computed`; what those
/// computations take from the host is passed instead.
void computeOnDevice(scf::ForOp loop, LoopInputs &inputs) {
  llvm::SetVector<Operation *> computed;
  SmallVector<Value> kept;
  for (Value value : inputs.passed) {
    llvm::SetVector<Operation *> ops = codegen::deviceComputation(value, loop);
    if (ops.empty())
      kept.push_back(value);
    computed.insert(ops.begin(), ops.end());
  }
  if (computed.empty())
    return;
  llvm::SetVector<Value> passed(kept.begin(), kept.end());
  SmallVector<Value> constants;
  for (Operation *op : computed)
    for (Value operand : codegen::usedValues(op)) {
      Operation *definition = operand.getDefiningOp();
      if (definition && computed.contains(definition))
        continue;
      if (definition && definition->hasTrait<OpTrait::ConstantLike>()) {
        if (!llvm::is_contained(inputs.constants, operand))
          constants.push_back(operand);
        continue;
      }
      if (!fitsSlot(operand.getType()) ||
          (definition && isa<LLVM::AllocaOp>(definition)))
        return;
      passed.insert(operand);
    }
  llvm::append_range(inputs.constants, constants);
  inputs.passed = passed.takeVector();
  inputs.computed = computed.takeVector();
}

class Outliner {
public:
  Outliner(ModuleOp module, gpu::GPUModuleOp gpuKernels, bool gpuHostCode)
      : module(module), gpuKernels(gpuKernels), gpuHostCode(gpuHostCode),
        b(module.getContext()),
        pointerType(LLVM::LLVMPointerType::get(module.getContext())) {
    chunkType =
        b.getFunctionType({pointerType, b.getI64Type(), b.getI64Type()}, {});
  }

  void outline(scf::ForOp loop, unsigned number);
  /// Erases the host's computations that kernels took over and nothing else
  /// uses.
  void eraseComputedOnDevice();

private:
  Value slot(Value context, unsigned position, Location loc) {
    return LLVM::GEPOp::create(
        b, loc, pointerType, b.getI64Type(), context,
        ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(position)});
  }
  Value toI64(Value index, Location loc) {
    return arith::IndexCastOp::create(b, loc, b.getI64Type(), index);
  }
  Value i64(int64_t value, Location loc) {
    return arith::ConstantIntOp::create(b, loc, b.getI64Type(), value);
  }
  /// An array of `values` in 8-byte slots on the stack of the function of
  /// `loop`, filled just before it.
  Value packSlots(scf::ForOp loop, ArrayRef<Value> values);
  func::FuncOp support(StringRef name) {
    return module.lookupSymbol<func::FuncOp>(name);
  }
  void outlineChunk(scf::ForOp loop, LoopInputs &inputs, unsigned number);
  void outlineKernel(scf::ForOp loop, LoopInputs &inputs, unsigned number);
  /// A NUL-terminated string constant, as a global; its address.
  Value stringAddress(StringRef name, StringRef text, Location loc);

  ModuleOp module;
  gpu::GPUModuleOp gpuKernels;
  /// The host code as for the GPU, without one (outlineParallelLoops).
  bool gpuHostCode;
  OpBuilder b;
  Type pointerType;
  FunctionType chunkType;
  llvm::SetVector<Operation *> computedOnDevice;
};

Value Outliner::packSlots(scf::ForOp loop, ArrayRef<Value> values) {
  Location loc = loop.getLoc();
  auto parent = loop->getParentOfType<func::FuncOp>();
  Value context;
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&parent.front());
    Value slots = LLVM::ConstantOp::create(
        b, loc, b.getI64Type(),
        b.getI64IntegerAttr(std::max<int64_t>(values.size(), 1)));
    context =
        LLVM::AllocaOp::create(b, loc, pointerType, b.getI64Type(), slots);
  }
  for (auto [position, value] : llvm::enumerate(values))
    LLVM::StoreOp::create(b, loc,
                          value.getType().isIndex() ? toI64(value, loc) : value,
                          slot(context, position, loc));
  return context;
}

void Outliner::outline(scf::ForOp loop, unsigned number) {
  loop->removeAttr(kParallelAttr);
  if (loop.getNumResults() != 0 ||
      !isConstantIntValue(loop.getLowerBound(), 0) ||
      !isConstantIntValue(loop.getStep(), 1))
    return;
  std::optional<LoopInputs> inputs = loopInputs(loop);
  if (!inputs)
    return;
  bool onGpu = gpuCanRun(loop, *inputs);
  if (onGpu && (gpuKernels || gpuHostCode)) {
    computeOnDevice(loop, *inputs);
    computedOnDevice.insert(inputs->computed.begin(), inputs->computed.end());
  }
  if (onGpu && gpuKernels)
    outlineKernel(loop, *inputs, number);
  else
    outlineChunk(loop, *inputs, number);
  loop.erase();
}

void Outliner::outlineChunk(scf::ForOp loop, LoopInputs &inputs,
                            unsigned number) {
  Location loc = loop.getLoc();
  // The chunk function: unpack, allocate private scratch, run [begin, end).
  auto parent = loop->getParentOfType<func::FuncOp>();
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointAfter(parent);
  auto chunk = func::FuncOp::create(
      b, loc, (parent.getName() + "_chunk" + Twine(number)).str(), chunkType);
  chunk.setPrivate();
  Block *entry = chunk.addEntryBlock();
  b.setInsertionPointToStart(entry);
  IRMapping mapping;
  for (Value constant : inputs.constants)
    b.clone(*constant.getDefiningOp(), mapping);
  for (auto [position, value] : llvm::enumerate(inputs.passed)) {
    Type type = value.getType();
    Value loaded =
        LLVM::LoadOp::create(b, loc, type.isIndex() ? b.getI64Type() : type,
                             slot(entry->getArgument(0), position, loc));
    if (type.isIndex())
      loaded = arith::IndexCastOp::create(b, loc, type, loaded);
    mapping.map(value, loaded);
  }
  for (Operation *op : inputs.computed)
    b.clone(*op, mapping)->removeAttr(kUnchangedLoadAttr);
  SmallVector<Value> privateScratch;
  for (func::CallOp allocation : inputs.scratch)
    privateScratch.push_back(b.clone(*allocation, mapping)->getResult(0));
  for (auto [allocation, copy] : llvm::zip(inputs.scratch, privateScratch))
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
  for (Value pointer : privateScratch)
    func::CallOp::create(b, loc, support(ENERGY_SUPPORT_SCRATCH_FREE),
                         ValueRange{pointer});
  func::ReturnOp::create(b, loc);

  // The loop becomes: fill the context, call the pool.
  b.setInsertionPoint(loop);
  Value context = packSlots(loop, inputs.passed);
  Value function = func::ConstantOp::create(
      b, loc, chunkType, FlatSymbolRefAttr::get(chunk.getSymNameAttr()));
  func::CallOp::create(
      b, loc, support(ENERGY_SUPPORT_PARALLEL_FOR),
      ValueRange{function, context, toI64(loop.getUpperBound(), loc)});
}

void Outliner::eraseComputedOnDevice() {
  for (Operation *op : llvm::reverse(computedOnDevice))
    if (isOpTriviallyDead(op))
      op->erase();
}

Value Outliner::stringAddress(StringRef name, StringRef text, Location loc) {
  auto global = module.lookupSymbol<LLVM::GlobalOp>(name);
  if (!global) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(module.getBody());
    std::string bytes = text.str();
    bytes.push_back('\0');
    global = LLVM::GlobalOp::create(
        b, loc, LLVM::LLVMArrayType::get(b.getI8Type(), bytes.size()),
        /*isConstant=*/true, LLVM::Linkage::Internal, name,
        b.getStringAttr(bytes));
  }
  return LLVM::AddressOfOp::create(b, loc, global);
}

void Outliner::outlineKernel(scf::ForOp loop, LoopInputs &inputs,
                             unsigned number) {
  Location loc = loop.getLoc();
  auto parent = loop->getParentOfType<func::FuncOp>();
  std::string name = (parent.getName() + "_gpu" + Twine(number)).str();
  OpBuilder::InsertionGuard guard(b);

  // The kernel takes every input as 8 bytes, then one block of private
  // scratch per scratch allocation, then the trip count.
  unsigned argumentCount = inputs.passed.size() + inputs.scratch.size() + 1;
  b.setInsertionPointToEnd(gpuKernels.getBody());
  auto kernel = gpu::GPUFuncOp::create(
      b, loc, name,
      b.getFunctionType(SmallVector<Type>(argumentCount, b.getI64Type()), {}));
  kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  Block &entry = kernel.getBody().front();
  b.setInsertionPointToStart(&entry);
  IRMapping mapping;
  for (Value constant : inputs.constants)
    b.clone(*constant.getDefiningOp(), mapping);
  for (auto [position, value] : llvm::enumerate(inputs.passed)) {
    Value bits = entry.getArgument(position);
    Type type = value.getType();
    Value input;
    if (type.isIndex())
      input = arith::IndexCastOp::create(b, loc, type, bits);
    else if (isa<LLVM::LLVMPointerType>(type))
      input = LLVM::IntToPtrOp::create(b, loc, type, bits);
    else if (type.isInteger(64))
      input = bits;
    else if (type.isInteger())
      input = arith::TruncIOp::create(b, loc, type, bits);
    else if (type.isF64())
      input = arith::BitcastOp::create(b, loc, type, bits);
    else
      input = arith::BitcastOp::create(
          b, loc, type, arith::TruncIOp::create(b, loc, b.getI32Type(), bits));
    mapping.map(value, input);
  }
  for (Operation *op : inputs.computed)
    b.clone(*op, mapping)->removeAttr(kUnchangedLoadAttr);
  Value position = arith::AddIOp::create(
      b, loc,
      arith::MulIOp::create(b, loc,
                            gpu::BlockIdOp::create(b, loc, gpu::Dimension::x),
                            gpu::BlockDimOp::create(b, loc, gpu::Dimension::x)),
      gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x));
  Value count = arith::IndexCastOp::create(b, loc, b.getIndexType(),
                                           entry.getArguments().back());
  auto inRange = scf::IfOp::create(
      b, loc,
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, position, count),
      /*withElseRegion=*/false);
  b.setInsertionPoint(inRange.thenBlock()->getTerminator());
  for (auto [number, allocation] : llvm::enumerate(inputs.scratch)) {
    Value base = LLVM::IntToPtrOp::create(
        b, loc, pointerType, entry.getArgument(inputs.passed.size() + number));
    Value offset = arith::MulIOp::create(
        b, loc, mapping.lookup(allocation.getOperand(0)),
        arith::IndexCastOp::create(b, loc, b.getI64Type(), position));
    mapping.map(allocation.getResult(0),
                LLVM::GEPOp::create(b, loc, pointerType, b.getI8Type(), base,
                                    ValueRange{offset}));
  }
  mapping.map(loop.getInductionVar(), position);
  for (Operation &op : loop.getBody()->without_terminator())
    b.clone(op, mapping);
  b.setInsertionPointToEnd(&entry);
  gpu::ReturnOp::create(b, loc);

  // The loop becomes a launch: private scratch for every iteration, stack
  // slots copied to managed memory and back, the kernel's status folded
  // into the function's.
  b.setInsertionPoint(loop);
  Value trips = toI64(loop.getUpperBound(), loc);
  auto allocate = [&](Value bytes) {
    return func::CallOp::create(b, loc, support(ENERGY_SUPPORT_CUDA_ALLOC),
                                ValueRange{bytes})
        .getResult(0);
  };
  SmallVector<Value> arguments;
  SmallVector<std::tuple<Value, Value, Value>> mirrors;
  for (Value value : inputs.passed) {
    auto stackSlot = value.getDefiningOp<LLVM::AllocaOp>();
    if (!stackSlot) {
      arguments.push_back(value);
      continue;
    }
    Value bytes = i64(*stackSlotBytes(stackSlot), loc);
    Value mirror = allocate(bytes);
    LLVM::MemcpyOp::create(b, loc, mirror, value, bytes, false);
    mirrors.emplace_back(value, mirror, bytes);
    arguments.push_back(mirror);
  }
  SmallVector<Value> scratchBlocks;
  for (func::CallOp allocation : inputs.scratch) {
    scratchBlocks.push_back(allocate(
        arith::MulIOp::create(b, loc, allocation.getOperand(0), trips)));
    arguments.push_back(scratchBlocks.back());
  }
  Value context = packSlots(loop, arguments);
  Value functionSlot;
  {
    OpBuilder::InsertionGuard globalGuard(b);
    b.setInsertionPointToEnd(module.getBody());
    LLVM::GlobalOp::create(b, loc, b.getI64Type(), /*isConstant=*/false,
                           LLVM::Linkage::Internal, name + "_function",
                           b.getI64IntegerAttr(0));
  }
  functionSlot = LLVM::AddressOfOp::create(
      b, loc, pointerType,
      FlatSymbolRefAttr::get(b.getContext(), name + "_function"));
  Value images = LLVM::AddressOfOp::create(
      b, loc, pointerType,
      FlatSymbolRefAttr::get(b.getContext(), kCudaImagesSymbol));
  Value code = func::CallOp::create(
                   b, loc, support(ENERGY_SUPPORT_CUDA_LAUNCH),
                   ValueRange{images, stringAddress(name + "_name", name, loc),
                              functionSlot, context,
                              arith::ConstantIntOp::create(
                                  b, loc, b.getI32Type(), arguments.size()),
                              trips})
                   .getResult(0);
  for (auto [stackSlot, mirror, bytes] : mirrors) {
    LLVM::MemcpyOp::create(b, loc, stackSlot, mirror, bytes, false);
    func::CallOp::create(b, loc, support(ENERGY_SUPPORT_CUDA_FREE),
                         ValueRange{mirror});
  }
  for (Value block : scratchBlocks)
    func::CallOp::create(b, loc, support(ENERGY_SUPPORT_CUDA_FREE),
                         ValueRange{block});
  foldIntoKernelStatus(b, loc, code);
}
} // namespace

void mlir::energy::foldIntoKernelStatus(OpBuilder &b, Location loc,
                                        Value code) {
  Operation *around = b.getInsertionBlock()->getParentOp();
  auto function = dyn_cast<func::FuncOp>(around);
  if (!function)
    function = around->getParentOfType<func::FuncOp>();
  Value status;
  function.walk([&](LLVM::AllocaOp slot) {
    if (slot->hasAttr(kKernelStatusAttr))
      status = slot;
  });
  if (status)
    LLVM::AtomicRMWOp::create(b, loc, LLVM::AtomicBinOp::max, status, code,
                              LLVM::AtomicOrdering::monotonic);
}

/// The support functions a CUDA artifact calls instead of the CPU's: memory
/// both the host and the GPU reach, cuBLAS; for f32, with `bf16Products`,
/// its tensor-core products. (Softmax contractions call what their engine
/// names.) A product that keeps its rhs packed (a CPU cache) is the plain
/// product there.
static void useCudaSupport(ModuleOp module, bool bf16Products) {
  module.walk([&](func::CallOp call) {
    bool single = call.getCallee() == ENERGY_SUPPORT_MATMUL_BATCH_PACKED_F32;
    if (!single && call.getCallee() != ENERGY_SUPPORT_MATMUL_BATCH_PACKED_F64)
      return;
    call.setCallee(single ? ENERGY_SUPPORT_MATMUL_BATCH_F32
                          : ENERGY_SUPPORT_MATMUL_BATCH_F64);
    call->eraseOperands(call.getNumOperands() - 2, 2);
  });
  const std::pair<StringRef, StringRef> replacements[] = {
      {ENERGY_SUPPORT_SCRATCH_ALLOC, ENERGY_SUPPORT_CUDA_ALLOC},
      {ENERGY_SUPPORT_SCRATCH_FREE, ENERGY_SUPPORT_CUDA_FREE},
      {ENERGY_SUPPORT_MATMUL_F32, bf16Products
                                      ? ENERGY_SUPPORT_CUDA_MATMUL_BF16
                                      : ENERGY_SUPPORT_CUDA_MATMUL_F32},
      {ENERGY_SUPPORT_MATMUL_F64, ENERGY_SUPPORT_CUDA_MATMUL_F64},
      {ENERGY_SUPPORT_MATMUL_BATCH_F32,
       bf16Products ? ENERGY_SUPPORT_CUDA_MATMUL_BATCH_BF16
                    : ENERGY_SUPPORT_CUDA_MATMUL_BATCH_F32},
      {ENERGY_SUPPORT_MATMUL_BATCH_F64, ENERGY_SUPPORT_CUDA_MATMUL_BATCH_F64}};
  module.walk([&](func::CallOp call) {
    for (auto [cpu, cuda] : replacements)
      if (call.getCallee() == cpu)
        call.setCallee(cuda);
  });
}

void mlir::energy::markParallel(scf::ForOp loop) {
  loop->setAttr(kParallelAttr, UnitAttr::get(loop.getContext()));
}

void mlir::energy::markElementwise(scf::ForOp loop) {
  loop->setAttr(kElementwiseAttr, UnitAttr::get(loop.getContext()));
}

void mlir::energy::markElementwise(scf::ForOp vectors, scf::ForOp tail) {
  markElementwise(vectors);
  tail->setAttr(kElementwiseTailAttr, UnitAttr::get(tail.getContext()));
}

/// Rewrites `loop` (no carried values) to run from 0 by 1 over its trip
/// count, its old induction value computed from the new one, and marks it
/// parallel; returns that old induction value.
static Value normaliseToParallel(scf::ForOp loop) {
  Location loc = loop.getLoc();
  OpBuilder b(loop);
  Value lower = loop.getLowerBound(), step = loop.getStep();
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  // Folded, so that a constant trip count stays one (computeOnDevice).
  Value span = b.createOrFold<arith::MaxSIOp>(
      loc, b.createOrFold<arith::SubIOp>(loc, loop.getUpperBound(), lower),
      zero);
  loop.setLowerBound(zero);
  loop.setUpperBound(b.createOrFold<arith::CeilDivUIOp>(loc, span, step));
  loop.setStep(arith::ConstantIndexOp::create(b, loc, 1));
  Value trip = loop.getInductionVar();
  b.setInsertionPointToStart(loop.getBody());
  auto scaled = arith::MulIOp::create(b, loc, trip, step);
  Value position = arith::AddIOp::create(b, loc, lower, scaled);
  trip.replaceAllUsesExcept(position, scaled);
  markParallel(loop);
  return position;
}

/// `vectors` and the loop after it over the remainder (from where `vectors`
/// ends) as one parallel loop from 0 by 1, an iteration per vector: the
/// vector's body where a whole vector fits, else the remainder loop from
/// there. False (nothing changed) when the next op is not that loop.
static bool mergeWithTail(scf::ForOp vectors) {
  auto tail = dyn_cast_or_null<scf::ForOp>(vectors->getNextNode());
  if (!tail || !tail->hasAttr(kElementwiseTailAttr) ||
      tail.getLowerBound() != vectors.getUpperBound() ||
      !tail.getInitArgs().empty())
    return false;
  tail->removeAttr(kElementwiseTailAttr);
  // The vectors' iterations now cover the remainder too.
  Value count = tail.getUpperBound(), step = vectors.getStep();
  vectors.setUpperBound(count);
  Value offset = normaliseToParallel(vectors);
  Operation *firstOfBody = offset.getDefiningOp()->getNextNode();
  Location loc = vectors.getLoc();
  OpBuilder b(firstOfBody);
  Value whole =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sle,
                            arith::AddIOp::create(b, loc, offset, step), count);
  auto branch = scf::IfOp::create(b, loc, whole, /*withElseRegion=*/true);
  Block *body = vectors.getBody();
  branch.thenBlock()->getOperations().splice(
      branch.thenBlock()->begin(), body->getOperations(),
      Block::iterator(firstOfBody), std::prev(body->end()));
  tail->moveBefore(branch.elseBlock()->getTerminator());
  tail.setLowerBound(offset);
  return true;
}

/// Whether `loop` runs from 0 by 1.
static bool fromZeroByOne(scf::ForOp loop) {
  return matchPattern(loop.getLowerBound(), m_Zero()) &&
         matchPattern(loop.getStep(), m_One());
}

/// For the GPU: an element-wise loop from 0 by 1 that is all its parallel
/// parent loop does besides pure operations is marked parallel too, so that
/// coalesceParallelBand gives each of its elements a thread (a warp's
/// threads then take adjacent elements) rather than each thread a loop over
/// them (a row of a head's table per thread, say).
static void joinParallelParent(scf::ForOp loop) {
  auto parent = dyn_cast<scf::ForOp>(loop->getParentOp());
  if (!parent || !parent->hasAttr(kParallelAttr) || !fromZeroByOne(loop))
    return;
  for (Operation &op : parent.getBody()->without_terminator())
    if (&op != loop.getOperation() && (op.getNumRegions() > 0 || !isPure(&op)))
      return;
  markParallel(loop);
}

/// For the GPU: `loop` (marked, from 0 by 1) and the marked loops from 0 by
/// 1 perfectly nested in it whose trip counts do not depend on the nest, as
/// one loop over all their positions (row-major), so that its kernel gets a
/// thread per position of the band, not only per position of the outermost
/// loop (the heads of a multi-head term). Pure operations between the loops
/// move into the innermost body, constant bounds out of the band.
static void coalesceParallelBand(scf::ForOp loop) {
  if (!fromZeroByOne(loop))
    return;
  SmallVector<scf::ForOp> band{loop};
  for (;;) {
    scf::ForOp inner;
    SmallVector<Operation *> between;
    bool perfect = true;
    for (Operation &op : band.back().getBody()->without_terminator()) {
      auto nested = dyn_cast<scf::ForOp>(op);
      if (!inner && nested && nested->hasAttr(kParallelAttr) &&
          nested.getInitArgs().empty()) {
        inner = nested;
        continue;
      }
      if (inner || op.getNumRegions() > 0 || !isPure(&op)) {
        perfect = false;
        break;
      }
      between.push_back(&op);
    }
    if (!perfect || !inner || !fromZeroByOne(inner))
      break;
    Value extent = inner.getUpperBound();
    if (loop->isAncestor(extent.getParentRegion()->getParentOp())) {
      Operation *definition = extent.getDefiningOp();
      if (!definition || !matchPattern(definition, m_Constant()))
        break;
      definition->moveBefore(loop);
    }
    for (Operation *op : llvm::reverse(between))
      if (op->getBlock() == band.back().getBody())
        op->moveBefore(&inner.getBody()->front());
    band.push_back(inner);
  }
  if (band.size() < 2)
    return;
  // One loop over the product of the trip counts; each old induction value
  // is its digit of the new one, the innermost varying fastest.
  Location loc = loop.getLoc();
  OpBuilder b(loop);
  Value total = loop.getUpperBound();
  for (scf::ForOp inner : ArrayRef(band).drop_front())
    total = arith::MulIOp::create(b, loc, total, inner.getUpperBound());
  loop.setUpperBound(total);
  Value position = loop.getInductionVar();
  b.setInsertionPointToStart(loop.getBody());
  SmallVector<Operation *> digitOps;
  Value rest = position;
  SmallVector<Value> digits(band.size());
  for (size_t k = band.size() - 1; k > 0; --k) {
    auto digit = arith::RemUIOp::create(b, loc, rest, band[k].getUpperBound());
    auto quotient =
        arith::DivUIOp::create(b, loc, rest, band[k].getUpperBound());
    digitOps.append({digit, quotient});
    digits[k] = digit;
    rest = quotient;
  }
  digits[0] = rest;
  for (size_t k = 1; k < band.size(); ++k)
    band[k].getInductionVar().replaceAllUsesWith(digits[k]);
  SmallPtrSet<Operation *, 8> exceptions(digitOps.begin(), digitOps.end());
  position.replaceAllUsesExcept(digits[0], exceptions);
  // The innermost body takes the place of the second loop of the band.
  Block *innermost = band.back().getBody();
  loop.getBody()->getOperations().splice(
      Block::iterator(band[1]), innermost->getOperations(), innermost->begin(),
      std::prev(innermost->end()));
  band[1].erase();
}

void mlir::energy::outlineParallelLoops(ModuleOp module,
                                        gpu::GPUModuleOp gpuKernels,
                                        bool bf16Products, bool gpuHostCode) {
  // The host code as for the GPU: with one, or on the CPU to check it.
  bool gpuShaped = gpuKernels || gpuHostCode;
  SmallVector<scf::ForOp> elementwise;
  module.walk([&](scf::ForOp loop) {
    if (loop->hasAttr(kElementwiseAttr))
      elementwise.push_back(loop);
  });
  for (scf::ForOp loop : elementwise) {
    loop->removeAttr(kElementwiseAttr);
    if (!gpuShaped || !loop.getInitArgs().empty())
      continue;
    if (loop->getParentOfType<scf::ForOp>())
      joinParallelParent(loop);
    else if (!mergeWithTail(loop))
      normaliseToParallel(loop);
  }
  // Remainders whose vector loops stayed (nested in another loop): alone.
  module.walk([&](scf::ForOp loop) {
    if (!loop->hasAttr(kElementwiseTailAttr))
      return;
    loop->removeAttr(kElementwiseTailAttr);
    if (gpuShaped && !loop->getParentOfType<scf::ForOp>() &&
        loop.getInitArgs().empty())
      normaliseToParallel(loop);
  });
  // What the host would do on GPU memory alone: kernels of one thread.
  if (gpuShaped)
    for (auto function : module.getOps<func::FuncOp>()) {
      if (function.isExternal())
        continue;
      codegen::sinkHostReads(function);
      for (scf::ForOp loop :
           codegen::wrapSerialRuns(function, [](scf::ForOp loop) {
             return loop->hasAttr(kParallelAttr);
           }))
        markParallel(loop);
    }
  SmallVector<scf::ForOp> marked;
  module.walk<WalkOrder::PreOrder>([&](scf::ForOp loop) {
    if (!loop->hasAttr(kParallelAttr))
      return WalkResult::advance();
    marked.push_back(loop);
    return WalkResult::skip();
  });
  Outliner outliner(module, gpuKernels, gpuHostCode);
  for (auto [number, loop] : llvm::enumerate(marked)) {
    if (gpuShaped)
      coalesceParallelBand(loop);
    outliner.outline(loop, number);
  }
  outliner.eraseComputedOnDevice();
  auto dropMarks = [](Operation *op) {
    op->removeAttr(kUnchangedLoadAttr);
    op->removeAttr(kHostSlotsAttr);
  };
  module.walk(dropMarks);
  if (gpuKernels) {
    gpuKernels.walk(dropMarks);
    useCudaSupport(module, bf16Products);
  }

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
