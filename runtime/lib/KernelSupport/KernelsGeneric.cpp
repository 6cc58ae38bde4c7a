//===- KernelsGeneric.cpp - The portable vector kernels -------------------===//
//
// The kernel templates instantiated for the portable path: no instruction-set
// flags, so it runs on any x86-64 CPU (and any other). Nothing else belongs in
// this file: everything compiled here may use the instruction set.
//
//===----------------------------------------------------------------------===//

#define ENERGY_KERNEL_ISA generic
#include "SimdScalar.h"

#include "IsaKernelDefinitions.h"
