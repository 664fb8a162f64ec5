// The idx reader and the prefetching DataLoader (include/ingot/data.h).
#include <ingot/data.h>
#include <ingot/nn.h>
#include <zlib.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "core/strings.h"

namespace ingot::data {
namespace {

// Reads exactly n bytes (gzread reads plain files too); false at a clean end.
void read_exactly(gzFile f, void* out, size_t n, const std::string& path, const char* what) {
  char* p = static_cast<char*>(out);
  while (n > 0) {
    const unsigned chunk = unsigned(std::min<size_t>(n, 1u << 30));
    const int got = gzread(f, p, chunk);
    if (got <= 0) {
      int code = 0;
      const char* message = gzerror(f, &code);
      fail("{}: the file ends inside its {} ({})", path, what, code != Z_OK ? message : "truncated");
    }
    p += got;
    n -= size_t(got);
  }
}

}  // namespace

Tensor read_idx(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) fail("cannot open '{}'", path);
  struct Closer {
    gzFile f;
    ~Closer() { gzclose(f); }
  } closer{f};
  unsigned char magic[4];
  read_exactly(f, magic, 4, path, "magic number");
  if (magic[0] != 0 || magic[1] != 0) fail("{}: not an idx file (magic {:02x}{:02x}{:02x}{:02x})", path, magic[0], magic[1], magic[2], magic[3]);
  DType dt;
  switch (magic[2]) {
    case 0x08: dt = DType::UInt8; break;
    case 0x09: dt = DType::Int8; break;
    case 0x0B: dt = DType::Int16; break;
    case 0x0C: dt = DType::Int32; break;
    case 0x0D: dt = DType::Float32; break;
    case 0x0E: dt = DType::Float64; break;
    default: fail("{}: unknown idx element type 0x{:02x}", path, magic[2]);
  }
  const int dims = magic[3];
  if (dims < 1 || dims > 8) fail("{}: an idx file of {} dimensions", path, dims);
  Shape shape;
  for (int d = 0; d < dims; ++d) {
    unsigned char b[4];
    read_exactly(f, b, 4, path, "dimensions");
    shape.push_back((int64_t(b[0]) << 24) | (int64_t(b[1]) << 16) | (int64_t(b[2]) << 8) | int64_t(b[3]));
  }
  if (shape_numel(shape) > (int64_t(1) << 34)) fail("{}: {} elements is more than an idx reader takes", path, shape_numel(shape));
  Tensor t = Tensor::empty(dt, shape);
  read_exactly(f, t.raw_data(), t.nbytes(), path, "data");
  const size_t width = dtype_size(dt);  // big-endian on disk
  if (width > 1) {
    auto* p = static_cast<unsigned char*>(t.raw_data());
    for (size_t i = 0; i < t.nbytes(); i += width) std::reverse(p + i, p + i + width);
  }
  return t;
}

struct DataLoader::State {
  Tensor inputs, targets;
  LoaderOptions options;
  int64_t rows = 0;
  // The worker prepares batch `ready_index` of the current order while the caller trains.
  std::mutex mutex;
  std::condition_variable cv;
  std::thread worker;
  bool stop = false, want = false, have = false, in_flight = false;
  std::optional<Batch> ready;
  std::exception_ptr error;
  std::vector<int64_t> order;
  int64_t cursor = 0;  // the next batch the worker will make
  bool epoch_open = false;
  int64_t epoch = 0;   // the next epoch's number
  int64_t share = 0;   // rows per epoch of this rank (all rows when world_size is 1)

  int64_t batches() const {
    const int64_t b = options.batch_size;
    return options.drop_last ? share / b : (share + b - 1) / b;
  }
  Batch make(int64_t index) const {
    const int64_t b = options.batch_size, begin = index * b, end = std::min(share, begin + b);
    auto gather = [&](const Tensor& src) {
      Shape shape = src.shape();
      shape[0] = end - begin;
      Tensor out = Tensor::empty(src.dtype(), shape);
      const size_t row = src.nbytes() / size_t(std::max<int64_t>(src.dim(0), 1));
      for (int64_t i = begin; i < end; ++i)
        std::memcpy(static_cast<char*>(out.raw_data()) + size_t(i - begin) * row,
                    static_cast<const char*>(src.raw_data()) + size_t(order[size_t(i)]) * row, row);
      return out;
    };
    Batch batch{gather(inputs), gather(targets), index};
    if (options.transform) options.transform(batch.inputs, batch.targets);
    batch.inputs = batch.inputs.to(options.device);
    batch.targets = batch.targets.to(options.device);
    return batch;
  }
  void run() {
    std::unique_lock lock(mutex);
    while (true) {
      cv.wait(lock, [&] { return stop || want; });
      if (stop) return;
      want = false;
      const int64_t index = cursor++;
      lock.unlock();
      std::optional<Batch> b;
      std::exception_ptr e;
      try {
        b = make(index);
      } catch (...) {
        e = std::current_exception();
      }
      lock.lock();
      ready = std::move(b);
      error = e;
      have = true;
      cv.notify_all();
    }
  }
  void request() {  // caller holds mutex
    want = true;
    have = false;
    in_flight = true;
    cv.notify_all();
  }
  void new_epoch() {  // caller holds mutex; the worker is idle
    std::vector<int64_t> all(static_cast<size_t>(rows));
    std::iota(all.begin(), all.end(), int64_t(0));
    const int64_t world = options.world_size;
    if (options.shuffle) {
      // The ranks' shared order: seeded by (seed, epoch) through SplitMix64's mixing.
      uint64_t z = options.seed + 0x9e3779b97f4a7c15ull * uint64_t(epoch + 1);
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      std::mt19937_64 rng(world > 1 ? z ^ (z >> 31) : random_u64());
      std::shuffle(all.begin(), all.end(), rng);
    }
    ++epoch;
    if (world == 1) {
      order = std::move(all);
    } else {
      order.assign(size_t(share), 0);
      for (int64_t i = 0; i < share; ++i) {
        const int64_t k = options.rank + i * world;  // in the order padded by repeating its start
        order[size_t(i)] = all[size_t(k % rows)];
      }
    }
    cursor = 0;
    epoch_open = true;
  }
};

DataLoader::DataLoader(Tensor inputs, Tensor targets, LoaderOptions options) : state_(std::make_unique<State>()) {
  if (!inputs.defined() || !targets.defined() || inputs.rank() < 1 || targets.rank() < 1 || inputs.dim(0) != targets.dim(0))
    fail("DataLoader: inputs {} and targets {} must have the same number of rows", inputs.defined() ? inputs.describe() : "undefined",
         targets.defined() ? targets.describe() : "undefined");
  if (options.batch_size < 1) fail("DataLoader: batch_size must be >= 1, got {}", options.batch_size);
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size)
    fail("DataLoader: rank {} of world_size {}: expected world_size >= 1 and 0 <= rank < world_size", options.rank,
         options.world_size);
  State& s = *state_;
  s.inputs = inputs.to(Device::cpu());
  s.targets = targets.to(Device::cpu());
  s.options = std::move(options);
  s.rows = inputs.dim(0);
  const int64_t world = s.options.world_size;
  // Each rank's share: the rows over world_size, rounded up (the order padded) or, with drop_last,
  // down (cut).
  s.share = world == 1 ? s.rows : s.options.drop_last ? s.rows / world : (s.rows + world - 1) / world;
  if (s.rows == 0) s.share = 0;
  s.worker = std::thread([&s] { s.run(); });
}

DataLoader::~DataLoader() {
  {
    std::lock_guard lock(state_->mutex);
    state_->stop = true;
    state_->cv.notify_all();
  }
  state_->worker.join();
}

int64_t DataLoader::batches_per_epoch() const { return state_->batches(); }
int64_t DataLoader::size() const { return state_->share; }

void DataLoader::set_epoch(int64_t epoch) {
  std::lock_guard lock(state_->mutex);
  state_->epoch = epoch;
}

std::optional<Batch> DataLoader::next() {
  State& s = *state_;
  std::unique_lock lock(s.mutex);
  if (!s.epoch_open) {
    s.new_epoch();
    if (s.batches() == 0) {
      s.epoch_open = false;
      return std::nullopt;
    }
    s.request();
  } else if (!s.in_flight) {  // the epoch's batches were all handed out
    s.epoch_open = false;
    return std::nullopt;
  }
  s.cv.wait(lock, [&] { return s.have; });
  s.in_flight = false;
  if (s.error) {
    std::exception_ptr e = s.error;
    s.error = nullptr;
    s.epoch_open = false;
    std::rethrow_exception(e);
  }
  if (!s.ready) return std::nullopt;
  Batch b = std::move(*s.ready);
  s.ready.reset();
  if (s.cursor < s.batches()) s.request();  // the next one is prepared while this one trains
  return b;
}

}  // namespace ingot::data
