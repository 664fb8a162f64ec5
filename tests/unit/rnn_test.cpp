// Recurrent layers (LSTM, GRU, RNN) against a plain float64 reference written from the ONNX
// equations, plus control-flow (If, Loop) and sequence ops run through the executor.
#include <gtest/gtest.h>
#include <ingot/ops.h>

#include <cmath>
#include <random>

#include "graph/graph.h"
#include "runtime/executor.h"

using namespace ingot;

namespace {

std::vector<double> random_values(size_t n, std::mt19937& rng, double scale = 0.5) {
  std::uniform_real_distribution<double> dist(-scale, scale);
  std::vector<double> v(n);
  for (double& x : v) x = dist(rng);
  return v;
}

Tensor as_tensor(const std::vector<double>& v, Shape shape, DType dtype) {
  return Tensor::from_vector<double>(v, std::move(shape)).cast(dtype);
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

enum class Kind { LSTM, GRU, RNN };

// One recurrent problem: weights and inputs in float64, layout 0. Empty vectors mean "omitted".
struct Problem {
  Kind kind = Kind::LSTM;
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, dirs = 1;
  bool linear_before_reset = false;
  std::vector<double> x{}, w{}, r{}, b{}, h0{}, c0{}, p{};
  std::vector<int64_t> lengths{};

  int64_t gates() const { return kind == Kind::LSTM ? 4 : kind == Kind::GRU ? 3 : 1; }
};

Problem make_problem(Kind kind, int64_t seq, int64_t batch, int64_t input, int64_t hidden, int64_t dirs,
                     unsigned seed) {
  std::mt19937 rng(seed);
  Problem pr;
  pr.kind = kind, pr.seq = seq, pr.batch = batch, pr.input = input, pr.hidden = hidden, pr.dirs = dirs;
  int64_t gh = pr.gates() * hidden;
  pr.x = random_values(size_t(seq * batch * input), rng, 1.0);
  pr.w = random_values(size_t(dirs * gh * input), rng);
  pr.r = random_values(size_t(dirs * gh * hidden), rng);
  pr.b = random_values(size_t(dirs * 2 * gh), rng);
  pr.h0 = random_values(size_t(dirs * batch * hidden), rng);
  if (kind == Kind::LSTM) {
    pr.c0 = random_values(size_t(dirs * batch * hidden), rng);
    pr.p = random_values(size_t(dirs * 3 * hidden), rng);
  }
  return pr;
}

struct Reference {
  std::vector<double> y, y_h, y_c;  // [seq, dirs, batch, H], [dirs, batch, H], [dirs, batch, H]
};

// Straight from the ONNX operator definitions, one batch entry and one step at a time.
Reference reference(const Problem& pr) {
  const int64_t S = pr.seq, B = pr.batch, I = pr.input, H = pr.hidden, D = pr.dirs, G = pr.gates();
  const size_t hs = static_cast<size_t>(H);
  Reference out;
  out.y.assign(size_t(S * D * B * H), 0.0);
  out.y_h.assign(size_t(D * B * H), 0.0);
  out.y_c.assign(size_t(D * B * H), 0.0);
  for (int64_t d = 0; d < D; ++d) {
    auto W = [&](int64_t row, int64_t col) { return pr.w[size_t((d * G * H + row) * I + col)]; };
    auto R = [&](int64_t row, int64_t col) { return pr.r[size_t((d * G * H + row) * H + col)]; };
    auto Wb = [&](int64_t row) { return pr.b.empty() ? 0.0 : pr.b[size_t(d * 2 * G * H + row)]; };
    auto Rb = [&](int64_t row) { return pr.b.empty() ? 0.0 : pr.b[size_t(d * 2 * G * H + G * H + row)]; };
    for (int64_t b = 0; b < B; ++b) {
      std::vector<double> h(hs, 0.0), c(hs, 0.0);
      if (!pr.h0.empty()) std::copy_n(pr.h0.begin() + (d * B + b) * H, H, h.begin());
      if (!pr.c0.empty()) std::copy_n(pr.c0.begin() + (d * B + b) * H, H, c.begin());
      int64_t len = pr.lengths.empty() ? S : pr.lengths[size_t(b)];
      for (int64_t step = 0; step < len; ++step) {
        int64_t t = d == 1 ? len - 1 - step : step;
        const double* xt = pr.x.data() + (t * B + b) * I;
        // xg[row] = x_t . W[row] + Wb[row]; hg[row] = h . R[row] + Rb[row]
        auto xg = [&](int64_t row) {
          double s = Wb(row);
          for (int64_t k = 0; k < I; ++k) s += xt[k] * W(row, k);
          return s;
        };
        auto hg = [&](int64_t row, const std::vector<double>& hv) {
          double s = Rb(row);
          for (int64_t k = 0; k < H; ++k) s += hv[size_t(k)] * R(row, k);
          return s;
        };
        std::vector<double> nh(hs), nc(hs);
        if (pr.kind == Kind::RNN) {
          for (int64_t j = 0; j < H; ++j) nh[size_t(j)] = std::tanh(xg(j) + hg(j, h));
        } else if (pr.kind == Kind::GRU) {
          std::vector<double> z(hs), rr(hs), rh(hs);
          for (int64_t j = 0; j < H; ++j) {
            z[size_t(j)] = sigmoid(xg(j) + hg(j, h));
            rr[size_t(j)] = sigmoid(xg(H + j) + hg(H + j, h));
            rh[size_t(j)] = rr[size_t(j)] * h[size_t(j)];
          }
          for (int64_t j = 0; j < H; ++j) {
            double cand = pr.linear_before_reset ? std::tanh(xg(2 * H + j) + rr[size_t(j)] * hg(2 * H + j, h))
                                                 : std::tanh(xg(2 * H + j) + hg(2 * H + j, rh));
            nh[size_t(j)] = (1 - z[size_t(j)]) * cand + z[size_t(j)] * h[size_t(j)];
          }
        } else {
          auto P = [&](int64_t k) { return pr.p.empty() ? 0.0 : pr.p[size_t(d * 3 * H + k)]; };
          for (int64_t j = 0; j < H; ++j) {
            double i = sigmoid(xg(j) + hg(j, h) + P(j) * c[size_t(j)]);
            double f = sigmoid(xg(2 * H + j) + hg(2 * H + j, h) + P(2 * H + j) * c[size_t(j)]);
            double g = std::tanh(xg(3 * H + j) + hg(3 * H + j, h));
            nc[size_t(j)] = f * c[size_t(j)] + i * g;
            double o = sigmoid(xg(H + j) + hg(H + j, h) + P(H + j) * nc[size_t(j)]);
            nh[size_t(j)] = o * std::tanh(nc[size_t(j)]);
          }
          c = nc;
        }
        h = nh;
        std::copy(h.begin(), h.end(), out.y.begin() + ((t * D + d) * B + b) * H);
      }
      std::copy(h.begin(), h.end(), out.y_h.begin() + (d * B + b) * H);
      std::copy(c.begin(), c.end(), out.y_c.begin() + (d * B + b) * H);
    }
  }
  return out;
}

std::vector<Tensor> run_op(const Problem& pr, DType dtype, Attributes attrs = {}) {
  const int64_t gh = pr.gates() * pr.hidden;
  std::vector<Tensor> in{
      as_tensor(pr.x, {pr.seq, pr.batch, pr.input}, dtype),
      as_tensor(pr.w, {pr.dirs, gh, pr.input}, dtype),
      as_tensor(pr.r, {pr.dirs, gh, pr.hidden}, dtype),
      pr.b.empty() ? Tensor() : as_tensor(pr.b, {pr.dirs, 2 * gh}, dtype),
      pr.lengths.empty()
          ? Tensor()
          : Tensor::from_vector<int32_t>(std::vector<int32_t>(pr.lengths.begin(), pr.lengths.end()), {pr.batch}),
      pr.h0.empty() ? Tensor() : as_tensor(pr.h0, {pr.dirs, pr.batch, pr.hidden}, dtype)};
  if (pr.kind == Kind::LSTM) {
    in.push_back(pr.c0.empty() ? Tensor() : as_tensor(pr.c0, {pr.dirs, pr.batch, pr.hidden}, dtype));
    in.push_back(pr.p.empty() ? Tensor() : as_tensor(pr.p, {pr.dirs, 3 * pr.hidden}, dtype));
  }
  attrs["hidden_size"] = pr.hidden;
  if (pr.dirs == 2) attrs["direction"] = "bidirectional";
  if (pr.linear_before_reset) attrs["linear_before_reset"] = int64_t(1);
  const char* op = pr.kind == Kind::LSTM ? "LSTM" : pr.kind == Kind::GRU ? "GRU" : "RNN";
  return ops::call(op, in, attrs, pr.kind == Kind::LSTM ? 3 : 2);
}

void expect_close(const Tensor& got, const std::vector<double>& want, double tol, const char* what) {
  std::vector<double> g = got.cast(DType::Float64).to_vector<double>();
  ASSERT_EQ(g.size(), want.size()) << what;
  for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(g[i], want[i], tol) << what << " element " << i;
}

void check_against_reference(const Problem& pr) {
  Reference ref = reference(pr);
  for (DType dtype : {DType::Float32, DType::Float64}) {
    double tol = dtype == DType::Float32 ? 2e-5 : 1e-12;
    std::vector<Tensor> out = run_op(pr, dtype);
    EXPECT_EQ(out[0].shape(), (Shape{pr.seq, pr.dirs, pr.batch, pr.hidden}));
    expect_close(out[0], ref.y, tol, "Y");
    expect_close(out[1], ref.y_h, tol, "Y_h");
    if (pr.kind == Kind::LSTM) expect_close(out[2], ref.y_c, tol, "Y_c");
  }
}

}  // namespace

TEST(LSTM, BidirectionalWithPeepholesAndSequenceLengthsMatchesReference) {
  Problem pr = make_problem(Kind::LSTM, 5, 3, 4, 6, 2, 1);
  pr.lengths = {5, 2, 0};
  check_against_reference(pr);
}

TEST(LSTM, ForwardDefaultsMatchReference) {
  Problem pr = make_problem(Kind::LSTM, 4, 2, 3, 5, 1, 2);
  pr.b.clear(), pr.h0.clear(), pr.c0.clear(), pr.p.clear();
  check_against_reference(pr);
}

TEST(LSTM, ReverseDirectionIsBidirectionalBackwardHalf) {
  Problem both = make_problem(Kind::LSTM, 4, 2, 3, 5, 2, 3);
  Reference ref = reference(both);
  // The reverse-only layer with the second direction's weights equals the backward half.
  Problem rev = both;
  rev.dirs = 1;
  auto second_half = [](const std::vector<double>& v) {
    return std::vector<double>(v.begin() + v.size() / 2, v.end());
  };
  rev.w = second_half(both.w), rev.r = second_half(both.r), rev.b = second_half(both.b);
  rev.h0 = second_half(both.h0), rev.c0 = second_half(both.c0), rev.p = second_half(both.p);
  std::vector<Tensor> out = run_op(rev, DType::Float64, {{"direction", "reverse"}});
  expect_close(out[1], second_half(ref.y_h), 1e-12, "Y_h");
}

TEST(LSTM, BatchMajorLayoutMatchesTimeMajor) {
  Problem pr = make_problem(Kind::LSTM, 3, 2, 4, 3, 2, 4);
  Reference ref = reference(pr);
  const int64_t S = 3, B = 2, I = 4, H = 3, D = 2;
  std::vector<double> xb(pr.x.size()), h0b(pr.h0.size()), c0b(pr.c0.size());
  for (int64_t t = 0; t < S; ++t)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t k = 0; k < I; ++k) xb[size_t((b * S + t) * I + k)] = pr.x[size_t((t * B + b) * I + k)];
  for (int64_t d = 0; d < D; ++d)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t k = 0; k < H; ++k) {
        h0b[size_t((b * D + d) * H + k)] = pr.h0[size_t((d * B + b) * H + k)];
        c0b[size_t((b * D + d) * H + k)] = pr.c0[size_t((d * B + b) * H + k)];
      }
  std::vector<Tensor> in{as_tensor(xb, {B, S, I}, DType::Float64),
                         as_tensor(pr.w, {D, 4 * H, I}, DType::Float64),
                         as_tensor(pr.r, {D, 4 * H, H}, DType::Float64),
                         as_tensor(pr.b, {D, 8 * H}, DType::Float64),
                         Tensor(),
                         as_tensor(h0b, {B, D, H}, DType::Float64),
                         as_tensor(c0b, {B, D, H}, DType::Float64),
                         as_tensor(pr.p, {D, 3 * H}, DType::Float64)};
  std::vector<Tensor> out =
      ops::call("LSTM", in, {{"hidden_size", H}, {"direction", "bidirectional"}, {"layout", int64_t(1)}}, 3);
  ASSERT_EQ(out[0].shape(), (Shape{B, S, D, H}));
  ASSERT_EQ(out[1].shape(), (Shape{B, D, H}));
  std::vector<double> y = out[0].to_vector<double>(), yh = out[1].to_vector<double>();
  for (int64_t t = 0; t < S; ++t)
    for (int64_t d = 0; d < D; ++d)
      for (int64_t b = 0; b < B; ++b)
        for (int64_t k = 0; k < H; ++k) {
          EXPECT_NEAR(y[size_t(((b * S + t) * D + d) * H + k)], ref.y[size_t(((t * D + d) * B + b) * H + k)], 1e-12);
          if (t == 0) {
            EXPECT_NEAR(yh[size_t((b * D + d) * H + k)], ref.y_h[size_t((d * B + b) * H + k)], 1e-12);
          }
        }
}

TEST(LSTM, Float16ComputesInFloat) {
  Problem pr = make_problem(Kind::LSTM, 2, 1, 3, 4, 1, 5);
  Reference ref = reference(pr);
  std::vector<Tensor> out = run_op(pr, DType::Float16);
  EXPECT_EQ(out[1].dtype(), DType::Float16);
  expect_close(out[1], ref.y_h, 5e-3, "Y_h");
}

TEST(GRU, BidirectionalWithSequenceLengthsMatchesReference) {
  for (bool lbr : {false, true}) {
    SCOPED_TRACE(lbr ? "linear_before_reset=1" : "linear_before_reset=0");
    Problem pr = make_problem(Kind::GRU, 4, 3, 2, 5, 2, 6);
    pr.linear_before_reset = lbr;
    pr.lengths = {4, 1, 3};
    check_against_reference(pr);
  }
}

TEST(RNN, BidirectionalMatchesReference) {
  Problem pr = make_problem(Kind::RNN, 3, 2, 3, 4, 2, 7);
  check_against_reference(pr);
}

TEST(RNN, ZeroBatchGivesEmptyOutputs) {
  Problem pr = make_problem(Kind::RNN, 3, 0, 3, 4, 1, 8);
  pr.h0.clear();
  std::vector<Tensor> out = run_op(pr, DType::Float32);
  EXPECT_EQ(out[0].shape(), (Shape{3, 1, 0, 4}));
  EXPECT_EQ(out[1].shape(), (Shape{1, 0, 4}));
}

TEST(LSTM, BadInputsAreErrors) {
  Problem pr = make_problem(Kind::LSTM, 2, 1, 3, 4, 1, 9);
  std::vector<double> w_bad(32, 0.1);  // [1, 16, 2] where X has 3 features
  EXPECT_THROW(ops::call("LSTM",
                         {as_tensor(pr.x, {2, 1, 3}, DType::Float32), as_tensor(w_bad, {1, 16, 2}, DType::Float32),
                          as_tensor(pr.r, {1, 16, 4}, DType::Float32)},
                         {{"hidden_size", int64_t(4)}}, 3),
               Error);
  Problem ok = make_problem(Kind::LSTM, 2, 1, 3, 4, 1, 9);
  ok.lengths = {3};  // longer than the sequence
  EXPECT_THROW(run_op(ok, DType::Float32), Error);
  ok.lengths.clear();
  EXPECT_THROW(run_op(ok, DType::Float32, {{"activations", Strings{"Sigmoid", "Nope", "Tanh"}}}), Error);
  EXPECT_THROW(run_op(ok, DType::Float32, {{"direction", "sideways"}}), Error);
}

TEST(LSTM, CustomActivationsConsumeAlphaInOrder) {
  // With f = HardSigmoid(alpha, beta), g = h = Affine(alpha, beta) the cell is linear enough to
  // check by hand: H = 1, input 1, zero recurrent weights, x = 1, W all 1, no bias, c0 = 0.
  //   i = f = o = clamp(0.5 * 1 + 0.25) = 0.75 (HardSigmoid alpha 0.5, beta 0.25)
  //   c~ = 2 * 1 + 1 = 3 (Affine alpha 2, beta 1); c = 0.75 * 3 = 2.25
  //   h = o * (3 * c + 0) = 0.75 * 6.75 = 5.0625 (second Affine alpha 3, beta 0)
  std::vector<Tensor> in{Tensor::from_vector<float>({1}, {1, 1, 1}),
                         Tensor::from_vector<float>({1, 1, 1, 1}, {1, 4, 1}),
                         Tensor::from_vector<float>({0, 0, 0, 0}, {1, 4, 1})};
  Attributes attrs{{"hidden_size", int64_t(1)},
                   {"activations", Strings{"HardSigmoid", "Affine", "Affine"}},
                   {"activation_alpha", Floats{0.5f, 2.0f, 3.0f}},
                   {"activation_beta", Floats{0.25f, 1.0f, 0.0f}}};
  std::vector<Tensor> out = ops::call("LSTM", in, attrs, 3);
  EXPECT_NEAR(out[2].data<float>()[0], 2.25f, 1e-6);
  EXPECT_NEAR(out[1].data<float>()[0], 5.0625f, 1e-6);
}

// ---- control flow and sequences through the executor -------------------------------------------

namespace {

ValueInfo tensor_info(std::string name, DType dtype) { return {std::move(name), {ValueKind::Tensor, dtype, {}}}; }

std::vector<Value> run_model(std::shared_ptr<Graph> graph, const std::vector<Value>& inputs, int64_t opset = 17) {
  auto model = std::make_shared<Model>();
  model->name = "test";
  model->graph = std::move(graph);
  model->opsets[""] = opset;
  Executor executor(model, Device::cpu());
  return executor.run(inputs).outputs;
}

}  // namespace

TEST(If, RunsTheBranchTheConditionPicks) {
  // Each branch just returns a value of the enclosing graph, so no other op is involved.
  auto then_branch = std::make_shared<Graph>(), else_branch = std::make_shared<Graph>();
  then_branch->name = "then";
  then_branch->outputs = {tensor_info("a", DType::Float32)};
  else_branch->name = "else";
  else_branch->outputs = {tensor_info("b", DType::Float32)};
  auto g = std::make_shared<Graph>();
  g->name = "main";
  g->inputs = {tensor_info("cond", DType::Bool), tensor_info("a", DType::Float32), tensor_info("b", DType::Float32)};
  g->outputs = {tensor_info("y", DType::Float32)};
  Node n;
  n.name = "if";
  n.op_type = "If";
  n.inputs = {"cond"};
  n.outputs = {"y"};
  n.attrs["then_branch"] = Attribute::graph(then_branch);
  n.attrs["else_branch"] = Attribute::graph(else_branch);
  g->nodes.push_back(n);
  Tensor a = Tensor::from_vector<float>({1, 2}, {2}), b = Tensor::from_vector<float>({3}, {1});
  std::vector<Value> yes = run_model(g, {Tensor::scalar<bool>(true), a, b});
  EXPECT_EQ(yes.at(0).tensor.to_vector<float>(), (std::vector<float>{1, 2}));
  std::vector<Value> no = run_model(g, {Tensor::scalar<bool>(false), a, b});
  EXPECT_EQ(no.at(0).tensor.to_vector<float>(), (std::vector<float>{3}));
  // A condition of more than one element is an error, not a guess.
  EXPECT_THROW(run_model(g, {Tensor::from_vector<bool>({true, false}, {2}), a, b}), Error);
}

TEST(Loop, CarriesValuesAndStacksScanOutputs) {
  // body(i, cond, v) -> (cond, v, i): v passes through, the scan output collects 0, 1, 2.
  auto body = std::make_shared<Graph>();
  body->name = "body";
  body->inputs = {tensor_info("i", DType::Int64), tensor_info("c", DType::Bool), tensor_info("v", DType::Float32)};
  body->outputs = {tensor_info("c", DType::Bool), tensor_info("v", DType::Float32), tensor_info("i", DType::Int64)};
  auto g = std::make_shared<Graph>();
  g->name = "main";
  g->inputs = {tensor_info("m", DType::Int64), tensor_info("v0", DType::Float32)};
  g->outputs = {tensor_info("v_final", DType::Float32), tensor_info("iters", DType::Int64)};
  Node n;
  n.name = "loop";
  n.op_type = "Loop";
  n.inputs = {"m", "", "v0"};
  n.outputs = {"v_final", "iters"};
  n.attrs["body"] = Attribute::graph(body);
  g->nodes.push_back(n);
  std::vector<Value> out = run_model(g, {Tensor::scalar<int64_t>(3), Tensor::from_vector<float>({7}, {1})});
  EXPECT_EQ(out.at(0).tensor.to_vector<float>(), (std::vector<float>{7}));
  EXPECT_EQ(out.at(1).tensor.shape(), (Shape{3}));
  EXPECT_EQ(out.at(1).tensor.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2}));
  // Zero trips: the carried value is the initial one and the scan output is empty.
  out = run_model(g, {Tensor::scalar<int64_t>(0), Tensor::from_vector<float>({7}, {1})});
  EXPECT_EQ(out.at(0).tensor.to_vector<float>(), (std::vector<float>{7}));
  EXPECT_EQ(out.at(1).tensor.numel(), 0);
}

TEST(Sequence, SplitThenConcatRoundTrips) {
  auto g = std::make_shared<Graph>();
  g->name = "main";
  g->inputs = {tensor_info("x", DType::Float32), tensor_info("split", DType::Int64)};
  g->outputs = {tensor_info("y", DType::Float32), tensor_info("n", DType::Int64),
                tensor_info("stacked", DType::Float32)};
  auto node = [&](std::string op, std::vector<std::string> in, std::vector<std::string> out, Attributes attrs) {
    Node n;
    n.name = op;
    n.op_type = std::move(op);
    n.inputs = std::move(in);
    n.outputs = std::move(out);
    n.attrs = std::move(attrs);
    g->nodes.push_back(std::move(n));
  };
  node("SplitToSequence", {"x", "split"}, {"seq"}, {{"axis", int64_t(1)}});
  node("ConcatFromSequence", {"seq"}, {"y"}, {{"axis", int64_t(1)}});
  node("SequenceLength", {"seq"}, {"n"}, {});
  node("SplitToSequence", {"x"}, {"rows"}, {{"keepdims", int64_t(0)}});
  node("ConcatFromSequence", {"rows"}, {"stacked"}, {{"axis", int64_t(-1)}, {"new_axis", int64_t(1)}});
  // x = [[0 1 2] [3 4 5]]; split along axis 1 into sizes 1 and 2.
  Tensor x = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, {2, 3});
  std::vector<Value> out = run_model(g, {x, Tensor::from_vector<int64_t>({1, 2}, {2})});
  EXPECT_EQ(out.at(0).tensor.shape(), (Shape{2, 3}));
  EXPECT_EQ(out.at(0).tensor.to_vector<float>(), x.to_vector<float>());
  EXPECT_EQ(out.at(1).tensor.to_vector<int64_t>(), (std::vector<int64_t>{2}));
  // Rows [0 1 2] and [3 4 5] stacked along a new last axis: the transpose of x.
  EXPECT_EQ(out.at(2).tensor.shape(), (Shape{3, 2}));
  EXPECT_EQ(out.at(2).tensor.to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  // Split sizes that do not add up are an error.
  EXPECT_THROW(run_model(g, {x, Tensor::from_vector<int64_t>({1, 1}, {2})}), Error);
}
