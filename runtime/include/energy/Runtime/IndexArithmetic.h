//===- IndexArithmetic.h - Integer arithmetic of dims and indices ---------===//
//
// The one rule by which dim and index expressions are evaluated, shared by
// the dialect, the interpreter, the manifest and the kernels: exact
// arithmetic on signed integers, overflow an error, division rounding
// down (floor), up (ceil) or required exact, and a modulus with the sign
// of the divisor. Header-only, with no dependency, for every layer.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_RUNTIME_INDEXARITHMETIC_H
#define ENERGY_RUNTIME_INDEXARITHMETIC_H

namespace energy {

/// The operations of dim and index expressions. `Div` is exact division
/// (a dim expression's `/`: a remainder is an error).
enum class IndexOp { Add, Sub, Mul, Div, FloorDiv, CeilDiv, Mod };

/// Why an index operation has no value.
enum class IndexFault { None, Overflow, DivisionByZero, Inexact };

/// floor(a / b): the quotient rounded toward −∞. Requires b ≠ 0 and not
/// (a the least value and b = −1).
template <typename Int> constexpr Int floorDivide(Int a, Int b) {
  Int quotient = a / b, remainder = a % b;
  return remainder != 0 && ((remainder < 0) != (b < 0)) ? quotient - 1
                                                        : quotient;
}

/// ceil(a / b): the quotient rounded toward +∞. Requires what floorDivide
/// does.
template <typename Int> constexpr Int ceilDivide(Int a, Int b) {
  Int quotient = a / b, remainder = a % b;
  return remainder != 0 && ((remainder < 0) == (b < 0)) ? quotient + 1
                                                        : quotient;
}

/// a − b · floor(a / b): the modulus with the sign of b (in [0, b) for
/// b > 0, as MLIR's affine `mod`). Requires b ≠ 0.
template <typename Int> constexpr Int floorModulo(Int a, Int b) {
  if (b == -1)
    return 0;
  Int remainder = a % b;
  return remainder != 0 && ((remainder < 0) != (b < 0)) ? remainder + b
                                                        : remainder;
}

/// `left op right` into `result`, or the fault (and `result` unchanged):
/// an overflow of Int, a division (or modulus) by zero, or for `Div` a
/// remainder.
template <typename Int>
constexpr IndexFault applyIndexOp(IndexOp op, Int left, Int right,
                                  Int &result) {
  Int value = 0;
  switch (op) {
  case IndexOp::Add:
    if (__builtin_add_overflow(left, right, &value))
      return IndexFault::Overflow;
    result = value;
    return IndexFault::None;
  case IndexOp::Sub:
    if (__builtin_sub_overflow(left, right, &value))
      return IndexFault::Overflow;
    result = value;
    return IndexFault::None;
  case IndexOp::Mul:
    if (__builtin_mul_overflow(left, right, &value))
      return IndexFault::Overflow;
    result = value;
    return IndexFault::None;
  case IndexOp::Div:
  case IndexOp::FloorDiv:
  case IndexOp::CeilDiv:
  case IndexOp::Mod:
    break;
  }
  if (right == 0)
    return IndexFault::DivisionByZero;
  if (op == IndexOp::Mod) {
    result = floorModulo(left, right);
    return IndexFault::None;
  }
  // The one quotient that overflows: the least value over −1.
  if (right == -1) {
    if (__builtin_sub_overflow(Int(0), left, &value))
      return IndexFault::Overflow;
    result = value;
    return IndexFault::None;
  }
  if (op == IndexOp::Div && left % right != 0)
    return IndexFault::Inexact;
  result = op == IndexOp::CeilDiv ? ceilDivide(left, right)
                                  : floorDivide(left, right);
  return IndexFault::None;
}

/// What `fault` says after "LEFT OP RIGHT " in a message.
constexpr const char *describeIndexFault(IndexFault fault) {
  switch (fault) {
  case IndexFault::None:
    return "has a value";
  case IndexFault::Overflow:
    return "overflows";
  case IndexFault::DivisionByZero:
    return "divides by zero";
  case IndexFault::Inexact:
    return "leaves a remainder";
  }
  return "has no value";
}

} // namespace energy

#endif // ENERGY_RUNTIME_INDEXARITHMETIC_H
