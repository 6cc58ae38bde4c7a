//===- PlanStats.cpp - Trip counts and work of the kernel plan ------------===//
//
// Walks the planned model program by program. A loop is a reduce, foreach,
// tabulate or softmax_contract: its trip count is the product of its and
// its enclosing loops' domains, its work per iteration the flops of the
// ops directly in its body (nested loops are lines of their own; a
// batch_matmul, one library call, is a line of its own too). Costs are
// polynomials in the dims, evaluated where every dim has a value.
//
//===----------------------------------------------------------------------===//

#include "energy/Transforms/PlanStats.h"
#include "energy/Transforms/PlanStep.h"

#include "SizeEstimates.h"
#include "Slices.h"

#include "energy/IR/EnergyOps.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"

#include <map>

using namespace mlir;
using namespace mlir::energy;

namespace {

//===----------------------------------------------------------------------===//
// Costs as polynomials in the dims
//===----------------------------------------------------------------------===//

std::string numberText(double value) {
  if (value == double(int64_t(value)) && std::abs(value) < 1e15)
    return std::to_string(int64_t(value));
  return llvm::formatv("{0:g}", value).str();
}

/// Σ coefficient · Π dims, each product a sorted list of dim names (or of
/// dim expressions such as "(T - 1)").
class Cost {
public:
  static Cost constant(double value) {
    Cost cost;
    if (value != 0)
      cost.terms[{}] = value;
    return cost;
  }
  static Cost product(ArrayRef<std::string> factors) {
    Cost cost;
    std::vector<std::string> sorted(factors.begin(), factors.end());
    llvm::sort(sorted);
    cost.terms[sorted] = 1;
    return cost;
  }

  bool isZero() const { return terms.empty(); }

  Cost operator+(const Cost &other) const {
    Cost sum = *this;
    for (const auto &[factors, coefficient] : other.terms)
      sum.terms[factors] += coefficient;
    return sum;
  }
  Cost operator*(const Cost &other) const {
    Cost result;
    for (const auto &[left, a] : terms)
      for (const auto &[right, b] : other.terms) {
        std::vector<std::string> factors = left;
        factors.insert(factors.end(), right.begin(), right.end());
        llvm::sort(factors);
        result.terms[factors] += a * b;
      }
    return result;
  }
  Cost operator*(double factor) const { return *this * constant(factor); }

  /// "2*Y*D + 9*D"; "0" when empty.
  std::string str() const {
    if (terms.empty())
      return "0";
    std::string text;
    // Highest degree first.
    SmallVector<std::pair<std::vector<std::string>, double>> ordered(
        terms.begin(), terms.end());
    llvm::stable_sort(ordered, [](const auto &a, const auto &b) {
      return a.first.size() > b.first.size();
    });
    for (const auto &[factors, coefficient] : ordered) {
      if (!text.empty())
        text += " + ";
      SmallVector<std::string> parts;
      if (coefficient != 1 || factors.empty())
        parts.push_back(numberText(coefficient));
      llvm::append_range(parts, factors);
      text += llvm::join(parts, "*");
    }
    return text;
  }

  /// The value with these dims, or nothing when one has none (unless
  /// `otherDims` gives the size of every other factor).
  std::optional<double>
  evaluate(const llvm::StringMap<int64_t> &dimValues,
           std::optional<double> otherDims = std::nullopt) const {
    double total = 0;
    for (const auto &[factors, coefficient] : terms) {
      double product = coefficient;
      for (const std::string &factor : factors) {
        auto value = dimValues.find(factor);
        if (value != dimValues.end())
          product *= double(value->second);
        else if (otherDims)
          product *= *otherDims;
        else
          return std::nullopt;
      }
      total += product;
    }
    return total;
  }

private:
  std::map<std::vector<std::string>, double> terms;
};

std::string sizeName(Attribute size) {
  auto dim = cast<DimExprAttr>(size);
  if (std::optional<StringRef> name = dim.getDimName())
    return name->str();
  std::string text;
  llvm::raw_string_ostream os(text);
  Attribute(dim).print(os);
  // "#energy.dim<@T - 1>" as "(T - 1)".
  StringRef inner = StringRef(text).drop_until([](char c) { return c == '<'; });
  std::string plain;
  for (char c : inner.drop_front().drop_back())
    if (c != '@')
      plain += c;
  return "(" + plain + ")";
}

Cost sizeOf(ArrayType type) {
  SmallVector<std::string> factors;
  for (StringAttr dim : type.getShape())
    factors.push_back(dim.str());
  return Cost::product(factors);
}

Cost sizeOf(Value value) {
  auto type = dyn_cast<ArrayType>(value.getType());
  return type ? sizeOf(type) : Cost::constant(0);
}

Cost axis(ArrayType type, int index) {
  ArrayRef<StringAttr> shape = type.getShape();
  if (shape.empty())
    return Cost::constant(1);
  index = index < 0 ? int(shape.size()) + index : index;
  return Cost::product({shape[index].str()});
}

std::string shapeText(Type type) {
  auto array = dyn_cast<ArrayType>(type);
  if (!array)
    return "?";
  SmallVector<std::string> dims;
  for (StringAttr dim : array.getShape())
    dims.push_back(dim.str());
  return "[" + llvm::join(dims, ", ") + "]";
}

//===----------------------------------------------------------------------===//
// Work of one op
//===----------------------------------------------------------------------===//

bool isLoop(Operation *op) {
  return isa<ReduceOp, ForeachOp, TabulateOp, SoftmaxContractOp>(op);
}

bool isRowNormalisation(Operation *op) {
  return isa<LayerNormOp, RmsNormOp, SoftmaxOp, LogSoftmaxOp>(op);
}

/// Flops of a batch of GEMMs: 2·B·m·k·n.
Cost batchMatmulFlops(BatchMatmulOp op) {
  auto lhs = cast<ArrayType>(op.getLhs().getType());
  auto rhs = cast<ArrayType>(op.getRhs().getType());
  auto result = cast<ArrayType>(op.getResult().getType());
  // The dims of the lhs's matrix: its rows and its inner dim (several
  // axes each where lhs_rows says so).
  Cost lhsRows = Cost::constant(1);
  for (int64_t i = 2; i <= static_cast<int64_t>(op.getLhsRows()) + 1; ++i)
    lhsRows = lhsRows * axis(lhs, -i);
  Cost lhsColumns = axis(lhs, -1);
  Cost inner = op.getTransposeLhs() ? lhsRows : lhsColumns;
  Cost rows = op.getTransposeLhs() ? lhsColumns : lhsRows;
  Cost batch = Cost::constant(1);
  for (int64_t i = 0; i < op.getBatchAxes(); ++i)
    batch = batch * (op.hasLhsBatch()   ? axis(lhs, i)
                     : op.hasRhsBatch() ? axis(rhs, i)
                                        : Cost::constant(1));
  return rows * axis(result, -1) * inner * batch * 2;
}

/// Flops of an op that is not a loop, without its regions.
Cost opFlops(Operation *op) {
  if (auto matmul = dyn_cast<MatmulOp>(op)) {
    auto lhs = cast<ArrayType>(matmul.getLhs().getType());
    return sizeOf(matmul.getResult()) * axis(lhs, -1) * 2;
  }
  if (auto product = dyn_cast<BatchMatmulOp>(op))
    return batchMatmulFlops(product);
  if (auto dot = dyn_cast<DotOp>(op))
    return sizeOf(dot.getLhs()) * 2;
  if (auto quad = dyn_cast<QuadOp>(op))
    return sizeOf(quad.getMatrix()) * 2 + sizeOf(quad.getVector()) * 2;
  if (isa<ReduceElementsOp, SumLastOp>(op))
    return sizeOf(op->getOperand(0));
  if (isRowNormalisation(op))
    return sizeOf(op->getResult(0)) * 5;
  if (isa<InverseOp, LogDetOp>(op)) {
    auto matrix = cast<ArrayType>(op->getOperand(0).getType());
    return axis(matrix, 0) * axis(matrix, 0) * axis(matrix, 0);
  }
  if (isa<ReadOp, ExtractOp, EmbedOp, BroadcastOp, TransposeOp, ConstantOp,
          RoundingUnitOp, EyeOp, DiagOp, DiagPartOp, SizeOp, StepOp, ToRealOp,
          YieldOp, StoreOp>(op) ||
      op->getNumResults() == 0 ||
      op->getDialect() != op->getContext()->getLoadedDialect("energy"))
    return Cost::constant(0);
  // Element-wise arithmetic and functions, accumulations: one per element.
  if (isa<AccumulateOp>(op))
    return sizeOf(op->getOperand(0));
  return sizeOf(op->getResult(0));
}

/// Whether an op multiplies matrices: a matrix times a vector or a matrix,
/// an outer product, a quadratic form, an inverse.
std::optional<std::string> matrixProduct(Operation *op) {
  auto rank = [](Value value) {
    auto type = dyn_cast<ArrayType>(value.getType());
    return type ? type.getRank() : 0;
  };
  auto describe = [&](StringRef name) {
    SmallVector<std::string> shapes;
    for (Value operand : op->getOperands())
      shapes.push_back(shapeText(operand.getType()));
    return ("matrix product (" + name + " " + llvm::join(shapes, " x ") + ")")
        .str();
  };
  if (auto matmul = dyn_cast<MatmulOp>(op);
      matmul && (rank(matmul.getLhs()) >= 2 || rank(matmul.getRhs()) >= 2))
    return describe("matmul");
  if (isa<OuterOp, QuadOp, InverseOp, BatchMatmulOp>(op))
    return describe(op->getName().stripDialect());
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// Loops and their indices
//===----------------------------------------------------------------------===//

/// A loop's domains and the regions that run per iteration.
struct LoopShape {
  std::string text;
  SmallVector<Attribute> sizes;
  SmallVector<Region *> bodies;
};

std::string indexName(BlockArgument index) {
  if (auto name = dyn_cast<NameLoc>(index.getLoc()))
    return name.getName().str();
  return llvm::formatv("#{0}", index.getArgNumber()).str();
}

std::string domainText(Region &body, ArrayRef<Attribute> sizes) {
  SmallVector<std::string> parts;
  for (auto [index, size] : llvm::zip(body.getArguments(), sizes))
    parts.push_back(indexName(index) + ": " + sizeName(size));
  return "(" + llvm::join(parts, ", ") + ")";
}

LoopShape shapeOf(Operation *op) {
  LoopShape shape;
  if (auto reduce = dyn_cast<ReduceOp>(op)) {
    llvm::append_range(shape.sizes, reduce.getSizes());
    shape.bodies = {&reduce.getBody()};
    shape.text = ("reduce " + stringifyReduceKind(reduce.getKind()) + " " +
                  domainText(reduce.getBody(), shape.sizes))
                     .str();
  } else if (auto foreach = dyn_cast<ForeachOp>(op)) {
    llvm::append_range(shape.sizes, foreach.getSizes());
    shape.bodies = {&foreach.getBody()};
    shape.text = "foreach " + domainText(foreach.getBody(), shape.sizes);
  } else if (auto table = dyn_cast<TabulateOp>(op)) {
    llvm::append_range(shape.sizes, table.getSizes());
    shape.bodies = {&table.getBody()};
    shape.text = "tabulate " + domainText(table.getBody(), shape.sizes);
  } else if (auto contract = dyn_cast<SoftmaxContractOp>(op)) {
    llvm::append_range(shape.sizes, contract.getRows());
    shape.sizes.push_back(contract.getCols());
    shape.bodies = {&contract.getScore(), &contract.getRowSums(),
                    &contract.getColSums()};
    Region &score = contract.getScore();
    unsigned rows = contract.getNumRowIndices();
    SmallVector<std::string> rowParts;
    for (unsigned i = 0; i < rows; ++i)
      rowParts.push_back(indexName(score.getArgument(i)) + ": " +
                         sizeName(shape.sizes[i]));
    shape.text =
        ("softmax_contract " + stringifyContractForm(contract.getForm()) +
         " rows (" + llvm::join(rowParts, ", ") + ") cols (" +
         indexName(score.getArgument(rows)) + ": " +
         sizeName(shape.sizes.back()) + ")")
            .str();
  }
  return shape;
}

/// Where an op is in the source.
std::string locationText(Location location) {
  std::string text;
  location->walk([&](Location inner) {
    if (auto file = dyn_cast<FileLineColLoc>(inner)) {
      text = llvm::formatv("{0}:{1}:{2}", file.getFilename(), file.getLine(),
                           file.getColumn())
                 .str();
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return text.empty() ? "unknown location" : text;
}

/// Work a loop body does that a good plan does once per row.
struct RowWork {
  Operation *op;
  std::string what;
  bool isProduct;
  /// An accumulate of a row times a scalar: row work per pair when the row
  /// is one side's and the slots index neither side (checkPairs decides).
  bool isScaledRowAdded = false;
};

/// An index of an enclosing loop: the block argument and its domain.
struct LoopIndex {
  BlockArgument value;
  std::string dim;
};

/// The indices `value` is computed from.
void indicesUsedBy(Value value, ArrayRef<LoopIndex> indices,
                   llvm::SmallSetVector<unsigned, 4> &used,
                   llvm::SmallPtrSetImpl<Operation *> &visited) {
  if (auto argument = dyn_cast<BlockArgument>(value)) {
    for (auto [position, index] : llvm::enumerate(indices))
      if (index.value == argument)
        used.insert(position);
    return;
  }
  Operation *definition = value.getDefiningOp();
  if (!definition || !visited.insert(definition).second ||
      definition->getNumRegions() != 0)
    return;
  for (Value operand : definition->getOperands())
    indicesUsedBy(operand, indices, used, visited);
}

//===----------------------------------------------------------------------===//
// The walk
//===----------------------------------------------------------------------===//

class PlanStatsPrinter {
public:
  PlanStatsPrinter(ModelOp model, raw_ostream &os) : model(model), os(os) {
    collectDims();
    model.walk([&](Operation *op) {
      if (isRowNormalisation(op))
        normalisationLocations.insert(op->getLoc());
    });
  }

  SmallVector<PairLoopWork> run() {
    modelTotal = Cost();
    for (Operation &part : model.getBody().front()) {
      // The dynamics' rules as written run as the step program.
      if (part.getNumRegions() == 0 || isa<DynamicsOp>(part))
        continue;
      program = describeModelPart(&part);
      Cost programTotal;
      std::string lines;
      {
        llvm::raw_string_ostream body(lines);
        for (Region &region : part.getRegions())
          for (Block &block : region) {
            BlockCost cost = walkBlock(block, body, 1, Cost::constant(1), {},
                                       /*nest=*/nullptr);
            programTotal = programTotal + cost.own + cost.nested;
          }
      }
      modelTotal = modelTotal + programTotal;
      if (lines.empty() && programTotal.isZero())
        continue;
      os << program << ": " << withValue(programTotal) << " flops\n" << lines;
    }
    os << "\npair loops doing row work per pair: " << findings.size() << "\n";
    for (const PairLoopWork &finding : findings)
      os << "  " << finding.location << ": " << finding.program << ": "
         << finding.loop << ": " << finding.work << "\n";
    return findings;
  }

  /// What every program and gradient of the last run costs together, at
  /// the dims' defaults and the planner's estimates of the others.
  double estimatedTotal() {
    llvm::StringMap<int64_t> estimates = dimValues;
    for (DimOp dim : model.getBody().front().getOps<DimOp>())
      if (!estimates.contains(dim.getSymName()))
        estimates[dim.getSymName()] =
            int64_t(estimatedDimSize(model, dim.getSymName()));
    return *modelTotal.evaluate(estimates, kNominalDimSize);
  }

private:
  void collectDims() {
    positionDims = ::mlir::energy::positionDims(model);
    for (Operation &op : model.getBody().front()) {
      if (auto dim = dyn_cast<DimOp>(op)) {
        if (std::optional<int64_t> value = dim.getDefaultValue())
          dimValues[dim.getSymName()] = *value;
        else if (DimExprAttr derived = dim.getDerivedAttr()) {
          FailureOr<int64_t> value =
              derived.evaluate([&](StringRef name) -> std::optional<int64_t> {
                auto found = dimValues.find(name);
                if (found == dimValues.end())
                  return std::nullopt;
                return found->second;
              });
          if (succeeded(value))
            dimValues[dim.getSymName()] = *value;
        }
      }
    }
  }

  std::string withValue(const Cost &cost) const {
    std::string text = cost.str();
    if (std::optional<double> value = cost.evaluate(dimValues);
        value && text != numberText(*value))
      text += " = " + numberText(*value);
    return text;
  }

  /// What a block costs: its own ops' flops per run (regions of ops that
  /// are not loops included), and the total of the loops and products in
  /// it, over all `trips` runs.
  struct BlockCost {
    Cost own;
    Cost nested;
  };

  /// Walks the ops of a block run `trips` times inside the loops `indices`
  /// (of the nest `nest`, null outside loops), printing its loops and
  /// products at `depth`.
  BlockCost walkBlock(Block &block, raw_ostream &out, unsigned depth,
                      const Cost &trips, ArrayRef<LoopIndex> indices,
                      Operation *nest) {
    BlockCost cost;
    for (Operation &op : block) {
      if (isLoop(&op)) {
        cost.nested = cost.nested + walkLoop(&op, out, depth, trips, indices,
                                             nest ? nest : &op);
        continue;
      }
      if (auto once = dyn_cast<OnceOp>(op)) {
        // Kept for a whole call: not part of what a call costs. Kept per
        // step: counted, as the first kernel of a step that needs it
        // computes it.
        std::string kept;
        llvm::raw_string_ostream keptOut(kept);
        BlockCost keptCost = walkBlock(once.getBody().front(), keptOut,
                                       depth + 1, trips, indices, nest);
        out.indent(2 * depth)
            << (once.getPerStep() ? "once per step"
                                  : "once per call of the runtime")
            << ", kept in @" << once.getCache() << "   work "
            << withValue(keptCost.own + keptCost.nested) << "\n"
            << kept;
        if (once.getPerStep()) {
          cost.own = cost.own + keptCost.own;
          cost.nested = cost.nested + keptCost.nested;
        }
        continue;
      }
      if (auto product = dyn_cast<BatchMatmulOp>(op)) {
        Cost flops = batchMatmulFlops(product);
        out.indent(2 * depth)
            << "batch_matmul " << shapeText(product.getLhs().getType())
            << (product.getTransposeLhs() ? "^T" : "") << " x "
            << shapeText(product.getRhs().getType())
            << (product.getTransposeRhs() ? "^T" : "")
            << (product.getSumBatch() ? " summed" : "") << "   trips "
            << withValue(trips) << "   work " << withValue(flops) << "\n";
        cost.nested = cost.nested + trips * flops;
        continue;
      }
      cost.own = cost.own + opFlops(&op);
      for (Region &region : op.getRegions())
        for (Block &inner : region) {
          BlockCost innerCost =
              walkBlock(inner, out, depth, trips, indices, nest);
          cost.own = cost.own + innerCost.own;
          cost.nested = cost.nested + innerCost.nested;
        }
    }
    return cost;
  }

  /// Prints a loop's line, then its nested loops'; returns its total flops.
  Cost walkLoop(Operation *loop, raw_ostream &out, unsigned depth,
                const Cost &outerTrips, ArrayRef<LoopIndex> outerIndices,
                Operation *nest) {
    LoopShape shape = shapeOf(loop);
    SmallVector<std::string> factors;
    for (Attribute size : shape.sizes)
      factors.push_back(sizeName(size));
    Cost trips = outerTrips * Cost::product(factors);

    // The loop's own arithmetic: an add per iteration, an lse's exp and
    // max too, a contraction's softmax weight.
    Cost perIteration = Cost::constant(0);
    if (auto reduce = dyn_cast<ReduceOp>(loop))
      perIteration =
          Cost::constant(reduce.getKind() == ReduceKind::lse ? 4 : 1);
    else if (auto contract = dyn_cast<SoftmaxContractOp>(loop)) {
      // The weight, and a multiply-add per element of each weighted value.
      perIteration = Cost::constant(4);
      for (Value value : llvm::concat<Value>(contract.getRowValues(),
                                             contract.getColValues()))
        perIteration = perIteration + sizeOf(value) * 2;
    }
    Cost nestedTotal;
    std::string nested;
    llvm::raw_string_ostream nestedOut(nested);
    for (Region *body : shape.bodies) {
      if (body->empty())
        continue;
      SmallVector<LoopIndex> indices(outerIndices);
      for (auto [argument, size] : llvm::zip(body->getArguments(), shape.sizes))
        indices.push_back({argument, sizeName(size)});
      BlockCost cost =
          walkBlock(body->front(), nestedOut, depth + 1, trips, indices, nest);
      perIteration = perIteration + cost.own;
      nestedTotal = nestedTotal + cost.nested;
      SmallVector<RowWork> rowWork;
      for (Operation &op : body->front())
        op.walk<WalkOrder::PreOrder>([&](Operation *inner) {
          if (isLoop(inner))
            return WalkResult::skip();
          collectRowWork(inner, rowWork);
          return WalkResult::advance();
        });
      if (!rowWork.empty())
        checkPairs(shape, indices, loop, nest, rowWork);
    }
    out.indent(2 * depth) << shape.text << "   trips " << withValue(trips)
                          << "   work " << withValue(perIteration) << "\n"
                          << nested;
    return trips * perIteration + nestedTotal;
  }

  /// Row work an op does: a matrix product, a row normalisation, or a part
  /// of a normalisation's backward (an op at a normalisation's location
  /// that computes on vectors).
  void collectRowWork(Operation *op, SmallVectorImpl<RowWork> &work) {
    if (auto accumulate = dyn_cast<AccumulateOp>(op))
      if (scaledRowOf(accumulate)) {
        work.push_back({op,
                        "a row of one side added per pair into slots the "
                        "other side does not index (" +
                            shapeText(accumulate.getValue().getType()) + ")",
                        false, true});
        return;
      }
    if (std::optional<std::string> product = matrixProduct(op)) {
      work.push_back({op, *product, true});
      return;
    }
    if (isRowNormalisation(op)) {
      work.push_back({op,
                      ("row normalisation (" + op->getName().stripDialect() +
                       " " + shapeText(op->getResult(0).getType()) + ")")
                          .str(),
                      false});
      return;
    }
    if (!normalisationLocations.contains(op->getLoc()) ||
        op->getNumResults() == 0 || opFlops(op).isZero())
      return;
    auto vector = [](Value value) {
      auto type = dyn_cast<ArrayType>(value.getType());
      return type && !type.isScalar();
    };
    if (llvm::any_of(op->getOperands(), vector) ||
        llvm::any_of(op->getResults(), vector))
      work.push_back(
          {op,
           "row-normalisation backward (at " + locationText(op->getLoc()) + ")",
           false});
  }

  /// The row r of an accumulate of r times a scalar, else null.
  static Value scaledRowOf(AccumulateOp accumulate) {
    auto product = accumulate.getValue().getDefiningOp<MulOp>();
    if (!product)
      return Value();
    for (unsigned side = 0; side < 2; ++side) {
      auto row = dyn_cast<ArrayType>(product->getOperand(side).getType());
      auto scale = dyn_cast<ArrayType>(product->getOperand(1 - side).getType());
      if (row && scale && !row.isScalar() && scale.isScalar())
        return product->getOperand(side);
    }
    return Value();
  }

  /// Records the loop when two of its indices (its own or enclosing ones)
  /// range over positions and are read apart: some read of the nest uses
  /// one and not the other, another the other and not the first.
  void checkPairs(const LoopShape &shape, ArrayRef<LoopIndex> indices,
                  Operation *loop, Operation *nest, ArrayRef<RowWork> rowWork) {
    SmallVector<llvm::SmallSetVector<unsigned, 4>> reads;
    nest->walk([&](Operation *op) {
      if (!isa<ReadOp, ExtractOp>(op))
        return;
      llvm::SmallSetVector<unsigned, 4> used;
      llvm::SmallPtrSet<Operation *, 8> visited;
      for (Value operand : op->getOperands().drop_front(isa<ExtractOp>(op)))
        indicesUsedBy(operand, indices, used, visited);
      if (!used.empty())
        reads.push_back(std::move(used));
    });
    auto apart = [&](unsigned a, unsigned b) {
      auto only = [&](unsigned x, unsigned y) {
        return llvm::any_of(reads, [&](const auto &used) {
          return used.contains(x) && !used.contains(y);
        });
      };
      return only(a, b) && only(b, a);
    };
    for (unsigned a = 0; a < indices.size(); ++a)
      for (unsigned b = a + 1; b < indices.size(); ++b) {
        if (!positionDims.contains(indices[a].dim) ||
            !positionDims.contains(indices[b].dim) || !apart(a, b))
          continue;
        // A product by a matrix that is itself per pair (a transform per
        // pair of capsules) is the model's own arithmetic.
        auto perPairMatrix = [&](Operation *op) {
          return llvm::any_of(op->getOperands(), [&](Value operand) {
            auto type = dyn_cast<ArrayType>(operand.getType());
            if (!type || type.getRank() < 2)
              return false;
            llvm::SmallSetVector<unsigned, 4> used;
            llvm::SmallPtrSet<Operation *, 8> visited;
            indicesUsedBy(operand, indices, used, visited);
            return used.contains(a) && used.contains(b);
          });
        };
        // A row added per pair is row work where it is one side's and the
        // slots index neither side: the scalars summed over the other side
        // first would add it once per row. (A weighted sum of the other
        // side's rows, an attention's, is the pairs' own work.)
        auto sidedRowAdded = [&](const RowWork &work) {
          auto accumulate = cast<AccumulateOp>(work.op);
          llvm::SmallSetVector<unsigned, 4> row, slots;
          llvm::SmallPtrSet<Operation *, 8> visited;
          indicesUsedBy(scaledRowOf(accumulate), indices, row, visited);
          visited.clear();
          for (Value index : accumulate.getIndices())
            indicesUsedBy(index, indices, slots, visited);
          return row.contains(a) != row.contains(b) && !slots.contains(a) &&
                 !slots.contains(b);
        };
        SmallVector<std::string> unique;
        for (const RowWork &work : rowWork)
          if (!(work.isProduct && perPairMatrix(work.op)) &&
              !(work.isScaledRowAdded && !sidedRowAdded(work)) &&
              !llvm::is_contained(unique, work.what))
            unique.push_back(work.what);
        if (unique.empty())
          continue;
        findings.push_back({program,
                            shape.text + " over the pairs (" +
                                indexName(indices[a].value) + ", " +
                                indexName(indices[b].value) + ")",
                            locationText(loop->getLoc()),
                            llvm::join(unique.begin(), unique.end(), ", ")});
        return;
      }
  }

  ModelOp model;
  raw_ostream &os;
  llvm::StringMap<int64_t> dimValues;
  llvm::StringSet<> positionDims;
  llvm::DenseSet<Location> normalisationLocations;
  std::string program;
  Cost modelTotal;
  SmallVector<PairLoopWork> findings;
};

} // namespace

SmallVector<PairLoopWork> mlir::energy::printPlanStats(ModelOp model,
                                                       raw_ostream &os) {
  return PlanStatsPrinter(model, os).run();
}

double mlir::energy::estimatedPlanWork(ModelOp model) {
  PlanStatsPrinter printer(model, llvm::nulls());
  printer.run();
  return printer.estimatedTotal();
}
