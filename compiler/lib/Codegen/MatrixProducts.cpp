//===- MatrixProducts.cpp - Matrix products in kernels --------------------===//
//
// Lowers matmul and batch_matmul: products of matrices through the support
// library's GEMM (MatrixProduct.h), matrix-vector products as vector loops;
// a product that an accumulation adds into a whole tensor is computed into
// that tensor's storage (patterns on the product and on the accumulation),
// and a transpose read only as Xᵀ v is never stored.
//
//===----------------------------------------------------------------------===//

#include "KernelLowering.h"
#include "energy/KernelSupport/KernelSupport.h"
#include "energy/KernelSupport/MatrixProduct.h"

using namespace mlir;
using namespace mlir::energy;
using namespace mlir::energy::codegen;

namespace {
/// Whether `matmul` is Xᵀ v with X a matrix: emitMatmul then reads X along
/// its rows and never the transpose.
bool readsTransposeAlongRows(MatmulOp matmul) {
  auto transpose = matmul.getLhs().getDefiningOp<TransposeOp>();
  return transpose && matmul.getRhs() != matmul.getLhs() &&
         cast<ArrayType>(transpose.getOperand().getType()).getRank() == 2 &&
         cast<ArrayType>(matmul.getRhs().getType()).getRank() == 1;
}

class MatrixProductLowering : public KernelLowering {
public:
  explicit MatrixProductLowering(KernelLowering &kernel)
      : KernelLowering(kernel) {}

  FailureOr<Lowered> emitMatmul(MatmulOp matmul);
  FailureOr<Lowered> emitBatchMatmul(BatchMatmulOp product);
  /// The accumulate right after `op` that adds its product (a batch_matmul,
  /// or a matmul of two matrices, outside every loop) into a whole tensor
  /// when nothing else reads it: the product is then computed into the
  /// tensor's storage, never stored on its own; null otherwise.
  AccumulateOp addedInPlace(Operation *op);
  /// The support call of a batch_matmul or matmul `op` writing into `into`,
  /// or adding to it with `add`.
  void emitProducts(Operation *op, Value into, bool add);
};
} // namespace

FailureOr<Lowered> MatrixProductLowering::emitMatmul(MatmulOp matmul) {
  auto type = cast<ArrayType>(matmul.getType());
  auto lhsType = cast<ArrayType>(matmul.getLhs().getType());
  auto rhsType = cast<ArrayType>(matmul.getRhs().getType());
  Lowered lhs = get(matmul.getLhs()), rhs = get(matmul.getRhs());
  SmallVector<Value> lhsShape = shape(lhsType);
  Value rows = lhsShape[0], inner = lhsShape[1];
  // On a GPU, once per statement: a kernel with a thread per element of
  // the product, each summing along k in the order the host's loops do.
  if (rhsType.getRank() == 1 && deviceLoops() && frame.loopDepth == 0) {
    bool alongRows = readsTransposeAlongRows(matmul);
    Value matrix =
        alongRows
            ? get(matmul.getLhs().getDefiningOp<TransposeOp>().getOperand())
                  .data
            : lhs.data;
    return build(type, [&](Value i) {
      return forRange(inner, ValueRange{real(0.0)},
                      [&](Value k, ValueRange sum) {
                        // Xᵀ v reads X[k, i], X v reads X[i, k].
                        Value at =
                            alongRows
                                ? arith::AddIOp::create(
                                      b, loc,
                                      arith::MulIOp::create(b, loc, k, rows), i)
                                : arith::AddIOp::create(
                                      b, loc,
                                      arith::MulIOp::create(b, loc, i, inner),
                                      k);
                        return SmallVector<Value>{add(
                            sum[0], mul(load(rhs.data, k), load(matrix, at)))};
                      })
          .front();
    });
  }
  Value data = allocate(type);
  if (rhsType.getRank() == 1) {
    // Xᵀ v of a row-major X is Σ_k v[k] X[k, :]: rows of X scaled and
    // added, along X's rows, with no pass over its transpose.
    if (readsTransposeAlongRows(matmul)) {
      Value matrix =
          get(matmul.getLhs().getDefiningOp<TransposeOp>().getOperand()).data;
      forRange(rows, [&](Value i) { store(real(0.0), data, i); });
      forRange(inner, [&](Value k) {
        Value row =
            offsetPointer(matrix, arith::MulIOp::create(b, loc, k, rows));
        addScaled(data, load(rhs.data, k), row, rows);
      });
      return Lowered{Value(), data};
    }
    forRange(rows, [&](Value i) {
      Value row =
          offsetPointer(lhs.data, arith::MulIOp::create(b, loc, i, inner));
      store(dotProduct(row, rhs.data, inner), data, i);
    });
    return Lowered{Value(), data};
  }
  Value columns = shape(rhsType)[1];
  // Once per statement, a tuned GEMM; per position of a loop, loops.
  if (frame.loopDepth == 0) {
    callSupport(
        singlePrecision() ? ENERGY_SUPPORT_MATMUL_F32
                          : ENERGY_SUPPORT_MATMUL_F64,
        {toI64(rows), toI64(columns), toI64(inner), lhs.data, rhs.data, data});
    return Lowered{Value(), data};
  }
  // i, k, j order: the innermost loop runs along rows of rhs and of
  // the result, contiguously.
  forElements(elementCount(type),
              [&](Value position) { store(real(0.0), data, position); });
  forRange(rows, [&](Value i) {
    Value resultRow =
        offsetPointer(data, arith::MulIOp::create(b, loc, i, columns));
    forRange(inner, [&](Value k) {
      Value a = load(lhs.data,
                     arith::AddIOp::create(
                         b, loc, arith::MulIOp::create(b, loc, i, inner), k));
      Value rhsRow =
          offsetPointer(rhs.data, arith::MulIOp::create(b, loc, k, columns));
      addScaled(resultRow, a, rhsRow, columns);
    });
  });
  return Lowered{Value(), data};
}

FailureOr<Lowered>
MatrixProductLowering::emitBatchMatmul(BatchMatmulOp product) {
  if (frame.loopDepth > 0)
    return product.emitOpError(
        "is lowered to a support call once per statement, not in a loop");
  Value data = arrayBuffer(product);
  emitProducts(product, data, /*add=*/false);
  return Lowered{Value(), data};
}

AccumulateOp MatrixProductLowering::addedInPlace(Operation *op) {
  auto accumulate = dyn_cast_or_null<AccumulateOp>(op->getNextNode());
  if (frame.loopDepth > 0 || !accumulate || !op->hasOneUse() ||
      accumulate.getValue() != op->getResult(0) ||
      !accumulate.getIndices().empty())
    return AccumulateOp();
  auto matmul = dyn_cast<MatmulOp>(op);
  if (!isa<BatchMatmulOp>(op) &&
      !(matmul && cast<ArrayType>(matmul.getLhs().getType()).getRank() == 2 &&
        cast<ArrayType>(matmul.getRhs().getType()).getRank() == 2))
    return AccumulateOp();
  auto tensor =
      context.model.lookupSymbol<TensorOp>(accumulate.getTensorAttr());
  return tensor && tensor.getArrayType() == op->getResult(0).getType()
             ? accumulate
             : AccumulateOp();
}

void MatrixProductLowering::emitProducts(Operation *op, Value into, bool add) {
  auto product = dyn_cast<BatchMatmulOp>(op);
  Value lhs = op->getOperand(0), rhs = op->getOperand(1);
  bool transposeLhs = product && product.getTransposeLhs();
  bool transposeRhs = product && product.getTransposeRhs();
  bool sum = product && product.getSumBatch();
  SmallVector<Value> lhsShape = shape(cast<ArrayType>(lhs.getType())),
                     rhsShape = shape(cast<ArrayType>(rhs.getType()));
  // An operand's matrix (its last two axes) and the elements between the
  // matrices of two positions of the batch (0 when it has no batch axis).
  auto matrixOf = [&](ArrayRef<Value> extents, bool transposed) {
    Value rows = extents[extents.size() - 2], columns = extents.back();
    return transposed ? std::pair(columns, rows) : std::pair(rows, columns);
  };
  auto strideOf = [&](ArrayRef<Value> extents) {
    return extents.size() == 3
               ? toI64(arith::MulIOp::create(b, loc, extents[1], extents[2]))
               : toI64(index(0));
  };
  // The rows of an lhs with several row axes are their positions (and, lhs
  // transposed, those of rhs's same row axes); several batch axes are one
  // batch of their positions.
  int64_t lhsRows = product ? product.getLhsRows() : 1;
  int64_t batchAxes = product ? product.getBatchAxes() : 1;
  bool lhsBatched = product ? product.hasLhsBatch() : lhsShape.size() == 3;
  bool rhsBatched = product ? product.hasRhsBatch() : rhsShape.size() == 3;
  auto flatten = [&](SmallVector<Value> &extents, bool batched,
                     int64_t rowAxes) {
    auto positions = [&](ArrayRef<Value> axes) {
      Value count = index(1);
      for (Value extent : axes)
        count = arith::MulIOp::create(b, loc, count, extent);
      return count;
    };
    SmallVector<Value> flattened;
    if (batched)
      flattened.push_back(
          positions(ArrayRef<Value>(extents).take_front(batchAxes)));
    flattened.push_back(
        positions(ArrayRef<Value>(extents).take_back(rowAxes + 1).drop_back()));
    flattened.push_back(extents.back());
    extents = flattened;
  };
  if (lhsRows > 1 || batchAxes > 1) {
    flatten(lhsShape, lhsBatched, lhsRows);
    flatten(rhsShape, rhsBatched, product.getRhsRows());
  }
  auto [m, k] = matrixOf(lhsShape, transposeLhs);
  Value n = matrixOf(rhsShape, transposeRhs).second;
  Value batch = lhsBatched   ? lhsShape.front()
                : rhsBatched ? rhsShape.front()
                             : index(1);
  int64_t flags = (transposeLhs ? ENERGY_PRODUCT_TRANSPOSE_A : 0) |
                  (transposeRhs ? ENERGY_PRODUCT_TRANSPOSE_B : 0) |
                  (sum ? ENERGY_PRODUCT_SUM_BATCH : 0) |
                  (add ? ENERGY_PRODUCT_ACCUMULATE : 0);
  SmallVector<Value> arguments = {
      toI64(batch),  toI64(m),
      toI64(n),      toI64(k),
      get(lhs).data, strideOf(lhsShape),
      get(rhs).data, strideOf(rhsShape),
      into,          arith::ConstantIntOp::create(b, loc, flags, 64)};
  // An rhs the same all call long: its packed panels are kept (the plan's
  // cache and flag).
  if (product && product.getPackedRhsCache()) {
    arguments.push_back(bufferPointer(product.getPackedRhsCache().getValue()));
    arguments.push_back(bufferPointer(product.getPackedRhsFlag().getValue()));
    callSupport(singlePrecision() ? ENERGY_SUPPORT_MATMUL_BATCH_PACKED_F32
                                  : ENERGY_SUPPORT_MATMUL_BATCH_PACKED_F64,
                arguments);
    return;
  }
  callSupport(singlePrecision() ? ENERGY_SUPPORT_MATMUL_BATCH_F32
                                : ENERGY_SUPPORT_MATMUL_BATCH_F64,
              arguments);
}

void codegen::populateMatrixProductLowerings(KernelLoweringPatterns &patterns) {
  using Family = MatrixProductLowering;
  patterns.addArrayOps<Family, MatmulOp>(&Family::emitMatmul);
  patterns.addArrayOps<Family, BatchMatmulOp>(&Family::emitBatchMatmul);
  // A product added in place is emitted by its accumulation.
  auto addedInPlace = [](Operation *op, KernelLowering &kernel) {
    return static_cast<bool>(Family(kernel).addedInPlace(op));
  };
  auto emittedByItsAccumulation = [](Operation *, KernelLowering &) {
    return success();
  };
  patterns.add<MatmulOp>(emittedByItsAccumulation, kInPlaceBenefit,
                         addedInPlace);
  patterns.add<BatchMatmulOp>(emittedByItsAccumulation, kInPlaceBenefit,
                              addedInPlace);
  // A transpose whose users all read it as Xᵀ v is never stored.
  patterns.add<TransposeOp>(
      [](Operation *, KernelLowering &) { return success(); }, kUnstoredBenefit,
      [](Operation *op, KernelLowering &) {
        Value transposed = op->getResult(0);
        return !transposed.use_empty() &&
               llvm::all_of(transposed.getUsers(), [&](Operation *user) {
                 auto matmul = dyn_cast<MatmulOp>(user);
                 return matmul && readsTransposeAlongRows(matmul);
               });
      });
  auto productOf = [](Operation *op) {
    return cast<AccumulateOp>(op).getValue().getDefiningOp();
  };
  patterns.add<AccumulateOp>(
      [productOf](Operation *op, KernelLowering &kernel) {
        Family(kernel).emitProducts(
            productOf(op),
            kernel.gradientTarget(cast<AccumulateOp>(op).getTensor()),
            /*add=*/true);
        return success();
      },
      kInPlaceBenefit,
      [productOf](Operation *op, KernelLowering &kernel) {
        Operation *product = productOf(op);
        return product && Family(kernel).addedInPlace(product) == op;
      });
}
