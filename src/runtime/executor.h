// The executor: binds a kernel to every node once (at construction), then runs graphs in node
// order, freeing each value after its last use. It also runs If/Loop/Scan bodies for kernels
// (SubgraphRunner); a body sees the values of the graphs that enclose it.
//
// Placement: on an accelerator, each node runs on the accelerator when it has a kernel there for
// the node's opset and dtype; otherwise on the CPU (a fallback, reported once per load and
// queryable through placement()). Shape arithmetic whose inputs are on the host stays there by
// design (not a fallback). Values move between devices where a kernel needs them elsewhere; the
// copies are counted per run (run_stats()), and weights are uploaded once.
//
// Static plans per input shape: the first run with new input shapes records the buffers its
// kernels allocate and how long each lives; from the second run on, those outputs are slices of
// one arena laid out by runtime/memory_plan.h (memory_plan() reports its size). On a GPU whose
// run has no CPU fallback and no device-to-host copy, the second run is also captured as a CUDA
// graph (core/device_graph.h): inputs are copied into fixed device buffers and the whole run
// replays with one launch. Outputs of a replayed run are the graph's own buffers, valid until the
// next run(). A run whose capture fails (a kernel that waits for the device, say) is run normally
// and the reason kept (memory_plan().why_no_graph).
//
// Host-read inputs: a small top-level input that host code reads (an If condition computed from a
// sample-rate scalar, a CPU kernel's operand) is specialized on: its value joins the shape plan's
// key, it stays on the host for the run (copied down first if given on the device), and a graph
// captured with it bakes in the branches it chose. Another value makes another plan.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <ingot/session.h>

#include "graph/graph.h"
#include "ops/kernel.h"

namespace ingot {

struct NodePlacement {
  std::string node;    // node name (or "#index" when unnamed)
  std::string op;      // op type
  Device device;       // where it runs
  bool fallback = false;  // wanted the accelerator, runs on the CPU
  std::string reason;  // why it runs where it runs, for fallbacks and host-by-design nodes
};

struct RunStats {
  int64_t host_to_device_bytes = 0, device_to_host_bytes = 0, device_to_device_bytes = 0;
  int64_t copies = 0;
  int64_t fallback_ops = 0;  // fallback node executions
  int64_t fallback_copy_bytes = 0;  // bytes moved in and out of fallback nodes
  bool graph_replay = false;  // the run replayed a captured CUDA graph
};

struct ExecutorOptions {
  bool memory_plan = true;  // one arena per input shape from the second run on
  bool cuda_graphs = true;  // capture and replay runs on a GPU where possible (needs memory_plan)
};


class Executor final : public SubgraphRunner {
 public:
  Executor(std::shared_ptr<const Model> model, Device device, ExecutorOptions options = {});
  ~Executor() override;

  // Inputs in graph-input order; outputs in graph-output order, left where they were computed.
  std::vector<Value> run(const std::vector<Value>& inputs);
  std::vector<Value> run_subgraph(const Graph& graph, const std::vector<Value>& inputs) override;

  const Model& model() const { return *model_; }
  Device device() const { return device_; }
  // Every node of every graph (subgraphs included), in plan order.
  const std::vector<NodePlacement>& placement() const { return placement_; }
  std::vector<NodePlacement> fallbacks() const;
  // One line naming the fallback ops and counts, or "" when there are none.
  std::string fallback_summary() const;
  const RunStats& run_stats() const { return stats_; }  // of the last run()
  MemoryPlanStats memory_plan() const;

 private:
  struct Plan;
  struct Env;
  struct ShapePlan;
  class StepAllocator;
  const Plan& plan_for(const Graph& graph) const;
  struct Uploads;
  // The plan of these inputs' shapes (and host-read values). `staged` gets the inputs with the
  // host-read ones on the host when any had to be copied there; empty otherwise.
  ShapePlan* shape_plan_for(const std::vector<Value>& inputs, std::vector<Value>& staged);
  std::vector<Value> run_planned(ShapePlan& sp, const std::vector<Value>& inputs);
  std::optional<std::vector<Value>> capture(ShapePlan& sp, const std::vector<Value>& inputs);
  std::vector<Value> replay(ShapePlan& sp, const std::vector<Value>& inputs);
  std::vector<Value> run_body(const Graph& graph, const std::vector<Value>& inputs, const Env* parent);
  // `alloc`: the graph's output allocation (recording or arena), null when unplanned.
  std::vector<Value> run_graph(const Graph& graph, const std::vector<Value>& inputs, const Env* parent,
                               StepAllocator* alloc = nullptr);
  const Value* move_input(const Plan& plan, Env& env, int slot, const std::string& name, const Value* v, Device want,
                          bool fallback);
  void keep_upload(const Plan& plan, const Env& env, int slot, const Value& source, const Value& copy, bool outer);
  Value copy_value(const Value& v, Device want, const std::unordered_map<std::string, int>* slot_names, int slot,
                   bool fallback, bool from_fallback);
  // `t` copied to `want` (into `into` when given), counted in the run's stats and the profile.
  Tensor transfer(const Tensor& t, Device want, const Tensor* into, const std::unordered_map<std::string, int>* slot_names,
                  int slot, bool fallback, bool from_fallback);

  std::shared_ptr<const Model> model_;
  Device device_;
  std::unordered_map<const Graph*, std::unique_ptr<Plan>> plans_;
  std::vector<NodePlacement> placement_;
  RunStats stats_;
  ExecutorOptions options_;
  // Most recently used first; destroyed before plans_ (graphs use the steps' device state).
  std::vector<std::unique_ptr<ShapePlan>> shape_plans_;
  // Static plans of bodies (If branches, Loop/Scan bodies) on the CPU, per input shapes.
  std::unordered_map<const Graph*, std::vector<std::unique_ptr<ShapePlan>>> body_plans_;
  // Top-level inputs read on the host (by index): specialized on when small (see above).
  std::vector<size_t> host_read_inputs_;
  // During a run that records a shape plan: where host values copied to the device are kept; during
  // its capture: where they are taken from (the capture makes no host copy).
  Uploads* upload_sink_ = nullptr;
  const Uploads* capture_uploads_ = nullptr;
  const Env* current_env_ = nullptr;  // the env of the node being run (parent for its subgraphs)
  const void* current_step_ = nullptr;  // the Plan::Step being run
};

}  // namespace ingot
