// grad, value_and_grad, vjp and jvp (include/ingot/autograd.h) on the eager tape; vmap is in vmap.cpp.
#include <ingot/autograd.h>
#include <ingot/ops.h>

#include <fmt/format.h>


#include "autograd/tape.h"
#include "ops/gradient.h"

namespace ingot {
namespace {

// The arguments as f will see them: a float argument becomes a tensor that requires a gradient.
// One that already does (an enclosing transform differentiates through this one) is passed on through
// an Identity, so that this transform's gradients are taken with respect to its own copy while the
// enclosing one still reaches the original. `nested` says whether any did.
std::vector<Tensor> prepare(const std::vector<Tensor>& args, const std::vector<int>& argnums, bool& nested,
                            std::vector<Tensor>& differentiated) {
  std::vector<Tensor> xs = args;
  nested = false;
  for (int a : argnums) {
    if (a < 0 || size_t(a) >= args.size()) fail("argnums names argument {}, but the function got {}", a, args.size());
    Tensor& x = xs[size_t(a)];
    if (!differentiable_dtype(x.dtype())) fail("argument {} is {}: only float arguments can be differentiated", a, x.describe());
    if (x.requires_grad() && autograd::grad_enabled()) {
      nested = true;
      x = ops::call("Identity", {x}, {}, 1).at(0);
    } else {
      x = x.detach();
      x.set_requires_grad(true);
    }
    differentiated.push_back(x);
  }
  return xs;
}

std::vector<int> all_arguments(size_t n) {
  std::vector<int> argnums;
  for (size_t i = 0; i < n; ++i) argnums.push_back(int(i));
  return argnums;
}

// Gradients for the unreached become zeros (JAX's convention: the function does not depend on them).
void fill_zeros(std::vector<Tensor>& grads, const std::vector<Tensor>& like) {
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].defined()) grads[i] = Tensor::zeros(like[i].dtype(), like[i].shape(), like[i].device());
  }
}

std::pair<std::vector<Tensor>, std::vector<Tensor>> value_and_grad_at(const Function& f, const std::vector<int>& argnums,
                                                                      const std::vector<Tensor>& args) {
  bool nested = false;
  std::vector<Tensor> xs_d;
  std::vector<Tensor> xs = prepare(args, argnums, nested, xs_d);
  std::vector<Tensor> outs = f(xs);
  if (outs.empty()) fail("grad: the function returned nothing");
  if (outs[0].numel() != 1) fail("grad: the function's first output must have one element, not {}", outs[0].describe());
  std::vector<Tensor> grads(xs_d.size());
  if (outs[0].requires_grad()) grads = autograd::grad({outs[0]}, xs_d, {}, nested, nested);
  fill_zeros(grads, xs_d);
  return {outs, grads};
}

}  // namespace

Function grad(Function f, std::vector<int> argnums) {
  return [f = std::move(f), argnums = std::move(argnums)](const std::vector<Tensor>& args) {
    return value_and_grad_at(f, argnums, args).second;
  };
}

std::function<std::pair<std::vector<Tensor>, std::vector<Tensor>>(const std::vector<Tensor>&)> value_and_grad(
    Function f, std::vector<int> argnums) {
  return [f = std::move(f), argnums = std::move(argnums)](const std::vector<Tensor>& args) {
    return value_and_grad_at(f, argnums, args);
  };
}

std::pair<std::vector<Tensor>, Function> vjp(const Function& f, const std::vector<Tensor>& primals) {
  bool nested = false;
  std::vector<Tensor> xs_d;
  std::vector<Tensor> xs = prepare(primals, all_arguments(primals.size()), nested, xs_d);
  std::vector<Tensor> outs = f(xs);
  Function pullback = [outs, xs_d, nested](const std::vector<Tensor>& cotangents) {
    if (cotangents.size() != outs.size())
      fail("vjp: {} cotangents for {} outputs", cotangents.size(), outs.size());
    std::vector<Tensor> roots, cots;
    bool create = nested;
    for (size_t i = 0; i < outs.size(); ++i) {
      if (cotangents[i].shape() != outs[i].shape())
        fail("vjp: cotangent {} is {}, output {} is {}", i, cotangents[i].describe(), i, outs[i].describe());
      if (!outs[i].requires_grad()) continue;
      roots.push_back(outs[i]);
      cots.push_back(cotangents[i]);
      create |= cotangents[i].requires_grad();
    }
    std::vector<Tensor> grads(xs_d.size());
    if (!roots.empty()) grads = autograd::grad(roots, xs_d, cots, true, create);
    fill_zeros(grads, xs_d);
    return grads;
  };
  return {outs, pullback};
}

// Forward mode from reverse mode: u -> vjp(u) = J^T u is linear in u, so the vjp of that function
// at any u, applied to the tangent v, is (J^T)^T v = J v.
std::pair<std::vector<Tensor>, std::vector<Tensor>> jvp(const Function& f, const std::vector<Tensor>& primals,
                                                        const std::vector<Tensor>& tangents) {
  if (tangents.size() != primals.size()) fail("jvp: {} tangents for {} primals", tangents.size(), primals.size());
  for (size_t i = 0; i < primals.size(); ++i) {
    if (tangents[i].shape() != primals[i].shape())
      fail("jvp: tangent {} is {}, primal {} is {}", i, tangents[i].describe(), i, primals[i].describe());
  }
  bool nested = false;
  std::vector<Tensor> xs_d;
  std::vector<Tensor> xs = prepare(primals, all_arguments(primals.size()), nested, xs_d);
  std::vector<Tensor> outs = f(xs);
  std::vector<Tensor> roots, us;
  std::vector<size_t> which;
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!outs[i].requires_grad()) continue;
    Tensor u = Tensor::zeros(outs[i].dtype(), outs[i].shape(), outs[i].device());
    u.set_requires_grad(true);
    roots.push_back(outs[i]);
    us.push_back(u);
    which.push_back(i);
  }
  std::vector<Tensor> tangents_out(outs.size());
  if (!roots.empty()) {
    std::vector<Tensor> vjps = autograd::grad(roots, xs_d, us, true, true);
    std::vector<Tensor> linear, vs;
    for (size_t i = 0; i < vjps.size(); ++i) {
      if (vjps[i].defined() && vjps[i].requires_grad()) {
        linear.push_back(vjps[i]);
        vs.push_back(tangents[i]);
      }
    }
    if (!linear.empty()) {
      std::vector<Tensor> jv = autograd::grad(linear, us, vs, nested, nested);
      for (size_t k = 0; k < which.size(); ++k) tangents_out[which[k]] = jv[k];
    }
  }
  fill_zeros(tangents_out, outs);
  return {outs, tangents_out};
}

}  // namespace ingot
