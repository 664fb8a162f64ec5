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
