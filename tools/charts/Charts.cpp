//===- Charts.cpp - Line charts and heat maps drawn with cairo ------------===//
//
// Lays out panels with 1-2-5 ticks (powers of ten on a logarithmic axis),
// draws them with cairo on an SVG or image surface, and, for SVG, records
// each panel's data-to-picture mapping and lines in a <metadata> element.
//
//===----------------------------------------------------------------------===//

#include "Charts.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cairo-svg.h>
#include <cairo.h>

#include <algorithm>
#include <cmath>
#include <memory>

using namespace energy::charts;
namespace json = llvm::json;

namespace {

constexpr double kWidth = 820, kPanelHeight = 300;
constexpr double kLeft = 90, kRight = 190, kTop = 44, kBottom = 56;
/// PNGs are drawn at twice the size, for crisp lines.
constexpr double kPngScale = 2;

struct Color {
  double r, g, b;
};
/// Distinguishable line colours (the "tab10" palette).
constexpr Color kPalette[] = {{0.122, 0.467, 0.706}, {1.000, 0.498, 0.055},
                              {0.173, 0.627, 0.173}, {0.839, 0.153, 0.157},
                              {0.580, 0.404, 0.741}, {0.549, 0.337, 0.294},
                              {0.890, 0.467, 0.761}, {0.498, 0.498, 0.498},
                              {0.737, 0.741, 0.133}, {0.090, 0.745, 0.812}};

/// A drawing surface for `path`: SVG or PNG by its extension.
class Canvas {
public:
  Canvas(const std::string &path, double width, double height) : path(path) {
    std::string extension =
        llvm::StringRef(llvm::sys::path::extension(path)).lower();
    if (extension == ".svg") {
      svg = true;
      surface = cairo_svg_surface_create(path.c_str(), width, height);
    } else if (extension == ".png") {
      surface = cairo_image_surface_create(
          CAIRO_FORMAT_ARGB32, static_cast<int>(width * kPngScale),
          static_cast<int>(height * kPngScale));
    } else {
      error = path + ": a picture is written as .svg or .png";
      return;
    }
    if (cairo_surface_status(surface) != CAIRO_STATUS_SUCCESS) {
      error =
          path + ": " + cairo_status_to_string(cairo_surface_status(surface));
      return;
    }
    context = cairo_create(surface);
    if (!svg)
      cairo_scale(context, kPngScale, kPngScale);
    cairo_set_source_rgb(context, 1, 1, 1);
    cairo_paint(context);
    cairo_select_font_face(context, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL,
                           CAIRO_FONT_WEIGHT_NORMAL);
  }

  ~Canvas() {
    if (context)
      cairo_destroy(context);
    if (surface)
      cairo_surface_destroy(surface);
  }

  bool ok() const { return error.empty(); }

  /// Finishes the file; `metadata` (JSON) goes into an SVG's <metadata>.
  bool finish(const std::string &metadata, std::string &message) {
    if (!ok()) {
      message = error;
      return false;
    }
    cairo_status_t status = cairo_status(context);
    if (status == CAIRO_STATUS_SUCCESS && !svg)
      status = cairo_surface_write_to_png(surface, path.c_str());
    cairo_destroy(context);
    context = nullptr;
    cairo_surface_finish(surface);
    if (status == CAIRO_STATUS_SUCCESS)
      status = cairo_surface_status(surface);
    if (status != CAIRO_STATUS_SUCCESS) {
      message = path + ": " + cairo_status_to_string(status);
      return false;
    }
    return !svg || insertMetadata(metadata, message);
  }

  cairo_t *context = nullptr;

  void text(double x, double y, llvm::StringRef line, double size,
            double alignX = 0, bool vertical = false) {
    std::string copy = line.str();
    cairo_set_font_size(context, size);
    cairo_text_extents_t extents;
    cairo_text_extents(context, copy.c_str(), &extents);
    cairo_save(context);
    cairo_translate(context, x, y);
    if (vertical)
      cairo_rotate(context, -M_PI / 2);
    cairo_move_to(context, -alignX * extents.x_advance, 0);
    cairo_show_text(context, copy.c_str());
    cairo_restore(context);
  }

private:
  /// Puts `<metadata id="energy-chart">metadata</metadata>` after the
  /// opening <svg> tag.
  bool insertMetadata(const std::string &metadata, std::string &message) {
    llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
        llvm::MemoryBuffer::getFile(path);
    if (!file) {
      message = path + ": " + file.getError().message();
      return false;
    }
    std::string contents = (*file)->getBuffer().str();
    size_t open = contents.find("<svg");
    size_t end = open == std::string::npos ? open : contents.find('>', open);
    if (end == std::string::npos) {
      message = path + ": cairo wrote no <svg> element";
      return false;
    }
    std::string escaped;
    for (char c : metadata)
      escaped += c == '<' ? "&lt;" : c == '&' ? "&amp;" : std::string(1, c);
    contents.insert(end + 1, "\n<metadata id=\"energy-chart\">" + escaped +
                                 "</metadata>");
    std::error_code code;
    llvm::raw_fd_ostream out(path, code);
    if (code) {
      message = path + ": " + code.message();
      return false;
    }
    out << contents;
    return true;
  }

  std::string path, error;
  bool svg = false;
  cairo_surface_t *surface = nullptr;
};

/// A short number: 3 significant digits, exponent when large or small.
std::string numberText(double value) {
  if (value == 0)
    return "0";
  return llvm::formatv("{0}", llvm::format("%.3g", value)).str();
}

/// The labels of ticks `step` apart: enough significant digits that
/// neighbours differ (1.695, 1.7, 1.705 rather than 1.69, 1.7, 1.7), and at
/// least the digits of the whole part.
std::string tickText(double value, double step) {
  if (std::abs(value) < step * 1e-9)
    return "0";
  int digits = static_cast<int>(std::ceil(
                   std::log10(std::max(std::abs(value), step) / step) + 1e-9)) +
               1;
  // Whole numbers in full (150, not 1.5e+02), up to a million.
  if (std::abs(value) >= 1 && std::abs(value) < 1e6)
    digits = std::max(
        digits, static_cast<int>(std::floor(std::log10(std::abs(value)))) + 1);
  return llvm::formatv("{0}",
                       llvm::format("%.*g", std::clamp(digits, 1, 12), value))
      .str();
}

/// Tick positions covering [low, high]: multiples of 1, 2 or 5 × 10^k, about
/// six of them, and no closer than `minimumStep` (1 on an axis of steps).
std::vector<double> linearTicks(double low, double high,
                                double minimumStep = 0) {
  double span = high - low;
  double raw = std::max(span / 6, minimumStep);
  double power = std::pow(10, std::floor(std::log10(raw)));
  double step = power;
  for (double factor : {1.0, 2.0, 5.0, 10.0})
    if (factor * power >= raw) {
      step = factor * power;
      break;
    }
  std::vector<double> ticks;
  for (double tick = std::ceil(low / step) * step; tick <= high + step * 1e-9;
       tick += step)
    ticks.push_back(std::abs(tick) < step * 1e-9 ? 0 : tick);
  return ticks;
}

/// An axis: data range and how it maps onto the picture.
struct Axis {
  double low = 0, high = 1;
  bool log = false;
  double value(double data) const { return log ? std::log10(data) : data; }
  double fraction(double data) const {
    return (value(data) - low) / (high - low);
  }
};

/// Extends a range that is a point, so that the axis has a length.
void widen(double &low, double &high) {
  if (high > low)
    return;
  double pad = low == 0 ? 1 : std::abs(low) * 0.1;
  low -= pad;
  high += pad;
}

bool usable(double y, bool log) { return std::isfinite(y) && (!log || y > 0); }

json::Object drawPanel(Canvas &canvas, const Panel &panel, double top) {
  cairo_t *cr = canvas.context;
  double left = kLeft, width = kWidth - kLeft - kRight;
  double plotTop = top + kTop, height = kPanelHeight - kTop - kBottom;
  Axis x, y;
  y.log = panel.logY;
  bool any = false;
  for (const Series &series : panel.series)
    for (size_t i = 0; i < series.x.size(); ++i) {
      if (!usable(series.y[i], y.log))
        continue;
      double yValue = y.value(series.y[i]);
      if (!any) {
        x.low = x.high = series.x[i];
        y.low = y.high = yValue;
        any = true;
      }
      x.low = std::min(x.low, series.x[i]);
      x.high = std::max(x.high, series.x[i]);
      y.low = std::min(y.low, yValue);
      y.high = std::max(y.high, yValue);
    }
  bool clipped = usable(panel.yMax, y.log) && y.value(panel.yMax) < y.high;
  if (clipped)
    y.high = std::max(y.value(panel.yMax), y.low);
  widen(x.low, x.high);
  widen(y.low, y.high);
  double yPad = (y.high - y.low) * 0.05;
  y.low -= yPad;
  if (!clipped)
    y.high += yPad;
  auto toX = [&](double data) { return left + x.fraction(data) * width; };
  auto toY = [&](double data) {
    return plotTop + (1 - y.fraction(data)) * height;
  };

  // Title, frame, grid and ticks.
  cairo_set_source_rgb(cr, 0, 0, 0);
  canvas.text(left, top + 24, panel.title, 14);
  cairo_set_line_width(cr, 1);
  std::vector<double> xTicks =
      linearTicks(x.low, x.high, panel.integerX ? 1.0 : 0.0);
  double xStep = xTicks.size() > 1 ? xTicks[1] - xTicks[0] : 1;
  for (double tick : xTicks) {
    double px = left + (tick - x.low) / (x.high - x.low) * width;
    cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
    cairo_move_to(cr, px, plotTop);
    cairo_line_to(cr, px, plotTop + height);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    canvas.text(px, plotTop + height + 16, tickText(tick, xStep), 11, 0.5);
  }
  std::vector<double> yTicks = linearTicks(y.low, y.high);
  if (y.log) {
    yTicks.clear();
    for (double power = std::ceil(y.low); power <= y.high; power += 1)
      yTicks.push_back(power);
    if (yTicks.size() < 2)
      yTicks = linearTicks(y.low, y.high);
  }
  double yStep = yTicks.size() > 1 ? yTicks[1] - yTicks[0] : 1;
  for (double tick : yTicks) {
    double py = plotTop + (1 - (tick - y.low) / (y.high - y.low)) * height;
    cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
    cairo_move_to(cr, left, py);
    cairo_line_to(cr, left + width, py);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    canvas.text(left - 6, py + 4,
                y.log ? numberText(std::pow(10, tick)) : tickText(tick, yStep),
                11, 1);
  }
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_rectangle(cr, left, plotTop, width, height);
  cairo_stroke(cr);
  canvas.text(left + width / 2, plotTop + height + 40, panel.xLabel, 12, 0.5);
  canvas.text(18, plotTop + height / 2,
              panel.yLabel + (y.log ? " (log scale)" : ""), 12, 0.5, true);

  // The lines, each with a dot per point, and the legend.
  json::Array lines;
  for (auto [number, series] : llvm::enumerate(panel.series)) {
    cairo_save(cr);
    cairo_rectangle(cr, left, plotTop, width, height);
    cairo_clip(cr);
    const Color &color = kPalette[number % std::size(kPalette)];
    cairo_set_source_rgb(cr, color.r, color.g, color.b);
    cairo_set_line_width(cr, 2);
    bool started = false;
    json::Array points;
    for (size_t i = 0; i < series.x.size(); ++i) {
      if (!usable(series.y[i], y.log)) {
        started = false;
        continue;
      }
      double px = toX(series.x[i]), py = toY(series.y[i]);
      started ? cairo_line_to(cr, px, py) : cairo_move_to(cr, px, py);
      started = true;
      points.push_back(json::Array{series.x[i], series.y[i]});
    }
    cairo_stroke(cr);
    if (series.x.size() <= 60)
      for (size_t i = 0; i < series.x.size(); ++i)
        if (usable(series.y[i], y.log)) {
          cairo_arc(cr, toX(series.x[i]), toY(series.y[i]), 2.5, 0, 2 * M_PI);
          cairo_fill(cr);
        }
    cairo_restore(cr);
    cairo_set_source_rgb(cr, color.r, color.g, color.b);
    cairo_set_line_width(cr, 2);
    double legendY = plotTop + 14 + 20 * number;
    cairo_move_to(cr, left + width + 14, legendY - 4);
    cairo_line_to(cr, left + width + 40, legendY - 4);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    canvas.text(left + width + 46, legendY, series.name, 11);
    lines.push_back(
        json::Object{{"name", series.name},
                     {"rgb", json::Array{color.r, color.g, color.b}},
                     {"points", std::move(points)}});
  }
  return json::Object{{"title", panel.title},
                      {"frame", json::Array{left, plotTop, width, height}},
                      {"x_range", json::Array{x.low, x.high}},
                      {"y_range", json::Array{y.low, y.high}},
                      {"log_y", y.log},
                      {"lines", std::move(lines)}};
}

/// A colour for v in [0, 1]: dark blue through green to yellow.
Color heatColor(double v) {
  constexpr Color stops[] = {{0.267, 0.005, 0.329},
                             {0.231, 0.322, 0.545},
                             {0.129, 0.569, 0.549},
                             {0.369, 0.788, 0.384},
                             {0.993, 0.906, 0.144}};
  v = std::clamp(v, 0.0, 1.0) * (std::size(stops) - 1);
  size_t low = std::min<size_t>(static_cast<size_t>(v), std::size(stops) - 2);
  double t = v - low;
  const Color &a = stops[low], &b = stops[low + 1];
  return {a.r + t * (b.r - a.r), a.g + t * (b.g - a.g), a.b + t * (b.b - a.b)};
}

} // namespace

bool energy::charts::writeLineCharts(const std::vector<Panel> &panels,
                                     const std::string &path,
                                     std::string &error) {
  Canvas canvas(path, kWidth, kPanelHeight * panels.size());
  json::Array panelData;
  if (canvas.ok())
    for (auto [number, panel] : llvm::enumerate(panels))
      panelData.push_back(drawPanel(canvas, panel, kPanelHeight * number));
  std::string metadata = llvm::formatv(
      "{0}", json::Value(json::Object{{"panels", std::move(panelData)}}));
  return canvas.finish(metadata, error);
}

bool energy::charts::writeHeatMap(const HeatMap &map, const std::string &path,
                                  std::string &error) {
  double cell =
      std::clamp(600.0 / std::max<int64_t>(map.columns, 1), 2.0, 40.0);
  double rowHeight =
      std::clamp(300.0 / std::max<int64_t>(map.rows, 1), 2.0, 40.0);
  double width = kLeft + cell * map.columns + 120;
  double height = kTop + rowHeight * map.rows + kBottom + 10;
  // Wide enough for the title (about 7.5 units a character at size 14).
  double titleWidth = kLeft + 7.5 * map.title.size() + 20;
  Canvas canvas(path, std::max({width, 420.0, titleWidth}), height);
  double largest = 0;
  for (double value : map.values)
    largest = std::max(largest, value);
  if (canvas.ok()) {
    cairo_t *cr = canvas.context;
    cairo_set_source_rgb(cr, 0, 0, 0);
    canvas.text(kLeft, 26, map.title, 14);
    // Cells edge to edge, without antialiased seams between them.
    cairo_set_antialias(cr, CAIRO_ANTIALIAS_NONE);
    for (int64_t row = 0; row < map.rows; ++row)
      for (int64_t column = 0; column < map.columns; ++column) {
        double value = map.values[row * map.columns + column];
        Color color = heatColor(largest > 0 ? value / largest : 0);
        cairo_set_source_rgb(cr, color.r, color.g, color.b);
        cairo_rectangle(cr, kLeft + column * cell, kTop + row * rowHeight, cell,
                        rowHeight);
        cairo_fill(cr);
      }
    cairo_set_antialias(cr, CAIRO_ANTIALIAS_DEFAULT);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_set_line_width(cr, 1);
    cairo_rectangle(cr, kLeft, kTop, cell * map.columns, rowHeight * map.rows);
    cairo_stroke(cr);
    // Row labels where they fit; column ticks on 1-2-5 steps.
    if (rowHeight >= 10)
      for (int64_t row = 0; row < map.rows; ++row)
        canvas.text(kLeft - 6, kTop + (row + 0.5) * rowHeight + 4,
                    row < static_cast<int64_t>(map.rowLabels.size())
                        ? map.rowLabels[row]
                        : std::to_string(row),
                    11, 1);
    for (double tick :
         linearTicks(0, std::max<double>(map.columns - 1, 1), 1.0))
      if (tick <= map.columns - 1)
        canvas.text(kLeft + (tick + 0.5) * cell,
                    kTop + rowHeight * map.rows + 16, numberText(tick), 11,
                    0.5);
    canvas.text(kLeft + cell * map.columns / 2,
                kTop + rowHeight * map.rows + 40, map.xLabel, 12, 0.5);
    canvas.text(18, kTop + rowHeight * map.rows / 2, map.yLabel, 12, 0.5, true);
    // The colour scale, 0 to the largest value.
    double barX = kLeft + cell * map.columns + 30,
           barHeight = rowHeight * map.rows;
    for (int i = 0; i < 100; ++i) {
      Color color = heatColor(1 - i / 99.0);
      cairo_set_source_rgb(cr, color.r, color.g, color.b);
      cairo_rectangle(cr, barX, kTop + barHeight * i / 100, 14,
                      barHeight / 100 + 0.5);
      cairo_fill(cr);
    }
    cairo_set_source_rgb(cr, 0, 0, 0);
    canvas.text(barX + 18, kTop + 10, numberText(largest), 11);
    canvas.text(barX + 18, kTop + barHeight, "0", 11);
  }
  json::Array values;
  for (double value : map.values)
    values.push_back(value);
  std::string metadata = llvm::formatv(
      "{0}", json::Value(json::Object{
                 {"rows", map.rows},
                 {"columns", map.columns},
                 {"cells", json::Array{kLeft, kTop, cell, rowHeight}},
                 {"largest", largest},
                 {"values", std::move(values)}}));
  return canvas.finish(metadata, error);
}
