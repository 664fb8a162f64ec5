// Models covering every kind of nn module, for the export tests: tests/export/export_models.cpp
// (the round trip through onnxruntime) and tests/unit/export_test.cpp (Ingot's own import and
// packages). Parameters are random (seeded), batch-norm statistics too, so that nothing is
// trivially zero or one.
#pragma once
#include <ingot/nn.h>
#include <ingot/ops.h>

#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace ingot::export_cases {


inline Tensor randn(Shape shape, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  Tensor t = Tensor::empty(DType::Float32, std::move(shape));
  for (float& v : t.span<float>()) v = d(rng);
  return t;
}

// Random batch-norm statistics (a fresh module's are zeros and ones).
inline void randomize_buffers(nn::Module& m, uint64_t seed) {
  std::map<std::string, Tensor> state = m.state_dict();
  for (auto& [name, t] : state) {
    if (name.find("running_mean") != std::string::npos) t = randn(t.shape(), seed++, 0.3f);
    if (name.find("running_var") != std::string::npos) {
      t = randn(t.shape(), seed++, 0.3f);
      for (float& v : t.span<float>()) v = 0.5f + v * v;
    }
  }
  m.load_state_dict(state);
}

struct Case {
  std::string name;
  std::shared_ptr<nn::Module> module;
  nn::ExportFunction forward;
  std::function<std::vector<Tensor>(int64_t batch)> inputs;
  int64_t batch, other_batch;  // other_batch 0: a fixed batch
};

inline std::vector<Case> cases() {
  std::vector<Case> all;
  auto layer_forward = [](const std::shared_ptr<nn::Layer>& l) {
    return [l](const std::vector<Tensor>& in) { return std::vector<Tensor>{l->forward(in[0])}; };
  };
  {  // The Fashion-MNIST example's network.
    nn::ConvOptions same{.padding = 1};
    auto net = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Layer>>{
        std::make_shared<nn::Conv2d>(1, 8, 3, same), std::make_shared<nn::BatchNorm2d>(8), std::make_shared<nn::ReLU>(),
        std::make_shared<nn::MaxPool2d>(2), std::make_shared<nn::Conv2d>(8, 16, 3, same),
        std::make_shared<nn::BatchNorm2d>(16), std::make_shared<nn::ReLU>(), std::make_shared<nn::MaxPool2d>(2),
        std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(16 * 7 * 7, 32), std::make_shared<nn::ReLU>(),
        std::make_shared<nn::Dropout>(0.3), std::make_shared<nn::Linear>(32, 10)});
    all.push_back({"cnn", net, layer_forward(net), [](int64_t b) { return std::vector<Tensor>{randn({b, 1, 28, 28}, 1)}; }, 4, 7});
  }
  {  // Grouped and dilated convolutions, group norm, transposed convolution, pooling, activations.
    auto net = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Layer>>{
        std::make_shared<nn::Conv2d>(4, 8, 3, nn::ConvOptions{.padding = 2, .dilation = 2, .groups = 2}),
        std::make_shared<nn::GroupNorm>(2, 8), std::make_shared<nn::LeakyReLU>(0.1),
        std::make_shared<nn::ConvTranspose2d>(8, 4, 3, nn::ConvTransposeOptions{.stride = 2, .padding = 1, .output_padding = 1}),
        std::make_shared<nn::SiLU>(), std::make_shared<nn::AvgPool2d>(3, 2, 1), std::make_shared<nn::Tanh>(),
        std::make_shared<nn::GlobalAvgPool>(), std::make_shared<nn::Flatten>(), std::make_shared<nn::Sigmoid>()});
    all.push_back({"convmix", net, layer_forward(net), [](int64_t b) { return std::vector<Tensor>{randn({b, 4, 9, 9}, 2)}; }, 2, 3});
  }
  {  // Token embedding, layer norm, GELU, Linear over [B, T, E], 1-d convolution with batch norm.
    struct TextNet : nn::Module {
      std::shared_ptr<nn::Embedding> embed = register_module("embed", std::make_shared<nn::Embedding>(20, 12));
      std::shared_ptr<nn::LayerNorm> norm = register_module("norm", std::make_shared<nn::LayerNorm>(std::vector<int64_t>{12}));
      std::shared_ptr<nn::Linear> fc = register_module("fc", std::make_shared<nn::Linear>(12, 12));
      std::shared_ptr<nn::Conv1d> conv = register_module("conv", std::make_shared<nn::Conv1d>(12, 6, 3, nn::ConvOptions{.padding = 1}));
      std::shared_ptr<nn::BatchNorm1d> bn = register_module("bn", std::make_shared<nn::BatchNorm1d>(6));
      Tensor forward(const Tensor& tokens) {
        Tensor h = nn::functional::gelu(fc->forward(norm->forward(embed->forward(tokens))));  // [B, T, 12]
        return bn->forward(conv->forward(ops::transpose(h, {0, 2, 1})));                 // [B, 6, T]
      }
    };
    auto net = std::make_shared<TextNet>();
    auto tokens = [](int64_t b) {
      Tensor t = Tensor::empty(DType::Int64, {b, 5});
      for (int64_t i = 0; i < t.numel(); ++i) t.data<int64_t>()[i] = (i * 7 + 3) % 20;
      return std::vector<Tensor>{t};
    };
    all.push_back({"text", net, [net](const std::vector<Tensor>& in) { return std::vector<Tensor>{net->forward(in[0])}; },
                   tokens, 3, 4});
  }
  {  // A 2-layer bidirectional LSTM, batch first; the output and the final states.
    auto lstm = std::make_shared<nn::LSTM>(6, 5, nn::RNNOptions{.num_layers = 2, .batch_first = true, .bidirectional = true});
    all.push_back({"lstm", lstm,
                   [lstm](const std::vector<Tensor>& in) {
                     nn::RNNOutput o = lstm->forward(in[0]);
                     return std::vector<Tensor>{o.output, o.h_n, o.c_n};
                   },
                   [](int64_t b) { return std::vector<Tensor>{randn({b, 7, 6}, 3)}; }, 2, 0});
  }
  {  // A GRU with an initial state (time first: the batch is not dim 0, so a fixed batch).
    auto gru = std::make_shared<nn::GRU>(4, 6, nn::RNNOptions{.num_layers = 2});
    all.push_back({"gru", gru,
                   [gru](const std::vector<Tensor>& in) {
                     nn::RNNOutput o = gru->forward(in[0], in[1]);
                     return std::vector<Tensor>{o.output, o.h_n};
                   },
                   [](int64_t b) { return std::vector<Tensor>{randn({5, b, 4}, 4), randn({2, b, 6}, 5)}; }, 3, 0});
  }
  {  // Causal self-attention, batch first, then a residual and a layer norm.
    struct Block : nn::Module {
      std::shared_ptr<nn::MultiheadAttention> attn =
          register_module("attn", std::make_shared<nn::MultiheadAttention>(16, 4, nn::MultiheadAttentionOptions{.batch_first = true}));
      std::shared_ptr<nn::LayerNorm> norm = register_module("norm", std::make_shared<nn::LayerNorm>(std::vector<int64_t>{16}));
      Tensor forward(const Tensor& x) { return norm->forward(ops::add(x, attn->forward(x, x, x, {.is_causal = true}).output)); }
    };
    auto block = std::make_shared<Block>();
    all.push_back({"attention", block,
                   [block](const std::vector<Tensor>& in) { return std::vector<Tensor>{block->forward(in[0])}; },
                   [](int64_t b) { return std::vector<Tensor>{randn({b, 6, 16}, 6)}; }, 2, 3});
  }
  return all;
}

}  // namespace ingot::export_cases
