// The op catalogue and kernel registry as shared structures: op facts (tags) read by the passes,
// entries that never move while kernels are added, duplicates refused, and concurrent use.
#include <gtest/gtest.h>

#include <ingot/error.h>

#include <atomic>
#include <climits>
#include <thread>

#include "ops/kernel.h"
#include "ops/op_def.h"

namespace ingot {
namespace {

TEST(OpTags, AutocastAndLayoutFactsLiveWithTheOps) {
  const OpCatalogue& c = OpCatalogue::instance();
  // PyTorch's lower_precision_fp list, Ingot's fused forms of it included.
  for (const char* op : {"Conv", "ConvTranspose", "MatMul", "Gemm"}) EXPECT_TRUE(c.has_tag("", op, OpTag::AutocastLowPrecision)) << op;
  for (const char* op : {"FusedConv", "FusedMatMul", "Attention"})
    EXPECT_TRUE(c.has_tag("ai.ingot", op, OpTag::AutocastLowPrecision)) << op;
  // Kept in float32: exponentials, powers, reductions, the other normalizations, recurrent cells.
  for (const char* op : {"Exp", "Log", "Pow", "ReduceSum", "ReduceMean", "BatchNormalization", "LSTM", "Range"}) {
    EXPECT_FALSE(c.has_tag("", op, OpTag::AutocastLowPrecision)) << op;
    EXPECT_FALSE(c.has_tag("", op, OpTag::AutocastFollow)) << op;
    EXPECT_FALSE(c.has_tag("", op, OpTag::Float32Inside)) << op;
  }
  for (const char* op : {"Add", "Relu", "Concat", "Reshape", "MaxPool", "Resize", "Where", "TopK"})
    EXPECT_TRUE(c.has_tag("", op, OpTag::AutocastFollow)) << op;
  for (const char* op : {"Softmax", "LogSoftmax", "LayerNormalization", "Erf"})
    EXPECT_TRUE(c.has_tag("", op, OpTag::Float32Inside)) << op;
  // Elementwise: every unary/binary/variadic math op and activation; not data movement or CastLike.
  for (const char* op : {"Add", "Pow", "Equal", "Where", "Max", "Exp", "Erf", "Relu", "Clip", "Cast", "PRelu"})
    EXPECT_TRUE(c.has_tag("", op, OpTag::Elementwise)) << op;
  for (const char* op : {"CastLike", "Concat", "Transpose", "Softmax", "MatMul", "Expand"})
    EXPECT_FALSE(c.has_tag("", op, OpTag::Elementwise)) << op;
  EXPECT_TRUE(c.has_tag("ai.ingot", "FusedElementwise", OpTag::Elementwise));
  EXPECT_TRUE(c.has_tag("ai.onnx", "Add", OpTag::Elementwise));  // the default domain by either name
  EXPECT_FALSE(c.has_tag("", "NoSuchOp", OpTag::Elementwise));
}

void test_kernel(KernelContext&) {}

// A kernel for a test-only op, defined in the catalogue first (every kernel's op is: runtime_test).
KernelDef test_kernel_def(const std::string& op, DeviceType backend = DeviceType::CPU) {
  if (!OpCatalogue::instance().find("", op)) {
    OpBuilder def(op);
    OpCatalogue::instance().add(std::move(def.def()));
  }
  KernelBuilder b(op, backend, test_kernel);
  return std::move(b.def());
}

TEST(KernelRegistry, EntriesStayPutWhileKernelsAreAdded) {
  KernelRegistry& r = KernelRegistry::instance();
  const KernelDef* relu = r.find("", "Relu", DeviceType::CPU, 14);
  ASSERT_NE(relu, nullptr);
  const std::string op = relu->op;
  // Enough additions to reallocate any vector several times over.
  for (int i = 0; i < 2000; ++i) {
    r.add(test_kernel_def("RegistryTestOp" + std::to_string(i)));
  }
  EXPECT_EQ(r.find("", "Relu", DeviceType::CPU, 14), relu);
  EXPECT_EQ(relu->op, op);
  EXPECT_NE(r.find("", "RegistryTestOp1999", DeviceType::CPU, 1), nullptr);
}

TEST(KernelRegistry, RefusesAKernelThatWouldShadowAnother) {
  KernelRegistry& r = KernelRegistry::instance();
  auto kernel = [](int since, int until, std::vector<DType> dtypes, DeviceType backend = DeviceType::CPU) {
    KernelDef k = test_kernel_def("RegistryDupOp", backend);
    k.since_version = since;
    k.until_version = until;
    k.dtypes = std::move(dtypes);
    return k;
  };
  r.add(kernel(1, 10, {DType::Float32}));
  try {
    r.add(kernel(5, INT_MAX, {DType::Float32, DType::Float16}));
    FAIL() << "an overlapping kernel was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CPU kernel for RegistryDupOp is registered twice"), std::string::npos)
        << e.what();
  }
  // Other opsets, other dtypes, or another backend are separate kernels.
  EXPECT_NO_THROW(r.add(kernel(11, INT_MAX, {DType::Float32})));
  EXPECT_NO_THROW(r.add(kernel(1, 10, {DType::Int64})));
  EXPECT_NO_THROW(r.add(kernel(1, INT_MAX, {}, DeviceType::CUDA)));
}

// Lookups from many threads while another thread adds kernels (ThreadSanitizer checks the locking).
TEST(KernelRegistry, LookupsAndAdditionsFromManyThreads) {
  KernelRegistry& r = KernelRegistry::instance();
  std::atomic<int> found{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 500; ++i) found += r.find("", "Conv", DeviceType::CPU, 11) != nullptr;
    });
  }
  threads.emplace_back([&] {
    for (int i = 0; i < 200; ++i) {
      r.add(test_kernel_def("RegistryConcurrentOp" + std::to_string(i)));
    }
  });
  for (auto& th : threads) th.join();
  EXPECT_EQ(found.load(), 4 * 500);
  EXPECT_NE(r.find("", "RegistryConcurrentOp199", DeviceType::CPU, 1), nullptr);
}

}  // namespace
}  // namespace ingot

// ---- signatures: named inputs and type variables ----

#include <ingot/session.h>

#include <filesystem>

#include "onnx/onnx_import.h"
#include "test_util.h"

namespace ingot {
namespace {

TEST(OpSignature, OnnxOpsTakeLibonnxsSchemas) {
  const OpCatalogue& c = OpCatalogue::instance();
  const OpSignature& q = c.find("", "QLinearConv")->signature();
  ASSERT_TRUE(q.known());
  ASSERT_EQ(q.inputs.size(), 9u);
  EXPECT_EQ(q.inputs[0].name, "x");
  EXPECT_EQ(q.inputs[0].type, "T1");
  EXPECT_EQ(q.inputs[3].name, "w");
  EXPECT_EQ(q.inputs[3].type, "T2");
  EXPECT_EQ(q.inputs[8].name, "B");
  EXPECT_EQ(q.inputs[8].type, "T4");
  EXPECT_EQ(q.inputs[8].arity, ParamDef::Arity::Optional);
  ASSERT_NE(q.type_var("T4"), nullptr);
  EXPECT_EQ(q.type_var("T4")->allowed, std::vector<DType>{DType::Int32});
  // A parameter of one fixed type gets a variable of its own: x_scale is tensor(float).
  EXPECT_EQ(q.inputs[1].type, "tensor(float)");
  EXPECT_EQ(q.type_var("tensor(float)")->allowed, std::vector<DType>{DType::Float32});

  const OpSignature& concat = c.find("", "Concat")->signature();
  ASSERT_EQ(concat.inputs.size(), 1u);
  EXPECT_EQ(concat.inputs[0].arity, ParamDef::Arity::Variadic);
  EXPECT_EQ(concat.input(5), &concat.inputs[0]);  // every input binds to the variadic parameter
  const OpSignature& conv = c.find("", "Conv")->signature();
  EXPECT_EQ(conv.input(3), nullptr);
  auto bound = conv.bind_types({DType::Undefined, DType::Float16});
  EXPECT_EQ(bound.at("T"), DType::Float16);  // from W, as X's is not known
  // Ingot's own ops declare theirs.
  const OpSignature& fused = c.find(kIngotDomain, "FusedElementwise")->signature();
  ASSERT_TRUE(fused.known());
  EXPECT_EQ(fused.input(7), &fused.inputs[0]);
}

// Dtype inference from the schema against ONNX's own type inference: every node of the ONNX backend
// suite whose output dtype libonnx inferred (the importer runs it) gets the same dtype from
// OpDef::output_dtype, or Undefined; and most are inferred.
TEST(OpSignature, OutputDtypesAgreeWithOnnxTypeInferenceOnTheBackendSuite) {
  const std::filesystem::path suite = "/usr/share/libonnx-testdata/data/node";
  if (!std::filesystem::exists(suite)) GTEST_SKIP() << "no " << suite << " (Debian libonnx-testdata)";
  int known = 0, inferred = 0;
  std::vector<std::string> wrong;
  for (const auto& dir : std::filesystem::directory_iterator(suite)) {
    std::shared_ptr<Model> model;
    try {
      model = import_onnx((dir.path() / "model.onnx").string());
    } catch (const Error&) {
      continue;  // ops Ingot does not have: test-onnx reports those
    }
    const Graph& g = *model->graph;
    auto dtype_of = [&](const std::string& v) {
      if (auto it = g.initializers.find(v); it != g.initializers.end()) return it->second.dtype();
      const ValueInfo* vi = g.find_value_info(v);
      return vi && vi->type.kind == ValueKind::Tensor ? vi->type.dtype : DType::Undefined;
    };
    for (const Node& n : g.nodes) {
      const OpDef* def = OpCatalogue::instance().find(n.domain, n.op_type);
      if (!def) continue;
      std::vector<DType> inputs;
      for (const std::string& in : n.inputs) inputs.push_back(in.empty() ? DType::Undefined : dtype_of(in));
      for (size_t i = 0; i < n.outputs.size(); ++i) {
        DType expected = n.outputs[i].empty() ? DType::Undefined : dtype_of(n.outputs[i]);
        if (expected == DType::Undefined) continue;
        ++known;
        DType got = def->output_dtype(n.attrs, i, inputs);
        if (got == DType::Undefined) continue;
        ++inferred;
        if (got != expected) {
          wrong.push_back(fmt::format("{}: {} output {} is {}, inferred {}", dir.path().filename().string(),
                                      n.op_type, i, dtype_name(expected), dtype_name(got)));
        }
      }
    }
  }
  EXPECT_TRUE(wrong.empty()) << wrong.size() << " disagree, e.g. " << wrong.front();
  EXPECT_GT(known, 1000);
  EXPECT_GE(inferred, known * 95 / 100) << inferred << " of " << known << " inferred";
}

TEST(OpSignature, AttributesDecideTheDtypeWhereNoInputDoes) {
  const OpCatalogue& c = OpCatalogue::instance();
  Attributes to_half{{"to", Attribute(int64_t(DType::Float16))}};
  EXPECT_EQ(c.find("", "Cast")->output_dtype(to_half, 0, {DType::Float32}), DType::Float16);
  EXPECT_EQ(c.find("", "RandomNormal")->output_dtype({}, 0, {}), DType::Float32);  // the default dtype = 1
  EXPECT_EQ(c.find("", "EyeLike")->output_dtype({}, 0, {DType::Int32}), DType::Int32);  // the input's
  EXPECT_EQ(c.find("", "Constant")->output_dtype({{"value_ints", Attribute(Ints{1, 2})}}, 0, {}), DType::Int64);
  EXPECT_EQ(c.find("", "ConstantOfShape")->output_dtype({}, 0, {DType::Int64}), DType::Float32);
  // Ingot's LayerNormalization: Y follows X, Mean and InvStdDev are float32.
  const OpDef* ln = c.find(kIngotDomain, "LayerNormalization");
  EXPECT_EQ(ln->output_dtype({}, 0, {DType::BFloat16, DType::BFloat16}), DType::BFloat16);
  EXPECT_EQ(ln->output_dtype({}, 2, {DType::BFloat16, DType::BFloat16}), DType::Float32);
}

TEST(OpSignature, DeclaredInputsSetTheArity) {
  OpBuilder b("SignatureTestOp");
  b.domain("ai.ingot.test")
      .input("X", "T")
      .input("W", "T")
      .optional_input("B", "T")
      .output("Y", "T")
      .type("T", {DType::Float32, DType::Float16});
  OpDef& def = b.def();
  EXPECT_EQ(def.min_inputs, 2);
  EXPECT_EQ(def.max_inputs, 3);
  EXPECT_EQ(def.signature().inputs[2].name, "B");
  EXPECT_EQ(def.signature().input(3), nullptr);
}

// Every kernel's type constraints name variables of its op's signature.
TEST(OpSignature, KernelConstraintsNameTheOpsVariables) {
  int constrained = 0;
  for (const KernelDef* k : KernelRegistry::instance().all()) {
    if (k->type_constraints.empty()) continue;
    ++constrained;
    const OpDef* def = OpCatalogue::instance().find(k->domain, k->op);
    ASSERT_NE(def, nullptr) << k->op;
    for (const auto& [var, allowed] : k->type_constraints) {
      EXPECT_NE(def->signature().type_var(var), nullptr) << k->op << " constrains " << var;
    }
  }
  EXPECT_GE(constrained, 4);  // the integer convolutions and products
}

// QLinearConv's kernel is matched on all its type variables: a float bias (T4 takes int32 only) is
// refused at load, naming the input; the int32 bias loads.
TEST(OpSignature, KernelsAreMatchedOnEveryTypeVariable) {
  using namespace ingot::testing;
  auto model = [](int bias_type) {
    onnx::GraphProto g;
    g.set_name("qconv");
    *g.add_input() = static_tensor_info("x", onnx::TensorProto::UINT8, {1, 1, 2, 2});
    *g.add_output() = static_tensor_info("y", onnx::TensorProto::UINT8, {1, 1, 2, 2});
    auto add = [&](const std::string& name, int type, std::vector<int64_t> dims, double v) {
      auto* t = g.add_initializer();
      t->set_name(name);
      t->set_data_type(type);
      for (int64_t d : dims) t->add_dims(d);
      if (type == onnx::TensorProto::FLOAT) t->add_float_data(float(v));
      else t->add_int32_data(int32_t(v));
    };
    add("xs", onnx::TensorProto::FLOAT, {}, 0.5);
    add("xz", onnx::TensorProto::UINT8, {}, 3);
    add("w", onnx::TensorProto::INT8, {1, 1, 1, 1}, 2);
    add("ws", onnx::TensorProto::FLOAT, {}, 0.25);
    add("wz", onnx::TensorProto::INT8, {}, 0);
    add("ys", onnx::TensorProto::FLOAT, {}, 0.125);
    add("yz", onnx::TensorProto::UINT8, {}, 1);
    add("b", bias_type, {1}, 4);
    *g.add_node() = make_node("QLinearConv", {"x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"}, {"y"}, "qc");
    return save_model(model_with(g), bias_type == onnx::TensorProto::FLOAT ? "qconv_fb.onnx" : "qconv_ib.onnx");
  };
  try {
    Session::load(model(onnx::TensorProto::FLOAT));
    FAIL() << "a float bias was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input 8 (B) has dtype float32, but the kernel takes int32 for T4"),
              std::string::npos)
        << e.what();
  }
  Session ok = Session::load(model(onnx::TensorProto::INT32));
  // y = round((x - 3) * 0.5 * 2 * 0.25 / 0.125 + 4 * 0.5 * 0.25 / 0.125) + 1 = 2 (x - 3) + 4 + 1
  std::vector<Tensor> y = ok.run({Tensor::from_vector<uint8_t>({3, 4, 5, 6}, {1, 1, 2, 2})});
  EXPECT_EQ(y[0].to_vector<uint8_t>(), (std::vector<uint8_t>{5, 7, 9, 11}));
}

}  // namespace
}  // namespace ingot

// ---- backends ----

#include "core/backend.h"

namespace ingot {
namespace {

TEST(Backends, RegisteredOncePerDeviceTypeAndFoundByTypeOrName) {
  Backend* cpu = find_backend(DeviceType::CPU);
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->name(), "cpu");
  EXPECT_EQ(cpu->label(), "CPU");
  EXPECT_EQ(find_backend("cpu"), cpu);
  EXPECT_EQ(find_backend("no-such-backend"), nullptr);
  EXPECT_EQ(backends().front(), cpu);
  EXPECT_EQ(cpu->graphs(), nullptr);  // the CPU captures nothing
#if INGOT_HAS_CUDA
  ASSERT_NE(find_backend("cuda"), nullptr);
  EXPECT_EQ(find_backend(DeviceType::CUDA)->label(), "CUDA");
  EXPECT_NE(find_backend(DeviceType::CUDA)->graphs(), nullptr);
#endif
  // Tensors allocate through the backend's memory.
  void* p = cpu->memory().allocate(256, 0);
  ASSERT_NE(p, nullptr);
  cpu->memory().fill_zero(p, 256, 0);
  EXPECT_EQ(static_cast<unsigned char*>(p)[255], 0);
  cpu->memory().deallocate(p, 0);
  // A second backend for a device type is refused.
  struct Impostor final : Backend {
    DeviceType type() const override { return DeviceType::CPU; }
    std::string_view name() const override { return "impostor"; }
    DeviceMemory& memory() override { return find_backend(DeviceType::CPU)->memory(); }
  } impostor;
  EXPECT_THROW(register_backend(impostor), Error);
  EXPECT_EQ(find_backend(DeviceType::CPU), cpu);
}

}  // namespace
}  // namespace ingot
