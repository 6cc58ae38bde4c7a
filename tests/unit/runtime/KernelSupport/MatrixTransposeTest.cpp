//===- MatrixTransposeTest.cpp - The transposes kernels store -------------===//
//
// Every path's transpose (MatrixTranspose.h: blocks of the vector width in
// registers, the edges element by element) against the definition,
// out[p][i][j] = in[p][j][i], bit for bit: sizes below, at and past the
// widths of 4, 8 and 16 lanes, more than one matrix, f32 and f64; and the
// C entry point, which leaves empty matrices alone.
//
//===----------------------------------------------------------------------===//

#include "KernelSupport/IsaKernels.h"

#include "energy/KernelSupport/InstructionSet.h"
#include "energy/KernelSupport/KernelSupport.h"

#include <doctest/doctest.h>

#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

template <typename T>
using TransposeFunction = void (*)(int64_t, int64_t, int64_t, const T *, T *);

/// The paths this CPU runs, with their transpose of T.
template <typename T>
std::vector<std::pair<std::string, TransposeFunction<T>>> paths() {
  std::vector<std::pair<std::string, TransposeFunction<T>>> result;
  if constexpr (std::is_same_v<T, float>) {
    result.push_back({"generic", energy::kernels::generic::transposeF32});
    result.push_back({"active", energy_support_transpose_f32});
  } else {
    result.push_back({"generic", energy::kernels::generic::transposeF64});
    result.push_back({"active", energy_support_transpose_f64});
  }
#if ENERGY_KERNELS_X86
  int32_t supported = energy_support_supported_isa();
  if constexpr (std::is_same_v<T, float>) {
    if (supported >= ENERGY_ISA_AVX2)
      result.push_back({"avx2", energy::kernels::avx2::transposeF32});
    if (supported >= ENERGY_ISA_AVX512)
      result.push_back({"avx512", energy::kernels::avx512::transposeF32});
  } else {
    if (supported >= ENERGY_ISA_AVX2)
      result.push_back({"avx2", energy::kernels::avx2::transposeF64});
    if (supported >= ENERGY_ISA_AVX512)
      result.push_back({"avx512", energy::kernels::avx512::transposeF64});
  }
#endif
  return result;
}

template <typename T> void checkEveryPath() {
  struct Size {
    int64_t matrices, rows, columns;
  };
  const Size sizes[] = {{1, 1, 1},   {1, 4, 4},   {1, 8, 8},   {1, 16, 16},
                        {1, 16, 48}, {1, 48, 16}, {2, 17, 33}, {3, 5, 40},
                        {2, 40, 5},  {1, 31, 1},  {1, 1, 31},  {1, 100, 70}};
  for (const auto &path : paths<T>())
    for (const Size &size : sizes) {
      const std::string &name = path.first;
      TransposeFunction<T> transpose = path.second;
      const int64_t count = size.matrices * size.rows * size.columns;
      std::vector<T> in(count), out(count + 1, T(-1));
      for (int64_t e = 0; e < count; ++e)
        in[e] = T(e) + T(0.5); // distinct, exact in both types
      transpose(size.matrices, size.rows, size.columns, in.data(), out.data());
      CAPTURE(name);
      CAPTURE(size.matrices);
      CAPTURE(size.rows);
      CAPTURE(size.columns);
      bool same = true;
      for (int64_t p = 0; p < size.matrices; ++p)
        for (int64_t i = 0; i < size.rows; ++i)
          for (int64_t j = 0; j < size.columns; ++j) {
            int64_t block = p * size.rows * size.columns;
            same &= out[block + i * size.columns + j] ==
                    in[block + j * size.rows + i];
          }
      CHECK(same);
      // Nothing written past the result.
      CHECK(out[count] == T(-1));
    }
}

} // namespace

TEST_CASE("transpose: every path against the definition, f32") {
  checkEveryPath<float>();
}

TEST_CASE("transpose: every path against the definition, f64") {
  checkEveryPath<double>();
}

TEST_CASE("transpose: empty matrices are left alone") {
  float in[1] = {1}, out[1] = {7};
  energy_support_transpose_f32(0, 4, 4, in, out);
  energy_support_transpose_f32(1, 0, 4, in, out);
  energy_support_transpose_f32(1, 4, 0, in, out);
  CHECK(out[0] == 7);
}
