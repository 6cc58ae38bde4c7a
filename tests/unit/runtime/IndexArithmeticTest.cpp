//===- IndexArithmeticTest.cpp - The rule of dim and index arithmetic -----===//
//
// Unit tests of IndexArithmetic.h against the definitions: floor, ceil and
// modulus compared with long double arithmetic (exact at these sizes) over
// every sign, and the faults at the edges of int64_t.
//
//===----------------------------------------------------------------------===//

#include "energy/Runtime/IndexArithmetic.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

using energy::IndexFault;
using energy::IndexOp;

namespace {
IndexFault apply(IndexOp op, int64_t left, int64_t right, int64_t &result) {
  return energy::applyIndexOp(op, left, right, result);
}
} // namespace

TEST_CASE("divisions round as their names say, for every sign") {
  for (int64_t a = -25; a <= 25; ++a) {
    for (int64_t b = -7; b <= 7; ++b) {
      if (b == 0)
        continue;
      long double exact = static_cast<long double>(a) / b;
      auto floor = static_cast<int64_t>(std::floor(exact));
      auto ceil = static_cast<int64_t>(std::ceil(exact));
      int64_t result = 0;
      CHECK(apply(IndexOp::FloorDiv, a, b, result) == IndexFault::None);
      CHECK(result == floor);
      CHECK(apply(IndexOp::CeilDiv, a, b, result) == IndexFault::None);
      CHECK(result == ceil);
      CHECK(apply(IndexOp::Mod, a, b, result) == IndexFault::None);
      CHECK(result == a - b * floor);
      // The modulus has the divisor's sign, and is smaller than it.
      CHECK((result == 0 || (result < 0) == (b < 0)));
      CHECK(std::abs(result) < std::abs(b));
      IndexFault exactFault = apply(IndexOp::Div, a, b, result);
      if (a % b == 0) {
        CHECK(exactFault == IndexFault::None);
        CHECK(result == floor);
      } else {
        CHECK(exactFault == IndexFault::Inexact);
      }
      CHECK(energy::floorDivide<__int128>(a, b) == floor);
      CHECK(energy::ceilDivide<__int128>(a, b) == ceil);
    }
  }
}

TEST_CASE("overflow and division by zero are faults that leave the result") {
  constexpr int64_t least = std::numeric_limits<int64_t>::min();
  constexpr int64_t most = std::numeric_limits<int64_t>::max();
  int64_t result = 42;
  CHECK(apply(IndexOp::Add, most, 1, result) == IndexFault::Overflow);
  CHECK(apply(IndexOp::Sub, least, 1, result) == IndexFault::Overflow);
  CHECK(apply(IndexOp::Mul, int64_t(1) << 32, int64_t(1) << 31, result) ==
        IndexFault::Overflow);
  for (IndexOp op :
       {IndexOp::Div, IndexOp::FloorDiv, IndexOp::CeilDiv, IndexOp::Mod})
    CHECK(apply(op, 7, 0, result) == IndexFault::DivisionByZero);
  for (IndexOp op : {IndexOp::Div, IndexOp::FloorDiv, IndexOp::CeilDiv})
    CHECK(apply(op, least, -1, result) == IndexFault::Overflow);
  CHECK(result == 42);
  CHECK(apply(IndexOp::Mod, least, -1, result) == IndexFault::None);
  CHECK(result == 0);
  CHECK(apply(IndexOp::FloorDiv, least, 2, result) == IndexFault::None);
  CHECK(result == least / 2);
  CHECK(apply(IndexOp::Mul, -(int64_t(1) << 31), int64_t(1) << 32, result) ==
        IndexFault::None);
  CHECK(result == least);
  CHECK(std::string(energy::describeIndexFault(IndexFault::Inexact)) ==
        "leaves a remainder");
}
