/*===- InstructionSet.h - Which vector code path the kernels take ---------===*\
|*                                                                            *|
|* The vectorised support functions (exp, the softmax contraction) carry an  *|
|* AVX-512 path, an AVX2 + FMA path and portable scalar code, and pick one at *|
|* run time for the CPU they run on, so that one artifact runs on any x86-64 *|
|* machine. These functions say which path runs, and let tests and           *|
|* benchmarks force a path the CPU supports. The environment variable        *|
|* ENERGY_ISA (scalar, avx2 or avx512) lowers the automatic choice.          *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef ENERGY_KERNELSUPPORT_INSTRUCTIONSET_H
#define ENERGY_KERNELSUPPORT_INSTRUCTIONSET_H

#include <stdint.h>

#define ENERGY_ISA_AUTOMATIC (-1)
#define ENERGY_ISA_SCALAR 0
/* AVX2 with FMA (x86-64-v3). */
#define ENERGY_ISA_AVX2 1
/* AVX-512F on 512-bit vectors. */
#define ENERGY_ISA_AVX512 2

#ifdef __cplusplus
extern "C" {
#endif

/* The best path this CPU (and its operating system) supports. */
int32_t energy_support_supported_isa(void);
/* The path the vectorised functions take now. */
int32_t energy_support_active_isa(void);
/* Makes the vectorised functions take `isa` from now on, or the automatic
 * choice for ENERGY_ISA_AUTOMATIC. Returns 0, or 1 (changing nothing) when
 * the CPU cannot run that path. Call it between kernel calls, not during
 * one: it is meant for tests and benchmarks. */
int32_t energy_support_force_isa(int32_t isa);

#ifdef __cplusplus
}
#endif

#endif /* ENERGY_KERNELSUPPORT_INSTRUCTIONSET_H */
