// CUDA reductions, softmax family, TopK, normalizations and pooling against the CPU kernels.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "ops/kernel.h"
#include "ops/op_def.h"

namespace ingot::gpu_test {
namespace {

const std::vector<DType> kFloatTypes = {DType::Float32, DType::Float16, DType::BFloat16, DType::Float64};

Tensor ints64(std::vector<int64_t> v) {
  const int64_t n = int64_t(v.size());
  return Tensor::from_vector<int64_t>(v, {n});
}

// A random tensor of dtype `dt` whose values are small integers (ties for Arg*/TopK/Hardmax).
Tensor integer_valued(DType dt, Shape shape, uint32_t seed, double lo = -3, double hi = 3) {
  return random_tensor(DType::Int32, std::move(shape), seed, lo, hi).cast(dt);
}

// `t` (float32) with NaN at every `step`-th element, cast to dt.
Tensor with_nans(DType dt, Shape shape, uint32_t seed, int64_t step) {
  Tensor t = random_tensor(DType::Float32, std::move(shape), seed);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); i += step) p[i] = std::numeric_limits<float>::quiet_NaN();
  return t.cast(dt);
}

// Runs a kernel at a given opset on one backend, as the eager path does (which always uses the
// newest opset), so that pre-opset-13 forms can be compared.
std::vector<Tensor> call_at(const std::string& op, int opset, DeviceType backend, const std::vector<Tensor>& inputs,
                            const Attributes& attrs, int num_outputs) {
  const OpDef* def = OpCatalogue::instance().find("", op);
  if (!def) fail("no op {}", op);
  const KernelDef* kernel = KernelRegistry::instance().find("", op, backend, opset);
  if (!kernel) fail("no kernel for {} at opset {}", op, opset);
  const Device device = backend == DeviceType::CUDA ? Device{DeviceType::CUDA, 0} : Device::cpu();
  std::vector<Value> values;
  values.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) {
      values.emplace_back();
    } else {
      values.emplace_back(inputs[i].to(kernel->is_host_input(i) ? Device::cpu() : device));
    }
  }
  std::vector<const Value*> ptrs;
  for (const Value& v : values) ptrs.push_back(v.kind == Value::Kind::None ? nullptr : &v);
  std::vector<Value> outputs(static_cast<size_t>(num_outputs));
  NodeState state;
  KernelContext ctx(*def, attrs, opset, std::move(ptrs), outputs, nullptr, &state, device);
  kernel->fn(ctx);
  std::vector<Tensor> result;
  for (Value& v : outputs) result.push_back(std::move(v.tensor));
  return result;
}

void expect_match_at(const std::string& op, int opset, const std::vector<Tensor>& inputs, const Attributes& attrs,
                     int num_outputs = 1) {
  std::vector<Tensor> cpu = call_at(op, opset, DeviceType::CPU, inputs, attrs, num_outputs);
  std::vector<Tensor> gpu;
  try {
    gpu = call_at(op, opset, DeviceType::CUDA, inputs, attrs, num_outputs);
    cuda::synchronize();
  } catch (const Error& e) {
    FAIL() << op << " on CUDA at opset " << opset << ": " << e.what();
  }
  ASSERT_EQ(cpu.size(), gpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) {
    const DType dt = cpu[i].dtype();
    expect_close(cpu[i], gpu[i], default_atol(dt), default_rtol(dt),
                 op + " opset " + std::to_string(opset) + " output " + std::to_string(i));
  }
}

// ---------------------------------------------------------------------------------------------
// ReduceX

const std::vector<std::string> kReduceOps = {"ReduceSum", "ReduceMean",      "ReduceMax",      "ReduceMin",
                                             "ReduceProd", "ReduceL1",       "ReduceL2",       "ReduceLogSum",
                                             "ReduceLogSumExp", "ReduceSumSquare"};

// Input range per op: positive for LogSum, near 1 for Prod.
Tensor reduce_input(const std::string& op, DType dt, const Shape& shape, uint32_t seed) {
  if (op == "ReduceLogSum") return random_tensor(dt, shape, seed, 0.1, 2.0);
  if (op == "ReduceProd") return random_tensor(dt, shape, seed, 0.7, 1.3);
  return random_tensor(dt, shape, seed);
}

double reduce_atol(DType dt) { return dt == DType::Float32 ? 1e-4 : -1; }

TEST(CudaReduce, AxesAndKeepdims) {
  INGOT_REQUIRE_GPU();
  const Shape shape{3, 5, 7, 4};
  const std::vector<std::vector<int64_t>> axes_cases = {{}, {1}, {3}, {0, 2}, {1, 3}, {-1, 0}, {0, 1, 2}, {2}};
  for (const std::string& op : kReduceOps) {
    for (DType dt : kFloatTypes) {
      const Tensor x = reduce_input(op, dt, shape, 7);
      for (const auto& axes : axes_cases) {
        for (int64_t keepdims : {0, 1}) {
          SCOPED_TRACE(op + " " + std::string(dtype_name(dt)) + " axes " + shape_str(axes) + " keepdims " +
                       std::to_string(keepdims));
          const Tensor axes_t = axes.empty() ? Tensor() : ints64(axes);
          expect_cuda_matches_cpu(op, {x, axes_t}, {{"keepdims", keepdims}}, 1, reduce_atol(dt));
        }
      }
    }
  }
}

TEST(CudaReduce, AxesAttribute) {
  INGOT_REQUIRE_GPU();
  const Tensor x = random_tensor(DType::Float32, {2, 3, 9}, 3, 0.1, 2.0);
  for (const std::string& op : kReduceOps) {
    SCOPED_TRACE(op);
    expect_cuda_matches_cpu(op, {x}, {{"axes", Ints{1}}}, 1, 1e-4);
    expect_cuda_matches_cpu(op, {x}, {{"axes", Ints{0, 2}}, {"keepdims", int64_t(0)}}, 1, 1e-4);
    expect_match_at(op, 11, {x}, {{"axes", Ints{-1}}});
  }
}

TEST(CudaReduce, NoopWithEmptyAxes) {
  INGOT_REQUIRE_GPU();
  const Tensor x = random_tensor(DType::Float32, {2, 3, 4}, 4);
  for (const std::string op : {"ReduceSum", "ReduceMax", "ReduceLogSumExp"}) {
    expect_cuda_matches_cpu(op, {x, Tensor::from_vector<int64_t>({}, {0})}, {{"noop_with_empty_axes", int64_t(1)}});
    expect_cuda_matches_cpu(op, {x}, {{"noop_with_empty_axes", int64_t(1)}});
    expect_cuda_matches_cpu(op, {x, Tensor::from_vector<int64_t>({}, {0})}, {}, 1, 1e-4);
  }
}

TEST(CudaReduce, Integers) {
  INGOT_REQUIRE_GPU();
  for (DType dt : {DType::Int32, DType::Int64}) {
    const Tensor x = random_tensor(dt, {4, 6, 5}, 11, -9, 9);
    const Tensor small = random_tensor(dt, {4, 3, 5}, 12, -3, 3);
    for (const auto& axes : std::vector<std::vector<int64_t>>{{}, {1}, {2}, {0, 2}}) {
      for (const std::string op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceL1", "ReduceSumSquare"}) {
        SCOPED_TRACE(op + " " + std::string(dtype_name(dt)) + " axes " + shape_str(axes));
        expect_cuda_matches_cpu(op, {x, axes.empty() ? Tensor() : ints64(axes)}, {}, 1, 0, 0);
      }
      expect_cuda_matches_cpu("ReduceProd", {small, axes.empty() ? Tensor() : ints64(axes)}, {}, 1, 0, 0);
    }
  }
  for (DType dt : {DType::Int8, DType::UInt8}) {
    const Tensor x = random_tensor(dt, {4, 6, 5}, 13, 0, 100);
    for (const std::string op : {"ReduceMax", "ReduceMin"}) {
      expect_cuda_matches_cpu(op, {x, ints64({1})}, {}, 1, 0, 0);
      expect_cuda_matches_cpu(op, {x}, {}, 1, 0, 0);
    }
  }
}

TEST(CudaReduce, NanPropagationAndInfinities) {
  INGOT_REQUIRE_GPU();
  for (DType dt : kFloatTypes) {
    const Tensor x = with_nans(dt, {5, 37}, 5, 23);
    for (const std::string op : {"ReduceMax", "ReduceMin", "ReduceSum", "ReduceLogSumExp"}) {
      expect_cuda_matches_cpu(op, {x, ints64({1})}, {}, 1, 1e-4);
      expect_cuda_matches_cpu(op, {x, ints64({0})}, {}, 1, 1e-4);
    }
  }
  // LogSumExp over a row of -inf is -inf, not NaN; +inf stays +inf.
  Tensor inf = Tensor::from_vector<float>({-INFINITY, -INFINITY, -INFINITY, 1.0f, INFINITY, 2.0f}, {2, 3});
  expect_cuda_matches_cpu("ReduceLogSumExp", {inf, ints64({1})});
  expect_cuda_matches_cpu("ReduceMax", {inf, ints64({1})});
}

TEST(CudaReduce, LargeAndSplit) {
  INGOT_REQUIRE_GPU();
  // Few outputs, long reductions: the reduced range is split across blocks.
  const Tensor rows = random_tensor(DType::Float32, {2, 100000}, 21);
  const Tensor full = random_tensor(DType::Float32, {1000, 1000}, 22);
  const Tensor cols = random_tensor(DType::Float32, {50000, 3}, 23);
  const Tensor mid = random_tensor(DType::Float32, {64, 3000}, 24);
  for (const std::string op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceL2", "ReduceLogSumExp", "ReduceSumSquare"}) {
    SCOPED_TRACE(op);
    expect_cuda_matches_cpu(op, {rows, ints64({1})}, {}, 1, 1e-2, 1e-4);
    expect_cuda_matches_cpu(op, {full}, {}, 1, 1e-1, 1e-4);
    expect_cuda_matches_cpu(op, {cols, ints64({0})}, {}, 1, 1e-2, 1e-4);
    expect_cuda_matches_cpu(op, {mid, ints64({1})}, {}, 1, 1e-3, 1e-4);
    expect_cuda_matches_cpu(op, {mid, ints64({0})}, {}, 1, 1e-3, 1e-4);
  }
  const Tensor half_full = random_tensor(DType::Float16, {300, 1000}, 25);
  expect_cuda_matches_cpu("ReduceMean", {half_full}, {}, 1, 1e-3, 2e-3);
}

// Means over the spatial axes of channels-last tensors ([N, H, W, C], axes 1 and 2: the squeeze-excite
// and global pools of channels-last packages), which take the 16-byte vector column kernel (sums and
// means) where C is a multiple of the vector and the scalar one where not (and for Max, SumSquare);
// long reductions split across blocks.
TEST(CudaReduce, ChannelsLastSpatialAxes) {
  INGOT_REQUIRE_GPU();
  const std::vector<Shape> shapes = {{32, 7, 7, 960}, {4, 28, 28, 120}, {2, 56, 56, 24}, {3, 5, 5, 12}, {1, 9, 9, 8}};
  for (DType dt : {DType::Float32, DType::Float16, DType::BFloat16}) {
    for (const Shape& shape : shapes) {
      const Tensor x = random_tensor(dt, shape, 31);
      for (const std::string op : {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceSumSquare"}) {
        SCOPED_TRACE(op + " " + std::string(dtype_name(dt)) + " " + shape_str(shape));
        expect_cuda_matches_cpu(op, {x, ints64({1, 2})}, {}, 1, dt == DType::Float32 ? 1e-3 : -1,
                                dt == DType::Float32 ? 1e-4 : -1);
      }
    }
  }
}

TEST(CudaReduce, EmptyAndScalar) {
  INGOT_REQUIRE_GPU();
  const Tensor empty = Tensor::empty(DType::Float32, {3, 0, 4});
  for (const std::string& op : kReduceOps) {
    SCOPED_TRACE(op);
    expect_cuda_matches_cpu(op, {empty, ints64({1})});  // empty reduction: identity results
    expect_cuda_matches_cpu(op, {empty, ints64({0})});  // no outputs
    expect_cuda_matches_cpu(op, {empty, ints64({1})}, {{"keepdims", int64_t(0)}});
  }
  const Tensor scalar = Tensor::scalar<float>(1.5f);
  for (const std::string& op : kReduceOps) expect_cuda_matches_cpu(op, {scalar});
  expect_cuda_matches_cpu("ReduceSum", {Tensor::empty(DType::Int64, {0, 2}), ints64({0})}, {}, 1, 0, 0);
}

// ---------------------------------------------------------------------------------------------
// ArgMax / ArgMin

TEST(CudaArg, AxesTiesAndNans) {
  INGOT_REQUIRE_GPU();
  std::vector<DType> types = kFloatTypes;
  types.insert(types.end(), {DType::Int32, DType::Int64, DType::Int8});
  for (const std::string op : {"ArgMax", "ArgMin"}) {
    for (DType dt : types) {
      const Tensor x = integer_valued(dt, {4, 5, 33}, 31);
      for (int64_t axis : {0, 1, 2, -1}) {
        for (int64_t keepdims : {0, 1}) {
          for (int64_t last : {0, 1}) {
            SCOPED_TRACE(op + " " + std::string(dtype_name(dt)) + " axis " + std::to_string(axis));
            expect_cuda_matches_cpu(op, {x}, {{"axis", axis}, {"keepdims", keepdims}, {"select_last_index", last}});
          }
        }
      }
    }
    const Tensor u8 = random_tensor(DType::UInt8, {6, 40}, 32, 0, 5);
    expect_cuda_matches_cpu(op, {u8}, {{"axis", int64_t(1)}});
    for (DType dt : kFloatTypes) {
      const Tensor nan = with_nans(dt, {6, 45}, 33, 7);
      for (int64_t last : {0, 1}) {
        expect_cuda_matches_cpu(op, {nan}, {{"axis", int64_t(1)}, {"select_last_index", last}});
        expect_cuda_matches_cpu(op, {nan}, {{"axis", int64_t(0)}, {"select_last_index", last}});
      }
    }
    const Tensor long_rows = integer_valued(DType::Float32, {3, 5000}, 34, -50, 50);
    expect_cuda_matches_cpu(op, {long_rows}, {{"axis", int64_t(1)}});
    expect_cuda_matches_cpu(op, {long_rows}, {{"axis", int64_t(1)}, {"select_last_index", int64_t(1)}});
    expect_cuda_matches_cpu(op, {Tensor::scalar<float>(2.0f)}, {});
    expect_cuda_matches_cpu(op, {Tensor::scalar<float>(2.0f)}, {{"keepdims", int64_t(0)}});
    expect_cuda_matches_cpu(op, {Tensor::empty(DType::Float32, {0, 3})}, {{"axis", int64_t(1)}});
  }
}

// ---------------------------------------------------------------------------------------------
// Softmax / LogSoftmax / Hardmax

TEST(CudaSoftmax, AxesAndTypes) {
  INGOT_REQUIRE_GPU();
  for (const std::string op : {"Softmax", "LogSoftmax", "Hardmax"}) {
    for (DType dt : kFloatTypes) {
      const Tensor x = op == "Hardmax" ? integer_valued(dt, {3, 7, 5}, 41) : random_tensor(dt, {3, 7, 5}, 41, -5, 5);
      for (int64_t axis : {-1, 0, 1, 2}) {
        SCOPED_TRACE(op + " " + std::string(dtype_name(dt)) + " axis " + std::to_string(axis));
        expect_cuda_matches_cpu(op, {x}, {{"axis", axis}});
      }
      expect_cuda_matches_cpu(op, {x});
      // Long rows: one block per row.
      const Tensor wide = op == "Hardmax" ? integer_valued(dt, {5, 3000}, 42, -100, 100)
                                          : random_tensor(dt, {5, 3000}, 42, -5, 5);
      expect_cuda_matches_cpu(op, {wide});
      // Rows that fit a warp's registers (Whisper's 1500-long attention rows; partial last lanes).
      for (int64_t dim : {int64_t(33), int64_t(1500), int64_t(2048)}) {
        const Tensor rows = op == "Hardmax" ? integer_valued(dt, {7, dim}, 45, -100, 100)
                                            : random_tensor(dt, {7, dim}, 45, -5, 5);
        expect_cuda_matches_cpu(op, {rows});
      }
    }
    const Tensor nan = with_nans(DType::Float32, {4, 9}, 43, 5);
    expect_cuda_matches_cpu(op, {nan});
    Tensor inf = Tensor::from_vector<float>({-INFINITY, -INFINITY, -INFINITY, 1.0f, -INFINITY, 2.0f}, {2, 3});
    expect_cuda_matches_cpu(op, {inf});
    expect_cuda_matches_cpu(op, {Tensor::empty(DType::Float32, {0, 5})});
    expect_cuda_matches_cpu(op, {Tensor::scalar<float>(0.5f)});
  }
}

TEST(CudaSoftmax, Opset11CoercesTo2D) {
  INGOT_REQUIRE_GPU();
  const Tensor x = random_tensor(DType::Float32, {2, 3, 4, 5}, 44, -4, 4);
  for (const std::string op : {"Softmax", "LogSoftmax", "Hardmax"}) {
    SCOPED_TRACE(op);
    expect_match_at(op, 11, {x}, {});
    expect_match_at(op, 11, {x}, {{"axis", int64_t(2)}});
    expect_match_at(op, 11, {x}, {{"axis", int64_t(0)}});
    expect_match_at(op, 11, {x}, {{"axis", int64_t(4)}});
    expect_match_at(op, 11, {x}, {{"axis", int64_t(-1)}});
    expect_match_at(op, 13, {x}, {{"axis", int64_t(1)}});
  }
}

// ---------------------------------------------------------------------------------------------
// TopK

TEST(CudaTopK, LargestSmallestAxes) {
  INGOT_REQUIRE_GPU();
  std::vector<DType> types = kFloatTypes;
  types.insert(types.end(), {DType::Int32, DType::Int64});
  for (DType dt : types) {
    const Tensor x = integer_valued(dt, {3, 17, 6}, 51, -4, 4);  // many ties: lower index first
    for (int64_t axis : {-1, 0, 1}) {
      const int64_t dim = x.shape()[size_t(axis < 0 ? axis + 3 : axis)];
      for (int64_t k : {int64_t(1), dim / 2, dim}) {
        for (int64_t largest : {0, 1}) {
          SCOPED_TRACE(std::string(dtype_name(dt)) + " axis " + std::to_string(axis) + " k " + std::to_string(k));
          expect_cuda_matches_cpu("TopK", {x, ints64({k})}, {{"axis", axis}, {"largest", largest}}, 2);
        }
      }
    }
  }
  const Tensor f = random_tensor(DType::Float32, {4, 1000}, 52);
  expect_cuda_matches_cpu("TopK", {f, ints64({37})}, {}, 2);
  expect_cuda_matches_cpu("TopK", {f, ints64({0})}, {}, 2);
  expect_cuda_matches_cpu("TopK", {f, ints64({1000})}, {{"largest", int64_t(0)}}, 2);
  const Tensor nan = with_nans(DType::Float32, {3, 50}, 53, 6);
  expect_cuda_matches_cpu("TopK", {nan, ints64({10})}, {}, 2);
  expect_cuda_matches_cpu("TopK", {nan, ints64({10})}, {{"largest", int64_t(0)}}, 2);
  expect_cuda_matches_cpu("TopK", {Tensor::empty(DType::Float32, {0, 5}), ints64({2})}, {}, 2);
  expect_cuda_matches_cpu("TopK", {random_tensor(DType::Float32, {7}, 54), ints64({3})}, {}, 2);
}

TEST(CudaTopK, LongRowsAndOpset1) {
  INGOT_REQUIRE_GPU();
  // Longer than the shared-memory limit: the global-memory network.
  const Tensor x = integer_valued(DType::Float32, {3, 10000}, 55, -1000, 1000);
  expect_cuda_matches_cpu("TopK", {x, ints64({50})}, {}, 2);
  expect_cuda_matches_cpu("TopK", {x, ints64({50})}, {{"largest", int64_t(0)}}, 2);
  const Tensor cols = random_tensor(DType::Float64, {6000, 2}, 56);
  expect_cuda_matches_cpu("TopK", {cols, ints64({5})}, {{"axis", int64_t(0)}}, 2);
  const Tensor d = random_tensor(DType::Float64, {5, 4096}, 57);  // exactly the shared limit, 8-byte keys
  expect_cuda_matches_cpu("TopK", {d, ints64({9})}, {}, 2);
  expect_match_at("TopK", 1, {random_tensor(DType::Float32, {4, 20}, 58)}, {{"k", int64_t(4)}}, 2);
}

// ---------------------------------------------------------------------------------------------
// Normalizations

TEST(CudaNorm, BatchNormalization) {
  INGOT_REQUIRE_GPU();
  for (DType dt : kFloatTypes) {
    for (const Shape& shape : {Shape{2, 3, 5, 7}, Shape{4, 3}, Shape{2, 3, 4, 3, 2}}) {
      const Tensor x = random_tensor(dt, shape, 61);
      const Tensor scale = random_tensor(dt, {3}, 62), bias = random_tensor(dt, {3}, 63);
      const Tensor mean = random_tensor(dt, {3}, 64), var = random_tensor(dt, {3}, 65, 0.5, 2.0);
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + shape_str(shape));
      expect_cuda_matches_cpu("BatchNormalization", {x, scale, bias, mean, var}, {{"epsilon", 1e-3f}});
      expect_cuda_matches_cpu("BatchNormalization", {x, scale, bias, mean, var},
                              {{"training_mode", int64_t(1)}, {"momentum", 0.8f}}, 3);
    }
  }
  // float16 data with float32 parameters.
  const Tensor x = random_tensor(DType::Float16, {2, 4, 3, 3}, 66);
  const Tensor p = random_tensor(DType::Float32, {4}, 67, 0.5, 2.0);
  expect_cuda_matches_cpu("BatchNormalization", {x, p, p, p, p});
  expect_cuda_matches_cpu("BatchNormalization", {Tensor::empty(DType::Float32, {0, 3, 2}), p.slice_rows(0, 3),
                                                 p.slice_rows(0, 3), p.slice_rows(0, 3), p.slice_rows(0, 3)});
}

TEST(CudaNorm, InstanceNormalization) {
  INGOT_REQUIRE_GPU();
  for (DType dt : kFloatTypes) {
    for (const Shape& shape : {Shape{2, 3, 5, 7}, Shape{1, 2, 64, 64}, Shape{3, 4, 9}}) {
      const Tensor x = random_tensor(dt, shape, 71);
      const int64_t c = shape[1];
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + shape_str(shape));
      expect_cuda_matches_cpu("InstanceNormalization", {x, random_tensor(dt, {c}, 72), random_tensor(dt, {c}, 73)});
    }
  }
}

TEST(CudaNorm, LayerNormalization) {
  INGOT_REQUIRE_GPU();
  for (DType dt : kFloatTypes) {
    const Tensor x = random_tensor(dt, {2, 3, 8}, 81);
    SCOPED_TRACE(dtype_name(dt));
    expect_cuda_matches_cpu("LayerNormalization", {x, random_tensor(dt, {8}, 82), random_tensor(dt, {8}, 83)}, {}, 3);
    expect_cuda_matches_cpu("LayerNormalization", {x, random_tensor(dt, {3, 8}, 84)}, {{"axis", int64_t(1)}}, 3);
    // Scale broadcast over the normalized shape [3, 8].
    expect_cuda_matches_cpu("LayerNormalization", {x, random_tensor(dt, {8}, 85), random_tensor(dt, {1, 8}, 86)},
                            {{"axis", int64_t(-2)}}, 1);
    expect_cuda_matches_cpu("LayerNormalization", {x, random_tensor(dt, {8}, 87)}, {{"stash_type", int64_t(0)}}, 3);
    // Long rows: one block per row.
    const Tensor wide = random_tensor(dt, {3, 5000}, 88);
    expect_cuda_matches_cpu("LayerNormalization", {wide, random_tensor(dt, {5000}, 89)}, {{"epsilon", 1e-3f}}, 3);
    // Rows in registers, one warp each (1 to 8 chunks of 32 lanes x 16 bytes), and rows the general
    // kernel takes: 1030 (no 16-byte vector divides it), 36 in 16 bits, 2048 in float32 (16 chunks).
    for (int64_t len : {384, 1000, 1030, 2048, 36}) {
      const Tensor rows = random_tensor(dt, {9, len}, 91);
      SCOPED_TRACE("row length " + std::to_string(len));
      expect_cuda_matches_cpu("LayerNormalization", {rows, random_tensor(dt, {len}, 92), random_tensor(dt, {len}, 93)},
                              {}, 3);
    }
  }
  expect_cuda_matches_cpu("LayerNormalization",
                          {Tensor::empty(DType::Float32, {0, 4}), random_tensor(DType::Float32, {4}, 90)}, {}, 3);
}

TEST(CudaNorm, GroupNormalization) {
  INGOT_REQUIRE_GPU();
  for (DType dt : kFloatTypes) {
    const Tensor x = random_tensor(dt, {2, 6, 4, 5}, 91);
    SCOPED_TRACE(dtype_name(dt));
    expect_cuda_matches_cpu("GroupNormalization", {x, random_tensor(dt, {3}, 92), random_tensor(dt, {3}, 93)},
                            {{"num_groups", int64_t(3)}});
    expect_cuda_matches_cpu("GroupNormalization", {x, random_tensor(dt, {6}, 94), random_tensor(dt, {6}, 95)},
                            {{"num_groups", int64_t(2)}, {"epsilon", 1e-2f}});
    expect_cuda_matches_cpu("GroupNormalization", {x, random_tensor(dt, {6}, 96), random_tensor(dt, {6}, 97)},
                            {{"num_groups", int64_t(6)}});
  }
  const Tensor big = random_tensor(DType::Float32, {1, 8, 32, 32}, 98);
  expect_cuda_matches_cpu("GroupNormalization",
                          {big, random_tensor(DType::Float32, {8}, 99), random_tensor(DType::Float32, {8}, 100)},
                          {{"num_groups", int64_t(2)}});
}

TEST(CudaNorm, LrnAndMeanVarianceNormalization) {
  INGOT_REQUIRE_GPU();
  for (DType dt : kFloatTypes) {
    const Tensor x = random_tensor(dt, {2, 5, 4, 3}, 101);
    SCOPED_TRACE(dtype_name(dt));
    expect_cuda_matches_cpu("LRN", {x}, {{"size", int64_t(3)}});
    expect_cuda_matches_cpu("LRN", {x}, {{"size", int64_t(4)}, {"alpha", 0.01f}, {"beta", 0.5f}, {"bias", 2.0f}});
    expect_cuda_matches_cpu("MeanVarianceNormalization", {x});
    expect_cuda_matches_cpu("MeanVarianceNormalization", {x}, {{"axes", Ints{1}}});
    expect_cuda_matches_cpu("MeanVarianceNormalization", {x}, {{"axes", Ints{2, 3}}});
    expect_cuda_matches_cpu("MeanVarianceNormalization", {x}, {{"axes", Ints{0, 1, 2, 3}}});
  }
}

// ---------------------------------------------------------------------------------------------
// Pooling

TEST(CudaPool, MaxPoolWithIndices) {
  INGOT_REQUIRE_GPU();
  std::vector<DType> types = kFloatTypes;
  types.insert(types.end(), {DType::Int8, DType::UInt8});
  for (DType dt : types) {
    const Tensor x = dt == DType::UInt8 ? random_tensor(dt, {2, 3, 7, 5}, 111, 0, 200) : random_tensor(dt, {2, 3, 7, 5}, 111, -100, 100);
    const std::vector<Attributes> cases = {
        {{"kernel_shape", Ints{3, 3}}},
        {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}},
        {{"kernel_shape", Ints{2, 3}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t(1)}},
        {{"kernel_shape", Ints{2, 2}}, {"dilations", Ints{2, 2}}, {"pads", Ints{0, 1, 1, 0}}},
        {{"kernel_shape", Ints{3, 2}}, {"strides", Ints{2, 1}}, {"auto_pad", "SAME_UPPER"}},
        {{"kernel_shape", Ints{3, 2}}, {"strides", Ints{2, 1}}, {"auto_pad", "SAME_LOWER"}},
        {{"kernel_shape", Ints{3, 3}}, {"auto_pad", "VALID"}, {"storage_order", int64_t(1)}},
        {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}},
    };
    for (size_t i = 0; i < cases.size(); ++i) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " case " + std::to_string(i));
      expect_cuda_matches_cpu("MaxPool", {x}, cases[i], 2);
      expect_cuda_matches_cpu("MaxPool", {x}, cases[i], 1);
    }
  }
  const Tensor x1 = random_tensor(DType::Float32, {2, 3, 11}, 112);
  expect_cuda_matches_cpu("MaxPool", {x1}, {{"kernel_shape", Ints{3}}, {"strides", Ints{2}}, {"pads", Ints{1, 1}}}, 2);
  const Tensor x3 = random_tensor(DType::Float32, {1, 2, 5, 6, 7}, 113);
  expect_cuda_matches_cpu("MaxPool", {x3}, {{"kernel_shape", Ints{2, 3, 2}}, {"strides", Ints{1, 2, 2}}}, 2);
  expect_cuda_matches_cpu("MaxPool", {x3},
                          {{"kernel_shape", Ints{2, 3, 2}}, {"storage_order", int64_t(1)}, {"ceil_mode", int64_t(1)},
                           {"strides", Ints{2, 2, 2}}},
                          2);
  const Tensor nan = with_nans(DType::Float32, {1, 2, 6, 6}, 114, 5);
  expect_cuda_matches_cpu("MaxPool", {nan}, {{"kernel_shape", Ints{2, 2}}}, 2);
  expect_cuda_matches_cpu("MaxPool", {Tensor::empty(DType::Float32, {0, 3, 4, 4})}, {{"kernel_shape", Ints{2, 2}}}, 2);
}

// ai.ingot.MaxPool layout NHWC (what the channels-last pass writes between 16-bit and int8
// convolutions on CUDA) against ONNX's MaxPool on the CPU (the reference loop) of the same values
// channels first, permuted: 16-byte vectors where the channels fill them, one value per thread
// otherwise; windows with pads, strides, ceil_mode, dilations; NaNs. Exact: a max selects a value.
void expect_nhwc_max_pool_matches_cpu(const Tensor& x, const Attributes& window) {
  const Tensor want = ops::transpose(ops::call("MaxPool", {ops::transpose(x, {0, 3, 1, 2})}, window, 1).at(0), {0, 2, 3, 1});
  Attributes nhwc = window;
  nhwc["layout"] = std::string("NHWC");
  std::vector<Tensor> got;
  try {
    got = ops::call("MaxPool", {x.to(Device{DeviceType::CUDA, 0})}, nhwc, 1, "ai.ingot");
    cuda::synchronize();
  } catch (const Error& e) {
    FAIL() << "ai.ingot.MaxPool NHWC on CUDA: " << e.what();
  }
  expect_close(want, got.at(0), 0, 0, "ai.ingot.MaxPool NHWC");
}

TEST(CudaPool, MaxPoolChannelsLast) {
  INGOT_REQUIRE_GPU();
  std::vector<DType> types = kFloatTypes;
  types.insert(types.end(), {DType::Int8, DType::UInt8});
  const std::vector<Attributes> windows = {
      {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}},  // ResNet's
      {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}},
      {{"kernel_shape", Ints{2, 3}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t(1)}},
      {{"kernel_shape", Ints{2, 2}}, {"dilations", Ints{2, 2}}, {"pads", Ints{0, 1, 1, 0}}},
      {{"kernel_shape", Ints{3, 2}}, {"strides", Ints{2, 1}}, {"auto_pad", "SAME_UPPER"}},
  };
  for (DType dt : types) {
    // 8-bit values: byte by byte and as SIMD byte maxima (INGOT_CUDA_POOL_SIMD8, 16-byte vectors).
    const bool bytes = dt == DType::Int8 || dt == DType::UInt8;
    for (const char* simd : {"0", "1"}) {
      if (!bytes && simd[0] == '1') continue;
      const ScopedEnv simd_switch("INGOT_CUDA_POOL_SIMD8", simd);
      for (int64_t c : {64, 48, 3}) {
        const Tensor x = dt == DType::UInt8 ? random_tensor(dt, {2, 9, 7, c}, 141, 0, 200)
                                            : random_tensor(dt, {2, 9, 7, c}, 141, -100, 100);
        for (size_t i = 0; i < windows.size(); ++i) {
          SCOPED_TRACE(std::string(dtype_name(dt)) + " channels " + std::to_string(c) + " window " + std::to_string(i) +
                       " INGOT_CUDA_POOL_SIMD8=" + simd);
          expect_nhwc_max_pool_matches_cpu(x, windows[i]);
        }
      }
    }
  }
  expect_nhwc_max_pool_matches_cpu(with_nans(DType::Float32, {1, 6, 6, 8}, 142, 5), {{"kernel_shape", Ints{2, 2}}});
  // The unrolled 3x3 window: NaNs, dilations.
  expect_nhwc_max_pool_matches_cpu(with_nans(DType::Float32, {1, 6, 6, 8}, 143, 5),
                                   {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}});
  expect_nhwc_max_pool_matches_cpu(random_tensor(DType::Float16, {2, 9, 9, 16}, 144),
                                   {{"kernel_shape", Ints{3, 3}}, {"dilations", Ints{2, 2}}, {"pads", Ints{1, 2, 2, 1}}});
}

TEST(CudaPool, AverageAndLpPool) {
  INGOT_REQUIRE_GPU();
  const std::vector<Attributes> cases = {
      {{"kernel_shape", Ints{3, 3}}},
      {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}},
      {{"kernel_shape", Ints{2, 3}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t(1)}},
      {{"kernel_shape", Ints{3, 2}}, {"strides", Ints{2, 1}}, {"auto_pad", "SAME_UPPER"}},
      {{"kernel_shape", Ints{3, 2}}, {"strides", Ints{2, 1}}, {"auto_pad", "SAME_LOWER"}},
      {{"kernel_shape", Ints{2, 2}}, {"dilations", Ints{2, 1}}, {"pads", Ints{1, 0, 2, 1}}},
  };
  for (DType dt : kFloatTypes) {
    const Tensor x = random_tensor(dt, {2, 3, 7, 5}, 121);
    for (size_t i = 0; i < cases.size(); ++i) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " case " + std::to_string(i));
      for (int64_t include : {0, 1}) {
        Attributes a = cases[i];
        a["count_include_pad"] = include;
        expect_cuda_matches_cpu("AveragePool", {x}, a);
      }
      for (int64_t p : {1, 2, 3}) {
        Attributes a = cases[i];
        a["p"] = p;
        expect_cuda_matches_cpu("LpPool", {x}, a);
      }
    }
  }
  const Tensor x1 = random_tensor(DType::Float32, {2, 3, 11}, 122);
  expect_cuda_matches_cpu("AveragePool", {x1},
                          {{"kernel_shape", Ints{4}}, {"pads", Ints{2, 1}}, {"count_include_pad", int64_t(1)}});
  const Tensor x3 = random_tensor(DType::Float32, {1, 2, 5, 6, 7}, 123);
  expect_cuda_matches_cpu("AveragePool", {x3}, {{"kernel_shape", Ints{2, 3, 2}}, {"pads", Ints{1, 1, 1, 0, 1, 1}}});
  expect_cuda_matches_cpu("LpPool", {x3}, {{"kernel_shape", Ints{2, 2, 2}}, {"strides", Ints{2, 2, 2}}});
}

TEST(CudaPool, GlobalPools) {
  INGOT_REQUIRE_GPU();
  for (DType dt : kFloatTypes) {
    for (const Shape& shape : {Shape{2, 3, 7, 5}, Shape{1, 4, 64, 64}, Shape{2, 3}, Shape{2, 3, 9}}) {
      const Tensor x = random_tensor(dt, shape, 131);
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + shape_str(shape));
      expect_cuda_matches_cpu("GlobalAveragePool", {x});
      expect_cuda_matches_cpu("GlobalMaxPool", {x});
      expect_cuda_matches_cpu("GlobalLpPool", {x});
      expect_cuda_matches_cpu("GlobalLpPool", {x}, {{"p", int64_t(3)}});
    }
  }
  const Tensor nan = with_nans(DType::Float32, {1, 3, 5, 5}, 132, 4);
  expect_cuda_matches_cpu("GlobalMaxPool", {nan});
  expect_cuda_matches_cpu("GlobalAveragePool", {Tensor::empty(DType::Float32, {0, 3, 4, 4})});
}

}  // namespace
}  // namespace ingot::gpu_test
