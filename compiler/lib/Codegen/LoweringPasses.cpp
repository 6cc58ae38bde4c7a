//===- LoweringPasses.cpp - The code generation passes --------------------===//
//
// The passes of Passes.td over what KernelEmitter, ParallelLoops and the
// CUDA backend do: each finds its module, runs that step, and fails with a
// located error instead of leaving broken IR.
//
//===----------------------------------------------------------------------===//

#include "energy/Codegen/Passes.h"

#include "energy/Codegen/Artifact.h"
#include "energy/Codegen/CudaHostFences.h"
#include "energy/Codegen/KernelEmitter.h"
#include "energy/Codegen/ParallelLoops.h"
#include "energy/IR/EnergyOps.h"
#include "energy/KernelSupport/KernelSupport.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>

namespace mlir::energy {
#define GEN_PASS_DEF_ENERGYEMITKERNELS
#define GEN_PASS_DEF_ENERGYOUTLINEPARALLELLOOPS
#define GEN_PASS_DEF_ENERGYCOMPILEGPUKERNELS
#define GEN_PASS_DEF_ENERGYAPPROXIMATEMATH
#define GEN_PASS_DEF_ENERGYCUDAHOSTFENCES
#include "energy/Codegen/Passes.h.inc"
} // namespace mlir::energy

using namespace mlir;
using namespace mlir::energy;

namespace {

struct EmitKernelsPass
    : public mlir::energy::impl::EnergyEmitKernelsBase<EmitKernelsPass> {
  using EnergyEmitKernelsBase::EnergyEmitKernelsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto models = module.getOps<ModelOp>();
    if (models.empty() || std::next(models.begin()) != models.end()) {
      module.emitError("energy-emit-kernels needs a module of one "
                       "energy.model");
      return signalPassFailure();
    }
    ModelOp model = *models.begin();
    if (elementType != "f32" && elementType != "f64") {
      model.emitError() << "energy-emit-kernels: element type '" << elementType
                        << "'; expected f32 or f64";
      return signalPassFailure();
    }
    if (module.lookupSymbol(kArtifactModuleName)) {
      model.emitError() << "energy-emit-kernels: the module has its kernels "
                           "(@"
                        << kArtifactModuleName << ") already";
      return signalPassFailure();
    }
    OpBuilder builder = OpBuilder::atBlockEnd(module.getBody());
    auto artifact = ModuleOp::create(builder, model.getLoc(),
                                     StringRef(kArtifactModuleName));
    FloatType type = elementType == "f64"
                         ? FloatType(Float64Type::get(&getContext()))
                         : FloatType(Float32Type::get(&getContext()));
    if (failed(emitKernels(model, artifact, type))) {
      artifact.erase();
      return signalPassFailure();
    }
    // Emission builds its IR directly; a slip there is a compiler bug, and
    // is reported as one rather than crashing a later pass.
    if (failed(verify(artifact))) {
      artifact.erase();
      model.emitError("internal error: the emitted kernels do not verify");
      return signalPassFailure();
    }
  }
};

struct OutlineParallelLoopsPass
    : public mlir::energy::impl::EnergyOutlineParallelLoopsBase<
          OutlineParallelLoopsPass> {
  using EnergyOutlineParallelLoopsBase::EnergyOutlineParallelLoopsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // The kernels' module declares the support functions the loops become
    // calls of; another (the one around it) does not.
    bool declared = module.lookupSymbol(ENERGY_SUPPORT_PARALLEL_FOR) &&
                    (!gpu || module.lookupSymbol(ENERGY_SUPPORT_CUDA_LAUNCH));
    bool loops =
        module
            .walk([](scf::ForOp loop) {
              bool marked =
                  llvm::any_of(loop->getAttrs(), [](NamedAttribute attribute) {
                    return attribute.getName().strref().starts_with("energy.");
                  });
              return marked ? WalkResult::interrupt() : WalkResult::advance();
            })
            .wasInterrupted();
    if (!declared && loops) {
      module.emitError()
          << "energy-outline-parallel-loops: this module does not declare "
             "the kernel support functions: run it on the module "
             "energy-emit-kernels writes the kernels into "
             "(builtin.module(energy-emit-kernels, "
             "builtin.module(energy-outline-parallel-loops)))";
      return signalPassFailure();
    }
    if (!gpu) {
      outlineParallelLoops(module, nullptr, false, gpuHostCode);
      return;
    }
    // The GPU's kernels are outlined into a module of their own, which
    // joins this one after the walk over its loops; their images go to a
    // global that energy-compile-gpu-kernels fills.
    Location loc = module.getLoc();
    OwningOpRef<ModuleOp> device = ModuleOp::create(loc);
    OpBuilder builder = OpBuilder::atBlockEnd(device->getBody());
    auto kernels = gpu::GPUModuleOp::create(builder, loc, "energy_kernels");
    builder.setInsertionPointToEnd(module.getBody());
    LLVM::GlobalOp::create(
        builder, loc, LLVM::LLVMArrayType::get(builder.getI8Type(), 1),
        /*isConstant=*/true, LLVM::Linkage::Internal, kCudaImagesSymbol,
        builder.getStringAttr(StringRef("", 1)));
    outlineParallelLoops(module, kernels, bf16Products);
    kernels->moveBefore(module.getBody(), module.getBody()->end());
  }
};

struct CudaHostFencesPass
    : public mlir::energy::impl::EnergyCudaHostFencesBase<CudaHostFencesPass> {
  void runOnOperation() override {
    if (failed(insertCudaHostFences(getOperation())))
      signalPassFailure();
  }
};

struct CompileGpuKernelsPass
    : public mlir::energy::impl::EnergyCompileGpuKernelsBase<
          CompileGpuKernelsPass> {
  using EnergyCompileGpuKernelsBase::EnergyCompileGpuKernelsBase;

  void getDependentDialects(DialectRegistry &registry) const override {
    registerGpuKernelCompilation(registry);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<gpu::GPUModuleOp> kernels(module.getOps<gpu::GPUModuleOp>());
    if (kernels.empty())
      return;
    auto images = module.lookupSymbol<LLVM::GlobalOp>(kCudaImagesSymbol);
    if (!images) {
      module.emitError() << "energy-compile-gpu-kernels: no @"
                         << kCudaImagesSymbol << " to hold the PTX";
      return signalPassFailure();
    }
    OwningOpRef<ModuleOp> device = ModuleOp::create(module.getLoc());
    for (gpu::GPUModuleOp kernel : kernels)
      kernel->moveBefore(device->getBody(), device->getBody()->end());
    std::vector<std::string> architectures(archs.begin(), archs.end());
    if (architectures.empty())
      architectures = withCudaDevice(ArtifactTarget()).deviceArchs;
    auto compiled = compileGpuKernels(*device, architectures);
    if (failed(compiled))
      return signalPassFailure();
    std::string bytes;
    for (const auto &[arch, ptx] : *compiled) {
      bytes += arch;
      bytes.push_back('\0');
      bytes += ptx;
      bytes.push_back('\0');
    }
    bytes.push_back('\0');
    images.setGlobalType(LLVM::LLVMArrayType::get(
        IntegerType::get(&getContext(), 8), bytes.size()));
    images.setValueAttr(StringAttr::get(&getContext(), bytes));
  }
};

/// log1p of f64, which convert-math-to-llvm would make log(1 + x), losing
/// the digits of a small x: x · log(u) / (u − 1) with u = 1 + x, whose
/// rounding errors cancel (Goldberg); x where u is 1, log(u) where it is
/// infinite. Without fast-math flags, so that u − 1 stays.
struct AccurateLog1p : OpRewritePattern<math::Log1pOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(math::Log1pOp op,
                                PatternRewriter &rewriter) const override {
    Type type = op.getType();
    if (!getElementTypeOrSelf(type).isF64())
      return failure();
    Location loc = op.getLoc();
    auto constant = [&](double value) -> Value {
      TypedAttr attr = rewriter.getF64FloatAttr(value);
      if (auto shaped = dyn_cast<ShapedType>(type))
        attr = SplatElementsAttr::get(shaped, attr);
      return arith::ConstantOp::create(rewriter, loc, type, attr);
    };
    Value x = op.getOperand(), one = constant(1.0);
    Value u = arith::AddFOp::create(rewriter, loc, x, one);
    Value logU = math::LogOp::create(rewriter, loc, u);
    Value ratio = arith::DivFOp::create(
        rewriter, loc, logU, arith::SubFOp::create(rewriter, loc, u, one));
    Value scaled = arith::MulFOp::create(rewriter, loc, x, ratio);
    Value infinite = arith::CmpFOp::create(
        rewriter, loc, arith::CmpFPredicate::OEQ, u, constant(INFINITY));
    Value exact =
        arith::CmpFOp::create(rewriter, loc, arith::CmpFPredicate::OEQ, u, one);
    rewriter.replaceOp(op, arith::SelectOp::create(
                               rewriter, loc, exact, x,
                               arith::SelectOp::create(rewriter, loc, infinite,
                                                       logU, scaled)));
    return success();
  }
};

struct ApproximateMathPass
    : public mlir::energy::impl::EnergyApproximateMathBase<
          ApproximateMathPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<AccurateLog1p>(&getContext());
    populateMathPolynomialApproximationPatterns(patterns, [](StringRef name) {
      name.consume_front("math.");
      return llvm::is_contained(
          {"tanh", "exp", "expm1", "log", "log1p", "log2", "erf", "erfc"},
          name);
    });
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns)))) {
      getOperation().emitError("internal error: approximating the kernels' "
                               "math functions failed");
      signalPassFailure();
    }
  }
};

} // namespace
