//===- ManifestIndexChecks.cpp - Index ranges checked at run time ---------===//
//
// The manifest's `index_checks`, read and checked (each condition uses
// declared dims or `step`), and their evaluation once the dims are known: a
// side whose conditions all hold means that some index of the read leaves
// its axis, and the runtime refuses to call a kernel.
//
//===----------------------------------------------------------------------===//

#include "ManifestFields.h"

#include <set>

using namespace energy;
using namespace energy::manifest;
using json::Value;
using Kind = json::Value::Kind;

static constexpr const char *kStep = "step";

bool ManifestIndexCheck::usesStep() const {
  for (const std::optional<std::vector<DimExpr>> *side : {&below, &above})
    if (*side)
      for (const DimExpr &condition : **side)
        for (const std::string &name : condition.dimNames())
          if (name == kStep)
            return true;
  return false;
}

Status ManifestIndexCheck::check(
    const std::function<std::optional<int64_t>(const std::string &)> &dims,
    std::optional<int64_t> step) const {
  std::function<std::optional<int64_t>(const std::string &)> lookup =
      [&](const std::string &name) {
        return name == kStep ? step : dims(name);
      };
  for (auto [side, what] :
       {std::pair{&below, std::string("be negative")},
        std::pair{&above, std::string("reach the size of its axis")}}) {
    if (!*side)
      continue;
    bool allHold = true;
    std::set<std::string> names;
    for (const DimExpr &condition : **side) {
      Expected<int64_t> value = condition.evaluate(lookup);
      if (!value)
        return value.status().withContext("the index check of " + read);
      allHold &= *value >= 0;
      for (const std::string &name : condition.dimNames())
        names.insert(name);
    }
    if (!allHold)
      continue;
    std::string values;
    for (const std::string &name : names)
      values += (values.empty() ? "" : ", ") + name + " = " +
                std::to_string(lookup(name).value_or(0));
    std::string axisSize;
    if (side == &above) {
      Expected<int64_t> value = size.evaluate(lookup);
      axisSize = ", " + size.text();
      if (value && size.text() != std::to_string(*value))
        axisSize += " = " + std::to_string(*value);
    }
    return Status::error((where.empty() ? "" : where + ": ") + "the read `" +
                         read + "` is out of range when " + values +
                         ": its index " + std::to_string(index) + " can " +
                         what + axisSize);
  }
  return Status::success();
}

Status energy::manifest::readIndexChecks(const Value &root,
                                         Manifest &manifest) {
  Expected<const Value *> list =
      field(root, "", "index_checks", Kind::Array, false, true);
  if (!list)
    return list.status();
  if (!*list)
    return Status::success();
  std::set<std::string> names = {kStep};
  for (const ManifestDim &dim : manifest.dims)
    names.insert(dim.name);
  for (size_t i = 0; i < (*list)->elements().size(); ++i) {
    const Value &entry = (*list)->elements()[i];
    std::string where = "index_checks[" + std::to_string(i) + "]";
    if (!entry.is(Kind::Object))
      return wrongKind(where, "an object", entry);
    ManifestIndexCheck check;
    if (Status status = readString(entry, where, "read", check.read); !status)
      return status;
    if (Status status = readString(entry, where, "where", check.where,
                                   /*optional=*/true);
        !status)
      return status;
    Expected<const Value *> index = field(entry, where, "index", Kind::Number);
    if (!index)
      return index.status();
    Expected<int64_t> position = readInteger(**index, path(where, "index"));
    if (!position)
      return position.status();
    check.index = *position;
    Expected<const Value *> size = field(entry, where, "size", Kind::Array);
    if (!size)
      return size.status();
    Expected<DimExpr> sizeExpr = readDimExpr(**size, path(where, "size"));
    if (!sizeExpr)
      return sizeExpr.status();
    check.size = std::move(*sizeExpr);
    std::vector<const DimExpr *> used = {&check.size};
    for (auto [key, side] :
         {std::pair{"below", &check.below}, std::pair{"above", &check.above}}) {
      Expected<const Value *> conditions =
          field(entry, where, key, Kind::Array, false, true);
      if (!conditions)
        return conditions.status();
      if (!*conditions)
        continue;
      side->emplace();
      for (const Value &condition : (*conditions)->elements()) {
        Expected<DimExpr> expr = readDimExpr(condition, path(where, key));
        if (!expr)
          return expr.status();
        (*side)->push_back(std::move(*expr));
      }
      if ((*side)->empty())
        return Status::error(path(where, key) + ": no conditions");
    }
    for (const std::optional<std::vector<DimExpr>> *side :
         {&check.below, &check.above})
      if (*side)
        for (const DimExpr &condition : **side)
          used.push_back(&condition);
    for (const DimExpr *expr : used)
      for (const std::string &name : expr->dimNames())
        if (!names.count(name))
          return Status::error(where + " uses dim " + name +
                               ", which is not declared");
    manifest.indexChecks.push_back(std::move(check));
  }
  return Status::success();
}
