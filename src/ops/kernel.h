// Kernels and their registry. A kernel implements one op (for an opset range) on one backend, for
// a set of dtypes; it reads inputs and attributes through a KernelContext and allocates its
// outputs there. The same context serves graph execution and eager calls.
#pragma once
#include <ingot/attribute.h>
#include <ingot/tensor.h>

#include <climits>
#include <deque>
#include <mutex>
#include <functional>
#include <memory>
#include <shared_mutex>
#include <string>
#include <vector>

#include "ops/op_def.h"

namespace ingot {

class Graph;

// A runtime value: a tensor, a sequence of tensors, or an empty optional.
struct Value {
  enum class Kind : uint8_t { None, Tensor, Sequence };
  Kind kind = Kind::None;
  Tensor tensor;
  std::vector<Tensor> sequence;

  Value() = default;
  Value(Tensor t) : kind(Kind::Tensor), tensor(std::move(t)) {}  // NOLINT
  static Value make_sequence(std::vector<Tensor> items) {
    Value v;
    v.kind = Kind::Sequence;
    v.sequence = std::move(items);
    return v;
  }
  std::string describe() const;
};

// Runs a subgraph (If/Loop/Scan bodies) with the given inputs; values of enclosing graphs stay
// visible to it. Implemented by the executor.
class SubgraphRunner {
 public:
  virtual ~SubgraphRunner() = default;
  virtual std::vector<Value> run_subgraph(const Graph& graph, const std::vector<Value>& inputs) = 0;
};

// Where a kernel's outputs are allocated. Without one, KernelContext::allocate makes fresh tensors;
// the executor's memory plan (compiler/memory_plan.h) puts them in one arena instead.
class OutputAllocator {
 public:
  virtual ~OutputAllocator() = default;
  virtual Tensor allocate(size_t output, DType dtype, Shape shape, Device device) = 0;
};

// A node's kernel cache (KernelContext::state): oneDNN primitives, packed weights, tap tables. It lives
// as long as the prepared graph. Runs of one session may run at once, so a kernel that uses its
// node's state holds the node's lock from its first state<S>() call until it returns; kernels
// without state never lock.
struct NodeState {
  std::mutex mutex;
  std::shared_ptr<void> value;
};

class KernelContext {
 public:
  KernelContext(const OpDef& def, const Attributes& attrs, int opset, std::vector<const Value*> inputs,
                std::vector<Value>& outputs, SubgraphRunner* subgraphs, NodeState* state,
                Device device = Device::cpu())
      : def_(def),
        attrs_(attrs),
        opset_(opset),
        inputs_(std::move(inputs)),
        outputs_(outputs),
        subgraphs_(subgraphs),
        state_(state),
        device_(device) {}

  const OpDef& def() const { return def_; }
  // The device this kernel runs on; outputs are allocated there.
  Device device() const { return device_; }
  int opset() const { return opset_; }

  // Inputs. Omitted optional inputs are absent: has_input(i) is false and input(i) throws.
  size_t num_inputs() const { return inputs_.size(); }
  bool has_input(size_t i) const { return i < inputs_.size() && inputs_[i] && inputs_[i]->kind != Value::Kind::None; }
  const Tensor& input(size_t i) const;
  const Value& input_value(size_t i) const;
  // Whether input i is a constant of the graph (an initializer): its contents are the same at every
  // run, so a kernel may keep what it derives from them in state() (reordered weights). Graph
  // inputs and computed values may change between runs at the same address; eager calls have no
  // constants.
  bool input_is_constant(size_t i) const { return i < 64 && ((constant_inputs_ >> i) & 1) != 0; }
  void set_constant_inputs(uint64_t mask) { constant_inputs_ = mask; }

  // Outputs.
  size_t num_outputs() const { return outputs_.size(); }
  Tensor& allocate(size_t i, DType dtype, Shape shape);  // on device()
  void set_output_allocator(OutputAllocator* a) { allocator_ = a; }
  void set_output(size_t i, Tensor t);
  void set_output_value(size_t i, Value v);

  // Attributes: the node's value, else the catalogue default; a required attribute that is
  // missing, or a kind mismatch, throws naming the attribute.
  bool has_attr(std::string_view name) const;  // set explicitly on the node
  int64_t attr_int(std::string_view name) const;
  float attr_float(std::string_view name) const;
  const std::string& attr_string(std::string_view name) const;
  const std::vector<int64_t>& attr_ints(std::string_view name) const;
  const std::vector<float>& attr_floats(std::string_view name) const;
  const std::vector<std::string>& attr_strings(std::string_view name) const;
  const Tensor& attr_tensor(std::string_view name) const;
  const Graph& attr_graph(std::string_view name) const;
  const Attributes& attrs() const { return attrs_; }

  std::vector<Value> run_subgraph(const Graph& graph, const std::vector<Value>& inputs) const;

  // A per-node cache that lives as long as the prepared graph (e.g. oneDNN primitives, packed
  // weights). Created on first use; the node's lock is held from then until the kernel returns.
  template <class S>
  S& state() const {
    if (!state_lock_.owns_lock()) state_lock_ = std::unique_lock<std::mutex>(state_->mutex);
    if (!state_->value) state_->value = std::make_shared<S>();
    return *static_cast<S*>(state_->value.get());
  }

 private:
  const Attribute& attr(std::string_view name, AttrKind kind) const;

  const OpDef& def_;
  const Attributes& attrs_;
  int opset_;
  std::vector<const Value*> inputs_;
  std::vector<Value>& outputs_;
  SubgraphRunner* subgraphs_;
  NodeState* state_;
  mutable std::unique_lock<std::mutex> state_lock_;
  Device device_;
  OutputAllocator* allocator_ = nullptr;
  uint64_t constant_inputs_ = 0;
};

using KernelFn = void (*)(KernelContext&);

// What placement knows about a node before it runs: its attributes and each input's static dtype and
// rank (Undefined / -1 where the graph does not say).
struct StaticInput {
  DType dtype = DType::Undefined;
  int rank = -1;
};
struct NodeSignature {
  const Attributes& attrs;
  std::vector<StaticInput> inputs;
};
// A kernel's own limits beyond its dtypes (a rank limit, an attribute value it does not implement):
// "" when it takes the node, else why not. Asked at placement, so that such a node runs on the CPU,
// reported as a fallback with this reason, instead of failing when it first runs.
using AcceptsFn = std::string (*)(const NodeSignature&);

struct KernelDef {
  std::string op;
  std::string domain;
  DeviceType backend = DeviceType::CPU;
  int since_version = 1;
  int until_version = INT_MAX;
  std::vector<DType> dtypes;  // dtypes of the first input it accepts; empty = any
  // Constraints on the op's type variables (OpSignature): the dtypes the kernel takes for each, matched
  // against every input bound to it (QLinearConv: T1 = X's, T2 = W's, T4 = B's).
  std::vector<std::pair<std::string, std::vector<DType>>> type_constraints;
  KernelFn fn = nullptr;
  // Inputs the kernel reads on the host whatever its backend (shapes, axes, pads, scales): the
  // executor hands them over as CPU tensors. Small by nature; a CUDA kernel never syncs for them.
  std::vector<int> host_inputs;
  // The kernel reads only metadata (shapes, dtypes) or builds zero-copy views, so its inputs may
  // live on any device and are never copied for it (Shape, Size, Reshape, Identity, If...).
  bool any_device = false;
  AcceptsFn accepts = nullptr;  // nullptr: every node its dtypes allow
  int max_rank = 0;             // inputs of higher static rank are refused at placement; 0: no limit
  // The kernel's state() is a cache keyed by what the call's signature fixes (input shapes and dtypes,
  // attributes): plans, algorithm choices, library primitives, nothing derived from input contents.
  // Eager calls of one signature then share one state (ops/eager.cpp) instead of building it anew.
  bool eager_state = false;

  // "" when the kernel takes a node of this signature (its dtypes aside), else why not.
  std::string rejects(const NodeSignature& node) const;
  // "" when the statically known input dtypes satisfy the kernel's type constraints, else which
  // input breaks which (`dtypes`, on input 0, is checked by supports()).
  std::string rejects_types(const OpDef& def, const std::vector<DType>& input_dtypes) const;

  bool is_host_input(size_t i) const {
    for (int h : host_inputs) {
      if (size_t(h) == i) return true;
    }
    return false;
  }
  bool supports(DType dt) const {
    if (dtypes.empty() || dt == DType::Undefined) return true;
    for (DType d : dtypes) {
      if (d == dt) return true;
    }
    return false;
  }
};

// Every kernel, by (domain, op, backend, opsets, dtypes). Entries never move once added (plan steps
// and sessions hold pointers to them), and the registry is locked, so kernels may be added while
// sessions exist (an extension loaded at run time). Two kernels for the same op and backend whose
// opset ranges and dtypes overlap are refused: the second would never be found.
class KernelRegistry {
 public:
  static KernelRegistry& instance();
  void add(KernelDef def);
  // The kernel for op at this opset version on this backend, or nullptr.
  const KernelDef* find(std::string_view domain, std::string_view op, DeviceType backend, int opset) const;
  std::vector<const KernelDef*> all() const;

 private:
  mutable std::shared_mutex mutex_;
  std::deque<KernelDef> kernels_;  // a deque: push_back never moves the elements already there
};

class KernelBuilder {
 public:
  KernelBuilder(std::string op, DeviceType backend, KernelFn fn) {
    def_.op = std::move(op);
    def_.backend = backend;
    def_.fn = fn;
  }
  KernelBuilder& domain(std::string d) {
    def_.domain = std::move(d);
    return *this;
  }
  KernelBuilder& versions(int since, int until = INT_MAX) {
    def_.since_version = since;
    def_.until_version = until;
    return *this;
  }
  KernelBuilder& dtypes(std::vector<DType> d) {
    def_.dtypes = std::move(d);
    return *this;
  }
  // A constraint on one of the op's type variables: KernelBuilder(...).types("T1", {UInt8, Int8}).
  KernelBuilder& types(std::string var, std::vector<DType> allowed) {
    def_.type_constraints.emplace_back(std::move(var), std::move(allowed));
    return *this;
  }
  KernelBuilder& host_inputs(std::vector<int> inputs) {
    def_.host_inputs = std::move(inputs);
    return *this;
  }
  KernelBuilder& any_device() {
    def_.any_device = true;
    return *this;
  }
  KernelBuilder& accepts(AcceptsFn fn) {
    def_.accepts = fn;
    return *this;
  }
  KernelBuilder& eager_state() {
    def_.eager_state = true;
    return *this;
  }
  KernelBuilder& max_rank(int rank) {
    def_.max_rank = rank;
    return *this;
  }
  KernelDef& def() { return def_; }

 private:
  KernelDef def_;
};

struct KernelRegistrar {
  KernelRegistrar(KernelBuilder& b) { KernelRegistry::instance().add(std::move(b.def())); }  // NOLINT
};

}  // namespace ingot

// INGOT_CPU_KERNEL(Relu, relu_kernel).dtypes({DType::Float32});
#define INGOT_CPU_KERNEL(name, fn)                                           \
  static ::ingot::KernelRegistrar INGOT_CONCAT(ingot_kernel_, __COUNTER__) = \
      ::ingot::KernelBuilder(#name, ::ingot::DeviceType::CPU, fn)

// INGOT_CUDA_KERNEL(Relu, relu_kernel).dtypes({DType::Float32, DType::Float16, DType::BFloat16});
// CUDA kernels index tensors of at most 8 dims (kMaxRank, backends/cuda/kernels/cuda_util.cuh):
// nodes with inputs of higher static rank are placed on the CPU.
#define INGOT_CUDA_KERNEL(name, fn)                                          \
  static ::ingot::KernelRegistrar INGOT_CONCAT(ingot_kernel_, __COUNTER__) = \
      ::ingot::KernelBuilder(#name, ::ingot::DeviceType::CUDA, fn).max_rank(8)
