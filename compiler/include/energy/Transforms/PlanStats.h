//===- PlanStats.h - Trip counts and work of the kernel plan ----*- C++ -*-===//
//
// What the planned model costs, loop by loop: every loop nest of every
// program with its trip count and its work per iteration (flops, in the
// model's dims), and the loops over pairs of positions that do row work
// per pair (a matrix product, a row normalisation or its backward) which
// a good plan does once per row instead (`energyc --emit=plan-stats`).
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_TRANSFORMS_PLANSTATS_H
#define ENERGY_TRANSFORMS_PLANSTATS_H

#include "energy/IR/EnergyOps.h"

namespace mlir::energy {

/// A loop over two position indices whose body does row work per pair.
struct PairLoopWork {
  /// The program it is in ("the gradient of `x`", ...).
  std::string program;
  /// The loop and the pair: "reduce sum (a: N) over the pairs (c, a)".
  std::string loop;
  /// file:line:col of the loop.
  std::string location;
  /// What it does per pair: "matrix product (matmul [Y, D] x [D])", ...
  std::string work;
};

/// Prints the plan's loop nests, program by program, with trip counts and
/// work per iteration (numbers too where every dim has a value), then the
/// pair loops doing row work. Returns those loops.
SmallVector<PairLoopWork> printPlanStats(ModelOp model, raw_ostream &os);

/// The flops of every program and gradient of the planned model together
/// (what printPlanStats adds up), with each dim at its default and every
/// other at the size the planner assumes (kNominalDimSize).
double estimatedPlanWork(ModelOp model);

} // namespace mlir::energy

#endif // ENERGY_TRANSFORMS_PLANSTATS_H
