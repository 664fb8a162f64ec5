// What a compiled model is made into before it runs on one device: for every graph (subgraphs
// included) the steps in order, each with the kernel and the device chosen for its node
// (placement, with the reason kept), the value slots it reads and writes, and the slots that die
// after it (liveness). Immutable once built and shared by every run; the executor
// (runtime/executor.h) keeps what runs change beside it (kernel state, uploaded weights, shape
// plans and their arenas, CUDA graphs).
//
// Placement: on an accelerator, a node runs there when the backend has a kernel for the node's
// opset and that kernel takes the node's static dtypes, ranks and attributes (KernelDef::supports,
// rejects_types, rejects: asked here, at load); otherwise it falls back to the CPU, and the reason is
// kept (placement(), reported once per load). Shape arithmetic whose inputs are on the host stays
// there by design (not a fallback), and so do ops that only read shapes or make views.
#pragma once
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "graph/graph.h"
#include "ops/kernel.h"

namespace ingot {

struct NodePlacement {
  std::string node;       // node name (or "#index" when unnamed)
  std::string op;         // op type
  Device device;          // where it runs
  bool fallback = false;  // wanted the accelerator, runs on the CPU
  std::string reason;     // why it runs where it runs, for fallbacks and host-by-design nodes
};

// One graph's steps and value slots.
struct GraphPlan {
  struct Step {
    const Node* node;
    const OpDef* def;
    const KernelDef* kernel;
    int opset;
    std::vector<int> input_slots;   // -1: omitted optional input; -2: resolved by name in an outer graph
    std::vector<int> output_slots;  // -1: unused optional output
    std::vector<int> free_after;    // slots whose last use is this step
    // A node with subgraphs (If, Loop, Scan): the slots of its inputs and of the values its bodies
    // read. Its outputs may be any of them, depending on data (a branch returning an outer value, a
    // loop that runs zero times), so a memory plan keeps their buffers to the end of the run.
    std::vector<int> body_reads;
    Device device;  // where the kernel runs
    bool fallback = false;
    uint64_t constant_inputs = 0;  // bit i: input i is an initializer (KernelContext::input_is_constant)
  };
  const Graph* graph = nullptr;
  std::unordered_map<std::string, int> slot_of;
  int num_slots = 0;
  std::vector<std::pair<int, Tensor>> initializers;
  std::vector<int> input_slots, output_slots;  // output -2: an outer graph's value, by name
  std::vector<Step> steps;

  bool is_initializer(int slot) const;
};

class Executable {
 public:
  // Places and plans every graph of the model for `device`. Fails, naming the node, when a node has
  // no kernel at all or its kernel cannot take the node's static dtypes; fails when the device is
  // not available on this machine. `inputs_on_device[i]`: the model's input i will be given on the
  // accelerator (compile(f) of device tensors); by default inputs are host values (Session's), and
  // integer arithmetic on them runs on the host by design.
  static std::shared_ptr<const Executable> build(std::shared_ptr<const Model> model, Device device,
                                                 std::vector<bool> inputs_on_device = {});

  const Model& model() const { return *model_; }
  Device device() const { return device_; }
  // The plan of a graph of the model (the main graph or a body); fails for another graph.
  const GraphPlan& plan(const Graph& graph) const;
  const GraphPlan& main() const { return plan(*model_->graph); }
  std::vector<const GraphPlan*> plans() const;

  // Every node of every graph (subgraphs included), in plan order.
  const std::vector<NodePlacement>& placement() const { return placement_; }
  std::vector<NodePlacement> fallbacks() const;
  // One line naming the fallback ops and counts, or "" when there are none.
  std::string fallback_summary() const;
  // Top-level inputs (by index, ascending) that some step reads on the host while the model runs on an
  // accelerator: the executor specializes its shape plans on their values when they are small.
  const std::vector<size_t>& host_read_inputs() const { return host_read_inputs_; }

 private:
  Executable(std::shared_ptr<const Model> model, Device device) : model_(std::move(model)), device_(device) {}
  void plan_graphs(const std::vector<bool>& inputs_on_device);

  std::shared_ptr<const Model> model_;
  Device device_;
  std::unordered_map<const Graph*, std::unique_ptr<GraphPlan>> plans_;
  std::vector<NodePlacement> placement_;
  std::vector<size_t> host_read_inputs_;
};

}  // namespace ingot
