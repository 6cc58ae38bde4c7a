//===- InternalErrors.cpp - Compiler crashes as located errors ------------===//
//
// A stack of what the compiler is doing (phases and passes), kept by
// guardCompilation and a pass instrumentation, and the crash recovery that
// reports the innermost one.
//
//===----------------------------------------------------------------------===//

#include "energy/Transforms/InternalErrors.h"
#include "energy/Transforms/PlanStep.h"

#include "energy/IR/EnergyOps.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "llvm/Support/CrashRecoveryContext.h"
#include "llvm/Support/raw_ostream.h"

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace mlir;
using namespace mlir::energy;

namespace {
/// What the compiler is doing: a phase or a pass, on a part of a model.
struct Activity {
  std::string name;
  std::string part;
  Location location;
};

/// The activities of this thread, outermost first.
thread_local std::vector<Activity> activities;

/// Whether guardCompilation is reporting a crash on this thread.
thread_local bool reportingCrash = false;

std::string partOf(Operation *op) {
  for (Operation *part = op; part; part = part->getParentOp())
    if (isa<ModelOp>(part) || isa_and_nonnull<ModelOp>(part->getParentOp()))
      return describeModelPart(part);
  return "the model";
}

struct CrashReportingInstrumentation : public PassInstrumentation {
  void runBeforePass(Pass *pass, Operation *op) override {
    StringRef name = pass->getArgument();
    activities.push_back({(name.empty() ? pass->getName() : name).str(),
                          partOf(op), op->getLoc()});
  }
  void runAfterPass(Pass *, Operation *) override { activities.pop_back(); }
  void runAfterPassFailed(Pass *, Operation *) override {
    activities.pop_back();
  }
};

std::string signalName(int signal) {
  switch (signal) {
  case SIGSEGV:
    return "segmentation fault";
  case SIGABRT:
    return "abort";
  case SIGBUS:
    return "bus error";
  case SIGFPE:
    return "arithmetic exception";
  case SIGILL:
    return "illegal instruction";
  default:
    return ("signal " + llvm::Twine(signal)).str();
  }
}
} // namespace

bool mlir::energy::isReportingCrash() { return reportingCrash; }

void mlir::energy::reportCrashesByPass(PassManager &passes) {
  passes.addInstrumentation(std::make_unique<CrashReportingInstrumentation>());
}

LogicalResult
mlir::energy::guardCompilation(StringRef phase, Location location,
                               function_ref<LogicalResult()> compile) {
  llvm::CrashRecoveryContext::Enable();
  size_t depth = activities.size();
  activities.push_back({phase.str(), "the model", location});
  LogicalResult result = failure();
  llvm::CrashRecoveryContext recovery;
  if (recovery.RunSafely([&] { result = compile(); })) {
    activities.erase(activities.begin() + depth, activities.end());
    return result;
  }
  // The heap may be damaged: report from what the activity stack holds and
  // leave at once, running no destructors and writing nothing more.
  const Activity &innermost = activities.back();
  int code = recovery.RetCode;
  std::string cause = code > 128 ? signalName(code - 128) : "a fatal error";
  // Handlers registered in the crashed scopes (GuardedDiagnosticHandler)
  // step aside: their captures are gone.
  reportingCrash = true;
  emitError(innermost.location)
      << "internal error in " << innermost.name << " on " << innermost.part
      << ": the compiler crashed (" << cause
      << "); please report it with this file";
  llvm::errs().flush();
  // Not llvm::sys::Process::Exit: inside an outer recovery context it would
  // return there as one more crash.
  std::_Exit(1);
}
