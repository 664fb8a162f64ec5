// Line charts as PNG for the apps' reports: one panel per series (its own y range), the x axis
// counting epochs (or steps) from 1, labels in a built-in 5x7 bitmap font.
#pragma once
#include <string>
#include <vector>

namespace apps::plot {

struct Series {
  std::string name;
  std::vector<double> values;  // one per epoch
};

void save_epochs_png(const std::string& path, const std::string& title, const std::vector<Series>& series);

}  // namespace apps::plot
