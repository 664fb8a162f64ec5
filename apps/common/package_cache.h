// Models as apps use them: fetched into the model cache by scripts/fetch-models.sh, converted into
// an .ingot package on first use (ingot::convert) and loaded from the package afterwards, so a
// launch parses no ONNX and runs no graph passes.
//
// A package is named <model>.<device>.<key>.ingot in the package folder; the key hashes the model's
// path, size and modification time, the device and the tuning shapes, so a changed model is
// converted again. A package this Ingot refuses (another format version, a damaged file) is
// converted again too.
#pragma once
#include <ingot/convert.h>
#include <ingot/session.h>

#include <functional>
#include <string>
#include <vector>

namespace apps {

// $INGOT_MODEL_CACHE, else ~/.cache/ingot/models (scripts/fetch-models.sh's default).
std::string model_cache_dir();
// $XDG_CACHE_HOME/ingot/packages, else ~/.cache/ingot/packages.
std::string package_cache_dir();

// Throws std::runtime_error naming the file when `path` is missing, with `hint` (what fetches it).
void require_file(const std::string& path, const std::string& hint);

struct CachedSession {
  ingot::Session session;
  std::string package;
  bool converted = false;  // this call converted the model
  double load_ms = 0;      // converting (when it did) and loading
};

// The session of `model_path`'s package in `package_dir` (converted first when missing or stale).
// On a GPU, `tuning_shapes` are the input shapes the app will run at (ConvertSettings::tuning_shapes):
// their algorithm choices are measured once, at conversion, instead of at every launch.
// `log` hears one line per conversion.
CachedSession load_cached(const std::string& model_path, const std::string& package_dir,
                          const ingot::SessionOptions& options, const std::function<void(const std::string&)>& log,
                          const std::vector<ingot::InputShapes>& tuning_shapes = {});

}  // namespace apps
