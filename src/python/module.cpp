// `import ingot`: the Python module (pybind11), over the public C++ API only (include/ingot/).
//
// Tensors cross the boundary without copies where the memory allows: numpy arrays and DLPack
// producers (PyTorch, CuPy, JAX) are wrapped, the wrapper keeping the Python object (or the DLPack
// capsule's owner) alive for as long as Ingot holds the memory; Ingot tensors leave through DLPack
// (`__dlpack__`, so numpy.from_dlpack and torch.from_dlpack see Ingot's own buffer) or as numpy
// arrays whose base keeps the storage alive. ingot::Error becomes ingot.Error (a RuntimeError)
// with Ingot's message. Names and defaults follow numpy's and PyTorch's where users compare.
#include <dlpack/dlpack.h>
#include <ingot/autograd.h>
#include <ingot/convert.h>
#include <ingot/quantize.h>
#include <ingot/load_extension.h>
#include <ingot/ops.h>
#include <ingot/profiler.h>
#include <ingot/session.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "python/bindings.h"

namespace py = pybind11;
using namespace ingot;

namespace {

// ---- dtypes

DType dtype_of_numpy(const py::dtype& dt) {
  const char kind = dt.kind();
  const size_t size = size_t(dt.itemsize());
  if (kind == 'f') return size == 4 ? DType::Float32 : size == 8 ? DType::Float64 : size == 2 ? DType::Float16 : DType::Undefined;
  if (kind == 'i') {
    return size == 1 ? DType::Int8 : size == 2 ? DType::Int16 : size == 4 ? DType::Int32 : size == 8 ? DType::Int64 : DType::Undefined;
  }
  if (kind == 'u') {
    return size == 1 ? DType::UInt8 : size == 2 ? DType::UInt16 : size == 4 ? DType::UInt32 : size == 8 ? DType::UInt64 : DType::Undefined;
  }
  if (kind == 'b') return DType::Bool;
  return DType::Undefined;
}

// The numpy dtype of an Ingot dtype (bfloat16 has none: numpy() widens it to float32).
py::dtype numpy_dtype(DType dt) {
  switch (dt) {
    case DType::Float32: return py::dtype("float32");
    case DType::Float64: return py::dtype("float64");
    case DType::Float16: return py::dtype("float16");
    case DType::Int8: return py::dtype("int8");
    case DType::Int16: return py::dtype("int16");
    case DType::Int32: return py::dtype("int32");
    case DType::Int64: return py::dtype("int64");
    case DType::UInt8: return py::dtype("uint8");
    case DType::UInt16: return py::dtype("uint16");
    case DType::UInt32: return py::dtype("uint32");
    case DType::UInt64: return py::dtype("uint64");
    case DType::Bool: return py::dtype("bool");
    default: fail("{} tensors have no numpy dtype", dtype_name(dt));
  }
}

DType parse_dtype(const py::object& dt) {
  if (dt.is_none()) return DType::Undefined;
  if (py::isinstance<py::str>(dt)) {
    const std::string name = dt.cast<std::string>();
    const DType d = dtype_from_name(name);
    if (d == DType::Undefined) fail("unknown dtype '{}'", name);
    return d;
  }
  const DType d = dtype_of_numpy(py::dtype::from_args(dt));
  if (d == DType::Undefined) fail("unsupported dtype {}", py::str(dt).cast<std::string>());
  return d;
}

// DLPack's type code of a dtype, and back.
DLDataType dl_dtype(DType dt) {
  DLDataType r{0, uint8_t(dtype_size(dt) * 8), 1};
  switch (dt) {
    case DType::Float32:
    case DType::Float64:
    case DType::Float16: r.code = kDLFloat; break;
    case DType::BFloat16: r.code = kDLBfloat; break;
    case DType::Int8:
    case DType::Int16:
    case DType::Int32:
    case DType::Int64: r.code = kDLInt; break;
    case DType::UInt8:
    case DType::UInt16:
    case DType::UInt32:
    case DType::UInt64: r.code = kDLUInt; break;
    case DType::Bool: r.code = kDLUInt, r.bits = 8; break;  // DLPack 0.6 has no bool code: one byte each
    default: fail("{} tensors cannot be exported through DLPack", dtype_name(dt));
  }
  return r;
}

DType from_dl_dtype(DLDataType t) {
  if (t.lanes != 1) fail("DLPack tensor with {} lanes per element: not supported", int(t.lanes));
  switch (t.code) {
    case kDLFloat: return t.bits == 32 ? DType::Float32 : t.bits == 64 ? DType::Float64 : t.bits == 16 ? DType::Float16 : DType::Undefined;
    case kDLBfloat: return t.bits == 16 ? DType::BFloat16 : DType::Undefined;
    case 6: return t.bits == 8 ? DType::Bool : DType::Undefined;  // kDLBool (DLPack 0.8; the 0.6 header lacks it)
    case kDLInt:
      return t.bits == 8 ? DType::Int8 : t.bits == 16 ? DType::Int16 : t.bits == 32 ? DType::Int32 : t.bits == 64 ? DType::Int64 : DType::Undefined;
    case kDLUInt:
      return t.bits == 8 ? DType::UInt8 : t.bits == 16 ? DType::UInt16 : t.bits == 32 ? DType::UInt32 : t.bits == 64 ? DType::UInt64 : DType::Undefined;
    default: return DType::Undefined;
  }
}

// ---- owners of foreign memory

// Runs `release` with the GIL held, unless the interpreter is gone (then the memory is left).
std::function<void()> under_gil(std::function<void()> release) {
  return [release = std::move(release)] {
    if (!Py_IsInitialized()) return;
    py::gil_scoped_acquire gil;
    release();
  };
}

// A C-contiguous numpy array wrapped without a copy (the tensor keeps the array alive).
Tensor from_numpy(const py::array& a) {
  const DType dt = dtype_of_numpy(a.dtype());
  if (dt == DType::Undefined) fail("numpy dtype {} is not supported", py::str(a.dtype()).cast<std::string>());
  py::array contiguous = a;
  if (!(a.flags() & py::array::c_style)) contiguous = py::array::ensure(a, py::array::c_style | py::array::forcecast);
  Shape shape(contiguous.shape(), contiguous.shape() + contiguous.ndim());
  PyObject* owner = contiguous.ptr();
  Py_INCREF(owner);
  return Tensor::wrap(dt, shape, const_cast<void*>(contiguous.data()), Device::cpu(), under_gil([owner] { Py_DECREF(owner); }));
}

// A DLPack capsule's tensor wrapped without a copy; the capsule is marked used and its deleter runs
// when Ingot lets go of the memory.
Tensor from_capsule(py::capsule capsule) {
  if (std::strcmp(capsule.name(), "dltensor") != 0) fail("from_dlpack: not an unused DLPack capsule ('{}')", capsule.name());
  auto* managed = static_cast<DLManagedTensor*>(capsule.get_pointer());
  const DLTensor& t = managed->dl_tensor;
  const DType dt = from_dl_dtype(t.dtype);
  if (dt == DType::Undefined) fail("from_dlpack: dtype code {} with {} bits is not supported", int(t.dtype.code), int(t.dtype.bits));
  Device device;
  if (t.device.device_type == kDLCPU || t.device.device_type == kDLCUDAHost) {
    device = Device::cpu();
  } else if (t.device.device_type == kDLCUDA) {
    device = Device{DeviceType::CUDA, int(t.device.device_id)};
  } else {
    fail("from_dlpack: device type {} is not supported (CPU and CUDA are)", int(t.device.device_type));
  }
  Shape shape(t.shape, t.shape + t.ndim);
  if (t.strides) {  // only compact row-major layouts wrap without a copy
    int64_t expected = 1;
    for (int d = t.ndim - 1; d >= 0; --d) {
      if (shape[size_t(d)] != 1 && t.strides[d] != expected)
        fail("from_dlpack: the tensor is not contiguous (strides); make it contiguous first");
      expected *= shape[size_t(d)];
    }
  }
  PyCapsule_SetName(capsule.ptr(), "used_dltensor");
  void* data = static_cast<char*>(t.data) + t.byte_offset;
  return Tensor::wrap(dt, shape, data, device, under_gil([managed] {
                        if (managed->deleter) managed->deleter(managed);
                      }));
}

Tensor from_dlpack(const py::object& obj) {
  if (py::isinstance<py::capsule>(obj)) return from_capsule(obj.cast<py::capsule>());
  if (!py::hasattr(obj, "__dlpack__")) fail("from_dlpack: the object has no __dlpack__ method");
  return from_capsule(obj.attr("__dlpack__")().cast<py::capsule>());
}

// Whatever Python hands over as a tensor: an ingot.Tensor, a DLPack producer (zero copy), a numpy
// array (zero copy when C-contiguous), or anything numpy.asarray takes (a copy).
Tensor to_tensor(const py::object& obj) {
  if (py::isinstance<Tensor>(obj)) return obj.cast<Tensor>();
  if (py::isinstance<py::array>(obj)) return from_numpy(obj.cast<py::array>());
  if (py::hasattr(obj, "__dlpack__") && py::hasattr(obj, "__dlpack_device__")) return from_dlpack(obj);
  return from_numpy(py::module_::import("numpy").attr("asarray")(obj).cast<py::array>());
}

// ---- Ingot tensors out

struct DLPackOwner {
  Tensor tensor;
  std::vector<int64_t> shape;
  DLManagedTensor managed{};
};

py::capsule to_dlpack(const Tensor& t) {
  if (!t.defined()) fail("__dlpack__: the tensor is undefined");
  if (t.device().type != DeviceType::CPU) synchronize(t.device());  // ready for any consumer stream
  auto* owner = new DLPackOwner{t.detach(), t.shape(), {}};
  DLTensor& d = owner->managed.dl_tensor;
  d.data = t.storage()->data();
  d.byte_offset = t.byte_offset();
  d.device = t.device().type == DeviceType::CPU ? DLDevice{kDLCPU, 0} : DLDevice{kDLCUDA, int32_t(t.device().index)};
  d.ndim = int32_t(owner->shape.size());
  d.dtype = dl_dtype(t.dtype());
  d.shape = owner->shape.data();
  d.strides = nullptr;  // compact row-major
  owner->managed.manager_ctx = owner;
  owner->managed.deleter = [](DLManagedTensor* m) { delete static_cast<DLPackOwner*>(m->manager_ctx); };
  return py::capsule(&owner->managed, "dltensor", [](PyObject* cap) {
    // An unconsumed capsule frees its tensor; a consumed one ("used_dltensor") is the consumer's.
    if (std::strcmp(PyCapsule_GetName(cap), "dltensor") != 0) return;
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, "dltensor"));
    if (m && m->deleter) m->deleter(m);
  });
}

// A numpy array over a CPU tensor's memory (its base keeps the storage alive); bfloat16 is
// widened to float32 (a copy: numpy has no bfloat16), device tensors are copied to the host.
py::array to_numpy(const Tensor& t) {
  Tensor host = t.detach().to(Device::cpu());
  if (host.dtype() == DType::BFloat16) host = host.cast(DType::Float32);
  auto* keep = new Tensor(host);
  py::capsule base(keep, [](void* p) { delete static_cast<Tensor*>(p); });
  std::vector<py::ssize_t> shape(host.shape().begin(), host.shape().end());
  return py::array(numpy_dtype(host.dtype()), shape, host.raw_data(), base);
}

// ---- attributes

Attribute to_attribute(const std::string& name, const py::handle& v) {
  if (py::isinstance<py::bool_>(v)) return Attribute(int64_t(v.cast<bool>()));
  if (py::isinstance<py::int_>(v)) return Attribute(v.cast<int64_t>());
  if (py::isinstance<py::float_>(v)) return Attribute(v.cast<float>());
  if (py::isinstance<py::str>(v)) return Attribute(v.cast<std::string>());
  if (py::isinstance<py::sequence>(v)) {
    py::sequence s = v.cast<py::sequence>();
    if (s.size() == 0) return Attribute(std::vector<int64_t>{});
    if (py::isinstance<py::int_>(s[0])) return Attribute(s.cast<std::vector<int64_t>>());
    if (py::isinstance<py::float_>(s[0])) return Attribute(s.cast<std::vector<float>>());
    if (py::isinstance<py::str>(s[0])) return Attribute(s.cast<std::vector<std::string>>());
  }
  if (py::isinstance<Tensor>(v) || py::isinstance<py::array>(v)) return Attribute(to_tensor(py::reinterpret_borrow<py::object>(v)));
  fail("attribute '{}': unsupported value {}", name, py::str(v).cast<std::string>());
}

// ---- arithmetic with Python scalars

Tensor operand(const py::object& v, const Tensor& like) {
  if (py::isinstance<py::float_>(v) || py::isinstance<py::int_>(v)) {
    Tensor s = Tensor::scalar<double>(v.cast<double>()).cast(like.dtype());
    return like.device().type == DeviceType::CPU ? s : s.to(like.device());
  }
  return to_tensor(v);
}

Tensor binary(const char* op, const Tensor& a, const py::object& b, bool reflected = false) {
  Tensor other = operand(b, a);
  return ops::call(op, reflected ? std::vector<Tensor>{other, a} : std::vector<Tensor>{a, other}, {}, 1).at(0);
}

py::tuple shape_tuple(const Shape& s) {
  py::tuple t(s.size());
  for (size_t i = 0; i < s.size(); ++i) t[i] = s[i];
  return t;
}

// Feeds of Session.run: a dict name -> tensor-like, or a list in input order.
std::vector<std::pair<std::string, Tensor>> feeds_of(Session& session, const py::object& feeds) {
  std::vector<std::pair<std::string, Tensor>> out;
  if (py::isinstance<py::dict>(feeds)) {
    for (auto [k, v] : feeds.cast<py::dict>()) out.emplace_back(k.cast<std::string>(), to_tensor(py::reinterpret_borrow<py::object>(v)));
    return out;
  }
  py::sequence s = feeds.cast<py::sequence>();
  const auto& inputs = session.inputs();
  if (s.size() != inputs.size()) fail("run: {} inputs given, the model takes {}", s.size(), inputs.size());
  for (size_t i = 0; i < s.size(); ++i) out.emplace_back(inputs[i].name, to_tensor(s[i]));
  return out;
}

Precision parse_precision(const std::string& p) {
  if (p == "fp32") return Precision::FP32;
  if (p == "fp16") return Precision::FP16;
  if (p == "bf16") return Precision::BF16;
  if (p == "int8") return Precision::INT8;
  fail("precision '{}': expected fp32, fp16, bf16 or int8", p);
}

// ingot.quantize's and ingot.convert(precision="int8")'s keyword arguments (the CLI's options).
QuantizeSettings quantize_settings(const std::vector<std::string>& calib, const std::string& method, double percentile,
                                   bool per_channel, bool symmetric, const std::vector<std::string>& keep_float,
                                   double min_cosine, bool dynamic, bool equalize, bool bias_correction) {
  QuantizeSettings s;
  s.calibration = calib;
  if (method == "minmax") s.method = CalibrationMethod::MinMax;
  else if (method == "percentile") s.method = CalibrationMethod::Percentile;
  else if (method == "entropy") s.method = CalibrationMethod::Entropy;
  else fail("calib_method '{}': expected minmax, percentile or entropy", method);
  s.percentile = percentile;
  s.per_channel = per_channel;
  s.symmetric = symmetric;
  s.keep_float = keep_float;
  s.min_cosine = min_cosine;
  s.dynamic = dynamic;
  s.equalize = equalize;
  s.bias_correction = bias_correction;
  return s;
}

py::dict report_dict(const QuantizeReport& r) {
  py::dict d;
  d["samples"] = r.samples;
  d["quantized"] = r.quantized;
  d["kept_float"] = r.kept_float;
  d["notes"] = r.notes;
  py::list outputs;
  for (const OutputAccuracy& o : r.outputs) {
    py::dict od;
    od["name"] = o.name;
    od["max_abs"] = o.max_abs;
    od["mean_abs"] = o.mean_abs;
    od["cosine"] = o.cosine;
    outputs.append(od);
  }
  d["outputs"] = outputs;
  return d;
}

// `with ingot.no_grad():` (NoGradGuard for the block).
class NoGrad {
 public:
  void enter() { guard_.emplace(); }
  void exit(const py::args&) { guard_.reset(); }

 private:
  std::optional<autograd::NoGradGuard> guard_;
};

}  // namespace

namespace ingot::python {
Tensor tensor_from(const py::object& obj) { return to_tensor(obj); }
DType dtype_from(const py::object& dtype) { return parse_dtype(dtype); }
}  // namespace ingot::python

PYBIND11_MODULE(_ingot, m) {
  m.doc() = "Ingot: ONNX models, packages, eager tensors with autograd, on the CPU and NVIDIA GPUs";
  py::register_exception<Error>(m, "Error", PyExc_RuntimeError);

  py::class_<Tensor>(m, "Tensor", "An Ingot tensor (contiguous; on the CPU or a CUDA device).")
      .def_property_readonly("shape", [](const Tensor& t) { return shape_tuple(t.shape()); })
      .def_property_readonly("dtype", [](const Tensor& t) { return std::string(dtype_name(t.dtype())); })
      .def_property_readonly("device", [](const Tensor& t) { return t.device().str(); })
      .def_property_readonly("ndim", &Tensor::rank)
      .def_property_readonly("data_ptr", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.raw_data()); },
                             "The address of the first element (for zero-copy checks).")
      .def("numel", &Tensor::numel)
      .def("__len__", [](const Tensor& t) {
             if (t.rank() == 0) fail("len() of a 0-d tensor");
             return t.dim(0);
           })
      .def("numpy", &to_numpy,
           "A numpy array: the same memory for CPU tensors (bfloat16 widened to float32; device tensors copied).")
      .def("__array__", [](const Tensor& t, py::object dtype) {
             py::array a = to_numpy(t);
             return dtype.is_none() ? a : a.attr("astype")(dtype).cast<py::array>();
           }, py::arg("dtype") = py::none())
      .def("__dlpack__", [](const Tensor& t, py::object) { return to_dlpack(t); }, py::arg("stream") = py::none(),
           "A DLPack capsule over this tensor's memory (torch.from_dlpack, numpy.from_dlpack).")
      .def("__dlpack_device__", [](const Tensor& t) {
             return py::make_tuple(int(t.device().type == DeviceType::CPU ? kDLCPU : kDLCUDA), t.device().index);
           })
      .def("to", [](const Tensor& t, const std::string& device) { return t.to(Device::parse(device)); }, py::arg("device"))
      .def("cpu", [](const Tensor& t) { return t.to(Device::cpu()); })
      .def("cuda", [](const Tensor& t, int index) { return t.to(Device{DeviceType::CUDA, index}); }, py::arg("index") = 0)
      .def("astype", [](const Tensor& t, const py::object& dt) { return t.cast(parse_dtype(dt)); }, py::arg("dtype"))
      .def("reshape", [](const Tensor& t, const std::vector<int64_t>& s) { return ops::reshape(t, s); }, py::arg("shape"))
      .def("clone", &Tensor::clone)
      .def("detach", &Tensor::detach)
      .def("item", [](const Tensor& t) -> py::object {
             if (t.numel() != 1) fail("item(): the tensor has {} elements", t.numel());
             if (is_floating(t.dtype())) return py::float_(t.item_double());
             return py::int_(t.item_int());
           })
      .def_property("requires_grad", &Tensor::requires_grad, [](Tensor& t, bool on) { t.set_requires_grad(on); })
      .def_property("grad", [](const Tensor& t) -> py::object {
             Tensor g = t.grad();
             return g.defined() ? py::cast(g) : py::none();
           }, [](Tensor& t, py::object g) { t.set_grad(g.is_none() ? Tensor() : to_tensor(g)); })
      .def_property_readonly("is_leaf", &Tensor::is_leaf)
      .def("requires_grad_", [](Tensor& t, bool on) -> Tensor& { return t.set_requires_grad(on); }, py::arg("requires_grad") = true)
      .def("backward", [](const Tensor& t, py::object gradient, bool retain_graph, bool create_graph) {
             const Tensor g = gradient.is_none() ? Tensor() : to_tensor(gradient);
             py::gil_scoped_release release;
             t.backward(g, retain_graph, create_graph);
           }, py::arg("gradient") = py::none(), py::arg("retain_graph") = false, py::arg("create_graph") = false,
           "Accumulates the gradients of this tensor into the leaves' .grad (Tensor.backward's arguments).")
      .def("__add__", [](const Tensor& a, py::object b) { return binary("Add", a, b); })
      .def("__radd__", [](const Tensor& a, py::object b) { return binary("Add", a, b, true); })
      .def("__sub__", [](const Tensor& a, py::object b) { return binary("Sub", a, b); })
      .def("__rsub__", [](const Tensor& a, py::object b) { return binary("Sub", a, b, true); })
      .def("__mul__", [](const Tensor& a, py::object b) { return binary("Mul", a, b); })
      .def("__rmul__", [](const Tensor& a, py::object b) { return binary("Mul", a, b, true); })
      .def("__truediv__", [](const Tensor& a, py::object b) { return binary("Div", a, b); })
      .def("__rtruediv__", [](const Tensor& a, py::object b) { return binary("Div", a, b, true); })
      .def("__matmul__", [](const Tensor& a, py::object b) { return ops::matmul(a, to_tensor(b)); })
      .def("__neg__", [](const Tensor& a) { return ops::call("Neg", {a}, {}, 1).at(0); })
      .def("__pow__", [](const Tensor& a, py::object b) { return binary("Pow", a, b); })
      .def("__repr__", [](const Tensor& t) {
             return "ingot.Tensor(" + t.describe() + (t.device().type == DeviceType::CPU ? "" : ", " + t.device().str()) +
                    (t.requires_grad() ? ", requires_grad=True" : "") + ")";
           });

  m.def("tensor", [](const py::object& data, const py::object& dtype, const std::string& device, bool requires_grad) {
          Tensor t = to_tensor(data);
          const DType dt = parse_dtype(dtype);
          if (dt != DType::Undefined && dt != t.dtype()) t = t.cast(dt);
          t = t.to(Device::parse(device));
          if (requires_grad) t.set_requires_grad(true);
          return t;
        }, py::arg("data"), py::arg("dtype") = py::none(), py::arg("device") = "cpu", py::arg("requires_grad") = false,
        "A tensor from a numpy array, a DLPack producer or nested lists: the same memory where it can be "
        "(C-contiguous numpy, DLPack), unless dtype, device or requires_grad ask for a copy.");
  m.def("from_dlpack", &from_dlpack, py::arg("obj"), "The DLPack producer's memory as an Ingot tensor, without a copy.");
  m.def("zeros", [](const std::vector<int64_t>& shape, const py::object& dtype, const std::string& device) {
          const DType dt = parse_dtype(dtype);
          return Tensor::zeros(dt == DType::Undefined ? DType::Float32 : dt, shape, Device::parse(device));
        }, py::arg("shape"), py::arg("dtype") = py::none(), py::arg("device") = "cpu");
  m.def("op", [](const std::string& name, const py::args& inputs, const std::string& domain, int num_outputs,
                 const py::kwargs& attrs) -> py::object {
          std::vector<Tensor> in;
          for (const py::handle& h : inputs) in.push_back(h.is_none() ? Tensor() : to_tensor(py::reinterpret_borrow<py::object>(h)));
          Attributes a;
          for (auto [k, v] : attrs) a[k.cast<std::string>()] = to_attribute(k.cast<std::string>(), v);
          std::vector<Tensor> out;
          {
            py::gil_scoped_release release;
            out = ops::call(name, in, a, num_outputs, domain);
          }
          if (out.size() == 1) return py::cast(out[0]);
          return py::cast(out);
        }, py::arg("name"), py::arg("domain") = "", py::arg("num_outputs") = -1,
        "Runs any catalogue op eagerly: ingot.op('Conv', x, w, pads=[1, 1, 1, 1]). Returns a Tensor, or a list "
        "when the op has several outputs.");
  m.def("grad", [](const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                   const std::vector<Tensor>& grad_outputs, bool retain_graph, bool create_graph) {
          py::gil_scoped_release release;
          return autograd::grad(outputs, inputs, grad_outputs, retain_graph, create_graph);
        }, py::arg("outputs"), py::arg("inputs"), py::arg("grad_outputs") = std::vector<Tensor>{},
        py::arg("retain_graph") = false, py::arg("create_graph") = false,
        "The gradients of outputs with respect to inputs (torch.autograd.grad's arguments).");
  m.def("_copy_into", [](const py::object& src, const Tensor& dst) {
          const Tensor s = to_tensor(src);
          if (s.shape() != dst.shape()) fail("copy: shape {} into {}", shape_str(s.shape()), shape_str(dst.shape()));
          copy_tensor(s.cast(dst.dtype()).to(dst.device()), dst);
        });
  m.def("synchronize", [](const std::string& device) { synchronize(Device::parse(device)); }, py::arg("device") = "cuda");
  py::class_<NoGrad>(m, "no_grad", "with ingot.no_grad(): ops in the block are not recorded for autograd.")
      .def(py::init<>())
      .def("__enter__", &NoGrad::enter)
      .def("__exit__", &NoGrad::exit);

  m.def("memory_limit", &host_memory_limit, "Host memory Ingot's tensors may hold, process-wide (bytes).");
  m.def("memory_in_use", &host_memory_in_use, "Host memory Ingot's tensors hold now (bytes).");
  m.def("set_memory_limit", &set_host_memory_limit, py::arg("bytes"),
        "Sets the process-wide host memory limit (0: the default, 90% of physical memory).");
  py::class_<Session>(m, "Session", "A loaded ONNX model or .ingot package.")
      .def(py::init([](const std::string& path, const std::string& device, int threads, const std::string& precision,
                       bool optimize, bool outputs_on_device, bool cuda_graphs, double time_limit_s,
                       int64_t memory_limit_bytes) {
             SessionOptions o;
             o.device = Device::parse(device);
             o.threads = threads;
             o.precision = parse_precision(precision);
             o.optimize = optimize;
             o.outputs_on_device = outputs_on_device;
             o.cuda_graphs = cuda_graphs;
             o.time_limit_s = time_limit_s;
             o.memory_limit_bytes = memory_limit_bytes;
             py::gil_scoped_release release;
             return Session::load(path, o);
           }), py::arg("path"), py::arg("device") = "cpu", py::arg("threads") = 0, py::arg("precision") = "fp32",
           py::arg("optimize") = true, py::arg("outputs_on_device") = false, py::arg("cuda_graphs") = true,
           py::arg("time_limit_s") = 0.0, py::arg("memory_limit_bytes") = 0,
           "cuda_graphs=False runs every GPU run op by op (a profile then shows each kernel instead of one graph replay). "
           "time_limit_s: a run still going after it stops with ingot.Error (0: none). memory_limit_bytes: host "
           "memory Ingot's tensors may hold, process-wide (0: leave it; default 90% of physical memory).")
      .def_property_readonly("inputs", [](const Session& s) {
             py::list l;
             for (const TensorInfo& i : s.inputs()) l.append(py::make_tuple(i.name, std::string(dtype_name(i.dtype)), i.dims));
             return l;
           }, "(name, dtype, dims) of each input")
      .def_property_readonly("outputs", [](const Session& s) {
             py::list l;
             for (const TensorInfo& i : s.outputs()) l.append(py::make_tuple(i.name, std::string(dtype_name(i.dtype)), i.dims));
             return l;
           }, "(name, dtype, dims) of each output")
      .def_property_readonly("device", [](const Session& s) { return s.device().str(); })
      .def("run", [](Session& s, const py::object& feeds) {
             std::vector<std::pair<std::string, Tensor>> f = feeds_of(s, feeds);
             std::vector<Tensor> out;
             {
               py::gil_scoped_release release;
               out = s.run(f);
             }
             py::dict d;
             for (size_t i = 0; i < out.size(); ++i) d[py::str(s.outputs()[i].name)] = out[i];
             return d;
           }, py::arg("feeds"),
           "Runs the model on a dict name -> tensor-like (or a list in input order); returns a dict name -> Tensor.")
      .def("fallbacks", [](const Session& s) {
             py::list l;
             for (const Fallback& f : s.fallbacks()) l.append(py::make_tuple(f.node, f.op, f.reason));
             return l;
           }, "(node, op, reason) of each node placed on the CPU for want of an accelerator kernel")
      .def("last_run_stats", [](const Session& s) {
             const TransferStats t = s.last_run_stats();
             py::dict d;
             d["host_to_device_bytes"] = t.host_to_device_bytes;
             d["device_to_host_bytes"] = t.device_to_host_bytes;
             d["device_to_device_bytes"] = t.device_to_device_bytes;
             d["copies"] = t.copies;
             d["fallback_ops"] = t.fallback_ops;
             d["fallback_copy_bytes"] = t.fallback_copy_bytes;
             d["graph_replay"] = t.graph_replay;
             return d;
           });

  py::class_<ExtensionInfo>(m, "ExtensionInfo", "A loaded extension library (ingot.load_extension).")
      .def_readonly("name", &ExtensionInfo::name)
      .def_readonly("library", &ExtensionInfo::library, "the shared library loaded")
      .def_readonly("digest", &ExtensionInfo::digest, "XXH64 of the library's bytes")
      .def_readonly("ops", &ExtensionInfo::ops, "'domain::Name' of each op it defines")
      .def_readonly("compiled", &ExtensionInfo::compiled, "whether this call compiled it (False: cached)")
      .def_readonly("seconds", &ExtensionInfo::seconds, "this call's wall time");
  m.def("_load_extension", [](const std::string& name, const std::vector<std::string>& sources,
                              const std::vector<std::string>& extra_cflags, const std::vector<std::string>& extra_cuda_cflags,
                              const std::vector<std::string>& extra_ldflags, const std::vector<std::string>& extra_include_paths,
                              const std::string& build_directory, bool verbose, int jobs, const std::string& cuda_arch) {
          ExtensionOptions o;
          o.extra_cflags = extra_cflags;
          o.extra_cuda_cflags = extra_cuda_cflags;
          o.extra_ldflags = extra_ldflags;
          o.extra_include_paths = extra_include_paths;
          o.build_directory = build_directory;
          o.verbose = verbose;
          o.jobs = jobs;
          o.cuda_arch = cuda_arch;
          py::gil_scoped_release release;
          return load_extension(name, sources, o);
        });
  m.def("_load_extension_library", [](const std::string& path) {
          py::gil_scoped_release release;
          return load_extension_library(path);
        });
  m.def("convert", [](const std::string& model, const std::string& output, const std::string& device,
                      const std::string& precision, const py::object& input_shapes, bool optimize, const py::object& progress,
                      const std::vector<std::string>& calib, const std::string& calib_method, double percentile,
                      bool per_channel, bool symmetric, const std::vector<std::string>& keep_float, double min_cosine,
                      bool dynamic, const py::object& tune_shapes, bool equalize, bool bias_correction) {
          ConvertSettings c;
          c.device = Device::parse(device);
          c.precision = parse_precision(precision);
          c.optimize = optimize;
          if (c.precision != Precision::INT8 && (!calib.empty() || dynamic))
            fail("calib, dynamic: calibration is for precision='int8'");
          c.quantize =
              quantize_settings(calib, calib_method, percentile, per_channel, symmetric, keep_float, min_cosine, dynamic,
                                equalize, bias_correction);
          if (!input_shapes.is_none())
            for (auto [k, v] : input_shapes.cast<py::dict>())
              c.input_shapes.emplace_back(k.cast<std::string>(), v.cast<std::vector<int64_t>>());
          if (!tune_shapes.is_none()) {
            for (py::handle set : tune_shapes) {
              InputShapes shapes;
              for (auto [k, v] : set.cast<py::dict>())
                shapes.emplace_back(k.cast<std::string>(), v.cast<std::vector<int64_t>>());
              c.tuning_shapes.push_back(std::move(shapes));
            }
          }
          py::object report = progress;
          if (py::isinstance<py::bool_>(progress)) {
            report = progress.cast<bool>() ? py::module_::import("ingot._progress").attr("print_step") : py::none();
          }
          if (!report.is_none()) {
            c.progress = [report](const std::string& step, bool done, const std::string& note) {
              py::gil_scoped_acquire gil;
              report(step, done, note);
            };
          }
          ConvertResult r;
          {
            py::gil_scoped_release release;
            r = convert(model, output, c);
          }
          py::dict d;
          d["path"] = r.path;
          d["device"] = r.device;
          d["arch"] = r.arch;
          d["precision"] = r.precision;
          d["bytes"] = r.bytes;
          d["algorithms"] = r.algorithms;
          d["device_code"] = r.device_code;
          d["tuning_note"] = r.tuning_note;
          d["extensions"] = r.extensions;
          if (r.quantization) d["quantization"] = report_dict(*r.quantization);
          return d;
        }, py::arg("model"), py::arg("output"), py::arg("device") = "cpu", py::arg("precision") = "fp32",
        py::arg("input_shapes") = py::none(), py::arg("optimize") = true, py::arg("progress") = false,
        py::arg("calib") = std::vector<std::string>{}, py::arg("calib_method") = "minmax", py::arg("percentile") = 99.999,
        py::arg("per_channel") = true, py::arg("symmetric") = false, py::arg("keep_float") = std::vector<std::string>{},
        py::arg("min_cosine") = 0.0, py::arg("dynamic") = false, py::arg("tune_shapes") = py::none(),
        py::arg("equalize") = true, py::arg("bias_correction") = true,
        "Converts an ONNX model into an .ingot package (`ingot convert`): the compile pipeline once, and on a GPU "
        "the algorithm search and code generation, stored. input_shapes: {name: [dims]} fixes symbolic dims. "
        "tune_shapes: [{name: [dims]}, ...] shape sets a GPU package will run at with its dims left symbolic "
        "(algorithm choices measured and stored for each). "
        "progress: True prints each step; a callable gets (step, done, note). precision='int8' quantizes with the "
        "calibration inputs `calib` (.npy files or folders; docs/QUANTIZATION.md) and adds the 'quantization' "
        "report (accuracy per output). Returns what was written.");
  m.def("quantize", [](const std::string& model, const std::string& output, const std::vector<std::string>& calib,
                       const std::string& calib_method, double percentile, bool per_channel, bool symmetric,
                       const std::vector<std::string>& keep_float, const py::object& input_shapes, double min_cosine,
                       bool dynamic, bool equalize, bool bias_correction) {
          QuantizeSettings s =
              quantize_settings(calib, calib_method, percentile, per_channel, symmetric, keep_float, min_cosine, dynamic,
                                equalize, bias_correction);
          if (!input_shapes.is_none())
            for (auto [k, v] : input_shapes.cast<py::dict>())
              s.input_shapes.emplace_back(k.cast<std::string>(), v.cast<std::vector<int64_t>>());
          QuantizeReport r;
          {
            py::gil_scoped_release release;
            r = quantize(model, output, s);
          }
          return report_dict(r);
        }, py::arg("model"), py::arg("output"), py::arg("calib") = std::vector<std::string>{}, py::arg("calib_method") = "minmax",
        py::arg("percentile") = 99.999, py::arg("per_channel") = true, py::arg("symmetric") = false,
        py::arg("keep_float") = std::vector<std::string>{}, py::arg("input_shapes") = py::none(),
        py::arg("min_cosine") = 0.0, py::arg("dynamic") = false, py::arg("equalize") = true,
        py::arg("bias_correction") = true,
        "Int8 post-training quantization into a QDQ ONNX model (`ingot quantize`; docs/QUANTIZATION.md). Returns the "
        "report: what was quantized, notes, and per output the error against the float model on the calibration set.");
  m.def("loaded_extensions", &loaded_extensions, "Every extension loaded in this process.");

  py::module_ prof = m.def_submodule("profiler", "Timelines of runs and eager calls (docs/PROFILING.md).");
  py::class_<profiler::Trace>(prof, "Trace")
      .def("summary_table", &profiler::Trace::summary_table, py::arg("top") = 20)
      .def("chrome_json", &profiler::Trace::chrome_json)
      .def("write_chrome_json", &profiler::Trace::write_chrome_json, py::arg("path"))
      .def("write_html", &profiler::Trace::write_html, py::arg("path"), py::arg("title") = "Ingot profile");
  prof.def("start", &profiler::start);
  prof.def("stop", &profiler::stop);
  prof.def("enabled", &profiler::enabled);
  ingot::python::bind_training(m);
}
