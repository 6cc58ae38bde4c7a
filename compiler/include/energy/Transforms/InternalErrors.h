//===- InternalErrors.h - Compiler crashes as located errors ----*- C++ -*-===//
//
// A compiler that crashes tells the user nothing. The tools run every
// compilation under guardCompilation: a signal, an abort or an LLVM fatal
// error in a pass or in code generation becomes one error at the model's
// source location, naming the pass (or phase) and the part of the model it
// was working on, and the process exits with status 1 without writing an
// artifact.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_TRANSFORMS_INTERNALERRORS_H
#define ENERGY_TRANSFORMS_INTERNALERRORS_H

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "mlir/Pass/PassManager.h"

#include <utility>

namespace mlir::energy {

/// Runs `compile` (a phase named `phase`, at `location`: "compiling" at the
/// model). When it crashes, reports "internal error in P on PART: the
/// compiler crashed (SIGNAL); please report it with this file" at the
/// location of what the innermost running pass or phase was working on, and
/// exits the process with status 1. Otherwise returns what `compile`
/// returned.
LogicalResult guardCompilation(StringRef phase, Location location,
                               function_ref<LogicalResult()> compile);

/// Makes the passes `passes` runs name themselves to guardCompilation (a
/// pass instrumentation).
void reportCrashesByPass(PassManager &passes);
/// Whether guardCompilation is reporting a crash on this thread.
bool isReportingCrash();

/// A ScopedDiagnosticHandler for the compiler's own scopes (capturing or
/// silencing what a step reports): while guardCompilation reports a crash,
/// it passes the report on, since a crash inside its scope left it
/// registered and its captures gone.
class GuardedDiagnosticHandler : public ScopedDiagnosticHandler {
public:
  template <typename Handler>
  GuardedDiagnosticHandler(MLIRContext *context, Handler &&handler)
      : ScopedDiagnosticHandler(
            context,
            [handler = std::forward<Handler>(handler)](
                Diagnostic &diagnostic) mutable -> LogicalResult {
              if (isReportingCrash())
                return failure();
              return handler(diagnostic);
            }) {}
};

} // namespace mlir::energy

#endif // ENERGY_TRANSFORMS_INTERNALERRORS_H
