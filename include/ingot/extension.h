// The C++ side of Ingot's extension ABI: what an extension's sources include to define ops.
// Header-only over <ingot/extension_abi.h> (C++17, compiles under g++ and nvcc); the library it
// builds does not link libingot: Ingot hands it the API table when it loads it.
//
//   #include <ingot/extension.h>
//
//   static void softshrink_cpu(ingot::ext::KernelContext& ctx) {
//     ingot::ext::TensorRef x = ctx.input(0);
//     ingot::ext::TensorRef y = ctx.output(0, x.dtype(), x.shape());
//     const float lambd = ctx.attr_float("lambd");
//     ...
//   }
//
//   INGOT_EXTENSION(registry) {
//     registry.op("my.ops", "Softshrink")
//         .input("X", "T").output("Y", "T").type("T", {ingot::ext::kFloat32})
//         .attr("lambd", 0.5f)
//         .cpu(softshrink_cpu)
//         .cuda(softshrink_cuda)            // (from a .cu source)
//         .gradient("SoftshrinkGrad");      // another op of the extension
//   }
//
// Kernels throw (std::exception) to fail; the message reaches the user as Ingot's error, naming the
// node and op. docs/CUSTOM_OPS.md has the whole walk-through.
#pragma once
#include <ingot/extension_abi.h>

#include <cstdint>
#include <deque>
#include <exception>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace ingot::ext {

inline constexpr int32_t kFloat32 = INGOT_DTYPE_FLOAT32;
inline constexpr int32_t kFloat64 = INGOT_DTYPE_FLOAT64;
inline constexpr int32_t kFloat16 = INGOT_DTYPE_FLOAT16;
inline constexpr int32_t kBFloat16 = INGOT_DTYPE_BFLOAT16;
inline constexpr int32_t kInt8 = INGOT_DTYPE_INT8;
inline constexpr int32_t kUInt8 = INGOT_DTYPE_UINT8;
inline constexpr int32_t kInt32 = INGOT_DTYPE_INT32;
inline constexpr int32_t kInt64 = INGOT_DTYPE_INT64;
inline constexpr int32_t kBool = INGOT_DTYPE_BOOL;

// A tensor handed to a kernel; valid until the kernel returns.
class TensorRef {
 public:
  TensorRef() = default;
  explicit TensorRef(const IngotTensor& t) : t_(t) {}
  int32_t dtype() const { return t_.dtype; }
  int32_t rank() const { return t_.rank; }
  int64_t dim(int32_t i) const { return t_.shape[i < 0 ? i + t_.rank : i]; }
  std::vector<int64_t> shape() const { return std::vector<int64_t>(t_.shape, t_.shape + t_.rank); }
  int64_t numel() const {
    int64_t n = 1;
    for (int32_t i = 0; i < t_.rank; ++i) n *= t_.shape[i];
    return n;
  }
  bool on_cuda() const { return t_.device_type == INGOT_DEVICE_CUDA; }
  void* raw() const { return t_.data; }
  template <class T>
  T* data() const {
    return static_cast<T*>(t_.data);
  }

 private:
  IngotTensor t_{};
};

// Attribute reads shared by kernels and shape rules: the node's value, else the declared default.
class AttributeReader {
 public:
  AttributeReader(const IngotApi* api, const IngotAttributes* attrs) : api_(api), attrs_(attrs) {}
  int64_t attr_int(const char* name) const {
    int64_t v = 0;
    check(api_->attr_int(attrs_, name, &v), name, "int");
    return v;
  }
  float attr_float(const char* name) const {
    float v = 0;
    check(api_->attr_float(attrs_, name, &v), name, "float");
    return v;
  }
  std::string attr_string(const char* name) const {
    const char* s = nullptr;
    size_t n = 0;
    check(api_->attr_string(attrs_, name, &s, &n), name, "string");
    return std::string(s, n);
  }
  std::vector<int64_t> attr_ints(const char* name) const {
    const int64_t* p = nullptr;
    size_t n = 0;
    check(api_->attr_ints(attrs_, name, &p, &n), name, "ints");
    return std::vector<int64_t>(p, p + n);
  }
  std::vector<float> attr_floats(const char* name) const {
    const float* p = nullptr;
    size_t n = 0;
    check(api_->attr_floats(attrs_, name, &p, &n), name, "floats");
    return std::vector<float>(p, p + n);
  }

 private:
  static void check(int32_t status, const char* name, const char* kind) {
    if (status != 0) throw std::runtime_error(std::string("attribute '") + name + "' is not a declared " + kind + " attribute");
  }
  const IngotApi* api_;
  const IngotAttributes* attrs_;
};

class KernelContext : public AttributeReader {
 public:
  KernelContext(const IngotApi* api, IngotKernelContext* ctx)
      : AttributeReader(api, api->kernel_attributes(ctx)), api_(api), ctx_(ctx) {}
  int32_t num_inputs() const { return api_->num_inputs(ctx_); }
  int32_t num_outputs() const { return api_->num_outputs(ctx_); }
  bool has_input(int32_t i) const {
    IngotTensor t;
    return i < num_inputs() && api_->input(ctx_, i, &t) == 0;
  }
  TensorRef input(int32_t i) const {
    IngotTensor t;
    if (i >= num_inputs() || api_->input(ctx_, i, &t) != 0)
      throw std::runtime_error("input " + std::to_string(i) + " was not given");
    return TensorRef(t);
  }
  // Allocates output i on the kernel's device.
  TensorRef output(int32_t i, int32_t dtype, const std::vector<int64_t>& shape) {
    IngotTensor t;
    if (api_->allocate_output(ctx_, i, dtype, shape.data(), int32_t(shape.size()), &t) != 0)
      throw std::runtime_error("output " + std::to_string(i) + " could not be allocated");
    return TensorRef(t);
  }
  // The cudaStream_t the kernel's work goes on (nullptr for CPU kernels).
  void* cuda_stream() const { return api_->cuda_stream(ctx_); }
  // fn(begin, end) over [0, n) on Ingot's CPU threads, in chunks of at least `grain`.
  template <class F>
  void parallel_for(int64_t n, int64_t grain, F&& fn) const {
    using Fn = std::remove_reference_t<F>;
    api_->parallel_for(n, grain, [](int64_t b, int64_t e, void* arg) { (*static_cast<Fn*>(arg))(b, e); },
                       const_cast<void*>(static_cast<const void*>(&fn)));
  }

 private:
  const IngotApi* api_;
  IngotKernelContext* ctx_;
};

// The static type of a value in shape inference: dims < 0 unknown, rank < 0 unknown, dtype 0 unknown.
struct ValueType {
  int32_t dtype = 0;
  int32_t rank = -1;
  std::vector<int64_t> dims;
};

class ShapeContext : public AttributeReader {
 public:
  ShapeContext(const IngotApi* api, IngotShapeContext* ctx)
      : AttributeReader(api, api->shape_attributes(ctx)), api_(api), ctx_(ctx) {}
  int32_t num_inputs() const { return api_->shape_num_inputs(ctx_); }
  int32_t num_outputs() const { return api_->shape_num_outputs(ctx_); }
  ValueType input(int32_t i) const {
    IngotValueType t;
    ValueType r;
    if (i < num_inputs() && api_->shape_input(ctx_, i, &t) == 0) {
      r.dtype = t.dtype;
      r.rank = t.rank;
      if (t.rank > 0) r.dims.assign(t.dims, t.dims + t.rank);
    }
    return r;
  }
  void set_output(int32_t i, const ValueType& type) {
    IngotValueType t{type.dtype, type.rank, type.dims.data()};
    api_->shape_set_output(ctx_, i, &t);
  }

 private:
  const IngotApi* api_;
  IngotShapeContext* ctx_;
};

using KernelFunction = void (*)(KernelContext&);
using ShapeFunction = void (*)(ShapeContext&);

namespace detail {
// Runs a kernel or shape function, turning an exception into the context's error (no exception
// crosses the ABI).
template <class Wrapper, class Fn, class Raw>
int32_t guarded(const IngotApi* api, Raw* raw, void* user, void (*report)(Raw*, const char*)) {
  try {
    Wrapper c(api, raw);
    reinterpret_cast<Fn>(user)(c);
    return 0;
  } catch (const std::exception& e) {
    report(raw, e.what());
  } catch (...) {
    report(raw, "unknown exception");
  }
  return 1;
}
inline int32_t run_kernel(const IngotApi* api, IngotKernelContext* ctx, void* user) {
  return guarded<KernelContext, KernelFunction>(api, ctx, user, api->kernel_error);
}
inline int32_t run_shape(const IngotApi* api, IngotShapeContext* ctx, void* user) {
  return guarded<ShapeContext, ShapeFunction>(api, ctx, user, api->shape_error);
}
}  // namespace detail

// One op being declared; the registry hands it to Ingot when the extension's init returns.
class OpBuilder {
 public:
  OpBuilder(std::string domain, std::string name) : domain_(std::move(domain)), name_(std::move(name)) {}
  OpBuilder& since(int32_t version) { since_ = version; return *this; }
  OpBuilder& summary(std::string s) { summary_ = std::move(s); return *this; }
  OpBuilder& input(std::string name, std::string type = "T") { return add_input(std::move(name), std::move(type), 0); }
  OpBuilder& optional_input(std::string name, std::string type = "T") { return add_input(std::move(name), std::move(type), 1); }
  OpBuilder& output(std::string name, std::string type = "T") {
    output_names_.push_back(std::move(name));
    output_types_.push_back(std::move(type));
    return *this;
  }
  OpBuilder& type(std::string var, std::initializer_list<int32_t> dtypes) {
    types_.push_back({std::move(var), std::vector<int32_t>(dtypes)});
    return *this;
  }
  OpBuilder& attr(std::string name, int64_t value) { return add_attr(std::move(name), INGOT_ATTR_INT, 0, value, 0, ""); }
  OpBuilder& attr(std::string name, int value) { return attr(std::move(name), int64_t(value)); }
  OpBuilder& attr(std::string name, float value) { return add_attr(std::move(name), INGOT_ATTR_FLOAT, 0, 0, value, ""); }
  OpBuilder& attr(std::string name, std::string value) {
    return add_attr(std::move(name), INGOT_ATTR_STRING, 0, 0, 0, std::move(value));
  }
  OpBuilder& attr(std::string name, const char* value) { return attr(std::move(name), std::string(value)); }
  // A list attribute (INGOT_ATTR_INTS / INGOT_ATTR_FLOATS), empty by default.
  OpBuilder& list_attr(std::string name, int32_t kind) { return add_attr(std::move(name), kind, 0, 0, 0, ""); }
  OpBuilder& required_attr(std::string name, int32_t kind) { return add_attr(std::move(name), kind, 1, 0, 0, ""); }
  OpBuilder& shape(ShapeFunction fn) { shape_ = fn; return *this; }
  OpBuilder& cpu(KernelFunction fn) { cpu_ = fn; return *this; }
  OpBuilder& cuda(KernelFunction fn) { cuda_ = fn; return *this; }
  OpBuilder& gradient(std::string op) { gradient_ = std::move(op); return *this; }

  // Hands the op to Ingot; false (with the registrar's error set) when it is refused.
  bool submit(const IngotApi* api, IngotRegistrar* registrar) const {
    std::vector<const char*> in_names, in_types, out_names, out_types;
    for (const std::string& s : input_names_) in_names.push_back(s.c_str());
    for (const std::string& s : input_types_) in_types.push_back(s.c_str());
    for (const std::string& s : output_names_) out_names.push_back(s.c_str());
    for (const std::string& s : output_types_) out_types.push_back(s.c_str());
    std::vector<IngotTypeDesc> types;
    for (const auto& t : types_) types.push_back({t.name.c_str(), t.dtypes.data(), int32_t(t.dtypes.size())});
    std::vector<IngotAttrDesc> attrs;
    for (const auto& a : attrs_)
      attrs.push_back({a.name.c_str(), a.kind, a.required, a.default_int, a.default_float, a.default_string.c_str()});
    IngotOpDesc d{};
    d.domain = domain_.c_str();
    d.name = name_.c_str();
    d.since_version = since_;
    d.summary = summary_.c_str();
    d.num_inputs = int32_t(in_names.size());
    d.input_names = in_names.data();
    d.input_types = in_types.data();
    d.input_optional = input_optional_.data();
    d.num_outputs = int32_t(out_names.size());
    d.output_names = out_names.data();
    d.output_types = out_types.data();
    d.num_types = int32_t(types.size());
    d.types = types.data();
    d.num_attrs = int32_t(attrs.size());
    d.attrs = attrs.data();
    if (shape_) d.infer = detail::run_shape, d.infer_user = reinterpret_cast<void*>(shape_);
    if (cpu_) d.cpu_kernel = detail::run_kernel, d.cpu_user = reinterpret_cast<void*>(cpu_);
    if (cuda_) d.cuda_kernel = detail::run_kernel, d.cuda_user = reinterpret_cast<void*>(cuda_);
    d.gradient_op = gradient_.empty() ? nullptr : gradient_.c_str();
    return api->register_op(registrar, &d) == 0;
  }

 private:
  struct Type {
    std::string name;
    std::vector<int32_t> dtypes;
  };
  struct Attr {
    std::string name;
    int32_t kind, required;
    int64_t default_int;
    float default_float;
    std::string default_string;
  };
  OpBuilder& add_input(std::string name, std::string type, int32_t optional) {
    input_names_.push_back(std::move(name));
    input_types_.push_back(std::move(type));
    input_optional_.push_back(optional);
    return *this;
  }
  OpBuilder& add_attr(std::string name, int32_t kind, int32_t required, int64_t i, float f, std::string s) {
    attrs_.push_back({std::move(name), kind, required, i, f, std::move(s)});
    return *this;
  }

  std::string domain_, name_, summary_, gradient_;
  int32_t since_ = 1;
  std::vector<std::string> input_names_, input_types_, output_names_, output_types_;
  std::vector<int32_t> input_optional_;
  std::vector<Type> types_;
  std::vector<Attr> attrs_;
  ShapeFunction shape_ = nullptr;
  KernelFunction cpu_ = nullptr, cuda_ = nullptr;
};

// The ops an extension declares; INGOT_EXTENSION's body fills it. The builder op() returns stays
// valid while the block runs (a deque: declaring more ops never moves earlier ones).
class Registry {
 public:
  OpBuilder& op(std::string domain, std::string name) {
    ops_.emplace_back(std::move(domain), std::move(name));
    return ops_.back();
  }
  int32_t submit(const IngotApi* api, IngotRegistrar* registrar) const {
    for (const OpBuilder& op : ops_)
      if (!op.submit(api, registrar)) return 1;
    return 0;
  }

 private:
  std::deque<OpBuilder> ops_;
};

}  // namespace ingot::ext

// Defines the library's entry points; the body declares its ops on `registry`. Exactly one source
// of an extension uses it (kernels in other sources are declared `void f(ingot::ext::KernelContext&)`).
#define INGOT_EXTENSION(registry)                                                                     \
  static void ingot_extension_declare(::ingot::ext::Registry& registry);                              \
  extern "C" __attribute__((visibility("default"))) uint32_t ingot_extension_abi_version(void) {      \
    return INGOT_EXTENSION_ABI_VERSION;                                                               \
  }                                                                                                   \
  extern "C" __attribute__((visibility("default"))) int32_t ingot_extension_init(const IngotApi* api, \
                                                                                 IngotRegistrar* r) { \
    if (api->abi_version < INGOT_EXTENSION_ABI_VERSION) {                                             \
      api->registrar_error(r, "the extension needs a newer Ingot (extension ABI version too old)");   \
      return 1;                                                                                       \
    }                                                                                                 \
    try {                                                                                             \
      ::ingot::ext::Registry reg;                                                                     \
      ingot_extension_declare(reg);                                                                   \
      return reg.submit(api, r);                                                                      \
    } catch (const std::exception& e) {                                                               \
      api->registrar_error(r, e.what());                                                              \
      return 1;                                                                                       \
    }                                                                                                 \
  }                                                                                                   \
  static void ingot_extension_declare(::ingot::ext::Registry& registry)
