//===- AttentionWeights.cpp - The softmax weights of an lse term as output
//-===//
//
// Builds, from an energy term −Σ_c lse_p s(c, p) as emitted, a let holding
// the normaliser L(c) over the free children and an output
// w(c, p) = exp((s(c, p) − L(c)) / T) over the free children and the
// parent, with the chosen children held at fixed positions. Each body
// recomputes what the term computes on the way to the lse.
//
//===----------------------------------------------------------------------===//

#include "energy/Transforms/AttentionWeights.h"
#include "Slices.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace mlir::energy;

namespace {
/// The name an index was given in the source.
std::string indexName(BlockArgument index) {
  if (auto name = dyn_cast<NameLoc>(index.getLoc()))
    return name.getName().str();
  return "i" + std::to_string(index.getArgNumber());
}

/// One child index of the term: the reduction argument that binds it.
struct ChildIndex {
  BlockArgument argument;
  DimExprAttr size;
  std::string name;
  std::optional<int64_t> fixedAt;
};

/// Clones, into the block at `builder`, what the term computes on the way
/// to `lse` inside `chain` (its enclosing reductions, outermost first), with
/// each child index mapped by `mapping` (to an argument of the new block or
/// a constant).
void cloneContext(SmallVector<ReduceOp> chain, ReduceOp lse, OpBuilder &builder,
                  IRMapping &mapping) {
  for (size_t level = 0; level < chain.size(); ++level) {
    Operation *next = level + 1 < chain.size() ? chain[level + 1].getOperation()
                                               : lse.getOperation();
    Block &body = chain[level].getBody().front();
    llvm::SetVector<Operation *> slice;
    addOperandsToSlice(next, body, slice);
    cloneSlice(body, slice, builder, mapping);
  }
}
} // namespace

FailureOr<AttentionWeightsOutput>
mlir::energy::addAttentionWeights(ModelOp model, StringRef termName,
                                  const std::map<std::string, int64_t> &fixed) {
  auto term = model.lookupSymbol<TermOp>(termName);
  if (!term) {
    SmallVector<std::string> names;
    for (TermOp other : model.getOps<TermOp>())
      if (!other.getAuxiliary())
        names.push_back(other.getSymName().str());
    return model.emitError()
           << "model " << model.getSymName() << " has no energy term '"
           << termName << "' (its terms: " << llvm::join(names, ", ") << ")";
  }
  ReduceOp lse;
  term.getBody().walk<WalkOrder::PreOrder>([&](ReduceOp reduce) {
    if (!lse && reduce.getKind() == ReduceKind::lse)
      lse = reduce;
  });
  if (!lse)
    return term.emitError() << "energy term '" << termName
                            << "' has no lse, so no softmax weights";
  SmallVector<ReduceOp> chain;
  for (Operation *parent = lse->getParentOp(); parent != term;
       parent = parent->getParentOp()) {
    auto reduce = dyn_cast<ReduceOp>(parent);
    if (!reduce)
      return term.emitError() << "the lse of energy term '" << termName
                              << "' is inside a '" << parent->getName()
                              << "', not only inside reductions over children";
    chain.insert(chain.begin(), reduce);
  }
  // What the term computes before its outer reductions must be pure: it is
  // recomputed in the new bodies.
  Block &termBody = term.getBody().front();
  Operation *outermost = chain.empty() ? lse.getOperation() : chain.front();
  llvm::SetVector<Operation *> prefix;
  addOperandsToSlice(outermost, termBody, prefix);

  SmallVector<ChildIndex> children;
  for (ReduceOp reduce : chain)
    for (auto [argument, size] :
         llvm::zip(reduce.getBody().front().getArguments(), reduce.getSizes()))
      children.push_back(
          {argument, cast<DimExprAttr>(size), indexName(argument), {}});
  std::vector<std::string> childNames;
  for (const ChildIndex &child : children)
    childNames.push_back(child.name);
  for (const auto &setting : fixed) {
    const std::string &name = setting.first;
    int64_t position = setting.second;
    auto child = llvm::find_if(
        children, [&](const ChildIndex &c) { return c.name == name; });
    if (child == children.end())
      return term.emitError()
             << "energy term '" << termName << "' has no child index '" << name
             << "' (its child indices: "
             << (childNames.empty() ? std::string("none")
                                    : llvm::join(childNames, ", "))
             << ")";
    if (position < 0)
      return term.emitError()
             << "child index " << name << " = " << position << " is negative";
    child->fixedAt = position;
  }
  for (const ChildIndex &child : children)
    if (!child.fixedAt && !child.size.getDimName())
      return term.emitError()
             << "child index " << child.name << " of energy term '" << termName
             << "' ranges over " << dimExprText(child.size)
             << ", not over a dim: give it a position (" << child.name << "=0)";

  MLIRContext *context = model.getContext();
  Location loc = term.getLoc();
  OpBuilder builder = OpBuilder::atBlockEnd(&model.getBody().front());
  auto scalar = ArrayType::getScalar(context);
  SmallVector<Attribute> freeSizes;
  for (const ChildIndex &child : children)
    if (!child.fixedAt)
      freeSizes.push_back(child.size);
  std::string base = termName.str() + ".weights";

  // Maps every child index to an argument of `block` (free) or a constant.
  auto bindChildren = [&](Block &block, OpBuilder &inside, IRMapping &mapping) {
    unsigned next = 0;
    for (const ChildIndex &child : children) {
      if (child.fixedAt) {
        mapping.map(child.argument,
                    arith::ConstantIndexOp::create(inside, loc, *child.fixedAt)
                        .getResult());
        continue;
      }
      block.addArgument(IndexType::get(context),
                        NameLoc::get(builder.getStringAttr(child.name)));
      mapping.map(child.argument, block.getArgument(next++));
    }
    cloneSlice(termBody, prefix, inside, mapping);
  };

  // let @TERM.weights_lse [free children] = L(children).
  auto let =
      LetOp::create(builder, loc, builder.getStringAttr(base + "_lse"),
                    builder.getArrayAttr(freeSizes), TypeAttr::get(scalar));
  {
    Block &block = let.getBody().emplaceBlock();
    OpBuilder inside = OpBuilder::atBlockEnd(&block);
    IRMapping mapping;
    bindChildren(block, inside, mapping);
    cloneContext(chain, lse, inside, mapping);
    Operation *normaliser = inside.clone(*lse, mapping);
    YieldOp::create(inside, loc, normaliser->getResult(0));
  }

  // output @TERM.weights [free children, parent] = exp((s − L) / T), 0
  // where the lse's predicate excludes the parent.
  SmallVector<Attribute> outputSizes = freeSizes;
  outputSizes.push_back(lse.getSizes()[0]);
  auto output = OutputOp::create(builder, loc, builder.getStringAttr(base),
                                 builder.getArrayAttr(outputSizes),
                                 TypeAttr::get(scalar));
  {
    Block &block = output.getBody().emplaceBlock();
    OpBuilder inside = OpBuilder::atBlockEnd(&block);
    IRMapping mapping;
    bindChildren(block, inside, mapping);
    BlockArgument lseIndex = lse.getBody().front().getArgument(0);
    BlockArgument parent = block.addArgument(
        IndexType::get(context),
        NameLoc::get(builder.getStringAttr(indexName(lseIndex))));
    // The context the lse sees, then its body at the parent.
    cloneContext(chain, lse, inside, mapping);
    mapping.map(lseIndex, parent);
    Block &lseBody = lse.getBody().front();
    for (Operation &op : lseBody.without_terminator())
      inside.clone(op, mapping);
    Value score = mapping.lookupOrDefault(lse.getBodyValue());
    SmallVector<Value> letIndices(block.getArguments().drop_back());
    Value normaliser = ReadOp::create(
        inside, loc, scalar, FlatSymbolRefAttr::get(let.getSymNameAttr()),
        AffineMapAttr::get(
            AffineMap::getMultiDimIdentityMap(letIndices.size(), context)),
        letIndices);
    Value shifted = SubOp::create(inside, loc, score, normaliser);
    if (Value temperature = lse.getTemperature())
      shifted = DivOp::create(inside, loc, shifted,
                              mapping.lookupOrDefault(temperature));
    Value weight = ExpOp::create(inside, loc, shifted);
    if (lse.hasPredicate()) {
      Block &predicate = lse.getPredicate().front();
      mapping.map(predicate.getArgument(0), parent);
      for (Operation &op : predicate.without_terminator())
        inside.clone(op, mapping);
      Value admitted = mapping.lookupOrDefault(
          cast<YieldOp>(predicate.getTerminator()).getValues()[0]);
      Value zero = ConstantOp::create(inside, loc, 0.0);
      weight = SelectOp::create(inside, loc, admitted, weight, zero);
    }
    YieldOp::create(inside, loc, weight);
  }

  AttentionWeightsOutput result;
  result.output = output;
  result.childIndices = childNames;
  for (const ChildIndex &child : children)
    if (!child.fixedAt)
      result.axisNames.push_back(child.name);
  result.axisNames.push_back(indexName(lse.getBody().front().getArgument(0)));
  if (failed(mlir::verify(model)))
    return failure();
  return result;
}
