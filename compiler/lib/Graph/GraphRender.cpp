//===- GraphRender.cpp - Graphviz layout and rendering --------------------===//
//
// Renders DOT text with the Graphviz library (libgvc): the `dot` layout,
// then the requested output format, with Graphviz's messages captured
// instead of printed.
//
//===----------------------------------------------------------------------===//

#include "energy/Graph/ModelGraph.h"

#include <graphviz/gvc.h>

#include <mutex>

using namespace mlir;
using namespace mlir::energy;

namespace {
/// Graphviz reports through one global callback: the messages of the
/// rendering in progress.
std::mutex graphvizLock;
std::string *graphvizMessages = nullptr;

int collectMessage(char *message) {
  if (graphvizMessages)
    *graphvizMessages += message;
  return 0;
}
} // namespace

LogicalResult mlir::energy::renderGraph(StringRef dot, StringRef format,
                                        std::string &rendered,
                                        std::string &error) {
  std::lock_guard<std::mutex> guard(graphvizLock);
  std::string messages;
  graphvizMessages = &messages;
  agseterrf(collectMessage);
  auto fail = [&](const Twine &what) {
    error = what.str();
    if (!messages.empty())
      error += ": " + StringRef(messages).trim().str();
    graphvizMessages = nullptr;
    return failure();
  };
  GVC_t *context = gvContext();
  if (!context)
    return fail("cannot start Graphviz");
  std::string text = dot.str();
  Agraph_t *graph = agmemread(text.c_str());
  if (!graph) {
    gvFreeContext(context);
    return fail("Graphviz cannot read the graph");
  }
  LogicalResult result = success();
  if (gvLayout(context, graph, "dot") != 0) {
    result = fail("Graphviz cannot lay out the graph");
  } else {
    char *data = nullptr;
    unsigned int length = 0;
    std::string formatName = format.str();
    if (gvRenderData(context, graph, formatName.c_str(), &data, &length) != 0)
      result = fail("Graphviz cannot render the graph as '" + format +
                    "' (is its plugin installed?)");
    else
      rendered.assign(data, length);
    if (data)
      gvFreeRenderData(data);
    gvFreeLayout(context, graph);
  }
  agclose(graph);
  gvFreeContext(context);
  graphvizMessages = nullptr;
  return result;
}
