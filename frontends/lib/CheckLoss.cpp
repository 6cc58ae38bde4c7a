//===- CheckLoss.cpp - Checking of losses and their output reads ----------===//
//
// A loss (`loss NAME = expr;`) is a training objective evaluated after the
// dynamics. It is checked like an energy (a scalar, built from the same
// names) except that it may also read outputs: each read must fix all of
// the output's domain indices (`logits[i, c]`), so that emission can inline
// the output's body at those indices. Energies, lets, fns, outputs and the
// dynamics still cannot read outputs (Checker::checkName).
//
//===----------------------------------------------------------------------===//

#include "CheckerImpl.h"

#include "energy/Frontend/Diagnostics.h"

using namespace energy::frontend;
using namespace energy::frontend::detail;

void Checker::checkLoss(LossDecl &loss) {
  ExprContext saved = context;
  context = ExprContext::Loss;
  checkTerm(loss);
  context = saved;
}

std::optional<Shape> Checker::checkOutputRead(NameExpr &name,
                                              OutputDecl &output) {
  const IndexExpr *read =
      currentRead && &currentRead->getBase() == &name ? currentRead : nullptr;
  size_t given = read ? read->getIndices().size() : 0;
  const std::vector<IndexBinding> &bindings = output.getDomain().bindings;
  if (given < bindings.size()) {
    std::string example = (name.getName() + "[").str();
    for (size_t i = 0; i < bindings.size(); ++i)
      example += (i ? ", " : "") + bindings[i].name.str();
    example += "]";
    llvm::SMRange range = read ? read->getRange() : name.getRange();
    std::string needed = std::to_string(bindings.size()) +
                         (bindings.size() == 1 ? " index" : " indices");
    diagnostics.error(range.Start,
                      "output " + quote(name.getName()) + " needs " + needed +
                          " in a loss (" + quote(example) +
                          "), but this read has " +
                          (given ? std::to_string(given) : "none"),
                      {range});
    return std::nullopt;
  }
  if (!ensureOutputChecked(output))
    return std::nullopt;
  name.resolveToDecl(SymbolKind::Output, &output);
  return output.getShape();
}
