#include <iostream>
#include <map>

#include "commands.h"
#include "graph/graph.h"
#include "onnx/onnx_import.h"

namespace ingot::cli {

Runner add_inspect_command(CLI::App& app) {
  auto model_path = std::make_shared<std::string>();
  auto print = std::make_shared<bool>(false);
  app.add_option("MODEL", *model_path, "Model file (.onnx)")->required();
  app.add_flag("--graph", *print, "Also print the whole graph as text");
  return [=] {
    auto model = import_onnx(*model_path);
    const Graph& g = *model->graph;
    std::cout << "model: " << model->name << "\n";
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
