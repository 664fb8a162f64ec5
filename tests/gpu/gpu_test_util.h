// GPU kernel tests: run an op through its CPU kernel and its CUDA kernel on the same random
// inputs and compare. The CPU kernels are themselves checked against ONNX's expected outputs and
// float64 references (tests/unit, the ONNX suites), so they are the independent reference here.
// Every test skips when no CUDA device is visible (CI); the device machine runs them.
#pragma once
#include <gtest/gtest.h>
#include <ingot/ops.h>
#include <ingot/tensor.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/cuda_runtime.h"
#include "core/dispatch.h"
#include "../unit/scoped_env.h"

namespace ingot::gpu_test {

using ::ingot::testing::ScopedEnv;  // tests/unit/scoped_env.h

#define INGOT_REQUIRE_GPU() \
  if (!::ingot::cuda::available()) GTEST_SKIP() << "no CUDA device"

// Uniform random values in [lo, hi) (integers: rounded), never all zeros.
inline Tensor random_tensor(DType dtype, Shape shape, uint32_t seed, double lo = -2.0, double hi = 2.0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  Tensor t = Tensor::empty(dtype, std::move(shape));
  dispatch_numeric_bool(dtype, [&]<class T>() {
    T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      double v = dist(rng);
      if constexpr (std::is_same_v<T, bool>) {
        p[i] = v > (lo + hi) / 2;
      } else if constexpr (std::is_integral_v<T>) {
        p[i] = T(std::llround(v));
      } else {
        p[i] = from_double<T>(v);
      }
    }
  });
  return t;
}

inline std::vector<double> as_doubles(const Tensor& t) {
  Tensor h = t.to(Device::cpu());
  std::vector<double> out(size_t(h.numel()));
  dispatch_numeric_bool(h.dtype(), [&]<class T>() {
    const T* p = h.data<T>();
    for (size_t i = 0; i < out.size(); ++i) out[i] = double(p[i]);
  });
  return out;
}

// Element-wise |cuda - cpu| <= atol + rtol * |cpu|; NaNs must match NaNs.
inline void expect_close(const Tensor& cpu, const Tensor& gpu, double atol, double rtol, const std::string& what) {
  ASSERT_EQ(gpu.device().type, DeviceType::CUDA) << what << ": the CUDA kernel's output is not on the GPU";
  ASSERT_EQ(cpu.dtype(), gpu.dtype()) << what;
  ASSERT_EQ(cpu.shape(), gpu.shape()) << what << ": " << cpu.describe() << " vs " << gpu.describe();
  std::vector<double> a = as_doubles(cpu), b = as_doubles(gpu);
  int bad = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    bool ok = std::isnan(a[i]) ? std::isnan(b[i]) : (a[i] == b[i] || std::abs(a[i] - b[i]) <= atol + rtol * std::abs(a[i]));
    if (!ok && ++bad <= 5) ADD_FAILURE() << what << ": element " << i << " cpu " << a[i] << " cuda " << b[i];
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << a.size() << " elements differ";
}

// Default tolerances by dtype: float32 kernels may reorder sums; 16-bit floats round each result.
inline double default_atol(DType dt) {
  return dt == DType::Float16 ? 2e-3 : dt == DType::BFloat16 ? 2e-2 : dt == DType::Float64 ? 1e-10 : 1e-5;
}
inline double default_rtol(DType dt) {
  return dt == DType::Float16 ? 2e-3 : dt == DType::BFloat16 ? 1.6e-2 : dt == DType::Float64 ? 1e-10 : 1e-4;
}

// Runs `op` on the CPU and on cuda:0 (inputs copied there; an undefined tensor is an omitted
// optional input) and compares every output.
inline void expect_cuda_matches_cpu(const std::string& op, const std::vector<Tensor>& inputs, const Attributes& attrs = {},
                                    int num_outputs = 1, double atol = -1, double rtol = -1,
                                    const std::string& domain = "") {
  std::vector<Tensor> cpu = ops::call(op, inputs, attrs, num_outputs, domain);
  std::vector<Tensor> on_gpu;
  for (const Tensor& t : inputs) on_gpu.push_back(t.defined() ? t.to(Device{DeviceType::CUDA, 0}) : Tensor());
  std::vector<Tensor> gpu;
  try {
    gpu = ops::call(op, on_gpu, attrs, num_outputs, domain);
    cuda::synchronize();
  } catch (const Error& e) {
    FAIL() << op << " on CUDA: " << e.what();
  }
  ASSERT_EQ(cpu.size(), gpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) {
    DType dt = cpu[i].dtype();
    expect_close(cpu[i], gpu[i], atol >= 0 ? atol : default_atol(dt), rtol >= 0 ? rtol : default_rtol(dt),
                 op + " output " + std::to_string(i) + " (" + std::string(dtype_name(inputs.empty() ? dt : inputs[0].dtype())) + ")");
  }
}

}  // namespace ingot::gpu_test
