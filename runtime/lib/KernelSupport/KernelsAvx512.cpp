//===- KernelsAvx512.cpp - The AVX-512 vector kernels ---------------------===//
//
// The kernel templates instantiated for the AVX-512 path, compiled with
// -mavx512f; called only when the CPU (and the operating system) support
// AVX-512F. Nothing else belongs in this file: everything compiled here may use
// the instruction set.
//
//===----------------------------------------------------------------------===//

#define ENERGY_KERNEL_ISA avx512
#include "SimdAvx512.h"

#include "IsaKernelDefinitions.h"
