// Autograd on eager tensors (include/ingot/autograd.h): the tape, accumulation, retain_graph,
// no_grad, errors that name the op; the transforms (grad, value_and_grad, vjp, jvp) and their
// compositions, checked against float64 identities and finite differences. Every op's rule is
// checked by `ingot gradcheck` (ctest gradcheck.cpu).
#include <gtest/gtest.h>
#include <ingot/autograd.h>
#include <ingot/error.h>
#include <ingot/ops.h>

#include <cmath>
#include <functional>
#include <map>
#include <random>

#include "autograd/gradcheck.h"
#include "autograd/vmap.h"

namespace ingot {
namespace {

Tensor random(Shape shape, uint64_t seed, double lo = -1, double hi = 1) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  Tensor t = Tensor::empty(DType::Float64, std::move(shape));
  for (double& v : t.span<double>()) v = d(rng);
  return t;
}

double dot(const Tensor& a, const Tensor& b) {
  auto x = a.to(Device::cpu()).span<double>();
  auto y = b.to(Device::cpu()).span<double>();
  double s = 0;
  for (size_t i = 0; i < x.size(); ++i) s += x[i] * y[i];
  return s;
}

Tensor sum_all(const Tensor& t) { return ops::call("ReduceSum", {t}, {{"keepdims", int64_t(0)}}, 1).at(0); }

TEST(Autograd, BackwardFillsLeafGradients) {
  Tensor x = random({3, 4}, 1);
  x.set_requires_grad(true);
  Tensor w = random({4, 2}, 2);
  w.set_requires_grad(true);
  Tensor loss = sum_all(ops::tanh(ops::matmul(x, w)));
  EXPECT_TRUE(loss.requires_grad());
  EXPECT_FALSE(loss.is_leaf());
  loss.backward();
  ASSERT_TRUE(x.grad().defined());
  ASSERT_TRUE(w.grad().defined());
  // d/dx sum(tanh(x w)) = (1 - tanh^2(x w)) w^T, computed here in plain loops.
  auto xv = x.span<double>(), wv = w.span<double>(), gx = x.grad().span<double>();
  for (int i = 0; i < 3; ++i) {
    double z[2] = {0, 0};
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 4; ++k) z[j] += xv[size_t(i * 4 + k)] * wv[size_t(k * 2 + j)];
    for (int k = 0; k < 4; ++k) {
      double expected = 0;
      for (int j = 0; j < 2; ++j) expected += (1 - std::tanh(z[j]) * std::tanh(z[j])) * wv[size_t(k * 2 + j)];
      EXPECT_NEAR(gx[size_t(i * 4 + k)], expected, 1e-12);
    }
  }
}

TEST(Autograd, GradientsAccumulateAcrossBackwardCalls) {
  Tensor x = random({5}, 3);
  x.set_requires_grad(true);
  sum_all(ops::mul(x, x)).backward();
  Tensor first = x.grad().clone();
  sum_all(ops::mul(x, x)).backward();
  auto a = first.span<double>(), b = x.grad().span<double>(), xv = x.span<double>();
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(a[i], 2 * xv[i], 1e-12);
    EXPECT_NEAR(b[i], 4 * xv[i], 1e-12);
  }
  x.set_grad(Tensor());
  EXPECT_FALSE(x.grad().defined());
}

TEST(Autograd, ASecondBackwardNeedsRetainGraph) {
  Tensor x = random({4}, 4);
  x.set_requires_grad(true);
  Tensor y = sum_all(ops::exp(x));
  y.backward({}, /*retain_graph=*/true);
  y.backward();  // the graph was kept
  try {
    y.backward();
    FAIL() << "a third backward through a released graph worked";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("retain_graph"), std::string::npos) << e.what();
  }
}

TEST(Autograd, NoGradGuardRecordsNothing) {
  Tensor x = random({4}, 5);
  x.set_requires_grad(true);
  {
    autograd::NoGradGuard guard;
    EXPECT_FALSE(autograd::grad_enabled());
    EXPECT_FALSE(ops::exp(x).requires_grad());
  }
  EXPECT_TRUE(autograd::grad_enabled());
  EXPECT_TRUE(ops::exp(x).requires_grad());
}

TEST(Autograd, IntegerResultsAndInputsCarryNoGradient) {
  Tensor x = random({2, 3}, 6);
  x.set_requires_grad(true);
  Tensor shape = ops::call("Shape", {x}, {}, 1).at(0);
  EXPECT_FALSE(shape.requires_grad());
  Tensor indices = Tensor::from_vector<int64_t>({1, 0}, {2});
  Tensor picked = ops::call("Gather", {x, indices}, {{"axis", int64_t(1)}}, 1).at(0);
  sum_all(picked).backward();
  std::vector<double> g = x.grad().to_vector<double>();
  EXPECT_EQ(g, (std::vector<double>{1, 1, 0, 1, 1, 0}));
  try {
    indices.set_requires_grad(true);
    FAIL() << "an int64 tensor was made to require a gradient";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("only float tensors"), std::string::npos) << e.what();
  }
}

TEST(Autograd, AnOpWithoutARuleIsNamed) {
  Tensor x = random({2, 3}, 7);
  x.set_requires_grad(true);
  Tensor u = ops::call("Unique", {x}, {}, 1).at(0);  // its values: a selection, but no rule yet
  try {
    sum_all(ops::mul(u, u)).backward();
    FAIL() << "backward through Unique worked";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no gradient rule for Unique"), std::string::npos) << e.what();
  }
}

// Ops without a gradient by design (OpDef::no_gradient) give constants: a random draw shaped like x
// multiplies x, so d/dx sum(r x) is r itself.
TEST(Autograd, OpsWithoutAGradientByDesignGiveConstants) {
  Tensor x = random({3, 4}, 9);
  x.set_requires_grad(true);
  Tensor r = ops::call("RandomUniformLike", {x}, {{"seed", 3.0f}}, 1).at(0);
  EXPECT_FALSE(r.requires_grad());
  sum_all(ops::mul(r, x)).backward();
  const auto g = x.grad().to_vector<double>(), want = r.to_vector<double>();
  ASSERT_EQ(g.size(), want.size());
  for (size_t i = 0; i < g.size(); ++i) EXPECT_EQ(g[i], want[i]);
}

TEST(Autograd, OnlyLeavesCanBeSet) {
  Tensor x = random({2}, 8);
  x.set_requires_grad(true);
  Tensor y = ops::exp(x);
  EXPECT_THROW(y.set_requires_grad(false), Error);
  Tensor d = y.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.is_leaf());
}

// f(x, w, b) = p = softmax(tanh(x w + b)) * x[..., :3], and sum(p * e^x[..., :3]) per row: broadcasting, a
// batched product, a slice, two outputs.
std::vector<Tensor> composition(const std::vector<Tensor>& a) {
  Tensor h = ops::tanh(ops::add(ops::matmul(a[0], a[1]), a[2]));
  Tensor s = ops::softmax(h, -1);
  Tensor first = ops::call("Slice", {a[0], Tensor::from_vector<int64_t>({0}, {1}), Tensor::from_vector<int64_t>({3}, {1}),
                                     Tensor::from_vector<int64_t>({-1}, {1})}, {}, 1).at(0);
  Tensor p = ops::mul(s, first);
  return {p, ops::reduce_sum(ops::mul(p, ops::exp(first)), {-1}, false)};
}

TEST(Transforms, VjpAndJvpAreTransposes) {
  // <vjp(u), v> = <u, jvp(v)> for random u, v.
  std::vector<Tensor> primals = {random({2, 4, 5}, 10), random({5, 3}, 11), random({3}, 12)};
  auto [outs, pullback] = vjp(composition, primals);
  std::vector<Tensor> us = {random(outs[0].shape(), 13), random(outs[1].shape(), 14)};
  std::vector<Tensor> vs = {random({2, 4, 5}, 15), random({5, 3}, 16), random({3}, 17)};
  std::vector<Tensor> vjps = pullback(us);
  auto [outs2, jvps] = jvp(composition, primals, vs);
  double left = 0, right = 0;
  for (size_t i = 0; i < vs.size(); ++i) left += dot(vjps[i], vs[i]);
  for (size_t k = 0; k < us.size(); ++k) right += dot(us[k], jvps[k]);
  EXPECT_NEAR(left, right, 1e-10 * (1 + std::abs(left)));
  EXPECT_NE(left, 0.0);
  // And jvp against central differences along v.
  const double h = 1e-6;
  std::vector<Tensor> plus = primals, minus = primals;
  for (size_t i = 0; i < primals.size(); ++i) {
    plus[i] = ops::add(primals[i], ops::mul(vs[i], Tensor::scalar<double>(h)));
    minus[i] = ops::sub(primals[i], ops::mul(vs[i], Tensor::scalar<double>(h)));
  }
  std::vector<Tensor> fp = composition(plus), fm = composition(minus);
  for (size_t k = 0; k < fp.size(); ++k) {
    auto a = fp[k].span<double>(), b = fm[k].span<double>(), t = jvps[k].span<double>();
    for (size_t e = 0; e < a.size(); ++e) EXPECT_NEAR((a[e] - b[e]) / (2 * h), t[e], 1e-6);
  }
}

TEST(Transforms, GradComposes) {
  // f(x) = sum(x^3): grad f = 3 x^2; grad(sum(grad f)) = 6 x.
  Function f = [](const std::vector<Tensor>& a) { return std::vector<Tensor>{sum_all(ops::mul(a[0], ops::mul(a[0], a[0])))}; };
  Function df = grad(f);
  Function ddf = grad([df](const std::vector<Tensor>& a) { return std::vector<Tensor>{sum_all(df(a)[0])}; });
  Tensor x = random({6}, 20);
  std::vector<double> g = df({x})[0].to_vector<double>(), gg = ddf({x})[0].to_vector<double>();
  auto xv = x.span<double>();
  for (size_t i = 0; i < xv.size(); ++i) {
    EXPECT_NEAR(g[i], 3 * xv[i] * xv[i], 1e-12);
    EXPECT_NEAR(gg[i], 6 * xv[i], 1e-12);
  }
  EXPECT_FALSE(x.requires_grad());  // the transforms leave their arguments alone
}

TEST(Transforms, ValueAndGradWithArgnums) {
  auto f = [](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{sum_all(ops::mul(ops::matmul(a[0], a[1]), a[2])), a[0]};
  };
  std::vector<Tensor> args = {random({2, 3}, 30), random({3, 4}, 31), random({2, 4}, 32)};
  auto [values, grads] = value_and_grad(f, {1, 2})(args);
  ASSERT_EQ(values.size(), 2u);
  ASSERT_EQ(grads.size(), 2u);
  // d/dB sum((A B) * C) = A^T C; d/dC = A B.
  Tensor at_c = ops::matmul(ops::transpose(args[0]), args[2]);
  Tensor ab = ops::matmul(args[0], args[1]);
  EXPECT_EQ(grads[0].to_vector<double>(), at_c.to_vector<double>());
  EXPECT_EQ(grads[1].to_vector<double>(), ab.to_vector<double>());
}

TEST(Transforms, GradOfAFunctionThatCallsVjp) {
  // vjp inside grad: d/dx <u, J(x)^T v>-style nesting through the pullback.
  auto inner = [](const std::vector<Tensor>& a) { return std::vector<Tensor>{ops::sigmoid(ops::mul(a[0], a[0]))}; };
  Function outer = [inner](const std::vector<Tensor>& a) {
    auto [outs, pullback] = vjp(inner, {a[0]});
    Tensor g = pullback({ops::exp(a[0])})[0];  // e^x * sigmoid'(x^2) * 2x
    return std::vector<Tensor>{sum_all(g)};
  };
  Tensor x = random({4}, 40);
  Tensor analytic = grad(outer)({x})[0];
  const double h = 1e-6;
  auto xv = x.span<double>();
  for (size_t i = 0; i < xv.size(); ++i) {
    Tensor p = x.clone(), m = x.clone();
    p.span<double>()[i] += h;
    m.span<double>()[i] -= h;
    double numeric = (outer({p})[0].item_double() - outer({m})[0].item_double()) / (2 * h);
    EXPECT_NEAR(analytic.span<double>()[i], numeric, 1e-6);
  }
}

// Every rule in the catalogue passes against finite differences (`ingot gradcheck` prints the same).
TEST(Gradcheck, EveryRuleMatchesFiniteDifferences) {
  int checked = 0;
  for (const OpDef* def : differentiable_ops()) {
    GradcheckResult r = gradcheck(*def);
    if (r.skipped) continue;  // checked by its own test (the message names it)
    EXPECT_TRUE(r.passed) << r.op << ": " << r.message;
    ++checked;
  }
  EXPECT_GE(checked, 100);
}

}  // namespace
}  // namespace ingot

// ---- against PyTorch: a small CNN's loss gradients (tests/data/autograd/make_reference.py)

#include "core/npy.h"

namespace ingot {
namespace {

// Each named tensor's gradient against the reference file d<name>.npy, to 1e-12 relative.
void expect_reference_grads(std::map<std::string, Tensor>& p, const std::vector<std::string>& names,
                            const std::function<Tensor(const std::string&)>& load) {
  for (const std::string& name : names) {
    Tensor expected = load("d" + name);
    ASSERT_TRUE(p[name].grad().defined()) << name;
    ASSERT_EQ(p[name].grad().shape(), expected.shape()) << name;
    auto a = p[name].grad().span<double>(), e = expected.span<double>();
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], e[i], 1e-12 * (1 + std::abs(e[i]))) << name << "[" << i << "]";
  }
}

TEST(AutogradReference, SmallCnnMatchesPyTorch) {
  const std::string dir = std::string(INGOT_SOURCE_DIR) + "/tests/data/autograd/cnn_";
  auto load = [&](const char* name) { return load_npy(dir + name + ".npy"); };
  std::map<std::string, Tensor> p;
  for (const char* name : {"x", "w1", "b1", "w2", "b2", "w3", "b3"}) {
    p[name] = load(name);
    p[name].set_requires_grad(true);
  }
  Tensor targets = load("targets");
  auto conv = [](const Tensor& x, const Tensor& w, const Tensor& b, Attributes attrs) {
    return ops::call("Conv", {x, w, b}, attrs, 1).at(0);
  };
  Tensor h = ops::relu(conv(p["x"], p["w1"], p["b1"], {{"pads", Ints{1, 1, 1, 1}}}));
  h = ops::tanh(conv(h, p["w2"], p["b2"], {{"strides", Ints{2, 2}}}));
  h = ops::call("Flatten", {ops::call("GlobalAveragePool", {h}, {}, 1).at(0)}, {}, 1).at(0);
  Tensor logits = ops::call("Gemm", {h, p["w3"], p["b3"]}, {{"transB", int64_t(1)}}, 1).at(0);
  Tensor logp = ops::call("LogSoftmax", {logits}, {{"axis", int64_t(1)}}, 1).at(0);
  Tensor picked = ops::call("GatherElements", {logp, targets.reshape({2, 1})}, {{"axis", int64_t(1)}}, 1).at(0);
  Tensor loss = ops::call("Neg", {ops::call("ReduceMean", {picked}, {{"keepdims", int64_t(0)}}, 1).at(0)}, {}, 1).at(0);
  EXPECT_NEAR(loss.item_double(), load("loss").item_double(), 1e-12);
  loss.backward();
  expect_reference_grads(p, {"x", "w1", "b1", "w2", "b2", "w3", "b3"}, [&](const std::string& n) { return load(n.c_str()); });
}

}  // namespace
}  // namespace ingot

// ---- against PyTorch: a GRU's gradients (PyTorch's GRU is ONNX's linear_before_reset = 1)

namespace ingot {
namespace {

TEST(AutogradReference, GruMatchesPyTorch) {
  const std::string dir = std::string(INGOT_SOURCE_DIR) + "/tests/data/autograd/gru_";
  auto load = [&](const std::string& name) { return load_npy(dir + name + ".npy"); };
  std::map<std::string, Tensor> p;
  for (const char* name : {"x", "W", "R", "B", "h0"}) {
    p[name] = load(name);
    p[name].set_requires_grad(true);
  }
  std::vector<Tensor> out = ops::call("GRU", {p["x"], p["W"], p["R"], p["B"], Tensor(), p["h0"]},
                                      {{"hidden_size", int64_t(3)}, {"linear_before_reset", int64_t(1)}}, 2);
  Tensor loss = ops::add(sum_all(ops::mul(out[0], out[0])), sum_all(out[1]));
  EXPECT_NEAR(loss.item_double(), load("loss").item_double(), 1e-12);
  loss.backward();
  expect_reference_grads(p, {"x", "W", "R", "B", "h0"}, load);
}

}  // namespace
}  // namespace ingot

// ---- compile(f): traced once per input signature, run through the compile pipeline

namespace ingot {
namespace {

void expect_near_all(const Tensor& a, const Tensor& b, double tol) {
  ASSERT_EQ(a.shape(), b.shape());
  std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], y[i], tol * (1 + std::abs(y[i]))) << "element " << i;
}

std::vector<Tensor> mlp_loss(const std::vector<Tensor>& a) {  // x, w1, b1, w2
  Tensor h = ops::relu(ops::add(ops::matmul(a[0], a[1]), a[2]));
  Tensor p = ops::softmax(ops::matmul(h, a[3]), -1);
  return {ops::reduce_mean(ops::mul(p, p), {0, 1}, false)};
}

TEST(Compile, EqualsTheEagerFunctionAndRetracesPerShape) {
  std::vector<Tensor> args = {random({8, 5}, 50), random({5, 7}, 51), random({7}, 52), random({7, 3}, 53)};
  CompiledFunction f = compile(mlp_loss);
  std::vector<Tensor> first = f(args), second = f(args);
  Tensor eager = mlp_loss(args)[0];
  expect_near_all(first[0], eager, 1e-12);
  expect_near_all(second[0], eager, 1e-12);  // the compiled graph's run
  EXPECT_EQ(f.traces(), 1u);
  EXPECT_NE(f.graph_text(args).find("MatMul"), std::string::npos);
  std::vector<Tensor> other = {random({3, 5}, 54), args[1], args[2], args[3]};
  expect_near_all(f(other)[0], mlp_loss(other)[0], 1e-12);
  EXPECT_EQ(f.traces(), 2u);
}

TEST(Compile, AGradientStepCompiles) {
  // grad inside compile: the backward ops are traced with the forward ones.
  std::vector<Tensor> args = {random({8, 5}, 60), random({5, 7}, 61), random({7}, 62), random({7, 3}, 63)};
  Function step = grad(mlp_loss, {1, 2, 3});
  CompiledFunction compiled = compile(step);
  std::vector<Tensor> eager = step(args);
  compiled(args);
  std::vector<Tensor> replayed = compiled(args);
  ASSERT_EQ(replayed.size(), 3u);
  for (size_t i = 0; i < 3; ++i) expect_near_all(replayed[i], eager[i], 1e-12);
  EXPECT_FALSE(replayed[0].requires_grad());
}

TEST(Compile, CapturedTensorsAreConstants) {
  Tensor scale = random({4}, 70);
  CompiledFunction f = compile([scale](const std::vector<Tensor>& a) { return std::vector<Tensor>{ops::mul(a[0], scale)}; });
  Tensor x = random({2, 4}, 71);
  f({x});
  expect_near_all(f({x})[0], ops::mul(x, scale), 0);
}

}  // namespace
}  // namespace ingot

// ---- against PyTorch: an LSTM's gradients (tests/data/autograd/make_reference.py)

namespace ingot {
namespace {

TEST(AutogradReference, LstmMatchesPyTorch) {
  const std::string dir = std::string(INGOT_SOURCE_DIR) + "/tests/data/autograd/lstm_";
  auto load = [&](const std::string& name) { return load_npy(dir + name + ".npy"); };
  std::map<std::string, Tensor> p;
  for (const char* name : {"x", "W", "R", "B", "h0", "c0"}) {
    p[name] = load(name);
    p[name].set_requires_grad(true);
  }
  std::vector<Tensor> out =
      ops::call("LSTM", {p["x"], p["W"], p["R"], p["B"], Tensor(), p["h0"], p["c0"]}, {{"hidden_size", int64_t(3)}}, 3);
  Tensor loss = ops::add(sum_all(ops::mul(out[0], out[0])), sum_all(out[2]));
  EXPECT_NEAR(loss.item_double(), load("loss").item_double(), 1e-12);
  loss.backward();
  expect_reference_grads(p, {"x", "W", "R", "B", "h0", "c0"}, load);
}

}  // namespace
}  // namespace ingot

// ---- fused ops

namespace ingot {
namespace {

TEST(Autograd, FusedElementwiseGradientIsTheUnfusedChains) {
  // The fused kernels compute in float32 only (gradcheck's float64 finite differences cannot run on
  // them): the rule against the gradient of the same chain written as separate ops, whose rules
  // gradcheck checks.
  auto f32 = [](Tensor t) { return t.cast(DType::Float32); };
  Tensor x = f32(random({2, 3}, 90)), y = f32(random({3}, 91));
  Function fused = [](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{sum_all(ops::call("FusedElementwise", {a[0], a[1]},
                                                 {{"program", "Mul(x0, x1); Tanh(t0); Add(t1, x0); LeakyRelu(t2, 0.1); Mul(t3, 0.5)"}},
                                                 1, kIngotDomain)
                                           .at(0))};
  };
  Function chain = [](const std::vector<Tensor>& a) {
    Tensor t = ops::add(ops::tanh(ops::mul(a[0], a[1])), a[0]);
    t = ops::call("LeakyRelu", {t}, {{"alpha", 0.1f}}, 1).at(0);
    return std::vector<Tensor>{sum_all(ops::mul(t, Tensor::scalar<float>(0.5f)))};
  };
  std::vector<Tensor> g = grad(fused, {0, 1})({x, y}), want = grad(chain, {0, 1})({x, y});
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_EQ(g[i].shape(), want[i].shape());
    std::vector<float> a = g[i].to_vector<float>(), b = want[i].to_vector<float>();
    for (size_t k = 0; k < a.size(); ++k) EXPECT_NEAR(a[k], b[k], 1e-6);
  }
}

TEST(Autograd, FusedConvGradientIsTheUnfusedChains) {
  // FusedConv's CPU kernel accumulates in float32 even for float64 tensors, too coarse for gradcheck's
  // finite differences: its rule against the gradient of Relu(Conv(X, W, B) + R).
  Tensor x = random({1, 2, 5, 5}, 92), w = random({3, 2, 3, 3}, 93), b = random({3}, 94), r = random({1, 3, 3, 3}, 95);
  Function fused = [](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{
        sum_all(ops::mul(ops::call("FusedConv", {a[0], a[1], a[2], a[3]}, {{"activation", "Relu"}}, 1, kIngotDomain).at(0), a[4]))};
  };
  Function chain = [](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{sum_all(ops::mul(ops::relu(ops::add(ops::conv(a[0], a[1], a[2]), a[3])), a[4]))};
  };
  Tensor u = random({1, 3, 3, 3}, 96);
  std::vector<Tensor> g = grad(fused, {0, 1, 2, 3})({x, w, b, r, u}), want = grad(chain, {0, 1, 2, 3})({x, w, b, r, u});
  for (size_t i = 0; i < 4; ++i) {
    ASSERT_EQ(g[i].shape(), want[i].shape());
    std::vector<double> a = g[i].to_vector<double>(), c = want[i].to_vector<double>();
    for (size_t k = 0; k < a.size(); ++k) EXPECT_NEAR(a[k], c[k], 1e-12) << "input " << i;
  }
}

}  // namespace
}  // namespace ingot

// ---- vmap

namespace ingot {
namespace {

TEST(Vmap, EqualsTheStackOfPerElementCalls) {
  auto f = [](const std::vector<Tensor>& a) {  // x [4], w [4, 3] shared
    return std::vector<Tensor>{ops::tanh(ops::matmul(a[0], a[1])), ops::reduce_sum(ops::mul(a[0], a[0]), {0}, false)};
  };
  Tensor xs = random({5, 4}, 80), w = random({4, 3}, 81);
  std::vector<Tensor> batched = vmap(f, {0, -1}, {0, 0})({xs, w});
  ASSERT_EQ(batched[0].shape(), (Shape{5, 3}));
  ASSERT_EQ(batched[1].shape(), (Shape{5}));
  for (int64_t i = 0; i < 5; ++i) {
    Tensor x = xs.slice_rows(i, i + 1).reshape({4});
    std::vector<Tensor> one = f({x, w});
    std::vector<double> a = one[0].to_vector<double>(), b = batched[0].slice_rows(i, i + 1).to_vector<double>();
    for (size_t k = 0; k < a.size(); ++k) EXPECT_NEAR(a[k], b[k], 1e-12);
    EXPECT_NEAR(one[1].item_double(), batched[1].to_vector<double>()[size_t(i)], 1e-12);
  }
  // Mapped along axis 1 and stacked along axis 1.
  std::vector<Tensor> t = vmap(f, {1, -1}, {1, 0})({ops::transpose(xs), w});
  EXPECT_EQ(t[0].shape(), (Shape{3, 5}));
  std::vector<double> tv = t[0].to_vector<double>(), bv = ops::transpose(batched[0]).to_vector<double>();
  for (size_t k = 0; k < tv.size(); ++k) EXPECT_NEAR(tv[k], bv[k], 1e-12);
  EXPECT_THROW(vmap(f, {0, 0})({xs, w}), Error);  // 5 and 4 elements along the mapped axes
}

TEST(Vmap, PerExampleGradients) {
  // vmap(grad(f)): each row's gradient of sum(tanh(x w)) with respect to w; their sum is the batch's.
  Function loss = [](const std::vector<Tensor>& a) { return std::vector<Tensor>{sum_all(ops::tanh(ops::matmul(a[0], a[1])))}; };
  Tensor xs = random({6, 4}, 82), w = random({4, 2}, 83);
  Tensor per_example = vmap(grad(loss, {1}), {0, -1})({xs, w})[0];  // [6, 4, 2]
  ASSERT_EQ(per_example.shape(), (Shape{6, 4, 2}));
  Tensor whole = grad(loss, {1})({xs, w})[0];
  Tensor summed = ops::reduce_sum(per_example, {0}, false);
  std::vector<double> a = summed.to_vector<double>(), b = whole.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-12);
}

// The batching rules (ops/batching.h), each against f called once per example and stacked: every
// case must run without the per-element loop.
Tensor ints(const std::vector<int64_t>& v) { return Tensor::from_vector<int64_t>(v, {int64_t(v.size())}); }
Tensor op1(const std::string& op, const std::vector<Tensor>& in, const Attributes& attrs = {}) {
  return ops::call(op, in, attrs, 1).at(0);
}

void expect_vmap_matches_loop(const std::string& what, const Function& f, const std::vector<Tensor>& args,
                              const std::vector<int64_t>& in_axes) {
  SCOPED_TRACE(what);
  int64_t batch = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    if (in_axes[i] >= 0) batch = args[i].shape()[size_t(in_axes[i])];
  }
  std::vector<std::vector<Tensor>> rows;
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<Tensor> one;
    for (size_t i = 0; i < args.size(); ++i) {
      one.push_back(in_axes[i] < 0 ? args[i]
                                   : op1("Gather", {args[i], Tensor::scalar<int64_t>(b)}, {{"axis", in_axes[i]}}));
    }
    rows.push_back(f(one));
  }
  const size_t loops = autograd::detail::vmap_loop_nodes();
  std::vector<Tensor> batched = vmap(f, in_axes)(args);
  EXPECT_EQ(autograd::detail::vmap_loop_nodes(), loops) << "a node ran once per batch element";
  ASSERT_EQ(batched.size(), rows[0].size());
  for (size_t k = 0; k < batched.size(); ++k) {
    Shape expected = rows[0][k].shape();
    expected.insert(expected.begin(), batch);
    ASSERT_EQ(batched[k].shape(), expected) << "output " << k;
    for (int64_t b = 0; b < batch; ++b) {
      Tensor got = op1("Gather", {batched[k], Tensor::scalar<int64_t>(b)}, {{"axis", int64_t(0)}});
      std::vector<double> g = got.cast(DType::Float64).to_vector<double>();
      std::vector<double> w = rows[size_t(b)][k].cast(DType::Float64).to_vector<double>();
      for (size_t e = 0; e < g.size(); ++e) EXPECT_NEAR(g[e], w[e], 1e-10) << "output " << k << " element " << b;
    }
  }
}

TEST(Vmap, BatchingRulesMatchThePerElementLoop) {
  using A = std::vector<Tensor>;
  auto fn = [](std::function<Tensor(const A&)> g) { return Function([g](const A& a) { return A{g(a)}; }); };
  // Elementwise with broadcasting, either operand mapped; PRelu with only its slope mapped.
  Function ew = fn([](const A& a) { return ops::add(ops::mul(a[0], a[1]), ops::exp(a[1])); });
  expect_vmap_matches_loop("elementwise, both", ew, {random({5, 3, 4}, 1), random({5, 4}, 2)}, {0, 0});
  expect_vmap_matches_loop("elementwise, second", ew, {random({3, 4}, 3), random({4, 5}, 4)}, {-1, 1});
  expect_vmap_matches_loop("PRelu slope", fn([](const A& a) { return op1("PRelu", {a[0], a[1]}); }),
                           {random({3, 4}, 5), random({5, 4}, 6)}, {-1, 0});
  expect_vmap_matches_loop("Where", fn([](const A& a) { return op1("Where", {op1("Less", {a[0], a[1]}), a[0], a[1]}); }),
                           {random({5, 2, 3}, 7), random({3}, 8)}, {0, -1});
  expect_vmap_matches_loop("Clip", fn([](const A& a) {
    return op1("Clip", {a[0], Tensor::scalar<double>(-0.5), Tensor::scalar<double>(0.25)});
  }), {random({4, 6}, 9)}, {0});
  // Matrix products: vector and matrix operands, batched on either side or both.
  Function mm = fn([](const A& a) { return ops::matmul(a[0], a[1]); });
  expect_vmap_matches_loop("MatMul [3,4]x[4,2], A mapped", mm, {random({5, 3, 4}, 10), random({4, 2}, 11)}, {0, -1});
  expect_vmap_matches_loop("MatMul [4]x[4,2], B mapped", mm, {random({4}, 12), random({5, 4, 2}, 13)}, {-1, 0});
  expect_vmap_matches_loop("MatMul [2,3,4]x[4], both", mm, {random({5, 2, 3, 4}, 14), random({5, 4}, 15)}, {0, 0});
  expect_vmap_matches_loop("MatMul [3,4]x[2,4,2], A mapped", mm, {random({5, 3, 4}, 16), random({2, 4, 2}, 17)}, {0, -1});
  expect_vmap_matches_loop("MatMul [4]x[4]", mm, {random({5, 4}, 18), random({4}, 19)}, {0, -1});
  expect_vmap_matches_loop("Gemm", fn([](const A& a) {
    return op1("Gemm", {a[0], a[1], a[2]}, {{"transA", int64_t(1)}, {"transB", int64_t(1)}, {"alpha", 0.5f}, {"beta", 2.0f}});
  }), {random({5, 4, 3}, 20), random({2, 4}, 21), random({5, 2}, 22)}, {0, -1, 0});
  expect_vmap_matches_loop("Einsum", fn([](const A& a) { return op1("Einsum", {a[0], a[1]}, {{"equation", "ij,jk"}}); }),
                           {random({5, 3, 4}, 23), random({5, 4, 2}, 24)}, {0, 0});
  // Reductions, arg-reductions, softmaxes and norms with their axes shifted.
  expect_vmap_matches_loop("ReduceSum", fn([](const A& a) { return ops::reduce_sum(a[0], {1}, false); }),
                           {random({5, 3, 4}, 25)}, {0});
  expect_vmap_matches_loop("ReduceMean all", fn([](const A& a) { return op1("ReduceMean", {a[0]}, {{"keepdims", int64_t(0)}}); }),
                           {random({5, 3, 4}, 26)}, {0});
  expect_vmap_matches_loop("ReduceMax", fn([](const A& a) { return op1("ReduceMax", {a[0], ints({-1})}); }),
                           {random({3, 5, 4}, 27)}, {1});
  expect_vmap_matches_loop("ArgMax", fn([](const A& a) { return op1("ArgMax", {a[0]}, {{"axis", int64_t(1)}}); }),
                           {random({5, 3, 4}, 28)}, {0});
  expect_vmap_matches_loop("Softmax", fn([](const A& a) { return ops::softmax(a[0], 0); }), {random({5, 3, 4}, 29)}, {0});
  expect_vmap_matches_loop("LogSoftmax", fn([](const A& a) { return op1("LogSoftmax", {a[0]}); }), {random({5, 3, 4}, 30)}, {0});
  expect_vmap_matches_loop("CumSum", fn([](const A& a) { return op1("CumSum", {a[0], Tensor::scalar<int64_t>(-1)}); }),
                           {random({5, 3, 4}, 31)}, {0});
  expect_vmap_matches_loop("LayerNormalization", fn([](const A& a) {
    return op1("LayerNormalization", {a[0], a[1], a[2]}, {{"axis", int64_t(1)}});
  }), {random({5, 2, 3, 4}, 32), random({3, 4}, 33), random({3, 4}, 34)}, {0, -1, -1});
  // Convolutions, pools and norms with the batch folded into N.
  Tensor w = random({4, 3, 3, 3}, 35);
  expect_vmap_matches_loop("Conv", fn([](const A& a) {
    return op1("Conv", {a[0], a[1]}, {{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}});
  }), {random({3, 2, 3, 7, 7}, 36), w}, {0, -1});
  expect_vmap_matches_loop("MaxPool", fn([](const A& a) { return op1("MaxPool", {a[0]}, {{"kernel_shape", Ints{2, 2}}}); }),
                           {random({3, 2, 3, 6, 6}, 37)}, {0});
  expect_vmap_matches_loop("GlobalAveragePool", fn([](const A& a) { return op1("GlobalAveragePool", {a[0]}); }),
                           {random({3, 2, 3, 4, 4}, 38)}, {0});
  expect_vmap_matches_loop("BatchNormalization", fn([](const A& a) {
    return op1("BatchNormalization", {a[0], a[1], a[2], a[3], a[4]});
  }), {random({3, 2, 3, 4, 4}, 39), random({3}, 40), random({3}, 41), random({3}, 42), random({3}, 43, 0.5, 1.5)},
                           {0, -1, -1, -1, -1});
  // Shapes and data movement.
  expect_vmap_matches_loop("Transpose", fn([](const A& a) { return ops::transpose(a[0], {2, 0, 1}); }), {random({5, 2, 3, 4}, 44)}, {0});
  expect_vmap_matches_loop("Reshape with 0 and -1", fn([](const A& a) { return op1("Reshape", {a[0], ints({0, -1})}); }),
                           {random({5, 2, 3, 4}, 45)}, {0});
  expect_vmap_matches_loop("Reshape of Shape", fn([](const A& a) {
    return op1("Reshape", {ops::exp(a[0]), op1("Shape", {a[1]})});
  }), {random({5, 12}, 46), random({3, 4}, 47)}, {0, -1});
  expect_vmap_matches_loop("Flatten", fn([](const A& a) { return op1("Flatten", {a[0]}, {{"axis", int64_t(2)}}); }),
                           {random({5, 2, 3, 4}, 48)}, {0});
  expect_vmap_matches_loop("Squeeze", fn([](const A& a) { return op1("Squeeze", {a[0]}); }), {random({1, 3, 1, 4}, 49)}, {0});
  expect_vmap_matches_loop("Unsqueeze", fn([](const A& a) { return op1("Unsqueeze", {a[0], ints({0, -1})}); }),
                           {random({5, 3, 4}, 50)}, {0});
  expect_vmap_matches_loop("Concat with a shared operand", fn([](const A& a) { return ops::concat({a[0], a[1]}, -1); }),
                           {random({5, 3, 4}, 51), random({3, 2}, 52)}, {0, -1});
  expect_vmap_matches_loop("Split", Function([](const A& a) { return ops::call("Split", {a[0], ints({1, 3})}, {{"axis", int64_t(1)}}, 2); }),
                           {random({5, 3, 4}, 53)}, {0});
  expect_vmap_matches_loop("Slice with steps", fn([](const A& a) {
    return op1("Slice", {a[0], ints({3, 0}), ints({0, 10}), ints({-1, 0}), ints({-1, 2})});
  }), {random({5, 3, 5}, 54)}, {0});
  expect_vmap_matches_loop("Expand", fn([](const A& a) { return op1("Expand", {a[0], ints({2, 3, 4})}); }),
                           {random({5, 3, 1}, 55)}, {0});
  expect_vmap_matches_loop("Tile", fn([](const A& a) { return op1("Tile", {a[0], ints({2, 1})}); }), {random({5, 3, 4}, 56)}, {0});
  expect_vmap_matches_loop("Pad", fn([](const A& a) { return op1("Pad", {a[0], ints({1, 0, 2, 1})}, {{"mode", "reflect"}}); }),
                           {random({5, 3, 4}, 57)}, {0});
  Tensor idx = Tensor::from_vector<int64_t>({2, 0, 1, 1}, {2, 2});
  expect_vmap_matches_loop("Gather, data mapped", fn([](const A& a) { return op1("Gather", {a[0], a[1]}, {{"axis", int64_t(1)}}); }),
                           {random({5, 3, 4}, 58), idx}, {0, -1});
  expect_vmap_matches_loop("Gather, indices mapped", fn([](const A& a) { return op1("Gather", {a[0], a[1]}, {{"axis", int64_t(1)}}); }),
                           {random({3, 4}, 59), Tensor::from_vector<int64_t>({0, 3, 1, 2, 2, 0}, {3, 2})}, {-1, 0});
}

TEST(Vmap, OpsWithoutARuleRunPerElement) {
  // Clip with mapped bounds has no batched form (ONNX's bounds are scalars): one call per element.
  Function f = [](const std::vector<Tensor>& a) { return std::vector<Tensor>{op1("Clip", {a[0], a[1], a[2]})}; };
  Tensor x = random({4, 3}, 60), lo = random({4}, 61, -1, 0), hi = random({4}, 62, 0, 1);
  const size_t before = autograd::detail::vmap_loop_nodes();
  Tensor y = vmap(f, {0, 0, 0})({x, lo, hi})[0];
  EXPECT_EQ(autograd::detail::vmap_loop_nodes(), before + 1);
  auto xv = x.span<double>(), yv = y.span<double>();
  for (size_t i = 0; i < 4; ++i) {
    for (size_t j = 0; j < 3; ++j) {
      EXPECT_EQ(yv[i * 3 + j], std::clamp(xv[i * 3 + j], lo.span<double>()[i], hi.span<double>()[i]));
    }
  }
}

TEST(Vmap, ComposesWithGradAndItself) {
  // grad(vmap(f)) differentiates through the batched ops: d/dw sum_i sum(tanh(x_i w)) is grad of the batch's.
  Function loss = [](const std::vector<Tensor>& a) { return std::vector<Tensor>{sum_all(ops::tanh(ops::matmul(a[0], a[1])))}; };
  Function mapped = [loss](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{sum_all(vmap(loss, {0, -1})(a)[0])};
  };
  Tensor xs = random({6, 3, 4}, 63), w = random({4, 2}, 64);
  std::vector<double> g = grad(mapped, {1})({xs, w})[0].to_vector<double>();
  std::vector<double> want = grad(loss, {1})({xs, w})[0].to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], want[i], 1e-12);
  // vmap(vmap(f)) over two axes equals f on the whole [2, 6, ...] batch for a rowwise f.
  Function rowwise = [](const std::vector<Tensor>& a) { return std::vector<Tensor>{ops::softmax(ops::matmul(a[0], a[1]), -1)}; };
  Tensor x2 = random({2, 6, 4}, 65);
  Tensor nested = vmap(vmap(rowwise, {0, -1}), {0, -1})({x2, w})[0];
  std::vector<double> a = nested.to_vector<double>(), b = rowwise({x2, w})[0].to_vector<double>();
  ASSERT_EQ(nested.shape(), (Shape{2, 6, 2}));
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-12);
}

}  // namespace
}  // namespace ingot

namespace ingot {
namespace {

// ai.ingot.ConvWeightGrad in float32 (oneDNN's backward-weights primitive) against its float64 loops,
// over the geometries Conv's rule hands it: strides, asymmetric pads, dilations, groups, 1-d and
// depthwise, and a 1x1 pointwise layer.
TEST(Autograd, ConvWeightGradFloat32MatchesTheFloat64Loops) {
  using Ints = std::vector<int64_t>;
  struct Case {
    Shape x, dy;
    Attributes attrs;
  };
  const std::vector<Case> cases = {
      {{4, 3, 9, 8}, {4, 5, 7, 6}, {{"kernel_shape", Ints{3, 3}}}},
      {{2, 4, 11, 11}, {2, 6, 6, 5}, {{"kernel_shape", Ints{3, 2}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 0, 1, 1}}, {"dilations", Ints{1, 2}}}},
      {{3, 8, 7, 7}, {3, 8, 7, 7}, {{"kernel_shape", Ints{3, 3}}, {"group", int64_t(8)}, {"pads", Ints{1, 1, 1, 1}}}},
      {{2, 6, 5, 5}, {2, 4, 5, 5}, {{"kernel_shape", Ints{3, 3}}, {"group", int64_t(2)}, {"pads", Ints{1, 1, 1, 1}}}},
      {{2, 16, 6, 6}, {2, 32, 6, 6}, {{"kernel_shape", Ints{1, 1}}}},
      {{2, 3, 20}, {2, 4, 6}, {{"kernel_shape", Ints{5}}, {"strides", Ints{3}}}},
  };
  // Each case twice with new contents: the second call shares the first's kernel state (eager calls
  // of one signature do, KernelDef::eager_state) and must not reuse anything of its data.
  uint64_t seed = 40;
  for (const Case& c : cases) {
    for (int call = 0; call < 2; ++call) {
      const Tensor x = random(c.x, seed++), dy = random(c.dy, seed++);
      const Tensor want = ops::call("ConvWeightGrad", {x, dy}, c.attrs, 1, "ai.ingot").at(0);
      const Tensor got = ops::call("ConvWeightGrad", {x.cast(DType::Float32), dy.cast(DType::Float32)}, c.attrs, 1, "ai.ingot").at(0);
      ASSERT_EQ(got.shape(), want.shape());
      const std::vector<double> g = got.cast(DType::Float64).to_vector<double>(), w = want.to_vector<double>();
      double worst = 0;
      for (size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::abs(g[i] - w[i]) / (1 + std::abs(w[i])));
      EXPECT_LE(worst, 1e-5) << shape_str(c.x) << " -> " << shape_str(want.shape()) << ", call " << call;
    }
  }
  // Shapes that do not belong together name the input at fault.
  try {
    ops::call("ConvWeightGrad", {random({2, 3, 9, 8}, 1), random({2, 5, 6, 6}, 2)}, {{"kernel_shape", Ints{3, 3}}}, 1, "ai.ingot");
    FAIL() << "a dY of the wrong size was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input 1 (dY)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ingot

namespace ingot {
namespace {

// A compiled function whose convolution weight is an argument, changed in place between calls, sees
// the new weight every call (kernels keep what they derive only from constants of the graph: the
// CPU convolution's reordered weights used to survive a change of an input at the same address).
TEST(Autograd, CompiledConvolutionSeesWeightsChangedInPlace) {
  Function f = [](const std::vector<Tensor>& a) { return ops::call("Conv", {a[0], a[1]}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}); };
  CompiledFunction compiled = compile(f);
  const Tensor x = random({2, 3, 9, 9}, 1).cast(DType::Float32);
  Tensor w = random({4, 3, 3, 3}, 2).cast(DType::Float32);
  for (int call = 0; call < 4; ++call) {
    const Tensor got = compiled({x, w}).at(0), want = f({x, w}).at(0);
    const std::vector<float> g = got.to_vector<float>(), e = want.to_vector<float>();
    double worst = 0;
    for (size_t i = 0; i < g.size(); ++i) worst = std::max(worst, double(std::abs(g[i] - e[i])));
    EXPECT_LE(worst, 1e-5) << "call " << call;
    for (float& v : w.span<float>()) v = v * 0.5f + 0.1f;  // in place, same storage
  }
}

}  // namespace
}  // namespace ingot
