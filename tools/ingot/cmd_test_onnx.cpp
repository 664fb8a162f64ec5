// Runs ONNX backend test cases: CASE/model.onnx with CASE/test_data_set_*/{input,output}_N.pb.
#include <unistd.h>

#include <csignal>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>

#include "commands.h"
#include "compiler/compile.h"
#include "core/dispatch.h"
#include "onnx/onnx_import.h"
#include "passes/pass.h"
#include "core/strings.h"
#include "runtime/executor.h"

namespace ingot::cli {
namespace {

namespace fs = std::filesystem;

constexpr double kRtol = 1e-3, kAtol = 1e-7;  // ONNX backend test defaults

// Returns "" when equal, else the reason.
std::string compare_tensors(const Tensor& got, const Tensor& want) {
  if (got.dtype() != want.dtype()) {
    return fmt::format("dtype {} vs expected {}", dtype_name(got.dtype()), dtype_name(want.dtype()));
  }
  if (got.shape() != want.shape())
    return fmt::format("shape {} vs expected {}", shape_str(got.shape()), shape_str(want.shape()));
  std::string reason;
  if (got.dtype() == DType::String) {
    auto g = got.span<std::string>(), w = want.span<std::string>();
    for (size_t i = 0; i < g.size(); ++i) {
      if (g[i] != w[i]) return fmt::format("element {}: \"{}\" vs expected \"{}\"", i, g[i], w[i]);
    }
    return "";
  }
  dispatch_numeric_bool(got.dtype(), [&]<class T>() {
    const T* g = got.data<T>();
    const T* w = want.data<T>();
    int64_t bad = 0, first = -1;
    double worst = 0;
    for (int64_t i = 0; i < got.numel(); ++i) {
      bool ok;
      if constexpr (std::is_integral_v<T>) {
        ok = g[i] == w[i];
      } else {
        double a = double(g[i]), b = double(w[i]);
        if (std::isnan(a) || std::isnan(b))
          ok = std::isnan(a) && std::isnan(b);
        else if (std::isinf(a) || std::isinf(b))
          ok = a == b;
        else
          ok = std::fabs(a - b) <= kAtol + kRtol * std::fabs(b);
        if (!ok && !std::isnan(a - b)) worst = std::max(worst, std::fabs(a - b));
      }
      if (!ok) {
        if (first < 0) first = i;
        ++bad;
      }
    }
    if (bad) {
      reason = fmt::format("{} of {} elements differ; first at {}: {} vs expected {}", bad, got.numel(), first,
                           double(g[first]), double(w[first]));
      if (worst > 0) reason += fmt::format(" (max abs diff {:.3g})", worst);
    }
  });
  return reason;
}

std::string compare_values(const Value& got, const Value& want) {
  if (got.kind != want.kind) return fmt::format("{} vs expected {}", got.describe(), want.describe());
  if (got.kind == Value::Kind::Tensor) return compare_tensors(got.tensor, want.tensor);
  if (got.kind == Value::Kind::Sequence) {
    if (got.sequence.size() != want.sequence.size())
      return fmt::format("{} vs expected {}", got.describe(), want.describe());
    for (size_t i = 0; i < got.sequence.size(); ++i) {
      std::string r = compare_tensors(got.sequence[i], want.sequence[i]);
      if (!r.empty()) return fmt::format("sequence element {}: {}", i, r);
    }
  }
  return "";
}

std::vector<fs::path> sorted_entries(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().rfind(prefix, 0) == 0) out.push_back(e.path());
  }
  // input_10.pb sorts after input_9.pb
  std::sort(out.begin(), out.end(), [](const fs::path& a, const fs::path& b) {
    auto num = [](const fs::path& p) {
      std::string s = p.stem().string();
      auto us = s.find_last_of('_');
      return us == std::string::npos ? 0L : std::strtol(s.c_str() + us + 1, nullptr, 10);
    };
    return num(a) < num(b);
  });
  return out;
}

// A kernel bug that crashes the process must not hide which case it was: a fatal signal prints the
// case being run and exits with kCrashExit, so a driver can resume with --start-after.
constexpr int kCrashExit = 3;
char g_current_case[512];

extern "C" void on_fatal_signal(int sig) {
  const char prefix[] = "CRASH ";
  (void)!write(1, prefix, sizeof(prefix) - 1);
  (void)!write(1, g_current_case, strnlen(g_current_case, sizeof(g_current_case)));
  (void)!write(1, "\n", 1);
  _exit(kCrashExit);
}

Value to_host(const Value& v) {
  Value out = v;
  if (out.kind == Value::Kind::Tensor) out.tensor = out.tensor.to(Device::cpu());
  for (Tensor& t : out.sequence) t = t.to(Device::cpu());
  return out;
}

// Runs one case; returns "" on success or the failure reason. Ops that fell back to the CPU are
// counted into `fallback_ops`.
std::string run_case(const fs::path& dir, Device device, bool optimize, std::map<std::string, int>& fallback_ops) {
  auto model = import_onnx((dir / "model.onnx").string());
  compile(*model, {.optimize = optimize, .target = device.type});
  Executor executor(model, device);
  for (const auto& f : executor.executable().fallbacks()) ++fallback_ops[f.op];
  if (!executor.executable().fallbacks().empty()) ++fallback_ops[""];  // cases with at least one fallback
  auto sets = sorted_entries(dir, "test_data_set_");
  if (sets.empty()) return "no test_data_set_* folders";
  for (const auto& set : sets) {
    const Graph& g = *model->graph;
    auto input_files = sorted_entries(set, "input_");
    auto output_files = sorted_entries(set, "output_");
    if (input_files.size() > g.inputs.size()) {
      return fmt::format("{}: {} input files for {} graph inputs", set.filename().string(), input_files.size(),
                         g.inputs.size());
    }
    std::vector<Value> inputs;
    for (size_t i = 0; i < input_files.size(); ++i)
      inputs.push_back(load_value_pb(input_files[i].string(), g.inputs[i].type));
    // Omitted trailing optional graph inputs (e.g. initializer-less optional values) stay empty.
    while (inputs.size() < g.inputs.size()) inputs.emplace_back();
    std::vector<Value> outputs = executor.run(inputs).outputs;
    if (output_files.size() != outputs.size()) {
      return fmt::format("{} outputs, expected {}", outputs.size(), output_files.size());
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      Value want = load_value_pb(output_files[i].string(), g.outputs[i].type);
      std::string reason = compare_values(to_host(outputs[i]), want);
      if (!reason.empty()) return fmt::format("output {} ('{}'): {}", i, g.outputs[i].name, reason);
    }
  }
  return "";
}

std::map<std::string, std::string> read_expected_failures(const std::string& path) {
  std::map<std::string, std::string> out;
  std::ifstream in(path);
  if (!in) fail("cannot open expected-failures file '{}'", path);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    auto start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#') continue;
    auto end = line.find_first_of(" \t", start);
    std::string name = line.substr(start, end - start);
    std::string reason = end == std::string::npos ? "" : line.substr(line.find_first_not_of(" \t", end));
    if (reason.empty()) fail("{}:{}: expected failure '{}' has no reason", path, number, name);
    out[name] = reason;
  }
  return out;
}

}  // namespace

Runner add_test_onnx_command(CLI::App& app) {
  struct Options {
    std::vector<std::string> dirs;
    std::string device = "cpu", filter, expected_failures, json, start_after;
    bool verbose = false, optimize = false;
  };
  auto o = std::make_shared<Options>();
  app.add_option("DIR", o->dirs, "Suite folders (holding case folders) or case folders")
      ->required()
      ->check(CLI::ExistingDirectory);
  app.add_option("--device", o->device, "Device to run on")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--filter", o->filter, "Only cases whose name matches this regular expression");
  app.add_option("--expected-failures", o->expected_failures,
                 "File listing cases expected to fail, one per line: NAME REASON; they count as skipped")
      ->check(CLI::ExistingFile);
  app.add_option("--json", o->json, "Write per-case results as JSON to this file");
  app.add_flag("--verbose,-v", o->verbose, "Print passing cases too");
  app.add_flag("--optimize", o->optimize, "Run the optimization pipeline first (as Session::load does): the passes checked too");
  app.add_option("--start-after", o->start_after, "Skip cases up to and including this one (resume after a crash)");
  return [o] {
    Device device = Device::parse(o->device);
    std::optional<std::regex> filter;
    if (!o->filter.empty()) {
      try {
        filter.emplace(o->filter);
      } catch (const std::regex_error& e) {
        fail("--filter '{}' is not a valid regular expression: {}", o->filter, e.what());
      }
    }
    auto expected = o->expected_failures.empty() ? std::map<std::string, std::string>{}
                                                 : read_expected_failures(o->expected_failures);
    std::vector<fs::path> cases;
    for (const auto& d : o->dirs) {
      if (fs::exists(fs::path(d) / "model.onnx")) {
        cases.emplace_back(d);
        continue;
      }
      for (const auto& e : fs::directory_iterator(d)) {
        if (e.is_directory() && fs::exists(e.path() / "model.onnx")) cases.push_back(e.path());
      }
    }
    std::sort(cases.begin(), cases.end());
    if (!o->start_after.empty()) {
      auto it = std::find_if(cases.begin(), cases.end(),
                             [&](const fs::path& c) { return c.filename().string() == o->start_after; });
      if (it != cases.end()) cases.erase(cases.begin(), it + 1);
    }
    std::signal(SIGSEGV, on_fatal_signal);
    std::signal(SIGBUS, on_fatal_signal);
    std::signal(SIGFPE, on_fatal_signal);
    std::signal(SIGABRT, on_fatal_signal);
    int passed = 0, failed = 0, skipped = 0;
    std::map<std::string, int> fallback_ops;
    nlohmann::json results = nlohmann::json::array();
    for (const auto& c : cases) {
      std::string name = c.filename().string();
      if (filter && !std::regex_search(name, *filter)) continue;
      std::string reason;
      std::cout << std::flush;
      std::snprintf(g_current_case, sizeof(g_current_case), "%s", name.c_str());
      try {
        reason = run_case(c, device, o->optimize, fallback_ops);
      } catch (const std::exception& e) {
        reason = e.what();
      }
      std::string status;
      if (reason.empty()) {
        status = "passed";
        ++passed;
        if (expected.count(name))
          std::cout << "XPASS " << name << ": passes now; remove it from the expected failures\n";
        else if (o->verbose)
          std::cout << "PASS " << name << "\n";
      } else if (auto it = expected.find(name); it != expected.end()) {
        status = "skipped";
        ++skipped;
        if (o->verbose) std::cout << "XFAIL " << name << ": " << it->second << "\n";
      } else {
        status = "failed";
        ++failed;
        std::cout << "FAIL " << name << ": " << reason << "\n";
      }
      results.push_back({{"name", name}, {"status", status}, {"reason", reason}});
    }
    if (!fallback_ops.empty()) {
      int cases_with_fallbacks = fallback_ops[""];
      fallback_ops.erase("");
      std::cout << cases_with_fallbacks << " cases ran some nodes on the CPU instead of " << device.str()
                << " (op: nodes, over all cases): "
                << join(fallback_ops, ", ", [](const auto& kv) { return fmt::format("{} {}", kv.first, kv.second); })
                << "\n";
    }
    std::cout << passed << " passed, " << failed << " failed, " << skipped << " skipped\n";
    if (!o->json.empty()) {
      std::ofstream(o->json)
          << nlohmann::json{{"passed", passed}, {"failed", failed}, {"skipped", skipped}, {"cases", results}}.dump(2)
          << "\n";
    }
    return failed ? 1 : 0;
  };
}

}  // namespace ingot::cli
