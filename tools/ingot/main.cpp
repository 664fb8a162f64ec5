// ingot: run, test and inspect models. Exit codes: 0 success, 1 error, 2 usage error.
#include <ingot/error.h>
#include <ingot/load_extension.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>

#include "commands.h"
#include "core/flags.h"

namespace {

// A command's work is done and its files are closed: what remains of exit is static destructors and
// the libraries' teardown (cudart unloading every module and releasing the context, cuDNN's and
// cuBLASLt's destructors): ~0.1 s on the H200 machine for a process that used them, which the OS
// does anyway when the process ends. So the CLI flushes its streams and leaves with _Exit, unless
// INGOT_EXIT_TEARDOWN=1 or this is a sanitizer build (LeakSanitizer reports at a normal exit).
int leave(int rc) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  constexpr bool sanitizer_build = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
  constexpr bool sanitizer_build = true;
#else
  constexpr bool sanitizer_build = false;
#endif
#else
  constexpr bool sanitizer_build = false;
#endif
  if (sanitizer_build || ingot::flags::enabled("INGOT_EXIT_TEARDOWN")) return rc;
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  std::_Exit(rc);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Ingot: run ONNX models on the CPU (and GPU)", "ingot"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for all subcommands");
  app.add_flag_callback(
      "--help-flags",
      [] {
        std::cout << "Environment switches (INGOT_*), read by the library:\n\n" << ingot::flags::describe();
        throw CLI::Success();
      },
      "List the INGOT_* environment switches, their defaults and what they do");
  // User ops for every subcommand: a library built beforehand (.so) or sources compiled just in time.
  std::vector<std::string> extensions;
  app.add_option("--extension", extensions,
                 "Load user ops first: an extension library (.so) or a source (.cpp/.cu, compiled and cached; "
                 "docs/CUSTOM_OPS.md). Repeatable");
  app.fallthrough();  // --extension may also follow the subcommand
  std::map<CLI::App*, ingot::cli::Runner> runners;
  auto add = [&](const char* name, const char* about, auto adder) {
    CLI::App* sub = app.add_subcommand(name, about);
    runners[sub] = adder(*sub);
  };
  add("run", "Run a model on inputs (.npy or TensorProto .pb) and save or print its outputs",
      ingot::cli::add_run_command);
  add("test-onnx", "Run ONNX backend test cases and compare with their expected outputs",
      ingot::cli::add_test_onnx_command);
  add("inspect", "Show a model's inputs, outputs, opsets, op histogram and parameter count",
      ingot::cli::add_inspect_command);
  add("ops", "List the op catalogue and the kernels each backend has", ingot::cli::add_ops_command);
  add("profile", "Run a model under the profiler: time per op type, allocations, trace and HTML report",
      ingot::cli::add_profile_command);
  add("convert", "Optimize a model once and save it as an .ingot package that loads without passes",
      ingot::cli::add_convert_command);
  add("bench", "Measure a model's steady-state latency (median, p90, min) and throughput",
      ingot::cli::add_bench_command);
  add("gradcheck", "Check every op's gradient rule against finite differences (or, on CUDA, against the CPU)",
      ingot::cli::add_gradcheck_command);
  add("quantize", "Quantize a float ONNX model to int8 (a QDQ ONNX model) from calibration inputs",
      ingot::cli::add_quantize_command);
  add("launch", "Run a command as N data-parallel processes on this host (torchrun's environment)",
      ingot::cli::add_launch_command);
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  try {
    for (const std::string& e : extensions) {
      const std::filesystem::path p(e);
      if (p.extension() == ".so" || p.filename().string().find(".so.") != std::string::npos)
        ingot::load_extension_library(e);
      else
        ingot::load_extension(p.stem().string(), {e});
    }
    for (auto& [sub, runner] : runners) {
      if (sub->parsed()) return leave(runner());
    }
  } catch (const ingot::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 2;
}
