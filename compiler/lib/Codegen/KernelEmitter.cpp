//===- KernelEmitter.cpp - Energy model to kernel functions ---------------===//
//
// The kernels of a model (ArtifactABI.h): one function per gradient program
// (and an exported kernel for each gradient the manifest lists), the energy,
// each output, the step program and the stopping rule, over the buffers of
// the artifact's layout. KernelLowering.h lowers their bodies.
//
//===----------------------------------------------------------------------===//

#include "KernelLowering.h"
#include "SupportFunctions.h"
#include "energy/KernelSupport/KernelSupport.h"
#include "energy/Transforms/ProgramReads.h"

using namespace mlir;
using namespace mlir::energy;
using namespace mlir::energy::codegen;

void codegen::declareRuntimeFunctions(ModuleOp target) {
  OpBuilder b(target.getContext());
  b.setInsertionPointToStart(target.getBody());
  Location loc = target.getLoc();
  Type pointer = LLVM::LLVMPointerType::get(b.getContext());
  auto typeOf = [&](SupportType type) -> Type {
    switch (type) {
    case SupportType::I32:
      return b.getI32Type();
    case SupportType::I64:
      return b.getI64Type();
    case SupportType::F64:
      return b.getF64Type();
    case SupportType::Pointer:
      return pointer;
    case SupportType::ChunkFunction:
      return b.getFunctionType({pointer, b.getI64Type(), b.getI64Type()}, {});
    }
    llvm_unreachable("every support type is covered");
  };
  for (const SupportFunction &support : supportFunctions()) {
    SmallVector<Type> arguments, results;
    for (SupportType type : support.arguments)
      arguments.push_back(typeOf(type));
    for (SupportType type : support.results)
      results.push_back(typeOf(type));
    auto function = func::FuncOp::create(b, loc, support.name,
                                         b.getFunctionType(arguments, results));
    function.setPrivate();
    // Scratch is fresh memory, as malloc's: nothing else points into it.
    if (support.name == ENERGY_SUPPORT_SCRATCH_ALLOC)
      function.setResultAttr(0, LLVM::LLVMDialect::getNoAliasAttrName(),
                             b.getUnitAttr());
  }
}

namespace {
/// A symbol-safe spelling of a model name (tensor names may contain '.').
std::string mangle(StringRef name) {
  std::string result;
  for (char c : name)
    result += (isalnum(static_cast<unsigned char>(c)) ? c : '_');
  return result;
}

} // namespace

/// Whether `gradient` is a joint gradient the artifact exports: one
/// derivation of several tensors' gradients (what a stopping rule reads, a
/// sharded tensor's and its gathered copy's), each of which has a gradient
/// of its own in `layout`, so that asking for them together evaluates once.
static bool isExportedJoint(GradientOp gradient, const ArtifactLayout &layout) {
  if (gradient.getOf() || !gradient.isJoint())
    return false;
  return llvm::all_of(gradient.getTensors(), [&](FlatSymbolRefAttr tensor) {
    return llvm::any_of(layout.gradientKernels,
                        [&](const ArtifactLayout::NamedKernel &kernel) {
                          return kernel.name == tensor.getValue();
                        });
  });
}

ArtifactLayout mlir::energy::artifactLayoutOf(ModelOp model) {
  ArtifactLayout layout;
  Block &body = model.getBody().front();
  for (DimOp dim : body.getOps<DimOp>())
    layout.dims.push_back(dim);
  for (ConstOp constant : body.getOps<ConstOp>())
    layout.consts.push_back(constant);
  for (TensorOp tensor : body.getOps<TensorOp>())
    layout.buffers.push_back({tensor.getSymName().str(),
                              ArtifactLayout::BufferKind::Tensor, tensor});
  for (GradientOp gradient : body.getOps<GradientOp>())
    if (!gradient.getOf() && !gradient.isJoint())
      layout.buffers.push_back({("grad." + gradient.getTensor()).str(),
                                ArtifactLayout::BufferKind::Gradient,
                                gradient});
  for (OutputOp output : body.getOps<OutputOp>())
    layout.buffers.push_back({output.getSymName().str(),
                              ArtifactLayout::BufferKind::Output, output});

  for (GradientOp gradient : body.getOps<GradientOp>())
    if (!gradient.getOf() && !gradient.isJoint())
      layout.gradientKernels.push_back(
          {gradient.getTensor().str(),
           "energy_kernel_grad_" + mangle(gradient.getTensor())});
  for (GradientOp gradient : body.getOps<GradientOp>())
    if (isExportedJoint(gradient, layout)) {
      ArtifactLayout::JointKernel joint;
      joint.symbol = "energy_kernel_grad";
      for (FlatSymbolRefAttr tensor : gradient.getTensors()) {
        joint.tensors.push_back(tensor.getValue().str());
        joint.symbol += "_" + mangle(tensor.getValue());
      }
      layout.jointGradientKernels.push_back(std::move(joint));
    }
  // The energy: the sum of the terms' energies; with several terms, also
  // a kernel per term.
  layout.energyKernel = "energy_kernel_energy";
  SmallVector<TermOp> terms;
  for (TermOp term : body.getOps<TermOp>())
    if (!term.getAuxiliary())
      terms.push_back(term);
  for (TermOp term : terms)
    layout.termKernels.push_back(
        {term.getSymName().str(),
         terms.size() > 1 ? "energy_kernel_term_" + mangle(term.getSymName())
                          : layout.energyKernel});
  for (OutputOp output : body.getOps<OutputOp>())
    layout.outputKernels.push_back(
        {output.getSymName().str(),
         "energy_kernel_output_" + mangle(output.getSymName())});
  for (TermOp term : body.getOps<TermOp>())
    if (term.getLoss())
      layout.lossKernels.push_back(
          {term.getSymName().str(),
           "energy_kernel_loss_" + mangle(term.getSymName())});
  if (auto programs = body.getOps<UpdateProgramOp>(); !programs.empty()) {
    layout.stepKernel = "energy_kernel_step";
    UpdateProgramOp program = *programs.begin();
    if (!program.getBegin().empty())
      layout.runBeginKernel = "energy_kernel_run_begin";
    if (!program.getFinish().empty())
      layout.runFinishKernel = "energy_kernel_run_finish";
  }
  if (auto backwards = body.getOps<BackwardProgramOp>(); !backwards.empty()) {
    layout.backwardKernels = {"energy_kernel_backward_seed",
                              "energy_kernel_backward_step",
                              "energy_kernel_backward_finish"};
    layout.implicitBackward = (*backwards.begin()).getImplicit();
    if (!(*backwards.begin()).getCotangents().empty())
      layout.backwardCotangentsKernel = "energy_kernel_backward_cotangents";
  }
  if (DynamicsOp dynamics = model.getDynamics();
      dynamics && !dynamics.getUntil().empty())
    layout.untilKernel = "energy_kernel_until";
  return layout;
}

LogicalResult mlir::energy::emitKernels(ModelOp model, ModuleOp target,
                                        FloatType elementType) {
  ModelContext context;
  context.model = model;
  context.target = target;
  context.elementType = elementType;
  context.layout = artifactLayoutOf(model);
  ArtifactLayout &layout = context.layout;
  Block &body = model.getBody().front();
  for (auto [number, dim] : llvm::enumerate(layout.dims))
    context.dimIndex[dim.getSymName()] = number;
  for (auto [number, constant] : llvm::enumerate(layout.consts))
    context.constIndex[constant.getSymName()] = number;
  for (auto [number, buffer] : llvm::enumerate(layout.buffers))
    context.bufferIndex[buffer.name] = number;
  context.writtenTensors = storedTensors(model);

  declareRuntimeFunctions(target);
  KernelLoweringPatterns patterns(model.getContext());
  populateKernelLowerings(patterns);
  OpBuilder b(model.getContext());
  b.setInsertionPointToEnd(target.getBody());
  Type pointer = LLVM::LLVMPointerType::get(b.getContext());
  SmallVector<Type> kernelArguments = {pointer, pointer, pointer,
                                       b.getI64Type(), pointer};
  // A kernel, or (with targets) a private gradient function that takes one
  // buffer per tensor after the kernel's arguments.
  auto createFunction = [&](StringRef name, unsigned targets, Location loc) {
    SmallVector<Type> arguments = kernelArguments;
    arguments.append(targets, pointer);
    auto function = func::FuncOp::create(
        b, loc, name, b.getFunctionType(arguments, {b.getI32Type()}));
    if (targets)
      function.setPrivate();
    return function;
  };

  // Gradient programs first: kernels and step programs call them.
  unsigned gradientNumber = 0;
  for (GradientOp gradient : body.getOps<GradientOp>()) {
    std::string name = "energy_gradient_" + std::to_string(gradientNumber++);
    for (FlatSymbolRefAttr tensor : gradient.getTensors())
      name += "_" + mangle(tensor.getValue());
    context.gradientFunctions[gradient] =
        createFunction(name, gradient.getTensors().size(), gradient.getLoc());
  }
  const ArtifactLayout::NamedKernel *gradientKernel =
      layout.gradientKernels.data();
  const ArtifactLayout::JointKernel *jointKernel =
      layout.jointGradientKernels.data();
  for (GradientOp gradient : body.getOps<GradientOp>()) {
    func::FuncOp function = context.gradientFunctions[gradient];
    KernelFunction kernel(context, function, patterns);
    // The function adds into its targets; its callers clear them.
    for (auto [position, name] : llvm::enumerate(gradient.getTensors()))
      kernel.setGradientTarget(
          name.getValue(),
          function.getArgument(kernelArguments.size() + position));
    if (failed(kernel.emitBlock(gradient.getBody().front(), {})))
      return failure();
    kernel.finish();
    std::string symbol;
    if (!gradient.getOf() && !gradient.isJoint())
      symbol = (gradientKernel++)->symbol;
    else if (isExportedJoint(gradient, layout))
      symbol = (jointKernel++)->symbol;
    else
      continue;
    // The entry point clears each gradient buffer and adds into it.
    func::FuncOp entry =
        createFunction(symbol, /*targets=*/0, gradient.getLoc());
    KernelFunction wrapper(context, entry, patterns);
    SmallVector<Value> arguments(wrapper.kernelArguments());
    for (FlatSymbolRefAttr name : gradient.getTensors()) {
      Value destination =
          wrapper.bufferPointer(("grad." + name.getValue()).str());
      auto tensor = model.lookupSymbol<TensorOp>(name);
      wrapper.copyInto(Lowered{wrapper.zero(), Value()}, tensor.getArrayType(),
                       destination, /*accumulate=*/false);
      arguments.push_back(destination);
    }
    Value code =
        func::CallOp::create(wrapper.b, wrapper.loc, function, arguments)
            .getResult(0);
    wrapper.finish(code);
  }

  auto emitEnergy = [&](StringRef symbol, ArrayRef<TermOp> summed,
                        Location loc) -> LogicalResult {
    func::FuncOp function = createFunction(symbol, 0, loc);
    KernelFunction kernel(context, function, patterns);
    Value total = kernel.zero();
    for (TermOp term : summed) {
      FailureOr<SmallVector<Value>> value =
          kernel.emitBlock(term.getBody().front(), {});
      if (failed(value))
        return failure();
      total =
          arith::AddFOp::create(kernel.b, kernel.loc, total, value->front());
    }
    kernel.storeResult(total);
    kernel.finish();
    return success();
  };
  SmallVector<TermOp> terms;
  for (TermOp term : body.getOps<TermOp>())
    if (!term.getAuxiliary())
      terms.push_back(term);
  if (failed(emitEnergy(layout.energyKernel, terms, model.getLoc())))
    return failure();
  if (terms.size() > 1)
    for (auto [term, kernel] : llvm::zip_equal(terms, layout.termKernels))
      if (failed(emitEnergy(kernel.symbol, {term}, term.getLoc())))
        return failure();

  for (auto [output, symbol] :
       llvm::zip_equal(body.getOps<OutputOp>(), layout.outputKernels)) {
    func::FuncOp function = createFunction(symbol.symbol, 0, output.getLoc());
    KernelFunction kernel(context, function, patterns);
    Value destination = kernel.bufferPointer(output.getSymName());
    if (failed(kernel.emitComprehension(
            output.getDomain(), cast<ArrayType>(output.getElementType()),
            output.getBody().front(), destination)))
      return failure();
    kernel.finish();
  }

  // Losses: one kernel each, like a term's energy.
  const ArtifactLayout::NamedKernel *lossKernel = layout.lossKernels.data();
  for (TermOp term : body.getOps<TermOp>())
    if (term.getLoss() &&
        failed(emitEnergy((lossKernel++)->symbol, {term}, term.getLoc())))
      return failure();

  auto emitProgram = [&](Region &program, StringRef symbol,
                         Location loc) -> LogicalResult {
    func::FuncOp function = createFunction(symbol, 0, loc);
    KernelFunction kernel(context, function, patterns, /*isProgram=*/true);
    if (failed(kernel.emitBlock(program.front(), {})))
      return failure();
    kernel.finish();
    return success();
  };
  if (auto programs = body.getOps<UpdateProgramOp>(); !programs.empty()) {
    UpdateProgramOp program = *programs.begin();
    if (failed(emitProgram(program.getBody(), layout.stepKernel,
                           program.getLoc())))
      return failure();
    for (auto [part, symbol] :
         {std::pair{&program.getBegin(), &layout.runBeginKernel},
          std::pair{&program.getFinish(), &layout.runFinishKernel}})
      if (!part->empty() &&
          failed(emitProgram(*part, *symbol, program.getLoc())))
        return failure();
  }
  if (auto backwards = body.getOps<BackwardProgramOp>(); !backwards.empty()) {
    BackwardProgramOp backward = *backwards.begin();
    Location loc = backward.getLoc();
    Region *parts[] = {&backward.getSeed(), &backward.getBody(),
                       &backward.getFinish()};
    for (auto [part, symbol] : llvm::zip_equal(parts, layout.backwardKernels))
      if (failed(emitProgram(*part, symbol, loc)))
        return failure();
    if (!layout.backwardCotangentsKernel.empty() &&
        failed(emitProgram(backward.getCotangents(),
                           layout.backwardCotangentsKernel, loc)))
      return failure();
  }
  if (!layout.untilKernel.empty()) {
    DynamicsOp dynamics = model.getDynamics();
    func::FuncOp function =
        createFunction(layout.untilKernel, 0, dynamics.getLoc());
    KernelFunction kernel(context, function, patterns, /*isProgram=*/true);
    FailureOr<SmallVector<Value>> done =
        kernel.emitBlock(dynamics.getUntil().front(), {});
    if (failed(done))
      return failure();
    Value flag = arith::UIToFPOp::create(kernel.b, kernel.loc, elementType,
                                         done->front());
    kernel.storeResult(flag);
    kernel.finish();
  }
  return success();
}
