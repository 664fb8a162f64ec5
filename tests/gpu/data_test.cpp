// CUDA data-movement kernels against the CPU kernels (src/backends/cuda/kernels/tensor_layout.cu,
// gather_scatter.cu): layout ops, indexing ops, constants and generators, CumSum.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <random>

#include "gpu_test_util.h"
#include "ops/kernel.h"

namespace ingot::gpu_test {
namespace {

// Pure data movement must be bit-exact.
void exact(const std::string& op, const std::vector<Tensor>& inputs, const Attributes& attrs = {}, int outputs = 1) {
  expect_cuda_matches_cpu(op, inputs, attrs, outputs, 0.0, 0.0);
}

Tensor i64(std::vector<int64_t> v) {
  int64_t n = int64_t(v.size());
  return Tensor::from_vector<int64_t>(v, {n});
}
Tensor i64(std::vector<int64_t> v, Shape shape) { return Tensor::from_vector<int64_t>(v, std::move(shape)); }
Tensor i32(std::vector<int32_t> v, Shape shape) { return Tensor::from_vector<int32_t>(v, std::move(shape)); }
Tensor scalar_i64(int64_t v) { return Tensor::scalar<int64_t>(v); }

// Random indices in [-dim, dim) (negative ones exercise the wrap), int64 or int32.
Tensor random_indices(DType dt, Shape shape, int64_t dim, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> dist(-dim, dim - 1);
  Tensor t = Tensor::empty(dt, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) {
    int64_t v = dist(rng);
    if (dt == DType::Int32) {
      t.data<int32_t>()[i] = int32_t(v);
    } else {
      t.data<int64_t>()[i] = v;
    }
  }
  return t;
}

// Every dtype the data-movement kernels claim, by size class and kind.
const DType kAll[] = {DType::Float32, DType::Float16, DType::BFloat16, DType::Float64, DType::Int8,
                      DType::Int16,   DType::Int32,   DType::Int64,    DType::UInt8,   DType::UInt16,
                      DType::UInt32,  DType::UInt64,  DType::Bool};
const DType kSome[] = {DType::Float32, DType::Float16, DType::Int64, DType::Bool, DType::UInt8};
const DType kFloats[] = {DType::Float32, DType::Float16, DType::BFloat16, DType::Float64};

// ---- Layout -----------------------------------------------------------------------------------------

TEST(CudaData, TransposeAllDtypes) {
  INGOT_REQUIRE_GPU();
  for (DType dt : kAll) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    Tensor x = random_tensor(dt, {2, 3, 4}, 1);
    exact("Transpose", {x}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
    exact("Transpose", {x}, {{"perm", std::vector<int64_t>{2, 0, 1}}});
    exact("Transpose", {x});  // reversed axes
    exact("Transpose", {x}, {{"perm", std::vector<int64_t>{-1, 0, 1}}});
    // Large enough for the shared-memory tiled path (both sides >= 16, ragged edges).
    exact("Transpose", {random_tensor(dt, {3, 67, 45}, 2)}, {{"perm", std::vector<int64_t>{0, 2, 1}}});
    exact("Transpose", {random_tensor(dt, {70, 33}, 3)});
    // A short destination axis (an image's channels moved last, NCHW -> NHWC): one thread per
    // position of the long axis writes its few contiguous elements; a ragged last block.
    exact("Transpose", {random_tensor(dt, {2, 3, 19, 23}, 14)}, {{"perm", std::vector<int64_t>{0, 2, 3, 1}}});
    exact("Transpose", {random_tensor(dt, {300, 5}, 15)});
  }
}

TEST(CudaData, TransposeShapes) {
  INGOT_REQUIRE_GPU();
  for (DType dt : kSome) {
    exact("Transpose", {random_tensor(dt, {1, 3, 7, 5}, 4)}, {{"perm", std::vector<int64_t>{0, 2, 3, 1}}});
    exact("Transpose", {random_tensor(dt, {2, 33, 40, 3}, 5)}, {{"perm", std::vector<int64_t>{0, 3, 1, 2}}});
    exact("Transpose", {random_tensor(dt, {20, 3, 40}, 6)}, {{"perm", std::vector<int64_t>{2, 1, 0}}});
    exact("Transpose", {random_tensor(dt, {2, 3, 2, 3, 2, 3}, 7)}, {{"perm", std::vector<int64_t>{5, 3, 1, 0, 2, 4}}});
    exact("Transpose", {random_tensor(dt, {1, 5, 1}, 8)}, {{"perm", std::vector<int64_t>{2, 1, 0}}});  // a view
    exact("Transpose", {random_tensor(dt, {0, 3}, 9)});
    exact("Transpose", {random_tensor(dt, {}, 10)});
    // Head split/merge: the innermost run stays whole, so the copy moves 16/8/4-byte words when
    // sizes allow (64 elements), else elements (5).
    exact("Transpose", {random_tensor(dt, {2, 7, 3, 64}, 11)}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
    exact("Transpose", {random_tensor(dt, {2, 3, 7, 6}, 12)}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
    exact("Transpose", {random_tensor(dt, {2, 3, 7, 5}, 13)}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  }
}

TEST(CudaData, Concat) {
  INGOT_REQUIRE_GPU();
  for (DType dt : kAll) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    Tensor a = random_tensor(dt, {2, 3, 4}, 1), b = random_tensor(dt, {2, 1, 4}, 2),
           c = random_tensor(dt, {2, 0, 4}, 3);
    exact("Concat", {a, b, c, a}, {{"axis", 1}});
    exact("Concat", {a, random_tensor(dt, {2, 3, 7}, 4)}, {{"axis", -1}});
    exact("Concat", {a, random_tensor(dt, {5, 3, 4}, 5)}, {{"axis", 0}});
  }
  Tensor a = random_tensor(DType::Float32, {3, 5}, 6);
  exact("Concat", {a}, {{"axis", 0}});
  exact("Concat", {random_tensor(DType::Float16, {0, 5}, 7), random_tensor(DType::Float16, {0, 2}, 8)}, {{"axis", 1}});
  exact(
      "Concat",
      {random_tensor(DType::Int64, {7}, 9), random_tensor(DType::Int64, {0}, 10), random_tensor(DType::Int64, {1}, 11)},
      {{"axis", 0}});
}

TEST(CudaData, Split) {
  INGOT_REQUIRE_GPU();
  for (DType dt : kSome) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    Tensor x = random_tensor(dt, {4, 7, 3}, 1);
    exact("Split", {x}, {{"axis", 1}, {"num_outputs", 3}}, 3);  // 3, 3, 1
    exact("Split", {x, i64({2, 5})}, {{"axis", -2}}, 2);
    exact("Split", {x, i64({0, 4})}, {{"axis", 0}}, 2);  // a zero-size piece
    exact("Split", {x}, {{"axis", 0}}, 2);               // equal parts, views
    exact("Split", {x, i64({1, 1, 1})}, {{"axis", -1}}, 3);
  }
}

TEST(CudaData, Slice) {
  INGOT_REQUIRE_GPU();
  const int64_t kMin = INT64_MIN, kMax = INT64_MAX;
  for (DType dt : kAll) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    Tensor x = random_tensor(dt, {5, 6, 7}, 1);
    exact("Slice", {x, i64({1, 0}), i64({4, 6})});                                  // leading axes: a view
    exact("Slice", {x, i64({1, -5}), i64({-1, 100}), i64({0, 2}), i64({2, 3})});    // strided
    exact("Slice", {x, i64({-1}), i64({kMin}), i64({1}), i64({-1})});               // full reverse
    exact("Slice", {x, i64({10, 5}), i64({-10, 1}), i64({-1, 0}), i64({-2, -2})});  // clamped, negative steps
    exact("Slice", {x, i64({3}), i64({3}), i64({2})});                              // empty
    exact("Slice", {x, i64({0}), i64({kMax}), i64({-3}), i64({100})});              // one row
  }
  exact("Slice", {random_tensor(DType::Float32, {0, 4}, 2), i64({0}), i64({2}), i64({1})});
}

TEST(CudaData, Pad) {
  INGOT_REQUIRE_GPU();
  for (DType dt : kSome) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    Tensor x = random_tensor(dt, {2, 3, 5}, 1);
    Tensor value = random_tensor(dt, {}, 2, 1, 3);
    exact("Pad", {x, i64({0, 1, 2, 1, 0, 3})});  // constant 0
    exact("Pad", {x, i64({1, 2, 0, 0, 1, 2}), value});
    exact("Pad", {x, i64({1, -1, 2, 0, 0, -2}), value});  // negative pads crop
    exact("Pad", {x, i64({2, 3}), value, i64({-1})});     // axes input
    exact("Pad", {x, i64({0, 0, 0, 0}), Tensor(), i64({0, 1})});
    for (const char* mode : {"reflect", "edge", "wrap"}) {
      SCOPED_TRACE(mode);
      exact("Pad", {x, i64({1, 2, 4, 1, 1, 3})}, {{"mode", mode}});
      exact("Pad", {x, i64({0, -1, 2, 0, 1, -2})}, {{"mode", mode}});
      exact("Pad", {random_tensor(dt, {3, 1, 4}, 3), i64({2, 2, 0, 1, 3, 1})}, {{"mode", mode}});
    }
    exact("Pad", {random_tensor(dt, {0, 3}, 4), i64({1, 1, 1, 1}), value});
  }
}

TEST(CudaData, ExpandAndTile) {
  INGOT_REQUIRE_GPU();
  for (DType dt : kSome) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    exact("Expand", {random_tensor(dt, {3, 1}, 1), i64({2, 3, 4})});
    exact("Expand", {random_tensor(dt, {1, 7, 1, 5}, 2), i64({3, 1, 4, 1})});
    exact("Expand", {random_tensor(dt, {}, 3), i64({2, 2})});
    exact("Expand", {random_tensor(dt, {2, 3}, 4), i64({2, 3})});
    exact("Expand", {random_tensor(dt, {2, 1}, 5), i64({0, 1, 3})});
    exact("Tile", {random_tensor(dt, {2, 3}, 6), i64({2, 3})});
    exact("Tile", {random_tensor(dt, {1, 3, 7, 5}, 7), i64({2, 1, 1, 3})});
    exact("Tile", {random_tensor(dt, {2, 3}, 8), i64({0, 3})});
    exact("Tile", {random_tensor(dt, {5}, 9), i64({1})});
  }
}

TEST(CudaData, DepthToSpaceSpaceToDepth) {
  INGOT_REQUIRE_GPU();
  for (DType dt : kSome) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    Tensor x = random_tensor(dt, {2, 8, 3, 5}, 1);
    exact("DepthToSpace", {x}, {{"blocksize", 2}});
    exact("DepthToSpace", {x}, {{"blocksize", 2}, {"mode", "CRD"}});
    exact("DepthToSpace", {random_tensor(dt, {1, 18, 17, 19}, 2)}, {{"blocksize", 3}});
    exact("SpaceToDepth", {random_tensor(dt, {2, 3, 4, 6}, 3)}, {{"blocksize", 2}});
    exact("SpaceToDepth", {random_tensor(dt, {1, 5, 32, 48}, 4)}, {{"blocksize", 4}});
  }
}

TEST(CudaData, Trilu) {
  INGOT_REQUIRE_GPU();
  for (DType dt : kSome) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    Tensor x = random_tensor(dt, {2, 5, 7}, 1);
    exact("Trilu", {x});
    exact("Trilu", {x}, {{"upper", 0}});
    for (int64_t k : {-9, -1, 0, 2, 10}) {
      exact("Trilu", {x, scalar_i64(k)});
      exact("Trilu", {x, scalar_i64(k)}, {{"upper", 0}});
    }
    exact("Trilu", {random_tensor(dt, {3, 0, 4}, 2)});
  }
}

// ---- Indexing ----------------------------------------------------------------------------------------

TEST(CudaData, Gather) {
  INGOT_REQUIRE_GPU();
  for (DType dt : kAll) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    Tensor x = random_tensor(dt, {5, 4, 3}, 1);
    exact("Gather", {x, random_indices(DType::Int64, {2, 3}, 4, 2)}, {{"axis", 1}});
    exact("Gather", {x, random_indices(DType::Int32, {7}, 5, 3)});
    exact("Gather", {x, random_indices(DType::Int64, {2, 2}, 3, 4)}, {{"axis", -1}});
    exact("Gather", {x, Tensor::scalar<int64_t>(-2)}, {{"axis", 0}});  // scalar index drops the axis
  }
  exact("Gather", {random_tensor(DType::Float32, {5, 4}, 5), random_indices(DType::Int64, {0, 3}, 4, 6)},
        {{"axis", 1}});
}

TEST(CudaData, GatherElements) {
  INGOT_REQUIRE_GPU();
  for (DType dt : kSome) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    Tensor x = random_tensor(dt, {4, 5, 3}, 1);
    exact("GatherElements", {x, random_indices(DType::Int64, {4, 7, 3}, 5, 2)}, {{"axis", 1}});
    exact("GatherElements", {x, random_indices(DType::Int32, {2, 3, 2}, 4, 3)}, {{"axis", 0}});
    exact("GatherElements", {x, random_indices(DType::Int64, {3, 5, 6}, 3, 4)}, {{"axis", -1}});
    exact("GatherElements", {x, random_indices(DType::Int64, {4, 0, 3}, 4, 5)}, {{"axis", 0}});
  }
}

TEST(CudaData, GatherND) {
  INGOT_REQUIRE_GPU();
  for (DType dt : kSome) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    Tensor x = random_tensor(dt, {3, 4, 5}, 1);
    // Tuples of 2 indices into axes 0 and 1 (sizes 3 and 4), so values must fit the smaller axis.
    exact("GatherND", {x, random_indices(DType::Int64, {6, 2}, 3, 2)});
    exact("GatherND", {x, random_indices(DType::Int32, {2, 3, 1}, 3, 3)});
    exact("GatherND", {x, random_indices(DType::Int64, {4, 3}, 3, 4)});  // whole elements
    exact("GatherND", {x, random_indices(DType::Int64, {3, 1}, 4, 5)}, {{"batch_dims", 1}});
    exact("GatherND", {x, random_indices(DType::Int64, {3, 2, 2}, 4, 6)}, {{"batch_dims", 1}});
    exact("GatherND", {x, random_indices(DType::Int64, {3, 4, 1}, 5, 7)}, {{"batch_dims", 2}});
    exact("GatherND", {x, random_indices(DType::Int64, {0, 2}, 3, 8)});
  }
}

// Indices along axis 0 of `dim` rows, distinct within each column (so reduction 'none' is defined).
Tensor distinct_column_indices(Shape shape, int64_t dim, uint32_t seed) {
  std::mt19937 rng(seed);
  Tensor t = Tensor::empty(DType::Int64, shape);
  int64_t rows = shape[0], cols = t.numel() / std::max<int64_t>(rows, 1);
  for (int64_t c = 0; c < cols; ++c) {
    std::vector<int64_t> p(static_cast<size_t>(dim));
    std::iota(p.begin(), p.end(), 0);
    std::shuffle(p.begin(), p.end(), rng);
    for (int64_t r = 0; r < rows; ++r) t.data<int64_t>()[r * cols + c] = p[size_t(r)] - (rng() % 2 ? dim : 0);
  }
  return t;
}

TEST(CudaData, ScatterElements) {
  INGOT_REQUIRE_GPU();
  for (DType dt : kAll) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    Tensor x = random_tensor(dt, {6, 5}, 1);
    Tensor unique_idx = distinct_column_indices({4, 5}, 6, 2);
    Tensor upd = random_tensor(dt, {4, 5}, 3);
    exact("ScatterElements", {x, unique_idx, upd});
    exact("Scatter", {x, unique_idx, upd});
    if (dt == DType::Bool) continue;
    Tensor dup_idx = random_indices(DType::Int64, {7, 4}, 6, 4);  // duplicates on purpose
    Tensor dup_upd = random_tensor(dt, {7, 4}, 5, 0.5, 1.5);
    for (const char* r : {"add", "mul", "max", "min"}) {
      SCOPED_TRACE(r);
      expect_cuda_matches_cpu("ScatterElements", {x, dup_idx, dup_upd}, {{"reduction", r}});
    }
  }
  Tensor x = random_tensor(DType::Float32, {4, 6, 3}, 6);
  exact("ScatterElements",
        {x, random_indices(DType::Int32, {4, 1, 3}, 6, 7), random_tensor(DType::Float32, {4, 1, 3}, 8)},
        {{"axis", -2}});
  exact("ScatterElements",
        {x, random_indices(DType::Int64, {0, 2, 3}, 4, 9), random_tensor(DType::Float32, {0, 2, 3}, 10)});
}

TEST(CudaData, ScatterND) {
  INGOT_REQUIRE_GPU();
  for (DType dt : kAll) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    Tensor x = random_tensor(dt, {4, 5, 3}, 1);
    exact("ScatterND", {x, i64({1, -1}, {2, 1}), random_tensor(dt, {2, 5, 3}, 2)});            // rows 1 and 3
    exact("ScatterND", {x, i32({0, 1, 3, -1, -4, 2}, {3, 2}), random_tensor(dt, {3, 3}, 3)});  // distinct pairs
    exact("ScatterND", {x, i64({0, 0, 0, 3, 4, 2}, {2, 3}), random_tensor(dt, {2}, 4)});       // single elements
    if (dt == DType::Bool) continue;
    Tensor dup = i64({1, 3, 1, -3, 0}, {5, 1});
    Tensor upd = random_tensor(dt, {5, 5, 3}, 5, 0.5, 1.5);
    for (const char* r : {"add", "mul", "max", "min"}) {
      SCOPED_TRACE(r);
      expect_cuda_matches_cpu("ScatterND", {x, dup, upd}, {{"reduction", r}});
    }
  }
  exact("ScatterND",
        {random_tensor(DType::Float32, {4, 5}, 6), i64({}, {0, 1}), random_tensor(DType::Float32, {0, 5}, 7)});
}

TEST(CudaData, OneHot) {
  INGOT_REQUIRE_GPU();
  // Out-of-range indices (beyond [-depth, depth)) give all-off rows.
  Tensor idx = i64({0, 4, -1, -5, 7, 2, -9, 3, 1, 0, 4, 2}, {3, 4});
  for (DType vt : kSome) {
    SCOPED_TRACE(std::string(dtype_name(vt)));
    Tensor values = random_tensor(vt, {2}, 1, -3, 3);
    exact("OneHot", {idx, scalar_i64(5), values});
    exact("OneHot", {idx, scalar_i64(5), values}, {{"axis", 0}});
    exact("OneHot", {idx, scalar_i64(5), values}, {{"axis", 1}});
    exact("OneHot", {idx, scalar_i64(5), values}, {{"axis", -2}});
  }
  Tensor values = Tensor::from_vector<float>({0.5f, 2.0f}, {2});
  exact("OneHot", {Tensor::from_vector<float>({0.0f, 2.7f, -1.2f, 3.0f}, {4}), Tensor::scalar<float>(4.0f), values});
  exact("OneHot", {Tensor::from_vector<int32_t>({1, -2, 0}, {3}), scalar_i64(3), values});
  exact("OneHot", {Tensor::from_vector<int32_t>({}, {0, 2}), scalar_i64(3), values});
  exact("OneHot", {Tensor::scalar<int64_t>(2), scalar_i64(3), values});
}

// ---- Constants and generators ----------------------------------------------------------------------

TEST(CudaData, ConstantOfShape) {
  INGOT_REQUIRE_GPU();
  exact("ConstantOfShape", {i64({2, 3})});  // float32 zeros
  exact("ConstantOfShape", {i64({3, 1, 5})}, {{"value", Tensor::from_vector<Half>({Half(1.5f)}, {1})}});
  exact("ConstantOfShape", {i64({4})}, {{"value", Tensor::from_vector<int64_t>({-7}, {1})}});
  exact("ConstantOfShape", {i64({2, 2})}, {{"value", Tensor::from_vector<bool>({true}, {1})}});
  exact("ConstantOfShape", {i64({2, 0})}, {{"value", Tensor::from_vector<float>({3.0f}, {1})}});
  exact("ConstantOfShape", {i64({})}, {{"value", Tensor::from_vector<int32_t>({9}, {1})}});  // a scalar
}

TEST(CudaData, Range) {
  INGOT_REQUIRE_GPU();
  // Floats: within rounding (the host compiler may or may not fuse start + i * delta).
  expect_cuda_matches_cpu("Range",
                          {Tensor::scalar<float>(0.0f), Tensor::scalar<float>(10.0f), Tensor::scalar<float>(0.3f)});
  expect_cuda_matches_cpu("Range",
                          {Tensor::scalar<float>(-1.5f), Tensor::scalar<float>(-20.0f), Tensor::scalar<float>(-0.7f)});
  expect_cuda_matches_cpu("Range",
                          {Tensor::scalar<double>(1.0), Tensor::scalar<double>(2.0), Tensor::scalar<double>(0.01)});
  exact("Range", {scalar_i64(10), scalar_i64(-3), scalar_i64(-2)});
  exact("Range", {Tensor::scalar<int32_t>(3), Tensor::scalar<int32_t>(1000), Tensor::scalar<int32_t>(7)});
  exact("Range", {Tensor::scalar<int16_t>(-5), Tensor::scalar<int16_t>(5), Tensor::scalar<int16_t>(3)});
  exact("Range", {scalar_i64(5), scalar_i64(5), scalar_i64(1)});  // empty
}

TEST(CudaData, EyeLike) {
  INGOT_REQUIRE_GPU();
  for (DType dt : kAll) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    Tensor x = random_tensor(dt, {4, 6}, 1);
    exact("EyeLike", {x});
    exact("EyeLike", {x}, {{"k", 2}});
    exact("EyeLike", {x}, {{"k", -3}});
    exact("EyeLike", {x}, {{"k", 9}});
  }
  Tensor x = random_tensor(DType::Float32, {5, 3}, 2);
  exact("EyeLike", {x}, {{"dtype", int64_t(DType::Int32)}});
  exact("EyeLike", {x}, {{"dtype", int64_t(DType::Bool)}, {"k", -1}});
  exact("EyeLike", {x}, {{"dtype", int64_t(DType::Float16)}});
  exact("EyeLike", {random_tensor(DType::Float32, {0, 3}, 3)});
}

// Constant has no inputs, so an eager call would run on the CPU: run the CUDA kernel directly and
// check that it uploads once and then hands out the same device tensor.
TEST(CudaData, ConstantCachesTheDeviceTensor) {
  INGOT_REQUIRE_GPU();
  const OpDef* def = OpCatalogue::instance().find("", "Constant");
  ASSERT_NE(def, nullptr);
  const KernelDef* kernel = KernelRegistry::instance().find("", "Constant", DeviceType::CUDA, 13);
  ASSERT_NE(kernel, nullptr);
  Device gpu{DeviceType::CUDA, 0};
  auto run = [&](const Attributes& attrs, NodeState& state) {
    std::vector<Value> outputs(1);
    KernelContext ctx(*def, attrs, 13, {}, outputs, nullptr, &state, gpu);
    kernel->fn(ctx);
    return outputs[0].tensor;
  };
  Tensor value = random_tensor(DType::Float16, {3, 4}, 1);
  NodeState state;
  Tensor first = run({{"value", value}}, state);
  Tensor second = run({{"value", value}}, state);
  EXPECT_EQ(first.device(), gpu);
  EXPECT_EQ(first.raw_data(), second.raw_data());
  expect_close(value, first, 0, 0, "Constant value");
  NodeState s2, s3, s4;
  expect_close(Tensor::from_vector<int64_t>({4, -2, 7}, {3}), run({{"value_ints", std::vector<int64_t>{4, -2, 7}}}, s2),
               0, 0, "Constant value_ints");
  expect_close(Tensor::scalar<float>(2.5f), run({{"value_float", 2.5f}}, s3), 0, 0, "Constant value_float");
  expect_close(Tensor::from_vector<float>({1.0f, -3.0f}, {2}),
               run({{"value_floats", std::vector<float>{1.0f, -3.0f}}}, s4), 0, 0, "Constant value_floats");
}

TEST(CudaData, CumSum) {
  INGOT_REQUIRE_GPU();
  const DType types[] = {DType::Float32, DType::Float16, DType::BFloat16, DType::Float64,
                         DType::Int32,   DType::Int64,   DType::Int8,     DType::UInt8};
  for (DType dt : types) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    Tensor x = random_tensor(dt, {3, 4, 5}, 1);
    for (int64_t axis : {0, 1, -1}) {
      for (int64_t exclusive : {0, 1}) {
        for (int64_t reverse : {0, 1}) {
          expect_cuda_matches_cpu("CumSum", {x, scalar_i64(axis)}, {{"exclusive", exclusive}, {"reverse", reverse}});
        }
      }
    }
    expect_cuda_matches_cpu("CumSum", {random_tensor(dt, {1037}, 2), Tensor::scalar<int32_t>(0)});
    expect_cuda_matches_cpu("CumSum", {random_tensor(dt, {2, 0, 3}, 3), scalar_i64(1)});
  }
}

}  // namespace
}  // namespace ingot::gpu_test

namespace ingot::gpu_test {
namespace {
TEST(CudaDataPerf, DISABLED_Bandwidth) {
  INGOT_REQUIRE_GPU();
  Device gpu{DeviceType::CUDA, 0};
  auto bench = [&](const std::string& name, const std::string& op, const std::vector<Tensor>& in, const Attributes& a,
                   int outs, double bytes) {
    std::vector<Tensor> g;
    for (const Tensor& t : in) g.push_back(t.to(gpu));
    ops::call(op, g, a, outs);
    cuda::synchronize();
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 20; ++i) ops::call(op, g, a, outs);
    cuda::synchronize();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 20;
    std::printf("%-28s %8.1f us %8.1f GB/s\n", name.c_str(), s * 1e6, bytes / s / 1e9);
  };
  Tensor x = random_tensor(DType::Float32, {64, 512, 512}, 1);
  double b = 2.0 * x.nbytes();
  bench("transpose 021 f32", "Transpose", {x}, {{"perm", std::vector<int64_t>{0, 2, 1}}}, 1, b);
  bench("transpose 120 f32", "Transpose", {x}, {{"perm", std::vector<int64_t>{1, 2, 0}}}, 1, b);
  Tensor h = random_tensor(DType::Float16, {64, 512, 512}, 1);
  bench("transpose 021 f16", "Transpose", {h}, {{"perm", std::vector<int64_t>{0, 2, 1}}}, 1, b / 2);
  Tensor nhwc = random_tensor(DType::Float32, {32, 3, 224, 224}, 2);
  bench("transpose nchw->nhwc c3", "Transpose", {nhwc}, {{"perm", std::vector<int64_t>{0, 2, 3, 1}}}, 1,
        2.0 * nhwc.nbytes());
  bench("concat axis1", "Concat", {x, x}, {{"axis", 1}}, 1, 2 * b);
  bench("slice step2", "Slice", {x, i64({0}), i64({512}), i64({2}), i64({2})}, {}, 1, 0.75 * b);
  bench("pad reflect", "Pad", {x, i64({0, 4, 4, 0, 4, 4})}, {{"mode", "reflect"}}, 1, b);
  bench("gather axis1", "Gather", {x, random_indices(DType::Int64, {512}, 512, 3)}, {{"axis", 1}}, 1, b);
  bench("expand", "Expand", {random_tensor(DType::Float32, {64, 1, 512}, 4), i64({64, 512, 512})}, {}, 1, b / 2);
  bench("cumsum axis1", "CumSum", {x, scalar_i64(1)}, {}, 1, b);
  bench("cumsum last", "CumSum", {x, scalar_i64(2)}, {}, 1, b);
}
}  // namespace
}  // namespace ingot::gpu_test
