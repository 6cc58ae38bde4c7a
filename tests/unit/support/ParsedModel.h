//===- ParsedModel.h - An energy model parsed from IR text in a test -*- C++
//-*-===//
//
// The one helper the unit tests use to parse an `energy.model` from MLIR
// text, collecting the diagnostics it (and later evaluation) produces, and
// to evaluate its energy on the reference interpreter.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_TESTS_UNIT_SUPPORT_PARSEDMODEL_H
#define ENERGY_TESTS_UNIT_SUPPORT_PARSEDMODEL_H

#include "energy/IR/EnergyDialect.h"
#include "energy/IR/EnergyOps.h"
#include "energy/Interpreter/Interpreter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <doctest/doctest.h>

#include <string>

namespace energy::testing {

/// A model parsed from IR text (the test fails if it does not parse), with
/// every diagnostic it produces collected in `diagnostics`.
struct ParsedModel {
  mlir::MLIRContext context;
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::energy::ModelOp model;

  explicit ParsedModel(llvm::StringRef text)
      : handler(&context, [this](mlir::Diagnostic &diagnostic) {
          diagnostics += diagnostic.str() + "\n";
          return mlir::success();
        }) {
    context
        .loadDialect<mlir::energy::EnergyDialect, mlir::arith::ArithDialect>();
    module = mlir::parseSourceString<mlir::ModuleOp>(text, &context);
    REQUIRE_MESSAGE(module, diagnostics);
    model = *module->getOps<mlir::energy::ModelOp>().begin();
  }

  /// Whether a diagnostic so far contains `message`.
  bool reported(llvm::StringRef message) const {
    return llvm::StringRef(diagnostics).contains(message);
  }

  /// The declaration `name` of kind OpTy.
  template <typename OpTy> OpTy lookup(llvm::StringRef name) {
    return mlir::SymbolTable::lookupNearestSymbolFrom<OpTy>(
        model, mlir::StringAttr::get(&context, name));
  }

  /// The global energy for `bindings`.
  mlir::FailureOr<double> energy(const mlir::energy::Bindings &bindings) {
    mlir::FailureOr<mlir::energy::Interpreter> interpreter =
        mlir::energy::Interpreter::create(model, bindings);
    if (mlir::failed(interpreter))
      return mlir::failure();
    return interpreter->evaluateEnergy();
  }
};

} // namespace energy::testing

#endif // ENERGY_TESTS_UNIT_SUPPORT_PARSEDMODEL_H
