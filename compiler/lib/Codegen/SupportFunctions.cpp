//===- SupportFunctions.cpp - The support library as kernels see it -------===//
//
// The table of support functions, with the addresses the JIT binds.
//
//===----------------------------------------------------------------------===//

#include "SupportFunctions.h"
#include "energy/KernelSupport/KernelSupport.h"
#include "energy/KernelSupport/MatrixProduct.h"
#include "energy/KernelSupport/SoftmaxContract.h"

#include <cstdlib>

using namespace mlir::energy::codegen;

llvm::ArrayRef<SupportFunction> mlir::energy::codegen::supportFunctions() {
  using T = SupportType;
  auto address = [](auto *function) {
    return reinterpret_cast<void *>(function);
  };
  static const std::vector<SupportFunction> table = {
      {"malloc", {T::I64}, {T::Pointer}, address(&std::malloc)},
      {"free", {T::Pointer}, {}, address(&std::free)},
      {ENERGY_SUPPORT_SILU_INT,
       {T::F64},
       {T::F64},
       address(&energy_support_silu_int)},
      {ENERGY_SUPPORT_LOGDET_F64,
       {T::I64, T::Pointer},
       {T::F64},
       address(&energy_support_logdet_f64)},
      {ENERGY_SUPPORT_LOGDET_F32,
       {T::I64, T::Pointer},
       {T::F64},
       address(&energy_support_logdet_f32)},
      {ENERGY_SUPPORT_INVERSE_F64,
       {T::I64, T::Pointer, T::Pointer},
       {T::I32},
       address(&energy_support_inverse_f64)},
      {ENERGY_SUPPORT_INVERSE_F32,
       {T::I64, T::Pointer, T::Pointer},
       {T::I32},
       address(&energy_support_inverse_f32)},
      {ENERGY_SUPPORT_EXP_F32,
       {T::I64, T::Pointer, T::Pointer},
       {},
       address(&energy_support_exp_f32)},
      {ENERGY_SUPPORT_EXP_F64,
       {T::I64, T::Pointer, T::Pointer},
       {},
       address(&energy_support_exp_f64)},
      {ENERGY_SUPPORT_SOFTMAX_WEIGHTS_F32,
       {T::I64, T::Pointer, T::Pointer},
       {},
       address(&energy_support_softmax_weights_f32)},
      {ENERGY_SUPPORT_SOFTMAX_WEIGHTS_F64,
       {T::I64, T::Pointer, T::Pointer},
       {},
       address(&energy_support_softmax_weights_f64)},
      {ENERGY_SUPPORT_MATMUL_F32,
       {T::I64, T::I64, T::I64, T::Pointer, T::Pointer, T::Pointer},
       {},
       address(&energy_support_matmul_f32)},
      {ENERGY_SUPPORT_MATMUL_F64,
       {T::I64, T::I64, T::I64, T::Pointer, T::Pointer, T::Pointer},
       {},
       address(&energy_support_matmul_f64)},
      {ENERGY_SUPPORT_SOFTMAX_CONTRACT_F32,
       {T::Pointer},
       {T::I32},
       address(&energy_support_softmax_contract_f32)},
      {ENERGY_SUPPORT_SOFTMAX_CONTRACT_F64,
       {T::Pointer},
       {T::I32},
       address(&energy_support_softmax_contract_f64)},
      {ENERGY_SUPPORT_CUDA_MATMUL_F32,
       {T::I64, T::I64, T::I64, T::Pointer, T::Pointer, T::Pointer},
       {},
       address(&energy_support_cuda_matmul_f32)},
      {ENERGY_SUPPORT_CUDA_MATMUL_F64,
       {T::I64, T::I64, T::I64, T::Pointer, T::Pointer, T::Pointer},
       {},
       address(&energy_support_cuda_matmul_f64)},
      {ENERGY_SUPPORT_CUDA_MATMUL_BF16,
       {T::I64, T::I64, T::I64, T::Pointer, T::Pointer, T::Pointer},
       {},
       address(&energy_support_cuda_matmul_bf16)},
      {ENERGY_SUPPORT_CUDA_SOFTMAX_CONTRACT_BF16,
       {T::Pointer},
       {T::I32},
       address(&energy_support_cuda_softmax_contract_bf16)},
      {ENERGY_SUPPORT_CUDA_SOFTMAX_CONTRACT_F32,
       {T::Pointer},
       {T::I32},
       address(&energy_support_cuda_softmax_contract_f32)},
      {ENERGY_SUPPORT_CUDA_SOFTMAX_CONTRACT_F64,
       {T::Pointer},
       {T::I32},
       address(&energy_support_cuda_softmax_contract_f64)},
      {ENERGY_SUPPORT_PARALLEL_FOR,
       {T::ChunkFunction, T::Pointer, T::I64},
       {},
       address(&energy_support_parallel_for)},
      {ENERGY_SUPPORT_CUDA_ALLOC,
       {T::I64},
       {T::Pointer},
       address(&energy_support_cuda_alloc)},
      {ENERGY_SUPPORT_CUDA_FREE,
       {T::Pointer},
       {},
       address(&energy_support_cuda_free)},
      {ENERGY_SUPPORT_CUDA_LAUNCH,
       {T::Pointer, T::Pointer, T::Pointer, T::Pointer, T::I32, T::I64},
       {T::I32},
       address(&energy_support_cuda_launch)},
      {ENERGY_SUPPORT_SET_NUM_THREADS,
       {T::I32},
       {},
       address(&energy_support_set_num_threads)},
  };
  return table;
}
