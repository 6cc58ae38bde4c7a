//===- AttentionPlot.cpp - energy-run --plot-attention
//----------------------===//
//
// Parses TERM:CHILD, adds the weights output to the model, binds the
// session's dims and tensors to an interpreter, evaluates the output and
// draws it (Charts.h).
//
//===----------------------------------------------------------------------===//

#include "AttentionPlot.h"
#include "Charts.h"
#include "InterpretedRun.h"

#include "energy/Transforms/AttentionWeights.h"

#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace mlir::energy;

LogicalResult
tools::plotAttention(ModelOp model, ::energy::Session &session, StringRef spec,
                     const std::string &path,
                     ArrayRef<std::pair<std::string, double>> consts,
                     std::string &error) {
  auto fail = [&](const Twine &message) {
    error = message.str();
    return failure();
  };
  auto [term, children] = spec.split(':');
  std::map<std::string, int64_t> fixed;
  SmallVector<StringRef> settings;
  children.split(settings, ',', -1, /*KeepEmpty=*/false);
  for (StringRef setting : settings) {
    auto [name, text] = setting.split('=');
    int64_t position;
    if (name.trim().empty() || text.trim().getAsInteger(10, position))
      return fail("--plot-attention " + spec +
                  ": expected TERM or "
                  "TERM:INDEX=POSITION,... (e.g. attn:i=3), found '" +
                  setting + "'");
    fixed[name.trim().str()] = position;
  }
  FailureOr<AttentionWeightsOutput> weights =
      addAttentionWeights(model, term, fixed);
  if (failed(weights))
    return failure();

  // The session's values, as the interpreter's bindings.
  ::energy::Expected<std::map<std::string, int64_t>> dims = session.dims();
  if (!dims)
    return fail(dims.message());
  std::map<std::string, ArrayValue> given;
  for (TensorOp tensor : model.getBody().front().getOps<TensorOp>()) {
    ::energy::Expected<::energy::Tensor> value =
        session.get(tensor.getSymName().str());
    if (!value)
      return fail(value.message());
    given[tensor.getSymName().str()] = fromRuntime(*value);
  }
  InterpretedRun run(model);
  // Derived dims follow from the others.
  SmallVector<std::pair<std::string, int64_t>> dimList;
  for (DimOp dim : model.getBody().front().getOps<DimOp>())
    if (!dim.getDerived() && dims->count(dim.getSymName().str()))
      dimList.push_back(
          {dim.getSymName().str(), dims->at(dim.getSymName().str())});
  if (failed(run.bind(dimList, consts, given, std::nullopt)))
    return failure();
  FailureOr<Interpreter> interpreter = run.interpreter();
  if (failed(interpreter))
    return failure();
  FailureOr<ArrayValue> values = interpreter->evaluateOutput(weights->output);
  if (failed(values))
    return failure();

  // Rows: the free children, row-major; columns: the parent.
  ::energy::charts::HeatMap map;
  int64_t columns = values->shape.back();
  map.columns = columns;
  map.rows = columns ? values->size() / columns : 0;
  map.values.assign(values->data.begin(), values->data.end());
  ArrayRef<int64_t> rowShape = ArrayRef<int64_t>(values->shape).drop_back();
  ArrayRef<std::string> rowAxes =
      ArrayRef<std::string>(weights->axisNames).drop_back();
  for (int64_t row = 0; row < map.rows; ++row) {
    SmallVector<std::string> parts;
    int64_t rest = row;
    for (int64_t axis = rowShape.size() - 1; axis >= 0; --axis) {
      parts.insert(parts.begin(),
                   rowAxes[axis] + "=" + std::to_string(rest % rowShape[axis]));
      rest /= rowShape[axis];
    }
    map.rowLabels.push_back(parts.empty() ? std::string("weights")
                                          : llvm::join(parts, ", "));
  }
  SmallVector<std::string> held;
  for (const auto &[name, position] : fixed)
    held.push_back(name + " = " + std::to_string(position));
  map.title = "Softmax weights of energy " + term.str() +
              (held.empty() ? "" : " at " + llvm::join(held, ", ")) +
              " after step " + std::to_string(session.stepCount());
  map.xLabel = "parent " + weights->axisNames.back();
  map.yLabel =
      rowAxes.empty() ? std::string("") : "child " + llvm::join(rowAxes, ", ");
  if (!::energy::charts::writeHeatMap(map, path, error))
    return failure();
  return success();
}
