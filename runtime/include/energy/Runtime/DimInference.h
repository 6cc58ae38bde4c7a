//===- DimInference.h - Resolving a model's dims ----------------*- C++ -*-===//
//
// The one rule by which dims get their values, shared by runtime sessions
// and the interpreter's runs: given values, else the size of a bound
// tensor's axis that is just that dim, else the default; derived dims from
// their expressions.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_RUNTIME_DIMINFERENCE_H
#define ENERGY_RUNTIME_DIMINFERENCE_H

#include "energy/Runtime/Manifest.h"
#include "energy/Runtime/Status.h"

#include <map>
#include <string>
#include <vector>

namespace energy {

/// Resolves the value of every dim of `manifest` (in its order) into
/// `values`. `given` names dims set by the caller (described as `givenBy`
/// in errors, "--dim"); `boundShapes` gives the shapes of tensors bound by
/// name. Errors name the dim and the two sources that disagree, a derived
/// dim that does not evaluate, or a dim left without a value.
Status
resolveDims(const Manifest &manifest,
            const std::map<std::string, int64_t> &given,
            const std::string &givenBy,
            const std::map<std::string, std::vector<int64_t>> &boundShapes,
            std::vector<int64_t> &values);

} // namespace energy

#endif // ENERGY_RUNTIME_DIMINFERENCE_H
