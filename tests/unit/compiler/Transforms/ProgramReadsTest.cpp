//===- ProgramReadsTest.cpp - Reads of a program that keep their value ----===//
//
// readOutlivesItsValue on a Nesterov step: a read of the state used through
// slices in a table after the state's first store, and one that the state's
// store reads, keep their value; reads used only before their tensor's next
// store, of a tensor never stored, or outside programs, as stated.
//
//===----------------------------------------------------------------------===//

#include "energy/Transforms/ProgramReads.h"
#include "energy/IR/EnergyDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <doctest/doctest.h>

#include <map>
#include <string>

using namespace mlir;
using namespace mlir::energy;

namespace {

/// Whether each read of `source`'s program outlives its value, by the name
/// its `{name = "..."}` attribute gives it.
std::map<std::string, bool> outliving(const char *source) {
  MLIRContext context;
  context.loadDialect<EnergyDialect>();
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(source, &context);
  REQUIRE(module);
  std::map<std::string, bool> result;
  module->walk([&](ReadOp read) {
    if (auto name = read->getAttrOfType<StringAttr>("name"))
      result[name.str()] = readOutlivesItsValue(read);
  });
  return result;
}

const char *const kNesterovStep = R"mlir(
energy.model @nag {
  dim @N
  tensor @a : state [@N] = zeros
  tensor @a.velocity : state [@N] = zeros
  tensor @t : input [@N]
  term @e {
    %1 = read @a {name = "in a term"} : !energy.array<N>
    %2 = read @t : !energy.array<N>
    %3 = sub %1, %2 : !energy.array<N>, !energy.array<N>
    %4 = reduce_elements sqnorm %3 : !energy.array<N>
    yield %4 : !energy.array<>
  }
  dynamics steps 3 {
    update @a nesterov(lr = 3.000000e-01)
  }
  update_program {
    %0 = constant 3.000000e-01
    %1 = constant 9.000000e-01
    %2 = read @a {name = "state"} : !energy.array<N>
    %3 = read @a.velocity {name = "velocity"} : !energy.array<N>
    %10 = read @a {name = "state, sliced"} : !energy.array<N>
    %4 = mul %3, %1 : !energy.array<N>, !energy.array<>
    %5 = sub %2, %4 : !energy.array<N>, !energy.array<N>
    store %5 into @a : !energy.array<N>
    %6 = grad @a : !energy.array<N>
    %7 = read @a.velocity {name = "velocity again"} : !energy.array<N>
    %8 = mul %7, %1 : !energy.array<N>, !energy.array<>
    %9 = add %8, %6 : !energy.array<N>, !energy.array<N>
    store %9 into @a.velocity : !energy.array<N>
    %11 = tabulate (%i : @N) {
      %12 = extract %10[%i] : !energy.array<N> -> !energy.array<>
      %13 = extract %9[%i] : !energy.array<N> -> !energy.array<>
      %14 = mul %13, %0 : !energy.array<>, !energy.array<>
      %15 = sub %12, %14 : !energy.array<>, !energy.array<>
      yield %15 : !energy.array<>
    } : !energy.array<N>
    store %11 into @a : !energy.array<N>
    %16 = read @t {name = "never stored"} : !energy.array<N>
    %17 = read @a {name = "stored by the store that reads it"} : !energy.array<N>
    %18 = sub %16, %17 : !energy.array<N>, !energy.array<N>
    store %18 into @a.velocity : !energy.array<N>
    store %17 into @a : !energy.array<N>
  }
  gradient @a {
    %2 = read @a : !energy.array<N>
    accumulate %2 into @a : !energy.array<N>
  }
}
)mlir";

} // namespace

TEST_CASE("program reads: copies only where a later store could show") {
  std::map<std::string, bool> reads = outliving(kNesterovStep);
  REQUIRE(reads.size() == 7);
  CHECK(reads["in a term"]);
  CHECK(!reads["state"]);
  CHECK(!reads["velocity"]);
  CHECK(!reads["velocity again"]);
  CHECK(reads["state, sliced"]);
  CHECK(!reads["never stored"]);
  CHECK(reads["stored by the store that reads it"]);
}
