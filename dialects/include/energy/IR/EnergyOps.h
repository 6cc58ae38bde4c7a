//===- EnergyOps.h - Operations of the energy dialect -----------*- C++ -*-===//
//
// The ops of energy graphs: model declarations, expression ops of energy
// terms, index-domain reductions and dynamics.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_IR_ENERGYOPS_H
#define ENERGY_IR_ENERGYOPS_H

#include "energy/IR/EnergyAttrs.h"
#include "energy/IR/EnergyDialect.h"
#include "energy/IR/EnergyTypes.h"
#include "energy/Interfaces/DerivativeOpInterface.h"
#include "energy/Interfaces/ElementwiseOpInterface.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/RegionKindInterface.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::energy {
class DynamicsOp;

/// Whether `value` is the constant `number`: a scalar constant, or an array
/// of one (a broadcast constant).
bool isConstantOf(Value value, double number);

/// The result type of an elementwise op on `lhs` and `rhs`: equal shapes, or
/// one of them a scalar. Emits an error at `location` when they do not fit.
LogicalResult inferBroadcastType(std::optional<Location> location, Type lhs,
                                 Type rhs, SmallVectorImpl<Type> &types);

/// An integer known when a kernel runs: a constant plus multiples of dims
/// (a window's width, a sharded rank's first row or the rank count), the
/// terms in the order of their dim expressions' text, none of them zero.
struct DimLinear {
  int64_t constant = 0;
  SmallVector<std::pair<DimExprAttr, int64_t>> sizeTerms;

  DimLinear(int64_t constant = 0) : constant(constant) {}
  /// The dim expression `size` itself.
  static DimLinear ofSize(DimExprAttr size);
  bool isConstant() const { return sizeTerms.empty(); }
  bool isZero() const { return constant == 0 && sizeTerms.empty(); }
  /// Adds `factor` times `other`.
  void add(const DimLinear &other, int64_t factor = 1);
  /// The product, where one factor is a constant; none otherwise (a product
  /// of dims is not linear in them).
  std::optional<DimLinear> times(const DimLinear &other) const;
  bool operator==(const DimLinear &other) const {
    return constant == other.constant && sizeTerms == other.sizeTerms;
  }
  bool operator!=(const DimLinear &other) const { return !(*this == other); }
};

/// One condition on the positions a softmax contraction admits, linear in
/// its last row index r and its column index c: a·r + b·c + offset ≥ 0, or
/// ≠ 0 when `notEqual`; a, b and the offset may involve dims (a strided
/// rank's rows, i·N__stride + N__offset).
struct LinearConstraint {
  DimLinear rowCoefficient, colCoefficient, offset;
  bool notEqual = false;

  bool operator==(const LinearConstraint &other) const {
    return rowCoefficient == other.rowCoefficient &&
           colCoefficient == other.colCoefficient && offset == other.offset &&
           notEqual == other.notEqual;
  }
};

/// An index value as c₀ + Σ coefficient · index argument over the
/// arguments of one block, c₀ and the coefficients linear in dims.
struct LinearIndex {
  SmallVector<DimLinear> coefficients;
  DimLinear constant;

  bool readsIndices() const {
    return llvm::any_of(coefficients,
                        [](const DimLinear &c) { return !c.isZero(); });
  }
  /// Adds `factor` times `other`.
  void add(const LinearIndex &other, int64_t factor) {
    for (auto [mine, theirs] : llvm::zip(coefficients, other.coefficients))
      mine.add(theirs, factor);
    constant.add(other.constant, factor);
  }
  /// Times `factor`; none where a product of dims would result.
  std::optional<LinearIndex> times(const DimLinear &factor) const {
    LinearIndex result = *this;
    for (DimLinear &coefficient : result.coefficients) {
      std::optional<DimLinear> product = coefficient.times(factor);
      if (!product)
        return std::nullopt;
      coefficient = *product;
    }
    std::optional<DimLinear> product = constant.times(factor);
    if (!product)
      return std::nullopt;
    result.constant = *product;
    return result;
  }
};

/// `value` (an index) as a LinearIndex over the arguments of `block`, or
/// none when it is not linear in them (with coefficients linear in dims).
std::optional<LinearIndex> linearIndexOf(Value value, Block &block);

/// The result `expr` of an affine map over `operands` (its dims, then its
/// symbols) as a LinearIndex over the arguments of `block`, or none.
std::optional<LinearIndex> linearIndexOfExpr(AffineExpr expr,
                                             ValueRange operands,
                                             unsigned numDims, Block &block);

/// A product of two tables at a pair, dot(rowTable[rows], colTable[batch
/// rows, c]), that the weights of a bilinear contraction's sums may be
/// multiplied by (a derivative of the score in some direction).
struct PairTerm {
  Value rowTable, colTable;
};

/// The position of the term of `terms` with the same tables as `term`.
std::optional<unsigned> findPairTerm(ArrayRef<PairTerm> terms,
                                     const PairTerm &term);

/// A further product of a bilinear score: scale · dot(rowTable[rows],
/// colTable[batch rows, c]), a null scale 1.
struct ScoreProduct {
  Value rowTable, colTable, scale;
};

/// The operands of a bilinear softmax contraction: the score is
/// scale · dot(rowTable[rows], colTable[batch rows, c]), plus the
/// `moreProducts` (a sum of bilinear forms: the halves of rotated queries
/// and keys; the kernel takes them as one over the tables' rows side by
/// side), plus rowBias[rows] and colBias[batch rows, c] where they are
/// given (scalar tables; the kernel folds them into the features); the
/// child side sums
/// rows `rowValueTables[j][batch rows, c]`, the parent side rows
/// `colValueTables[j][rows]`. A value may be such a row times a factor, or
/// a factor alone (its table null: 1 at every position); a factor is a
/// scalar of the value's region, a polynomial of degree at most 2 in the
/// `pairTerms` (its dot products of table rows) with coefficients computed
/// outside the contraction: affine, or with products of two terms (a
/// learned scale's second derivatives weigh the score's own term by
/// another), which `pairProducts` lists.
struct BilinearContract {
  Value rowTable, colTable;
  /// A scalar computed outside the contraction, or null for 1.
  Value scale;
  SmallVector<ScoreProduct> moreProducts;
  /// Tables of one number per row position and per (batch rows, column)
  /// added to the score, or null.
  Value rowBias, colBias;
  /// A table [batch rows, L] added to the score at the batch rows and the
  /// index a·r + b·c + offset of the last row index r and the column c (a
  /// bias per relative offset r − c), or null.
  Value pairBias;
  DimLinear pairBiasRowCoefficient, pairBiasColCoefficient, pairBiasOffset;
  SmallVector<Value> rowValueTables, colValueTables;
  /// Each value's factor, or null for 1.
  SmallVector<Value> rowValueFactors, colValueFactors;
  SmallVector<PairTerm> pairTerms;
  /// The products t_a · t_b (a <= b, positions in pairTerms) that some
  /// factor may weigh, in the order the factors first reach them.
  SmallVector<std::pair<unsigned, unsigned>> pairProducts;
  /// The term each dot product in the factors is.
  llvm::DenseMap<Operation *, unsigned> pairTermOfDot;
};

/// What a column value of a quadratic softmax contraction is, at row r and
/// column c: 1, points[r], points[r] − means[c], or the outer product of
/// the last with itself.
enum class QuadraticMoment { Weight, Point, Centred, CentredOuter };

/// The operands of a quadratic softmax contraction (a Gaussian mixture's
/// E-step and M-step sums): the score is
///   bias[c] ± scale · quad(points[r] − means[c], precisions[c]),
/// with − when `negated`; every column value is a moment, and every row
/// value a scalar computed outside (its sum is itself where a row's weights
/// sum to 1).
struct QuadraticContract {
  Value points, means, precisions;
  /// A table over the columns, or null for 0.
  Value bias;
  /// A scalar computed outside the contraction, or null for 1.
  Value scale;
  bool negated = false;
  SmallVector<QuadraticMoment> moments;
  SmallVector<Value> rowScalars;
};

/// The engines a softmax contraction's `engine` names (EnergyKernelOps.td).
inline constexpr StringLiteral kLoopsEngine = "loops";
inline constexpr StringLiteral kCpuEngine = "cpu";
inline constexpr StringLiteral kCudaEngine = "cuda";
inline constexpr StringLiteral kCudaTensorCoresEngine = "cuda-tensor-cores";
inline constexpr StringLiteral kCudnnEngine = "cudnn";
inline constexpr StringLiteral kContractEngines[] = {
    kLoopsEngine, kCpuEngine, kCudaEngine, kCudaTensorCoresEngine,
    kCudnnEngine};

/// A model's unit attribute, set by energy-plan-engines for CUDA (or on
/// request): its kernels' loops are generated without calls of host
/// functions where code can do the work (an exp over a panel, a log
/// determinant, an inverse), so that a GPU can run them.
inline constexpr StringLiteral kDeviceLoopsAttr = "energy.device_loops";

/// Checks that `name` is a plugin's aggregation in the aggregation table;
/// otherwise an error on `op` that says to load its plugin.
LogicalResult verifyPluginAggregation(Operation *op, StringRef name);

} // namespace mlir::energy

#define GET_OP_CLASSES
#include "energy/IR/EnergyOps.h.inc"

#endif // ENERGY_IR_ENERGYOPS_H
