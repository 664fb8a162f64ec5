// Saving and loading .ingot packages (layout: docs/PACKAGE_FORMAT.md).
#include "package/package.h"

#include "core/tuning.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <cstring>
#include <type_traits>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>

#include "core/backend.h"
#include "core/strings.h"
#include "extension/registry.h"
#include "ops/op_def.h"
#include "package/ingot_package_generated.h"

#ifndef INGOT_VERSION
#define INGOT_VERSION "0.1.0"
#endif

namespace ingot {

namespace fs = std::filesystem;

// The fixed header, little-endian, 64 bytes. Everything after it is covered by the checksum.
struct PackageHeader {
  char magic[8];
  uint32_t format_version;
  uint32_t header_size;
  uint64_t flatbuffer_offset;
  uint64_t flatbuffer_size;
  uint64_t data_offset;  // a multiple of 64
  uint64_t data_size;
  uint64_t checksum;     // package_hash of bytes [header_size, file_size)
  uint64_t file_size;
};
static_assert(sizeof(PackageHeader) == kPackageHeaderSize);

// ---- hash ----------------------------------------------------------------------------------------

uint64_t package_hash(const void* data, size_t nbytes, uint64_t seed) { return XXH64(data, nbytes, seed); }

bool fix_package_checksum(std::vector<uint8_t>& bytes) {
  if (bytes.size() < kPackageHeaderSize) return false;
  PackageHeader h;
  std::memcpy(&h, bytes.data(), sizeof h);
  h.checksum = package_hash(bytes.data() + kPackageHeaderSize, bytes.size() - kPackageHeaderSize);
  std::memcpy(bytes.data(), &h, sizeof h);
  return true;
}

// ---- small helpers ------------------------------------------------------------------------------

std::string_view precision_name(Precision precision) {
  switch (precision) {
    case Precision::FP16: return "fp16";
    case Precision::BF16: return "bf16";
    case Precision::INT8: return "int8";
    default: return "fp32";
  }
}

std::string current_arch(Device device) {
  if (device.type != DeviceType::CPU) {
    Backend* backend = find_backend(device.type);
    return backend ? backend->arch(device.index) : "";
  }
#if defined(__x86_64__)
#if defined(__AVX512F__)
  return "x86_64-avx512";
#elif defined(__AVX2__)
  return "x86_64-avx2";
#else
  return "x86_64";
#endif
#elif defined(__aarch64__)
  return "aarch64";
#else
  return "unknown";
#endif
}

static std::string device_kind(Device device) { return device.type == DeviceType::CUDA ? "cuda" : "cpu"; }

bool is_package_file(const std::string& path) {
  if (path.ends_with(".ingot")) return true;
  std::ifstream in(path, std::ios::binary);
  char magic[8] = {};
  return in.read(magic, 8) && std::memcmp(magic, kPackageMagic, 8) == 0;
}

// ---- save ---------------------------------------------------------------------------------------

namespace {

namespace pkg = ingot::pkg;
using flatbuffers::FlatBufferBuilder;
using flatbuffers::Offset;

size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

class Writer {
 public:
  FlatBufferBuilder fbb{1 << 16};
  std::vector<Offset<pkg::Weight>> weights;
  std::vector<std::pair<Tensor, size_t>> data;  // host tensor and its offset in the data section
  size_t data_size = 0;
  std::map<std::tuple<const void*, size_t>, size_t> placed;  // shared storage is written once

  uint32_t add_tensor(const std::string& name, const Tensor& tensor) {
    Tensor t = tensor.to(Device::cpu());
    auto shape = fbb.CreateVector(t.shape());
    uint64_t offset = 0, nbytes = 0;
    Offset<flatbuffers::Vector<Offset<flatbuffers::String>>> strings;
    bool splat = false;
    if (t.dtype() == DType::String) {
      const auto* s = static_cast<const std::string*>(t.raw_data());
      std::vector<Offset<flatbuffers::String>> items;
      for (int64_t i = 0; i < t.numel(); ++i) items.push_back(fbb.CreateString(s[i]));
      strings = fbb.CreateVector(items);
    } else if (t.nbytes() > 0) {
      nbytes = t.nbytes();
      // Every element equal (and worth it): one element stored.
      const size_t element = dtype_size(t.dtype());
      if (nbytes >= 256) {
        const auto* b = static_cast<const uint8_t*>(t.raw_data());
        splat = true;
        for (size_t i = element; i < nbytes && splat; i += element) splat = std::memcmp(b, b + i, element) == 0;
        if (splat) {
          nbytes = element;
          t = Tensor::wrap(t.dtype(), {1}, const_cast<void*>(t.raw_data()), Device::cpu(), [keep = t] {});
        }
      }
      auto key = std::make_tuple(static_cast<const void*>(t.raw_data()), size_t(nbytes));
      if (auto it = placed.find(key); it != placed.end()) {
        offset = it->second;
      } else {
        offset = data_size;
        data.emplace_back(t, offset);
        placed.emplace(key, offset);
        data_size = align_up(data_size + nbytes, kPackageAlignment);
      }
    }
    weights.push_back(pkg::CreateWeight(fbb, fbb.CreateSharedString(name), uint8_t(t.dtype()), shape, offset, nbytes,
                                        strings, splat));
    return uint32_t(weights.size() - 1);
  }

  Offset<pkg::ValueType> value_type(const ValueType& type) {
    std::vector<Offset<pkg::Dim>> dims;
    if (type.shape) {
      for (const Dim& d : *type.shape) dims.push_back(pkg::CreateDim(fbb, d.value, fbb.CreateSharedString(d.symbol)));
    }
    return pkg::CreateValueType(fbb, uint8_t(type.kind), uint8_t(type.dtype), type.shape.has_value(),
                                fbb.CreateVector(dims));
  }

  Offset<pkg::ValueInfo> value_info(const ValueInfo& vi) {
    auto type = value_type(vi.type);
    return pkg::CreateValueInfo(fbb, fbb.CreateSharedString(vi.name), type);
  }

  Offset<flatbuffers::Vector<Offset<pkg::ValueInfo>>> value_infos(const std::vector<ValueInfo>& list) {
    std::vector<Offset<pkg::ValueInfo>> out;
    for (const auto& vi : list) out.push_back(value_info(vi));
    return fbb.CreateVector(out);
  }

  // Names repeat (a value is one node's output and others' inputs; attribute names, dim symbols): each
  // distinct string is stored once.
  Offset<flatbuffers::Vector<Offset<flatbuffers::String>>> strings(const std::vector<std::string>& list) {
    std::vector<Offset<flatbuffers::String>> out;
    for (const auto& s : list) out.push_back(fbb.CreateSharedString(s));
    return fbb.CreateVector(out);
  }

  Offset<pkg::Attribute> attribute(const std::string& name, const Attribute& a) {
    int32_t t = -1;
    Offset<pkg::Graph> g;
    std::vector<uint32_t> tensors;
    std::vector<Offset<pkg::Graph>> graphs;
    switch (a.kind) {
      case AttrKind::Tensor: t = int32_t(add_tensor(name, a.t)); break;
      case AttrKind::Graph: g = graph(*a.g); break;
      case AttrKind::Tensors:
        for (const Tensor& x : a.tensors) tensors.push_back(add_tensor(name, x));
        break;
      case AttrKind::Graphs:
        for (const auto& x : a.graphs) graphs.push_back(graph(*x));
        break;
      default: break;
    }
    auto name_off = fbb.CreateSharedString(name);
    auto s = fbb.CreateString(a.s);
    auto ints = fbb.CreateVector(a.ints);
    auto floats = fbb.CreateVector(a.floats);
    auto strs = strings(a.strings);
    auto tensors_off = fbb.CreateVector(tensors);
    auto graphs_off = fbb.CreateVector(graphs);
    return pkg::CreateAttribute(fbb, name_off, uint8_t(a.kind), a.i, a.f, s, t, g, ints, floats, strs, tensors_off,
                                graphs_off);
  }

  Offset<pkg::Graph> graph(const Graph& graph) {
    std::vector<Offset<pkg::Node>> nodes;
    for (const Node& n : graph.nodes) {
      std::vector<Offset<pkg::Attribute>> attrs;
      for (const auto& [name, a] : n.attrs) attrs.push_back(attribute(name, a));
      auto name = fbb.CreateSharedString(n.name);
      auto op = fbb.CreateSharedString(n.op_type);
      auto domain = fbb.CreateSharedString(n.domain);
      auto inputs = strings(n.inputs);
      auto outputs = strings(n.outputs);
      nodes.push_back(pkg::CreateNode(fbb, name, op, domain, inputs, outputs, fbb.CreateVector(attrs)));
    }
    std::vector<uint32_t> initializers;
    for (const auto& [name, t] : graph.initializers) initializers.push_back(add_tensor(name, t));
    // The types of values the graph (or a subgraph of it, which may read this graph's values) still
    // names: passes that fuse nodes leave their vanished values' entries behind (a QDQ model's
    // int8 package: 902 entries for 119 nodes, 0.2 of its MB).
    std::set<std::string> named;
    graph.for_each_graph([&](const Graph& g, int) {
      for (const Node& n : g.nodes) {
        named.insert(n.inputs.begin(), n.inputs.end());
        named.insert(n.outputs.begin(), n.outputs.end());
      }
    });
    std::vector<ValueInfo> value_info;
    for (const auto& [name, vi] : graph.value_info)
      if (named.count(name)) value_info.push_back(vi);
    auto name = fbb.CreateString(graph.name);
    auto nodes_off = fbb.CreateVector(nodes);
    auto inputs = value_infos(graph.inputs);
    auto outputs = value_infos(graph.outputs);
    auto vi = value_infos(value_info);
    return pkg::CreateGraph(fbb, name, nodes_off, inputs, outputs, vi, fbb.CreateVector(initializers));
  }

  Offset<flatbuffers::Vector<Offset<pkg::Blob>>> blobs(const std::vector<PackageBlob>& list) {
    std::vector<Offset<pkg::Blob>> out;
    for (const auto& b : list) out.push_back(pkg::CreateBlob(fbb, fbb.CreateString(b.key), fbb.CreateVector(b.data)));
    return fbb.CreateVector(out);
  }
};

std::string iso_time(int64_t unix_seconds) {
  std::time_t t = std::time_t(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

}  // namespace

namespace {

// The extension libraries whose ops the graph (and its subgraphs) use, each once, in first-use order.
std::vector<const ExtensionLibrary*> extensions_used(const Graph& graph) {
  std::vector<const ExtensionLibrary*> out;
  std::function<void(const Graph&)> walk = [&](const Graph& g) {
    for (const Node& n : g.nodes) {
      const OpDef* def = OpCatalogue::instance().find(n.domain, n.op_type);
      if (def && def->extension && std::find(out.begin(), out.end(), def->extension->library) == out.end())
        out.push_back(def->extension->library);
      for (const auto& [name, a] : n.attrs) {
        if (a.g) walk(*a.g);
        for (const auto& sub : a.graphs) walk(*sub);
      }
    }
  };
  walk(graph);
  return out;
}

}  // namespace

void save_package(const Model& model, const PackageMetadata& metadata, const std::string& path) {
  std::string file = fs::path(path).filename().string();
  try {
    Writer w;
    auto graph = w.graph(*model.graph);
    std::vector<Offset<pkg::Opset>> opsets;
    for (const auto& [domain, version] : model.opsets)
      opsets.push_back(pkg::CreateOpset(w.fbb, w.fbb.CreateString(domain), version));
    auto model_off = pkg::CreateModel(w.fbb, w.fbb.CreateString(model.name), model.ir_version,
                                      w.fbb.CreateString(model.producer), w.fbb.CreateVector(opsets), graph);

    PackageMetadata m = metadata;
    if (m.producer.empty()) m.producer = std::string("ingot ") + INGOT_VERSION;
    if (m.arch.empty()) m.arch = current_arch(m.device == "cuda" ? Device{DeviceType::CUDA, 0} : Device::cpu());
    if (m.inputs.empty()) m.inputs = model.graph->inputs;
    if (m.outputs.empty()) m.outputs = model.graph->outputs;
    if (m.source_model.empty()) m.source_model = model.name;
    if (m.created_unix == 0)
      m.created_unix = std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
    auto meta = pkg::CreateMetadata(w.fbb, m.format_version, w.fbb.CreateString(m.producer),
                                    w.fbb.CreateString(m.device), w.fbb.CreateString(m.arch),
                                    w.fbb.CreateString(m.precision), w.value_infos(m.inputs), w.value_infos(m.outputs),
                                    w.fbb.CreateString(m.source_model), m.created_unix,
                                    w.fbb.CreateString(iso_time(m.created_unix)));
    auto weights = w.fbb.CreateVector(w.weights);
    auto device_code = w.blobs(m.device_code);
    auto algorithms = w.blobs(m.algorithms);
    std::vector<Offset<pkg::Extension>> extensions;
    for (const ExtensionLibrary* lib : extensions_used(*model.graph)) {
      std::vector<Offset<flatbuffers::String>> ops;
      for (const std::string& op : lib->ops) ops.push_back(w.fbb.CreateString(op));
      extensions.push_back(pkg::CreateExtension(w.fbb, w.fbb.CreateString(lib->name), w.fbb.CreateString(lib->digest),
                                                w.fbb.CreateVector(ops), w.fbb.CreateVector(lib->bytes)));
    }
    w.fbb.Finish(pkg::CreatePackage(w.fbb, meta, model_off, weights, device_code, algorithms,
                                    w.fbb.CreateVector(extensions)));

    PackageHeader h{};
    std::memcpy(h.magic, kPackageMagic, 8);
    h.format_version = m.format_version;
    h.header_size = kPackageHeaderSize;
    h.flatbuffer_offset = kPackageHeaderSize;
    h.flatbuffer_size = w.fbb.GetSize();
    h.data_offset = align_up(h.flatbuffer_offset + h.flatbuffer_size, kPackageAlignment);
    h.data_size = w.data_size;
    h.file_size = h.data_offset + h.data_size;
    std::vector<uint8_t> bytes(h.file_size, 0);
    std::memcpy(bytes.data() + h.flatbuffer_offset, w.fbb.GetBufferPointer(), h.flatbuffer_size);
    for (const auto& [t, offset] : w.data) std::memcpy(bytes.data() + h.data_offset + offset, t.raw_data(), t.nbytes());
    h.checksum = package_hash(bytes.data() + kPackageHeaderSize, bytes.size() - kPackageHeaderSize);
    std::memcpy(bytes.data(), &h, sizeof h);

    // Write beside the target and rename, so a failed write never leaves a half package behind.
    std::string tmp = path + ".tmp";
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      if (!out) fail("cannot open '{}' for writing", tmp);
      out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
      out.close();
      if (!out) {
        std::error_code ec;
        fs::remove(tmp, ec);
        fail("writing '{}' failed (disk full?)", tmp);
      }
    }
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec) fail("cannot rename '{}' to '{}': {}", tmp, path, ec.message());
  } catch (Error& e) {
    e.add_context("package '" + file + "'");
    throw;
  }
}

// ---- load ---------------------------------------------------------------------------------------

namespace {

// A read-only view of the whole file; weights keep it alive through shared_ptr.
struct Mapping {
  void* base = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (base) munmap(base, size);
  }
  const uint8_t* bytes() const { return static_cast<const uint8_t*>(base); }
};

struct Opened {
  std::shared_ptr<Mapping> map;
  PackageHeader header{};
  const pkg::Package* root = nullptr;
};

Opened open_package(const std::string& path, const std::string& file) {
  auto fail_pkg = [&](const std::string& why) -> void { throw Error("package '" + file + "' " + why); };
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (!fs::exists(path)) fail("package '{}' does not exist", path);
    fail("cannot open package '{}': {}", path, std::strerror(errno));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    ::close(fd);
    fail("cannot read package '{}': {}", path, std::strerror(errno));
  }
  Opened o;
  o.map = std::make_shared<Mapping>();
  size_t size = size_t(st.st_size);
  if (size < kPackageHeaderSize) {
    ::close(fd);
    fail_pkg(fmt::format("is truncated: {} bytes, shorter than the {}-byte header", size, kPackageHeaderSize));
  }
  // Private and writable: nothing writes into weights (kernels never write their inputs), but if
  // anything did, it would get its own copy of the page instead of a crash. No MAP_POPULATE: on a
  // private writable mapping it would copy every page; reading maps the page-cache pages as they are.
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) fail("cannot map package '{}': {}", path, std::strerror(errno));
  madvise(base, size, MADV_WILLNEED);
  o.map->base = base;
  o.map->size = size;
  std::memcpy(&o.header, base, sizeof o.header);
  const PackageHeader& h = o.header;
  if (std::memcmp(h.magic, kPackageMagic, 8) != 0) fail_pkg("is not an Ingot package (bad magic)");
  if (h.format_version != kPackageFormatVersion)
    fail_pkg(fmt::format("has package format version {}, this Ingot reads version {}: convert the model again",
                         h.format_version, kPackageFormatVersion));
  if (h.header_size != kPackageHeaderSize) fail_pkg(fmt::format("has a bad header (header size {})", h.header_size));
  if (h.file_size != size)
    fail_pkg(h.file_size > size ? fmt::format("is truncated: {} bytes, the header says {}", size, h.file_size)
                                : fmt::format("is corrupted: {} bytes, the header says {}", size, h.file_size));
  if (h.flatbuffer_offset != kPackageHeaderSize || h.flatbuffer_size > size ||
      h.flatbuffer_offset + h.flatbuffer_size > h.data_offset || h.data_offset % kPackageAlignment != 0 ||
      h.data_offset > size || h.data_size != size - h.data_offset)
    fail_pkg("has a bad header (section offsets out of range)");
  if (package_hash(o.map->bytes() + kPackageHeaderSize, size - kPackageHeaderSize) != h.checksum)
    fail_pkg("is corrupted: checksum mismatch");
  flatbuffers::Verifier verifier(o.map->bytes() + h.flatbuffer_offset, h.flatbuffer_size,
                                 /*max_depth=*/256, /*max_tables=*/100000000);
  if (!pkg::VerifyPackageBuffer(verifier)) fail_pkg("is corrupted: its structure does not verify");
  o.root = pkg::GetPackage(o.map->bytes() + h.flatbuffer_offset);
  if (!o.root->metadata() || !o.root->model() || !o.root->model()->graph() || !o.root->weights())
    fail_pkg("is corrupted: metadata, model or weights missing");
  if (o.root->metadata()->format_version() != h.format_version)
    fail_pkg("is corrupted: header and metadata disagree on the format version");
  return o;
}

std::string str(const flatbuffers::String* s) { return s ? s->str() : std::string(); }

// Scalar vectors copied bytewise: FlatBuffers 2.0's verifier checks a vector's length prefix for
// alignment but not its 8-byte elements, so a damaged package could hold a misaligned int64 vector.
template <class T>
std::vector<T> vec(const flatbuffers::Vector<T>* v) {
  static_assert(std::is_scalar_v<T>);
  std::vector<T> out(v ? v->size() : 0);
  if (!out.empty()) std::memcpy(out.data(), v->Data(), out.size() * sizeof(T));
  return out;
}

std::vector<std::string> strs(const flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>* v) {
  std::vector<std::string> out;
  if (v)
    for (const auto* s : *v) out.push_back(str(s));
  return out;
}

ValueInfo read_value_info(const pkg::ValueInfo* vi) {
  ValueInfo out;
  out.name = str(vi->name());
  if (const auto* t = vi->type()) {
    if (t->kind() > uint8_t(ValueKind::Optional)) fail("value '{}': bad value kind {}", out.name, t->kind());
    out.type.kind = ValueKind(t->kind());
    out.type.dtype = DType(t->dtype());
    if (t->has_shape()) {
      out.type.shape.emplace();
      if (t->dims())
        for (const auto* d : *t->dims()) out.type.shape->push_back(Dim{d->value(), str(d->symbol())});
    }
  }
  return out;
}

std::vector<ValueInfo> read_value_infos(const flatbuffers::Vector<flatbuffers::Offset<pkg::ValueInfo>>* v) {
  std::vector<ValueInfo> out;
  if (v)
    for (const auto* vi : *v) out.push_back(read_value_info(vi));
  return out;
}

class Reader {
 public:
  Reader(const Opened& o) : map_(o.map), root_(o.root) {
    data_ = o.map->bytes() + o.header.data_offset;
    data_size_ = o.header.data_size;
    tensors_.resize(root_->weights()->size());
  }

  const Tensor& tensor(uint32_t index) {
    if (index >= tensors_.size()) fail("weight index {} out of range ({} weights)", index, tensors_.size());
    Tensor& t = tensors_[index];
    if (t.defined()) return t;
    const pkg::Weight* w = root_->weights()->Get(index);
    DType dtype = DType(w->dtype());
    std::string name = str(w->name());
    if (dtype_name(dtype).empty() || dtype == DType::Undefined || dtype_size(dtype) == 0)
      fail("weight '{}': unknown dtype {}", name, w->dtype());
    Shape shape = vec(w->shape());
    for (int64_t d : shape)
      if (d < 0) fail("weight '{}': negative dimension in {}", name, shape_str(shape));
    if (dtype == DType::String) {
      t = Tensor::empty(dtype, shape);
      auto items = strs(w->strings());
      if (int64_t(items.size()) != t.numel())
        fail("weight '{}': {} strings for shape {}", name, items.size(), shape_str(shape));
      auto* out = static_cast<std::string*>(t.raw_data());
      for (size_t i = 0; i < items.size(); ++i) out[i] = std::move(items[i]);
      return t;
    }
    uint64_t expected = uint64_t(shape_numel(shape)) * dtype_size(dtype);
    if (w->splat()) {
      const size_t element = dtype_size(dtype);
      if (w->nbytes() != element || w->offset() % kPackageAlignment != 0 || w->offset() > data_size_ ||
          element > data_size_ - w->offset())
        fail("weight '{}': splat of {} bytes out of range (offset {})", name, w->nbytes(), w->offset());
      t = Tensor::empty(dtype, shape);
      auto* out = static_cast<uint8_t*>(t.raw_data());
      const uint8_t* value = data_ + w->offset();
      for (uint64_t i = 0; i < expected; i += element) std::memcpy(out + i, value, element);
      return t;
    }
    if (w->nbytes() != expected)
      fail("weight '{}': {} bytes for {}{}", name, w->nbytes(), dtype_name(dtype), shape_str(shape));
    if (w->offset() % kPackageAlignment != 0 || w->offset() > data_size_ || w->nbytes() > data_size_ - w->offset())
      fail("weight '{}': data out of range (offset {}, {} bytes)", name, w->offset(), w->nbytes());
    if (expected == 0) {
      t = Tensor::empty(dtype, shape);
      return t;
    }
    // The tensor wraps the mapped bytes: no copy. Its release keeps the mapping alive.
    void* ptr = const_cast<uint8_t*>(data_ + w->offset());
    t = Tensor::wrap(dtype, std::move(shape), ptr, Device::cpu(), [map = map_] {});
    return t;
  }

  std::shared_ptr<Graph> graph(const pkg::Graph* g, int depth = 0) {
    if (depth > 64) fail("subgraphs nested deeper than 64");
    auto out = std::make_shared<Graph>();
    out->name = str(g->name());
    if (g->nodes()) {
      out->nodes.reserve(g->nodes()->size());
      for (const auto* n : *g->nodes()) {
        Node node;
        node.name = str(n->name());
        node.op_type = str(n->op_type());
        node.domain = str(n->domain());
        node.inputs = strs(n->inputs());
        node.outputs = strs(n->outputs());
        if (n->attributes())
          for (const auto* a : *n->attributes()) node.attrs.emplace(str(a->name()), attribute(a, depth));
        out->nodes.push_back(std::move(node));
      }
    }
    out->inputs = read_value_infos(g->inputs());
    out->outputs = read_value_infos(g->outputs());
    for (ValueInfo& vi : read_value_infos(g->value_info())) {
      std::string name = vi.name;
      out->value_info.emplace(std::move(name), std::move(vi));
    }
    if (g->initializers())
      for (uint32_t index : *g->initializers()) {
        const Tensor& t = tensor(index);  // checks the index
        out->initializers.emplace(str(root_->weights()->Get(index)->name()), t);
      }
    return out;
  }

 private:
  Attribute attribute(const pkg::Attribute* a, int depth) {
    Attribute out;
    if (a->kind() > uint8_t(AttrKind::Graphs)) fail("attribute '{}': bad kind {}", str(a->name()), a->kind());
    out.kind = AttrKind(a->kind());
    out.i = a->i();
    out.f = a->f();
    out.s = str(a->s());
    out.ints = vec(a->ints());
    out.floats = vec(a->floats());
    out.strings = strs(a->strings());
    if (out.kind == AttrKind::Tensor) {
      if (a->t() < 0) fail("attribute '{}': tensor missing", str(a->name()));
      out.t = tensor(uint32_t(a->t()));
    }
    if (a->tensors())
      for (uint32_t index : *a->tensors()) out.tensors.push_back(tensor(index));
    if (a->g()) out.g = graph(a->g(), depth + 1);
    if (out.kind == AttrKind::Graph && !out.g) fail("attribute '{}': subgraph missing", str(a->name()));
    if (a->graphs())
      for (const auto* g : *a->graphs()) out.graphs.push_back(graph(g, depth + 1));
    return out;
  }

  std::shared_ptr<Mapping> map_;
  const pkg::Package* root_;
  const uint8_t* data_;
  size_t data_size_;
  std::vector<Tensor> tensors_;
};

PackageMetadata read_metadata(const pkg::Package* root) {
  const pkg::Metadata* m = root->metadata();
  PackageMetadata out;
  out.format_version = m->format_version();
  out.producer = str(m->producer());
  out.device = str(m->device());
  out.arch = str(m->arch());
  out.precision = str(m->precision());
  out.inputs = read_value_infos(m->inputs());
  out.outputs = read_value_infos(m->outputs());
  out.source_model = str(m->source_model());
  out.created_unix = m->created_unix();
  auto blobs = [](const flatbuffers::Vector<flatbuffers::Offset<pkg::Blob>>* v) {
    std::vector<PackageBlob> list;
    if (v)
      for (const auto* b : *v) list.push_back({str(b->key()), vec(b->data())});
    return list;
  };
  out.device_code = blobs(root->device_code());
  out.algorithms = blobs(root->algorithms());
  if (root->extensions())
    for (const auto* e : *root->extensions()) {
      PackageExtension x{str(e->name()), str(e->digest()), {}, e->library() ? e->library()->size() : 0};
      if (e->ops())
        for (const auto* op : *e->ops()) x.ops.push_back(op->str());
      out.extensions.push_back(std::move(x));
    }
  return out;
}

}  // namespace

PackageMetadata read_package_metadata(const std::string& path) {
  std::string file = fs::path(path).filename().string();
  Opened o = open_package(path, file);
  try {
    return read_metadata(o.root);
  } catch (Error& e) {
    e.add_context("package '" + file + "'");
    throw;
  }
}

namespace {

// `device` null: no device check (for inspection).
std::shared_ptr<Model> load(const std::string& path, const Device* device_or_null, PackageMetadata* metadata) {
  std::string file = fs::path(path).filename().string();
  Opened o = open_package(path, file);
  const pkg::Metadata* meta = o.root->metadata();
  if (metadata) *metadata = read_metadata(o.root);
  Device device = device_or_null ? *device_or_null : Device::cpu();
  const std::string want_device = str(meta->device()), want_arch = str(meta->arch());
  const std::string have_device = device_kind(device);
  // The architecture is asked of the device after the model is read: that starts the GPU driver
  // (~0.1 s), which Backend::start_async may be doing on another thread meanwhile.
  auto check_target = [&](const std::string& have_arch) {
    if (!device_or_null || (want_device == have_device && want_arch == have_arch)) return;
    std::string have = have_device + (have_arch.empty() ? "" : " " + have_arch);
    if (device.type == DeviceType::CUDA && have_arch.empty()) have = "cuda (no CUDA device found)";
    fail("package '{}' was built for {} {}, this session runs on {}: convert the model again with --device {}",
         file, want_device, want_arch, have, have_device);
  };
  if (want_device != have_device) check_target(current_arch(device));
  std::shared_ptr<Model> model;
  try {
    Reader reader(o);
    const pkg::Model* pm = o.root->model();
    model = std::make_shared<Model>();
    model->name = file;
    model->ir_version = pm->ir_version();
    model->producer = str(pm->producer());
    if (pm->opsets())
      for (const auto* op : *pm->opsets()) model->opsets[str(op->domain())] = op->version();
    // The extension libraries the model's ops come from, loaded from the package's copies (one
    // already loaded, the same bytes, is used as it is).
    if (device_or_null && o.root->extensions())
      for (const auto* e : *o.root->extensions()) {
        const auto* lib = e->library();
        const ExtensionLibrary& loaded =
            extension::load_bytes(str(e->name()), lib ? std::vector<uint8_t>(lib->begin(), lib->end()) : std::vector<uint8_t>{});
        if (loaded.digest != str(e->digest()))
          fail("extension '{}': its library's digest is {}, the package records {}", str(e->name()), loaded.digest,
               str(e->digest()));
      }
    model->graph = reader.graph(pm->graph());
  } catch (Error& e) {
    e.add_context("package '" + file + "' is corrupted");
    throw;
  }
  if (!device_or_null) return model;
  check_target(current_arch(device));
  // The algorithms `ingot convert` measured and the code it generated: a real load hands them to
  // the backends.
  auto restore = [](const auto* blobs, tuning::Store& store) {
    if (!blobs) return;
    for (const auto* b : *blobs) {
      const auto* data = b->data();
      store.put(str(b->key()), data ? std::string(data->begin(), data->end()) : std::string());
    }
  };
  restore(o.root->algorithms(), tuning::algorithms());
  restore(o.root->device_code(), tuning::device_code());
  return model;
}

}  // namespace

std::shared_ptr<Model> load_package(const std::string& path, Device device) { return load(path, &device, nullptr); }

std::shared_ptr<Model> inspect_package(const std::string& path, PackageMetadata& metadata) {
  return load(path, nullptr, &metadata);
}

std::shared_ptr<Model> load_package(const std::string& path, const SessionOptions& options) {
  PackageMetadata metadata;
  auto model = load(path, &options.device, &metadata);
  const std::string& have = metadata.precision;
  if (options.precision != Precision::FP32) {
    if (have != precision_name(options.precision))
      fail("package '{}' was converted for precision {}, not {}: convert the model again with --precision {}",
           model->name, have, precision_name(options.precision), precision_name(options.precision));
  }
  return model;
}

}  // namespace ingot
