// Dtype coverage of the CPU backend against the ONNX standard, plus value checks of the reduced-
// precision (float16/bfloat16) paths against float64 references.
//
// Coverage: for every ai.onnx op in the catalogue, the types ONNX allows for the op's first input
// (its schema's type constraint, from libonnx) must all be accepted by the CPU kernel, except the
// (op, dtype) pairs in kAllowedGaps below, each with its reason. A second test runs the kernels
// on every such dtype (about a thousand calls), since a declared dtype is only a promise.
#include <gtest/gtest.h>
#include <ingot/ops.h>
#include <onnx/defs/schema.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "ops/kernel.h"
#include "ops/op_def.h"

namespace ingot {
namespace {

// The opset the coverage is checked at (the newest libonnx 1.12 knows).
constexpr int kCoverageOpset = 17;

struct AllowedGap {
  const char* op;
  DType dtype;
  const char* reason;
};

// Known, deliberate gaps. Each needs a reason; "not yet: ..." marks work still to do.
const std::vector<AllowedGap> kAllowedGaps = {
    // Sampling bool or string images has no defined meaning for bilinear/bicubic; neither
    // onnxruntime nor PyTorch support them.
    {"GridSample", DType::Bool, "not applicable: interpolating booleans is undefined"},
    {"GridSample", DType::String, "not applicable: interpolating strings is undefined"},
};

bool is_allowed_gap(const std::string& op, DType dt) {
  return std::any_of(kAllowedGaps.begin(), kAllowedGaps.end(),
                     [&](const AllowedGap& gap) { return gap.op == op && gap.dtype == dt; });
}

// ONNX type string ("tensor(float16)") -> DType; Undefined for types Ingot does not model
// (complex, non-tensor types such as seq(...) or optional(...)).
DType dtype_of_onnx_type(const std::string& type) {
  static const std::map<std::string, DType> kTypes = {
      {"tensor(float)", DType::Float32},     {"tensor(double)", DType::Float64}, {"tensor(float16)", DType::Float16},
      {"tensor(bfloat16)", DType::BFloat16}, {"tensor(int8)", DType::Int8},      {"tensor(int16)", DType::Int16},
      {"tensor(int32)", DType::Int32},       {"tensor(int64)", DType::Int64},    {"tensor(uint8)", DType::UInt8},
      {"tensor(uint16)", DType::UInt16},     {"tensor(uint32)", DType::UInt32},  {"tensor(uint64)", DType::UInt64},
      {"tensor(bool)", DType::Bool},         {"tensor(string)", DType::String},
  };
  auto it = kTypes.find(type);
  return it == kTypes.end() ? DType::Undefined : it->second;
}

// The dtypes ONNX allows for the schema's first input.
std::set<DType> onnx_first_input_dtypes(const onnx::OpSchema& schema) {
  std::set<DType> out;
  const std::string& type_str = schema.inputs()[0].GetTypeStr();
  std::vector<std::string> allowed = {type_str};  // a literal type such as "tensor(int64)"
  for (const auto& param : schema.typeConstraintParams())
    if (param.type_param_str == type_str) allowed = param.allowed_type_strs;
  for (const std::string& t : allowed) {
    DType dt = dtype_of_onnx_type(t);
    if (dt != DType::Undefined) out.insert(dt);
  }
  return out;
}

TEST(DtypeCoverage, CpuKernelsAcceptEveryTypeOnnxAllows) {
  std::set<std::pair<std::string, DType>> allowed;
  for (const AllowedGap& gap : kAllowedGaps) {
    ASSERT_STRNE(gap.reason, "") << gap.op;
    allowed.insert({gap.op, gap.dtype});
  }
  std::vector<std::string> missing;
  std::set<std::pair<std::string, DType>> used_allowances;
  int checked = 0;
  for (const OpDef* def : OpCatalogue::instance().all()) {
    if (!def->domain.empty()) continue;
    // Ops retired before the coverage opset (Scatter, Upsample) are checked at their last version;
    // ops newer than libonnx 1.12 (opset 18+) have no schema to compare with.
    const int opset = std::min(kCoverageOpset, def->until_version);
    if (opset < def->since_version) continue;
    const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(def->name, opset, "");
    if (!schema || schema->inputs().empty()) continue;  // no schema, or no inputs (Constant...)
    const KernelDef* kernel = KernelRegistry::instance().find("", def->name, DeviceType::CPU, opset);
    if (!kernel) {
      missing.push_back(def->name + ": no CPU kernel at opset " + std::to_string(opset));
      continue;
    }
    ++checked;
    if (kernel->dtypes.empty()) continue;  // accepts any dtype
    for (DType dt : onnx_first_input_dtypes(*schema)) {
      if (std::find(kernel->dtypes.begin(), kernel->dtypes.end(), dt) != kernel->dtypes.end()) continue;
      if (allowed.count({def->name, dt})) {
        used_allowances.insert({def->name, dt});
        continue;
      }
      missing.push_back(def->name + ": " + std::string(dtype_name(dt)));
    }
  }
  EXPECT_GT(checked, 150) << "the catalogue or the schema lookup looks broken";
  std::string list;
  for (const std::string& m : missing) list += "\n  " + m;
  EXPECT_TRUE(missing.empty()) << missing.size() << " (op, dtype) pairs ONNX allows lack a CPU kernel:" << list;
  // A stale allowance (the gap was fixed) must be removed so the list stays truthful.
  for (const AllowedGap& gap : kAllowedGaps)
    EXPECT_TRUE(used_allowances.count({gap.op, gap.dtype}))
        << "allow-list entry " << gap.op << " " << dtype_name(gap.dtype) << " is no longer needed";
}

// Declared dtypes are only a promise (and "any dtype" kernels dispatch at run time), so run the
// kernels: with a [2, 3] first input of every dtype ONNX allows (other inputs and attributes per op
// below where the defaults do not do), every call must succeed. Ops with subgraphs (If, Loop, Scan),
// sequence inputs or inputs the table below does not build (Conv, Gemm...) are skipped; the value
// tests further down cover those families.

Tensor probe_tensor(DType dt, const std::vector<float>& values, const Shape& shape) {
  if (dt != DType::String) return Tensor::from_vector(values, shape).cast(dt);
  std::vector<std::string> strings;
  for (float v : values) strings.push_back(std::to_string(int(v)));
  return Tensor::from_vector(strings, shape);
}

Tensor int64s(const std::vector<int64_t>& v, const Shape& shape) { return Tensor::from_vector(v, shape); }

struct Probe {
  std::vector<Tensor> (*inputs)(const Tensor& x);  // all inputs, given the [2, 3] first input
  Attributes attrs;
};

// Inputs and attributes for the "any dtype" ops that a lone [2, 3] input without attributes does not
// satisfy.
const std::map<std::string, Probe>& multi_input_probes() {
  static const std::map<std::string, Probe> kProbes = {
      {"BlackmanWindow", {[](const Tensor& x) { return std::vector<Tensor>{probe_tensor(x.dtype(), {4}, {})}; }, {}}},
      {"HammingWindow", {[](const Tensor& x) { return std::vector<Tensor>{probe_tensor(x.dtype(), {4}, {})}; }, {}}},
      {"HannWindow", {[](const Tensor& x) { return std::vector<Tensor>{probe_tensor(x.dtype(), {4}, {})}; }, {}}},
      {"Concat",
       {[](const Tensor& x) {
          return std::vector<Tensor>{x, x};
        },
        {{"axis", int64_t(0)}}}},
      {"DepthToSpace",
       {[](const Tensor& x) {
          return std::vector<Tensor>{x.reshape({1, 6, 1, 1})};
        },
        {{"blocksize", int64_t(1)}}}},
      {"SpaceToDepth",
       {[](const Tensor& x) {
          return std::vector<Tensor>{x.reshape({1, 1, 2, 3})};
        },
        {{"blocksize", int64_t(1)}}}},
      {"Det",
       {[](const Tensor& x) {
          return std::vector<Tensor>{probe_tensor(x.dtype(), {1, 2, 3, 4}, {2, 2})};
        },
        {}}},
      {"Einsum", {[](const Tensor& x) { return std::vector<Tensor>{x}; }, {{"equation", "ij->ji"}}}},
      {"RandomNormalLike", {[](const Tensor& x) { return std::vector<Tensor>{x}; }, {{"dtype", int64_t(1)}}}},
      {"RandomUniformLike", {[](const Tensor& x) { return std::vector<Tensor>{x}; }, {{"dtype", int64_t(1)}}}},
      {"AveragePool",
       {[](const Tensor& x) {
          return std::vector<Tensor>{x.reshape({1, 1, 2, 3})};
        },
        {{"kernel_shape", Ints{2, 2}}}}},
      {"MaxPool",
       {[](const Tensor& x) {
          return std::vector<Tensor>{x.reshape({1, 1, 2, 3})};
        },
        {{"kernel_shape", Ints{2, 2}}}}},
      {"LpPool",
       {[](const Tensor& x) {
          return std::vector<Tensor>{x.reshape({1, 1, 2, 3})};
        },
        {{"kernel_shape", Ints{2, 2}}}}},
      {"LRN",
       {[](const Tensor& x) {
          return std::vector<Tensor>{x.reshape({1, 2, 1, 3})};
        },
        {{"size", int64_t(1)}}}},
      {"Bernoulli",
       {[](const Tensor& x) {
          return std::vector<Tensor>{probe_tensor(x.dtype(), {0, 1, 0.5f, 0.25f, 1, 0}, {2, 3})};
        },
        {}}},
      {"Cast", {[](const Tensor& x) { return std::vector<Tensor>{x}; }, {{"to", int64_t(1)}}}},
      {"DFT",
       {[](const Tensor& x) {
          return std::vector<Tensor>{x.reshape({2, 3, 1})};
        },
        {}}},
      {"MeanVarianceNormalization", {[](const Tensor& x) { return std::vector<Tensor>{x}; }, {{"axes", Ints{0, 1}}}}},
      {"Resize",
       {[](const Tensor& x) {
          return std::vector<Tensor>{x, Tensor(), Tensor::from_vector<float>({1, 2}, {2})};
        },
        {}}},
      {"Upsample",
       {[](const Tensor& x) {
          return std::vector<Tensor>{x, Tensor::from_vector<float>({1, 2}, {2})};
        },
        {}}},
      {"StringNormalizer", {[](const Tensor& x) { return std::vector<Tensor>{x.reshape({6})}; }, {}}},
      {"BitShift",
       {[](const Tensor& x) {
          return std::vector<Tensor>{x, x};
        },
        {{"direction", "LEFT"}}}},
      {"Conv",
       {[](const Tensor& x) {
          return std::vector<Tensor>{x.reshape({1, 1, 2, 3}), x.reshape({1, 1, 2, 3})};
        },
        {}}},
      {"ConvTranspose",
       {[](const Tensor& x) {
          return std::vector<Tensor>{x.reshape({1, 1, 2, 3}), x.reshape({1, 1, 2, 3})};
        },
        {}}},
      {"Gemm",
       {[](const Tensor& x) {
          return std::vector<Tensor>{x, x};
        },
        {{"transB", int64_t(1)}}}},
      {"MatMul",
       {[](const Tensor& x) {
          return std::vector<Tensor>{x, x.reshape({3, 2})};
        },
        {}}},
      {"GridSample",
       {[](const Tensor& x) {
          return std::vector<Tensor>{x.reshape({1, 1, 2, 3}), Tensor::from_vector<float>({0, 0}, {1, 1, 1, 2})};
        },
        {}}},
      {"LayerNormalization",
       {[](const Tensor& x) {
          return std::vector<Tensor>{x, probe_tensor(x.dtype(), {1, 1, 1}, {3})};
        },
        {}}},
      {"NonMaxSuppression",
       {[](const Tensor& x) {
          return std::vector<Tensor>{probe_tensor(x.dtype(), {0, 0, 1, 1}, {1, 1, 4}),
                                     probe_tensor(x.dtype(), {0.5f}, {1, 1, 1})};
        },
        {}}},
      {"Compress",
       {[](const Tensor& x) {
          return std::vector<Tensor>{x, Tensor::from_vector<bool>({true, false}, {2})};
        },
        {{"axis", int64_t(0)}}}},
      {"CumSum",
       {[](const Tensor& x) {
          return std::vector<Tensor>{x, int64s({1}, {})};
        },
        {}}},
      {"DequantizeLinear",
       {[](const Tensor& x) {
          return std::vector<Tensor>{x, Tensor::scalar(0.5f), probe_tensor(x.dtype(), {0}, {})};
        },
        {}}},
      {"Expand",
       {[](const Tensor& x) {
          return std::vector<Tensor>{x, int64s({2, 3}, {2})};
        },
        {}}},
      {"Gather",
       {[](const Tensor& x) {
          return std::vector<Tensor>{x, int64s({1}, {1})};
        },
        {}}},
      {"GatherElements",
       {[](const Tensor& x) {
          return std::vector<Tensor>{x, int64s({0, 1, 0, 1, 0, 1}, {2, 3})};
        },
        {}}},
      {"GatherND",
       {[](const Tensor& x) {
          return std::vector<Tensor>{x, int64s({1}, {1, 1})};
        },
        {}}},
      {"NegativeLogLikelihoodLoss",
       {[](const Tensor& x) {
          return std::vector<Tensor>{x, int64s({0, 2}, {2})};
        },
        {}}},
      {"Pad",
       {[](const Tensor& x) {
          return std::vector<Tensor>{x, int64s({0, 1, 0, 1}, {4})};
        },
        {}}},
      {"QuantizeLinear",
       {[](const Tensor& x) {
          return std::vector<Tensor>{x, Tensor::scalar(0.5f)};
        },
        {}}},
      {"Range",
       {[](const Tensor& x) {
          DType dt = x.dtype();
          return std::vector<Tensor>{probe_tensor(dt, {0}, {}), probe_tensor(dt, {4}, {}), probe_tensor(dt, {1}, {})};
        },
        {}}},
      {"Reshape",
       {[](const Tensor& x) {
          return std::vector<Tensor>{x, int64s({3, 2}, {2})};
        },
        {}}},
      {"ReverseSequence",
       {[](const Tensor& x) {
          return std::vector<Tensor>{x, int64s({1, 2, 2}, {3})};
        },
        {}}},
      {"Scatter",
       {[](const Tensor& x) {
          return std::vector<Tensor>{x, int64s({1, 0, 1, 0, 1, 0}, {2, 3}), x};
        },
        {}}},
      {"ScatterElements",
       {[](const Tensor& x) {
          return std::vector<Tensor>{x, int64s({1, 0, 1, 0, 1, 0}, {2, 3}), x};
        },
        {}}},
      {"ScatterND",
       {[](const Tensor& x) {
          return std::vector<Tensor>{x, int64s({0}, {1, 1}), probe_tensor(x.dtype(), {7, 8, 9}, {1, 3})};
        },
        {}}},
      {"Slice",
       {[](const Tensor& x) {
          return std::vector<Tensor>{x, int64s({0}, {1}), int64s({1}, {1})};
        },
        {}}},
      {"SoftmaxCrossEntropyLoss",
       {[](const Tensor& x) {
          return std::vector<Tensor>{x, int64s({0, 2}, {2})};
        },
        {}}},
      {"Tile",
       {[](const Tensor& x) {
          return std::vector<Tensor>{x, int64s({1, 2}, {2})};
        },
        {}}},
      {"TopK",
       {[](const Tensor& x) {
          return std::vector<Tensor>{x, int64s({2}, {1})};
        },
        {}}},
      {"Unsqueeze",
       {[](const Tensor& x) {
          return std::vector<Tensor>{x, int64s({0}, {1})};
        },
        {}}},
  };
  return kProbes;
}

TEST(DtypeCoverage, CpuKernelsRunEveryTypeOnnxAllows) {
  std::vector<std::string> missing;
  int probed = 0;
  for (const OpDef* def : OpCatalogue::instance().all()) {
    // TfIdfVectorizer's pool attribute depends on the input dtype (the node suite and signal_test
    // cover its int and string inputs).
    if (!def->domain.empty() || def->name == "If" || def->name == "Scan" || def->name == "TfIdfVectorizer") continue;
    auto probe = multi_input_probes().find(def->name);
    const int opset = std::min(kCoverageOpset, def->until_version);
    if (opset < def->since_version) continue;
    const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(def->name, opset, "");
    const KernelDef* kernel = KernelRegistry::instance().find("", def->name, DeviceType::CPU, opset);
    if (!schema || schema->inputs().empty() || !kernel) continue;
    // Binary ops whose two inputs share a type (Add, Equal, And...) take the input twice.
    const bool binary = def->min_inputs == 2 && schema->inputs().size() >= 2 &&
                        schema->inputs()[1].GetTypeStr() == schema->inputs()[0].GetTypeStr();
    if (def->min_inputs != 1 && !binary && probe == multi_input_probes().end()) continue;
    for (DType dt : onnx_first_input_dtypes(*schema)) {
      if (is_allowed_gap(def->name, dt)) continue;
      Tensor x = probe_tensor(dt, {1, 4, 3, 2, 5, 6}, {2, 3});  // no zeros: Div and Mod divide by it
      ++probed;
      try {
        if (probe == multi_input_probes().end())
          ops::call(def->name, binary ? std::vector<Tensor>{x, x} : std::vector<Tensor>{x});
        else
          ops::call(def->name, probe->second.inputs(x), probe->second.attrs);
      } catch (const Error& e) {
        missing.push_back(def->name + ": " + std::string(dtype_name(dt)) + " (" + e.what() + ")");
      }
    }
  }
  EXPECT_GT(probed, 1000) << "the probe table or the schema lookup looks broken";  // 1078 at opset 17
  std::string list;
  for (const std::string& m : missing) list += "\n  " + m;
  EXPECT_TRUE(missing.empty()) << missing.size() << " (op, dtype) pairs fail:" << list;
}

// ---- Value checks of float16/bfloat16 paths against float64 references ----------------------------

using Ints = std::vector<int64_t>;
const DType kHalfTypes[] = {DType::Float16, DType::BFloat16};

// Random values already rounded to `dtype`, as doubles, so the reference sees exactly the kernel's
// inputs and tolerances only cover the kernel's own rounding.
std::vector<double> random_values(size_t n, uint32_t seed, DType dtype) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return Tensor::from_vector(v, {int64_t(n)}).cast(dtype).cast(DType::Float64).to_vector<double>();
}

Tensor make(const std::vector<double>& v, const Shape& shape, DType dtype) {
  return Tensor::from_vector(v, shape).cast(dtype);
}

// Tolerance relative to the output magnitude: bfloat16 keeps 8 significant bits, float16 11.
double tolerance(DType dtype, double magnitude) {
  return (dtype == DType::BFloat16 ? 1.0 / 64 : 1.0 / 512) * std::max(1.0, magnitude);
}

void expect_close(const Tensor& got, const std::vector<double>& expected, const Shape& shape, DType dtype,
                  double magnitude = 1.0) {
  ASSERT_EQ(got.dtype(), dtype);
  ASSERT_EQ(got.shape(), shape);
  std::vector<double> g = got.cast(DType::Float64).to_vector<double>();
  ASSERT_EQ(g.size(), expected.size());
  for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(g[i], expected[i], tolerance(dtype, magnitude)) << "at " << i;
}

TEST(DtypeCoverage, ConvHalfTypesMatchFloat64) {
  // [1, 3, 5, 5] x [4, 3, 3, 3], pads 1, stride 1: a direct-definition reference.
  for (DType dt : kHalfTypes) {
    SCOPED_TRACE(dtype_name(dt));
    const int64_t c = 3, m = 4, h = 5, w = 5, k = 3;
    auto x = random_values(size_t(c * h * w), 1, dt), wt = random_values(size_t(m * c * k * k), 2, dt);
    std::vector<double> ref(size_t(m * h * w), 0.0);
    for (int64_t o = 0; o < m; ++o)
      for (int64_t i = 0; i < h; ++i)
        for (int64_t j = 0; j < w; ++j) {
          double acc = 0;
          for (int64_t ic = 0; ic < c; ++ic)
            for (int64_t a = 0; a < k; ++a)
              for (int64_t b = 0; b < k; ++b) {
                int64_t ii = i + a - 1, jj = j + b - 1;
                if (ii < 0 || ii >= h || jj < 0 || jj >= w) continue;
                acc += x[size_t((ic * h + ii) * w + jj)] * wt[size_t(((o * c + ic) * k + a) * k + b)];
              }
          ref[size_t((o * h + i) * w + j)] = acc;
        }
    Tensor y =
        ops::call("Conv", {make(x, {1, c, h, w}, dt), make(wt, {m, c, k, k}, dt)}, {{"pads", Ints{1, 1, 1, 1}}})[0];
    expect_close(y, ref, {1, m, h, w}, dt, 4.0);
  }
}

TEST(DtypeCoverage, MatMulHalfTypesMatchFloat64) {
  for (DType dt : kHalfTypes) {
    SCOPED_TRACE(dtype_name(dt));
    const int64_t n = 7, k = 19, m = 5;
    auto a = random_values(size_t(n * k), 3, dt), b = random_values(size_t(k * m), 4, dt);
    std::vector<double> ref(size_t(n * m), 0.0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j)
        for (int64_t p = 0; p < k; ++p) ref[size_t(i * m + j)] += a[size_t(i * k + p)] * b[size_t(p * m + j)];
    expect_close(ops::matmul(make(a, {n, k}, dt), make(b, {k, m}, dt)), ref, {n, m}, dt, 4.0);
  }
}

TEST(DtypeCoverage, PoolingHalfTypesMatchFloat64) {
  // 2x2 windows, stride 2, over [1, 2, 4, 6].
  for (DType dt : kHalfTypes) {
    SCOPED_TRACE(dtype_name(dt));
    const int64_t c = 2, h = 4, w = 6;
    auto x = random_values(size_t(c * h * w), 5, dt);
    std::vector<double> max_ref, avg_ref;
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t i = 0; i < h; i += 2)
        for (int64_t j = 0; j < w; j += 2) {
          double mx = -1e300, sum = 0;
          for (int64_t a = 0; a < 2; ++a)
            for (int64_t b = 0; b < 2; ++b) {
              double v = x[size_t((ch * h + i + a) * w + j + b)];
              mx = std::max(mx, v);
              sum += v;
            }
          max_ref.push_back(mx);
          avg_ref.push_back(sum / 4);
        }
    ops::PoolOptions opt{{2, 2}, {2, 2}, {}, false};
    Tensor xt = make(x, {1, c, h, w}, dt);
    expect_close(ops::max_pool(xt, opt), max_ref, {1, c, 2, 3}, dt);
    expect_close(ops::average_pool(xt, opt), avg_ref, {1, c, 2, 3}, dt);
  }
}

TEST(DtypeCoverage, ReductionHalfTypesMatchFloat64) {
  for (DType dt : kHalfTypes) {
    SCOPED_TRACE(dtype_name(dt));
    const int64_t rows = 3, cols = 40;
    auto x = random_values(size_t(rows * cols), 6, dt);
    std::vector<double> sum(size_t(rows), 0.0), mean(size_t(rows), 0.0), max(size_t(rows), -1e300);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < cols; ++j) {
        sum[size_t(r)] += x[size_t(r * cols + j)];
        max[size_t(r)] = std::max(max[size_t(r)], x[size_t(r * cols + j)]);
      }
      mean[size_t(r)] = sum[size_t(r)] / double(cols);
    }
    Tensor xt = make(x, {rows, cols}, dt);
    expect_close(ops::reduce_sum(xt, {1}, false), sum, {rows}, dt, 8.0);
    expect_close(ops::reduce_mean(xt, {1}, false), mean, {rows}, dt);
    Tensor mx = ops::call("ReduceMax", {xt}, {{"axes", Ints{1}}, {"keepdims", int64_t(0)}})[0];
    expect_close(mx, max, {rows}, dt);
  }
}

TEST(DtypeCoverage, SoftmaxHalfTypesMatchFloat64) {
  for (DType dt : kHalfTypes) {
    SCOPED_TRACE(dtype_name(dt));
    const int64_t rows = 4, cols = 33;
    auto x = random_values(size_t(rows * cols), 7, dt);
    for (double& v : x) v *= 4;  // exact: a power of two
    std::vector<double> ref(x.size()), log_ref(x.size());
    for (int64_t r = 0; r < rows; ++r) {
      double mx = -1e300, denom = 0;
      for (int64_t j = 0; j < cols; ++j) mx = std::max(mx, x[size_t(r * cols + j)]);
      for (int64_t j = 0; j < cols; ++j) denom += std::exp(x[size_t(r * cols + j)] - mx);
      for (int64_t j = 0; j < cols; ++j) {
        ref[size_t(r * cols + j)] = std::exp(x[size_t(r * cols + j)] - mx) / denom;
        log_ref[size_t(r * cols + j)] = x[size_t(r * cols + j)] - mx - std::log(denom);
      }
    }
    Tensor xt = make(x, {rows, cols}, dt);
    expect_close(ops::softmax(xt, -1), ref, {rows, cols}, dt);
    expect_close(ops::call("LogSoftmax", {xt}, {{"axis", int64_t(-1)}})[0], log_ref, {rows, cols}, dt, 8.0);
  }
}

TEST(DtypeCoverage, NormalizationHalfTypesMatchFloat64) {
  for (DType dt : kHalfTypes) {
    SCOPED_TRACE(dtype_name(dt));
    // LayerNormalization over the last axis of [3, 16] with scale and bias.
    const int64_t rows = 3, cols = 16;
    auto x = random_values(size_t(rows * cols), 8, dt);
    auto scale = random_values(size_t(cols), 9, dt), bias = random_values(size_t(cols), 10, dt);
    const double eps = 1e-5;
    std::vector<double> ln(x.size());
    for (int64_t r = 0; r < rows; ++r) {
      double mean = 0, var = 0;
      for (int64_t j = 0; j < cols; ++j) mean += x[size_t(r * cols + j)] / double(cols);
      for (int64_t j = 0; j < cols; ++j) var += std::pow(x[size_t(r * cols + j)] - mean, 2) / double(cols);
      for (int64_t j = 0; j < cols; ++j)
        ln[size_t(r * cols + j)] =
            (x[size_t(r * cols + j)] - mean) / std::sqrt(var + eps) * scale[size_t(j)] + bias[size_t(j)];
    }
    Tensor y =
        ops::call("LayerNormalization", {make(x, {rows, cols}, dt), make(scale, {cols}, dt), make(bias, {cols}, dt)},
                  {{"axis", int64_t(-1)}, {"epsilon", float(eps)}}, 1)[0];
    expect_close(y, ln, {rows, cols}, dt, 4.0);

    // BatchNormalization (inference) on [2, 3, 2, 2].
    const int64_t n = 2, c = 3, hw = 4;
    auto bx = random_values(size_t(n * c * hw), 11, dt);
    auto s = random_values(size_t(c), 12, dt), b = random_values(size_t(c), 13, dt);
    auto mean = random_values(size_t(c), 14, dt), var = random_values(size_t(c), 15, dt);
    for (double& v : var) v = std::fabs(v) + 0.5;  // stays exact in both types: a multiple of 2^-8 plus 1/2
    std::vector<double> bn(bx.size());
    for (int64_t i = 0; i < n; ++i)
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t p = 0; p < hw; ++p) {
          size_t at = size_t((i * c + ch) * hw + p);
          bn[at] = (bx[at] - mean[size_t(ch)]) / std::sqrt(var[size_t(ch)] + eps) * s[size_t(ch)] + b[size_t(ch)];
        }
    Tensor by = ops::call(
        "BatchNormalization",
        {make(bx, {n, c, 2, 2}, dt), make(s, {c}, dt), make(b, {c}, dt), make(mean, {c}, dt), make(var, {c}, dt)},
        {{"epsilon", float(eps)}}, 1)[0];
    expect_close(by, bn, {n, c, 2, 2}, dt, 4.0);
  }
}

// ---- Gaps closed by this coverage work --------------------------------------------------------------

TEST(DtypeCoverage, ResizeAndUpsampleNearestMoveBoolAndString) {
  // [1, 2] -> [2, 4] with scales 2: each value repeats in a 2x2 block.
  Tensor scales = Tensor::from_vector<float>({2.0f, 2.0f}, {2});
  Tensor b = Tensor::from_vector<bool>({true, false}, {1, 2});
  Tensor yb = ops::call("Resize", {b, Tensor(), scales}, {{"mode", "nearest"}})[0];
  EXPECT_EQ(yb.shape(), (Shape{2, 4}));
  EXPECT_EQ(yb.to_vector<bool>(), (std::vector<bool>{true, true, false, false, true, true, false, false}));

  Tensor s = Tensor::from_vector<std::string>({"a", "bc"}, {1, 2});
  Tensor ys = ops::call("Resize", {s, Tensor(), scales}, {{"mode", "nearest"}})[0];
  EXPECT_EQ(ys.to_vector<std::string>(), (std::vector<std::string>{"a", "a", "bc", "bc", "a", "a", "bc", "bc"}));

  // Upsample (opset 9) shares the path.
  Tensor yu = ops::call("Upsample", {b, scales}, {{"mode", "nearest"}})[0];
  EXPECT_EQ(yu.to_vector<bool>(), yb.to_vector<bool>());

  // Interpolating booleans is meaningless: a clear error, not garbage.
  EXPECT_THROW(ops::call("Resize", {b, Tensor(), scales}, {{"mode", "linear"}}), Error);
}

TEST(DtypeCoverage, NonZeroCountsNonEmptyStrings) {
  Tensor s = Tensor::from_vector<std::string>({"", "x", "yz", ""}, {2, 2});
  Tensor y = ops::call("NonZero", {s})[0];
  EXPECT_EQ(y.shape(), (Shape{2, 2}));
  EXPECT_EQ(y.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 1, 0}));  // rows 0, 1; columns 1, 0
}

TEST(DtypeCoverage, GridSampleIntegersRoundAndSaturate) {
  // X = [[0, 100], [-100, 127]] (int8). Grid points (align_corners=1): the four corners, the centre
  // (mean 31.75 -> 32) and the midpoint of the top edge (50).
  Tensor x = Tensor::from_vector<int8_t>({0, 100, -100, 127}, {1, 1, 2, 2});
  Tensor grid = Tensor::from_vector<float>({-1, -1, 1, -1, -1, 1, 1, 1, 0, 0, 0, -1}, {1, 1, 6, 2});
  Tensor y = ops::call("GridSample", {x, grid}, {{"align_corners", int64_t(1)}})[0];
  EXPECT_EQ(y.dtype(), DType::Int8);
  EXPECT_EQ(y.to_vector<int8_t>(), (std::vector<int8_t>{0, 100, -100, 127, 32, 50}));
  // Bicubic (a = -0.75) halfway between pixels 1 and 2 of the row [0, 255, 255, 255] weighs the taps
  // -0.09375, 0.59375, 0.59375, -0.09375: 255 * 1.09375 = 278.9, which saturates to 255 (a plain
  // cast would wrap to 23). The single-row image makes the vertical weights 0, 1, 0, 0.
  Tensor row = Tensor::from_vector<uint8_t>({0, 255, 255, 255}, {1, 1, 1, 4});
  Tensor centre = Tensor::from_vector<float>({0, 0}, {1, 1, 1, 2});
  Tensor yc = ops::call("GridSample", {row, centre}, {{"align_corners", int64_t(1)}, {"mode", "bicubic"}})[0];
  EXPECT_EQ(yc.to_vector<uint8_t>(), (std::vector<uint8_t>{255}));

  // Wide integers sample in double: exact far beyond float's 2^24 (here 2^40 + 1 and its bilinear
  // midpoint with 2^40 + 3, i.e. 2^40 + 2).
  const int64_t big = (int64_t(1) << 40) + 1;
  Tensor xw = Tensor::from_vector<int64_t>({big, big + 2}, {1, 1, 1, 2});
  Tensor gw = Tensor::from_vector<float>({-1, 0, 1, 0, 0, 0}, {1, 1, 3, 2});
  Tensor yw = ops::call("GridSample", {xw, gw}, {{"align_corners", int64_t(1)}})[0];
  EXPECT_EQ(yw.to_vector<int64_t>(), (std::vector<int64_t>{big, big + 2, big + 1}));
}

}  // namespace
}  // namespace ingot
