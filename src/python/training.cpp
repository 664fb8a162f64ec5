// ingot.nn, ingot.optim and the function transforms for Python, over include/ingot/{nn,optim,
// autograd}.h: PyTorch's names, arguments and defaults (torch.nn layers, torch.optim's optimizers
// and schedulers, torch.func's grad/vjp/jvp/vmap and torch.compile's role for compile). The layers
// are Ingot's C++ modules; python/ingot/nn.py adds the Module base class for models written in
// Python, and Sequential.
#include <ingot/autograd.h>
#include <ingot/distributed.h>
#include <ingot/nn.h>
#include <ingot/optim.h>
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>

#include "python/bindings.h"

namespace py = pybind11;

namespace ingot::python {
namespace {

// A Python callable as an Function: tensors in, a tensor or a sequence of them out. The
// callable is held with its reference count managed under the GIL (transforms copy Functions freely,
// on threads that do not hold it).
Function function_of(py::function f) {
  auto held = std::shared_ptr<py::object>(new py::object(std::move(f)), [](py::object* o) {
    if (!Py_IsInitialized()) return;  // the interpreter is gone: leave the object
    py::gil_scoped_acquire gil;
    delete o;
  });
  return [held](const std::vector<Tensor>& args) {
    py::gil_scoped_acquire gil;
    py::tuple t(args.size());
    for (size_t i = 0; i < args.size(); ++i) t[i] = py::cast(args[i]);
    py::object r = (*held)(*t);
    std::vector<Tensor> out;
    if (py::isinstance<py::tuple>(r) || py::isinstance<py::list>(r)) {
      for (const py::handle& h : r) out.push_back(tensor_from(py::reinterpret_borrow<py::object>(h)));
    } else {
      out.push_back(tensor_from(r));
    }
    return out;
  };
}

std::vector<Tensor> tensors_of(const py::args& args) {
  std::vector<Tensor> out;
  for (const py::handle& h : args) out.push_back(tensor_from(py::reinterpret_borrow<py::object>(h)));
  return out;
}

// A result of one tensor as that tensor, several as a tuple (what the Python function returned).
py::object unpack(const std::vector<Tensor>& out) {
  if (out.size() == 1) return py::cast(out[0]);
  py::tuple t(out.size());
  for (size_t i = 0; i < out.size(); ++i) t[i] = out[i].defined() ? py::cast(out[i]) : py::none();
  return t;
}

std::vector<int> argnums_of(const py::object& a) {
  if (py::isinstance<py::int_>(a)) return {a.cast<int>()};
  return a.cast<std::vector<int>>();
}

std::vector<int64_t> axes_of(const py::object& a) {
  if (a.is_none()) return {-1};
  if (py::isinstance<py::int_>(a)) return {a.cast<int64_t>()};
  std::vector<int64_t> out;
  for (const py::handle& h : a) out.push_back(h.is_none() ? -1 : h.cast<int64_t>());
  return out;
}

std::map<std::string, Tensor> state_of(const py::dict& d) {
  std::map<std::string, Tensor> out;
  for (auto [k, v] : d) out[k.cast<std::string>()] = tensor_from(py::reinterpret_borrow<py::object>(v));
  return out;
}

template <class M>
using Holder = std::shared_ptr<M>;

void bind_nn(py::module_& m) {
  py::module_ nn = m.def_submodule("nn", "Layers and losses after torch.nn (Ingot's C++ modules).");
  using nn::Module;
  using nn::Layer;
  py::class_<Module, Holder<Module>>(nn, "_CppModule", "A module implemented by Ingot (C++).")
      .def("named_parameters", &Module::named_parameters)
      .def("parameters", &Module::parameters)
      .def("named_buffers", &Module::named_buffers)
      .def("state_dict", &Module::state_dict)
      .def("load_state_dict", [](Module& mod, const py::dict& state, bool strict) {
             mod.load_state_dict(state_of(state), strict);
           }, py::arg("state_dict"), py::arg("strict") = true)
      .def("train", [](Module& mod, bool on) -> Module& { mod.train(on); return mod; }, py::arg("mode") = true,
           py::return_value_policy::reference)
      .def("eval", [](Module& mod) -> Module& { mod.eval(); return mod; }, py::return_value_policy::reference)
      .def_property_readonly("training", &Module::is_training)
      .def("to", [](Module& mod, const py::object& where) -> Module& {
             if (py::isinstance<py::str>(where)) {
               const std::string s = where.cast<std::string>();
               if (s == "cpu" || s.rfind("cuda", 0) == 0) {
                 mod.to(Device::parse(s));
                 return mod;
               }
             }
             mod.to(dtype_from(where));
             return mod;
           }, py::arg("device_or_dtype"), py::return_value_policy::reference)
      .def("zero_grad", &Module::zero_grad)
      .def("num_parameters", &Module::num_parameters)
      .def("named_children", [](const Module& mod) { return mod.children(); });
  py::class_<Layer, Module, Holder<Layer>>(nn, "_CppLayer")
      .def("forward", [](Layer& l, const py::object& x) {
             const Tensor t = tensor_from(x);
             py::gil_scoped_release release;
             return l.forward(t);
           })
      .def("__call__", [](Layer& l, const py::object& x) {
             const Tensor t = tensor_from(x);
             py::gil_scoped_release release;
             return l.forward(t);
           });

  py::class_<nn::Linear, Layer, Holder<nn::Linear>>(nn, "Linear")
      .def(py::init<int64_t, int64_t, bool>(), py::arg("in_features"), py::arg("out_features"), py::arg("bias") = true)
      .def_readonly("weight", &nn::Linear::weight)
      .def_readonly("bias", &nn::Linear::bias);
  auto conv_options = [](int64_t stride, int64_t padding, int64_t dilation, int64_t groups, bool bias) {
    return nn::ConvOptions{stride, padding, dilation, groups, bias};
  };
  py::class_<nn::Conv, Layer, Holder<nn::Conv>>(nn, "_Conv")
      .def_readonly("weight", &nn::Conv::weight)
      .def_readonly("bias", &nn::Conv::bias);
  py::class_<nn::Conv1d, nn::Conv, Holder<nn::Conv1d>>(nn, "Conv1d")
      .def(py::init([conv_options](int64_t in, int64_t out, int64_t k, int64_t stride, int64_t padding, int64_t dilation,
                                   int64_t groups, bool bias) {
             return std::make_shared<nn::Conv1d>(in, out, k, conv_options(stride, padding, dilation, groups, bias));
           }), py::arg("in_channels"), py::arg("out_channels"), py::arg("kernel_size"), py::arg("stride") = 1,
           py::arg("padding") = 0, py::arg("dilation") = 1, py::arg("groups") = 1, py::arg("bias") = true);
  py::class_<nn::Conv2d, nn::Conv, Holder<nn::Conv2d>>(nn, "Conv2d")
      .def(py::init([conv_options](int64_t in, int64_t out, int64_t k, int64_t stride, int64_t padding, int64_t dilation,
                                   int64_t groups, bool bias) {
             return std::make_shared<nn::Conv2d>(in, out, k, conv_options(stride, padding, dilation, groups, bias));
           }), py::arg("in_channels"), py::arg("out_channels"), py::arg("kernel_size"), py::arg("stride") = 1,
           py::arg("padding") = 0, py::arg("dilation") = 1, py::arg("groups") = 1, py::arg("bias") = true);
  py::class_<nn::ConvTranspose2d, Layer, Holder<nn::ConvTranspose2d>>(nn, "ConvTranspose2d")
      .def(py::init([](int64_t in, int64_t out, int64_t k, int64_t stride, int64_t padding, int64_t output_padding,
                       int64_t groups, bool bias, int64_t dilation) {
             return std::make_shared<nn::ConvTranspose2d>(in, out, k,
                                                          nn::ConvTransposeOptions{stride, padding, output_padding, dilation, groups, bias});
           }), py::arg("in_channels"), py::arg("out_channels"), py::arg("kernel_size"), py::arg("stride") = 1,
           py::arg("padding") = 0, py::arg("output_padding") = 0, py::arg("groups") = 1, py::arg("bias") = true,
           py::arg("dilation") = 1)
      .def_readonly("weight", &nn::ConvTranspose2d::weight)
      .def_readonly("bias", &nn::ConvTranspose2d::bias);
  auto batch_norm = [](double eps, double momentum, bool affine, bool track) {
    return nn::BatchNormOptions{eps, momentum, affine, track};
  };
  py::class_<nn::BatchNorm, Layer, Holder<nn::BatchNorm>>(nn, "_BatchNorm")
      .def_readonly("weight", &nn::BatchNorm::weight)
      .def_readonly("bias", &nn::BatchNorm::bias)
      .def_readonly("running_mean", &nn::BatchNorm::running_mean)
      .def_readonly("running_var", &nn::BatchNorm::running_var);
  py::class_<nn::BatchNorm1d, nn::BatchNorm, Holder<nn::BatchNorm1d>>(nn, "BatchNorm1d")
      .def(py::init([batch_norm](int64_t n, double eps, double momentum, bool affine, bool track) {
             return std::make_shared<nn::BatchNorm1d>(n, batch_norm(eps, momentum, affine, track));
           }), py::arg("num_features"), py::arg("eps") = 1e-5, py::arg("momentum") = 0.1, py::arg("affine") = true,
           py::arg("track_running_stats") = true);
  py::class_<nn::BatchNorm2d, nn::BatchNorm, Holder<nn::BatchNorm2d>>(nn, "BatchNorm2d")
      .def(py::init([batch_norm](int64_t n, double eps, double momentum, bool affine, bool track) {
             return std::make_shared<nn::BatchNorm2d>(n, batch_norm(eps, momentum, affine, track));
           }), py::arg("num_features"), py::arg("eps") = 1e-5, py::arg("momentum") = 0.1, py::arg("affine") = true,
           py::arg("track_running_stats") = true);
  py::class_<nn::LayerNorm, Layer, Holder<nn::LayerNorm>>(nn, "LayerNorm")
      .def(py::init([](const py::object& shape, double eps, bool affine) {
             return std::make_shared<nn::LayerNorm>(py::isinstance<py::int_>(shape) ? std::vector<int64_t>{shape.cast<int64_t>()}
                                                                                   : shape.cast<std::vector<int64_t>>(),
                                                    eps, affine);
           }), py::arg("normalized_shape"), py::arg("eps") = 1e-5, py::arg("elementwise_affine") = true);
  py::class_<nn::GroupNorm, Layer, Holder<nn::GroupNorm>>(nn, "GroupNorm")
      .def(py::init<int64_t, int64_t, double, bool>(), py::arg("num_groups"), py::arg("num_channels"),
           py::arg("eps") = 1e-5, py::arg("affine") = true);
  py::class_<nn::Dropout, Layer, Holder<nn::Dropout>>(nn, "Dropout").def(py::init<double>(), py::arg("p") = 0.5);
  py::class_<nn::Embedding, Layer, Holder<nn::Embedding>>(nn, "Embedding")
      .def(py::init<int64_t, int64_t>(), py::arg("num_embeddings"), py::arg("embedding_dim"));
  py::class_<nn::ReLU, Layer, Holder<nn::ReLU>>(nn, "ReLU").def(py::init<>());
  py::class_<nn::LeakyReLU, Layer, Holder<nn::LeakyReLU>>(nn, "LeakyReLU")
      .def(py::init<double>(), py::arg("negative_slope") = 0.01);
  py::class_<nn::GELU, Layer, Holder<nn::GELU>>(nn, "GELU").def(py::init<>());
  py::class_<nn::SiLU, Layer, Holder<nn::SiLU>>(nn, "SiLU").def(py::init<>());
  py::class_<nn::Sigmoid, Layer, Holder<nn::Sigmoid>>(nn, "Sigmoid").def(py::init<>());
  py::class_<nn::Tanh, Layer, Holder<nn::Tanh>>(nn, "Tanh").def(py::init<>());
  py::class_<nn::Flatten, Layer, Holder<nn::Flatten>>(nn, "Flatten").def(py::init<int64_t>(), py::arg("start_dim") = 1);
  py::class_<nn::MaxPool2d, Layer, Holder<nn::MaxPool2d>>(nn, "MaxPool2d")
      .def(py::init([](int64_t k, const py::object& stride, int64_t padding) {
             return std::make_shared<nn::MaxPool2d>(k, stride.is_none() ? 0 : stride.cast<int64_t>(), padding);
           }), py::arg("kernel_size"), py::arg("stride") = py::none(), py::arg("padding") = 0);
  py::class_<nn::AvgPool2d, Layer, Holder<nn::AvgPool2d>>(nn, "AvgPool2d")
      .def(py::init([](int64_t k, const py::object& stride, int64_t padding) {
             return std::make_shared<nn::AvgPool2d>(k, stride.is_none() ? 0 : stride.cast<int64_t>(), padding);
           }), py::arg("kernel_size"), py::arg("stride") = py::none(), py::arg("padding") = 0);
  py::class_<nn::GlobalAvgPool, Layer, Holder<nn::GlobalAvgPool>>(nn, "GlobalAvgPool").def(py::init<>());

  py::module_ f = nn.def_submodule("functional", "Losses and activations after torch.nn.functional.");
  f.def("cross_entropy", [](const py::object& input, const py::object& target, const py::object& weight,
                            int64_t ignore_index, const std::string& reduction, double label_smoothing) {
         nn::functional::CrossEntropyOptions o;
         if (!weight.is_none()) o.weight = tensor_from(weight);
         o.ignore_index = ignore_index;
         o.reduction = reduction;
         o.label_smoothing = label_smoothing;
         return nn::functional::cross_entropy(tensor_from(input), tensor_from(target), o);
       }, py::arg("input"), py::arg("target"), py::arg("weight") = py::none(), py::arg("ignore_index") = -100,
       py::arg("reduction") = "mean", py::arg("label_smoothing") = 0.0);
  f.def("nll_loss", [](const py::object& input, const py::object& target, const py::object& weight, int64_t ignore_index,
                       const std::string& reduction) {
         nn::functional::CrossEntropyOptions o;
         if (!weight.is_none()) o.weight = tensor_from(weight);
         o.ignore_index = ignore_index;
         o.reduction = reduction;
         return nn::functional::nll_loss(tensor_from(input), tensor_from(target), o);
       }, py::arg("input"), py::arg("target"), py::arg("weight") = py::none(), py::arg("ignore_index") = -100,
       py::arg("reduction") = "mean");
  f.def("mse_loss", [](const py::object& input, const py::object& target, const std::string& reduction) {
         return nn::functional::mse_loss(tensor_from(input), tensor_from(target), reduction);
       }, py::arg("input"), py::arg("target"), py::arg("reduction") = "mean");
  f.def("binary_cross_entropy_with_logits", [](const py::object& input, const py::object& target,
                                               const std::string& reduction, const py::object& pos_weight) {
         std::optional<Tensor> pw;
         if (!pos_weight.is_none()) pw = tensor_from(pos_weight);
         return nn::functional::binary_cross_entropy_with_logits(tensor_from(input), tensor_from(target), pw, reduction);
       }, py::arg("input"), py::arg("target"), py::arg("reduction") = "mean", py::arg("pos_weight") = py::none());
  f.def("dropout", [](const py::object& x, double p, bool training) {
         return nn::functional::dropout(tensor_from(x), p, training);
       }, py::arg("input"), py::arg("p") = 0.5, py::arg("training") = true);
  f.def("gelu", [](const py::object& x) { return nn::functional::gelu(tensor_from(x)); }, py::arg("input"));
  m.def("manual_seed", &manual_seed, py::arg("seed"), "Seeds parameter initialization, dropout and shuffling.");
}

std::vector<Tensor> params_of(const py::object& params) {
  std::vector<Tensor> out;
  for (const py::handle& h : params) out.push_back(h.cast<Tensor>());
  if (out.empty()) fail("optimizer got an empty parameter list");
  return out;
}

void bind_optim(py::module_& m) {
  py::module_ o = m.def_submodule("optim", "Optimizers (one fused update per step), after torch.optim.");
  using optim::Optimizer;
  py::class_<Optimizer>(o, "Optimizer")
      .def("step", [](Optimizer& opt) {
             py::gil_scoped_release release;
             opt.step();
           })
      .def("zero_grad", &Optimizer::zero_grad)
      .def_property("lr", &Optimizer::lr, &Optimizer::set_lr)
      .def_property_readonly("steps", &Optimizer::steps)
      .def("state_dict", &Optimizer::state_dict)
      .def("load_state_dict", [](Optimizer& opt, const py::dict& state) { opt.load_state_dict(state_of(state)); });
  py::class_<optim::SGD, Optimizer>(o, "SGD")
      .def(py::init([](const py::object& params, double lr, double momentum, double dampening, double weight_decay,
                       bool nesterov, bool maximize) {
             return std::make_unique<optim::SGD>(params_of(params),
                                                 optim::SGDOptions{lr, momentum, dampening, weight_decay, nesterov, maximize});
           }), py::arg("params"), py::arg("lr") = 1e-3, py::arg("momentum") = 0.0, py::arg("dampening") = 0.0,
           py::arg("weight_decay") = 0.0, py::arg("nesterov") = false, py::arg("maximize") = false,
           py::keep_alive<1, 2>());
  auto adam_options = [](double lr, std::pair<double, double> betas, double eps, double weight_decay, bool amsgrad,
                         bool maximize, optim::AdamOptions o) {
    o.lr = lr, o.beta1 = betas.first, o.beta2 = betas.second, o.eps = eps, o.weight_decay = weight_decay;
    o.amsgrad = amsgrad, o.maximize = maximize;
    return o;
  };
  py::class_<optim::Adam, Optimizer>(o, "Adam")
      .def(py::init([adam_options](const py::object& params, double lr, std::pair<double, double> betas, double eps,
                                   double weight_decay, bool amsgrad, bool maximize) {
             return std::make_unique<optim::Adam>(params_of(params),
                                                  adam_options(lr, betas, eps, weight_decay, amsgrad, maximize, {}));
           }), py::arg("params"), py::arg("lr") = 1e-3, py::arg("betas") = std::pair<double, double>(0.9, 0.999),
           py::arg("eps") = 1e-8, py::arg("weight_decay") = 0.0, py::arg("amsgrad") = false, py::arg("maximize") = false);
  py::class_<optim::AdamW, optim::Adam>(o, "AdamW")
      .def(py::init([adam_options](const py::object& params, double lr, std::pair<double, double> betas, double eps,
                                   double weight_decay, bool amsgrad, bool maximize) {
             optim::AdamWOptions w;
             static_cast<optim::AdamOptions&>(w) = adam_options(lr, betas, eps, weight_decay, amsgrad, maximize, w);
             return std::make_unique<optim::AdamW>(params_of(params), w);
           }), py::arg("params"), py::arg("lr") = 1e-3, py::arg("betas") = std::pair<double, double>(0.9, 0.999),
           py::arg("eps") = 1e-8, py::arg("weight_decay") = 1e-2, py::arg("amsgrad") = false, py::arg("maximize") = false);
  o.def("clip_grad_norm_", [](const py::object& params, double max_norm, double norm_type) {
         return optim::clip_grad_norm(params_of(params), max_norm, norm_type);
       }, py::arg("parameters"), py::arg("max_norm"), py::arg("norm_type") = 2.0,
       "Scales the gradients in place so that their total norm is at most max_norm; returns the norm before.");

  py::module_ s = o.def_submodule("lr_scheduler", "Learning-rate schedules, after torch.optim.lr_scheduler.");
  py::class_<optim::LRScheduler>(s, "LRScheduler")
      .def("step", &optim::LRScheduler::step)
      .def_property_readonly("last_epoch", &optim::LRScheduler::last_epoch)
      .def("get_last_lr", [](const optim::LRScheduler& l) { return std::vector<double>{l.last_lr()}; });
  py::class_<optim::StepLR, optim::LRScheduler>(s, "StepLR")
      .def(py::init<Optimizer&, int64_t, double>(), py::arg("optimizer"), py::arg("step_size"), py::arg("gamma") = 0.1,
           py::keep_alive<1, 2>());
  py::class_<optim::CosineAnnealingLR, optim::LRScheduler>(s, "CosineAnnealingLR")
      .def(py::init<Optimizer&, int64_t, double>(), py::arg("optimizer"), py::arg("T_max"), py::arg("eta_min") = 0.0,
           py::keep_alive<1, 2>());
}

void bind_transforms(py::module_& m) {
  py::module_ fn = m.def_submodule("func", "Function transforms, after torch.func: grad, value_and_grad, vjp, jvp, vmap.");
  fn.def("grad", [](py::function f, const py::object& argnums) {
         Function g = ingot::grad(function_of(std::move(f)), argnums_of(argnums));
         return py::cpp_function([g](const py::args& args) {
           std::vector<Tensor> in = tensors_of(args), out;
           {
             py::gil_scoped_release release;
             out = g(in);
           }
           return unpack(out);
         });
       }, py::arg("func"), py::arg("argnums") = 0,
       "torch.func.grad: a function returning the gradient of func (a scalar) with respect to argument(s) argnums.");
  fn.def("value_and_grad", [](py::function f, const py::object& argnums) {
         auto vg = ingot::value_and_grad(function_of(std::move(f)), argnums_of(argnums));
         return py::cpp_function([vg](const py::args& args) {
           std::pair<std::vector<Tensor>, std::vector<Tensor>> r;
           const std::vector<Tensor> in = tensors_of(args);
           {
             py::gil_scoped_release release;
             r = vg(in);
           }
           return py::make_tuple(unpack(r.first), unpack(r.second));
         });
       }, py::arg("func"), py::arg("argnums") = 0);
  fn.def("vjp", [](py::function f, const py::args& primals) {
         std::pair<std::vector<Tensor>, Function> r;
         const std::vector<Tensor> in = tensors_of(primals);
         {
           py::gil_scoped_release release;
           r = ingot::vjp(function_of(std::move(f)), in);
         }
         Function pullback = r.second;
         return py::make_tuple(unpack(r.first), py::cpp_function([pullback](const py::args& cotangents) {
                                 std::vector<Tensor> in = tensors_of(cotangents), out;
                                 {
                                   py::gil_scoped_release release;
                                   out = pullback(in);
                                 }
                                 return unpack(out);
                               }));
       }, py::arg("func"), "torch.func.vjp: (outputs, vjp_fn); vjp_fn(*cotangents) gives the inputs' cotangents.");
  fn.def("jvp", [](py::function f, const std::vector<py::object>& primals, const std::vector<py::object>& tangents) {
         std::vector<Tensor> p, t;
         for (const auto& o : primals) p.push_back(tensor_from(o));
         for (const auto& o : tangents) t.push_back(tensor_from(o));
         std::pair<std::vector<Tensor>, std::vector<Tensor>> r;
         {
           py::gil_scoped_release release;
           r = ingot::jvp(function_of(std::move(f)), p, t);
         }
         return py::make_tuple(unpack(r.first), unpack(r.second));
       }, py::arg("func"), py::arg("primals"), py::arg("tangents"),
       "torch.func.jvp: (outputs, output tangents) for tuples of primals and tangents.");
  fn.def("vmap", [](py::function f, const py::object& in_dims, const py::object& out_dims) {
         Function v = ingot::vmap(function_of(std::move(f)), axes_of(in_dims), axes_of(out_dims));
         return py::cpp_function([v](const py::args& args) {
           std::vector<Tensor> in = tensors_of(args), out;
           {
             py::gil_scoped_release release;
             out = v(in);
           }
           return unpack(out);
         });
       }, py::arg("func"), py::arg("in_dims") = 0, py::arg("out_dims") = 0,
       "torch.func.vmap: func mapped over axis in_dims[i] of argument i (None: shared); ops batch through their "
       "batching rules.");
  py::class_<CompiledFunction>(m, "CompiledFunction", "A function traced once per input signature and compiled.")
      .def("__call__", [](const CompiledFunction& c, const py::args& args) {
             std::vector<Tensor> in = tensors_of(args), out;
             {
               py::gil_scoped_release release;
               out = c(in);
             }
             return unpack(out);
           })
      .def_property_readonly("traces", &CompiledFunction::traces)
      .def("graph", [](const CompiledFunction& c, const py::args& args) { return c.graph_text(tensors_of(args)); },
           "The graph traced for these arguments' signature, as text.")
      .def("report", [](const CompiledFunction& c, const py::args& args) { return c.report(tensors_of(args)); },
           "Fallbacks, memory plan and CUDA graph of the compiled graph for these arguments.");
  m.def("compile", [](py::function f) { return ingot::compile(function_of(std::move(f))); }, py::arg("func"),
        "Traces func once per input signature into a graph, compiles it (fusions, memory plan, CUDA graph) and "
        "runs that instead (torch.compile's role). func must not branch on its arguments' values.");
}

ReduceOp reduce_op_of(const std::string& op) {
  if (op == "sum") return ReduceOp::Sum;
  if (op == "avg") return ReduceOp::Avg;
  if (op == "max") return ReduceOp::Max;
  if (op == "min") return ReduceOp::Min;
  fail("all_reduce: op '{}' is not one of sum, avg, max, min", op);
}

// ingot.distributed (python/ingot/distributed.py wraps it): the process group, the collectives and
// the reducer behind DistributedDataParallel, over include/ingot/distributed.h.
void bind_distributed(py::module_& m) {
  py::module_ d = m.def_submodule("_distributed", "Data-parallel training (python/ingot/distributed.py is the API).");
  d.def("init_process_group", [](const std::string& backend, const std::string& init_method, int rank, int world_size,
                                 int local_rank, double timeout) {
         distributed::InitOptions o;
         o.backend = backend;
         o.init_method = init_method;
         o.rank = rank;
         o.world_size = world_size;
         o.local_rank = local_rank;
         o.timeout = std::chrono::milliseconds(int64_t(timeout * 1000));
         py::gil_scoped_release release;
         distributed::init_process_group(o);
       }, py::arg("backend"), py::arg("init_method") = "", py::arg("rank") = -1, py::arg("world_size") = -1,
       py::arg("local_rank") = -1, py::arg("timeout") = 600.0);
  d.def("destroy_process_group", &distributed::destroy_process_group);
  d.def("is_initialized", &distributed::is_initialized);
  d.def("launched", &distributed::launched);
  d.def("get_rank", &distributed::get_rank);
  d.def("get_world_size", &distributed::get_world_size);
  d.def("get_local_rank", &distributed::get_local_rank);
  d.def("device", [] { return distributed::device().str(); });
  d.def("describe", [] { return distributed::describe(); });
  d.def("all_reduce", [](const Tensor& t, const std::string& op) {
         ReduceOp r = reduce_op_of(op);
         py::gil_scoped_release release;
         distributed::all_reduce(t, r);
       }, py::arg("tensor"), py::arg("op") = "sum");
  d.def("broadcast", [](const Tensor& t, int src) {
         py::gil_scoped_release release;
         distributed::broadcast(t, src);
       }, py::arg("tensor"), py::arg("src"));
  d.def("barrier", [] {
    py::gil_scoped_release release;
    distributed::barrier();
  });
  using distributed::DistributedDataParallel;
  py::class_<DistributedDataParallel>(d, "_Reducer")
      .def(py::init([](const py::object& named_parameters, py::function buffers, double bucket_cap_mb, bool broadcast_buffers) {
             std::vector<std::pair<std::string, Tensor>> params;
             for (const py::handle& h : named_parameters) {
               auto pair = h.cast<py::tuple>();
               params.emplace_back(pair[0].cast<std::string>(), pair[1].cast<Tensor>());
             }
             // Called from sync_buffers and the constructor, both on a thread that holds the GIL.
             auto held = std::make_shared<py::function>(std::move(buffers));
             std::function<std::vector<Tensor>()> buffers_of = [held] {
               py::gil_scoped_acquire gil;
               std::vector<Tensor> out;
               for (const py::handle& h : (*held)()) out.push_back(h.cast<Tensor>());
               return out;
             };
             DistributedDataParallel::Options o;
             o.bucket_cap_mb = bucket_cap_mb;
             o.broadcast_buffers = broadcast_buffers;
             return std::make_unique<DistributedDataParallel>(std::move(params), std::move(buffers_of), o);
           }), py::arg("named_parameters"), py::arg("buffers"), py::arg("bucket_cap_mb") = 25.0,
           py::arg("broadcast_buffers") = true)
      .def("sync_buffers", &DistributedDataParallel::sync_buffers)
      .def("buckets", &DistributedDataParallel::buckets)
      .def_property("sync", &DistributedDataParallel::sync, &DistributedDataParallel::set_sync);
}

}  // namespace

void bind_training(py::module_& m) {
  bind_nn(m);
  bind_optim(m);
  bind_transforms(m);
  bind_distributed(m);
}

}  // namespace ingot::python
