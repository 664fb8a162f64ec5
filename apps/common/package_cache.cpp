#include "package_cache.h"

#include <ingot/convert.h>
#include <ingot/error.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <utility>

namespace apps {
namespace fs = std::filesystem;

namespace {

std::string home_cache() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg && *xdg) return xdg;
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : ".") + "/.cache";
}

// FNV-1a, 64 bits: the key only tells models apart, it protects nothing.
uint64_t fnv1a(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string device_name(ingot::Device device) {
  std::string name = device.str();
  for (char& c : name)
    if (c == ':') c = '-';
  return name;
}

}  // namespace

std::string model_cache_dir() {
  const char* dir = std::getenv("INGOT_MODEL_CACHE");
  return dir && *dir ? dir : home_cache() + "/ingot/models";
}

std::string package_cache_dir() { return home_cache() + "/ingot/packages"; }

void require_file(const std::string& path, const std::string& hint) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) throw std::runtime_error("'" + path + "' not found (" + hint + ")");
}

CachedSession load_cached(const std::string& model_path, const std::string& package_dir,
                          const ingot::SessionOptions& options, const std::function<void(const std::string&)>& log,
                          const std::vector<ingot::InputShapes>& tuning_shapes) {
  const auto start = std::chrono::steady_clock::now();
  const fs::path model = fs::absolute(model_path);
  std::error_code ec;
  const auto size = fs::file_size(model, ec);
  if (ec) throw std::runtime_error("cannot read model '" + model_path + "': " + ec.message());
  const auto mtime = fs::last_write_time(model, ec).time_since_epoch().count();
  const std::string device = device_name(options.device);
  const bool gpu = options.device.type != ingot::DeviceType::CPU;
  std::string identity = model.string() + "|" + std::to_string(size) + "|" + std::to_string(mtime) + "|" + device;
  if (gpu) {
    for (const ingot::InputShapes& set : tuning_shapes) {
      identity += "|";
      for (const auto& [name, dims] : set) identity += name + "=" + ingot::shape_str(dims);
    }
  }
  char key[17];
  std::snprintf(key, sizeof key, "%016llx", static_cast<unsigned long long>(fnv1a(identity)));
  const fs::path package = fs::path(package_dir) / (model.stem().string() + "." + device + "." + key + ".ingot");

  bool converted = false;
  auto convert = [&] {
    fs::create_directories(package_dir, ec);
    if (ec) throw std::runtime_error("cannot create package folder '" + package_dir + "': " + ec.message());
    const auto t0 = std::chrono::steady_clock::now();
    ingot::ConvertSettings settings;
    settings.device = options.device;
    settings.precision = options.precision;
    if (gpu) settings.tuning_shapes = tuning_shapes;
    ingot::convert(model.string(), package.string(), settings);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (log) log("converted " + model.filename().string() + " into " + package.string() + " (" + std::to_string(int(ms)) + " ms)");
    converted = true;
  };
  if (!fs::exists(package, ec)) convert();
  auto load = [&] {
    try {
      return ingot::Session::load(package.string(), options);
    } catch (const ingot::Error& e) {
      if (converted) throw;
      if (log) log("package " + package.string() + " refused (" + e.what() + "), converting again");
      convert();
      return ingot::Session::load(package.string(), options);
    }
  };
  ingot::Session session = load();
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return CachedSession{std::move(session), package.string(), converted, ms};
}

}  // namespace apps
