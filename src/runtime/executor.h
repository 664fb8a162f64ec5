// The executor: binds a kernel to every node once (at construction), then runs graphs in node
// order, freeing each value after its last use. It also runs If/Loop/Scan bodies for kernels
// (SubgraphRunner); a body sees the values of the graphs that enclose it.
#pragma once
#include <memory>
#include <unordered_map>
#include <vector>

#include "graph/graph.h"
#include "ops/kernel.h"

namespace ingot {

class Executor final : public SubgraphRunner {
 public:
  Executor(std::shared_ptr<const Model> model, Device device);
  ~Executor() override;

  // Inputs in graph-input order; outputs in graph-output order.
  std::vector<Value> run(const std::vector<Value>& inputs);
  std::vector<Value> run_subgraph(const Graph& graph, const std::vector<Value>& inputs) override;

  const Model& model() const { return *model_; }

 private:
  struct Plan;
  struct Env;
  const Plan& plan_for(const Graph& graph) const;
  std::vector<Value> run_graph(const Graph& graph, const std::vector<Value>& inputs, const Env* parent);

  std::shared_ptr<const Model> model_;
  Device device_;
  std::unordered_map<const Graph*, std::unique_ptr<Plan>> plans_;
  const Env* current_env_ = nullptr;  // the env of the node being run (parent for its subgraphs)
};

}  // namespace ingot
