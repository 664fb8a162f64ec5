#include "extension/registry.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstring>
#include <algorithm>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>

#include "core/backend.h"
#include "core/strings.h"
#include "core/thread_pool.h"
#include "ops/gradient.h"
#include "ops/kernel.h"
#include "ops/op_def.h"

#ifndef INGOT_VERSION
#define INGOT_VERSION "0.1.0"
#endif

// The ABI's opaque handles, defined on Ingot's side.
struct IngotAttributes {
  const ingot::OpDef* def;
  const ingot::Attributes* attrs;
};
struct IngotKernelContext {
  ingot::KernelContext* ctx;
  IngotAttributes attrs;
  std::string error;
};
struct IngotShapeContext {
  const std::vector<ingot::StaticType>* inputs;
  std::vector<ingot::StaticType> outputs;
  IngotAttributes attrs;
  std::string error;
};

namespace ingot {
namespace {

// ---- the table handed to libraries

// The dtypes a tensor crossing the ABI may have (ONNX's codes Ingot implements, strings excepted).
bool known_dtype(int32_t code) {
  const DType dt = DType(code);
  return code > 0 && code < 256 && (is_floating(dt) || is_integral(dt) || dt == DType::Bool);
}

IngotTensor tensor_view(const Tensor& t) {
  IngotTensor r{};
  r.data = const_cast<void*>(t.raw_data());
  r.shape = t.shape().data();
  r.rank = int32_t(t.rank());
  r.dtype = int32_t(t.dtype());
  r.device_type = t.device().type == DeviceType::CPU ? INGOT_DEVICE_CPU : INGOT_DEVICE_CUDA;
  r.device_index = t.device().index;
  return r;
}

template <class F>
int32_t read_attr(const IngotAttributes* a, const char* name, AttrKind kind, F&& out) {
  try {
    out(a->def->attribute(*a->attrs, name ? name : "", kind));
    return 0;
  } catch (const Error&) {
    return 1;
  }
}

struct Registrar;
int32_t register_op(IngotRegistrar* r, const IngotOpDesc* op);
void registrar_error(IngotRegistrar* r, const char* message);

const IngotApi kApi = {
    INGOT_EXTENSION_ABI_VERSION,
    INGOT_VERSION,
    register_op,
    registrar_error,
    // kernels
    [](const IngotKernelContext* c) { return int32_t(c->ctx->num_inputs()); },
    [](const IngotKernelContext* c) { return int32_t(c->ctx->num_outputs()); },
    [](const IngotKernelContext* c, int32_t i, IngotTensor* out) -> int32_t {
      if (i < 0 || !c->ctx->has_input(size_t(i)) || c->ctx->input_value(size_t(i)).kind != Value::Kind::Tensor) return 1;
      *out = tensor_view(c->ctx->input(size_t(i)));
      return 0;
    },
    [](IngotKernelContext* c, int32_t i, int32_t dtype, const int64_t* shape, int32_t rank, IngotTensor* out) -> int32_t {
      try {
        if (i < 0 || size_t(i) >= c->ctx->num_outputs())
          fail("output {} does not exist (the node has {} outputs)", i, c->ctx->num_outputs());
        if (!known_dtype(dtype)) fail("output {}: unknown dtype code {}", i, dtype);
        if (rank < 0 || (rank > 0 && !shape)) fail("output {}: rank {} without a shape", i, rank);
        Shape s(shape, shape + rank);
        for (int64_t d : s)
          if (d < 0) fail("output {}: negative dimension in {}", i, shape_str(s));
        *out = tensor_view(c->ctx->allocate(size_t(i), DType(dtype), std::move(s)));
        return 0;
      } catch (const Error& e) {
        c->error = e.what();
        return 1;
      }
    },
    [](const IngotKernelContext* c) { return static_cast<const IngotAttributes*>(&c->attrs); },
    [](const IngotKernelContext* c) -> void* {
      const Device d = c->ctx->device();
      if (d.type == DeviceType::CPU) return nullptr;
      Backend* b = find_backend(d.type);
      return b ? b->native_stream(d.index) : nullptr;
    },
    [](int64_t n, int64_t grain, void (*fn)(int64_t, int64_t, void*), void* arg) {
      parallel_for(n, std::max<int64_t>(grain, 1), [&](int64_t b, int64_t e) { fn(b, e, arg); });
    },
    [](IngotKernelContext* c, const char* message) { c->error = message ? message : "(no message)"; },
    // attributes
    [](const IngotAttributes* a, const char* name, int64_t* out) {
      return read_attr(a, name, AttrKind::Int, [&](const Attribute& v) { *out = v.i; });
    },
    [](const IngotAttributes* a, const char* name, float* out) {
      return read_attr(a, name, AttrKind::Float, [&](const Attribute& v) { *out = v.f; });
    },
    [](const IngotAttributes* a, const char* name, const char** out, size_t* size) {
      return read_attr(a, name, AttrKind::String, [&](const Attribute& v) {
        *out = v.s.data();
        *size = v.s.size();
      });
    },
    [](const IngotAttributes* a, const char* name, const int64_t** out, size_t* count) {
      return read_attr(a, name, AttrKind::Ints, [&](const Attribute& v) {
        *out = v.ints.data();
        *count = v.ints.size();
      });
    },
    [](const IngotAttributes* a, const char* name, const float** out, size_t* count) {
      return read_attr(a, name, AttrKind::Floats, [&](const Attribute& v) {
        *out = v.floats.data();
        *count = v.floats.size();
      });
    },
    // shape inference
    [](const IngotShapeContext* c) { return int32_t(c->inputs->size()); },
    [](const IngotShapeContext* c) { return int32_t(c->outputs.size()); },
    [](const IngotShapeContext* c, int32_t i, IngotValueType* out) -> int32_t {
      if (i < 0 || size_t(i) >= c->inputs->size()) return 1;
      const StaticType& t = (*c->inputs)[size_t(i)];
      if (t.dtype == DType::Undefined && t.rank < 0) return 1;  // omitted
      *out = IngotValueType{int32_t(t.dtype), t.rank, t.dims.data()};
      return 0;
    },
    [](const IngotShapeContext* c) { return static_cast<const IngotAttributes*>(&c->attrs); },
    [](IngotShapeContext* c, int32_t i, const IngotValueType* type) {
      if (i < 0 || size_t(i) >= c->outputs.size()) {
        c->error = fmt::format("set_output({}): the node has {} outputs", i, c->outputs.size());
        return;
      }
      StaticType& t = c->outputs[size_t(i)];
      t.dtype = known_dtype(type->dtype) ? DType(type->dtype) : DType::Undefined;
      t.rank = type->rank;
      t.dims.assign(type->dims, type->dims + std::max(type->rank, 0));
    },
    [](IngotShapeContext* c, const char* message) { c->error = message ? message : "(no message)"; },
};

// ---- what an extension op's catalogue entry and kernels run

// Every extension kernel, on every backend: the library's function for the kernel's device.
void run_kernel(KernelContext& ctx) {
  const ExtensionOp& op = *ctx.def().extension;
  const bool cuda = ctx.device().type == DeviceType::CUDA;
  // The declared dtypes, checked before the library sees the inputs (eager calls reach kernels
  // without placement's checks; a kernel must never read memory as a dtype it is not).
  const OpSignature& sig = ctx.def().signature();
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i) || ctx.input_value(i).kind != Value::Kind::Tensor) continue;
    const ParamDef* p = sig.input(i);
    const TypeVar* var = p ? sig.type_var(p->type) : nullptr;
    const DType dt = ctx.input(i).dtype();
    if (var && !var->allowed.empty() && std::find(var->allowed.begin(), var->allowed.end(), dt) == var->allowed.end())
      fail("input {} ({}): {} is not among the dtypes the op takes ({})", i, p->name, dtype_name(dt),
           join(var->allowed, ", ", [](DType d) { return std::string(dtype_name(d)); }));
  }
  IngotKernelContext c{&ctx, {&ctx.def(), &ctx.attrs()}, {}};
  const int32_t status = cuda ? op.cuda(&kApi, &c, op.cuda_user) : op.cpu(&kApi, &c, op.cpu_user);
  if (status != 0)
    fail("extension '{}' {} kernel: {}", op.library->name, cuda ? "CUDA" : "CPU",
         c.error.empty() ? std::string("failed (no message)") : c.error);
}

std::vector<StaticType> shape_rule(const OpDef& def, const Attributes& attrs, const std::vector<StaticType>& inputs) {
  const ExtensionOp& op = *def.extension;
  const size_t outputs = size_t(def.max_outputs < 0 ? def.min_outputs : def.max_outputs);
  IngotShapeContext c{&inputs, std::vector<StaticType>(outputs), {&def, &attrs}, {}};
  if (!op.infer) {
    for (StaticType& t : c.outputs) t = inputs.empty() ? StaticType{} : inputs[0];
    return c.outputs;
  }
  if (op.infer(&kApi, &c, op.infer_user) != 0 || !c.error.empty())
    fail("extension '{}': shape inference of {}: {}", op.library->name, def.name, c.error.empty() ? "failed" : c.error);
  return c.outputs;
}

// The gradient rule of every extension op that names a gradient op: that op, on (inputs, outputs,
// cotangents), returns each input's gradient.
void vjp(GradBuilder& b) {
  const ExtensionOp& op = *b.def().extension;
  // Fixed positions whatever the node omits: all declared inputs (omitted ones stay omitted), then
  // all declared outputs, then their cotangents.
  const size_t n_in = b.def().max_inputs >= 0 ? size_t(b.def().max_inputs) : b.num_inputs();
  const size_t n_out = b.def().max_outputs >= 0 ? size_t(b.def().max_outputs) : b.num_outputs();
  std::vector<GradValue> args;
  for (size_t i = 0; i < n_in; ++i) args.push_back(i < b.num_inputs() ? b.x(i) : GradValue{});
  for (size_t i = 0; i < n_out; ++i) args.push_back(i < b.num_outputs() ? b.y(i) : GradValue{});
  for (size_t i = 0; i < n_out; ++i) {
    const bool flows = i < b.num_outputs() && b.dy(i).defined();
    args.push_back(flows ? b.dy(i) : i < b.num_outputs() ? b.zeros_like(b.y(i)) : GradValue{});
  }
  std::vector<GradValue> grads = b.call(op.gradient_op, args, b.attrs(), int(n_in), b.def().domain);
  for (size_t i = 0; i < b.num_inputs() && i < grads.size(); ++i) {
    if (b.wants(i) && grads[i].defined()) b.grad(i, grads[i]);
  }
}

// ---- registration

bool reserved_domain(std::string_view d) {
  return d.empty() || d == "ai.onnx" || d == "ai.onnx.ml" || d == "ai.onnx.preview.training" || d == kIngotDomain;
}

struct PendingOp {
  OpDef def;
  std::unique_ptr<ExtensionOp> ext;
  std::vector<std::string> type_vars;
};

}  // namespace
}  // namespace ingot

struct IngotRegistrar {
  std::string library;
  std::vector<ingot::PendingOp> ops;
  std::string error;
};

namespace ingot {
namespace {

std::string str_or(const char* s, const char* fallback = "") { return s ? s : fallback; }

void add_op(IngotRegistrar& r, const IngotOpDesc& d) {
  const std::string domain = str_or(d.domain), name = str_or(d.name);
  if (name.empty()) fail("an op without a name");
  const std::string what = fmt::format("op {}::{}", domain, name);
  if (reserved_domain(domain))
    fail("{}: extension ops live in a domain of their own ('{}' is ONNX's or Ingot's)", what, domain);
  if (!d.cpu_kernel && !d.cuda_kernel) fail("{}: neither a CPU nor a CUDA kernel", what);
  if (d.num_inputs < 0 || d.num_outputs < 1) fail("{}: {} inputs and {} outputs", what, d.num_inputs, d.num_outputs);
  OpBuilder b(name);
  b.domain(domain).versions(std::max(d.since_version, 1)).summary(str_or(d.summary, "an extension op"));
  PendingOp p;
  for (int32_t t = 0; t < d.num_types; ++t) {
    std::vector<DType> allowed;
    for (int32_t k = 0; k < d.types[t].num_dtypes; ++k) {
      if (!known_dtype(d.types[t].dtypes[k])) fail("{}: type {}: unknown dtype code {}", what, str_or(d.types[t].name), d.types[t].dtypes[k]);
      allowed.push_back(DType(d.types[t].dtypes[k]));
    }
    b.type(str_or(d.types[t].name), allowed);
    p.type_vars.push_back(str_or(d.types[t].name));
  }
  auto type_of = [&](const char* const* types, int32_t i, const char* role) {
    std::string t = types && types[i] ? types[i] : "T";
    if (d.num_types > 0 && std::find(p.type_vars.begin(), p.type_vars.end(), t) == p.type_vars.end())
      fail("{}: {} {} has type '{}', which the op does not declare", what, role, i, t);
    return t;
  };
  bool optional_seen = false;
  for (int32_t i = 0; i < d.num_inputs; ++i) {
    const std::string in = d.input_names && d.input_names[i] ? d.input_names[i] : fmt::format("input{}", i);
    const bool optional = d.input_optional && d.input_optional[i];
    if (!optional && optional_seen) fail("{}: required input '{}' after an optional one", what, in);
    optional_seen |= optional;
    optional ? b.optional_input(in, type_of(d.input_types, i, "input")) : b.input(in, type_of(d.input_types, i, "input"));
  }
  for (int32_t i = 0; i < d.num_outputs; ++i)
    b.output(d.output_names && d.output_names[i] ? d.output_names[i] : fmt::format("output{}", i),
             type_of(d.output_types, i, "output"));
  for (int32_t i = 0; i < d.num_attrs; ++i) {
    const IngotAttrDesc& a = d.attrs[i];
    const std::string an = str_or(a.name);
    if (an.empty()) fail("{}: attribute {} has no name", what, i);
    AttrKind kind;
    Attribute def;
    switch (a.kind) {
      case INGOT_ATTR_INT: kind = AttrKind::Int, def = Attribute(a.default_int); break;
      case INGOT_ATTR_FLOAT: kind = AttrKind::Float, def = Attribute(a.default_float); break;
      case INGOT_ATTR_STRING: kind = AttrKind::String, def = Attribute(str_or(a.default_string)); break;
      case INGOT_ATTR_INTS: kind = AttrKind::Ints, def = Attribute(std::vector<int64_t>{}); break;
      case INGOT_ATTR_FLOATS: kind = AttrKind::Floats, def = Attribute(std::vector<float>{}); break;
      default: fail("{}: attribute '{}' has unknown kind {}", what, an, a.kind);
    }
    a.required ? b.required_attr(an, kind) : b.attr(an, def);
  }
  p.def = std::move(b.def());
  p.ext = std::make_unique<ExtensionOp>();
  p.ext->cpu = d.cpu_kernel, p.ext->cpu_user = d.cpu_user;
  p.ext->cuda = d.cuda_kernel, p.ext->cuda_user = d.cuda_user;
  p.ext->infer = d.infer, p.ext->infer_user = d.infer_user;
  p.ext->gradient_op = str_or(d.gradient_op);
  p.def.shape_rule = shape_rule;
  if (!p.ext->gradient_op.empty()) p.def.vjp = vjp;
  for (const PendingOp& q : r.ops)
    if (q.def.domain == domain && q.def.name == name) fail("{} is registered twice", what);
  r.ops.push_back(std::move(p));
}

int32_t register_op(IngotRegistrar* r, const IngotOpDesc* op) {
  try {
    if (!op) fail("register_op: no op description");
    add_op(*r, *op);
    return 0;
  } catch (const Error& e) {
    if (r->error.empty()) r->error = e.what();
    return 1;
  }
}

void registrar_error(IngotRegistrar* r, const char* message) {
  if (r->error.empty()) r->error = message ? message : "(no message)";
}

// ---- loaded libraries

struct Libraries {
  std::mutex mutex;
  std::deque<ExtensionLibrary> loaded;  // a deque: entries never move (ExtensionOps point to them)
  std::deque<std::unique_ptr<ExtensionOp>> ops;
};
Libraries& libs() {
  static Libraries* l = new Libraries;  // never destroyed: kernels may run until exit
  return *l;
}

std::string digest_of(const std::vector<uint8_t>& bytes) {
  return fmt::format("{:016x}", XXH64(bytes.data(), bytes.size(), 0));
}

// Which loaded library (or Ingot itself) already defines domain::name, for the refusal message.
std::string owner_of(const OpDef& def) {
  if (!def.extension) return "Ingot";
  return fmt::format("extension '{}' (build {})", def.extension->library->name, def.extension->library->digest);
}

// dlopen + init + registration; libs().mutex is held.
const ExtensionLibrary& load_locked(const std::string& name, const std::string& digest, const std::string& dl_path,
                                    const std::string& shown_path,
                                    std::vector<uint8_t> bytes) {
  Libraries& l = libs();
  for (const ExtensionLibrary& lib : l.loaded)
    if (lib.digest == digest) return lib;
  void* handle = dlopen(dl_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) fail("cannot load it: {}", str_or(dlerror(), "dlopen failed"));
  auto version = reinterpret_cast<uint32_t (*)()>(dlsym(handle, "ingot_extension_abi_version"));
  auto init = reinterpret_cast<int32_t (*)(const IngotApi*, IngotRegistrar*)>(dlsym(handle, "ingot_extension_init"));
  if (!version || !init)
    fail("not an Ingot extension: it exports no ingot_extension_init/ingot_extension_abi_version (define its ops in "
         "an INGOT_EXTENSION block, <ingot/extension.h>)");
  const uint32_t v = version();
  if (v == 0 || v > INGOT_EXTENSION_ABI_VERSION)
    fail("built for extension ABI version {}; this Ingot ({}) supports versions 1 to {}: rebuild it against this "
         "Ingot's headers", v, INGOT_VERSION, INGOT_EXTENSION_ABI_VERSION);
  IngotRegistrar registrar{name, {}, {}};
  if (init(&kApi, &registrar) != 0 || !registrar.error.empty())
    fail("its initialization failed: {}", registrar.error.empty() ? "(no message)" : registrar.error);
  if (registrar.ops.empty()) fail("it defines no op");
  // Check everything before adding anything: a refused library leaves the catalogue as it was.
  OpCatalogue& catalogue = OpCatalogue::instance();
  for (const PendingOp& p : registrar.ops) {
    if (const OpDef* existing = catalogue.find(p.def.domain, p.def.name))
      fail("op {}::{} is already defined by {} in this process; a loaded op cannot be redefined (restart the "
           "process to use this build)", p.def.domain, p.def.name, owner_of(*existing));
    const std::string& g = p.ext->gradient_op;
    if (g.empty()) continue;
    const OpDef* grad = nullptr;
    for (const PendingOp& q : registrar.ops)
      if (q.def.name == g && q.def.domain == p.def.domain) grad = &q.def;
    if (!grad) grad = catalogue.find(p.def.domain, g);
    if (!grad) fail("op {}::{} names gradient op '{}', which is not defined in domain '{}'", p.def.domain, p.def.name, g, p.def.domain);
    const int n_in = p.def.max_inputs, n_out = p.def.max_outputs;
    const int want = n_in + 2 * n_out;
    if (want < grad->min_inputs || (grad->max_inputs >= 0 && want > grad->max_inputs) || n_in < grad->min_outputs ||
        (grad->max_outputs >= 0 && n_in > grad->max_outputs))
      fail("gradient op {}::{} of {} must take {} inputs ({} inputs, {} outputs, {} cotangents) and give {} outputs",
           p.def.domain, g, p.def.name, want, n_in, n_out, n_out, n_in);
  }
  ExtensionLibrary& lib = l.loaded.emplace_back();
  lib.name = name;
  lib.digest = digest;
  lib.path = shown_path;
  lib.bytes = std::move(bytes);
  lib.handle = handle;
  for (PendingOp& p : registrar.ops) {
    p.ext->library = &lib;
    ExtensionOp* ext = l.ops.emplace_back(std::move(p.ext)).get();
    p.def.extension = ext;
    lib.ops.push_back(p.def.domain + "::" + p.def.name);
    auto add_kernel = [&](DeviceType backend) {
      KernelBuilder k(p.def.name, backend, run_kernel);
      k.domain(p.def.domain).versions(p.def.since_version);
      for (const TypeVar& t : p.def.declared.types)
        if (!t.allowed.empty()) k.types(t.name, t.allowed);
      KernelRegistry::instance().add(std::move(k.def()));
    };
    if (ext->cpu) add_kernel(DeviceType::CPU);
    if (ext->cuda && find_backend(DeviceType::CUDA)) add_kernel(DeviceType::CUDA);
    catalogue.add(std::move(p.def));
  }
  return lib;
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read it ({})", std::strerror(errno));
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

ExtensionInfo ExtensionLibrary::info() const {
  ExtensionInfo i;
  i.name = name;
  i.library = path.empty() ? "(embedded)" : path;
  i.digest = digest;
  i.ops = ops;
  return i;
}

namespace extension {

const ExtensionLibrary& load_file(const std::string& path, const std::string& name) {
  std::string lib_name = name;
  if (lib_name.empty()) {
    lib_name = std::filesystem::path(path).stem().string();
    if (lib_name.rfind("lib", 0) == 0 && lib_name.size() > 3) lib_name = lib_name.substr(3);
  }
  try {
    if (!std::filesystem::exists(path)) fail("no such file");
    std::vector<uint8_t> bytes = read_bytes(path);
    std::lock_guard lock(libs().mutex);
    // An absolute path: dlopen must not search the library path for a relative one.
    const std::string digest = digest_of(bytes);
    return load_locked(lib_name, digest, std::filesystem::absolute(path).string(), path, std::move(bytes));
  } catch (Error& e) {
    e.add_context(fmt::format("extension library '{}'", path));
    throw;
  }
}

const ExtensionLibrary& load_bytes(const std::string& name, const std::vector<uint8_t>& bytes) {
  try {
    std::lock_guard lock(libs().mutex);
    const std::string digest = digest_of(bytes);
    for (const ExtensionLibrary& lib : libs().loaded)
      if (lib.digest == digest) return lib;
    const int fd = memfd_create(("ingot-ext-" + name).c_str(), MFD_CLOEXEC);
    if (fd < 0) fail("memfd_create: {}", std::strerror(errno));
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
      if (n <= 0) {
        close(fd);
        fail("writing the library to memory: {}", std::strerror(errno));
      }
      done += size_t(n);
    }
    struct Closer {
      int fd;
      ~Closer() { close(fd); }
    } closer{fd};
    return load_locked(name, digest, fmt::format("/proc/self/fd/{}", fd), "", bytes);
  } catch (Error& e) {
    e.add_context(fmt::format("extension '{}' embedded in the package", name));
    throw;
  }
}

std::vector<const ExtensionLibrary*> libraries() {
  std::lock_guard lock(libs().mutex);
  std::vector<const ExtensionLibrary*> out;
  for (const ExtensionLibrary& l : libs().loaded) out.push_back(&l);
  return out;
}

}  // namespace extension

ExtensionInfo load_extension_library(const std::string& path) { return extension::load_file(path).info(); }

std::vector<ExtensionInfo> loaded_extensions() {
  std::vector<ExtensionInfo> out;
  for (const ExtensionLibrary* l : extension::libraries()) out.push_back(l->info());
  return out;
}

}  // namespace ingot
