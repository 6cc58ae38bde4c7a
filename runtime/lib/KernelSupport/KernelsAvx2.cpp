//===- KernelsAvx2.cpp - The AVX2 + FMA vector kernels --------------------===//
//
// The kernel templates instantiated for the AVX2 + FMA path, compiled with
// -mavx2 -mfma; called only when the CPU has both. Nothing else belongs in this
// file: everything compiled here may use the instruction set.
//
//===----------------------------------------------------------------------===//

#define ENERGY_KERNEL_ISA avx2
#include "SimdAvx2.h"

#include "IsaKernelDefinitions.h"
