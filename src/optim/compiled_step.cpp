// optim::CompiledStep (include/ingot/optim.h): one training step as a pure function, compiled once.
//
//   f(params, buffers, states, hyperparameters, step, seed, batch...)
//     -> (loss, new params, new buffers, new states)
//
// The module's own parameter, buffer and state tensors are f's arguments, so the tracer names them
// as graph inputs (autograd/trace.h keys values by their data); inside f the loss's gradients come
// from autograd::grad and the update from the optimizer's fused op in its functional form
// (in_place 0). Batch norm rebinds its buffers during the forward: f returns the rebound tensors
// and the slots are put back, so that after every call the results are copied into the same
// tensors the module, the optimizer and the caller hold.
#include <ingot/autograd.h>
#include <ingot/nn.h>
#include <ingot/ops.h>
#include <ingot/optim.h>

#include "nn/traced_seeds.h"

namespace ingot::optim {

struct CompiledStep::State {
  nn::Module* module;
  Optimizer* optimizer;
  Loss loss;
  std::vector<std::pair<std::string, Tensor*>> buffers;  // the module's buffer slots
  std::vector<Tensor> last_args;
  std::unique_ptr<CompiledFunction> compiled;
  size_t params = 0;
  // Per parameter, the argument for an empty state slot (SGD without momentum): made once.
  std::vector<Tensor> placeholders;
};

CompiledStep::CompiledStep(nn::Module& module, Optimizer& optimizer, Loss loss) : state_(std::make_unique<State>()) {
  state_->module = &module;
  state_->optimizer = &optimizer;
  state_->loss = std::move(loss);
  state_->buffers = module.slots(false);
  // The optimizer must hold the module's parameters (the same tensors), as after
  // Optimizer(module.parameters()).
  const std::vector<Tensor> params = module.parameters();
  const std::vector<Tensor>& held = optimizer.params();
  if (params.size() != held.size())
    fail("CompiledStep: the optimizer holds {} tensors, the module has {} parameters", held.size(), params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].storage() != held[i].storage())
      fail("CompiledStep: the optimizer's tensor {} is not the module's parameter {} (make the optimizer from "
           "module.parameters() after moving the module)",
           i, i);
  }
  state_->params = params.size();
  state_->placeholders.resize(params.size());
  State* s = state_.get();
  Function step = [s](const std::vector<Tensor>& args) {
    Optimizer& opt = *s->optimizer;
    const size_t np = s->params, nb = s->buffers.size();
    const Optimizer::FusedUpdate u = opt.fused_update();
    const size_t ns = u.states.size();
    const std::vector<Tensor> params(args.begin(), args.begin() + np);
    const Tensor& hyper = args[np + nb + np * ns];
    const Tensor& step_count = args[np + nb + np * ns + 1];
    const Tensor& seed = args[np + nb + np * ns + 2];
    const std::vector<Tensor> batch(args.begin() + np + nb + np * ns + 3, args.end());
    Tensor loss;
    {
      nn::detail::TracedSeeds seeds(seed);
      loss = s->loss(batch);
    }
    if (!loss.defined() || loss.numel() != 1) fail("CompiledStep: the loss function must return one value");
    std::vector<Tensor> grads = autograd::grad({loss}, params);
    autograd::NoGradGuard no_grad;
    std::vector<Tensor> in{hyper, step_count};
    std::vector<size_t> updated;  // parameters with a gradient (the others keep their values)
    for (size_t i = 0; i < np; ++i) {
      if (!grads[i].defined()) continue;
      updated.push_back(i);
      in.push_back(params[i]);
      in.push_back(grads[i]);
      for (size_t k = 0; k < ns; ++k) in.push_back(u.states[k].empty() ? Tensor() : args[np + nb + i * ns + k]);
    }
    std::vector<Tensor> outs{loss.detach()};
    std::vector<Tensor> next_params(params.begin(), params.end());
    std::vector<Tensor> next_states(args.begin() + np + nb, args.begin() + np + nb + np * ns);
    if (!updated.empty()) {
      Attributes attrs = u.attrs;
      attrs["in_place"] = int64_t(0);
      std::vector<Tensor> r = ops::call(u.op, in, attrs, int(updated.size() * (1 + ns)), "ai.ingot");
      for (size_t j = 0; j < updated.size(); ++j) {
        next_params[updated[j]] = r[j * (1 + ns)];
        for (size_t k = 0; k < ns; ++k) {
          if (!u.states[k].empty()) next_states[updated[j] * ns + k] = r[j * (1 + ns) + 1 + k];
        }
      }
    }
    outs.insert(outs.end(), next_params.begin(), next_params.end());
    for (const auto& [name, slot] : s->buffers) outs.push_back(*slot);  // as the forward left them
    outs.insert(outs.end(), next_states.begin(), next_states.end());
    return outs;
  };
  state_->compiled = std::make_unique<CompiledFunction>(compile(step));
}

CompiledStep::~CompiledStep() = default;

Tensor CompiledStep::operator()(const std::vector<Tensor>& batch) {
  State& s = *state_;
  Optimizer& opt = *s.optimizer;
  const Optimizer::FusedUpdate u = opt.fused_update();
  const size_t np = s.params;
  // The module's own tensors are the arguments (the tracer names graph inputs by their data; kernels
  // keep nothing derived from graph inputs across runs: KernelContext::input_is_constant).
  std::vector<Tensor> args = opt.params();
  std::vector<Tensor> buffers;
  for (const auto& [name, slot] : s.buffers) {
    if (!slot->defined()) fail("CompiledStep: buffer '{}' is undefined", name);
    buffers.push_back(*slot);
  }
  args.insert(args.end(), buffers.begin(), buffers.end());
  std::vector<Tensor*> states;
  for (size_t i = 0; i < np; ++i) {
    for (const std::string& name : u.states) {
      // An empty slot (SGD without momentum) still takes an argument: a one-element placeholder.
      Tensor* t = name.empty() ? nullptr : &opt.state(i, name);
      states.push_back(t);
      if (!t && !s.placeholders[i].defined()) s.placeholders[i] = Tensor::zeros(DType::Float32, {1}, opt.params()[i].device());
      args.push_back(t ? *t : s.placeholders[i]);
    }
  }
  args.push_back(Tensor::from_vector<double>(u.hyperparameters, {int64_t(u.hyperparameters.size())}));
  args.push_back(Tensor::scalar<double>(double(opt.steps_ + 1)));
  args.push_back(Tensor::scalar<int64_t>(int64_t(random_u64() >> 2)));
  args.insert(args.end(), batch.begin(), batch.end());
  std::vector<Tensor> outs = (*s.compiled)(args);
  // The first call traced: the forward rebound the buffer slots to its results; put the caller's
  // tensors back (the results are copied into them below).
  for (size_t b = 0; b < s.buffers.size(); ++b) *s.buffers[b].second = buffers[b];
  autograd::NoGradGuard no_grad;
  auto copy_back = [](const Tensor& from, const Tensor& to) {
    if (from.storage() != to.storage() || from.byte_offset() != to.byte_offset()) copy_tensor(from, to);
  };
  for (size_t i = 0; i < np; ++i) copy_back(outs[1 + i], args[i]);
  for (size_t b = 0; b < buffers.size(); ++b) copy_back(outs[1 + np + b], buffers[b]);
  for (size_t k = 0; k < states.size(); ++k) {
    if (states[k]) copy_back(outs[1 + np + buffers.size() + k], *states[k]);
  }
  ++opt.steps_;
  s.last_args = std::move(args);
  return outs[0];
}

std::string CompiledStep::report() const {
  return state_->last_args.empty() ? "" : state_->compiled->report(state_->last_args);
}

}  // namespace ingot::optim
