// The `ingot` CLI: each subcommand registers its options and returns its runner.
#pragma once
#include <ingot/session.h>

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

namespace ingot::cli {

using Runner = std::function<int()>;  // returns the process exit code

Runner add_run_command(CLI::App& app);
Runner add_test_onnx_command(CLI::App& app);
Runner add_inspect_command(CLI::App& app);
Runner add_ops_command(CLI::App& app);
Runner add_profile_command(CLI::App& app);
Runner add_convert_command(CLI::App& app);
Runner add_bench_command(CLI::App& app);
Runner add_gradcheck_command(CLI::App& app);
Runner add_quantize_command(CLI::App& app);
Runner add_launch_command(CLI::App& app);

// --precision's values (checked by add_precision_option) as the library's enum.
inline Precision parse_precision(const std::string& text) {
  return text == "fp16"   ? Precision::FP16
         : text == "bf16" ? Precision::BF16
         : text == "int8" ? Precision::INT8
                          : Precision::FP32;
}
inline CLI::Option* add_precision_option(CLI::App& app, std::string& value) {
  return app.add_option("--precision", value,
                        "Compute precision of float32 models (fp16/bf16: like autocast; int8: calibrated packages, "
                        "ingot convert --calib)")
      ->check(CLI::IsMember({"fp32", "fp16", "bf16", "int8"}));
}

}  // namespace ingot::cli
