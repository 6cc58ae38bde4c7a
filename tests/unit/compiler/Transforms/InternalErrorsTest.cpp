//===- InternalErrorsTest.cpp - Compiler crashes as located errors --------===//
//
// guardCompilation, in a child process (it ends the process on a crash): a
// segmentation fault and an abort, in a phase and in a pass (also inside a
// scope that captures diagnostics), become one located error naming the
// pass and the part of the model, and exit status 1; without a crash it
// returns what the compilation returned.
//
//===----------------------------------------------------------------------===//

#include "energy/Transforms/InternalErrors.h"
#include "energy/IR/EnergyDialect.h"
#include "energy/IR/EnergyOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

#include <doctest/doctest.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

using namespace mlir;
using namespace mlir::energy;

namespace {
/// A pass that crashes: raises `signal` while running on a model.
struct CrashingPass : public PassWrapper<CrashingPass, OperationPass<ModelOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(CrashingPass)
  explicit CrashingPass(int signal) : signal(signal) {}
  StringRef getArgument() const final { return "test-crashing-pass"; }
  void runOnOperation() override { std::raise(signal); }
  int signal;
};

/// The exit status and standard error of `body` run in a child process.
std::pair<int, std::string> inChild(const std::function<int()> &body) {
  int pipeEnds[2];
  REQUIRE(pipe(pipeEnds) == 0);
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    close(pipeEnds[0]);
    dup2(pipeEnds[1], STDERR_FILENO);
    std::_Exit(body());
  }
  close(pipeEnds[1]);
  std::string text;
  char chunk[512];
  for (ssize_t n; (n = read(pipeEnds[0], chunk, sizeof chunk)) > 0;)
    text.append(chunk, n);
  close(pipeEnds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status),
          text};
}

const char *kModel = R"(
energy.model @m {
  energy.tensor @x : state []
  energy.term @e {
    %x = energy.read @x : !energy.array<>
    energy.yield %x : !energy.array<>
  }
}
)";
} // namespace

TEST_CASE("a crash in a phase is an error naming the phase, exit 1") {
  int status;
  std::string text;
  std::tie(status, text) = inChild([] {
    MLIRContext context;
    Location location = FileLineColLoc::get(&context, "m.energy", 3, 5);
    (void)guardCompilation("code generation", location, [] {
      std::raise(SIGSEGV);
      return success();
    });
    return 0;
  });
  INFO(text);
  CHECK(status == 1);
  CHECK(
      text.find(
          "loc(\"m.energy\":3:5): error: internal error in code generation on "
          "the model: the compiler crashed (segmentation fault); "
          "please report it with this file") != std::string::npos);
}

TEST_CASE("a crash in a pass names the pass and the model") {
  int status;
  std::string text;
  std::tie(status, text) = inChild([] {
    MLIRContext context;
    context.loadDialect<EnergyDialect>();
    OwningOpRef<ModuleOp> module =
        parseSourceString<ModuleOp>(kModel, &context, "m.mlir");
    if (!module)
      return 2;
    PassManager passes(&context, ModuleOp::getOperationName());
    passes.nest<ModelOp>().addPass(std::make_unique<CrashingPass>(SIGABRT));
    reportCrashesByPass(passes);
    (void)guardCompilation("the pass pipeline", module->getLoc(),
                           [&] { return passes.run(*module); });
    return 0;
  });
  INFO(text);
  CHECK(status == 1);
  CHECK(
      text.find(
          "loc(\"m.mlir\":2:1): error: internal error in test-crashing-pass on "
          "model `m`: the compiler crashed (abort); please report it "
          "with this file") != std::string::npos);
}

TEST_CASE("a crash inside a scope that captures diagnostics is reported") {
  int status;
  std::string text;
  std::tie(status, text) = inChild([] {
    MLIRContext context;
    Location location = FileLineColLoc::get(&context, "m.energy", 4, 2);
    (void)guardCompilation("a plan step", location, [&] {
      std::string captured;
      GuardedDiagnosticHandler capture(&context, [&](Diagnostic &diagnostic) {
        captured = diagnostic.str();
        return success();
      });
      std::raise(SIGSEGV);
      return success();
    });
    return 0;
  });
  INFO(text);
  CHECK(status == 1);
  CHECK(text.find("loc(\"m.energy\":4:2): error: internal error in a plan "
                  "step on the model: the compiler crashed (segmentation "
                  "fault)") != std::string::npos);
}

TEST_CASE("without a crash, the compilation's result is returned") {
  MLIRContext context;
  Location location = UnknownLoc::get(&context);
  CHECK(succeeded(guardCompilation("x", location, [] { return success(); })));
  CHECK(failed(guardCompilation("x", location, [] { return failure(); })));
}
