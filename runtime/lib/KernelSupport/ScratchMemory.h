//===- ScratchMemory.h - Scratch blocks kept between kernel calls -*- C++
//-*-===//
//
// Aligned scratch memory for the support library's kernels; blocks of
// medium size are kept per thread for the next call.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_KERNELSUPPORT_SCRATCHMEMORY_H
#define ENERGY_KERNELSUPPORT_SCRATCHMEMORY_H

#include <stddef.h>

namespace energy::kernels {
/// Scratch memory aligned for any vector, of at least `bytes`, or null;
/// give it back with releaseScratch and the same size.
void *acquireScratch(size_t bytes);
void releaseScratch(void *memory, size_t bytes);
} // namespace energy::kernels

#endif // ENERGY_KERNELSUPPORT_SCRATCHMEMORY_H
