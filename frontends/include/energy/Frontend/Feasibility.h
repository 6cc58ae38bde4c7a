//===- Feasibility.h - Conditions for a system of affine inequalities ---*-===//
//
// Fourier–Motzkin elimination over AffineExpr: the conditions on the
// remaining symbols (dims, `step`) under which a system of inequalities
// `e ≥ 0` has a solution in the eliminated ones (index variables). The
// checker uses it to decide whether an index can leave its axis, and to
// hand the runtime the conditions it cannot decide without the dims.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_FRONTEND_FEASIBILITY_H
#define ENERGY_FRONTEND_FEASIBILITY_H

#include "energy/Frontend/Affine.h"

#include <map>
#include <string>
#include <vector>

namespace energy {
namespace frontend {

/// What eliminating symbols from a system of inequalities leaves.
struct Feasibility {
  enum class Kind {
    Never,   ///< no solution whatever the remaining symbols are
    When,    ///< a solution exactly when every condition holds
    Unknown, ///< the elimination grew past its limit or overflowed
  };
  Kind kind = Kind::Unknown;
  /// With When: inequalities `c ≥ 0` over the remaining symbols only, none
  /// of them constant (an empty list: a solution always exists).
  std::vector<AffineExpr> conditions;
};

/// Eliminates `eliminated` from the inequalities `system` (each `e ≥ 0`)
/// over the rationals, tightening each derived inequality to integers (its
/// coefficients divided by their gcd, the constant rounded down): Never is
/// exact, When may hold where only rational solutions exist. `floors` are
/// lower bounds known for remaining symbols (dims ≥ 1, `step` ≥ 0):
/// conditions that no such values satisfy turn the answer into Never.
/// Gives up (Unknown) past `limit` inequalities.
Feasibility eliminate(std::vector<AffineExpr> system,
                      const std::vector<std::string> &eliminated,
                      const std::map<std::string, int64_t> &floors,
                      size_t limit = 512);

} // namespace frontend
} // namespace energy

#endif // ENERGY_FRONTEND_FEASIBILITY_H
