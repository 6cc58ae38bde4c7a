//===- ContractionLowering.h - Softmax contractions in kernels --*- C++ -*-===//
//
// The lowering of tables and softmax contractions (Contractions.cpp): the
// support library's kernels, and generated loops for the `loops` engine
// (GeneratedContractions.cpp). Private to compiler/lib/Codegen.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_LIB_CODEGEN_CONTRACTIONLOWERING_H
#define ENERGY_LIB_CODEGEN_CONTRACTIONLOWERING_H

#include "KernelLowering.h"

namespace mlir::energy::codegen {

class ContractionLowering : public KernelLowering {
public:
  explicit ContractionLowering(KernelLowering &kernel)
      : KernelLowering(kernel) {}

  FailureOr<Lowered> emitTabulate(TabulateOp table);
  LogicalResult emitSoftmaxContract(SoftmaxContractOp contract);

private:
  LogicalResult emitBilinearContract(SoftmaxContractOp contract,
                                     const BilinearContract &form);
  /// The weights (κ, α₁ … αₘ), as f64, of a bilinear contraction's value
  /// whose factor is `factor` (null for 1), affine in the form's pair terms.
  FailureOr<SmallVector<Value>>
  factorCoefficients(Value factor, const BilinearContract &form);
  LogicalResult emitQuadraticContract(SoftmaxContractOp contract,
                                      const QuadraticContract &form);
  /// GeneratedContractions.cpp: the `loops` engine.
  LogicalResult emitGenericContract(SoftmaxContractOp contract);
  /// Reports a contraction kernel's code (SoftmaxContract.h's
  /// ENERGY_CONTRACT_*) as the kernel's status.
  void reportContractStatus(Value code);
};

} // namespace mlir::energy::codegen

#endif // ENERGY_LIB_CODEGEN_CONTRACTIONLOWERING_H
