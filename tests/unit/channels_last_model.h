// A small convolutional network that exercises the channels-last pass (src/passes/channels_last.cpp),
// shared by tests/unit/channels_last_test.cpp (the rewrite, on the CPU) and tests/gpu (cuDNN's NHWC
// path in float16):
//   x[N,3,8,8] -> Conv 3x3 -> BN -> Relu = a -> Conv 1x1 + a -> Relu = b          (residual)
//   b -> GlobalAveragePool -> Conv 1x1 -> Relu -> Conv 1x1 -> HardSigmoid -> * b = m (squeeze-excite)
//   m -> Conv 3x3 stride 2 group 2 -> + K[8,4,4] -> Sigmoid = d                     (a constant operand)
//   d -> MaxPool 2x2 -> Conv 1x1 -> GlobalAveragePool -> Flatten -> Gemm = y[N,5]   (back to NCHW)
//   plus a Conv with asymmetric pads, which stays channels first: z = Conv(x, pads 0,0,1,1).
#pragma once
#include <onnx/onnx_pb.h>

#include <random>
#include <string>

#include "test_util.h"

namespace ingot::testing {

inline std::string channels_last_model(const std::string& file) {
  std::mt19937 rng(21);
  onnx::GraphProto g;
  g.set_name("channels_last_net");
  *g.add_input() = tensor_info("x", onnx::TensorProto::FLOAT, {"N", "3", "8", "8"});
  auto ints = [](onnx::NodeProto& n, const std::string& name, std::vector<int64_t> v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  };
  auto integer = [](onnx::NodeProto& n, const std::string& name, int64_t v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  };
  auto conv = [&](const std::string& in, const std::string& w, const std::string& out, std::vector<int64_t> wdims,
                  std::vector<int64_t> pads, int64_t stride = 1, int64_t group = 1) {
    add_random_initializer(g, w, wdims, rng, -0.5f, 0.5f);
    add_random_initializer(g, w + "_b", {wdims[0]}, rng, -0.2f, 0.2f);
    onnx::NodeProto n = make_node("Conv", {in, w, w + "_b"}, {out});
    ints(n, "pads", pads);
    ints(n, "strides", {stride, stride});
    integer(n, "group", group);
    *g.add_node() = n;
  };
  conv("x", "w1", "c1", {8, 3, 3, 3}, {1, 1, 1, 1});
  add_random_initializer(g, "bn_scale", {8}, rng, 0.5f, 1.5f);
  add_random_initializer(g, "bn_bias", {8}, rng);
  add_random_initializer(g, "bn_mean", {8}, rng);
  add_random_initializer(g, "bn_var", {8}, rng, 0.5f, 1.5f);
  *g.add_node() = make_node("BatchNormalization", {"c1", "bn_scale", "bn_bias", "bn_mean", "bn_var"}, {"bn"});
  *g.add_node() = make_node("Relu", {"bn"}, {"a"});
  conv("a", "w2", "c2", {8, 8, 1, 1}, {0, 0, 0, 0});
  *g.add_node() = make_node("Add", {"c2", "a"}, {"c2a"});
  *g.add_node() = make_node("Relu", {"c2a"}, {"b"});
  *g.add_node() = make_node("GlobalAveragePool", {"b"}, {"s"});
  conv("s", "w3", "s1", {4, 8, 1, 1}, {0, 0, 0, 0});
  *g.add_node() = make_node("Relu", {"s1"}, {"s2"});
  conv("s2", "w4", "s3", {8, 4, 1, 1}, {0, 0, 0, 0});
  *g.add_node() = make_node("HardSigmoid", {"s3"}, {"gate"});
  *g.add_node() = make_node("Mul", {"b", "gate"}, {"m"});
  conv("m", "w5", "c5", {8, 4, 3, 3}, {1, 1, 1, 1}, 2, 2);
  add_random_initializer(g, "k", {8, 4, 4}, rng);
  *g.add_node() = make_node("Add", {"c5", "k"}, {"c5k"});
  *g.add_node() = make_node("Sigmoid", {"c5k"}, {"d"});
  onnx::NodeProto pool = make_node("MaxPool", {"d"}, {"p"});
  ints(pool, "kernel_shape", {2, 2});
  ints(pool, "strides", {2, 2});
  *g.add_node() = pool;
  conv("p", "w6", "c6", {8, 8, 1, 1}, {0, 0, 0, 0});
  *g.add_node() = make_node("GlobalAveragePool", {"c6"}, {"gap"});
  *g.add_node() = make_node("Flatten", {"gap"}, {"flat"});
  add_random_initializer(g, "fc", {8, 5}, rng);
  *g.add_node() = make_node("Gemm", {"flat", "fc"}, {"y"});
  conv("x", "w7", "z", {4, 3, 2, 2}, {0, 0, 1, 1});
  *g.add_output() = tensor_info("y", onnx::TensorProto::FLOAT, {"N", "5"});
  *g.add_output() = tensor_info("z", onnx::TensorProto::FLOAT, {"N", "4", "8", "8"});
  return save_model(model_with(std::move(g)), file);
}

}  // namespace ingot::testing
