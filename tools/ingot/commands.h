// The `ingot` CLI: each subcommand registers its options and returns its runner.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>

namespace ingot::cli {

using Runner = std::function<int()>;  // returns the process exit code

Runner add_run_command(CLI::App& app);
Runner add_test_onnx_command(CLI::App& app);
Runner add_inspect_command(CLI::App& app);
Runner add_ops_command(CLI::App& app);
Runner add_profile_command(CLI::App& app);
Runner add_convert_command(CLI::App& app);
Runner add_bench_command(CLI::App& app);

}  // namespace ingot::cli
