// CUDA LSTM/GRU/RNN (src/backends/cuda/kernels/rnn.cu) and Resize/Upsample/GridSample/RoiAlign
// (src/backends/cuda/kernels/resize.cu) against the CPU kernels.
#include "gpu_test_util.h"

namespace ingot::gpu_test {
namespace {

const DType kFloats[] = {DType::Float32, DType::Float16, DType::BFloat16, DType::Float64};

// float32 recurrences accumulate GEMM reordering over the steps: a little looser than elementwise.
double rnn_atol(DType dt) { return dt == DType::Float32 ? 5e-5 : default_atol(dt); }
double rnn_rtol(DType dt) { return dt == DType::Float32 ? 5e-5 : default_rtol(dt); }

struct RnnCase {
  const char* op;
  int gates;
  int num_outputs;
};
const RnnCase kLstm{"LSTM", 4, 3}, kGru{"GRU", 3, 2}, kRnn{"RNN", 1, 2};

// Inputs X, W, R, B, sequence_lens, initial_h (, initial_c, P) for a layer; `lengths` empty: omitted.
std::vector<Tensor> rnn_inputs(const RnnCase& c, DType dt, int64_t seq, int64_t batch, int64_t input, int64_t hidden,
                               int64_t dirs, int64_t layout, const std::vector<int32_t>& lengths, bool bias,
                               bool initial, bool peephole, uint32_t seed) {
  const int64_t gh = c.gates * hidden;
  Shape x_shape = layout == 0 ? Shape{seq, batch, input} : Shape{batch, seq, input};
  Shape state = layout == 0 ? Shape{dirs, batch, hidden} : Shape{batch, dirs, hidden};
  std::vector<Tensor> in;
  in.push_back(random_tensor(dt, x_shape, seed, -1.5, 1.5));
  in.push_back(random_tensor(dt, {dirs, gh, input}, seed + 1, -0.6, 0.6));
  in.push_back(random_tensor(dt, {dirs, gh, hidden}, seed + 2, -0.6, 0.6));
  in.push_back(bias ? random_tensor(dt, {dirs, 2 * gh}, seed + 3, -0.5, 0.5) : Tensor());
  in.push_back(lengths.empty() ? Tensor() : Tensor::from_vector<int32_t>(lengths, {int64_t(lengths.size())}));
  in.push_back(initial ? random_tensor(dt, state, seed + 4, -1, 1) : Tensor());
  if (c.gates == 4) {
    in.push_back(initial ? random_tensor(dt, state, seed + 5, -1, 1) : Tensor());
    in.push_back(peephole ? random_tensor(dt, {dirs, 3 * hidden}, seed + 6, -0.5, 0.5) : Tensor());
  }
  return in;
}

void check_rnn(const RnnCase& c, DType dt, const std::vector<Tensor>& in, const Attributes& attrs) {
  expect_cuda_matches_cpu(c.op, in, attrs, c.num_outputs, rnn_atol(dt), rnn_rtol(dt));
}

TEST(CudaRnn, DirectionsLayoutsAndOptionalInputs) {
  INGOT_REQUIRE_GPU();
  for (const RnnCase& c : {kLstm, kGru, kRnn}) {
    for (DType dt : kFloats) {
      for (const char* direction : {"forward", "reverse", "bidirectional"}) {
        const int64_t dirs = direction == std::string("bidirectional") ? 2 : 1;
        for (int64_t layout : {0, 1}) {
          SCOPED_TRACE(std::string(c.op) + " " + std::string(dtype_name(dt)) + " " + direction + " layout " +
                       std::to_string(layout));
          Attributes attrs{{"direction", direction}, {"layout", layout}, {"hidden_size", int64_t(5)}};
          // Everything given, with padded sequences (one of length 0).
          check_rnn(c, dt, rnn_inputs(c, dt, 6, 4, 3, 5, dirs, layout, {6, 3, 0, 5}, true, true, true, 11), attrs);
          // Only X, W, R.
          check_rnn(c, dt, rnn_inputs(c, dt, 4, 3, 7, 5, dirs, layout, {}, false, false, false, 21), attrs);
          // Full-length sequence_lens and a bias, no initial state.
          check_rnn(c, dt, rnn_inputs(c, dt, 3, 2, 4, 5, dirs, layout, {3, 3}, true, false, false, 31), attrs);
        }
      }
    }
  }
}

TEST(CudaRnn, LstmAttributes) {
  INGOT_REQUIRE_GPU();
  for (DType dt : {DType::Float32, DType::Float16}) {
    std::vector<Tensor> in = rnn_inputs(kLstm, dt, 5, 3, 4, 6, 2, 0, {5, 2, 4}, true, true, true, 41);
    check_rnn(kLstm, dt, in, {{"direction", "bidirectional"}, {"input_forget", int64_t(1)}});
    check_rnn(kLstm, dt, in, {{"direction", "bidirectional"}, {"clip", 0.7f}});
    // Parameterized activations: alpha/beta lists consumed in order, different per direction.
    check_rnn(kLstm, dt, in,
              {{"direction", "bidirectional"},
               {"activations", std::vector<std::string>{"HardSigmoid", "ScaledTanh", "Affine", "Sigmoid", "Elu",
                                                        "LeakyRelu"}},
               {"activation_alpha", std::vector<float>{0.3f, 0.9f, 0.5f, 0.8f, 0.1f}},
               {"activation_beta", std::vector<float>{0.45f, 1.2f, 0.1f}}});
    check_rnn(kLstm, dt, in,
              {{"direction", "bidirectional"},
               {"activations", std::vector<std::string>{"sigmoid", "softsign", "softplus"}}});
  }
}

TEST(CudaRnn, GruAndRnnAttributes) {
  INGOT_REQUIRE_GPU();
  for (DType dt : {DType::Float32, DType::BFloat16}) {
    for (int64_t lbr : {0, 1}) {
      std::vector<Tensor> in = rnn_inputs(kGru, dt, 5, 3, 4, 7, 2, 1, {1, 5, 3}, true, true, false, 51);
      check_rnn(kGru, dt, in, {{"direction", "bidirectional"}, {"layout", int64_t(1)}, {"linear_before_reset", lbr}});
      check_rnn(kGru, dt, in,
                {{"direction", "bidirectional"},
                 {"layout", int64_t(1)},
                 {"linear_before_reset", lbr},
                 {"clip", 1.1f},
                 {"activations", std::vector<std::string>{"Sigmoid", "Relu"}}});
    }
    std::vector<Tensor> in = rnn_inputs(kRnn, dt, 6, 2, 3, 8, 1, 0, {4, 6}, true, true, false, 61);
    check_rnn(kRnn, dt, in, {{"activations", std::vector<std::string>{"Relu"}}});
    check_rnn(kRnn, dt, in,
              {{"activations", std::vector<std::string>{"ThresholdedRelu"}}, {"activation_alpha", std::vector<float>{0.2f}}});
    check_rnn(kRnn, dt, in, {{"direction", "reverse"}, {"clip", 0.5f}});
  }
}

// Silero VAD's shape: batch 1, hidden 64/128, short sequences, Y and the states.
TEST(CudaRnn, SileroLikeLstm) {
  INGOT_REQUIRE_GPU();
  for (int64_t hidden : {64, 128}) {
    for (int64_t seq : {1, 4}) {
      std::vector<Tensor> in = rnn_inputs(kLstm, DType::Float32, seq, 1, hidden, hidden, 1, 0, {}, true, true, false,
                                          71);
      for (Tensor& t : in) {  // weights scaled like a trained layer: keep the gates out of saturation
        if (t.defined() && t.dtype() == DType::Float32 && t.rank() == 3 && t.dim(1) == 4 * hidden) {
          float* p = t.data<float>();
          for (int64_t i = 0; i < t.numel(); ++i) p[i] *= 0.25f;
        }
      }
      check_rnn(kLstm, DType::Float32, in, {});
    }
  }
}

TEST(CudaRnn, EmptySequenceAndBatch) {
  INGOT_REQUIRE_GPU();
  for (const RnnCase& c : {kLstm, kGru, kRnn}) {
    SCOPED_TRACE(c.op);
    // seq 0: Y is empty, Y_h is the initial state.
    check_rnn(c, DType::Float32, rnn_inputs(c, DType::Float32, 0, 2, 3, 4, 2, 0, {}, true, true, false, 81),
              {{"direction", "bidirectional"}});
    // batch 0: every output is empty.
    check_rnn(c, DType::Float32, rnn_inputs(c, DType::Float32, 3, 0, 3, 4, 1, 0, {}, true, false, false, 82), {});
  }
}

// ---- Resize / Upsample -------------------------------------------------------------------------

Tensor floats(std::vector<float> v) {
  const int64_t n = int64_t(v.size());
  return Tensor::from_vector<float>(v, {n});
}
Tensor int64s(std::vector<int64_t> v) {
  const int64_t n = int64_t(v.size());
  return Tensor::from_vector<int64_t>(v, {n});
}

TEST(CudaResize, NearestModes) {
  INGOT_REQUIRE_GPU();
  const Tensor scales = floats({1, 1, 2.0f, 1.5f}), down = floats({1, 1, 0.6f, 0.45f});
  const std::vector<std::pair<const char*, const char*>> modes = {{"asymmetric", "floor"},
                                                                  {"half_pixel", "round_prefer_floor"},
                                                                  {"half_pixel", "round_prefer_ceil"},
                                                                  {"tf_half_pixel_for_nn", "ceil"},
                                                                  {"align_corners", "round_prefer_ceil"},
                                                                  {"pytorch_half_pixel", "floor"}};
  for (DType dt : {DType::Float32, DType::Float16, DType::Int32, DType::UInt8, DType::Int64, DType::Bool}) {
    Tensor x = random_tensor(dt, {1, 3, 7, 5}, 101, 0, 100);
    for (const auto& [coord, nearest] : modes) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + coord + " " + nearest);
      Attributes attrs{{"mode", "nearest"}, {"coordinate_transformation_mode", coord}, {"nearest_mode", nearest}};
      expect_cuda_matches_cpu("Resize", {x, Tensor(), scales}, attrs, 1, 0, 0);
      expect_cuda_matches_cpu("Resize", {x, Tensor(), down}, attrs, 1, 0, 0);
      expect_cuda_matches_cpu("Resize", {x, Tensor(), Tensor(), int64s({2, 3, 11, 4})}, attrs, 1, 0, 0);
    }
  }
}

TEST(CudaResize, LinearAndCubic) {
  INGOT_REQUIRE_GPU();
  const std::vector<Tensor> scale_sets = {floats({1, 1, 2.0f, 2.0f}), floats({1, 1, 0.6f, 0.45f}),
                                          floats({1, 1, 1.7f, 1.0f}), floats({1, 1, 1.0f, 3.0f})};
  for (DType dt : kFloats) {
    Tensor x = random_tensor(dt, {2, 3, 7, 5}, 111);
    for (const char* mode : {"linear", "cubic"}) {
      for (const char* coord : {"half_pixel", "asymmetric", "pytorch_half_pixel", "align_corners"}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " " + mode + " " + coord);
        Attributes attrs{{"mode", mode}, {"coordinate_transformation_mode", coord}};
        for (const Tensor& s : scale_sets) expect_cuda_matches_cpu("Resize", {x, Tensor(), s}, attrs);
        expect_cuda_matches_cpu("Resize", {x, Tensor(), Tensor(), int64s({2, 3, 1, 9})}, attrs);
        expect_cuda_matches_cpu("Resize", {x, Tensor(), Tensor(), int64s({2, 3, 4, 3})}, attrs);
      }
    }
    SCOPED_TRACE(dtype_name(dt));
    expect_cuda_matches_cpu(
        "Resize", {x, Tensor(), floats({1, 1, 1.6f, 2.3f})},
        {{"mode", "cubic"}, {"cubic_coeff_a", -0.5f}, {"exclude_outside", int64_t(1)}});
    // Every axis resampled (three passes) on a rank-3 input.
    Tensor x3 = random_tensor(dt, {3, 4, 5}, 112);
    expect_cuda_matches_cpu("Resize", {x3, Tensor(), floats({2.0f, 0.5f, 1.4f})}, {{"mode", "linear"}});
  }
  // Integer images interpolate in float and truncate back, as the CPU does (a float result within
  // rounding of an integer may truncate either way: atol 1).
  Tensor xi = random_tensor(DType::Int32, {1, 2, 5, 6}, 113, -100, 100);
  expect_cuda_matches_cpu("Resize", {xi, Tensor(), floats({1, 1, 1.5f, 2.0f})}, {{"mode", "linear"}}, 1, 1, 0);
  // Identity scales take the copy path.
  Tensor xf = random_tensor(DType::Float16, {1, 2, 5, 6}, 114);
  expect_cuda_matches_cpu("Resize", {xf, Tensor(), floats({1, 1, 1, 1})}, {{"mode", "linear"}}, 1, 0, 0);
}

TEST(CudaResize, CropAndResizeAxesAndEmpty) {
  INGOT_REQUIRE_GPU();
  Tensor x = random_tensor(DType::Float32, {1, 2, 8, 9}, 121);
  const Tensor roi = floats({0, 0, 0.1f, -0.2f, 1, 1, 0.8f, 1.3f});
  for (const char* mode : {"nearest", "linear", "cubic"}) {
    SCOPED_TRACE(mode);
    expect_cuda_matches_cpu("Resize", {x, roi, Tensor(), int64s({1, 2, 5, 7})},
                            {{"mode", mode},
                             {"coordinate_transformation_mode", "tf_crop_and_resize"},
                             {"extrapolation_value", 3.5f}});
  }
  // axes: sizes / scales for the last two axes only; roi for those axes too.
  expect_cuda_matches_cpu("Resize", {x, Tensor(), Tensor(), int64s({4, 13})},
                          {{"mode", "linear"}, {"axes", std::vector<int64_t>{2, 3}}});
  expect_cuda_matches_cpu("Resize", {x, Tensor(), floats({0.5f, 1.5f})},
                          {{"mode", "cubic"}, {"axes", std::vector<int64_t>{-1, 2}}});
  expect_cuda_matches_cpu("Resize", {x, floats({0.2f, 0.9f}), Tensor(), int64s({6})},
                          {{"mode", "linear"},
                           {"axes", std::vector<int64_t>{3}},
                           {"coordinate_transformation_mode", "tf_crop_and_resize"}});
  // An empty output.
  expect_cuda_matches_cpu("Resize", {x, Tensor(), Tensor(), int64s({1, 2, 0, 4})}, {{"mode", "linear"}});
  // Rank 1.
  expect_cuda_matches_cpu("Resize", {random_tensor(DType::Float32, {7}, 122), Tensor(), floats({2.5f})},
                          {{"mode", "cubic"}});
}

TEST(CudaResize, Upsample) {
  INGOT_REQUIRE_GPU();
  for (DType dt : {DType::Float32, DType::Float16, DType::Int64}) {
    Tensor x = random_tensor(dt, {1, 3, 4, 5}, 131, -10, 10);
    for (const char* mode : {"nearest", "linear"}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + mode);
      const double tol = dt == DType::Int64 ? 0 : -1;  // -1: the dtype's default
      expect_cuda_matches_cpu("Upsample", {x, floats({1, 1, 2, 3})}, {{"mode", mode}}, 1, tol, tol);
    }
  }
}

// ---- GridSample / RoiAlign ---------------------------------------------------------------------

TEST(CudaGridSample, ModesPaddingAlign) {
  INGOT_REQUIRE_GPU();
  for (DType dt : kFloats) {
    Tensor x = random_tensor(dt, {2, 3, 5, 7}, 141);
    Tensor grid = random_tensor(dt, {2, 4, 6, 2}, 142, -1.4, 1.4);
    for (const char* mode : {"bilinear", "nearest", "bicubic"}) {
      for (const char* padding : {"zeros", "border", "reflection"}) {
        for (int64_t align : {0, 1}) {
          SCOPED_TRACE(std::string(dtype_name(dt)) + " " + mode + " " + padding + " align " + std::to_string(align));
          // The CPU kernel evaluates float64 bicubic weights in float: compare at float precision there.
          double tol = dt == DType::Float64 ? 1e-6 : -1;
          expect_cuda_matches_cpu("GridSample", {x, grid},
                                  {{"mode", mode}, {"padding_mode", padding}, {"align_corners", align}}, 1, tol, tol);
        }
      }
    }
  }
  // A float32 image sampled by a float16 grid; far-outside coordinates for reflection.
  Tensor x = random_tensor(DType::Float32, {1, 2, 4, 3}, 143);
  Tensor grid = random_tensor(DType::Float16, {1, 3, 5, 2}, 144, -4, 4);
  for (const char* mode : {"linear", "cubic"}) {
    expect_cuda_matches_cpu("GridSample", {x, grid}, {{"mode", mode}, {"padding_mode", "reflection"}});
  }
  // Empty output.
  expect_cuda_matches_cpu("GridSample", {x, random_tensor(DType::Float32, {1, 0, 5, 2}, 145)});
}

TEST(CudaRoiAlign, ModesAndTransforms) {
  INGOT_REQUIRE_GPU();
  // x1, y1, x2, y2 in input coordinates (spatial_scale 0.5 maps them onto the 10x12 map); the last
  // roi runs off the map and the one before is degenerate.
  const std::vector<float> boxes = {2, 3, 15, 12, 0, 0, 23, 19, 5.5f, 7.25f, 9, 8, 10, 10, 10, 10, -4, 14, 30, 26};
  for (DType dt : {DType::Float32, DType::Float16, DType::BFloat16, DType::Float64}) {
    Tensor x = random_tensor(dt, {2, 3, 10, 12}, 151);
    Tensor rois = Tensor::from_vector<float>(boxes, {5, 4}).cast(dt);
    Tensor batch = Tensor::from_vector<int64_t>({0, 1, 1, 0, 1}, {5});
    for (const char* mode : {"avg", "max"}) {
      for (const char* transform : {"half_pixel", "output_half_pixel"}) {
        for (int64_t ratio : {0, 2}) {
          SCOPED_TRACE(std::string(dtype_name(dt)) + " " + mode + " " + transform + " ratio " + std::to_string(ratio));
          expect_cuda_matches_cpu("RoiAlign", {x, rois, batch},
                                  {{"mode", mode},
                                   {"coordinate_transformation_mode", transform},
                                   {"sampling_ratio", ratio},
                                   {"spatial_scale", 0.5f},
                                   {"output_height", int64_t(3)},
                                   {"output_width", int64_t(4)}});
        }
      }
    }
  }
  // No rois.
  expect_cuda_matches_cpu("RoiAlign",
                          {random_tensor(DType::Float32, {1, 2, 4, 4}, 152), Tensor::empty(DType::Float32, {0, 4}),
                           Tensor::empty(DType::Int64, {0})});
}

}  // namespace
}  // namespace ingot::gpu_test
