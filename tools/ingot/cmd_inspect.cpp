#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <map>

#include "commands.h"
#include "graph/graph.h"
#include "onnx/onnx_import.h"
#include "package/package.h"
#include "compiler/compile.h"
#include "core/strings.h"

namespace ingot::cli {

Runner add_inspect_command(CLI::App& app) {
  struct Options {
    std::string model, dump_after, device = "cpu", precision = "fp32";
    bool print = false, list_passes = false, no_optimize = false;
  };
  auto o = std::make_shared<Options>();
  app.add_option("MODEL", o->model, "Model file (.onnx or .ingot)");
  app.add_flag("--graph", o->print, "Also print the whole graph as text");
  app.add_option("--dump-after", o->dump_after,
                 "Run the compile pipeline up to PASS and print the graph after it (see --passes)");
  app.add_flag("--passes", o->list_passes,
               "List the compile pipeline's steps in order (with MODEL: run them and report each)");
  app.add_option("--device", o->device, "Target whose pipeline --passes/--dump-after run")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  add_precision_option(app, o->precision);
  app.add_flag("--no-optimize", o->no_optimize, "The pipeline without the optimization passes (lowerings only)");
  return [o] {
    CompileOptions options{!o->no_optimize, compute_dtype(parse_precision(o->precision)), Device::parse(o->device).type};
    const std::vector<CompileStep> steps = compile_steps(options);
    if (!o->dump_after.empty()) {
      auto known = std::find_if(steps.begin(), steps.end(), [&](const CompileStep& s) { return s.name == o->dump_after; });
      if (known == steps.end()) {
        std::string names = join(steps, ", ", [](const CompileStep& s) { return std::string(s.name); });
        fail("--dump-after: unknown pass '{}' (steps for these options: {})", o->dump_after, names);
      }
    }
    if (o->model.empty()) {
      if (!o->list_passes) fail("MODEL is required (except with --passes)");
      for (const CompileStep& s : steps) std::cout << s.stage << " " << s.name << "\n";
      return 0;
    }
    PackageMetadata meta;
    bool package = is_package_file(o->model);
    if (package && (o->list_passes || !o->dump_after.empty())) {
      fail("--passes/--dump-after need an .onnx model: a package is already optimized");
    }
    auto model = package ? inspect_package(o->model, meta) : import_onnx(o->model);
    if (o->list_passes || !o->dump_after.empty()) {
      // What Session::load does: the compile pipeline, reported step by step.
      auto count_nodes = [&] {
        int64_t count = 0;
        model->graph->for_each_graph([&](const Graph& sg, int) { count += int64_t(sg.nodes.size()); });
        return count;
      };
      int64_t before = count_nodes();
      bool dumped = false;
      compile(*model, options, [&](const CompileStep& step, bool changed, const Model&) {
        const int64_t after = count_nodes();
        if (o->list_passes) {
          std::cout << step.stage << " " << step.name << ": " << (changed ? "changed" : "unchanged") << ", nodes "
                    << before << " -> " << after << "\n";
        }
        before = after;
        if (step.name != o->dump_after) return true;
        std::cout << "graph after " << step.name << ":\n" << print_graph(*model->graph);
        dumped = true;
        return false;
      });
      if (dumped) return 0;
    }
    const Graph& g = *model->graph;
    std::cout << "model: " << model->name << "\n";
    if (package) {
      std::cout << "package: format version " << meta.format_version << ", " << meta.producer << ", built for "
                << meta.device << " " << meta.arch << ", " << meta.precision << ", from " << meta.source_model
                << ", " << meta.device_code.size() << " device code and " << meta.algorithms.size()
                << " algorithm blobs\n";
      for (const PackageExtension& e : meta.extensions)
        std::cout << "extension: " << e.name << " (build " << e.digest << ", " << e.nbytes << " bytes): "
                  << join(e.ops, ", ") << "\n";
    }
    std::cout << "producer: " << (model->producer.empty() ? "?" : model->producer) << ", IR version "
              << model->ir_version << "\n";
    std::cout << "opsets:";
    for (const auto& [domain, version] : model->opsets)
      std::cout << " " << (domain.empty() ? "ai.onnx" : domain) << "=" << version;
    std::cout << "\ninputs:\n";
    for (const auto& in : g.inputs) std::cout << "  " << in.name << ": " << in.type.str() << "\n";
    std::cout << "outputs:\n";
    for (const auto& out : g.outputs) std::cout << "  " << out.name << ": " << out.type.str() << "\n";
    std::map<std::string, int> histogram;
    int64_t nodes = 0;
    g.for_each_graph([&](const Graph& sg, int) {
      for (const Node& n : sg.nodes) {
        ++histogram[n.domain.empty() ? n.op_type : n.domain + "." + n.op_type];
        ++nodes;
      }
    });
    std::vector<std::pair<int, std::string>> sorted;
    for (const auto& [op, count] : histogram) sorted.emplace_back(-count, op);
    std::sort(sorted.begin(), sorted.end());
    std::cout << "ops (" << nodes << " nodes, subgraphs included):\n";
    for (const auto& [neg, op] : sorted) std::cout << "  " << op << ": " << -neg << "\n";
    // Parameters and their bytes by dtype (what a package's size is made of).
    std::map<std::string, std::pair<int64_t, int64_t>> by_dtype;  // dtype -> (elements, bytes)
    int64_t bytes = 0;
    g.for_each_graph([&](const Graph& sg, int) {
      for (const auto& [name, t] : sg.initializers) {
        auto& [elements, b] = by_dtype[std::string(dtype_name(t.dtype()))];
        elements += t.numel();
        b += int64_t(t.nbytes());
        bytes += int64_t(t.nbytes());
      }
    });
    std::cout << "parameters: " << g.parameter_count() << " (" << fmt::format("{:.2f}", double(bytes) / 1e6) << " MB";
    for (const auto& [dtype, eb] : by_dtype)
      std::cout << fmt::format("; {} {} in {:.2f} MB", dtype, eb.first, double(eb.second) / 1e6);
    std::cout << ")\n";
    if (o->print) std::cout << print_graph(g);
    return 0;
  };
}

}  // namespace ingot::cli
