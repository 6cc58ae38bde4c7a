//===- ProgramReads.cpp - Reads of a program that must keep their value ---===//
//
// readOutlivesItsValue: the statements of a program in order, the writes of
// a tensor among them, and the uses of a read and of its slices.
//
//===----------------------------------------------------------------------===//

#include "energy/Transforms/ProgramReads.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;
using namespace mlir::energy;

namespace {

/// The statement of a program (an op of its top block) that holds `op`, or
/// null where `op` is in no program.
Operation *statementOf(Operation *op) {
  while (
      op && op->getParentOp() &&
      !isa<UpdateProgramOp, BackwardProgramOp, DynamicsOp>(op->getParentOp()))
    op = op->getParentOp();
  return op && op->getParentOp() ? op : nullptr;
}

} // namespace

bool mlir::energy::mayWriteTensor(Operation *statement, StringRef tensor) {
  WalkResult walk = statement->walk([&](Operation *op) {
    auto into = [&](StringRef target) {
      return target == tensor ? WalkResult::interrupt() : WalkResult::advance();
    };
    if (auto store = dyn_cast<StoreOp>(op))
      return into(store.getTensor());
    if (auto accumulate = dyn_cast<AccumulateOp>(op))
      return into(accumulate.getTensor());
    if (isa<ReadOp>(op))
      return WalkResult::advance();
    auto effects = dyn_cast<MemoryEffectOpInterface>(op);
    if (effects ? effects.hasEffect<MemoryEffects::Write>()
                : !op->hasTrait<OpTrait::HasRecursiveMemoryEffects>() &&
                      !isMemoryEffectFree(op))
      return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return walk.wasInterrupted();
}

llvm::StringSet<> mlir::energy::storedTensors(ModelOp model) {
  llvm::StringSet<> stored;
  model.walk([&](StoreOp store) { stored.insert(store.getTensor()); });
  model.walk([&](GradOp grad) {
    for (FlatSymbolRefAttr target : grad.getIntoTensors())
      if (target)
        stored.insert(target.getValue());
  });
  return stored;
}

bool mlir::energy::readOutlivesItsValue(ReadOp read) {
  Operation *statement = statementOf(read);
  if (!statement)
    return true;
  Operation *firstWrite = nullptr;
  for (Operation *op = statement; op && !firstWrite; op = op->getNextNode())
    if (mayWriteTensor(op, read.getSource()))
      firstWrite = op;
  if (!firstWrite)
    return false;
  // The read and its slices, and the results of region ops that yield them.
  SmallVector<Value> aliases = {read.getResult()};
  for (size_t next = 0; next < aliases.size(); ++next)
    for (Operation *user : aliases[next].getUsers()) {
      Operation *userStatement = statementOf(user);
      if (!userStatement || !userStatement->isBeforeInBlock(firstWrite))
        return true;
      if (isa<ExtractOp>(user))
        aliases.push_back(user->getResult(0));
      else if (user->hasTrait<OpTrait::IsTerminator>() && user->getParentOp())
        llvm::append_range(aliases, user->getParentOp()->getResults());
    }
  return false;
}
