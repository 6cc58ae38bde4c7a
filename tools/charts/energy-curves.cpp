//===- energy-curves.cpp - Draws columns of CSV files as line charts ------===//
//
// energy-curves OUT.svg|png --x COLUMN --y COLUMN [--title T] [--log-y]
//               [--y-max Y]
//   LABEL=FILE.csv ...
// draws one line per file (column y against column x; rows where either is
// empty are left out) in one chart: loss curves of several trainings side
// by side, from energy-train's --log files or any CSV with a header.
//
//===----------------------------------------------------------------------===//

#include "Charts.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace {

int fail(const std::string &message) {
  std::fprintf(stderr, "energy-curves: error: %s\n", message.c_str());
  return 1;
}

std::vector<std::string> split(const std::string &line) {
  std::vector<std::string> fields;
  std::stringstream stream(line);
  std::string field;
  while (std::getline(stream, field, ','))
    fields.push_back(field);
  if (!line.empty() && line.back() == ',')
    fields.emplace_back();
  return fields;
}

/// Column `x` against column `y` of `path`; an error message, or "".
std::string readSeries(const std::string &path, const std::string &x,
                       const std::string &y, energy::charts::Series &series) {
  std::ifstream file(path);
  if (!file)
    return "cannot read " + path;
  std::string line;
  if (!std::getline(file, line))
    return path + " is empty";
  std::vector<std::string> header = split(line);
  auto column = [&](const std::string &name) -> long {
    for (size_t i = 0; i < header.size(); ++i)
      if (header[i] == name)
        return static_cast<long>(i);
    return -1;
  };
  long xi = column(x), yi = column(y);
  if (xi < 0 || yi < 0)
    return path + " has no column " + (xi < 0 ? x : y);
  while (std::getline(file, line)) {
    std::vector<std::string> fields = split(line);
    if (static_cast<long>(fields.size()) <= std::max(xi, yi) ||
        fields[xi].empty() || fields[yi].empty())
      continue;
    char *end = nullptr;
    double a = std::strtod(fields[xi].c_str(), &end);
    if (*end)
      return path + ": not a number: " + fields[xi];
    double b = std::strtod(fields[yi].c_str(), &end);
    if (*end)
      return path + ": not a number: " + fields[yi];
    series.x.push_back(a);
    series.y.push_back(b);
  }
  if (series.x.empty())
    return path + " has no rows with both " + x + " and " + y;
  return "";
}

} // namespace

int main(int argc, char **argv) {
  std::string out, x, y, title;
  bool logY = false, help = false;
  double yMax = std::numeric_limits<double>::quiet_NaN();
  std::vector<std::pair<std::string, std::string>> files;
  for (int i = 1; i < argc; ++i) {
    std::string argument = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (argument == "--x")
      x = value();
    else if (argument == "--y")
      y = value();
    else if (argument == "--title")
      title = value();
    else if (argument == "--log-y")
      logY = true;
    else if (argument == "--y-max") {
      std::string text = value();
      char *end = nullptr;
      yMax = std::strtod(text.c_str(), &end);
      if (text.empty() || *end != 0 || !std::isfinite(yMax))
        return fail("--y-max needs a number, got '" + text + "'");
    } else if (argument == "--help" || argument == "-h")
      help = true;
    else if (argument.rfind("--", 0) == 0)
      return fail("unknown option " + argument);
    else if (out.empty())
      out = argument;
    else if (size_t equals = argument.find('='); equals != std::string::npos)
      files.emplace_back(argument.substr(0, equals),
                         argument.substr(equals + 1));
    else
      return fail("expected LABEL=FILE.csv, got " + argument);
  }
  const char *usage = "usage: energy-curves OUT.svg|png --x COLUMN --y COLUMN "
                      "[--title T] [--log-y] [--y-max Y] LABEL=FILE.csv ...";
  if (help) {
    std::printf("%s\n", usage);
    return 0;
  }
  if (out.empty() || x.empty() || y.empty() || files.empty())
    return fail(usage);
  energy::charts::Panel panel;
  panel.title = title;
  panel.xLabel = x;
  panel.yLabel = y;
  panel.logY = logY;
  panel.yMax = yMax;
  for (const auto &[label, path] : files) {
    energy::charts::Series series;
    series.name = label;
    if (std::string error = readSeries(path, x, y, series); !error.empty())
      return fail(error);
    panel.series.push_back(std::move(series));
  }
  std::string error;
  if (!energy::charts::writeLineCharts({panel}, out, error))
    return fail(error);
  return 0;
}
