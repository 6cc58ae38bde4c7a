//===- Checker.h - Name resolution and symbolic shape checking --*- C++ -*-===//
//
// The checker validates a parsed ModelSpec and annotates it for emission:
//
//  - resolves every name (dims, tensors, consts, lets, fn parameters, index
//    variables, `step`, `grad` in `until`) and every call (builtin or fn);
//  - computes the symbolic shape of every expression (Expr::getShape()),
//    of every let and output, and checks them against the rules of the
//    language (only scalars broadcast, `@`, `.T`, builtins, fn signatures);
//  - checks that energies are scalars, that indices and predicates are
//    affine, and rejects indices provably out of range (see
//    docs/language.md for exactly what is proven);
//  - detects duplicate names, cyclic lets and fns, huge dims, and checks
//    the dynamics block against an OptimizerTable;
//  - warns about declarations that are never used.
//
// All problems are reported through the DiagnosticEngine; checking goes on
// after an error, so one run reports as many as it can.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_FRONTEND_CHECKER_H
#define ENERGY_FRONTEND_CHECKER_H

#include "energy/Frontend/AST.h"
#include "energy/Frontend/OptimizerTable.h"

namespace energy {
namespace frontend {

class DiagnosticEngine;

/// Largest accepted dim default: 2^31.
constexpr int64_t kMaxDimValue = int64_t(1) << 31;

/// Checks `model`, annotating it in place. Returns true when no error was
/// reported (warnings do not count).
bool checkModel(ModelSpec &model, DiagnosticEngine &diagnostics,
                const OptimizerTable &optimizers = getDefaultOptimizerTable());

} // namespace frontend
} // namespace energy

#endif // ENERGY_FRONTEND_CHECKER_H
