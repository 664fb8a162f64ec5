#include <ingot/tensor.h>

#include <unistd.h>

#include <array>
#include <atomic>
#include <climits>
#include <cmath>
#include <cstring>
#include <string>

#include "core/backend.h"
#include "core/dispatch.h"
#include "core/half_convert.h"
#include "core/strings.h"
#include "profiler/hooks.h"

namespace ingot {

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(n, d, &n)) [[unlikely]]
      fail("shape {} has more elements than 64 bits count", shape_str(shape));
  }
  return n;
}

int64_t shape_numel(const Shape& shape, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t k = begin; k < end; ++k) n *= shape[k];
  return n;
}

std::string shape_str(const Shape& shape) { return "[" + join(shape, ",") + "]"; }

int64_t normalize_axis(int64_t axis, int64_t rank, std::string_view what) {
  if (axis < -rank || axis >= rank) {  // a scalar has no axis
    fail("{} {} is out of range for rank {}", what, axis, rank);
  }
  return axis < 0 ? axis + rank : axis;
}

void synchronize(Device device) { backend_for(device).memory().synchronize(device.index); }

std::string Device::str() const { return type == DeviceType::CPU ? "cpu" : "cuda:" + std::to_string(index); }

Device Device::parse(std::string_view text) {
  if (text == "cpu") return cpu();
  if (text.substr(0, 4) == "cuda") {
    Device d{DeviceType::CUDA, 0};
    if (text.size() > 5 && text[4] == ':')
      d.index = std::stoi(std::string(text.substr(5)));
    else if (text.size() != 4)
      fail("unknown device '{}' (expected cpu, cuda or cuda:N)", text);
    return d;
  }
  fail("unknown device '{}' (expected cpu, cuda or cuda:N)", text);
}

static DeviceMemory& memory_for(Device device) { return backend_for(device).memory(); }

namespace {

// Host memory held by tensors Ingot allocated, and the limit on it (ingot/session.h's
// SessionOptions::memory_limit_bytes; 0: the default, 90% of physical memory).
std::atomic<int64_t> host_bytes_in_use{0};
std::atomic<int64_t> host_limit{0};

int64_t default_host_limit() {
  static const int64_t limit = [] {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page > 0 ? int64_t(double(pages) * double(page) * 0.9) : INT64_MAX;
  }();
  return limit;
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB", "PB", "EB"};
  int u = 0;
  while (b >= 1000 && u < 6) b /= 1000, ++u;
  return u ? fmt::format("{:.1f} {}", b, units[u]) : fmt::format("{:.0f} {}", b, units[u]);
}

// Counts `nbytes` against the limit, or fails naming what was asked for.
void reserve_host(size_t nbytes, DType dtype) {
  const int64_t limit = host_memory_limit();
  const int64_t before = host_bytes_in_use.fetch_add(int64_t(nbytes));
  if (int64_t(nbytes) > limit - before) {
    host_bytes_in_use.fetch_sub(int64_t(nbytes));
    fail("cannot allocate {} for a {} tensor: {} already in use, the memory limit is {} "
         "(SessionOptions::memory_limit_bytes, --memory-limit)",
         human_bytes(double(nbytes)), dtype_name(dtype), human_bytes(double(before)), human_bytes(double(limit)));
  }
}

}  // namespace

void set_host_memory_limit(int64_t bytes) { host_limit.store(bytes > 0 ? bytes : 0); }
int64_t host_memory_limit() {
  const int64_t v = host_limit.load(std::memory_order_relaxed);
  return v > 0 ? v : default_host_limit();
}
int64_t host_memory_in_use() { return host_bytes_in_use.load(std::memory_order_relaxed); }

Storage::Storage(Device device, size_t nbytes, DType dtype) : device_(device), nbytes_(nbytes), dtype_(dtype) {
  if (device.type == DeviceType::CPU) reserve_host(nbytes, dtype);
  if (dtype == DType::String) {
    if (device.type != DeviceType::CPU) fail("string tensors live on the CPU only");
    data_ = new std::string[std::max<size_t>(nbytes / sizeof(std::string), 1)];
    if (profiler::enabled()) [[unlikely]] profiler::detail::record_alloc(data_, nbytes, device.index);
    return;
  }
  try {
    data_ = memory_for(device).allocate(std::max<size_t>(nbytes, 1), device.index);
  } catch (...) {
    if (device.type == DeviceType::CPU) host_bytes_in_use.fetch_sub(int64_t(nbytes));
    throw;
  }
  if (profiler::enabled()) [[unlikely]] profiler::detail::record_alloc(data_, nbytes, device.index);
}

Storage::Storage(Device device, void* data, size_t nbytes, std::function<void()> release)
    : device_(device), data_(data), nbytes_(nbytes), release_(std::move(release)) {}

Storage::~Storage() {
  // The profiler ignores frees of storages it did not see allocated (or wrapped ones).
  if (profiler::enabled()) [[unlikely]] profiler::detail::record_free(data_);
  if (release_) {
    release_();
    return;
  }
  if (dtype_ == DType::String) {
    delete[] static_cast<std::string*>(data_);
  } else if (data_) {
    memory_for(device_).deallocate(data_, device_.index);
  }
  if (device_.type == DeviceType::CPU) host_bytes_in_use.fetch_sub(int64_t(nbytes_));
}

Tensor Tensor::empty(DType dtype, Shape shape, Device device) {
  int64_t numel = 1;
  for (int64_t d : shape) {
    if (d < 0) fail("cannot create a tensor of shape {}: negative dimension", shape_str(shape));
    if (d && numel > INT64_MAX / d) fail("cannot create a tensor of shape {}: more elements than 64 bits count", shape_str(shape));
    numel *= d;
  }
  if (dtype == DType::Undefined) fail("cannot create a tensor of undefined dtype");
  if (dtype_size(dtype) == 0) fail("cannot create a tensor of element type {}: not one Ingot has", int(dtype));
  if (numel > INT64_MAX / int64_t(dtype_size(dtype)))
    fail("cannot create a {} tensor of shape {}: more bytes than 64 bits count", dtype_name(dtype), shape_str(shape));
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.storage_ = std::make_shared<Storage>(device, t.nbytes(), dtype);
  return t;
}

Tensor Tensor::zeros(DType dtype, Shape shape, Device device) {
  Tensor t = empty(dtype, std::move(shape), device);
  if (dtype != DType::String) {
    if (device.type == DeviceType::CPU) {
      std::memset(t.raw_data(), 0, t.nbytes());
    } else {
      memory_for(device).fill_zero(t.raw_data(), t.nbytes(), device.index);
    }
  }
  return t;
}

Tensor Tensor::wrap(DType dtype, Shape shape, void* data, Device device, std::function<void()> release) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.storage_ = std::make_shared<Storage>(
      device, data, t.nbytes(), release ? std::move(release) : [] {});
  return t;
}

int64_t Tensor::dim(int64_t axis) const {
  if (shape_.empty()) fail("dimension {} of {}: it is a scalar", axis, describe());
  return shape_[size_t(normalize_axis(axis, rank(), "dimension"))];
}

Tensor Tensor::reshape(Shape shape) const {
  if (shape_numel(shape) != numel()) {
    fail("cannot reshape {} to {}: element counts differ ({} vs {})", describe(), shape_str(shape), numel(),
         shape_numel(shape));
  }
  Tensor t = *this;
  t.shape_ = std::move(shape);
  t.autograd_.reset();  // a view outside the tape (ops::call("Reshape") records one)
  return t;
}

Tensor Tensor::view(std::shared_ptr<Storage> storage, size_t byte_offset, DType dtype, Shape shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.offset_ = byte_offset;
  if (!storage || byte_offset + t.nbytes() > storage->nbytes()) {
    fail("a view of {} bytes at offset {} does not fit its storage ({} bytes)", t.nbytes(), byte_offset,
         storage ? storage->nbytes() : 0);
  }
  t.storage_ = std::move(storage);
  return t;
}

Tensor Tensor::slice_rows(int64_t begin, int64_t end) const {
  if (rank() == 0 || begin < 0 || end < begin || end > shape_[0]) {
    fail("slice_rows [{}, {}) is out of range for {}", begin, end, describe());
  }
  Tensor t = *this;
  t.autograd_.reset();
  int64_t row = numel() / std::max<int64_t>(shape_[0], 1);
  t.offset_ += size_t(begin * row) * dtype_size(dtype_);
  t.shape_[0] = end - begin;
  return t;
}

void copy_tensor(const Tensor& src, const Tensor& dst) {
  if (src.dtype() != dst.dtype() || src.numel() != dst.numel()) {
    fail("copy from {} to {}: dtype or size differs", src.describe(), dst.describe());
  }
  if (src.dtype() == DType::String) {
    const std::string* s = src.data<std::string>();
    std::string* d = dst.data<std::string>();
    for (int64_t i = 0; i < src.numel(); ++i) d[i] = s[i];
    return;
  }
  if (src.device().type == DeviceType::CPU && dst.device().type == DeviceType::CPU) {
    if (src.nbytes()) std::memcpy(dst.raw_data(), src.raw_data(), src.nbytes());
    return;
  }
  Device remote = src.device().type != DeviceType::CPU ? src.device() : dst.device();
  memory_for(remote).copy(dst.raw_data(), dst.device(), src.raw_data(), src.device(), src.nbytes());
}

Tensor Tensor::clone() const {
  Tensor t = empty(dtype_, shape_, device());
  copy_tensor(*this, t);
  return t;
}

Tensor Tensor::to(Device device) const {
  if (device == this->device()) return *this;
  Tensor t = empty(dtype_, shape_, device);
  copy_tensor(*this, t);
  return t;
}

namespace {
template <class To, class From>
To convert(const From& v) {
  if constexpr (std::is_same_v<To, bool>) {
    return float(v) != 0.0f || (std::is_integral_v<From> && v != From(0));
  } else if constexpr (std::is_same_v<From, Half> || std::is_same_v<From, BFloat16>) {
    return To(float(v));
  } else if constexpr ((std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>)) {
    return To(float(v));
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    return std::isfinite(v) ? To(v) : To(0);
  } else {
    return To(v);
  }
}
}  // namespace

Tensor Tensor::cast(DType dtype) const {
  if (dtype == dtype_) return *this;
  if (dtype == DType::String || dtype_ == DType::String)
    fail("cast between string and {} is not supported here", dtype_name(dtype == DType::String ? dtype_ : dtype));
  Tensor src = to(Device::cpu());
  Tensor out = empty(dtype, shape_);
  // float32 <-> float16/bfloat16: the vectorized bulk conversions (same rounding as the loop below).
  if (dtype_ == DType::Float32 && dtype == DType::Float16) {
    from_float(src.data<float>(), out.data<Half>(), numel());
    return out;
  }
  if (dtype_ == DType::Float32 && dtype == DType::BFloat16) {
    from_float(src.data<float>(), out.data<BFloat16>(), numel());
    return out;
  }
  if (dtype_ == DType::Float16 && dtype == DType::Float32) {
    to_float(src.data<Half>(), out.data<float>(), numel());
    return out;
  }
  if (dtype_ == DType::BFloat16 && dtype == DType::Float32) {
    to_float(src.data<BFloat16>(), out.data<float>(), numel());
    return out;
  }
  dispatch_numeric_bool(dtype_, [&]<class From>() {
    dispatch_numeric_bool(dtype, [&]<class To>() {
      const From* s = src.data<From>();
      To* d = out.data<To>();
      for (int64_t i = 0, n = numel(); i < n; ++i) d[i] = convert<To>(s[i]);
    });
  });
  return out;
}

int64_t Tensor::item_int(int64_t index) const {
  if (index < 0 || index >= numel()) fail("element {} is out of range for {}", index, describe());
  Tensor host = to(Device::cpu());
  int64_t v = 0;
  dispatch_numeric_bool(dtype_, [&]<class T>() { v = int64_t(convert<double>(host.data<T>()[index])); });
  return v;
}

double Tensor::item_double(int64_t index) const {
  if (index < 0 || index >= numel()) fail("element {} is out of range for {}", index, describe());
  Tensor host = to(Device::cpu());
  double v = 0;
  dispatch_numeric_bool(dtype_, [&]<class T>() { v = convert<double>(host.data<T>()[index]); });
  return v;
}

std::vector<int64_t> Tensor::to_int64_vector() const {
  if (!is_integral(dtype_) && dtype_ != DType::Bool) fail("expected an integer tensor, got {}", describe());
  std::vector<int64_t> v(static_cast<size_t>(numel()));
  Tensor host = cast(DType::Int64).to(Device::cpu());
  const int64_t* d = host.data<int64_t>();
  std::copy(d, d + v.size(), v.begin());
  return v;
}

std::string Tensor::describe() const {
  if (!defined()) return "undefined tensor";
  return std::string(dtype_name(dtype_)) + shape_str(shape_);
}

}  // namespace ingot
