// The executor: runs an Executable (compiler/executable.h: each node's kernel and device, the value
// slots, liveness) in node order, freeing each value after its last use. It also runs If/Loop/Scan
// bodies for kernels (SubgraphRunner); a body sees the values of the graphs that enclose it. What
// runs change is kept here, beside the immutable executable: each node's kernel state, the weights
// uploaded to the device, the shape plans with their arenas and CUDA graphs.
//
// Values move between devices where a kernel needs them elsewhere (a CPU fallback, a host-read
// input); the copies are counted per run (run_stats()), and weights are uploaded once.
//
// Static plans per input shape: the first run with new input shapes records the buffers its
// kernels allocate and how long each lives; from the second run on, those outputs are slices of
// one arena laid out by compiler/memory_plan.h (memory_plan() reports its size). On a GPU whose
// run has no CPU fallback and no device-to-host copy, the second run is also captured as a CUDA
// graph (core/device_graph.h): inputs are copied into fixed device buffers and the whole run
// replays with one launch. Outputs of a replayed run are the graph's own buffers, valid until the
// next run(). A run whose capture fails (a kernel that waits for the device, say) is run normally
// and the reason kept (memory_plan().why_no_graph).
//
// Concurrency: run() may be called from many threads at once. Each run keeps its state in a frame of
// its own (stats, the values being copied, the node being run); what runs share is locked: the list
// of shape plans, the uploaded weights, and each node's kernel state (held by a kernel while it
// uses it, KernelContext::state). A shape plan (its arena, its CUDA graph) serves one run at a time:
// a run that finds its plan busy runs unplanned, with fresh tensors, and computes the same. On an
// accelerator, runs enqueue one at a time per device (one stream; library handles are not to be used
// from two threads at once): concurrency there overlaps only the callers' own work.
//
// Host-read inputs: a small top-level input that host code reads (an If condition computed from a
// sample-rate scalar, a CPU kernel's operand) is specialized on: its value joins the shape plan's
// key, it stays on the host for the run (copied down first if given on the device), and a graph
// captured with it bakes in the branches it chose. Another value makes another plan.
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <ingot/session.h>

#include "compiler/executable.h"
#include "graph/graph.h"
#include "ops/kernel.h"

namespace ingot {

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
  double time_limit_s = 0;  // a run still going after this long stops with an error (0: no limit)
};


class Executor final {
 public:
  explicit Executor(std::shared_ptr<const Executable> executable, ExecutorOptions options = {});
  // Builds the executable of `model` for `device` first (Executable::build).
  Executor(std::shared_ptr<const Model> model, Device device, ExecutorOptions options = {})
      : Executor(Executable::build(std::move(model), device), options) {}
  ~Executor();

  // One run's outputs (in graph-output order, left where they were computed) and what it moved.
  // After a CUDA graph replay (stats.graph_replay) the outputs are the graph's own buffers: they stay
  // valid while `hold` is held, which keeps other runs from replaying that graph meanwhile.
  struct Result {
    std::vector<Value> outputs;
    RunStats stats;
    std::shared_ptr<void> plan;  // the replayed plan, kept alive while held
    std::unique_lock<std::mutex> hold;
  };
  // Inputs in graph-input order. Safe to call from several threads at once.
  Result run(const std::vector<Value>& inputs);
  // Copies the top-level graph's weights that device kernels read to the device on a thread of its
  // own, in the order the steps read them, so that a loaded package's first run finds most of them
  // there instead of copying each on its way (the run copies any it finds missing itself). The
  // first run to end stops and joins the thread. No-op on the CPU.
  void upload_weights_async();

  const Model& model() const { return model_; }
  Device device() const { return device_; }
  const Executable& executable() const { return *executable_; }
  RunStats run_stats() const;  // of the last run() to finish
  MemoryPlanStats memory_plan() const;

 private:
  struct Plan;
  struct Env;
  struct ShapePlan;
  struct Frame;
  class StepAllocator;
  using ShapePlans = std::vector<std::shared_ptr<ShapePlan>>;
  const Plan& plan_for(const Graph& graph) const;
  struct Uploads;
  // The plan of these inputs' shapes (and host-read values). `staged` gets the inputs with the
  // host-read ones on the host when any had to be copied there; empty otherwise.
  std::shared_ptr<ShapePlan> shape_plan_for(Frame& f, const std::vector<Value>& inputs, std::vector<Value>& staged);
  std::vector<Value> run_planned(Frame& f, ShapePlan& sp, const std::vector<Value>& inputs);
  std::optional<std::vector<Value>> capture(Frame& f, ShapePlan& sp, const std::vector<Value>& inputs);
  std::vector<Value> replay(Frame& f, ShapePlan& sp, const std::vector<Value>& inputs);
  std::vector<Value> run_subgraph(Frame& f, const Graph& graph, const std::vector<Value>& inputs);
  std::vector<Value> run_body(Frame& f, const Graph& graph, const std::vector<Value>& inputs, const Env* parent);
  // `alloc`: the graph's output allocation (recording or arena), null when unplanned.
  std::vector<Value> run_graph(Frame& f, const Graph& graph, const std::vector<Value>& inputs, const Env* parent,
                               StepAllocator* alloc = nullptr);
  const Value* move_input(Frame& f, const Plan& plan, Env& env, int slot, const std::string& name, const Value* v,
                          Device want, bool fallback);
  void keep_upload(Frame& f, const Plan& plan, const Env& env, int slot, const Value& source, const Value& copy,
                   bool outer);
  Value copy_value(Frame& f, const Value& v, Device want, const std::unordered_map<std::string, int>* slot_names,
                   int slot, bool fallback, bool from_fallback);
  // `t` copied to `want` (into `into` when given), counted in the run's stats and the profile.
  Tensor transfer(Frame& f, const Tensor& t, Device want, const Tensor* into,
                  const std::unordered_map<std::string, int>* slot_names, int slot, bool fallback, bool from_fallback);

  void finish_weight_uploads();

  std::shared_ptr<const Executable> executable_;
  const Model& model_;
  Device device_;
  std::unordered_map<const Graph*, std::unique_ptr<Plan>> plans_;
  ExecutorOptions options_;

  // Shared by concurrent runs:
  mutable std::mutex plans_mutex_;    // shape_plans_ and body_plans_ (the lists, not the plans)
  mutable std::mutex uploads_mutex_;  // every Plan::uploaded
  mutable std::mutex stats_mutex_;    // last_stats_
  RunStats last_stats_;
  // Most recently used first; destroyed before plans_ (graphs use the steps' device state). A plan
  // dropped from the list lives on while a run holds it.
  ShapePlans shape_plans_;
  // Static plans of bodies (If branches, Loop/Scan bodies) on the CPU, per input shapes.
  std::unordered_map<const Graph*, ShapePlans> body_plans_;
  // upload_weights_async's thread; stopped and joined when a run ends (no capture runs beside it).
  std::mutex weight_uploads_mutex_;
  std::thread weight_uploads_;
  std::atomic<bool> stop_weight_uploads_{false};
};

}  // namespace ingot
