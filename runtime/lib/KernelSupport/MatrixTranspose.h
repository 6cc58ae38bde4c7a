//===- MatrixTranspose.h - Transposes of row-major matrices -----*- C++ -*-===//
//
// The transposes that kernels store (energy_support_transpose_f32/f64):
// blocks of the vector width transposed in registers by the path's
// V::transpose, the edges element by element.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_KERNELSUPPORT_MATRIXTRANSPOSE_H
#define ENERGY_KERNELSUPPORT_MATRIXTRANSPOSE_H

#include <stdint.h>

namespace energy::kernels::ENERGY_KERNEL_ISA {

/// out[p] = in[p]ᵀ for p < matrices: in[p] is columns × rows, out[p] rows ×
/// columns, both row-major and back to back.
template <class V>
void transposeMatrices(int64_t matrices, int64_t rows, int64_t columns,
                       const typename V::Scalar *in, typename V::Scalar *out) {
  constexpr int64_t L = V::kLanes;
  const int64_t block = rows * columns;
  const int64_t wholeRows = rows - rows % L,
                wholeColumns = columns - columns % L;
  for (int64_t p = 0; p < matrices; ++p) {
    const typename V::Scalar *source = in + p * block;
    typename V::Scalar *target = out + p * block;
    // A band of L rows of the result at a time: its blocks read L columns of
    // L rows of the source each.
    for (int64_t i = 0; i < wholeRows; i += L) {
      for (int64_t j = 0; j < wholeColumns; j += L)
        V::transpose(source + j * rows + i, rows, target + i * columns + j,
                     columns);
      for (int64_t r = i; r < i + L; ++r)
        for (int64_t j = wholeColumns; j < columns; ++j)
          target[r * columns + j] = source[j * rows + r];
    }
    for (int64_t r = wholeRows; r < rows; ++r)
      for (int64_t j = 0; j < columns; ++j)
        target[r * columns + j] = source[j * rows + r];
  }
}

} // namespace energy::kernels::ENERGY_KERNEL_ISA

#endif // ENERGY_KERNELSUPPORT_MATRIXTRANSPOSE_H
