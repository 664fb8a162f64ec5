// A program outside Ingot's tree that uses only the installed library: find_package(Ingot) or
// pkg-config. It loads an ONNX model (the ONNX suite's test_add: Z = X + Y, float32 [3,4,5]), runs it
// on the CPU, calls two ops eagerly, and checks every result against a float64 loop of its own.
#include <ingot/ops.h>
#include <ingot/session.h>

#include <cmath>
#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s MODEL.onnx (an Add of two float32 [3,4,5] inputs)\n", argv[0]);
    return 2;
  }
  try {
    std::vector<float> x(60), y(60);
    for (int i = 0; i < 60; ++i) {
      x[i] = float(i) * 0.25f - 3.0f;
      y[i] = float(i % 7) - 2.5f;
    }
    auto session = ingot::Session::load(argv[1], {.threads = 1});
    std::vector<ingot::Tensor> out = session.run(
        {ingot::Tensor::from_vector(x, {3, 4, 5}), ingot::Tensor::from_vector(y, {3, 4, 5})});
    std::vector<float> z = out.at(0).to_vector<float>();
    double worst = 0;
    for (int i = 0; i < 60; ++i) worst = std::max(worst, std::abs(double(z[i]) - (double(x[i]) + double(y[i]))));

    // Eager: relu(x) @ y^T on a [3, 20] view of the same data, against float64.
    ingot::Tensor a = ingot::ops::relu(ingot::Tensor::from_vector(x, {3, 20}));
    ingot::Tensor p = ingot::ops::matmul(a, ingot::ops::transpose(ingot::Tensor::from_vector(y, {3, 20})));
    std::vector<float> pv = p.to_vector<float>();
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 3; ++c) {
        double ref = 0;
        for (int k = 0; k < 20; ++k) ref += std::max(0.0, double(x[r * 20 + k])) * double(y[c * 20 + k]);
        worst = std::max(worst, std::abs(double(pv[r * 3 + c]) - ref) / (1 + std::abs(ref)));
      }
    std::printf("model '%s': %zu outputs; worst error against float64 %.3g\n", session.model_name().c_str(),
                out.size(), worst);
    return worst < 1e-5 ? 0 : 1;
  } catch (const ingot::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
