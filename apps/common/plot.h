// Charts as PNG for the apps' reports, labels in the built-in 5x7 bitmap font: line charts over
// epochs (one panel per series, its own y range) and a probability over time with shaded intervals.
#pragma once
#include <string>
#include <vector>

namespace apps::plot {

struct Series {
  std::string name;
  std::vector<double> values;  // one per epoch
};

// A probability (in [0, 1]) over time, one value per `seconds_per_value`, with intervals (seconds)
// shaded and a horizontal threshold line (none when threshold <= 0).
struct Interval {
  double start = 0, end = 0;
};
void save_timeline_png(const std::string& path, const std::string& title, double seconds_per_value,
                       const std::vector<double>& values, const std::vector<Interval>& shaded, double threshold);

void save_epochs_png(const std::string& path, const std::string& title, const std::vector<Series>& series);

}  // namespace apps::plot
