//===- KernelEmitter.h - energy model to loop-level kernels -----*- C++ -*-===//
//
// Turns a model whose gradients and step program are derived into the
// kernels of an artifact (ArtifactABI.h): `func` functions over scf, arith,
// math and LLVM pointer ops, plus the layout the manifest describes.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_CODEGEN_KERNELEMITTER_H
#define ENERGY_CODEGEN_KERNELEMITTER_H

#include "energy/IR/EnergyOps.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <vector>

namespace mlir::energy {

/// What the kernels of a model read and write, in the order of the arrays the
/// runtime passes them (ArtifactABI.h).
struct ArtifactLayout {
  enum class BufferKind { Tensor, Gradient, Output };
  struct Buffer {
    std::string name;
    BufferKind kind;
    /// The TensorOp, GradientOp or OutputOp the buffer holds.
    Operation *op;
  };
  struct NamedKernel {
    std::string name;
    std::string symbol;
  };

  std::vector<DimOp> dims;
  std::vector<ConstOp> consts;
  std::vector<Buffer> buffers;
  std::string energyKernel;
  /// The energy of each term (the energy kernel itself when there is one).
  std::vector<NamedKernel> termKernels;
  std::vector<NamedKernel> gradientKernels;
  /// Gradients of several tensors from one kernel (a sharded tensor's and
  /// its gathered copy's), each tensor's also in gradientKernels.
  struct JointKernel {
    std::vector<std::string> tensors;
    std::string symbol;
  };
  std::vector<JointKernel> jointGradientKernels;
  std::vector<NamedKernel> outputKernels;
  /// Empty when the model has no dynamics (or no stopping rule).
  std::string stepKernel;
  std::string untilKernel;
  /// The programs around a call's steps (a change of variables); empty
  /// when the step program has none.
  std::string runBeginKernel, runFinishKernel;
  /// The loss of each `loss` (writes it to *result).
  std::vector<NamedKernel> lossKernels;
  /// The parts of the backward program (seed, step, finish); empty without
  /// a loss.
  std::vector<std::string> backwardKernels;
  /// The backward step's cotangents, run ahead of it (one rank's model of a
  /// sharded run); empty when the program has none.
  std::string backwardCotangentsKernel;
  /// Whether the backward program differentiates at the fixed point (its
  /// step never runs).
  bool implicitBackward = false;
};

/// What the kernels of `model` read and write and their symbols: a
/// function of the model alone, so that the manifest and code generation
/// read the same one.
ArtifactLayout artifactLayoutOf(ModelOp model);

/// Emits the kernels of `model` into `target` with elements of type
/// `elementType` (f32 or f64), as artifactLayoutOf names them. Every
/// gradient program without `of` becomes a gradient kernel. An op the code
/// generator does not support is an error on that op. Each softmax
/// contraction is computed by its `engine`, which energy-plan-engines chose
/// for the target (generated loops without one).
LogicalResult emitKernels(ModelOp model, ModuleOp target,
                          FloatType elementType);

} // namespace mlir::energy

#endif // ENERGY_CODEGEN_KERNELEMITTER_H
