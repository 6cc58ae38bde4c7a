//===- Charts.h - Line charts and heat maps drawn with cairo -----*- C++
//-*-===//
//
// The pictures the tools draw: stacked line charts (the energy per step,
// per term, and the gradient norm) and heat maps (softmax weights), as SVG
// or PNG by the file's extension, drawn with cairo. An SVG also carries, in a
// <metadata> element, where each panel's axes map data to the picture and
// the points of every line, so that tests can check the drawing.
//
//===----------------------------------------------------------------------===//

#ifndef ENERGY_TOOLS_CHARTS_CHARTS_H
#define ENERGY_TOOLS_CHARTS_CHARTS_H

#include <limits>
#include <string>
#include <vector>

namespace energy::charts {

/// One line of a chart.
struct Series {
  std::string name;
  std::vector<double> x, y;
};

/// One chart: lines over a shared x axis.
struct Panel {
  std::string title, xLabel, yLabel;
  /// A logarithmic y axis (non-positive values are left out).
  bool logY = false;
  /// x takes whole numbers only (steps): no ticks between them.
  bool integerX = false;
  std::vector<Series> series;
  /// The top of the y axis, when given (NaN: the data's maximum); lines
  /// above it leave the frame.
  double yMax = std::numeric_limits<double>::quiet_NaN();
};

/// A matrix of values in [0, 1] shown as colours: rows top to bottom.
struct HeatMap {
  std::string title, xLabel, yLabel;
  std::vector<std::string> rowLabels;
  int64_t rows = 0, columns = 0;
  /// Row-major, rows × columns.
  std::vector<double> values;
};

/// Draws `panels` stacked top to bottom into `path` (.svg or .png); false
/// with `error` set when the file cannot be written.
bool writeLineCharts(const std::vector<Panel> &panels, const std::string &path,
                     std::string &error);

/// Draws `map` into `path` (.svg or .png).
bool writeHeatMap(const HeatMap &map, const std::string &path,
                  std::string &error);

} // namespace energy::charts

#endif // ENERGY_TOOLS_CHARTS_CHARTS_H
