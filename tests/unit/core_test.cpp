#include <gtest/gtest.h>

#include <csignal>
#include <cmath>
#include <stdexcept>
#include <thread>
#include <filesystem>
#include <limits>
#include <numeric>

#include "core/broadcast.h"
#include "core/isolated.h"
#include "core/npy.h"
#include "core/thread_pool.h"
#include "test_util.h"

using namespace ingot;

TEST(DType, HalfRoundTripsEveryFiniteValue) {
  // Every finite half converts to float and back unchanged (float holds all halves exactly).
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    uint16_t h = uint16_t(bits);
    bool nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
    if (nan) {
      EXPECT_TRUE(std::isnan(half_to_float(h)));
      continue;
    }
    ASSERT_EQ(float_to_half(half_to_float(h)), h) << "bits " << bits;
  }
}

TEST(DType, HalfRoundsToNearestEven) {
  EXPECT_EQ(float(Half(1.0f + 1.0f / 4096)), 1.0f);                          // below half an ulp
  EXPECT_EQ(float(Half(1.0f + 3.0f / 2048)), 1.0f + 2.0f / 1024);            // tie rounds to even
  EXPECT_EQ(float(Half(65520.0f)), std::numeric_limits<float>::infinity());  // overflow
  EXPECT_EQ(float(Half(std::ldexp(1.0f, -24))), std::ldexp(1.0f, -24));      // smallest subnormal
  EXPECT_EQ(float(Half(std::ldexp(1.0f, -26))), 0.0f);
}

TEST(DType, BFloat16RoundsToNearestEven) {
  EXPECT_EQ(float(BFloat16(1.0f + 1.0f / 256)), 1.0f);               // tie, even stays
  EXPECT_EQ(float(BFloat16(1.0f + 3.0f / 256)), 1.0f + 4.0f / 256);  // tie, rounds up to even
  EXPECT_TRUE(std::isnan(float(BFloat16(std::nanf("")))));
}

TEST(DType, NamesRoundTrip) {
  for (DType dt : {DType::Float32, DType::BFloat16, DType::UInt64, DType::Bool, DType::String}) {
    EXPECT_EQ(dtype_from_name(dtype_name(dt)), dt);
  }
  EXPECT_EQ(dtype_size(DType::Float16), 2u);
  EXPECT_EQ(dtype_size(DType::Int64), 8u);
}

TEST(Tensor, ReshapeAndSliceRowsAreViews) {
  Tensor t = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, {3, 2});
  Tensor r = t.reshape({2, 3});
  EXPECT_EQ(r.raw_data(), t.raw_data());
  Tensor rows = t.slice_rows(1, 3);
  EXPECT_EQ(rows.shape(), (Shape{2, 2}));
  EXPECT_EQ(rows.data<float>()[0], 2.0f);
  rows.data<float>()[0] = 42;
  EXPECT_EQ(t.data<float>()[2], 42.0f);  // shares storage
  EXPECT_THROW(t.reshape({4, 2}), Error);
  EXPECT_THROW(t.slice_rows(2, 4), Error);
}

TEST(Tensor, WrongDtypeAccessAndNegativeShapeThrow) {
  Tensor t = Tensor::zeros(DType::Int64, {2});
  EXPECT_THROW(t.data<float>(), Error);
  EXPECT_THROW(Tensor::empty(DType::Float32, {2, -1}), Error);
}

TEST(Tensor, ZeroSizedAndScalarTensors) {
  Tensor z = Tensor::empty(DType::Float32, {0, 3});
  EXPECT_EQ(z.numel(), 0);
  EXPECT_EQ(z.nbytes(), 0u);
  Tensor s = Tensor::scalar<int64_t>(7);
  EXPECT_EQ(s.rank(), 0);
  EXPECT_EQ(s.item_int(), 7);
  EXPECT_EQ(z.clone().shape(), (Shape{0, 3}));
}

TEST(Tensor, CastConvertsAndTruncates) {
  Tensor t = Tensor::from_vector<float>({1.7f, -2.5f, 0.0f}, {3});
  EXPECT_EQ(t.cast(DType::Int32).to_vector<int32_t>(), (std::vector<int32_t>{1, -2, 0}));
  EXPECT_EQ(t.cast(DType::Bool).to_vector<bool>(), (std::vector<bool>{true, true, false}));
  EXPECT_FLOAT_EQ(float(t.cast(DType::Float16).to_vector<Half>()[0]), float(Half(1.7f)));
}

TEST(Tensor, StringTensorsCopy) {
  Tensor t = Tensor::from_vector<std::string>({"a", "bc"}, {2});
  Tensor c = t.clone();
  c.data<std::string>()[0] = "z";
  EXPECT_EQ(t.data<std::string>()[0], "a");
  EXPECT_EQ(c.to_vector<std::string>()[1], "bc");
}

TEST(Broadcast, ShapesAndErrors) {
  EXPECT_EQ(broadcast_shapes({{2, 1, 3}, {4, 1}}), (Shape{2, 4, 3}));
  EXPECT_EQ(broadcast_shapes({{}, {5}}), (Shape{5}));
  EXPECT_EQ(broadcast_shapes({{0, 3}, {1, 3}}), (Shape{0, 3}));
  try {
    broadcast_shapes({{2, 3}, {4, 3}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[2,3] and [4,3]"), std::string::npos) << e.what();
  }
}

TEST(Broadcast, IteratorVisitsEveryElementWithTheRightOffsets) {
  Shape a{2, 1, 3}, b{4, 1}, out = broadcast_shapes({a, b});
  BroadcastIterator it(out, {a, b});
  std::vector<int64_t> seen_a, seen_b;
  int64_t offs[2];
  for (int64_t row = 0; row < it.outer(); ++row) {
    it.offsets(row, offs);
    for (int64_t i = 0; i < it.inner(); ++i) {
      seen_a.push_back(offs[0] + i * it.inner_stride(0));
      seen_b.push_back(offs[1] + i * it.inner_stride(1));
    }
  }
  ASSERT_EQ(int64_t(seen_a.size()), shape_numel(out));
  // Reference: explicit index arithmetic for out[i][j][k].
  size_t n = 0;
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 4; ++j)
      for (int64_t k = 0; k < 3; ++k, ++n) {
        EXPECT_EQ(seen_a[n], i * 3 + k);
        EXPECT_EQ(seen_b[n], j);
      }
}

TEST(Npy, RoundTripKeepsDtypeShapeAndData) {
  auto path = ingot::testing::temp_dir() / "core_test.npy";
  Tensor t = Tensor::from_vector<int64_t>({1, -2, 3, 4, 5, 6}, {2, 3});
  save_npy(path.string(), t);
  Tensor r = load_npy(path.string());
  EXPECT_EQ(r.dtype(), DType::Int64);
  EXPECT_EQ(r.shape(), (Shape{2, 3}));
  EXPECT_EQ(r.to_vector<int64_t>(), t.to_vector<int64_t>());
  Tensor s = Tensor::scalar<float>(2.5f);
  save_npy(path.string(), s);
  EXPECT_EQ(load_npy(path.string()).shape(), Shape{});
  std::filesystem::remove(path);
  EXPECT_THROW(load_npy("/nonexistent/x.npy"), Error);
}

TEST(ThreadPool, CoversRangeOnceAndPropagatesErrors) {
  ThreadPool pool(4);
  std::vector<int> hits(100000, 0);
  pool.parallel_for(int64_t(hits.size()), 1000, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) ++hits[size_t(i)];
  });
  EXPECT_EQ(std::accumulate(hits.begin(), hits.end(), 0), 100000);
  EXPECT_TRUE(std::all_of(hits.begin(), hits.end(), [](int h) { return h == 1; }));
  EXPECT_THROW(pool.parallel_for(100, 1,
                                 [](int64_t b, int64_t) {
                                   if (b > 50) fail("boom");
                                 }),
               Error);
  // The pool stays usable after an exception.
  int64_t total = 0;
  std::mutex m;
  pool.parallel_for(10, 1, [&](int64_t b, int64_t e) {
    std::lock_guard lock(m);
    total += e - b;
  });
  EXPECT_EQ(total, 10);
}

TEST(Isolated, ReturnsTheChildsBytesAndKeepsThisProcessAliveThroughItsCrashes) {
  int in_parent = 1;
  IsolatedResult ok = run_isolated(
      [&] {
        in_parent = 2;  // the child's copy: never seen here
        return std::string("a\0b", 3) + std::string(200000, 'x');  // longer than a pipe's buffer
      },
      30);
  ASSERT_TRUE(ok.bytes) << ok.why;
  EXPECT_TRUE(ok.started);
  EXPECT_EQ(ok.bytes->size(), 200003u);
  EXPECT_EQ(ok.bytes->substr(0, 3), std::string("a\0b", 3));
  EXPECT_EQ(in_parent, 1);

  IsolatedResult crashed = run_isolated([]() -> std::string { std::raise(SIGSEGV); return "unreached"; }, 30);
  EXPECT_FALSE(crashed.bytes);
  EXPECT_TRUE(crashed.started);
  EXPECT_NE(crashed.why.find("killed by signal 11"), std::string::npos) << crashed.why;

  IsolatedResult aborted = run_isolated([]() -> std::string { std::abort(); }, 30);
  EXPECT_FALSE(aborted.bytes);
  EXPECT_NE(aborted.why.find("signal 6"), std::string::npos) << aborted.why;

  IsolatedResult threw = run_isolated([]() -> std::string { throw std::runtime_error("no shapes"); }, 30);
  EXPECT_FALSE(threw.bytes);
  EXPECT_EQ(threw.why, "failed: no shapes");

  IsolatedResult hung = run_isolated([]() -> std::string { std::this_thread::sleep_for(std::chrono::hours(1)); return ""; }, 0.2);
  EXPECT_FALSE(hung.bytes);
  EXPECT_EQ(hung.why, "did not finish within 0.2 s");
}

TEST(Error, ContextIsPrefixedOnce) {
  Error e("input 1: expected rank 4, got [3]");
  e.add_context("node 'c' (Conv)");
  e.add_context("model 'm.onnx'");
  e.add_context("model 'm.onnx'");
  EXPECT_STREQ(e.what(), "model 'm.onnx': node 'c' (Conv): input 1: expected rank 4, got [3]");
}
