#include <iostream>
#include <map>

#include "commands.h"
#include "graph/graph.h"
#include "onnx/onnx_import.h"
#include "package/package.h"
#include "passes/pass.h"

namespace ingot::cli {

Runner add_inspect_command(CLI::App& app) {
  auto model_path = std::make_shared<std::string>();
  auto print = std::make_shared<bool>(false);
  auto dump_after = std::make_shared<std::string>();
  auto list_passes = std::make_shared<bool>(false);
  app.add_option("MODEL", *model_path, "Model file (.onnx or .ingot)");
  app.add_flag("--graph", *print, "Also print the whole graph as text");
  app.add_option("--dump-after", *dump_after,
                 "Run the optimization pipeline up to PASS and print the graph after it (see --passes)");
  app.add_flag("--passes", *list_passes,
               "List the optimization passes in pipeline order (with MODEL: run them and report each)");
  return [=] {
    const auto passes = pipeline_passes();
    if (!dump_after->empty()) {
      bool known = false;
      std::string names;
      for (const Pass& p : passes) {
        known |= p.name == *dump_after;
        names += (names.empty() ? "" : ", ") + std::string(p.name);
      }
      if (!known) fail("--dump-after: unknown pass '{}' (passes: {})", *dump_after, names);
    }
    if (model_path->empty()) {
      if (!*list_passes) fail("MODEL is required (except with --passes)");
      for (const Pass& p : passes) std::cout << p.name << "\n";
      return 0;
    }
    PackageMetadata meta;
    bool package = is_package_file(*model_path);
    if (package && (*list_passes || !dump_after->empty())) {
      fail("--passes/--dump-after need an .onnx model: a package is already optimized");
    }
    auto model = package ? inspect_package(*model_path, meta) : import_onnx(*model_path);
    if (*list_passes || !dump_after->empty()) {
      // What Session::load does with optimize on: the lowerings, then the pipeline pass by pass.
      run_lowering(*model);
      auto count_nodes = [&] {
        int64_t count = 0;
        model->graph->for_each_graph([&](const Graph& sg, int) { count += int64_t(sg.nodes.size()); });
        return count;
      };
      int64_t before = count_nodes();
      for (const Pass& pass : passes) {  // step by step, stopping after the pass to dump
        if (pass_disabled(pass.name)) continue;
        const bool changed = run_pass(pass, *model);
        const int64_t after = count_nodes();
        if (*list_passes) {
          std::cout << "pass " << pass.name << ": " << (changed ? "changed" : "unchanged") << ", nodes " << before
                    << " -> " << after << "\n";
        }
        before = after;
        if (pass.name == *dump_after) {
          verify(*model);
          std::cout << "graph after " << pass.name << ":\n" << print_graph(*model->graph);
          return 0;
        }
      }
      verify(*model);
    }
    const Graph& g = *model->graph;
    std::cout << "model: " << model->name << "\n";
    if (package) {
      std::cout << "package: format version " << meta.format_version << ", " << meta.producer << ", built for "
                << meta.device << " " << meta.arch << ", " << meta.precision << ", from " << meta.source_model
                << ", " << meta.device_code.size() << " device code and " << meta.algorithms.size()
                << " algorithm blobs\n";
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
    std::cout << "parameters: " << g.parameter_count() << "\n";
    if (*print) std::cout << print_graph(g);
    return 0;
  };
}

}  // namespace ingot::cli
