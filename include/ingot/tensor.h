// Tensors: a dtype, a shape and a reference to device storage. Tensors are dense and row-major;
// a view (reshape, squeeze, a leading-axis slice) shares storage at a byte offset, so those ops
// copy nothing. Copy semantics are shared-reference (like torch.Tensor); clone() copies data.
#pragma once
#include <ingot/export.h>
#include <ingot/dtype.h>
#include <ingot/error.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

INGOT_API_BEGIN
namespace ingot {

using Shape = std::vector<int64_t>;

int64_t shape_numel(const Shape& shape);
int64_t shape_numel(const Shape& shape, size_t begin, size_t end);  // of dims [begin, end)
std::string shape_str(const Shape& shape);  // "[1,3,224,224]"
// Normalizes a possibly negative axis against rank; throws naming `what` when out of range.
int64_t normalize_axis(int64_t axis, int64_t rank, std::string_view what = "axis");

enum class DeviceType : uint8_t { CPU = 0, CUDA = 1 };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;
  bool operator==(const Device&) const = default;
  std::string str() const;  // "cpu", "cuda:0"
  static Device cpu() { return {}; }
  static Device parse(std::string_view text);  // "cpu", "cuda", "cuda:1"
};

// Waits until the work queued on `device` has finished (a no-op on the CPU): before timing, and
// before memory Ingot wrote on a GPU is handed to another library's stream.
void synchronize(Device device);

// Host memory in tensors Ingot allocated (wrapped memory not counted), process-wide, and the limit a
// new allocation may not pass (SessionOptions::memory_limit_bytes; 0 restores the default, 90% of
// physical memory): past it, creating a tensor fails with an error naming its size.
void set_host_memory_limit(int64_t bytes);
int64_t host_memory_limit();
int64_t host_memory_in_use();

class Storage {
 public:
  Storage(Device device, size_t nbytes, DType dtype);  // allocates
  // Wraps memory owned elsewhere (a mapped file, a user buffer); `release` runs on destruction.
  Storage(Device device, void* data, size_t nbytes, std::function<void()> release);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

 private:
  Device device_;
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  DType dtype_ = DType::Undefined;  // String storage constructs/destroys std::string objects
  std::function<void()> release_;
};

struct AutogradMeta;  // internal (autograd/tape.h)

class Tensor {
 public:
  Tensor() = default;
  static Tensor empty(DType dtype, Shape shape, Device device = Device::cpu());
  static Tensor zeros(DType dtype, Shape shape, Device device = Device::cpu());
  // Wraps external memory without copying.
  static Tensor wrap(DType dtype, Shape shape, void* data, Device device = Device::cpu(),
                     std::function<void()> release = {});
  // A tensor over part of an existing storage, starting `byte_offset` bytes in (a memory plan's
  // arena); throws when it would reach past the storage's end.
  static Tensor view(std::shared_ptr<Storage> storage, size_t byte_offset, DType dtype, Shape shape);

  template <class T>
  static Tensor from_vector(const std::vector<T>& values, Shape shape) {
    INGOT_CHECK(int64_t(values.size()) == shape_numel(shape), "from_vector: {} values for shape {}", values.size(),
                shape_str(shape));
    Tensor t = empty(dtype_of<T>(), std::move(shape));
    T* out = t.data<T>();
    for (size_t i = 0; i < values.size(); ++i) out[i] = values[i];
    return t;
  }
  template <class T>
  static Tensor scalar(T value) {
    return from_vector<T>({value}, {});
  }

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t rank() const { return int64_t(shape_.size()); }
  int64_t dim(int64_t axis) const;  // negative axes count from the end
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const { return size_t(numel()) * dtype_size(dtype_); }
  Device device() const { return storage_ ? storage_->device() : Device::cpu(); }
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  size_t byte_offset() const { return offset_; }

  void* raw_data() const { return static_cast<char*>(storage_->data()) + offset_; }
  template <class T>
  T* data() const {
    INGOT_CHECK(dtype_of<T>() == dtype_, "tensor holds {}, accessed as {}", dtype_name(dtype_),
                dtype_name(dtype_of<T>()));
    return static_cast<T*>(raw_data());
  }
  template <class T>
  std::span<T> span() const {
    return {data<T>(), size_t(numel())};
  }
  template <class T>
  std::vector<T> to_vector() const {
    Tensor host = to(Device::cpu());
    auto s = host.span<T>();
    return {s.begin(), s.end()};
  }
  // Reads element i of any integer/bool/float tensor as int64 or double (for shape-like inputs).
  int64_t item_int(int64_t index = 0) const;
  double item_double(int64_t index = 0) const;
  std::vector<int64_t> to_int64_vector() const;

  // Zero-copy views.
  Tensor reshape(Shape shape) const;
  Tensor slice_rows(int64_t begin, int64_t end) const;  // range of the leading axis

  Tensor clone() const;
  Tensor to(Device device) const;  // returns *this when already there
  Tensor cast(DType dtype) const;  // host-side conversion between any non-string dtypes

  std::string describe() const;  // "float32[1,3,224,224]"

  // Autograd (include/ingot/autograd.h), with libtorch's names. State belongs to this handle and the
  // copies made of it afterwards; the zero-copy views above and clone/to/cast start without it.
  bool requires_grad() const;
  Tensor& set_requires_grad(bool requires_grad = true);  // leaves only; float dtypes only
  Tensor grad() const;  // the gradient accumulated by backward() (undefined before)
  void set_grad(const Tensor& grad);  // set_grad(Tensor()) clears it
  bool is_leaf() const;  // made by no recorded op
  Tensor detach() const;  // the same data, outside the tape
  // The gradients of this tensor (one element, unless `gradient` weights it) with respect to every leaf
  // it depends on, added into their grad(). An undefined `gradient`: ones.
  void backward() const;
  void backward(const Tensor& gradient, bool retain_graph = false, bool create_graph = false) const;
  // Internal: the tape's record of this handle.
  const std::shared_ptr<AutogradMeta>& autograd_meta() const { return autograd_; }
  void set_autograd_meta(std::shared_ptr<AutogradMeta> meta) { autograd_ = std::move(meta); }

 private:
  std::shared_ptr<Storage> storage_;
  size_t offset_ = 0;
  Shape shape_;
  DType dtype_ = DType::Undefined;
  std::shared_ptr<AutogradMeta> autograd_;
};

// Copies `src` into `dst` (same dtype and element count), across devices if needed.
void copy_tensor(const Tensor& src, const Tensor& dst);

}  // namespace ingot
INGOT_API_END
